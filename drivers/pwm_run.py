"""Stream a PWM plan (formats/pwm_plan.py) to one joint's Dynamixel servo in PWM control mode and record the
drive recording `poise calibrate friction|pwm-gain` read (formats/calibration_recording.py).

Pre-flight (nothing opened): a free-link plan (a servo has no torque sensor for the fixture experiment), the
joint in the robot description and mapped to a servo, the plan's PWM within the configuration's `pwm_limit_pct`; once the bus is open and before the mode changes: within the
servo's own PWM Limit (36), and the joint at least `limit_margin` inside its description limits. Then: torque
off → Operating Mode 16 → Goal PWM 0 → torque on; at the plan's rate, Goal PWM by SYNC WRITE and Present
PWM/Current/Velocity/Position by SYNC READ in one transmission (drivers/dxl_pwm.py: the read's Realtime Tick
is when the Goal PWM took effect, however late the host). Never driven past a joint limit: when the position
comes within the margin of a limit, Goal PWM 0 and stop. Ctrl-C, a silent servo (link_timeout_s) or a trip keep
every completed row; the servo is always left with Goal PWM 0, torque off and its original operating mode.

RUN_DIR/
  recording.csv  drive recording on a uniform grid t_k = k / rate_hz of the servo's own clock (Realtime Tick,
                 ms; the host's clock jitters with its load), starting half a period after the first read: `t`
                 [s], `pwm` [% of full scale, the mean over the row's period (half a period either side) of the
                 Present PWM each read reports, held until the next read: what the servo applied, however late
                 or early the host's writes fell], `q` [rad, the cubic through the two reads around the grid
                 time and the nearest reads at least half a period beyond them], `gap_ms` [ms between those two
                 reads: `calibrate` leaves rows in gaps over 2.5 periods out], `tau` [N·m, the link's
                 gravity load from the robot description at q: a servo has no torque sensor, so the link's
                 inertia about the axis goes into `# inertia:` with the drive's], `qd_servo` [rad/s]
  raw.csv        every tick: t [s, servo clock], host [s, run clock], k, pwm_cmd [%], pwm [% read], current [A],
                 q [rad], qd [rad/s]
  run.json       plan, sha256, joint, servo, limits, status (running | completed | stopped: reason), rows
Both CSVs are appended in whole lines and fsynced at least every 0.25 s.
"""

from __future__ import annotations

import hashlib
import json
import math
import pathlib
import time
from dataclasses import dataclass

import numpy as np

from drivers.clock import HOST_CLOCK, Clock
from drivers.config import RobotConfig, ServoMap, servo_order
from drivers.dxl_pwm import PwmChannel, PwmState
from drivers.executor import SafetyTrip, check_readings
from drivers.link import LinkTimeout, Silence
from drivers.realtime import steady_gc
from drivers.run_files import COMPLETED, new_run_dir, stopped_status, write_run_meta
from formats.errors import DataError, DeviceError
from formats.pwm_plan import PwmPlan, plan_to_json, samples
from formats.synced_lines import SyncedLines
from robots.dynamics import rnea
from robots.tree import RobotModel

RUN_FILES = ("recording.csv", "raw.csv", "run.json")


@dataclass
class PwmStream:
    """What pre-flight accepted: the joint, its servo, the setpoints (t [s], PWM [%]) and the safety margin."""

    joint: str
    index: int
    servo: ServoMap
    t: np.ndarray
    pct: np.ndarray
    rate_hz: float
    margin: float  # rad inside the description's joint limits
    lower: float
    upper: float


def preflight(
    plan: PwmPlan, model: RobotModel, config: RobotConfig, joint: str | None, margin_deg: float
) -> PwmStream:
    """Everything checkable before a device opens; DataError (one line) for what must not be streamed."""
    name = joint or plan.joint
    if name is None:
        raise DataError("the PWM plan names no joint: give --joint NAME")
    if joint and plan.joint and joint != plan.joint:
        raise DataError(f"--joint {joint} differs from the plan's joint {plan.joint!r}")
    if name not in model.joint_names:
        raise DataError(
            f"joint {name!r} is not in {model.name}'s description ({', '.join(model.joint_names)})"
        )
    if plan.link != "free":
        raise DataError(
            f"the PWM plan holds the link in a {plan.link!r}: that experiment needs a joint torque sensor, which "
            "a Dynamixel servo lacks; stream a plan with link 'free' (calibrate pwm-plan --link free)"
        )
    servo = servo_order(config, [name])[0]
    t, pct = samples(plan)
    peak = float(np.max(np.abs(pct)))
    lim = config.executor.pwm_limit_pct
    if peak > lim + 1e-9:
        raise DataError(
            f"PWM plan refused before opening the robot: it reaches {peak:g} % of full scale, above "
            f"pwm_limit_pct {lim:g} % of {config.source}"
        )
    k = model.joint_index(name)
    lo, hi = float(model.lower[k]), float(model.upper[k])
    margin = math.radians(margin_deg)
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi - lo <= 2 * margin:
        raise DataError(
            f"joint {name}: limits [{lo:g}, {hi:g}] rad leave no room inside a {margin_deg:g} deg margin"
        )
    return PwmStream(name, k, servo, t, pct, plan.rate_hz, margin, lo, hi)


