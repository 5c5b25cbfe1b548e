"""Balance-constrained excitation of a biped standing on one sole (single support).

Every joint follows a Fourier series; the base sole stays flat on its board (the base frame), the other sole is
kept `lift` m above the ground at every sample. The identified rows are the base wrench (Fz, Mx, My) the stance
board measures; the ZMP computed with the guessed parameters stays inside the stance sole by a margin — one linear
inequality in (Fz, Mx, My) per sole edge and sample — and the joint torques (base sole fixed) within their limits.
Exact derivatives: the wrench, the other sole's height and the torques are small SX functions mapped over the
grid (`excitation._mapped_grid`), the limits one constant sparse matrix (`excitation.linear_limit_rows`).
"""

from __future__ import annotations

import casadi as ca
import numpy as np
from scipy import sparse
from shapely.geometry import Polygon

from formats.errors import DataError
from robots import dynamics as dyn
from robots.base_params import cached_dynamic_base
from robots.kinematics import site_pose_sym
from robots.stance import other_site
from robots.stance_spec import resolve_base
from robots.tree import RobotModel
from trajectories.balance_excitation import ZMP_BUFFER, halfplanes, zmp_spec
from trajectories.excitation import (
    ExcitationSettings,
    _limits,
    _mapped_grid,
    clearance_rows,
    fourier_problem,
    linear_limit_rows,
)
from trajectories.fourier import FourierTrajectory, basis

LIFT_BUFFER = 0.005  # m added to the lift at the grid samples: the sole moves between them


class SingleSupportTrajectory:
    """A Fourier trajectory of every joint, executed standing on the `base` sole with the `other` sole lifted."""

    def __init__(self, motion: FourierTrajectory, base: str, other: str, lift: float) -> None:
        self.motion, self.base, self.other, self.lift = motion, base, other, float(lift)
        self.duration = motion.duration

    @property
    def n(self) -> int:
        return self.motion.n

    def sample(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.motion.sample(t)

    def to_json(self) -> dict:
        return {"kind": "single-support", "base": self.base, "other_site": self.other, "lift_m": self.lift,
                "motion": self.motion.to_json()}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict) -> SingleSupportTrajectory:
        try:
            lift = float(d["lift_m"])
            if not (np.isfinite(lift) and lift >= 0):
                raise ValueError(f"lift_m {lift!r} must be ≥ 0")
            return cls(FourierTrajectory.from_json(d["motion"]), str(d["base"]), str(d["other_site"]), lift)
        except KeyError as exc:
            raise DataError(f"malformed single-support trajectory (missing {exc})") from None
        except (TypeError, ValueError) as exc:
            raise DataError(f"malformed single-support trajectory ({exc})") from None


def stance_polygon(model: RobotModel, base: str) -> Polygon:
    """The base sole's contact rectangle in the base frame (the sole's own frame: it does not move)."""
    site = model.base_site(base)
    if site.rect is None:
        raise DataError(f"{model.name!r}: base {base!r} has no contact rectangle to stand on")
    x0, x1, y0, y1 = site.rect
    return Polygon([(x0, y0), (x1, y0), (x1, y1), (x0, y1)])


def sole_heights_function(model: RobotModel, base: str, other: str, params: str) -> ca.Function:
    """(q, q̇, q̈) → heights (4) of the other sole's corners above the base sole's plane."""
    q, qd, qdd = (ca.SX.sym(nm, model.nq) for nm in ("q", "qd", "qdd"))
    R, p = site_pose_sym(model, q, params, other, base)
    site = model.site(other)
    if site.rect is None:
        raise DataError(f"{model.name!r}: the other sole {other!r} has no contact rectangle")
    x0, x1, y0, y1 = site.rect
    z = [(p + R @ ca.DM([x, y, 0.0]))[2] for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1))]
    return ca.Function("sole_heights", [q, qd, qdd], [ca.vertcat(*z)])


