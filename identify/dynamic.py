"""Dynamic identification of base inertial parameters (and joint friction) from a recorded trajectory.

τ = Y_b(q, q̇, q̈) ϑ + F(q̇) f + D(q̈) Ia: Y_b the base joint-torque regressor of the model layer, F the optional
viscous and Coulomb columns per joint (fv·q̇ + fc·sign(q̇)), D the optional rotor inertia ("armature") columns, q̈_j
on joint j's own row, for the joints whose column is not in Y_b's span (`armature_grouping`). Positions are
differentiated with a zero-phase filter and the efforts filtered alike; ordinary or per-joint weighted least
squares, standard errors from the residuals' banded spectrum (identify/residual_covariance.py: filtered noise is
correlated in time and across a sample's rows).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.ndimage import minimum_filter1d

from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError, IdentifiabilityError
from identify.delay import (
    MAX_DELAY_S,
    ROUNDS,
    SCAN_STEP_S,
    best_delay,
    checked_delays,
    delayed,
    gaps_after,
    held_free,
    samples_of,
    trimmed,
)
from identify.differentiation import (
    DIFFERENTIATIONS,
    derivatives,
    lowpass,
    lowpass_in_chunks,
    states,
    velocity,
)
from identify.recording_model import check_base
from identify.residual_covariance import SPECTRUM_SPLITS, banded_covariance
from robots import dynamics as dyn
from robots.base_params import WRENCH_ROWS as WRENCH_ROWS_ALL
from robots.base_params import (
    DynamicBase,
    RegressorSpec,
    cached_dynamic_base,
    evaluate,
    random_states,
    zero_set,
)
from robots.base_sign import signs_within
from robots.com_base import numeric_base, pivoted_qr
from robots.conditioning import kappa, normalised_columns
from robots.memo import per_model
from robots.motion_class import standing_base
from robots.registry import same_robot
from robots.stance import PLACEMENT_LIMITS, other_pose, placement_apart, placement_deviation
from robots.tree import RobotModel

WELL_IDENTIFIED_PCT = 15.0
# bytes of regressor at the recording rate held at once: a longer or faster recording's is built, filtered and
# kept at the fitted samples a chunk at a time (`differentiation.lowpass_in_chunks`; the same values to rounding).
# The forecast of the 60 s iCub arm plan (tests/data) at 10 kHz took 14.1 GB whole, 0.77 GB so.
CHUNK_BYTES = 128 * 2**20
# recordings fitted together: their decimated samples are numbered on one axis this many cut-off periods apart, where
# the filtered noise's autocovariance (the banded model's lowest band reaches 0.35 f_c) has decayed to ~1 %
RECORDING_GAP_PERIODS = 50
RATE_RTOL = 0.005  # their sample rates may differ by this much
# what the messages call them, by what is done with ones that cannot be taken together: recordings are fitted apart;
# a forecast's plans (`identify.forecast.forecast_motions`, `plan forecast`) forecast apart
APART = {"recording": "fit", "plan": "forecast"}
# ... and in double support their other sole's pose (base sole frame) by at most PLACEMENT_TOL_M / PLACEMENT_TOL_DEG
# (robots.stance: `plan trajectory --prior` holds recordings to them too) from the first's. Within it, the first's
# base parameters must miss each recording's rigid-body wrench with the guessed parameters so little that the bias
# this puts on any estimate stays under PLACEMENT_BIAS_SE of its SE
PLACEMENT_BIAS_SE = 0.5
# the planned angles serve as instruments only for the recording of their plan: tracking errors of a few mrad
INSTRUMENT_TOL_RAD = 0.1
# a step this many times the recording's median step is a gap (samples lost, a stalled logger): the filter and the
# noise model need uniform samples, so each piece between gaps is fitted as a recording of its own
GAP_FACTOR = 1.5
MAX_DRIFT_DEGREE = 3  # base-sole creep polynomial (per recording and axis)
DEFAULT_CUTOFF_HZ = 5.0  # when the recording does not declare its motion's band
# cut-off / the motion's highest frequency: a 4th-order zero-phase filter passes that band within 2e-5
CUTOFF_PER_BAND = 4.0
# cut-off periods dropped at each end: the zero-phase filter's odd-extension transient. Measured: a recording cut
# mid-motion has its filtered q̈ within 0.7 % of the true at 1.5/f_c and 0.15 % at 2/f_c at either end; on the TUlip
# double-support design (at rest at both ends) the filtered wrench rows' end error meets the interior's filtering
# error within 1/f_c
EDGE_PERIODS = 2.0
# the EDGE_PERIODS/f_c s dropped at each end may take at most this share of the recording (default_cutoff)
MAX_EDGE_FRACTION = 0.1
# decimation: 4 f_c exceeds the Nyquist rate 2 f_c of the filtered signals, so nothing is lost
SAMPLES_PER_CUTOFF_PERIOD = 4
# rad/s: below it (at 5 Hz) a joint's rows near a velocity reversal are dropped from the fit. It scales with the
# velocity noise of a quantised encoder, ∝ f_c^1.5: a fixed value would drop most of a slow motion at a low cut-off.
# On a prismatic joint the same number in m/s: the twin reads a slide to N/(2π) ticks per metre as a hinge to N/(2π)
# per radian (`simulate trajectory --encoder-ticks`), so its step and velocity noise are the same number in m
REVERSAL_VELOCITY_AT_DEFAULT = 0.05


def reversal_velocity_for(cutoff_hz: float) -> float:
    """Velocity (rad/s; m/s on a prismatic joint) under which the Coulomb column's sign is not trusted when fitting,
    at this cut-off."""
    return REVERSAL_VELOCITY_AT_DEFAULT * (cutoff_hz / DEFAULT_CUTOFF_HZ) ** 1.5


# an estimate within this many SEs of zero has no known scale: the time to determine it relative to its size is not
# given, and beyond it the time is relative to |θ̂| minus this many SEs (dividing by the noisy estimate made times
# 10–5000× too short: a review's rec.csv ϑ8 136 s against its plan's forecast 7.7e5 s, ϑ31 83 s against 5.0e4 s)
SCALE_RESOLVED_SE = 2.0
# an estimate physics keeps positive (negative) this many SEs below (above) zero is reported impossible (noise alone:
# 1 in 740); one of the wrong sign within it is named as within noise
IMPOSSIBLE_SE = 3.0
# column-scaled κ above it: the regressor is rank deficient but for noise (quantised encoders' steps fill the
# dependent columns). Measured: honest fits 58 (UR5) to 1.94e5 (TUlip's stored 6 s single-support plan, full model,
# 16384-tick encoders; a physics-twin double-support run 3.26e4 full, 369 simplified); near-singular ones 9.6e7 (a
# double-support recording fitted as single support: |ρ| = 1.0000 pairs, SEs 5e5 kg·m²) and 2.6e8 (a UR5 motion at
# a 1 Hz cut-off). 10× the worst honest
KAPPA_SCALED_MAX = 3e6
# a parameter is named in a near-null direction when its unit column weighs more than this in it, and named so
# when there are at most NAMED_NEAR_NULL such directions (beyond, the list would be every parameter)
NEAR_NULL_WEIGHT = 0.1
NAMED_NEAR_NULL = 3
QUANTITIES = ("torque", "wrench")
WRENCH_ROWS = ("fz", "mx", "my")  # what two balance boards give in sum: the ZMP model


@dataclass
class DynamicFit:
    """Estimates with their statistics; efforts in N·m, velocities in rad/s (N, m/s on a prismatic joint)."""

    symbols: list[str]
    formulas: list[str]
    values: np.ndarray
    se: np.ndarray
    rel_se_pct: np.ndarray
    sigma: np.ndarray  # residual standard deviation per joint (N·m)
    cov: np.ndarray
    corr: np.ndarray
    top_correlations: list[tuple[str, str, float]]
    kappa: float
    rmse: np.ndarray  # per joint, on the fitted (filtered) data
    samples: int
    unidentifiable: list[str]  # standard parameters that never enter the regressor
    weighted: bool
    reference: dict = field(default_factory=dict)
    kappa_scaled: float = float("nan")  # κ of the column-normalised regressor of the estimated parameters
    fixed: dict[str, str] = field(default_factory=dict)  # base parameters held at their prior value, and why
    # the first `inertial` estimates are base inertial parameters (the rest friction, rotor inertia, sole creep)
    inertial: int = 0
    fitted_s: float = float("nan")  # recording time the fitted rows span (ends dropped)
    edges_s: float = 0.0  # recording time dropped at the two ends together (the filter's transients)
    instruments: bool = False  # IV estimate: the planned angles' regressor as instruments (IDIM-IV)
    # the gaps recordings were split at (recording 1-based, from_s, to_s), and the pieces between gaps too short for
    # the cut-off, not fitted
    gaps: list[dict] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)
    # double support, recordings after the first: how far their other sole stands from the first's, by how much the
    # first's base parameters miss their wrench rows (rms Fz N, Mx, My N·m, guessed parameters, filtered) and the
    # largest bias all those misses put on an estimate, in its SEs
    placements: list[dict] = field(default_factory=list)
    # each recording's efforts moved this much earlier (s)
    delays_s: list[float] = field(default_factory=list)
    delay_estimated: bool = False  # ... estimated from the data (`identify.delay`), else as given
    units: list[str] = field(
        default_factory=list
    )  # each estimate's unit (kg, kg·m, kg·m², N·m·s/rad, N·m, m)
    # rotor inertia modelled (`armature`): the joints whose rotor inertia is grouped into the base parameters, not
    # estimated apart (its column lies in their span), each with the estimates that hold it; None when not modelled
    armature_grouped: dict[str, list[str]] | None = None
    measured_rms: np.ndarray | None = None  # per row, the fitted (filtered) measurements' own RMS
    measured_sd: np.ndarray | None = None  # per row, their SD (about their mean)
    residual_mean: np.ndarray | None = None  # per row, the residuals' mean (rmse² = sigma² + mean²)
    recording_samples: int = 0  # the recordings' samples, all of them (`samples` counts regressor rows)
    fitted_samples: int = 0  # the decimated samples whose rows are fitted (a sample gives one row per effort)
    # rows dropped around velocity reversals (friction: the Coulomb step's timing is uncertain there)
    reversal_rows: int = 0
    # the estimates physics keeps positive (friction, rotor inertia, a base parameter no mass distribution makes
    # negative: `robots.base_sign`)
    positive: list[int] = field(default_factory=list)
    # per estimate: +1 no physical robot makes it negative, −1 none makes it positive, 0 either sign (empty: +1 at
    # `positive`)
    signs: list[int] = field(default_factory=list)
    # per estimate with a sign: None when it holds for any mass distribution, else the radius (m) every link's
    # mass must lie within (of its origin) for it to hold (`robots.base_sign.signs_within`)
    sign_within_m: list[float | None] = field(default_factory=list)

    @property
    def reversal_share(self) -> float:
        """The share of the rows the reversals took (of those fitted and dropped together)."""
        return self.reversal_rows / max(1, self.samples + self.reversal_rows)

    def _signs(self) -> list[int]:
        if self.signs:
            return list(self.signs)
        positive = set(self.positive)
        return [1 if k in positive else 0 for k in range(len(self.symbols))]

    def sign_violations(self, nse: float = IMPOSSIBLE_SE) -> list[dict]:
        """The estimates on the side of zero no physical robot reaches (a base parameter whose sign every mass
        distribution fixes, friction, rotor inertia), with z = value/SE and whether that is within noise
        (|z| < `nse`); estimates without a positive finite SE (held at the prior) are not judged."""
        out = []
        within = self.sign_within_m or [None] * len(self.symbols)
        for k, sign in enumerate(self._signs()):
            v, e = float(self.values[k]), float(self.se[k])
            if sign and np.isfinite(e) and e > 0 and sign * v < 0:
                out.append({"symbol": self.symbols[k], "value": v, "se": e, "z": v / e,
                            "unit": self.units[k] if self.units else "", "must_be": "≥ 0" if sign > 0 else "≤ 0",
                            "if_mass_within_m": within[k], "within_noise": bool(abs(v / e) < nse),
                            "meaning": self.formulas[k]})  # fmt: skip
        return out

    def impossible(self, nse: float = IMPOSSIBLE_SE) -> list[dict]:
        """The estimates physics keeps on one side of zero that lie more than `nse` SE on the other: a model error
        or a recording fault, not noise."""
        return [
            {k: d[k] for k in ("symbol", "value", "se", "z", "unit", "must_be", "meaning")}
            for d in self.sign_violations(nse)
            if not d["within_noise"] and d["if_mass_within_m"] is None
        ]

    def unexplained_rows(self) -> list[int]:
        """The rows the estimate misses by more than their own RMS (predicting 0 would fit them better): an
        estimate the recording does not hold, whatever its SEs say (least squares cannot miss every row so; weak
        instruments can)."""
        if self.measured_rms is None:
            return []
        return [j for j, (r, m) in enumerate(zip(self.rmse, self.measured_rms, strict=True)) if r > m]

    def determined(self, pct: float = WELL_IDENTIFIED_PCT) -> tuple[list[str], list[str]]:
        """The estimated base inertial parameters this motion determines to `pct` % relative SE, and those it does
        not (held-at-prior ones are in neither): what a user may rely on, named."""
        good, poor = [], []
        for k in range(self.inertial):
            if np.isfinite(self.se[k]):
                (good if self.rel_se_pct[k] < pct else poor).append(self.symbols[k])
        return good, poor

    def needed_s(self, pct: float = WELL_IDENTIFIED_PCT) -> np.ndarray:
        """Recording length (s, ends included) at which each relative SE would reach `pct` % were this motion
        repeated (SE ∝ 1/√fitted time under stationary noise, this cut-off): noise alone, no systematic error.
        Relative to |θ̂| − SCALE_RESOLVED_SE SE, the size the estimate surely has (~97.5 %), not to the noisy |θ̂|,
        which made times far too short; NaN where that is ≤ 0 (`scale_unresolved`): the size is not known."""
        with np.errstate(divide="ignore", invalid="ignore"):
            lower = np.abs(self.values) - SCALE_RESOLVED_SE * self.se
            t = self.fitted_s * (100 * self.se / (pct * lower)) ** 2 + self.edges_s
        return np.where(self.scale_unresolved(), np.nan, t)

    def scale_unresolved(self) -> np.ndarray:
        """Per estimate: |θ̂| < SCALE_RESOLVED_SE SE (or no SE), so its size, and any time to determine it relative
        to that size, is not known from this fit."""
        with np.errstate(invalid="ignore"):
            return ~(np.abs(self.values) > SCALE_RESOLVED_SE * self.se)

    def to_dict(self) -> dict:
        out = {
            "parameters": [
                {
                    "symbol": s,
                    "formula": f,
                    "unit": u,
                    "value": float(v),
                    "se": float(e),
                    "rel_se_pct": float(r),
                }
                for s, f, u, v, e, r in zip(
                    self.symbols,
                    self.formulas,
                    self.units or [""] * len(self.symbols),
                    self.values,
                    self.se,
                    self.rel_se_pct,
                    strict=True,
                )
            ],
            "sigma_nm": self.sigma.tolist(),
            "rmse_nm": self.rmse.tolist(),
            "residual_mean_nm": None if self.residual_mean is None else self.residual_mean.tolist(),
            "regressor_rows": self.samples,
            "recording_samples": self.recording_samples,
            "fitted_samples": self.fitted_samples,
            "reversal_rows_dropped": self.reversal_rows,
            "reversal_rows_share": self.reversal_share,
            "impossible": self.impossible(),
            "sign_violations": self.sign_violations(),
            "kappa": self.kappa,
            "kappa_scaled": self.kappa_scaled,
            "fixed": self.fixed,
            "samples": self.samples,
            "fitted_s": self.fitted_s,
            "weighted": self.weighted,
            "estimator": "iv" if self.instruments else ("wls" if self.weighted else "ols"),
            "unidentifiable": self.unidentifiable,
            "top_correlations": [list(c) for c in self.top_correlations],
            "reference": self.reference,
            "gaps": self.gaps,
            "dropped": self.dropped,
            "placements": self.placements,
            "delays_ms": [1000 * d for d in self.delays_s],
            "delay_estimated": self.delay_estimated,
        }
        if self.measured_rms is not None:
            out["measured_rms_nm"] = self.measured_rms.tolist()
        if self.armature_grouped is not None:
            out["armature_grouped"] = {j: list(into) for j, into in self.armature_grouped.items()}
        return out


class DynamicEstimator:
    """Configure, then `fit(recording)`; results in `fit_`, prediction with `predict(recording)`."""

    def __init__(
        self,
        model: RobotModel,
        base: str | None = None,
        simplified: bool = False,
        friction: bool = True,
        cutoff_hz: float | None = None,
        weighted: bool = True,
        decimate: int | None = None,
        reversal_velocity: float | None = None,
        quantity: str = "torque",
        essential_pct: float | None = None,
        prior=None,
        drift: int = 0,
        delay: float | Sequence[float] | str | None = None,
        armature: bool = False,
        differentiation: str = "butterworth",
    ):
        """`cutoff_hz`: the zero-phase filter's cut-off (default: the fitted recording's, `default_cutoff` —
        4× its declared motion band — as `identify dynamic` uses; `cutoff_` after fitting).
        `reversal_velocity` (rad/s; m/s on a prismatic joint): a joint's rows within a cut-off period of a slower sample are dropped
        from the fit (default `reversal_velocity_for(cutoff_)`). `essential_pct`: keep only the base
        parameters this recording determines to that relative SE (%): the worst determined one is fixed at its
        value in `prior` (a parameter set; default the model's first) and the rest refitted, until every
        estimate qualifies — the others are named in `fit_.fixed`. `drift` (board wrench): the base sole may
        creep on its board — a displacement (δx, δy) polynomial of this degree in each recording's time, zero mean,
        adds Fz·δy to Mx and −Fz·δx to My — fitted alongside (`dx1`, `dy1`, … in m, per recording). `delay` (s):
        the measured efforts lag the encoders by this, for all recordings or one each; "auto": one for all, estimated
        with the parameters (`identify.delay`; `fit_.delays_s`). `armature` (joint torques): each joint's rotor
        inertia reflected at it, Ia·q̈ on its own row (`Ia@JOINT`, kg·m², kg on a prismatic joint), estimated where
        its column is not in the base parameters' span; the others are grouped into them (`armature_grouping`,
        named in `fit_.armature_grouped`). `differentiation`: the joint velocities and accelerations from the
        angles low-passed at the cut-off ("butterworth") or by the iCub paper's adaptive windowing ("adaptive",
        `identify.adaptive_window`: no fixed band); either way the regressor's rows then pass the cut-off's
        zero-phase filter with the efforts."""
        if differentiation not in DIFFERENTIATIONS:
            raise DataError(f"differentiation must be one of {DIFFERENTIATIONS}, got {differentiation!r}")
        self.differentiation = differentiation
        if quantity not in QUANTITIES:
            raise DataError(f"quantity must be one of {QUANTITIES}, got {quantity!r}")
        if armature and quantity != "torque":
            raise DataError("armature (rotor inertia at each joint) is estimated from joint torques, not from the "
                            f"{quantity}")  # fmt: skip
        self.armature = bool(armature)
        self.model, self.base, self.simplified = model, base or model.root, simplified
        self.quantity = quantity
        self.friction = friction and quantity == "torque"
        if cutoff_hz is not None and not (np.isfinite(cutoff_hz) and cutoff_hz > 0):
            raise DataError(f"cutoff_hz must be a positive frequency in Hz, got {cutoff_hz}")
        self.cutoff_hz, self.weighted, self.decimate = cutoff_hz, weighted, decimate
        self._reversal = reversal_velocity
        self._cutoff = cutoff_hz  # the cut-off in use: set from the recording by fit() when not configured
        if essential_pct is not None and not (np.isfinite(essential_pct) and essential_pct > 0):
            raise DataError(f"essential_pct must be a positive percentage, got {essential_pct}")
        self.essential_pct = essential_pct
        self.prior = prior if prior is not None else next(iter(model.params))
        check_base(model, self.base, quantity)
        if not (isinstance(drift, int) and 0 <= drift <= MAX_DRIFT_DEGREE):
            raise DataError(f"drift must be a polynomial degree 0…{MAX_DRIFT_DEGREE}, got {drift!r}")
        if drift and quantity != "wrench":
            raise DataError("drift models a sole creeping on its board: it needs the board wrench")
        self.drift = drift
        if isinstance(delay, str) and delay != "auto":
            raise DataError(f"delay must be seconds or 'auto', got {delay!r}")
        self.delay = delay
        self._db: DynamicBase | None = None
        self._recordings = 1  # how many recordings the last fit stacked (their drift columns are their own)
        self._misses: list[np.ndarray] | None = (
            None  # placement misses `_system` collects for a fit of several
        )
        self._reversal_rows = 0  # rows `_system` dropped around velocity reversals since `_stacked` began

    @property
    def cutoff_(self) -> float:
        """The cut-off (Hz) in use: the configured one, else the fitted recording's."""
        if self._cutoff is None:
            raise DataError("the cut-off follows the recording: call fit() first (or give cutoff_hz)")
        return self._cutoff

    @property
    def reversal_velocity(self) -> float:
        """rad/s (m/s on a prismatic joint) below which a joint's rows around a velocity reversal are dropped."""
        return self._reversal if self._reversal is not None else reversal_velocity_for(self.cutoff_)

    def velocity_units(self) -> dict[str, str]:
        """Each fitted joint's velocity unit: m/s on a prismatic joint, rad/s on a revolute one."""
        lin = {j.name for j in self.model.joints if j.type == "prismatic"}
        return {n: "m/s" if n in lin else "rad/s" for n in self.model.joint_names}

    def reversal_text(self) -> str:
        """`reversal_velocity` with its unit for the messages: rad/s, m/s when every joint is prismatic, else rad/s
        with the prismatic joints named in m/s."""
        v, units = f"{self.reversal_velocity:.3g}", self.velocity_units()
        lin = [n for n, u in units.items() if u == "m/s"]
        if not lin or len(lin) == len(units):
            return f"{v} {'m/s' if lin else 'rad/s'}"
        return f"{v} rad/s, {v} m/s on the prismatic joint{'s' if len(lin) > 1 else ''} {', '.join(lin)}"

    @property
    def dynamic_base_(self) -> DynamicBase:
        """Joint torques: the robot's base parameters; board wrench: those motions at the recording's foot
        placement can identify (one placement identifies fewer than double support in general)."""
        if self.quantity == "torque":
            return cached_dynamic_base(self.model, RegressorSpec("torque", self.base), self.simplified)
        if self._db is None:
            raise DataError("the wrench base parameters are derived when fitting: call fit() first")
        return self._db

    def _wrench_spec(self, rec: DynamicRecording) -> RegressorSpec:
        """Fz, Mx, My with the moments about the point the recording's boards measure them about."""
        return RegressorSpec("base-wrench", self.base, None, WRENCH_ROWS, moment_reference(rec))

    def _check(self, rec: DynamicRecording) -> None:
        if list(rec.joint_names) != list(self.model.joint_names):
            raise DataError(
                f"recording joints {rec.joint_names} do not match {self.model.name!r} ({self.model.joint_names})"
            )
        if self.quantity == "torque" and rec.tau is None:
            how = (
                "; its motor currents (i:…) need `efforts_from_currents` first"
                if rec.current is not None
                else ""
            )
            raise DataError(f"recording has no joint efforts (tau:… columns){how}")
        if self.quantity == "wrench" and rec.wrench is None:
            raise DataError("recording has no board wrench (fx_n … mz_nm columns)")

    def _system(
        self, rec: DynamicRecording, drop_reversals: bool = True, angles: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Regressor rows, efforts, each row's joint and decimated sample, filtered and decimated (rows by sample,
        then joint). `angles`: the regressor's rows from these joint angles (e.g. the planned ones, instruments)
        instead of the recorded ones, on the same rows."""
        self._check(rec)
        q, qd, qdd = self._states(rec.t, rec.q if angles is None else angles)
        # the recorded angles' velocities (`_kept_rows` derives them when other angles were given)
        measured_qd = qd if angles is None else None
        if self.quantity == "wrench":
            spec = self._wrench_spec(rec)
            if self._db is None:  # single support: the other sole moves freely, every motion
                single = rec.motion == "single-support"
                self._db = standing_base(
                    self.model, spec, self.simplified, None if single else q[len(q) // 2]
                )

            def regressor(s: slice) -> np.ndarray:
                return evaluate(self.model, spec, q[s], qd[s], qdd[s])
        else:

            def regressor(s: slice) -> np.ndarray:
                return dyn.torque_regressor(self.model, q[s], qd[s], qdd[s], self.base)

        measured = self._measured(rec)
        db = self.dynamic_base_
        K, n = measured.shape
        sl = self._kept(K, rec.rate_hz)
        # the regressor at the recording rate is the memory's bulk: whole up to CHUNK_BYTES, beyond in chunks
        chunk = max(1, CHUNK_BYTES // (8 * n * 10 * len(self.model.links)))  # 10 standard parameters a link
        whole = regressor(slice(None)) if K <= chunk else None

        def rows(fn) -> np.ndarray:
            """fn(Y, s) of the regressor Y at samples s, (samples, n, columns), through the same zero-phase filter
            as the efforts and kept at the fitted samples (parallel filtering: filt(τ) = filt(Y) ϑ holds exactly,
            where a nonlinear Y of filtered states would not commute with it)."""
            if whole is not None:
                X = fn(whole, slice(None))
                return lowpass(X.reshape(K, -1), rec.rate_hz, self.cutoff_)[sl].reshape(-1, *X.shape[1:])
            shape: list[tuple] = []

            def block(a: int, b: int) -> np.ndarray:
                X = fn(regressor(slice(a, b)), slice(a, b))
                shape[:] = [X.shape[1:]]
                return X.reshape(b - a, -1)

            at = np.arange(K)[sl]
            X = lowpass_in_chunks(block, K, rec.rate_hz, self.cutoff_, at, chunk)
            return X.reshape(len(at), *shape[0])

        # what the base parameters (of the first recording's placement) miss of this one's rigid-body wrench with
        # the guessed parameters, filtered and sliced as its rows (`_placement_misfits`): a last column, split off
        misses = angles is None and self._misses is not None
        theta = self._guessed_theta() if misses else None
        eye = np.eye(self.model.nq)[None, :, :]

        def columns(Y: np.ndarray, s: slice) -> np.ndarray:
            blocks = [Y[..., db.independent]]
            if self.friction:
                blocks += [qd[s][:, :, None] * eye, np.sign(qd[s])[:, :, None] * eye]
            if self.armature:
                blocks.append(armature_columns(qdd[s], self.armature_.estimated))
            if misses:
                blocks.append((Y @ theta - Y[..., db.independent] @ db.values(theta))[..., None])
            return np.concatenate(blocks, axis=2)

        A = rows(columns)
        if misses:
            self._misses.append(A[..., -1])
            A = A[..., :-1]
        tau = lowpass(measured, rec.rate_hz, self.cutoff_)[sl]
        if self.drift:
            # the base sole displaced by (δx, δy)(s): Mx += Fz·δy, My −= Fz·δx, s ∈ [−1, 1] over the fit
            s = np.linspace(-1.0, 1.0, len(tau))
            P = np.stack([s**k for k in range(1, self.drift + 1)], axis=1) * tau[:, :1]
            D = np.zeros((len(tau), n, 2 * self.drift))
            D[:, WRENCH_ROWS.index("mx"), self.drift :] = P
            D[:, WRENCH_ROWS.index("my"), : self.drift] = -P
            A = np.concatenate([A, D], axis=2)
        keep = self._kept_rows(rec, sl, tau.shape, drop_reversals, measured_qd)
        self._reversal_rows += int(keep.size - np.count_nonzero(keep))  # `_check_length` names them
        joint = np.broadcast_to(np.arange(n), tau.shape)
        sample = np.broadcast_to(np.arange(len(tau))[:, None], tau.shape)
        return A[keep], tau[keep], joint[keep], sample[keep]

    def _states(self, t: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, q̇, q̈ for the regressor, by the configured `differentiation`."""
        return states(t, q, self.differentiation, self.cutoff_)

    def _measured(self, rec: DynamicRecording) -> np.ndarray:
        """The recorded efforts the fit models: joint torques, or the boards' Fz, Mx, My (K, rows)."""
        if self.quantity == "wrench":
            return rec.wrench[:, [WRENCH_ROWS_ALL.index(r) for r in WRENCH_ROWS]]
        return rec.tau

    def _kept_rows(
        self,
        rec: DynamicRecording,
        sl: slice,
        shape: tuple,
        drop_reversals: bool = True,
        measured_qd: np.ndarray | None = None,
    ) -> np.ndarray:
        """Which filtered, sliced rows (`shape`) are fitted: with friction, a joint's rows around its velocity
        reversals are dropped (the Coulomb step's timing is uncertain there); `measured_qd`: the recorded angles'
        velocities, derived here when not given."""
        if not (self.friction and drop_reversals):
            return np.ones(shape, dtype=bool)
        if measured_qd is None:
            measured_qd = velocity(rec.t, rec.q, self.differentiation, self.cutoff_)
        window = int(np.ceil(rec.rate_hz / self.cutoff_))
        slow = minimum_filter1d(np.abs(measured_qd), 2 * window + 1, axis=0) < self.reversal_velocity
        return ~slow[sl]

    def _step(self, rate_hz: float) -> int:
        """Decimation: SAMPLES_PER_CUTOFF_PERIOD filtered samples per cut-off period (or `decimate`)."""
        return self.decimate or decimation(self.cutoff_, rate_hz)

    def _kept(self, samples: int, rate_hz: float) -> slice:
        """The filtered samples fitted: EDGE_PERIODS cut-off periods dropped at each end (the filter's transients),
        then decimated."""
        return kept_samples(samples, rate_hz, self.cutoff_, self._step(rate_hz))

    def filtered_rows(self, measured: np.ndarray, rate_hz: float) -> np.ndarray:
        """Measured efforts (K, rows) as `fit` uses them: zero-phase filtered, ends dropped, decimated."""
        return lowpass(measured, rate_hz, self.cutoff_)[self._kept(len(measured), rate_hz)]

    def _names(self) -> tuple[list[str], list[str], list[str]]:
        """Each estimate's symbol, formula (or meaning) and unit, in the fit's column order: the base parameters
        (a base parameter's unit is its leading standard parameter's: the grouped terms carry the lengths that make
        them alike), friction per joint (N·m·s/rad and N·m, or N·s/m and N on a prismatic joint), rotor inertia
        of the joints it is estimated at (kg·m², kg on a prismatic joint), creep (m)."""
        db = self.dynamic_base_
        syms, forms = list(db.symbols), [db.formula(a) for a in range(db.rank)]
        units = [dyn.STANDARD_UNITS[db.names[i].split("@")[0]] for i in db.independent]
        slide = [
            self.model.joints[self.model.coordinates[i]].type == "prismatic" for i in range(self.model.nq)
        ]
        if self.friction:
            for kind, unit, unit_slide in (("fv", "N·m·s/rad", "N·s/m"), ("fc", "N·m", "N")):
                us = [unit_slide if p else unit for p in slide]
                syms += [f"{kind}@{j}" for j in self.model.joint_names]
                forms += [f"{'viscous' if kind == 'fv' else 'Coulomb'} friction ({u})" for u in us]
                units += us
        for i in self.armature_.estimated if self.armature else []:
            syms.append(f"Ia@{self.model.joint_names[i]}")
            units.append("kg" if slide[i] else "kg·m²")
            forms.append(f"rotor inertia at the joint (armature, {units[-1]})")
        for r in range(self._recordings if self.drift else 0):
            tag = f"@{r + 1}" if self._recordings > 1 else ""
            for axis in "xy":
                syms += [f"d{axis}{k}{tag}" for k in range(1, self.drift + 1)]
                forms += [f"base sole creep in {axis}, coefficient of s^{k} (m; s from −1 to 1 over recording "
                          f"{r + 1})" for k in range(1, self.drift + 1)]  # fmt: skip
                units += ["m"] * self.drift
        return syms, forms, units

    @property
    def armature_(self) -> ArmatureGrouping:
        """Which joints' rotor inertia is estimated apart and which is grouped into the base parameters (joint
        torques; whether or not `armature` is on)."""
        if self.quantity != "torque":
            raise DataError("rotor inertia (armature) is estimated from joint torques only")
        return armature_grouping(self.model, RegressorSpec("torque", self.base), self.simplified)

    def _armature_grouped(self, syms: list[str]) -> dict[str, list[str]]:
        """Each grouped joint's name with the symbols (`syms`: the fit's, `_names`) of the estimates that hold its
        rotor inertia."""
        g = self.armature_
        cols = list(range(self.dynamic_base_.rank)) + [  # the columns of `g.combination`'s rows in the fit
            syms.index(f"Ia@{self.model.joint_names[j]}") for j in g.estimated
        ]
        return {
            self.model.joint_names[j]: [syms[cols[r]] for r in np.flatnonzero(g.combination[:, c])]
            for c, j in enumerate(g.grouped)
        }

    @property
    def rows_(self) -> int:
        """Measured rows per sample: one per joint (torques) or Fz, Mx, My (board wrench)."""
        return self.model.nq if self.quantity == "torque" else len(WRENCH_ROWS)

    def prepare(
        self, rec: DynamicRecording, drop_reversals: bool = True, reuse_base: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows `fit` would fit for this recording — regressor (rows, parameters), each row's kind (joint or
        wrench row) and its decimated sample — with the cut-off and base parameters set from it (`reuse_base`:
        keep those of the last fit, whose numbering follows its recording); the efforts' values do not matter."""
        if not reuse_base:
            self._db = None
        self._recordings = 1
        self._set_cutoff([rec])
        A, _, joint, sample = self._system(rec, drop_reversals)
        return A, joint, sample

    def prepare_many(
        self, recs: list[DynamicRecording], reuse_base: bool = False, what: str = "recording"
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`prepare` for recordings fitted together: their rows stacked as `fit` stacks them (samples numbered on
        one axis, recordings apart), with the cut-off and base parameters set from them. They must share the
        first's experiment, as in the fit (`_same_experiment`; `what` they are: "recording", or "plan")."""
        self._same_experiment(recs, what)
        if not reuse_base:
            self._db = None
        self._set_cutoff(recs)
        A, _, joint, sample, _ = self._stacked(recs)
        self._piece_of = list(range(len(recs)))  # its rows' pieces are the recordings (`_constant_rows`)
        return A, joint, sample

    def _set_cutoff(self, recs: list[DynamicRecording]) -> None:
        """The configured cut-off, else the largest of the recordings' defaults (`default_cutoff`)."""
        self._cutoff = self.cutoff_hz if self.cutoff_hz is not None else max(default_cutoff(r) for r in recs)

    def fitted_span(self, recs: list[DynamicRecording]) -> tuple[float, float]:
        """(recording time the fitted rows span, time dropped at the ends) in s, summed over the recordings."""
        spans = [(self._kept(len(r.t), r.rate_hz), r) for r in recs]
        fitted = sum(len(range(len(r.t))[k]) * k.step / r.rate_hz for k, r in spans)
        return fitted, sum(2 * k.start / r.rate_hz for k, r in spans)

    def fit(
        self,
        rec: DynamicRecording | Sequence[DynamicRecording],
        instruments: np.ndarray | Sequence[np.ndarray] | None = None,
        offsets: Sequence[np.ndarray | None] | None = None,
        shared_offsets: Sequence[Sequence[np.ndarray | None]] | None = None,
    ) -> DynamicEstimator:
        """Fit one recording, or several of the same robot (and, for board wrenches, the same foot placement)
        together: each filtered and trimmed on its own, their rows stacked, their noise taken independent.
        `instruments`: each recording's planned joint angles at its samples (K, nq) — the instrumental-variable
        estimate (IDIM-IV) with their regressor as instruments: the encoders' noise, differentiated twice, sits in
        the regressor and biases least squares (errors in variables); noise-free instruments do not.
        `offsets`: per recording, the covariance (rows × rows) of a constant unknown offset on all its efforts
        (a board tare's error), or None; its effect through the estimator is added to the covariance.
        `shared_offsets`: error sources common to several recordings (a board cell's gain error, the same in every
        run on those boards), each a list with, per recording, what one standard deviation of it adds to the
        efforts — a constant (rows,), or per sample (K, rows), filtered and cut as the efforts are — or None; their
        effects on the recordings add up before they enter the covariance."""
        recs = [rec] if isinstance(rec, DynamicRecording) else list(rec)
        given = recs
        if not recs:
            raise DataError("no recording to fit")
        if offsets is not None and len(offsets) != len(recs):
            raise DataError(f"{len(offsets)} offset covariances for {len(recs)} recordings")
        if shared_offsets is not None and any(len(src) != len(recs) for src in shared_offsets):
            raise DataError(
                f"a shared offset needs one entry (or None) for each of the {len(recs)} recordings"
            )
        # the recordings as given, before any work: not their pieces (a run's pieces across a gap share its
        # placement; `_placement_misfits` bounds the bias of any shift between recordings)
        self._same_experiment(recs)
        planned = self._instrument_angles(recs, instruments)
        self._set_cutoff(recs)  # the whole recordings': a delay's trimming does not move the cut-off
        if isinstance(self.delay, str):
            delays = self._estimated_delays(recs)
        else:
            delays = checked_delays(self.delay, len(recs))
        held_s = 0.0
        if delays is not None:
            recs, planned, held_s = self._delayed(recs, planned, delays)
        self._db = None
        recs, planned, gaps, dropped = self._pieces(recs, planned)
        rate = common_rate(recs)
        A, b, joint, sample, Z = self._stacked(recs, planned)
        n = self.rows_
        syms, forms, units = self._names()
        self._check_length(recs, A.shape)
        held, kappa_scaled = self._check_rank(A, syms, given)
        db = self.dynamic_base_
        p = A.shape[1]
        x = np.zeros(p)
        free = np.setdiff1d(np.arange(p), held)
        fixed = {syms[i]: (f"not excited by this motion (column-scaled κ {kappa_scaled:.3g} > "
                           f"{KAPPA_SCALED_MAX:.0e}): fixed at {getattr(self.prior, 'name', self.prior)!s}")
                 for i in held}  # fmt: skip
        if Z is not None and (z_rank := np.linalg.matrix_rank(Z[:, free])) < len(free):
            raise IdentifiabilityError(
                f"the planned angles excite {z_rank} of the {len(free)} parameters the recording does: their "
                "regressor cannot serve as instruments"
            )
        prior = np.zeros(p)
        if self.essential_pct is not None:
            prior[: db.rank] = self.reference_values(self.prior)
        while True:  # essential parameters: fix the worst determined one at its prior value, refit
            xf, cov_f, se_f, w = self._ls(A[:, free], b - A @ np.where(np.isin(np.arange(p), free), 0, prior),
                                          joint, sample, rate, None if Z is None else Z[:, free])  # fmt: skip
            rel = 100 * se_f / np.maximum(np.abs(xf), 1e-12)
            k = int(np.argmax(np.where(free < db.rank, rel, -np.inf)))
            if self.essential_pct is None or free[k] >= db.rank or rel[k] <= self.essential_pct:
                break
            if np.count_nonzero(free < db.rank) == 1:  # the last base parameter: none qualifies
                raise DataError(f"no base parameter is determined to {self.essential_pct:g} %: the best, "
                                f"{syms[free[k]]}, to {rel[k]:.3g} %")  # fmt: skip
            fixed[syms[free[k]]] = (
                f"rel. SE {rel[k]:.0f} % > {self.essential_pct:g} %: not determined by this motion; "
                f"fixed at {getattr(self.prior, 'name', self.prior)!s}"
            )
            free = np.delete(free, k)
        if offsets is not None or shared_offsets:
            shared = [self._source_rows(src, given, delays, joint) for src in shared_offsets or []]
            cov_f = cov_f + self._offset_covariance(A[:, free], None if Z is None else Z[:, free], w[joint], joint,
                                                    offsets or [None] * len(given), shared)  # fmt: skip
            se_f = np.sqrt(np.diag(cov_f))
        x = prior.copy()
        x[free] = xf
        se = np.full(p, np.nan)
        se[free] = se_f
        cov = np.full((p, p), np.nan)
        cov[np.ix_(free, free)] = cov_f
        sd = np.sqrt(np.diag(cov_f))
        corr = np.full((p, p), np.nan)
        corr[np.ix_(free, free)] = cov_f / np.outer(sd, sd)
        top = top_pairs(corr[np.ix_(free, free)], [syms[i] for i in free])
        fitted_s, edges_s = self.fitted_span(recs)
        # a delay's samples without recorded efforts are lost from any recording, as the filter's edges are
        edges_s += held_s
        raw = b - A @ x
        self._system_ = (A, Z, w[joint], b)  # the delay's profile (`_estimated_delays`) refits these rows
        sigma = np.array([raw[joint == j].std() for j in range(n)])
        residual_mean = np.array([raw[joint == j].mean() for j in range(n)])
        measured_rms = np.array([np.sqrt(np.mean(b[joint == j] ** 2)) for j in range(n)])
        measured_sd = np.array([b[joint == j].std() for j in range(n)])
        rmse = np.array([np.sqrt(np.mean(raw[joint == j] ** 2)) for j in range(n)])
        placements = self._placement_misfits(
            given,
            recs,
            A[:, free],
            None if Z is None else Z[:, free],
            w[joint],
            se_f,
            [syms[i] for i in free],
        )
        signs, sign_within = self._signs(syms)
        self.fit_ = DynamicFit(
            symbols=syms,
            formulas=forms,
            units=units,
            values=x,
            se=se,
            rel_se_pct=100 * se / np.maximum(np.abs(x), 1e-12),
            sigma=sigma,
            cov=cov,
            corr=corr,
            top_correlations=top,
            kappa=kappa(A[:, free]),
            rmse=rmse,
            samples=len(b),
            unidentifiable=[db.names[i] for i in db.vanishing],
            weighted=self.weighted,
            kappa_scaled=kappa_scaled if len(free) == p else kappa(normalised_columns(A[:, free])[0]),
            fixed=fixed,
            inertial=db.rank,
            fitted_s=fitted_s,
            edges_s=edges_s,
            instruments=Z is not None,
            gaps=gaps,
            dropped=dropped,
            placements=placements,
            delays_s=list(delays) if delays is not None else [],
            delay_estimated=isinstance(self.delay, str),
            armature_grouped=self._armature_grouped(syms) if self.armature else None,
            measured_rms=measured_rms,
            measured_sd=measured_sd,
            residual_mean=residual_mean,
            recording_samples=sum(len(r.t) for r in given),
            fitted_samples=len(np.unique(sample)),
            reversal_rows=self._reversal_rows,
            positive=[
                k for k, (s, r) in enumerate(zip(signs, sign_within, strict=True)) if s > 0 and r is None
            ],
            signs=signs,
            sign_within_m=sign_within,
        )
        return self

    def _signs(self, syms: list[str]) -> tuple[list[int], list[float | None]]:
        """Per estimate (`syms`: the fit's, `_names`), the sign physics gives it — +1 ≥ 0, −1 ≤ 0, 0 either — and
        the condition: None for any mass distribution, else the radius (m) every link's mass must lie within for it
        to hold (`robots.base_sign.signs_within`: the base parameters, with any rotor inertia grouped into them),
        given only where the prior's own links hold their mass that close (rms distance from the origin); friction
        ≥ 0, and an estimated rotor inertia unless a grouped one enters it with a negative coefficient."""
        db = self.dynamic_base_
        grouping = self.armature_ if self.armature else None
        # (base, armature, signs, radii): not derived again for the same base
        cached = getattr(self, "_base_signs", None)
        if cached is None or cached[0] is not db or cached[1] != self.armature:
            extra = None if grouping is None else grouping.combination[: db.rank]
            sg, radius = signs_within(db.combination_matrix(), db.assumed_zero, extra)
            reach = self._prior_reach()
            keep = [bool(s) and r >= reach for s, r in zip(sg, radius, strict=True)]
            cached = self._base_signs = (
                db,
                self.armature,
                [int(s) if ok else 0 for s, ok in zip(sg, keep, strict=True)],
                [
                    None if not np.isfinite(r) or not ok else float(r)
                    for r, ok in zip(radius, keep, strict=True)
                ],
            )
        signs, within = list(cached[2]), list(cached[3])
        for s in syms[db.rank :]:
            within.append(None)
            if s.startswith(("fv@", "fc@")):
                signs.append(1)
            elif s.startswith("Ia@") and grouping is not None:
                j = self.model.joint_names.index(s[3:])
                row = grouping.combination[db.rank + grouping.estimated.index(j)]
                signs.append(1 if np.all(row >= -1e-9 * max(1.0, np.abs(row).max(initial=0.0))) else 0)
            else:
                signs.append(1 if s.startswith("Ia@") else 0)
        return signs, within

    def _prior_reach(self) -> float:
        """The largest rms distance of a link's mass from its origin in the prior (√(tr I_origin / 2m)): a radius
        below it is a condition the model's own robot breaks."""
        phi = dyn.standard_parameters(self.model, self.prior).reshape(-1, 10)
        m, tr = phi[:, 0], phi[:, 4] + phi[:, 6] + phi[:, 9]
        with np.errstate(divide="ignore", invalid="ignore"):
            rms = np.sqrt(np.where(m > 0, tr / (2 * m), 0.0))
        return float(rms.max(initial=0.0))

    def _check_rank(
        self, A: np.ndarray, syms: list[str], recs: Sequence[DynamicRecording] = ()
    ) -> tuple[list[int], float]:
        """The parameters to hold at the prior (with `essential_pct`, those the regressor leaves undetermined; else
        none) and its column-scaled κ, from one SVD; IdentifiabilityError otherwise, naming the recordings (`recs`,
        as given: their labels), the joints none of them moves, and the parameters in the fit's order. Undetermined:
        exactly (rank deficient) or numerically (κ over KAPPA_SCALED_MAX — quantised encoders put noise in a
        dependent column, which a default rank tolerance then counts as rank)."""
        An, _ = normalised_columns(A)
        _, s, vt = np.linalg.svd(An, full_matrices=False)
        kappa_scaled = float(s[0] / s[-1]) if A.shape[0] >= A.shape[1] and s[-1] > 0 else float("inf")
        exact = int(np.count_nonzero(s > s[0] * max(An.shape) * np.finfo(float).eps))
        rank = min(exact, int(np.count_nonzero(s >= s[0] / KAPPA_SCALED_MAX)))
        if rank == A.shape[1]:
            return [], kappa_scaled
        missing = [int(i) for i in pivoted_qr(An)[1][rank:]]
        if self.essential_pct is not None and max(missing) < self.dynamic_base_.rank:
            return missing, kappa_scaled
        raise IdentifiabilityError(f"{self._unexcited_lead(recs)} excite {A.shape[1] - rank} parameter(s): "
                                   f"{', '.join(syms[i] for i in sorted(missing))}"
                                   f"{self._rank_why(syms, missing, s, vt, rank, exact)}")  # fmt: skip

    def _unexcited_lead(self, recs: Sequence[DynamicRecording]) -> str:
        """The start of the rank refusal, up to "excite": the recordings by their labels (files), and the joints none
        of them moves (`moving_joints`: the angle's span under MOVING_SPAN) — the plainest cause."""
        from identify.recording_model import MOVING_SPAN, moving_joints

        names = [r.label for r in recs if r.label]
        shown = ", ".join(names[:4]) + (f", … ({len(names)} recordings)" if len(names) > 4 else "")
        lead = f"{shown}: " if names else ""
        still = []
        if recs and all(list(r.joint_names) == list(self.model.joint_names) for r in recs):
            moves = np.any([moving_joints(r, self.model) for r in recs], axis=0)
            for j in np.flatnonzero(~moves):
                name = self.model.joint_names[j]
                prismatic = self.model.joints[self.model.coordinates[j]].type == "prismatic"
                least, unit = (
                    (MOVING_SPAN["prismatic"], "m") if prismatic else (MOVING_SPAN["revolute"], "rad")
                )
                span = max(float(np.ptp(r.q[:, j])) for r in recs)
                still.append(f"{name} does not move (q:{name} spans {span:.2g} {unit}, under the {least:g} {unit} "
                             "of a moving joint)")  # fmt: skip
        where = "" if len(recs) <= 1 else " in any of them"
        cause = f"{'; '.join(still)}{where}, so " if still else ""
        return (
            lead
            + cause
            + ("the recording does not" if len(recs) <= 1 else f"the {len(recs)} recordings together do not")
        )

    def _rank_why(
        self, syms: list[str], missing: list[int], s: np.ndarray, vt: np.ndarray, rank: int, exact: int
    ) -> str:
        """Why the regressor leaves `missing` undetermined, and the remedies: the rows dropped at velocity
        reversals (friction), the κ that only noise keeps finite, a simpler model, a richer motion, --essential."""
        why = ""
        if self._reversal_rows and any(syms[m].startswith(("fv@", "fc@")) for m in missing):
            why = (f" ({self._reversal_rows} rows were dropped where a joint moved slower than "
                   f"{self.reversal_text()}, around its velocity reversals at this cut-off: a joint that "
                   "hardly moves leaves its friction undetermined; lower --cutoff-hz, or fit --no-friction)")  # fmt: skip
        if rank < exact:
            near = np.flatnonzero(np.max(np.abs(vt[rank:]), axis=0) > NEAR_NULL_WEIGHT)
            which = f" {', '.join(syms[i] for i in near)}," if exact - rank <= NAMED_NEAR_NULL else ""
            why += (f" (column-scaled κ {s[0] / s[-1]:.3g} > {KAPPA_SCALED_MAX:.0e}: only the recording's noise "
                    f"sets apart the columns of{which or ' these and others'} which nearly cancel)")  # fmt: skip
        held = max(missing) < self.dynamic_base_.rank
        return why + ("; fit fewer parameters (--simplified), record a motion that excites them (plan one with "
                      "`plan trajectory`)" + (", or hold them at the prior (--essential PCT)" if held else ""))  # fmt: skip

    def _source_rows(
        self, source: Sequence[np.ndarray | None], recs: list[DynamicRecording], delays, joint: np.ndarray
    ) -> np.ndarray:
        """One shared source's effect on the fitted rows (the fit's row order): per recording, a constant (rows,) on
        its rows of each kind, or a per-sample (K, rows) series moved by the fit's delay, cut into the fit's pieces,
        filtered, trimmed and masked as its efforts are; nothing where None."""
        n = self.rows_
        out = np.zeros(len(joint))
        series = []
        for k, (r, u) in enumerate(zip(recs, source, strict=True)):
            u = None if u is None else np.asarray(u, dtype=float)
            if u is not None and (u.shape not in ((n,), (len(r.t), n)) or not np.all(np.isfinite(u))):
                raise DataError(f"shared offset, {_named(recs, k)}: {n} or {len(r.t)} × {n} finite numbers")
            if u is not None and u.ndim == 1:
                out += self._constant_rows(k, u, joint)
            series.append(None if u is None or u.ndim == 1 else u)
        if all(u is None for u in series):
            return out
        # the series as the efforts of copies of the recordings, through the fit's own steps
        copies = [
            self._with_efforts(r, np.zeros((len(r.t), n)) if u is None else u)
            for r, u in zip(recs, series, strict=True)
        ]
        if delays is not None:
            copies = self._delayed(copies, None, delays)[0]
        rows = []
        for piece in self._pieces(copies, None)[0]:
            b = self.filtered_rows(self._measured(piece), piece.rate_hz)
            rows.append(b[self._kept_rows(piece, self._kept(len(piece.t), piece.rate_hz), b.shape)])
        return out + np.concatenate(rows)

    def _with_efforts(self, rec: DynamicRecording, efforts: np.ndarray) -> DynamicRecording:
        """The recording with `efforts` (K, rows: what `_measured` reads) in place of its measured ones."""
        if self.quantity == "wrench":
            wrench = rec.wrench.copy()
            wrench[:, [WRENCH_ROWS_ALL.index(r) for r in WRENCH_ROWS]] = efforts
            return replace(rec, wrench=wrench, cells=None)
        return replace(rec, tau=efforts, current=None)

    def _constant_rows(self, k: int, u: np.ndarray, joint: np.ndarray) -> np.ndarray:
        """A constant offset u (rows,) on recording k, in the fit's row order (a constant passes the zero-phase
        filter unchanged)."""
        return np.where(np.asarray(self._piece_of)[self._row_piece] == k, u[joint], 0.0)

    def _offset_covariance(self, A, Z, Wr, joint, offsets, shared) -> np.ndarray:
        """Σ_s m_s m_sᵀ, m_s = (ZᵀWA)⁻¹ZᵀW u_s ((AᵀWA)⁻¹AᵀW without instruments, W the squared row weights): the
        estimate's covariance from error sources u_s, the rows one SD of each adds — those shared by several
        recordings (`_source_rows`), and each recording's constant offset of covariance C_k (a tare's), taken as
        its independent principal directions √λ v (C_k = Σ λ v vᵀ) on that recording's rows."""
        n = self.rows_
        sources = list(shared)
        for k, C in enumerate(offsets):
            if C is None:
                continue
            C = np.asarray(C, dtype=float)
            if C.shape != (n, n) or not np.all(np.isfinite(C)):
                raise DataError(f"recording {k + 1}: an offset covariance must be {n} × {n} finite numbers")
            lam, V = np.linalg.eigh((C + C.T) / 2)
            sources += [
                self._constant_rows(k, np.sqrt(v) * V[:, i], joint) for i, v in enumerate(lam) if v > 0
            ]
        if not sources:
            return np.zeros((A.shape[1], A.shape[1]))
        Zt = (A if Z is None else Z) * (Wr * Wr)[:, None]  # the estimator's left factor, the weights twice
        M = np.linalg.solve(Zt.T @ A, Zt.T @ np.stack(sources, axis=1))
        return M @ M.T

    def _delayed(
        self, recs: list[DynamicRecording], planned: list[np.ndarray] | None, delays: list[float]
    ) -> tuple[list[DynamicRecording], list[np.ndarray] | None, float]:
        """The recordings with their efforts moved by their delays, cut to the samples whose moved efforts were
        recorded (`trimmed`: a positive delay takes the efforts from up to |delay| s beyond the end, a negative one
        before the start, and either across a gap), their planned angles alike; and the time cut (s, summed).
        DataError for a delay that leaves less of a recording than it cuts, or too little to fit."""
        out, angles, held = [], [], 0.0
        for k, (r, d) in enumerate(zip(recs, delays, strict=True)):
            moved, keep = trimmed(r, d, GAP_FACTOR)
            step = float(np.median(np.diff(r.t)))
            total = float(r.t[-1] - r.t[0])
            cut = (len(keep) - int(np.count_nonzero(keep))) * step
            left = max(total - cut, 0.0)
            if (
                cut > left
                or np.count_nonzero(keep) < 10
                or not any(fitted for *_, fitted in fit_pieces(r.t[keep], self.cutoff_, self.decimate))
            ):
                what = "recording" if len(recs) == 1 else _named(recs, k)
                raise DataError(
                    f"a delay of {1000 * d:g} ms leaves {left:.3g} s of the {total:.3g} s {what} with recorded "
                    "efforts: too little to fit (a delay may cut at most half a recording, and what it leaves must "
                    f"outlast the {self.cutoff_:.3g} Hz filter's edges); an efforts' lag is a few ms (--delay is in "
                    "ms; auto estimates it)"
                )
            out.append(moved)
            angles.append(None if planned is None else planned[k][keep])
            held += cut
        return out, (None if planned is None else angles), held

    def _estimated_delays(self, recs: list[DynamicRecording]) -> list[float]:
        """The delay (s) of the efforts behind the encoders, one for all recordings (one recorder's timing): the
        delay whose refit leaves the least weighted least-squares residual (a profile: the regressor does not depend
        on it, so each trial delay only re-filters the efforts and solves the fit's weighted least squares again),
        on the samples whose moved efforts are recorded at every delay searched (`held_free`). ROUNDS times, the
        weights from the fit at the delay found before, each trial delay moving the recorded efforts once (moving
        the first round's moved efforts again smoothed them twice, and pulled a 100 Hz twin run's lag from −3.6 to
        −2.4 ms, toward a whole sample). With instruments too: the IV residual is no criterion for the delay
        (`identify.delay`), the IV estimate is made at this one. One delay per recording was tried: a 10 s run's own
        fit put the twin's lag (2.7 ms then) at 0.3–1.9 ms."""
        sub = copy.copy(self)
        sub.cutoff_hz, sub.delay = self.cutoff_, None  # the fit's cut-off, of the whole recordings
        spans = [held_free(r.t, -MAX_DELAY_S, MAX_DELAY_S, GAP_FACTOR) for r in recs]
        if not all(np.count_nonzero(keep) >= 10 for keep in spans):
            raise DataError(
                f"a recording is too short to search its efforts' lag within ±{1000 * MAX_DELAY_S:.0f} ms"
            )

        def moved(e: float) -> list[DynamicRecording]:
            return [samples_of(delayed(r, e), keep) for r, keep in zip(recs, spans, strict=True)]

        delay = 0.0
        for _ in range(ROUNDS):
            sub.fit(moved(delay))
            A, _, wr, _ = sub._system_
            rows = []  # each piece's fitted rows (`_system`: the reversals dropped with friction)
            for piece in sub._pieces(moved(delay), None)[0]:
                shape = sub.filtered_rows(sub._measured(piece), piece.rate_hz).shape
                rows.append(sub._kept_rows(piece, sub._kept(len(piece.t), piece.rate_hz), shape))
            Q = np.linalg.qr(A * wr[:, None])[0]

            def cost(e: float, wr=wr, rows=rows, Q=Q) -> float:
                pieces = sub._pieces(moved(e), None)[0]
                bw = wr * np.concatenate(
                    [
                        sub.filtered_rows(sub._measured(piece), piece.rate_hz)[keep]
                        for piece, keep in zip(pieces, rows, strict=True)
                    ]
                )
                return float(np.sum((bw - Q @ (Q.T @ bw)) ** 2))

            delay = best_delay(cost)
            if abs(delay) > MAX_DELAY_S - SCAN_STEP_S:
                raise DataError(
                    f"the efforts' lag that fits best lies at the edge of the ±{1000 * MAX_DELAY_S:.0f} ms search "
                    f"({1000 * delay:+.0f} ms): the efforts' and the angles' clocks disagree by more; give --delay MS"
                )
        return [delay] * len(recs)

    def _guessed_theta(self) -> np.ndarray:
        """The model's first parameter set as standard parameters, within the simplified model if fitted (the set
        may have what that model leaves out, which is no placement's doing)."""
        theta = dyn.standard_parameters(self.model, next(iter(self.model.params)))
        if self.simplified:
            theta[zero_set(self.model, list(self.model.simplified_dynamic_zero))] = 0.0
        return theta

    def _placement_misfits(
        self,
        given: list[DynamicRecording],
        recs: list[DynamicRecording],
        A: np.ndarray,
        Z: np.ndarray | None,
        wr: np.ndarray,
        se: np.ndarray,
        names: list[str],
    ) -> list[dict]:
        """Double support, several recordings (`given`; `recs`: their pieces): each one's other sole's offset from the first's, the rms by which
        the first's base parameters miss its filtered rigid-body wrench with the guessed parameters (their
        dependent columns' β change with the placement), and the bias those misses put on the estimates (the
        fit's own weights `wr` and instruments) — refused above PLACEMENT_BIAS_SE of a parameter's SE."""
        misses, self._misses = self._misses, None
        if misses is None:  # one recording, joint torques or single support
            return []
        first = self._placement(recs[0])
        out = []
        for k, (r, e) in enumerate(zip(recs, misses, strict=True)):
            if self._piece_of[k] == self._piece_of[0]:
                continue  # the first recording, another piece of it: its own placement
            shift, turn = placement_deviation(first, self._placement(r))
            out.append({"recording": self._piece_of[k] + 1, "shift_mm": 1000 * shift,
                        "turn_deg": float(np.degrees(turn)),
                        "misfit": [float(x) for x in np.sqrt(np.mean(e**2, axis=0))]})  # fmt: skip
        e = np.concatenate([m.ravel() for m in misses]) * wr  # the fit's row order: by sample, then row
        Aw = A * wr[:, None]
        bias = np.linalg.lstsq(Aw, e, rcond=None)[0] if Z is None else np.linalg.solve((Z * wr[:, None]).T @ Aw,
                                                                                      (Z * wr[:, None]).T @ e)  # fmt: skip
        ratio = np.abs(bias) / se
        k = int(np.argmax(ratio))
        for entry in out:
            entry["max_bias_se"] = float(ratio[k])
        if ratio[k] > PLACEMENT_BIAS_SE:
            worst = max(out, key=lambda d: d["shift_mm"] + d["turn_deg"])
            one = given[0].label or "the first"
            raise DataError(
                f"{_named(given, worst['recording'] - 1)}'s other sole stands "
                f"{worst['shift_mm']:.1f} mm / {worst['turn_deg']:.2f}° from {one}'s: {one}'s base parameters miss "
                "its wrench by "
                f"{max(worst['misfit']):.3g} rms (guessed parameters), which would bias {names[k]} by "
                f"{ratio[k]:.2f} SE (at most {PLACEMENT_BIAS_SE:g}) — another foot placement identifies other base "
                "parameters: fit the recordings apart"
            )
        return out

    def _pieces(
        self, recs: list[DynamicRecording], planned: list[np.ndarray] | None
    ) -> tuple[list[DynamicRecording], list[np.ndarray] | None, list[dict], list[dict]]:
        """The recordings split at their gaps (a step > GAP_FACTOR × the median) into uniformly sampled pieces,
        with their planned angles; pieces that leave fewer than one cut-off period of rows after the filter's
        edges are dropped. Returns (pieces, their planned angles, the gaps, the dropped pieces)."""
        pieces, angles, gaps, dropped = [], [], [], []
        self._piece_of: list[int] = []  # each piece's recording (index into `recs`)
        for k, r in enumerate(recs):
            spans = fit_pieces(r.t, self.cutoff_, self.decimate)
            gaps += [
                {"recording": k + 1, "from_s": float(r.t[a - 1]), "to_s": float(r.t[a])}
                for a, *_ in spans[1:]
            ]
            for a, b, _, fitted in spans:
                if not fitted:
                    dropped.append({"recording": k + 1, "from_s": float(r.t[a]), "to_s": float(r.t[b - 1])})
                    continue
                cut = slice(a, b)
                within = np.zeros(len(r.t), dtype=bool)
                within[cut] = True
                pieces.append(samples_of(r, within))
                angles.append(None if planned is None else planned[k][cut])
                self._piece_of.append(k)
        if not pieces:
            edge = EDGE_PERIODS / self.cutoff_
            if not gaps:
                total = sum(float(r.t[-1] - r.t[0]) for r in recs)
                what = "the recording" if len(recs) == 1 else f"each of the {len(recs)} recordings"
                raise DataError(
                    f"{what} ({total:.3g} s in all) is too short for a {self.cutoff_:.3g} Hz cut-off: the filter's "
                    f"transients take {edge:.3g} s at each end; raise --cutoff-hz or record longer"
                )
            raise DataError(
                f"every piece between the recording's {len(gaps)} gap(s) is too short for a {self.cutoff_:.3g} Hz "
                f"cut-off (the filter's transients take {edge:.3g} s at each end of each): record without gaps or "
                "raise --cutoff-hz"
            )
        return pieces, (None if planned is None else angles), gaps, dropped

    def _instrument_angles(
        self, recs: list[DynamicRecording], instruments: np.ndarray | Sequence[np.ndarray] | None
    ) -> list[np.ndarray] | None:
        """The instruments' joint angles, one array per recording, checked against the recordings' shapes."""
        if instruments is None:
            return None
        planned = [instruments] if isinstance(instruments, np.ndarray) else list(instruments)
        if len(planned) != len(recs):
            raise DataError(
                f"{len(planned)} sets of planned angles for {len(recs)} recordings: give one each"
            )
        out = []
        for k, (r, qp) in enumerate(zip(recs, planned, strict=True)):
            qp = np.asarray(qp, dtype=float)
            if qp.shape != r.q.shape:
                raise DataError(
                    f"planned angles {qp.shape} for {_named(recs, k)} of {r.q.shape} (samples, joints)"
                )
            if not np.all(np.isfinite(qp)):
                raise DataError(f"the planned angles for {_named(recs, k)} are not all finite")
            off = np.sqrt(np.mean((qp - r.q) ** 2, axis=0))
            if off.max() > INSTRUMENT_TOL_RAD:
                j = int(np.argmax(off))
                raise DataError(
                    f"the planned angles stray {off[j]:.3g} rad rms from {_named(recs, k)}'s at joint "
                    f"{r.joint_names[j]} (at most {INSTRUMENT_TOL_RAD:g}): not the plan this recording executed?"
                )
            out.append(qp)
        return out

    def _stacked(
        self, recs: list[DynamicRecording], planned: list[np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """The rows of every recording (base parameters from the first), their decimated samples numbered on
        one axis with RECORDING_GAP_PERIODS cut-off periods between recordings: the banded noise model then
        sees no correlation between them; with `planned` angles, the instruments' rows alike (else None)."""
        parts, offset = [], 0
        gap = int(RECORDING_GAP_PERIODS * SAMPLES_PER_CUTOFF_PERIOD)
        self._recordings = len(recs)
        several_placed = len(recs) > 1 and self.quantity == "wrench" and recs[0].motion != "single-support"
        self._misses = [] if several_placed else None  # filled by `_system` for `_placement_misfits`
        self._reversal_rows = 0
        for k, r in enumerate(recs):
            A, b, joint, sample = self._system(r)
            dropped = self._reversal_rows  # the instruments' rows drop the same ones: counted once
            Z = A if planned is None else self._system(r, angles=planned[k])[0]
            self._reversal_rows = dropped
            parts.append((A, Z, b, joint, sample + offset))
            offset += (int(sample.max()) + 1 if len(sample) else 0) + gap
        if len(parts) > 1 and self.drift:  # each recording's sole creeps its own way: its drift columns apart
            nd = 2 * self.drift

            def own(M: np.ndarray, k: int) -> np.ndarray:
                cols = np.zeros((len(M), nd * len(parts)))
                cols[:, k * nd : (k + 1) * nd] = M[:, -nd:]
                return np.hstack([M[:, :-nd], cols])

            parts = [(own(A, k), own(Z, k), *rest) for k, (A, Z, *rest) in enumerate(parts)]
        A, Z, b, joint, sample = (np.concatenate([part[i] for part in parts]) for i in range(5))
        self._row_piece = np.concatenate([np.full(len(part[2]), k) for k, part in enumerate(parts)])
        return A, b, joint, sample, (None if planned is None else Z)

    def _same_experiment(self, recs: Sequence[DynamicRecording], what: str = "recording") -> None:
        """Recordings fitted with the first must share its robot, base, motion kind and (board wrench in double
        support) foot placement: the base parameters are the first's. The messages name each by its label (the
        file), else by number ("recording 2", "the first"); `what` they are: "recording", or "plan" (a forecast's,
        forecast apart rather than fitted apart: `APART`)."""
        if len(recs) < 2:
            return
        first, verb = recs[0], APART[what]
        one = first.label or "the first"
        for k, other in enumerate(recs[1:], start=1):
            name = _named(recs, k, what)
            try:
                self._check(other)
            except DataError as exc:
                if not other.label:
                    raise
                raise DataError(f"{name}: {exc}") from None
            if not same_robot(other.robot, first.robot) or other.base != first.base:
                raise DataError(f"{name} is of {other.robot!r} on {other.base!r}, {one} of {first.robot!r} on "
                                f"{first.base!r}")  # fmt: skip
            if self.quantity != "wrench":
                continue
            if other.motion != first.motion:
                raise DataError(
                    f"{name} is a {other.motion} {what}, {one} a {first.motion} one: {verb} them apart"
                )
            if first.motion == "single-support":
                continue
            if apart := placement_apart(*(self._placement(r) for r in (first, other))):
                raise DataError(
                    f"{name}'s other sole stands {apart} from {one}'s ({PLACEMENT_LIMITS}): another foot placement "
                    f"identifies other base parameters — {verb} the {what}s apart"
                )

    def _placement(self, rec: DynamicRecording) -> np.ndarray:
        """The other sole's placement (x, y, yaw) on the ground in the base sole's frame, at the middle sample."""
        return other_pose(self.model, rec.q[len(rec.q) // 2], next(iter(self.model.params)), self.base)

    def _check_length(self, recs: list[DynamicRecording], shape: tuple[int, int]) -> None:
        """Recordings too short for their cut-off leave fewer rows than parameters: say so, with the numbers."""
        rows, p = shape
        if rows > p:
            return
        edge = EDGE_PERIODS / self.cutoff_
        what = "the recording" if len(recs) == 1 else f"the {len(recs)} recordings"
        total = sum(float(r.t[-1] - r.t[0]) for r in recs)
        dropped = self._reversal_rows
        if rows + dropped > p:  # long enough: the friction model's mask took the rows
            raise DataError(
                f"{what} leaves {rows} rows for {p} parameters at a {self.cutoff_:.3g} Hz cut-off: {dropped} of "
                f"{rows + dropped} were dropped around velocity reversals (|q̇| < {self.reversal_text()}, "
                "where the Coulomb friction's sign is not trusted; that speed grows with the cut-off): lower "
                "--cutoff-hz, or fit --no-friction"
            )
        raise DataError(
            f"{what} ({total:.3g} s) {'is' if len(recs) == 1 else 'are'} too short for a {self.cutoff_:.3g} Hz cut-off: "
            f"after dropping {edge:.3g} s at each end (the filter's transients) and keeping "
            f"{SAMPLES_PER_CUTOFF_PERIOD} samples per cut-off period it leaves {rows} rows for {p} parameters; "
            "record longer or raise --cutoff-hz"
        )

    def _ls(
        self, A, b, joint, sample, rate_hz: float, Z: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """OLS, or per-row-kind WLS with weights from the OLS residuals; with instruments' rows Z, the IV estimate
        (ZᵀWA)⁻¹ZᵀWb at those weights. The covariance from the (W)LS residuals' banded spectrum
        (`identify.residual_covariance`: correlated in time and across a sample's rows); (x, cov, se, w)."""
        n = self.rows_
        w = np.ones(n)
        x = np.linalg.lstsq(A, b, rcond=None)[0]
        if self.weighted:  # per-joint noise levels from the OLS residuals, then WLS
            r = b - A @ x
            w = 1.0 / np.maximum([r[joint == j].std() for j in range(n)], 1e-9)
            x = np.linalg.lstsq(A * w[joint][:, None], b * w[joint], rcond=None)[0]
        Wr = w[joint]
        Aw = A * Wr[:, None]
        Zw = None if Z is None else Z * Wr[:, None]
        dt = self._step(rate_hz) / rate_hz
        cov = banded_covariance(
            Aw, (b - A @ x) * Wr, sample, joint, dt, self.cutoff_, rate_hz, SPECTRUM_SPLITS, instruments=Zw
        )
        if Zw is not None:
            x = np.linalg.solve(Zw.T @ Aw, Zw.T @ (b * Wr))
        return x, cov, np.sqrt(np.diag(cov)), w

    def predict(self, rec: DynamicRecording) -> tuple[np.ndarray, np.ndarray]:
        """(predicted, measured) efforts, both filtered, (K, n) — for validation on another recording; one with
        gaps is filtered piece by piece as `fit` does, the pieces' rows one after the other. A lag the fit used for
        all its recordings (`delay`) is the recorder's: this recording's efforts are moved by it too
        (`_moved_like_fit`)."""
        pred, meas = [], []
        for piece in self._pieces([self._moved_like_fit(rec)], None)[0]:
            A, b, _, _ = self._system(piece, drop_reversals=False)
            x = self.fit_.values[: A.shape[1]].copy()
            if self.drift:  # another recording's sole creeps its own way: the model alone predicts it
                x[A.shape[1] - 2 * self.drift :] = 0.0
            pred.append((A @ x).reshape(-1, self.rows_))
            meas.append(b.reshape(-1, self.rows_))
        return np.concatenate(pred), np.concatenate(meas)

    def fit_rows(self, rec: DynamicRecording) -> tuple[Callable[[np.ndarray], np.ndarray], np.ndarray]:
        """`predict`'s rows of a recording, pieces one after the other: `rows(angles)`, the fit's filtered regressor
        rows (K', rows, columns) on joint angles (K, nq) in place of the recorded ones (on the recorded ones,
        `predict`'s predictions are these times the fitted values), and `kept`, which of them the fit keeps
        (bool (K', rows): a joint's rows around its recorded velocity reversals dropped, as the fit drops them from
        its own recordings). Returns (rows, kept)."""

        def rows(angles: np.ndarray) -> np.ndarray:
            out = []
            for piece in self._pieces([self._moved_like_fit(replace(rec, q=angles))], None)[0]:
                A = self._system(piece, drop_reversals=False)[0]
                out.append(A.reshape(-1, self.rows_, A.shape[1]))
            return np.concatenate(out)

        kept = []
        for piece in self._pieces([self._moved_like_fit(rec)], None)[0]:
            sl = self._kept(len(piece.t), piece.rate_hz)
            kept.append(self._kept_rows(piece, sl, (len(range(len(piece.t))[sl]), self.rows_)))
        return rows, np.concatenate(kept)

    def _moved_like_fit(self, rec: DynamicRecording) -> DynamicRecording:
        """Another recording of this recorder (validation): its efforts moved by the lag the fit used for all its
        recordings, cut to the samples whose moved efforts were recorded (`trimmed`), as `fit` cut its own."""
        lags = set(self.fit_.delays_s)
        return trimmed(rec, lags.pop(), GAP_FACTOR)[0] if len(lags) == 1 else rec

    def predicted_times(self, rec: DynamicRecording) -> np.ndarray:
        """The recording's times (s) of `predict`'s rows, piece after piece."""
        pieces = self._pieces([self._moved_like_fit(rec)], None)[0]
        return np.concatenate([p.t[self._kept(len(p.t), p.rate_hz)] for p in pieces])

    def reference_values(self, params, armature: np.ndarray | float | None = None) -> np.ndarray:
        """The base parameters of a known parameter set (friction and rotor inertia columns excluded). A parameter
        set has no rotor inertia; `armature`: the reference robot's per joint (kg·m², kg on a prismatic joint),
        whose grouped joints' share (`armature_`) is added to the base parameters that hold it."""
        values = self.dynamic_base_.values(dyn.standard_parameters(self.model, params))
        if armature is None:
            return values
        g = self.armature_
        ia = np.broadcast_to(np.asarray(armature, dtype=float), (self.model.nq,))
        return values + g.combination[: len(values)] @ ia[g.grouped]


def armature_columns(qdd: np.ndarray, joints: Sequence[int]) -> np.ndarray:
    """Rotor inertia columns for states q̈ (K, n): (K, n, len(joints)), q̈_j on joint j's own row."""
    K, n = qdd.shape
    out = np.zeros((K, n, len(joints)))
    for c, j in enumerate(joints):
        out[:, j, c] = qdd[:, j]
    return out


@dataclass(frozen=True)
class ArmatureGrouping:
    """Joint indices whose rotor inertia a joint-torque fit estimates apart, and those whose column lies in the
    span of the base parameters' (and of the estimated ones'): grouped, ϑ_a += combination[a, c] · Ia of
    grouped[c] (rows: the base parameters, then the estimated rotor inertias)."""

    estimated: list[int]
    grouped: list[int]
    combination: np.ndarray


@per_model
def armature_grouping(model: RobotModel, spec: RegressorSpec, simplified: bool = False) -> ArmatureGrouping:
    """Which joints' rotor inertia a fit of these base parameters can estimate apart, and how the others group
    into the estimates. Decided as the base parameters are (`robots.base_params.derive_dynamic_base`): the torque
    regressor's base columns and the rotor inertia columns stacked over the random states it draws, then the
    rotor inertia columns kept in joint order that are independent of the base columns and of those kept before
    them (rank by pivoted QR, `numeric_base`). A joint whose axis is fixed in the base (the first
    of a fixed-base arm): its link's inertia about that axis acts on its own row alone, as q̈_j, just as its rotor
    inertia does, so one base parameter holds both."""
    db = cached_dynamic_base(model, spec, simplified)
    names = dyn.standard_names(model)
    n = max(40, 3 * len(names) // max(1, model.nq))  # the states `derive_dynamic_base` draws
    q, qd, qdd = random_states(model, n, np.random.default_rng(0))
    Yb = evaluate(model, spec, q, qd, qdd)[..., db.independent]
    joints = list(range(model.nq))
    M = np.concatenate([Yb, armature_columns(qdd, joints)], axis=2).reshape(-1, db.rank + model.nq)
    labels = db.symbols + [f"Ia@{j}" for j in model.joint_names]
    cols, kept = list(range(db.rank)), []
    rank = numeric_base(M[:, cols], [labels[c] for c in cols]).rank
    for j in joints:  # in joint order: each one kept if it raises the rank of the base columns and those kept
        trial = [*cols, db.rank + j]
        if numeric_base(M[:, trial], [labels[c] for c in trial]).rank > rank:
            cols, rank = trial, rank + 1
            kept.append(j)
    grouped = [j for j in joints if j not in kept]
    combination = np.linalg.lstsq(M[:, cols], M[:, [db.rank + j for j in grouped]], rcond=None)[0]
    # rounding, not grouping: the base columns' conditioning leaves up to ~1e-8 (iCub arm) where the link lengths
    # put coefficients of 1e-2…1
    combination[np.abs(combination) < 1e-6 * np.abs(combination).max(axis=0, initial=0.0)] = 0.0
    return ArmatureGrouping(kept, grouped, combination)


def _named(recs: Sequence[DynamicRecording], k: int, what: str = "recording") -> str:
    """What a message calls input k (from 0) of `recs`: of several fitted together, its label (the file it was read
    from) if it has one; else its number ("recording 2"; a lone recording's file is named by the command)."""
    return recs[k].label if recs[k].label and len(recs) > 1 else f"{what} {k + 1}"


def common_rate(recs: list[DynamicRecording]) -> float:
    """The sample rate (Hz) recordings fitted together share (within RATE_RTOL): the noise model's lags are
    counted in samples."""
    rates = [r.rate_hz for r in recs]
    if max(rates) > min(rates) * (1 + RATE_RTOL):
        # each recording (a piece of one cut at its gaps carries its label) by its file, else its number
        said = dict.fromkeys(
            f"{r.label or f'recording {k + 1}'} {x:.4g} Hz"
            for k, (r, x) in enumerate(zip(recs, rates, strict=True))
        )
        raise DataError(
            "recordings fitted together need one sample rate; got "
            + ", ".join(said)
            + " — resample them first"
        )
    return rates[0]


def decimation(cutoff_hz: float, rate_hz: float) -> int:
    """The fit's default decimation step: SAMPLES_PER_CUTOFF_PERIOD filtered samples per cut-off period."""
    return max(1, int(rate_hz / (SAMPLES_PER_CUTOFF_PERIOD * cutoff_hz)))


def kept_samples(samples: int, rate_hz: float, cutoff_hz: float, step: int = 1) -> slice:
    """The filtered samples of a recording (piece) that are used: EDGE_PERIODS cut-off periods dropped at each end
    (the zero-phase filter's transients), every `step`-th of the rest."""
    edge = max(1, int(np.ceil(EDGE_PERIODS / cutoff_hz * rate_hz)))
    return slice(edge, samples - edge, step)


def fit_pieces(
    t: np.ndarray, cutoff_hz: float, step: int | None = None
) -> list[tuple[int, int, float, bool]]:
    """A recording's uniformly sampled pieces, cut at its gaps (steps over GAP_FACTOR × the median step: samples
    lost, a stalled logger): (a, b, rate Hz, fitted) for indices [a, b), `fitted` False where fewer than
    SAMPLES_PER_CUTOFF_PERIOD rows (decimated by `step`, default `decimation`) are left once the filter's ends are
    dropped, or under ten samples — pieces the fit drops."""
    cuts = (gaps_after(t, GAP_FACTOR) + 1).tolist()
    out = []
    for a, b in zip([0, *cuts], [*cuts, len(t)], strict=True):
        n = b - a
        rate = (n - 1) / float(t[b - 1] - t[a]) if n > 1 else 0.0
        rows = len(range(n)[kept_samples(n, rate, cutoff_hz, step or decimation(cutoff_hz, rate))])
        out.append((a, b, rate, n >= 10 and rows >= SAMPLES_PER_CUTOFF_PERIOD))
    return out


@dataclass(frozen=True)
class FilteredPiece:
    """One uniformly sampled piece of a recording as the fit differentiates it, ends dropped: times (s), the
    filtered q, q̇, q̈ (K, n); and the piece's recorded positions, ends included (where the fit reads a
    double-support recording's foot placement: its middle sample)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    recorded: np.ndarray


def filtered_motion(
    rec: DynamicRecording, cutoff_hz: float | None = None
) -> tuple[list[FilteredPiece], float]:
    """A recording's joint motion as `DynamicEstimator.fit` takes it: the cut-off `cutoff_hz` (default
    `default_cutoff`, as `identify dynamic`), the recording cut at its gaps (`fit_pieces`; a piece too short for the
    cut-off dropped as the fit drops it), each piece differentiated on its own (`derivatives`) and its ends dropped
    (`kept_samples`, undecimated). Returns (pieces, cut-off); DataError when no piece is long enough."""
    fc = cutoff_hz if cutoff_hz is not None else default_cutoff(rec)
    pieces = []
    spans = fit_pieces(rec.t, fc)
    for a, b, rate, fitted in spans:
        n = b - a
        if not fitted:
            continue
        t, raw = rec.t[a:b], rec.q[a:b]
        q, qd, qdd = derivatives(t, raw, fc)
        keep = kept_samples(n, rate, fc)
        pieces.append(FilteredPiece(t[keep], q[keep], qd[keep], qdd[keep], raw))
    if not pieces:
        edge = EDGE_PERIODS / fc
        span = f"{float(rec.t[-1] - rec.t[0]):.3g} s"
        what = f"every piece between its gaps (of {span})" if len(spans) > 1 else f"it ({span})"
        raise DataError(
            f"too short for a {fc:.3g} Hz cut-off: {what} leaves fewer than {SAMPLES_PER_CUTOFF_PERIOD} samples "
            f"after dropping {edge:.3g} s at each end (the filter's transients)"
        )
    return pieces, fc


def band_cutoff(band_hz: float, duration_s: float) -> float:
    """`default_cutoff` of a motion whose band is `band_hz`, recorded for `duration_s`."""
    edge_bound = EDGE_PERIODS / (MAX_EDGE_FRACTION * duration_s) if duration_s > 0 else DEFAULT_CUTOFF_HZ
    return max(CUTOFF_PER_BAND * band_hz, min(edge_bound, DEFAULT_CUTOFF_HZ))


def default_cutoff(rec: DynamicRecording) -> float:
    """Butterworth cut-off (Hz) for a recording: CUTOFF_PER_BAND × its metadata `motion_band_hz` (the planned
    motion's highest frequency), raised (up to DEFAULT_CUTOFF_HZ) where needed so the filter's end transients
    (EDGE_PERIODS/f_c s each) stay within MAX_EDGE_FRACTION of the recording; DEFAULT_CUTOFF_HZ when no band is declared.

    Why not always 5 Hz: velocity noise from quantised encoders grows as f_c^1.5 and decides the sign of the
    Coulomb column wherever a joint creeps (a Fourier trajectory rests at every period), so a cut-off far above
    a slow motion's band costs accuracy for nothing."""
    text = rec.meta.get("motion_band_hz")
    if text is None:
        return DEFAULT_CUTOFF_HZ
    try:
        band = float(text)
    except ValueError:
        band = float("nan")
    if not (np.isfinite(band) and band > 0):
        raise DataError(f"recording metadata motion_band_hz must be a positive frequency in Hz, got {text!r}")
    fc = band_cutoff(band, float(rec.t[-1] - rec.t[0]))
    if fc >= rec.rate_hz / 2:
        raise DataError(
            f"motion_band_hz {band:g} needs a cut-off of {fc:.3g} Hz, above half the sample rate "
            f"({rec.rate_hz / 2:.3g} Hz): sample faster, or a lower cut-off (identify dynamic --cutoff-hz)"
        )
    return fc


def moment_reference(rec: DynamicRecording) -> float:
    """Height (m, base frame z) of the point the recording's moments are taken about: metadata `moment_z_m`
    (boards' load cells lie a plate height below the soles), 0 (the base origin) when absent."""
    text = rec.meta.get("moment_z_m", "0")
    try:
        z = float(text)
    except ValueError:
        z = float("nan")
    if not (np.isfinite(z) and abs(z) < 10.0):
        raise DataError(f"recording metadata moment_z_m must be a height in m, got {text!r}")
    return z


def ls_statistics(
    Aw: np.ndarray,
    bw: np.ndarray,
    x: np.ndarray,
    symbols: list[str],
    top: int = 5,
    sample: np.ndarray | None = None,
    lags: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[str, str, float]]]:
    """Statistics of (weighted) LS estimates x of Aw x ≈ bw: covariance, standard errors, correlations and the
    `top` most correlated pairs.

    Without `sample`: s²(AwᵀAw)⁻¹, s² the residual variance per degree of freedom (independent rows). With each
    row's time `sample` index: the Newey–West (Bartlett-weighted, `lags` samples) sandwich, which stays honest when
    low-pass filtering correlates neighbouring samples' residuals (and rows of one sample with each other)."""
    res = bw - Aw @ x
    m, p = Aw.shape
    dof = m - p
    H = np.linalg.inv(Aw.T @ Aw)
    if sample is None:
        cov = float(res @ res) / dof * H
    else:
        idx = np.asarray(sample, dtype=int)  # gaps (dropped rows) keep their place in time
        G = np.zeros((idx.max() + 1, p))
        np.add.at(G, idx, Aw * res[:, None])  # score of every sample
        M = G.T @ G
        for lag in range(1, lags + 1):
            C = G[lag:].T @ G[:-lag]
            M += (1.0 - lag / (lags + 1)) * (C + C.T)
        cov = m / dof * (H @ M @ H)
    se = np.sqrt(np.diag(cov))
    corr = cov / np.outer(se, se)
    return cov, se, corr, top_pairs(corr, symbols, top)


def top_pairs(corr: np.ndarray, symbols: list[str], top: int = 5) -> list[tuple[str, str, float]]:
    """The `top` most correlated pairs of estimates."""
    iu = np.triu_indices(len(symbols), 1)
    order = np.argsort(-np.abs(corr[iu]))[:top]
    return [(symbols[iu[0][k]], symbols[iu[1][k]], float(corr[iu][k])) for k in order]


def validation_error(pred: np.ndarray, meas: np.ndarray) -> dict:
    """RMS prediction error per joint, absolute (N·m) and relative to the measured RMS (%); None (and the row in
    `zero_rms_rows`) where the measured RMS is 0, which has no relative error."""
    rmse = np.sqrt(np.mean((pred - meas) ** 2, axis=0))
    rms = np.sqrt(np.mean(meas**2, axis=0))
    whole = float(np.linalg.norm(meas))
    return {
        "rmse_nm": rmse.tolist(),
        "relative_pct": [float(100 * e / m) if m > 0 else None for e, m in zip(rmse, rms, strict=True)],
        "total_relative_pct": 100 * float(np.linalg.norm(pred - meas)) / whole if whole > 0 else None,
        "zero_rms_rows": [j for j, m in enumerate(rms) if not m > 0],
    }
