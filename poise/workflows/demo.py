"""`poise demo`: design (quick) -> run through the real drivers on the emulated bench -> identify -> report.

The robot is a Dynamixel bus emulator on a pty driven through dynamixel_sdk; board 1 is an emulated Wii
Balance Board on a socket pair (the Bluetooth L2CAP path), board 2 one on a pty (the serial-bridge path).
The simulated robot's true parameters differ from the design guess (drivers/emulators/sim_robot.py).
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import time
from dataclasses import dataclass, replace

import numpy as np

from drivers.config import load_config
from drivers.emulators.sim_robot import twin_truth
from drivers.emulators.world import WorldOptions
from drivers.executor import SafetyTrip
from formats.errors import PoiseError
from formats.plan import Plan, save_plan
from formats.static_recording import read_recording
from identify.static import StaticCoMEstimator
from robots.tulip import tulip


@dataclass(frozen=True)
class Conditions:
    """What the demo designs with and what it runs on (lengths m, angles rad)."""

    problem: str = "free-com"
    load_share: float = 0.25
    params: str | None = None  # the model the design believes (None: the description's guess)
    uncertainty: float = 0.0  # robust design: the margin held for every ϑ_b within this radius of the guess
    truth: str | None = None  # the emulated robot's true parameters (sim_robot.twin_truth)
    placement_error: tuple[float, float] = (0.0, 0.0)  # σ of the boards' placement, unknown to the config
    gravity_comp: bool = False

    def describe(self) -> str:
        mm_, deg = 1000 * self.placement_error[0], math.degrees(self.placement_error[1])
        return (f"design {self.problem}, load share {self.load_share:g}, believing {self.params or 'the guess'}"
                f"{f', robust to ϑ_b ± {self.uncertainty * 1000:g} mm' if self.uncertainty else ''}; robot "
                f"{self.truth or 'simulated'}; boards off by σ {mm_:g} mm / {deg:g}°; gravity feed-forward "
                f"{'on' if self.gravity_comp else 'off'}")  # fmt: skip


THESIS = Conditions(load_share=0.0, params="mc", truth="thesis", placement_error=(0.005, math.radians(2.0)))
"""The thesis's bench (§3.5, §4): problem 1 (free CoM, 0.08 m margin) designed with TUlipMC (Table D.4), no load
share, P-only servos without gravity compensation, the robot as the thesis estimated it (Table 4.6), boards
placed by hand a few mm and degrees off."""


def demo_conditions(
    thesis: bool, load_share: float | None, uncertainty: float | None, truth: str | None,
    placement_error: tuple[float, float] | None, gravity_comp: bool | None, twin: bool = True,
) -> Conditions:  # fmt: skip
    """The demo's conditions: poise's (default) or the thesis's, each setting given (not None) overriding.
    Poise stands with the gravity feed-forward on the physics twin (P-only servos sag under load); the
    kinematic robot does not sag, so there it would only shift the postures."""
    base = THESIS if thesis else replace(Conditions(), gravity_comp=twin)
    given = {
        "load_share": load_share,
        "uncertainty": uncertainty,
        "truth": truth,
        "placement_error": placement_error,
        "gravity_comp": gravity_comp,
    }
    return replace(base, **{k: v for k, v in given.items() if v is not None})


@dataclass
class DemoResult:
    plan_path: pathlib.Path
    run_dir: pathlib.Path
    table: list[dict]
    cop_error: dict[str, tuple[float, float, float]]  # name -> (mean, max, rms) m
    within_se: bool  # every estimate within 2 SE of the truth (kinematic robot) or 3 SE (physics twin)
    improvement: float
    kappa: float
    timings: dict[str, float]
    figure: pathlib.Path | None
    executed: int = 0  # postures recorded (a safety stop ends the run early; what was completed is kept)
    planned: int = 0
    stopped: str | None = None  # why the run stopped early, if it did
    twin_events: list[dict] | None = None  # what the physics twin saw (--physics mujoco)
    twin_timing: dict | None = None  # simulated time against wall time × --time-scale
    execution: list[dict] | None = None  # per posture: tracking, settle time, sole slip, measured margin
    physics: str = "kinematic"
    standing: list[dict] | None = None  # physics twin: each posture stood alone (plan check --twin)
    conditions: Conditions | None = None

    @property
    def targets_met(self) -> bool:
        """Kinematic robot (the model is exact, the noise white): within 2 SE and the CoP error cut ≥ 5×.
        Physics twin (slips, sag, sway the model does not have): within 3 SE and the estimated parameters
        predicting the CoP within 10 % of what the twin's true parameters do."""
        if not self.table:
            return False
        if self.physics == "mujoco":
            # rms, what least squares minimises: a posture the model cannot fit (a sole that slid) moves the
            # estimates' mean error above the truth's while their rms stays below
            return self.within_se and self.cop_error["estimated"][2] <= 1.1 * self.cop_error["true"][2]
        return self.within_se and self.improvement >= 5