def design_single_support_problem(
    model: RobotModel, settings: ExcitationSettings, lift: float, torque_rows: bool = True
) -> dict:
    """The NLP of a single-support excitation (same keys as `excitation.design_problem`, plus the polygon)."""
    settings.validate()
    base = resolve_base(model, settings.base)
    other = other_site(model, base)
    params = settings.params or next(iter(model.params))
    spec = zmp_spec(base)
    db = cached_dynamic_base(model, spec, settings.simplified, "free")
    L, n, K = settings.harmonics, model.nq, settings.samples
    bases = basis(np.arange(K) * settings.period / K, L, 2 * np.pi / settings.period)
    P, V, A = bases
    m = 1 + 2 * L
    x = ca.MX.sym("x", m * n)
    X = ca.reshape(x, m, n)
    Q, Qd, Qdd = ca.DM(P) @ X, ca.DM(V) @ X, ca.DM(A) @ X
    qs, qds, qdds = (ca.SX.sym(nm, n) for nm in ("q", "qd", "qdd"))
    Wsx = dyn.base_wrench_regressor_function(model, base, params)(qs, qds, qdds)[[2, 3, 4], :]  # fz, mx, my
    phi = ca.DM(dyn.standard_parameters(model, params))
    rows = ca.Function("rows", [qs, qds, qdds], [Wsx[:, db.independent]]).map(K)
    r = len(db.independent)
    W = ca.reshape(rows(Q.T, Qd.T, Qdd.T).T, r, 3 * K).T  # 3K × r (rows fz, mx, my, each by sample)
    w_node = _mapped_grid("wrench", ca.Function("wrench", [qs, qds, qdds], [Wsx @ phi]), bases)
    w3 = w_node(x)  # fz at every sample, then mx, then my
    Y = dyn.torque_regressor_function(model, base, params)(qs, qds, qdds)
    tau_node = _mapped_grid("torques", ca.Function("torque", [qs, qds, qdds], [Y @ phi]), bases)
    h_node = _mapped_grid("sole_heights", sole_heights_function(model, base, other, params), bases)
    poly = stance_polygon(model, base)
    N, d = halfplanes(poly)
    margin = settings.zmp_margin + ZMP_BUFFER
    if poly.exterior.distance(poly.centroid) <= margin:
        raise DataError(
            f"a ZMP margin of {settings.zmp_margin * 1000:.0f} mm leaves no room on the {base!r} sole"
        )
    # edge e, sample k: N_e · (−My, Mx) − (d_e − margin) Fz ≤ 0, a constant matrix times w3
    eye = sparse.identity(K)
    Z = sparse.hstack([sparse.kron(-(d - margin)[:, None], eye), sparse.kron(N[:, [1]], eye),
                       sparse.kron(-N[:, [0]], eye)]).tocsc()  # fmt: skip
    _, _, _, _, tmax = _limits(model, settings)
    G, lbg, ubg = linear_limit_rows(model, settings)
    g = [ca.mtimes(ca.DM(G), x), ca.mtimes(ca.DM(Z), w3), w3[:K], h_node(x)]
    lbg += [np.full(Z.shape[0], -np.inf), np.zeros(K), np.full(4 * K, lift + LIFT_BUFFER)]
    ubg += [np.zeros(Z.shape[0]), np.full(K, np.inf), np.full(4 * K, np.inf)]
    tau = tau_node(x)
    if torque_rows and np.all(np.isfinite(tmax)):
        g.append(tau)
        lbg.append(np.repeat(-tmax, K))
        ubg.append(np.repeat(tmax, K))
    nodes = [w_node, tau_node, h_node] + clearance_rows(model, settings, params, bases, x, g, lbg, ubg)
    return fourier_problem(x, W, tau, g, lbg, ubg, db, _limits(model, settings), params, base, nodes,
                           other=other, polygon=poly)  # fmt: skip


