"""Every setpoint a run commands, computed and checked before anything is sent.

A move is a list of setpoints, one per control tick (tick i of n commands the profile at tau = i/n). On the
ground (consecutive postures of one placement) the joints follow the plan's transition waypoints (equally
spaced in time, every waypoint commanded exactly) or a cosine profile; each tick's interpolated angles are
projected (minimum-norm Gauss–Newton) onto the closed chain: other sole flat at its placement, CoP on the
straight line between its neighbours' CoPs. Every ground tick and every posture must then pass
`robots.stance.check_posture`, the check `plan check` applies, and no joint may move faster than the velocity
limit between ticks. Moves between placements are made with the robot lifted off the boards (limits only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import casadi as ca
import numpy as np
import shapely

from drivers.config import RobotConfig, validate_config
from formats.errors import DataError
from formats.plan import Plan, Posture
from robots.kinematics import com_position, com_position_sym, site_pose_sym
from robots.memo import per_model
from robots.stance import (
    FLAT_TOL,
    LIMIT_TOL,
    MARGIN_TOL,
    PLACE_TOL,
    check_posture,
    contact_clearance,
    flat_residual,
    foot_corners,
    other_pose,
    other_site,
)
from robots.tree import RobotModel

MAX_PROJECTION_STEP = 0.05  # rad per Gauss–Newton step of the chain projection
COUPLED_HOLD = 1e-6  # rad: projected ticks keep coupled limits this much inside
MAX_STRETCH = 3.0  # a ground move stretched beyond this factor has a jump in it: refused
STEP_RTOL = 1e-6  # a tick may exceed the velocity limit by this relative amount (rounding)
FULL_CHECKS = 60  # setpoints per move that get the full `check_posture` (besides waypoints)


def cosine_profile(q0: np.ndarray, q1: np.ndarray, tau: float) -> np.ndarray:
    """Raised-cosine velocity: zero velocity at both ends, peak 2|Δq|/T at mid-move. tau in [0, 1]."""
    tau = min(max(tau, 0.0), 1.0)
    s = tau - math.sin(2 * math.pi * tau) / (2 * math.pi)
    return q0 + (q1 - q0) * s


def waypoint_profile(wps: np.ndarray, tau: float) -> np.ndarray:
    """Waypoints equally spaced in time, linear in between (the plan format's transition convention)."""
    tau = min(max(tau, 0.0), 1.0)
    x = tau * (len(wps) - 1)
    k = min(int(x), len(wps) - 2)
    return wps[k] + (wps[k + 1] - wps[k]) * (x - k)


def move_time_at_limit(q_from: np.ndarray, q_to: np.ndarray, tr, velocity_limit: float) -> float:
    """Shortest duration that keeps every joint within the velocity limit: a cosine move peaks at twice its
    mean speed; a waypoint path (equal time per segment) is limited by its longest segment."""
    if tr is None:
        return 2.0 * float(np.max(np.abs(np.asarray(q_to) - np.asarray(q_from)))) / velocity_limit
    return (len(tr.q) - 1) * float(np.max(np.abs(np.diff(tr.q, axis=0)))) / velocity_limit


@dataclass
class _Waypoints:
    q: np.ndarray


@dataclass
class Move:
    """The setpoints of one move (one per tick, the last = the destination posture) and its robot-time length."""

    to_posture: int
    setpoints: np.ndarray  # (n, nq), rad
    duration_s: float
    on_ground: bool


@dataclass
class RunCheck:
    """Pre-flight result: problems (empty = safe to run), the checked ground moves by destination posture."""

    problems: list[str]
    moves: dict[int, Move] = field(default_factory=dict)
    margin: float = 0.0  # required CoP margin of every setpoint (m)


def plan_required_margin(plan: Plan) -> float:
    """The CoP margin (m) the plan was designed to keep (settings `required_margin` or `margin`, else 0)."""
    s = plan.settings or {}
    v = s.get("required_margin", s.get("margin", 0.0))
    try:
        m = float(v if v is not None else 0.0)
    except (TypeError, ValueError):
        m = float("nan")
    if not math.isfinite(m):
        raise DataError(f"plan settings: required margin {v!r} is not a finite number")
    return m


def ticks(duration_s: float, time_scale: float, rate_hz: float, multiple: int = 1) -> int:
    """Number of control ticks for a move of `duration_s` robot seconds, a multiple of `multiple` (≥ 1)."""
    n = max(1, math.ceil(duration_s / time_scale * rate_hz - 1e-9))
    return multiple * math.ceil(n / multiple)


AIR_CLEARANCE = (
    0.01  # m: the soles stay this far apart during a move in the air (less only if an end is closer)
)
AIR_SAMPLES = 60  # postures checked along each segment of an air move
VIA_TRIES = 300  # random via postures tried when the straight move would bring the feet together


def _cosine_segment(q0: np.ndarray, q1: np.ndarray, min_s: float, config: RobotConfig, time_scale: float):
    d = max(min_s, move_time_at_limit(q0, q1, None, config.executor.velocity_limit))
    n = ticks(d, time_scale, config.executor.rate_hz)
    sp = np.array([cosine_profile(q0, q1, i / n) for i in range(1, n + 1)])
    sp[-1] = q1
    return sp, d


def _segment_clear(model: RobotModel, plan: Plan, q0: np.ndarray, q1: np.ndarray, need: float) -> bool:
    t = np.linspace(0.0, 1.0, AIR_SAMPLES)[:, None]
    return bool(contact_clearance(model, q0 + t * (q1 - q0), plan.params, plan.base).min() >= need)


def air_move(
    model: RobotModel, plan: Plan, q_from: np.ndarray, p: Posture, config: RobotConfig, time_scale: float
) -> tuple[Move, list[str]]:
    """A cosine move with the robot lifted off the boards, stretched to the velocity limit, that keeps the soles
    apart (`robots.stance.contact_clearance` ≥ AIR_CLEARANCE): straight in joint space when that is clear, else
    through the first clear via posture of a seeded random search. Problems name what could not be avoided."""
    q0, q1 = np.asarray(q_from, dtype=float), np.asarray(p.q, dtype=float)
    ends = contact_clearance(model, np.array([q0, q1]), plan.params, plan.base)
    need = min(AIR_CLEARANCE, float(ends.min())) - 1e-4
    if _segment_clear(model, plan, q0, q1, need):
        sp, d = _cosine_segment(q0, q1, p.move_s, config, time_scale)
        return Move(p.index, sp, d, on_ground=False), []
    rng = np.random.default_rng(p.index)
    lo, hi = np.asarray(model.lower, dtype=float), np.asarray(model.upper, dtype=float)
    for k in range(VIA_TRIES):
        spread = 0.1 + 0.9 * k / VIA_TRIES  # near the straight path first, anywhere within the limits last
        via = np.clip(0.5 * (q0 + q1) + spread * rng.uniform(lo - hi, hi - lo) / 2, lo, hi)
        if model.limit_violations(via, LIMIT_TOL):
            continue
        if _segment_clear(model, plan, q0, via, need) and _segment_clear(model, plan, via, q1, need):
            a, da = _cosine_segment(q0, via, p.move_s / 2, config, time_scale)
            b, db = _cosine_segment(via, q1, p.move_s / 2, config, time_scale)
            return Move(p.index, np.vstack([a, b]), da + db, on_ground=False), []
    empty = Move(p.index, np.empty((0, model.nq)), 0.0, False)
    return empty, [
        f"move to posture {p.index} (robot lifted): no path found that keeps the soles {1000 * need:.0f} mm apart"
    ]


@per_model
def _chain_function(model: RobotModel, params: str, base: str) -> ca.Function:
    """Residual and Jacobian of: other sole flat at pose (x, y, yaw) (6) and CoM x-y at a target (2)."""
    q = ca.SX.sym("q", model.nq)
    pose = ca.SX.sym("pose", 3)
    target = ca.SX.sym("cop", 2)
    R, p = site_pose_sym(model, q, params, other_site(model, base), base)
    com = com_position_sym(model, q, params, base)
    c = ca.vertcat(
        p[2],
        R[0, 2],
        R[1, 2],
        p[0] - pose[0],
        p[1] - pose[1],
        -ca.sin(pose[2]) * R[0, 0] + ca.cos(pose[2]) * R[1, 0],
        com[0] - target[0],
        com[1] - target[1],
    )
    return ca.Function("chain", [q, pose, target], [c, ca.jacobian(c, q)])


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


def project_to_chain(model: RobotModel, Q0: np.ndarray, pose, cops: np.ndarray, params: str, base: str,
                     iters: int = 30) -> np.ndarray:  # fmt: skip
    """Minimum-norm Gauss–Newton, for each row of Q0 (n, nq) at once, onto: other sole flat at `pose`
    (x, y, yaw), CoP at the matching row of `cops` (n, 2) (m)."""
    Q = np.array(Q0, dtype=float, ndmin=2)
    n = len(Q)
    if n == 0:
        return Q
    fn = _chain_function(model, params, base).map(n)
    P = np.tile(np.asarray(pose, dtype=float)[:, None], (1, n))
    T = np.asarray(cops, dtype=float).reshape(n, 2).T
    lo, hi = np.asarray(model.lower, dtype=float), np.asarray(model.upper, dtype=float)
    A = np.asarray(model.coupled_A, dtype=float).reshape(-1, model.nq)
    b = np.asarray(model.coupled_b, dtype=float).reshape(-1)
    for _ in range(iters):
        c, J = fn(Q.T, P, T)
        c = np.asarray(c).T  # (n, 8)
        g = Q @ A.T - b  # coupled limits A q ≤ b: (n, K)
        if np.abs(c).max() < 1e-12 and (g.size == 0 or g.max() <= 0):
            break
        J = np.asarray(J).reshape(8, n, model.nq).transpose(1, 0, 2)  # (n, 8, nq)
        active = g > -COUPLED_HOLD  # a coupled limit reached (or nearly) becomes an equality just inside it
        free = np.ones_like(Q, dtype=bool)
        for _ in range(3):  # joints the step would push past a limit stay at it; the others correct
            dq = _priority_step(J, c, A, g, active, free)
            Qn = Q - dq
            out = ((Qn < lo) | (Qn > hi)) & free
            if not out.any():
                break
            free &= ~out
        big = np.abs(dq).max(axis=1, keepdims=True)
        dq *= np.minimum(1.0, MAX_PROJECTION_STEP / np.maximum(big, 1e-300))  # Gauss–Newton steps, limited
        Q = np.clip(Q - dq, lo, hi)
    return Q


def _ground_path(model, plan: Plan, pose, wps: np.ndarray, n: int, cosine: bool) -> np.ndarray:
    """n projected setpoints along the waypoints wps (K, nq), or a cosine profile between its two rows;
    every waypoint is commanded exactly."""
    seg = len(wps) - 1
    cops = com_position(model, wps, plan.params, plan.base)[:, :2]
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
    out[free] = project_to_chain(model, out[free], pose, targets[free], plan.params, plan.base)
    return out


def _tick_issues(model: RobotModel, plan: Plan, Q: np.ndarray, pose, margin: float) -> list[list[str]]:
    """The posture check's conditions for every row of Q (n, nq) at once, with the tolerances of
    `robots.stance`: joint limits, other sole flat at `pose`, CoP margin in each row's support polygon."""
    params, base = plan.params, plan.base
    res = np.abs(flat_residual(model, Q, params, base)).max(axis=-1)
    op = other_pose(model, Q, params, base)
    yaw = np.angle(np.exp(1j * (op[:, 2] - pose[2])))
    place = np.maximum(np.abs(op[:, :2] - np.asarray(pose[:2])).max(axis=-1), np.abs(yaw))
    corners = np.concatenate(list(foot_corners(model, Q, params, base).values()), axis=1)  # (n, 8, 2)
    k = corners.shape[1]
    hulls = shapely.convex_hull(
        shapely.multipoints(corners.reshape(-1, 2), indices=np.repeat(np.arange(len(Q)), k))
    )
    pts = shapely.points(com_position(model, Q, params, base)[:, :2])
    d = shapely.distance(shapely.boundary(hulls), pts)
    m = np.where(shapely.contains(hulls, pts), d, -d)
    out = []
    for i, q in enumerate(Q):
        issues = model.limit_violations(q, LIMIT_TOL)
        if res[i] > FLAT_TOL:
            issues.append(f"other sole not flat on the ground ({res[i] * 1000:.3f} mm/rad)")
        if place[i] > PLACE_TOL:
            issues.append(f"other sole {place[i] * 1000:.3f} mm/mrad away from its placement")
        if m[i] < margin - MARGIN_TOL:
            issues.append(f"CoP margin {m[i] * 1000:.2f} mm < required {margin * 1000:.1f} mm")
        out.append(issues)
    return out


def ground_move(
    model: RobotModel,
    plan: Plan,
    a: Posture,
    b: Posture,
    config: RobotConfig,
    time_scale: float,
    margin: float,
    start: np.ndarray | None = None,
    pose: np.ndarray | None = None,
) -> tuple[Move, list[str]]:
    """The setpoints from posture a to b on one placement, and what is unsafe about them (empty = none).

    Every setpoint gets the vectorised conditions of the posture check; the waypoints and at least every
    ceil(n / FULL_CHECKS)-th setpoint (all of them in short moves) get `check_posture` itself. With `start`
    (the measured posture) and `pose` (where the other sole really is, from the encoders), the path is
    adapted: it starts at `start` and the later waypoints and b are projected onto `pose`, keeping their CoPs;
    the last setpoint is then the adapted b."""
    ex = config.executor
    tr = plan.transition(a.index, b.index)
    what = f"move {a.index}->{b.index}"
    empty = Move(b.index, np.empty((0, model.nq)), 0.0, True)
    if tr is not None:
        wps = np.asarray(tr.q, dtype=float)
        if wps.ndim != 2 or wps.shape[1] != model.nq or len(wps) < 2 or not np.all(np.isfinite(wps)):
            return empty, [f"{what}: malformed transition waypoints"]
        if np.abs(wps[0] - a.q).max() > 1e-9 or np.abs(wps[-1] - b.q).max() > 1e-9:
            return empty, [
                f"{what}: transition does not start at posture {a.index} and end at posture {b.index}"
            ]
    else:
        wps = np.array([a.q, b.q], dtype=float)
    planned = np.asarray(plan.placement(b.placement).other_foot, dtype=float)
    if start is not None or pose is not None:
        wps = wps.copy()
        if pose is not None and np.abs(np.asarray(pose) - planned).max() > 0:
            cops = com_position(model, wps[1:], plan.params, plan.base)[:, :2]
            wps[1:] = project_to_chain(model, wps[1:], pose, cops, plan.params, plan.base)
        if start is not None:
            wps[0] = np.asarray(start, dtype=float)
    pose = planned if pose is None else np.asarray(pose, dtype=float)
    for k, w in enumerate(wps[1:-1], start=1):  # waypoints first: an unsafe one makes the path meaningless
        issues = check_posture(model, w, plan.params, plan.base, margin, pose=pose).issues
        if issues:
            return empty, [f"{what} waypoint {k}: {'; '.join(issues)}"]
    d = max(b.move_s, move_time_at_limit(wps[0], wps[-1], _Waypoints(wps) if tr is not None else None,
                                         ex.velocity_limit))  # fmt: skip
    seg = len(wps) - 1
    d0 = d
    for _ in range(4):  # projection lengthens the path a little: stretch until no tick is too fast
        if d > MAX_STRETCH * d0:
            break  # a jump, not a longer path: refused below
        n = ticks(d, time_scale, ex.rate_hz, seg)
        sp = _ground_path(model, plan, pose, wps, n, tr is None)
        speed = float(np.abs(np.diff(np.vstack([wps[0], sp]), axis=0)).max()) * n / d
        if speed <= ex.velocity_limit * (1 + STEP_RTOL):
            break
        d *= speed / ex.velocity_limit * (1 + 1e-3)
    move = Move(b.index, sp, d, on_ground=True)
    problems = []
    if speed > ex.velocity_limit * (1 + STEP_RTOL):
        problems.append(
            f"{what}: setpoints jump ({speed:.2f} rad/s > velocity_limit {ex.velocity_limit:g} rad/s "
            "after stretching): the path cannot be kept on the ground"
        )
    issues = _tick_issues(model, plan, sp, pose, margin)
    step = max(1, math.ceil(n / FULL_CHECKS))
    for i in range(1, n):  # the destination (tick n) is checked as a posture
        if i % step == 0 or (i * seg) % n == 0:
            st = check_posture(model, sp[i - 1], plan.params, plan.base, margin, pose=pose)
            issues[i - 1] = st.issues + issues[i - 1]
    bad = [(i, iss[0]) for i, iss in enumerate(issues[:-1], start=1) if iss]
    if bad:
        i, msg = bad[0]
        near = f"waypoint {i * seg / n:.1f}" if seg > 1 else f"{100 * i / n:.0f}% of the way"
        more = f"; {len(bad)} setpoints in all" if len(bad) > 1 else ""
        problems.append(f"{what} setpoint {i}/{n} (at {near}): {msg}{more}")
    return move, problems


def check_run(plan: Plan, model: RobotModel, config: RobotConfig, time_scale: float = 1.0) -> RunCheck:
    """Everything that makes the plan or config unsafe to run (problems), and the checked ground moves."""
    validate_config(config)
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise DataError(f"time scale {time_scale!r} must be a positive finite number")
    margin = max(plan_required_margin(plan), config.executor.min_margin)
    problems: list[str] = []
    for p in plan.postures:
        pose = plan.placement(p.placement).other_foot
        for msg in check_posture(model, p.q, plan.params, plan.base, margin, pose=pose).issues:
            problems.append(f"posture {p.index}: {msg}")
    out = RunCheck(problems, {}, margin)
    if problems:
        return out  # moves between unsafe postures are not worth checking
    for a, b in zip(plan.postures[:-1], plan.postures[1:], strict=True):
        if a.placement != b.placement:  # the operator lifts the robot; the move is made in the air
            problems += air_move(model, plan, a.q, b, config, time_scale)[1]
            continue
        move, issues = ground_move(model, plan, a, b, config, time_scale, margin)
        out.moves[b.index] = move
        problems += issues
    return out
