"""Double support as a closed chain: the base sole on the ground, the other sole held at a fixed pose.

The joints on the path between the two soles split into independent ones (nearer the base) and the six nearest
the other sole, which follow from the foot constraint c(q) = 0 (position and orientation of the other sole):
q_D by Newton's method, q̇_D from C q̇ = 0 and q̈_D from C q̈ + (∂(C q̇)/∂q) q̇ = 0, with C = ∂c/∂q exact from CasADi.
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from formats.errors import DataError
from robots.kinematics import site_pose, site_pose_sym
from robots.memo import per_model
from robots.stance import check_posture, other_site, other_sole_problems, random_double_support
from robots.tree import RobotModel
from trajectories.fourier import FourierTrajectory
from trajectories.parametrisation import joint_trajectory_from_json
from trajectories.spline import SplineTrajectory


@dataclass(frozen=True)
class ClosedChain:
    """Which coordinates are independent / dependent and where the other sole is held (base frame)."""

    base: str
    other: str
    params: str
    independent: tuple[int, ...]
    dependent: tuple[int, ...]
    target_R: np.ndarray
    target_p: np.ndarray
    nominal: np.ndarray

    def ground_pose(self) -> np.ndarray:
        """Where the held sole stands on the ground in the base sole's frame: (x, y, yaw) of its target pose (m, m,
        rad), as `robots.stance.other_pose` gives it for a posture of the chain."""
        R, p = np.asarray(self.target_R, dtype=float), np.asarray(self.target_p, dtype=float)
        return np.array([p[0], p[1], np.arctan2(R[1, 0], R[0, 0])])

    def to_json(self) -> dict:
        return {
            "base": self.base,
            "other_site": self.other,
            "params": self.params,
            "independent": list(self.independent),
            "dependent": list(self.dependent),
            "target_R": np.asarray(self.target_R).tolist(),
            "target_p": np.asarray(self.target_p).tolist(),
            "nominal": np.asarray(self.nominal).tolist(),
        }

    @classmethod
    def from_json(cls, d: dict) -> ClosedChain:
        try:
            return cls(
                d["base"],
                d["other_site"],
                d["params"],
                tuple(int(i) for i in d["independent"]),
                tuple(int(i) for i in d["dependent"]),
                np.asarray(d["target_R"], dtype=float).reshape(3, 3),
                np.asarray(d["target_p"], dtype=float).reshape(3),
                np.asarray(d["nominal"], dtype=float),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"malformed closed-chain description ({exc})") from None


def chain_coordinates(model: RobotModel, base: str) -> tuple[list[int], str]:
    """Coordinates on the path from the base sole to the other sole, base side first; the other site."""
    other = other_site(model, base)
    a = model.joint_path(model.base_site(base).link)
    b = model.joint_path(model.site(other).link)
    shared = 0
    while shared < min(len(a), len(b)) and a[shared] == b[shared]:
        shared += 1
    path = a[shared:][::-1] + b[shared:]
    coords = []
    for j in path:
        cm = model.coordinate_map(j)
        if cm is not None and cm[0] not in coords:
            coords.append(cm[0])
    return coords, other


def _vee_error(R: ca.SX, Rt) -> ca.SX:
    E = Rt.T @ R
    return 0.5 * ca.vertcat(E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1])


def foot_error(model: RobotModel, q, params: str, other: str, base: str, Rt, pt):
    """c(q): the other sole's position and orientation error from rotation Rt and position pt in the base sole's
    frame — constants (DM), or symbols for functions shared by every placement."""
    R, p = site_pose_sym(model, q, params, other, base)
    return ca.vertcat(p - pt, _vee_error(R, Rt))


def chain_rates(c, q, qd, qdd) -> tuple:
    """(ċ, c̈) = (C q̇, C q̈ + (∂(C q̇)/∂q) q̇) of c(q) by directional derivatives: no Jacobian is built, and the
    expression (and its own Jacobian) stays 7× smaller than through C = ∂c/∂q."""
    cd = ca.jtimes(c, q, qd)
    return cd, ca.jtimes(cd, q, qd) + ca.jtimes(c, q, qdd)


@per_model
def constraint_functions(model: RobotModel, chain_key: tuple) -> tuple[ca.Function, ca.Function]:
    """c(q) → (c, C) and (q, q̇) → bias = (∂(C q̇)/∂q) q̇, for the chain given by its JSON-able key."""
    base, other, params, Rt, pt = chain_key
    q = ca.SX.sym("q", model.nq)
    qd = ca.SX.sym("qd", model.nq)
    c = foot_error(model, q, params, other, base, ca.DM(np.asarray(Rt)), ca.DM(np.asarray(pt)))
    bias = ca.jtimes(ca.jtimes(c, q, qd), q, qd)
    return (
        ca.Function("foot_constraint", [q], [c, ca.jacobian(c, q)]),
        ca.Function("foot_bias", [q, qd], [bias]),
    )


def chain_key(chain: ClosedChain) -> tuple:
    """The chain as a hashable key of what its functions depend on (sole placement to 1e-15)."""
    return (
        chain.base,
        chain.other,
        chain.params,
        tuple(map(tuple, np.round(chain.target_R, 15))),
        tuple(np.round(chain.target_p, 15)),
    )


def functions(model: RobotModel, chain: ClosedChain) -> tuple[ca.Function, ca.Function]:
    return constraint_functions(model, chain_key(chain))


def chain_split(model: RobotModel, base: str) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """(other site, independent, dependent coordinates) of the closed chain standing on `base`: the dependent
    ones are the six nearest the other sole."""
    coords, other = chain_coordinates(model, base)
    if len(coords) < 7:
        raise DataError(
            f"the chain between the soles has {len(coords)} joints: double-support motion needs ≥ 7"
        )
    dep = tuple(coords[-6:])
    return other, tuple(k for k in range(model.nq) if k not in dep), dep


def placed_chain(
    model: RobotModel, base: str, params: str, pose: np.ndarray, q: np.ndarray, margin: float = 0.0
) -> ClosedChain:
    """The closed chain standing on `base` with the other sole flat at ground pose (x, y, yaw) in the base sole's
    frame, its nominal posture `q` with the dependent coordinates solved onto that pose (split as `make_chain`).
    The nominal must pass the static double-support check (`robots.stance.check_posture`: limits, feet apart,
    CoP `margin` m inside the support polygon) and the placement check (`other_sole_problems`), else DataError."""
    other, ind, dep = chain_split(model, base)
    x, y, yaw = (float(v) for v in pose)
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    chain = ClosedChain(base, other, params, ind, dep, R, np.array([x, y, 0.0]), np.asarray(q, dtype=float))
    nominal = solve_dependent(model, chain, np.asarray(q, dtype=float)[list(ind)], q)[0]
    problems = check_posture(model, nominal, params, base, margin, pose=np.array([x, y, yaw])).issues
    problems += other_sole_problems(model, base, np.array([x, y, yaw]))
    if problems:
        raise DataError("; ".join(problems))
    return ClosedChain(base, other, params, ind, dep, R, np.array([x, y, 0.0]), nominal)


def make_chain(
    model: RobotModel,
    base: str,
    params: str,
    rng: np.random.Generator,
    candidates: int = 60,
    margin: float = 0.02,
) -> ClosedChain:
    """A nominal double-support posture (the best-conditioned closed chain among random balanced postures) and
    the other sole's pose there; the dependent coordinates are the six nearest the other sole."""
    other, ind, dep = chain_split(model, base)
    qs = random_double_support(model, candidates, rng, params=params, base=base, margin=margin)
    # prefer placements near the one at the zero posture (feet side by side for the usual biped description),
    # among the well-conditioned chains (σ_min of the dependent block ≥ half the best)
    R0, p0 = site_pose(model, np.zeros(model.nq), params, other, base)
    chains, sig, dist = [], [], []
    for q in qs:
        R, p = site_pose(model, q, params, other, base)
        chain = ClosedChain(base, other, params, ind, dep, R, p, q)
        _, C = functions(model, chain)[0](q)
        chains.append(chain)
        sig.append(np.linalg.svd(np.asarray(C)[:, list(dep)], compute_uv=False)[-1])
        yaw = np.arctan2(R[1, 0], R[0, 0]) - np.arctan2(R0[1, 0], R0[0, 0])
        dist.append(np.linalg.norm(p[:2] - p0[:2]) + 0.1 * abs(np.arctan2(np.sin(yaw), np.cos(yaw))))
    sig, dist = np.array(sig), np.array(dist)
    # the stance rules `plan check` and the run hold the plan to: the description's placement box and feet gap
    allowed = np.array([not other_sole_problems(model, base, c.ground_pose()) for c in chains])
    ok = np.flatnonzero((sig >= 0.5 * sig.max()) & allowed)
    if not len(ok):
        raise DataError(
            f"none of {len(qs)} balanced double-support postures well conditioned for a closed chain puts the other "
            "sole inside the description's [stance] placement box and feet gap"
        )
    return chains[int(ok[np.argmin(dist[ok])])]