def design_plan(
    model, n: int, placements: int, seed: int, move_s: float, hold_s: float, cond: Conditions
) -> Plan:
    """The real posture design with quick settings for `cond`: its problem (0.08 m margin, each sole carrying at
    least its load share, held for every ϑ_b within its uncertainty of the guess, believing its parameter set),
    one start, closed-chain transitions."""
    from design.planner import build_plan, design
    from design.problems import Settings

    s = Settings(problem=cond.problem, margin=0.08, load_share=cond.load_share, params=cond.params,
                 uncertainty=cond.uncertainty)  # fmt: skip
    best, summary = design(model, s, n, placements, starts=1, seed=seed, workers=1)
    solver = {"backend": "casadi", "starts": summary, "kappa_initial": best.kappa_initial}
    return build_plan(model, best.postures, s, seed=seed, move_s=move_s, hold_s=hold_s, solver=solver,
                      extra_settings={"postures": n, "placements": placements, "starts": 1, "design": "demo (quick)"})  # fmt: skip


def recalibrate_sim_boards(
    session, weight_kg: float = 10.0, seconds: float = 1.0, tare_s: float = 4.0
) -> list[np.ndarray]:
    """Tare, then recalibrate every emulated board with a known weight over each cell (Leach 2014 style): the
    boards side by side, each with its own weight."""
    from drivers.wbb.recalibrate import tare_and_recalibrate

    world = session.world
    return tare_and_recalibrate(
        session.boards, lambda c: world.place_weight(c, weight_kg), weight_kg, seconds, tare_s
    )


RECALIBRATION_WEIGHT_KG = 10.0  # the known weight the demo recalibrates the emulated boards with


def _recording_gains(into: dict):
    """`recalibrate_sim_boards` as `execute`'s prepare step, keeping the boards' names and gains in `into`."""

    def prepare(session) -> None:
        gains = recalibrate_sim_boards(session, RECALIBRATION_WEIGHT_KG)
        into["gains"] = (tuple(b.name for b in session.boards), gains)

    return prepare


def _record_gains(run_dir: pathlib.Path, meta: dict, gains: tuple) -> dict:
    """run.json with the recalibrated gains as `poise run --board-gains` records them (`board_gains`), so the
    identifications know the run read per-cell calibrated boards."""
    from drivers.run_files import write_run_meta

    names, values = gains
    meta = {**meta, "board_gains": {"source": "poise demo: per-cell recalibration", "weight_kg": RECALIBRATION_WEIGHT_KG,
                                    "boards": {n: np.asarray(g, dtype=float).tolist()
                                               for n, g in zip(names, values, strict=True)}}}  # fmt: skip
    write_run_meta(run_dir / "run.json", meta)
    return meta


