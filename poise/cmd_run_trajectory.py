"""`poise run TRAJECTORY_PLAN.json`: stream an excitation trajectory at the servo rate and record it.

The plan is refused (exit 2, nothing sent, no run directory written) unless it passes the checks `plan check`
applies (`trajectories.plan.check_plan`) and every streamed setpoint passes the run's checks
(`drivers.trajectory_run.check_stream`). See `drivers/trajectory_run.py` for the run directory's files.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.live import Live
from rich.markup import escape

from drivers.config import RobotConfig
from drivers.emulators.world import WorldOptions
from drivers.executor import Progress
from drivers.run_files import COMPLETED, held_run, sigterm_as_interrupt, stopped_status
from drivers.session import Session
from drivers.single_support_stream import SingleSupport, Transitions, plan_margin, plan_transitions
from drivers.trajectory_run import (
    ROCKED_WARN,
    StreamCheck,
    StreamPlan,
    TrajectoryExecutor,
    TrajectoryRecorder,
    TrajectoryRunResult,
    check_start,
    check_stream,
    rocked_soles,
    tick_times,
)
from formats.board_gains import BoardGains
from formats.errors import DataError
from formats.trajectory_plan import TrajectoryPlan, load_trajectory_plan, plan_digest
from poise.cmd_run import (
    check_bench,
    check_time_scale,
    gain_se_meta,
    gains_meta,
    interrupted_stream,
    noise_seed_of,
    provenance_meta,
    run_config,
    uncalibrated_boards_note,
)
from poise.output import console, print_json, quantity_table, run_progress
from robots.tree import RobotModel

if TYPE_CHECKING:
    from trajectories.verify import TrajectoryCheck


@dataclass
class TrajectoryRun:
    """What `poise run` did with a trajectory plan."""

    run_dir: str
    status: str
    result: TrajectoryRunResult
    rate_hz: float
    duration_s: float
    seconds: float
    torque_constants: dict[str, float] | None = (
        None  # an arm's recorded currents: the known constants (N·m/A)
    )
    plan_rate_hz: float | None = None  # the rate the plan was designed and forecast at


START_CHOICES = ("weight-shift", "set-down")  # how a single-support run starts
SHOWN_PROBLEMS = 6  # problems a refusal names; `plan check --config` lists them all


def setpoints(
    plan: TrajectoryPlan, model: RobotModel, traj, config: RobotConfig, params: str
) -> tuple[StreamPlan, StreamCheck]:
    """The trajectory sampled at the configuration's rate, as `poise run` streams it, and every setpoint checked
    (`check_stream`): the run's own pre-flight, which `plan check --config` applies too."""
    from trajectories.parametrisation import motion_band_hz
    from trajectories.plan import plan_recording

    how = plan_recording(plan, traj)
    t = tick_times(traj.duration, config.executor.rate_hz)
    q, qd, qdd = traj.sample(t)
    sp = StreamPlan(t, q, how.base, params, how.standing, motion_band_hz(traj), qd=qd, qdd=qdd)
    if how.single:
        sp.single = SingleSupport(traj.other, traj.lift, plan_margin(plan), traj.max_lift, traj.max_tilt)
    return sp, check_stream(model, config, sp)


def require_config(config: RobotConfig, robot: str) -> None:
    """Refuse a configuration for another robot, naming the bundled configurations (drivers/*.toml) for this one."""
    if config.robot == robot:
        return
    import tomllib

    from drivers.config import DEFAULT_CONFIG

    fits = []
    for path in sorted(DEFAULT_CONFIG.parent.glob("*.toml")):
        try:
            if tomllib.loads(path.read_text(encoding="utf-8")).get("robot", "tulip") == robot:
                fits.append(_shown(path))
        except (OSError, ValueError):
            continue
    hint = " or ".join(f"--config {f}" for f in fits) if fits else f"a --config for {robot!r}"
    raise DataError(f"the robot configuration {_shown(Path(config.source))} is for {config.robot!r}, the plan for "
                    f"{robot!r}: pass {hint}")  # fmt: skip


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@dataclass
class Preflight:
    """The run's pre-flight of a plan: the plan-check checks, the setpoints at the configuration's rate and their
    check, and a single-support plan's weight shifts (None for any other plan, or one set down on its sole)."""

    check: TrajectoryCheck
    sp: StreamPlan
    stream: StreamCheck
    transitions: Transitions | None = None

    @property
    def problems(self) -> list[str]:
        """Every problem, in the order found: the plan's, its weight shifts', its setpoints' (the start's last)."""
        shifts = [] if self.transitions is None else self.transitions.problems
        return list(self.check.problems) + shifts + list(self.stream.problems)


