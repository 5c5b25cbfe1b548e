"""`plan forecast` of long motions: wall time and peak memory (tracemalloc) of the forecast for the stored TUlip
double-support design (10 s at 100 Hz, periodic) repeated to 60 s and to 600 s — the length the forecast itself
names as practical. The filtered noise's covariance is applied as per-kind Toeplitz products (FFT), never formed:
`dense_gb` is what one copy of the fitted rows' dense N × N covariance would take."""

from __future__ import annotations

import pathlib
import time
import tracemalloc

import numpy as np

from drivers.wbb.geometry import PLATE_HEIGHT
from formats.dynamic_recording import DynamicRecording
from formats.trajectory_plan import load_trajectory_plan
from identify.dynamic import DynamicEstimator
from identify.forecast import forecast_motions
from robots.registry import get_model
from trajectories.plan import plan_recording, plan_trajectory

PLAN = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "tulip_double_support_10s.json"
NOISE = (2.0, 0.3, 0.3)  # N, N·m, N·m per recorded sample


def _motion(seconds: float):
    """The plan's motion repeated to `seconds` at its rate (one period sampled, then tiled: the design is periodic
    and sampling its constrained coordinates is slow), with the metadata `poise run` records."""
    plan = load_trajectory_plan(PLAN)
    model = get_model(plan.robot)
    traj = plan_trajectory(plan, model)
    period = int(round(traj.duration * plan.rate_hz))
    q = traj.sample(np.arange(period) / plan.rate_hz)[0]
    k = np.arange(int(round(seconds * plan.rate_hz)) + 1)
    meta = dict(plan_recording(plan, traj).meta)
    meta["moment_z_m"] = f"{-PLATE_HEIGHT:.6g}"
    return model, k / plan.rate_hz, q[k % period], meta


def _estimator(model) -> DynamicEstimator:
    return DynamicEstimator(model, "right", True, False, quantity="wrench")


def run(quick: bool = False) -> dict:
    out: dict = {"plan": PLAN.name, "noise": list(NOISE), "cases": []}
    for seconds in (60.0,) if quick else (60.0, 600.0):
        model, t, q, meta = _motion(seconds)

        rec = DynamicRecording(model.name, "right", list(model.joint_names), t, q, wrench=np.zeros((len(t), 6)),
                               meta=meta)  # fmt: skip
        rows = len(_estimator(model).prepare_many([rec])[0])
        t0 = time.perf_counter()
        fc = forecast_motions(_estimator(model), [(t, q, meta)], NOISE)
        wall = time.perf_counter() - t0
        tracemalloc.start()
        forecast_motions(_estimator(model), [(t, q, meta)], NOISE)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out["cases"].append({
            "duration_s": seconds, "rows": rows, "wall_s": wall, "peak_mb": peak / 1e6,
            "dense_gb": rows**2 * 8 / 1e9, "cutoff_hz": fc.cutoff_hz,
            "median_rel_se_pct": float(np.median(fc.rel_se_pct[: fc.inertial])),
        })  # fmt: skip
        print(f"   {seconds:g} s: {rows} rows, {wall:.2f} s, peak {peak / 1e6:.0f} MB", flush=True)
    return out