def stand_alone(model, plan: Plan, config, cond: Conditions, seed: int, log=print) -> list[dict]:
    """Every posture stood on its own on the physics twin in simulated time (as `plan check --twin`): what the
    thesis counted as executable — no fall, no sole on an edge, lifted or slid, feet apart."""
    from drivers.emulators.standing import stand_each

    t0 = time.monotonic()
    res = stand_each(model, plan, config, twin_truth(model, cond.truth), cond.gravity_comp, cond.placement_error,
                     seed)  # fmt: skip
    bad = [r for r in res if not r.stands]
    kinds = sorted({k for r in bad for k in r.kinds})
    log(f"    standing alone on the twin: {len(res) - len(bad)} of {len(res)} postures "
        f"{'(' + ', '.join(kinds) + ')' if kinds else ''} [{time.monotonic() - t0:.0f} s]")  # fmt: skip
    return [r.summary() for r in res]


def _setup(args: argparse.Namespace):
    """The demo's robot, configuration, conditions and emulated bench from its options."""
    model = tulip()
    config = load_config()
    cond = args.conditions if getattr(args, "conditions", None) is not None else Conditions()
    if cond.gravity_comp:
        config.executor.gravity_compensation = True
    opts = WorldOptions(noise=not args.no_noise, seed=args.seed, physics=getattr(args, "physics", "kinematic"),
                        time_scale=args.time_scale, truth=cond.truth, placement_error=cond.placement_error)  # fmt: skip
    return model, config, cond, opts


def check_demo(args: argparse.Namespace) -> None:
    """What the run would refuse after the design (the twin's --truth, the bench's options), refused before any
    work, by the checks `poise run` applies (`poise.cmd_run.check_bench`)."""
    from poise.cmd_run import check_bench

    model, config, _, opts = _setup(args)
    check_bench(model, config, "sim", "sim", opts, standing=True)  # its --truth too


