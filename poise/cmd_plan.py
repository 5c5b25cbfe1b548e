"""`poise plan postures|check|show`: design balance-constrained static postures, verify and draw plans."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from formats.errors import DataError
from poise import argtypes as at
from poise.output import console, draws_progress, err_console, mm, print_json, vanish_on_error
from robots.stance_spec import default_base, other_base, stance_spec
from robots.tree import RobotModel


def robot_ref(name: str) -> str:
    """How other processes reload a robot: a built-in name as given, a file as its absolute path."""
    from robots.registry import is_named

    return name if is_named(name) else str(Path(name).resolve())


def plan_model(plan) -> RobotModel:
    """The robot a plan was designed for: its `robot_file` if it names one, else the built-in robot."""
    from robots.registry import get_model

    if plan.robot_file:
        return get_model(plan.robot_file)
    return get_model(plan.robot)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="design, check and draw posture and trajectory plans")
    s = p.add_subparsers(dest="plan_cmd", metavar="SUBCOMMAND")
    s.required = True

    d = s.add_parser(
        "postures", help="optimal static postures under a balance margin (min κ of the CoP regressor)"
    )
    d.add_argument(
        "robot", help="robot: a built-in name (e.g. tulip), a robot description (*.poise.toml) or a URDF file"
    )
    d.add_argument("--problem", choices=["free-com", "centred-com"], default="free-com")
    d.add_argument("--postures", type=at.count, default=50, help="number of postures (default 50)")
    d.add_argument("--placements", type=at.count, default=10, help="number of foot placements (default 10)")
    d.add_argument(
        "--margin",
        type=at.nonnegative,
        default=0.08,
        help="CoP stability margin d_s in m (free-com; default 0.08)",
    )
    d.add_argument("--feet-gap", type=at.nonnegative, default=None,
                   help="minimum distance between the feet in m (default: the robot description's [stance] "
                        "feet_gap, else 0.002)")  # fmt: skip
    d.add_argument("--load-share", type=at.number(0.0, 0.5, hi_open=True), default=0.0,
                   help="each sole carries at least this share of the weight by the lever rule (0 = off; 0.25 keeps "
                        "a lightly loaded sole from lifting or sliding on a robot with stiff position servos)")  # fmt: skip
    d.add_argument("--starts", type=at.count, default=1, help="random initial sets, optimised in parallel")
    d.add_argument(
        "--sharpness",
        type=at.increasing_numbers,
        default=None,
        metavar="P1,P2,...",
        help="continuation of the κ surrogate’s sharpness p, increasing (default: 8,64 for free-com, 4,16,64 "
        "for centred-com)",
    )
    where = d.add_mutually_exclusive_group()  # local worker processes, or a cluster's workers
    where.add_argument(
        "--workers", type=at.count, default=None, help="worker processes (default: min(starts, CPUs))"
    )
    d.add_argument("--seed", type=at.seed, default=1)
    d.add_argument("--backend", choices=["casadi", "pyomo"], default="casadi")
    where.add_argument(
        "--scheduler",
        type=at.scheduler_address,
        default=None,
        help="Dask scheduler address: run the starts on that cluster",
    )
    d.add_argument(
        "--uncertainty",
        default="0",
        metavar="R|RESULT.json",
        help="keep the margin for every ϑ_b within this radius (m) of the guess, or over the confidence "
        "ellipsoid of a static identification result (its estimate becomes the CoP guess); default 0",
    )
    d.add_argument(
        "--uncertainty-sigma",
        type=at.positive,
        default=None,
        metavar="K",
        help="ellipsoid size in standard deviations for --uncertainty RESULT.json (default 3)",
    )
    d.add_argument("--move-s", type=at.nonnegative, default=30.0, help="move duration per posture (s)")
    d.add_argument("--hold-s", type=at.positive, default=60.0, help="hold duration per posture (s, > 0)")
    d.add_argument("--no-transitions", action="store_true", help="omit closed-chain transitions")
    d.add_argument("--json", action="store_true", help="print a machine-readable summary")
    d.add_argument("--out", type=at.out_file, required=True, help="plan file to write (JSON)")
    at.add_force(d)
    d.set_defaults(func=cmd_postures)

    a = s.add_parser(
        "augment", help="add the feasible postures that lower κ most (greedy), each on its own placement"
    )
    a.add_argument("plan", help="plan file (JSON)")
    a.add_argument("--add", type=at.count, required=True, help="number of postures to add")
    a.add_argument(
        "--pool",
        type=at.count,
        default=60,
        help="random candidate postures that pass the plan's check, robust margin included (default 60)",
    )
    a.add_argument("--seed", type=at.seed, default=1)
    a.add_argument("--json", action="store_true", help="print a machine-readable summary")
    a.add_argument("--out", type=at.out_file, required=True, help="plan file to write (JSON)")
    at.add_force(a)
    a.set_defaults(func=cmd_augment)

    from poise import cmd_plan_doggy, cmd_plan_reach, cmd_plan_trajectory

    cmd_plan_trajectory.register(s)
    cmd_plan_reach.register(s)
    cmd_plan_doggy.register(s)

    c = s.add_parser("check", help="verify a plan with shapely: limits, feet, margins, transitions, κ")
    c.add_argument("plan", help="plan file (JSON)")
    c.add_argument("--params", default=None, help="parameters for the CoP: sim|mc|FILE (default: the plan's)")
    c.add_argument("--twin", action="store_true",
                   help="posture plans: also stand every posture on the MuJoCo physics twin (simulated time) and "
                        "report falls, soles on an edge, lifting, slipping")  # fmt: skip
    at.add_twin_truth(c, "--twin: ")
    c.add_argument("--placement-error", type=at.pair_of_nonnegative, default=(0.0, 0.0), metavar="MM,DEG",
                   help="--twin: σ of the boards' placement error, mm and degrees (default 0,0)")  # fmt: skip
    c.add_argument("--config", type=at.text_file,
                   help="robot TOML: a posture plan is held to its executor.min_margin where that exceeds the "
                        "plan's; --twin: board offsets, servo gain; a trajectory plan: the run's pre-flight "
                        "of its setpoints at the executor's rate (a single-support plan's weight shifts are planned "
                        "with its rate, velocity limit and min_margin; default: bundled)")  # fmt: skip
    at.add_gravity_comp(c, "--twin: ")
    c.add_argument("--margin", type=at.nonnegative, default=None,
                   help="posture plans: required CoP margin in m, at least the plan's own (default: the plan's settings; "
                        "a plan without settings, e.g. written by hand, requires 0)")  # fmt: skip
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_check)

    v = s.add_parser("show", help="draw a plan: feet, support polygons, margins, CoPs, stick figures")
    v.add_argument("plan", help="plan file (JSON)")
    v.add_argument("--out", type=at.image_file, required=True, help="figure file (PNG/PDF/SVG)")
    at.add_force(v)
    v.set_defaults(func=cmd_show)


ELLIPSOID_SIGMA = 3.0  # --uncertainty-sigma's default: the ellipsoid's size in standard deviations


def _uncertainty(arg: str, model, sigma: float | None):
    """--uncertainty: a radius in m (float) or the path of a static identification result (ellipsoid, `sigma`
    standard deviations in size; a radius has none, so a sigma with it is refused rather than ignored)."""
    from design.uncertainty import load_ellipsoid

    try:
        radius = float(arg)
    except ValueError:
        return 0.0, load_ellipsoid(arg, model, default_base(model), sigma or ELLIPSOID_SIGMA)
    if not radius >= 0 or radius == float("inf"):
        raise DataError(f"--uncertainty must be a radius ≥ 0 (m) or a result file, got {arg!r}")
    if sigma is not None:
        raise DataError(
            f"--uncertainty-sigma sizes the ellipsoid of --uncertainty RESULT.json; --uncertainty {arg} is a "
            "radius in m (the ball's size itself): drop --uncertainty-sigma"
        )
    return radius, None


def _settings(args, model):
    from design.criteria import min_postures, n_identifiable
    from design.problems import Settings

    need = min_postures(model)
    if args.postures < need:
        raise DataError(
            f"--postures must be at least {need} for {model.name!r} "
            f"({n_identifiable(model)} identifiable parameters, 2 equations per posture)"
        )
    radius, ellipsoid = _uncertainty(args.uncertainty, model, args.uncertainty_sigma)
    if args.problem == "free-com":
        _margin_fits(model, args.margin, args.feet_gap)
    extra = {} if args.sharpness is None else {"sharpness": args.sharpness}
    return Settings(
        problem=args.problem,
        margin=args.margin,
        feet_gap=args.feet_gap,
        load_share=args.load_share,
        uncertainty=radius,
        ellipsoid=ellipsoid,
        **extra,
    )


PLACEMENT_PROBES = 256  # placements drawn to bound the CoP margin any placement of the feet allows
# the probes' widest can only fall short of the box's: a margin up to this much beyond it is left to the sampler
PROBE_SLACK = 1.1


def widest_margin(model, feet_gap: float | None) -> float:
    """Largest CoP margin (m) a support polygon allows: the radius of its largest inscribed circle, at the widest
    of PLACEMENT_PROBES placements drawn as the sampler draws them (fixed seed)."""
    import numpy as np
    import shapely

    from design.geometry import support_polygon
    from design.sampler import sample_placement

    rng, base = np.random.default_rng(0), default_base(model)
    polys = [support_polygon(model, sample_placement(model, rng, False, base, feet_gap), base)
             for _ in range(PLACEMENT_PROBES)]  # fmt: skip
    return max(shapely.maximum_inscribed_circle(p).length for p in polys)


def _margin_fits(model, margin: float, feet_gap: float | None) -> None:
    """Refuse a --margin no placement of the feet leaves room for, before any start samples placements."""
    widest = widest_margin(model, feet_gap)
    if margin >= PROBE_SLACK * widest:
        raise DataError(
            f"--margin {margin:g} m: no placement of the feet keeps the CoP that far inside the support polygon "
            f"(the widest of {PLACEMENT_PROBES} placements in the [stance] box allows {mm(widest, 1)} mm); "
            "use a smaller --margin"
        )


def cmd_postures(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from design.planner import build_plan, design, placements_can_identify
    from design.replicates import find_replicates
    from design.verify import KAPPA_RTOL, plan_default_path_issues, plan_kappa_issues
    from formats.plan import save_plan
    from robots.registry import get_model, is_named

    model = get_model(args.robot)
    stance_spec(model)  # a malformed [stance] fails here, not in a worker
    ref = robot_ref(args.robot)
    s = _settings(args, model)
    if args.postures % args.placements:
        raise DataError(
            f"--postures ({args.postures}) must be a multiple of --placements ({args.placements})"
        )
    t0 = time.perf_counter()
    progress = Progress(
        TextColumn("[bold]starts"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[best]}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=False,
        disable=not draws_progress(),
    )
    with vanish_on_error(progress):
        task = progress.add_task("starts", total=args.starts, best="best κ —")

        def on_result(k, res, best):
            shown = f"best κ {_start_kappa(model, best, s)} (start {k}: {_start_kappa(model, res, s)})"
            progress.update(task, advance=1, best=shown)

        best, summary = design(
            model,
            s,
            args.postures,
            args.placements,
            args.starts,
            args.seed,
            backend=args.backend,
            scheduler=args.scheduler,
            workers=args.workers,
            on_result=on_result,
            robot=ref,
        )
    solver = {
        "backend": args.backend,
        "best_start": best.stats.get("start"),
        "starts": summary,
        "stages": best.stats.get("stages", []),
        "iterations": best.stats.get("iterations"),
        "wall_s": time.perf_counter() - t0,
        "kappa_initial": best.kappa_initial,
    }
    plan = build_plan(
        model,
        best.postures,
        s,
        seed=args.seed,
        move_s=args.move_s,
        hold_s=args.hold_s,
        solver=solver,
        transitions=not args.no_transitions,
        extra_settings={
            "postures": args.postures,
            "placements": args.placements,
            "starts": args.starts,
            "backend": args.backend,
        },
        robot_file=None if is_named(ref) else ref,
    )
    save_plan(plan, args.out)
    reps = find_replicates(plan.postures)
    # the design's own postures by `plan check`'s rank decision: a start that ended with postures the CoP equations
    # cannot tell apart (κ ~1e17) is written, for `plan augment`, but is no success
    ks, gaps = plan_kappa_issues(model, plan, KAPPA_RTOL)  # κ None where the rank is short: not identifiable
    # moves without a transition: the run's path, as `plan check` checks it
    paths = plan_default_path_issues(model, plan)
    short_bases = [b for b, k in ks.items() if k is None]  # the bases whose rank is short
    short = gaps[0] if short_bases and gaps else None  # plan_kappa_issues reports a rank gap alone
    anywhere = (
        None
        if short is None
        else placements_can_identify(model, s, args.placements, args.seed, bases=short_bases)
    )
    if args.json:
        print_json(
            {
                "out": args.out,
                "kappa": ks,
                "min_margin_m": min(p.margin for p in plan.postures),
                "starts": summary,
                "wall_s": solver["wall_s"],
                "unidentified": gaps,
                "default_paths": paths,
                **({} if anywhere is None else {"placements_identify_all": anywhere[0] is None}),
                **reps.to_dict(),
            }
        )
        return 1 if gaps else 0
    table = Table(title=f"{args.problem}: {args.postures} postures in {args.placements} placements")
    other = other_base(model, plan.base)
    for col in ("start", "initial κ", "optimised κ", f"{other}-base κ", "IPOPT status", "stages kept",
                "sample (s)", "solve (s)"):  # fmt: skip
        table.add_column(col, justify="right")
    for r in summary:
        true_k = r.get("true_kappa", {})
        table.add_row(
            str(r["start"]),
            _row_kappa(r["kappa_initial"], true_k.get("initial")),
            _row_kappa(r["kappa"], true_k.get("kept")),
            kappa_text(r["kappa_other"]),
            ", ".join(r.get("ipopt_status", [])),
            f"{r.get('stages_kept', 0)} of {r.get('stages', 0)}",
            f"{r['sample_s']:.1f}",
            f"{r['wall_s']:.1f}",
        )
    console.print(table)
    margins = [p.margin for p in plan.postures]
    console.print(
        f"best κ {kappa_text(ks.get(plan.base))} ({plan.base} base), {kappa_text(ks.get(other))} ({other} base); "
        f"min CoP margin {mm(min(margins), 1)} mm; wrote {args.out}"
    )
    console.print(reps.describe())
    for r in summary:
        note = _feasibility_note(r)
        if note:
            err_console.print(f"poise: {note}")
    unoptimised = _unoptimised(best)
    if unoptimised:
        err_console.print(f"poise: {unoptimised}")
    for gap in gaps:
        hint = _identify_hint(anywhere, args.placements) if gap is short else ""
        err_console.print(f"poise: the design fails `plan check`: {gap}{hint}")
    for msg in paths:  # asked for no transitions: the plan is what was asked, but say what the run will do
        err_console.print(f"poise: warning: {escape(msg)} — `plan check` fails this move and `poise run` lifts the "
                          "robot there; drop --no-transitions to plan it on the ground")  # fmt: skip
    return 1 if gaps else 0


def _row_kappa(k: float | None, true_k: float | None) -> str:
    """A per-start κ cell: the rank decision's κ, or "not identifiable" with the true κ beside it, so a start whose
    κ rose by orders still shows by how much."""
    if k is not None or true_k is None:
        return kappa_text(k)
    return f"not identifiable (κ {true_k:.2g})"


def _feasibility_note(row: dict) -> str:
    """Why a start kept a point of higher κ than its sample: the sample broke a constraint (named, by how much),
    and a plan must meet its constraints first ("" when the sample was feasible)."""
    broken = row.get("start_broken")
    if not broken:
        return ""
    text = f"start {row['start']}: the sampled postures break {broken['constraint']} by {broken['violation']:.3g} {broken['unit']}"
    if not row.get("stages_kept"):
        return f"{text}, and no IPOPT stage met the constraints: its postures break them"
    text += ", so a feasible IPOPT point replaced them"
    if not row.get("kappa_worse"):
        return text
    true_k = row.get("true_kappa", {})
    kept = _true_kappa_text(true_k.get("kept"), row.get("kappa"))
    initial = _true_kappa_text(true_k.get("initial"), row.get("kappa_initial"))
    return f"{text} although its κ {kept} is worse than the sample's κ {initial} (feasibility first)"


def _true_kappa_text(true_k: float | None, ranked: float | None) -> str:
    """The true κ in a sentence, marked "(rank-short)" where `plan check` calls it not identifiable."""
    if true_k is None:
        return "∞"
    return f"{true_k:.2g}" + (" (rank-short)" if ranked is None else "")


def _start_kappa(model, res, s) -> str:
    """A start's κ as the per-start table shows it ("not identifiable" when the rank is short)."""
    from design.verify import base_kappa

    return kappa_text(base_kappa(model, res.postures.q, s.resolved(model).base)[0])


