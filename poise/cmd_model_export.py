"""`poise model export`: identified inertial parameters written into a copy of the robot's URDF."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from rich.table import Table

from formats.atomic import write_atomic
from formats.errors import DataError
from poise import argtypes as at
from poise.output import console, err_console, print_json


def register(s: argparse._SubParsersAction) -> None:
    e = s.add_parser(
        "export", help="write identified masses, CoMs and inertias into a copy of the robot's URDF"
    )
    e.add_argument(
        "robot", help="built-in robot (tulip, icub-right-arm, doggy), FILE.poise.toml or FILE.urdf"
    )
    e.add_argument(
        "--params",
        required=True,
        help="parameter set (JSON), `poise identify dynamic --json` output or a static result",
    )
    e.add_argument("--out", type=at.out_file, required=True, help="URDF to write (never the input)")
    e.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    e.add_argument(
        "--inconsistent",
        action="store_true",
        help="write a physically inconsistent set as it is (poise, Pinocchio and MuJoCo may refuse the file)",
    )
    e.add_argument(
        "--nearest",
        action="store_true",
        help="write the nearest physically consistent set instead of an inconsistent one",
    )
    e.add_argument(
        "--consistent",
        type=at.positive,
        nargs="?",
        const=2.0,
        default=None,
        metavar="SE",
        help="dynamic results: write the physically consistent set closest to the URDF's whose base parameters lie "
        "within SE standard errors of the identified ones (default 2; each link's pseudo-inertia positive "
        "semidefinite; IPOPT)",
    )
    e.add_argument("--json", action="store_true", help="print a summary as JSON")
    e.set_defaults(func=cmd_export)


def _urdf_of(model) -> Path:
    src = Path(model.source) if model.source else None
    if src is None or src.suffix.lower() not in (".urdf", ".xml") or not src.is_file():
        raise DataError(f"robot {model.name!r} was not loaded from a URDF file: nothing to export into")
    return src


def cmd_export(args: argparse.Namespace) -> int:
    from robots.full_set import load_full_set
    from robots.physical import nearest_consistent, violations
    from robots.registry import get_model
    from robots.urdf_export import changed_links, export_urdf

    model = get_model(args.robot)
    urdf = _urdf_of(model)
    out = Path(args.out)
    if out.resolve() == urdf.resolve():
        raise DataError(f"--out {args.out}: is the input URDF; write the export to another file")
    fs = load_full_set(args.params, model)
    if args.consistent is not None and args.nearest:
        raise DataError("--consistent or --nearest: two ways to a consistent set, give one")
    if args.inconsistent and (args.nearest or args.consistent is not None):
        raise DataError("--inconsistent writes the set as it is; --nearest and --consistent make it consistent: "
                        "give one")  # fmt: skip
    fit = _consistent(model, fs, args.params, args.consistent) if args.consistent is not None else None
    ps = fs.params if fit is None else fit.params
    changed = changed_links(urdf, model, ps)
    prior_mass = {n: m for n, m in model.parameter_set(next(iter(model.params))).mass.items()}
    bad = violations(ps, changed, prior_mass)
    near, corrections = nearest_consistent(ps, changed, prior_mass)
    summary: dict = {"robot": model.name, "urdf": str(urdf), "out": str(out), "params": fs.to_dict()}
    if fit is not None:
        summary["consistent_fit"] = {"within_se": args.consistent, "max_abs_z": fit.max_abs_z, "chi2": fit.chi2,
                                 "base_parameters": len(fit.z), "z": fit.z.tolist(), "distance": fit.distance,
                                 "status": fit.status, "iterations": fit.iterations}  # fmt: skip
    summary["nearest"] = {
        "links": [c.to_dict() for c in corrections],
        "base_error": fs.base_error(near) if fs.base_error and corrections else None,
    }
    if bad and args.nearest:
        ps = near
    if not args.json and bad:
        _print_nearest(corrections, summary["nearest"]["base_error"], applied=args.nearest)
    try:
        res = export_urdf(urdf, model, ps, force=args.inconsistent, out=out)
    except DataError as exc:  # what was found goes with the error into --json's error object
        raise DataError(str(exc), **summary, written=False) from None
    write_atomic(out, lambda tmp: tmp.write_bytes(res.data), "URDF")
    summary |= {"written": True, "used_nearest": bool(bad and args.nearest)} | res.to_dict()
    summary["warnings"] = mass_jumps(ps, changed, prior_mass)
    for w in summary["warnings"]:
        err_console.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    summary["written_fit"] = _written_fit(fs, ps, model)
    if args.json:
        print_json(summary)
        return 0
    _print_changes(res, model, fs if fit is None else None, out, summary["written_fit"])
    if fit is not None:
        console.print(
            f"physically consistent set closest to the URDF's: its {len(fit.z)} base parameters within "
            f"{fit.max_abs_z:.2f} SE of the identified ones (χ² {fit.chi2:.3g}), size-relative distance from the "
            f"URDF's {fit.distance:.3g} ({fit.iterations} IPOPT iterations)",
            highlight=False,
        )
    return 0


MASS_RATIO_WARN = 10.0  # a link's mass changed by more than this factor: grams for kilograms, most likely


def mass_jumps(ps, changed, prior_mass: dict[str, float]) -> list[str]:
    """Links whose exported mass differs from the URDF's by more than MASS_RATIO_WARN× either way (units?)."""
    out = []
    for n in changed:
        old, new = prior_mass.get(n, 0.0), ps.mass.get(n, 0.0)
        if old > 0 and new > 0 and max(new / old, old / new) > MASS_RATIO_WARN:
            out.append(
                f"link {n!r}: mass {old:.4g} kg → {new:.4g} kg ({new / old:.3g}×): grams for kilograms?"
            )
    return out


