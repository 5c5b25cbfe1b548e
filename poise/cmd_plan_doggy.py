"""`poise plan doggy`: Doggy's calibration excitation (zero window, slow and fast PWM stages) as a plan file."""

from __future__ import annotations

import argparse

from formats.doggy_plan import DURATION_S
from poise import argtypes as at
from poise.output import console, print_json


def register(s: argparse._SubParsersAction) -> None:
    d = s.add_parser(
        "doggy", help="Doggy's PWM excitation plan for the SLOM calibration (spec doggy-slom.md §5)"
    )
    lo, hi = DURATION_S
    d.add_argument(
        "--duration",
        type=at.number(lo, hi, lo_open=True),
        default=60.0,
        help=f"experiment length (s, > {lo:g} and ≤ {hi:g} as `solve doggy --simulate`; default 60)",
    )
    d.add_argument("--seed", type=at.seed, default=0, help="seed of the random set-points")
    d.add_argument(
        "--zero-s",
        type=at.positive,
        default=None,
        help="zero-command (bias) window (s, > 0 and ≤ 0.2 × --duration; default 1 s or 0.2 × --duration)",
    )
    d.add_argument("--out", type=at.out_file, required=True, help="plan file to write (JSON)")
    d.add_argument("--json", action="store_true", help="print a machine-readable summary")
    at.add_force(d)
    d.set_defaults(func=cmd_plan_doggy)


def cmd_plan_doggy(args: argparse.Namespace) -> int:
    from formats.doggy_plan import save_doggy_plan
    from robots import doggy
    from trajectories.doggy_excitation import make_plan

    plan = make_plan(args.duration, args.seed, args.zero_s)  # a bias window beyond its share: refused there
    save_doggy_plan(plan, args.out, setpoint_range=doggy.robot().setpoint_range)
    kinds = [s.kind for s in plan.segments]
    summary = {
        "out": str(args.out),
        "duration_s": plan.duration,
        "rate_hz": plan.rate,
        "segments": {k: kinds.count(k) for k in ("zero", "goto", "chirp")},
        "u_max": max(s.u_max for s in plan.segments),
    }
    if args.json:
        print_json(summary)
    else:
        console.print(
            f"Doggy plan → {args.out}: {plan.duration:g} s at {plan.rate:g} Hz; "
            + ", ".join(f"{n} {k}" for k, n in summary["segments"].items())
            + f" segment(s); |u| ≤ {summary['u_max']:g}"
        )
    return 0