@dataclass(frozen=True)
class LinkLoad:
    """The link beyond the joint, other joints held: gravity load G(q) = a cos q + b sin q + c [N·m] (exact for
    a rigid subtree on a revolute axis) and its inertia about the axis [kg·m²], from the robot description."""

    a: float
    b: float
    c: float
    inertia: float

    def gravity(self, q: np.ndarray | float) -> np.ndarray:
        q = np.asarray(q, dtype=float)
        return self.a * np.cos(q) + self.b * np.sin(q) + self.c


def link_load(model: RobotModel, index: int, q_held: np.ndarray, params: str | None = None) -> LinkLoad:
    ps = params or next(iter(model.params))
    n = model.nq
    angles = np.linspace(-np.pi, np.pi, 9)[:-1]
    Q = np.tile(np.asarray(q_held, float), (len(angles), 1))
    Q[:, index] = angles
    g = rnea(model, Q, np.zeros_like(Q), np.zeros_like(Q), ps)[:, index]
    A = np.column_stack([np.cos(angles), np.sin(angles), np.ones_like(angles)])
    coef, *_ = np.linalg.lstsq(A, g, rcond=None)
    if np.abs(A @ coef - g).max() > 1e-6 * max(1.0, np.abs(g).max()):
        raise DataError(f"joint {model.joint_names[index]}: the gravity load is not that of a revolute joint")
    e = np.zeros((1, n))
    e[0, index] = 1.0
    q1 = np.asarray(q_held, float)[None]
    inertia = float(
        (rnea(model, q1, np.zeros((1, n)), e, ps) - rnea(model, q1, np.zeros((1, n)), np.zeros((1, n)), ps))[
            0, index
        ]
    )
    return LinkLoad(float(coef[0]), float(coef[1]), float(coef[2]), inertia)


class CubicGrid:
    """Reads at jittery times → values on the grid t0 + k·period: the cubic through the two reads around each
    grid time and, beyond them, the nearest read at least half a period away on each side (the reads a late
    host bunches together would make a cubic through four neighbours swing); emitted once those reads are in."""

    def __init__(self, t0: float, period: float, emit) -> None:
        self.t0, self.period, self.emit = t0, period, emit
        self.pts: list[tuple[float, float]] = []
        self.k = 0

    def _grid(self) -> float:
        return self.t0 + self.k * self.period

    def add(self, t: float, x: float) -> None:
        if self.pts and t <= self.pts[-1][0]:
            return
        self.pts.append((t, x))
        self._drain(final=False)

    def _support(self, ts: list[float], i: int, final: bool) -> list[int] | None:
        """The reads a grid time in [ts[i], ts[i + 1]) is interpolated from; None while one is still to come."""
        gap = self.period / 2
        before = [j for j in range(i - 1, -1, -1) if ts[j] <= ts[i] - gap][:1]
        after = [j for j in range(i + 2, len(ts)) if ts[j] >= ts[i + 1] + gap][:1]
        if not after and not final:
            return None
        return before + [i, i + 1] + after

    def _drain(self, final: bool) -> None:
        while self.pts:
            g = self._grid()
            ts = [p[0] for p in self.pts]
            if ts[0] > g:  # before the first read
                self.k += 1
                continue
            i = int(np.searchsorted(ts, g, side="right")) - 1  # ts[i] ≤ g < ts[i + 1]
            idx = self._support(ts, i, final) if i + 1 < len(ts) else None
            if idx is None:
                return
            x = sum(
                self.pts[j][1] * math.prod((g - ts[m]) / (ts[j] - ts[m]) for m in idx if m != j) for j in idx
            )
            self.emit(self.k, g, x, ts[i + 1] - ts[i])
            self.k += 1
            if idx[0] < i:  # later grid times need none of the reads before the outer one before g
                del self.pts[: idx[0]]

    def flush(self) -> None:
        self._drain(final=True)


