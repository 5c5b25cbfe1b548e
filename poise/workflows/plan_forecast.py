"""Forecast of trajectory plans as `poise run` would record them: one path for `plan forecast` and `plan reach`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from formats.errors import DataError
from formats.trajectory_plan import TrajectoryPlan

# bytes the forecast may hold per recorded sample beside the regressor's chunks (`identify.dynamic.CHUNK_BYTES`):
# the joint angles and their filtered states, velocities, the fit's row mask — measured 0.29 kB a sample on the
# iCub arm's 7 joints (`/usr/bin/time -v poise plan forecast tests/data/icub_estimation_60s.json --rate-hz R` at
# 2.5, 5 and 10 kHz). Past STATE_BYTES in all, the forecast is refused with a rate that fits.
BYTES_PER_SAMPLE_JOINT = 48
STATE_BYTES = 2 * 2**30


@dataclass
class PlanForecast:
    """The forecast (`identify.forecast.DynamicForecast`) with what it was made for."""

    forecast: object
    model: object
    params: object  # the parameter set (the given or the plan's; with an identify dynamic result, the plan's)
    rate_hz: float
    standing: bool
    practical_s: float = 600.0  # the longest recording worth making (`identify.forecast.practical_length`)
    fitted: bool = False  # the relative SEs are against an identify dynamic result's estimates, not a guess


def forecast_plans(
    plans: Sequence[TrajectoryPlan],
    names: Sequence[str],
    noise: Sequence[float],
    params: str | None = None,
    rate_hz: float | None = None,
    friction: bool = True,
    armature: bool = False,
    practical_s: float | None = None,
    tare_kg: float | None = None,
) -> PlanForecast:
    """What the plans' runs, fitted together, determine under white noise `noise` per recorded sample: each plan
    sampled at the recording rate (default its streaming rate), standing ones with the moments about the boards'
    cells as `poise run` records them. `friction`: arms estimate it (standing robots never); `armature`: arms'
    rotor inertia too (`DynamicEstimator`'s; a standing plan's board wrench does not carry it: DataError).
    Errors name the plans (`names`) and `plan forecast`'s options; a motion that leaves parameters undetermined at
    any length raises `identify.forecast.UnexcitedError` saying which and what the motion lacks. `practical_s`
    (--practical-s) is checked against the plans' length before the forecast is made. `params`: a parameter set
    (name or file), or an `identify dynamic --json` result of the same motion, whose base parameters are then the
    values the relative SEs are against. `tare_kg`: standing plans' tare, the SD (kg) of the total load each run's
    tare leaves (default `identify.forecast.TARE_MASS_SD_KG`, 0 for ideal boards), in the SEs as `identify dynamic`
    puts a run's; given for plans that do not stand (joint torques, no boards): DataError."""
    from drivers.wbb.geometry import PLATE_HEIGHT
    from formats.dynamic_recording import MIN_SAMPLES, SLOWEST_STEP_S
    from identify.dynamic import DynamicEstimator
    from identify.forecast import TARE_MASS_SD_KG, UnexcitedError, forecast_motions, practical_length
    from robots.params_io import resolve_params
    from trajectories.plan import plan_model, plan_recording, plan_trajectory
    from trajectories.verify import sample_grid

    plan = plans[0]
    model = plan_model(plan)
    fitted = _identify_result(params, model) if params else None
    guess = resolve_params((None if fitted else params) or plan.params or next(iter(model.params)), model)
    rate = rate_hz or plan.rate_hz
    if 1.0 / rate > SLOWEST_STEP_S:
        raise DataError(f"recording rate {rate:g} Hz: too slow to resolve a motion's dynamics (at least "
                        f"{1 / SLOWEST_STEP_S:g} Hz; --rate-hz)")  # fmt: skip
    trajs, kinds = [], set()
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
        trajs.append((name, traj, how))
    if len(kinds) > 1:
        raise DataError("the plans identify different things (standing or not, base, simplified model): "
                        "forecast them apart")  # fmt: skip
    ((standing, base, simplified),) = kinds
    if tare_kg is not None and not standing:  # refused as --armature is for a standing plan
        what = "is a plan" if len(names) == 1 else "are plans"
        raise DataError(f"--tare-kg: the tare applies to board recordings of standing plans; {' + '.join(names)} "
                        f"{what} of a fixed-base robot (joint torques, no boards): leave --tare-kg out")  # fmt: skip
    practical = practical_length(practical_s, sum(traj.duration for _, traj, _ in trajs))
    _check_memory(trajs, rate, model.nq)
    motions = []
    for name, traj, how in trajs:
        t = sample_grid(traj, 1.0 / rate)
        if len(t) < MIN_SAMPLES:
            raise DataError(f"{name}: {len(t)} samples at {rate:g} Hz over its {traj.duration:g} s; a recording "
                            f"needs at least {MIN_SAMPLES}: raise --rate-hz")  # fmt: skip
        _check_cutoff(name, how.meta, traj.duration, rate)
        q, _, _ = traj.sample(t)
        meta = dict(how.meta)
        if how.standing:  # as `poise run` records it: moments about the boards' cells
            meta["moment_z_m"] = f"{-PLATE_HEIGHT:.6g}"
        motions.append((t, q, meta))
    est = DynamicEstimator(model, base, simplified, friction and not standing,
                           quantity="wrench" if standing else "torque", armature=armature)  # fmt: skip
    try:  # standing: one motion kind and foot placement, the fit's own check, the plans named
        tare = TARE_MASS_SD_KG if tare_kg is None else tare_kg  # a torque fit's is none (`forecast_motions`)
        fc = forecast_motions(est, motions, noise, guess, labels=names, what="plan", tare_mass_sd=tare)
    except UnexcitedError as exc:
        raise _unexcited_by_plans(exc, plan, names, friction and not standing) from None
    if fitted:  # the relative SEs against the result's estimates, base parameter by base parameter
        nb = fc.inertial
        values = [
            _same_parameter(fitted, sym, form)
            for sym, form in zip(fc.symbols[:nb], fc.formulas[:nb], strict=True)
        ]
        missing = [
            f"{sym} = {form}"
            for sym, form, v in zip(fc.symbols[:nb], fc.formulas[:nb], values, strict=True)
            if v is None
        ]
        if missing:
            raise DataError(f"--params {params}: this identify dynamic result lacks {len(missing)} of the {nb} base "
                            f"parameters the plan(s) fit (first: {missing[0]}): give a result of the same robot, "
                            "motion and foot placement (--simplified alike), or a parameter set")  # fmt: skip
        fc.guess[:nb] = values
        fc.params_name = f"{params} (identify dynamic's estimates)"
    return PlanForecast(fc, model, guess, rate, standing, practical, fitted=bool(fitted))