def _written_fit(fs, ps, model) -> dict | None:
    """How well the set written reproduces the identified base parameters: max relative residual and, when the
    result has SEs, the largest |written − identified| / SE (None for a parameter set)."""
    if fs.base_error is None:
        return None
    out: dict = {"base_residual": fs.base_error(ps), "max_abs_z": None}
    if fs.base_matrix is not None and fs.base_se is not None:
        from robots import dynamics as dyn

        z = (fs.base_matrix @ dyn.standard_parameters(model, ps) - fs.base_values) / fs.base_se
        out["max_abs_z"] = float(np.max(np.abs(z), initial=0.0))
        out["worst"] = f"ϑ{int(np.argmax(np.abs(z))) + 1}"
    return out


def _consistent(model, fs, source: str, within: float):
    """`--consistent`: the consistent set within the SEs of a dynamic result (refused for other inputs)."""
    from robots.consistent_set import consistent_within_se
    from robots.full_set import with_placeholder_bodies

    if fs.base_matrix is None:
        raise DataError(f"--consistent: {source} is a {fs.kind}; it needs a dynamic identification result")
    if fs.base_se is None:
        raise DataError(f"--consistent: {source} gives no positive standard error for every base parameter")
    # a massless link the result gives parameters to is a body to fit, not a frame to keep
    prior, _ = with_placeholder_bodies(model, fs.base_matrix, model.parameter_set(next(iter(model.params))))
    return consistent_within_se(model, fs.base_matrix, fs.base_values, fs.base_se, prior, within)


def _print_nearest(corrections, base_error: float | None, applied: bool) -> None:
    table = Table(title="nearest physically consistent set" + (" (written)" if applied else " (--nearest)"))
    for col in ("link", "mass \\[kg]", "inertia change ‖ΔI‖ \\[kg·m²]"):
        table.add_column(col, justify="left" if col == "link" else "right")
    for c in corrections:
        mass = f"{c.mass_from:.6g}" if c.mass_to == c.mass_from else f"{c.mass_from:.6g} → {c.mass_to:.6g}"
        table.add_row(c.link, mass, f"{c.inertia_change:.3g}")
    console.print(table)
    if base_error is not None:
        console.print(
            f"it moves the identified base parameters by up to {base_error:.3g} (relative to max(1, |ϑ|))"
        )


def _print_changes(res, model, fs, out: Path, written: dict | None) -> None:
    mc = res.max_change
    console.print(
        f"wrote {out}: {len(res.changed)} of {len(model.links)} links' inertials rewritten "
        f"({len(res.edits)} edits; {len(res.inserted)} inserted); largest change: mass {mc['mass_kg']:.4g} kg, "
        f"CoM {1000 * mc['com_m']:.3g} mm, inertia {mc['inertia_kgm2']:.3g} kg·m²",
        highlight=False,
    )
    if res.paths_rewritten:
        console.print(
            f"{res.paths_rewritten} relative mesh paths rewritten for {out.parent}", highlight=False
        )
    if fs is not None and fs.kind != "parameter set" and written is not None:
        z = written.get("max_abs_z")
        off = f"; up to {z:.3g} SE off ({written['worst']})" if z is not None else ""
        console.print(
            f"full set from a {fs.kind}: {fs.imposed} base parameters, as written reproduced to "
            f"{written['base_residual']:.2g} (relative to max(1, |ϑ|)){off}; closest to the URDF's parameters, "
            f"‖δ‖ = {fs.correction_norm:.3g}",
            highlight=False,
        )
    if fs is not None and fs.placeholders:
        console.print(
            f"massless in the URDF, started from a placeholder body (the lightest body's mass): "
            f"{', '.join(fs.placeholders)}",
            highlight=False,
        )
    if res.violations:
        console.print(f"[yellow]written despite:[/yellow] {'; '.join(str(v) for v in res.violations)}")
    if res.inherited:
        console.print(
            f"left as in the input (inconsistent there): {', '.join(v.link for v in res.inherited)}"
        )
