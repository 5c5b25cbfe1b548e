"""`poise simulate trajectory` (MuJoCo twin efforts for a trajectory plan) and `poise identify dynamic`."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from rich.markup import escape
from rich.table import Table

from formats.dynamic_recording import TRUE_JOINT_KEYS
from formats.errors import DataError
from poise import argtypes as at
from poise.output import console, dumps, err_console, named_errors, print_json, rel_se_text

if TYPE_CHECKING:
    from formats.dynamic_recording import DynamicRecording


READER = "identify dynamic"  # what the recordings' refusals say reads them


def _finite(name: str, v: float, positive: bool = False) -> float:
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise DataError(
            f"--{name} must be a {'positive' if positive else 'non-negative'} finite number, got {v}"
        )
    return v


def register_simulate(s: argparse._SubParsersAction) -> None:
    t = s.add_parser(
        "trajectory", help="execute a trajectory plan on the MuJoCo twin: encoders + joint efforts"
    )
    t.add_argument("plan", help="trajectory plan (JSON)")
    t.add_argument("--out", type=at.out_file, required=True, help="dynamic recording to write (CSV)")
    at.add_force(t)
    t.add_argument(
        "--rate-hz",
        type=at.number(0.0, 10_000.0, lo_open=True),
        default=500.0,
        help="sample rate (default 500 Hz)",
    )
    t.add_argument(
        "--truth",
        default="perturbed",
        help="true parameters: a set name|FILE|perturbed (plan's set, masses ±10 %%, CoMs ±1 cm, inertias ±20 %%)",
    )
    t.add_argument("--truth-out", type=at.out_file, help="write the true parameter set (JSON) here")
    t.add_argument(
        "--viscous", type=at.nonnegative, help="arm: true viscous friction, N·m·s/rad (all joints; 0.3)"
    )
    t.add_argument("--coulomb", type=at.nonnegative, help="arm: true Coulomb friction, N·m (all joints; 0.8)")
    t.add_argument("--effort-noise", type=at.nonnegative, help="arm: effort noise σ in N·m (0.2)")
    t.add_argument("--armature", type=at.nonnegative,
                   help="arm: true rotor inertia at every joint, kg·m² (Ia·q̈ on its own effort; default 0)")  # fmt: skip
    t.add_argument("--force-noise", type=at.nonnegative, help="standing: board force noise σ in N (2.0)")
    t.add_argument("--moment-noise", type=at.nonnegative, help="standing: board moment noise σ in N·m (0.3)")
    t.add_argument(
        "--encoder-ticks",
        type=at.integer(0),
        default=16384,
        help="encoder ticks per revolution the recorded angles are rounded to (default 16384; 0: exact); a "
        "prismatic joint's positions to N/(2π) ticks per metre (0.38 mm steps at 16384)",
    )
    t.add_argument("--seed", type=at.seed, default=0,
                   help="seed of the noise and, with --truth perturbed, of the perturbation (another truth per seed)")  # fmt: skip
    t.add_argument("--json", action="store_true",
                   help="print what was written as JSON (paths, samples, duration, noise; SI units)")  # fmt: skip
    t.set_defaults(func=cmd_simulate_trajectory)


def register_identify(s: argparse._SubParsersAction) -> None:
    d = s.add_parser("dynamic", help="base inertial parameters (+ friction) from a trajectory's efforts")
    d.add_argument(
        "recording", nargs="+",
        help="dynamic recording(s) (CSV, '# poise dynamic recording v1' header; README: the dynamic recording): t_s "
        "in s, q:JOINT in rad (deg with '# angle_unit: deg'), tau:JOINT in N·m (N for a prismatic joint) or i:JOINT "
        "motor currents in A, a board wrench fx_n…mz_nm in N and N·m; `poise run` or `poise simulate trajectory` "
        "writes one. Several are fitted together (same robot, rate and, on boards, foot placement)",
    )  # fmt: skip
    d.add_argument("--validate", help="a second recording: predict its efforts (RMS error)")
    d.add_argument(
        "--cutoff-hz",
        type=at.positive,
        # identify.dynamic.band_cutoff's rule (CUTOFF_PER_BAND, EDGE_PERIODS / MAX_EDGE_FRACTION, DEFAULT_CUTOFF_HZ),
        # spelled out: importing that module here would cost every poise command seconds
        help="zero-phase Butterworth cut-off, Hz (default: 4× the recording's motion_band_hz, raised for a short "
        "recording to 20 Hz·s / its duration but not past 5 Hz, so the filter's transients, 2 cut-off periods at "
        "each end, stay within 10 %% of it; 5 Hz if undeclared)",
    )
    d.add_argument(
        "--differentiation",
        choices=["butterworth", "adaptive"],
        default="butterworth",
        help="joint velocities/accelerations: the angles low-passed at the cut-off, or the iCub paper's adaptive "
        "windowing (no fixed band); the regressor then passes the cut-off's filter either way",
    )
    d.add_argument(
        "--torque-constant", type=_torque_constant, metavar="K|JOINT=K,…",
        help="recordings of motor currents (i:JOINT columns, A): the N·m/A at each joint (motor torque constant × "
        "gear ratio × efficiency) that turns them into joint torques — one for every joint, or per joint; over "
        "the recording's torque_constant metadata",
    )  # fmt: skip
    d.add_argument("--no-friction", action="store_true", help="rigid-body parameters only")
    d.add_argument(
        "--armature", action="store_true",
        help="joint torques: estimate each joint's rotor inertia reflected at it (Ia@JOINT, kg·m²; Ia·q̈ on its own "
        "row) where the base parameters do not already hold it; the joints whose rotor inertia is grouped into them "
        "(e.g. the first joint's) are named",
    )  # fmt: skip
    d.add_argument("--ols", action="store_true", help="ordinary LS (default: per-joint weighted LS)")
    d.add_argument(
        "--instruments", nargs="*", metavar="PLAN",
        help="the trajectory plan(s) the recordings executed (one for all, or one each; none: each recording's "
        "run.json names it, checked unchanged): the instrumental-variable estimate with the planned angles' "
        "regressor as instruments (IDIM-IV), unbiased by the encoders' noise in the regressor",
    )  # fmt: skip
    d.add_argument("--simplified", action="store_true", help="the robot description's simplified model")
    d.add_argument("--reference", help="compare with a parameter set: name|FILE")
    d.add_argument(
        "--essential",
        type=at.positive,
        metavar="PCT",
        help="estimate only the base parameters the recording determines to PCT %% relative SE; the others, and "
        "those the motion does not excite at all, are held at their --prior value and named (e.g. 15)",
    )
    d.add_argument("--prior", help="parameter set (name|FILE) for --essential (default: the model's first)")
    d.add_argument(
        "--drift", type=at.integer(0, 3), default=0, metavar="POLY_DEGREE",
        help="board wrench: the base sole may creep on its board — fit its displacement as a polynomial in each "
        "recording's time of this degree (an integer 0–3, not an angle; default 0: no creep; dx1, dy1, … in m; e.g. "
        "1 for recordings of a minute)",
    )  # fmt: skip
    d.add_argument(
        "--delay", type=_delay, metavar="auto|MS",
        help="the measured efforts (board wrench, torques) lag the encoders by MS ms, or estimate each recording's "
        "lag with the parameters (auto; searched within ±50 ms)",
    )  # fmt: skip
    d.add_argument(
        "--scatter", action="store_true",
        help="several recordings: refit each alone (the runs of one plan together, by their run.json) and report "
        "how far their estimates scatter about the joint fit in their own SEs (Birge's ratio per parameter; ~1 "
        "when noise alone separates them)",
    )  # fmt: skip
    d.add_argument(
        "--partial",
        action="store_true",
        help="fit a recording whose run stopped before its plan's end (run.json status 'stopped…'); refused without "
        "it: the plan's excitation was cut there, so the fit and the plan's forecast rest on part of the design",
    )
    d.add_argument(
        "--no-average", action="store_true",
        help="fit repeated runs of one plan (run.json) as independent recordings; by default the runs of a plan "
        "on the same sample times are averaged sample by sample first: what repeats share (quantisation, timing, "
        "model error) does not average out, and side by side it would shrink the SEs as if it did",
    )  # fmt: skip
    d.add_argument(
        "--well",
        type=at.positive,
        metavar="PCT",
        default=15.0,
        help="name the base parameters this recording determines to PCT %% relative SE and those it does not "
        "(default 15; all stay estimated)",
    )
    d.add_argument(
        "--practical-s",
        type=at.positive,
        metavar="S",
        default=600.0,
        help="name the base parameters that even S s of this motion repeated would not determine to --well %% "
        "(noise alone, SE ∝ 1/√duration; default 600)",
    )
    d.add_argument("--json", action="store_true", help="print the result as JSON")
    d.add_argument(
        "--json-out", type=at.out_file, metavar="FILE",
        help="also write the result --json prints, the same JSON object, to FILE (whole or not at all; nothing "
        "written when the fit is refused), while the text goes to stdout: a script reads the file, a person the "
        "text (with --json: both)",
    )  # fmt: skip
    d.add_argument(
        "--plot",
        type=at.image_file,
        help="predicted vs measured figure (PNG) of the validation (or fit) data: joint efforts, or a standing "
        "recording's board wrench (Fz, Mx, My)",
    )
    at.add_force(d)
    d.set_defaults(func=cmd_identify_dynamic)


SIMULATED_ARM = {
    "viscous": 0.3,
    "coulomb": 0.8,
    "effort_noise": 0.2,
    "armature": 0.0,
}  # `simulate`'s defaults
SIMULATED_BOARDS = {"force_noise": 2.0, "moment_noise": 0.3}
# `simulate trajectory` warns when a default of the arm's friction or noise (one the user did not give) passes this
# share of the plan's most loaded joint's RMS inverse-dynamics torque: the defaults are sized for a UR5-class arm
# (its shoulder ~54 N·m RMS on tests/data/ur5_6s.json), and swamp a small robot's dynamics (an SO-100's shoulder
# ~0.6 N·m RMS: then 1 of 38 base parameters determined). Compared with the most loaded joint, not each: every
# arm has light wrist joints that any friction dominates (the UR5's wrist_3, 0.03 N·m RMS) and identifies well.
TWIN_DEFAULT_SHARE = 0.25
TWIN_DEFAULT_SUGGESTED = 0.05  # the hint's example values: the largest at this share of that torque


def _twin_defaults_hint(names: list[str], rigid: np.ndarray, qd: np.ndarray, args: argparse.Namespace,
                        joints: list[str]) -> str | None:  # fmt: skip
    """`simulate trajectory` on an arm: one warning line when a default imperfection the user did not give (`names`
    of SIMULATED_ARM's coulomb, viscous, effort_noise) is large against the plan's torques — over
    TWIN_DEFAULT_SHARE of the RMS inverse-dynamics torque (`rigid`, (K, n) N·m, friction- and noise-free) of its
    most loaded joint; the viscous friction as its RMS torque over the plan (coefficient × joint speed) at the
    joint where that is largest. None when none is."""
    rms = np.sqrt(np.mean(rigid**2, axis=0))
    top = int(np.argmax(rms))
    limit = TWIN_DEFAULT_SHARE * rms[top]
    sizes = {  # N·m: what each default puts on the efforts
        "coulomb": args.coulomb,
        "viscous": args.viscous * float(np.sqrt(np.mean(qd**2, axis=0)).max()),
        "effort_noise": args.effort_noise,
    }
    large = [n for n in ("coulomb", "viscous", "effort_noise") if n in names and sizes[n] > limit]
    if not large:
        return None
    said = {
        "coulomb": f"Coulomb friction {args.coulomb:g} N·m",
        "viscous": f"viscous friction {args.viscous:g} N·m·s/rad ({sizes['viscous']:.2g} N·m RMS over the plan)",
        "effort_noise": f"effort noise σ {args.effort_noise:g} N·m",
    }
    scale = TWIN_DEFAULT_SUGGESTED * rms[top] / max(sizes[n] for n in large)
    example = " ".join(f"--{n.replace('_', '-')} {getattr(args, n) * scale:.2g}" for n in large)
    named = [said[n] for n in large]
    named = ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else named[0]
    return (f"warning: {joints[top]}, the plan's most loaded joint, needs {rms[top]:.3g} N·m RMS of inverse "
            f"dynamics (peak {np.abs(rigid[:, top]).max():.3g} N·m); the twin's default {named} "
            f"exceed{'s' if len(large) == 1 else ''} {100 * TWIN_DEFAULT_SHARE:.0f} % of it and would swamp this "
            f"robot's dynamics in the recording: scale {'it' if len(large) == 1 else 'them'} with "
            f"{', '.join('--' + n.replace('_', '-') for n in large)} (e.g. {example}: the largest "
            f"{100 * TWIN_DEFAULT_SUGGESTED:.0f} % of it)")  # fmt: skip


def _twin_options(args: argparse.Namespace, standing: bool) -> None:
    """`simulate trajectory`'s imperfections of the plan's kind filled in with their defaults; those of the other
    kind refused (an arm has no boards, a standing robot's efforts are the boards')."""
    mine, other = (SIMULATED_BOARDS, SIMULATED_ARM) if standing else (SIMULATED_ARM, SIMULATED_BOARDS)
    given = [name for name in other if getattr(args, name) is not None]
    if given:
        what = "a standing robot's boards" if standing else "a fixed-base arm's joint efforts"
        raise DataError(f"--{given[0].replace('_', '-')} simulates what this plan does not record (it records "
                        f"{what})")  # fmt: skip
    for name, value in (mine | other).items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def _check_inertias(model, truth, what: str, floating: bool) -> None:
    """DataError unless every body a joint moves has an inertia in `truth`: MuJoCo refuses one without in its own
    words ("mass and inertia of moving bodies must be larger than mjMINVAL"). A body is a rigid group (links welded
    by fixed joints, `robots.rigid_groups`): a point mass welded to a link with inertia (a sensor frame, a gripper
    mount) is part of its body. A set of masses and CoMs alone (TUlip's `mc`) is a static model's."""
    lacking = without_inertia(model, truth, floating)
    if lacking:
        whole = [n for n in model.params if not without_inertia(model, model.parameter_set(n), floating)]
        sets = f"--truth {' or '.join(whole)} (a set with inertias) or " if whole else ""
        static = not any(any(i6) for i6 in truth.inertia.values())
        why = ("masses and CoMs alone do not make a dynamic model" if static else
               "each is a point mass a joint moves (alone, or in a line with the point masses welded to it), which "
               "has no rotational inertia")  # fmt: skip
        raise DataError(f"{what} has no inertia for {len(lacking)} of the {model.name} bodies with mass "
                        f"({', '.join(lacking[:6])}{', …' if len(lacking) > 6 else ''}): {why}, and MuJoCo cannot "
                        f"simulate it — give {sets}a parameter-set FILE with an inertia for every link a joint "
                        "moves (point masses welded to a link with inertia need none)")  # fmt: skip


def without_inertia(model, ps, floating: bool = True) -> list[str]:
    """The model's links with mass in parameter set `ps` whose body (the rigid group of links welded by fixed joints)
    has no inertia once composed, among the bodies a joint moves (the root's too when the robot floats)."""
    from robots.rigid_groups import groups_without_inertia

    return [n for links in groups_without_inertia(model, ps, floating).values() for n in links]


def cmd_simulate_trajectory(args: argparse.Namespace) -> int:
    from drivers.emulators.mujoco_arm import (
        ArmImperfections,
        physical_truth,
        rigid_efforts,
        standing_wrench,
        with_imperfections,
    )
    from formats.dynamic_recording import DynamicRecording, true_joint_units, write_dynamic_recording
    from formats.trajectory_plan import load_trajectory_plan
    from poise.cmd_plan_trajectory import warn_fails_check
    from poise.cmd_simulate import checked_plan_problems, trajectory_summary
    from robots.params_io import perturbed, resolve_params, save_parameter_set
    from trajectories.plan import plan_model, plan_recording, plan_trajectory
    from trajectories.verify import sample_grid

    _finite("rate-hz", args.rate_hz, positive=True)
    for name in ("viscous", "coulomb", "effort_noise", "armature"):
        if getattr(args, name) is not None:
            _finite(name.replace("_", "-"), getattr(args, name))
    if args.encoder_ticks < 0 or args.seed < 0:
        raise DataError("--encoder-ticks and --seed must not be negative")
    plan = load_trajectory_plan(args.plan, "simulate trajectory")
    model = plan_model(plan)
    traj = plan_trajectory(plan, model)
    guess = plan.params or next(iter(model.params))
    problems = checked_plan_problems(args.plan, plan, model, traj, guess, args.rate_hz)
    how = plan_recording(plan, traj)
    if args.truth == "perturbed":
        _check_inertias(
            model,
            model.parameter_set(guess),
            f"--truth perturbed varies the plan's set {guess!r}, which",
            how.standing,
        )
        rng = np.random.default_rng(args.seed + 1000)
        truth = perturbed(model.parameter_set(guess), rng, 0.1, 0.01, "perturbed", inertia_rel=0.2)
    else:
        truth = resolve_params(args.truth, model)
        _check_inertias(model, truth, f"--truth {args.truth}", how.standing)
    t = sample_grid(traj, 1.0 / args.rate_hz)
    q, qd, qdd = traj.sample(t)
    rng = np.random.default_rng(args.seed)
    wrench = tau = hint = None
    defaulted = [n for n in ("coulomb", "viscous", "effort_noise") if getattr(args, n, None) is None]
    _twin_options(args, how.standing)
    if how.standing:
        truth = physical_truth(truth)
        with err_console.status(f"MuJoCo inverse dynamics (floating robot, soles held) of {len(t)} samples"):
            wrench = standing_wrench(
                model, truth, plan.base, q, qd, qdd, args.force_noise, args.moment_noise, rng
            )
        ticks = args.encoder_ticks / (2 * np.pi)
        qm = np.round(q * ticks) / ticks if ticks > 0 else q
    else:
        im = ArmImperfections(args.viscous, args.coulomb, args.effort_noise, args.encoder_ticks / (2 * np.pi),
                              args.armature)  # fmt: skip
        with err_console.status(f"MuJoCo inverse dynamics of {len(t)} samples"):
            rigid = rigid_efforts(model, truth, q, qd, qdd, args.armature)  # without friction and noise
        qm, tau = with_imperfections(q, qd, rigid, im, rng)
        if defaulted:  # the defaults sized against the plan's own torques
            hint = _twin_defaults_hint(defaulted, rigid, qd, args, list(model.joint_names))
    meta = {"source": f"MuJoCo twin, truth {truth.name}, seed {args.seed}", **how.meta}
    # the joints' truth, which a parameter set cannot hold (identify dynamic --reference)
    if not how.standing:
        meta |= {key: f"{getattr(args, kind):g}" for kind, key in TRUE_JOINT_KEYS.items()}
        meta |= true_joint_units(model.joint_names, [j.name for j in model.joints if j.type == "prismatic"])
    if plan.robot_source:
        meta["robot_source"] = plan.robot_source
    rec = DynamicRecording(model.name, plan.base, list(model.joint_names), t, qm, tau, wrench, meta=meta)
    write_dynamic_recording(rec, args.out)
    if args.truth_out:
        save_parameter_set(truth, args.truth_out)
    warn_fails_check(args.plan, problems, "recorded as it is")
    if hint:
        err_console.print(hint, markup=False, highlight=False, soft_wrap=True)
    if args.json:
        print_json(trajectory_summary(args, rec, truth.name, traj.duration, problems))
        return 0
    console.print(f"wrote {len(t)} samples ({traj.duration:.1f} s at {args.rate_hz:g} Hz) to {args.out}")
    return 0


def cmd_identify_dynamic(args: argparse.Namespace) -> int:
    from formats.atomic import write_text_atomic
    from formats.dynamic_recording import read_dynamic_recording
    from identify.dynamic import SCALE_RESOLVED_SE, DynamicEstimator, validation_error
    from identify.recording_model import (
        checked_for_model,
        efforts_beyond_limits,
        model_of_recording,
        repeated_recordings,
        run_problem,
        stuck_efforts,
    )
    from robots.params_io import resolve_params
    from robots.registry import same_robot

    if args.cutoff_hz is not None:
        _finite("cutoff-hz", args.cutoff_hz, positive=True)
    recs, currents = [], []
    first = read_dynamic_recording(args.recording[0], READER)
    model = model_of_recording(first, args.recording[0])
    too_large: list[str] = []  # recordings whose efforts pass the joints' effort limits several times over
    stuck: list[str] = []  # moving joints whose effort reads 0 most of the time
    scale: list[str] = []  # recordings whose efforts are far (not a unit) off the description's dynamics
    own_cutoff = args.cutoff_hz is None  # the fit's cut-off from the recordings' declared band
    if args.prior and args.essential is None:
        raise DataError("--prior is the parameter set --essential fixes poorly determined parameters at: give "
                        "--essential PCT too, or drop it")  # fmt: skip
    # the efforts' scale is checked against it
    prior = resolve_params(args.prior, model) if args.prior else None

    def other_robot(r, path: str, what: str) -> None:
        if not same_robot(r.robot, first.robot):
            raise DataError(f"{what}{path}: a recording of {r.robot!r}, {args.recording[0]} of {first.robot!r}: "
                            "one robot's recordings only")  # fmt: skip

    for path in args.recording:  # motor currents become joint torques here: the fit sees efforts only
        r = first if path is args.recording[0] else read_dynamic_recording(path, READER)
        other_robot(r, path, "")
        r, used = _efforts_of(checked_for_model(r, path, model, own_cutoff), path, args.torque_constant)
        recs.append(r)
        currents += [used | {"role": "fit"}] if used else []
        too_large += (limits := efforts_beyond_limits(r, path, model))
        stuck += stuck_efforts(r, path, model)
        scale += _effort_scale(r, path, model, prior, limits)
    rec = recs[0]
    # Every input is read before the fit: a bad --reference or --validate fails now, not after the work.
    ref_ps = resolve_params(args.reference, model) if args.reference else None
    if args.essential is not None:
        _finite("essential", args.essential, positive=True)
    vrec = read_dynamic_recording(args.validate, READER) if args.validate else None
    if vrec is not None:
        other_robot(vrec, args.validate, "--validate ")
    if vrec is not None and vrec.base != first.base:
        raise DataError(f"--validate {args.validate}: a recording on {vrec.base!r}, the fit's on {first.base!r}: "
                        "validate on the same base")  # fmt: skip
    if vrec is not None and vrec.wrench is not None and vrec.motion != first.motion:
        raise DataError(f"--validate {args.validate}: a {vrec.motion} motion, the fit's a {first.motion} one: "
                        "validate on the same motion")  # fmt: skip
    if vrec is not None:
        vrec, used = _efforts_of(
            checked_for_model(vrec, args.validate, model, own_cutoff=False),
            args.validate,
            args.torque_constant,
        )
        too_large += (limits := efforts_beyond_limits(vrec, args.validate, model))
        stuck += stuck_efforts(vrec, args.validate, model)
        scale += _effort_scale(vrec, args.validate, model, prior, limits)
        currents += [used | {"role": "validation"}] if used else []
    if args.torque_constant is not None and not currents:
        raise DataError("--torque-constant: no recording holds motor currents (i:… columns); torques are used as "
                        "recorded")  # fmt: skip
    runs = [run_of(path) for path in args.recording]  # each run.json read once
    for path, run in zip(args.recording, runs, strict=True):
        _refuse_damaged_run(path, run)
    plans = [None if isinstance(run, Exception) else str(run.sha) for run in runs]
    repeated_recordings(recs, args.recording, plans, None if vrec is None else (vrec, args.validate))
    for r, path, run in zip(recs, args.recording, runs, strict=True):
        if not isinstance(run, Exception):
            run_problem(r, path, run.ticks, run.rate_hz)
    vrun = run_of(args.validate) if vrec is not None else None
    if vrun is not None:
        _refuse_damaged_run(args.validate, vrun, "--validate ")
    if vrun is not None and not isinstance(vrun, Exception):
        run_problem(vrec, args.validate, vrun.ticks, vrun.rate_hz)
    # after the refusals, before the fit: a unit mistake is worth knowing early
    for msg in too_large + scale + stuck:
        err_console.print(f"[yellow]warning:[/yellow] {escape(msg)}", highlight=False)
    partial = [{"recording": k + 1, "file": path, "status": run.partial} | _coverage(r, run)
               for k, (path, run, r) in enumerate(zip(args.recording, runs, recs, strict=True))
               if not isinstance(run, Exception) and run.partial]  # fmt: skip
    # streamed whole and stopped after (the stop, a lead-out): by its ticks, or where run.json does not count them,
    # by its recording covering the plan's duration
    after = [{"recording": k + 1, "file": path, "status": run.stopped_after}
             for k, (path, run) in enumerate(zip(args.recording, runs, strict=True))
             if not isinstance(run, Exception) and run.stopped_after]  # fmt: skip
    whole = [
        p
        for p in partial
        if not runs[p["recording"] - 1].ticks_counted and _covers_plan(p, recs[p["recording"] - 1])
    ]
    after += [{"recording": p["recording"], "file": p["file"], "status": p["status"]} for p in whole]
    partial = [p for p in partial if p not in whole]
    if partial and not args.partial:  # the design's excitation was cut: its fit is not the plan's
        p = partial[0]
        raise DataError(f"{p['file']}: its run stopped before the plan's end ({p['status']}): {_covers(p)}, the "
                        "plan's excitation cut there; fit it anyway with --partial, or run the plan again")  # fmt: skip
    for p in partial:  # before the fit: a stopped run's motion is not the plan's (its band, its forecast)
        err_console.print(f"[yellow]warning:[/yellow] {escape(p['file'])} is a partial run ({escape(p['status'])}"
                          f"): {_covers(p)}; fitted as recorded (--partial), the plan's forecast does not hold for "
                          "it", highlight=False)  # fmt: skip
    for p in after:
        err_console.print(f"[yellow]note:[/yellow] {escape(p['file'])}: its run stopped after streaming its whole "
                          f"plan ({escape(p['status'])}): fitted whole", highlight=False)  # fmt: skip
    late = _late_runs(args.recording, runs)
    vlate = _late_runs([args.validate], [vrun]) if vrun is not None else []
    for p in late + vlate:
        err_console.print(f"[yellow]warning:[/yellow] {escape(_late_text(p))}", highlight=False)
    if args.instruments == []:
        args.instruments = [_run_plan(path, run) for path, run in zip(args.recording, runs, strict=True)]
    planned = _planned_angles(args.instruments, recs, model) if args.instruments else None
    ran = None if planned is not None else _angles_that_ran(args.recording, runs, recs, model)
    quantity = "torque" if rec.tau is not None else "wrench"
    source = args.recording[0] if len(recs) == 1 else f"{len(recs)} recordings"
    recorded = sum(len(r.t) for r in recs)  # every recording's rows, before repeats are averaged
    rep = _repeats(recs, plans, average=not args.no_average)
    if rep.averaged:
        source += f", the runs of each plan averaged ({len(rep.groups)} fitted)"
        recs = rep.recordings
        planned = None if planned is None else [planned[g[0]] for g in rep.groups]
        ran = None if ran is None else [ran[g[0]] for g in rep.groups]

    def estimator(cutoff_hz: float | None) -> DynamicEstimator:
        return DynamicEstimator(
            model,
            rec.base,
            args.simplified,
            not args.no_friction,
            cutoff_hz,  # None: the recording's band sets it (est.cutoff_)
            weighted=not args.ols,
            quantity=quantity,
            essential_pct=args.essential,
            prior=prior,
            drift=args.drift,
            delay=args.delay,
            armature=args.armature,
            differentiation=args.differentiation,
        )

    est = estimator(args.cutoff_hz)
    offsets = _tare_offsets(rep.groups, runs) if quantity == "wrench" else None
    gains = _gain_sources(rep.groups, runs, recs) if quantity == "wrench" else GainSources([], [], [])
    with named_errors(
        args.recording[0] if len(args.recording) == 1 else None
    ):  # several: the fit numbers them
        est.fit(recs, instruments=planned, offsets=offsets, shared_offsets=gains.sources)
    fit, cutoff = est.fit_, est.cutoff_
    nb = est.dynamic_base_.rank
    for item in (*fit.gaps, *fit.dropped, *fit.placements):  # recordings numbered as given, not as fitted
        item["recording"] = rep.groups[item["recording"] - 1][0] + 1
        item["file"] = args.recording[item["recording"] - 1]
    if args.reference:
        # a physics twin's run compared with its own truth: the joints' rotor inertia, damping and dry friction
        # from its run.json, the grouped rotor inertia added to the base parameters that hold it
        twin = (
            _twin_joints(args.reference, args.recording[0], runs[0], model) if quantity == "torque" else None
        )
        joints_from = "run.json twin_joints"
        if twin is None and quantity == "torque" and (twin := _declared_joints(recs, model)) is not None:
            joints_from = "the recording's declared joint truth"
        armature = [twin[j]["armature"] for j in model.joint_names] if twin else None
        ref = est.reference_values(ref_ps, armature=armature)
        z = (fit.values[:nb] - ref) / fit.se[:nb]  # NaN for parameters held at a prior value
        done = np.isfinite(z)
        fit.reference = {
            "name": args.reference,
            "values": ref.tolist(),
            "z": [float(v) if np.isfinite(v) else None for v in z],
            "estimated": int(done.sum()),
            "within_3se": int(np.sum(np.abs(z[done]) <= 3)),
            "max_abs_z": float(np.max(np.abs(z[done]))) if done.any() else None,
        }
        if twin:
            fit.reference["joints"] = _joint_reference(fit, twin, nb, joints_from)
    good, poor = fit.determined(args.well)
    needed = dict(zip(fit.symbols[:nb], fit.needed_s(args.well)[:nb], strict=True))
    unresolved = [s for s in poor if not np.isfinite(needed[s])]
    beyond = [s for s in poor if np.isfinite(needed[s]) and needed[s] > args.practical_s]
    out = fit.to_dict() | {
        "cutoff_hz": cutoff,
        "differentiation": args.differentiation,
        "well_pct": args.well,
        "determined": good,
        "not_determined": poor,
        "needed_s": {s: float(needed[s]) if np.isfinite(needed[s]) else None for s in poor},
        "practical_s": args.practical_s,
        "beyond_practical": beyond,
        "scale_unresolved": unresolved,
    }
    out = {"ok": True} | _whose(model, first) | out
    out["recording_samples"] = recorded  # the rows recorded, before runs of one plan are averaged
    # the exact combinations: the result means the same in any version's base (model export)
    if quantity == "torque":
        K, names = est.dynamic_base_.combination_matrix(), est.dynamic_base_.names
        for a, p in enumerate(out["parameters"][:nb]):
            p["terms"] = {names[i]: float(K[a, i]) for i in np.flatnonzero(K[a])}
    if currents:
        out["efforts_from_currents"] = currents
    # what sigma_nm, rmse_nm (and validation's lists) are of, in order, and their units (the _nm keys carry N for
    # a force row: their names are kept for compatibility)
    out["rows"] = _row_labels(model, quantity)
    out["row_units"] = [label.rsplit(" ", 1)[1] for label in out["rows"]]
    _warn_wrong_signs(out["sign_violations"], compact=False)  # out["impossible"]
    _warn_wrong_signs(out["sign_violations"], compact=True)
    missed = [(out["rows"][j], fit.rmse[j], fit.measured_rms[j]) for j in fit.unexplained_rows()]
    if missed:  # before the table: its SEs and the 3-SE tally mean nothing here
        out["unexplained_rows"] = [
            {"row": lab, "rmse": float(r), "measured_rms": float(m)} for lab, r, m in missed
        ]
        err_console.print(
            "[yellow]warning:[/yellow] the fit misses "
            + ", ".join(
                f"{_with_unit(lab, r)} rms (its own RMS: {m:.3g} {lab.rsplit(' ', 1)[1]})"
                for lab, r, m in missed
            )
            + ": predicting 0 would fit better, so the estimates do not hold the recording whatever their SEs say"
            + (
                " (the planned angles instrument this motion too weakly: fit without --instruments)"
                if fit.instruments
                else ""
            ),
            highlight=False,
        )
    if too_large:
        out["efforts_beyond_limits"] = too_large
    if scale:
        out["effort_scale_far_off"] = scale
    if stuck:
        out["efforts_stuck_at_zero"] = stuck
    if partial:
        out["partial_runs"] = partial
    if after:
        out["stopped_after_stream"] = after
    if late:
        out["late_ticks"] = late
    fitted_files = [[args.recording[i] for i in g] for g in rep.groups]
    misfit = _misfit(est, recs, model, estimator, fitted_files) if quantity == "torque" else []
    if misfit:  # a joint the model does not follow: its map in the robot's configuration, most often
        out["joint_misfit"] = misfit
        err_console.print(f"[yellow]warning:[/yellow] {escape(_misfit_text(misfit, len(args.recording) > 1, cutoff))}",
                          highlight=False)  # fmt: skip
    uncal = [k + 1 for k, run in enumerate(runs) if not isinstance(run, Exception) and run.uncalibrated]
    if uncal:
        out["uncalibrated_boards"] = uncal
    tare_sd = [None if isinstance(run, Exception) else run.tare_mass_sd for run in runs]
    if any(v is not None for v in tare_sd):
        out["tare_mass_sd_kg"] = tare_sd
    out["tare_in_se"] = [
        k + 1 for k, g in enumerate(rep.groups) if offsets is not None and offsets[k] is not None
    ]
    out["gains_in_se"], out["weight_sd_in_se"] = gains.cells_in, gains.weight_in
    if rep.averaged:
        out["repeats_averaged"] = [[k + 1 for k in g] for g in rep.groups]
        shared = _shared_noise(rep.groups, runs)
        if shared:
            out["repeats_sharing_noise"] = [[k + 1 for k in g] for g in shared]
    rocked = _rocked(args.recording, runs)
    if rocked:
        out["soles_rocked"] = rocked
    scatter = None
    if args.scatter:
        from identify.scatter import recording_scatter

        groups = [plans[g[0]] or args.recording[g[0]] for g in rep.groups]  # no run.json: its own group
        scatter = recording_scatter(est, recs, planned, groups)
        out["scatter"] = scatter.to_dict(fit.symbols)
    if vrec is not None:
        with named_errors(f"--validate {args.validate}"):
            pred, meas = est.predict(vrec)
        out["validation"] = validation_error(pred, meas) | {"recording": args.validate, "rows": out["rows"]}
        zero = out["validation"]["zero_rms_rows"] = [
            out["rows"][j] for j in out["validation"]["zero_rms_rows"]
        ]
        if zero:  # null in relative_pct: no relative error of a row that measured nothing
            out["validation"]["relative_pct_null"] = "the row's measured efforts are all 0: no relative error"
        differ = _physics_differ(first, runs[0], vrec, vrun, model)
        out["validation"] |= {"declared_physics_differ": differ} if differ else {}
        if not isinstance(vrun, Exception):  # its run.json says how it went: the prediction misses that too
            said = [{"sole": r["sole"], "rocked_share": r["rocked_share"]}
                    for r in _rocked([args.validate], [vrun])]  # fmt: skip
            out["validation"] |= {"soles_rocked": said} if said else {}
            out["validation"] |= {"partial_run": vrun.partial} if vrun.partial else {}
            out["validation"] |= (
                {"late_ticks": {k: v for k, v in vlate[0].items() if k != "recording"}} if vlate else {}
            )
    if args.plot:
        _plot(est, model.name, out, rec if vrec is None else vrec, args)
    if ran is not None and not fit.instruments:  # last: the forecast prepares rows with the estimator
        _warn_if_below_plan(out, est, recs, ran, _fitted_tare_sd(rep.groups, runs, offsets))
    if args.json_out:  # the very JSON --json prints, for a script beside the text
        write_text_atomic(args.json_out, dumps(out) + "\n", "JSON result")
    if args.json:
        print_json(out)
        return 0
    table = Table(
        title=f"{model.name}: dynamic base parameters from {source} ({fit.samples} regressor rows from "
        f"{fit.fitted_samples} decimated samples of {recorded} recorded"
        + (
            f"; {fit.reversal_rows} rows ({100 * fit.reversal_share:.0f} %) dropped around velocity reversals"
            if fit.reversal_rows
            else ""
        )
        + ")"
    )
    for col in ("parameter", "grouping / meaning", "unit", "estimate", "SE", "rel. SE %") + (
        ("reference", "z") if args.reference else ()
    ):
        table.add_column(col, justify="left" if col.startswith(("param", "group", "unit")) else "right")
    for k, (s, f, u) in enumerate(zip(fit.symbols, fit.formulas, fit.units, strict=True)):
        row = [s, f, u, f"{fit.values[k]:.5g}", f"{fit.se[k]:.2g}", rel_se_text(fit.rel_se_pct[k])]
        if args.reference:
            joints = fit.reference.get("joints", {"values": {}, "z": {}})
            if k < nb:
                row += [f"{fit.reference['values'][k]:.5g}", _z_text(fit.reference["z"][k])]
            elif s in joints["values"]:
                row += [f"{joints['values'][s]:.5g}", _z_text(joints["z"][s])]
            else:
                row += ["", ""]
        table.add_row(*row)
    console.print(table)
    console.print(("q̇, q̈ by adaptive windowing, " if args.differentiation == "adaptive" else "")
                  + f"zero-phase Butterworth cut-off {cutoff:.3g} Hz; "
                  + ("ordinary least squares (--ols)" if args.ols else "weighted least squares (1/σ per row group)"))  # fmt: skip
    if fit.top_correlations:
        console.print("most correlated: " + ", ".join(f"ρ({a},{b}) = {rho:+.4f}" for a, b, rho in fit.top_correlations[:3]),
                      highlight=False)  # fmt: skip
    for c in currents:
        console.print(f"{c['role']} recording {c['recording']}: joint torques from motor currents × torque constants "
                      "(N·m/A): " + ", ".join(f"{j} {k:.6g} ({c['from'][j]})"
                                               for j, k in c["torque_constant_nm_per_a"].items()),
                      highlight=False)  # fmt: skip
    if rep.averaged:
        together = "; ".join(", ".join(str(k + 1) for k in g) for g in rep.groups if len(g) > 1)
        console.print(
            f"repeats averaged sample by sample (runs of one plan, by their run.json): recordings {together} — "
            f"{len(rep.groups)} fitted; what repeats share shows in the SEs (--no-average: each run on its own)",
            highlight=False,
        )
    known = [v for v in out.get("tare_mass_sd_kg", []) if v is not None]
    if known and max(known) > 0 and quantity == "wrench":  # ideal boards (no noise) tare exactly
        total = next((k for k, f in enumerate(fit.formulas) if f.count("m@") == len(model.links)), None)
        se = "" if total is None else f"; {fit.symbols[total]}'s SE here {fit.se[total]:.4f} kg"
        how = ("the SEs include it (run.json tare_wrench_cov)" if out["tare_in_se"] else
               "no SE from its residuals includes it")  # fmt: skip
        console.print(
            f"the tare of each run leaves its total load uncertain by σ {_span(known)} kg, a constant offset in that "
            f"run's Fz: {how}{se}",
            highlight=False,
        )
    calibrated = [k + 1 for k, g in enumerate(rep.groups)
                  if all(not isinstance(runs[i], Exception) and runs[i].gains_key is not None for i in g)]  # fmt: skip
    if calibrated:

        def which(ks: list[int]) -> str:
            return "no recording" if not ks else "every recording" if ks == calibrated else (
                "recording(s) " + ", ".join(map(str, ks)))  # fmt: skip

        console.print(
            "the gains' own errors are in the SEs, one error for all the runs on the same gains (or weight): each "
            f"cell's (run.json board_gain_se) for {which(out['gains_in_se'])}, the known weight's (boards calibrate "
            f"--weight-sd) for {which(out['weight_sd_in_se'])} of the {len(calibrated)} with gains",
            highlight=False,
        )
    if out.get("uncalibrated_boards"):
        err_console.print(
            f"[yellow]note:[/yellow] recording(s) {', '.join(map(str, out['uncalibrated_boards']))} read boards without per-cell gains "
            "(their run.json): a cell's gain error biases the mass and first moments beyond these SEs (`poise boards "
            "calibrate`, `poise run --board-gains`)",
            highlight=False,
        )
    for g in out.get("repeats_sharing_noise", []):
        err_console.print(
            f"[yellow]warning:[/yellow] recordings {', '.join(map(str, g))} ran on the emulated bench with one noise "
            "seed: one realisation of its noise, which averaging them does not reduce (`poise run --noise-seed`)",
            highlight=False,
        )
    if fit.delays_s:
        how = "estimated" if fit.delay_estimated else "as given"
        if len(set(fit.delays_s)) == 1:
            text = f"{1000 * fit.delays_s[0]:.2f} ms" + (" (every recording)" if len(recs) > 1 else "")
        else:
            text = ", ".join(f"{1000 * d:.2f}" for d in fit.delays_s) + " ms (recording by recording)"
        console.print(
            f"measured efforts lag the encoders by {text}, {how}; moved back before the fit", highlight=False
        )
    for r in rocked:
        console.print(f"[yellow]{escape(r['file'])}: {r['sole']} on three corners for "
                      f"{100 * r['rocked_share']:.0f} % of its ticks (run.json): the fixed-feet model misses that "
                      "rocking, and the estimates carry it (poise run --gravity-comp keeps the legs' internal moments "
                      "off the soles)[/yellow]")  # fmt: skip
    for g in fit.gaps:
        console.print(f"[yellow]{escape(g['file'])}: no samples from {g['from_s']:.3f} to {g['to_s']:.3f} s — "
                      "the pieces either side are filtered and fitted apart[/yellow]")  # fmt: skip
    for d in fit.dropped:
        console.print(f"[yellow]{escape(d['file'])}: {d['from_s']:.3f}–{d['to_s']:.3f} s between gaps is "
                      f"too short for the cut-off and is not fitted[/yellow]")  # fmt: skip
    for pl in fit.placements:
        console.print(
            f"{escape(pl['file'])}: other sole {pl['shift_mm']:.1f} mm / {pl['turn_deg']:.2f}° from the "
            f"first's; the first's base parameters miss its Fz, Mx, My by "
            + ", ".join(f"{m:.2g}" for m in pl["misfit"])
            + f" N, N·m rms (guessed parameters): a bias of at most {pl['max_bias_se']:.2f} SE"
        )
    if planned is not None:
        console.print(
            "instrumental-variable estimate: the planned angles of "
            + ", ".join(args.instruments)
            + " as instruments"
        )
    if fit.armature_grouped:
        console.print(
            "rotor inertia (armature) grouped into the base parameters, not estimated apart (its column lies in "
            "their span): "
            + ", ".join(f"{j} → {' + '.join(into)}" for j, into in fit.armature_grouped.items()),
            highlight=False,
        )
    console.print(
        "units: inertial base parameters in SI combinations (kg, kg·m, kg·m²); friction, rotor inertia and sole "
        "creep as labelled"
    )
    _note_wrong_signs(out["sign_violations"])
    rows = out["rows"]
    console.print(
        f"κ(regressor) = {fit.kappa:.1f} raw, {fit.kappa_scaled:.1f} column-scaled; residual RMS (its SD σ about "
        "the residuals' mean, and that mean): "
        + ", ".join(
            f"{_with_unit(r, e)} (σ {s:.3g}, mean {f'{m:+.3g}' if abs(m) >= 1e-3 * e else '≈ 0'})"
            for r, e, s, m in zip(rows, fit.rmse, fit.sigma, fit.residual_mean, strict=True)
        ),
        highlight=False,
    )
    if fit.unidentifiable:
        single = rec.motion == "single-support"
        measured = ("joint efforts" if quantity == "torque" else
                    "the stance board's wrench" if single else "the boards' wrench at this placement")  # fmt: skip
        console.print(
            f"not identifiable from {measured} ({len(fit.unidentifiable)}): " + ", ".join(fit.unidentifiable)
        )
    for sym, why in fit.fixed.items():
        console.print(f"{sym} not estimated: {why}")
    console.print(
        f"determined to < {args.well:g} % relative SE by {'this recording' if len(recs) == 1 else 'these recordings'}"
        f" ({len(good)} of {len(good) + len(poor)} "
        "estimated base parameters): " + (", ".join(good) or "none")
    )
    if poor:
        console.print(
            f"not determined to {args.well:g} % by this motion ({len(poor)}; estimated all the same, their SEs in "
            "the table): " + ", ".join(poor)
        )
        within = [s for s in poor if s not in beyond and s not in unresolved]
        console.print(
            f"needed time: continuous seconds of this motion until SE ≤ {args.well:g} % of |estimate| − "
            f"{SCALE_RESOLVED_SE:g} SE (`plan forecast` counts whole runs against its given values; noise alone, at "
            f"this cut-off): {len(within)} of them within {args.practical_s:g} s: "
            + (", ".join(f"{s} ({needed[s]:.0f} s)" for s in within) or "none")
            + f"; {len(beyond)} would take longer: "
            + (", ".join(beyond) or "none")
            + f"; scale unresolved (|estimate| ≤ {SCALE_RESOLVED_SE:g} SE: no time to give, `plan forecast` times "
            f"them from its given values) {len(unresolved)}: " + (", ".join(unresolved) or "none")
        )
    if scatter is not None:
        big = [s for s, r in zip(fit.symbols, scatter.ratio, strict=True) if r > 2]
        console.print(
            f"fitted alone, {scatter.groups} groups of recordings (the runs of one plan together) scatter about "
            "the joint fit by "
            f"{np.median(scatter.ratio):.2f}× their SEs (median over the parameters; "
            f"{scatter.ratio.min():.2f}–{scatter.ratio.max():.2f}; ~1 for noise alone): the SEs above may be too "
            f"small by that much; beyond 2×: " + (", ".join(big) or "none"),
            highlight=False,
        )
    if args.reference:
        r = fit.reference
        mz = f"{r['max_abs_z']:.2f}" if r["max_abs_z"] is not None else "—"
        console.print(
            f"within 3 SE of {r['name']!r}: {r['within_3se']}/{r['estimated']} estimated (max |z| {mz})"
        )
        if "joints" in r:
            j = r["joints"]
            console.print(f"the twin's joints ({j['source']}): friction and rotor inertia within 3 SE "
                          f"{j['within_3se']}/{j['estimated']}", highlight=False)  # fmt: skip
    if args.validate:
        v = out["validation"]
        how = (
            " (joint torques from its motor currents)"
            if any(c["role"] == "validation" for c in currents)
            else ""
        )
        if quantity == "wrench":  # N and N·m pooled: Fz's weight would hide the moments' misses
            worst = int(np.argmax([-1.0 if r is None else r for r in v["relative_pct"]]))
            row = out["rows"][worst].split()[0]
            head = (
                "measured wrench all 0"
                if v["total_relative_pct"] is None
                else f"RMS error up to {v['relative_pct'][worst]:.1f} % of a row's RMS ({row}; pooled over Fz, Mx, "
                f"My {v['total_relative_pct']:.2f} %, mostly Fz's weight)"
            )
        else:
            total = v["total_relative_pct"]
            head = (
                "measured efforts all 0"
                if total is None
                else f"RMS error {total:.2f} % of the measured efforts"
            )
        console.print(
            f"validation on {args.validate}{how}: {head}; per row (% of its RMS): "
            + ", ".join(
                f"{_with_unit(label, x)} ({'its RMS 0' if r is None else f'{r:.1f} %'})"
                for label, x, r in zip(out["rows"], v["rmse_nm"], v["relative_pct"], strict=True)
            )
        )
        if v.get("declared_physics_differ"):
            console.print(
                "[yellow]note:[/yellow] the two recordings' declared physics differ ("
                + "; ".join(f"{d['kind']} at {d['joint']}: {d['fit']:.4g} by the fit's {d['fit_field']}, "
                            f"{d['validation']:.4g} by the validation's {d['validation_field']}"
                            for d in v["declared_physics_differ"])
                + "): its error holds that difference, not only the estimate's",
                highlight=False,
            )  # fmt: skip
        for r in v.get("soles_rocked", []):
            console.print(f"[yellow]validation recording: {r['sole']} on three corners for "
                          f"{100 * r['rocked_share']:.0f} % of its ticks (run.json): the fixed-feet model's "
                          "prediction misses that rocking[/yellow]")  # fmt: skip
        if "partial_run" in v:
            console.print(f"[yellow]validation recording: a partial run ({escape(v['partial_run'])}): its motion is "
                          "not its plan's[/yellow]")  # fmt: skip
    if args.plot:
        what = "joint efforts" if quantity == "torque" else "board wrench (Fz, Mx, My)"
        console.print(f"wrote {args.plot}: predicted and measured {what} of {args.validate or args.recording[0]}",
                      highlight=False)  # fmt: skip
    return 0


def _whose(model, rec) -> dict:
    """Whose parameters a result holds: the robot, and the description file when the recording names one
    (`model export` refuses a result for another robot)."""
    return {"robot": model.name} | (
        {"robot_source": str(model.source)} if rec.meta.get("robot_source") else {}
    )


def _sign_text(d: dict) -> str:
    """'ϑ13 = -0.004 ± 0.003 kg·m² (z -1.3, must be ≥ 0)', with the radius a conditional sign needs."""
    r = d.get("if_mass_within_m")
    cond = (
        ""
        if r is None
        else f" if every link's mass lies within {math.floor(100 * r) / 100:.2f} m of its origin"
    )
    return f"{d['symbol']} = {d['value']:.3g} ± {d['se']:.2g} {d['unit']}".rstrip() + (
        f" (z {d['z']:+.1f}, must be {d['must_be']}{cond})" if "z" in d else ""
    )


def _warn_wrong_signs(found: list[dict], compact: bool) -> None:
    """Warn of the estimates over IMPOSSIBLE_SE SE on the wrong side of zero (`found`: the fit's sign_violations),
    each named: those no mass distribution, friction or rotor inertia gives that sign (physically impossible: the
    fit's `impossible`), or with `compact` those only a radius rules out (each with its radius)."""
    from identify.dynamic import IMPOSSIBLE_SE

    beyond = [
        d for d in found if not d["within_noise"] and (d.get("if_mass_within_m") is not None) == compact
    ]
    if not beyond:
        return
    if compact:
        what, why = "of a sign physics rules out for compact links", ""
        then = "the data or the model is wrong, unless a link's mass reaches that far"
    else:
        what = "physically impossible estimate(s)"
        why = " (no mass distribution, no friction or rotor inertia gives that sign)"
        then = "a model the recording does not follow (friction, a load, sensor scale or sign), not noise"
    err_console.print(
        f"[yellow]warning:[/yellow] {what}, over {IMPOSSIBLE_SE:g} SE on the wrong side of zero{why}: "
        + ", ".join(_sign_text(d) for d in beyond)
        + f" — {then}",
        highlight=False,
    )


def _note_wrong_signs(found: list[dict]) -> None:
    """Name the estimates of a sign physics rules out (for any mass distribution, or for links whose mass lies
    within a radius) that lie within IMPOSSIBLE_SE SE of zero."""
    from identify.dynamic import IMPOSSIBLE_SE

    within = [d for d in found if d["within_noise"]]
    if within:
        console.print(
            f"of a sign physics rules out, within noise (|z| < {IMPOSSIBLE_SE:g}: the sign is not determined, no "
            "evidence against the model): " + ", ".join(_sign_text(d) for d in within),
            highlight=False,
        )


def _with_unit(label: str, value: float) -> str:
    """'shoulder_pan_joint N·m', 0.164 → 'shoulder_pan_joint 0.164 N·m'."""
    name, unit = label.rsplit(" ", 1)
    return f"{name} {value:.3g} {unit}"


def _row_labels(model, quantity: str) -> list[str]:
    """Each fitted row's name with its unit: the joints' efforts, or the boards' Fz, Mx, My."""
    if quantity != "torque":
        return ["Fz N", "Mx N·m", "My N·m"]
    kinds = [model.joints[c].type for c in model.coordinates]
    return [
        f"{j} {'N' if kind == 'prismatic' else 'N·m'}"
        for j, kind in zip(model.joint_names, kinds, strict=True)
    ]


def _torque_constant(text: str) -> float | dict[str, float]:
    """`--torque-constant`: one N·m/A for every joint, or JOINT=K,… (the joints checked against the recordings)."""

    def value(v: str, what: str) -> float:
        try:
            k = float(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what}: expected a number in N·m/A, got {v!r}") from None
        if not (math.isfinite(k) and k > 0):
            raise argparse.ArgumentTypeError(f"{what}: must be a positive finite number (N·m/A), got {v!r}")
        return k

    if "=" not in text:
        return value(text.strip(), "torque constant")
    out: dict[str, float] = {}
    for item in text.split(","):
        joint, sep, v = (x.strip() for x in item.rpartition("="))
        if not sep or not joint:
            raise argparse.ArgumentTypeError(
                f"expected one number or JOINT=K,JOINT=K,…, got {item.strip()!r}"
            )
        if joint in out:
            raise argparse.ArgumentTypeError(f"torque constant of {joint} given twice")
        out[joint] = value(v, joint)
    return out


def _efforts_of(
    rec: DynamicRecording, path: str, given: float | dict[str, float] | None
) -> tuple[DynamicRecording, dict | None]:
    """(the recording with its motor currents turned into joint torques by `efforts_from_currents`, `given` over
    its metadata; what was used, for the report — None when it had no currents)."""
    from formats.dynamic_recording import efforts_from_currents

    if rec.current is None:
        return rec, None
    try:
        out = efforts_from_currents(rec, given)
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from None
    named = given if isinstance(given, dict) else {} if given is None else dict.fromkeys(rec.joint_names)
    where = {j: "--torque-constant" if j in named else "recording" for j in rec.joint_names}
    return out, {"recording": path, "torque_constant_nm_per_a": out.torque_constant, "from": where}


def _delay(text: str) -> float | str:
    """`--delay`: auto, or a lag in ms (→ s)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        ms = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or a delay in ms, got {text!r}") from None
    if not (np.isfinite(ms) and abs(ms) <= 1000):
        raise argparse.ArgumentTypeError(f"a delay in ms within ±1000, got {text!r}")
    return ms / 1000


TWIN_JOINT_KINDS = {"fv": "viscous", "fc": "coulomb", "Ia": "armature"}


def _twin_joints(
    reference: str, recording: str, run: RunOf | Exception, model
) -> dict[str, dict[str, float]] | None:
    """The physics twin's joint truth (`run`: `run_of`'s answer for `recording`) when `reference` is that run's
    own truth.json; None otherwise, or when its run.json lacks a complete, finite one."""
    from pathlib import Path

    if isinstance(run, Exception) or run.twin_joints is None:
        return None
    if Path(reference).resolve() != (Path(recording).parent / "truth.json").resolve():
        return None
    try:
        joints = run.twin_joints
        out = {j: {k: float(joints[j][k]) for k in TWIN_JOINT_KINDS.values()} for j in model.joint_names}
    except (ValueError, KeyError, TypeError):
        return None
    return out if all(np.isfinite(v) for d in out.values() for v in d.values()) else None


def _declared_joints(recs, model) -> dict[str, dict[str, float]] | None:
    """The joint truth every recording declares alike (`poise simulate trajectory` writes it: the same viscous,
    Coulomb friction and rotor inertia on every joint); None when one does not or they differ."""
    try:
        vals = {tuple(float(r.meta[key]) for key in TRUE_JOINT_KEYS.values()) for r in recs}
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
    if len(vals) != 1 or not all(np.isfinite(v) for v in next(iter(vals))):
        return None
    one = dict(zip(TRUE_JOINT_KEYS, next(iter(vals)), strict=True))
    return {j: dict(one) for j in model.joint_names}


def _coverage(rec, run: RunOf) -> dict:
    """How much of its plan a stopped run's recording covers: its seconds, the plan's (run.json duration_s), the
    share; {} where run.json does not say."""
    if not run.planned_s or len(rec.t) < 2:
        return {}
    covered = float(rec.t[-1] - rec.t[0])
    return {"covered_s": covered, "planned_s": run.planned_s, "covered_share": covered / run.planned_s}


def _covers_plan(p: dict, rec) -> bool:
    """Whether a stopped run's recording (`_coverage` entry p) covers its plan's whole duration, to within half a
    sample."""
    if "covered_s" not in p:
        return False
    return p["covered_s"] >= p["planned_s"] - 0.5 * float(np.median(np.diff(rec.t)))


def _covers(p: dict) -> str:
    """`_coverage` as a phrase."""
    if "covered_s" not in p:
        return "it covers part of the plan"
    return (f"it covers {p['covered_s']:.3g} s of the plan's {p['planned_s']:.3g} s "
            f"({100 * p['covered_share']:.0f} %)")  # fmt: skip


def _late_runs(paths: list[str], runs: list) -> list[dict]:
    """The runs (`run_of`'s answers) with streamed ticks more than LATE_TICK_PERIODS periods late, counted in
    raw_joints.csv's stream phase (the recording's rows): how many, and the stream's latest (its longest step from
    one tick to the next, less a period). run.json's jitter covers every phase (moves and settles before the
    stream too): it only spares reading raw_joints.csv where no tick at all was that late. Nothing said of a run
    without raw_joints.csv, or whose stream kept time."""
    from identify.recording_checks import LATE_TICK_PERIODS, late_ticks

    out = []
    for k, (path, run) in enumerate(zip(paths, runs, strict=True)):
        if isinstance(run, Exception) or not run.rate_hz:
            continue
        period = 1 / run.rate_hz
        if run.late_max_ms is not None and run.late_max_ms <= 1000 * LATE_TICK_PERIODS * period:
            continue
        times = _stream_ticks(path)
        n = 0 if times is None or len(times) < 2 else late_ticks(times, period)
        if n:
            latest = float(np.max(np.diff(times))) - period
            out.append({"recording": k + 1, "file": path, "ticks_late": n, "ticks_streamed": len(times),
                        "late_max_ms": 1000 * latest, "period_ms": 1000 * period})  # fmt: skip
    return out


def _late_text(p: dict) -> str:
    """`_late_runs`' entry as one line."""
    from identify.recording_checks import LATE_TICK_PERIODS

    return (f"{p['file']}: {p['ticks_late']} of its run's {p['ticks_streamed']} streamed ticks came more than "
            f"{LATE_TICK_PERIODS:g} periods late, the latest {p['late_max_ms']:.3g} ms (raw_joints.csv; a tick is "
            f"{p['period_ms']:.3g} ms): the recording interpolates across them, so its motion there (accelerations "
            "most) is not measured; rerun on a less loaded machine if the fit or its validation misses")  # fmt: skip


