"""`poise run`: execute a posture plan on the robot while recording both balance boards."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.live import Live
from rich.table import Table

from drivers.config import load_config
from drivers.recorder import RunRecorder, check_run_folder, plan_sha256
from drivers.run_events import attribute, per_posture
from drivers.run_files import (
    COMPLETED,
    Terminated,
    left_to_run,
    recorded_postures,
    sigterm_as_interrupt,
    stopped_status,
)
from formats.errors import DataError
from formats.plan import check_compatible, load_plan
from formats.units import STANDARD_GRAVITY
from poise import argtypes as at
from poise.output import console, err_console, print_json, run_progress

if TYPE_CHECKING:  # the command imports what it runs lazily (a fast CLI start)
    from drivers.config import RobotConfig
    from drivers.emulators.world import WorldOptions
    from drivers.executor import Progress
    from formats.board_gains import BoardGains
    from robots.tree import RobotModel


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="execute a posture or trajectory plan on a robot and record the balance boards"
    )
    p.add_argument(
        "plan", help="posture plan or trajectory plan (JSON; the kind is read from its format field)"
    )
    p.add_argument(
        "--robot",
        type=at.robot_endpoint,
        required=True,
        help="sim | sim:framed | dxl:PORT[?baud=N] | serial:PORT[?baud=N]",
    )
    p.add_argument(
        "--boards",
        type=at.boards_endpoint,
        help="sim | bt:ADDR,ADDR | evdev:PATH,PATH | serial:PORT,PORT (a fixed-base trajectory runs without: "
        "--robot sim is then the twin bolted to its stand)",
    )
    p.add_argument(
        "--config",
        type=at.text_file,
        help="robot TOML (joint<->servo map, limits, board offsets); default: bundled TUlip",
    )
    p.add_argument(
        "--out", type=at.out_dir, required=True, help="run directory (recording.csv, raw samples, run.json)"
    )
    p.add_argument("--board-gains", type=at.text_file, metavar="FILE",
                   help="the boards' per-cell gains (`poise boards calibrate`; measured on these boards), applied "
                        "before the tare")  # fmt: skip
    p.add_argument("--resume", action="store_true", help="continue after the last completed posture in --out")
    p.add_argument(
        "--time-scale", type=at.positive, default=1.0, help="compress move/hold durations by K (simulation)"
    )
    p.add_argument("--yes", action="store_true", help="no operator prompts between placements")
    p.add_argument("--no-noise", action="store_true", help="sim: ideal boards and encoders")
    p.add_argument("--noise-seed", type=at.seed, default=None,
                   help="sim: the seed of this run's sensor noise and placement error (default 0: every run the same "
                        "realisation; give each repeat of a plan its own to average noise out); the boards' cell "
                        "errors stay those of the emulated boards")  # fmt: skip
    p.add_argument("--physics", choices=["kinematic", "mujoco"], default=None,
                   help="sim: the emulated robot — the MuJoCo physics twin (default: falls, sway, slip) or kinematic (fast)")  # fmt: skip
    p.add_argument("--clamp-soles", action="store_true",
                   help="sim, physics twin: soles strapped flat to the boards once standing — the fixture of a "
                        "double-support dynamic experiment, whose model holds both feet fixed")  # fmt: skip
    p.add_argument("--twin-trace", action="store_true",
                   help="sim, physics twin, trajectory plan: also save every physics step while standing (CoM, "
                        "the plates' wrench, joint angles) to RUN/twin_trace.npz, for bench/twin_misfit.py")  # fmt: skip
    p.add_argument("--start", choices=["weight-shift", "set-down"], default=None,
                   help="single-support trajectory plan: stand on both boards and shift the weight onto the base sole, "
                        "then lift the other sole (default; as on real hardware), or set the robot down on its base "
                        "sole alone (a hoist or a second person)")  # fmt: skip
    at.add_twin_truth(p, "sim: ")
    at.add_gravity_comp(p)
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")
    p.add_argument("--joint", help="PWM plan: the joint to drive (default: the plan's)")
    p.add_argument("--limit-margin-deg", type=at.number(0.0, 90.0), default=None,
                   help="PWM plan: stop (PWM 0) when the joint comes this close to a limit [deg] (default 5)")  # fmt: skip
    p.add_argument("--drive-inertia", type=at.nonnegative, default=None,
                   help="PWM plan: the servo's rotor inertia at the joint [kg·m²], added to the link's in the "
                        "recording (default 0)")  # fmt: skip
    p.set_defaults(func=cmd_run)


class ProgressView:
    """One-line live status: posture i/n, phase, CoP, margin, load."""

    def __init__(self, live: Live | None) -> None:
        self.live = live
        self._last = 0.0

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if self.live is None or (p.phase == "hold" and now - self._last < 0.1):
            return
        self._last = now
        cop = f"({p.cop[0] * 1000:+7.1f}, {p.cop[1] * 1000:+7.1f}) mm" if p.cop is not None else "—"
        margin = f"{p.margin * 1000:+.1f} mm" if p.margin is not None else "—"
        load = f"{p.total_kg:.2f} kg" if p.total_kg is not None else "—"
        t = Table.grid(padding=(0, 2))
        t.add_row(
            f"posture {p.position}/{p.total} (#{p.posture}, placement {p.placement})",
            f"[bold]{p.phase}[/bold] {p.phase_elapsed:5.1f}/{p.phase_total:.1f} s",
            f"CoP {cop}",
            f"margin {margin}",
            f"load {load}",
        )
        self.live.update(t)


def run_config(args: argparse.Namespace):
    """The robot configuration of a run: the file's (`--config`), with `--gravity-comp` turning the feed-forward on."""
    config = load_config(args.config)
    if getattr(args, "gravity_comp", False):
        config.executor.gravity_compensation = True
    return config


