"""`poise simulate static`: a synthetic static recording of a 'true' robot, for tests and trials."""

from __future__ import annotations

import argparse
import math

import numpy as np

from formats.errors import DataError
from formats.static_recording import write_recording
from poise import argtypes as at
from poise.output import console, err_console, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="make synthetic data")
    s = p.add_subparsers(dest="simulate_cmd", metavar="SUBCOMMAND")
    s.required = True
    st = s.add_parser("static", help="random balanced double-support postures + noisy CoPs")
    st.add_argument("robot", help="robot model name, e.g. tulip")
    st.add_argument("--postures", type=at.count, default=40, help="number of postures (default 40)")
    st.add_argument(
        "--truth",
        default="perturbed",
        help="true parameters: sim|mc|FILE|perturbed (sim with ±10 %% masses, ±1 cm CoMs; default)",
    )
    st.add_argument(
        "--noise-mm", type=at.nonnegative, default=4.0, help="CoP noise standard deviation in mm (default 4)"
    )
    st.add_argument("--base", default="right", help="base foot: right|left")
    st.add_argument("--seed", type=at.seed, default=0)
    st.add_argument("--truth-out", type=at.out_file, help="write the true parameter set (JSON) here")
    st.add_argument("--out", type=at.out_file, required=True, help="recording file to write (CSV)")
    st.add_argument(
        "--json", action="store_true", help="print what was written as JSON (paths, counts, noise in m)"
    )
    at.add_force(st)
    st.set_defaults(func=cmd_static)

    from poise import cmd_dynamic

    cmd_dynamic.register_simulate(s)


def cmd_static(args: argparse.Namespace) -> int:
    from identify.static import require_soles
    from identify.synthetic import simulate_static
    from robots.params_io import perturbed, resolve_params, save_parameter_set
    from robots.registry import get_model
    from trajectories.plan import robot_reference

    model = get_model(args.robot)
    require_soles(model)
    model.base_site(args.base)
    if args.truth == "perturbed":
        truth = perturbed(model.params["sim"], np.random.default_rng(args.seed + 1000), name="perturbed")
    else:
        truth = resolve_params(args.truth, model)
    with err_console.status(f"sampling {args.postures} balanced double-support postures"):
        rec = simulate_static(model, args.postures, truth, args.noise_mm / 1000, args.base, args.seed)
    source, _ = robot_reference(args.robot)
    # a robot no name finds: identify static reads its description from here, as dynamic recordings
    if source:
        rec.meta["robot_source"] = source
    write_recording(args.out, rec)
    _warn_too_few(model, args.base, args.postures)
    if args.truth_out:
        save_parameter_set(truth, args.truth_out)
    if args.json:
        print_json({"out": str(args.out), "truth_out": args.truth_out and str(args.truth_out), "robot": model.name,
                    "base": args.base, "postures": len(rec), "truth": truth.name, "seed": args.seed,
                    "cop_noise_m": args.noise_mm / 1000})  # fmt: skip
        return 0
    console.print(
        f"wrote {len(rec)} postures to {args.out} (truth: {truth.name}, CoP noise {args.noise_mm} mm)"
    )
    return 0


# A plan `simulate trajectory` refuses rather than records: no robot makes the motion (angles in degrees read as
# radians, a plan of another robot). Beyond its joint range by more than a turn, or this many times its efforts.
IMPOSSIBLE_RANGE_RAD = 2 * math.pi
IMPOSSIBLE_EFFORT_RATIO = 10.0


def checked_plan_problems(path: str, plan, model, traj, ps, rate_hz: float) -> list[str]:
    """`simulate trajectory`'s check of the plan it records, as `plan show` checks the one it draws
    (`as_it_is_verdict`: `plan check`'s checks at the recording's samples, 1 ms at most; a run's weight shifts are
    not the recording's): a motion no robot can make refused (DataError: `impossible_motion`); else the problems
    `plan check` finds (recorded as it is, with a warning)."""
    from poise.cmd_plan_trajectory import as_it_is_verdict

    # a 60 s iCub plan's self-clearance on a 1 ms grid takes 13 s, its simulation 1 s
    verdict = as_it_is_verdict(path, plan, model, traj, ps, dt=max(0.001, 1.0 / rate_hz), run=False)
    refused = impossible_motion(verdict.check)
    if refused:
        raise DataError(f"{path}: {refused}: no robot makes this motion, nothing simulated (angles in degrees? a "
                        f"plan holds radians; `plan check {path}` lists every problem)")  # fmt: skip
    return verdict.problems


def impossible_motion(check) -> str | None:
    """The problem of a plan's check (`trajectories.verify.TrajectoryCheck`) that no robot could run: a joint
    beyond its range by more than IMPOSSIBLE_RANGE_RAD, or efforts beyond IMPOSSIBLE_EFFORT_RATIO × their limits
    (that problem's line, and why it is beyond any robot); None for a motion a robot could make, within its
    limits or not."""
    beyond = -check.min_position_margin_rad
    if math.isfinite(beyond) and beyond > IMPOSSIBLE_RANGE_RAD:
        what, why = "position range", f"more than a turn ({IMPOSSIBLE_RANGE_RAD:.4g} rad) beyond"
    elif check.torque_ratio is not None and check.torque_ratio > IMPOSSIBLE_EFFORT_RATIO:
        what, why = "effort limit", f"more than {IMPOSSIBLE_EFFORT_RATIO:g}× the limit"
    else:
        return None
    line = next((p for p in check.problems if what in p), None)
    return f"{line or what} — {why}"


def trajectory_summary(
    args: argparse.Namespace, rec, truth_name: str, duration_s: float, plan_problems: list[str]
) -> dict:
    """What `simulate trajectory` wrote, for --json: the files, the samples, the motion and the noise it added (SI
    units; None where the recording has no such quantity), `ok` (written) and the problems `plan check` finds in
    the plan it recorded as it is (`plan_problems`, as `plan forecast` lists them)."""
    standing = rec.wrench is not None and rec.tau is None
    arm = {"viscous_nm_s_rad": args.viscous, "coulomb_nm": args.coulomb, "effort_noise_nm": args.effort_noise,
           "armature_kg_m2": args.armature}  # fmt: skip
    return {
        "out": str(args.out),
        "truth_out": args.truth_out and str(args.truth_out),
        "robot": rec.robot,
        "base": rec.base,
        "motion": rec.motion if standing else None,
        "samples": len(rec.t),
        "duration_s": duration_s,
        "rate_hz": args.rate_hz,
        "truth": truth_name,
        "seed": args.seed,
        "encoder_ticks": args.encoder_ticks,
        "force_noise_n": args.force_noise if standing else None,
        "moment_noise_nm": args.moment_noise if standing else None,
        **({k: None for k in arm} if standing else arm),
        "plan_problems": plan_problems,
        "ok": True,
    }


def _warn_too_few(model, base: str, n: int) -> None:
    """`identify static` needs ⌈p/2⌉ postures for p parameters: say so before writing a file it would refuse."""
    from robots.com_variants import variant

    need = {v: -(-len(variant(model, base, v).estimated) // 2) for v in ("full", "simplified")}
    if n < need["full"]:
        err_console.print(
            f"[yellow]warning:[/] {n} postures: `identify static` needs at least {need['full']} "
            f"({need['simplified']} with --model simplified)"
        )