COEFFICIENT_TOL = 0.01  # a base parameter's coefficients may differ so much between foot placements' bases


def _same_parameter(fitted: dict[str, tuple[str, float]], symbol: str, formula: str) -> float | None:
    """The value `fitted` ({symbol: (formula, value)}) holds for base parameter `symbol` of `formula`: its formula
    the same up to COEFFICIENT_TOL on each standard parameter's coefficient (a standing fit takes its base at the
    recording's middle posture, a plan's forecast at its own: 0.3015·mcx@foot_l − 0.0001021·mcz@foot_l against
    0.2999·mcx@foot_l); else None."""
    from robots.base_params import formula_terms

    if symbol not in fitted:
        return None
    theirs, value = fitted[symbol]
    try:
        a, b = formula_terms(theirs), formula_terms(formula)
    except ValueError:  # no formula of `DynamicBase.formula`'s
        return None
    same = all(
        abs(a.get(k, 0.0) - b.get(k, 0.0)) <= COEFFICIENT_TOL * max(1.0, abs(b.get(k, 0.0))) for k in {*a, *b}
    )
    return value if same else None


def _identify_result(path: str, model) -> dict[str, tuple[str, float]] | None:
    """{base-parameter symbol: (formula, value)} of an `identify dynamic --json` result at `path` (of `model`'s
    robot), or None when `path` is not one (a parameter set's name or file)."""
    import json
    from pathlib import Path

    if not Path(path).is_file():
        return None
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # not JSON: the parameter-set reader says what is wrong with it
    if not isinstance(doc, dict) or not isinstance(doc.get("parameters"), list) or "sigma_nm" not in doc:
        return None
    from robots.registry import same_robot

    if not same_robot(str(doc.get("robot")), model.name):
        raise DataError(f"--params {path}: an identify dynamic result for {doc.get('robot')!r}, the plan is for "
                        f"{model.name!r}")  # fmt: skip
    try:
        return {str(p["symbol"]): (str(p["formula"]), float(p["value"])) for p in doc["parameters"]}
    except (KeyError, TypeError, ValueError):
        raise DataError(f"--params {path}: an identify dynamic result whose parameters lack a formula or "
                        "value") from None  # fmt: skip


def _check_memory(trajs: list, rate: float, nq: int) -> None:
    """DataError naming a rate that fits when the plans' samples at `rate` would hold more than STATE_BYTES."""
    check_memory([traj.duration for _, traj, _ in trajs], rate, BYTES_PER_SAMPLE_JOINT * (nq + 1),
                 "the forecast would hold about {gib} of joint states")  # fmt: skip


