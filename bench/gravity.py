"""Gravity feed-forward on the physics twin, offline in simulated time: every posture of a designed plan stood
with and without the executor's feed-forward; base-sole tilt, slide, hold error, CoP errors, and the static
identification (simplified model) of the resulting recordings against the twin's truth.

`python -m bench.gravity [PLAN.json]` prints the table (default plan: designed here with
`poise plan postures tulip --postures 18 --placements 3 --load-share 0.25 --seed 1`);
`python -m bench.gravity PLAN.json --moves 1 8 13` compares the ground moves to those postures without
feed-forward, with it at the postures only, and on every tick (the executor's)."""

from __future__ import annotations

import pathlib
import sys
import tempfile
import time

import numpy as np

FIELDS = ("base_tilt_deg", "other_tilt_deg", "slide_mm", "hold_error_deg", "cop_vs_com_mm", "model_cop_mm",
          "model_cop_cmd_mm")  # fmt: skip


def _design(out: pathlib.Path, postures: int, placements: int) -> pathlib.Path:
    from poise.cli import main

    argv = ["plan", "postures", "tulip", "--postures", str(postures), "--placements", str(placements),
            "--load-share", "0.25", "--seed", "1", "--out", str(out)]  # fmt: skip
    if main(argv) != 0:
        raise RuntimeError("plan design failed")
    return out


def _identify(model, plan, results) -> dict:
    """Fit the simplified static model to the stood postures (encoders, boards) and compare with the truth."""
    from drivers.emulators.sim_robot import true_parameters
    from formats.static_recording import StaticRecording
    from identify.static import StaticCoMEstimator

    rec = StaticRecording(model.name, plan.base, model.joint_names, np.array([r.posture for r in results]),
                          np.array([p.placement for p in plan.postures]), np.array([r.q_measured for r in results]),
                          np.array([r.cop for r in results]))  # fmt: skip
    est = StaticCoMEstimator(model, plan.base, "simplified", guess=plan.params).fit(rec)
    fit, bm = est.result_, est.base_model_
    truth = bm.values(true_parameters(model))
    z = np.array([abs(fit.theta[g] - truth[g]) / fit.se[g] for g in fit.estimated])
    return {"parameters": len(z), "within_3se": int((z <= 3).sum()), "max_z": float(z.max()),
            "median_z": float(np.median(z)), "rms_residual_mm": float(1000 * np.sqrt(np.mean(fit.residuals**2)))}  # fmt: skip


def measure_plan(plan_path: pathlib.Path) -> dict:
    from drivers.config import load_config
    from drivers.emulators.standing import stand
    from formats.plan import load_plan
    from robots.tulip import tulip

    model, cfg = tulip(), load_config()
    plan = load_plan(plan_path, model)
    out: dict = {"plan": str(plan_path), "postures": {}, "identification": {}}
    for ff in (False, True):
        t0 = time.perf_counter()
        res = [stand(model, plan, p.index, cfg, feedforward=ff) for p in plan.postures]
        key = "feedforward" if ff else "plain"
        out["postures"][key] = [
            {k: getattr(r, k) for k in FIELDS + ("posture", "other_kg", "events")} for r in res
        ]
        out["identification"][key] = _identify(model, plan, res)
        out[f"wall_{key}_s"] = time.perf_counter() - t0
    return out


def _goals(tw, q: np.ndarray) -> None:
    for k in range(len(q)):
        tw.set_goal(k, q[k])


def _stream(tw, setpoints: np.ndarray, offsets: np.ndarray, dt: float) -> tuple[float, float]:
    """Command each setpoint (+ offset) for dt simulated seconds; the largest base-sole tilt (deg) and tracking
    error (deg) on the way."""
    from drivers.emulators.standing import _tilt_deg

    tilt = err = 0.0
    for sp, off in zip(setpoints, offsets, strict=True):
        _goals(tw, sp + off)
        tw.settle_sim(dt)
        tilt = max(tilt, _tilt_deg(tw, tw.base_site))
        err = max(err, float(np.degrees(np.abs(tw.q - sp).max())))
    return tilt, err