def nominal_posture(model: RobotModel, base: str, params: str, lift: float, margin: float) -> np.ndarray:
    """The posture nearest mid-range that stands still on the base sole: CoM ≥ `margin` inside it, the other
    sole's corners ≥ 2·`lift` above the ground (room for the excitation around it)."""
    q = ca.SX.sym("q", model.nq)
    z = ca.SX.zeros(model.nq)
    w = dyn.base_wrench_regressor_function(model, base, params)(q, z, z)[[2, 3, 4], :] @ ca.DM(
        dyn.standard_parameters(model, params)
    )
    N, d = halfplanes(stance_polygon(model, base))
    heights = sole_heights_function(model, base, other_site(model, base), params)(q, z, z)
    lo, hi = model.lower, model.upper
    mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2, 0.0)
    g = ca.vertcat(ca.DM(N) @ ca.vertcat(-w[2], w[1]) - ca.DM(d - margin) * w[0], heights)
    solver = ca.nlpsol("single_support_nominal", "ipopt", {"x": q, "f": ca.sumsqr(q - mid), "g": g},
                       {"ipopt.print_level": 0, "print_time": False, "ipopt.sb": "yes"})  # fmt: skip
    sol = solver(x0=mid, lbx=np.where(np.isfinite(lo), lo, -np.pi), ubx=np.where(np.isfinite(hi), hi, np.pi),
                 lbg=np.r_[np.full(len(d), -np.inf), np.full(4, 2 * lift)],
                 ubg=np.r_[np.zeros(len(d)), np.full(4, np.inf)])  # fmt: skip
    if not solver.stats()["success"]:
        raise DataError(f"{model.name!r} finds no posture standing on {base!r} with the other sole lifted")
    return np.asarray(sol["x"]).ravel()


def optimise_single_support(
    model: RobotModel, settings: ExcitationSettings, seed: int = 0, lift: float = 0.02
):
    """Design one single-support excitation from small random harmonics around the nominal posture."""
    import time

    from trajectories.excitation import ExcitationResult, solve_lazy_torques
    from trajectories.verify import check_trajectory

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    base = resolve_base(model, settings.base)
    params = settings.params or next(iter(model.params))
    lo, hi, _, _, _ = _limits(model, settings)
    q0 = np.clip(nominal_posture(model, base, params, lift, settings.zmp_margin + ZMP_BUFFER), lo, hi)
    L, n = settings.harmonics, model.nq
    a = rng.uniform(-1, 1, (n, L)) * settings.amplitude / L
    b = rng.uniform(-1, 1, (n, L)) * settings.amplitude / L
    a -= a.mean(axis=1, keepdims=True)  # at rest at t = 0 (as balance_excitation.balance_start)
    ls = np.arange(1, L + 1)
    b -= np.outer((b * ls).sum(axis=1), ls) / (ls**2).sum()
    start = FourierTrajectory(settings.period, settings.duration, q0, a, b)
    x0 = start.coefficients().reshape(-1, order="F")
    prob, x, iterations, status, stages = solve_lazy_torques(
        lambda rows: design_single_support_problem(model, settings, lift, torque_rows=rows), settings, x0
    )
    m = 1 + 2 * L
    motion = FourierTrajectory.from_coefficients(
        x.reshape(m, n, order="F"), settings.period, settings.duration
    )
    traj = SingleSupportTrajectory(motion, base, prob["other"], lift)
    from robots.conditioning import kappa, normalised_columns

    W = np.asarray(prob["W_fun"](x))
    Wn, _ = normalised_columns(W)
    sv = np.linalg.svd(Wn, compute_uv=False)
    result = ExcitationResult(traj, kappa(W), kappa(Wn), float(2 * np.sum(np.log(sv))), iterations,
                              time.perf_counter() - t0, status, prob["base"].symbols, base=base, params=params,
                              stages=stages)  # fmt: skip
    check = check_trajectory(
        model, traj, base, params, 0.002, settings.acceleration_default, settings.simplified,
        zmp_margin=settings.zmp_margin,
        collision_margin=settings.collision_margin if settings.self_collision else None,
    )  # fmt: skip
    result.verification = check.to_dict()
    return result
