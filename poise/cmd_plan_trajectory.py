"""`poise plan trajectory`: design a persistently exciting trajectory; `plan check|show` for trajectory plans."""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.markup import escape

from formats.dynamic_recording import MIN_SAMPLES as MIN_RECORDED_SAMPLES
from formats.dynamic_recording import MOTIONS
from formats.errors import DataError
from formats.trajectory_plan import MAX_RATE_HZ, load_trajectory_plan
from poise import argtypes as at
from poise.output import (
    console,
    draws_progress,
    err_console,
    named_errors,
    print_json,
    quantity_table,
    vanish_on_error,
)

if TYPE_CHECKING:  # the commands import what they run lazily (a fast CLI start)
    from drivers.config import RobotConfig
    from drivers.single_support_stream import Transitions
    from formats.trajectory_plan import TrajectoryPlan
    from robots.tree import RobotModel
    from trajectories.excitation import ExcitationResult, ExcitationSettings
    from trajectories.verify import TrajectoryCheck
    from trajectories.weight_shift import WeightShift


def register(s: argparse._SubParsersAction) -> None:
    t = s.add_parser(
        "trajectory",
        help="design an excitation trajectory (Fourier series) minimising κ of the base torque regressor",
    )
    t.add_argument("robot", help="robot model name or URDF / .poise.toml file")
    t.add_argument("--out", type=at.out_file, required=True, help="trajectory plan file to write (JSON)")
    at.add_force(t)
    add_design_arguments(t)
    t.add_argument("--criterion", choices=["kappa", "logdet", "logvar"], default="kappa",
                   help="kappa: κ (smooth surrogate); logdet: −log det (D-optimal); logvar: Σ log of the parameters' "
                        "variances (each scale-free; penalises correlation; starts from the D-optimum)")  # fmt: skip
    t.add_argument(
        "--focus", type=at.focus_parameter, nargs="+", metavar="ϑN|auto",
        help="with --criterion logvar: sum the log variances of these base parameters only (e.g. those the runs made "
        "leave undetermined that the motion can still reach: `plan forecast --json`'s determined_if_repeated); "
        "auto: exactly those, forecast from the --prior plans at --noise",
    )  # fmt: skip
    t.add_argument(
        "--noise", type=at.positive, nargs="+", metavar="SIGMA",
        help="with --focus auto: the sensor noise the --prior plans' runs are forecast at, as `plan forecast "
        "--noise` (standing: Fz [N], Mx, My [N·m]; arms: per joint or one for all [N·m])",
    )  # fmt: skip
    t.add_argument(
        "--row-noise", type=at.positive, nargs=3, metavar=("FZ", "MX", "MY"),
        help="standing (double or single support): the boards' noise σ per sample, Fz [N], Mx, My [N·m] — the "
        "criterion weights the rows by 1/σ as the weighted fit will (default: raw units)",
    )  # fmt: skip
    t.add_argument(
        "--max-kappa", type=at.number(1.0, 1e12, lo_open=True), metavar="K",
        help="keep κ of the column-scaled base regressor ≤ K on the design grid (e.g. with --criterion logdet "
        "--scaling none: D-optimal information with a conditioning bound)",
    )  # fmt: skip
    t.add_argument(
        "--scaling",
        choices=["columns", "none"],
        default="columns",
        help="columns: κ of the column-normalised base regressor (default); none: raw",
    )
    t.add_argument(
        "--config", type=at.text_file,
        help="single support: the robot TOML (executor rate, velocity limit, min_margin) whose run's weight shifts "
        "from both soles each start must pass, as `plan check` plans them (default: the bundled one when it is this "
        "robot's; else they are not checked)",
    )  # fmt: skip
    t.add_argument("--starts", type=at.count, default=1, help="random starts (default %(default)s)")
    where = t.add_mutually_exclusive_group()  # local worker processes, or a cluster's workers
    where.add_argument(
        "--workers", type=at.count, default=None, help="worker processes (default: min(starts, CPUs))"
    )
    where.add_argument(
        "--scheduler",
        type=at.scheduler_address,
        default=None,
        help="Dask scheduler address: run the starts on that cluster (as plan postures)",
    )
    t.add_argument(
        "--prior",
        nargs="+",
        default=None,
        help="experiments already made — trajectory plans executed (JSON) and dynamic recordings (CSV, as identify "
        "dynamic reads them) —: design the next experiment to complete their information (of the same motion: fixed "
        "base with joint torques, double support in their foot placement, or single support on the same sole; plans "
        "--simplified alike)",
    )
    t.add_argument("--json", action="store_true", help="print a machine-readable summary")
    t.set_defaults(func=cmd_trajectory)

    f = s.add_parser(
        "forecast",
        help="what a trajectory plan will determine: each base parameter's standard error under a noise level",
    )
    f.add_argument(
        "plan", nargs="+",
        help="trajectory plan(s) (JSON); several: what their runs fitted together determine (same robot, rate and, "
        "standing, foot placement)",
    )  # fmt: skip
    f.add_argument(
        "--noise", type=at.positive, nargs="+", required=True, metavar="SIGMA",
        help="white noise σ on each recorded sample: standing plans Fz [N], Mx, My [N·m] (or one for all); "
        "arms one per joint or one for all [N·m]",
    )  # fmt: skip
    f.add_argument("--rate-hz", type=at.number(0.0, MAX_RATE_HZ, lo_open=True),
                   help=f"recording rate, ≤ {MAX_RATE_HZ:g} Hz (default: the plan's streaming rate)")  # fmt: skip
    f.add_argument("--well", type=at.number(0.0, 100.0, lo_open=True), default=15.0, metavar="PCT",
                   help="relative SE [%%] in (0, 100] a parameter must reach to count as determined (default 15)")  # fmt: skip
    f.add_argument("--practical-s", type=at.positive, metavar="S",
                   help="longest recording worth making [s] (default 600, or the plans' length if longer)")  # fmt: skip
    f.add_argument("--params", help="the values the relative SEs are against: a parameter set (name or file; "
                   "default: the plan's), or a previous identify dynamic --json result of the same motion")  # fmt: skip
    f.add_argument("--tare-kg", type=at.nonnegative, default=None, metavar="SD",
                   help="standing plans only (refused for an arm's): the SD [kg] of the total load each run's "
                   "board tare leaves, a constant Fz offset per run in the SEs as identify dynamic puts a run's "
                   "recorded one (default: the forecast's TARE_MASS_SD_KG, the tare of 1 s of empty readings on two "
                   "boards; 0: no tare, ideal boards)")  # fmt: skip
    f.add_argument("--no-friction", action="store_true", help="arms: rigid-body parameters only")
    f.add_argument("--armature", action="store_true",
                   help="arms: with each joint's rotor inertia estimated too (identify dynamic --armature)")  # fmt: skip
    f.add_argument("--json", action="store_true", help="print the forecast as JSON")
    f.add_argument("--plot", type=at.image_file, help="bar chart of the forecast relative SEs (PNG)")
    at.add_force(f)
    f.set_defaults(func=cmd_forecast_trajectory)

    sp = s.add_parser(
        "sample",
        help="a trajectory plan's setpoints every 1/rate s, the last step shorter when the rate does not divide the "
        "duration (CSV: q, q̇, q̈ and optionally feed-forward torques) for a controller poise does not drive",
    )
    sp.add_argument("plan", help="trajectory plan (JSON)")
    sp.add_argument("--out", type=at.out_file, required=True, help="setpoints file to write (CSV)")
    sp.add_argument("--rate-hz", type=at.number(0.0, MAX_RATE_HZ, lo_open=True),
                    help=f"setpoint rate, ≤ {MAX_RATE_HZ:g} Hz and above what carries the plan's motion band "
                    "(default: the plan's streaming rate)")  # fmt: skip
    sp.add_argument("--torques", action="store_true",
                    help="fixed-base arms: feed-forward joint torques (RNEA, the plan's guessed parameters) too")  # fmt: skip
    sp.add_argument("--json", action="store_true", help="print a machine-readable summary")
    at.add_force(sp)
    sp.set_defaults(func=cmd_sample_trajectory)


