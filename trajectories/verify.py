"""Re-verification of a trajectory on a fine grid, independent of the optimiser's expressions: limits from the
robot description, torques from numpy RNEA with the guessed parameters, κ of the stacked base regressor."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace

import numpy as np

from formats.errors import DataError
from robots import dynamics as dyn
from robots.base_params import RegressorSpec, cached_dynamic_base, evaluate
from robots.conditioning import kappa, normalised_columns
from robots.joint_limits import joint_limits
from robots.motion_class import standing_base
from robots.tree import RobotModel
from trajectories.parametrisation import Trajectory
from trajectories.retighten import SHARE_TOLERANCE

DEFAULT_ACCELERATION = 20.0  # rad/s², where the robot description gives no acceleration limit
# rad/s²: q̈ at a plan's ends (designs set it to 0 exactly; IPOPT's tolerance leaves ~1e-8)
REST_ACC_TOL = 1e-4
REST_TOL_RAD = (
    1e-5  # a design's start/end may leave its rest posture by IPOPT's constraint tolerance, not more
)


@dataclass
class TrajectoryCheck:
    """Worst ratios to the limits over the grid (≤ 1 is within), κ raw and column-scaled; the position margin is
    in its joint's unit (`min_position_margin_unit`: rad, or m for a prismatic joint; inf where no joint has a
    position limit) — named `_rad` for the plan files and JSON that read it."""

    grid_points: int
    dt: float
    min_position_margin_rad: float
    velocity_ratio: float
    acceleration_ratio: float
    torque_ratio: float | None
    starts_at_rest: bool
    ends_at_rest: bool
    kappa: float
    kappa_scaled: float
    problems: list[str] = field(default_factory=list)
    min_zmp_margin_m: float | None = None  # standing robots: ZMP distance inside the support polygon
    max_foot_drift_m: float | None = None  # closed chains: the held sole's largest deviation from its pose
    load_share_range: tuple[float, float] | None = None  # double support: the other sole's lever-rule share
    min_sole_lift_m: float | None = None  # single support: the lifted sole's lowest corner above the ground
    max_sole_height_m: float | None = None  # ... its highest corner above the ground
    max_sole_tilt_rad: float | None = None  # ... its plane's largest tilt from the ground's
    min_sole_apart_m: float | None = None  # ... its footprint's distance from the stance sole (0: over it)
    min_self_clearance_m: float | None = None  # robots with collision geometry: closest approach of two links
    closest_links: str | None = None  # the pair of links at that approach
    # self-collision: "checked", "no collision geometry" (nothing to check), "no link pair" (geometry, but no pair
    # of links that can meet), "geometry unavailable" (a collision mesh cannot be loaded), or None (not asked)
    self_collision: str | None = None
    self_collision_note: str | None = None  # why it is not checked, in words (None when checked or not asked)
    # the joint at the smallest position margin (None: no joint has a position limit)
    min_position_margin_joint: str | None = None
    min_position_margin_unit: str = "rad"  # its unit: rad, or m for a prismatic joint
    # base parameters (ϑk, the base's order) this motion alone does not excite: numerically dependent columns of
    # its regressor; not a problem (a design completing prior runs may leave them to those), but it cannot
    # identify them alone
    unexcited: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return asdict(self) | {"ok": self.ok}


def acceleration_limits(model: RobotModel, default: float = DEFAULT_ACCELERATION) -> np.ndarray:
    """Per-joint acceleration limits (rad/s²): the description's, else `default`."""
    a = np.asarray(model.acceleration_limit, dtype=float)
    return np.where(np.isfinite(a), a, default)


def sample_grid(traj: Trajectory, dt: float) -> np.ndarray:
    """Times covering the whole trajectory at step `dt` (s), ending exactly at its duration."""
    n = max(2, int(np.ceil(traj.duration / dt)) + 1)
    return np.linspace(0.0, traj.duration, n)


