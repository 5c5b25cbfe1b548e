"""`poise model show`: a robot's base parameters with grouping formulas, columns and values."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.table import Table

from formats.errors import DataError
from poise.cmd_model_export import register as register_export
from poise.output import console, err_console, mm, print_json
from robots.motion_names import MOTION_CLASSES

if TYPE_CHECKING:  # the command imports what it runs lazily (a fast CLI start)
    from formats.parameter_set import ParameterSet
    from robots.base_params import RegressorSpec
    from robots.tree import RobotModel


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="inspect robot models")
    s = p.add_subparsers(dest="model_cmd", metavar="SUBCOMMAND")
    s.required = True
    show = s.add_parser(
        "show", help="base parameters of a robot's regressors, with grouping formulas and values"
    )
    show.add_argument("robot", help="built-in robot (tulip, icub-right-arm), FILE.poise.toml or FILE.urdf")
    show.add_argument(
        "--regressor",
        default=None,
        help="com (CoM/CoP model; default for a robot that stands) | torque (default for a fixed-base arm) | "
        "base-wrench[:fz,mx,my] | ft:FRAME (sub-tree wrench at a sensor)",
    )
    show.add_argument(
        "--base",
        default=None,
        help="base: a named base (TUlip: right|left), site or link (default: the robot's)",
    )
    show.add_argument(
        "--params", default=None, help="parameter set: a built-in name or FILE (default: the URDF's)"
    )
    show.add_argument(
        "--simplified", action="store_true", help="dynamic regressors: the described simplified model"
    )
    show.add_argument(
        "--motion",
        choices=MOTION_CLASSES,
        default=None,
        help="dynamic regressors: the motion class the data come from (default free; double-support: both soles "
        "flat and still)",
    )
    show.add_argument("--json", action="store_true", help="machine-readable output (values in metres)")
    show.set_defaults(func=cmd_show)
    register_export(s)


def cmd_show(args: argparse.Namespace) -> int:
    from robots.base_params import parse_regressor
    from robots.params_io import resolve_params
    from robots.registry import get_model

    model = get_model(args.robot)
    ps = resolve_params(args.params or next(iter(model.params)), model)
    regressor = args.regressor or ("com" if model.bases else "torque")
    if regressor != "com":
        spec = parse_regressor(regressor, model, args.base)
        rc = show_dynamic(model, spec, ps, args.simplified, args.motion or "free", args.json)
    else:
        _refuse_dynamic_options(args)
        rc = show_com(model, ps, args.base, args.json)
    if model.warnings and not args.json:
        # After the output, and only when it succeeded: a user error stays one line.
        more = f" (and {len(model.warnings) - 1} more; --json lists them)" if len(model.warnings) > 1 else ""
        err_console.print(
            f"[yellow]warning:[/yellow] {model.warnings[0]}{more}", highlight=False, soft_wrap=True
        )
    return rc


def _refuse_dynamic_options(args: argparse.Namespace) -> None:
    """--simplified and --motion choose a dynamic regressor's model: the CoM table shows both variants already."""
    given = [
        flag for flag, on in (("--simplified", args.simplified), ("--motion", args.motion is not None)) if on
    ]
    if given:
        raise DataError(
            f"{given[0]} applies to dynamic regressors (--regressor torque|base-wrench|ft:FRAME); the CoM table "
            "shows the double-support identifiable and simplified parameters in its own columns"
        )


def show_com(model: RobotModel, ps, base: str | None, as_json: bool) -> int:
    """The CoM/CoP base parameters table (or JSON) for one base and parameter set."""
    from robots.com_variants import base_model, variant

    base = base or default_base(model)
    model.base_site(base)
    bm = base_model(model, base)
    values = bm.values(ps)
    full = variant(model, base, "full")
    simp = variant(model, base, "simplified")
    rows = []
    for g, bp in enumerate(bm.params):
        rows.append(
            {
                "symbol": bp.symbol,
                "index": bp.index,
                "formula": bm.formula(g),
                "column": bp.column,
                "value_m": float(values[g]),
                "identifiable": g in full.estimated,
                "simplified": g in simp.estimated,
            }
        )
    if as_json:
        print_json(
            {
                "robot": model.name,
                "base": base,
                "params": ps.name,
                "total_mass_kg": ps.total_mass,
                "units": {"value": "m"},
                "base_parameters": rows,
                "warnings": list(model.warnings),
            }
        )
        return 0
    table = Table(title=f"{model.name}: CoM base parameters, {base}-foot base, parameter set '{ps.name}'")
    table.add_column("ϑ", no_wrap=True)
    table.add_column("grouping (÷ M)", overflow="fold")
    table.add_column("column", no_wrap=True)
    table.add_column("value \\[mm]", justify="right", no_wrap=True)
    table.add_column("CoP-identifiable", no_wrap=True)
    table.add_column("simplified", no_wrap=True)
    for r in rows:
        table.add_row(
            r["symbol"], r["formula"], r["column"], mm(r["value_m"]),
            "yes" if r["identifiable"] else "no", "yes" if r["simplified"] else "",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"M = {ps.total_mass:.3f} kg; {len(full.estimated)} of {bm.n} identifiable from x/y CoP in double support; "
        f"simplified model: {len(simp.estimated)} parameters."
    )
    return 0


def default_base(model: RobotModel) -> str:
    """The robot's stance base for CoM models (first named base), else its root link."""
    if isinstance(model.stance, dict) and model.stance.get("base"):
        return str(model.stance["base"])
    return next(iter(model.bases)) if model.bases else model.root


_UNITS = {"m": "kg", "mcx": "kg·m", "mcy": "kg·m", "mcz": "kg·m"}


