"""`poise identify ft-pwm`: inertial, friction and PWM-gain parameters from an F/T sensor and motor PWMs in one
regression (spec icub-pls.md), Table II validation and T² contact detection; `--simulate` runs it on the twin."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from rich.table import Table

from formats.errors import DataError
from poise import argtypes as at
from poise.output import console, err_console, print_json, rel_se_text


def register_identify(s: argparse._SubParsersAction) -> None:
    f = s.add_parser(
        "ft-pwm", help="inertial + friction + PWM gains from F/T and PWM (PLS), T² contact detection"
    )
    f.add_argument("recording", nargs="?", help="F/T + PWM recording (CSV, see README); or --simulate")
    f.add_argument(
        "--validate",
        action="append",
        default=[],
        metavar="FILE",
        help="validation recording (repeatable): Table II, and T² against its contact column if any",
    )
    f.add_argument(
        "--simulate",
        action="store_true",
        help="synthetic experiment on the MuJoCo twin: identification, validation and contact runs",
    )
    f.add_argument("--robot", default="icub-right-arm", help="robot for --simulate (default icub-right-arm)")
    f.add_argument("--sensor", default="r_arm_ft_sensor", help="F/T site for --simulate")
    f.add_argument(
        "--duration", type=at.number(1.0, 3600.0), default=300.0, help="--simulate run length, s (300)"
    )
    f.add_argument("--seed", type=at.integer(0), default=0, help="--simulate seed (truth and motions)")
    f.add_argument(
        "--noise",
        default="0.3,0.02,0.2",
        help="--simulate sensor noise σ: FORCE_N,MOMENT_NM,PWM (default 0.3,0.02,0.2)",
    )
    f.add_argument("--save-dir", type=at.out_dir, help="write the simulated recordings into this folder")
    f.add_argument(
        "--description", type=at.text_file, help="description file with [[actuation]] (default: built-in)"
    )
    f.add_argument("--method", choices=["pls", "ols", "ridge", "iv"], default="pls", help="estimator (pls)")
    f.add_argument("--components", type=at.integer(1), help="PLS latent variables ν (default: by CV)")
    f.add_argument("--cv", type=at.integer(2, 50), default=5, help="cross-validation folds (5)")
    f.add_argument(
        "--weights",
        default="auto",
        help="row weights 'auto' (1/σ per row) or FORCE,MOMENT,JOINT (per N, per N·m, per N·m of torque)",
    )
    f.add_argument(
        "--alpha", type=at.number(0.0, 1.0, lo_open=True, hi_open=True), default=0.99, help="T² level"
    )
    f.add_argument(
        "--covariance",
        choices=["diag", "full"],
        default="diag",
        help="T² error covariance: diag (the paper's Λ) or full (correlated axes)",
    )
    f.add_argument(
        "--cutoff-hz", type=at.number(0.0, lo_open=True), default=5.0, help="zero-phase low-pass (5 Hz)"
    )
    f.add_argument(
        "--differentiation",
        choices=["butterworth", "adaptive"],
        default="butterworth",
        help="velocities/accelerations: zero-phase low-pass or the paper's adaptive windowing",
    )
    f.add_argument("--json", action="store_true", help="print the result as JSON")
    f.add_argument(
        "--plot", type=at.image_file, help="predicted vs measured wrench and the ROC (PNG/PDF/SVG)"
    )
    at.add_force(f)
    f.set_defaults(func=cmd_identify_ft_pwm)


def _weights(text: str):
    from identify.ft_pwm import RowWeights

    if text == "auto":
        return "auto"
    try:
        force, moment, joint = (float(x) for x in text.split(","))
    except ValueError:
        raise DataError(
            f"--weights must be 'auto' or three numbers FORCE,MOMENT,JOINT, got {text!r}"
        ) from None
    return RowWeights(force, moment, joint)


def _noise(text: str):
    from drivers.emulators.mujoco_ft_arm import FtPwmNoise

    try:
        force, moment, pwm = (float(x) for x in text.split(","))
    except ValueError:
        raise DataError(f"--noise must be three numbers FORCE_N,MOMENT_NM,PWM, got {text!r}") from None
    if not all(np.isfinite(v) and v >= 0 for v in (force, moment, pwm)):
        raise DataError(f"--noise values must be finite and ≥ 0, got {text!r}")
    return FtPwmNoise(force, moment, pwm)


def _check_options(args: argparse.Namespace) -> None:
    """Refuse contradictory options before reading or simulating anything."""
    if args.simulate == bool(args.recording):
        raise DataError("give a recording or --simulate (not both)")
    if args.simulate and args.validate:
        raise DataError("--simulate makes its own validation runs; drop --validate")
    if args.plot and not (args.simulate or args.validate):
        raise DataError("--plot needs validation data (--validate FILE or --simulate)")
    if args.components is not None and args.method != "pls":
        raise DataError(
            f"--components sets PLS's ν; --method {args.method} has none: drop it or use --method pls"
        )
    if args.save_dir and not args.simulate:
        raise DataError("--save-dir keeps the simulated recordings: it needs --simulate")


def _save_paths(args: argparse.Namespace) -> list[Path]:
    """The recordings --save-dir will write, every name checked (exists without --force) before any work."""
    if not args.save_dir:
        return []
    paths = [Path(args.save_dir) / f"{n}.csv" for n in ("identification", "validation", "contacts")]
    taken = [str(p) for p in paths if p.exists() and not args.force]
    if taken:
        raise DataError(f"{', '.join(taken)}: file(s) exist (use --force to overwrite them)")
    return paths


def cmd_identify_ft_pwm(args: argparse.Namespace) -> int:
    from formats.ft_pwm_recording import read_ft_pwm_recording, write_ft_pwm_recording
    from identify.ft_pwm import FtPwmEstimator, check_angles
    from identify.ft_pwm_report import validate
    from robots.actuation import transmissions
    from robots.registry import get_model

    t0 = time.perf_counter()
    weights = _weights(args.weights)
    _check_options(args)
    saves = _save_paths(args)
    truth = None
    if args.simulate:
        from identify.ft_pwm_sim import synthetic_runs

        model = get_model(args.robot)
        groups = transmissions(model, args.description)
        model.site(args.sensor)
        with err_console.status("simulating on the MuJoCo twin …"):
            runs = synthetic_runs(
                model, groups, args.sensor, args.duration, args.seed, noise=_noise(args.noise)
            )
        rec, vrecs = runs[0].recording, [r.recording for r in runs[1:]]
        truth = (runs[0].truth, runs[0].extra)
        if saves:
            Path(args.save_dir).mkdir(parents=True, exist_ok=True)
            for p, r in zip(saves, (rec, *vrecs), strict=True):
                write_ft_pwm_recording(r, p)
        source = f"twin ({args.duration:g} s runs, seed {args.seed})"
    else:
        rec = read_ft_pwm_recording(args.recording)
        vrecs = [read_ft_pwm_recording(v) for v in args.validate]  # all inputs read before the work
        model = get_model(rec.robot)
        for path, r in zip([args.recording, *args.validate], [rec, *vrecs], strict=True):
            check_angles(model, r, path)
        own = rec.robot if rec.robot.endswith(".toml") else None  # a robot given by its description file
        groups = transmissions(model, args.description or own)
        source = args.recording
    est = FtPwmEstimator(
        model,
        rec.sensor,
        groups,
        method=args.method,
        n_components=args.components,
        cv=args.cv,
        weights=weights,
        cutoff_hz=args.cutoff_hz,
        differentiation=args.differentiation,
    )
    if not args.simulate:  # each file named when it is too short, before the fit
        for path, r in zip([args.recording, *args.validate], [rec, *vrecs], strict=True):
            est.check_length(r, path)
    with err_console.status("fitting …"):
        est.fit(rec)
        val = validate(est, rec, vrecs, args.alpha, covariance=args.covariance) if vrecs else None
    fit = est.fit_
    out = fit.to_dict() | {"robot": model.name, "sensor": rec.sensor, "recording": source}
    if truth is not None:
        tv = est.true_values(*truth)
        z = (fit.values - tv) / fit.se
        out["truth"] = {
            "values": tv.tolist(),
            "z": z.tolist(),
            "within_3se": int(np.sum(np.abs(z) < 3)),
            "max_abs_z": float(np.max(np.abs(z))),
        }
    if val is not None:
        out["validation"] = val.to_dict()
    out["run_time_s"] = time.perf_counter() - t0
    for w in fit.warnings:
        err_console.print(f"warning: {w}")
    if args.plot:
        _plot(val, args.plot)
    if args.json:
        print_json(out)
        return 0
    _print(est, out, source)
    return 0


def _kappa_scope(weights) -> str:
    """What the two κ move with: the parameters' units only the raw one; the row weights both (column scaling
    leaves the rows as weighted)."""
    rows = ("1/σ of each row's least-squares residuals (--weights auto): they move with how well each row fits"
            if weights == "auto" else "--weights FORCE,MOMENT,JOINT per N, N·m and N·m of torque")  # fmt: skip
    return f"the parameters' units count in raw κ only; both move with the row weights, {rows}"


def _print(est, out: dict, source: str) -> None:
    fit = est.fit_
    truth = out.get("truth")
    table = Table(title=f"{est.model.name}: F/T + PWM parameters from {source} ({fit.samples} samples)")
    cols = ["parameter", "grouping / meaning", "unit", "estimate", "SE", "rel. SE %"] + (
        ["truth", "z"] if truth else []
    )
    for c in cols:
        table.add_column(c, justify="left" if c in ("parameter", "grouping / meaning", "unit") else "right")
    for k, (s, f) in enumerate(zip(fit.symbols, fit.formulas, strict=True)):
        row = [s, f, fit.units[k], f"{fit.values[k]:.5g}", f"{fit.se[k]:.2g}", rel_se_text(fit.rel_se_pct[k])]
        if truth:
            row += [f"{truth['values'][k]:.5g}", f"{truth['z'][k]:+.1f}"]
        table.add_row(*row)
    console.print(table)
    console.print("units: a combination's is its first term's; k per PWM unit on the motor side")
    if fit.contact_samples:
        console.print(f"{fit.contact_samples} samples marked contact=1 (or near one) left out of the fit")
    nu = f", ν = {fit.n_components} of rank {fit.rank} (CV)" if fit.n_components else f", rank {fit.rank}"
    console.print(f"method {fit.method}{nu}; κ(row-weighted regressor) = {fit.kappa:.0f} raw, "
                  f"{fit.kappa_scaled:.1f} column-scaled ({_kappa_scope(est.weights)})")  # fmt: skip
    if len(fit.q2):
        console.print("Q²(ν): " + " ".join(f"{q:.4f}" for q in fit.q2))
    console.print(
        "CV PRESS: " + ", ".join(f"{m.name} {m.press:.7g}" for m in fit.comparison if np.isfinite(m.press))
    )
    if truth:
        console.print(
            f"within 3 SE of the truth: {truth['within_3se']}/{fit.rank} (max |z| {truth['max_abs_z']:.2f})"
        )
    v = out.get("validation")
    if v:
        e, c = v["table_ii"]["estimated"], v["table_ii"]["cad"]
        console.print(
            f"Table II (F/T prediction error, mean / std): estimated F {e['force_error_n']['mean']:.3f} / "
            f"{e['force_error_n']['std']:.3f} N, τ {e['moment_error_nm']['mean']:.4f} / "
            f"{e['moment_error_nm']['std']:.4f} N·m; CAD F {c['force_error_n']['mean']:.3f} / "
            f"{c['force_error_n']['std']:.3f} N, τ {c['moment_error_nm']['mean']:.4f} / "
            f"{c['moment_error_nm']['std']:.4f} N·m"
        )
        console.print(
            "validation error by method (F mean N / τ mean N·m): "
            + ", ".join(
                f"{n} {t['force_error_n']['mean']:.3f} / {t['moment_error_nm']['mean']:.4f}"
                for n, t in v["methods"].items()
            )
        )
        d = v["detection"]
        tpr = "n/a (no contacts)" if d["tpr"] is None else f"{100 * d['tpr']:.1f} %"
        auc = f", ROC AUC {d['roc']['auc']:.3f}" if d["roc"] else ""
        console.print(
            f"T² contact detection at α = {d['alpha']}: threshold {d['threshold']:.2f}, "
            f"FPR {100 * d['fpr']:.2f} % ({d['free_samples']} contact-free samples), TPR {tpr}{auc}"
        )
    err_console.print(f"run time {out['run_time_s']:.1f} s")


def _plot(val, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from formats.atomic import save_figure
    from identify.ft_pwm import WRENCH_ROWS

    fig = plt.figure(figsize=(13, 9))
    grid = fig.add_gridspec(6, 2, width_ratios=[2.2, 1])
    x = np.arange(len(val.measured))
    for k, name in enumerate(WRENCH_ROWS):
        ax = fig.add_subplot(grid[k, 0])
        ax.plot(x, val.measured[:, k], lw=0.6, label="measured")
        ax.plot(x, val.predicted[:, k], lw=0.6, ls="--", label="predicted")
        if val.contact.any():
            ax.fill_between(x, 0, 1, where=val.contact, transform=ax.get_xaxis_transform(), alpha=0.15,
                            color="red", lw=0, label="contact")  # fmt: skip
        ax.set_ylabel(f"{name} [{'N' if k < 3 else 'N·m'}]", fontsize=8)
        ax.grid(alpha=0.3)
        if k == 0:
            ax.legend(fontsize=7, loc="upper right", ncol=3)
    ax.set_xlabel("validation sample")
    ax = fig.add_subplot(grid[:, 1])
    d = val.detection
    if d.roc is not None:
        ax.plot(d.roc.fpr, d.roc.tpr, "o-", ms=3)
        ax.plot([d.fpr], [d.tpr], "r*", ms=12, label=f"α = {d.alpha}")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no contacts in the validation data", ha="center", transform=ax.transAxes)
    ax.plot([0, 1], [0, 1], "k:", lw=0.8)
    ax.set_xlabel("false-positive rate")
    ax.set_ylabel("true-positive rate")
    ax.set_title("T² contact detection (ROC over α)", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out)


__all__ = ["register_identify"]