def check_time_scale(robot: str, time_scale: float) -> None:
    """`--time-scale` compresses robot time on the emulated bench only: real servos would move K × faster than the
    velocity limits every check holds the plan to."""
    if time_scale != 1.0 and not robot.startswith("sim"):
        raise DataError(
            "--time-scale applies to the emulated bench (--robot sim): real servos keep real time"
        )


def check_bench(
    model: RobotModel,
    config: RobotConfig,
    robot: str,
    boards: str | None,
    opts: WorldOptions | None,
    standing: bool,
    start: tuple | None = None,
    gains: BoardGains | None = None,
) -> None:
    """What the bench would refuse once opened, refused first: before the run directory is created or any device
    opened, by the checks the bench itself applies (`drivers.session.check_endpoints`, the emulated bench's
    `check_world_options` and truth, the executor's gravity feed-forward). `opts`: the emulated bench's options
    (with `--robot sim`); `standing`: the robot stands on the boards (else a fixed-base arm); `start`: (q, params,
    base) of a standing robot's first posture, whose feed-forward is computed here as the executor computes it
    before moving (`drivers.gravity.goal_offsets`); `gains`: the boards' per-cell gains, which must be these
    boards' (`drivers.wbb.recalibrate.check_gains_for`)."""
    from drivers.session import check_endpoints

    check_endpoints(robot, boards, not standing)
    if gains is not None and boards is not None:
        from drivers.wbb.open import board_drivers
        from drivers.wbb.recalibrate import check_gains_for

        if boards == "sim":
            from drivers.emulators.world import STANDING_BOARDS

            drivers = board_drivers("sim", [None] * STANDING_BOARDS)
        else:
            drivers = board_drivers(boards)
        check_gains_for([b.name for b in drivers], gains)
    if robot.startswith("sim") and opts is not None:
        from drivers.emulators.sim_robot import twin_truth
        from drivers.emulators.world import check_world_options

        check_world_options(opts, model.name)
        if opts.truth is not None:
            twin_truth(model, opts.truth)
    if config.executor.gravity_compensation:
        if not standing:
            raise DataError(f"gravity compensation (--gravity-comp, or [executor] gravity_compensation = true) is for a "
                            f"robot standing on the boards, not a fixed-base arm: {model.name!r} runs on its stand; "
                            "run without it")  # fmt: skip
        if start is not None:
            from drivers.gravity import goal_offsets

            goal_offsets(model, config, *start)