def preflight(
    plan: TrajectoryPlan,
    model: RobotModel,
    traj,
    config: RobotConfig,
    params: str,
    start: str = "weight-shift",
) -> Preflight:
    """The run's pre-flight, which `plan check` prints and `poise run` refuses on, for every plan kind: the
    plan-check checks (`check_plan`), every setpoint at the configuration's rate (`setpoints`) and, for a
    single-support plan started by a weight shift (`start`), its weight shifts (`plan_transitions`) and the
    posture it stands in before them (`check_start`); all of them, none cut short."""
    from trajectories.plan import check_plan

    check = check_plan(plan, model, traj, params)
    sp, stream = setpoints(plan, model, traj, config, params)
    if sp.single is None or start != "weight-shift":
        return Preflight(check, sp, stream)
    tr = plan_transitions(model, config, plan, traj, params)
    if not tr.problems:  # the start's posture (where a shift failed, its problems say why already)
        sp.lead_in, sp.lead_out = tr.start, tr.end  # their ticks checked by plan_transitions
        stream = check_start(model, config, sp, stream.problems)
    return Preflight(check, sp, stream, tr)


def prepare(
    plan: TrajectoryPlan, config: RobotConfig, params: str | None = None, start: str = "weight-shift"
) -> tuple[RobotModel, StreamPlan, list[str], StreamCheck]:
    """(model, setpoints, problems, their check): the run's pre-flight (`preflight`) of `plan` for this
    configuration; `start`: a single-support plan's (a weight shift from both soles and one back at the end, or
    set down on the base sole)."""
    from trajectories.plan import plan_model, plan_trajectory

    model = plan_model(plan)
    require_config(config, model.name)
    traj = plan_trajectory(plan, model)
    ps = params or plan.params or next(iter(model.params))
    pf = preflight(plan, model, traj, config, ps, start)
    return model, pf.sp, pf.problems, pf.stream