def held_mean(reads: list[tuple[float, float]], a: float, b: float) -> float:
    """Mean over [a, b) of a value held from each (time, value) read until the next (the first's also before
    it): the Present PWM the servo applied, each read following its Goal PWM in one transmission."""
    total = 0.0
    for j, (t, v) in enumerate(reads):
        start = a if j == 0 else max(t, a)
        end = min(reads[j + 1][0], b) if j + 1 < len(reads) else b
        total += v * max(0.0, end - start)
    return total / (b - a)


class PwmRecorder:
    """The run directory (module docstring); refuses a folder that holds a run."""

    def __init__(self, run_dir, stream: PwmStream, load: LinkLoad, drive_inertia: float, meta: dict) -> None:
        self.dir = new_run_dir(run_dir, RUN_FILES)
        self.meta_path = self.dir / "run.json"
        self.meta: dict = {}
        self.load, self.period, self.planned = load, 1.0 / stream.rate_hz, len(stream.t)
        inertia = load.inertia + drive_inertia
        head = [
            "# format: poise drive recording",
            f"# joint: {stream.joint}",
            f"# inertia: {inertia:.10g}",
            f"# inertia_link: {load.inertia:.10g}",
            f"# inertia_drive: {drive_inertia:.10g}",
            "# tau: gravity load of the robot description at q (no torque sensor; the link's inertia is in inertia)",
            "# source: poise run (PWM plan), Dynamixel PWM control mode",
        ]
        self.recording = SyncedLines(
            self.dir / "recording.csv", "\n".join(head) + "\nt,pwm,q,tau,qd_servo,gap_ms"
        )
        self.raw = SyncedLines(self.dir / "raw.csv", "t,host,k,pwm_cmd,pwm,current,q,qd")
        self.rows = 0
        self.grid: CubicGrid | None = None
        self.reads: list[tuple[float, float, float]] = []  # (servo time, Present PWM %, Present Velocity)
        self._t0 = time.monotonic()
        self.update_meta(status="running", **meta)

    def update_meta(self, **kw) -> None:
        self.meta.update(kw)
        write_run_meta(self.meta_path, self.meta)

    def tick(self, k: int, pct_cmd: float, s: PwmState) -> None:
        vals = ",".join(f"{v:.6g}" for v in (pct_cmd, s.pwm_pct, s.current_a))
        self.raw.add(f"{s.t:.3f},{s.host - self._t0:.6f},{k},{vals},{s.q:.8f},{s.qd:.6f}")
        if self.grid is None:  # half a period after the first read: the middle of each PWM interval
            self.grid = CubicGrid(s.t + self.period / 2, self.period, self._row)
        self.reads.append((s.t, s.pwm_pct, s.qd))
        self.grid.add(s.t, s.q)

    def _row(self, k: int, g: float, q: float, gap: float) -> None:
        if k >= self.planned:
            return  # after the last write: not part of the plan
        lo, hi = g - self.period / 2, g + self.period / 2
        while len(self.reads) > 1 and self.reads[1][0] <= lo:  # held from before this row's period
            del self.reads[0]
        pwm = held_mean([(t, p) for t, p, _ in self.reads], lo, hi)
        qd = min(self.reads, key=lambda r: abs(r[0] - g))[2]
        tau = float(self.load.gravity(q))
        self.recording.add(f"{k * self.period:.6f},{pwm:.6g},{q:.8f},{tau:.8g},{qd:.6f},{1000 * gap:.0f}")
        self.rows = k + 1

    def close(self) -> None:
        if self.grid is not None:
            self.grid.flush()
        for f in (self.raw, self.recording):
            f.close()


@dataclass
class PwmRunResult:
    status: str
    ticks: int
    rows: int
    planned: int
    q_range: tuple[float, float]
    period_mean_ms: float
    period_std_ms: float


