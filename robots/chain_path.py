"""Paths on the closed chain of double support: postures between waypoints projected so that the other sole
stays flat at its placement (and the coupled limits hold), and the posture check applied to every one of them.
The executor's ground moves (`drivers.setpoints`) and `plan check` (`design.verify`) share it."""

from __future__ import annotations

import functools
import math

import casadi as ca
import numpy as np
import shapely

from robots.com_base import BaseModel, derive_base
from robots.kinematics import com_position, com_position_sym
from robots.memo import per_model
from robots.native import compiled
from robots.stance import (
    FLAT_TOL,
    LIMIT_TOL,
    MARGIN_TOL,
    PLACE_TOL,
    check_posture,
    contact_clearance,
    flat_at_pose_sym,
    flat_residual,
    foot_corners,
    other_pose,
    other_site,
    placement_error,
)
from robots.tree import RobotModel

MAX_PROJECTION_STEP = 0.05  # rad per Gauss–Newton step of the chain projection
COUPLED_HOLD = 1e-6  # rad: projected postures keep coupled limits this much inside
PATH_TICKS = (
    20  # postures per waypoint segment `plan check` and the planner check (the executor checks its own)
)
FULL_CHECKS = 60  # postures per path that get the full `check_posture` (besides waypoints)

Theta = (
    tuple[float, ...] | None
)  # ϑ_b centre (m) predicting the CoP, a plan's CoP rule; None: the CoM of params


def cosine_profile(q0: np.ndarray, q1: np.ndarray, tau: float) -> np.ndarray:
    """Raised-cosine velocity: zero velocity at both ends, peak 2|Δq|/T at mid-move. tau in [0, 1]."""
    tau = min(max(tau, 0.0), 1.0)
    s = tau - math.sin(2 * math.pi * tau) / (2 * math.pi)
    return q0 + (q1 - q0) * s


@per_model
def plan_base_model(model: RobotModel, base: str) -> BaseModel:
    """The CoM base-parameter model of a base, derived once per model (`design.criteria.base_model`'s)."""
    return derive_base(model, base)


def path_cops(model: RobotModel, Q: np.ndarray, params: str, base: str, theta: Theta = None) -> np.ndarray:
    """Predicted CoPs (n, 2) m of postures Q (n, nq): R_b(q) ϑ_b at `theta` (the plan's CoP rule,
    `robots.plan_rules.cop_rule`), else the CoM of `params`."""
    Q = np.atleast_2d(np.asarray(Q, dtype=float))
    if theta is None:
        return com_position(model, Q, params, base)[:, :2]
    return plan_base_model(model, base).regressor(Q)[:, :2, :] @ np.asarray(theta, dtype=float)


def _chain_rows(model: RobotModel, params: str, base: str, theta: Theta, q, pose, target) -> ca.SX:
    """The 8 chain rows at symbols q (nq), pose (x, y, yaw) and CoP target (2): other sole flat at the pose (6),
    CoP x-y at the target (2), the CoP by `theta` (`path_cops`)."""
    if theta is None:
        com = com_position_sym(model, q, params, base)
    else:
        com = plan_base_model(model, base).regressor_sym(q) @ ca.DM(list(theta))
    return ca.cse(
        ca.vertcat(
            flat_at_pose_sym(model, q, params, base, pose),
            com[0] - target[0],
            com[1] - target[1],
        )
    )


@per_model
def _chain_function(model: RobotModel, params: str, base: str, theta: Theta = None) -> ca.Function:
    """Residual and Jacobian of the chain rows (`_chain_rows`), compiled to native code where a compiler is."""
    q, pose, target = ca.SX.sym("q", model.nq), ca.SX.sym("pose", 3), ca.SX.sym("cop", 2)
    c = _chain_rows(model, params, base, theta, q, pose, target)
    return compiled(ca.Function("chain", [q, pose, target], [c, ca.cse(ca.jacobian(c, q))]))


