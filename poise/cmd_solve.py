"""`poise solve doggy`: batch calibration of the Doggy robot (all states + parameters, SLOM-style LM)."""

from __future__ import annotations

import argparse
import math
import pathlib
import time

import numpy as np
from rich.markup import escape
from rich.table import Table

from formats.atomic import write_text_atomic
from formats.doggy_plan import DURATION_S, load_doggy_plan
from formats.doggy_recording import read_csv, write_csv
from formats.errors import DataError
from poise import argtypes as at
from poise.output import console, draws_progress, dumps, err_console, print_json

# Whitened χ²/dof of a block beyond which the model misses the data far beyond its noise: a good fit is ≈ 1 (a
# simulated 20 s run: measurement 0.65, bias 0.99, dynamics 0.026, initial 0.0014); encoder angles logged in
# degrees gave 5e4. 100 leaves two orders of magnitude of room for real data's unmodelled effects.
CHI2_WARN = 100.0
# Open-loop verification θ̇ RMSE over what noise and the fit explain (`identify.doggy_verify.explained_rmse`: the
# larger of the batch fit's own θ̇ residual and the encoder noise of the measured θ̇) beyond which the identified
# model does not reproduce the recorded motion. A correct model stays at ≈ 1 (simulated 10 s and 60 s runs: 1.1
# on every axis: the open-loop θ̇ is as close to the measurement as the fit's free states are); a stuck encoder
# gave 35–550. Positions drift open loop by design and the gyros carry unmodelled bearing rocking (20× their noise
# on good data), so only θ̇ is judged; 10 leaves an order of magnitude for real data's unmodelled effects.
VERIFY_WARN = 10.0
DEG_PER_RAD = 180.0 / math.pi
HELP_SECTION = "README, 'Doggy calibration' → 'Recording format (CSV)'"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="batch least-squares calibrations (states and parameters together)")
    s = p.add_subparsers(dest="solve_cmd", metavar="SUBCOMMAND")
    s.required = True
    d = s.add_parser("doggy", help="calibrate the Doggy flexible-joint model from encoders and gyros")
    src = d.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="REC", help=f"recording CSV (see the {HELP_SECTION})")
    lo, hi = DURATION_S
    src.add_argument(
        "--simulate",
        metavar="SECONDS",
        type=at.number(lo, hi, lo_open=True),
        help="simulate the experiment from Table 1",
    )
    d.add_argument("--seed", type=at.seed, default=None, help="with --simulate: simulation seed (default 0)")
    d.add_argument(
        "--plan", type=at.text_file, help="with --simulate: run this excitation plan (poise plan doggy)"
    )
    d.add_argument("--out", type=at.out_file, help="result JSON path (needed unless --json)")
    at.add_force(d)
    d.add_argument(
        "--plot",
        metavar="DIR",
        type=_figure_dir,
        help="directory for the verification figures doggy_verification_N.png (existing ones only with --force, "
        "which also removes an earlier run's extra ones)",
    )
    d.add_argument(
        "--save-recording",
        metavar="CSV",
        type=at.out_file,
        help="with --simulate: also write the simulated recording",
    )
    d.add_argument(
        "--max-iter", type=at.count, default=60, help="Levenberg–Marquardt iteration limit (default 60)"
    )
    d.add_argument(
        "--method", choices=["lm", "gn"], default="lm", help="lm (default) or undamped Gauss–Newton"
    )
    d.add_argument("--friction-on", choices=["link", "motor"], default="link", help="velocity in eq 12")
    d.add_argument(
        "--paper-gyro2",
        action="store_true",
        help="feed the raw gyro-1 reading into the gyro-2 prediction (eq 26 as printed)",
    )
    d.add_argument(
        "--no-bias-block",
        action="store_true",
        help="drop F_bias (not with --paper-gyro2: the horizontal gyro-1 bias is then unobservable)",
    )
    d.add_argument("--json", action="store_true", help="print the result JSON to stdout instead of tables")
    d.set_defaults(func=cmd_doggy)


def _figure_dir(text: str) -> str:
    """--plot DIR: a directory (the figures are doggy_verification_N.png in it); a path ending in an image suffix
    is refused rather than made a directory of that name."""
    path = pathlib.Path(text)
    if not path.is_dir() and path.suffix.lower() in at._image_suffixes():
        hint = "figs/" if str(path.parent) == "." else f"{path.parent}/"
        raise argparse.ArgumentTypeError(
            f"{text!r} is a figure file name, but --plot takes a directory (doggy_verification_N.png are written "
            f"into it): give a directory such as {hint!r}"
        )
    return at.out_dir(text)