def check_memory(durations: Sequence[float], rate: float, per_sample: float, holds: str) -> None:
    """DataError naming a --rate-hz that fits when motions of `durations` s sampled at `rate` (as `sample_grid`
    counts: ⌈D·r⌉ + 1 samples each) at `per_sample` bytes a sample would take more than STATE_BYTES; `holds`
    says what takes them, its "{gib}" the size."""
    samples = sum(max(2, math.ceil(d * rate) + 1) for d in durations)
    if samples * per_sample <= STATE_BYTES:
        return
    seconds = sum(durations)
    fits = math.floor((STATE_BYTES / per_sample - 2 * len(durations)) / seconds)  # ⌈D·r⌉ + 1 ≤ D·r + 2
    gib = f"{samples * per_sample / 2**30:.1f} GiB"
    raise DataError(f"{seconds:g} s of motion at {rate:g} Hz is {samples:,} samples: {holds.format(gib=gib)}, over "
                    f"the {STATE_BYTES / 2**30:g} GiB it allows itself — give --rate-hz {fits:g} or less")  # fmt: skip


def _check_cutoff(name: str, meta: dict, duration: float, rate: float) -> None:
    """The fit's cut-off for this plan's motion needs a recording rate above twice it (`check_band_rate`)."""
    check_band_rate(name, meta, duration, rate, "a recording")


def band_rate(meta: dict, duration: float) -> tuple[float, float, str]:
    """The lowest whole rate (Hz) above twice the cut-off `identify dynamic` fits a plan's motion with
    (`identify.dynamic.band_cutoff` of its declared `motion_band_hz`, else the fit's default), that cut-off, and
    why it is that."""
    from identify.dynamic import DEFAULT_CUTOFF_HZ, band_cutoff

    if "motion_band_hz" not in meta:
        fc, why = DEFAULT_CUTOFF_HZ, "no declared motion band: the fit's default"
    else:
        band = float(meta["motion_band_hz"])
        fc, why = band_cutoff(band, duration), f"its motion's band {band:g} Hz"
    return math.floor(2 * fc) + 1, fc, why


def check_band_rate(name: str, meta: dict, duration: float, rate: float, what: str) -> None:
    """DataError naming the --rate-hz that carries a plan's motion when `rate` is at or below twice the fit's
    cut-off for it (`band_rate`): `what` (a recording, setpoints) at `rate` would alias the motion, and `identify
    dynamic`'s own message points at its --cutoff-hz, which neither `plan forecast` nor `plan sample` has."""
    need, fc, why = band_rate(meta, duration)
    if fc < rate / 2:
        return
    raise DataError(f"{name}: identify dynamic fits this motion with a {fc:.3g} Hz cut-off ({why}), at or above half "
                    f"the sample rate of {what} at {rate:g} Hz ({rate / 2:g} Hz): give --rate-hz {need:g} or "
                    "more")  # fmt: skip


def plan_problems(plans: Sequence[TrajectoryPlan], names: Sequence[str]) -> list[str]:
    """What `plan check PLAN` finds wrong in each plan (`trajectories.plan.check_plan`, its 1 ms grid), each problem
    prefixed by the plan's name: a forecast of a plan `poise run` refuses is of a run that will not happen."""
    from trajectories.plan import check_plan, plan_model, plan_trajectory

    out = []
    for name, p in zip(names, plans, strict=True):
        model = plan_model(p)
        traj = plan_trajectory(p, model)
        try:
            problems = check_plan(p, model, traj).problems
        except DataError as exc:  # e.g. a closed chain that does not close at some sample
            problems = [str(exc)]
        out += [f"{name}: {msg}" for msg in problems]
    return out


def _unexcited_by_plans(exc, plan: TrajectoryPlan, names: Sequence[str], friction: bool):
    """`exc` (UnexcitedError) said of the plans, with what would determine the parameters it names."""
    from identify.forecast import UnexcitedError

    which = " + ".join(names)
    do = []
    if exc.still:
        do.append(f"add motion of joint(s) {', '.join(exc.still)} (they do not move in it)")
    if exc.slow:
        do.append(f"move joint(s) {', '.join(exc.slow)} faster than {exc.reversal_velocity:.3g} rad/s somewhere "
                  "(slower rows are dropped by the fit, and their friction with them)"
                  + (", or forecast --no-friction" if friction else ""))  # fmt: skip
    if not do:
        do.append("the motion leaves them dependent on the others")
    prior = " ".join(f"--prior {n}" for n in names)
    msg = (f"{which} does not excite {len(exc.unexcited)} of the {exc.columns} fitted parameters ({exc.named()}): no "
           f"length of it determines them; {'; '.join(do)} — or design a run that completes it: `poise plan "
           f"trajectory {plan.robot_source or plan.robot} {prior} …`, and forecast the plans together")  # fmt: skip
    return UnexcitedError(msg, exc.unexcited, exc.columns, exc.still, exc.slow, exc.reversal_velocity)