@steady_gc()
def stream_pwm(
    link,
    stream: PwmStream,
    rec: PwmRecorder,
    link_timeout_s: float,
    progress=None,
    clock: Clock = HOST_CLOCK,
) -> PwmRunResult:
    """Switch to PWM mode, stream, record, always restore the servo (module docstring). `link` is connected;
    the writes are scheduled on `clock` (the bench clock), the silent-servo watchdog runs on the host's."""
    ch = PwmChannel(link, stream.servo)
    peak = float(np.max(np.abs(stream.pct)))
    rec.update_meta(servo_pwm_limit_units=ch.pwm_limit, original_operating_mode=ch.original_mode)
    if peak > ch.limit_pct + 1e-9:
        raise DataError(
            f"PWM plan refused before the mode change: it reaches {peak:g} %, above servo {stream.servo.id}'s "
            f"PWM Limit (36) of {ch.pwm_limit} units = {ch.limit_pct:.1f} %"
        )
    q_all = link.read()
    check_readings(link, link.joint_names, angle=q_all)
    q0 = float(q_all[stream.index])
    if not stream.lower + stream.margin < q0 < stream.upper - stream.margin:
        raise DataError(
            f"joint {stream.joint} at {q0:.3f} rad is within {math.degrees(stream.margin):g} deg of its limits "
            f"[{stream.lower:g}, {stream.upper:g}] rad; move it inside before streaming"
        )
    ticks, times, qs = 0, [], [q0]
    status = "running"
    try:
        ch.enter()
        t0 = clock.now()
        for k, (tk, u) in enumerate(zip(stream.t, stream.pct, strict=True)):
            clock.sleep_until(t0 + tk)
            t_write = clock.now()
            s, silence = None, Silence(link_timeout_s)
            while s is None:
                asked = time.monotonic()
                s = ch.exchange(float(u))
                if s is None and silence.missed(asked):
                    raise LinkTimeout(
                        f"servo {stream.servo.id} silent for {link_timeout_s:g} s at t = {tk:.2f} s; {rec.rows} row(s) kept"
                    )
            check_readings(link, [stream.joint], angle=s.q, velocity=s.qd, current=s.current_a)
            rec.tick(k, float(u), s)
            ticks = k + 1
            times.append(t_write)
            qs.append(s.q)
            if not stream.lower + stream.margin < s.q < stream.upper - stream.margin:
                ch.send(0.0)
                raise SafetyTrip(
                    f"joint {stream.joint} at {s.q:.3f} rad came within {math.degrees(stream.margin):g} deg of its "
                    f"limit [{stream.lower:g}, {stream.upper:g}] rad at t = {tk:.2f} s: PWM 0, stopped; "
                    f"{ticks} tick(s) recorded"
                )
            if progress is not None:
                progress(k + 1, len(stream.t), float(tk), s)
        status = COMPLETED
    except BaseException as exc:
        status = stopped_status(exc)
        raise
    finally:
        failed = ch.leave()
        rec.close()
        per = np.diff(times) * 1000 if len(times) > 1 else np.zeros(1)
        rec.update_meta(status=status, ticks_streamed=ticks, rows=rec.rows, restore_failures=failed,
                        period_mean_ms=float(per.mean()), period_std_ms=float(per.std()))  # fmt: skip
        if failed and status == COMPLETED:
            raise DeviceError(f"the servo was not restored: {failed[0]}")
    return PwmRunResult(
        status, ticks, rec.rows, len(stream.t), (min(qs), max(qs)), float(per.mean()), float(per.std())
    )


def plan_sha256(plan: PwmPlan) -> str:
    return hashlib.sha256(
        json.dumps(plan_to_json(plan), sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def run_pwm(
    plan: PwmPlan,
    plan_path: str,
    model: RobotModel,
    config: RobotConfig,
    robot: str,
    out: str,
    joint: str | None = None,
    margin_deg: float = 5.0,
    drive_inertia: float = 0.0,
    progress=None,
) -> tuple[PwmRunResult, PwmStream, LinkLoad, pathlib.Path]:
    """Pre-flight (DataError, nothing opened), open the bus (`dxl:PORT`), stream and record."""
    from drivers.link import open_link

    stream = preflight(plan, model, config, joint, margin_deg)
    if not robot.startswith("dxl:"):
        raise DataError(f"PWM plans stream to Dynamixel servos: --robot dxl:PORT (or sim), got {robot!r}")
    link = open_link(robot, model.joint_names, config)
    link.connect()  # every servo holds where it is (position mode, torque on)
    try:
        q_held = link.read()
        load = link_load(model, stream.index, q_held)
        meta = {"plan": str(plan_path), "plan_sha256": plan_sha256(plan), "kind": "pwm", "robot": robot,
                "joint": stream.joint, "servo_id": stream.servo.id, "rate_hz": stream.rate_hz,
                "ticks_planned": len(stream.t), "duration_s": float(stream.t[-1]),
                "limit_margin_deg": margin_deg, "joint_limits_rad": [stream.lower, stream.upper],
                "q_held_rad": q_held.tolist(), "inertia_link": load.inertia, "inertia_drive": drive_inertia}  # fmt: skip
        rec = PwmRecorder(out, stream, load, drive_inertia, meta)
        try:
            result = stream_pwm(link, stream, rec, config.executor.link_timeout_s, progress)
        finally:
            rec.close()
        return result, stream, load, rec.dir
    finally:
        link.close()
