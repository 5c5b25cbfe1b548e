"""`poise model show`: a robot's base parameters with grouping formulas, columns and values."""

from __future__ import annotations

import argparse

from rich.table import Table

from poise.output import console, mm, print_json
from robots.com_variants import base_model, variant
from robots.params_io import resolve_params
from robots.registry import get_model


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="inspect robot models")
    s = p.add_subparsers(dest="model_cmd", metavar="SUBCOMMAND")
    s.required = True
    show = s.add_parser("show", help="base parameters of the CoM model")
    show.add_argument("robot", help="robot model name, e.g. tulip")
    show.add_argument("--base", default="right", help="stance foot used as base: right|left (default right)")
    show.add_argument("--params", default="sim", help="parameter set: sim|mc|FILE (default sim)")
    show.add_argument("--json", action="store_true", help="machine-readable output (values in metres)")
    show.set_defaults(func=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    model = get_model(args.robot)
    model.base_site(args.base)
    ps = resolve_params(args.params, model)
    bm = base_model(model, args.base)
    values = bm.values(ps)
    full = variant(model, args.base, "full")
    simp = variant(model, args.base, "simplified")
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
    if args.json:
        print_json(
            {
                "robot": model.name,
                "base": args.base,
                "params": ps.name,
                "total_mass_kg": ps.total_mass,
                "units": {"value": "m"},
                "base_parameters": rows,
            }
        )
        return 0
    table = Table(
        title=f"{model.name}: CoM base parameters, {args.base}-foot base, parameter set '{ps.name}'"
    )
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
