"""Balance-constrained excitation of a biped standing on one sole (single support).

Every joint follows a Fourier series; the base sole stays flat on its board (the base frame), the other sole is
kept `lift` m above the ground at every sample. The identified rows are the base wrench (Fz, Mx, My) the stance
board measures; the ZMP computed with the guessed parameters stays inside the stance sole by a margin — one linear
inequality in (Fz, Mx, My) per sole edge and sample — and the joint torques (base sole fixed) within their limits.
Exact derivatives: the wrench, the other sole's height and the torques are small SX functions mapped over the
grid (`excitation._mapped_grid`), the limits one constant sparse matrix (`excitation.linear_limit_rows`).
The start (t = 0; the Fourier plan ends there too) must admit `poise run`'s weight shift from both boards
(`trajectories.weight_shift`): the other sole's ground pose under it (`robots.stance.other_pose`) within the
description's placement box and, both soles flat there, the soles the stance's feet gap apart — proved by a
separating line (φ, c), two more NLP variables after the coefficients (`robots.stance.placement_function`).
Without collision geometry the lifted sole does not pass over the standing foot: seen from above, its footprint
keeps the stance's feet gap from the base sole at every sample, proved by a separating line per sample (2K more
variables: the angles, then the offsets; `robots.one_sole` checks it exactly). And the weight shift's end must
exist: a posture (nq more variables, SHIFT_ROOM inside every joint limit) with the other sole flat on the ground at
the start's ground pose and the CoM inside the base sole by the shift's margin (`trajectories.weight_shift`, whose
planner then finds one SHIFT_ROOM − POSTURE_ROOM inside the limits too: room to lift the sole straight up).
"""

from __future__ import annotations

import math
from dataclasses import replace

import casadi as ca
import numpy as np
from scipy import sparse

from formats.errors import DataError
from robots import dynamics as dyn
from robots.interrupt import interruptible
from robots.kinematics import site_pose_sym
from robots.motion_class import standing_base
from robots.one_sole import placed_sole_corners, sole_corners, sole_polygon
from robots.stance import (
    other_pose,
    other_pose_sym,
    other_site,
    placement_function,
    placement_line,
    placement_row_bounds,
    separating_line,
    separation_bounds,
    sole_rects,
)
from robots.stance_spec import resolve_base, stance_spec
from robots.tree import RobotModel
from trajectories.balance_excitation import (
    ZMP_BUFFER,
    check_zmp_room,
    halfplanes,
    polygon_depth,
    zmp_rows,
    zmp_spec,
)
from trajectories.design_grid import (
    design_bases,
    design_rows,
    design_times,
    design_trajectory,
    is_spline,
    waypoints_around,
)
from trajectories.excitation import (
    ExcitationSettings,
    _limits,
    _mapped_grid,
    clearance_rows,
    fourier_problem,
    linear_limit_rows,
)
from trajectories.fourier import FourierTrajectory
from trajectories.parametrisation import joint_trajectory_from_json
from trajectories.retighten import (
    TIGHTEN_SLACK,
    moved_rate_fractions,
    moved_zmp_margin,
    solve_and_retighten,
)
from trajectories.spline import SplineTrajectory
from trajectories.weight_shift import POSTURE_ROOM, SHIFT_BUFFER, shifted_posture, wrench_at_rest

LIFT_BUFFER = (
    0.005  # m added to the lift (taken from the ceiling) at the grid samples: the sole moves between
)
TILT_BUFFER = math.radians(2.0)  # taken from the tilt bound at the grid samples, for the same reason
# NLP variables after the Fourier coefficients: the start's separating line (φ, c) of the soles
START_LINE = 2
# m added to the feet gap between the footprints at the grid samples: the sole moves between them
APART_BUFFER = 0.005
SHIFT_ROOM = 2 * POSTURE_ROOM  # rad the NLP's shifted posture keeps from every joint limit


