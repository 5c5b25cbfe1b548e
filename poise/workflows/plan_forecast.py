"""Forecast of trajectory plans as `poise run` would record them: one path for `plan forecast` and `plan reach`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from formats.errors import DataError
from formats.trajectory_plan import TrajectoryPlan


@dataclass
class PlanForecast:
    """The forecast (`identify.forecast.DynamicForecast`) with what it was made for."""

    forecast: object
    model: object
    params: object  # the guessed parameter set
    rate_hz: float
    standing: bool


def forecast_plans(
    plans: Sequence[TrajectoryPlan],
    names: Sequence[str],
    noise: Sequence[float],
    params: str | None = None,
    rate_hz: float | None = None,
    friction: bool = True,
    armature: bool = False,
) -> PlanForecast:
    """What the plans' runs, fitted together, determine under white noise `noise` per recorded sample: each plan
    sampled at the recording rate (default its streaming rate), standing ones with the moments about the boards'
    cells as `poise run` records them. `friction`: arms estimate it (standing robots never); `armature`: arms'
    rotor inertia too (`DynamicEstimator`'s; a standing plan's board wrench does not carry it: DataError)."""
    from drivers.wbb.geometry import PLATE_HEIGHT
    from formats.dynamic_recording import MIN_SAMPLES, SLOWEST_STEP_S
    from identify.dynamic import DynamicEstimator
    from identify.forecast import forecast_motions
    from robots.params_io import resolve_params
    from trajectories.plan import plan_model, plan_recording, plan_trajectory
    from trajectories.verify import sample_grid

    plan = plans[0]
    model = plan_model(plan)
    guess = resolve_params(params or plan.params or next(iter(model.params)), model)
    rate = rate_hz or plan.rate_hz
    if 1.0 / rate > SLOWEST_STEP_S:
        raise DataError(f"recording rate {rate:g} Hz: too slow to resolve a motion's dynamics (at least "
                        f"{1 / SLOWEST_STEP_S:g} Hz; --rate-hz)")  # fmt: skip
    motions, kinds = [], set()
    for name, p in zip(names, plans, strict=True):
        if p.robot != plan.robot or list(p.joint_names) != list(plan.joint_names):
            raise DataError(
                f"{name} is a plan for {p.robot!r}; {names[0]} for {plan.robot!r}: forecast one robot"
            )
        if (rate_hz or p.rate_hz) != rate:
            raise DataError(f"{name} streams at {p.rate_hz:g} Hz, {names[0]} at {rate:g} Hz: give --rate-hz")
        traj = plan_trajectory(p, model)
        how = plan_recording(p, traj)
        kinds.add((how.standing, how.base, bool(p.settings.get("simplified", False))))
        t = sample_grid(traj, 1.0 / rate)
        if len(t) < MIN_SAMPLES:
            raise DataError(f"{name}: {len(t)} samples at {rate:g} Hz over its {traj.duration:g} s; a recording "
                            f"needs at least {MIN_SAMPLES}: raise --rate-hz")  # fmt: skip
        q, _, _ = traj.sample(t)
        meta = dict(how.meta)
        if how.standing:  # as `poise run` records it: moments about the boards' cells
            meta["moment_z_m"] = f"{-PLATE_HEIGHT:.6g}"
        motions.append((t, q, meta))
    if len(kinds) > 1:
        raise DataError("the plans identify different things (standing or not, base, simplified model): "
                        "forecast them apart")  # fmt: skip
    standing, base, simplified = kinds.pop()
    est = DynamicEstimator(model, base, simplified, friction and not standing,
                           quantity="wrench" if standing else "torque", armature=armature)  # fmt: skip
    return PlanForecast(forecast_motions(est, motions, noise, guess), model, guess, rate, standing)