def _unoptimised(best) -> str:
    """A line saying the best start's postures are the sampled ones when IPOPT kept no stage ("" otherwise)."""
    out = best.stats.get("outcome", {})
    if not out.get("stages") or out.get("stages_kept"):
        return ""
    return (f"start {best.stats.get('start')}: no IPOPT stage was kept (IPOPT ended {', '.join(out['ipopt_status'])}): "
            "its postures are the sampled ones, not optimised")  # fmt: skip


def _identify_hint(anywhere, placements: int) -> str:
    """Whether more starts can help a design that cannot identify every parameter, from a random sample of valid
    postures on as many placements (`placements_can_identify`)."""
    gap, n = anywhere
    if gap is None:
        return f"; {n} random valid postures on {placements} placements identify every parameter: more --starts may avoid it"
    return (f"; {n} random valid postures on {placements} placements reach only rank {gap.rank} of {gap.n} "
            f"({gap.base} base) too: more "
            "--starts cannot help, use more --placements")  # fmt: skip


def cmd_check(args: argparse.Namespace) -> int:
    from design.verify import check_plan
    from drivers.config import load_config
    from formats.plan import load_plan
    from formats.trajectory_plan import is_trajectory_plan, plan_document

    twin_options = [flag for flag, given in (("--truth", args.truth is not None),
                                             ("--placement-error", tuple(args.placement_error) != (0.0, 0.0)),
                                             ("--gravity-comp", args.gravity_comp))  if given]  # fmt: skip
    if is_trajectory_plan(args.plan):
        from poise.cmd_plan_trajectory import cmd_check_trajectory

        if args.margin is not None:
            raise DataError(f"--margin sets a posture plan's required CoP margin; {args.plan} is a trajectory plan "
                            "(its margin is in the plan): drop --margin")  # fmt: skip
        if args.twin or twin_options:
            raise DataError(f"{(['--twin'] if args.twin else twin_options)[0]} stands a posture plan's postures on "
                            f"the twin; {args.plan} is a trajectory plan: run it there (poise run --robot sim)")  # fmt: skip
        return cmd_check_trajectory(args.plan, args.params, args.json, args.config)
    if twin_options and not args.twin:
        raise DataError(f"{twin_options[0]} applies with --twin only: add --twin or drop it")

    plan_document(args.plan, "plan check", ("posture", "trajectory"))  # a file of another kind named as one
    plan = load_plan(args.plan)
    model = plan_model(plan)
    config = load_config(args.config)
    if args.config is not None:  # the bundled configuration only lends its rate and velocity limit
        config.require_robot(plan.robot)
    plan, source = _required_margin(plan, args.margin)
    if args.config is not None:
        plan, source = _config_margin(plan, source, config)
    ex = config.executor  # the run's default paths are built at its rate and velocity limit
    report = check_plan(model, plan, args.params, executor=(ex.velocity_limit, ex.rate_hz))
    twin = _stand_on_twin(args, model, plan) if args.twin else None
    twin_ok = twin is None or all(r.stands for r in twin)
    if args.json:
        out = {**report.to_dict(), "required_margin_from": source}
        if twin is not None:
            out["twin"] = [r.summary() for r in twin]
        print_json(out)
        return 0 if report.ok and twin_ok else 1
    table = Table(
        title=f"{args.plan}: CoP from {report.cop_from}, required margin {mm(report.required_margin, 1)} mm "
        f"({_margin_source_text(source)})"
    )
    for col in ("posture", "placement", "repeat of", "margin (mm)", "feet gap (mm)", "status"):
        table.add_column(col, justify="right")
    repeats = report.replicates.repeats
    for pc, p in zip(report.postures, plan.postures, strict=True):
        table.add_row(
            str(pc.index),
            str(p.placement),
            str(repeats[pc.index][0]) if pc.index in repeats else "",
            mm(pc.margin, 1),
            mm(pc.feet_gap, 1),
            "ok" if not pc.issues else "[red]" + escape("; ".join(pc.issues)),
        )
    console.print(table)
    if source.startswith(MARGIN_DEFAULT):
        console.print(
            f"[yellow]{source.removeprefix(MARGIN_DEFAULT).split(',')[0]}:[/yellow] required CoP margin 0 mm (the "
            "CoP only has to stay inside the support polygon); give --margin M (m) to require more"
        )
    console.print("κ recomputed: " + ", ".join(f"{b} base {kappa_text(k)}" for b, k in report.kappa.items()))
    skipped = report.default_paths_skipped
    console.print(
        f"transitions checked: {len(plan.transitions)}; moves without one (the run's default path) checked: "
        f"{report.default_paths}"
        + (f", {skipped} not checked (a posture of theirs fails)" if skipped else "")
    )
    console.print(report.replicates.describe())
    if twin is not None:
        _print_twin(twin, args)
    if report.ok and twin_ok:
        console.print("[green]plan OK")
        return 0
    for msg in report.problems():  # escaped: a message's "[stance]" is no markup tag
        console.print(f"[red]FAIL[/red] {escape(msg)}")
    return 1


