"""What a motion class can determine at all: each base parameter's relative SE in a run designed for it alone.

A design for all parameters at once trades them against each other; one designed for ϑk alone (the logvar
criterion focused on ϑk, from the design for all) tries for the best this class of motion — its limits, balance,
duration — does for ϑk under the stated noise. Each verdict takes the better of the two forecasts: the design's
criterion sees unfiltered rows and the fit filtered ones, so a focus can lose on the forecast (TUlip, 2 Hz). A
parameter that no design found leaves within the practical recording length is named as one the motion class
cannot determine at this noise (as far as the designs found go: local optima).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from formats.errors import DataError
from robots.parallel import in_processes
from trajectories.excitation import ExcitationResult, ExcitationSettings
from trajectories.multistart import design_one, settings_dict
from trajectories.plan import make_plan

VERDICTS = ("one run", "repeated", "beyond", "infeasible", "zero guess")


@dataclass
class ParameterReach:
    """One base parameter: its relative SE in one run designed for it alone and in the design for all at once, and
    the better of the two (the verdict's): the best this motion class is known to do for it."""

    symbol: str
    formula: str
    guess: float
    rel_se_pct: float  # the better verified design's, one run of the settings' duration
    needed_s: float  # that motion repeated to the target relative SE (SE ∝ 1/√time)
    best_design: str  # "alone" or "all"
    alone_rel_se_pct: float  # designed for it alone (the focus on it, from the design for all)
    all_at_once_rel_se_pct: float  # in the design for every parameter (logvar)
    # one of VERDICTS: determined in one run, by repeating it within the practical length, beyond it, its design
    # fails verification, or no relative SE (the guessed value is zero)
    verdict: str
    seconds: float  # its design's time
    unit: str = ""  # kg, kg·m or kg·m²
    alone_verified: bool = True  # its own design passes verification (else its forecast is not counted)


@dataclass
class Reach:
    """`parameter_reach`'s result."""

    parameters: list[ParameterReach]
    duration_s: float
    noise: list[float]
    well_pct: float
    practical_s: float
    all_at_once_determined: list[str]  # none when the design for all fails verification
    all_at_once_verified: bool = True
    rate_hz: float = 100.0
    seed: int = 1
    settings: ExcitationSettings | None = None  # the design for all's (each ϑk's adds its focus)
    friction_fitted: bool = True  # the forecasts fit each arm joint's friction, as `identify dynamic` does
    plans: dict = field(default_factory=dict)  # label ("all", "ϑk") → its TrajectoryPlan

    def symbols(self, verdict: str) -> list[str]:
        return [p.symbol for p in self.parameters if p.verdict == verdict]

    def to_dict(self) -> dict:
        def num(v: float) -> float | None:
            return float(v) if np.isfinite(v) else None

        return {
            "duration_s": self.duration_s,
            "noise": self.noise,
            "well_pct": self.well_pct,
            "practical_s": self.practical_s,
            "rate_hz": self.rate_hz,
            "seed": self.seed,
            "motion": self.settings.motion if self.settings else None,
            "friction_fitted": self.friction_fitted,
            "settings": settings_dict(self.settings) if self.settings else None,
            "all_at_once_verified": self.all_at_once_verified,
            **{key: self.symbols(v) for key, v in zip(
                ("one_run", "if_repeated", "beyond_practical", "infeasible", "zero_guess"), VERDICTS, strict=True)},
            "all_at_once_determined": self.all_at_once_determined,
            "parameters": [
                {"symbol": p.symbol, "formula": p.formula, "unit": p.unit, "guess": num(p.guess),
                 "rel_se_pct": num(p.rel_se_pct),
                 "needed_s": num(p.needed_s), "best_design": p.best_design,
                 "alone_rel_se_pct": num(p.alone_rel_se_pct), "all_at_once_rel_se_pct": num(p.all_at_once_rel_se_pct),
                 "alone_verified": p.alone_verified, "verdict": p.verdict, "seconds": p.seconds}
                for p in self.parameters
            ],
        }  # fmt: skip


def parameter_reach(
    robot: str,
    model,
    settings: ExcitationSettings,
    noise: Sequence[float],
    which: Sequence[int] | None = None,
    seed: int = 1,
    rate_hz: float = 100.0,
    well_pct: float = 15.0,
    practical_s: float | None = None,
    workers: int | None = None,
    on_design: Callable[[str], None] | None = None,
    on_total: Callable[[int | None], None] | None = None,
) -> Reach:
    """Design one run for every base parameter in `which` (0-based; default all) alone and one for all at once
    (logvar, raw units, rows weighted by the noise when standing), in worker processes, and forecast each under
    white `noise` per recorded sample (`plan forecast`'s). `on_design(label)` after each design, `on_total(n)` when
    the number of designs is known (with `which` none: after the design for all). The design for all is made and
    forecast first: it numbers the base parameters `which` must be among."""
    from identify.forecast import UnexcitedError, practical_length
    from poise.workflows.plan_forecast import forecast_plans

    practical_s = practical_length(practical_s, settings.duration, "one run of --duration")
    base = replace(settings, criterion="logvar", scaling="none", max_kappa=None, focus=None)
    if settings.motion != "free":
        sig = np.asarray(noise, dtype=float)
        base = replace(
            base, row_noise=tuple(np.broadcast_to(sig, 3).tolist()) if sig.size in (1, 3) else None
        )
    base.validate()
    jobs: dict[str, ExcitationSettings] = {"all": base}
    if which is not None:
        which = sorted(set(which))
        if not which:
            raise DataError("name at least one base parameter")
        count, exact = design_base_count(model, base)  # before any design: a misnamed one costs none
        _check_asked(which, count, robot, base, exact)
    if on_total:
        on_total(1 + len(which) if which is not None else None)
    # the design for all first: its forecast numbers the base parameters, which the asked ones must be among
    results = _design(robot, jobs, seed, workers, on_design)
    plans = {}

    def forecast(res: ExcitationResult, s: ExcitationSettings, label: str):
        plan = plans[label] = make_plan(robot, model, res, s, seed, rate_hz)
        # as `identify dynamic` fits an arm by default: with friction (a standing robot has none to fit)
        try:
            return forecast_plans([plan], [robot], noise, rate_hz=rate_hz, friction=True).forecast
        except UnexcitedError as exc:
            raise _unexcited_by_design(exc, label, s, which) from None

    every = forecast(results["all"], base, "all")
    nb = every.inertial
    if which is None:  # now that the base is known
        which = list(range(nb))
    else:  # a double-support design's placement may keep fewer than double support at large
        _check_asked(which, nb, robot, base)
    more = {f"ϑ{k + 1}": replace(base, focus=(k,)) for k in which}
    if on_total:
        on_total(1 + len(more))
    results |= _design(robot, more, seed, workers, on_design)
    jobs |= more
    if list(results["all"].base_symbols[:nb]) != list(every.symbols[:nb]):
        raise DataError("the design's base parameters are not the fit's: cannot match them by name")
    all_ok = bool(results["all"].verification.get("ok"))
    now = every.determined(well_pct, practical_s)[0] if all_ok else []
    out = []
    for k in which:
        label = f"ϑ{k + 1}"
        res = results[label]
        fc = forecast(res, jobs[label], label)
        alone, other = float(fc.rel_se_pct[k]), float(every.rel_se_pct[k])
        tried = [(alone, float(fc.needed_s(well_pct)[k]), "alone")] if res.verification.get("ok") else []
        if all_ok:
            tried.append((other, float(every.needed_s(well_pct)[k]), "all"))
        rel, need, best = min(tried, key=lambda r: r[0]) if tried else (alone, math.inf, "alone")
        verdict = (
            "infeasible" if not tried
            else "zero guess" if fc.guess[k] == 0
            else "one run" if rel < well_pct else "repeated" if need <= practical_s else "beyond"
        )  # fmt: skip
        out.append(ParameterReach(fc.symbols[k], fc.formulas[k], float(fc.guess[k]), rel, need, best, alone,
                                  other, verdict, res.seconds, fc.units[k] if fc.units else "",
                                  bool(res.verification.get("ok"))))  # fmt: skip
    sig = [float(v) for v in np.atleast_1d(noise)]
    return Reach(out, settings.duration, sig, well_pct, practical_s, list(now), all_ok, rate_hz, seed, base,
                 base.motion == "free", plans)  # fmt: skip


def design_base_count(model, settings: ExcitationSettings) -> tuple[int, bool]:
    """How many base inertial parameters a design of `settings` numbers, from the base regressor alone (no design):
    an arm's joint torques, or one sole's board wrench (single support) — exact —; in double support the count
    of double support at large, an upper bound (a design at one foot placement keeps a subset, known once its
    placement is: `robots.motion_class.placement_base`). Returns (count, exact)."""
    from robots.base_params import RegressorSpec, cached_dynamic_base
    from robots.motion_class import standing_base
    from robots.stance_spec import resolve_base
    from trajectories.balance_excitation import zmp_spec

    if settings.motion == "free":
        spec = RegressorSpec("torque", settings.base or model.root)
        return cached_dynamic_base(model, spec, settings.simplified).rank, True
    spec = zmp_spec(resolve_base(model, settings.base))
    if settings.motion == "single-support":
        return standing_base(model, spec, settings.simplified).rank, True
    return cached_dynamic_base(model, spec, settings.simplified, settings.motion, ordered=True).rank, False


def _check_asked(
    which: Sequence[int], nb: int, robot: str, settings: ExcitationSettings, exact: bool = True
) -> None:
    """--only's parameters (0-based) among the motion's `nb` base inertial parameters (`exact` False: at most
    `nb`), else a DataError naming those that are not and the `model show` that lists them."""
    if max(which) < nb:
        return
    bad = ", ".join(f"ϑ{k + 1}" for k in which if k >= nb)
    has = f"which has {nb}" if exact else f"which has at most {nb}"
    show = f"poise model show {robot} --regressor " + {
        "free": "torque", "single-support": "base-wrench:fz,mx,my",
        "double-support": "base-wrench:fz,mx,my --motion double-support",
    }[settings.motion] + (f" --base {settings.base}" if settings.base else "") + (
        " --simplified" if settings.simplified else "")  # fmt: skip
    raise DataError(f"plan reach --only {bad}: not a base inertial parameter of this motion, {has} "
                    f"(ϑ1–ϑ{nb}; `{show}` lists them)")  # fmt: skip


def _unexcited_by_design(exc, label: str, settings: ExcitationSettings, asked: Sequence[int] | None = None):
    """`exc` (`identify.forecast.UnexcitedError`) said of the design `label` ("all", or "ϑk" designed alone), with
    the design options that move more: what reach can change (its designs choose the motion). `asked` (--only,
    0-based): why parameters it did not name still block them."""
    from identify.forecast import UnexcitedError

    which = "the design for all at once" if label == "all" else f"the design for {label} alone"
    why = exc.why()
    spline = settings.parametrisation != "fourier"
    more = ("more --waypoints, a longer --duration" if spline else
            "more --harmonics, a longer --period (--duration a whole number of them)") + ", or more --max-iter"  # fmt: skip
    msg = (f"{which} does not excite {len(exc.unexcited)} of the {exc.columns} fitted parameters ({exc.named()}): "
           f"no length of it determines them, so their reach is not known{' (' + why + ')' if why else ''}; give "
           f"{more}, or another --seed")  # fmt: skip
    if asked is not None:
        named = ", ".join(f"ϑ{k + 1}" for k in asked)
        msg += (f". --only {named} does not avoid it: each SE comes from a fit of all {exc.columns} parameters "
                "together, as identify dynamic fits a recording, and one the motion leaves undetermined leaves that "
                "fit without a solution (a design for one parameter alone is forecast the same way)")  # fmt: skip
    return UnexcitedError(msg, exc.unexcited, exc.columns, exc.still, exc.slow, exc.reversal_velocity)


def _design(
    robot: str,
    jobs: dict[str, ExcitationSettings],
    seed: int,
    workers: int | None,
    on_design: Callable[[str], None] | None,
) -> dict[str, ExcitationResult]:
    """Each job's design (same seed: the same start for every parameter), in `workers` processes."""
    workers = max(1, min(len(jobs), workers or os.cpu_count() or 1))
    out: dict[str, ExcitationResult] = {}
    if workers == 1:
        for label, s in jobs.items():
            out[label] = design_one(robot, s, seed)
            if on_design:
                on_design(label)
        return out
    for label, result in in_processes(
        design_one, {label: (robot, s, seed) for label, s in jobs.items()}, workers
    ):
        out[label] = result
        if on_design:
            on_design(label)
    return out