def _fmt(v, digits=4) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.{digits}g}"


def _check_options(args: argparse.Namespace) -> None:
    """Refuse option combinations that would be ignored or cannot determine the parameters, before any work."""
    if args.data:
        for opt, value, why in (
            ("--save-recording", args.save_recording, "writes a simulated recording"),
            ("--plan", args.plan, "is the plan a simulation runs"),
            ("--seed", args.seed, "seeds the simulation"),
        ):
            if value is not None:
                raise DataError(f"{opt} {why}: not with --data")
    if args.out is None and not args.json:
        raise DataError(
            "--out FILE is needed for the result file (or --json to print the result on stdout): the tables alone "
            "omit the rotations, rank report and iteration log"
        )
    if args.paper_gyro2 and args.no_bias_block:
        raise DataError(
            "--no-bias-block conflicts with --paper-gyro2: with eq 26 as printed only the bias block determines "
            "the horizontal gyro-1 bias (bias1); drop --no-bias-block"
        )


def _simulated(args: argparse.Namespace):
    """The simulated recording (--simulate, optionally --plan), its true parameters and a source label."""
    from identify.doggy_sim import SimConfig, simulate

    seed = 0 if args.seed is None else args.seed
    if args.plan:
        from robots import doggy

        plan = load_doggy_plan(args.plan, setpoint_range=doggy.robot().setpoint_range)
        if abs(plan.duration - args.simulate) > 1e-9:
            raise DataError(f"--plan lasts {plan.duration:g} s, --simulate asks for {args.simulate:g} s")
    else:
        from trajectories.doggy_excitation import make_plan

        plan = make_plan(args.simulate, seed)
    sim = simulate(SimConfig(duration=args.simulate, seed=seed, rate=plan.rate), plan)
    return sim.recording, sim.params, f"simulated {args.simulate:g} s, seed {seed}"


def _check_figures(args: argparse.Namespace, windows: int) -> None:
    """--plot DIR's figure files that exist need --force, as every output file does (checked before solving)."""
    from identify.doggy_verify import figure_paths, stale_figures

    if not args.plot or args.force:
        return
    existing = [p for p in figure_paths(args.plot, windows) if p.exists()]
    if existing:
        raise DataError(f"--plot {args.plot}: {existing[0]} exists (use --force to overwrite it)")
    stale = stale_figures(args.plot, windows)
    if stale:
        raise DataError(
            f"--plot {args.plot}: {stale[0]} exists, from an earlier run this one would not overwrite (use --force "
            "to replace that run's doggy_verification_*.png)"
        )


def _calibrate(rec, opts, solver, quiet: bool):
    """Run the calibration with a live status line on a terminal's stderr."""
    from identify import doggy as dg
    from identify import slom

    t0 = time.perf_counter()
    status = (
        None if quiet else err_console.status(f"solving {rec.n} samples, {4 * dg.NJ * rec.n + 24} unknowns …")
    )

    stage = ""

    def on_stage(name: str) -> None:
        nonlocal stage
        stage = name

    def progress(e: slom.IterationLog) -> None:
        if status is not None:
            status.update(
                f"{stage}: iter {e.iteration}: cost {e.cost:.6g}, step {e.step_norm:.3g}, λ {e.lam:.2g}, "
                f"{time.perf_counter() - t0:.1f} s"
            )

    if status is not None:
        status.start()
    try:
        return dg.calibrate(rec, dg.start_guess(rec), opts, solver, progress, on_stage=on_stage)
    finally:
        if status is not None:
            status.stop()


def _nonpositive_note(report: dict) -> str | None:
    """Estimates of parameters that must be > 0 (`identify.doggy.must_be_positive`) that came out ≤ 0."""
    rows = report.get("parameters") or []
    if not rows:
        return None
    from identify.doggy import must_be_positive

    positive = set(must_be_positive())
    bad = [r for r in rows if r["name"] in positive and not r["estimate"] > 0]  # NaN is no positive value
    if not bad:
        return None
    shown = ", ".join(f"{r['name']} {r['estimate']:.4g} {r['unit']}" for r in bad)
    return (
        f"physically impossible estimate(s) ≤ 0: {shown} (inertia, gains, friction, stiffness and damping must be "
        "> 0): the model does not explain this recording — check for a stuck or swapped channel, the command's "
        "sign (a negative k_pwm) and the units"
    )


