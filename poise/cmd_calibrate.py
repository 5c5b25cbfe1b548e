"""`poise calibrate friction|pwm-gain|pwm-plan|accelerometer|encoder-offsets`: joint actuation and inertial
sensor calibration (spec actuation.md). Each takes a recording (formats/calibration_recording.py) or
`--simulate` for a synthetic end-to-end run, prints tables or `--json`, and writes `--out` / `--plot`."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.markup import escape
from rich.table import Table

from formats.atomic import write_text_atomic
from formats.calibration_recording import (
    read_accel,
    read_drive,
    read_offsets,
    write_accel,
    write_drive,
    write_offsets,
)
from formats.errors import DataError
from formats.pwm_plan import load_pwm_plan, recommended, save_pwm_plan, sweeps
from poise import argtypes as at
from poise.output import console, dumps, err_console, named_errors, print_json


def _common(
    p: argparse.ArgumentParser,
    what: str,
    sim_help: str,
    seed_help: str = "with --simulate: its seed (default 0)",
) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("recording", nargs="?", help=f"{what} CSV (see formats/calibration_recording.py)")
    src.add_argument("--simulate", action="store_true", help=sim_help)
    p.add_argument("--seed", type=at.seed, help=seed_help)
    p.add_argument("--save-recording", type=at.out_file, metavar="CSV", help="with --simulate: keep the data")
    p.add_argument("--out", type=at.out_file, metavar="JSON", help="write the result here")
    p.add_argument("--plot", type=at.image_file, help="write a figure here (png, pdf, svg)")
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    at.add_force(p)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="joint friction, PWM gain, accelerometers, encoder offsets")
    s = p.add_subparsers(dest="calibrate_cmd", metavar="SUBCOMMAND")
    s.required = True

    f = s.add_parser("friction", help="Coulomb/viscous/Stribeck friction from a motor-off drive recording")
    _common(f, "drive recording", "simulate a motor-off experiment (link moved by an external agent)")
    f.add_argument(
        "--model",
        choices=["all", "stribeck", "coulomb-viscous", "asymmetric"],
        default="all",
        help="friction model(s) to fit (default all)",
    )
    f.add_argument("--vs", type=at.positive, help="Stribeck velocity [rad/s] (default: searched)")
    f.add_argument(
        "--zero-slope", action="store_true", help="Stribeck: impose σs⁺ − Kc = Kv v_s (flat at 0⁺)"
    )
    f.add_argument("--offset", action="store_true", help="also fit a constant torque τ_s (sensor not zeroed)")
    f.add_argument(
        "--fit-inertia",
        action="store_true",
        help="also fit the inertia the recording's lacks, ΔI [kg·m²] (e.g. a servo's unknown rotor inertia)",
    )
    f.add_argument(
        "--plan",
        help="with --simulate: drive the free link with a PWM plan (JSON, or 'recommended' / 'sweeps') "
        "instead of the motor-off run; K*_pwm and τ_s are then fitted with the friction (model 2.32)",
    )
    _drive_opts(f)
    f.set_defaults(func=cmd_friction)

    g = s.add_parser("pwm-gain", help="PWM-to-torque gain (link in a fixture, or moving with known friction)")
    _common(
        g, "drive recording", "simulate the recommended PWM experiment (and a friction run for --link free)"
    )
    g.add_argument(
        "--link", choices=["fixture", "free"], default="fixture", help="how the child link was held"
    )
    g.add_argument(
        "--friction", type=at.text_file, metavar="JSON", help="friction result (calibrate friction --out)"
    )
    g.add_argument("--plan", type=at.text_file, help="with --simulate: PWM plan JSON (default: recommended)")
    _drive_opts(g)
    g.set_defaults(func=cmd_pwm_gain)

    pp = s.add_parser("pwm-plan", help="write the recommended PWM experiment as a plan a driver can stream")
    pp.add_argument("--out", type=at.out_file, required=True, metavar="JSON", help="plan file to write")
    pp.add_argument(
        "--sweeps", action="store_true", help="amplitude (4–16 %%) and frequency (0.1–0.9 Hz) sweeps"
    )
    pp.add_argument(
        "--link", choices=["fixture", "free"], default="fixture", help="how the child link is held"
    )
    pp.add_argument("--joint", help="joint name recorded in the plan")
    pp.add_argument("--json", action="store_true", help="print the plan")
    at.add_force(pp)
    pp.set_defaults(func=cmd_pwm_plan)

    a = s.add_parser(
        "accelerometer", help="accelerometer offset and gains: ellipsoid and tumble + bounded fit"
    )
    _common(a, "accelerometer recording", "simulate the hip roll/yaw grid and tumble pairs")
    a.add_argument(
        "--bound", type=at.positive, default=0.01, help="centre bound around the tumble offset [m/s²]"
    )
    a.add_argument(
        "--runs", type=at.count, default=1, help="with --simulate: repeat for mean/std (Tables 3.1–3.4)"
    )
    a.set_defaults(func=cmd_accelerometer)

    e = s.add_parser(
        "encoder-offsets", help="joint encoder offsets from link accelerometers (Table 3.5 report)"
    )
    _common(
        e,
        "encoder-offset recording",
        "simulate a slow motion of the robot with accelerometers",
        "seed of the random buckets (and of --simulate), default 0",
    )
    e.add_argument("--robot", help="with --simulate: built-in robot or description (default icub-right-arm)")
    e.add_argument("--sensors", help="comma-separated sensor sites (default: ≥ 1 per 3 joints, chosen)")
    e.add_argument("--bound-deg", type=at.number(0.0, 90.0, lo_open=True), default=20.0, help="offset bound")
    e.add_argument("--buckets", type=at.count, default=5, help="random buckets for the robustness check")
    e.add_argument("--bucket-size", type=at.integer(20), default=200, help="samples per bucket")
    e.add_argument(
        "--smooth-window", type=at.integer(1), default=201, help="Savitzky–Golay window (odd; 1 = off)"
    )
    e.add_argument("--decimate", type=at.count, default=10, help="keep every n-th sample after smoothing")
    e.add_argument(
        "--reference-deg",
        type=_degrees_list,
        metavar="D1,D2,…",
        help="offsets from another calibration (e.g. manual) to compare with, one per joint [deg]",
    )
    e.set_defaults(func=cmd_encoder_offsets)


def _degrees_list(text: str) -> tuple[float, ...]:
    """'0.1,-4,2.5' -> finite angles in degrees within ±90."""
    try:
        vals = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not all(np.isfinite(v) and abs(v) <= 90 for v in vals):
        raise argparse.ArgumentTypeError(f"angles must be finite and within ±90 deg, got {text!r}")
    return vals


DRIVE_DEFAULTS = {"accel_max": 5.0, "speed_min": 0.02, "margin": 5}  # the cut-off: drive_signals.CUTOFF_HZ
DRIVE_FLAGS = {
    "cutoff_hz": "--cutoff-hz",
    "accel_max": "--accel-max",
    "speed_min": "--speed-min",
    "margin": "--margin",
}


def _drive_opts(p: argparse.ArgumentParser) -> None:
    """The moving-link signal options; default None so that one given where it is ignored can be refused."""
    p.add_argument(
        "--inertia", type=at.nonnegative, help="drive inertia at the joint [kg·m²] (else the file's)"
    )
    p.add_argument("--cutoff-hz", type=at.positive, help="differentiation low-pass cut-off (default 12)")
    p.add_argument("--accel-max", type=at.positive, help="reject |ω̇| above this [rad/s²] (default 5)")
    p.add_argument(
        "--speed-min", type=at.nonnegative, help="reject |ω| at or below this [rad/s] (default 0.02)"
    )
    p.add_argument(
        "--margin", type=at.integer(0, 1000), help="widen rejected stretches [samples] (default 5)"
    )


def _drive_defaults(args) -> None:
    """Fill the moving-link signal options not given with their defaults."""
    for k, v in DRIVE_DEFAULTS.items():
        if getattr(args, k) is None:
            setattr(args, k, v)


def _emit(args, result: dict, table: Table | None, notes: list[str]) -> None:
    """Write --out, print the JSON or the table, then each warning on stderr (also in the result's `warnings`).
    Called after any figure is drawn, so a failed --plot leaves no result behind."""
    result["warnings"] = notes
    if args.out:
        write_text_atomic(args.out, dumps(result) + "\n", "result")
    if args.json:
        print_json(result)
    elif table is not None:
        console.print(table)
    for note in notes:
        err_console.print(f"[yellow]warning:[/yellow] {escape(note)}", highlight=False, soft_wrap=True)


def _simulation_only(args, *opts: tuple[str, object, str], seed_is_simulation: bool = True) -> None:
    """Refuse options that only shape a simulation when a recording is given (they would be ignored); default
    --seed to 0."""
    if not args.simulate:
        seed = (("--seed", args.seed, "seeds the simulation"),) if seed_is_simulation else ()
        for opt, value, why in (
            *seed,
            ("--save-recording", args.save_recording, "writes the simulated recording"),
            *opts,
        ):
            if value is not None:
                raise DataError(f"{opt} {why}: not with a recording")
    if args.seed is None:
        args.seed = 0


def _inertia(args, rec) -> float:
    inertia = args.inertia if args.inertia is not None else rec.inertia
    if inertia is None:
        raise DataError("drive inertia unknown: give --inertia or an '# inertia:' line in the recording")
    return float(inertia)


# --- friction ----------------------------------------------------------------------------------------------


def _plan_for(args, link: str):
    """The --plan of a simulation (JSON path, or 'recommended' / 'sweeps' where allowed) for `link`; DataError
    when the plan file says the link was held another way."""
    named = {"recommended": recommended, "sweeps": sweeps}
    if args.plan in named:
        return named[args.plan](link=link)
    plan = load_pwm_plan(args.plan)
    if plan.link != link:
        raise DataError(
            f"--plan {args.plan} is a plan for a link {'in a fixture' if plan.link == 'fixture' else 'moving'} "
            f"(its 'link' is {plan.link!r}); this simulation needs link {link!r}"
        )
    return plan


def _check_friction_options(args) -> None:
    """Refuse Stribeck-only options with a single other model (they would be dropped)."""
    if args.model in ("all", "stribeck"):
        return
    for opt, given in (("--vs", args.vs is not None), ("--zero-slope", args.zero_slope)):
        if given:
            raise DataError(f"{opt} shapes the Stribeck model only: not with --model {args.model}")


def _friction_source(args):
    """(drive recording, truth or None, source label) of `calibrate friction`: the file or a simulation."""
    from identify.actuation_sim import DriveTruth, Noise, simulate_external, simulate_free

    if not args.simulate:
        return read_drive(args.recording), None, str(args.recording)
    truth = DriveTruth()
    if args.plan:
        rec = simulate_free(_plan_for(args, "free"), truth, Noise(seed=args.seed))
        source = f"simulated PWM plan {args.plan}, free link, seed {args.seed}"
    else:
        rec = simulate_external(truth=truth, noise=Noise(seed=args.seed))
        if not args.offset:  # a motor-off experiment starts by zeroing the torque sensor
            rec.tau = rec.tau - truth.tau_offset
        source = f"simulated motor-off experiment, seed {args.seed}"
    if args.save_recording:
        write_drive(rec, args.save_recording)
    return rec, truth, source


def cmd_friction(args: argparse.Namespace) -> int:
    from identify.drive_signals import drive_signals
    from identify.friction import MODELS, fit_friction
    from identify.pwm_gain import check_pwm_percent

    _simulation_only(args, ("--plan", args.plan, "is the PWM plan a simulation drives"))
    _check_friction_options(args)
    _drive_defaults(args)
    rec, truth, source = _friction_source(args)
    inertia = _inertia(args, rec)
    sig = drive_signals(rec, args.cutoff_hz)
    with_pwm = bool(np.any(rec.pwm != 0))  # PWM applied: fit model 2.32 (K*_pwm, τ_s) with the friction
    if with_pwm:
        check_pwm_percent(rec.pwm, source)
    models = MODELS if args.model == "all" else (args.model,)
    opts = dict(accel_max=args.accel_max, speed_min=args.speed_min, margin=args.margin)
    opts.update(filtered=sig.filtered, q_span=float(np.ptp(rec.q)) if len(rec.q) else None)
    fits = []
    for m in models:
        fits.append(
            fit_friction(
                sig.omega,
                sig.omega_dot,
                sig.tau,
                inertia,
                m,
                v_s=args.vs if m == "stribeck" else None,
                zero_slope=args.zero_slope and m == "stribeck",
                offset=args.offset or with_pwm,
                pwm=sig.pwm if with_pwm else None,
                fit_inertia=args.fit_inertia,
                exclude=rec.gaps(),
                raw=sig.raw,
                **opts,
            )
        )
    ref = truth.params() if truth else {}
    result = {
        "format": "poise friction result",
        "source": source,
        "inertia_kg_m2": inertia,
        "fits": [f.as_dict() for f in fits],
        "truth": {**ref, "v_s": truth.v_s} if truth else None,
    }
    notes = list(dict.fromkeys(w for f in fits for w in f.warnings))  # the rejection note once, not per model
    table = _friction_table(fits, truth, source)
    if args.plot:
        _plot_friction(args, rec, sig, inertia, fits, source)
    _emit(args, result, table, notes)
    return 0


def _friction_table(fits, truth, source: str) -> Table:
    """The fitted parameters with SE and units (and the truth and error when simulated), one block per model."""
    from identify.friction import unit_of

    ref = truth.params() if truth else {}
    t = Table(title=f"Friction — {source} (f = torque the drive must add, sign of ω; parameters ≥ 0)")
    for c in ("model", "parameter", "value", "± SE", "unit", "true", "error"):
        t.add_column(c, justify="left" if c in ("model", "parameter", "unit") else "right")
    for f in fits:
        for k, v in f.params.items():
            tr = ref.get(k) if f.model == "stribeck" else None
            t.add_row(
                f.model,
                k,
                f"{v:.4g}",
                f"{f.se[k]:.2g}",
                unit_of(k),
                "—" if tr is None else f"{tr:.4g}",
                "—" if tr is None else f"{100 * (v / tr - 1):+.2f} %",
            )
        if f.v_s:
            tr = truth.v_s if truth else None
            t.add_row(
                f.model, "v_s", f"{f.v_s:.3g}", f"{f.se['v_s']:.2g}" if "v_s" in f.se else "given", "rad/s",
                "—" if tr is None else f"{tr:.4g}", "—" if tr is None else f"{100 * (f.v_s / tr - 1):+.2f} %",
            )  # fmt: skip
        for k, v in f.extra.items():
            tr = None
            if truth and k == "tau_s":
                tr = truth.tau_offset
            elif truth and k == "k_pwm":
                tr = truth.k_pwm * truth.pwm_full_scale / 100
            t.add_row(
                f.model,
                k,
                f"{v:.4g}",
                f"{f.se[k]:.2g}",
                {"tau_s": "N·m", "k_pwm": "N·m/%", "inertia_extra": "kg·m²"}[k],
                "—" if tr is None else f"{tr:.4g}",
                "—" if tr is None else f"{100 * (v / tr - 1):+.2f} %",
            )
        t.add_row(
            f.model,
            "fit",
            f"rms {f.rms:.3g} N·m, {f.n_used} used, {f.n_rejected} rejected"
            + ("" if f.n_below_vs is None else f", {f.n_below_vs} used below v_s"),
            "",
            "",
            "",
            "",
        )
        if f.misfit:
            t.add_row(f.model, "MODEL MISFIT", "residuals run in long stretches: SEs do not bound the bias")
    return t


def _plot_friction(args, rec, sig, inertia: float, fits, source: str) -> None:
    """The measured friction f against ω (kept and rejected samples) with the fitted curves."""
    from identify.calibration_plots import plot_friction
    from identify.friction import select_samples

    kept = select_samples(sig.omega, sig.omega_dot, args.accel_max, args.speed_min, args.margin, rec.gaps())
    ys = [_measured_friction(sig, inertia, f) for f in fits]
    plot_friction(sig.omega, ys, kept, fits, args.plot, source)


def _measured_friction(sig, inertia: float, fit) -> np.ndarray:
    """The data as friction under `fit`'s own terms: f = K PWM + τ_s − (τ_j + (I + ΔI) ω̇)."""
    inertia_all = inertia + fit.extra.get("inertia_extra", 0.0)
    y = fit.extra.get("k_pwm", 0.0) * sig.pwm - sig.tau - inertia_all * sig.omega_dot
    return y + (fit.tau_s or 0.0)


# --- PWM gain ----------------------------------------------------------------------------------------------


def _load_friction(path: str):
    """(friction fit, inertia the friction fit found missing [kg·m²]) from a `calibrate friction --out` file."""
    from identify.friction import friction_from_dict

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    fits = doc.get("fits") if isinstance(doc, dict) else None
    if not fits:
        raise DataError(f"{path}: not a friction result (no 'fits')")
    by_model = {f.get("model"): f for f in fits if isinstance(f, dict)}
    chosen = by_model.get("stribeck", fits[0])
    fric = friction_from_dict(chosen, path)
    fric.warnings = (
        []
        if len(by_model) < 2
        else [f"{path} holds {len(by_model)} friction fits: the {fric.model} one is used"]
    )
    try:  # the inertia the friction fit found missing (--fit-inertia) is missing here too
        inertia_extra = float(chosen.get("inertia_extra_kg_m2") or 0.0)
    except (TypeError, ValueError):
        inertia_extra = float("nan")
    if not np.isfinite(inertia_extra):
        raise DataError(f"{path}: inertia_extra_kg_m2 is not a finite number")
    return fric, inertia_extra


def _check_pwm_gain_options(args) -> None:
    """Refuse options the chosen experiment would ignore."""
    _simulation_only(args, ("--plan", args.plan, "is the PWM plan a simulation drives"))
    if args.link == "fixture":
        for opt, value, why in (
            ("--friction", args.friction, "compensates a moving link's friction"),
            ("--inertia", args.inertia, "is the moving link's drive inertia"),
        ):
            if value is not None:
                raise DataError(f"{opt} {why}: not with --link fixture (the default); add --link free")
        for k, flag in DRIVE_FLAGS.items():
            if getattr(args, k) is not None:
                raise DataError(
                    f"{flag} filters a moving link's signals: not with --link fixture (the default, which fits the "
                    "raw samples); add --link free"
                )
    _drive_defaults(args)


def _simulated_friction(args, truth):
    """The friction experiment a simulated moving-link run starts with (motor off, sensor zeroed)."""
    from identify.actuation_sim import Noise, simulate_external
    from identify.drive_signals import drive_signals
    from identify.friction import fit_friction

    ext = simulate_external(truth=truth, noise=Noise(seed=args.seed + 1))
    s0 = drive_signals(ext, args.cutoff_hz)
    return fit_friction(  # as a user would: v_s searched, the recording's inertia
        s0.omega,
        s0.omega_dot,
        s0.tau - truth.tau_offset,
        _inertia(args, ext),
        "stribeck",
        accel_max=args.accel_max,
        speed_min=args.speed_min,
        margin=args.margin,
        filtered=s0.filtered,
        q_span=float(np.ptp(ext.q)),
        raw=replace(s0.raw, tau=s0.raw.tau - truth.tau_offset),
    )


def cmd_pwm_gain(args: argparse.Namespace) -> int:
    from identify.actuation_sim import DriveTruth, Noise, simulate_fixture, simulate_free
    from identify.drive_signals import drive_signals
    from identify.pwm_gain import check_held, check_pwm_percent, fit_pwm_gain, fit_pwm_gain_fixture

    _check_pwm_gain_options(args)
    truth, fric, inertia_extra = None, None, 0.0
    if args.friction:
        fric, inertia_extra = _load_friction(args.friction)
    if args.simulate:
        truth = DriveTruth()
        plan = _plan_for(args, args.link) if args.plan else recommended(link=args.link)
        noise = Noise(seed=args.seed)
        if args.link == "fixture":
            rec = simulate_fixture(plan, truth, noise)
        else:
            rec = simulate_free(plan, truth, noise)
            if fric is None:
                fric = _simulated_friction(args, truth)
        if args.save_recording:
            write_drive(rec, args.save_recording)
        source = f"simulated {args.link} experiment, seed {args.seed}"
    else:
        rec = read_drive(args.recording)
        source = str(args.recording)
        if args.link == "free" and fric is None:
            raise DataError(
                "a moving-link recording needs --friction RESULT.json (from calibrate friction --out)"
            )
    check_pwm_percent(rec.pwm, source)
    if args.link == "fixture":
        check_held(rec.q, source)
        fit = fit_pwm_gain_fixture(rec.t, rec.pwm, rec.tau)  # raw samples: white noise
        pwm, y = rec.pwm, rec.tau
    else:
        inertia = _inertia(args, rec) + inertia_extra
        sig = drive_signals(rec, args.cutoff_hz)
        fit = fit_pwm_gain(
            sig.pwm,
            sig.omega,
            sig.omega_dot,
            sig.tau,
            inertia,
            fric,
            args.accel_max,
            max(args.speed_min, 0.05),
            exclude=rec.gaps(),
            filtered=sig.filtered,
            raw=sig.raw,
        )
        pwm, y = sig.pwm, sig.tau + inertia * sig.omega_dot + fric.torque(sig.omega)
    k_true = truth.k_pwm * truth.pwm_full_scale / 100 if truth else None
    result = {
        "format": "poise pwm gain result",
        "source": source,
        **fit.as_dict(),
        "true_k_pwm_Nm_per_pct": k_true,
        **_pwm_truth(truth, args.link),
        "friction_model": None if fric is None else fric.model,
    }
    table = _pwm_gain_table(fit, result, source, fric)
    if args.plot:
        from identify.calibration_plots import plot_pwm_gain

        plot_pwm_gain(pwm, y, fit, args.plot, source)
    _emit(args, result, table, (fric.warnings if args.friction else []) + fit.warnings())
    return 0


def _pwm_truth(truth, link: str) -> dict:
    """A simulation's true τ₀ and h: in a fixture the static band [−σs⁺, σs⁻] is centred at (σs⁻ − σs⁺)/2 above
    the sensor offset, half-width (σs⁺ + σs⁻)/2; a moving link's τ₀ is the sensor offset alone."""
    if truth is None:
        return {"true_tau0_Nm": None, "true_hysteresis_half_width_Nm": None}
    if link == "free":
        return {"true_tau0_Nm": truth.tau_offset, "true_hysteresis_half_width_Nm": None}
    return {
        "true_tau0_Nm": truth.tau_offset + (truth.sigma_neg - truth.sigma_pos) / 2,
        "true_hysteresis_half_width_Nm": (truth.sigma_pos + truth.sigma_neg) / 2,
    }


def _pwm_gain_table(fit, result: dict, source: str, fric=None) -> Table:
    """K*_pwm, τ₀ (and the hysteresis band) with SE and units, the residual and the samples used."""
    t = Table(title=f"PWM gain — {source}")
    for c in ("quantity", "value", "± SE", "unit", "true"):
        t.add_column(c, justify="left" if c in ("quantity", "unit") else "right")

    def true(key: str, fmt: str = ".4g") -> str:
        return "—" if result.get(key) is None else f"{result[key]:{fmt}}"

    t.add_row(
        "K*_pwm", f"{fit.k_pwm:.5g}", f"{fit.se['k_pwm']:.2g}", "N·m/%", true("true_k_pwm_Nm_per_pct", ".5g")
    )
    t.add_row("τ₀", f"{fit.tau0:.4g}", f"{fit.se['tau0']:.2g}", "N·m", true("true_tau0_Nm"))
    if fit.hysteresis is not None:
        t.add_row(
            "hysteresis h (width 2h)", f"{fit.hysteresis:.4g}", f"{fit.se['hysteresis']:.2g}", "N·m",
            true("true_hysteresis_half_width_Nm"),
        )  # fmt: skip
    t.add_row(
        "residual rms", f"{fit.rms:.3g}" + (" (MODEL MISFIT: SEs do not bound the bias)" if fit.misfit else ""), "",
        "N·m", "",
    )  # fmt: skip
    t.add_row("samples used", str(fit.n_used), "", "", "")
    if fric is not None:
        vs = f", v_s {fric.v_s:.3g} rad/s" if fric.v_s else ""
        t.add_row("friction compensated", f"{fric.model}{vs} (its uncertainty is not in the SEs)", "", "", "")
    return t


def cmd_pwm_plan(args: argparse.Namespace) -> int:
    from formats.pwm_plan import plan_to_json

    if args.joint is not None and not args.joint.strip():
        raise DataError("--joint is empty: give the joint's name, or leave the option out")
    plan = (sweeps if args.sweeps else recommended)(args.joint, args.link)
    save_pwm_plan(plan, args.out)
    if args.json:
        print_json(plan_to_json(plan))
    else:
        total = sum(s.duration_s for s in plan.segments)
        console.print(
            f"wrote {args.out}: {len(plan.segments)} segment(s), {total:g} s at {plan.rate_hz:g} Hz"
        )
    return 0


# --- accelerometer -----------------------------------------------------------------------------------------


def cmd_accelerometer(args: argparse.Namespace) -> int:
    from identify.accelerometer import (
        PARAM_NAMES,
        calibrate_two_step,
        fit_ellipsoid,
        plausibility_warnings,
        split_recording,
        tumble_offset,
    )
    from identify.sensor_sim import AccelExperiment, simulate_accelerometer

    _simulation_only(args)
    if args.runs > 1 and not args.simulate:
        raise DataError("--runs repeats a simulation; use it with --simulate")
    truth = None
    runs = []
    for k in range(args.runs):
        if args.simulate:
            rec, truth = simulate_accelerometer(exp=AccelExperiment(seed=args.seed + k))
            if args.save_recording and k == 0:
                write_accel(rec, args.save_recording)
        else:
            rec = read_accel(args.recording)
        grid, first, second = split_recording(rec.pose, rec.a, rec.tumble)
        cals = [fit_ellipsoid(grid)]
        if len(first):
            cals.append(calibrate_two_step(grid, tumble_offset(first, second), args.bound))
        runs.append(cals)
    methods = [c.method for c in runs[0]]
    vec = {m: np.array([r[i].vector() for r in runs]) for i, m in enumerate(methods)}
    rms = {m: float(np.mean([r[i].rms for r in runs])) for i, m in enumerate(methods)}
    result = {
        "format": "poise accelerometer result",
        "source": f"simulated, seeds {args.seed}…{args.seed + args.runs - 1}"
        if args.simulate
        else str(args.recording),
        "parameters": list(PARAM_NAMES),
        "units": {n: ("m/s²" if n.startswith("o") else "-") for n in PARAM_NAMES},
        "methods": {
            m: {
                "mean": vec[m].mean(axis=0).tolist(),
                "std": vec[m].std(axis=0, ddof=1).tolist() if args.runs > 1 else None,
                "rms_m_s2": rms[m],
                "se": runs[0][i].as_dict()["se"] if args.runs == 1 else None,
            }
            for i, m in enumerate(methods)
        },
        "truth": None,
    }
    if truth is not None:
        o, C = truth
        result["truth"] = [*o, C[0, 0], C[1, 1], C[2, 2], C[1, 0], C[2, 0], C[2, 1]]
    notes = list(dict.fromkeys(n for cals in runs for c in cals for n in plausibility_warnings(c)))
    se = {m: result["methods"][m]["se"] for m in methods}
    table = _accelerometer_table(args.runs, methods, vec, rms, result["truth"], se)
    if args.plot:
        from identify.calibration_plots import plot_accelerometer

        plot_accelerometer(
            grid,
            runs[-1],
            args.plot,
            tumble=np.vstack([first, second]),
            title=f"Accelerometer — {result['source']}",
        )
    _emit(args, result, table, notes)
    return 0


def _accelerometer_table(n_runs: int, methods, vec, rms, truth, se) -> Table:
    """Offsets and gain entries per method (the estimate and its SE from one run, or mean and std over simulated
    runs), with the fit's residual rms."""
    from identify.accelerometer import PARAM_NAMES

    t = Table(
        title="Accelerometer a = C (r − o): offsets \\[m/s²], C entries \\[-], rms of ‖a‖ − g \\[m/s²]"
        + (f", {n_runs} runs" if n_runs > 1 else "")
    )
    t.add_column("method")
    t.add_column("")
    for n in PARAM_NAMES:
        t.add_column(n, justify="right")
    t.add_column("rms \\[m/s²]", justify="right")
    for m in methods:
        t.add_row(
            m, "mean" if n_runs > 1 else "value", *(f"{v:.4g}" for v in vec[m].mean(axis=0)), f"{rms[m]:.3g}"
        )
        if se[m] is not None:
            t.add_row("", "± SE", *("bound" if v is None else f"{v:.2g}" for v in se[m]), "")
        if n_runs > 1:
            t.add_row("", "std", *(f"{v:.3g}" for v in vec[m].std(axis=0, ddof=1)), "")
    if truth is not None:
        t.add_row("truth", "", *(f"{v:.4g}" for v in truth), "")
    return t


# --- encoder offsets ---------------------------------------------------------------------------------------


def _offset_data(args):
    """(model, sensors, q, acc, t, truth or None, source) of `calibrate encoder-offsets`: file or simulation."""
    from identify.encoder_offsets import default_sensors
    from identify.sensor_sim import simulate_offsets
    from robots.registry import get_model

    if not args.simulate:
        rec = read_offsets(args.recording)
        model = get_model(rec.robot)
        rec = read_offsets(args.recording, model.joint_names)
        return model, rec.sensors, rec.q, rec.acc, rec.t, None, str(args.recording)
    robot = args.robot or "icub-right-arm"
    model = get_model(robot)
    sensors = [s.strip() for s in args.sensors.split(",")] if args.sensors else default_sensors(model)
    for s in sensors:
        model.site(s)
    rng = np.random.default_rng(args.seed)
    truth = np.radians(rng.uniform(-6.0, 6.0, model.nq))
    q, acc, _ = simulate_offsets(model, sensors, truth, n=20000, rate_hz=1000, speed_deg_s=4, seed=args.seed)
    t_rec = np.arange(len(q)) / 1000.0
    if args.save_recording:
        from formats.calibration_recording import OffsetRecording

        write_offsets(OffsetRecording(robot, model.joint_names, sensors, q, acc, t_rec), args.save_recording)
    return model, sensors, q, acc, t_rec, truth, f"simulated {robot}, seed {args.seed}"


def cmd_encoder_offsets(args: argparse.Namespace) -> int:
    from identify.encoder_offsets import check_speed, fit_with_buckets, prepare

    _simulation_only(
        args,
        ("--robot", args.robot, "picks the simulated robot (a recording names its own)"),
        ("--sensors", args.sensors, "picks the simulated sensors (a recording names its own)"),
        seed_is_simulation=False,  # it seeds the random buckets too
    )
    if args.smooth_window > 1 and (args.smooth_window % 2 == 0 or args.smooth_window < 5):
        raise DataError(f"--smooth-window must be 1 (off) or an odd number ≥ 5, got {args.smooth_window}")
    model, sensors, q, acc, t_rec, truth, source = _offset_data(args)
    reference = None
    if args.reference_deg is not None:
        if len(args.reference_deg) != model.nq:
            raise DataError(f"--reference-deg has {len(args.reference_deg)} values for {model.nq} joints")
        reference = np.radians(args.reference_deg)
    with named_errors(None if args.simulate else args.recording):  # "too short" etc. name the file
        speed = check_speed(model, t_rec, q, sensors) if t_rec is not None else None
        q, acc = prepare(q, acc, args.smooth_window, args.decimate)
        fit = fit_with_buckets(
            model, q, acc, sensors, args.buckets, args.bucket_size, args.seed, bound_deg=args.bound_deg
        )
    report = fit.as_dict(truth, reference)
    result = {
        "format": "poise encoder-offset result",
        "source": source,
        "robot": model.name,
        "sensors": sensors,
        **report,
        "speed_check": None if speed is None else speed.as_dict(),
    }
    notes = fit.warnings(args.bound_deg) + ([speed.warning()] if speed and speed.too_fast else [])
    table = _offsets_table(report, fit, speed, source, len(q), sensors, args)
    if args.plot:
        from identify.calibration_plots import plot_offsets

        plot_offsets(
            model.joint_names,
            [np.degrees(r["offset_rad"]) for r in report["joints"]],
            [np.degrees(r["bucket_std_rad"]) for r in report["joints"]],
            None if truth is None else np.degrees(truth),
            args.plot,
        )
    _emit(args, result, table, notes)
    return 0


def _offsets_table(report: dict, fit, speed, source: str, n: int, sensors: list[str], args) -> Table:
    """Table 3.5 layout in degrees (the result file holds radians), with the fit and speed check as caption."""
    with_ref = args.reference_deg is not None
    t = Table(title=f"Encoder offsets θ = q + δ — {source} (Table 3.5 style)")
    for c in (
        "joint",
        "δ \\[deg]",
        "± SE \\[deg]",
        "buckets mean \\[deg]",
        "buckets std \\[deg]",
        "true \\[deg]",
        "gap \\[deg]",
        *(("reference \\[deg]", "gap to ref. \\[deg]") if with_ref else ()),
    ):
        t.add_column(c, justify="left" if c == "joint" else "right")

    def deg(r: dict, key: str, fmt: str = ".3f") -> str:
        return f"{np.degrees(r[key]):{fmt}}" if key in r else "—"

    for r in report["joints"]:
        t.add_row(
            r["joint"],
            deg(r, "offset_rad"),
            deg(r, "se_rad"),
            deg(r, "bucket_mean_rad"),
            deg(r, "bucket_std_rad"),
            deg(r, "true_rad"),
            deg(r, "gap_rad", "+.3f"),
            *((deg(r, "reference_rad"), deg(r, "gap_reference_rad", "+.3f")) if with_ref else ()),
        )
    t.caption = (
        f"{n} samples, {len(sensors)} sensors ({', '.join(sensors)}); residual {fit.rms:.3g} m/s², "
        f"mean angle {fit.angle_deg:.3f} deg; {args.buckets} buckets × {args.bucket_size}; ± SE from the fit "
        "(Newey–West)"
        + (f"; at bound: {', '.join(fit.active_bounds)}" if fit.active_bounds else "")
        + (
            ""
            if speed is None
            else f"\nmax joint speed {speed.max_speed_deg_s:.2f} deg/s, limit √(Δα/d) {speed.limit_deg_s:.2f} "
            f"deg/s (d {speed.reach_m:.2f} m, Δα {speed.delta_alpha} m/s²)"
            + (" — TOO FAST: non-gravity accelerations bias the offsets" if speed.too_fast else "")
        )
    )
    return t