def add_design_arguments(
    p: argparse.ArgumentParser, free_note: str = "a fixed-base arm, the default"
) -> None:
    """The options of what an excitation design is (duration, grid, motion, limits, seed) that `plan trajectory`
    and `plan reach` share; `free_note`: --motion's help on its `free` class (plan reach has no default for a
    standing robot)."""
    p.add_argument(
        "--duration",
        type=at.number(0.0, 3600.0, lo_open=True),
        default=60.0,
        help="total duration in s (whole periods, ≤ 3600)",
    )
    p.add_argument(
        "--period",
        type=at.number(0.0, 3600.0, lo_open=True),
        default=None,
        help="period of the Fourier series in s (default 10; a spline's is its duration)",
    )
    p.add_argument("--harmonics", type=at.integer(1, 100), default=None,
                   help="Fourier series: harmonics per joint (default 5)")  # fmt: skip
    p.add_argument(
        "--waypoints",
        type=at.integer(2, 1000),
        default=None,
        help="design C² cubic splines through this many waypoints between the two ends (at rest there; a standing "
        "robot's ending where they start) instead of a Fourier series; --samples then cover the whole "
        "duration",
    )
    p.add_argument(
        "--friction",
        action="store_true",
        help="fixed-base arms: the criterion's regressor has each joint's viscous and Coulomb friction columns too, "
        "as identify dynamic fits them (a motion that excites friction apart from gravity)",
    )
    p.add_argument(
        "--samples",
        type=at.integer(1, 10_000),
        default=100,
        help="grid points per period for κ and torque limits (a spline's: over its duration; default %(default)s)",
    )
    p.add_argument(
        "--base", default=None, help="fixed base link, or the stance base (sole) of a standing robot"
    )
    p.add_argument(
        "--double-support",
        action="store_true",
        help="a biped standing on two boards: closed chain, ZMP inside the support polygon, Fz/Mx/My regressor",
    )
    p.add_argument(
        "--single-support",
        action="store_true",
        help="a biped standing on its base sole (one board), the other sole lifted: ZMP inside the stance sole, "
        "Fz/Mx/My regressor",
    )
    p.add_argument(
        "--motion",
        choices=MOTIONS,
        default=None,
        help=f"the motion class: free ({free_note}), double-support or single-support (the same "
        "as --double-support, --single-support); `model show --motion` derives the first two's base parameters",
    )
    p.add_argument(
        "--lift",
        type=at.number(0.0, 1.0),
        default=None,
        help="single support: the lifted sole's corners stay this far above the ground [m] (default 0.02)",
    )
    p.add_argument("--max-lift", type=at.positive, default=None,
                   help="single support: ... and at most this far [m] (default 0.25); must be above twice --lift, "
                   "room for the sole to move between the two")  # fmt: skip
    p.add_argument("--max-sole-tilt", type=at.number(0.0, 90.0, lo_open=True, hi_open=True), default=None,
                   help="single support: the lifted sole's plane within this of the ground's [deg] (default 30; in "
                   "(0, 90): at 90 the sole stands on edge)")  # fmt: skip
    p.add_argument(
        "--zmp-margin",
        type=at.nonnegative,
        default=None,
        help="double/single support: ZMP margin inside the support polygon in m (default 0.02)",
    )
    p.add_argument(
        "--load-share",
        type=at.number(0.0, 0.5, hi_open=True),
        default=None,
        help="double support: each sole's lever-rule share of the load stays ≥ this at every sample (a nearly "
        "unloaded sole rocks or slides under stiff legs; e.g. 0.25)",
    )
    p.add_argument(
        "--collision-margin",
        type=at.number(0.0, 1.0),
        default=None,
        help="m of clearance kept between links that can meet (URDF collision geometry; default 0.01)",
    )
    p.add_argument(
        "--no-self-collision",
        action="store_true",
        help="do not keep links apart by a margin (e.g. collision meshes missing); the design's verification, as "
        "`plan check`, still fails links that meet (0 mm), where the collision geometry loads",
    )
    p.add_argument(
        "--min-excursion",
        type=at.number(0.0, 1.0),
        default=None,
        help="fixed-base arms: each joint's angle SD at least this fraction of that of the largest sinusoid at "
        "the base frequency its limits allow (κ of scaled columns is blind to a joint left still; 0: no floor; "
        "default 0.25)",
    )
    p.add_argument(
        "--rest-posture",
        type=at.angles,
        metavar="Q1,Q2,...",
        help="fixed-base robots: start and end at rest in this posture (rad, every joint in the description's "
        "order; --rest-posture=-0.5,... when the first is negative), so no move to a designed start precedes the "
        "run",
    )
    p.add_argument("--simplified", action="store_true", help="the robot description's simplified model")
    p.add_argument(
        "--params", default=None, help="guessed parameters for torque limits (default: the model's)"
    )
    p.add_argument(
        "--position-margin",
        type=at.nonnegative,
        default=0.05,
        help="kept from each position limit in the joint's unit: m on a prismatic joint (%(default)s m by "
        "default), else rad (default %(default)s rad)",
    )
    p.add_argument(
        "--velocity-fraction",
        type=at.number(0.0, 1.0, lo_open=True),
        default=0.98,
        help="fraction of the description's joint velocity limits the design may use (e.g. to stay under the "
        "executor's velocity_limit; default 0.98)",
    )
    p.add_argument(
        "--max-iter",
        type=at.count,
        default=400,
        help="IPOPT iterations of each stage of the criterion's continuation (default 400; the earlier, warm-start "
        "stages of an arm's or a single-support design get half, a double-support design's the full count): the "
        "table's total is their sum",
    )
    p.add_argument("--seed", type=at.seed, default=1,
                   help="seed of the first start's random initial guess; start k takes seed + k (default %(default)s)")  # fmt: skip
    p.add_argument(
        "--rate-hz",
        type=at.number(0.0, MAX_RATE_HZ, lo_open=True),
        default=100.0,
        help="streaming rate for the executor in Hz (default %(default)g Hz)",
    )


def _motion(args: argparse.Namespace) -> str:
    """The design's motion class from --motion or its alias flags --double-support / --single-support (which it
    sets, so the rest reads one form); conflicting choices are an error."""
    flags = {
        m
        for m, on in (("double-support", args.double_support), ("single-support", args.single_support))
        if on
    }
    chosen = flags | ({args.motion} if getattr(args, "motion", None) else set())
    if len(chosen) > 1:
        raise DataError(f"choose one motion class: {' and '.join(sorted(chosen))} given")
    motion = next(iter(chosen), "free")
    args.double_support, args.single_support = motion == "double-support", motion == "single-support"
    return motion


# options that apply to one kind of design only: (option, the designs it applies to, its default)
ONE_KIND_OPTIONS = (
    ("harmonics", ("fourier",), 5),
    ("lift", ("single-support",), 0.02),
    ("max_lift", ("single-support",), 0.25),
    ("max_sole_tilt", ("single-support",), 30.0),
    ("load_share", ("double-support",), 0.0),
    ("zmp_margin", ("double-support", "single-support"), 0.02),
    ("collision_margin", ("self-collision",), 0.01),
    ("min_excursion", ("free",), 0.25),
)
KIND_NEEDS = {"fourier": "a Fourier design (no --waypoints)", "single-support": "--single-support",
              "double-support": "--double-support or --single-support", "self-collision": "a design keeping links "
              "apart (not --no-self-collision)", "free": "a fixed-base arm (not --double-support or "
              "--single-support)"}  # fmt: skip


def _one_kind_options(args: argparse.Namespace, kinds: set[str]) -> None:
    """Refuse an option given to a design it does not apply to (it would be ignored); set the others' defaults."""
    for name, applies, default in ONE_KIND_OPTIONS:
        if getattr(args, name, None) is None:
            setattr(args, name, default)
        elif not kinds & set(applies):
            flag = "--" + name.replace("_", "-")
            need = "--double-support" if applies == ("double-support",) else KIND_NEEDS[applies[0]]
            raise DataError(f"{flag} applies to {need} only: drop it")


def _settings(args: argparse.Namespace):
    from trajectories.excitation import ExcitationSettings

    spline = args.waypoints is not None
    kinds = {"spline" if spline else "fourier", _motion(args)} | (
        set() if args.no_self_collision else {"self-collision"}
    )
    _one_kind_options(args, kinds)
    if spline and args.period is not None and args.period != args.duration:
        raise DataError(f"--waypoints: a spline is not periodic; its period is its --duration ({args.duration:g} "
                        f"s): drop --period {args.period:g}")  # fmt: skip
    period = args.duration if spline else 10.0 if args.period is None else args.period
    for name in ("duration", "position_margin", "rate_hz", "zmp_margin"):
        v = getattr(args, name)
        if (
            not (v == v and abs(v) != float("inf"))
            or v < 0
            or (v == 0 and name not in ("position_margin", "zmp_margin"))
        ):
            raise DataError(f"--{name.replace('_', '-')} must be a positive finite number, got {v}")
    if args.duration * args.rate_hz < MIN_RECORDED_SAMPLES:
        raise DataError(f"--duration {args.duration:g} s at --rate-hz {args.rate_hz:g} is {args.duration * args.rate_hz:.3g} "
                        f"samples; a recording needs at least {MIN_RECORDED_SAMPLES} (the duration is in s)")  # fmt: skip
    for name in ("harmonics", "samples", "max_iter", "starts"):
        if getattr(args, name) < 1:
            raise DataError(f"--{name.replace('_', '-')} must be ≥ 1")
    if args.seed < 0:
        raise DataError("--seed must be ≥ 0")
    s = ExcitationSettings(
        period=period,
        duration=args.duration,
        harmonics=args.harmonics,
        samples=args.samples,
        criterion=args.criterion,
        scaling=args.scaling,
        max_kappa=args.max_kappa,
        position_margin=args.position_margin,
        velocity_fraction=args.velocity_fraction,
        max_iter=args.max_iter,
        base=args.base,
        params=args.params,
        simplified=args.simplified,
        motion=_motion(args),
        lift=args.lift,
        max_lift=args.max_lift,
        max_sole_tilt=math.radians(args.max_sole_tilt),
        zmp_margin=args.zmp_margin,
        load_share=args.load_share,
        self_collision=not args.no_self_collision,
        collision_margin=args.collision_margin,
        row_noise=tuple(args.row_noise) if args.row_noise else None,
        focus=_distinct_focus(args.focus),
        rest_posture=args.rest_posture,
        parametrisation="spline" if spline else "fourier",
        waypoints=args.waypoints if spline else ExcitationSettings.waypoints,
        friction=args.friction,
        min_excursion=args.min_excursion,
    )
    s.validate()
    return s


def _rest_posture_fits(model: RobotModel, settings: ExcitationSettings) -> None:
    """--rest-posture checked before the design starts, as the design checks it (`trajectories.excitation.
    rest_posture`); one outside the ranges that would fit them read as degrees says so, as the recording check
    does (`-90` for −π/2)."""
    import dataclasses

    import numpy as np

    from trajectories.excitation import rest_posture

    try:
        rest_posture(model, settings)
    except DataError as exc:
        if settings.rest_posture is None or len(settings.rest_posture) != model.nq:
            raise
        radians = tuple(float(v) for v in np.radians(settings.rest_posture))
        try:
            rest_posture(model, dataclasses.replace(settings, rest_posture=radians))
        except DataError:
            raise exc from None
        raise DataError(f"{exc}; degrees? --rest-posture takes radians "
                        f"({','.join(f'{v:.4g}' for v in radians)})") from None  # fmt: skip


