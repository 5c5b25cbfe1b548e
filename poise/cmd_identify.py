"""`poise identify static`: CoM base parameters from a static recording."""

from __future__ import annotations

import argparse

import numpy as np
from rich.table import Table

from formats.atomic import write_text_atomic
from formats.static_recording import read_meta, read_recording
from poise import argtypes as at
from poise.output import console, dumps, err_console, mm, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("identify", help="estimate parameters from recordings")
    s = p.add_subparsers(dest="identify_cmd", metavar="SUBCOMMAND")
    s.required = True
    st = s.add_parser("static", help="CoM base parameters from static postures and CoPs")
    st.add_argument("recording", help="static recording (CSV, see README)")
    st.add_argument(
        "--model", default="full", choices=["full", "simplified"], help="CoM model (default full)"
    )
    st.add_argument("--reference", default=None, help="compare with a parameter set: sim|mc|FILE")
    st.add_argument("--guess", default="sim", help="values for parameters CoP cannot identify: sim|mc|FILE")
    st.add_argument(
        "--weighted", action="store_true", help="weighted LS with the recording's CoP standard deviations"
    )
    st.add_argument("--json", action="store_true", help="print the result as JSON (metres)")
    st.add_argument("--out", type=at.out_file, help="write the result file (JSON) here")
    st.add_argument("--plot", type=at.image_file, help="write a CoP residual figure (PNG) here")
    at.add_force(st)
    st.set_defaults(func=cmd_static)

    from poise import cmd_dynamic

    cmd_dynamic.register_identify(s)

    from poise import cmd_ft_pwm

    cmd_ft_pwm.register_identify(s)


def static_model(path: str):
    """The robot a static recording names, found as dynamic recordings find theirs (`# robot_source:`, else a
    built-in or packaged name), checked to stand on two soles."""
    from identify.recording_model import model_of
    from identify.static import require_soles

    meta = read_meta(path)
    model = model_of(meta["robot"], meta, path)
    require_soles(model, f"{path}: ")
    return model


UNCALIBRATED_NOTE = (
    "the recording read boards without per-cell gains (its run.json): a cell's gain error biases the CoPs, and so "
    "the estimates, beyond these SEs (`poise boards calibrate`, `poise run --board-gains`)"
)


def uncalibrated_boards(recording: str) -> bool:
    """Whether the run.json beside a recording says its boards ran without per-cell gains, as `identify dynamic`
    reads it (`cmd_dynamic.run_of`); False without a run.json."""
    from poise.cmd_dynamic import run_of

    run = run_of(recording)
    return not isinstance(run, Exception) and run.uncalibrated


def run_static(args: argparse.Namespace):
    from identify.static import StaticCoMEstimator
    from robots.params_io import resolve_params

    model = static_model(args.recording)
    rec = read_recording(args.recording, model.joint_names, bases=model.bases)
    guess = resolve_params(args.guess, model)
    ref = resolve_params(args.reference, model) if args.reference else None
    est = StaticCoMEstimator(model, rec.base, args.model, guess=guess, reference=ref, weighted=args.weighted)
    est.fit(rec, source=args.recording)
    return rec, model, est


def cmd_static(args: argparse.Namespace) -> int:
    from identify.static import fit_to_json

    rec, model, est = run_static(args)
    fit, bm = est.result_, est.base_model_
    result = fit_to_json(fit, bm, recording=str(args.recording))
    if uncalibrated_boards(args.recording):
        result["uncalibrated_boards"] = True
    if args.out:
        write_text_atomic(args.out, dumps(result) + "\n", "result")
    if args.plot:
        from identify.plots import plot_cop_fit

        ref_res = None
        if fit.reference:
            ref_res = rec.cop - est.predict_cop(rec.q, fit.reference["theta"])
        plot_cop_fit(fit.residuals, rec.placement, args.plot, ref_res, fit.reference.get("name", ""),
                     f"{model.name}, {fit.model_variant} model, {rec.base}-foot base", posture_ids=rec.posture)  # fmt: skip
    for w in fit.warnings:  # before the table: what follows is a fit of data to doubt
        err_console.print(f"[bold yellow]warning:[/] {w}")
    if result.get("uncalibrated_boards"):
        err_console.print(f"[yellow]note:[/yellow] {UNCALIBRATED_NOTE}", highlight=False)
    if args.json:
        print_json(result)
        return 0
    print_fit(
        fit,
        bm,
        title=f"{model.name}: {fit.model_variant} CoM model from {len(rec)} postures ({rec.base}-foot base)",
    )
    if args.out:
        console.print(f"result written to {args.out}")
    return 0


def fixed_text(fit, bm) -> str:
    """Each fixed parameter with its value (mm) and where it comes from (the guess set, or the model's zero)."""
    parts = []
    for g in range(bm.n):
        if g not in fit.estimated:
            why = fit.fixed_reason.get(g, "")
            src = f"guess '{fit.guess_name}'" if "not identifiable" in why else why
            parts.append(f"{bm.params[g].symbol} = {mm(fit.theta[g], 2)} mm ({src})")
    return ", ".join(parts)


def print_fit(fit, bm, title: str, truth: np.ndarray | None = None) -> None:
    """The Table 4.6-style report: estimates, standard errors, relative SE, reference (and truth)."""
    table = Table(title=title)
    for col, just in (("ϑ", "left"), ("column", "left"), ("estimate \\[mm]", "right"), ("std. err. \\[mm]", "right"),
                      ("rel. SE \\[%]", "right"), ("", "left")):  # fmt: skip
        table.add_column(col, justify=just, no_wrap=True)
    if fit.reference:
        table.add_column(f"{fit.reference['name']} \\[mm]", justify="right", no_wrap=True)
    if truth is not None:
        table.add_column("truth \\[mm]", justify="right", no_wrap=True)
        table.add_column("|err|/SE", justify="right", no_wrap=True)
    for g in fit.estimated:
        rel = fit.rel_se_pct[g]
        row = [bm.params[g].symbol, bm.params[g].column, mm(fit.theta[g], 2), mm(fit.se[g], 2),
               f"{rel:.1f}" if np.isfinite(rel) else "—", "" if fit.well_identified[g] else "> 15 %"]  # fmt: skip
        if fit.reference:
            row.append(mm(fit.reference["theta"][g], 2))
        if truth is not None:
            row += [mm(truth[g], 2), f"{abs(fit.theta[g] - truth[g]) / fit.se[g]:.2f}"]
        table.add_row(*row)
    console.print(table)
    console.print(f"fixed (not estimated): {fixed_text(fit, bm)}")
    console.print(
        f"σ̂ = {fit.sigma * 1000:.2f} mm (dof {fit.dof}"
        + (
            f"; weighted, the residuals are {fit.sigma_scale:.3g}× the averaged CoPs' SD, cop_sd/√samples"
            if fit.weighted
            else ""
        )
        + f"), κ(H) = {fit.kappa:.1f}; CoP residual norm per posture: "
        f"mean {fit.residual_norm_mean * 1000:.2f} mm, max {fit.residual_norm_max * 1000:.2f} mm "
        f"(posture {fit.worst_posture})"
    )
    if fit.reference:
        r = fit.reference
        console.print(
            f"with parameter set '{r['name']}': CoP error mean {r['cop_error_mean'] * 1000:.2f} mm, "
            f"max {r['cop_error_max'] * 1000:.2f} mm"
        )
    if fit.top_correlations:
        pairs = ", ".join(f"ρ({a},{b}) = {rho:+.4f}" for a, b, rho in fit.top_correlations[:3])
        console.print(f"most correlated: {pairs}")