def check_trajectory(
    model: RobotModel,
    traj: Trajectory,
    base: str,
    params: str,
    dt: float = 0.001,
    acceleration_default: float = DEFAULT_ACCELERATION,
    simplified: bool = False,
    zmp_margin: float = 0.0,
    collision_margin: float | None = 0.0,
    load_share: float = 0.0,
    rest_posture: np.ndarray | None = None,
) -> TrajectoryCheck:
    """Every limit of the description checked at step `dt` (s) over the whole trajectory; for a double-support
    (closed-chain) trajectory also the held sole and the ZMP inside the support polygon (shapely); link
    clearances ≥ `collision_margin` (m) where the URDF has collision geometry (None: not checked); with
    `rest_posture` (rad), the first and last samples in it."""
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.single_support import SingleSupportTrajectory

    chain = traj.chain if isinstance(traj, ClosedChainTrajectory) else None
    single = traj if isinstance(traj, SingleSupportTrajectory) else None
    if traj.n != model.nq:
        raise DataError(f"trajectory has {traj.n} joints, robot {model.name!r} has {model.nq}")
    t = sample_grid(traj, dt)
    try:
        q, qd, qdd = traj.sample(t)
    except DataError as exc:  # a closed chain that cannot close somewhere along the way
        return TrajectoryCheck(len(t), float(t[1] - t[0]), float("nan"), float("nan"), float("nan"), None,
                               False, False, float("inf"), float("inf"), [str(exc)])  # fmt: skip
    problems: list[str] = []
    lim = joint_limits(model)  # the coordinates and the mimic joints with limits of their own
    qj = lim.positions(q)
    per_joint = np.minimum(qj - lim.lower, lim.upper - qj).min(axis=0)  # each joint's least margin
    at = int(np.argmin(per_joint))
    margin = float(per_joint[at])
    margin_joint, margin_unit = (lim.names[at], lim.unit(at)) if np.isfinite(margin) else (None, "rad")
    if margin < -1e-9:
        problems.append(f"joint {lim.names[at]} leaves its position range by {-margin:.4g} {margin_unit}")
    vr = lim.velocity_ratios(qd)  # never NaN: a zero limit shows a moving joint as inf×
    ar = np.abs(qdd) / acceleration_limits(model, acceleration_default)
    # velocity: the coordinates and the limited mimic joints; acceleration: the coordinates (lim's first rows)
    for name, r, per, names in (
        ("velocity", vr, "/s", lim.names),
        ("acceleration", ar, "/s²", model.joint_names),
    ):
        if r.max() > 1 + 1e-6:
            j = int(np.argmax(r.max(axis=0)))
            unit = lim.unit(j) + per
            problems.append(f"joint {names[j]} moves although its {name} limit is 0 {unit}" if np.isinf(r.max())
                            else f"joint {names[j]} exceeds its {name} limit ({r.max():.3f}× the limit in {unit})")  # fmt: skip
    tmax = model.effort_limit
    tr = None
    zmp_min = drift = None
    for msg in _coupled(model, q):
        problems.append(msg)
    lifted = None
    if chain is not None:
        zmp_min, drift, share = double_support_balance(
            model, chain, q, qd, qdd, params, problems, zmp_margin, load_share
        )
        if np.all(np.isfinite(tmax)):
            tr = _split_torques(model, chain, t, q, qd, qdd, params, tmax, problems)
    else:
        if single is not None:
            zmp_min, lifted = _single_support(model, single, q, qd, qdd, params, problems, zmp_margin)
            base = single.base
        if np.all(np.isfinite(tmax)):
            tr = _torques(model, q, qd, qdd, params, base, tmax, problems)
    clear = closest = collided = note = None
    if collision_margin is not None:
        clear, closest, collided, note = _self_collision(model, q, params, collision_margin, problems)
    v0, a0 = (np.abs(x[0]).max() for x in (qd, qdd))
    v1, a1 = (np.abs(x[-1]).max() for x in (qd, qdd))
    starts, ends = bool(v0 < 1e-6 and a0 < REST_ACC_TOL), bool(v1 < 1e-6 and a1 < REST_ACC_TOL)
    for where, v, a in (("start", v0, a0), ("end", v1, a1)):
        if v >= 1e-6:
            problems.append(f"does not {where} at rest (|q̇| = {v:.3g} rad/s)")
        elif a >= REST_ACC_TOL:  # a spline written by hand: q̈ at its ends is free unless the design sets it
            problems.append(f"does not {where} at rest (|q̈| = {a:.3g} rad/s²: a step of torque "
                            f"{'opens' if where == 'start' else 'closes'} the run)")  # fmt: skip
    if rest_posture is not None:
        problems += _rest_posture_problems(model, q, np.asarray(rest_posture, dtype=float))
    every = max(1, len(t) // 2000)  # κ from about 2000 of the samples checked
    spec, motion = regressor_spec(traj, base)
    W = base_regressor_rows(model, spec, motion, simplified, q[::every], qd[::every], qdd[::every], chain)
    return TrajectoryCheck(
        min_zmp_margin_m=zmp_min,
        max_foot_drift_m=drift,
        min_sole_lift_m=None if lifted is None else lifted[0],
        max_sole_height_m=None if lifted is None else lifted[1],
        max_sole_tilt_rad=None if lifted is None else lifted[2],
        min_sole_apart_m=None if lifted is None else lifted[3],
        load_share_range=share if chain is not None else None,
        min_self_clearance_m=clear,
        closest_links=closest,
        self_collision=collided,
        self_collision_note=note,
        min_position_margin_joint=margin_joint,
        min_position_margin_unit=margin_unit,
        grid_points=len(t),
        dt=float(t[1] - t[0]),
        min_position_margin_rad=margin,
        velocity_ratio=float(vr.max()),
        acceleration_ratio=float(ar.max()),
        torque_ratio=tr,
        starts_at_rest=starts,
        ends_at_rest=ends,
        kappa=kappa(W),
        kappa_scaled=kappa(normalised_columns(W)[0]),
        problems=problems,
        unexcited=unexcited_columns(W),
    )


def unexcited_columns(W: np.ndarray) -> list[str]:
    """The base parameters (ϑk, 1-based in the base's order) a regressor leaves dependent: after the independent
    columns `pivoted_qr` picks (the rule `identify dynamic` names a recording's unexcited ones by), on the columns
    scaled to unit norm, so units do not decide. Empty when the regressor has full column rank."""
    from robots.com_base import pivoted_qr

    Wn = normalised_columns(W)[0]
    rank = np.linalg.matrix_rank(Wn)
    if rank == Wn.shape[1]:
        return []
    _, piv = pivoted_qr(Wn)
    return [f"ϑ{k + 1}" for k in sorted(piv[rank:])]


def _rest_posture_problems(model: RobotModel, q: np.ndarray, rest: np.ndarray) -> list[str]:
    """Where the first and last samples leave the rest posture (rad) by more than REST_TOL_RAD."""
    if rest.shape != (model.nq,):
        return [f"rest posture has {rest.size} angles for {model.nq} joints"]
    out = []
    for where, qk in (("start", q[0]), ("end", q[-1])):
        off = np.abs(qk - rest)
        if off.max() > REST_TOL_RAD:
            j = int(np.argmax(off))
            out.append(
                f"does not {where} in the rest posture (joint {model.joint_names[j]} {off[j]:.3g} rad off)"
            )
    return out


# samples whose dynamics a check evaluates at once: its memory grows with this, not with the plan's length (a 120 s
# plan at 1 ms held 1.07 GB at once, a 3600 s one exhausted 24 GB)
CHUNK_SAMPLES = 20_000


_listeners: list[Callable[[str, int, int], None]] = []


@contextmanager
def reporting(listener: Callable[[str, int, int], None]) -> Iterator[None]:
    """The chunked checks report to `listener(what, samples done, samples in all)` after each chunk: a long plan's
    1 ms check takes minutes (a 3600 s plan 2:15), worth a progress bar."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def in_chunks(fn, *arrays: np.ndarray, what: str = "samples"):
    """fn(*arrays) evaluated CHUNK_SAMPLES samples (rows) at a time, its per-sample results (an array, or a
    dataclass whose array fields are per sample; its other fields the first chunk's) joined along the samples;
    each chunk reported as `what` to the `reporting` listeners."""
    K = len(arrays[0])
    parts = []
    for i in range(0, max(K, 1), CHUNK_SAMPLES):
        parts.append(fn(*(a[i : i + CHUNK_SAMPLES] for a in arrays)))
        for listener in _listeners:
            listener(what, min(i + CHUNK_SAMPLES, K), K)
    if len(parts) == 1:
        return parts[0]
    if not is_dataclass(parts[0]):
        return np.concatenate(parts)
    first = parts[0]
    joined = {f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(first)
              if isinstance(getattr(first, f.name), np.ndarray) and getattr(first, f.name).ndim}  # fmt: skip
    return replace(first, **joined)


def _torques(model, q, qd, qdd, params, base, tmax, problems) -> float:
    """Largest joint torque / effort limit (inverse dynamics, `base` fixed); problems appended."""
    r = (
        np.abs(in_chunks(lambda *s: dyn.rnea(model, *s, params, base), q, qd, qdd, what="joint torques"))
        / tmax
    )
    tr = float(r.max())
    if tr > 1 + 1e-6:
        j = int(np.argmax(r.max(axis=0)))
        problems.append(f"joint {model.joint_names[j]} needs {tr:.3f}× its effort limit")
    return tr


def _split_torques(model, chain, t, q, qd, qdd, params, tmax, problems) -> float:
    """Largest joint torque / effort limit in double support over the samples, for the split of the load
    between the soles that needs least (`double_support_split`); problems appended."""
    s = in_chunks(lambda *x: double_support_split(model, chain, *x, params, tmax), q, qd, qdd,
                  what="the two soles' split")  # fmt: skip
    k = int(np.argmax(s.ratio))
    tr = float(s.ratio[k])
    if tr > 1 + 1e-6:
        j = int(np.argmax(np.abs(s.tau[k]) / tmax))
        problems.append(
            f"in double support the joints need ≥ {tr:.3f}× their effort limits at t = {t[k]:.3f} s, whatever "
            f"the soles share (joint {model.joint_names[j]} at the split that needs least)"
        )
    return tr


@dataclass
class TorqueSplit:
    """Per sample (B): the other sole's contact wrench `wrench` (B, 6: force and moment about the sole's site,
    on the robot, base frame), the joint torques `tau` (B, nq) it leaves and their peak ratio to the limits."""

    wrench: np.ndarray
    tau: np.ndarray
    ratio: np.ndarray


def double_support_split(
    model: RobotModel, chain, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, params: str, tmax: np.ndarray
) -> TorqueSplit:
    """Joint torques of a double-support motion. Standing on both soles the torques are not unique: with the
    other sole's contact wrench f_o (on the robot, at its site, base frame) they are τ = τ_b − J_oᵀ f_o, τ_b the
    inverse dynamics with the base sole fixed and the other sole free (numpy RNEA) and J_o the other sole's
    Jacobian (`robots.dynamics.frame_jacobian`, rows [v; ω] in the base frame, which pairs with [f; n]).
    f_o is chosen per sample as the weighted least-squares split, min Σ (τ_j / τmax_j)², and `ratio` is its
    peak max_j |τ_j| / τmax_j. Where that exceeds 1, the split minimising the peak instead: Lawson's reweighted
    least squares (batched) bounds it from above, and the samples whose bound exceeds the largest peak found so
    far are solved exactly as small linear programs, worst first. So the largest `ratio` is the least-squares
    split's peak when ≤ 1, and else exactly the largest minimax peak over the samples: > 1 means no split of the
    load between the soles holds the motion within the effort limits at that sample."""
    qb = np.atleast_2d(q)
    tau_b = np.atleast_2d(dyn.rnea(model, qb, qd, qdd, params, chain.base))
    J = dyn.frame_jacobian(model, qb, chain.other, chain.base, params)
    if J.ndim == 2:
        J = J[None]
    w = 1.0 / np.asarray(tmax, dtype=float)
    A = np.transpose(J, (0, 2, 1)) * w[None, :, None]  # (B, nq, 6): J_oᵀ, rows scaled by 1/τmax
    b = tau_b * w
    f = np.einsum("bij,bj->bi", np.linalg.pinv(A), b)
    tau = tau_b - np.einsum("bji,bj->bi", J, f)
    ratio = np.abs(tau * w).max(axis=1)
    over = np.flatnonzero(ratio > 1.0)
    if over.size:
        fl, rl = _lawson(A[over], b[over], f[over])
        better = rl < ratio[over]
        f[over[better]], ratio[over[better]] = fl[better], rl[better]
        best = 1.0
        for k in over[np.argsort(-ratio[over])]:
            if ratio[k] <= best:
                break
            fk, rk = _minimax_split(A[k], b[k])
            if rk < ratio[k]:
                f[k], ratio[k] = fk, rk
            best = max(best, ratio[k])
        tau[over] = tau_b[over] - np.einsum("bji,bj->bi", J[over], f[over])
    return TorqueSplit(f, tau, ratio)


def _lawson(
    A: np.ndarray, b: np.ndarray, f: np.ndarray, iterations: int = 40
) -> tuple[np.ndarray, np.ndarray]:
    """Splits (B, 6) towards min max_j |b_j − (A f)_j| by Lawson's iteratively reweighted least squares, batched
    over the samples, and their peaks: upper bounds of the minimax that leave few samples for the LP."""
    w = np.full(b.shape, 1.0 / b.shape[1])
    best_f, best_r = f.copy(), np.abs(b - np.einsum("bij,bj->bi", A, f)).max(axis=1)
    for _ in range(iterations):
        Aw = A * w[..., None]  # normal equations (6 × 6): ~10× faster than pinv over 10⁴ samples
        N = np.einsum("bji,bjk->bik", Aw, A) + 1e-12 * np.eye(A.shape[2])
        g = np.linalg.solve(N, np.einsum("bji,bj->bi", Aw, b)[..., None])[..., 0]
        r = np.abs(b - np.einsum("bij,bj->bi", A, g))
        peak = r.max(axis=1)
        keep = peak < best_r
        best_f[keep], best_r[keep] = g[keep], peak[keep]
        w = w * r
        w = w / w.sum(axis=1, keepdims=True) + 1e-9  # no row weighted out entirely
    return best_f, best_r


def _minimax_split(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    """min over f of max_j |b_j − (A f)_j| (linear program in f and the bound s) → (f, s)."""
    from scipy.optimize import linprog

    n, m = A.shape
    c = np.r_[np.zeros(m), 1.0]
    ones = np.ones((n, 1))
    G = np.block([[-A, -ones], [A, -ones]])
    h = np.r_[-b, b]
    res = linprog(c, A_ub=G, b_ub=h, bounds=[(None, None)] * m + [(0, None)], method="highs")
    if res.status != 0:
        return np.zeros(m), float("inf")
    return res.x[:m], float(np.abs(b - A @ res.x[:m]).max())


def _single_support(model, traj, q, qd, qdd, params, problems, zmp_margin) -> tuple[float, tuple[float, ...]]:
    """ZMP margin inside the stance sole and the lifted sole's lowest and highest corner above the ground (m),
    largest tilt (rad) and its footprint's least distance from the stance sole (m) over the samples
    (`robots.one_sole`); problems appended."""
    from robots.one_sole import one_sole, one_sole_problems

    s = in_chunks(
        lambda *x: one_sole(model, *x, traj.base, traj.other, params), q, qd, qdd, what="one sole's balance"
    )
    problems += one_sole_problems(s, traj.base, "lifted", zmp_margin, traj.lift, traj.max_lift, traj.max_tilt)
    lifted = (float(s.lowest.min()), float(s.highest.max()), float(s.tilt.max()), float(s.apart.min()))
    return float(s.margin.min()), lifted


def regressor_spec(traj: Trajectory, base: str) -> tuple[RegressorSpec, str]:
    """What a trajectory identifies: joint torques (fixed base) or the boards' Fz, Mx, My (standing)."""
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.single_support import SingleSupportTrajectory

    if isinstance(traj, ClosedChainTrajectory):
        return RegressorSpec("base-wrench", traj.chain.base, None, ("fz", "mx", "my")), "double-support"
    if isinstance(traj, SingleSupportTrajectory):
        return RegressorSpec("base-wrench", traj.base, None, ("fz", "mx", "my")), "free"
    return RegressorSpec("torque", base), "free"


def stacked_base_regressor(
    model: RobotModel, traj: Trajectory, base: str, simplified: bool, t: np.ndarray
) -> np.ndarray:
    """The base regressor of what the trajectory identifies, stacked over times t: (len(t)·rows) × rank."""
    from trajectories.closed_chain import ClosedChainTrajectory

    spec, motion = regressor_spec(traj, base)
    chain = traj.chain if isinstance(traj, ClosedChainTrajectory) else None
    return sampled_base_regressor(model, spec, motion, simplified, traj, t, chain)


def sampled_base_regressor(
    model: RobotModel,
    spec: RegressorSpec,
    motion: str,
    simplified: bool,
    traj,
    t: np.ndarray,
    chain=None,
) -> np.ndarray:
    """`stacked_base_regressor` of a regressor named by its spec and motion class (`regressor_spec`) for anything
    with `sample(t) -> (q, q̇, q̈)`; with a closed `chain`, the base parameters of its foot placement."""
    return base_regressor_rows(model, spec, motion, simplified, *traj.sample(t), chain)


def base_regressor_rows(
    model: RobotModel,
    spec: RegressorSpec,
    motion: str,
    simplified: bool,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    chain=None,
) -> np.ndarray:
    """`sampled_base_regressor` of states already sampled (K, nq) each."""
    if chain is not None:
        from trajectories.balance_excitation import chain_base

        db = chain_base(model, chain, simplified)
    elif spec.kind == "base-wrench":
        db = standing_base(model, spec, simplified)
    else:
        db = cached_dynamic_base(model, spec, simplified, motion)
    Y = evaluate(model, spec, q, qd, qdd)
    return Y[..., db.independent].reshape(-1, len(db.independent))


def _coupled(model: RobotModel, q: np.ndarray) -> list[str]:
    out = []
    for k in range(len(model.coupled_b)):
        v = q @ model.coupled_A[k]
        if v.max() > model.coupled_b[k] + 1e-9:
            name = model.coupled_names[k] if k < len(model.coupled_names) else f"coupled limit {k}"
            out.append(f"{name} exceeded by {v.max() - model.coupled_b[k]:.4g}")
    return out


def double_support_balance(model, chain, q, qd, qdd, params, problems, zmp_margin, load_share=0.0):
    """Held-sole drift, ZMP margin (shapely, numpy dynamics) and the other sole's lever-rule share of the
    load (min, max) over the samples; problems appended."""
    from robots.dynamics import zmp_of
    from robots.kinematics import site_pose
    from robots.stance import signed_margin
    from trajectories.balance_excitation import other_share, support_halfplanes

    _, p = site_pose(model, q, params, chain.other, chain.base)
    drift = float(np.abs(p - chain.target_p).max())
    if drift > 1e-6:
        problems.append(f"the held sole drifts {drift * 1000:.3f} mm from its pose")
    phi = dyn.standard_parameters(model, params)
    w = in_chunks(lambda *s: dyn.base_wrench_regressor(model, *s, chain.base, params) @ phi, q, qd, qdd,
                  what="the boards' wrench")  # fmt: skip
    if w[:, 2].min() <= 0:
        problems.append("the feet would leave the ground (Fz ≤ 0)")
    _, _, hull = support_halfplanes(model, chain)
    zmp = zmp_of(w)
    marg = float(signed_margin(hull, zmp).min())
    if marg < zmp_margin - 1e-4:
        problems.append(f"ZMP margin {marg * 1000:.1f} mm < required {zmp_margin * 1000:.1f} mm")
    share = other_share(model, chain, zmp)
    lo, hi = float(share.min()), float(share.max())
    if load_share > 0 and (lo < load_share - SHARE_TOLERANCE or hi > 1 - load_share + SHARE_TOLERANCE):
        problems.append(f"a sole's load share {min(lo, 1 - hi):.3f} < required {load_share:.3f}")
    return marg, drift, (lo, hi)


def _self_collision(
    model, q, params, margin: float, problems: list[str]
) -> tuple[float | None, str | None, str, str | None]:
    """Closest approach of any checked link pair over the samples (exact sphere sets) and that pair; problems
    appended; then `TrajectoryCheck.self_collision` and its note: why nothing was checked (no geometry, no pair
    that can meet, geometry that cannot be loaded)."""
    from robots.collision import NEAR, clearance, collision_pairs, no_pair_reason, unavailable_geometry

    reason = unavailable_geometry(model)
    if reason is not None:
        return None, None, "geometry unavailable", f"the collision geometry cannot be loaded: {reason}"
    cp = collision_pairs(model, params)
    if not cp.pairs:
        why = no_pair_reason(model)
        return None, None, "no collision geometry" if not cp.sets else "no link pair", why
    d = in_chunks(
        lambda x: clearance(model, cp, x, params, exact_below=margin + NEAR), q, what="link clearances"
    )
    k = int(np.argmin(d.min(axis=0)))
    low = float(d[:, k].min())
    name = cp.names()[k]
    if low < margin - 1e-4:
        mm = abs(low) * 1000
        gap = f"{mm:.1f} mm apart" if low >= 0 else f"into each other, overlapping by {mm:.1f} mm"
        problems.append(f"links {name} come {gap} (< {margin * 1000:.1f} mm required)")
    return low, name, "checked", None