@per_model
def _mapped_constraint(model: RobotModel, key: tuple, n: int) -> ca.Function:
    """The chain's c(q) → (c, C) mapped over n samples, made once per size (`solve_along` asks for CHUNK again and
    again)."""
    return constraint_functions(model, key)[0].map(n)


def solve_dependent(
    model: RobotModel, chain: ClosedChain, qI: np.ndarray, guess: np.ndarray | None = None, tol: float = 1e-10
) -> np.ndarray:
    """Full postures (B, nq) with the dependent coordinates solving the foot constraint (batched Newton)."""
    qI = np.atleast_2d(qI)
    q = (
        np.tile(chain.nominal, (qI.shape[0], 1))
        if guess is None
        else np.array(np.atleast_2d(guess), dtype=float)
    )
    ind, dep = list(chain.independent), list(chain.dependent)
    q[:, ind] = qI
    fc = _mapped_constraint(model, chain_key(chain), qI.shape[0])
    for _ in range(100):
        c, C = fc(q.T)
        c = np.asarray(c).T  # (B, 6)
        C = np.asarray(C).reshape(6, qI.shape[0], model.nq).transpose(1, 0, 2)
        if np.abs(c).max() < tol:
            return q
        dq = np.linalg.solve(C[:, :, dep], c[..., None])[..., 0]
        norm = np.linalg.norm(dq, axis=1, keepdims=True)
        q[:, dep] -= dq * np.minimum(1.0, 0.3 / np.maximum(norm, 1e-300))  # damped: stay on the same branch
    raise DataError(
        f"the other sole cannot reach its pose (residual {np.abs(c).max():.2e}): posture out of reach"
    )