def _unit(name: str) -> str:
    return _UNITS.get(name.split("@")[0], "kg·m²")


def show_dynamic(
    model: RobotModel, spec: RegressorSpec, ps: ParameterSet, simplified: bool, motion: str, as_json: bool
) -> int:
    """Numerical base parameters of a dynamic regressor, their grouping formulas and values."""
    from robots.dynamics import standard_parameters

    if not model.params:
        raise DataError(f"robot {model.name!r} has no parameter set")
    db = _shown_base(model, spec, simplified, motion)
    values = db.values(standard_parameters(model, ps))
    rows = [
        {
            "symbol": db.symbols[a],
            "formula": db.formula(a),
            "value": float(values[a]),
            "unit": _unit(db.names[db.independent[a]]),
        }
        for a in range(db.rank)
    ]
    label = {
        "torque": "joint torques",
        "base-wrench": "base wrench",
        "ft": f"sub-tree wrench at {spec.frame}",
    }[spec.kind]
    vanishing = [db.names[i] for i in db.vanishing]
    published = _published(model, spec, simplified, motion, db, ps)
    if as_json:
        print_json(
            {
                "robot": model.name,
                "regressor": spec.kind,
                "base": spec.base,
                "frame": spec.frame,
                "rows": list(spec.rows) if spec.rows else None,
                "simplified": simplified,
                "motion": motion,
                "params": ps.name,
                "rank": db.rank,
                "standard_parameters": len(db.names),
                "assumed_zero": [db.names[i] for i in db.assumed_zero],
                "not_in_regressor": vanishing,
                "base_parameters": rows,
                "published": published,
                "warnings": list(model.warnings),
            }
        )
        return 0
    rows_txt = f" ({', '.join(spec.rows)})" if spec.rows else ""
    table = Table(
        title=f"{model.name}: base parameters of the {label}{rows_txt}, base {spec.base}"
        + (", simplified model" if simplified else "")
        + (f", {motion} motion" if motion != "free" else "")
        + f", parameter set '{ps.name}'"
    )
    table.add_column("ϑ", no_wrap=True)
    table.add_column("grouping of standard parameters (name@link)", overflow="fold")
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    for r in rows:
        table.add_row(r["symbol"], r["formula"], f"{r['value']:.6g}", r["unit"])
    console.print(table)
    console.print(
        f"{db.rank} base parameters of {len(db.names)} standard ones"
        + (f" ({len(db.assumed_zero)} assumed zero)" if db.assumed_zero else "")
        + (f"; not in this regressor at all: {', '.join(vanishing)}" if len(vanishing) <= 20 else
           f"; {len(vanishing)} standard parameters do not enter this regressor")
        + ".",
        highlight=False,
    )  # fmt: skip
    if published:
        _print_published(published)
    return 0


def _shown_base(model: RobotModel, spec: RegressorSpec, simplified: bool, motion: str):
    """The base identification numbers: a standing robot's board wrench in standard-parameter order (single
    support as `identify dynamic` fits it; double support at large, whose fits at one foot placement keep a
    subset), other regressors as their designs and fits pivot them."""
    from robots.base_params import cached_dynamic_base
    from robots.motion_class import standing_base

    if spec.kind != "base-wrench":
        return cached_dynamic_base(model, spec, simplified, motion)
    if motion == "free":
        return standing_base(model, spec, simplified)
    return cached_dynamic_base(model, spec, simplified, motion, ordered=True)


def _published(model: RobotModel, spec: RegressorSpec, simplified: bool, motion: str, db, ps) -> dict | None:
    """The robot's published numbering of these base parameters (e.g. thesis App. C), values from `ps`, each
    written over the derived ϑ; None if the description has none for this regressor."""
    from robots.published_base import describe_row, map_to_derived, matching, published_values, units

    pb = matching(model, spec, simplified) if motion == "free" else None
    if pb is None:
        return None
    bm = map_to_derived(pb, model, db)
    values = published_values(pb, model, ps)
    ok = bm.in_span()
    params = [
        {
            "symbol": p.symbol,
            "formula": p.formula,
            "value": float(values[a]),
            "unit": u,
            "derived": describe_row(bm.A[a], db.symbols) if ok[a] else None,
            "printed": p.printed if p.correction else None,
            "correction": p.correction or None,
        }
        for a, (p, u) in enumerate(zip(pb.parameters, units(pb, model), strict=True))
    ]
    return {
        "name": pb.name,
        "source": pb.source,
        "is_base": bool(ok.all() and bm.rank == db.rank == len(pb.parameters)),
        "not_base_parameters": [p.symbol for p, good in zip(pb.parameters, ok, strict=True) if not good],
        "parameters": params,
    }


def _print_published(pub: dict) -> None:
    table = Table(title=f"the same base in the published numbering: {pub['source']}")
    table.add_column("ϑ", no_wrap=True)
    table.add_column("formula (publication's symbols)", overflow="fold")
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    table.add_column("= derived", overflow="fold")
    for r in pub["parameters"]:
        mark = " *" if r["correction"] else ""
        table.add_row(
            r["symbol"] + mark,
            r["formula"],
            f"{r['value']:.6g}",
            r["unit"],
            r["derived"] or "not a base parameter",
        )
    console.print(table)
    for r in pub["parameters"]:
        if r["correction"]:
            console.print(f"* {r['symbol']} corrected: {r['correction']}", highlight=False, soft_wrap=True)
    if not pub["is_base"]:
        console.print(
            f"the published set is not a base of these: {', '.join(pub['not_base_parameters']) or 'rank differs'}"
        )