def run_demo(args: argparse.Namespace, progress=None, log=print, live=None) -> DemoResult:
    """The demo into args.out (its folder checked and made ready by the caller: `DemoFolder`); `progress`: the
    executor's progress callback, drawn by `live` (a rich Live, started for the run only)."""
    from design.criteria import n_identifiable
    from poise.cmd_run import execute

    timings = {}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model, config, cond, opts = _setup(args)
    t0 = time.monotonic()
    log(
        f"1/3 design: {args.postures} postures in {args.placements} placements, CasADi + IPOPT, one start ..."
    )
    log(f"    conditions: {cond.describe()}")
    plan = design_plan(model, args.postures, args.placements, args.seed, args.move_s, args.hold_s, cond)
    plan_path = out / "plan.json"
    save_plan(plan, plan_path)
    timings["design_s"] = time.monotonic() - t0
    log(
        f"    κ {plan.solver['kappa_initial']:.1f} -> {plan.kappa[plan.base]:.1f} "
        f"({n_identifiable(model, plan.base)} identifiable parameters); "
        f"min CoP margin {min(p.margin for p in plan.postures) * 1000:.1f} mm; plan -> {plan_path}"
    )

    t0 = time.monotonic()
    run_dir = out / "run"  # absent: an earlier run's is aside (DemoFolder)
    log(f"2/3 run: {len(plan.postures)} postures, time compressed x{args.time_scale:g}, dxl bus on a pty, "
        "boards on a socket pair and a pty ...")  # fmt: skip
    ns = argparse.Namespace(plan=str(plan_path), robot="sim", boards="sim", out=str(run_dir), resume=False,
                            time_scale=args.time_scale, yes=True)  # fmt: skip
    physics = getattr(args, "physics", "kinematic")
    twin = physics == "mujoco"
    truth_spec = cond.truth
    standing = None
    if twin:
        standing = stand_alone(model, plan, config, cond, args.seed, log)
    recalibrated: dict = {}  # the per-cell gains the recalibration measured, for run.json
    prepare = None if args.no_recalibrate else _recording_gains(recalibrated)
    if prepare:
        log(
            f"    boards: tare, then per-cell recalibration with a {RECALIBRATION_WEIGHT_KG:g} kg weight over each cell"
        )
    stopped = None
    try:
        if live is not None:
            live.start()
        try:
            result, _ = execute(ns, model, plan, config, world_opts=opts, progress=progress, prepare=prepare,
                                tare_s=0.0 if prepare else 4.0)  # fmt: skip
        finally:
            if live is not None:
                live.stop()
        j = result.jitter()
        log(f"    {len(result.completed)} postures recorded; "
            f"setpoints {j['period_mean_ms']:.2f} ± {j['period_std_ms']:.2f} ms")  # fmt: skip
    except SafetyTrip as exc:  # as on the real bench: the run stops, the completed postures are on disk
        stopped = str(exc)
        log(f"    run stopped for safety: {stopped}")
    timings["run_s"] = time.monotonic() - t0
    meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    if recalibrated:
        meta = _record_gains(run_dir, meta, recalibrated["gains"])
    events = meta.get("twin_events")
    if events is not None:
        kinds = sorted({e["kind"] for e in events})
        log(f"    physics twin: {len(events)} event(s) {', '.join(kinds) if kinds else ''}")

    t0 = time.monotonic()
    log("3/3 identify: simplified model (13 base parameters), right-foot base ...")
    if not meta["segments"][-1]["completed"]:  # stopped before the first posture: nothing to identify
        log("    no posture was completed: nothing to identify")
        return DemoResult(plan_path, run_dir, [], {}, False, 0.0, float("nan"), timings, None, 0,
                          len(plan.postures), stopped, events, meta.get("twin_timing"), meta.get("report", []),
                          physics, standing, cond)  # fmt: skip
    rec = read_recording(run_dir / "recording.csv")
    log(f"    {len(rec)} of {len(plan.postures)} postures executed")
    truth_ps = twin_truth(model, truth_spec)
    try:
        est = StaticCoMEstimator(model, "right", "simplified", guess="sim").fit(rec)
    except PoiseError as exc:  # too few postures completed to identify (the run stopped early)
        log(f"    cannot identify from {len(rec)} posture(s): {exc}")
        return DemoResult(plan_path, run_dir, [], {}, False, 0.0, float("nan"), timings, None, len(rec),
                          len(plan.postures), stopped, events, meta.get("twin_timing"), meta.get("report", []),
                          physics, standing, cond)  # fmt: skip
    fit, bm = est.result_, est.base_model_
    truth = bm.values(truth_ps)
    guess = bm.values("sim")
    table, ok = [], True
    for g in fit.estimated:
        z = abs(fit.theta[g] - truth[g]) / fit.se[g]
        ok &= bool(z <= (3.0 if twin else 2.0))
        table.append({"symbol": bm.symbols[g], "true_m": truth[g], "guess_m": guess[g], "estimate_m": fit.theta[g],
                      "se_m": fit.se[g], "z": z})  # fmt: skip
    errs = {}
    for name, theta in (("guess (Table D.1)", guess), ("TUlipMC (Table D.4)", bm.values("mc")),
                        ("estimated", fit.theta), ("true", truth)):  # fmt: skip
        e = np.linalg.norm(rec.cop - est.predict_cop(rec.q, theta), axis=1)
        errs[name] = (float(e.mean()), float(e.max()), float(np.sqrt(np.mean(e**2))))
    improvement = errs["guess (Table D.1)"][0] / max(errs["estimated"][0], 1e-12)
    fig = None
    try:
        from identify.plots import plot_cop_fit

        ref = rec.cop - est.predict_cop(rec.q, guess)
        fig = plot_cop_fit(fit.residuals, rec.placement, out / "cop_fit.png", ref, "guess (Table D.1)",
                           "demo: measured − predicted CoP, simplified model, right-foot base")  # fmt: skip
    except Exception as exc:  # plotting is a nicety; never fail the demo on it
        log(f"    (no figure: {exc})")
    timings["identify_s"] = time.monotonic() - t0
    return DemoResult(plan_path, run_dir, table, errs, ok, improvement, fit.kappa, timings, fig, len(rec),
                      len(plan.postures), stopped, events, meta.get("twin_timing"), meta.get("report", []),
                      physics, standing, cond)  # fmt: skip