def ground_move(model, plan, cfg, move, mode: str) -> dict:
    """Stand the move's start posture, stream its checked setpoints at the tick rate in simulated time, settle the
    destination: mode none (no feed-forward), settle (feed-forward at the postures only, none while moving) or
    tick (the executor's: on every setpoint)."""
    from drivers.emulators.mujoco_twin import ServoModel, Twin, TwinOptions
    from drivers.emulators.sim_robot import true_parameters
    from drivers.emulators.standing import AIR_S, FROZEN_CLOCK, measure
    from drivers.executor import FEEDFORWARD_RAMP_S
    from drivers.gravity import goal_offsets
    from drivers.wbb.geometry import board_poses_for

    b = next(p for p in plan.postures if p.index == move.to_posture)
    a = plan.postures[plan.postures.index(b) - 1]
    opts = TwinOptions(servo=ServoModel(p_gain=cfg.executor.position_p_gain), time_scale=FROZEN_CLOCK)
    tw = Twin(model, true_parameters(model), opts, base=plan.base)
    for k in range(model.nq):
        tw.set_torque(k, True)
    _goals(tw, a.q)
    tw.settle_sim(AIR_S)
    poses = board_poses_for(np.array(plan.placement(a.placement).other_foot), cfg.right_board, cfg.left_board)
    tw.place(poses)
    dt = 1.0 / cfg.executor.rate_hz
    ff = mode != "none"
    off_a = goal_offsets(model, cfg, a.q, plan.params, plan.base) if ff else np.zeros(model.nq)
    n = round(FEEDFORWARD_RAMP_S / dt)
    _stream(tw, np.repeat(a.q[None], n, 0), off_a * np.arange(1, n + 1)[:, None] / n, dt)
    tw.settle_sim(3.0)
    sp = move.setpoints
    offs = goal_offsets(model, cfg, sp, plan.params, plan.base) if mode == "tick" else np.zeros_like(sp)
    tilt, err = _stream(tw, sp, offs, move.duration_s / len(sp))
    off_b = goal_offsets(model, cfg, sp[-1], plan.params, plan.base) if ff else np.zeros(model.nq)
    _goals(tw, sp[-1] + off_b)
    tw.settle_sim(4.0)
    s = measure(tw, model, plan, b.index, poses)
    return {"move": f"{a.index}->{b.index}", "mode": mode, "move_s": move.duration_s, "move_tilt_max_deg": tilt,
            "move_tracking_max_deg": err, **{k: getattr(s, k) for k in FIELDS + ("events",)}}  # fmt: skip


def measure_moves(plan_path: pathlib.Path, destinations: list[int]) -> list[dict]:
    """The ground moves to `destinations` (posture indices) of a plan, in each of the three modes."""
    from drivers.config import load_config
    from drivers.setpoints import check_run
    from formats.plan import load_plan
    from robots.tulip import tulip

    model, cfg = tulip(), load_config()
    plan = load_plan(plan_path, model)
    checked = check_run(plan, model, cfg)
    return [ground_move(model, plan, cfg, checked.moves[d], mode) for d in destinations
            for mode in ("none", "settle", "tick")]  # fmt: skip


def run(quick: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = _design(pathlib.Path(tmp) / "p.json", 6 if quick else 18, 3)
        return measure_plan(path)


def _print(res: dict) -> None:
    plain, ff = res["postures"]["plain"], res["postures"]["feedforward"]
    print("posture  " + "  ".join(f"{f:>20s}" for f in FIELDS))
    for a, b in zip(plain, ff, strict=True):
        print(
            f"{a['posture']:7d}  " + "  ".join(f"{a[f]:9.2f} -> {b[f]:6.2f}" for f in FIELDS),
            a["events"],
            b["events"],
        )
    for key in ("plain", "feedforward"):
        print(key, res["identification"][key])


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "--moves":  # PLAN.json --moves 1 8 13
        for row in measure_moves(pathlib.Path(sys.argv[1]), [int(x) for x in sys.argv[3:]]):
            print(
                " ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()),
                flush=True,
            )
    elif len(sys.argv) > 1:
        _print(measure_plan(pathlib.Path(sys.argv[1])))
    else:
        _print(run(quick=False))