@per_model
def _chain_residual(model: RobotModel, params: str, base: str, theta: Theta = None) -> ca.Function:
    """The residual of `_chain_function` alone (a seventh of its cost): whether a row is on the chain yet."""
    q, pose, target = ca.SX.sym("q", model.nq), ca.SX.sym("pose", 3), ca.SX.sym("cop", 2)
    return compiled(
        ca.Function(
            "chain_residual", [q, pose, target], [_chain_rows(model, params, base, theta, q, pose, target)]
        )
    )


def _priority_step(J, c, A, g, active, free) -> np.ndarray:
    """Gauss–Newton step (n, nq) with task priority: the chain rows (other sole flat at its placement, J[:, :6])
    and the active coupled limits first, the CoP target (J[:, 6:]) in the freedom left; only free joints move."""
    n, nq = free.shape
    f = free[:, None, :]
    Jh = np.concatenate([J[:, :6], np.broadcast_to(A, (n, *A.shape)) * active[:, :, None]], axis=1) * f
    rh = np.concatenate([c[:, :6], (g + COUPLED_HOLD / 2) * active], axis=1)
    Js, rs = J[:, 6:] * f, c[:, 6:]
    Jh_pinv = np.linalg.pinv(Jh, rcond=1e-6)
    dq = np.einsum("nij,nj->ni", Jh_pinv, rh)
    N = np.eye(nq)[None] - np.einsum("nij,njk->nik", Jh_pinv, Jh)
    JsN = np.einsum("nij,njk->nik", Js, N)
    return dq + np.einsum("nij,nj->ni", np.linalg.pinv(JsN, rcond=1e-6), rs - np.einsum("nij,nj->ni", Js, dq))


@functools.lru_cache(maxsize=64)
def _mapped(fn: ca.Function, n: int) -> ca.Function:
    """fn evaluated over n columns at once (built once per size: the rows still to converge shrink)."""
    return fn.map(n)


def project_to_chain(model: RobotModel, Q0: np.ndarray, pose, cops: np.ndarray, params: str, base: str,
                     iters: int = 30, theta: Theta = None) -> np.ndarray:  # fmt: skip
    """Minimum-norm Gauss–Newton, for each row of Q0 (n, nq) at once, onto: other sole flat at `pose`
    (x, y, yaw), CoP (`path_cops` by `theta`) at the matching row of `cops` (n, 2) (m). A row stops once it
    is on the chain, so a long move costs what its slowest rows need, not iters × all rows."""
    Q = np.array(Q0, dtype=float, ndmin=2)
    if len(Q) == 0:
        return Q
    fn, res = _chain_function(model, params, base, theta), _chain_residual(model, params, base, theta)
    T_all = np.asarray(cops, dtype=float).reshape(len(Q), 2)
    lo, hi = np.asarray(model.lower, dtype=float), np.asarray(model.upper, dtype=float)
    A = np.asarray(model.coupled_A, dtype=float).reshape(-1, model.nq)
    b = np.asarray(model.coupled_b, dtype=float).reshape(-1)
    todo = np.arange(len(Q))
    for _ in range(iters):
        Qt, P = Q[todo], np.tile(np.asarray(pose, dtype=float)[:, None], (1, len(todo)))
        c = np.asarray(_mapped(res, len(todo))(Qt.T, P, T_all[todo].T)).T  # (n, 8)
        g = Qt @ A.T - b  # coupled limits A q ≤ b: (n, K)
        keep = (np.abs(c).max(axis=1) >= 1e-12) | (g.max(axis=1, initial=-np.inf) > 0)
        if not keep.any():
            break
        todo, Qt, c, g, n = todo[keep], Qt[keep], c[keep], g[keep], int(keep.sum())
        J = _mapped(fn, n)(Qt.T, P[:, :n], T_all[todo].T)[1]
        J = np.asarray(J).reshape(8, n, model.nq).transpose(1, 0, 2)  # (n, 8, nq)
        active = g > -COUPLED_HOLD  # a coupled limit reached (or nearly) becomes an equality just inside it
        free = np.ones_like(Qt, dtype=bool)
        for _ in range(3):  # joints the step would push past a limit stay at it; the others correct
            dq = _priority_step(J, c, A, g, active, free)
            Qn = Qt - dq
            out = ((Qn < lo) | (Qn > hi)) & free
            if not out.any():
                break
            free &= ~out
        big = np.abs(dq).max(axis=1, keepdims=True)
        dq *= np.minimum(1.0, MAX_PROJECTION_STEP / np.maximum(big, 1e-300))  # Gauss–Newton steps, limited
        Q[todo] = np.clip(Qt - dq, lo, hi)
    return Q