def _stream_ticks(recording: str) -> np.ndarray | None:
    """The times (s) of a run's streamed ticks: raw_joints.csv's t of its 'stream' phase beside the recording;
    None when absent or unreadable."""
    times = _stream_columns(recording, ["t"])
    return None if times is None else times[:, 0]


def _stream_angles(recording: str, joints: list[str]) -> np.ndarray | None:
    """A run's measured angles (ticks, joints) as streamed: raw_joints.csv's q_meas_ of its 'stream' phase beside
    the recording (before the recording interpolated them onto its grid); None when absent or unreadable."""
    return _stream_columns(recording, [f"q_meas_{j}" for j in joints])


def _stream_columns(recording: str, columns: list[str]) -> np.ndarray | None:
    """raw_joints.csv's `columns` (rows, columns) of its 'stream' phase beside the recording; None when absent or
    unreadable."""
    import csv
    from pathlib import Path

    try:
        with open(Path(recording).parent / "raw_joints.csv", newline="", encoding="utf-8") as fh:
            rows = [
                [float(row[c]) for c in columns] for row in csv.DictReader(fh) if row.get("phase") == "stream"
            ]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return np.array(rows, dtype=float).reshape(len(rows), len(columns))


def _misfit(est, recs: list, model, estimator, groups: list[list[str]]) -> list[dict]:
    """`joint_misfits` of a torque fit, as JSON entries: each fitted recording named by its files (`groups`: the
    runs averaged into it), the encoders' steps of a single run's recording read from its raw_joints.csv where the
    recording interpolated them."""
    from identify.joint_misfit import joint_misfits

    def stream_angles(k: int) -> np.ndarray | None:
        return _stream_angles(groups[k][0], recs[k].joint_names) if len(groups[k]) == 1 else None

    files = [", ".join(g) for g in groups]
    return [m.to_dict() for m in joint_misfits(est, recs, model.joint_names, estimator, files, stream_angles)]