MARGIN_DEFAULT = "none: "  # where the requirement comes from when the plan states none (`_no_margin`)


def _no_margin(plan) -> str:
    """Why the plan requires no margin: no settings at all (written by hand), or settings without one."""
    said = "no required margin in the plan's settings" if plan.settings else "no settings in the plan"
    return f"{MARGIN_DEFAULT}{said}, 0 required"


def _required_margin(plan, margin: float | None):
    """The plan with --margin as its required CoP margin (m) if given, and where the requirement comes from:
    "--margin", "settings" or `_no_margin` (a plan without one, e.g. written by hand, requires 0). A
    --margin below the plan's own is refused: `poise run` holds the plan to its own, so a looser check lies."""
    from dataclasses import replace

    from formats.plan import plan_required_margin

    own = plan_required_margin(plan)
    if margin is None:
        stated = "required_margin" in plan.settings or "margin" in plan.settings
        return plan, "settings" if stated else _no_margin(plan)
    if margin < own:
        raise DataError(f"--margin {margin * 1000:g} mm is below the plan's own {own * 1000:g} mm, which `poise run` "
                        "requires: drop --margin or give at least that")  # fmt: skip
    return replace(plan, settings={**plan.settings, "required_margin": margin}), "--margin"


def _config_margin(plan, source: str, config):
    """The required margin raised to the config's `executor.min_margin` where that is larger: `poise run` with
    this config requires the larger of the two, so the check holds the plan to what the run will."""
    from dataclasses import replace

    from formats.plan import plan_required_margin

    need = float(config.executor.min_margin)
    if need <= plan_required_margin(plan):
        return plan, source
    tightened = replace(plan, settings={**plan.settings, "required_margin": need})
    return tightened, f"{config.source}: executor.min_margin"