def _verification_note(report: dict) -> str | None:
    """The open-loop θ̇ far above what noise and the fit explain (VERIFY_WARN)."""
    got = (report.get("verification_rmse") or {}).get("theta_dot")
    floor = (report.get("verification_explained_rmse") or {}).get("theta_dot")
    if not got or not floor:
        return None
    far = [(j, g, f) for j, (g, f) in enumerate(zip(got, floor, strict=True)) if not g <= VERIFY_WARN * f]
    if not far:
        return None
    shown = "; ".join(f"axis {j + 1} {g:.3g} rad/s, {g / f:.3g}× the {f:.2g} rad/s" for j, g, f in far)
    return (
        f"the open-loop verification misses the recorded motion (θ̇ RMSE {shown} that noise and the fit explain; "
        f"warned above {VERIFY_WARN:g}×): the identified model does not reproduce the data — check for a stuck or "
        "swapped channel, the command's sign and the units"
    )


def fit_warnings(report: dict) -> list[str]:
    """What a user must not miss in a finished fit: the solver stopped early, a block's whitened χ²/dof is far
    above 1 (the model misses the data far beyond its noise, e.g. angles logged in degrees), a parameter that must
    be positive came out ≤ 0, or the open-loop verification is far off what noise and the fit explain."""
    from identify import doggy as dg

    notes = []
    weak = report.get("weakly_determined") or []
    if not report["converged"]:
        reason = report["reason"]
        if reason.startswith("maximum iterations"):  # stopped by the limit while the cost still fell
            more = "more --max-iter" + (
                " (the weakly determined parameters below may keep it from settling)"
                if weak
                else ", or check the data"
            )
        elif reason.startswith("stalled"):
            more = "the cost is flat along them: more --max-iter will not help" if weak else "check the data"
        elif reason.startswith("damping diverged"):
            more = "no step lowers the cost: check the data (units, columns)"
        else:
            more = "more --max-iter, or check the data"
        notes.append(
            f"the solver stopped without converging ({report['reason']}) after {report['iterations']} "
            f"iteration(s): the estimates are no fit and their 1σ are not given; {more}"
        )
    if weak:
        notes.append(
            f"weakly determined by this data: {', '.join(weak)} (1σ beyond the estimate, over "
            f"{np.degrees(dg.WEAK_ANGLE_SIGMA):.3g}° per rotation axis or {dg.WEAK_BIAS_SIGMAS:g} of the gyro noise per "
            "bias, or in a combination the data barely constrain with a 1σ large for the parameter — over 10 % of "
            f"the estimate, 0.1° per rotation axis; condition number "
            f"{report['rank'].get('condition', float('nan')):.3g}): their "
            f"estimates are not to be trusted; add {report.get('weak_hint') or 'more excitation'}"
        )
    from identify.doggy import MIN_REST_SAMPLES

    window = report.get("bias_window_samples", MIN_REST_SAMPLES)
    if window == 0:
        notes.append(
            "no zero-command window at the start: the gyro biases come from the motion alone, which fixes them "
            "only weakly (and R1/R2 with them); record the robot at rest (u = 0) for about a second first"
        )
    elif window < MIN_REST_SAMPLES:
        notes.append(
            f"the zero-command window at the start holds only {window} sample(s), fewer than the {MIN_REST_SAMPLES} "
            "whose gyro means the bias start needs: the gyro biases started at 0 and rest on these few samples and "
            "the motion; record the robot at rest (u = 0) for about a second first"
        )
    high = [  # a non-finite one (a diverged block) is beyond any bound
        f"{b['name']} {b['chi2_per_dof']:.3g}"
        for b in report["residuals"]
        if b.get("chi2_per_dof") is not None and not b["chi2_per_dof"] <= CHI2_WARN
    ]
    if high:
        notes.append(
            f"the model misses the data far beyond its noise (whitened χ²/dof {', '.join(high)}; a fit gives "
            f"≈ 1, warned above {CHI2_WARN:g}): check the recording's units (angles in rad, gyros in rad/s) "
            "and columns"
        )
    notes += [n for n in (_nonpositive_note(report), _verification_note(report)) if n]
    return notes