def _misfit_text(misfit: list[dict], several: bool, cutoff_hz: float) -> str:
    """`_misfit`'s joints as one warning line, each with its recordings when the fit has `several`; the cut-off
    judged at said where it is not the fit's (`cutoff_hz`)."""
    from identify.recording_checks import MISFIT_WARN

    def where(m: dict) -> str:
        if not several:
            return ""
        if m["alone"]:
            return f" (in {', '.join(m['files'])})"
        return " (in none alone: the recordings disagree with each other)"

    joints = ", ".join(f"{m['joint']} {100 * m['share']:.0f} %{where(m)}" for m in misfit)
    lead = "" if several else f"{misfit[0]['files'][0]}: "
    at = misfit[0]["cutoff_hz"]
    lead += "" if math.isclose(at, cutoff_hz) else f"judged at the recordings' own cut-off, {at:.3g} Hz, "
    return (f"{lead}the fit leaves {joints} of the measured effort's spread unexplained beyond its noise (honest "
            f"fits leave under {100 * MISFIT_WARN:.0f} %): check those joints' direction, zero and servo id in the "
            "robot's configuration (a flipped or swapped joint shows on its neighbours too). Only a wrong map that "
            "worsens the dynamics fit shows here: a flip the fitted parameters absorb leaves no trace, so a "
            "recording without this warning is no proof of a right map")  # fmt: skip