def world_options(args: argparse.Namespace):
    """The emulated bench of a posture run (`--robot sim`) from the command's options."""
    from drivers.emulators.world import WorldOptions

    return WorldOptions(
        noise=not getattr(args, "no_noise", False),
        physics=getattr(args, "physics", "kinematic"),
        time_scale=args.time_scale,
        clamp_soles=getattr(args, "clamp_soles", False),
        truth=getattr(args, "truth", None),
        noise_seed=getattr(args, "noise_seed", None),
    )  # the twin's servos hold the gain the link writes to them ([executor] position_p_gain)


def execute(args, model, plan, config, world_opts=None, progress=None, prepare=None, tare_s=1.0):
    """Run a plan; returns (RunResult, run dir). Shared by `poise run` and `poise demo`."""
    from drivers.executor import Executor
    from drivers.session import Session
    from drivers.setpoints import check_run

    checked = check_run(plan, model, config)  # every setpoint, before anything is sent
    problems = checked.problems
    if problems:
        shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
        raise DataError(f"plan refused before moving ({len(problems)} problem(s)): {shown}")
    if world_opts is None:
        world_opts = world_options(args)
    start = (plan.postures[0].q, plan.params, plan.base) if plan.postures else None
    check_time_scale(args.robot, args.time_scale)
    check_bench(model, config, args.robot, args.boards, world_opts, standing=True, start=start,
                gains=getattr(args, "gains", None))  # fmt: skip
    if not getattr(args, "json", False):
        for w in checked.warnings:
            err_console.print(f"[yellow]warning:[/yellow] {w}")
    gains = getattr(args, "gains", None)
    same = {"noise_seed": noise_seed_of(world_opts) if args.robot.startswith("sim") and world_opts.noise else None,
            "board_gains": None if gains is None else gains_meta(gains)}  # fmt: skip
    # the run folder's refusals before the bench opens (the recorder itself is made only once it did)
    check_run_folder(Path(args.out), args.resume, plan_sha256(plan), same)
    provenance = provenance_meta(config)  # the config file hashed once
    if args.resume:
        check_resume_alike(Path(args.out), config, provenance)
        if not left_to_run([p.index for p in plan.postures], recorded_postures(args.out)):
            raise NothingLeft(args.out, len(plan.postures))
    with Session(
        args.robot, args.boards, model, config, world_opts, prompt=not args.yes, board_gains=gains
    ) as s:  # the run directory only once the bench opened: a bench that does not open leaves none
        rec = RunRecorder(args.out, model.name, plan.base, model.joint_names, resume=args.resume,
                          plan_sha256=plan_sha256(plan), same=same)  # fmt: skip
        status = "running"
        try:
            rec.update_meta(plan=str(args.plan), robot=args.robot, boards=args.boards, time_scale=args.time_scale,
                            required_margin_m=checked.margin, status=status, **provenance)  # fmt: skip
            segments = rec.meta["segments"]  # what this segment ran with (the top-level keys: the latest)
            segments[-1].update(robot=args.robot, boards=args.boards, time_scale=args.time_scale)
            rec.update_meta(segments=segments, **gain_se_meta(gains))
            if s.world is not None:
                _save_bench_truth(s.world, rec.dir / "truth.json")
            if prepare is not None:
                prepare(s)
            ex = Executor(s.link, s.boards, plan, model, config, rec, args.time_scale, s.operator, progress, tare_s,
                          checked, s.clock)  # fmt: skip
            try:
                result = ex.run()
                status = COMPLETED
                return result, rec.dir
            finally:
                twin = getattr(s.world, "twin", None) if s.world is not None else None
                if twin is not None:  # what the physics saw (falls, edges, slips), by simulated time
                    _save_twin_events(rec, twin, ex.result)
        except BaseException as exc:
            status = stopped_status(exc)
            raise
        finally:
            rec.update_meta(status=status)
            rec.close()


