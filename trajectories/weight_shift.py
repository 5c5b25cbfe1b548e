"""The start of a single-support run from double support, as on real hardware: stand, shift the weight, lift.

A person sets the robot down on both feet; the executor cannot set it down on one. So the run starts (a) standing
with both soles flat at their ground poses (the free sole where the single-support run places it, above the other
board) and the CoM halfway between them by the lever rule, (b) shifts the weight onto the base sole in double
support — the free sole held at its ground pose (a closed chain, `trajectories.closed_chain`) until the CoM (at
rest, the ZMP) lies inside the base sole by the required margin — then (c) lifts the free sole, first straight up
by the plan's lift with the stance side still, then in joint space to the plan's start posture, on the base sole
alone. Every tick's joint torques stay within the efforts × the plan's torque fraction (in double support for the
split of the load that needs least, as `plan check` verifies a double-support plan's): a lift once needed 98 % of
a knee's effort, more than the twin's servo held. Each part is quasi-static: a quintic profile (zero velocity and
acceleration at both ends) timed so that no joint exceeds a fraction of its velocity limit (the description's,
capped by the executor's), slowed down where the checks need it, sampled at the executor's rate. Every tick is
verified with the checks the planner and `plan check` use: the double-support part with
`trajectories.verify.double_support_balance` (held sole, ZMP in the support polygon), the lift with
`robots.one_sole` as `drivers.single_support_stream` does (ZMP inside the base sole by the margin, Fz > 0, the free
sole's corners above the ground, within the plan's ceiling and tilt). Played backwards (`reverse`), the same
ticks put the free sole back down and shift the weight back: the same postures with q̈ unchanged and q̇ negated,
so the same ZMP and the same checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import casadi as ca
import numpy as np
from shapely.geometry import MultiPoint

from formats.errors import DataError
from robots import dynamics as dyn
from robots.interrupt import interruptible
from robots.one_sole import one_sole, one_sole_problems, sole_corners, sole_polygon
from robots.stance import lever_share, other_pose
from robots.tree import RobotModel
from trajectories.balance_excitation import ZMP_BUFFER, zmp_rows
from trajectories.closed_chain import (
    ClosedChain,
    chain_coordinates,
    dependent_rates,
    functions,
    solve_along,
)
from trajectories.verify import double_support_balance, double_support_split

SPEED_SHARE = 0.25  # of each joint's velocity limit (the description's, capped by the executor's)
MIN_PART_S = 1.0  # s: no part of the transition faster than this (quasi-static)
# a part slower and slower until every tick passes (the ZMP's dynamic part ∝ 1/T²)
STRETCH = (1.0, 1.25, 1.6, 2.0, 2.5, 3.2, 4.0)
# m added to the margin where the shift ends (room for the lift's dynamics: a faster lift), or, where the sole is
# too small for that, ZMP_BUFFER
SHIFT_BUFFER = 0.02
STAND_SHARE = 0.5  # the free sole's lever-rule share of the weight standing before the shift
# rad the standing postures keep from every joint limit: the free sole's lift straight up from one at a limit
# (a wide stance's ankle roll) went past it on its first tick
POSTURE_ROOM = 0.03


@dataclass
class Part:
    """Ticks of one part of the transition: time from the part's start (s), q, q̇, q̈ (K, nq)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray


