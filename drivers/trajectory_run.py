"""Stream a joint trajectory at the servo rate and record it: the executor's safety, moves and settling, applied
to an excitation trajectory instead of static postures.

The trajectory is sampled once, before anything is sent, at the ticks t_k = k / rate_hz (and its end); those
setpoints are the only ones streamed and every one is checked here (joint limits, the run's velocity limit
between ticks) besides the plan's own checks the caller runs (`trajectories.plan.check_plan`, what `plan check`
applies). A standing robot (double support) is lifted, the boards tared, moved in the air to the trajectory's
start (`drivers.setpoints.air_move`), placed on the boards at the trajectory's foot placement, settled, then
streamed. A single-support trajectory (`drivers.single_support_stream`) starts the same way, standing on both
boards in the standing posture of its weight shift (`trajectories.weight_shift`), then streams the shift (the free
sole's share of the gravity feed-forward ramped to 0), holds until the free sole's board carries less than
TOUCH_SHARE of the load (else stops), lifts the free sole to the trajectory's start on the base sole alone and
streams the trajectory; then it is put back on both soles by a weight shift played backwards: the start's when the
plan ends where it starts, else one planned to the plan's end posture (`StreamPlan.lead_out`). With
`start="set-down"` it is instead set down on its base sole alone, the other sole in the air (a hoist or a second
person), and the run ends at rest on that sole. A fixed-base arm is moved to the start
with a cosine profile and streamed.
Ctrl-C, a silent link, a tracking error above `track_trip_deg` or the boards saying the robot tips or falls (or,
in single support, that the lifted sole touched down) stop streaming and hold.

RUN_DIR/
  recording.csv   standing robots: the dynamic recording (formats/dynamic_recording.py) of the streamed part on
                  the uniform tick grid t_s = k / rate_hz from the first streamed tick: measured angles and the
                  boards' wrench (Fz, Mx, My from the 8 cells, each board's load averaged over the tick period
                  centred on the tick, its reports placed in time by drivers.board_timeline; fx_n, fy_n, mz_nm
                  are 0: the cells measure vertical load only; the moments are about the point a plate height
                  below the base sole, in the cells' plane: metadata moment_z_m), each linearly interpolated
                  between the two ticks measured around it (the ticks' real times jitter by a few ms;
                  `identify dynamic` needs uniform times); a row for every streamed tick: the last ones, measured
                  before their grid time (the grid starts at the first tick, which may have been later), are
                  extrapolated from the ticks before (`UniformRows.finish`)
                  fixed-base arms on a link that reads motor currents (Dynamixel: Present Current in the same SYNC
                  READ as the angles): the measured angles and currents `i:JOINT` (A, joint side), on the same
                  uniform grid, with each known `torque_constant:JOINT` (N·m/A, the configuration's [[joints]]
                  torque_constant) for `identify dynamic`
  raw_joints.csv  every tick of every phase: t (s, run clock), phase, t_traj (s on the trajectory, empty
                  outside streaming), q_cmd (n), q_meas (n), rad
  raw_boards.csv  every board report: t (arrival), phase, board, seq (the reports that arrived, damaged ones
                  counted too; one lost over the air leaves no gap), kg (4, tared)
  run.json        plan, its sha256, endpoints, rate, status (running | completed | stopped: reason), ticks
All files are appended in whole lines and fsynced at least every 0.25 s, so a killed run keeps what it recorded.
"""

from __future__ import annotations

import math
import pathlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from shapely.geometry import MultiPoint

from drivers.board_timeline import BoardTimeline
from drivers.clock import Clock
from drivers.config import RobotConfig
from drivers.executor import (
    LATE_PERIODS,
    Executor,
    Operator,
    Progress,
    SafetyTrip,
    check_servo_limits,
    refuse_servo_speeds,
)
from drivers.gravity import goal_offsets
from drivers.realtime import steady_gc
from drivers.run_files import new_run_dir, write_run_meta
from drivers.setpoints import (
    RunCheck,
    air_move,
    check_run,
    cosine_profile,
    peak_speeds,
    tick_problems,
    ticks,
)
from drivers.single_support_stream import (
    TOUCH_HOLD_S,
    TOUCH_SHARE,
    SingleSupport,
    feedforward_offsets,
    single_support_problems,
)
from drivers.wbb.geometry import PLATE_HEIGHT, G, board_poses_for, cell_levers, cells_in_base
from formats.dynamic_recording import CELLS_XY, DynamicRecordingAppender
from formats.errors import DataError
from formats.plan import Placement, Plan, Posture
from formats.synced_lines import SyncedLines
from robots.kinematics import com_position
from robots.one_sole import sole_polygon
from robots.stance import corner_index, foot_corners, lever_share, other_pose, signed_margin, sole_poses
from robots.tree import RobotModel
from trajectories.weight_shift import WeightShift, part_slice, reverse

RUN_FILES = ("recording.csv", "raw_joints.csv", "raw_boards.csv", "run.json")
LANDING_S = 0.5  # s (robot time) a standing robot holds its start posture on the boards before streaming
UNLOAD_S = 0.5  # s (robot time) held after a weight shift; the free board's share: over its second half
# the slower alternative a servo Velocity Limit refusal names, by the stage of its peak (`_goal_stages`; the weight
# shifts, sole lifts and lowerings otherwise): the move to the start is a cosine stretched to [executor] velocity_limit
SLOWER = {
    "on the move to the start": "lower [executor] velocity_limit",
    "of the trajectory": "plan the trajectory slower",
}


@dataclass
class StreamPlan:
    """The setpoints to stream: trajectory time of each tick (s) and its joint angles (rad, model order)."""

    t: np.ndarray
    q: np.ndarray
    base: str
    params: str
    standing: bool  # on two boards (else a fixed-base robot, no boards)
    band_hz: float | None = None  # the motion's highest frequency: recording metadata motion_band_hz
    single: SingleSupport | None = None  # standing on the base sole alone (else double support)
    lead_in: WeightShift | None = None  # single support started by a weight shift from double support
    # ... ended by this one played backwards (lead_in itself for a periodic plan; None: ends on one sole)
    lead_out: WeightShift | None = None
    # the setpoints' velocities and accelerations (rad/s, rad/s²): the feed-forward in motion, one sole's balance
    qd: np.ndarray | None = None
    qdd: np.ndarray | None = None

    @property
    def rate_hz(self) -> float:
        return float((len(self.t) - 1) / self.t[-1]) if len(self.t) > 1 else 0.0