def _margin_source_text(source: str) -> str:
    """Where the required margin comes from, for the table's title."""
    if source.startswith(MARGIN_DEFAULT):
        return "the plan states none"
    return {"settings": "the plan's settings", "--margin": "--margin"}.get(source, source)


def kappa_text(k: float | None) -> str:
    """κ for people: an infinite (or absent) κ means the postures cannot identify every parameter."""
    return f"{k:.1f}" if k is not None and math.isfinite(k) else "not identifiable"


def _stand_on_twin(args: argparse.Namespace, model, plan):
    """`plan check --twin`: every posture stood on the physics twin (drivers/emulators/standing.py)."""
    from rich.progress import Progress

    from drivers.config import load_config
    from drivers.emulators.sim_robot import twin_truth
    from drivers.emulators.standing import stand_each

    truth = twin_truth(model, args.truth)
    config = load_config(args.config)
    mm_, deg = args.placement_error
    with Progress(console=err_console, disable=not draws_progress(), transient=True) as bar:
        task = bar.add_task("standing each posture on the physics twin", total=len(plan.postures))
        return stand_each(model, plan, config, truth, args.gravity_comp, (mm_ / 1000, math.radians(deg)),
                          progress=lambda _: bar.advance(task))  # fmt: skip


def _print_twin(results, args: argparse.Namespace) -> None:
    table = Table(title=f"physics twin (truth {args.truth or 'simulated robot'}): each posture stood for 4 s")
    for col in ("posture", "events", "base tilt (deg)", "slide (mm)", "hold error (deg)", "CoP − CoM (mm)",
                "status"):  # fmt: skip
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(str(r.posture), ", ".join(r.kinds) or "—", f"{r.base_tilt_deg:.2f}", f"{r.slide_mm:.1f}",
                      f"{r.hold_error_deg:.2f}", f"{r.cop_vs_com_mm:.1f}", "stands" if r.stands else "[red]fails")  # fmt: skip
    console.print(table)
    console.print(f"{sum(r.stands for r in results)}/{len(results)} postures stand on the twin")