@dataclass
class WeightShift:
    """The transition: the standing posture, the free sole's ground pose (x, y, yaw in the base frame), the shift
    (double support; `progress` 0 → 1 along it) and the lift (single support, ending at the plan's start), with
    what the checks found: smallest ZMP margins (m) in double and single support, the free sole's lowest corner at
    the end of the lift (m) and its lever-rule share of the weight at the start and end of the shift."""

    base: str
    other: str
    stand: np.ndarray
    pose: tuple[float, float, float]
    shift: Part
    progress: np.ndarray
    lift: Part
    chain: ClosedChain
    raise_ticks: int = 0  # the lift's first ticks: the free sole straight up (then to the start in the air)
    double_margin_m: float = math.nan
    single_margin_m: float = math.nan
    lift_end_m: float = math.nan
    share: tuple[float, float] = (math.nan, math.nan)
    torque_ratio: float = math.nan  # peak joint torque / effort limit over every tick (nan: no effort limits)
    problems: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return float(self.shift.t[-1] + self.lift.t[-1])

    def summary(self) -> dict:
        """What run.json keeps of it."""
        return {"shift_s": float(self.shift.t[-1]), "lift_s": float(self.lift.t[-1]),
                "shift_ticks": len(self.shift.t), "lift_ticks": len(self.lift.t),
                "free_sole_pose": list(self.pose), "min_double_support_margin_mm": 1000 * self.double_margin_m,
                "min_single_support_margin_mm": 1000 * self.single_margin_m,
                "planned_share_start": self.share[0], "planned_share_end": self.share[1],
                "peak_torque_ratio": self.torque_ratio}  # fmt: skip