def ground_path(
    model: RobotModel,
    wps: np.ndarray,
    n: int,
    cosine: bool,
    pose,
    params: str,
    base: str,
    theta: Theta = None,
) -> np.ndarray:
    """n postures (ticks i/n, i = 1..n) along the waypoints wps (K, nq) — linear between them, or a cosine
    profile between the two rows when `cosine` — each projected onto the closed chain (other sole flat at
    `pose`, CoP (`path_cops` by `theta`, the plan's rule) on the line between the neighbouring waypoints' CoPs);
    every waypoint itself exactly."""
    seg = len(wps) - 1
    cops = path_cops(model, wps, params, base, theta)
    out = np.empty((n, model.nq))
    targets = np.empty((n, 2))
    exact = np.zeros(n, dtype=bool)
    for i in range(1, n + 1):
        tau = i / n
        if (i * seg) % n == 0:  # a waypoint (or the destination)
            out[i - 1], exact[i - 1] = wps[i * seg // n], True
        elif cosine:
            out[i - 1] = cosine_profile(wps[0], wps[1], tau)
            s = tau - math.sin(2 * math.pi * tau) / (2 * math.pi)
            targets[i - 1] = cops[0] + s * (cops[1] - cops[0])
        else:
            x = tau * seg
            k = min(int(x), seg - 1)
            out[i - 1] = wps[k] + (wps[k + 1] - wps[k]) * (x - k)
            targets[i - 1] = cops[k] + (x - k) * (cops[k + 1] - cops[k])
    free = ~exact
    out[free] = project_to_chain(model, out[free], pose, targets[free], params, base, theta=theta)
    return out


def _outside_limits(model: RobotModel, Q: np.ndarray) -> np.ndarray:
    """Rows of Q (n, nq) that `RobotModel.limit_violations` would report (joint ranges, mimic joints' own, coupled
    limits, beyond LIMIT_TOL): only those are worded, one by one."""
    from robots.joint_limits import joint_limits

    jl = joint_limits(model)
    bad = jl.outside(jl.positions(Q), LIMIT_TOL).any(axis=1)
    A = np.asarray(model.coupled_A, dtype=float).reshape(-1, model.nq)
    if len(A):
        bad |= (Q @ A.T > np.asarray(model.coupled_b, dtype=float).reshape(-1) + LIMIT_TOL).any(axis=1)
    return bad


def _tick_issues(
    model: RobotModel, Q: np.ndarray, pose, margin: float, params: str, base: str, cops: np.ndarray
) -> list[list[str]]:
    """The posture check's conditions for every row of Q (n, nq) at once, with the tolerances of
    `robots.stance`: joint limits, other sole flat at `pose`, CoP margin in each row's support polygon (the
    CoPs (n, 2) by `path_cops`: the plan's rule, or the CoM of `params`)."""
    res = np.abs(flat_residual(model, Q, params, base)).max(axis=-1)
    op = other_pose(model, Q, params, base)
    sole = other_site(model, base)
    corners = np.concatenate(list(foot_corners(model, Q, params, base).values()), axis=1)  # (n, 8, 2)
    k = corners.shape[1]
    hulls = shapely.convex_hull(
        shapely.multipoints(corners.reshape(-1, 2), indices=np.repeat(np.arange(len(Q)), k))
    )
    pts = shapely.points(cops)
    d = shapely.distance(shapely.boundary(hulls), pts)
    m = np.where(shapely.contains(hulls, pts), d, -d)
    out = []
    outside = _outside_limits(model, Q)
    for i, q in enumerate(Q):
        issues = model.limit_violations(q, LIMIT_TOL) if outside[i] else []
        if res[i] > FLAT_TOL:
            issues.append(f"other sole not flat on the ground ({res[i] * 1000:.3f} mm/rad)")
        off = placement_error(sole, op[i], pose, PLACE_TOL)
        if off:
            issues.append(off)
        if m[i] < margin - MARGIN_TOL:
            issues.append(f"CoP margin {m[i] * 1000:.2f} mm < required {margin * 1000:.1f} mm")
        out.append(issues)
    return out


def path_issues(
    model: RobotModel, Q: np.ndarray, seg: int, pose, params: str, base: str, margin: float, what: str,
    theta: Theta = None,
) -> list[str]:  # fmt: skip
    """What is unsafe about the path Q (n, nq) (ticks i/n of a path over `seg` waypoint segments; the last row,
    the destination, is checked as a posture elsewhere): every row gets the vectorised conditions of the posture
    check, the waypoints and at least every ceil(n / FULL_CHECKS)-th row `check_posture` itself. One line for
    the first unsafe row, with the count. The CoP by `path_cops` (`theta`: the plan's rule)."""
    n = len(Q)
    cops = path_cops(model, Q, params, base, theta)
    issues = _tick_issues(model, Q, pose, margin, params, base, cops)
    step = max(1, math.ceil(n / FULL_CHECKS))
    for i in range(1, n):
        if i % step == 0 or (i * seg) % n == 0:
            cop = None if theta is None else cops[i - 1]  # None: `check_posture`'s own CoM of params
            st = check_posture(model, Q[i - 1], params, base, margin, pose=pose, cop=cop)
            issues[i - 1] = st.issues + issues[i - 1]
    bad = [(i, iss[0]) for i, iss in enumerate(issues[:-1], start=1) if iss]
    if not bad:
        return []
    i, msg = bad[0]
    near = f"waypoint {i * seg / n:.1f}" if seg > 1 else f"{100 * i / n:.0f}% of the way"
    more = f"; {len(bad)} setpoints in all" if len(bad) > 1 else ""
    return [f"{what} setpoint {i}/{n} (at {near}): {msg}{more}"]


MAX_STRETCH = 3.0  # a segment of waypoints this many times longer than their mean step is a jump
JUMP_MIN = 0.05  # rad: smaller steps are never jumps


def waypoint_jump(wps: np.ndarray) -> str | None:
    """A segment whose largest joint step exceeds MAX_STRETCH × the mean step (and JUMP_MIN): the path leaves the
    closed chain's feasible set there (its two ends lie on parts the chain cannot join on the ground)."""
    steps = np.abs(np.diff(np.asarray(wps, dtype=float), axis=0)).max(axis=1)
    if len(steps) < 2:
        return None
    k = int(steps.argmax())
    if steps[k] > JUMP_MIN and steps[k] > MAX_STRETCH * steps.mean():
        return (
            f"waypoints {k}→{k + 1} jump {math.degrees(steps[k]):.1f}° "
            f"({steps[k] / steps.mean():.1f}× the mean step)"
        )
    return None


def projection_jump(wps: np.ndarray, Q: np.ndarray, cosine: bool) -> str | None:
    """A step between consecutive projected postures Q (`ground_path` of the waypoints wps) beyond MAX_STRETCH × the
    largest the waypoints imply per tick (and JUMP_MIN): the projection switched branch of the closed chain there,
    between waypoints that each lie on it (a plan passed `plan check` whose run then jumped 0.16 rad in a tick)."""
    steps = np.abs(np.diff(np.vstack([wps[0], Q]), axis=0)).max(axis=1)
    seg = len(wps) - 1
    # a cosine move (`cosine_profile`) peaks at twice its mean speed
    per_tick = float(np.abs(np.diff(wps, axis=0)).max()) * seg / len(Q) * (2.0 if cosine else 1.0)
    k = int(steps.argmax())
    if steps[k] > max(JUMP_MIN, MAX_STRETCH * per_tick):
        return (
            f"the path projected on the closed chain jumps {math.degrees(steps[k]):.1f}° at {100 * (k + 1) / len(Q):.0f} % "
            f"of the move ({steps[k] / per_tick:.0f}× its waypoints' step): it switches branch there"
        )
    return None


def ground_transition_issues(
    model: RobotModel, wps: np.ndarray, pose, params: str, base: str, margin: float, what: str,
    theta: Theta = None,
) -> list[str]:  # fmt: skip
    """What stops a transition's waypoints from being followed on the ground: a jump between two waypoints or in
    their projection, or any of PATH_TICKS postures per segment off the chain, outside the limits or the margin
    (`path_issues`; the CoP by `theta`, the plan's rule, as the path's projection)."""
    wps = np.asarray(wps, dtype=float)
    jump = waypoint_jump(wps)
    if jump:
        return [f"{what}: {jump}"]
    seg = len(wps) - 1
    Q = ground_path(model, wps, PATH_TICKS * seg, seg == 1, pose, params, base, theta)
    jump = projection_jump(wps, Q, seg == 1)
    if jump:
        return [f"{what}: {jump}"]
    return path_issues(model, Q, seg, pose, params, base, margin, what, theta)


AIR_CLEARANCE = (
    0.01  # m: the soles stay this far apart during a move in the air (less only if an end is closer)
)
AIR_SAMPLES = 60  # postures checked along each segment of an air move
VIA_TRIES = 300  # random via postures tried when the straight move would bring the feet together


def _segment_clear(model: RobotModel, q0, q1, need: float, params: str, base: str) -> bool:
    t = np.linspace(0.0, 1.0, AIR_SAMPLES)[:, None]
    return bool(contact_clearance(model, q0 + t * (q1 - q0), params, base).min() >= need)


def air_route(
    model: RobotModel, q0: np.ndarray, q1: np.ndarray, params: str, base: str, seed: int
) -> tuple[np.ndarray | None, float]:
    """Waypoints [q0, (via,) q1] of a move with the robot lifted that keep the soles `need` apart
    (`contact_clearance` ≥ AIR_CLEARANCE, less only if an end is closer) along straight joint-space segments:
    the straight move when clear, else through the first clear via of a seeded random search (None: none)."""
    q0, q1 = np.asarray(q0, dtype=float), np.asarray(q1, dtype=float)
    ends = contact_clearance(model, np.array([q0, q1]), params, base)
    need = min(AIR_CLEARANCE, float(ends.min())) - 1e-4
    if _segment_clear(model, q0, q1, need, params, base):
        return np.array([q0, q1]), need
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(model.lower, dtype=float), np.asarray(model.upper, dtype=float)
    for k in range(VIA_TRIES):
        spread = 0.1 + 0.9 * k / VIA_TRIES  # near the straight path first, anywhere within the limits last
        via = np.clip(0.5 * (q0 + q1) + spread * rng.uniform(lo - hi, hi - lo) / 2, lo, hi)
        if model.limit_violations(via, LIMIT_TOL):
            continue
        if _segment_clear(model, q0, via, need, params, base) and _segment_clear(
            model, via, q1, need, params, base
        ):
            return np.array([q0, via, q1]), need
    return None, need