def cmd_show(args: argparse.Namespace) -> int:
    from design.plot import plot_plan
    from formats.plan import load_plan
    from formats.trajectory_plan import is_trajectory_plan, plan_document

    if is_trajectory_plan(args.plan):
        from poise.cmd_plan_trajectory import cmd_show_trajectory

        return cmd_show_trajectory(args.plan, args.out)

    from design.verify import check_plan
    from poise.cmd_plan_trajectory import warn_fails_check

    plan_document(args.plan, "plan show", ("posture", "trajectory"))  # a file of another kind named as one
    plan = load_plan(args.plan)
    model = plan_model(plan)
    # as `plan check` finds them: a figure never hides a failing plan
    problems = check_plan(model, plan).problems()
    plot_plan(model, plan, args.out)
    console.print(f"wrote {args.out}")
    warn_fails_check(args.plan, problems, "drawn as it is")
    return 0


def cmd_augment(args: argparse.Namespace) -> int:
    from design.augment import augment_plan, check_additions
    from formats.plan import load_plan, save_plan
    from formats.trajectory_plan import plan_document

    # a trajectory plan is refused too: augment adds postures
    plan_document(args.plan, "plan augment", ("posture",))
    plan = load_plan(args.plan)
    model = plan_model(plan)
    plan = load_plan(args.plan, model)
    check_additions(model, plan, args.add, args.pool)  # cheap, before the plan's whole check
    _augmentable(model, plan, args.plan)
    with err_console.status(f"sampling {args.pool} verified postures, adding {args.add} greedily"):
        res = augment_plan(model, plan, args.add, args.pool, args.seed)
    save_plan(res.plan, args.out)
    added = [{"index": p.index, "margin_m": p.margin, "robust_margin_m": p.robust_margin}
             for p in res.plan.postures[len(plan.postures):]]  # fmt: skip
    summary = {"out": args.out, "kappa_before": res.kappa_before, "kappa_after_each": res.kappa_after,
               "kappa": res.plan.kappa, "postures": len(res.plan.postures), "pool": res.pool,
               "draws": res.draws, "added": added}  # fmt: skip
    if args.json:
        print_json(summary)
        return 0
    robust = [a["robust_margin_m"] for a in added if a["robust_margin_m"] is not None]
    worst = f", worst-case margin ≥ {mm(min(robust), 1)} mm" if robust else ""
    console.print(
        f"κ {kappa_text(res.kappa_before)} → {kappa_text(res.kappa_after[-1])} with {args.add} added postures "
        f"(from a pool of {res.pool}, {res.draws} drawn{worst}); {len(res.plan.postures)} postures; "
        f"wrote {args.out}"
    )
    return 0


def _augmentable(model, plan, path: str) -> None:
    """Refuse to top up a plan `plan check` rejects for its postures, placements or transitions: the new plan
    would keep them. A plan that cannot identify every parameter is fine (augmenting is how to mend it)."""
    from design.verify import check_plan

    with err_console.status(f"checking {path} as `plan check` does"):  # default paths: the bundled config's
        bad = check_plan(model, plan).feasibility_problems()
    if bad:
        more = (
            f" (and {len(bad) - 1} more problem(s): `poise plan check {path}` lists them)"
            if len(bad) > 1
            else ""
        )
        raise DataError(
            f"{path}: {bad[0]}{more}; augmenting keeps every posture of the plan: design it again"
        )
