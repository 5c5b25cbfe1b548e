"""`poise solve doggy`: batch calibration of the Doggy robot (all states + parameters, SLOM-style LM)."""

from __future__ import annotations

import argparse
import math
import time

from rich.table import Table

from formats.atomic import write_text_atomic
from formats.doggy_plan import load_doggy_plan
from formats.doggy_recording import read_csv, write_csv
from formats.errors import DataError
from poise import argtypes as at
from poise.output import console, dumps, err_console, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="batch least-squares calibrations (states and parameters together)")
    s = p.add_subparsers(dest="solve_cmd", metavar="SUBCOMMAND")
    s.required = True
    d = s.add_parser("doggy", help="calibrate the Doggy flexible-joint model from encoders and gyros")
    src = d.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="REC", help="recording CSV (see docs/doggy.md)")
    src.add_argument(
        "--simulate",
        metavar="SECONDS",
        type=at.number(1.0, 3600.0, lo_open=True),
        help="simulate the experiment from Table 1",
    )
    d.add_argument("--seed", type=at.seed, default=0, help="simulation seed")
    d.add_argument(
        "--plan", type=at.text_file, help="with --simulate: run this excitation plan (poise plan doggy)"
    )
    d.add_argument("--out", type=at.out_file, required=True, help="result JSON path")
    at.add_force(d)
    d.add_argument("--plot", metavar="DIR", type=at.out_dir, help="write verification figures (PNG) here")
    d.add_argument(
        "--save-recording",
        metavar="CSV",
        type=at.out_file,
        help="with --simulate: also write the simulated recording",
    )
    d.add_argument("--max-iter", type=at.count, default=60, help="Levenberg–Marquardt iteration limit")
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
        help="drop F_bias (with --paper-gyro2 the horizontal gyro-1 bias is then unobservable)",
    )
    d.add_argument("--json", action="store_true", help="print the result JSON to stdout instead of tables")
    d.set_defaults(func=cmd_doggy)


def _clean(o):
    """JSON without NaN: non-finite floats become null."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def _fmt(v, digits=4) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.{digits}g}"


def cmd_doggy(args: argparse.Namespace) -> int:
    from identify import doggy as dg
    from identify import slom
    from identify.doggy_verify import plot, verify

    truth = None
    if args.data:
        rec = read_csv(args.data)
        source = str(args.data)
    else:
        if args.plan:
            plan = load_doggy_plan(args.plan)
            if abs(plan.duration - args.simulate) > 1e-9:
                raise DataError(f"--plan lasts {plan.duration:g} s, --simulate asks for {args.simulate:g} s")
        else:
            from trajectories.doggy_excitation import make_plan

            plan = make_plan(args.simulate, args.seed)
        from identify.doggy_sim import SimConfig, simulate

        sim = simulate(SimConfig(duration=args.simulate, seed=args.seed, rate=plan.rate), plan)
        rec, truth = sim.recording, sim.params
        source = f"simulated {args.simulate:g} s, seed {args.seed}"
        if args.save_recording:
            write_csv(rec, args.save_recording)
    opts = dg.ModelOptions(
        friction_on=args.friction_on, debias_gyro1=not args.paper_gyro2, bias_block=not args.no_bias_block
    )
    solver = slom.Options(method=args.method, max_iter=args.max_iter)
    t0 = time.perf_counter()
    quiet = args.json
    status = (
        None if quiet else err_console.status(f"solving {rec.n} samples, {4 * dg.NJ * rec.n + 24} unknowns …")
    )

    def progress(e: slom.IterationLog) -> None:
        if status is not None:
            status.update(
                f"iter {e.iteration}: cost {e.cost:.6g}, step {e.step_norm:.3g}, λ {e.lam:.2g}, "
                f"{time.perf_counter() - t0:.1f} s"
            )

    if status is not None:
        status.start()
    try:
        cal = dg.calibrate(rec, dg.ROBOT.sets["initial"], opts, solver, progress)
    finally:
        if status is not None:
            status.stop()
    ver = verify(rec, cal.estimate, cal.states[0], opts.friction_on, opts.debias_gyro1)
    rows = dg.parameter_rows(cal, truth)
    res = cal.result
    report = {
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
        "initial_cost": res.initial_cost,
        "cost": res.cost,
        "wall_s": time.perf_counter() - t0,
        "parameters": rows,
        "rotations": {"R_imu1": cal.estimate.R_imu1.tolist(), "R_imu2": cal.estimate.R_imu2.tolist()},
        "rank": {"rank": res.rank.rank, "size": res.rank.size, "null_directions": res.rank.null_directions},
        "residuals": [vars(s) for s in res.stats],
        "verification_rmse": ver.rmse,
        "iteration_log": [vars(e) for e in res.log],
    }
    if args.plot:
        report["figures"] = [
            str(p) for p in plot(ver, args.plot, windows=max(1, min(5, int(rec.t[-1] // 10))))
        ]
    report = _clean(report)
    write_text_atomic(args.out, dumps(report) + "\n", "result")
    if args.json:
        print_json(report)
        return 0
    _print_tables(report, truth is not None)
    return 0


def _print_tables(rep: dict, simulated: bool) -> None:
    t = Table(
        title=f"Doggy calibration — {rep['source']} ({rep['samples']} samples, {rep['unknowns']} unknowns)"
    )
    cols = ["parameter", "unit", "initial", "estimate", "1σ"] + (["truth", "|error|/σ"] if simulated else [])
    for c in cols:
        t.add_column(c, justify="left" if c in ("parameter", "unit") else "right")
    for r in rep["parameters"]:
        row = [r["name"], r["unit"], _fmt(r["initial"], 5), _fmt(r["estimate"], 5), _fmt(r["sigma"], 2)]
        if simulated:
            row += [_fmt(r.get("truth"), 5), _fmt(r.get("error_sigmas"), 2)]
        t.add_row(*row)
    console.print(t)
    console.print(
        f"{rep['reason']} after {rep['iterations']} iterations, cost {rep['initial_cost']:.4g} → "
        f"{rep['cost']:.4g}, {rep['wall_s']:.1f} s wall"
    )
    r = Table(title="open-loop verification RMSE (from the first estimated state)")
    for c in ("signal", "unit", "axis 1 / x", "axis 2 / y", "axis 3 / z"):
        r.add_column(c, justify="right")
    units = {"theta": "rad", "theta_dot": "rad/s", "gyro1": "rad/s", "gyro2": "rad/s"}
    for k, v in rep["verification_rmse"].items():
        r.add_row(k, units[k], *(_fmt(x, 3) for x in v))
    console.print(r)
    s = Table(title="residual blocks (whitened χ²/dof ≈ 1 when Σ fits)")
    for c in ("block", "count", "dim", "cost [1]", "χ²/dof [1]"):
        s.add_column(c, justify="right")
    for b in rep["residuals"]:
        s.add_row(b["name"], str(b["count"]), str(b["dim"]), _fmt(b["cost"]), _fmt(b["chi2_per_dof"], 3))
    console.print(s)