@dataclass
class StreamCheck:
    """Pre-flight result: problems (empty = safe to stream) and, for a standing robot, the start posture's check."""

    problems: list[str]
    run_check: RunCheck | None = None
    start_plan: Plan | None = None


@dataclass
class TrajectoryRunResult:
    ticks: int = 0  # streamed ticks (rows of the recording)
    planned: int = 0
    max_tracking_deg: float = 0.0  # largest |q_meas - q_cmd| over the streamed ticks
    rms_tracking_deg: float = 0.0
    tick_periods: list[float] = field(default_factory=list)
    board_stats: list = field(default_factory=list)
    # standing on both soles: per sole, over the streamed ticks its board weighed it, how often and how far its own
    # CoP left the region where it keeps all four corners down (`robots.stance.corner_index` > 1: it rocked)
    soles: dict[str, SoleRocking] = field(default_factory=dict)


@dataclass
class SoleRocking:
    """One sole over a run: ticks its board weighed it, ticks its CoP had it on three corners, the largest index."""

    ticks: int = 0
    rocked: int = 0
    max_index: float = 0.0

    def add(self, index: float) -> None:
        self.ticks += 1
        self.rocked += index > 1.0
        self.max_index = max(self.max_index, index)

    @property
    def share(self) -> float:
        return self.rocked / self.ticks if self.ticks else 0.0

    def to_dict(self) -> dict:
        return {"ticks": self.ticks, "rocked_share": self.share, "max_corner_index": self.max_index}


def _lowering(ws: WeightShift) -> tuple:
    """The end's sole lowering: the lift played back in the air (to straight above its ground pose), then onto
    its board."""
    return reverse(part_slice(ws.lift, ws.raise_ticks - 1)), reverse(part_slice(ws.lift, 0, ws.raise_ticks))


def tick_count(duration: float, rate_hz: float) -> int:
    """How many ticks `tick_times` makes (known before making them)."""
    return max(1, math.ceil(duration * rate_hz - 1e-9)) + 1


def tick_times(duration: float, rate_hz: float) -> np.ndarray:
    """k / rate_hz for every whole tick inside the trajectory, then its end (a last, shorter step)."""
    t = np.arange(tick_count(duration, rate_hz)) / rate_hz
    t[-1] = duration
    return t


def start_plan(model: RobotModel, sp: StreamPlan) -> Plan:
    """A one-posture plan for the trajectory's start (standing robots): the executor's moves and checks use it.
    A weight-shift start stands on both soles first: its standing posture."""
    q0 = sp.q[0] if sp.lead_in is None else sp.lead_in.stand
    pose = tuple(float(v) for v in other_pose(model, q0, sp.params, sp.base))
    posture = Posture(0, 0, q0.copy(), move_s=0.0, hold_s=0.0)
    return Plan(
        model.name, sp.base, list(model.joint_names), [Placement(0, pose)], [posture], params=sp.params
    )


def check_stream(model: RobotModel, config: RobotConfig, sp: StreamPlan) -> StreamCheck:
    """Every streamed setpoint within the joint limits and the run's velocity limit between ticks (and, on one
    sole, `single_support_problems`); then the start (`check_start`)."""
    if sp.q.ndim != 2 or sp.q.shape[1] != model.nq or len(sp.q) != len(sp.t) or len(sp.t) < 2:
        return StreamCheck([f"setpoints {sp.q.shape} do not fit {len(sp.t)} ticks of {model.nq} joints"])
    if not np.all(np.isfinite(sp.q)):
        return StreamCheck(["setpoints contain NaN or infinite values"])
    problems = tick_problems(model, config, sp.t, sp.q)
    if not sp.standing:
        return StreamCheck(problems)
    if sp.single is not None:  # on one sole: the double-support posture check does not apply
        problems += single_support_problems(
            model, config, sp.t, sp.q, sp.qd, sp.qdd, sp.single, sp.base, sp.params
        )
    return check_start(model, config, sp, problems)


def check_start(model: RobotModel, config: RobotConfig, sp: StreamPlan, problems: list[str]) -> StreamCheck:
    """A standing robot's start: set down on one sole, nothing more; else the posture it stands in on both soles
    (a weight shift's, `start_plan`) through the executor's posture check (`drivers.setpoints.check_run`).
    `problems`: the stream's own. A weight shift's ticks are checked where it is planned
    (`drivers.single_support_stream.plan_transitions`)."""
    plan = start_plan(model, sp)
    if sp.single is not None and sp.lead_in is None:  # set down on one sole
        margin = max(sp.single.margin, float(config.executor.min_margin))
        return StreamCheck(problems, RunCheck([], {}, margin), plan)
    rc = check_run(plan, model, config)  # standing on both soles at the start
    return StreamCheck(problems + [f"start {p}" for p in rc.problems], rc, plan)