def _number(value, positive: bool = False) -> float | None:
    """A run.json number: finite and ≥ 0 (> 0 with `positive`); None where absent or damaged."""
    ok = isinstance(value, int | float) and math.isfinite(value) and (value > 0 if positive else value >= 0)
    return float(value) if ok else None


def _ticks_rate(meta: dict) -> tuple[int | None, float | None]:
    """run.json's ticks_streamed and rate_hz, None where absent or damaged."""
    ticks = meta.get("ticks_streamed")
    ticks = ticks if isinstance(ticks, int) and ticks > 0 else None
    return ticks, _number(meta.get("rate_hz"), positive=True)


def _physics(rec, run: RunOf | Exception, model) -> dict[str, tuple[str, dict[str, float]]]:
    """The joint physics a recording declares, by kind (viscous, coulomb, armature): (where it is said, its value
    by joint), from its run.json's twin_joints or its own header (`simulate trajectory`)."""
    out = {}
    twin = None if isinstance(run, Exception) else run.twin_joints
    for kind, key in TRUE_JOINT_KEYS.items():
        try:
            if isinstance(twin, dict):
                out[kind] = (
                    f"run.json twin_joints {kind}",
                    {j: float(twin[j][kind]) for j in model.joint_names},
                )
            elif key in rec.meta:
                out[kind] = (key, dict.fromkeys(model.joint_names, float(rec.meta[key])))
        except (KeyError, ValueError, TypeError):
            continue
    return out