def run_trajectory(
    plan_path: str,
    robot: str,
    boards: str | None,
    out: str,
    config: RobotConfig,
    world_opts: WorldOptions | None = None,
    prompt: bool = True,
    progress=None,
    tare_s: float = 1.0,
    time_scale: float = 1.0,
    start: str | None = None,
    board_gains: BoardGains | None = None,
) -> TrajectoryRun:
    """Check, then stream and record a trajectory plan; raises DataError (nothing sent) when it is refused.
    `time_scale` K: the emulated bench's clock runs K × the wall clock (K < 1: slow motion, so a loaded
    computer keeps the physics twin and the ticks on time); the trajectory and its recording keep their times.
    `start`: how a single-support plan starts (`prepare`; None: by a weight shift). `board_gains`: the boards'
    per-cell gains (`poise boards calibrate`)."""
    t_start = time.perf_counter()
    plan = load_trajectory_plan(plan_path)
    model, sp, problems, stream = prepare(plan, config, start=start or "weight-shift")
    if start is not None and sp is not None and sp.single is None:
        raise DataError(f"--start says how a single-support plan starts; {plan_path} is not one")
    if world_opts is not None and world_opts.clamp_soles and sp is not None and sp.single is not None:
        raise DataError("--clamp-soles straps both soles to their boards; a single-support plan lifts one")
    start = start or "weight-shift"
    if problems:
        raise DataError(_refusal(problems, plan_path, config))
    # run.json's `motion`: the plan's and the recording's names (`formats.dynamic_recording.MOTIONS`)
    motion = "single-support" if sp.single is not None else "double-support" if sp.standing else "free"
    if not sp.standing:
        if boards is not None:
            raise DataError(
                f"{model.name!r}'s trajectory is fixed-base: it runs without boards (drop --boards)"
            )
        boards = None  # a fixed-base arm: encoders, and the motor currents a Dynamixel link reads
        if robot.startswith("sim"):
            if robot != "sim":
                raise DataError(
                    f"a fixed-base arm's emulated bench is a Dynamixel bus: --robot sim, not {robot!r}"
                )
            # the physics twin bolted to its stand; the boards' options do not apply
            world_opts = replace(world_opts or WorldOptions(), fixed_base=True, board_averaging=False)
    elif boards is None:
        raise DataError(f"a {motion} trajectory needs --boards (sim, bt:…, evdev:…, serial:…)")
    sha = plan_digest(plan)
    meta = {"plan": str(Path(plan_path).resolve()), "plan_sha256": sha, "kind": "trajectory", "robot": robot, "boards": boards,
            "rate_hz": config.executor.rate_hz, "ticks_planned": len(sp.t), "duration_s": float(sp.t[-1]),
            "standing": sp.standing, "motion": motion}  # fmt: skip
    if sp.single is not None:
        meta["start"] = start
    meta.update(provenance_meta(config))
    check_time_scale(robot if world_opts is not None else "", time_scale)  # no emulated bench: real time
    if time_scale != 1.0:
        world_opts = replace(world_opts, time_scale=time_scale)
        meta["time_scale"] = time_scale
    start_q = (sp.q[0], sp.params, sp.base) if sp.standing else None
    # before the run directory
    check_bench(model, config, robot, boards, world_opts, sp.standing, start_q, board_gains)
    if world_opts is not None and world_opts.noise and robot.startswith("sim"):
        meta["noise_seed"] = noise_seed_of(world_opts)
    if board_gains is not None:
        meta["board_gains"] = gains_meta(board_gains)
        meta.update(gain_se_meta(board_gains))
    if world_opts is not None and world_opts.clamp_soles:
        meta["soles"] = "clamped to the boards (twin)"
    rec = TrajectoryRecorder(out, model, sp.base, sp.standing, meta, 1.0 / config.executor.rate_hz, time_scale,
                             motion=motion if sp.single is not None else None, band_hz=sp.band_hz,
                             robot_source=plan.robot_source)  # fmt: skip
    status = "running"
    result = None
    constants = None
    opened = False
    try:
        with Session(robot, boards, model, config, world_opts, prompt=prompt, board_gains=board_gains) as s:
            opened = True
            twin = getattr(s.world, "twin", None) if s.world is not None else None
            if not sp.standing and hasattr(s.link, "currents"):
                constants = torque_constants(config, model, s.world)
                rec.record_currents(constants)
                rec.update_meta(torque_constants=constants)
            ex = TrajectoryExecutor(
                s.link,
                s.boards,
                model,
                config,
                sp,
                stream,
                rec,
                s.operator,
                progress,
                tare_s,
                time_scale,
                s.clock,
                expect_sole=twin.expect_sole if twin is not None else None,
            )
            try:
                result = ex.run()
                status = COMPLETED
            except BaseException as exc:
                status = stopped_status(exc)
                raise
            finally:
                r = ex.traj_result
                rec.update_meta(status=status, ticks_streamed=r.ticks, max_tracking_deg=r.max_tracking_deg,
                                rms_tracking_deg=r.rms_tracking_deg, jitter=ex.result.jitter(),
                                soles={k: v.to_dict() for k, v in r.soles.items()})  # fmt: skip
                if twin is not None:  # what the physics saw (falls, edges, slips), by simulated time
                    rec.update_meta(
                        twin_events=twin.report(), twin_timing=twin.timing(), twin_joints=twin.joint_truth()
                    )
                    _save_truth(twin, rec.dir / "truth.json")
                    if twin.opts.trace:
                        _save_trace(twin, rec.dir / "twin_trace.npz")
    except BaseException as exc:
        if not opened:  # the bench did not open (a device, its configuration): nothing sent, no run files
            rec.discard()
        elif status == "running":  # failed before streaming began
            rec.update_meta(status=stopped_status(exc))
        raise
    finally:
        rec.close()
    return TrajectoryRun(
        str(rec.dir),
        status,
        result,
        sp.rate_hz,
        float(sp.t[-1]),
        time.perf_counter() - t_start,
        constants,
        plan.rate_hz,
    )


def _refusal(problems: list[str], plan_path: str, config: RobotConfig) -> str:
    """The pre-flight's refusal: how many problems, the first SHOWN_PROBLEMS, and the command listing them all."""
    shown = "; ".join(problems[:SHOWN_PROBLEMS])
    if len(problems) > SHOWN_PROBLEMS:
        shown += (f"; and {len(problems) - SHOWN_PROBLEMS} more (`poise plan check {plan_path} --config "
                  f"{_shown(Path(config.source))}` lists them all)")  # fmt: skip
    return f"trajectory refused before moving ({len(problems)} problem(s)): {shown}"


def torque_constants(config: RobotConfig, model: RobotModel, world=None) -> dict[str, float]:
    """The joints' known torque constants (N·m/A at the joint): the configuration's, or the emulated servos'."""
    from drivers.config import servo_order

    servos = servo_order(config, model.joint_names)
    emulated = getattr(world, "torque_constants", None) or {}
    out = {s.name: emulated.get(s.id, s.torque_constant) for s in servos}
    return {name: float(k) for name, k in out.items() if k is not None}


def _save_truth(twin, path) -> None:
    """The physics twin's true parameter set, as MuJoCo simulates it (inertias made realisable): what
    `identify dynamic --reference RUN_DIR/truth.json` compares the estimates with."""
    from drivers.emulators.mujoco_twin import physical_truth
    from formats.parameter_set import save_parameter_set

    save_parameter_set(physical_truth(twin.model, twin.truth), path)


def _save_trace(twin, path) -> None:
    """The twin's per-step trace (`Twin.trace_arrays`), written whole or not at all."""
    import os

    import numpy as np

    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as f:
        np.savez(f, **twin.trace_arrays())
    os.replace(tmp, path)


