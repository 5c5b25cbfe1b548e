"""What a planned motion will determine, before it is run: each base parameter's standard error under a stated
noise level, relative to the model's guessed value, and the recording length each would need.

The rows are those `identify dynamic` fits (the estimator's own filter, end trimming and decimation); the noise is
white sensor noise of σ per recorded sample and row kind (joint effort, or Fz/Mx/My), which the filter correlates
between the fitted rows exactly as it does in a fit. It covers noise alone — a model error does not average out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError, IdentifiabilityError
from formats.units import STANDARD_GRAVITY
from identify.differentiation import lowpass
from identify.dynamic import (
    WELL_IDENTIFIED_PCT,
    DynamicEstimator,
    common_rate,
)
from identify.residual_covariance import toeplitz_gram
from robots import dynamics as dyn
from robots.conditioning import kappa, normalised_columns

PRACTICAL_S = 600.0  # s: a recording length an operator will sit through (identify dynamic's --practical-s)
# kg: SD of the total load a run's tare leaves on every row of a standing recording (`poise run` tares the boards
# on 1 s of empty readings; `drivers.trajectory_run.tare_mass_sd`): eight cells of 0.03 kg noise per report
# (`drivers.emulators.wbb.BoardImperfections.thesis_like`, the thesis's boards) at 80 reports/s → √8·0.03/√80. The
# twin's run of `poise demo standing` recorded 0.0099 kg (run.json tare_mass_sd_kg).
TARE_MASS_SD_KG = math.sqrt(8) * 0.03 / math.sqrt(80)


def practical_length(given: float | None, duration_s: float, what: str = "the plan(s) to run") -> float:
    """The practical recording length: `given` (--practical-s), refused below one run of the motion (`duration_s`),
    else PRACTICAL_S or one run, whichever is longer."""
    if given is None:
        return max(PRACTICAL_S, duration_s)
    if given < duration_s * (1 - 1e-9):
        raise DataError(f"--practical-s {given:g} s is shorter than {what} ({duration_s:.4g} s): the longest "
                        f"recording worth making holds at least one run — give at least --practical-s "
                        f"{math.ceil(duration_s):g}")  # fmt: skip
    return given


# how `identify dynamic` counts a parameter's needed time (`DynamicFit.needed_s`), said beside the forecast's own
IDENTIFY_RULE = (
    "identify dynamic judges SE / |estimate| and counts continuous seconds of the recorded motion "
    "(SE ∝ 1/√fitted time, plus the filter's ends) until the SE is {pct:g} % of |estimate| − 2 SE"
)


def forecast_rule(against: str, pct: float) -> str:
    """How the forecast judges and counts (`DynamicForecast.determined`, `needed_s`), one sentence."""
    return (
        f"the forecast judges SE / |value in {against}| and counts the fewest whole runs of the plan(s) "
        f"(SE ∝ 1/√runs) until the SE is {pct:g} % of that value"
    )


STILL_RAD = 1e-9  # a joint whose planned angle spans less does not move (`UnexcitedError.still`)


class UnexcitedError(DataError, IdentifiabilityError):
    """The motion leaves fitted parameters linearly dependent on the others (a rank-deficient regressor): no
    length of it determines them. `unexcited`: those parameters (the columns after the independent ones pivoted
    QR picks on unit-norm columns, as `identify dynamic` names a recording's); `still`: joints that do not move in
    it; `slow`: joints that move, but never faster than `reversal_velocity` rad/s, so that the fit drops every row
    of theirs that would carry their friction."""

    def __init__(self, message: str, unexcited: list[str], columns: int, still: list[str], slow: list[str],
                 reversal_velocity: float):  # fmt: skip
        super().__init__(message)
        self.unexcited, self.columns, self.still, self.slow = unexcited, columns, still, slow
        self.reversal_velocity = reversal_velocity

    def named(self, limit: int = 8) -> str:
        """The unexcited parameters, the first `limit` of them by name."""
        un = self.unexcited
        return ", ".join(un[:limit]) + (f", … ({len(un)} in all)" if len(un) > limit else "")

    def why(self) -> str:
        """What the motion lacks, where the rows tell: joints that do not move, or move too slowly for friction."""
        out = []
        if self.still:
            out.append(f"joint(s) {', '.join(self.still)} do not move in it")
        if self.slow:
            out.append(f"joint(s) {', '.join(self.slow)} never move faster than {self.reversal_velocity:.3g} rad/s, "
                       "below which the fit drops a joint's rows (its Coulomb friction's sign is not trusted there)")  # fmt: skip
        return "; ".join(out)


@dataclass
class DynamicForecast:
    """Forecast standard errors of the base inertial parameters (friction and rotor inertia columns, if any, after
    them)."""

    symbols: list[str]
    formulas: list[str]
    guess: np.ndarray  # the base parameters' values with the model's guessed parameters (nan for the others)
    se: np.ndarray  # at the planned length with `noise`
    isolated_se: np.ndarray  # were every other parameter known: what correlation costs is se / isolated_se
    noise: np.ndarray  # σ of white noise per recorded sample, per row kind
    rows: list[str]
    cutoff_hz: float
    duration_s: float
    fitted_s: float
    edges_s: float
    kappa_scaled: float
    inertial: int
    units: list[str] = field(default_factory=list)  # each parameter's unit (`DynamicEstimator._names`)
    # rotor inertia estimated (`DynamicEstimator(armature=True)`): the joints whose is grouped into the base
    # parameters instead; None when not modelled
    armature_grouped: list[str] | None = None
    # a standing forecast's tare: SD (kg) of the constant total-load offset each run's tare leaves, 0 for none;
    # None for an arm (no boards). `offset_se`: the share of each SE it makes (the SEs include it)
    tare_mass_sd: float | None = None
    offset_se: np.ndarray | None = None
    params_name: str = ""  # the parameter set the relative SEs are against

    @property
    def rel_se_pct(self) -> np.ndarray:
        """100 · SE / |guessed value| (inf where the guess is zero, nan for friction)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return 100.0 * self.se / np.abs(self.guess)

    @property
    def correlation_factor(self) -> float:
        """Median over the base inertial parameters of SE / isolated SE: how much correlation between parameters
        multiplies their SEs over fitting each alone."""
        k = self.inertial
        return float(np.median(self.se[:k] / self.isolated_se[:k]))

    def needed_s(self, pct: float = WELL_IDENTIFIED_PCT) -> np.ndarray:
        """Length (s) of the fewest whole runs of the motion (`duration_s` each, the plans together), each recorded
        and trimmed of its filter's ends as this one, fitted together, that bring it to `pct` % relative SE (SE ∝
        1/√runs); one run where it already does."""
        with np.errstate(invalid="ignore", over="ignore"):
            # a hair's rounding above a whole number of runs does not add one
            runs = np.maximum(np.ceil((self.rel_se_pct / pct) ** 2 * (1 - 1e-12)), 1.0)
        return runs * self.duration_s

    def zero_guessed(self) -> list[str]:
        """Base inertial parameters guessed 0: no relative SE to judge them by (neither determined nor beyond any
        length, but unknown: `plan reach`'s "zero guess")."""
        return [s for k, s in enumerate(self.symbols[: self.inertial]) if self.guess[k] == 0]

    def determined(
        self, pct: float = WELL_IDENTIFIED_PCT, practical_s: float = PRACTICAL_S
    ) -> tuple[list[str], list[str], list[str]]:
        """Base inertial parameters this plan determines to `pct` % as planned; those it would if repeated up to
        `practical_s` s; and those beyond that (the motion class at this noise cannot determine them)."""
        need = self.needed_s(pct)
        now, longer, beyond = [], [], []
        for k in range(self.inertial):
            if self.rel_se_pct[k] < pct:
                now.append(self.symbols[k])
            elif need[k] <= practical_s:
                longer.append(self.symbols[k])
            else:
                beyond.append(self.symbols[k])
        return now, longer, beyond

    def to_dict(self, pct: float = WELL_IDENTIFIED_PCT, practical_s: float = PRACTICAL_S) -> dict:
        now, longer, beyond = self.determined(pct, practical_s)
        need = self.needed_s(pct)
        zero = [s for s in beyond if s in self.zero_guessed()]
        beyond = [s for s in beyond if s not in zero]

        def num(v: float) -> float | None:
            return float(v) if np.isfinite(v) else None

        out = {
            "noise": dict(zip(self.rows, self.noise.tolist(), strict=True)),
            "cutoff_hz": self.cutoff_hz,
            "duration_s": self.duration_s,
            "kappa_scaled": self.kappa_scaled,
            "correlation_factor_median": self.correlation_factor,
            "well_pct": pct,
            "practical_s": practical_s,
            "determined": now,
            "determined_if_repeated": longer,
            "beyond_practical": beyond,
            "zero_guess": zero,
            "parameters": [
                {
                    "symbol": s,
                    "formula": f,
                    "unit": u,
                    "value": num(g),
                    "se": float(e),
                    "isolated_se": float(i),
                    "rel_se_pct": num(r),
                    "needed_s": num(n),
                }
                for s, f, u, g, e, i, r, n in zip(
                    self.symbols,
                    self.formulas,
                    self.units or [""] * len(self.symbols),
                    self.guess,
                    self.se,
                    self.isolated_se,
                    self.rel_se_pct,
                    need,
                    strict=True,
                )
            ],  # fmt: skip
        }
        if self.armature_grouped is not None:
            out["armature_grouped"] = list(self.armature_grouped)
        if self.tare_mass_sd is not None:
            out["tare_mass_sd_kg"] = self.tare_mass_sd
            if self.offset_se is not None:
                for p, e in zip(out["parameters"], self.offset_se, strict=True):
                    p["tare_se"] = float(e)
        out["against"] = self.params_name
        out["rules"] = {
            "forecast": forecast_rule(self.params_name, pct),
            "identify": IDENTIFY_RULE.format(pct=pct),
        }
        return out


def forecast_dynamic(
    estimator: DynamicEstimator,
    t: np.ndarray,
    q: np.ndarray,
    noise: np.ndarray | list[float],
    params=None,
    meta: dict[str, str] | None = None,
    reuse_base: bool = False,
) -> DynamicForecast:
    """Forecast for joint angles q (K, n) sampled at times t as they would be recorded (`meta`: the recording
    metadata `identify dynamic` reads — motion_band_hz, moment_z_m, motion). `noise`: σ of white noise on each
    recorded sample per row kind (one per joint, or Fz, Mx, My; a single value for all); `params`: the guessed
    parameter set (default the model's first); `reuse_base`: in the base parameters of the estimator's last fit
    (a standing robot's are chosen at the recording's middle posture, so two recordings may number them apart)."""
    return forecast_motions(estimator, [(t, q, meta or {})], noise, params, reuse_base)


WRENCH_NOISE_ROWS = ("fz", "mx", "my")  # a standing robot's fitted rows: the boards' Fz [N], Mx, My [N·m]


def noise_per_row(noise: Sequence[float], rows: Sequence[str]) -> np.ndarray:
    """σ per fitted row from one σ for all or one per row (DataError naming the rows otherwise, or a σ ≤ 0)."""
    sig = np.asarray(noise, dtype=float).ravel()
    if sig.size == 1:
        sig = np.full(len(rows), sig[0])
    if sig.shape != (len(rows),) or not np.all(np.isfinite(sig) & (sig > 0)):
        raise DataError(f"noise must be {len(rows)} positive σ ({', '.join(rows)}) or one, got {list(noise)}")
    return sig


def forecast_motions(
    estimator: DynamicEstimator,
    motions: Sequence[tuple[np.ndarray, np.ndarray, dict[str, str]]],
    noise: np.ndarray | list[float],
    params=None,
    reuse_base: bool = False,
    labels: Sequence[str] | None = None,
    what: str = "recording",
    tare_mass_sd: float | None = None,
) -> DynamicForecast:
    """Forecast for several recordings fitted together (`identify dynamic REC1 REC2 …`), each motion given as
    (t, q, meta) like `forecast_dynamic`'s; the base parameters are those of the first (as in the fit); the rows
    built as the fit builds them (a chunk at a time beyond `identify.dynamic.CHUNK_BYTES`). The motions must share
    the first's motion kind and, in double support, foot placement (the fit's own check: DataError naming each by
    its entry of `labels`, else by number, as a `what`: "recording", or "plan" — `identify.dynamic.APART`).
    UnexcitedError (a DataError) when the motions leave fitted parameters undetermined at any length.
    `tare_mass_sd` (kg, board wrench only): each run's tare leaves its Fz a constant offset of that SD (× g), the
    runs' independent; the SEs include its effect through the estimator as `identify dynamic` adds a run's
    tare_wrench_cov (`DynamicEstimator._offset_covariance`). Its moments' share is left out: on the twin's run
    (run.json tare_wrench_cov) they were 0.02 N·m, moving the CoM terms by under 0.002 kg·m."""
    model = estimator.model
    rows = list(model.joint_names) if estimator.quantity == "torque" else list(WRENCH_NOISE_ROWS)
    sig = noise_per_row(noise, rows)
    if not motions:
        raise DataError("no motion to forecast")
    recs = []
    for (t, q, meta), label in zip(motions, labels or [""] * len(motions), strict=True):
        t = np.asarray(t, dtype=float)
        zeros = np.zeros((len(t), model.nq if estimator.quantity == "torque" else 6))
        recs.append(DynamicRecording(
            robot=model.name, base=estimator.base, joint_names=list(model.joint_names), t=t,
            q=np.asarray(q, dtype=float), tau=zeros if estimator.quantity == "torque" else None,
            wrench=zeros if estimator.quantity == "wrench" else None, meta=dict(meta), label=label,
        ))  # fmt: skip
    rate = common_rate(recs)  # the fit's own check: the noise model's lags are counted in samples
    A, kind, sample = estimator.prepare_many(recs, reuse_base=reuse_base, what=what)
    rank = np.linalg.matrix_rank(A)
    if rank < A.shape[1]:
        raise _unexcited(estimator, A, rank, [q for _, q, _ in motions])
    step = estimator._step(rate)  # one autocorrelation for all, as in the fit
    w = 1.0 / sig[kind]  # the estimator's weights on noise-only residuals, up to a common factor
    Aw = A * w[:, None]
    # AwᵀΣwAw, Σw the weighted rows' noise covariance: R(|sᵢ − sⱼ|) between rows of one kind (the weights cancel
    # their σ²), zero between kinds; the samples of recordings fitted together lie apart on one axis, as in the fit
    R = filtered_autocorrelation(rate, estimator.cutoff_, step, int(sample.max()))
    S = toeplitz_gram(R, Aw, sample, kind)
    G = Aw.T @ Aw
    H = np.linalg.inv(G)
    cov = H @ S @ H
    offset = None
    if tare_mass_sd is not None and estimator.quantity == "wrench":
        # one constant Fz offset per run, independent, as the fit adds a run's tare_wrench_cov
        C = np.zeros((len(rows), len(rows)))
        C[rows.index("fz"), rows.index("fz")] = (tare_mass_sd * STANDARD_GRAVITY) ** 2  # kilograms-force
        tare = estimator._offset_covariance(A, None, w, kind, [C] * len(recs), [])
        offset = np.sqrt(np.diag(tare))
        cov = cov + tare
    se = np.sqrt(np.diag(cov))
    isolated = np.sqrt(np.diag(S)) / np.diag(G)  # one parameter fitted alone, the others known
    db = estimator.dynamic_base_
    syms, forms, units = estimator._names()
    guess = np.full(A.shape[1], np.nan)
    prior = params if params is not None else next(iter(model.params))
    guess[: db.rank] = db.values(dyn.standard_parameters(model, prior))
    fitted, edges = estimator.fitted_span(recs)
    return DynamicForecast(
        symbols=syms, formulas=forms, guess=guess, se=se, isolated_se=isolated, noise=sig, rows=rows,
        cutoff_hz=estimator.cutoff_, duration_s=float(sum(r.t[-1] - r.t[0] for r in recs)), fitted_s=fitted,
        edges_s=edges, kappa_scaled=kappa(normalised_columns(A)[0]), inertial=db.rank, units=units,
        armature_grouped=[model.joint_names[j] for j in estimator.armature_.grouped] if estimator.armature else None,
        tare_mass_sd=(tare_mass_sd or 0.0) if estimator.quantity == "wrench" else None, offset_se=offset,
        params_name=str(getattr(prior, "name", prior)),
    )  # fmt: skip


def filtered_autocorrelation(rate_hz: float, cutoff_hz: float, step: int, lags: int) -> np.ndarray:
    """Autocorrelation of unit white noise after the estimator's zero-phase filter, at 0…lags decimated samples
    (`step` recorded samples apart): only those lags, each a dot product (the full correlation of the impulse
    response took O(rate²) — 6 s at 10 kHz)."""
    half = max(int(np.ceil(20 * rate_hz / cutoff_hz)), 2 * step)
    impulse = np.zeros((2 * half + 1, 1))
    impulse[half] = 1.0
    h = lowpass(impulse, rate_hz, cutoff_hz)[:, 0]
    out = np.zeros(lags + 1)
    for j, k in enumerate(range(0, min(lags * step, len(h) - 1) + 1, step)):
        out[j] = h[: len(h) - k] @ h[k:]
    return out


def _unexcited(
    estimator: DynamicEstimator, A: np.ndarray, rank: int, angles: Sequence[np.ndarray]
) -> UnexcitedError:
    """UnexcitedError for rows A of rank `rank` < its columns, of motions with joint `angles` (each (K, nq))."""
    from robots.com_base import pivoted_qr

    syms = estimator._names()[0]
    _, piv = pivoted_qr(normalised_columns(A)[0])
    unexcited = [syms[k] for k in sorted(piv[rank:])]
    names = list(estimator.model.joint_names)
    span = np.max([np.ptp(np.asarray(q, dtype=float), axis=0) for q in angles], axis=0)
    still = [names[j] for j in range(len(names)) if span[j] <= STILL_RAD]
    # friction columns (`_names`: fv@, fc@ per joint) with no row left: the fit dropped every one of that joint's
    slow = [j for j in names if j not in still and f"fv@{j}" in syms
            and not np.any(A[:, syms.index(f"fv@{j}")]) and not np.any(A[:, syms.index(f"fc@{j}")])]  # fmt: skip
    ur = UnexcitedError("", unexcited, A.shape[1], still, slow,
                        estimator.reversal_velocity if estimator.friction else math.inf)  # fmt: skip
    why = ur.why()
    ur.args = (f"the motion does not excite {len(unexcited)} of the {A.shape[1]} fitted parameters ({ur.named()}): "
               f"no length of it determines them (rank-deficient regressor){'; ' + why if why else ''}",)  # fmt: skip
    return ur


# median fit SE / plan forecast SE below which the recording excited what its plan does not: the double-support
# twin's runs measured 0.78–0.90 (0.24 the least of one parameter); the single-support twin run 0.0077, the
# servos' tracking adding motion (and the encoders' quantisation in it) that least squares counts in full
SE_BELOW_PLAN = 0.2


@dataclass(frozen=True)
class PlanAgreement:
    """A least-squares fit's standard errors against its plans' forecast at the fit's own noise level, and how far
    the recorded angles strayed from the planned ones. The ratios are None when the plans alone leave some base
    parameters undetermined (`plan_unexcited`), which the fit determined from motion the plans lack."""

    median: float | None  # of fit SE / forecast SE over the base parameters
    low: float | None
    high: float | None
    tracking_rad: float  # rms of recorded − planned angles, all joints and samples
    plan_unexcited: list[str]  # base parameters the plans alone leave undetermined at any length

    @property
    def optimistic(self) -> bool:
        return bool(self.plan_unexcited) or (self.median is not None and self.median < SE_BELOW_PLAN)

    def to_dict(self) -> dict:
        return {"median_ratio": self.median, "min_ratio": self.low, "max_ratio": self.high,
                "tracking_rms_rad": self.tracking_rad, "plan_unexcited": self.plan_unexcited,
                "optimistic": self.optimistic}  # fmt: skip


def se_against_plans(
    estimator: DynamicEstimator,
    recs: Sequence[DynamicRecording],
    planned: Sequence[np.ndarray],
    tare_mass_sd: float | None = None,
) -> PlanAgreement:
    """The fitted estimator's SEs against a forecast of the planned angles (`planned`, one array per recording at
    its samples) at the fit's white-noise equivalent: SEs far below the plan's mean the recording moved in ways
    the plan does not (servos' tracking), which least squares takes as exact excitation. `tare_mass_sd` (kg, board
    wrench): the runs' tare in the forecast too, when the fit's SEs hold it (`forecast_motions`)."""
    fit = estimator.fit_
    nb = estimator.dynamic_base_.rank
    strays = np.concatenate([(r.q - q).ravel() for r, q in zip(recs, planned, strict=True)])
    tracking = float(np.sqrt(np.mean(strays**2)))
    rate = common_rate(list(recs))  # the fit's own check: one rate, one noise model
    white = np.asarray(fit.sigma) / math.sqrt(filtered_autocorrelation(rate, estimator.cutoff_, 1, 0)[0])
    motions = [(r.t, q, r.meta) for r, q in zip(recs, planned, strict=True)]
    try:
        fc = forecast_motions(estimator, motions, white, reuse_base=True, labels=[r.label for r in recs],
                              tare_mass_sd=tare_mass_sd)  # fmt: skip
    except UnexcitedError as exc:
        return PlanAgreement(None, None, None, tracking, [s for s in exc.unexcited if s in fit.symbols[:nb]])
    ratio = fit.se[:nb] / fc.se[:nb]
    ratio = ratio[np.isfinite(ratio) & (ratio > 0)]  # parameters held at a prior have no SE
    if not ratio.size:
        return PlanAgreement(None, None, None, tracking, [])
    return PlanAgreement(float(np.median(ratio)), float(ratio.min()), float(ratio.max()), tracking, [])
