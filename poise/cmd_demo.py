"""`poise demo`: the whole pipeline on the emulated bench, with the identification table at the end."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys

from rich.table import Table

from poise import argtypes as at
from poise.output import console, err_console, print_json


def _tracking(report: list[dict], lifted: bool) -> str:
    """The largest move tracking error (deg) over the postures moved to lifted (or on the boards), "—" if none."""
    errs = [r["move_tracking_max_deg"] for r in report if bool(r.get("move_lifted")) == lifted]
    return f"{max(errs):.2f}" if errs else "—"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="design -> run on emulated robot and boards -> identify -> report")
    p.add_argument("pipeline", nargs="?", choices=["postures", "arm", "standing"], default="postures",
                   help="postures: TUlip's static postures and CoM parameters (default; the options below); arm: a UR5's "
                        "excitation trajectories, identified from its motor currents; standing: TUlip's "
                        "balance-constrained excitation in double support, identified from the boards' wrench (arm "
                        "and standing print and run the poise commands of the pipeline, then its verdict against its target; they take "
                        "--out, --seed, --force and --json)")  # fmt: skip
    p.add_argument("--out", type=at.out_dir, default=None,
                   help="directory for the plans, runs and figures (default out/demo, out/demo_arm, out/demo_standing): new, "
                        "empty or an earlier run's of the same demo, whose outputs are replaced once the new ones "
                        "are made (restored if the run fails or is interrupted)")  # fmt: skip
    p.add_argument("--postures", type=at.integer(13), default=None,
                   help="number of postures (default 18 on the physics twin, 30 on the kinematic robot)")  # fmt: skip
    p.add_argument(
        "--placements",
        type=at.count,
        default=6,
        help="foot placements (default 6: three postures each on the physics twin, five on the kinematic robot; "
        "--postures must be a multiple)",
    )
    p.add_argument(
        "--move-s", type=at.nonnegative, default=4.0, help="move duration per posture (robot time, s)"
    )
    p.add_argument(
        "--hold-s", type=at.positive, default=8.0, help="hold duration per posture (robot time, s)"
    )
    p.add_argument("--time-scale", type=at.positive, default=None,
                   help="time compression K (default 3 on the physics twin — its physics must keep up with K × the "
                        "wall clock on 2 busy cores — and 6 on the kinematic robot)")  # fmt: skip
    p.add_argument(
        "--no-recalibrate", action="store_true", help="skip the per-cell recalibration of the boards"
    )
    p.add_argument("--seed", type=at.seed, default=None,
                   help="design seed (default 1; standing: 3, its validation motion seed + 1)")  # fmt: skip
    p.add_argument("--no-noise", action="store_true", help="ideal boards and encoders")
    p.add_argument("--physics", choices=["kinematic", "mujoco"], default="mujoco",
                   help="the emulated robot: the MuJoCo physics twin (default) or kinematic (fast)")  # fmt: skip
    p.add_argument("--load-share", type=at.number(0.0, 0.5, hi_open=True), default=None,
                   help="design: each sole carries at least this share of the weight (lever rule; default 0.25, "
                        "0 = off: then the lightly loaded sole lifts and slides on the twin)")  # fmt: skip
    p.add_argument("--uncertainty", type=at.nonnegative, default=None, metavar="R",
                   help="design: keep the margin for every ϑ_b within R m of the guess (robust design; default 0)")  # fmt: skip
    at.add_twin_truth(p, "")
    p.add_argument("--placement-error", type=at.pair_of_nonnegative, default=None, metavar="MM,DEG",
                   help="σ of the boards' placement error unknown to the configuration (default 0,0)")  # fmt: skip
    at.add_gravity_comp(p, default="on with the physics twin (its servos sag under load), off on the kinematic "
                                   "robot and with --thesis-conditions")  # fmt: skip
    p.add_argument("--thesis-conditions", action="store_true",
                   help="the thesis's bench: problem 1 designed with TUlipMC (Table D.4), no load share, the robot "
                        "as Table 4.6, boards off by σ 5 mm / 2°, no gravity feed-forward (options above override)")  # fmt: skip
    p.add_argument("--json", action="store_true",
                   help="print the result as JSON (arm, standing: the identification's verdict; their commands' "
                        "output goes to stderr)")  # fmt: skip
    p.add_argument("--force", action="store_true",
                   help="write into an --out holding files the demo did not write (they are kept; the demo replaces "
                        "only its own outputs, which an earlier run of the same demo left there)")  # fmt: skip
    # what `poise demo arm|standing` refuses when given: every option but these
    shared = ("help", "pipeline", "out", "seed", "json", "force")
    posture_only = {a.dest: a.default for a in p._actions if a.dest not in shared}
    p.set_defaults(func=cmd_demo, posture_only=posture_only)


def cmd_demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.live import Live

    from formats.errors import DataError
    from poise.cmd_run import ProgressView
    from poise.output import draws_progress
    from poise.workflows.demo import check_demo, demo_conditions, run_demo
    from poise.workflows.dynamic_demo import DemoFolder

    if args.pipeline != "postures":
        return _dynamic_demo(args)
    default_out = args.out is None  # out/demo: made with its folders (out/ is not in a fresh clone)
    args.out = args.out or "out/demo"
    args.seed = 1 if args.seed is None else args.seed
    twin = args.physics == "mujoco"
    if args.postures is None:
        args.postures = 18 if twin else 30
    if args.time_scale is None:
        args.time_scale = 3.0 if twin else 6.0
    if args.postures % args.placements:
        raise DataError("--postures must be a multiple of --placements")
    mm_, deg = args.placement_error if args.placement_error is not None else (None, None)
    args.conditions = demo_conditions(
        args.thesis_conditions, args.load_share, args.uncertainty, args.truth,
        None if mm_ is None else (mm_ / 1000, math.radians(deg)), args.gravity_comp, twin,
    )  # fmt: skip
    check_demo(args)  # what the run would refuse after the design, refused now
    folder = DemoFolder(Path(args.out), "postures", args.force, parents=default_out)
    folder.check()  # before any work: nothing is written into a folder that is refused

    log = (lambda *a: None) if args.json else (lambda msg: err_console.print(msg))
    live = Live(console=err_console, refresh_per_second=8, transient=True) if draws_progress() else None
    try:  # begin inside: a Ctrl-C while it moves the earlier outputs aside puts them back
        note = folder.begin()
        if note:
            log(f"    {note}")
        res = run_demo(args, progress=ProgressView(live), log=log, live=live)
    except BaseException:
        if folder.rollback():
            err_console.print(f"poise demo: the earlier run's outputs in {args.out} are restored")
        raise
    kept = None
    # stopped short (a safety stop) is a failure: the earlier run's outputs come back (if any), this run's aside
    if res.stopped:
        kept = folder.keep_stopped()
        if kept is not None:
            res = _relocated(res, Path(args.out), kept)
            err_console.print(f"poise demo: the run stopped short: the earlier run's outputs in {args.out} are "
                              f"restored; this run's are in {kept}", soft_wrap=True, highlight=False)  # fmt: skip
    else:
        folder.commit()
    if args.json:
        print_json({
            "plan": str(res.plan_path), "run_dir": str(res.run_dir), "kappa": res.kappa,
            "parameters": res.table, "cop_error_m": {k: {"mean": a, "max": b, "rms": r} for k, (a, b, r) in res.cop_error.items()},
            "physics": res.physics, "within_se": res.within_se, "se_bound": 3 if res.physics == "mujoco" else 2,
            "improvement": res.improvement, "targets_met": res.targets_met, "timings_s": res.timings,
            "executed": res.executed, "planned": res.planned, "stopped": res.stopped, "twin_events": res.twin_events,
            "twin_timing": res.twin_timing, "execution": res.execution, "standing": res.standing,
            "standing_count": None if res.standing is None else sum(r["stands"] for r in res.standing),
            "conditions": dataclasses.asdict(res.conditions) if res.conditions else None,
            "earlier_outputs_restored": kept is not None,
        })  # fmt: skip
        return 0
    if res.standing is not None:
        bad = [r for r in res.standing if not r["stands"]]
        console.print(
            f"standing alone on the twin: {len(res.standing) - len(bad)} of {len(res.standing)} postures"
            + "".join(f"\n  posture {r['posture']}: {'; '.join(r['events'][:2])}" for r in bad)
        )
    if not res.table:
        console.print(
            f"{res.executed} of {res.planned} postures executed, not identified (why: above); stopped: {res.stopped}"
        )
        _print_twin_events(res.twin_events)
        return 0
    t = Table(title=f"identification, simplified model, right-foot base (κ = {res.kappa:.1f})")
    for c in ("ϑ", "true \\[mm]", "guess \\[mm]", "estimate \\[mm]", "SE \\[mm]", "|est−true|/SE"):
        t.add_column(c, justify="right")
    for r in res.table:
        t.add_row(r["symbol"], f"{r['true_m'] * 1000:.3f}", f"{r['guess_m'] * 1000:.3f}",
                  f"{r['estimate_m'] * 1000:.3f}", f"{r['se_m'] * 1000:.3f}", f"{r['z']:.2f}")  # fmt: skip
    console.print(t)
    e = Table(title="CoP prediction error on the recorded postures (as Table 4.8)")
    for c in ("parameters", "mean \\[mm]", "max \\[mm]", "rms \\[mm]"):
        e.add_column(c, justify="right")
    for k, (a, b, r) in res.cop_error.items():
        e.add_row(k, f"{a * 1000:.2f}", f"{b * 1000:.2f}", f"{r * 1000:.2f}")
    console.print(e)
    if res.execution:
        x = res.execution
        margins = [r["min_margin_mm"] for r in x if r["min_margin_mm"] is not None]
        console.print(
            f"execution: {res.executed} of {res.planned} postures; tracking max "
            f"{_tracking(x, False)} deg moving on the boards, {_tracking(x, True)} deg moving lifted to a new "
            "placement (the servos lag the unloaded swing), "
            f"{max(r['hold_tracking_max_deg'] for r in x):.2f} deg holding; settle ≤ {max(r['settle_s'] for r in x):.1f} s; "
            f"other sole slip ≤ {max(r['slip_mm'] for r in x):.1f} mm; min measured CoP margin "
            + (f"{min(margins):.1f} mm" if margins else "—")
            + f" (per posture: {res.run_dir}/run.json, 'report')"
        )
        _print_twin_events(res.twin_events)
    if res.stopped:
        console.print(f"run stopped for safety after {res.executed} of {res.planned} postures: {res.stopped}")
    verdict = "targets met" if res.targets_met else "targets missed"
    if res.physics == "mujoco":
        est, true = res.cop_error["estimated"][2], res.cop_error["true"][2]
        target = (f"estimates within 3 SE of the twin's truth: {res.within_se}; CoP error {est * 1000:.2f} mm rms with "
                  f"the estimates vs {true * 1000:.2f} mm with the true parameters (target ≤ 1.1x), "
                  f"{res.improvement:.1f}x better than the guess")  # fmt: skip
    else:
        target = (f"estimates within 2 SE of the truth: {res.within_se}; CoP error cut {res.improvement:.1f}x "
                  "versus the guess (target ≥ 5x)")  # fmt: skip
    tt = res.twin_timing
    if tt and tt.get("behind_sim_s", 0) > 0.5:  # drivers on the host clock ran ahead of the physics
        console.print(f"[yellow]note:[/yellow] the physics ran at {tt['achieved_scale']:.1f}x instead of "
                      f"{tt['time_scale']:g}x (machine too busy): lower --time-scale for a faithful run")  # fmt: skip
    elif tt and tt.get("lost_sim_s", 0) > 0.5:  # on the twin's clock: faithful, only slower
        console.print(f"note: the physics ran at {tt['achieved_scale']:.1f}x instead of {tt['time_scale']:g}x "
                      "(machine too busy); the drivers followed its clock, so the run only took longer")  # fmt: skip
    console.print(
        f"{verdict}: {target}. Figure: {res.figure}. Times: "
        + ", ".join(f"{k} {v:.1f}" for k, v in res.timings.items())
    )
    sys.stdout.flush()
    return 0  # the verdict is printed (and in --json); `make demo` fails only on errors


def _dynamic_demo(args: argparse.Namespace) -> int:
    """`poise demo arm|standing`: the pipeline's commands, each printed, then run in this process; the earlier
    run's outputs in --out replaced only once the new run has made its own. The verdict (`dynamic_verdict`) is
    read from the JSON the identification writes beside its text (`--json-out`, `identification_result`): its
    lines (`verdict_lines`) close the output; with --json the commands' output and those lines go to stderr, the
    verdict's JSON to stdout."""
    import contextlib
    from pathlib import Path

    from formats.errors import DataError
    from poise.cli import main
    from poise.output import json_written
    from poise.workflows.dynamic_demo import (
        DEFAULT_SEED,
        DemoFolder,
        arm_steps,
        dynamic_verdict,
        identification_result,
        run_steps,
        standing_steps,
        verdict_lines,
    )

    given = [f"--{k.replace('_', '-')}" for k, v in args.posture_only.items() if getattr(args, k) != v]
    if given:
        raise DataError(f"{', '.join(given)}: the posture demo's options; `poise demo {args.pipeline}` takes --out, "
                        "--seed, --force and --json and prints each command's output")  # fmt: skip
    out = Path(args.out or f"out/demo_{args.pipeline}")
    seed = DEFAULT_SEED[args.pipeline] if args.seed is None else args.seed
    steps = (arm_steps if args.pipeline == "arm" else standing_steps)(out, seed)
    folder = DemoFolder(out, args.pipeline, args.force, parents=args.out is None)
    folder.check()  # before any work

    def run(argv: list[str]) -> int:
        from poise.cmd_plan_trajectory import DESIGN_FOR

        # its designs' notes speak of the demo's settings, not of the user's own
        demo = DESIGN_FOR.set(f"poise demo {args.pipeline}")
        try:
            with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
                return main(argv)
        finally:
            DESIGN_FOR.reset(demo)

    say = lambda msg: err_console.print(msg, highlight=False, soft_wrap=True)  # noqa: E731
    try:  # begin inside: a Ctrl-C while it moves the earlier outputs aside puts them back
        note = folder.begin()
        if note:
            say(note)
        rc = run_steps(steps, run, say)
        # the identification's result, read before the earlier outputs go: unreadable, the run failed
        verdict = None if rc else dynamic_verdict(args.pipeline, out, identification_result(out))
    except BaseException:
        if folder.rollback():
            say(f"poise demo {args.pipeline}: the earlier run's outputs in {out} are restored")
        raise
    json_written(reset=True)  # the steps' JSON, if any, was theirs: the demo writes its own
    if rc:
        if folder.rollback():
            say(f"poise demo {args.pipeline}: the earlier run's outputs in {out} are restored")
        if args.json:
            print_json({"ok": False, "error": f"poise demo {args.pipeline}: a step failed (exit {rc})"})
        return rc
    folder.commit()
    to = err_console if args.json else console  # --json: for a person reading the commands' output (stderr)
    to.print()
    for k, line in enumerate(verdict_lines(verdict)):
        to.print(line, markup=False, highlight=False, soft_wrap=True, style="bold" if k == 0 else None)
    if args.json:
        print_json(verdict)
    sys.stdout.flush()
    return 0  # the verdict is printed; `make demo` fails only on errors


def _relocated(res, out, to):
    """`res` with its paths in `out` moved to `to` (a stopped run's outputs, `DemoFolder.keep_stopped`)."""
    from pathlib import Path

    def moved(p):
        if p is None or not Path(p).is_relative_to(out):
            return p
        return to / Path(p).relative_to(out)

    return dataclasses.replace(res, plan_path=moved(res.plan_path), run_dir=moved(res.run_dir),
                               figure=moved(res.figure))  # fmt: skip


def _print_twin_events(events: list[dict] | None) -> None:
    """What the physics twin saw during the run, by posture and phase."""
    seen = [e for e in events or [] if "phase" in e]
    if seen:
        console.print(
            "the twin saw: "
            + "; ".join(f"{e['kind']} in posture {e['posture']}'s {e['phase']} ({e['detail']})" for e in seen)
        )
