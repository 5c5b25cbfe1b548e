"""`poise simulate static`: a synthetic static recording of a 'true' robot, for tests and trials."""

from __future__ import annotations

import argparse

import numpy as np

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


def trajectory_summary(args: argparse.Namespace, rec, truth_name: str, duration_s: float) -> dict:
    """What `simulate trajectory` wrote, for --json: the files, the samples, the motion and the noise it added (SI
    units; None where the recording has no such quantity)."""
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