class NothingLeft(Exception):
    """--resume of a posture run whose recording already holds every posture of the plan: nothing to run."""

    def __init__(self, out, postures: int) -> None:
        super().__init__(f"{out} already holds all {postures} postures of the plan: nothing left to run")
        self.out, self.postures = str(out), postures


def config_sha256(config: RobotConfig) -> str | None:
    """sha256 of the configuration file's bytes (None for a configuration not read from a file)."""
    import hashlib

    path = Path(config.source)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def board_offsets_meta(config: RobotConfig) -> dict:
    """The boards' poses in the soles' frames [m, m, rad] the run's CoPs are computed with: the defaults and
    each placement's own."""
    return {"right_board": [float(v) for v in config.right_board],
            "left_board": [float(v) for v in config.left_board],
            "placements": {str(k): [[float(v) for v in r], [float(v) for v in left]]
                           for k, (r, left) in sorted(config.placement_offsets.items())}}  # fmt: skip


def provenance_meta(config: RobotConfig) -> dict:
    """What run.json says about the software and configuration of a run: poise's version, and the configuration's
    file, its sha256, the servos' zeros [ticks] and the boards' poses."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        poise_version = version("poise")
    except PackageNotFoundError:
        poise_version = None
    return {"poise_version": poise_version,
            "config": {"path": str(Path(config.source).resolve()) if Path(config.source).is_file() else config.source,
                       "sha256": config_sha256(config),
                       "servo_zeros_ticks": {s.name: s.zero for s in config.servos}},
            "board_offsets": board_offsets_meta(config)}  # fmt: skip


def check_resume_alike(out: Path, config: RobotConfig, now: dict) -> None:
    """Refuse, before the bench opens, to resume a posture run whose recorded postures were measured with another
    configuration file, other board offsets or gravity compensation on/off: its rows would not be alike. A value the
    earlier run.json does not record (an older poise) is not compared."""
    import json

    try:
        meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # nothing to resume (or the recorder says what is wrong with it)
    segments = meta.get("segments") if isinstance(meta, dict) else None
    if not isinstance(segments, list) or not any(
        isinstance(g, dict) and g.get("completed") for g in segments
    ):
        return  # nothing recorded to be alike (or the recorder says what is wrong with the file)
    had_config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    pairs = [
        ("gravity compensation", meta.get("gravity_compensation"), bool(config.executor.gravity_compensation))
    ]
    had_offsets = meta.get("board_offsets") if isinstance(meta.get("board_offsets"), dict) else {}
    pairs += [(f"{key.replace('_', ' ')} [m, m, rad]", had_offsets.get(key), value)
              for key, value in now["board_offsets"].items()]  # fmt: skip
    pairs.append(("config sha256", had_config.get("sha256"), now["config"]["sha256"]))
    differ = [f"{what} {_said(old)} then, {_said(new)} now" for what, old, new in pairs
              if old is not None and old != new]  # fmt: skip
    if differ:
        raise DataError(f"--resume: {out}'s postures were recorded under other conditions: {'; '.join(differ)} "
                        f"(earlier config {had_config.get('path', '?')}); resume with the same --config and options, "
                        "or choose another --out")  # fmt: skip


def _said(value) -> str:
    """A run.json value in a refusal: a hash shortened, a pose's numbers rounded."""
    if isinstance(value, str) and len(value) == 64:
        return f"{value[:12]}…"
    if isinstance(value, list) and all(isinstance(v, float) for v in value):
        return "[" + ", ".join(f"{v:.4g}" for v in value) + "]"
    return repr(value)