class SingleSupportTrajectory:
    """A Fourier or spline trajectory of every joint, executed standing on the `base` sole with the `other` sole
    lifted: its corners `lift` to `max_lift` m above the ground, its plane within `max_tilt` rad of the ground's
    (None: unbounded)."""

    def __init__(
        self, motion: FourierTrajectory | SplineTrajectory, base: str, other: str, lift: float,
        max_lift: float | None = None, max_tilt: float | None = None,
    ) -> None:  # fmt: skip
        self.motion, self.base, self.other, self.lift = motion, base, other, float(lift)
        self.max_lift = None if max_lift is None else float(max_lift)
        self.max_tilt = None if max_tilt is None else float(max_tilt)
        self.duration = motion.duration

    @property
    def n(self) -> int:
        return self.motion.n

    def sample(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.motion.sample(t)

    def to_json(self) -> dict:
        return {"kind": "single-support", "base": self.base, "other_site": self.other, "lift_m": self.lift,
                "max_lift_m": self.max_lift, "max_tilt_rad": self.max_tilt,
                "motion": self.motion.to_json()}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict) -> SingleSupportTrajectory:
        try:
            lift = float(d["lift_m"])
            if not (np.isfinite(lift) and lift >= 0):
                raise ValueError(f"lift_m {lift!r} must be ≥ 0")
            bounds = [d.get(k) for k in ("max_lift_m", "max_tilt_rad")]  # absent in older plans: unbounded
            for k, v in zip(("max_lift_m", "max_tilt_rad"), bounds, strict=True):
                if v is not None and not (np.isfinite(float(v)) and float(v) > 0):
                    raise ValueError(f"{k} {v!r} must be a positive number or null")
            return cls(joint_trajectory_from_json(d["motion"]), str(d["base"]), str(d["other_site"]), lift,
                       *bounds)  # fmt: skip
        except KeyError as exc:
            raise DataError(f"malformed single-support trajectory (missing {exc})") from None
        except (TypeError, ValueError) as exc:
            raise DataError(f"malformed single-support trajectory ({exc})") from None


def by_component(rows: np.ndarray) -> np.ndarray:
    """Fz, Mx, My rows stacked by sample (`verify.stacked_base_regressor`) → by component, Fz at every sample, then
    Mx, then My: the order of the single-support NLP's regressor. It keeps that order (a row permutation changes
    the criterion's rounding, and with it the local optimum IPOPT reaches: the slow test's design ended at κ 20 289
    against its bound of 741), so a prior's rows and the row weights (`excitation.row_weights`) follow it."""
    r = rows.shape[1]
    return rows.reshape(-1, 3, r).transpose(1, 0, 2).reshape(-1, r)


def lifted_sole_function(model: RobotModel, base: str, other: str, params: str) -> ca.Function:
    """(q, q̇, q̈) → heights (4) of the other sole's corners above the base sole's plane, then the cosine of
    its tilt from that plane (1)."""
    q, qd, qdd = (ca.SX.sym(nm, model.nq) for nm in ("q", "qd", "qdd"))
    R, p = site_pose_sym(model, q, params, other, base)
    z = [(p + R @ ca.DM(c))[2] for c in sole_corners(model, other)]
    return ca.Function("lifted_sole", [q, qd, qdd], [ca.vertcat(*z, R[2, 2])])