def quintic(tau: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """σ, σ', σ'' of the rest-to-rest quintic at τ ∈ [0, 1] (derivatives in τ)."""
    tau = np.clip(tau, 0.0, 1.0)
    return (10 * tau**3 - 15 * tau**4 + 6 * tau**5, 30 * tau**2 - 60 * tau**3 + 30 * tau**4,
            60 * tau - 180 * tau**2 + 120 * tau**3)  # fmt: skip


def _timing(model: RobotModel, dq_ds: np.ndarray, speed: tuple[float, float, float]) -> np.ndarray:
    """Tick times of a part whose path has slopes dq/ds (S, nq) over s ∈ [0, 1]: the quintic's peak speed (1.875
    × the slope) within SPEED_SHARE of the velocity limits, at least MIN_PART_S, times a stretch, in whole ticks;
    `speed`: (the executor's velocity limit in rad/s, its rate in Hz, the stretch)."""
    velocity_limit, rate_hz, stretch = speed
    vmax = SPEED_SHARE * np.minimum(np.asarray(model.velocity_limit, dtype=float), velocity_limit)
    d = stretch * max(MIN_PART_S, 1.875 * float((np.abs(dq_ds) / vmax).max()))
    n = math.ceil(d * rate_hz - 1e-9)
    return np.arange(n + 1) / rate_hz


def wrench_at_rest(model: RobotModel, base: str, params: str, q: ca.SX) -> ca.SX:
    """(Fz, Mx, My) of the robot at rest in posture q on the base sole (design parameters)."""
    z = ca.SX.zeros(model.nq)
    Y = dyn.base_wrench_regressor_function(model, base, params)(q, z, z)[[2, 3, 4], :]
    return Y @ ca.DM(dyn.standard_parameters(model, params))


def _posture(
    model: RobotModel, chain: ClosedChain, near: np.ndarray, polygon, margin: float, share: float | None
) -> np.ndarray | None:
    """The posture nearest `near` with the free sole at its ground pose and the CoM `margin` inside `polygon`
    (and, with `share`, at that lever-rule share of the weight on the free sole); None when IPOPT finds none."""
    q = ca.SX.sym("q", model.nq)
    c, _ = functions(model, chain)[0](q)
    w = wrench_at_rest(model, chain.base, chain.params, q)
    zmp = zmp_rows(w, polygon, margin)
    g = [c, zmp]
    lo, hi = [np.zeros(6), np.full(zmp.numel(), -np.inf)], [np.zeros(6), np.zeros(zmp.numel())]
    if share is not None:  # s0 + gx·x + gy·y = share, times Fz (linear in the wrench)
        s0 = lever_share(model, np.zeros(2), chain_pose(chain), chain.base)
        gx = lever_share(model, np.array([1.0, 0.0]), chain_pose(chain), chain.base) - s0
        gy = lever_share(model, np.array([0.0, 1.0]), chain_pose(chain), chain.base) - s0
        g.append((s0 - share) * w[0] - gx * w[2] + gy * w[1])
        lo.append(np.zeros(1))
        hi.append(np.zeros(1))
    lbx, ubx = model.sampling_bounds()
    lbx, ubx = lbx + POSTURE_ROOM, ubx - POSTURE_ROOM
    # bound_relax_factor 0: IPOPT's default relaxation returned postures up to 1e-8 rad past a joint limit
    solver = ca.nlpsol("weight_shift_posture", "ipopt", {"x": q, "f": ca.sumsqr(q - near), "g": ca.vertcat(*g)},
                       {"ipopt.print_level": 0, "print_time": False, "ipopt.sb": "yes",
                        "ipopt.bound_relax_factor": 0.0})  # fmt: skip
    with interruptible():
        sol = solver(
            x0=np.clip(near, lbx, ubx), lbx=lbx, ubx=ubx, lbg=np.concatenate(lo), ubg=np.concatenate(hi)
        )
    if not solver.stats()["success"]:
        return None
    return np.asarray(sol["x"]).ravel()


def chain_pose(chain: ClosedChain) -> tuple[float, float, float]:
    """The held sole's ground pose (x, y, yaw) of a chain."""
    R, p = chain.target_R, chain.target_p
    return float(p[0]), float(p[1]), float(math.atan2(R[1, 0], R[0, 0]))


def _ground_chain(model: RobotModel, base: str, params: str, pose, nominal: np.ndarray) -> ClosedChain:
    """The closed chain holding the free sole flat at its ground pose; the six joints nearest it dependent."""
    coords, other = chain_coordinates(model, base)
    if len(coords) < 7:
        raise DataError(f"the chain between the soles has {len(coords)} joints: a weight shift needs ≥ 7")
    dep = tuple(coords[-6:])
    x, y, yaw = pose
    R = np.array([[math.cos(yaw), -math.sin(yaw), 0.0], [math.sin(yaw), math.cos(yaw), 0.0], [0.0, 0.0, 1.0]])
    ind = tuple(k for k in range(model.nq) if k not in dep)
    return ClosedChain(base, other, params, ind, dep, R, np.array([x, y, 0.0]), np.asarray(nominal, float))


def _hull(model: RobotModel, base: str, other: str, pose):
    """Both soles' rectangles flat on the ground (the free sole at `pose`): their convex hull."""
    x, y, yaw = pose
    R = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
    free = sole_corners(model, other)[:, :2] @ R.T + np.array([x, y])
    return MultiPoint(np.vstack([np.asarray(sole_polygon(model, base).exterior.coords), free])).convex_hull


def _shift_part(model, chain, q0, q1, speed) -> tuple[Part, np.ndarray]:
    """Double support from q0 to q1: the independent joints along the straight line, the dependent ones closing
    the chain (exact q̇, q̈ from the velocity and acceleration constraints)."""
    ind = list(chain.independent)
    s = np.linspace(0.0, 1.0, 201)
    path = solve_along(model, chain, q0[ind] + s[:, None] * (q1 - q0)[ind], s, q0)
    t = _timing(model, np.gradient(path, s, axis=0), speed)
    sig, dsig, ddsig = quintic(t / t[-1])
    T = t[-1]
    dI = (q1 - q0)[ind]
    q = solve_along(model, chain, q0[ind] + sig[:, None] * dI, sig, q0)
    qd, qdd = dependent_rates(model, chain, q, (dsig / T)[:, None] * dI, (ddsig / T**2)[:, None] * dI)
    return Part(t, q, qd, qdd), sig


def _raise_part(model, chain, q0, lift, speed) -> Part | None:
    """The free sole straight up by `lift`, flat, from q0 (on the ground): the joints between it and the body
    alone move (Newton on the foot constraint with the target raised); None when it cannot be reached."""
    fc, fb = functions(model, chain)
    dep = list(chain.dependent)
    ez = np.zeros(6)
    ez[2] = 1.0

    def close(h: float, q: np.ndarray) -> np.ndarray | None:
        q = q.copy()
        for _ in range(50):
            c, C = fc(q)
            c = np.asarray(c).ravel() - h * ez
            if np.abs(c).max() < 1e-11:
                return q
            q[dep] -= np.linalg.solve(np.asarray(C)[:, dep], c)
        return None

    hs = np.linspace(0.0, lift, 41)
    path, q = [], q0
    for h in hs:
        if (q := close(h, q)) is None:
            return None
        path.append(q)
    t = _timing(model, np.gradient(np.array(path), hs / lift, axis=0), speed)
    sig, dsig, ddsig = quintic(t / t[-1])
    T = t[-1]
    q_out, qd, qdd = np.empty((len(t), model.nq)), np.zeros((len(t), model.nq)), np.zeros((len(t), model.nq))
    q = q0
    for k, (s, v, a) in enumerate(zip(sig, dsig * lift / T, ddsig * lift / T**2, strict=True)):
        if (q := close(lift * s, q)) is None:
            return None
        _, C = fc(q)
        CD = np.asarray(C)[:, dep]
        qd[k, dep] = np.linalg.solve(CD, ez * v)
        bias = np.asarray(fb(q, qd[k])).ravel()
        qdd[k, dep] = np.linalg.solve(CD, ez * a - bias)
        q_out[k] = q
    return Part(t, q_out, qd, qdd)


def _joint_part(model, q0, q1, speed) -> Part:
    """Every joint along the straight line from q0 to q1."""
    t = _timing(model, (q1 - q0)[None, :], speed)
    T = t[-1]
    sig, dsig, ddsig = quintic(t / T)
    dq = q1 - q0
    return Part(t, q0 + sig[:, None] * dq, (dsig / T)[:, None] * dq, (ddsig / T**2)[:, None] * dq)


def reverse(part: Part) -> Part:
    """The part played backwards: the same postures and, at rest at both ends, the same ZMP (q̈ keeps its sign)."""
    return Part(part.t[-1] - part.t[::-1], part.q[::-1], -part.qd[::-1], part.qdd[::-1])


def part_slice(part: Part, start: int, stop: int | None = None) -> Part:
    """Ticks start … stop of a part, their times from the first."""
    t = part.t[start:stop]
    return Part(t - t[0], part.q[start:stop], part.qd[start:stop], part.qdd[start:stop])


def _join(a: Part, b: Part) -> Part:
    """b after a (b's first tick, a's last, dropped)."""
    return Part(np.r_[a.t, a.t[-1] + b.t[1:]], np.vstack([a.q, b.q[1:]]), np.vstack([a.qd, b.qd[1:]]),
                np.vstack([a.qdd, b.qdd[1:]]))  # fmt: skip


def plan_weight_shift(
    model: RobotModel,
    base: str,
    params: str,
    start: np.ndarray,
    lift: float,
    margin: float,
    velocity_limit: float,
    rate_hz: float,
    max_lift: float | None = None,
    max_tilt: float | None = None,
    torque_fraction: float = 1.0,
) -> WeightShift:
    """The transition from standing on both soles to the single-support plan's start posture `start` (at rest),
    standing on `base` with the free sole lifted `lift` m; ZMP `margin` m inside the soles; joint torques within
    the efforts × `torque_fraction`. Raises DataError (one line, saying why) when there is none."""
    start = np.asarray(start, dtype=float)
    pose = tuple(float(v) for v in other_pose(model, start, params, base))
    chain = _ground_chain(model, base, params, pose, start)
    other = chain.other
    why = f"no weight shift onto the {base} sole"
    hull = _hull(model, base, other, pose)
    stand = _posture(model, chain, start, hull, margin, STAND_SHARE)
    if stand is None:
        raise DataError(
            f"{why}: no posture stands on both soles (the {other} sole flat at x = {pose[0] * 1000:.0f} mm, "
            f"y = {pose[1] * 1000:.0f} mm) with its weight shared"
        )
    chain = _ground_chain(model, base, params, pose, stand)
    shifted = _shifted(model, chain, start, margin)
    if shifted is None:
        raise DataError(
            f"{why}: no posture with the {other} sole on the ground puts the CoM "
            f"{(margin + ZMP_BUFFER) * 1000:.0f} mm inside the {base} sole"
        )
    speeds = (velocity_limit, rate_hz)
    sgl = (base, other, params, margin, max_lift, max_tilt, torque_fraction)
    (shift, progress), problems = _slowest_needed(
        lambda sp: _shift_part(model, chain, stand, shifted, sp),
        lambda pt: _double(model, chain, pt[0], params, margin, torque_fraction),
        *speeds,
    )
    if not problems:
        up, problems = _slowest_needed(
            lambda sp: _raise_part(model, chain, shifted, lift, sp),
            lambda pt: _single(model, pt, *sgl),
            *speeds,
        )
    if not problems:
        to_start, problems = _slowest_needed(
            lambda sp: _joint_part(model, up.q[-1], start, sp), lambda pt: _single(model, pt, *sgl), *speeds
        )
    if problems:
        raise DataError(f"{why}: {problems[0]}")
    ws = WeightShift(base, other, stand, pose, shift, progress, _join(up, to_start), chain, len(up.t))
    check_weight_shift(model, ws, params, margin, max_lift, max_tilt, torque_fraction)
    return ws


def _shifted(model: RobotModel, chain: ClosedChain, start: np.ndarray, margin: float) -> np.ndarray | None:
    """Where the shift ends: the posture nearest `start` with the free sole held and the CoM margin +
    SHIFT_BUFFER (else + ZMP_BUFFER: a small sole) inside the base sole; None when there is none."""
    for extra in (SHIFT_BUFFER, ZMP_BUFFER):
        shifted = _posture(model, chain, start, sole_polygon(model, chain.base), margin + extra, None)
        if shifted is not None:
            return shifted
    return None


def shifted_posture(model: RobotModel, base: str, params: str, start: np.ndarray, margin: float):
    """`_shifted` for a single-support start posture: the free sole flat at its ground pose under `start` (the
    single-support designer's first guess of the posture its start rows ask for); None when there is none."""
    pose = tuple(float(v) for v in other_pose(model, start, params, base))
    return _shifted(model, _ground_chain(model, base, params, pose, start), start, margin)


def _slowest_needed(make, check, velocity_limit: float, rate_hz: float):
    """The fastest of a part's STRETCH timings whose ticks pass `check` (problems: empty); else the slowest."""
    for stretch in STRETCH:
        part = make((velocity_limit, rate_hz, stretch))
        problems = check(part)
        if not problems:
            break
    return part, problems


def _double(
    model: RobotModel, chain: ClosedChain, part: Part, params: str, margin: float, torque_fraction: float
) -> list[str]:
    """The double-support check of the planner and `plan check` (`verify.double_support_balance`) at every tick,
    and its joint torques."""
    problems: list[str] = []
    double_support_balance(model, chain, part.q, part.qd, part.qdd, params, problems, margin)
    problems += _torque_problems(_double_torques(model, chain, part, params), model, torque_fraction, part.t)
    return [f"shifting, {p}" for p in problems]


def _single(model: RobotModel, part: Part | None, base: str, other: str, params: str, margin: float,
            max_lift: float | None, max_tilt: float | None, torque_fraction: float) -> list[str]:  # fmt: skip
    """The single-support check of every tick (`robots.one_sole`, as `drivers.single_support_stream`), the free
    sole's corners above the ground (it leaves it) and within the plan's ceiling and tilt, and its joint torques."""
    if part is None:
        return [f"the {other} sole cannot be lifted straight up from the ground"]
    bal = one_sole(model, part.q, part.qd, part.qdd, base, other, params)
    torques = _torque_problems(_single_torques(model, part, base, params), model, torque_fraction, part.t)
    return _single_problems(bal, base, other, margin, max_lift, max_tilt) + [f"lifting, {p}" for p in torques]


def _double_torques(model: RobotModel, chain: ClosedChain, part: Part, params: str) -> np.ndarray | None:
    """|τ| / effort per tick and joint (K, nq) in double support, for the split of the load that needs least
    (`verify.double_support_split`); None without effort limits."""
    if not np.all(np.isfinite(model.effort_limit)):
        return None
    s = double_support_split(model, chain, part.q, part.qd, part.qdd, params, model.effort_limit)
    return np.abs(s.tau) / model.effort_limit


def _single_torques(model: RobotModel, part: Part, base: str, params: str) -> np.ndarray | None:
    """|τ| / effort per tick and joint (K, nq) standing on `base` alone (inverse dynamics); None without limits."""
    if not np.all(np.isfinite(model.effort_limit)):
        return None
    return np.abs(dyn.rnea(model, part.q, part.qd, part.qdd, params, base)) / model.effort_limit


def _torque_problems(
    ratio: np.ndarray | None, model: RobotModel, fraction: float, t: np.ndarray
) -> list[str]:
    """The tick and joint that needs more than `fraction` of its effort, if any."""
    if ratio is None or ratio.max() <= fraction + 1e-9:
        return []
    k, j = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    return [f"joint {model.joint_names[j]} needs {100 * ratio[k, j]:.1f} % of its effort limit at t = {t[k]:.2f} s "
            f"(the plan allows {100 * fraction:.0f} %)"]  # fmt: skip


def _single_problems(bal, base: str, other: str, margin: float, max_lift, max_tilt) -> list[str]:
    """The lift's problems (the free sole leaves the ground: its corners above 0), as the stream's check."""
    return one_sole_problems(bal, base, other, margin, 0.0, max_lift, max_tilt, lambda k: "lifting, ", 1e-9)


def check_weight_shift(
    model: RobotModel,
    ws: WeightShift,
    params: str,
    margin: float,
    max_lift: float | None = None,
    max_tilt: float | None = None,
    torque_fraction: float = 1.0,
) -> list[str]:
    """Every tick of a transition verified with the shared checks; fills ws's figures and problems."""
    s, lf = ws.shift, ws.lift
    problems: list[str] = []
    balance = double_support_balance(model, ws.chain, s.q, s.qd, s.qdd, params, problems, margin)
    ws.double_margin_m = balance[0]
    shift_tau = _double_torques(model, ws.chain, s, params)
    problems += _torque_problems(shift_tau, model, torque_fraction, s.t)
    ws.problems = [f"shifting, {p}" for p in problems]
    bal = one_sole(model, lf.q, lf.qd, lf.qdd, ws.base, ws.other, params)
    ws.problems += _single_problems(bal, ws.base, ws.other, margin, max_lift, max_tilt)
    lift_tau = _single_torques(model, lf, ws.base, params)
    ws.problems += [f"lifting, {p}" for p in _torque_problems(lift_tau, model, torque_fraction, lf.t)]
    if shift_tau is not None and lift_tau is not None:
        ws.torque_ratio = float(max(shift_tau.max(), lift_tau.max()))
    ws.single_margin_m, ws.lift_end_m = float(bal.margin.min()), float(bal.lowest[-1])
    shares = [lever_share(model, c, ws.pose, ws.base) for c in _zmp(model, ws.base, params, s.q[[0, -1]])]
    ws.share = (float(shares[0]), float(shares[1]))
    return ws.problems


def _zmp(model: RobotModel, base: str, params: str, q: np.ndarray) -> np.ndarray:
    """The CoM's ground projection (the ZMP at rest) of postures q (K, nq), base frame."""
    from robots.dynamics import zmp_of

    z = np.zeros_like(q)
    w = dyn.base_wrench_regressor(model, q, z, z, base, params) @ dyn.standard_parameters(model, params)
    return zmp_of(w)