class _View:
    def __init__(self, live: Live | None) -> None:
        self.live, self._last = live, 0.0

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if self.live is None or (p.phase in ("stream", "settle", "move") and now - self._last < 0.1):
            return
        self._last = now
        load = f"{p.total_kg:.2f} kg" if p.total_kg is not None else "—"
        self.live.update(
            f"trajectory [bold]{p.phase}[/bold] tick {p.position}/{p.total}  t = {p.phase_elapsed:5.2f}/"
            f"{p.phase_total:.2f} s  load {load}"
        )


def cmd_run_trajectory(args: argparse.Namespace) -> int:
    if args.resume:
        raise DataError("--resume applies to posture plans; a trajectory run starts again in a new --out")
    config = run_config(args)
    opts = None
    if args.robot.startswith("sim"):
        # a dynamic recording: the twin's boards convert over fixed windows (no aliasing of the servo steps)
        opts = WorldOptions(
            noise=not args.no_noise,
            physics=args.physics,
            board_averaging=True,
            clamp_soles=args.clamp_soles,
            truth=args.truth,
            twin_trace=getattr(args, "twin_trace", False),
            noise_seed=args.noise_seed,
        )
    held = held_run(args.out)
    try:
        with sigterm_as_interrupt(), run_progress() as live:
            run = run_trajectory(
                args.plan, args.robot, args.boards, args.out, config, opts, not args.yes, _View(live),
                time_scale=args.time_scale, start=getattr(args, "start", None),
                board_gains=getattr(args, "gains", None),
            )  # fmt: skip
    except KeyboardInterrupt as exc:
        return interrupted_stream(args, held, "raw_joints.csv", exc)
    r = run.result
    summary = {
        "run_dir": run.run_dir,
        "status": run.status,
        "ticks": r.ticks,
        "ticks_planned": r.planned,
        "rate_hz": run.rate_hz,
        "duration_s": run.duration_s,
        "max_tracking_deg": r.max_tracking_deg,
        "rms_tracking_deg": r.rms_tracking_deg,
        "seconds": run.seconds,
        "boards": [vars(b) for b in r.board_stats],
        "soles": {k: v.to_dict() for k, v in r.soles.items()},
        "currents_recorded": run.torque_constants is not None,
        "torque_constants": run.torque_constants,
        "plan_rate_hz": run.plan_rate_hz,
    }
    if args.json:
        print_json(summary)
        return 0
    rows = [
        ("ticks streamed / planned", f"{r.ticks} / {r.planned}", "—"),
        ("streaming rate", f"{run.rate_hz:.1f}", "Hz"),
        ("trajectory duration", f"{run.duration_s:.2f}", "s"),
        ("max tracking error", f"{r.max_tracking_deg:.3f}", "deg"),
        ("RMS tracking error", f"{r.rms_tracking_deg:.3f}", "deg"),
        ("wall time", f"{run.seconds:.1f}", "s"),
    ]
    rows += [(f"{site} on three corners", f"{100 * v.share:.0f}", "% of ticks")
             for site, v in r.soles.items()]  # fmt: skip
    if run.torque_constants is not None:  # an arm: its currents in recording.csv, for `identify dynamic`
        rows += [("motor currents (recording.csv)", "recorded", "A"),
                 ("torque constants known", str(len(run.torque_constants)), "joints")]  # fmt: skip
    t = quantity_table(f"trajectory run → {escape(run.run_dir)}", rows)  # a directory's "[…]" is no markup
    console.print(t)
    rocked = rocked_soles({site: v.share for site, v in r.soles.items()})
    if rocked:
        console.print(
            f"[yellow]{' and '.join(rocked)} rocked: a sole's own CoP (from its board) left the region where all four "
            f"of its corners stay down for more than {ROCKED_WARN:.0%} of the ticks. A fixed-feet model misses that motion "
            "(identify dynamic's estimates carry it); gravity compensation (--gravity-comp) keeps the legs' "
            "internal moments off the soles.[/yellow]"
        )
    if run.plan_rate_hz and abs(run.plan_rate_hz - run.rate_hz) > 1e-9 * run.rate_hz:
        note = (f"the plan's rate_hz is {run.plan_rate_hz:g} Hz; this bench streamed and recorded at {run.rate_hz:g} Hz "
                f"(its [executor] rate_hz): forecast what it records with `poise plan forecast {args.plan} --noise "
                f"SIGMA --rate-hz {run.rate_hz:g}`")  # fmt: skip
        console.print(f"[yellow]{escape(note)}[/yellow]", highlight=False)  # "[executor]" is no markup tag
    note = uncalibrated_boards_note(args)
    if note:
        console.print(note, highlight=False)
    return 0