def _physics_differ(rec, run, vrec, vrun, model) -> list[dict]:
    """Where the fit's first recording and the validation recording declare different joint physics (friction,
    rotor inertia): their predictions cannot agree there whatever the estimate."""
    mine, theirs = _physics(rec, run, model), _physics(vrec, vrun, model)
    out = []
    for kind in [k for k in TRUE_JOINT_KEYS if k in mine and k in theirs]:
        (fa, a), (fb, b) = mine[kind], theirs[kind]
        j = max(a, key=lambda n: abs(a[n] - b[n]))
        if not math.isclose(a[j], b[j], rel_tol=1e-6, abs_tol=1e-12):
            out.append({"kind": kind, "joint": j, "fit_field": fa, "fit": a[j], "validation_field": fb,
                        "validation": b[j]})  # fmt: skip
    return out


def _joint_reference(fit, twin: dict[str, dict[str, float]], nb: int, source: str) -> dict:
    """The fit's friction and rotor inertia estimates against the twin's joint truth: values, z, how many within
    3 SE."""
    values, z = {}, {}
    for k in range(nb, len(fit.symbols)):
        kind, _, joint = fit.symbols[k].partition("@")
        if kind in TWIN_JOINT_KINDS and joint in twin and np.isfinite(fit.se[k]):
            values[fit.symbols[k]] = twin[joint][TWIN_JOINT_KINDS[kind]]
            z[fit.symbols[k]] = float((fit.values[k] - values[fit.symbols[k]]) / fit.se[k])
    return {"source": source, "values": values, "z": z, "estimated": len(z),
            "within_3se": sum(abs(v) <= 3 for v in z.values())}  # fmt: skip