def dependent_rates(
    model: RobotModel, chain: ClosedChain, q: np.ndarray, qdI: np.ndarray, qddI: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Full q̇, q̈ (B, nq) given the independent ones, from the velocity and acceleration constraints."""
    B = q.shape[0]
    fc, fb = functions(model, chain)
    ind, dep = list(chain.independent), list(chain.dependent)
    _, C = fc.map(B)(q.T)
    C = np.asarray(C).reshape(6, B, model.nq).transpose(1, 0, 2)
    qd = np.zeros_like(q)
    qd[:, ind] = qdI
    qd[:, dep] = -np.linalg.solve(C[:, :, dep], np.einsum("bij,bj->bi", C[:, :, ind], qdI)[..., None])[..., 0]
    bias = np.asarray(fb.map(B)(q.T, qd.T)).T
    qdd = np.zeros_like(q)
    qdd[:, ind] = qddI
    rhs = np.einsum("bij,bj->bi", C[:, :, ind], qddI) + bias
    qdd[:, dep] = -np.linalg.solve(C[:, :, dep], rhs[..., None])[..., 0]
    return qd, qdd


CHUNK = 100  # samples solved together by Newton, warm-started along the path from the samples before them
EXTRAPOLATE_RAD = 0.05  # the farthest a warm start is carried on at the last samples' rate (else held)


def solve_along(
    model: RobotModel, chain: ClosedChain, qI: np.ndarray, x: np.ndarray, guess: np.ndarray | None = None
) -> np.ndarray:
    """`solve_dependent` for postures along a path (their abscissae x: times, or a path parameter), CHUNK at a
    time: the first from `guess` (None: the chain's nominal posture), each later one carried on at the rate of the
    last two solved (held at the last beyond EXTRAPOLATE_RAD, so a sparse grid cannot throw Newton onto another
    branch)."""
    x = np.atleast_1d(np.asarray(x, dtype=float))
    q = np.empty((len(qI), model.nq))
    for s in range(0, len(qI), CHUNK):
        sl = slice(s, s + CHUNK)
        n = len(x[sl])
        if s == 0:
            g = None if guess is None else np.tile(np.asarray(guess, dtype=float), (n, 1))
        else:
            g = np.tile(q[s - 1], (n, 1))
            if s >= 2 and x[s - 1] != x[s - 2]:
                step = np.outer(x[sl] - x[s - 1], (q[s - 1] - q[s - 2]) / (x[s - 1] - x[s - 2]))
                if np.abs(step).max() <= EXTRAPOLATE_RAD:
                    g += step
        q[sl] = solve_dependent(model, chain, qI[sl], g)
    return q


class ClosedChainTrajectory:
    """Independent coordinates as a Fourier series or a spline; the dependent ones solved at each sample time."""

    def __init__(
        self, model: RobotModel, chain: ClosedChain, independent: FourierTrajectory | SplineTrajectory
    ):
        if independent.n != len(chain.independent):
            raise DataError(
                f"closed chain: {independent.n} independent trajectories for {len(chain.independent)} coordinates"
            )
        self.model, self.chain, self.independent = model, chain, independent
        self.duration = independent.duration

    @property
    def n(self) -> int:
        return self.model.nq

    def sample(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        qI, qdI, qddI = self.independent.sample(t)
        q = solve_along(self.model, self.chain, qI, t)
        qd, qdd = dependent_rates(self.model, self.chain, q, qdI, qddI)
        return q, qd, qdd

    def to_json(self) -> dict:
        return {
            "kind": "closed-chain",
            "chain": self.chain.to_json(),
            "independent": self.independent.to_json(),
        }

    @classmethod
    def from_json(cls, d: dict, model: RobotModel) -> ClosedChainTrajectory:
        try:
            return cls(model, ClosedChain.from_json(d["chain"]), joint_trajectory_from_json(d["independent"]))
        except KeyError as exc:
            raise DataError(f"malformed closed-chain trajectory (missing {exc})") from None
