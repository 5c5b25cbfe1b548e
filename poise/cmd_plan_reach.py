"""`poise plan reach`: which base parameters a motion class can determine at all, each in a run designed for it."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from formats.errors import DataError
from poise import argtypes as at
from poise.output import console, draws_progress, err_console, print_json, vanish_on_error


def register(s: argparse._SubParsersAction) -> None:
    r = s.add_parser(
        "reach",
        help="each base parameter's relative SE in one run designed for it alone (and in one for all): what the "
        "motion class can determine under a noise level, and what it cannot",
    )
    r.add_argument("robot", help="robot model name or URDF / .poise.toml file")
    r.add_argument(
        "--noise", type=at.positive, nargs="+", required=True, metavar="SIGMA",
        help="white noise σ on each recorded sample: standing Fz [N], Mx, My [N·m] (or one for all); arms one per "
        "joint or one for all [N·m]",
    )  # fmt: skip
    r.add_argument("--only", type=at.base_parameter, nargs="+", metavar="ϑN",
                   help="these base parameters (default: every one)")  # fmt: skip
    from poise.cmd_plan_trajectory import add_design_arguments

    add_design_arguments(r, "a fixed-base arm, the default for a robot with one base; a standing robot, one with "
                         "soles, needs its class given: --motion, --double-support or --single-support")  # fmt: skip
    r.add_argument("--well", type=at.number(0.0, 100.0, lo_open=True), default=15.0, metavar="PCT",
                   help="relative SE [%%] in (0, 100] a parameter must reach to count as determined (default 15)")  # fmt: skip
    r.add_argument("--practical-s", type=at.positive, metavar="S",
                   help="longest recording worth making [s] (default 600, or the plans' length if longer)")  # fmt: skip
    r.add_argument("--workers", type=at.count, default=None, help="worker processes (default: the CPUs)")
    r.add_argument("--out", type=at.out_dir, metavar="DIR",
                   help="write each design's plan into this folder: all.json (the design for all), ϑN.json")  # fmt: skip
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.add_argument("--plot", type=at.image_file, help="bar chart of the relative SEs (PNG)")
    at.add_force(r)
    # what `plan trajectory`'s settings read and reach fixes: the logvar criterion in raw units, one start each
    r.set_defaults(func=cmd_reach, criterion="logvar", scaling="none", max_kappa=None, starts=1, focus=None,
                   row_noise=None)  # fmt: skip


def cmd_reach(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from poise.cmd_plan_trajectory import _settings
    from poise.workflows.reach import parameter_reach
    from robots.registry import get_model

    model = get_model(args.robot)
    if args.motion is None and not args.double_support and not args.single_support and len(model.bases) >= 2:
        raise DataError(f"plan reach {args.robot}: {model.name!r} stands on soles ({', '.join(model.bases)}): give its "
                        "motion class — --double-support, --single-support, or --motion free to treat it as a "
                        "fixed-base arm (joint torques, --noise in N·m per joint); see poise plan reach --help")  # fmt: skip
    settings = _settings(args)
    if args.params:
        model.parameter_set(args.params)
    if settings.motion != "free" and len(model.bases) < 2:
        raise DataError(f"{model.name!r} describes no two soles: a standing design needs a biped description")
    try:
        check_noise(model, settings.motion, args.noise)
    except DataError as exc:
        raise DataError(f"plan reach --noise: {exc}; see poise plan reach --help") from None
    outputs = plan_files(args.out, args.only, args.force)
    progress = Progress(TextColumn("[bold]designs"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                        TextColumn("{task.fields[last]}"), TimeElapsedColumn(), console=err_console,
                        disable=not draws_progress())  # fmt: skip
    with vanish_on_error(progress):
        task = progress.add_task("designs", total=None, last="")
        reach = parameter_reach(
            args.robot, model, settings, args.noise, args.only, args.seed, args.rate_hz, args.well,
            args.practical_s, args.workers, lambda label: progress.update(task, advance=1, last=label),
            lambda total: progress.update(task, total=total),
        )  # fmt: skip
    out = {"robot": model.name, **reach.to_dict(), "plans": write_plans(reach.plans, outputs)}
    if args.plot:
        import numpy as np

        from identify.plots import forecast_figure, save_figure

        ps = reach.parameters
        units = "N, N·m, N·m" if settings.motion != "free" else "N·m"
        title = (f"{model.name}: the better of a {reach.duration_s:g} s run for each parameter and one for all, "
                 f"noise {' / '.join(f'{v:g}' for v in reach.noise)} ({units}) per sample")  # fmt: skip
        alone = ("designed for it alone", np.array([p.alone_rel_se_pct for p in ps]))
        fig = forecast_figure([p.symbol for p in ps], np.array([p.rel_se_pct for p in ps]),
                              np.array([p.needed_s for p in ps]), reach.duration_s, reach.well_pct,
                              reach.practical_s, title, alone)  # fmt: skip
        save_figure(fig, args.plot, dpi=120)
    if args.json:
        print_json(out)
        return 0
    from rich.table import Table

    units = "N, N·m, N·m" if settings.motion != "free" else "N·m"
    fitted = "" if settings.motion != "free" else "; friction fitted, as identify dynamic does"
    table = Table(title=f"{model.name}: {settings.motion} runs of {reach.duration_s:g} s, noise "
                        f"{' / '.join(f'{v:g}' for v in reach.noise)} ({units}) per sample{fitted}")  # fmt: skip
    for col in ("base parameter", "unit", "guess", "alone: rel. SE [%]", "for all: rel. SE [%]",
                f"to {reach.well_pct:g} % (the better design)"):  # fmt: skip
        table.add_column(col, justify="left" if col.startswith(("base", "unit", "to")) else "right")
    for p in reach.parameters:
        verdict = {"one run": "one run", "repeated": f"repeated: {p.needed_s:.0f} s",
                   "beyond": f"beyond ({p.needed_s:.3g} s)", "infeasible": "its design fails verification",
                   "zero guess": "guess 0: no relative SE"}[p.verdict]  # fmt: skip
        table.add_row(
            p.symbol,
            p.unit,
            f"{p.guess:.4g}",
            _pct(p.alone_rel_se_pct) + ("" if p.alone_verified else " ✗"),
            _pct(p.all_at_once_rel_se_pct) + ("" if reach.all_at_once_verified else " ✗"),
            verdict,
        )
    console.print(table)
    if not reach.all_at_once_verified or not all(p.alone_verified for p in reach.parameters):
        console.print("✗: that design fails verification (plan check): its relative SE is not counted")
    console.print(
        f"by the better design, determined to {reach.well_pct:g} % in one run: {_named(out['one_run'])}; repeated "
        f"within {reach.practical_s:g} s: {_named(out['if_repeated'])}; beyond {reach.practical_s:g} s (this motion "
        f"class cannot determine them at this noise): {_named(out['beyond_practical'])}. The design for all at once "
        f"{_all_verdict(reach)}. Relative SEs are against the guessed values (the 'guess' column): a guess k times "
        "the true size makes them k times too small.",
        highlight=False,
    )
    return 0


def _named(symbols: list[str]) -> str:
    """A count with its parameters named ("2 (ϑ1, ϑ3)"), or "none"."""
    return f"{len(symbols)} ({', '.join(symbols)})" if symbols else "none"


def _all_verdict(reach) -> str:
    """What the summary says of the design for all: what it determines, unless it fails verification."""
    if not reach.all_at_once_verified:
        return "fails verification (not counted)"
    return f"determines in one run: {_named(reach.all_at_once_determined)}"


def check_noise(model, motion: str, noise: list[float]) -> None:
    """The noise before any design, by the forecast's own rule: Fz, Mx, My standing, one per joint for an arm (or
    one for all)."""
    from identify.forecast import WRENCH_NOISE_ROWS, noise_per_row

    noise_per_row(noise, model.joint_names if motion == "free" else WRENCH_NOISE_ROWS)


def plan_files(folder: str | None, only: list[int] | None, force: bool) -> Path | None:
    """--out's folder (made once the designs are done, `write_plans`), refused before any design if it holds plans
    this run would write (with no --only: any ϑN.json) unless --force (a folder argparse's `out_dir` checked);
    None without --out."""
    if folder is None:
        return None
    path = Path(folder)
    names = {"all.json", *(f"ϑ{k + 1}.json" for k in set(only or []))}
    present = path.iterdir() if path.is_dir() else ()
    clash = sorted(p.name for p in present if p.name in names or (not only and _is_parameter_plan(p.name)))
    if clash and not force:
        raise DataError(f"--out {folder}: {', '.join(clash)} exist(s) (use --force to overwrite)")
    return path


def _is_parameter_plan(name: str) -> bool:
    """Whether a file name is a design's plan for one base parameter (ϑN.json)."""
    return name.startswith("ϑ") and name.endswith(".json") and name[1:-5].isdigit()


def write_plans(plans: dict, folder: Path | None) -> dict[str, str]:
    """Each design's plan written as LABEL.json into --out's folder: {label: path} (empty without --out)."""
    if folder is None:
        return {}
    from formats.trajectory_plan import save_trajectory_plan

    folder.mkdir(exist_ok=True)
    written = {}
    for label, plan in plans.items():
        save_trajectory_plan(plan, folder / f"{label}.json")
        written[label] = str(folder / f"{label}.json")
    return written


def _pct(value: float) -> str:
    """A relative SE for the table; "—" where there is none (a guess of 0), as `plan forecast` prints it."""
    return f"{value:.3g}" if math.isfinite(value) else "—"