def uncalibrated_boards_note(args: argparse.Namespace) -> str | None:
    """A closing note for a run that read boards without per-cell gains (none for ideal emulated boards)."""
    if args.boards is None or getattr(args, "gains", None) is not None:
        return None
    if args.boards == "sim" and getattr(args, "no_noise", False):
        return None
    return ("note: the boards ran without per-cell gains (`poise boards calibrate`, then `--board-gains`): a Wii "
            "board's cells err by ~2 %, which biases the CoP, the mass and the first moments identified from them")  # fmt: skip


def noise_seed_of(opts) -> int:
    """The emulated bench's noise seed for run.json (`WorldOptions.noise_seed`, else its seed)."""
    return opts.seed if opts.noise_seed is None else opts.noise_seed


def gains_meta(gains) -> dict:
    """How a run's board gains are recorded in run.json: the file's boards, gains and known weight."""
    return {"source": gains.endpoint, "weight_kg": gains.weight_kg,
            "boards": {b: g.tolist() for b, g in zip(gains.boards, gains.gains, strict=True)}}  # fmt: skip


def gain_se_meta(gains) -> dict:
    """The gains' uncertainty for run.json (`identify dynamic` adds it to the SEs): `board_gain_se`, each gain's
    relative SE by board, `board_gain_scale_se`, the known weight's relative SD (a scale on every gain), and
    `board_gain_tare_se`, by board the relative SD of the scale its calibration's tare put on its four gains, each
    where the gains file has it; apart from `board_gains`, which a resumed run must match."""
    if gains is None:
        return {}
    out = {}
    if gains.gain_se is not None:
        out["board_gain_se"] = {b: (se / g).tolist() for b, g, se in zip(gains.boards, gains.gains, gains.gain_se,
                                                                         strict=True)}  # fmt: skip
    if gains.weight_sd_kg is not None:
        out["board_gain_scale_se"] = gains.weight_sd_kg / gains.weight_kg
    if gains.tare_scale_se is not None:
        out["board_gain_tare_se"] = {
            b: float(s) for b, s in zip(gains.boards, gains.tare_scale_se, strict=True)
        }
    return out


def _save_bench_truth(world, path: Path) -> None:
    """The emulated robot's true parameter set in RUN/truth.json, written as a trajectory run writes it
    (`poise.cmd_run_trajectory._save_truth`): what `identify static --reference RUN/truth.json` compares with."""
    from types import SimpleNamespace

    from poise.cmd_run_trajectory import _save_truth

    # the physics twin, or the kinematic robot (a SimRobot) in its shape
    twin = world.twin or SimpleNamespace(model=world.robot.model, truth=world.robot.params)
    _save_truth(twin, path)


def _save_twin_events(rec: RunRecorder, twin, result) -> None:
    """The twin's events in run.json, each with the posture and phase it happened in when the drivers ran on
    the twin's clock (robot time = simulated time), and in each completed posture's report: those of the move
    that reached it ("transition") and those while it settled and was held ("posture")."""
    events = twin.report()
    if twin.clocked:
        events = attribute(events, result.timeline)
        grouped = per_posture(events)
        done = {r.posture for r in result.completed}
        for entry in rec.meta.get("report", []):
            if entry["posture"] in done:
                entry["twin_events"] = grouped.get(entry["posture"], {"transition": [], "posture": []})
    rec.update_meta(twin_events=events, twin_timing=twin.timing(), report=rec.meta.get("report", []))


# options of one kind of run: (option's dest, its default, applies to PWM plans only)
PWM_ONLY = (("joint", None), ("limit_margin_deg", 5.0), ("drive_inertia", 0.0))