def _rest_seconds(rec, m: int) -> float:
    """Length (s) of the leading zero-command window of `m` samples: up to the first commanded sample."""
    return float(rec.t[min(m, rec.n - 1)] - rec.t[0])


def _report(args, rec, cal, ver, rows, source: str, opts, wall_s: float) -> dict:
    """The result document (`--out`, `--json`): SI units, verification RMSE with its units."""
    from identify import doggy as dg
    from identify.doggy_verify import SIGNALS

    res = cal.result
    return {
        "source": source,
        "samples": rec.n,
        "unknowns": 4 * dg.NJ * rec.n + 24,
        "bias_window_samples": cal.bias_window,
        "options": {
            "friction_on": opts.friction_on,
            "debias_gyro1": opts.debias_gyro1,
            "bias_block": opts.bias_block,
            "method": args.method,
        },
        "converged": res.converged,
        "reason": res.reason,
        "iterations": res.iterations,
        "start": dg.start_source(rec),
        "weakly_determined": cal.weak,
        "weak_hint": dg.weak_hint(cal.weak, _rest_seconds(rec, cal.bias_window)) if cal.weak else None,
        "variance_factors": res.variance_factors,
        "redundancy": res.redundancy,
        "sigma_note": (
            "1σ from the information matrix at the estimate, the dynamics block's weight divided by its variance "
            "factor (variance_factors: its χ² over its redundancy — the residual count less what the states and "
            "parameters absorb, redundancy); sensor parameters' (biases, R1, R2) 1σ exclude unmodelled motion such as "
            "the bearings' rocking, and understate their error by about 2× on simulated data"
        ),
        "initial_cost": res.initial_cost,
        "cost": res.cost,
        "wall_s": wall_s,
        "parameters": rows,
        "rotations": {"R_imu1": cal.estimate.R_imu1.tolist(), "R_imu2": cal.estimate.R_imu2.tolist()},
        "rank": {
            "rank": res.rank.rank,
            "size": res.rank.size,
            "null_directions": res.rank.null_directions,
            "weak_directions": res.rank.weak_directions,
            "condition": res.rank.condition,
        },
        "residuals": [vars(s) for s in res.stats],
        "verification_rmse": ver.rmse,
        "verification_rmse_units": dict(SIGNALS),
        "verification_explained_rmse": ver.explained,
        "iteration_log": [vars(e) for e in res.log],
        "iteration_log_note": (
            "one entry per trial step (rejected ones share the iteration number); step_norm is the step's norm in "
            "Jacobi-scaled tangent coordinates (each component times √ of its normal-matrix diagonal): "
            "dimensionless"
        ),
    }


def cmd_doggy(args: argparse.Namespace) -> int:
    from identify import doggy as dg
    from identify import slom
    from identify.doggy_verify import figure_windows, plot, verify

    _check_options(args)
    truth = None
    if args.data:
        rec, source = read_csv(args.data), str(args.data)
        dg.check_recording(rec, source)
        windows = figure_windows(rec.t)
        _check_figures(args, windows)
    else:  # the figures checked before an experiment is simulated, its recording written after
        windows = figure_windows(np.array([0.0, args.simulate]))
        _check_figures(args, windows)
        rec, truth, source = _simulated(args)
        if args.save_recording:
            write_csv(rec, args.save_recording)
    opts = dg.ModelOptions(
        friction_on=args.friction_on, debias_gyro1=not args.paper_gyro2, bias_block=not args.no_bias_block
    )
    t0 = time.perf_counter()
    cal = _calibrate(
        rec, opts, slom.Options(method=args.method, max_iter=args.max_iter), not draws_progress()
    )
    ver = verify(rec, cal.estimate, cal.states[0], opts.friction_on, opts.debias_gyro1, cal.states)
    rows = dg.parameter_rows(cal, truth, angle_unit="rad")
    if not cal.result.converged:  # σ of no fit: kept apart, not shown as the estimate's uncertainty
        for r in rows:
            r["sigma_at_stop"] = r["sigma"]
            r["sigma"] = float("nan")
            r.pop("error_sigmas", None)
    report = _report(args, rec, cal, ver, rows, source, opts, time.perf_counter() - t0)
    if args.plot:
        report["figures"] = [str(p) for p in plot(ver, args.plot, windows=windows)]
    report["warnings"] = fit_warnings(report)  # NaN stays NaN in memory; `dumps` writes it as null
    if args.out:
        write_text_atomic(args.out, dumps(report) + "\n", "result")
    if args.json:
        print_json(report)
    else:
        _print_tables(report, truth is not None)
    for note in report["warnings"]:
        err_console.print(f"[yellow]warning:[/yellow] {escape(note)}", highlight=False, soft_wrap=True)
    if not report["converged"]:
        where = f"{escape(str(args.out))} is written" if args.out else "the result is printed"
        err_console.print(f"{where}, but holds no converged fit", soft_wrap=True)
        return 1
    return 0