def _lifted_bounds(settings: ExcitationSettings, lift: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of `lifted_sole_function` at n samples (corner heights by corner, then the tilt's cosines)."""
    top = np.inf if settings.max_lift is None else settings.max_lift - LIFT_BUFFER
    cos_tilt = (
        -1.0 if settings.max_sole_tilt is None else np.cos(max(settings.max_sole_tilt - TILT_BUFFER, 0.0))
    )
    return (np.r_[np.full(4 * n, lift + LIFT_BUFFER), np.full(n, cos_tilt)],
            np.r_[np.full(4 * n, top), np.full(n, np.inf)])  # fmt: skip


def footprint_function(model: RobotModel, base: str, other: str, params: str) -> ca.Function:
    """(q, q̇, q̈) → the other sole's corners seen from above in the base frame: x of the four, then y."""
    q, qd, qdd = (ca.SX.sym(nm, model.nq) for nm in ("q", "qd", "qdd"))
    R, p = site_pose_sym(model, q, params, other, base)
    xy = [p[:2] + R[:2, :] @ ca.DM(c) for c in sole_corners(model, other)]
    return ca.Function("footprint", [q, qd, qdd], [ca.vertcat(*(v[0] for v in xy), *(v[1] for v in xy))])


def footprint_rows(model: RobotModel, base: str, footprints: ca.MX, lines: ca.MX, K: int):
    """Rows proving, at each of K samples, the lifted sole's footprint (`footprint_function` mapped: x of the
    corners, then y, each over the samples) the stance's feet gap (+ APART_BUFFER) from the base sole, about the
    samples' separating lines (angles, then offsets): (g, lbg, ubg), the base sole's corners first."""
    phi, c = lines[:K], lines[K:]
    cs, sn = ca.cos(phi), ca.sin(phi)
    rb, _ = sole_rects(model, base)
    g = [cs * float(bx) + sn * float(by) - c for bx, by in rb]
    g += [
        cs * footprints[j * K : (j + 1) * K] + sn * footprints[(4 + j) * K : (5 + j) * K] - c
        for j in range(4)
    ]
    lo, hi = separation_bounds(stance_spec(model).feet_gap + APART_BUFFER)
    return ca.vertcat(*g), np.repeat(lo, K), np.repeat(hi, K)


def sample_lines(model: RobotModel, base: str, params: str, q: np.ndarray) -> np.ndarray:
    """The best separating lines of the base sole and the lifted sole's footprint at postures q (K, nq): the
    NLP's start, angles then offsets."""
    from robots.kinematics import site_pose

    other = other_site(model, base)
    corners = placed_sole_corners(model, other, *site_pose(model, q, params, other, base))
    rb, _ = sole_rects(model, base)
    lines = np.array([separating_line(rb, c[:, :2])[:2] for c in corners])
    return np.r_[lines[:, 0], lines[:, 1]]


def shift_margin(model: RobotModel, base: str, zmp_margin: float) -> float:
    """The CoM's margin (m) inside the base sole where the run's weight shift ends, as its planner first asks
    (`weight_shift._shifted`): the plan's + SHIFT_BUFFER, or + ZMP_BUFFER where the sole is too small for that."""
    room = polygon_depth(sole_polygon(model, base))
    return zmp_margin + (SHIFT_BUFFER if room > zmp_margin + SHIFT_BUFFER + ZMP_BUFFER else ZMP_BUFFER)


def shift_stance_function(model: RobotModel, base: str, params: str, margin: float) -> ca.Function:
    """(q_shift, q_start) → rows, within `shift_stance_bounds`: the other sole under q_shift at its ground pose
    under q_start (x, y, on the ground, flat, the same yaw: its sine, then its cosine ≥ 0) and the CoM at rest
    `margin` m inside the base sole (one row per edge): the posture the run's weight shift ends in."""
    n = model.nq
    qs, q0 = ca.SX.sym("q_shift", n), ca.SX.sym("q_start", n)
    other = other_site(model, base)
    R, p = site_pose_sym(model, qs, params, other, base)
    R0, p0 = site_pose_sym(model, q0, params, other, base)
    zmp = zmp_rows(wrench_at_rest(model, base, params, qs), sole_polygon(model, base), margin)
    rows = [p[0] - p0[0], p[1] - p0[1], p[2], R[0, 2], R[1, 2], R[1, 0] * R0[0, 0] - R[0, 0] * R0[1, 0],
            R[0, 0] * R0[0, 0] + R[1, 0] * R0[1, 0], zmp]  # fmt: skip
    return ca.Function("shift_stance", [qs, q0], [ca.vertcat(*rows)])


def shift_stance_bounds(model: RobotModel, base: str) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of `shift_stance_function`'s rows."""
    e = len(halfplanes(sole_polygon(model, base))[1])
    return np.r_[np.zeros(7), np.full(e, -np.inf)], np.r_[np.zeros(6), np.inf, np.zeros(e)]


def shift_posture_bounds(model: RobotModel) -> tuple[np.ndarray, np.ndarray]:
    """The NLP's bounds of the shifted posture: SHIFT_ROOM inside the joint limits."""
    lo, hi = model.sampling_bounds()
    return lo + SHIFT_ROOM, hi - SHIFT_ROOM


def start_stance_function(model: RobotModel, base: str, params: str) -> ca.Function:
    """(q, line) → `robots.stance.placement_function` of the other sole's ground pose under posture q: how the
    run's weight shift would stand on both boards before lifting to q."""
    q, line = ca.SX.sym("q", model.nq), ca.SX.sym("line", START_LINE)
    rows = placement_function(model, base)(other_pose_sym(model, q, params, base), line)
    return ca.Function("start_stance", [q, line], [rows])


def start_line(model: RobotModel, base: str, params: str, q: np.ndarray) -> np.ndarray:
    """The best separating line (φ, c) of the soles standing flat at posture q's ground pose: the NLP's start."""
    return placement_line(model, base, other_pose(model, q, params, base))


def design_single_support_problem(
    model: RobotModel, settings: ExcitationSettings, lift: float, torque_rows: bool = True
) -> dict:
    """The NLP of a single-support excitation (same keys as `excitation.design_problem`, plus the polygon);
    variables x: the Fourier coefficients, the start's separating line (START_LINE), the samples' (2K), the
    weight shift's end posture (nq; bounded by `lbx`, `ubx`)."""
    settings.validate()
    base = resolve_base(model, settings.base)
    other = other_site(model, base)
    params = settings.params or next(iter(model.params))
    spec = zmp_spec(base)
    db = standing_base(model, spec, settings.simplified)
    n, K = model.nq, settings.samples
    bases = design_bases(settings, design_times(settings, K))
    P, V, A = bases
    m = design_rows(settings)
    lines = m * n + START_LINE  # the samples' lines from here, the shifted posture after them
    x = ca.MX.sym("x", lines + 2 * K + n)
    xc = x[: m * n]
    X = ca.reshape(xc, m, n)
    Q, Qd, Qdd = ca.DM(P) @ X, ca.DM(V) @ X, ca.DM(A) @ X
    qs, qds, qdds = (ca.SX.sym(nm, n) for nm in ("q", "qd", "qdd"))
    Wsx = dyn.base_wrench_regressor_function(model, base, params)(qs, qds, qdds)[[2, 3, 4], :]  # fz, mx, my
    phi = ca.DM(dyn.standard_parameters(model, params))
    rows = ca.Function("rows", [qs, qds, qdds], [Wsx[:, db.independent]]).map(K)
    r = len(db.independent)
    # 3K × r, rows fz at every sample, then mx, then my (`by_component`; a prior's rows and the row weights follow)
    W = ca.reshape(rows(Q.T, Qd.T, Qdd.T).T, r, 3 * K).T
    w_node = _mapped_grid("wrench", ca.Function("wrench", [qs, qds, qdds], [Wsx @ phi]), bases)
    w3 = w_node(xc)  # fz at every sample, then mx, then my
    Y = dyn.torque_regressor_function(model, base, params)(qs, qds, qdds)
    tau_node = _mapped_grid("torques", ca.Function("torque", [qs, qds, qdds], [Y @ phi]), bases)
    h_node = _mapped_grid("lifted_sole", lifted_sole_function(model, base, other, params), bases)
    poly = sole_polygon(model, base)
    N, d = halfplanes(poly)
    check_zmp_room(poly, settings.zmp_margin, f"the {base!r} sole")
    margin = settings.zmp_margin + ZMP_BUFFER
    # edge e, sample k: N_e · (−My, Mx) − (d_e − margin) Fz ≤ 0, a constant matrix times w3
    eye = sparse.identity(K)
    Z = sparse.hstack([sparse.kron(-(d - margin)[:, None], eye), sparse.kron(N[:, [1]], eye),
                       sparse.kron(-N[:, [0]], eye)]).tocsc()  # fmt: skip
    _, _, _, _, tmax = _limits(model, settings)
    G, lbg, ubg = linear_limit_rows(model, settings)
    stance = start_stance_function(model, base, params)(
        Q[0, :].T, x[m * n : m * n + START_LINE]
    )  # Q[0]: t = 0
    f_node = _mapped_grid("footprint", footprint_function(model, base, other, params), bases)
    apart, lo_a, hi_a = footprint_rows(model, base, f_node(xc), x[lines : lines + 2 * K], K)
    shift_fn = shift_stance_function(model, base, params, shift_margin(model, base, settings.zmp_margin))
    shift = shift_fn(x[lines + 2 * K :], Q[0, :].T)
    g = [ca.mtimes(ca.DM(G), xc), ca.mtimes(ca.DM(Z), w3), w3[:K], h_node(xc), stance, apart, shift]
    lo_h, hi_h = _lifted_bounds(settings, lift, K)
    lo_s, hi_s = placement_row_bounds(model, base)
    lo_w, hi_w = shift_stance_bounds(model, base)
    lbg += [np.full(Z.shape[0], -np.inf), np.zeros(K), lo_h, lo_s, lo_a, lo_w]
    ubg += [np.zeros(Z.shape[0]), np.full(K, np.inf), hi_h, hi_s, hi_a, hi_w]
    lo_q, hi_q = shift_posture_bounds(model)
    lbx = np.r_[np.full(lines + 2 * K, -np.inf), lo_q]
    ubx = np.r_[np.full(lines + 2 * K, np.inf), hi_q]
    tau = tau_node(xc)
    if torque_rows:
        g.append(tau)
        lbg.append(np.repeat(-tmax, K))
        ubg.append(np.repeat(tmax, K))
    nodes = [w_node, tau_node, h_node, f_node] + clearance_rows(
        model, settings, params, bases, xc, g, lbg, ubg
    )
    return fourier_problem(x, W, tau, g, lbg, ubg, db, _limits(model, settings), params, base, nodes,
                           other=other, polygon=poly, lbx=lbx, ubx=ubx)  # fmt: skip


def nominal_posture(model: RobotModel, base: str, params: str, settings: ExcitationSettings) -> np.ndarray:
    """The posture nearest mid-range that stands still on the base sole: CoM ≥ the margin inside it, the other
    sole's corners ≥ 2·lift above the ground (room for the excitation around it) and within the settings'
    ceiling and tilt."""
    q = ca.SX.sym("q", model.nq)
    z = ca.SX.zeros(model.nq)
    zmp = zmp_rows(
        wrench_at_rest(model, base, params, q), sole_polygon(model, base), settings.zmp_margin + ZMP_BUFFER
    )
    lifted = lifted_sole_function(model, base, other_site(model, base), params)(q, z, z)
    lo_h, hi_h = _lifted_bounds(settings, 2 * settings.lift, 1)
    lo, hi = model.lower, model.upper
    mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2, 0.0)
    g = ca.vertcat(zmp, lifted)
    solver = ca.nlpsol("single_support_nominal", "ipopt", {"x": q, "f": ca.sumsqr(q - mid), "g": g},
                       {"ipopt.print_level": 0, "print_time": False, "ipopt.sb": "yes"})  # fmt: skip
    lbx, ubx = model.sampling_bounds()
    with interruptible():
        sol = solver(x0=mid, lbx=lbx, ubx=ubx,
                     lbg=np.r_[np.full(zmp.numel(), -np.inf), lo_h], ubg=np.r_[np.zeros(zmp.numel()), hi_h])  # fmt: skip
    if not solver.stats()["success"]:
        raise DataError(f"{model.name!r} finds no posture standing on {base!r} with the other sole lifted")
    return np.asarray(sol["x"]).ravel()


def optimise_single_support(model: RobotModel, settings: ExcitationSettings, seed: int = 0, prior=None):
    """Design one single-support excitation from small random harmonics around the nominal posture; `prior`
    (`excitation.Prior`): single-support experiments on the same sole it should complete."""
    import time

    from trajectories.excitation import solve_lazy_torques

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    base = resolve_base(model, settings.base)
    params = settings.params or next(iter(model.params))
    lo, hi, _, _, _ = _limits(model, settings)
    lift = settings.lift
    q0 = np.clip(nominal_posture(model, base, params, settings), lo, hi)
    L, n = settings.harmonics, model.nq
    if is_spline(settings):
        X = waypoints_around(settings, q0, settings.amplitude, rng)
        start = design_trajectory(settings, X)
    else:
        a = rng.uniform(-1, 1, (n, L)) * settings.amplitude / L
        b = rng.uniform(-1, 1, (n, L)) * settings.amplitude / L
        a -= a.mean(axis=1, keepdims=True)  # at rest at t = 0 (as balance_excitation.balance_start)
        ls = np.arange(1, L + 1)
        b -= np.outer((b * ls).sum(axis=1), ls) / (ls**2).sum()
        start = FourierTrajectory(settings.period, settings.duration, q0, a, b)
        X = start.coefficients()
    grid = start.sample(design_times(settings, settings.samples))[0]
    shifted = shifted_posture(model, base, params, grid[0], settings.zmp_margin)
    lo_q, hi_q = shift_posture_bounds(model)
    shifted = np.clip(grid[0] if shifted is None else shifted, lo_q, hi_q)
    x0 = np.r_[X.reshape(-1, order="F"), start_line(model, base, params, q0),
               sample_lines(model, base, params, grid), shifted]  # fmt: skip
    result, check = solve_and_retighten(
        lambda b: solve_lazy_torques(
            lambda rows: design_single_support_problem(model, b[0], b[1], torque_rows=rows), b[0], x0, prior
        ),
        lambda *solved: _single_support_result(model, settings, prior, *solved, t0),
        lambda b, check: tightened(b[0], b[1], settings, lift, check),
        (settings, lift),
    )
    result.verification = check.to_dict()
    return result


def _single_support_result(model, settings, prior, prob, x, iterations, status, stages, t0):
    """The design's result and its check on the fine grid against the plan's own bounds (`settings`)."""
    from trajectories.excitation import design_result
    from trajectories.verify import check_trajectory

    base = resolve_base(model, settings.base)
    params = settings.params or next(iter(model.params))
    n = model.nq
    m = design_rows(settings)
    motion = design_trajectory(settings, x[: m * n].reshape(m, n, order="F"))
    traj = SingleSupportTrajectory(
        motion, base, prob["other"], settings.lift, settings.max_lift, settings.max_sole_tilt
    )
    W = np.asarray(prob["W_fun"](x))
    result = design_result(traj, W, prob["base"].symbols, iterations, status, stages, base, params, settings,
                           prior, t0)  # fmt: skip
    check = check_trajectory(
        model, traj, base, params, 0.002, settings.acceleration_default, settings.simplified,
        zmp_margin=settings.zmp_margin,
        collision_margin=settings.collision_margin if settings.self_collision else None,
    )  # fmt: skip
    return result, check


def tightened(
    design: ExcitationSettings, design_lift: float, plan: ExcitationSettings, lift: float, check
) -> tuple[ExcitationSettings, float] | None:
    """The design's bounds moved in by what the fine grid found beyond the plan's (`check`, a
    `verify.TrajectoryCheck`) plus TIGHTEN_SLACK, or None if nothing the bounds control was exceeded."""
    changes = moved_rate_fractions(design, check)
    margin = moved_zmp_margin(design.zmp_margin, plan.zmp_margin, check)
    if margin != design.zmp_margin:
        changes["zmp_margin"] = margin
    if (
        plan.max_lift is not None
        and check.max_sole_height_m is not None
        and check.max_sole_height_m > plan.max_lift
    ):
        changes["max_lift"] = design.max_lift - (check.max_sole_height_m - plan.max_lift) - TIGHTEN_SLACK
    tilt = check.max_sole_tilt_rad
    if plan.max_sole_tilt is not None and tilt is not None and tilt > plan.max_sole_tilt:
        changes["max_sole_tilt"] = design.max_sole_tilt - (tilt - plan.max_sole_tilt) - TILT_BUFFER / 2
    new_lift = design_lift
    if check.min_sole_lift_m is not None and check.min_sole_lift_m < lift:
        new_lift = design_lift + lift - check.min_sole_lift_m + TIGHTEN_SLACK
    if not changes and new_lift == design_lift:
        return None
    return replace(design, **changes), new_lift