def _given_for_another_run(args: argparse.Namespace, pwm: bool) -> None:
    """Refuse options given to a run they do not apply to (they would be ignored), then set the defaults: the
    emulated bench's on a real robot, a PWM plan's on another plan."""
    if not args.robot.startswith("sim"):
        for given, option in ((getattr(args, "physics", None) is not None, "--physics"),
                              (getattr(args, "no_noise", False), "--no-noise")):  # fmt: skip
            if given:
                raise DataError(
                    f"{option} sets up the emulated bench (--robot sim); {args.robot} is a real robot"
                )
    if getattr(args, "physics", None) is None:
        args.physics = "mujoco"
    for name, default in PWM_ONLY:
        value = getattr(args, name, None)
        if value is not None and not pwm:
            raise DataError(f"--{name.replace('_', '-')} applies to a PWM plan only; {args.plan} is not one")
        setattr(args, name, default if value is None else value)


def cmd_run(args: argparse.Namespace) -> int:
    from formats.plan import is_posture_plan
    from formats.pwm_plan import is_pwm_plan
    from formats.trajectory_plan import is_trajectory_plan
    from robots.registry import get_model

    if not Path(args.plan).is_file():
        raise DataError(f"{args.plan}: no such plan file")
    _given_for_another_run(args, is_pwm_plan(args.plan))
    if getattr(args, "clamp_soles", False) and not (
        args.robot.startswith("sim") and args.physics == "mujoco"
    ):
        raise DataError("--clamp-soles straps the physics twin's soles (--robot sim --physics mujoco); on a real "
                        "bench strap the feet by hand")  # fmt: skip
    if getattr(args, "twin_trace", False) and not (
        args.robot.startswith("sim") and args.physics == "mujoco" and is_trajectory_plan(args.plan)
    ):
        raise DataError(
            "--twin-trace records the physics twin (--robot sim --physics mujoco) during a trajectory plan"
        )
    if getattr(args, "start", None) is not None and not is_trajectory_plan(args.plan):
        raise DataError(
            "--start says how a single-support trajectory plan starts; this is not a trajectory plan"
        )
    if getattr(args, "noise_seed", None) is not None:
        if not args.robot.startswith("sim"):
            raise DataError("--noise-seed seeds the emulated bench's noise (--robot sim)")
        if getattr(args, "no_noise", False):
            raise DataError("--noise-seed seeds noise that --no-noise switches off: choose one")
        if is_pwm_plan(args.plan):
            raise DataError("--noise-seed: a PWM plan's emulated servo has no noise to seed")
    if getattr(args, "truth", None) is not None and not args.robot.startswith("sim"):
        raise DataError("--truth sets the emulated robot's parameters (--robot sim)")
    args.gains = None
    if getattr(args, "board_gains", None) is not None:
        from formats.board_gains import load_board_gains

        if args.boards is None:
            raise DataError("--board-gains are the balance boards' (--boards)")
        if args.boards == "sim" and getattr(args, "no_noise", False):
            raise DataError(
                "--no-noise: the emulated boards are ideal, their cells need no gains (drop --board-gains)"
            )
        args.gains = load_board_gains(args.board_gains)
    if is_pwm_plan(args.plan):
        from poise.cmd_run_pwm import cmd_run_pwm

        return cmd_run_pwm(args)
    if is_trajectory_plan(args.plan):
        from poise.cmd_run_trajectory import cmd_run_trajectory

        return cmd_run_trajectory(args)
    if not is_posture_plan(args.plan):
        if _is_doggy_plan(args.plan):
            raise DataError(f"{args.plan}: a Doggy PWM excitation plan, which your driver streams (poise has no "
                            f"Doggy link); `poise solve doggy --simulate S --plan {args.plan}` runs it on the "
                            "simulator")  # fmt: skip
        raise DataError(f"{args.plan}: not a plan poise runs (the JSON of a posture, trajectory or PWM plan)")
    if args.boards is None:
        raise DataError(
            "a posture plan needs --boards (sim, bt:ADDR,ADDR, evdev:PATH,PATH or serial:PORT,PORT)"
        )
    config = run_config(args)
    model = get_model(config.robot)
    plan = load_plan(args.plan, model)
    if (
        plan.robot_file
    ):  # designed for an edited description: its limits, feet and stance rules are the plan's
        model = get_model(plan.robot_file)
        check_compatible(plan, model, args.plan)
    try:
        with sigterm_as_interrupt(), run_progress() as live:
            result, run_dir = execute(args, model, plan, config, progress=ProgressView(live))
    except NothingLeft as done:
        if args.json:
            print_json(
                {"run_dir": done.out, "completed": [], "nothing_left": True, "postures": done.postures}
            )
        else:
            console.print(f"{done}", highlight=False, soft_wrap=True)
        return 0
    except KeyboardInterrupt as exc:
        return _interrupted(args, exc)
    summary = {
        "run_dir": str(run_dir),
        "completed": [r.posture for r in result.completed],
        "skipped_already_recorded": result.skipped,
        "jitter": result.jitter(),
        "boards": [vars(b) for b in result.board_stats],
        "postures": [
            {"posture": r.posture, "placement": r.placement, "cop_mm": (r.cop * 1000).tolist(),
             "cop_sd_mm": (r.cop_sd * 1000).tolist(), "force_n": r.force_n, "samples": r.samples, "holds": r.holds,
             **{k: v for k, v in r.report.items() if k != "posture"}}
            for r in result.completed
        ],
    }  # fmt: skip
    if args.json:
        print_json(summary)
        return 0
    t = Table(title=f"run → {run_dir}/recording.csv")
    for c in (
        "posture",
        "placement",
        "CoP x \\[mm]",
        "CoP y \\[mm]",
        "sd x \\[mm]",
        "sd y \\[mm]",
        "load \\[kg]",
        "samples",
    ):
        t.add_column(c, justify="right")
    for r in result.completed:
        t.add_row(str(r.posture), str(r.placement), f"{r.cop[0] * 1000:.2f}", f"{r.cop[1] * 1000:.2f}",
                  f"{r.cop_sd[0] * 1000:.2f}", f"{r.cop_sd[1] * 1000:.2f}", f"{r.force_n / STANDARD_GRAVITY:.2f}", str(r.samples))  # fmt: skip
    console.print(t)
    console.print(execution_table(result.completed))
    j = result.jitter()
    note = uncalibrated_boards_note(args)
    if note:
        console.print(note, highlight=False)
    console.print(
        f"{len(result.completed)} posture(s) recorded, {len(result.skipped)} already done; setpoints "
        f"{j['ticks']} ticks, period {j['period_mean_ms']:.2f} ± {j['period_std_ms']:.2f} ms; boards: "
        + ", ".join(
            f"{b.reports} reports / {b.bad} bad / {b.reconnects} reconnects" for b in result.board_stats
        )
    )
    return 0