def cmd_trajectory(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from formats.trajectory_plan import save_trajectory_plan
    from robots.description import placeholder_limits
    from robots.registry import get_model
    from trajectories.multistart import design_starts, ranked
    from trajectories.plan import json_finite, make_plan

    model = get_model(args.robot)
    _motion(args)  # --motion sets its alias flags, which the rest reads
    section = model.extra.get("flexible_joints")
    flexible = section.get("joints") if isinstance(section, dict) else None
    if (
        isinstance(flexible, list) and flexible
    ):  # a rigid-body design of a robot whose description says its joints are not rigid
        err_console.print(f"[yellow]note:[/yellow] {model.name}'s description declares flexible joints "
                          f"({', '.join(map(str, flexible))}): this designs a rigid-body excitation of its "
                          f"{args.params or next(iter(model.params))!r} set; its flexible-joint calibration takes a PWM "
                          "excitation (`poise plan doggy`, README: Doggy calibration)", highlight=False)  # fmt: skip
    experiments, priors = _prior_experiments(args.prior, model) if args.prior else ([], [])
    auto_focus = _auto_focus(args, experiments)
    settings = _settings(args)
    _rest_posture_fits(model, settings)
    if args.params:
        model.parameter_set(args.params)  # before the progress bar starts: a bad name stays one line
    if args.double_support or args.single_support:
        if args.base and model.base_site(args.base).rect is None:
            raise DataError(f"--base {args.base!r}: a standing design's base is a sole of {model.name!r}, one of "
                            f"{', '.join(sorted(model.bases))}")  # fmt: skip
        if len(model.bases) < 2:
            flag = "--double-support" if args.double_support else "--single-support"
            raise DataError(f"{model.name!r} describes no two soles: {flag} needs a biped description")
    elif args.base and not model.has_link(args.base):
        raise DataError(f"{model.name!r} has no link {args.base!r}")
    if args.config and not args.single_support:
        raise DataError("--config is the run configuration of a --single-support design's weight shifts")
    # a bad configuration refused before the design starts; None: the robot has none (not checked)
    cfg = _robot_config(model, args.config, optional=True) if args.single_support else None
    t0 = time.perf_counter()
    progress = Progress(
        TextColumn("[bold]starts"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[best]}"),
        TimeElapsedColumn(),
        console=err_console,
        disable=not draws_progress(),
    )
    with vanish_on_error(progress):
        task = progress.add_task("starts", total=args.starts, best="")

        prior, done = None, []
        if experiments:
            from trajectories.plan import prior_experiments

            prior = prior_experiments(model, settings, experiments)

        def on_result(k, r):  # the best so far, as the design ranks them (not the last to finish)
            done.append(r)
            b = ranked(done, settings, prior is not None)[0]
            progress.update(
                task, advance=1, best=f"best: seed {b.seed}, κ scaled {b.kappa_scaled:.2f}, raw {b.kappa:.1f}"
            )

        results = design_starts(
            args.robot, settings, args.seed, args.starts, args.workers, on_result, prior, args.scheduler
        )
        # each start's run checked inside the bar: a refusal leaves its error the only line on stderr
        pick, shift = 0, None
        if args.single_support:
            pick, shift = weight_shift_start(args.robot, model, results, settings, args.rate_hz, cfg)
            if pick is None:
                raise DataError(
                    _refused_message(shift, args.out), robot=model.name, out=None, weight_shift=shift
                )
        best = results[pick]
        if not math.isfinite(best.kappa) and not _prior_takes(best, bool(experiments)):
            un = best.verification.get("unexcited") or []
            named = ", ".join(un[:8]) + (f", … ({len(un)} in all)" if len(un) > 8 else "")
            msg = (f"the design does not excite every base parameter (κ infinite{'; unexcited: ' if un else ''}"
                   f"{named}): give more --harmonics (or --waypoints), a longer --period or --duration, or more "
                   "--max-iter; nothing written")  # fmt: skip
            raise DataError(msg, robot=model.name, out=None, unexcited=un)

    def plan_of(r: ExcitationResult) -> TrajectoryPlan:  # the plan file's content for a start
        # the start's own seed: `--seed S --starts 1` designs this plan again
        plan = make_plan(args.robot, model, r, settings, r.seed, args.rate_hz)
        plan.design["starts"] = {"count": args.starts, "first_seed": args.seed}
        if priors:  # what it was designed to complete
            plan.design["prior"] = priors
        return plan

    plan = plan_of(best)
    if not best.verification.get("ok") and not _rebuilds(plan):  # e.g. a closed chain that does not close
        msg = (f"the design failed its own check ({'; '.join(best.verification['problems'])}); no plan written: its "
               "trajectory cannot be rebuilt, so no command could read it")  # fmt: skip
        raise DataError(msg, robot=model.name, out=None)
    # the design's verdict is `plan check`'s on the plan as written, the one check `poise run` refuses on; the best
    # start `plan check` fails, the next verified ones are checked until one passes (`plan_checked_start`)
    ws = None
    if shift is not None and shift["checked"]:  # a later start's run must pass its weight shifts too
        ws = (*weight_shift_check(args.robot, model, settings, args.rate_hz, cfg), shift)
    pick, plan, checked = plan_checked_start(
        args.out, results, pick, plan, plan_of, lambda r: _prior_takes(r, bool(experiments)), ws
    )
    best = results[pick]
    best.verification = checked.pop("verification")
    plan.design["verification"] = json_finite(best.verification)
    save_trajectory_plan(plan, args.out)
    summary = {
        "robot": model.name,
        "out": args.out,
        "kappa": best.kappa,
        "kappa_scaled": best.kappa_scaled,
        "logdet_scaled": best.logdet,
        "scaling": settings.scaling,
        "base_parameters": len(best.base_symbols),
        "friction_columns": settings.friction,
        "iterations": best.iterations,
        "solver_status": best.status,
        "seed": best.seed,
        "starts": args.starts,
        "seconds_per_start": [r.seconds for r in results],
        "seconds": time.perf_counter() - t0,
        "verification": best.verification,
        "kappa_with_prior_scaled": best.kappa_with_prior_scaled,
        "placeholder_limits": placeholder_limits(model),  # the ratios to them checked nothing
    }
    if shift is not None:
        summary["weight_shift"] = shift
    summary["plan_check"] = checked
    if auto_focus is not None:
        summary["auto_focus"] = auto_focus
    summary["ok"] = bool(best.verification.get("ok"))
    if args.json:
        print_json(summary)
    else:
        _print_design(summary, model)
        if auto_focus is not None:
            console.print(
                "focus (auto): " + " ".join(auto_focus["focus"]) + " — what the prior runs would determine "
                f"repeated within 600 s at noise {' / '.join(f'{v:g}' for v in auto_focus['noise'])}",
                highlight=False,
            )
    if checked["seed"] is not None and checked["refused"]:
        err_console.print(f"[yellow]note:[/yellow] {escape(promoted_note(checked))}", highlight=False)
    for note in design_notes(best, bool(priors)):
        err_console.print(f"[yellow]{escape(note)}")
    if not best.verification.get("ok"):
        problems = "; ".join(best.verification["problems"])
        tried = len(checked["refused"])
        others = f" (no other verified start passes it either: {tried} refused)" if tried > 1 else ""
        err_console.print(
            f"[red]the best trajectory fails verification: {escape(problems)}{others}"
            f"[/red]\n{args.out} is written for `poise plan show`; `poise run` refuses it"
        )
        return 1
    return 0


def plan_check_verification(path: str, plan: TrajectoryPlan) -> dict:
    """A designed plan's verification: `plan check`'s checks of it (`as_it_is_verdict` without the run's
    pre-flight, its 1 ms grid), as `TrajectoryCheck.to_dict` — one verification for the designer, `plan check`
    and the run, not the designer's own (which ranks the starts: it holds links apart only when the design does)."""
    from trajectories.plan import plan_model, plan_trajectory

    model = plan_model(plan)
    v = as_it_is_verdict(path, plan, model, plan_trajectory(plan, model), plan.params or next(iter(model.params)),
                         run=False)  # fmt: skip
    return v.check.to_dict() | {"problems": v.problems, "ok": not v.problems}


def _rebuilds(plan) -> bool:
    """The plan rebuilds into its trajectory, as `plan show` and `plan check` will read it."""
    import numpy as np

    from trajectories.plan import plan_model, plan_trajectory

    try:
        traj = plan_trajectory(plan, plan_model(plan))
        traj.sample(np.linspace(0.0, traj.duration, 11))
    except (DataError, np.linalg.LinAlgError):
        return False
    return True


def unexcited_note(unexcited: list[str], n: int) -> str:
    """The warning for base parameters a motion alone does not excite (`TrajectoryCheck.unexcited`)."""
    return (f"this motion does not excite {n} base parameter(s) ({', '.join(unexcited)}): it cannot identify them "
            "alone (`plan forecast` names what it determines)")  # fmt: skip


# who runs `plan trajectory` when not a user for their own design: `poise demo` sets its name around its steps,
# whose settings (--max-iter, --duration) are the demo's own, not the user's to change
DESIGN_FOR: ContextVar[str | None] = ContextVar("design_for", default=None)


def design_notes(best: ExcitationResult, with_prior: bool) -> list[str]:
    """Warnings on a finished design a user would otherwise miss: IPOPT stopped before converging, or the motion
    does not excite every base parameter (unless prior runs take them: their combined κ is finite). Inside a demo
    (`DESIGN_FOR`), a design that stopped at its iteration cap and passed its checks is said to be such, without
    the advice to change settings that are the demo's."""
    notes = []
    if best.status not in ("Solve_Succeeded", "Solved_To_Acceptable_Level"):
        stages = [int(st.get("iterations", 0)) for st in best.stages]
        over = (
            f" ({' + '.join(map(str, stages))} over {len(stages)} stages, --max-iter capping each)"
            if len(stages) > 1
            else ""
        )
        status = best.status or "no status"
        demo = DESIGN_FOR.get()
        if demo is not None and best.verification.get("ok"):
            notes.append(f"{demo}: this design stopped at the demo's iteration cap ({status} after {best.iterations} "
                         f"IPOPT iteration(s){over}) and its checks passed: the demo goes on with it (a design of "
                         "your own with `plan trajectory` can take more --max-iter)")  # fmt: skip
        else:
            notes.append(f"IPOPT stopped without converging ({status}) after {best.iterations} iteration(s){over}: "
                         "more --max-iter, another --seed or a longer --duration may design a better motion")  # fmt: skip
    unexcited = best.verification.get("unexcited") or []
    if unexcited and not _prior_takes(best, with_prior):
        notes.append(unexcited_note(unexcited, len(unexcited)))
    return notes


def _prior_takes(best: ExcitationResult, with_prior: bool) -> bool:
    """The prior runs excite what this motion leaves unexcited: their combined κ is finite."""
    prior = best.kappa_with_prior_scaled
    return with_prior and prior is not None and math.isfinite(prior)


def first_passing_start(
    results: list[ExcitationResult],
    checks: list[tuple[Callable[[int, ExcitationResult], list[str]], list[dict]]],
    start: int = 0,
) -> int | None:
    """The index of the first verified start from `start` (`design_starts`' results: best first, the verified
    ones first) that passes every check, None when none does. `checks`: (check, refused) pairs, in order —
    `check(k, result)` returns the start's problems (none: it passes), and a start it refuses is added to its
    `refused` ({seed, kappa_scaled, problems}); a later check and a later start are checked only when the ones
    before them were refused (no added cost when the best passes)."""
    for k in range(start, len(results)):
        r = results[k]
        if not r.verification.get("ok"):  # the verified starts come first
            return None
        for check, refused in checks:
            problems = check(k, r)
            if problems:
                refused.append({"seed": r.seed, "kappa_scaled": r.kappa_scaled, "problems": problems})
                break
        else:
            return k
    return None


def weight_shift_check(
    robot: str, model: RobotModel, settings: ExcitationSettings, rate_hz: float, config: RobotConfig
) -> tuple[Callable[[int, ExcitationResult], list[str]], dict[int, Transitions]]:
    """A `first_passing_start` check of a single-support start: its run's weight shifts from both soles, planned
    and checked as `plan check` and `poise run` do (`drivers.single_support_stream.plan_transitions`, on the plan
    file's content), and the transitions it planned by start index."""
    from drivers.single_support_stream import plan_transitions
    from trajectories.plan import make_plan, plan_trajectory

    found: dict[int, Transitions] = {}

    def check(k: int, r: ExcitationResult) -> list[str]:
        plan = make_plan(robot, model, r, settings, r.seed, rate_hz)  # as the file `plan check` reads
        found[k] = plan_transitions(
            model, config, plan, plan_trajectory(plan, model), plan.params or next(iter(model.params))
        )
        return found[k].problems

    return check, found


def weight_shift_start(
    robot: str,
    model: RobotModel,
    results: list[ExcitationResult],
    settings: ExcitationSettings,
    rate_hz: float,
    config: RobotConfig | None,
) -> tuple[int | None, dict]:
    """Which of a single-support design's starts (`design_starts`' results, verified best first) to hand out:
    the best verified one whose run's weight shifts from both soles pass (`weight_shift_check`,
    `first_passing_start`) — a design that passes its own checks can still start from a posture the run cannot
    shift its weight to. Returns (its index, None when no verified start passes; what the summary reports:
    checked, the configuration, the starts refused with their problems, the chosen start's seed and
    transitions). Without a run configuration (`config` None) or a verified start, nothing is checked: the best
    start (0)."""
    if config is None:
        return 0, {"checked": False, "why": f"no run configuration for {model.name!r} (give --config)"}
    if not results or not results[0].verification.get("ok"):
        return 0, {"checked": False, "why": "no start passes verification"}
    check, found = weight_shift_check(robot, model, settings, rate_hz, config)
    refused: list[dict] = []
    k = first_passing_start(results, [(check, refused)])
    if k is None:
        return None, {"checked": True, "config": config.source, "seed": None, "refused": refused}
    return k, {"checked": True, "config": config.source, "seed": results[k].seed, "refused": refused,
               "transitions": found[k].summary()}  # fmt: skip


def plan_checked_start(
    out: str,
    results: list[ExcitationResult],
    pick: int,
    plan: TrajectoryPlan,
    plan_of: Callable[[ExcitationResult], TrajectoryPlan],
    prior_takes: Callable[[ExcitationResult], bool],
    weight_shift: tuple | None = None,
) -> tuple[int, TrajectoryPlan, dict]:
    """The start a design writes: the chosen one (`results[pick]`, its `plan`) when `plan check` passes it, else
    the first lower-ranked verified start (`first_passing_start`) whose plan (`plan_of`) `plan check` passes —
    the rule `weight_shift_start` follows: the designer's own check ranks the starts, `plan check` (what `poise
    run` refuses on) may still fail the best one (e.g. links that meet, designed with --no-self-collision). A
    lower start is refused without its plan check when its κ is infinite (unless the prior runs take what it
    leaves: `prior_takes`), and for a single-support design when its run's weight shifts fail (`weight_shift`:
    `weight_shift_check`'s check and transitions, and the summary's weight-shift dict, updated to the start
    written). When none passes, the chosen start, failing. Returns (the start's index, its plan, what the summary
    reports: the start's seed, None when it fails `plan check`; the better starts refused, with their problems;
    and its `plan_check_verification`, under "verification")."""
    verification = plan_check_verification(out, plan)
    refused: list[dict] = []
    if not verification["ok"] and results[pick].verification.get("ok"):
        r = results[pick]
        refused.append({"seed": r.seed, "kappa_scaled": r.kappa_scaled, "problems": verification["problems"]})
        checked: dict[int, tuple[TrajectoryPlan, dict]] = {}

        def excited(k: int, r: ExcitationResult) -> list[str]:
            if math.isfinite(r.kappa) or prior_takes(r):
                return []
            return ["κ infinite: the motion does not excite every base parameter"]

        def plan_checked(k: int, r: ExcitationResult) -> list[str]:
            p = plan_of(r)
            checked[k] = p, plan_check_verification(out, p)
            return checked[k][1]["problems"]

        shift_refused: list[dict] = []  # better than the start written only if one is
        checks = [(excited, refused)]
        if weight_shift is not None:
            ws_check, found, shift = weight_shift
            checks.append((ws_check, shift_refused))
        checks.append((plan_checked, refused))
        k = first_passing_start(results, checks, pick + 1)
        if k is not None:
            pick, (plan, verification) = k, checked[k]
            if weight_shift is not None:
                shift["refused"] += shift_refused
                shift |= {"seed": results[k].seed, "transitions": found[k].summary()}
    seed = results[pick].seed if verification["ok"] else None
    return pick, plan, {"seed": seed, "refused": refused, "verification": verification}


def promoted_note(checked: dict) -> str:
    """Why a design wrote a lower-ranked start (`plan_checked_start`): the better starts' first problems."""
    refused = checked["refused"]
    why = "; ".join(
        f"seed {r['seed']} (κ scaled {r['kappa_scaled']:.4g}): {r['problems'][0]}" for r in refused[:3]
    )
    more = f"; … ({len(refused)} in all)" if len(refused) > 3 else ""
    return f"`plan check` refused {len(refused)} better start(s) ({why}{more}): start seed {checked['seed']} written"


def _refused_message(shift: dict, out: str) -> str:
    """Why a single-support design hands out no plan (`weight_shift_start` found no start): the best verified
    start's first weight-shift problem."""
    why = shift["refused"][0]
    return (
        f"no start's weight shift from both soles passes `plan check` ({shift['config']}): the best start (seed "
        f"{why['seed']}, κ scaled {why['kappa_scaled']:.4g}): {why['problems'][0]} ({len(shift['refused'])} "
        f"verified start(s) refused; {out} not written; try more --starts)"
    )


def _distinct_focus(focus: list[int] | None) -> tuple[int, ...] | None:
    """--focus as the design takes it (0-based), each base parameter once."""
    if not focus:
        return None
    twice = sorted({k for k in focus if focus.count(k) > 1})
    if twice:
        raise DataError(f"--focus names {', '.join(f'ϑ{k + 1}' for k in twice)} twice: name each once")
    return tuple(focus)


def _auto_focus(args: argparse.Namespace, experiments: list) -> dict | None:
    """`--focus auto`: the base parameters the `--prior` plans' runs (`experiments`, as `_prior_experiments`
    read them) leave undetermined and would determine if repeated within 600 s, forecast at `--noise` as `plan
    forecast` does; args.focus becomes them. Returns what the summary reports (None without auto)."""
    if not args.focus or "auto" not in args.focus:
        if args.noise:
            raise DataError(
                "--noise is the forecast noise of --focus auto: give --focus auto or leave it out"
            )
        return None
    if len(args.focus) > 1:
        raise DataError("--focus auto stands alone: it chooses the parameters itself")
    if not args.prior or not args.noise:
        raise DataError("--focus auto forecasts the runs made: give the plans run as --prior and their sensor "
                        "noise as --noise SIGMA …")  # fmt: skip
    from formats.trajectory_plan import TrajectoryPlan
    from identify.dynamic import WELL_IDENTIFIED_PCT
    from identify.forecast import PRACTICAL_S
    from poise.workflows.plan_forecast import forecast_plans

    if not all(isinstance(e, TrajectoryPlan) for e in experiments):
        raise DataError("--focus auto forecasts plans: give the prior runs' plans, not their recordings")
    fc = forecast_plans(experiments, args.prior, args.noise, args.params).forecast
    now, repeat, beyond = fc.determined(WELL_IDENTIFIED_PCT, PRACTICAL_S)
    zero = fc.zero_guessed()
    beyond = [s for s in beyond if s not in zero]
    if not repeat:
        raise DataError(
            f"--focus auto: the runs made leave nothing that more runs of this motion would determine within "
            f"{PRACTICAL_S:g} s (determined: {len(now)}; beyond: {', '.join(beyond) or 'none'}); name a focus or "
            "design for all"
        )
    args.focus = [int(s.lstrip("ϑ")) - 1 for s in repeat]
    return {"focus": repeat, "determined": now, "beyond_practical": beyond, "zero_guess": [s for s in zero if s not in
            now + repeat], "noise": list(args.noise)}  # fmt: skip


def _prior_experiments(paths: list[str], model) -> tuple[list, list[dict]]:
    """The `--prior` files, each told by its content (as `poise run` tells plan kinds apart): a dynamic recording
    read as `identify dynamic` differentiates it (`_recorded_motions`), else a trajectory plan (any other file
    refused, `formats.trajectory_plan.plan_document`). Returns the experiments for
    `trajectories.plan.prior_experiments` and what the plan records of each (path, sha256)."""
    import hashlib
    from pathlib import Path

    from drivers.run_files import partial_run
    from formats.dynamic_recording import is_dynamic_recording, read_dynamic_recording
    from formats.trajectory_plan import plan_digest, plan_document, trajectory_plan_from_dict
    from identify.recording_model import checked_for_model

    experiments, records = [], []
    for path in paths:
        if not Path(path).is_file():
            raise DataError(f"--prior {path}: no such file")
        if is_dynamic_recording(path):
            rec = checked_for_model(read_dynamic_recording(path), f"--prior {path}", model)
            motions, cutoff = _recorded_motions(rec, path)
            experiments += motions
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()  # the file as recorded
            records.append({"recording": path, "sha256": digest, "cutoff_hz": cutoff})
            partial = partial_run(path)
            if partial:  # what was taken is what it holds, but its plan's forecast is not what it gives
                records[-1]["partial_run"] = partial
                err_console.print(f"[yellow]warning:[/yellow] --prior {escape(path)} is a partial run "
                                  f"({escape(partial)}): taken as recorded", highlight=False)  # fmt: skip
        else:  # a trajectory plan; any other file refused naming what it is (truncated JSON: `not valid JSON (…)`)
            doc = plan_document(path, "plan trajectory --prior", ("trajectory", "recording"), "--prior ")
            plan = trajectory_plan_from_dict(doc, str(Path(path)))
            experiments.append(plan)
            records.append({"plan": path, "sha256": plan_digest(plan)})
    return experiments, records


def _recorded_motions(rec, path: str) -> tuple[list, float]:
    """A dynamic recording as `identify dynamic` takes it — the cut-off it defaults to, cut at gaps, filtered
    and differentiated, the filter's edges dropped (`identify.dynamic.filtered_motion`) — as plain arrays
    (`trajectories.recorded.RecordedMotion`, one per piece), and that cut-off (Hz). What it identifies is read as
    identify reads it: joint torques (or motor currents) when it has them, else the boards' wrench, on one sole when its metadata
    says `motion: single-support`."""
    from identify.dynamic import filtered_motion
    from trajectories.recorded import RecordedMotion

    try:
        pieces, cutoff = filtered_motion(rec)
    except DataError as exc:
        raise DataError(f"prior recording {path}: {exc}") from None
    if rec.tau is not None or rec.current is not None:  # efforts (or currents): a fixed-base experiment
        motion = "free"
    else:
        motion = rec.motion
    motions = [
        RecordedMotion(
            p.t,
            p.q,
            p.qd,
            p.qdd,
            motion,
            rec.base,
            path,
            rec.robot,
            tuple(rec.joint_names),
            p.recorded[0],
            p.recorded[len(p.recorded) // 2],
        )  # fmt: skip
        for p in pieces
    ]
    return motions, cutoff


def _print_design(s: dict, model: RobotModel) -> None:
    """The design's table; a peak / limit ratio to the URDF's placeholder limits shown as not checked
    (`_ratio_cell`), the placeholders noted on stderr."""
    v, placeholders = s["verification"], s["placeholder_limits"]
    what = "base regressor with friction columns" if s.get("friction_columns") else "base regressor"
    rows = [
        (f"κ, column-scaled {what}", _kappa(s["kappa_scaled"], 3), "—"),
        (f"κ, raw {what}", _kappa(s["kappa"], 1), "—"),
        (
            "base parameters" + (" and friction coefficients" if s.get("friction_columns") else ""),
            str(s["base_parameters"]),
            "—",
        ),  # fmt: skip
        *(
            [("κ, column-scaled, with the prior experiments", f"{s['kappa_with_prior_scaled']:.3f}", "—")]
            if s.get("kappa_with_prior_scaled") is not None
            else []
        ),
        ("IPOPT iterations (best start)", f"{s['iterations']} ({s['solver_status']})", "—"),
        ("wall time", f"{s['seconds']:.1f}", "s"),
        _margin_row(v, 3),
        ("peak velocity / limit", _ratio_cell(v["velocity_ratio"], placeholders.get("velocity"), model), "—"),
        ("peak acceleration / limit", f"{v['acceleration_ratio']:.3f}", "—"),
        ("peak torque / limit", _ratio_cell(v["torque_ratio"], placeholders.get("effort"), model), "—"),
        ("verification grid step", f"{v['dt'] * 1000:.2f}", "ms"),
    ]
    rows += _standing_rows(v)
    ws = s.get("weight_shift")
    if ws is not None:  # a single-support design: the run's weight shifts (`weight_shift_start`)
        label = "run's weight shifts from both soles"
        if not ws["checked"]:
            rows.append((label, f"not checked: {ws['why']}", "—"))
        else:
            refused = f"; {len(ws['refused'])} better start(s) refused" if ws["refused"] else ""
            rows.append((label, f"pass (start seed {ws['seed']}{refused})", "—"))
    pc = s.get("plan_check")
    if (
        pc and pc["refused"] and (pc["seed"] is not None or len(pc["refused"]) > 1)
    ):  # other starts were checked
        n = len(pc["refused"])  # why: `promoted_note`, or the failing verdict's line
        value = (f"pass (start seed {pc['seed']}; {n} better start(s) refused)" if pc["seed"] is not None
                 else f"fail ({n} verified start(s) refused)")  # fmt: skip
        rows.append(("`plan check`, the checks `poise run` refuses on", value, "—"))
    console.print(quantity_table(f"{s['robot']}: excitation trajectory → {s['out']}", rows))
    _note_placeholders(model)


def _kappa(k: float, decimals: int) -> str:
    """A condition number for a table: fixed decimals while readable, else 3 significant digits (1.23e+16)."""
    if k is None:  # a plan file's infinite κ (JSON has no inf)
        return "inf"
    return f"{k:.{decimals}f}" if k < 1e6 else f"{k:.3g}"


def _standing_rows(v: dict) -> list[tuple[str, str, str]]:
    """Table rows of a verification's (`TrajectoryCheck.to_dict`) balance, lifted-sole and clearance figures."""
    rows = []
    for key, label, scale, fmt, unit in (
        ("min_zmp_margin_m", "min ZMP margin (shapely)", 1000, ".1f", "mm"),
        ("max_foot_drift_m", "held sole drift", 1000, ".2g", "mm"),
        ("min_sole_lift_m", "lifted sole's lowest corner", 1000, ".1f", "mm"),
        ("max_sole_height_m", "lifted sole's highest corner", 1000, ".0f", "mm"),
        ("max_sole_tilt_rad", "lifted sole's largest tilt", 180 / math.pi, ".1f", "deg"),
        ("min_sole_apart_m", "lifted sole beside the stance sole (seen from above)", 1000, ".1f", "mm"),
    ):
        if v.get(key) is not None:
            rows.append((label, format(v[key] * scale, fmt), unit))
    if v.get("load_share_range") is not None:
        lo, hi = v["load_share_range"]
        rows.append(("other sole's share of the load (min – max)", f"{lo:.3f} – {hi:.3f}", "—"))
    if v.get("min_self_clearance_m") is not None:
        rows.append(
            (f"closest links ({v['closest_links']})", f"{v['min_self_clearance_m'] * 1000:.1f}", "mm")
        )
    elif v.get("self_collision") not in (None, "checked"):
        note = v.get("self_collision_note") or "the description has no collision geometry"
        if v["self_collision"] == "geometry unavailable":  # the file and why: the command's warning line
            note = "the collision geometry cannot be loaded (see the warning)"
        rows.append(("self-collision", f"not checked: {note}", "—"))
    return rows


def _margin_row(v: dict, decimals: int) -> tuple[str, str, str]:
    """The table row of a check's (`TrajectoryCheck.to_dict`) smallest position margin: in the unit of the joint
    it is at (rad, or m for a prismatic joint), named; "unlimited" where no joint has a position limit."""
    m = v["min_position_margin_rad"]
    if m is None or math.isinf(m):
        return ("min position margin", "unlimited (no position limit)", "—")
    joint = v.get("min_position_margin_joint")
    label = f"min position margin ({joint})" if joint else "min position margin"
    return (label, f"{m:.{decimals}f}", v.get("min_position_margin_unit") or "rad")


@contextmanager
def _unloadable_geometry_warned() -> Iterator[None]:
    """Plan checks inside go on without collision geometry that cannot be loaded
    (`trajectories.plan.collision_geometry_optional`), said once on stderr: self-collision not checked, and why."""
    from trajectories.plan import collision_geometry_optional

    with collision_geometry_optional() as skipped:
        yield
    for note in dict.fromkeys(skipped):
        err_console.print(f"[yellow]warning:[/yellow] self-collision is not checked: {escape(note)} (`poise run` "
                          "refuses the plan until its collision geometry loads)", highlight=False)  # fmt: skip


@dataclass
class PlanVerdict:
    """What `plan check` finds in a trajectory plan: its checks, a single-support plan's weight shifts, and with a
    run configuration the run's own pre-flight of its setpoints."""

    check: TrajectoryCheck
    transitions: Transitions | None
    run_config: RobotConfig | None
    run_problems: list[str]

    @property
    def problems(self) -> list[str]:
        return (
            self.check.problems
            + ([] if self.transitions is None else self.transitions.problems)
            + self.run_problems
        )


def plan_verdict(
    path: str,
    plan: TrajectoryPlan,
    model: RobotModel,
    traj,
    ps,
    config: str | None,
    optional: bool = False,
    dt: float = 0.001,
    run: bool = True,
) -> PlanVerdict:
    """`plan check`'s verdict on a plan, which `plan show` warns with: with a run configuration (`config`; a
    single-support plan's weight shifts need one: the bundled one without `config`), `poise run`'s own pre-flight
    (`poise.cmd_run_trajectory.preflight`: every limit on a 1 ms grid, every setpoint at the run's rate, the weight
    shifts); without, the plan-check checks alone. `optional`: a robot without a run configuration has its
    single-support run unchecked rather than refused. `run` False: the plan-check checks alone, on a `dt` grid
    (`simulate trajectory`'s: its recording's samples; `plan check` keeps 1 ms) — what they find, `plan check` finds
    too."""
    from poise.cmd_run_trajectory import preflight
    from trajectories.plan import check_plan

    # a bad configuration refused before the long checks
    if not run:
        cfg = None
    elif config is not None:
        cfg = _robot_config(model, config)
    else:
        cfg = _run_config(model, traj, None, optional)
    with named_errors(path):  # e.g. a closed chain that does not close at some sample
        if cfg is None:  # without the run's pre-flight, collision geometry that cannot be loaded is a warning
            with _unloadable_geometry_warned():
                check = check_plan(plan, model, traj, ps, dt)
            return PlanVerdict(check, None, None, [])
        pf = preflight(plan, model, traj, cfg, ps)
    run_problems = [f"run ({cfg.source}): {p}" for p in pf.stream.problems]
    return PlanVerdict(pf.check, pf.transitions, cfg, run_problems)


@contextmanager
def _fine_grid_progress(path: str, duration: float) -> Iterator[None]:
    """A bar per stage of the fine-grid check (joint torques, the soles' split, …) on a terminal's stderr."""
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    from trajectories.verify import reporting

    if not draws_progress():
        yield
        return
    bar = Progress(TextColumn(f"[bold]checking {escape(path)} ({duration:g} s):"), TextColumn("{task.description}"),
                   BarColumn(), TaskProgressColumn(), TimeElapsedColumn(), console=err_console, transient=True)  # fmt: skip
    task = bar.add_task("", total=None)

    def report(what: str, done: int, total: int) -> None:
        bar.update(task, description=what, completed=done, total=total)

    with bar, reporting(report):
        yield


def cmd_check_trajectory(path: str, params: str | None, as_json: bool, config: str | None = None) -> int:
    """`plan check` for a trajectory plan: every limit on a 1 ms grid, κ recomputed; with `config` (a
    single-support plan: or the bundled one) the run's whole pre-flight, as `poise run` refuses on it
    (`plan_verdict`)."""
    from robots.description import placeholder_limits
    from robots.params_io import resolve_params
    from trajectories.plan import plan_model, plan_trajectory

    plan = load_trajectory_plan(path)
    model = plan_model(plan)
    traj = plan_trajectory(plan, model)
    placeholders = placeholder_limits(model)
    name = params or plan.params or next(iter(model.params))
    ps = resolve_params(params, model) if params else name  # a set's name, or a parameter-set file
    # on stderr and only on a terminal: a one-hour plan's 1 ms check takes minutes
    with _fine_grid_progress(path, traj.duration):
        v = plan_verdict(path, plan, model, traj, ps, config)
    check, tr, run_cfg, problems = v.check, v.transitions, v.run_config, v.problems
    run_said = None if run_cfg is None else {"config": run_cfg.source, "rate_hz": run_cfg.executor.rate_hz,
                                             "ok": not v.run_problems}  # fmt: skip
    friction = _friction_kappa(plan, model, traj, check.dt) if plan.settings.get("friction") else None
    if as_json:
        out = check.to_dict() | {"problems": problems, "ok": not problems, "placeholder_limits": placeholders}
        out |= {"kappa_model": "rigid body"} if friction is None else {
            "kappa_model": "rigid body, without friction columns",
            "kappa_with_friction": friction.kappa, "kappa_scaled_with_friction": friction.kappa_scaled,
            "kappa_with_friction_grid": friction.grid, "kappa_with_friction_samples": friction.samples}  # fmt: skip
        out |= {} if run_said is None else {"run": run_said}
        print_json(out if tr is None else out | {"weight_shift": tr.summary()})
        return 0 if not problems else 1
    rows = [
        ("grid", f"{check.grid_points} × {check.dt * 1000:.2f}", "ms"),
        _margin_row(check.to_dict(), 4),
        (
            "peak velocity / limit",
            _ratio_cell(check.velocity_ratio, placeholders.get("velocity"), model),
            "—",
        ),
        ("peak acceleration / limit", f"{check.acceleration_ratio:.3f}", "—"),
        ("peak torque / limit", _ratio_cell(check.torque_ratio, placeholders.get("effort"), model), "—"),
        (
            "κ raw / column-scaled" + ("" if friction is None else ", rigid body (without friction columns)"),
            f"{_kappa(check.kappa, 1)} / {_kappa(check.kappa_scaled, 3)}",
            "—",
        ),
    ]
    if friction is not None:  # the design's own criterion: as `plan trajectory --friction` reported it
        on = "the design's grid" if friction.grid == "design" else "the check's grid, thinned"
        rows.append((f"κ raw / column-scaled, with friction columns ({on}: {friction.samples} samples)",
                     f"{_kappa(friction.kappa, 1)} / {_kappa(friction.kappa_scaled, 3)}", "—"))  # fmt: skip
    rows += _standing_rows(check.to_dict())
    rows += [] if tr is None else _transition_rows(tr)
    table = quantity_table(f"{path}: {model.name}, {traj.duration:.1f} s, parameters {name!r}", rows, "check")
    console.print(table)
    if check.unexcited:
        err_console.print(f"[yellow]{escape(unexcited_note(check.unexcited, len(check.unexcited)))}")
    _note_placeholders(model)
    if run_said is not None and run_said["ok"]:
        console.print(f"run ({escape(str(run_cfg.source))}): the setpoints at {run_cfg.executor.rate_hz:g} Hz pass "
                      "the run's pre-flight (joint and velocity limits, balance when standing, start posture)")  # fmt: skip
    if not problems:
        console.print("[green]trajectory OK")
        return 0
    for msg in problems:  # escaped: a message's "[stance]" is no markup tag
        console.print(f"[red]FAIL[/red] {escape(msg)}")
    return 1


@dataclass
class FrictionKappa:
    """κ raw and column-scaled of a plan's base regressor with each joint's friction columns (what a `--friction`
    design optimised), and the grid it is on: the design's own, else the check's thinned."""

    kappa: float
    kappa_scaled: float
    grid: str  # "design" (the criterion's samples: its stored κ) or "check" (~2000 of the check's grid)
    samples: int


def _friction_kappa(plan: TrajectoryPlan, model: RobotModel, traj, dt: float) -> FrictionKappa:
    """`FrictionKappa` on the design's grid (`trajectories.design_grid.design_times`: the κ the design stored),
    or, for a plan whose settings do not give that grid, on about 2000 samples of the check's `dt` grid."""
    from robots.conditioning import kappa, normalised_columns
    from trajectories.plan import motion_rows
    from trajectories.verify import sample_grid

    t, grid = _design_grid(plan), "design"
    if t is None:
        t, grid = sample_grid(traj, dt), "check"
        t = t[:: max(1, len(t) // 2000)]
    W = motion_rows(model, traj, plan.base, bool(plan.settings.get("simplified", False)), True, t)
    return FrictionKappa(kappa(W), kappa(normalised_columns(W)[0]), grid, len(t))


def _design_grid(plan: TrajectoryPlan):
    """The times (s) the design's criterion sampled the motion at, from the plan's settings; None where they do not
    say (a plan not made by `plan trajectory`)."""
    from types import SimpleNamespace

    from trajectories.design_grid import design_times

    st = plan.settings
    try:
        grid = SimpleNamespace(parametrisation=st.get("parametrisation", "fourier"), period=float(st["period"]),
                               duration=float(st["duration"]), waypoints=int(st.get("waypoints", 0)))  # fmt: skip
        samples = int(st["samples"])
    except (KeyError, TypeError, ValueError):
        return None
    return design_times(grid, samples) if samples >= 2 else None


def _ratio_cell(ratio: float | None, placeholders: dict[str, float] | None, model: RobotModel) -> str:
    """A peak / limit table cell: not checked where every joint's limit is a URDF placeholder (the ratio would
    read ~0), the placeholder joints named where some are."""
    if ratio is None:
        return "—"
    if not placeholders:
        return f"{ratio:.3f}"
    if set(placeholders) >= set(model.joint_names):
        return "not checked: the URDF's placeholders"
    return f"{ratio:.3f} (not checked on {', '.join(placeholders)}: placeholders)"


def placeholder_note(model: RobotModel) -> str | None:
    """What a check of `model`'s limits leaves unchecked: the velocity and torque limits that are the URDF's
    placeholders (`robots.description.placeholder_limits`); None when there are none."""
    from robots.description import placeholder_limits

    found = placeholder_limits(model)
    parts = []
    for kind, label, unit in (("velocity", "velocity", "rad/s"), ("effort", "torque", "N·m")):
        vals = found.get(kind)
        if vals:
            where = "every joint" if set(vals) >= set(model.joint_names) else ", ".join(vals)
            parts.append(
                (label, f"{'/'.join(f'{v:g}' for v in sorted(set(vals.values())))} {unit} on {where}")
            )
    if not parts:
        return None
    return (f"{'/'.join(k for k, _ in parts)} limits are the URDF's placeholders ({'; '.join(v for _, v in parts)}): "
            "not checked — set [joint_limits.NAME] velocity/effort in the robot description")  # fmt: skip


def _note_placeholders(model: RobotModel) -> None:
    """`placeholder_note` on stderr, if any."""
    note = placeholder_note(model)
    if note:
        err_console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)


def _run_config(model: RobotModel, traj, config: str | None, optional: bool = False) -> RobotConfig | None:
    """The executor's configuration (`config`, else the bundled one) a single-support plan's weight shifts are
    planned with; None for any other plan (nothing to plan: a double-support or fixed-base run starts as placed), and
    with `optional` for a robot without one."""
    from trajectories.single_support import SingleSupportTrajectory

    if not isinstance(traj, SingleSupportTrajectory):
        return None
    return _robot_config(model, config, optional)


def _robot_config(model: RobotModel, config: str | None, optional: bool = False) -> RobotConfig | None:
    """The robot's run configuration: `config`, else the bundled one — refused (DataError) when it is another
    robot's, or with `optional` and no `config`, None then (the robot has no run configuration)."""
    from drivers.config import load_config

    cfg = load_config(config)
    if optional and config is None and cfg.robot != model.name:
        return None
    cfg.require_robot(model.name)
    return cfg


def _transition_rows(tr: Transitions) -> list[tuple[str, str, str]]:
    """Table rows of a run's weight shifts (`Transitions`): at the start, and at the end unless it is the start's."""
    rows = _transition_row("start", tr.start)
    if tr.periodic:
        return rows + [("weight shift at the end", "the start's, backwards", "—")]
    return rows + _transition_row("end", tr.end)


def _transition_row(when: str, ws: WeightShift | None) -> list[tuple[str, str, str]]:
    """One weight shift's rows: the durations of its shift and lift and the free sole's ground pose standing on
    both soles (x, y, yaw), or that there is none."""
    if ws is None:
        return [(f"weight shift at the {when}", "[red]none", "—")]
    x, y, yaw = ws.pose
    return [
        (f"weight shift at the {when}: shift / lift", f"{ws.shift.t[-1]:.2f} / {ws.lift.t[-1]:.2f}", "s"),
        (f"free sole on the ground at the {when}: x / y / yaw",
         f"{x * 1000:.1f} / {y * 1000:.1f} / {math.degrees(yaw):.1f}", "mm / mm / deg"),
    ]  # fmt: skip


def cmd_show_trajectory(path: str, out: str) -> int:
    """`plan show` for a trajectory plan: joint positions and velocities against their limits, with the torques
    (arms) or the ZMP path inside the support polygon (standing robots)."""
    from formats.atomic import save_figure
    from trajectories.plan import plan_model, plan_trajectory
    from trajectories.plot import trajectory_figure

    plan = load_trajectory_plan(path)
    model = plan_model(plan)
    traj, ps = plan_trajectory(plan, model), plan.params or next(iter(model.params))
    verdict = as_it_is_verdict(path, plan, model, traj, ps)
    problems = verdict.problems  # a figure never hides a failing plan
    with named_errors(path):  # e.g. a closed chain that does not close at some sample
        fig = trajectory_figure(
            model, traj, plan.base, ps, name=path, design=plan.design, settings=plan.settings,
            zmp_min=verdict.check.min_zmp_margin_m,
        )  # fmt: skip
    save_figure(fig, out, tight=True)
    console.print(f"wrote {out}")
    warn_fails_check(path, problems, "drawn as it is")
    _note_placeholders(model)
    return 0


def as_it_is_verdict(
    path: str, plan: TrajectoryPlan, model: RobotModel, traj, ps, dt: float = 0.001, run: bool = True
) -> PlanVerdict:
    """`plan check`'s verdict (`plan_verdict`, its progress on a terminal) for a command that uses a plan as it is
    and warns when it fails (`plan show` draws it; `simulate trajectory` records it, checked at its own samples
    (`dt`) without the run's pre-flight, `run` False): the plan's own settings, its run unchecked for a robot
    without a run configuration."""
    with _fine_grid_progress(path, traj.duration):
        return plan_verdict(path, plan, model, traj, ps, None, optional=True, dt=dt, run=run)


def warn_fails_check(path: str | Sequence[str], problems: list[str], done: str) -> None:
    """The one-line warning that `plan check PATH` fails a plan a command used anyway (`done`: "drawn as it is"),
    naming its first three problems; nothing when there are none. `path`: the plan, or the plans `plan check`
    fails of several a command used together (`plan forecast`'s, each problem led by its plan's name)."""
    if not problems:
        return
    paths = [path] if isinstance(path, str) else list(dict.fromkeys(path))
    failing = (f"`plan check {escape(paths[0])}` fails it" if len(paths) == 1
               else f"`plan check` fails {escape(', '.join(paths[:-1]))} and {escape(paths[-1])}")  # fmt: skip
    err_console.print(f"[yellow]warning:[/yellow] {failing} ({len(problems)} problem(s): "
                      f"{escape('; '.join(problems[:3]))}{'; …' if len(problems) > 3 else ''}): {escape(done)}",
                      highlight=False)  # fmt: skip


@contextmanager
def _working(what: str) -> Iterator[None]:
    """A spinner with the elapsed time on a terminal's stderr while a step without chunks of its own runs."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    if not draws_progress():
        yield
        return
    bar = Progress(SpinnerColumn(), TextColumn(f"[bold]{escape(what)}"), TimeElapsedColumn(), console=err_console,
                   transient=True)  # fmt: skip
    bar.add_task("", total=None)
    with bar:
        yield


def _row_units(model: RobotModel, rows: list[str], standing: bool) -> dict[str, str]:
    """The unit of each forecast row's noise: a board's Fz N and moments N·m; a joint's effort N·m, or N for a
    prismatic joint."""
    if standing:
        return {r: "N" if r.lower().startswith("f") else "N·m" for r in rows}
    kinds = {jt.name: jt.type for jt in model.joints}
    return {r: "N" if kinds.get(r) == "prismatic" else "N·m" for r in rows}


def _channel_name(row: str) -> str:
    """A forecast row's name as the identify figures write it: a board's channel Fz / Mx / My, a joint's as is."""
    return row[:1].upper() + row[1:] if row.lower() in ("fx", "fy", "fz", "mx", "my", "mz") else row


def _noise_with_units(noise, units: dict[str, str]) -> str:
    """σ per row with its unit ("0.49 N (Fz) / 1.42 N·m (Mx) / …"); one σ for all rows: "0.2 N·m"."""
    rows = list(units)
    if len(noise) == 1 or len(set(noise)) == 1 and len(set(units.values())) == 1:
        return f"{noise[0]:g} {next(iter(units.values()), '')}".strip()
    return " / ".join(f"{v:g} {units[r]} ({r})" for v, r in zip(noise, rows, strict=False))


def cmd_forecast_trajectory(args: argparse.Namespace) -> int:
    """`plan forecast`: the base parameters a plan determines, from its own regressor and a stated noise level;
    a plan `plan check` fails is forecast with a warning naming its failures."""
    from poise.workflows.plan_forecast import forecast_plans, plan_problems

    plans = [load_trajectory_plan(p, "plan forecast") for p in args.plan]
    with _working(f"forecasting {' + '.join(args.plan)}"):
        pf = forecast_plans(
            plans,
            args.plan,
            args.noise,
            args.params,
            args.rate_hz,
            not args.no_friction,
            args.armature,
            args.practical_s,
            tare_kg=args.tare_kg,
        )
    with _fine_grid_progress(" + ".join(args.plan), pf.forecast.duration_s), _unloadable_geometry_warned():
        problems = plan_problems(plans, args.plan)  # as `plan check` draws it
    fc, model, params, rate, standing = pf.forecast, pf.model, pf.params, pf.rate_hz, pf.standing
    practical_s = pf.practical_s
    out = fc.to_dict(args.well, practical_s)
    out.pop("against")  # the same as `params`, put first
    units = _row_units(model, fc.rows, standing)
    out = {"robot": model.name, "plans": list(args.plan), "rate_hz": rate, "params": fc.params_name or params.name,
           "noise_units": units} | out | {"plan_problems": problems}  # fmt: skip
    if args.plot:
        import os

        from identify.plots import forecast_figure, save_figure

        nb = fc.inertial
        channels = {r: _channel_name(r) for r in units}  # Fz / Mx / My, as the identify figures write them
        noise = _noise_with_units(fc.noise, {channels[r]: u for r, u in units.items()})
        title = (f"{model.name}: {' + '.join(os.path.basename(p) for p in args.plan)}, "
                 f"noise per sample {noise}")  # fmt: skip
        fig = forecast_figure(fc.symbols[:nb], fc.rel_se_pct[:nb], fc.needed_s(args.well)[:nb], fc.duration_s,
                              args.well, practical_s, title)  # fmt: skip
        save_figure(fig, args.plot, dpi=120)
    named = list(dict.fromkeys(args.plan))  # each problem is led by its plan's name (`plan_problems`)
    failing = [p for p in named if any(q.startswith(f"{p}: ") for q in problems)] or named
    warn_fails_check(failing, problems, "`poise run` refuses it; forecast as it is" if len(failing) == 1
                     else "`poise run` refuses them; forecast as they are")  # fmt: skip
    if args.json:
        print_json(out)
        return 0
    noise = ", ".join(f"{r} {v:g} {units[r]}" for r, v in zip(fc.rows, fc.noise, strict=True))
    if len(set(fc.noise.tolist())) == 1 and len(set(units.values())) == 1:
        noise = f"{fc.noise[0]:g} {next(iter(units.values()))} on each of {len(fc.rows)}"
    title = (
        f"{' + '.join(args.plan)}: {model.name}, {fc.duration_s:.1f} s at {rate:g} Hz, noise {noise} per sample, "
        f"cut-off {fc.cutoff_hz:.3g} Hz; relative SEs against {out['params']!r}"
    )
    # the values are an identify dynamic result's estimates, or a guess: the table's word, the summary's, the advice
    value, zero_word, better = (
        ("estimate", "estimated", "they are that fit's estimates: as near the robot as its SEs say; a fit of more "
         "runs brings them nearer") if pf.fitted
        else ("guess", "guessed", "give --params with a previous identify dynamic --json result, or a better "
              "parameter set")
    )  # fmt: skip
    _forecast_table(out, fc, title, args.well, value)
    named = ", ".join(out["determined"]) or "none"
    repeated = ", ".join(out["determined_if_repeated"]) or "none"
    console.print(
        f"determined to {args.well:g} % in one run: {len(out['determined'])}/{fc.inertial} ({named}); with the "
        f"motion repeated up to {practical_s:g} s: {len(out['determined_if_repeated'])} more ({repeated}); beyond "
        f"{practical_s:g} s: {len(out['beyond_practical'])} (noise alone); {zero_word} 0 (no relative SE to judge): "
        f"{len(out['zero_guess'])}. Correlation between parameters multiplies the SEs by "
        f"{fc.correlation_factor:.3g} (median) over fitting each alone; κ column-scaled of the fitted rows "
        f"{fc.kappa_scaled:.4g}.",
        highlight=False,
    )
    if fc.tare_mass_sd is not None:
        console.print(_tare_sentence(fc.tare_mass_sd, args.tare_kg), highlight=False)
    console.print(
        f"The verdicts are against {out['params']!r}, not the robot: the SEs hardly depend on it, but a value "
        f"k times the true size makes a relative SE k times too small and the runs needed k² too few ({better}). "
        f"{out['rules']['forecast'][0].upper()}{out['rules']['forecast'][1:]}; {out['rules']['identify']}.",
        highlight=False,
    )
    return 0


def _tare_sentence(sd_kg: float, given: float | None) -> str:
    """`plan forecast`'s line on the board tare in the SEs: σ `sd_kg`, from --tare-kg (`given`) or the default."""
    if sd_kg == 0:
        return ("The SEs leave out the board tare (--tare-kg 0: ideal boards); identify dynamic includes a run's "
                "recorded tare.")  # fmt: skip
    source = (
        "the default: the thesis's boards tared on 1 s of empty readings, as `poise run` does"
        if given is None
        else "--tare-kg"
    )
    return (f"The SEs include each run's board tare: a constant total-load offset of σ {sd_kg:.2g} kg ({source}), "
            "as identify dynamic includes a run's recorded tare.")  # fmt: skip


def _forecast_table(out: dict, fc, title: str, well: float, value: str = "guess") -> None:
    """`plan forecast`'s table of base parameters (`DynamicForecast.to_dict`'s `out`), then its rotor inertia
    and friction SEs; `value`: what the values are (a guess, or an identify dynamic result's estimate)."""
    from rich.table import Table

    rows = []
    for p in out["parameters"][: fc.inertial]:
        rel = p["rel_se_pct"]
        need = p["needed_s"]
        verdict = (
            "determined" if p["symbol"] in out["determined"]
            else f"if repeated: {need:.0f} s" if p["symbol"] in out["determined_if_repeated"]
            else f"{value} 0: no relative SE" if p["symbol"] in out["zero_guess"]
            else "beyond " + (f"{need:.3g} s" if need is not None else "any length")
        )  # fmt: skip
        rows.append((p["symbol"], p["unit"], f"{p['value']:.4g}" if p["value"] is not None else "—",
                     f"{p['se']:.3g}", "—" if rel is None else f"{rel:.3g}", verdict))  # fmt: skip
    table = Table(title=title)
    for col in ("base parameter", "unit", "value", "SE", "rel. SE [%]", f"to {well:g} %"):
        table.add_column(col, justify="left" if col.startswith(("base", "unit", "to")) else "right")
    for r in rows:
        table.add_row(*r)
    console.print(table)
    rotor = [p for p in out["parameters"][fc.inertial :] if p["symbol"].startswith("Ia@")]
    if rotor:
        console.print("rotor inertia (armature) SE: " + ", ".join(f"{p['symbol']} {p['se']:.3g} {p['unit']}" for p in rotor)
                      + "; grouped into the base parameters: " + (", ".join(fc.armature_grouped) or "none"),
                      highlight=False)  # fmt: skip
    friction = [p for p in out["parameters"][fc.inertial :] if p["symbol"].startswith(("fv@", "fc@"))]
    if friction:
        console.print("friction SE (estimated beside the base parameters): "
                      + ", ".join(f"{p['symbol']} {p['se']:.3g} {p['unit']}" for p in friction), highlight=False)  # fmt: skip


# bytes `plan sample` holds per value it writes (a row's t, q, q̇, q̈, τ): the arrays, their stacked copy and the
# CSV text built in memory (`formats.setpoints.write_setpoints`) — 54 B measured on the iCub arm's 60 s at 10 kHz
# (`/usr/bin/time -v`, 13.2 M values, 712 MB peak); past `plan_forecast.STATE_BYTES` it is refused with a rate
SETPOINT_BYTES_PER_VALUE = 64
GRID_NOTE = (
    "every 1/rate_hz s from 0; the last step ends at the duration, shorter when the rate does not divide it"
)


def cmd_sample_trajectory(args: argparse.Namespace) -> int:
    """`plan sample`: the plan's q, q̇, q̈ (and feed-forward torques) every 1/rate s, for the user's controller;
    refused at a rate that cannot carry the motion's band, or whose file would not fit in memory."""
    from drivers.trajectory_run import tick_count, tick_times
    from formats.setpoints import Setpoints, write_setpoints
    from formats.trajectory_plan import plan_digest
    from poise.workflows.plan_forecast import check_band_rate, check_memory
    from trajectories.plan import check_plan, plan_model, plan_recording, plan_trajectory

    plan = load_trajectory_plan(args.plan, "plan sample")
    model = plan_model(plan)
    traj = plan_trajectory(plan, model)
    how = plan_recording(plan, traj)
    if args.torques and how.standing:  # refused before the long check
        raise DataError("--torques: a standing robot's joint torques depend on how its soles share the load; "
                        "feed-forward torques are a fixed-base arm's")  # fmt: skip
    rate = args.rate_hz or plan.rate_hz
    rows = tick_count(traj.duration, rate)
    if rows < MIN_RECORDED_SAMPLES:  # as `plan trajectory` and `simulate trajectory` refuse
        raise DataError(f"--rate-hz {rate:g}: {traj.duration:g} s at it is {rows} setpoints; a controller needs "
                        f"at least {MIN_RECORDED_SAMPLES} (the rate is in Hz)")  # fmt: skip
    check_band_rate(args.plan, how.meta, traj.duration, rate, "setpoints")
    columns = 1 + (4 if args.torques else 3) * model.nq
    check_memory(
        [traj.duration], rate, SETPOINT_BYTES_PER_VALUE * columns, "its setpoints would take about {gib}"
    )
    t = tick_times(traj.duration, rate)  # at the plan's rate, the ticks `poise run` streams
    # setpoints go where poise does not guard the run: only a plan `plan check`'s checks pass (a single-support
    # plan's weight shift, which `poise run` plans, is the user's to make)
    ps = plan.params or next(iter(model.params))
    with (
        named_errors(args.plan),
        _fine_grid_progress(args.plan, traj.duration),
        _unloadable_geometry_warned(),
    ):
        problems = check_plan(plan, model, traj, ps).problems
    if problems:
        raise DataError(f"`plan check {args.plan}` fails it ({len(problems)} problem(s): {'; '.join(problems[:3])}"
                        f"{'; …' if len(problems) > 3 else ''}): no setpoints written")  # fmt: skip
    q, qd, qdd = traj.sample(t)
    tau = _feed_forward(model, q, qd, qdd, ps, plan.base) if args.torques else None
    meta = {"rate_hz": f"{rate:g}", "grid": GRID_NOTE, "duration_s": f"{traj.duration:g}",
            "plan_sha256": plan_digest(plan), "base": plan.base}  # fmt: skip
    # a standing plan's motion class, which a board recording of it then declares (`plan_recording` names only
    # single support); an arm's torque recording declares none
    if how.standing:
        meta["motion"] = "double-support"
    meta |= how.meta
    if tau is not None:
        meta["torques"] = f"feed-forward, RNEA with parameter set {ps!r}"
    write_setpoints(Setpoints(model.name, list(model.joint_names), t, q, qd, qdd, tau, meta), args.out)
    _sample_report(args, model, meta, t, q, qd, traj.duration, rate, tau is not None)
    return 0


def _feed_forward(model: RobotModel, q, qd, qdd, ps: str, base: str):
    """RNEA joint torques of the samples, CHUNK_SAMPLES at a time as the checks evaluate dynamics: at once it
    held 2 kB a sample and joint (4.4 GB for the iCub arm's 60 s at 5 kHz)."""
    from robots import dynamics as dyn
    from trajectories.verify import in_chunks

    with _working("feed-forward torques (RNEA)"):
        return in_chunks(lambda *s: dyn.rnea(model, *s, ps, base), q, qd, qdd, what="feed-forward torques")


def _sample_report(
    args, model: RobotModel, meta: dict, t, q, qd, duration: float, rate: float, torques: bool
) -> None:
    """`plan sample`'s summary: a line, or with --json the same as JSON (joints named, the caveats included)."""
    import numpy as np

    single = meta.get("motion") == "single-support"
    start = "the robot must stand at the first row's posture, at rest, before the stream starts"
    shift = (
        "on one sole: the weight shift onto it, which `poise run` plans, is yours to make" if single else None
    )
    limits = placeholder_note(model)
    if args.json:
        names = list(model.joint_names)
        print_json({"out": args.out, "robot": model.name, "motion": meta.get("motion", "free"), "samples": len(t),
                    "rate_hz": rate, "duration_s": duration, "last_step_s": float(t[-1] - t[-2]), "grid": GRID_NOTE,
                    "joint_names": names, "start_rad": q[0].tolist(), "torques": torques,
                    "peak_velocity_rad_s": np.abs(qd).max(axis=0).tolist(),  # in joint_names' order
                    "notes": [start] + ([shift] if shift else []) + ([limits] if limits else [])})  # fmt: skip
        return
    console.print(f"wrote {len(t)} setpoints ({duration:g} s at {rate:g} Hz) to {args.out}; {start}"
                  + (f" — {shift}" if shift else ""))  # fmt: skip
    _note_placeholders(model)