def board_wrench(kg: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """The boards' wrench on the robot (N, N·m) from the cells' vertical loads (kg, (8,)) at `cells` (8, 2):
    Fz = Σ f, Mx = Σ y f, My = −Σ x f about the base origin's projection on the cells' plane (a plate height
    below the sole: the moments include the lever of the horizontal forces); Fx, Fy, Mz are not measured (0)."""
    fz, mx, my = (np.asarray(kg, dtype=float) * G) @ cell_levers(cells)
    return np.array([0.0, 0.0, fz, mx, my, 0.0])


# ticks further apart than this many periods leave a gap in the recording: the servos held a setpoint meanwhile, a
# motion no measurement saw (the executor does not catch such a stall up). Ordinary lateness is bridged (28 ms at
# 100 Hz seen on a loaded 2-core machine); a driver loop stalled 0.44 s on the twin (11 periods) is not
GAP_PERIODS = LATE_PERIODS
# a board carrying less than this share of the weight is not asked where its sole's CoP lies
LOADED_SHARE = 0.05
ROCKED_WARN = 0.05  # a sole on three corners for more than this share of a run's ticks is said to rock


def _tare_force_sd(boards) -> np.ndarray | None:
    """Each cell's tare error as a force (N): its SE, from the scatter of its empty readings, × its gain × g (None
    where a board kept no scatter)."""
    sd = []
    for b in boards:
        cal = b.calibration
        if cal.offset_se is None:
            return None
        sd.append(np.asarray(cal.gain) * cal.offset_se * G)
    return np.concatenate(sd)


def tare_mass_sd(boards) -> float | None:
    """The standard deviation (kg) of the total load a run's tare leaves on all its readings: the cells' tare
    errors summed in quadrature; a constant offset the run's own samples cannot average out."""
    sd = _tare_force_sd(boards)
    return None if sd is None else float(np.sqrt(np.sum(sd**2)) / G)


def tare_wrench_cov(boards, cells: np.ndarray) -> list[list[float]] | None:
    """The covariance (3 × 3: Fz N, Mx, My N·m, as `board_wrench`) of the constant offset a run's tare leaves on
    its wrench: each cell's tare error as a force at its position `cells` (8, 2), the cells independent."""
    sd = _tare_force_sd(boards)
    if sd is None:
        return None
    V = cell_levers(cells).T  # (3, 8): Fz, Mx, My per unit cell force
    return ((V * sd**2) @ V.T).tolist()


def rocked_soles(shares: dict[str, float]) -> list[str]:
    """The soles of a run's tally ({sole: share of the ticks on three corners}) that rocked (> ROCKED_WARN)."""
    return [sole for sole, share in shares.items() if share > ROCKED_WARN]


class UniformRows:
    """Samples measured at the ticks' (jittery) times → rows on the uniform grid t0 + k·period (t0: the first
    measurement's time), each linearly interpolated between the two measurements around it, emitted as soon as the
    later one arrives; `finish` then writes the rows still owed, so there is a row for every measurement."""

    def __init__(self, period: float, emit: Callable[[float, np.ndarray], None]) -> None:
        self.period, self.emit = period, emit
        self.t0: float | None = None
        self.prev: tuple[float, np.ndarray] | None = None
        self.k = 0  # grid points passed (rows emitted, and those skipped in a gap)
        self.skipped = 0  # grid points in gaps, without a row
        self.n = 0  # measurements added
        self._recent: list[tuple[float, np.ndarray]] = []  # the last three measurements (`finish`'s slope)

    def add(self, t: float, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=float)
        if self.t0 is None:
            self.t0 = t
        # a stall (no measurement for GAP_PERIODS): its grid points get no row, so the recording shows the gap
        # (identify dynamic fits the pieces either side apart) instead of a line drawn across it
        gap = self.prev is not None and t - self.prev[0] > GAP_PERIODS * self.period
        while self.t0 + self.k * self.period <= t + 1e-12:
            tn = self.t0 + self.k * self.period
            if gap:
                self.k += 1
                self.skipped += 1
                continue
            if self.prev is None or t <= self.prev[0]:
                self.emit(self.k * self.period, x)
            else:
                tp, xp = self.prev
                self.emit(self.k * self.period, xp + (tn - tp) / (t - tp) * (x - xp))
            self.k += 1
        self.prev = (t, x)
        self.n += 1
        self._recent = [*self._recent[-2:], (t, x)]

    def finish(self) -> None:
        """The rows of the last measurements whose grid time none came after — a last tick measured earlier on
        the grid than the first (a first tick 3 ms late, the last on time: the last grid point lies 3 ms after
        the last measurement, and its row was lost): extrapolated from the last measurement along the slope to the
        latest one at least half a period before it (two ticks bunched by a late one would amplify their noise),
        held where there is none; never more than a period past the last measurement (a recording with a gap has
        fewer rows than measurements, not rows made up after its end). Afterwards every measurement added has its
        row, unless a gap swallowed some."""
        if self.prev is None or self.k - self.skipped >= self.n:
            return
        t, x = self.prev
        slope = np.zeros_like(x)
        for tb, xb in reversed(self._recent[:-1]):
            if t - tb >= self.period / 2:
                slope = (x - xb) / (t - tb)
                break
        while self.k - self.skipped < self.n and self.t0 + self.k * self.period < t + self.period:
            self.emit(self.k * self.period, x + (self.t0 + self.k * self.period - t) * slope)
            self.k += 1


class TrajectoryRecorder:
    """The run directory of a trajectory run (see the module docstring). Refuses a folder holding a run."""

    def __init__(
        self,
        run_dir,
        model: RobotModel,
        base: str,
        wrench: bool,
        meta: dict,
        period: float,
        time_scale: float = 1.0,
        motion: str | None = None,
        band_hz: float | None = None,
        robot_source: str | None = None,
    ) -> None:
        """`robot_source`: the plan's robot description file (a URDF), so `identify dynamic` finds the robot."""
        self._made_dir = not pathlib.Path(run_dir).exists()
        self._closed = False
        self.dir = new_run_dir(run_dir, RUN_FILES)
        self._source = {"robot_source": robot_source} if robot_source else {}
        self.meta_path = self.dir / "run.json"
        self.meta: dict = {}
        self.t_traj: float | None = None
        self._timelines: dict[int, BoardTimeline] = {}  # board index → its reports placed in time (streaming)
        # streamed ticks (time, angles, plan time) waiting for the boards
        self._pending: list[tuple[float, np.ndarray, float]] = []
        self._cells: np.ndarray | None = None
        self._t0 = time.monotonic()
        names = model.joint_names
        self.joints = SyncedLines(
            self.dir / "raw_joints.csv",
            ",".join(
                ["t", "phase", "t_traj"] + [f"q_cmd_{j}" for j in names] + [f"q_meas_{j}" for j in names]
            ),
        )
        self.boards = SyncedLines(self.dir / "raw_boards.csv", "t,phase,board,seq,kg_tr,kg_br,kg_tl,kg_bl")
        self.recording = self.uniform = None
        self._model, self._base, self._band_hz, self._k, self._period = (
            model,
            base,
            band_hz,
            time_scale,
            period,
        )
        if wrench:
            wmeta = {
                "wrench_measured": "fz_n mx_nm my_nm (cells: vertical load)",
                # the cells' plane lies a plate height below the soles: their moments include h·Fx, h·Fy
                "moment_z_m": f"{-PLATE_HEIGHT:.6g}",
            }
            if motion is not None:  # single-support: `identify dynamic` takes the free-motion base parameters
                wmeta["motion"] = motion
        # a standing robot's recording opens at its first streamed tick, where its cells' positions are known
        self._wrench_meta = wmeta if wrench else None
        self.update_meta(status="running", **meta)

    def _open_recording(self, meta: dict, measured: list[tuple[str, int]], **columns) -> None:
        """recording.csv with the run's metadata and `meta`, its rows on the uniform tick grid (`UniformRows`):
        each row given as (angles, the `measured` columns — (name, width) in order —, plan time), written in
        trajectory time."""
        rmeta = {"source": "poise run (trajectory)"} | meta | self._source
        if self._band_hz is not None:  # `identify dynamic`'s default cut-off follows the motion's band
            rmeta["motion_band_hz"] = f"{self._band_hz:.6g}"
        names = list(self._model.joint_names)
        self.recording = DynamicRecordingAppender(
            self.dir / "recording.csv", self._model.name, self._base, names, tau=False, meta=rmeta, t_plan=True,
            **{"wrench": False} | columns,
        )  # fmt: skip
        # ticks come every period / time_scale s of the run clock; the recording is in trajectory time
        n, k = len(names), self._k
        ends = np.cumsum([n] + [w for _, w in measured])

        def row(t: float, x: np.ndarray) -> None:
            parts = {name: x[a:b] for (name, _), a, b in zip(measured, ends[:-1], ends[1:], strict=True)}
            self.recording.append(t * k, x[:n], t_plan=x[-1], **parts)

        self.uniform = UniformRows(self._period / k, row)

    def record_currents(self, torque_constants: dict[str, float]) -> None:
        """A fixed-base arm whose link reads motor currents: its streamed ticks go to recording.csv (angles and
        currents); `torque_constants` (N·m/A at the joint, by joint) are the known ones, written as metadata."""
        meta = {"efforts_measured": "motor currents (A, joint side)"}
        n = len(self._model.joint_names)
        self._open_recording(meta, [("current", n)], current=True, torque_constant=torque_constants)

    def open_wrench_recording(self, cells: np.ndarray | None) -> None:
        """A standing robot's recording: the boards' wrench and, with `cells` (m, 2: their positions in the base
        frame), each cell's load behind it (kg), which `identify dynamic` needs for the cells' gain errors. Opened
        before streaming starts (its file and sync thread are made here, never by the streaming ticks)."""
        if self.recording is not None:
            return
        meta = dict(self._wrench_meta)
        m = 0 if cells is None else len(cells)
        if m:
            meta[CELLS_XY] = " ".join(f"{v:.6g}" for v in np.asarray(cells, dtype=float).ravel())
        columns = [("wrench", 6)] + ([("cells", m)] if m else [])
        self._open_recording(meta, columns, wrench=True, cells=m)

    def arm_tick(self, t: float, q: np.ndarray, currents: np.ndarray, t_plan: float) -> None:
        """A streamed tick of a fixed-base arm (run-clock time, measured angles and currents): its recording row."""
        self.uniform.add(t, np.concatenate([q, currents, [t_plan]]))

    def update_meta(self, **kw) -> None:
        self.meta.update(kw)
        write_run_meta(self.meta_path, self.meta)

    def use_clock(self, clock: Clock) -> None:
        """Rows come stamped on `clock` (the bench clock): the run clock starts now on it."""
        self._t0 = clock.now()

    # the executor's recorder interface
    def joint_row(self, t: float, posture: int, phase: str, q_cmd: np.ndarray, q_meas: np.ndarray) -> None:
        tt = "" if self.t_traj is None else f"{self.t_traj:.6f}"
        vals = [f"{t - self._t0:.5f}", phase, tt] + [f"{v:.6f}" for v in q_cmd] + [f"{v:.6f}" for v in q_meas]
        self.joints.add(",".join(vals))

    def board_rows(self, samples, posture: int, phase: str) -> None:
        for s in samples:
            kg = ",".join(f"{v:.4f}" for v in s.kg)
            self.boards.add(f"{s.t - self._t0:.5f},{phase},{s.board},{s.seq},{kg}")
            if phase == "stream":
                self._timelines.setdefault(s.board, BoardTimeline()).add(s.t, s.seq, s.kg)

    def stream_tick(self, t: float, q: np.ndarray, cells: np.ndarray, t_plan: float) -> None:
        """A streamed tick of a standing robot (run-clock time, measured angles; the boards' cells at `cells`, four
        rows per board): its recording row — the angles and the boards' wrench, their load averaged over the tick
        period centred on the tick — is written once every board's reports cover that period (`close` writes the
        rest with the latest reports held on)."""
        if self.recording is None:
            raise RuntimeError(
                "open_wrench_recording before streaming: the recording is not opened by a tick"
            )
        self._cells = cells
        self._pending.append((t, q, t_plan))
        boards = len(cells) // 4
        covered = -np.inf
        if len(self._timelines) >= boards:
            covered = min(tl.covered_until() for tl in self._timelines.values())
        self._write_rows(covered)

    def _write_rows(self, until: float) -> None:
        half = self.uniform.period / 2
        boards = len(self._cells) // 4
        while self._pending and self._pending[0][0] + half <= until:
            t, q, tp = self._pending.pop(0)
            kg = [
                self._timelines[i].mean(t - half, t + half) if i in self._timelines else None
                for i in range(boards)
            ]
            if any(x is None for x in kg):  # a board's reports cannot be placed in time yet
                continue
            kg = np.concatenate(kg)
            self.uniform.add(t, np.concatenate([q, board_wrench(kg, self._cells), kg, [tp]]))

    def discard(self) -> None:
        """Close and remove the run's files (and its folder, if this run made it): a run that failed before the
        bench opened sent and measured nothing, and leaves no run files behind to block its --out."""
        self.close()
        for name in RUN_FILES:
            (self.dir / name).unlink(missing_ok=True)
        if self._made_dir and not any(self.dir.iterdir()):
            self.dir.rmdir()

    def close(self) -> None:
        """Write the rows still owed and close the files; once (`discard` closes too)."""
        if self._closed:
            return
        self._closed = True
        if self._pending:  # the last ticks (also of a stopped run)
            self._write_rows(np.inf)
        if self._wrench_meta is not None and self.recording is None:  # stopped before streaming: the header
            self.open_wrench_recording(None)
        if self.uniform is not None:  # a row for every tick, the last measured before its grid time too
            self.uniform.finish()
        for f in (self.joints, self.boards, self.recording):
            if f is not None:
                f.close()


class TrajectoryExecutor(Executor):
    """The posture executor's streaming, settling and safety trips, running one trajectory."""

    # every tick at the robot's rate, as the trajectory is sampled
    ROBOT_RATE_PHASES = ("move", "settle", "stream", "shift", "unload", "lift", "lower")
    JITTER_PHASES = ("stream",)

    def __init__(
        self,
        link,
        boards: list,
        model: RobotModel,
        config: RobotConfig,
        sp: StreamPlan,
        checked: StreamCheck,
        recorder: TrajectoryRecorder,
        operator: Operator | None = None,
        progress: Callable[[Progress], None] | None = None,
        tare_s: float = 1.0,
        time_scale: float = 1.0,
        clock: Clock | None = None,
        expect_sole: Callable[[str, bool], None] | None = None,
    ) -> None:
        """`expect_sole(site, lifted)`: told when the free sole of a weight-shift start is lifted off its board
        on purpose and when it is put back down (the physics twin, which reports soles leaving or touching)."""
        if checked.problems:  # never stream a setpoint the pre-flight check has not passed
            raise DataError(f"trajectory refused before moving: {checked.problems[0]}")
        plan = checked.start_plan or start_plan_free(model, sp)
        rc = checked.run_check or RunCheck([], {}, 0.0)
        self.sp = sp  # before the executor's own setup: its feed-forward check calls `_offsets`
        self._both_soles = sp.lead_in is not None  # a weight-shift start stands on both soles until the lift
        self.expect_sole = expect_sole or (lambda site, lifted: None)
        super().__init__(
            link, boards, plan, model, config, recorder, time_scale, operator, progress, tare_s, rc, clock
        )
        self.traj_result = TrajectoryRunResult(planned=len(sp.t))
        self._soles: list[tuple[str, np.ndarray]] = []  # double support: each board's sole and its pose
        self._touch_since: float | None = None
        self._lead_ff: dict[str, np.ndarray] | None = None  # `_lead_offsets`, cached
        if sp.single is not None:
            self.gravity_compensation = True
        self.gravity_compensation = self.gravity_compensation and sp.standing
        self._ff = (
            self._stream_offsets()
        )  # computed here to fail before moving; again with the gains read back

    def _stream_offsets(self) -> np.ndarray | None:
        """Each streamed tick's goal offset: single support, the inverse dynamics on the base sole; double
        support with `[executor] gravity_compensation`, the feed-forward of `drivers.gravity` at the tick's
        posture, velocity and acceleration (the other sole's lever-rule share of the ground's force at the motion's
        ZMP: with gravity alone the legs' servos disagreed enough in motion to rock a sole onto three corners
        13–14 % of the ticks, 2–3 % with the motion's own forces, on the stored second design)."""
        sp = self.sp
        if sp.single is not None:
            args = (sp.q, sp.qd, sp.qdd, sp.base, sp.params, self._p_gains)
            return feedforward_offsets(self.model, self.cfg, *args)
        if not self.gravity_compensation:
            return None
        return goal_offsets(
            self.model, self.cfg, sp.q, sp.params, sp.base, self._p_gains, qd=sp.qd, qdd=sp.qdd
        )

    def _offsets(self, q: np.ndarray) -> np.ndarray:
        if self.sp.single is None or self._both_soles:
            return super()._offsets(q)
        z = np.zeros_like(np.asarray(q, dtype=float))  # held still on one sole: gravity only
        return feedforward_offsets(self.model, self.cfg, q, z, z, self.sp.base, self.sp.params, self._p_gains)

    def _start_move(self, q: np.ndarray) -> np.ndarray:
        """The setpoints of the move from the encoders' `q` to the plan's start (in the air for a standing robot)."""
        p = self.plan.postures[0]
        if self.sp.standing:
            mv, issues = air_move(self.model, self.plan, q, p, self.cfg)
            if issues:  # refused before the first setpoint of the move
                raise SafetyTrip(f"{issues[0]}; nothing streamed")
            return mv.setpoints
        d = max(
            0.5, 2.0 * float(np.max(np.abs(p.q - q))) / self.ex.velocity_limit
        )  # cosine: peak 2·mean speed
        n = ticks(d, self.ex.rate_hz)
        return np.array([cosine_profile(q, p.q, i / n) for i in range(1, n + 1)])

    def _to_start(self, setpoints: np.ndarray) -> np.ndarray:
        """Stream the start move (`_start_move`; in the air or on the stand: no feed-forward)."""
        return self._move(setpoints, 0, on_ground=False)

    def _check_servo_limits(self, start: np.ndarray, q: np.ndarray) -> None:
        """Refuse before the first command any goal outside the servos' position limits, as it will be sent (with
        its feed-forward): the start move, the start posture, the weight shifts and sole lifts and the holds
        between them, and every streamed tick; then, with the encoders' `q`, any joint whose goals move faster
        between ticks than its servo's Velocity Limit (44) allows."""
        stages = self._goal_stages(start)
        check_servo_limits(self.link, self.model.joint_names, stages)
        self._check_servo_speeds(q, start, stages)

    def _check_servo_speeds(self, q: np.ndarray, start: np.ndarray, stages: list) -> None:
        """Each joint's peak speed between the goals streamed at the robot's rate (the start move from the encoders'
        `q`, the weight shifts, sole lifts and lowerings, the trajectory; robot time) against its servo's Velocity
        Limit (44): refused before the first command (`drivers.executor.refuse_servo_speeds`)."""
        moves = [(what, g, t) for what, g, t in stages if t is not None]
        if len(start):  # the start move's first tick is one tick away from where the encoders are
            what, _, t0 = moves[0]
            moves[0] = (what, np.vstack([q, start]), np.concatenate([[0.0], t0]))
        best = peak_speeds(moves, self.model.nq)

        def said(joint: str, peak: float) -> str:
            _, what, t = best[self.model.joint_names.index(joint)]
            return f"{joint}'s goals move at {peak:.3f} rad/s between ticks {what} at t = {t:.3f} s, which"

        def fix(joint: str) -> str:
            what = best[self.model.joint_names.index(joint)][1]
            return SLOWER.get(what, "plan the trajectory's weight shift slower")

        refuse_servo_speeds(self.link, self.model.joint_names, [b[0] for b in best], said, fix)

    def _goal_stages(self, start: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray | None]]:
        """The goals as they will be sent, stage by stage (what, goals (n, nq) rad, robot times or None for a
        single goal held): the start move first."""
        sp, q0 = self.sp, self.plan.postures[0].q
        stages = [("on the move to the start", start, self._tick_times(start)),
                  ("at the start posture", (q0 + self._offsets(q0))[None], None)]  # fmt: skip
        ff = self._lead_offsets()
        if sp.lead_in is not None:
            ws = sp.lead_in
            lf = ws.lift
            stages += [("in the start's weight shift", ws.shift.q + ff["shift"], ws.shift.t),
                       ("in the start's sole lift", lf.q + ff["lift"], lf.t),
                       ("on one sole at the start", (sp.q[0] + self._offsets(sp.q[0]))[None], None)]  # fmt: skip
        if sp.lead_out is not None:
            ws = sp.lead_out
            back = reverse(ws.shift)
            for part, off in zip(_lowering(ws), (ff["air"], ff["down"]), strict=True):
                stages.append(("in the end's sole lowering", part.q + off, part.t))
            stages.append(("in the end's weight shift", back.q + ff["back"], back.t))
        goals = sp.q if self._ff is None else sp.q + self._ff
        stages.append(("of the trajectory", goals, sp.t))
        return stages

    def _lead_offsets(self) -> dict[str, np.ndarray]:
        """The weight-shift start's and end's feed-forward offsets as streamed, computed once for the servo-limit
        check and the streaming: the start's "shift" and "lift", the end's lowering ("air", "down") and "back"."""
        if self._lead_ff is None:
            sp, ff = self.sp, {}
            if sp.lead_in is not None:
                ws = sp.lead_in
                ff["shift"], ff["lift"] = self._shift_offsets(ws, ws.shift), self._part_offsets(ws.lift)
            if sp.lead_out is not None:
                ws = sp.lead_out
                ff["air"], ff["down"] = (self._part_offsets(p) for p in _lowering(ws))
                ff["back"] = self._shift_offsets(ws, reverse(ws.shift), True)
            self._lead_ff = ff
        return self._lead_ff

    def _shift_offsets(self, ws: WeightShift, part, back: bool = False) -> np.ndarray:
        """A weight shift's goal offsets as streamed: the free sole's lever-rule share falling to 0 (rising again
        when played `back`)."""
        lever = float(np.clip(self._lever_share(ws, ws.stand), 0.0, 1.0))
        progress = ws.progress[::-1] if back else ws.progress
        return goal_offsets(self.model, self.cfg, part.q, self.sp.params, self.sp.base, self._p_gains,
                            lever * (1.0 - progress))  # fmt: skip

    def _part_offsets(self, part) -> np.ndarray:
        """A sole lift's or lowering's feed-forward offsets as streamed (on the base sole alone)."""
        sp = self.sp
        return feedforward_offsets(self.model, self.cfg, part.q, part.qd, part.qdd, sp.base, sp.params,
                                   self._p_gains)  # fmt: skip

    @steady_gc()
    def run(self) -> TrajectoryRunResult:
        sp, res, p = self.sp, self.traj_result, self.plan.postures[0]
        q = self._read()
        self.rec.update_meta(position_p_gain_configured=float(self.cfg.executor.position_p_gain),
                             gravity_compensation=self.gravity_compensation, **self._read_gains())  # fmt: skip
        if self._p_gains is not None:  # the servos reported their gains: the offsets' stiffness follows them
            self._ff = self._stream_offsets()
        cells = polygon = None
        try:
            start = self._start_move(q)
            self._check_servo_limits(start, q)
            if sp.standing:
                self.operator.lift(None)
                self.progress_cb(Progress(0, len(sp.t), 0, 0, "tare"))
                self.rec.update_meta(tare_kg=[b.tare(self.tare_s).tolist() for b in self.boards],
                                     tare_mass_sd_kg=tare_mass_sd(self.boards))  # fmt: skip
            self.progress_cb(Progress(0, len(sp.t), 0, 0, "move"))
            q = self._to_start(start)
            if sp.standing:
                right_off, left_off = self.cfg.board_offsets(0)
                placement = self.plan.placement(0)
                cells = cells_in_base(board_poses_for(np.array(placement.other_foot), right_off, left_off))
                if sp.single is None:  # each board weighs its own sole
                    self._soles = sole_poses(self.model, np.array(placement.other_foot), sp.base)
                polygon = self._support_polygon(p.q)
                self.progress_cb(Progress(0, len(sp.t), 0, 0, "place"))
                set_down_lifted = sp.single is not None and sp.lead_in is None
                self.operator.place(placement, right_off, left_off, lifted=set_down_lifted)
            self.progress_cb(Progress(0, len(sp.t), 0, 0, "settle"))
            for _ in range(self.ex.settle_attempts):
                settled, q = self._settle(p.q, 0)
                if settled:
                    break
            else:
                err = np.degrees(np.abs(q - p.q))
                j = int(np.argmax(err))
                raise SafetyTrip(
                    f"the start posture did not settle ({self.model.joint_names[j]} {err[j]:.2f} deg off); "
                    "nothing streamed"
                )
            if sp.standing:  # let the landing die out on the boards before the excitation starts
                t0 = self.clock.now()
                off = self._offsets(p.q) if self.gravity_compensation else None
                while self.clock.now() - t0 < LANDING_S / self.k:
                    self._tick(p.q, 0, "settle", None, off)
            if sp.lead_in is not None:  # from both soles onto the base sole, the free sole lifted
                polygon = self._weight_shift(cells, polygon)
            self._stream(cells, polygon)
            if sp.lead_out is not None:  # the free sole back down and the weight shared again
                self._weight_shift_back(cells, polygon)
            self.progress_cb(Progress(len(sp.t), len(sp.t), 0, 0, "done"))
        except BaseException:
            self.link.stop()
            raise
        finally:
            res.tick_periods = self.result.tick_periods
            res.board_stats = [b.stats for b in self.boards]
        self.link.stop()
        return res

    def _support_polygon(self, q: np.ndarray):
        """The soles the robot stands on: the base sole alone (single support) or the hull of both."""
        if self.sp.single is not None and not self._both_soles:
            return sole_polygon(self.model, self.sp.base)
        corners = foot_corners(self.model, q, self.sp.params, self.sp.base)
        return MultiPoint(np.concatenate(list(corners.values()))).convex_hull

    def _check_free_sole(self, tk: float) -> None:
        """Single support: trip when the free sole's board (board 1) carries TOUCH_SHARE of the weight for
        TOUCH_HOLD_S — the lifted sole touched down."""
        kg = self._latest_kg[1] if len(self._latest_kg) > 1 else None
        if self.sp.single is None or self._both_soles or kg is None:
            return
        now, load = self.clock.now(), float(np.sum(kg))
        if load < TOUCH_SHARE * self._weight_kg:
            self._touch_since = None
            return
        self._touch_since = now if self._touch_since is None else self._touch_since
        if (now - self._touch_since) * self.k >= TOUCH_HOLD_S:
            raise SafetyTrip(
                f"the lifted {self.sp.single.other} sole touched down (its board carries {load:.1f} kg) at "
                f"t = {tk:.2f} s; {self.traj_result.ticks} tick(s) recorded"
            )

    def _weight_shift(self, cells, hull):
        """Stream the weight shift (double support: the free sole's feed-forward share of the weight falls to 0),
        hold until the free sole's board has unloaded (< TOUCH_SHARE of the measured load, else stop), lift the
        free sole to the plan's start (single support) and hold it there; returns the base sole's polygon."""
        ws, sp = self.sp.lead_in, self.sp
        self.rec.update_meta(weight_shift=ws.summary())
        off = self._lead_offsets()["shift"]
        self._stream_part("shift", ws.shift.t, ws.shift.q, off, cells, hull)
        loads: list[np.ndarray] = []
        t0 = self.clock.now()
        while self.clock.now() - t0 < UNLOAD_S / self.k:
            self._tick(ws.shift.q[-1], 0, "unload", None, off[-1])
            self._standing_check(cells, hull, float(ws.shift.t[-1]), "shifting")
            if all(k is not None for k in self._latest_kg) and self.clock.now() - t0 >= UNLOAD_S / (
                2 * self.k
            ):
                loads.append(np.array([float(np.sum(k)) for k in self._latest_kg]))
        kg = np.mean(loads, axis=0) if loads else np.full(2, np.nan)
        share = float(kg[1] / kg.sum()) if loads and kg.sum() > 0 else math.nan
        self.rec.update_meta(weight_shift=ws.summary() | {"free_board_kg_at_lift": float(kg[1]),
                                                          "free_board_share_at_lift": share})  # fmt: skip
        if not share < TOUCH_SHARE:
            raise SafetyTrip(
                f"after the weight shift the {ws.other} sole's board still carries {share:.0%} of the load "
                f"(≥ {TOUCH_SHARE:.0%}): not lifted, the plan not streamed (the kinematic emulator's boards always "
                "share the load: single support on the emulated bench needs --physics mujoco)"
            )
        self.expect_sole(ws.other, True)
        self._both_soles = False
        polygon = self._support_polygon(ws.lift.q[0])
        lf = ws.lift
        self._stream_part("lift", lf.t, lf.q, self._lead_offsets()["lift"], cells, polygon)
        t0, off0 = self.clock.now(), self._offsets(sp.q[0])
        while self.clock.now() - t0 < LANDING_S / self.k:  # at rest on one sole before the excitation
            self._tick(sp.q[0], 0, "settle", None, off0)
            self._standing_check(cells, polygon, 0.0, "at the start")
        return polygon

    def _weight_shift_back(self, cells, polygon) -> None:
        """The end weight shift (`StreamPlan.lead_out`: the start's for a plan ending where it starts) played
        backwards — the free sole lowered to straight above its ground pose, put down, and the weight shifted back
        onto both soles, held standing. run.json keeps how it ended (and a transition of its own)."""
        ws, sp = self.sp.lead_out, self.sp
        if ws is not sp.lead_in:
            self.rec.update_meta(weight_shift_end=ws.summary())
        air, down = _lowering(ws)
        ff = self._lead_offsets()
        self._stream_part("lower", air.t, air.q, ff["air"], cells, polygon)
        self.expect_sole(ws.other, False)
        self._both_soles = True  # the free sole may touch its board from here on
        self._stream_part("lower", down.t, down.q, ff["down"], cells, polygon)
        back, hull = reverse(ws.shift), self._support_polygon(ws.stand)
        off = ff["back"]
        self._stream_part("shift", back.t, back.q, off, cells, hull)
        t0 = self.clock.now()
        while self.clock.now() - t0 < LANDING_S / self.k:
            self._tick(ws.stand, 0, "settle", None, off[-1])
            self._standing_check(cells, hull, float(back.t[-1]), "standing")
        self.rec.update_meta(weight_shift=self.rec.meta["weight_shift"] | {"end": "standing on both soles"})

    def _lever_share(self, ws: WeightShift, q: np.ndarray) -> float:
        """The free sole's lever-rule share of the weight at posture q, its sole at `ws`'s ground pose (the
        double-support feed-forward's)."""
        com = com_position(self.model, q, self.sp.params, self.sp.base)[:2]
        return lever_share(self.model, com, ws.pose, self.sp.base)

    def _stream_part(self, phase: str, t: np.ndarray, q: np.ndarray, off: np.ndarray, cells, polygon) -> None:
        """Stream a checked part of the weight-shift start, tripping as streaming does (tracking, tipping,
        falling, and once lifted the free sole touching down)."""
        self.progress_cb(Progress(0, len(t), 0, 0, phase))
        for k, (tk, qk) in enumerate(zip(t, q, strict=True)):
            q_meas = self._tick(qk, 0, phase, None, off[k])
            err = np.degrees(np.abs(q_meas - qk))
            if not err.max() <= self.ex.track_trip_deg:  # a NaN trips too
                j = int(np.argmax(err))
                raise SafetyTrip(
                    f"tracking error {err[j]:.1f} deg ({self.model.joint_names[j]}) > {self.ex.track_trip_deg:g} "
                    f"deg {phase}ing at t = {tk:.2f} s; {self._streamed()}"
                )
            self._standing_check(cells, polygon, float(tk), f"{phase}ing")

    def _standing_check(self, cells, polygon, tk: float, when: str) -> None:
        """The executor's tip and fall trips (and on one sole the free sole's touch-down), said of a moment of
        the weight-shift start."""
        cop, kg = self._measured_cop(cells)
        margin = float(signed_margin(polygon, cop[None])[0]) if cop is not None else None
        try:
            self._check_standing(self.plan.postures[0], cop, margin, kg)
            self._check_free_sole(tk)
        except SafetyTrip as exc:
            why = str(exc).split(";")[0].removeprefix("posture 0: ")
            raise SafetyTrip(f"{why} {when} at t = {tk:.2f} s; {self._streamed()}") from None

    def _streamed(self) -> str:
        """What a trip before or after streaming the trajectory leaves recorded."""
        n = self.traj_result.ticks
        return "nothing streamed" if n == 0 else f"{n} tick(s) recorded"

    def _stream(self, cells, polygon) -> None:
        sp, res, p = self.sp, self.traj_result, self.plan.postures[0]
        rec: TrajectoryRecorder = self.rec
        if sp.standing:  # what the tare leaves on every row of the recording (`identify dynamic` adds it)
            rec.update_meta(tare_wrench_cov=tare_wrench_cov(self.boards, cells))
            rec.open_wrench_recording(cells)
        sq = 0.0
        for k, (tk, qk) in enumerate(zip(sp.t, sp.q, strict=True)):
            rec.t_traj = float(tk)
            q_meas = self._tick(qk, 0, "stream", None, None if self._ff is None else self._ff[k])
            err = np.degrees(np.abs(q_meas - qk))
            res.max_tracking_deg = max(res.max_tracking_deg, float(err.max()))
            sq += float(np.mean(err**2))
            res.ticks = k + 1
            res.rms_tracking_deg = math.sqrt(sq / res.ticks)
            # before the trips: a tick that trips has its row too
            if sp.standing:
                rec.stream_tick(self._last_tick, q_meas, cells, float(tk))
            elif rec.uniform is not None:  # an arm whose link reads its currents
                rec.arm_tick(self._last_tick, q_meas, self.link.currents, float(tk))
            if not err.max() <= self.ex.track_trip_deg:  # a NaN trips too
                j = int(np.argmax(err))
                raise SafetyTrip(
                    f"tracking error {err[j]:.1f} deg ({self.model.joint_names[j]}) > {self.ex.track_trip_deg:g} deg "
                    f"at t = {tk:.2f} s; {res.ticks} tick(s) recorded"
                )
            cop = kg = None
            if sp.standing:
                cop, kg = self._measured_cop(cells)
                self._tally_corners(cells, kg)
                margin = float(signed_margin(polygon, cop[None])[0]) if cop is not None else None
                try:
                    self._check_standing(p, cop, margin, kg)
                except SafetyTrip as exc:  # the posture executor's words, said of the trajectory
                    why = str(exc).split(";")[0].removeprefix("posture 0: ")
                    raise SafetyTrip(f"{why} at t = {tk:.2f} s; {res.ticks} tick(s) recorded") from None
                self._check_free_sole(float(tk))
            self.progress_cb(
                Progress(k + 1, len(sp.t), 0, 0, "stream", float(tk), float(sp.t[-1]), cop, None, kg)
            )
        rec.t_traj = None

    def _tally_corners(self, cells: np.ndarray, total_kg: float | None) -> None:
        """Each sole's own CoP, from its board's latest report, on its corners (`SoleRocking`); a board carrying
        under LOADED_SHARE of the weight is passed over (its CoP is noise)."""
        if not self._soles or not total_kg:
            return
        for i, (site, pose) in enumerate(self._soles):
            kg = self._latest_kg[i]
            if kg is None or float(np.sum(kg)) < LOADED_SHARE * total_kg:
                continue
            cop = np.asarray(kg, dtype=float) @ cells[4 * i : 4 * i + 4] / float(np.sum(kg))
            index = float(corner_index(self.model, site, pose, cop))
            self.traj_result.soles.setdefault(site, SoleRocking()).add(index)


def start_plan_free(model: RobotModel, sp: StreamPlan) -> Plan:
    """A one-posture plan holding the start of a fixed-base trajectory (no placement: nothing is placed)."""
    posture = Posture(0, 0, sp.q[0].copy(), move_s=0.0, hold_s=0.0)
    return Plan(
        model.name,
        sp.base,
        list(model.joint_names),
        [Placement(0, (0.0, 0.0, 0.0))],
        [posture],
        params=sp.params,
    )