def _interrupted(args: argparse.Namespace, exc: KeyboardInterrupt | None = None) -> int:
    """Ctrl-C (or SIGTERM, `Terminated`) during a posture run: say (and with --json print) how many postures are
    kept and that --resume continues, as a safety stop does; exit 130 (143 for SIGTERM)."""
    import json

    out = Path(args.out)
    try:
        segments = json.loads((out / "run.json").read_text(encoding="utf-8")).get("segments", [])
    except (OSError, ValueError, AttributeError):
        segments = []  # interrupted before the run directory was made
    kept = sorted({int(p) for g in segments if isinstance(g, dict) for p in g.get("completed", [])})
    this = segments[-1].get("completed", []) if segments and isinstance(segments[-1], dict) else []
    term = isinstance(exc, Terminated)
    if args.json:
        print_json({"interrupted": True, "signal": "SIGTERM" if term else "SIGINT", "run_dir": str(out),
                    "postures_kept": len(kept), "postures": kept, "completed_this_segment": list(this)})  # fmt: skip
    err_console.print(
        f"poise: {'terminated (SIGTERM)' if term else 'interrupted'}; run stopped, {len(kept)} completed posture(s) "
        f"kept in {out}/recording.csv" + (" — `--resume` continues after the last" if kept else ""),
        highlight=False,
        soft_wrap=True,
    )
    return 143 if term else 130