def _shown_row(r: dict) -> dict:
    """A parameter row as the table shows it: gyro biases (rad/s in the result) in deg/s, as Table 1 prints, and
    the rotations' angles from nominal (rad in the result) in deg."""
    shown_unit = {"rad/s": "deg/s", "rad": "deg"}.get(r["unit"])
    if shown_unit is None:
        return r
    keys = [k for k in ("initial", "estimate", "sigma", "truth", "error") if k in r]
    scaled = {k: (None if r[k] is None else r[k] * DEG_PER_RAD) for k in keys}
    return r | scaled | {"unit": shown_unit}


def _print_tables(rep: dict, simulated: bool) -> None:
    t = Table(
        title=f"Doggy calibration — {rep['source']} ({rep['samples']} samples, {rep['unknowns']} unknowns)"
    )
    cols = ["parameter", "unit", "initial", "estimate", "1σ"] + (
        ["truth", "error", "|error|/σ"] if simulated else []
    )
    for c in cols:
        t.add_column(c, justify="left" if c in ("parameter", "unit") else "right")
    for r in map(_shown_row, rep["parameters"]):
        row = [r["name"], r["unit"], _fmt(r["initial"], 5), _fmt(r["estimate"], 5), _fmt(r["sigma"], 2)]
        if simulated:
            row += [_fmt(r.get("truth"), 5), _fmt(r.get("error"), 2), _fmt(r.get("error_sigmas"), 2)]
        t.add_row(*row)
    console.print(t)
    if simulated:
        console.print(
            "error = estimate − truth; for R1 and R2 the angle of R_estᵀ R_true, which the two angles from nominal "
            "do not give"
        )
    console.print(
        f"{rep['reason']} after {rep['iterations']} iterations, cost {rep['initial_cost']:.4g} → "
        f"{rep['cost']:.4g}, {rep['wall_s']:.1f} s wall"
    )
    console.print(f"start: {rep['start']}", soft_wrap=True)
    if not rep["converged"]:
        console.print("not converged: 1σ left blank (the result file keeps them as sigma_at_stop)")
        it = Table(title="iterations (step: Jacobi-scaled norm, dimensionless; rejected trials marked)")
        for c in ("iteration", "cost [1]", "λ [1]", "step [1]", "accepted", "elapsed [s]"):
            it.add_column(c, justify="right")
        for e in rep["iteration_log"]:
            it.add_row(
                str(e["iteration"]),
                _fmt(e["cost"], 7),
                _fmt(e["lam"], 2),
                _fmt(e["step_norm"], 3),
                "yes" if e["accepted"] else "no",
                _fmt(e["elapsed"], 3),
            )
        console.print(it)
    r = Table(title="open-loop verification RMSE (from the first estimated state)")
    for c in ("signal", "unit", "axis 1 / x", "axis 2 / y", "axis 3 / z"):
        r.add_column(c, justify="right")
    for k, v in rep["verification_rmse"].items():
        r.add_row(k, rep["verification_rmse_units"][k], *(_fmt(x, 3) for x in v))
    console.print(r)
    s = Table(title="residual blocks (whitened χ²/dof ≈ 1 when Σ fits)")
    for c in ("block", "count", "dim", "cost [1]", "χ²/dof [1]"):
        s.add_column(c, justify="right")
    for b in rep["residuals"]:
        s.add_row(b["name"], str(b["count"]), str(b["dim"]), _fmt(b["cost"]), _fmt(b["chi2_per_dof"], 3))
    console.print(s)
