"""Every setpoint a run commands, computed and checked before anything is sent.

A move is a list of setpoints, one per control tick (tick i of n commands the profile at tau = i/n). On the
ground (consecutive postures of one placement) the joints follow the plan's transition waypoints (equally
spaced in time, every waypoint commanded exactly) or a cosine profile; each tick's interpolated angles are
projected (minimum-norm Gauss–Newton) onto the closed chain: other sole flat at its placement, CoP on the
straight line between its neighbours' CoPs. Every placement must lie in the description's placement box and
keep its feet gap (`robots.stance.other_sole_problems`), every posture must pass
`robots.plan_rules.plan_posture_check` and every ground tick `robots.stance.check_posture` — the checks `plan
check` applies — and no joint may move faster than the
velocity limit between ticks. Moves between placements are made with the robot lifted off the boards (limits only).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from drivers.config import HORN_TICKS_PER_RAD, RobotConfig, validate_config
from formats.plan import Plan, Posture, plan_required_margin
from robots.chain_path import (  # noqa: F401 (re-exported)
    AIR_CLEARANCE,
    FULL_CHECKS,
    MAX_STRETCH,
    air_route,
    cosine_profile,
    ground_path,
    path_cops,
    path_issues,
    project_to_chain,
    projection_jump,
)
from robots.plan_rules import (  # noqa: F401 (STEP_RTOL, move_time_at_limit, ticks re-exported)
    STEP_RTOL,
    cop_rule,
    ground_setpoints,
    move_label,
    move_time_at_limit,
    path_theta,
    plan_posture_check,
    rule_cop,
    ticks,
)
from robots.stance import LIMIT_TOL, check_posture, other_sole_problems  # noqa: F401 (LIMIT_TOL re-exported)
from robots.tree import RobotModel


def waypoint_profile(wps: np.ndarray, tau: float) -> np.ndarray:
    """Waypoints equally spaced in time, linear in between (the plan format's transition convention)."""
    tau = min(max(tau, 0.0), 1.0)
    x = tau * (len(wps) - 1)
    k = min(int(x), len(wps) - 2)
    return wps[k] + (wps[k + 1] - wps[k]) * (x - k)


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
    relift: set[int] = field(
        default_factory=set
    )  # postures reached by lifting the robot instead of on the ground
    warnings: list[str] = field(default_factory=list)


def _cosine_segment(q0: np.ndarray, q1: np.ndarray, min_s: float, config: RobotConfig):
    d = max(min_s, move_time_at_limit(q0, q1, None, config.executor.velocity_limit))
    n = ticks(d, config.executor.rate_hz)
    sp = np.array([cosine_profile(q0, q1, i / n) for i in range(1, n + 1)])
    sp[-1] = q1
    return sp, d


def air_move(
    model: RobotModel, plan: Plan, q_from: np.ndarray, p: Posture, config: RobotConfig
) -> tuple[Move, list[str]]:
    """A cosine move with the robot lifted off the boards, stretched to the velocity limit, that keeps the soles
    apart (`robots.stance.contact_clearance` ≥ AIR_CLEARANCE): straight in joint space when that is clear, else
    through the first clear via posture of a seeded random search. Problems name what could not be avoided."""
    q0, q1 = np.asarray(q_from, dtype=float), np.asarray(p.q, dtype=float)
    route, need = air_route(model, q0, q1, plan.params, plan.base, seed=p.index)
    if route is not None and len(route) == 2:
        sp, d = _cosine_segment(q0, q1, p.move_s, config)
        return Move(p.index, sp, d, on_ground=False), []
    if route is not None:
        a, da = _cosine_segment(q0, route[1], p.move_s / 2, config)
        b, db = _cosine_segment(route[1], q1, p.move_s / 2, config)
        return Move(p.index, np.vstack([a, b]), da + db, on_ground=False), []
    empty = Move(p.index, np.empty((0, model.nq)), 0.0, False)
    return empty, [
        f"move to posture {p.index} (robot lifted): no path found that keeps the soles {1000 * need:.0f} mm apart"
    ]


def ground_move(
    model: RobotModel,
    plan: Plan,
    a: Posture,
    b: Posture,
    config: RobotConfig,
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
    what = move_label(a.index, b.index, stored=tr is not None)  # as `plan check` names it
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
        if pose is not None and np.abs(np.asarray(pose) - planned).max() > 0:  # CoPs by the plan's rule
            theta = path_theta(model, plan)
            cops = path_cops(model, wps[1:], plan.params, plan.base, theta)
            wps[1:] = project_to_chain(model, wps[1:], pose, cops, plan.params, plan.base, theta=theta)
        if start is not None:
            wps[0] = np.asarray(start, dtype=float)
    pose = planned if pose is None else np.asarray(pose, dtype=float)
    rule = cop_rule(model, plan)  # the plan's CoP prediction, as `plan check` and the ticks use it
    for k, w in enumerate(wps[1:-1], start=1):  # waypoints first: an unsafe one makes the path meaningless
        cop = rule_cop(model, plan, w, rule)
        issues = check_posture(model, w, plan.params, plan.base, margin, pose=pose, cop=cop).issues
        if issues:
            return empty, [f"{what} waypoint {k}: {'; '.join(issues)}"]
    sp, d, problems = ground_setpoints(model, plan, wps, tr is None, b.move_s, ex.velocity_limit, ex.rate_hz, pose,
                                       margin, what)  # fmt: skip
    move = Move(b.index, sp, d, on_ground=True)
    return move, problems


def check_run(plan: Plan, model: RobotModel, config: RobotConfig) -> RunCheck:
    """Everything that makes the plan or config unsafe to run (problems), and the checked ground moves."""
    validate_config(config)
    margin = max(plan_required_margin(plan), config.executor.min_margin)
    problems: list[str] = []
    for pl in plan.placements:  # where the other sole is put down: the placement check `plan check` applies
        issues = other_sole_problems(model, plan.base, pl.other_foot)
        problems += [f"placement {pl.index}: {m}" for m in issues]
    # the posture check `plan check` applies: the plan's CoP rule, share, worst case, stored values
    for p in plan.postures:
        pose = plan.placement(p.placement).other_foot
        for msg in plan_posture_check(model, plan, p.q, pose, stated=p, margin=margin).issues:
            problems.append(f"posture {p.index}: {msg}")
    out = RunCheck(problems, {}, margin)
    if problems:
        return out  # moves between unsafe postures are not worth checking
    for a, b in zip(plan.postures[:-1], plan.postures[1:], strict=True):
        if a.placement != b.placement:  # the operator lifts the robot; the move is made in the air
            problems += air_move(model, plan, a.q, b, config)[1]
            continue
        tr = plan.transition(a.index, b.index)
        if tr is not None and tr.lifted:  # planned: no path on the ground joins the two postures
            issues = air_move(model, plan, a.q, b, config)[1]
            if not issues:
                out.relift.add(b.index)
            problems += issues
            continue
        move, issues = ground_move(model, plan, a, b, config, margin)
        out.moves[b.index] = move
        if issues and len(move.setpoints):  # valid waypoints, but the path between them cannot be followed
            air = air_move(model, plan, a.q, b, config)[1]
            if not air:  # as an operator would: lift the robot, move in the air, set it down again
                out.relift.add(b.index)
                out.warnings.append(
                    f"{issues[0]} — posture {b.index} is reached with the robot lifted instead"
                )
                continue
            issues += air
        problems += issues
    return out


def tick_problems(model: RobotModel, config: RobotConfig, t: np.ndarray, q: np.ndarray) -> list[str]:
    """Setpoints (ticks at times t) outside the joint limits or faster than the run's velocity limit."""
    problems: list[str] = []
    bad = [(k, v) for k, qk in enumerate(q) if (v := model.limit_violations(qk, LIMIT_TOL))]
    if bad:
        k, v = bad[0]
        more = f" ({len(bad)} ticks in all)" if len(bad) > 1 else ""
        problems.append(f"setpoint at t = {t[k]:.3f} s: {v[0]}{more}")
    speed = np.abs(np.diff(q, axis=0)) / np.diff(t)[:, None]
    lim = config.executor.velocity_limit
    if speed.max() > lim * (1 + STEP_RTOL):
        k, j = np.unravel_index(int(np.argmax(speed)), speed.shape)
        problems.append(
            f"joint {model.joint_names[j]} moves {speed[k, j]:.3f} rad/s between ticks at t = {t[k]:.3f} s "
            f"> velocity_limit {lim:g} rad/s of the robot configuration"
        )
    return problems


def servo_speed_limits(
    servo_info: Mapping[str, Mapping] | None,
    joint_names: list[str],
    ticks_per_rad: Mapping[str, float] | None = None,
) -> dict[str, tuple[float, float]]:
    """Each joint's servo Velocity Limit (44), (rad/s at the horn, rad/s at the joint), for the joints whose
    register bounds a move (`servo_speed_problems`' arguments; a joint without one, or at 0: left out)."""
    limits = {}
    for name in joint_names:
        horn = ((servo_info or {}).get(name) or {}).get("velocity_limit_rad_s")
        if horn is None or not math.isfinite(horn) or horn <= 0:
            continue
        tpr = abs(float((ticks_per_rad or {}).get(name, HORN_TICKS_PER_RAD)))
        limits[name] = (horn, horn * HORN_TICKS_PER_RAD / tpr)
    return limits


def servo_speed_problems(
    servo_info: Mapping[str, Mapping] | None,
    joint_names: list[str],
    peak_rad_s,
    said: Callable[[str, float], str] | None = None,
    fix: str | Callable[[str], str] = "plan or configure the motion slower",
    ticks_per_rad: Mapping[str, float] | None = None,
) -> list[str]:
    """Joints commanded faster than their servo's Velocity Limit (44), one line each. `servo_info` as a Dynamixel
    link records it on connect (joint -> {"id", "velocity_limit_rad_s", ...}); None, or a joint without the key
    (links that read no registers, e.g. the framed link): not checked. `peak_rad_s`: each joint's peak commanded
    speed (rad/s of robot time, in `joint_names` order). `said(joint, peak)` words the command (default: "JOINT's
    commanded peak of PEAK rad/s"); `fix` (or `fix(joint)`) is the slower alternative to raising the register.
    `ticks_per_rad` (joint -> the configuration's ticks per joint radian): a joint geared to its servo has the
    register scaled to the joint (the horn turns 4096 ticks per revolution).

    A register of 0 is not checked: the e-Manual bounds Goal Velocity (104) and Profile Velocity (112) by it, and
    Profile Velocity 0 means an infinite velocity (no profile), so 0 caps no position-mode move."""
    limits = servo_speed_limits(servo_info, joint_names, ticks_per_rad)
    said = said or (lambda joint, peak: f"{joint}'s commanded peak of {peak:.3f} rad/s")
    problems = []
    for j, name in enumerate(joint_names):
        if name not in limits:
            continue
        info = servo_info[name]
        horn, limit = limits[name]
        peak = float(np.asarray(peak_rad_s, dtype=float)[j])
        if not peak > limit * (1 + STEP_RTOL):  # NaN peaks are the tick checks' business
            continue
        raw = info.get("velocity_limit_raw")
        units = "" if not raw else f" ({raw} × {horn / raw * 60 / (2 * math.pi):.3g} rev/min)"
        at_joint = "" if math.isclose(limit, horn, rel_tol=1e-9) else f", {limit:.3f} rad/s at the joint"
        problems.append(
            f"{said(name, peak)} exceeds servo {info.get('id', '?')} ({name})'s Velocity Limit {horn:.3f} rad/s"
            f"{units}{at_joint}; raise its Velocity Limit (44) with torque off, or "
            f"{fix(name) if callable(fix) else fix}"
        )
    return problems


def peak_speeds(
    stages: list[tuple[str, np.ndarray, np.ndarray | None]], nq: int
) -> list[tuple[float, str, float]]:
    """Each joint's peak speed between consecutive goals of the timed `stages` ((what, goals (n, nq) rad, robot
    times (n,) s or None for a single goal, not a motion)): (rad/s, the stage, the time of the later goal)."""
    best = [(0.0, "", 0.0)] * nq
    for what, goals, times in stages:
        if times is None or len(goals) < 2:
            continue
        g, t = np.asarray(goals, dtype=float), np.asarray(times, dtype=float)
        speed = np.abs(np.diff(g, axis=0)) / np.diff(t)[:, None]
        for j in range(nq):
            k = int(np.nanargmax(speed[:, j])) if np.isfinite(speed[:, j]).any() else 0
            if speed[k, j] > best[j][0]:
                best[j] = (float(speed[k, j]), what, float(t[k + 1]))
    return best