def interrupted_stream(
    args: argparse.Namespace, held: bool, raw: str, exc: KeyboardInterrupt | None = None
) -> int:
    """Ctrl-C (or SIGTERM, `Terminated`) during a streamed run (a trajectory or PWM plan): say in one line (and with
    --json print) how much of the plan its run directory keeps (`drivers.run_files.stopped_run`); exit 130 (143 for
    SIGTERM). `held`: `held_run` before it; `raw`: the run kind's per-tick file, named when the recording cannot be
    read."""
    from rich.markup import escape

    from drivers.run_files import stopped_run

    term = isinstance(exc, Terminated)
    kept = {**stopped_run(args.out, held, raw), "signal": "SIGTERM" if term else "SIGINT"}
    if args.json:
        print_json(kept)
    if kept["run_dir"] is None:
        said = "run stopped before its run directory was made; nothing recorded"
    elif not kept["ticks_recorded"]:
        said = f"run stopped before streaming; nothing of the plan recorded (run.json in {escape(kept['run_dir'])})"
    else:
        where = escape(kept["recording"] or kept["raw"] or kept["run_dir"])
        said = (f"run stopped after {kept['ticks_recorded']} of {kept['ticks_planned']} ticks (the plan's first "
                f"{kept['t_recorded_s']:.2f} of {kept['duration_s']:.2f} s), kept in {where}; a new run needs "
                "another --out")  # fmt: skip
    err_console.print(
        f"poise: {'terminated (SIGTERM)' if term else 'interrupted'}; {said}", highlight=False, soft_wrap=True
    )
    return 143 if term else 130


def _kinds(events: dict | None) -> str:
    """'edge, slip / —': the kinds of the twin's events in a posture's transition and hold."""
    if not events:
        return "—"
    return " / ".join(
        ", ".join(sorted({e.split(":")[0] for e in events[g]})) or "—" for g in ("transition", "posture")
    )


def execution_table(completed) -> Table:
    """How each posture went, from encoders and boards: tracking, settle time, sole slip, measured margin; on the
    physics twin also what it saw during the transition to the posture and while holding it."""
    t = Table(title="execution (encoders and boards)")
    twin = any("twin_events" in r.report for r in completed)
    for c in ("posture", "move track max \\[deg]", "hold track max \\[deg]", "settle \\[s]", "slip \\[mm]",
              "slip \\[deg]", "min CoP margin \\[mm]", "boards \\[kg]") + (("twin: transition / posture",) if twin else ()):  # fmt: skip
        t.add_column(c, justify="right")
    for r in completed:
        x = r.report
        if not x:
            continue
        m = x["min_margin_mm"]
        move = f"{x['move_tracking_max_deg']:.2f}" + (" (lifted)" if x.get("move_lifted") else "")
        t.add_row(str(r.posture), move, f"{x['hold_tracking_max_deg']:.2f}",
                  f"{x['settle_s']:.2f}", f"{x['slip_mm']:.2f}", f"{x['slip_deg']:.2f}",
                  "—" if m is None else f"{m:.1f}", " / ".join(f"{k:.1f}" for k in x.get("board_kg", [])),
                  *((_kinds(x.get("twin_events")),) if twin else ()))  # fmt: skip
    return t


def _is_doggy_plan(path: str) -> bool:
    """Whether `path` holds a Doggy excitation plan (`formats.doggy_plan`'s format tag)."""
    import json

    from formats.doggy_plan import is_doggy_plan

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return is_doggy_plan(doc)