class RunOf(NamedTuple):
    """What the `poise run` run.json beside a recording holds: the plan, its sha256, the soles' rocking tally and
    the physics twin's joint truth (`twin_joints`; None from real hardware)."""

    plan: str
    sha: str
    rocked: dict
    twin_joints: dict | None
    noise_seed: int | None = None  # the emulated bench's (`poise run --noise-seed`); None: real or noiseless
    uncalibrated: bool = False  # read boards without per-cell gains (real ones, or emulated ones with noise)
    tare_mass_sd: float | None = None  # kg: the total load's uncertainty the run's tare left (run.json)
    tare_cov: np.ndarray | None = None  # (3, 3) Fz N, Mx, My N·m: the constant offset the run's tare left
    # (cells,) each cell's gain's relative SE (run.json board_gain_se), and which gains they are (runs with the
    # same gains share their errors)
    gain_rel_se: np.ndarray | None = None
    gains_key: str | None = None
    gain_scale_se: float | None = (
        None  # the known weight's relative SD: a scale on every gain (board_gain_scale_se)
    )
    weight_key: str | None = None  # which weight (kg ± relative SD): calibrations with it share its error
    partial: str | None = None  # how a run that did not stream its whole plan ended (None: it did)
    # (boards,) the relative SD of the scale each board's calibration tare put on its four gains (board_gain_tare_se)
    gain_tare_se: np.ndarray | None = None
    ticks: int | None = None  # ticks streamed (run.json ticks_streamed): the recording's rows
    rate_hz: float | None = None  # its executor's rate (run.json rate_hz): the recording's sample rate
    planned_s: float | None = None  # the plan's duration (run.json duration_s)
    late_max_ms: float | None = None  # its latest tick's lateness (run.json jitter late_max_ms)
    # how a run that streamed its whole plan and stopped after it ended (`stopped_after_stream`; None: it did not)
    stopped_after: str | None = None
    ticks_counted: bool = False  # run.json holds its ticks_streamed and ticks_planned


