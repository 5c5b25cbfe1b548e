"""Execute a posture plan: pre-flight safety checks, setpoint streaming, settle/hold, averaging, resume.

Every setpoint of a move on the ground is computed and checked before anything is sent (`drivers.setpoints`:
the shared posture check on postures, waypoints and the interpolated ticks); moves between placements are
made with the robot lifted. Each posture must settle (within `settle_attempts` windows) before it is held;
the last part of the hold (default: last half) is averaged into one row of the static recording. Ctrl-C, a
link silent for `link_timeout_s`, a posture that does not settle or a safety trip stop streaming and hold.
Ticks, settles, holds and timestamps run on the bench clock (`drivers.clock`; the emulated twin's own time).

With `[executor] gravity_compensation`, every goal sent while the robot stands (settle, hold, and each setpoint of
a move on the ground) is offset by the gravity feed-forward of `drivers.gravity` (Δq = τ_ff / kp), so the
position servos hold the commanded posture instead of sagging into internal moments that rock a sole. Tracking
errors, the recording and every check still refer to the commanded posture, never to the offset goal. Moves in
the air get no offset (no ground wrench; the operator sets the robot down in the commanded posture).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from shapely.geometry import MultiPoint

from drivers.clock import HOST_CLOCK, Clock
from drivers.config import RobotConfig
from drivers.gravity import goal_offsets
from drivers.link import LinkTimeout, Silence, link_meta
from drivers.realtime import steady_gc
from drivers.recorder import RunRecorder
from drivers.run_files import left_to_run
from drivers.setpoints import (  # noqa: F401 (profiles re-exported)
    Move,
    RunCheck,
    air_move,
    check_run,
    cosine_profile,
    ground_move,
    move_time_at_limit,
    servo_speed_limits,
    servo_speed_problems,
    waypoint_profile,
)
from drivers.wbb.geometry import MIN_COP_KG, G, board_poses_for, cells_in_base
from formats.errors import DataError, DeviceError, PoiseError
from formats.plan import Plan
from robots.stance import foot_corners, other_pose, placement_deviation, signed_margin
from robots.tree import RobotModel

SETTLE_STILL_S = 0.3  # s (robot time): a posture is still when no joint moved settle_tol_deg over this long
STILL_TICKS = 5  # ... and over at least this many settle ticks (a compressed bench's window is K× shorter)
ADAPT_FROM_M, ADAPT_FROM_RAD = 5e-4, np.radians(0.1)  # measured placement this close: the pre-flight move
ADAPT_LIMIT_M, ADAPT_LIMIT_RAD = 0.02, np.radians(5.0)  # farther than this: stop rather than adapt
TIP_TOL = 0.005  # m: measured CoP this far outside the support polygon ...
TIP_HOLD_S = 0.5  # s (robot time): ... for this long = tipping
# s (robot time): after the robot is set down, the gravity feed-forward is ramped in over this long — a step in
# every goal at once jolts the soles (measured on the twin: 0.8-1.6 mm slide at once, ≤ 0.4 mm over 0.1-0.2 s;
# slower ramps let the legs sag onto a sole's edge first)
FEEDFORWARD_RAMP_S = 0.2
FALL_HOLD_S = (
    0.3  # s (robot time): boards carrying < half the weight this long = falling (a late report is not)
)
# s (bench clock): a board without a report for this long is reconnecting or lost — its last report is not the
# load now (it read an empty board with the robot in the air; taken with the other board's, a fall was reported)
STALE_S = 0.25
# a tick later than this many periods is not caught up: the servos held their goal meanwhile, and the missed
# setpoints sent back to back would step the motion on by its velocity × the delay (a 15.5° tracking trip after a
# host stalled 0.5 s, measured on the arm twin at 3×); the schedule restarts from now, the motion where it stopped
LATE_PERIODS = 5.0


class SafetyTrip(PoiseError):
    """The run was stopped for safety (tracking error, lost board); completed postures are kept."""


def link_label(link) -> str:
    """The link as its endpoint names it (`dxl:PORT`, `serial:PORT`), for a one-line message."""
    scheme = {"DynamixelLink": "dxl", "FramedLink": "serial"}.get(type(link).__name__)
    port = getattr(link, "port_name", None)
    return f"{scheme}:{port}" if scheme and port else type(link).__name__


def check_readings(link, names: list[str], **readings) -> None:
    """Every run's reading of its robot passes here (the executors' `_read`/`_command`, the PWM stream's
    exchange): DeviceError, as for a link fault, on the first non-finite value of a reading (`angle=q`,
    `velocity=qd`, `current=i`; None: not read), naming the joint and the link. A NaN compares False with every
    bound: unchecked, it neither trips the tracking error nor counts as settled, and the robot keeps moving. A servo
    without a current sensor (a NaN in the link's `current_units_a`, e.g. the XL430-W250) reads NaN by design.
    The units used are those of the joints in `names`, in that order (`current_units_a` holds one per servo, in
    `link.servos` order; a link without servo names: one per name), so the PWM stream's single joint is checked
    against its own servo's; units that cannot be matched to `names` allow no NaN."""
    for what, values in readings.items():
        if values is None:
            continue
        ok = np.isfinite(values)  # every tick: one small array, the message only on a fault
        if what == "current" and not ok.all():
            units = getattr(link, "current_units_a", None)
            units = None if units is None else np.atleast_1d(np.asarray(units, dtype=float))
            order = [s.name for s in getattr(link, "servos", None) or []]
            if units is not None and order and len(order) == len(units):
                at = {name: k for k, name in enumerate(order)}
                units = units[[at[n] for n in names]] if all(n in at for n in names) else None
            if units is not None and len(units) == len(np.atleast_1d(ok)):
                ok = ok | np.isnan(units)
        if ok.all():
            continue
        j = int(np.flatnonzero(~np.atleast_1d(ok))[0])
        v = np.atleast_1d(np.asarray(values, dtype=float))[j]
        raise DeviceError(f"{link_label(link)}: {names[j]} read a non-finite {what} ({v}); streaming stopped")


# ------------------------------------------------------------------ pre-flight


def preflight(plan: Plan, model: RobotModel, config: RobotConfig) -> list[str]:
    """Everything that makes the plan or config unsafe to run (empty = fine). Nothing is sent before this passes."""
    return check_run(plan, model, config).problems


def check_servo_limits(
    link, joint_names: list[str], stages: list[tuple[str, np.ndarray, np.ndarray | None]]
) -> None:
    """Refuse, before the first command, a goal outside the position limits the link read from its servos (a
    link without them: nothing to check). `stages`: (what, goals (n, nq) rad as sent, each goal's robot time in s
    or None for a single goal) — the refusal names the joint, the stage and time, and the limit."""
    outside = getattr(link, "outside_limits", None)
    if outside is None:
        return
    for what, goals, times in stages:
        hit = outside(goals)
        if hit is None:
            continue
        row, j, lo, hi = hit
        when = f" at t = {float(times[row]):.2f} s" if times is not None else ""
        goal = float(np.atleast_2d(goals)[row, j])
        raise DataError(
            f"plan refused before moving: {joint_names[j]} goal {goal:.4f} rad ({math.degrees(goal):.1f} deg) "
            f"{what}{when} is outside its servo's position limits [{lo:.4f}, {hi:.4f}] rad "
            f"([{math.degrees(lo):.1f}, {math.degrees(hi):.1f}] deg); nothing moved"
        )


def _ticks_per_rad(link) -> dict[str, float]:
    """Each joint's configured ticks per radian on the link's servos (a geared joint's Velocity Limit scales by it)."""
    return {s.name: s.ticks_per_rad for s in getattr(link, "servos", []) if hasattr(s, "ticks_per_rad")}


def refuse_servo_speeds(link, joint_names: list[str], peak_rad_s, said=None, fix=None) -> None:
    """Refuse, before the first command, to command a joint faster than its servo's Velocity Limit (44) as the link
    read it on connect (`drivers.setpoints.servo_speed_problems`; a link without registers: nothing to check):
    the first problem, as the servo-limit refusal says it."""
    info = getattr(link, "servo_info", None)
    if not info:
        return
    kw = {} if fix is None else {"fix": fix}
    problems = servo_speed_problems(
        info, joint_names, peak_rad_s, said, ticks_per_rad=_ticks_per_rad(link), **kw
    )
    if problems:
        more = f" ({len(problems)} servos in all)" if len(problems) > 1 else ""
        raise DataError(f"plan refused before moving: {problems[0]}{more}; nothing moved")


def check_servo_speed(link, joint_names: list[str], velocity_limit: float) -> None:
    """A posture run's moves are stretched to `[executor] velocity_limit` (any joint): refused, before the first
    command, when that exceeds a servo's Velocity Limit (44)."""
    # the slowest servo's register at its joint: the highest velocity_limit every servo allows
    limits = servo_speed_limits(getattr(link, "servo_info", None), joint_names, _ticks_per_rad(link))
    most = min((at_joint for _, at_joint in limits.values()), default=None)
    most = "" if most is None else f" to at most {math.floor(most * 1000) / 1000:.3f} rad/s"
    refuse_servo_speeds(
        link,
        joint_names,
        np.full(len(joint_names), float(velocity_limit)),
        lambda joint, peak: f"[executor] velocity_limit {velocity_limit:g} rad/s of the robot configuration",
        f"lower [executor] velocity_limit{most}",
    )


# ------------------------------------------------------------------ running


@dataclass
class Progress:
    position: int  # 1-based position among the postures to run
    total: int
    posture: int
    placement: int
    phase: str  # tare | lift | move | place | settle | hold | done | stopped
    phase_elapsed: float = 0.0  # robot-time seconds
    phase_total: float = 0.0
    cop: np.ndarray | None = None  # measured CoP (m, base frame)
    margin: float | None = None  # measured CoP's distance inside the support polygon (m)
    total_kg: float | None = None


@dataclass
class PostureResult:
    posture: int
    placement: int
    q: np.ndarray
    cop: np.ndarray
    cop_sd: np.ndarray
    force_n: float
    samples: int
    holds: int
    report: dict = field(
        default_factory=dict
    )  # how it went: tracking, settle time, slip, margin (units in keys)


@dataclass
class RunResult:
    completed: list[PostureResult] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    tick_periods: list[float] = field(default_factory=list)
    late: list[float] = field(default_factory=list)
    board_stats: list = field(default_factory=list)
    # when each phase began (robot-time s on the bench clock): what a bench's event log is attributed by
    timeline: list[dict] = field(default_factory=list)

    def jitter(self) -> dict:
        """Tick lateness over every tick; the period over the ticks at `rate_hz` of the bench clock (settles and
        holds — moves tick at the robot's rate, K× faster on a compressed bench)."""
        p = np.array(self.tick_periods) if self.tick_periods else np.zeros(1)
        late = np.array(self.late) if self.late else np.zeros(1)
        return {
            "ticks": len(self.late),
            "period_mean_ms": float(p.mean() * 1e3),
            "period_std_ms": float(p.std() * 1e3),
            "late_p99_ms": float(np.percentile(late, 99) * 1e3),
            "late_max_ms": float(late.max() * 1e3),
        }


class Operator:
    """What a person does between placements. The default does nothing (the robot is assumed placed)."""

    def lift(self, placement: int | None) -> None:
        pass

    def place(self, placement, right_offset, left_offset, lifted: bool = False) -> None:
        """Set the robot down for `placement`; `lifted`: on its base sole alone, the other sole in the air."""


class Executor:
    # phases whose setpoints are at the robot's rate (`setpoints.ticks`): they tick K× faster on a K× compressed
    # bench; the others at `rate_hz` of the bench clock
    ROBOT_RATE_PHASES: tuple[str, ...] = ("move",)
    JITTER_PHASES: tuple[str, ...] = ("settle", "hold")  # the steady stream whose period `jitter` reports

    def __init__(
        self,
        link,
        boards: list,
        plan: Plan,
        model: RobotModel,
        config: RobotConfig,
        recorder: RunRecorder,
        time_scale: float = 1.0,
        operator: Operator | None = None,
        progress: Callable[[Progress], None] | None = None,
        tare_s: float = 0.5,
        checked: RunCheck | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not (math.isfinite(time_scale) and time_scale > 0):
            raise DataError("--time-scale must be a positive finite number")
        self.checked = checked if checked is not None else check_run(plan, model, config)
        if self.checked.problems:  # never stream a setpoint the pre-flight check has not passed
            raise DataError(f"plan refused before moving: {self.checked.problems[0]}")
        self.link = link
        self.boards = boards
        self.plan = plan
        self.model = model
        self.cfg = config
        self.ex = config.executor
        self.rec = recorder
        # every wait, hold, settle, tick and timestamp runs on the bench clock (the host's on real hardware);
        # only the silent-link watchdog (`_command`) keeps the host clock
        self.clock = clock if clock is not None else HOST_CLOCK
        recorder.use_clock(self.clock)
        self.k = time_scale
        self.operator = operator or Operator()
        self.progress_cb = progress or (lambda p: None)
        self.tare_s = tare_s
        self.result = RunResult()
        self._latest_kg = [None] * len(boards)
        self._latest_t = [None] * len(boards)  # when each board's latest report was read (bench clock)
        self._next_tick: float | None = None
        self._last_tick: float | None = None
        self._last_phase = ""
        self._weight_kg = float(model.parameter_set(plan.params).total_mass)
        self._outside_since: float | None = None
        self._light_since: float | None = None
        self._worst: dict[str, float] = {}  # largest tracking error (deg) per phase of the current posture
        self._lifted = False  # whether the current posture's move is in the air (a new placement)
        self._min_margin = math.inf  # smallest measured CoP margin (m), averaged part of the posture's holds
        self.gravity_compensation = bool(self.ex.gravity_compensation)
        self._p_gains: np.ndarray | None = None  # the servos' Position P Gains as read back in run()
        if self.gravity_compensation and plan.postures:  # fail before moving: needs effort limits and servos
            self._offsets(plan.postures[0].q)

    def _read_gains(self) -> dict:
        """The servos' position-loop gains as they report them, with the rest of `link_meta` (the configured P gain
        is written on connect): the feed-forward's stiffness follows them (a link that cannot read them: the
        configured gain)."""
        gains = link_meta(self.link)
        if gains["servo_gains"] is not None:
            self._p_gains = np.array(
                [gains["servo_gains"][n]["p"] for n in self.model.joint_names], dtype=float
            )
        return gains

    def _offsets(self, q: np.ndarray) -> np.ndarray:
        """Goal offsets (rad) for postures q (…, nq) standing on the ground: the gravity feed-forward, or zero."""
        if not self.gravity_compensation:
            return np.zeros_like(np.asarray(q, dtype=float))
        return goal_offsets(self.model, self.cfg, q, self.plan.params, self.plan.base, self._p_gains)

    # -- plan order and resume
    def todo(self) -> list:
        postures = self.plan.postures
        left = left_to_run([p.index for p in postures], self.rec.done)
        first = len(postures) - len(left)
        self.result.skipped = [p.index for p in postures[:first]]
        return postures[first:]

    # -- streaming primitives
    def _tick(
        self,
        q_cmd: np.ndarray,
        posture: int,
        phase: str,
        store: list | None,
        offset: np.ndarray | None = None,
    ) -> np.ndarray:
        """One control tick: send q_cmd (+ `offset`, the gravity feed-forward) at the streaming rate, record q_cmd
        and the encoders, drain the boards, and trip on the tracking error |encoders − q_cmd|."""
        period = self._period(phase)
        now = self.clock.now()
        behind = 0.0 if self._next_tick is None else now - self._next_tick
        if self._next_tick is None or behind > LATE_PERIODS * period:  # first tick, or a stall
            self._next_tick = now
        self.clock.sleep_until(self._next_tick)
        t = self.clock.now()
        if self._last_tick is not None and t - self._last_tick < 0.25:
            if phase in self.JITTER_PHASES and self._last_phase in self.JITTER_PHASES:
                self.result.tick_periods.append(t - self._last_tick)
            # a stall's lateness counts too, though it is not caught up
            self.result.late.append(max(0.0, t - self._next_tick, behind))
        self._last_tick, self._last_phase = t, phase
        self._next_tick += period
        q_meas = self._command(q_cmd if offset is None else q_cmd + offset)
        self.rec.joint_row(t, posture, phase, q_cmd, q_meas)
        for i, b in enumerate(self.boards):
            b.check()
            samples = b.drain()
            if samples:
                self.rec.board_rows(samples, posture, phase)
                self._latest_kg[i], self._latest_t[i] = samples[-1].kg, samples[-1].t
                if store is not None:
                    store.append(("b", i, samples))
        if store is not None:
            store.append(("q", t, q_meas))
        err = np.degrees(np.max(np.abs(q_meas - q_cmd)))
        self._worst[phase] = max(self._worst.get(phase, 0.0), float(err))
        if phase in ("settle", "hold") and not err <= self.ex.track_trip_deg:  # a NaN trips too
            raise SafetyTrip(
                f"posture {posture}: tracking error {err:.1f} deg > {self.ex.track_trip_deg} deg"
            )
        return q_meas

    def _checked(self, q: np.ndarray) -> np.ndarray:
        """The link's reading `q` (and the currents read with it), through `check_readings`."""
        check_readings(
            self.link, self.model.joint_names, angle=q, current=getattr(self.link, "currents", None)
        )
        return q

    def _read(self) -> np.ndarray:
        """The encoders before anything is sent, checked as every tick's are."""
        return self._checked(self.link.read())

    def _command(self, q_cmd: np.ndarray) -> np.ndarray:
        """Send a setpoint, resending it while the robot is silent for less than `link_timeout_s` (`Silence`); the
        reading is checked (`check_readings`)."""
        silence = Silence(self.ex.link_timeout_s)
        while True:
            asked = time.monotonic()
            try:
                return self._checked(self.link.command(q_cmd))
            except LinkTimeout as exc:
                if silence.missed(asked):
                    raise DeviceError(
                        f"robot link timed out: no answer for {silence.seconds:.2f} s "
                        f"(link_timeout_s = {self.ex.link_timeout_s:g} s; {exc}); streaming stopped"
                    ) from exc

    def _measured_cop(self, cells: np.ndarray):
        """(CoP in the base frame, total kg) from every board's latest report; (None, None) while a board has
        none, or none for STALE_S (reconnecting: its last report is not the load now)."""
        now = self.clock.now()
        if any(t is None or now - t > STALE_S for t in self._latest_t):
            return None, None
        f = np.concatenate(self._latest_kg)
        total = float(f.sum())
        if total < MIN_COP_KG:
            return None, total
        return f @ cells / total, total

    # -- phases
    def _move(self, setpoints: np.ndarray, posture: int, on_ground: bool) -> np.ndarray:
        """Stream a checked move, one setpoint per tick (on the ground, each with its gravity feed-forward)."""
        q = None
        offsets = self._offsets(setpoints) if on_ground and len(setpoints) else [None] * len(setpoints)
        for sp, off in zip(setpoints, offsets, strict=True):
            q = self._tick(sp, posture, "move", None, off)
        return q

    def _catch_up_in_air(self, q_to: np.ndarray, posture: int, q: np.ndarray) -> np.ndarray:
        """Hold the air move's last setpoint until the lagging servos are within half the tracking trip of it (at
        most settle_timeout_s): the operator then sets down a robot in its posture, and the settle that follows
        does not trip on the air move's lag (measured: 16.5° of θ7 at the end of a 1.25 ms-tick move, 8×)."""
        t0 = self.clock.now()
        limit = math.radians(self.ex.track_trip_deg / 2)
        while np.max(np.abs(q - q_to)) > limit and self.clock.now() - t0 < self.ex.settle_timeout_s / self.k:
            q = self._tick(q_to, posture, "move", None)
        return q

    def _ground_move(self, prev, p, q_meas: np.ndarray) -> Move:
        """The pre-flight move to p, or — when the encoders put the other sole away from its planned placement
        (the robot settled, a sole slid) — the same path adapted to the measured placement and checked again
        with the same checks before anything is sent."""
        planned = np.asarray(self.plan.placement(p.placement).other_foot, dtype=float)
        actual = other_pose(self.model, q_meas, self.plan.params, self.plan.base)
        dev = np.r_[placement_deviation(planned, actual)]
        if dev[0] < ADAPT_FROM_M and dev[1] < ADAPT_FROM_RAD:
            return self.checked.moves[p.index]
        if dev[0] > ADAPT_LIMIT_M or dev[1] > ADAPT_LIMIT_RAD:
            raise SafetyTrip(
                f"posture {p.index}: the other sole is {dev[0] * 1000:.1f} mm, {np.degrees(dev[1]):.1f} deg from "
                f"its placement (measured); run stopped, {len(self.result.completed)} completed posture(s) kept"
            )
        mv, issues = ground_move(self.model, self.plan, prev, p, self.cfg, self.checked.margin,
                                 start=q_meas, pose=actual)  # fmt: skip
        if issues:
            raise SafetyTrip(
                f"{issues[0]} (adapted to the measured placement); run stopped, "
                f"{len(self.result.completed)} completed posture(s) kept"
            )
        return mv

    def _still_window(self) -> float:
        """How long (bench clock) every joint must stay put to count as still: SETTLE_STILL_S of robot time, and at
        least STILL_TICKS settle ticks — on a compressed bench 0.3 s / K can be shorter than one tick."""
        return max(SETTLE_STILL_S / self.k, STILL_TICKS * self._period("settle"))

    def _period(self, phase: str) -> float:
        """Bench-clock seconds between ticks of a phase: `rate_hz` of robot time in ROBOT_RATE_PHASES, else of the
        bench clock."""
        return 1.0 / (self.ex.rate_hz * (self.k if phase in self.ROBOT_RATE_PHASES else 1.0))

    def _settle(self, q_to, posture, ramp: bool = False) -> tuple[bool, np.ndarray]:
        """Command the posture until it is settled (True) or settle_timeout_s passes. Settled: every joint within
        settle_tol_deg of the target, or — a position servo under load holds with a steady offset — every joint
        still (moved < settle_tol_deg over SETTLE_STILL_S) within settle_offset_deg of the target. With `ramp`
        (just set down) the gravity feed-forward grows over FEEDFORWARD_RAMP_S and nothing settles before."""
        tol, offset = math.radians(self.ex.settle_tol_deg), math.radians(self.ex.settle_offset_deg)
        t0 = self.clock.now()
        q = q_to
        recent: list[tuple[float, np.ndarray]] = []
        feedforward = self._offsets(q_to)
        ramp = ramp and self.gravity_compensation
        window = self._still_window()
        while (now := self.clock.now()) - t0 < self.ex.settle_timeout_s / self.k:
            share = min(1.0, (now - t0) * self.k / FEEDFORWARD_RAMP_S) if ramp else 1.0
            q = self._tick(q_to, posture, "settle", None, share * feedforward)
            if share < 1.0:
                continue
            err = float(np.max(np.abs(q - q_to)))
            if err < tol:
                return True, q
            recent = [(t, x) for t, x in recent if now - t <= window] + [(now, q)]
            still = now - recent[0][0] >= 0.9 * window
            if still and err < offset and np.ptp([x for _, x in recent], axis=0).max() < tol:
                return True, q
        return False, q

    def _hold(self, p, cells, polygon, index, total) -> list:
        store: list = []
        dur = p.hold_s / self.k
        averaged_from = dur * (1.0 - self.ex.average_fraction)
        t0 = self.clock.now()
        offset = self._offsets(p.q)
        while (el := self.clock.now() - t0) < dur:
            self._tick(p.q, p.index, "hold", store, offset)
            cop, kg = self._measured_cop(cells)
            margin = float(signed_margin(polygon, cop[None])[0]) if cop is not None else None
            # the report's margin is the averaged part's: earlier, a loaded host may still be reading the boards'
            # reports from before the set-down (one board's new load with the other's old one)
            if margin is not None and el >= averaged_from:
                self._min_margin = min(self._min_margin, margin)
            self._check_standing(p, cop, margin, kg)
            self._progress(
                Progress(index, total, p.index, p.placement, "hold", el * self.k, p.hold_s, cop, margin, kg)
            )
        return store

    def _check_standing(self, p, cop, margin, kg) -> None:
        """Trip when the boards say the robot is not standing: the measured CoP leaves the support polygon
        (tipping over an edge) or the load falls below half the robot's weight (falling, lifted)."""
        now = self.clock.now()
        light = kg is not None and kg < 0.5 * self._weight_kg  # (an empty board set gives no CoP but a load)
        if not light:
            self._light_since = None
        elif self._light_since is None:
            self._light_since = now
        if light and (now - self._light_since) * self.k >= FALL_HOLD_S:
            raise SafetyTrip(
                f"posture {p.index}: boards carry {kg:.1f} kg of the robot's {self._weight_kg:.1f} kg (falling?); "
                f"run stopped, {len(self.result.completed)} completed posture(s) kept"
            )
        outside = cop is not None and margin is not None and margin < -TIP_TOL
        if not outside:
            self._outside_since = None
            return
        if self._outside_since is None:
            self._outside_since = now
        # a sway shows the boards' CoP briefly outside (the cells sit below the plate: h·Fx/Fz); tipping lasts
        if (now - self._outside_since) * self.k >= TIP_HOLD_S:
            raise SafetyTrip(
                f"posture {p.index}: measured CoP {-margin * 1000:.1f} mm outside the support polygon (tipping); "
                f"run stopped, {len(self.result.completed)} completed posture(s) kept"
            )

    def _progress(self, pr: Progress, phase: str | None = None) -> None:
        """Report progress; log when a phase begins (robot time) — `phase` names it where it differs from the
        progress phase (a move on the ground: "transition")."""
        phase = phase or pr.phase
        last = self.result.timeline[-1] if self.result.timeline else None
        if last is None or (last["posture"], last["phase"]) != (pr.posture, phase):
            self.result.timeline.append(
                {"t_s": self.clock.now() * self.k, "posture": int(pr.posture), "placement": int(pr.placement),
                 "phase": phase}
            )  # fmt: skip
        self.progress_cb(pr)

    def _posture_report(self, p, res: PostureResult, settle_s: float) -> dict:
        """How the posture went, from the encoders and boards only (what real hardware reports): largest
        tracking error while moving and holding, settle time, the other sole's slip from its planned placement
        (forward kinematics of the held angles), smallest measured CoP margin over the averaged part of the hold."""
        planned = np.asarray(self.plan.placement(p.placement).other_foot, dtype=float)
        actual = other_pose(self.model, res.q, self.plan.params, self.plan.base)
        yaw = float(np.angle(np.exp(1j * (actual[2] - planned[2]))))
        return {
            "posture": int(p.index),
            "move_tracking_max_deg": self._worst.get("move", 0.0),
            # a move in the air to a new placement (the robot lifted): its servos lag the fast, unloaded swing
            "move_lifted": bool(self._lifted),
            "hold_tracking_max_deg": self._worst.get("hold", 0.0),
            "settle_s": float(settle_s),
            "slip_mm": float(1000 * np.hypot(*(actual[:2] - planned[:2]))),
            "slip_deg": float(np.degrees(abs(yaw))),
            "min_margin_mm": float(1000 * self._min_margin) if math.isfinite(self._min_margin) else None,
            "board_kg": list(getattr(self, "_board_kg", [])),  # a sole carrying little lifts or slides easily
        }

    def _average(self, p, store, cells, t_end) -> PostureResult | None:
        window = self.ex.average_fraction * p.hold_s / self.k
        t_start = t_end - window
        qs = np.array([q for kind, t, q in store if kind == "q" and t >= t_start])
        per_board: list[list] = [[] for _ in self.boards]
        for _, i, samples in (x for x in store if x[0] == "b"):
            per_board[i].extend(samples)
        means, counts = [], []
        for ss in per_board:
            ts = np.array([s.t for s in ss])
            sel = [s for s in ss if s.t >= t_start]
            if len(ts) < 3 or len(sel) < 2:
                return None
            dt = float(np.median(np.diff(ts)))
            if len(sel) * dt < self.ex.min_board_coverage * window:
                return None  # board lost for too much of the window: hold again
            means.append(np.mean([s.kg for s in sel], axis=0))
            counts.append(len(sel))
        f = np.concatenate(means)
        self._board_kg = [float(m.sum()) for m in means]
        total = float(f.sum())
        if total < 0.5 or len(qs) == 0:
            return None
        cop = f @ cells / total
        # per-sample CoP spread: pair each board-0 sample with the latest board-1 sample
        series = []
        b1 = [s for s in per_board[1] if s.t >= t_start] if len(self.boards) > 1 else []
        j = 0
        for s in (s for s in per_board[0] if s.t >= t_start):
            while j + 1 < len(b1) and b1[j + 1].t <= s.t:
                j += 1
            ff = np.concatenate([s.kg, b1[j].kg]) if b1 else s.kg
            if ff.sum() > 0.5:
                series.append(ff @ cells / ff.sum())
        sd = np.std(series, axis=0) if len(series) > 1 else np.zeros(2)
        return PostureResult(p.index, p.placement, qs.mean(axis=0), cop, sd, total * G, int(min(counts)), 1)

    def _tick_times(self, setpoints: np.ndarray) -> np.ndarray:
        """Each setpoint's robot time into its move (one per tick at `rate_hz`, the first one tick in)."""
        return np.arange(1, len(setpoints) + 1) / self.ex.rate_hz

    def _limit_stages(self, q: np.ndarray, todo: list) -> list[tuple[str, np.ndarray, np.ndarray | None]]:
        """The goals of the postures to run as they will be sent, for `check_servo_limits`: each move from the
        encoders' `q` (air moves plain, moves on the ground with their feed-forward) and each posture's goal. A move
        adapted to a slid sole is checked as it is sent (by the link)."""
        stages: list[tuple[str, np.ndarray, np.ndarray | None]] = []
        prev = None
        for p in todo:
            if prev is None or prev.placement != p.placement or p.index in self.checked.relift:
                mv, issues = air_move(self.model, self.plan, q, p, self.cfg)
                if issues:  # refused as it comes, by run()
                    break
                stages.append(
                    (f"on the move to posture {p.index}", mv.setpoints, self._tick_times(mv.setpoints))
                )
            else:
                sp = self.checked.moves[p.index].setpoints
                stages.append(
                    (f"on the transition to posture {p.index}", sp + self._offsets(sp), self._tick_times(sp))
                )
            stages.append((f"at posture {p.index}", (p.q + self._offsets(p.q))[None], None))
            q, prev = p.q, p
        return stages

    # -- the run
    @steady_gc()
    def run(self) -> RunResult:
        todo = self.todo()
        total = len(todo)
        q = self._read()
        self.rec.update_meta(
            gravity_compensation=self.gravity_compensation,
            position_p_gain_configured=float(self.ex.position_p_gain),
            **self._read_gains(),
        )
        check_servo_limits(self.link, self.model.joint_names, self._limit_stages(q, todo))
        check_servo_speed(self.link, self.model.joint_names, self.ex.velocity_limit)
        try:
            if todo:
                self.operator.lift(None)
                self._progress(Progress(0, total, todo[0].index, todo[0].placement, "tare"))
                if self.tare_s > 0:
                    offsets = [b.tare(self.tare_s).tolist() for b in self.boards]
                else:  # tared just before (e.g. with a recalibration)
                    offsets = [b.calibration.offset_kg.tolist() for b in self.boards]
                self.rec.update_meta(tare_kg=offsets)
            prev = None
            for n, p in enumerate(todo, start=1):
                planned_p = None
                new_placement = (
                    prev is None or prev.placement != p.placement or p.index in self.checked.relift
                )
                right_off, left_off = self.cfg.board_offsets(p.placement)
                poses = board_poses_for(
                    np.array(self.plan.placement(p.placement).left_foot), right_off, left_off
                )
                cells = cells_in_base(poses)
                corners = foot_corners(self.model, p.q, self.plan.params, self.plan.base)
                polygon = MultiPoint(np.concatenate(list(corners.values()))).convex_hull
                if new_placement and prev is not None:
                    self._progress(Progress(n, total, p.index, p.placement, "lift"))
                    self.operator.lift(p.placement)
                if new_placement:  # lifted off the boards (at the start, or by the operator)
                    mv, issues = air_move(self.model, self.plan, q, p, self.cfg)
                    if issues:  # refused before the first setpoint of the move
                        raise SafetyTrip(
                            f"{issues[0]}; run stopped, {len(self.result.completed)} completed posture(s) kept"
                        )
                else:  # on the ground: the checked setpoints, adapted to where the other sole really is
                    mv = self._ground_move(prev, p, q)
                    planned_p, p = p, replace(p, q=mv.setpoints[-1])  # settle and hold the adapted posture
                self._worst, self._min_margin, self._lifted = {}, math.inf, new_placement
                self._progress(Progress(n, total, p.index, p.placement, "move", 0, mv.duration_s),
                               "move" if new_placement else "transition")  # fmt: skip
                q = self._move(mv.setpoints, p.index, on_ground=not new_placement)
                if new_placement and q is not None:
                    q = self._catch_up_in_air(mv.setpoints[-1], p.index, q)
                    self._progress(Progress(n, total, p.index, p.placement, "place"))
                    self.operator.place(self.plan.placement(p.placement), right_off, left_off)
                self._progress(Progress(n, total, p.index, p.placement, "settle"))
                t_settle = self.clock.now()
                for attempt in range(self.ex.settle_attempts):
                    settled, q_meas = self._settle(p.q, p.index, ramp=new_placement and attempt == 0)
                    if settled:
                        break
                else:
                    err = np.degrees(np.abs(q_meas - p.q))
                    j = int(np.argmax(err))
                    raise SafetyTrip(
                        f"posture {p.index}: did not settle (within {self.ex.settle_tol_deg:g} deg, or still within "
                        f"{self.ex.settle_offset_deg:g} deg) in "
                        f"{self.ex.settle_attempts} x {self.ex.settle_timeout_s:g} s ({self.model.joint_names[j]} "
                        f"{err[j]:.2f} deg off); run stopped, {len(self.result.completed)} completed posture(s) kept"
                    )
                settle_s = (self.clock.now() - t_settle) * self.k
                res = None
                for attempt in range(3):
                    store = self._hold(p, cells, polygon, n, total)
                    res = self._average(p, store, cells, self.clock.now())
                    if res is not None:
                        res.holds = attempt + 1
                        break
                if res is None:
                    raise SafetyTrip(f"posture {p.index}: board data missing in three holds; stopping")
                res.report = self._posture_report(p, res, settle_s)
                self.rec.posture_done(
                    res.posture,
                    res.placement,
                    res.q,
                    res.cop,
                    cop_sd_x=res.cop_sd[0],
                    cop_sd_y=res.cop_sd[1],
                    force_n=res.force_n,
                    samples=res.samples,
                )
                self.result.completed.append(res)
                self.rec.update_meta(report=list(self.rec.meta.get("report", [])) + [res.report])
                q = p.q
                prev = planned_p if planned_p is not None else p
            self._progress(Progress(total, total, prev.index if prev else -1, -1, "done"))
        except BaseException:
            self.link.stop()
            raise
        finally:
            self.result.board_stats = [b.stats for b in self.boards]
            self.rec.update_meta(jitter=self.result.jitter(), timeline=self.result.timeline)
        self.link.stop()
        return self.result