# the run.json fields whose type, when present (not null), decides whether and how the recording is fitted (its
# plan, whether the run stopped, its rows and rate): a wrong one is a damaged file (`DamagedRun`), not a run that did
# not say. The notes' fields (soles' tally, gains, tare, jitter) stay tolerant: a damaged one only loses its note
RUN_FIELDS = {"plan": (str, "a string"), "plan_sha256": (str, "a string"), "status": (str, "a string"),
              "ticks_streamed": (int, "a whole number"), "ticks_planned": (int, "a whole number"),
              "rate_hz": ((int, float), "a number"), "duration_s": ((int, float), "a number")}  # fmt: skip


class DamagedRun(ValueError):
    """A run.json that parses but holds a field of the wrong type (`RUN_FIELDS`): what is wrong."""


def _json_kind(value) -> str:
    """A JSON value's kind, for a message: "a string", "a number", "true", "null"…"""
    if isinstance(value, bool):
        return str(value).lower()
    return {str: "a string", int: "a number", float: "a number", dict: "an object", list: "a list"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _refuse_damaged_run(recording: str, run: RunOf | Exception, what: str = "") -> None:
    """A run.json beside a recording that is there but cannot be read (not JSON, not an object, a field of the
    wrong type): a DataError naming it and what it would have told the fit — a missing one is a logger's recording,
    fitted alone; one that names no plan is no trajectory run's, fitted alone too."""
    from pathlib import Path

    if not isinstance(run, Exception) or isinstance(run, FileNotFoundError | KeyError):
        return
    meta_path = Path(recording).parent / "run.json"
    why = (
        f"is damaged ({run})" if isinstance(run, DamagedRun) else _unreadable_run(run)
    )  # as --instruments says
    raise DataError(f"{what}{recording}: the run.json beside it, {meta_path}, {why}; it tells the fit how the run "
                    "went (its status — a stopped run is refused without --partial —, the plan it ran, its tare, "
                    "late ticks, board gains): repair it, or move it away to fit the recording alone (as a logger's, "
                    "without its run's checks)")  # fmt: skip


def run_of(recording: str) -> RunOf | Exception:
    """The run.json beside a recording (`RunOf`); where there is none, why (the OSError, ValueError, KeyError or
    TypeError reading it raised)."""
    from drivers.run_files import partial_status, run_meta_beside, stopped_after_stream, streamed_ticks

    try:
        meta = run_meta_beside(recording)
        plan, sha = meta["plan"], meta["plan_sha256"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return e
    wrong = [f"{k} is {_json_kind(meta[k])}, not {kind}" for k, (types, kind) in RUN_FIELDS.items()
             if meta.get(k) is not None and (not isinstance(meta[k], types) or isinstance(meta[k], bool))]  # fmt: skip
    if wrong:
        return DamagedRun(", ".join(wrong))
    try:  # written by `poise run` since it tallies the soles; a damaged tally only loses the note
        rocked = {str(k): float(v["rocked_share"]) for k, v in (meta.get("soles") or {}).items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        rocked = {}
    seed = meta.get("noise_seed")
    boards = meta.get("boards")
    uncalibrated = bool(boards) and "board_gains" not in meta and (boards != "sim" or isinstance(seed, int))
    sd = _number(meta.get("tare_mass_sd_kg"))
    try:
        cov = np.asarray(meta.get("tare_wrench_cov"), dtype=float)
    except (TypeError, ValueError):
        cov = None
    cov = cov if cov is not None and cov.shape == (3, 3) and np.all(np.isfinite(cov)) else None
    rel_se, key, weight = _gain_rel_se(meta)
    scale = _number(meta.get("board_gain_scale_se"))
    partial = partial_status(meta)
    jitter = meta.get("jitter")
    late = _number(jitter.get("late_max_ms")) if isinstance(jitter, dict) else None
    return RunOf(plan, sha, rocked, meta.get("twin_joints"), seed if isinstance(seed, int) else None, uncalibrated,
                 sd, cov, rel_se, key, scale, weight if scale is not None else None, partial,
                 _gain_tare_se(meta, rel_se), *_ticks_rate(meta), _number(meta.get("duration_s"), positive=True),
                 late, stopped_after_stream(meta),
                 None not in streamed_ticks(meta))  # fmt: skip


def _gain_tare_se(meta: dict, rel_se: np.ndarray | None) -> np.ndarray | None:
    """From run.json, by board, the relative SD of the scale its calibration's tare put on its gains
    (`board_gain_tare_se`, boards in `board_gain_se`'s order); None without it, or damaged."""
    try:
        boards = list(meta["board_gain_se"])
        out = np.array([float(meta["board_gain_tare_se"][b]) for b in boards])
    except (TypeError, KeyError, ValueError, AttributeError):
        return None
    ok = rel_se is not None and len(out) * 4 == len(rel_se) and np.all(np.isfinite(out) & (out >= 0))
    return out if ok else None


def _gain_rel_se(meta: dict) -> tuple[np.ndarray | None, str | None, str | None]:
    """From a run's run.json: its cells' gain relative SEs, board after board (`board_gain_se`; None without),
    its gains' identity (`board_gains`: runs with the same gains share their errors) and its known weight's
    (`board_gains` weight_kg with `board_gain_scale_se`: calibrations with one weight share its error); None
    where run.json has not got them (runs before them, gains without SEs, or damaged)."""
    import json

    gains = meta.get("board_gains")
    try:
        key = json.dumps(gains["boards"], sort_keys=True)
    except (TypeError, KeyError, ValueError, AttributeError):
        return None, None, None
    try:
        weight = f"{float(gains['weight_kg']):g} kg ± {float(meta['board_gain_scale_se']):g}"
    except (TypeError, KeyError, ValueError, AttributeError):
        weight = None
    try:
        se = np.concatenate([np.asarray(v, dtype=float).reshape(4) for v in meta["board_gain_se"].values()])
    except (TypeError, KeyError, ValueError, AttributeError):
        se = None
    if se is not None and not (np.all(np.isfinite(se)) and np.all(se >= 0)):
        se = None
    return se, key, weight


class GainSources(NamedTuple):
    """The gains' errors as `DynamicEstimator.fit` shared sources, and the fitted recordings (1-based) each kind
    covers."""

    sources: list[list[np.ndarray | None]]
    cells_in: list[int]  # recordings whose per-cell gain errors are in the sources
    weight_in: list[int]  # recordings whose known weight's error is


def _gain_sources(groups: list[list[int]], runs: list, recs: list) -> GainSources:
    """The boards' gains' errors as sources shared by the fitted recordings (`recs`, the averaged runs of
    `groups`): per gains and cell, what one SD of that cell's relative gain error adds to each recording's Fz, Mx,
    My (N, N·m) sample by sample — the cell's recorded load × g × the SE at the cell's lever —; per known weight,
    its relative SD × the recording's own wrench (it scales every gain alike). None for a recording whose runs did
    not all share the source, or (cells) whose cells are not recorded."""
    from drivers.wbb.geometry import G, cell_levers
    from identify.dynamic import WRENCH_ROWS, WRENCH_ROWS_ALL

    ok = [None if isinstance(r, Exception) else r for r in runs]
    sources, cells_in, weight_in = [], set(), set()
    for key in sorted({r.gains_key for r in ok if r is not None and r.gain_rel_se is not None}):
        per_rec = []
        for k, (g, rec) in enumerate(zip(groups, recs, strict=True)):
            mine = [
                ok[i]
                for i in g
                if ok[i] is not None and ok[i].gains_key == key and ok[i].gain_rel_se is not None
            ]
            if (
                len(mine) == len(g)
                and rec.cells is not None
                and len(mine[0].gain_rel_se) == rec.cells.shape[1]
            ):
                per_rec.append((mine[0].gain_rel_se, rec.cells, cell_levers(rec.cell_xy())))
                cells_in.add(k + 1)
            else:
                per_rec.append(None)
        cells = max((x[1].shape[1] for x in per_rec if x is not None), default=0)
        for c in range(cells):
            sources.append([None if x is None else x[0][c] * G * x[1][:, c, None] * x[2][c] for x in per_rec])
        # each board's calibration tare: one scale on its four gains, its four cells' wrench × that SD
        tare = next((r.gain_tare_se for r in ok if r is not None and r.gains_key == key), None)
        for b in range(0 if tare is None else len(tare)):
            on = slice(4 * b, 4 * b + 4)
            sources.append([None if x is None else tare[b] * G * x[1][:, on] @ x[2][on] for x in per_rec])
    rows = [WRENCH_ROWS_ALL.index(r) for r in WRENCH_ROWS]
    for weight in sorted({r.weight_key for r in ok if r is not None and r.weight_key is not None}):
        per_rec = []
        for k, (g, rec) in enumerate(zip(groups, recs, strict=True)):
            mine = [ok[i] for i in g if ok[i] is not None and ok[i].weight_key == weight]
            per_rec.append(mine[0].gain_scale_se * rec.wrench[:, rows] if len(mine) == len(g) else None)
            if len(mine) == len(g):
                weight_in.add(k + 1)
        sources.append(per_rec)
    return GainSources(sources, sorted(cells_in), sorted(weight_in))


def _tare_offsets(groups: list[list[int]], runs: list) -> list[np.ndarray | None] | None:
    """Each fitted recording's tare offset covariance: its run's, or the mean of its averaged runs' (independent
    tares: Σ C_i / N²); None for a recording any of whose runs did not record one; None when none did."""
    covs = [None if isinstance(r, Exception) else r.tare_cov for r in runs]
    out = [None if any(covs[k] is None for k in g) else sum(covs[k] for k in g) / len(g) ** 2 for g in groups]
    return out if any(c is not None for c in out) else None


def _span(values: list[float]) -> str:
    """'a' or 'a–b' (4 decimals): the range of a few values."""
    lo, hi = f"{min(values):.4f}", f"{max(values):.4f}"
    return lo if lo == hi else f"{lo}–{hi}"


def _shared_noise(groups: list[list[int]], runs: list) -> list[list[int]]:
    """Within each group of averaged repeats, the recordings (indices) run on the emulated bench with one noise
    seed: one noise realisation, which averaging them does not reduce."""
    out = []
    for g in groups:
        by_seed: dict[int, list[int]] = {}
        for k in g:
            seed = None if isinstance(runs[k], Exception) else runs[k].noise_seed
            if seed is not None:
                by_seed.setdefault(seed, []).append(k)
        out += [ks for ks in by_seed.values() if len(ks) > 1]
    return out


def _effort_scale(rec, path: str, model, prior, limits: list[str]) -> list[str]:
    """`effort_scale`'s warnings; its refusal carries the effort-limit warning (`efforts_beyond_limits`) of the same
    recording, which the refusal would otherwise hide."""
    from identify.recording_model import effort_scale

    try:
        return effort_scale(rec, path, model, prior)
    except DataError as exc:
        if not limits:
            raise
        also = limits[0].removeprefix(f"{path}: ").removesuffix(" (the fit goes on)")
        raise DataError(f"{exc}; {also}") from None


def _repeats(recs: list, plans: list[str | None], average: bool):
    """The recordings to fit: with `average`, the runs of one plan (`plans`, from the run.json beside each)
    averaged."""
    from identify.repeats import Repeats, average_repeats

    if not average or len(recs) < 2:
        return Repeats(list(recs), [[k] for k in range(len(recs))])
    return average_repeats(recs, plans)


def _rocked(paths: list[str], runs: list) -> list[dict]:
    """The soles that rocked in the runs (`run_of`'s answers, recordings numbered as given): on three corners for
    more than ROCKED_WARN of a run's ticks, by the run's own tally from its boards."""
    from drivers.trajectory_run import rocked_soles

    return [{"recording": k + 1, "file": path, "sole": sole, "rocked_share": run.rocked[sole]}
            for k, (path, run) in enumerate(zip(paths, runs, strict=True)) if not isinstance(run, Exception)
            for sole in rocked_soles(run.rocked)]  # fmt: skip


def _unreadable_run(exc: Exception) -> str:
    """Why a run.json could not serve (`run_of`'s exception), as the end of a sentence."""
    import json

    if isinstance(exc, FileNotFoundError):
        return "is not there"
    if isinstance(exc, OSError):
        return f"cannot be read ({exc.strerror or exc})"
    if isinstance(exc, json.JSONDecodeError):
        return f"is not valid JSON ({exc.msg}, line {exc.lineno})"
    if isinstance(exc, KeyError):
        return f"names no plan (no {exc.args[0]!r})"
    return "is not a run's record (not a JSON object of a `poise run`)"


def _run_plan(recording: str, run: RunOf | Exception) -> str:
    """The plan a `poise run` recording executed: named by the run.json beside it (`run`: `run_of`'s answer),
    unchanged since (sha256)."""
    from pathlib import Path

    from formats.trajectory_plan import load_trajectory_plan, plan_digest

    meta_path = Path(recording).parent / "run.json"
    if isinstance(run, Exception):
        raise DataError(f"--instruments without a plan needs {meta_path} (a `poise run` of a trajectory plan), "
                        f"which {_unreadable_run(run)}; give the plan: --instruments PLAN")  # fmt: skip
    plan, sha = run.plan, run.sha
    if not Path(plan).is_file():
        raise DataError(f"{meta_path} names the plan {plan}, which is not there (relative to here); "
                        "give it: --instruments PLAN")  # fmt: skip
    if plan_digest(load_trajectory_plan(plan)) != sha:
        raise DataError(
            f"{plan} changed since {meta_path} was recorded (sha256 differs): not the plan that ran"
        )
    return plan


def _angles_that_ran(paths: list[str], runs: list, recs: list, model) -> list[np.ndarray] | None:
    """Each recording's planned angles, when every one's run.json names the plan it ran (unchanged); else None."""
    try:
        return _planned_angles(
            [_run_plan(path, run) for path, run in zip(paths, runs, strict=True)], recs, model
        )
    except DataError:
        return None


def _fitted_tare_sd(groups: list[list[int]], runs: list, offsets: list | None) -> float | None:
    """The tare σ (kg) the fit's SEs hold, for the plans' forecast to hold it too: the largest over the fitted
    recordings whose tare is in the fit (`_tare_offsets`) of their run's run.json tare_mass_sd_kg — of averaged
    runs √(Σ σ²) / N, as their offsets are averaged —; None when no fitted recording's SEs hold a tare (torque
    fits, runs without a recorded tare)."""
    if offsets is None:
        return None
    sds = []
    for g, cov in zip(groups, offsets, strict=True):
        each = [None if isinstance(runs[k], Exception) else runs[k].tare_mass_sd for k in g]
        if cov is not None and all(v is not None for v in each):
            sds.append(math.sqrt(sum(v**2 for v in each)) / len(g))
    return max(sds, default=None)


def _warn_if_below_plan(
    out: dict, est, recs: list, planned: list[np.ndarray], tare_mass_sd: float | None = None
) -> None:
    """The least-squares SEs against the plans' forecast at the fit's noise (`se_against_plan` in the JSON); a
    warning when far below it: the recording moved in ways the plans do not, and least squares took that as exact.
    `tare_mass_sd` (kg): the runs' tare the fit's SEs hold (`_fitted_tare_sd`), in the forecast too."""
    from identify.forecast import SE_BELOW_PLAN, se_against_plans

    try:
        agreement = se_against_plans(est, recs, planned, tare_mass_sd=tare_mass_sd)
    except DataError:  # the plans' motions cannot be forecast together (the fit's own checks): no comparison
        return
    out["se_against_plan"] = agreement.to_dict()
    if not agreement.optimistic:
        return
    lacks = (f"the plans alone leave {', '.join(agreement.plan_unexcited)} undetermined"
             if agreement.plan_unexcited else
             f"the SEs are a median {agreement.median:.2g}× what the plans forecast at this noise (below "
             f"{SE_BELOW_PLAN:g})")  # fmt: skip
    err_console.print(
        f"[yellow]warning:[/yellow] {lacks}: the recorded angles stray {1000 * agreement.tracking_rad:.2g} mrad "
        "rms from the planned, and least squares counts that unplanned motion (the encoders' steps in it too) as "
        "exact excitation, so these SEs are optimistic; --instruments (the planned angles as instruments) gives SEs "
        "that rest on the plan's motion, or plan a motion that excites more",
        highlight=False,
    )


def _planned_angles(plans: list[str], recs: list, model) -> list[np.ndarray]:
    """Each recording's planned joint angles at its samples (one plan for all recordings, or one each)."""
    from formats.trajectory_plan import load_trajectory_plan
    from trajectories.plan import plan_trajectory

    if len(plans) not in (1, len(recs)):
        raise DataError(
            f"--instruments: {len(plans)} plans for {len(recs)} recordings (give one, or one each)"
        )
    out = []
    for k, rec in enumerate(recs):
        path = plans[min(k, len(plans) - 1)]
        plan = load_trajectory_plan(path)
        if list(plan.joint_names) != list(rec.joint_names):
            raise DataError(f"--instruments {path}: its joints {plan.joint_names} are not the recording's "
                            f"{list(rec.joint_names)}")  # fmt: skip
        if plan.base != rec.base:  # a standing plan's angles are those of its own base sole's chain
            raise DataError(f"--instruments {path}: planned with base {plan.base!r}, the recording's base is "
                            f"{rec.base!r}: not a recording of this plan")  # fmt: skip
        traj = plan_trajectory(plan, model)
        tick = float(np.median(np.diff(rec.t)))
        # the plan time commanded at each sample (`poise run` records it: a stalled tick puts it behind t_s)
        tp = rec.t if rec.t_plan is None else rec.t_plan
        if tp[0] < -tick or tp[-1] > traj.duration + tick:
            what = "times" if rec.t_plan is None else "plan times (t_plan_s)"
            raise DataError(
                f"--instruments {path}: {rec.label or f'recording {k + 1}'}'s {what} span {tp[0]:.3f}–{tp[-1]:.3f} s, the plan "
                f"0–{traj.duration:.3f} s: not a recording of this plan"
            )
        out.append(traj.sample(np.clip(tp, 0.0, traj.duration))[0])
    return out


def _z_text(z: float | None) -> str:
    return f"{z:+.1f}" if z is not None else "fixed"


def _plot(est, robot: str, out: dict, shown, args) -> None:
    """`identify.plots.plot_dynamic_fit` of `shown` (the validation recording, else the first fitted): its numbers
    the reported validation's (`out["validation"]`), else those of the fit's rows of `shown`; its curves sampled
    finer than the fit's decimation (`drawing_step`), so that they follow the filtered motion."""
    from copy import copy

    from identify.dynamic import EDGE_PERIODS, GAP_FACTOR, decimation, validation_error
    from identify.plots import drawing_step, plot_dynamic_fit

    validation = out.get("validation")
    numbers = validation if validation is not None else validation_error(*est.predict(shown))
    fine = copy(est)  # the same fit, its predictions at the drawing's step
    fine.decimate = drawing_step(len(shown.t), est.decimate or decimation(est.cutoff_, shown.rate_hz))
    pred, meas = fine.predict(shown)
    plot_dynamic_fit(
        args.plot,
        robot=robot,
        rows=[label.rsplit(" ", 1)[0] for label in out["rows"]],
        units=out["row_units"],
        t=fine.predicted_times(shown),
        predicted=pred,
        measured=meas,
        rmse=numbers["rmse_nm"],
        relative_pct=numbers["relative_pct"],
        total_pct=numbers["total_relative_pct"],
        drawn=args.validate if validation is not None else args.recording[0],
        validation=validation is not None,
        more_fitted=len(args.recording) - 1,
        edge_s=EDGE_PERIODS / est.cutoff_,
        cutoff_hz=est.cutoff_,
        gap_factor=GAP_FACTOR,
    )


__all__ = ["register_identify", "register_simulate"]
