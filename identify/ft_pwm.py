"""Inertial + friction + motor parameters in one regression (spec icub-pls.md §1, paper eq. 11).

Per sample, the rows of every actuation group's joints (torque balance, N·m) and the six F/T rows (N, N·m):
```
joint rows:  Y_τ φ + Y_F(q̇) φ_F + Tᵀ Y_F(q̇_m) φ_Fm − Tᵀ diag(v) k = 0      (coupled groups)
             Y_τ φ + Y_F(q̇) φ_F                   − diag(v) k     = 0      (own motor: T = 1)
F/T rows:    Y_FT φ + w_O = w_s
```
The groups and Tᵀ come from the robot description (robots.actuation); friction follows the sign convention of
robots.actuation: [c⁺, c⁻, v⁺, v⁻] with regressor [1⁺, −1⁻, q̇⁺, q̇⁻], all ≥ 0.
The unknowns are reduced to their identifiable combinations (pivoted QR over random states: e.g. a motor whose
velocity equals a joint's shares its friction columns, and the Coulomb pairs of the axes acting on one row share
a constant). Rows are weighted explicitly — per N, per N·m of moment, per N·m of joint torque — or, with
weights "auto", by 1/σ of each row's ordinary-LS residuals. Velocities come from zero-phase differentiation;
regressor columns and measurements pass the same low-pass before decimation. Estimators: uncentred PLS (ν by
CV), OLS, ridge, and IV against the PWM noise in the joint rows' regressor. Standard errors from the filtered
noise's banded spectrum (identify.residual_covariance, levels from the LS residuals; the IV's as a sandwich with the
same Σ): residual Newey–West overclaimed (Monte-Carlo, tests/test_ft_pwm_standard_errors.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import casadi as ca
import numpy as np
from scipy.ndimage import maximum_filter1d, minimum_filter1d

from formats.errors import DataError, IdentifiabilityError
from formats.ft_pwm_recording import FtPwmRecording
from identify.differentiation import DIFFERENTIATIONS, lowpass, states
from identify.dynamic import top_pairs
from identify.pls import PLSRegression, compress, cv_ols, cv_ridge, fold_factors, ridge
from identify.recording_checks import limits_problem
from identify.residual_covariance import SPECTRUM_SPLITS, banded_covariance
from robots import dynamics as dyn
from robots.actuation import FtPwmTruth, Transmission, friction_rows, motor_velocities, transmissions
from robots.base_params import DynamicBase, RegressorSpec, random_states
from robots.com_base import numeric_base, pivoted_qr
from robots.conditioning import kappa, normalised_columns
from robots.memo import per_model
from robots.tree import ParameterSet, RobotModel

WRENCH_ROWS = ("fx", "fy", "fz", "mx", "my", "mz")
MASS_RATIO = (0.5, 2.0)  # fitted over described mass outside this: the wrench is likely in the wrong unit
STILL_RAD = 1e-3  # a joint whose angle spans less than this in a recording does not move
UNITS = {"m": "kg", "mc": "kg·m", "I": "kg·m²", "w_O:f": "N", "w_O:m": "N·m", "c": "N·m", "v": "N·m·s/rad",
         "k": "N·m/PWM unit"}  # fmt: skip
FRICTION = ("c+", "c-", "v+", "v-")
METHODS = ("pls", "ols", "ridge", "iv")
# what `kappa` and `kappa_scaled` are the condition numbers of, as `identify dynamic` gives its two
KAPPA_OF = ("the row-weighted regressor (rows × their weights, 1/σ of each row's residuals with --weights auto): "
            "raw (changes with the parameters' units) and column-scaled (unit-norm columns: the parameters' units "
            "do not count); both change with the row weights")  # fmt: skip


@dataclass(frozen=True)
class RowWeights:
    """Explicit row weights: per N (force rows), per N·m (moment rows), per N·m (joint-torque/PWM rows)."""

    force: float = 1.0
    moment: float = 1.0
    joint: float = 1.0

    def __post_init__(self) -> None:
        for k in ("force", "moment", "joint"):
            v = getattr(self, k)
            if not (np.isfinite(v) and v > 0):
                raise DataError(f"row weight {k} must be a positive finite number, got {v}")


@dataclass(frozen=True)
class Layout:
    """Rows per sample (joint names, then fx … mz) and the unknowns Φ (standard inertial, offset, friction,
    gains) of the stacked system."""

    rows: tuple[str, ...]
    names: tuple[str, ...]
    n_inertial: int
    groups: tuple[Transmission, ...]

    @property
    def joint_rows(self) -> int:
        return len(self.rows) - 6


def unit_of(name: str) -> str:
    """The unit of a standard unknown (e.g. 'mcx@hand' → kg·m); a base combination has its leading term's."""
    head = name.split("@")[0]
    for prefix in ("w_O:f", "w_O:m", "mc", "m", "I", "c", "v", "k"):
        if head.startswith(prefix):
            return UNITS[prefix]
    return "?"


def check_angles(model: RobotModel, rec: FtPwmRecording, source: str) -> None:
    """Refuse angles beyond the description's limits by more than the slack every recording is allowed
    (`recording_checks.limits_problem`): logged in degrees, or another robot's; the recording's joints must be the
    model's, in its order."""
    if list(rec.joint_names) != list(model.joint_names):
        raise DataError(f"{source}: joints {', '.join(rec.joint_names)} are not {model.name!r}'s "
                        f"({', '.join(model.joint_names)})")  # fmt: skip
    # the format takes radians only: its hint is to convert them, not to declare degrees
    if problem := limits_problem(model, rec.q, "q:", degrees_declared=True):
        raise DataError(f"{source}: {problem}: angles logged in degrees? q columns must be in rad")


def layout(model: RobotModel, groups: list[Transmission]) -> Layout:
    rows = tuple(model.joint_names[j] for g in groups for j in g.joints) + WRENCH_ROWS
    names = list(dyn.standard_names(model))
    n_in = len(names)
    names += [f"w_O:{r}" for r in WRENCH_ROWS]
    for g in groups:
        names += [f"{f}@{model.joint_names[j]}" for j in g.joints for f in FRICTION]
        if g.coupled:
            names += [f"{f}@{m}" for m in g.motors for f in FRICTION]
    names += [f"k@{m}" for g in groups for m in g.motors]
    return Layout(rows, tuple(names), n_in, tuple(groups))


def stacked_system(
    model: RobotModel, lay: Layout, sensor: str, q, qd, qdd, pwm: np.ndarray, wrench: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A (K, rows, unknowns) and b (K, rows) of eq. (11) for states, PWMs (K, motors) and F/T wrenches."""
    K = len(q)
    A = np.zeros((K, len(lay.rows), len(lay.names)))
    b = np.zeros((K, len(lay.rows)))
    nj, n_in = lay.joint_rows, lay.n_inertial
    joints = [j for g in lay.groups for j in g.joints]
    A[:, :nj, :n_in] = dyn.torque_regressor(model, q, qd, qdd)[:, joints, :]
    A[:, nj:, :n_in] = dyn.subtree_wrench_regressor(model, q, qd, qdd, sensor)
    A[:, nj:, n_in : n_in + 6] = np.eye(6)
    if wrench is not None:
        b[:, nj:] = wrench
    col, row = n_in + 6, 0
    for g in lay.groups:
        n = len(g.joints)
        Fj = friction_rows(qd[:, list(g.joints)])  # (K, n, 4)
        for i in range(n):
            A[:, row + i, col : col + 4] = Fj[:, i]
            col += 4
        if g.coupled:
            Fm = friction_rows(motor_velocities([g], qd))
            for k in range(n):
                A[:, row : row + n, col : col + 4] = g.transpose[None, :, k, None] * Fm[:, None, k, :]
                col += 4
        row += n
    A[:, :, col:] = pwm_columns(lay, pwm)
    return A, b


def pwm_columns(lay: Layout, pwm: np.ndarray) -> np.ndarray:
    """(K, rows, motors): the gain columns −Tᵀ diag(v) of eq. (11) for PWMs v (K, motors), zero in the F/T rows
    (linear in v: a PWM's noise enters the regressor through them)."""
    out = np.zeros((len(pwm), len(lay.rows), pwm.shape[1]))
    row = 0
    for g in lay.groups:
        n = len(g.joints)
        out[:, row : row + n, row : row + n] = -g.transpose[None] * pwm[:, None, row : row + n]
        row += n
    return out


@per_model
def stacked_base(model: RobotModel, sensor: str, groups: tuple[Transmission, ...]) -> DynamicBase:
    """Identifiable combinations of the stacked unknowns, over random states and PWMs (structural)."""
    lay = layout(model, list(groups))
    rng = np.random.default_rng(0)
    n = max(60, 3 * len(lay.names) // len(lay.rows))
    q, qd, qdd = random_states(model, n, rng)
    pwm = rng.standard_normal((n, sum(len(g.motors) for g in groups)))
    A, _ = stacked_system(model, lay, sensor, q, qd, qdd, pwm)
    Y = A.reshape(-1, len(lay.names))
    norm = np.linalg.norm(Y, axis=0)
    vanish = [i for i in range(len(norm)) if norm[i] <= 1e-10 * norm.max()]
    live = [i for i in range(len(norm)) if i not in vanish]
    nb = numeric_base(Y[:, live], [lay.names[i] for i in live])
    ind = [live[i] for i in nb.independent]
    dep = [live[i] for i in nb.dependent] + vanish
    beta = np.hstack([nb.beta, np.zeros((nb.rank, len(vanish)))])
    order = np.argsort(ind)
    spec = RegressorSpec("ft", model.root, sensor)
    return DynamicBase(spec, list(lay.names), [ind[i] for i in order], beta[order], dep, vanish)


def true_unknowns(
    model: RobotModel, lay: Layout, params: str | ParameterSet, extra: FtPwmTruth
) -> np.ndarray:
    """Φ of a known robot (standard inertial parameters, offset, friction, gains) in layout order."""
    parts = [dyn.standard_parameters(model, params), np.asarray(extra.ft_offset, dtype=float)]
    for fj, fm in zip(extra.joint_friction, extra.motor_friction, strict=True):
        parts.append(np.asarray(fj).reshape(-1))
        if fm is not None:
            parts.append(np.asarray(fm).reshape(-1))
    parts += [np.asarray(k).reshape(-1) for k in extra.pwm_gain]
    phi = np.concatenate(parts)
    if len(phi) != len(lay.names):
        raise DataError(f"the true parameters have {len(phi)} entries, the layout {len(lay.names)}")
    return phi


@dataclass
class MethodResult:
    """One estimator on the weighted system: coefficients, cross-validated PRESS and its tuning value."""

    name: str
    values: np.ndarray
    press: float
    tuning: float | None = None  # ν for PLS, λ for ridge


@dataclass
class FtPwmFit:
    """Identifiable parameters with standard errors (weighted LS covariance), the PLS ν curve, comparisons."""

    symbols: list[str]
    formulas: list[str]
    values: np.ndarray
    se: np.ndarray
    method: str
    n_components: int | None
    rank: int
    press: np.ndarray  # PLS PRESS(ν), ν = 1 … (empty when ν was given)
    q2: np.ndarray
    comparison: list[MethodResult]
    row_sigma: dict[str, float]  # residual σ per row (N, N·m)
    row_weights: dict[str, float]
    kappa: float  # raw κ of the row-weighted regressor: changes with the units of its columns and rows
    samples: int
    vanishing: list[str]
    top_correlations: list[tuple[str, str, float]] = field(default_factory=list)
    units: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    contact_samples: int = 0  # samples marked contact=1, left out of the fit
    kappa_scaled: float = float("nan")  # κ of the row-weighted regressor with unit-norm columns

    @property
    def rel_se_pct(self) -> np.ndarray:
        """100 · SE / |estimate| per parameter (inf where the estimate is 0), as `identify dynamic` tables it."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return 100.0 * self.se / np.abs(self.values)

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            # SE: the IV sandwich for 'iv'; otherwise least squares' (exact for OLS and PLS at full ν)
            "se_of": "iv (banded spectrum)" if self.method == "iv" else "ols (banded spectrum)",
            "n_components": self.n_components,
            "rank": self.rank,
            "parameters": [
                {
                    "symbol": s,
                    "formula": f,
                    "value": float(v),
                    "se": float(e),
                    "unit": u,
                    "rel_se_pct": float(r) if np.isfinite(r) else None,
                }
                for s, f, v, e, u, r in zip(
                    self.symbols,
                    self.formulas,
                    self.values,
                    self.se,
                    self.units,
                    self.rel_se_pct,
                    strict=True,
                )  # fmt: skip
            ],
            "press": self.press.tolist(),
            "q2": self.q2.tolist(),
            "comparison": [
                {"method": m.name, "press": None if np.isnan(m.press) else m.press, "tuning": m.tuning}
                for m in self.comparison
            ],
            "row_sigma": self.row_sigma,
            "row_weights": self.row_weights,
            "kappa": self.kappa,
            "kappa_scaled": self.kappa_scaled,
            "kappa_of": KAPPA_OF,
            "samples": self.samples,
            "vanishing": self.vanishing,
            "top_correlations": [list(c) for c in self.top_correlations],
            "contact_samples_dropped": self.contact_samples,
            "warnings": self.warnings,
        }


class FtPwmEstimator:
    """Configure, `fit(recording)`; results in `fit_`; `predict_wrench(recording)` for validation and T².

    method: 'pls' (ν from `n_components`, or by `cv`-fold cross-validation), 'ols', 'ridge' (λ by CV) or 'iv'
    (instrumental variables against the noisy PWM, `iv_iterations` passes from OLS); `compare` also runs the
    others for the comparison. weights: RowWeights or 'auto' (1/σ per row from an ordinary-LS pass).
    Standard errors model the filtered (so correlated) noise's spectrum flat in bands. differentiation: 'butterworth'
    (zero-phase low-pass at `cutoff_hz`, then central differences) or 'adaptive' (the paper's non-causal
    adaptive windowing, identify.adaptive_window); either way the rows then pass the same low-pass."""

    def __init__(
        self,
        model: RobotModel,
        sensor: str,
        groups: list[Transmission] | None = None,
        method: str = "pls",
        n_components: int | None = None,
        cv: int = 5,
        weights: RowWeights | str = "auto",
        cutoff_hz: float = 5.0,
        decimate: int | None = None,
        reversal_velocity: float = 0.05,
        iv_iterations: int = 3,
        compare: bool = True,
        differentiation: str = "butterworth",
    ):
        if method not in METHODS:
            raise DataError(f"method must be one of {METHODS}, got {method!r}")
        if not (isinstance(weights, RowWeights) or weights == "auto"):
            raise DataError("weights must be RowWeights(...) or 'auto'")
        if cv < 2:
            raise DataError(f"cross-validation needs at least 2 folds, got {cv}")
        model.site(sensor)
        self.model, self.sensor = model, sensor
        self.groups = list(groups) if groups is not None else transmissions(model)
        self.method, self.n_components, self.cv, self.weights = method, n_components, cv, weights
        self.cutoff_hz, self.decimate, self.reversal_velocity = cutoff_hz, decimate, reversal_velocity
        if iv_iterations < 1:
            raise DataError(f"iv_iterations must be ≥ 1, got {iv_iterations}")
        self.iv_iterations, self.compare = iv_iterations, compare
        if differentiation not in DIFFERENTIATIONS:
            raise DataError(f"differentiation must be one of {DIFFERENTIATIONS}, got {differentiation!r}")
        self.differentiation = differentiation
        self.pls_: PLSRegression | None = None
        self.layout_ = layout(model, self.groups)
        self.base_ = stacked_base(model, sensor, tuple(self.groups))

    def _check(self, rec: FtPwmRecording) -> None:
        if list(rec.joint_names) != list(self.model.joint_names):
            raise DataError(f"recording joints {rec.joint_names} do not match {self.model.name!r}")
        motors = [m for g in self.groups for m in g.motors]
        if list(rec.motor_names) != motors:
            raise DataError(f"recording motors {rec.motor_names} do not match the description's {motors}")
        if rec.sensor != self.sensor:
            raise DataError(f"recording sensor {rec.sensor!r} is not {self.sensor!r}")
        check_angles(self.model, rec, "recording")

    def still_joints(self, rec: FtPwmRecording) -> list[str]:
        """Joints whose angle spans less than STILL_RAD in the recording: their parameters are not excited."""
        return [n for j, n in enumerate(rec.joint_names) if np.ptp(rec.q[:, j]) < STILL_RAD]

    def _contact_free(self, rec: FtPwmRecording, sl: np.ndarray) -> np.ndarray:
        """Mask of the decimated samples `sl` at least one filter window away from a sample marked contact=1
        (an external force the model has no term for)."""
        if rec.contact is None:
            return np.ones(len(sl), dtype=bool)
        window = int(np.ceil(rec.rate_hz / self.cutoff_hz))
        near = maximum_filter1d(rec.contact.astype(np.uint8), 2 * window + 1) > 0
        return ~near[sl]

    def _states(self, rec: FtPwmRecording):
        self.check_length(rec)
        q, qd, qdd = states(rec.t, rec.q, self.differentiation, self.cutoff_hz)
        return q, qd, qdd, self._edge(rec.rate_hz)

    def min_samples(self, rate_hz: float) -> int:
        """The fewest samples a recording at `rate_hz` may have: the filter's transients dropped at both ends
        (`_edge`) and ten samples left to fit."""
        return 2 * self._edge(rate_hz) + 11

    def check_length(self, rec: FtPwmRecording, source: str | None = None) -> None:
        """Refuse (DataError, naming `source` when given) a recording shorter than `min_samples`."""
        need = self.min_samples(rec.rate_hz)
        if len(rec.t) < need:
            where = f"{source}: " if source else ""
            raise DataError(
                f"{where}recording too short: {len(rec.t)} samples ({len(rec.t) / rec.rate_hz:.2f} s) at "
                f"{rec.rate_hz:.0f} Hz; the fit needs at least {need} ({need / rec.rate_hz:.2f} s: the low-pass "
                f"filter's transients, 5/f_c at cut-off {self.cutoff_hz:g} Hz, dropped at both ends)"
            )

    def _edge(self, rate_hz: float) -> int:
        """Samples dropped at each end: the filter's transients (5/f_c)."""
        return max(1, int(np.ceil(5.0 / self.cutoff_hz * rate_hz)))

    def _step(self, rate_hz: float) -> int:
        return self.decimate or max(1, int(rate_hz / (4 * self.cutoff_hz)))

    def filtered_rows(self, signals: np.ndarray, rate_hz: float) -> np.ndarray:
        """Measured signals (K, …) as `system` uses them: zero-phase low-passed, ends dropped, decimated."""
        edge = self._edge(rate_hz)
        return lowpass(signals, rate_hz, self.cutoff_hz)[edge : len(signals) - edge : self._step(rate_hz)]

    def system(self, rec: FtPwmRecording, drop_reversals: bool = True):
        """Rows (unweighted) at the decimated samples: A (rows, base params), b, row kind index, sample index."""
        self._check(rec)
        q, qd, qdd, edge = self._states(rec)
        sl = np.arange(edge, len(q) - edge, self._step(rec.rate_hz))
        lay, ind = self.layout_, self.base_.independent
        Kall, R = len(q), len(lay.rows)
        A = np.empty((Kall, R, len(ind)))
        b = np.empty((Kall, R))
        for s in range(0, Kall, chunk := 4000):  # regressor at every sample, in chunks
            c = slice(s, min(s + chunk, Kall))
            Ac, b[c] = stacked_system(
                self.model, lay, self.sensor, q[c], qd[c], qdd[c], rec.pwm[c], rec.wrench[c]
            )
            A[c] = Ac[..., ind]
        # parallel filtering: regressor columns and measurements through the same zero-phase filter, so that
        # filt(b) = filt(A) Φ holds exactly where the model does (Coulomb steps, q̇² terms are not linear in q)
        for r in range(R):
            A[:, r] = lowpass(A[:, r], rec.rate_hz, self.cutoff_hz)
        A, b = A[sl], self.filtered_rows(b, rec.rate_hz)
        K = len(sl)
        keep = np.ones((K, R), dtype=bool)
        if drop_reversals:  # joint rows near any of the group's joint or motor velocity reversals
            window = int(np.ceil(rec.rate_hz / self.cutoff_hz))
            row = 0
            for g in self.groups:
                v = np.hstack([qd[:, list(g.joints)], motor_velocities([g], qd)])
                slow = (
                    minimum_filter1d(np.abs(v), 2 * window + 1, axis=0).min(axis=1) < self.reversal_velocity
                )
                keep[:, row : row + len(g.joints)] = ~slow[sl, None]
                row += len(g.joints)
        free = self._contact_free(rec, sl)
        self.contact_dropped_ = int(np.sum(~free))
        keep &= free[:, None]
        if not keep.any():
            raise DataError("every sample of the recording is marked contact=1 (or near one): nothing to fit")
        kind = np.broadcast_to(np.arange(R), (K, R))
        sample = np.broadcast_to(np.arange(K)[:, None], (K, R))
        return A[keep], b[keep], kind[keep], sample[keep]

    def _row_weights(self, A, b, kind) -> np.ndarray:
        R = len(self.layout_.rows)
        if isinstance(self.weights, RowWeights):
            w = np.array(
                [self.weights.joint] * (R - 6) + [self.weights.force] * 3 + [self.weights.moment] * 3
            )
            return w
        x = np.linalg.lstsq(*compress(A, b), rcond=None)[0]
        r = b - A @ x
        return 1.0 / np.maximum([r[kind == k].std() for k in range(R)], 1e-12)

    def _gain_columns(self) -> list[list[int]]:
        """Base-column index of every motor's PWM gain, per group."""
        pos = {i_std: a for a, i_std in enumerate(self.base_.independent)}
        out = []
        for g in self.groups:
            cols = []
            for m in g.motors:
                i_std = self.layout_.names.index(f"k@{m}")
                if i_std not in pos:
                    raise IdentifiabilityError(f"the PWM gain of {m} is not identifiable on its own")
                cols.append(pos[i_std])
            out.append(cols)
        return out

    def instruments(self, A: np.ndarray, kind: np.ndarray, x: np.ndarray) -> np.ndarray:
        """A with each PWM column replaced by the PWM the model x predicts (v̂ = diag(k)⁻¹ T⁻ᵀ (Y φ + friction)):
        noise-free instruments for the instrumental-variable estimate (IDIM-IV). A noisy PWM sits in the
        regressor of the homogeneous joint rows; least squares then shrinks the gains and the scale of every
        parameter the F/T rows do not pin (errors in variables), the IV estimate does not."""
        Z = A.copy()
        row = 0
        for g, cols in zip(self.groups, self._gain_columns(), strict=True):
            n = len(g.joints)
            idx = np.flatnonzero((kind >= row) & (kind < row + n)).reshape(
                -1, n
            )  # rows of one sample together
            rest = np.ones(A.shape[1], dtype=bool)
            rest[cols] = False
            u = A[idx][..., rest] @ x[rest]  # (samples, n): Y φ + friction = Tᵀ diag(k) v
            kv = g.motor_torque(u)  # Tᵀ (k v) = u
            v = kv / x[cols]
            for k, c in enumerate(cols):
                Z[idx, c] = -g.transpose[None, :, k] * v[:, k, None]
            row += n
        return Z

    def fit(self, rec: FtPwmRecording) -> FtPwmEstimator:
        """Build the weighted stacked system, estimate by the configured method, compare with the others.
        Samples marked contact=1 (and a filter window around them) are left out; `fit_.warnings` says so."""
        system = self.system(rec)
        try:
            self.fit_system(*system, rec.rate_hz)
        except IdentifiabilityError as exc:
            still = self.still_joints(rec)
            if not still:
                raise
            moves = f"{', '.join(still)} {'does' if len(still) == 1 else 'do'} not move (range < {STILL_RAD:g} rad)"
            raise IdentifiabilityError(f"{exc}; {moves}") from None
        fit = self.fit_
        fit.contact_samples = self.contact_dropped_
        if fit.contact_samples:
            fit.warnings.append(
                f"{fit.contact_samples} sample(s) marked contact=1 (or within a filter window of one) left out "
                "of the fit: an external force is not in the model"
            )
        fit.warnings += self._unit_warnings()
        return self

    def _mass_index(self) -> int | None:
        """The base parameter that is a sum of link masses only (the mass beyond the F/T sensor), if any."""
        K = self.base_.combination_matrix()
        is_mass = np.array([n.startswith("m@") for n in self.layout_.names])
        for a in range(self.base_.rank):
            nz = np.abs(K[a]) > 1e-9
            if nz.any() and not np.any(nz & ~is_mass):
                return a
        return None

    def described_values(self) -> np.ndarray:
        """The base values of the description's inertial parameters (others zero): what the fit is compared to."""
        params = "urdf" if "urdf" in self.model.params else next(iter(self.model.params))
        phi = np.zeros(len(self.layout_.names))
        phi[: self.layout_.n_inertial] = dyn.standard_parameters(self.model, params)
        return self.base_.combination_matrix() @ phi

    def _unit_warnings(self) -> list[str]:
        """Warnings when the fitted mass beyond the sensor, or the size of its first moments (kg·m), is far from
        the description's: a wrench logged in kgf or N·mm (or another robot) fits fine but scaled."""
        fitted, described, out = self.fit_.values, self.described_values(), []
        a = self._mass_index()
        if a is not None and described[a] > 0:
            ratio = float(fitted[a] / described[a])
            if not MASS_RATIO[0] <= ratio <= MASS_RATIO[1]:
                hint = " Forces in kgf? fx..fz must be in N." if 0.05 < ratio < 0.2 else ""
                out.append(
                    f"the fitted mass beyond the sensor {self.fit_.symbols[a]} = {fitted[a]:.4g} kg is "
                    f"{ratio:.3g}× the description's {described[a]:.4g} kg: check the wrench units and the robot.{hint}"
                )
        first = np.array([u == UNITS["mc"] for u in self.fit_.units])
        if first.any() and (size := np.linalg.norm(described[first])) > 0:
            ratio = float(np.linalg.norm(fitted[first]) / size)
            if not MASS_RATIO[0] <= ratio <= MASS_RATIO[1]:
                hint = " Moments in N·mm? mx..mz must be in N·m." if 200 < ratio < 5000 else ""
                out.append(
                    f"the fitted first moments of mass (kg·m) are {ratio:.3g}× the description's in size: check "
                    f"the wrench units and the robot.{hint}"
                )
        return out

    def fit_system(
        self, A: np.ndarray, b: np.ndarray, kind: np.ndarray, sample: np.ndarray, rate_hz: float
    ) -> FtPwmEstimator:
        """`fit` on the rows `system` made of a recording at `rate_hz` (a Monte-Carlo reuses one regressor)."""
        db = self.base_
        syms = [f"ϑ{i + 1}" if i_std < self.layout_.n_inertial else self.layout_.names[i_std]
                for i, i_std in enumerate(db.independent)]  # fmt: skip
        rank = np.linalg.matrix_rank(compress(A, b)[0])
        if rank < A.shape[1]:
            _, piv = pivoted_qr(A)
            missing = [
                syms[i] if syms[i] == db.formula(i) else f"{syms[i]} = {db.formula(i)}" for i in piv[rank:]
            ]
            raise IdentifiabilityError(
                f"the recording does not excite {A.shape[1] - rank} parameter(s): {', '.join(missing)}"
            )
        w = self._row_weights(A, b, kind)
        Aw, bw = A * w[kind][:, None], b * w[kind]
        Rw, Qbw = compress(Aw, bw)
        x_ls = np.linalg.lstsq(Rw, Qbw, rcond=None)[0]
        gains = [c for cols in self._gain_columns() for c in cols]
        bad = [f"{syms[c]} = {x_ls[c]:.3g}" for c in gains if not x_ls[c] > 0]
        if bad and self.method == "iv":
            raise DataError(
                f"PWM gain(s) {', '.join(bad)} estimated ≤ 0: check the PWM columns' sign and motors"
            )
        warnings = []
        if bad:
            warnings.append(
                f"PWM gain(s) {', '.join(bad)} N·m/PWM unit estimated ≤ 0: is the PWM logged with the opposite "
                "sign (a positive PWM must drive its motor's positive direction), or the motors mislabelled?"
            )
        x_iv = None
        if not bad and (self.method == "iv" or self.compare):
            x_iv = x_ls
            for _ in range(self.iv_iterations):
                Zw = self.instruments(A, kind, x_iv) * w[kind][:, None]
                x_iv = np.linalg.solve(Zw.T @ Aw, Zw.T @ bw)
        folds = fold_factors(Aw, bw, self.cv, sample)  # one factorisation per block for every method's CV
        comparison = [MethodResult("ols", x_ls, cv_ols(Aw, bw, factors=folds), None)]
        if self.method == "pls" or self.compare:
            pls = PLSRegression(self.n_components, self.cv).fit(Aw, bw, sample, folds)
            self.pls_ = pls
            press = pls.cv_.press[pls.n_components_ - 1] if pls.cv_ is not None else float("nan")
            comparison.insert(0, MethodResult("pls", pls.coef_, float(press), float(pls.n_components_)))
        if self.method == "ridge" or self.compare:
            s = np.linalg.svd(Rw, compute_uv=False)
            lams = s[0] ** 2 * np.logspace(-14, -1, 27)
            rpress, lam = cv_ridge(Aw, bw, lams, factors=folds)
            comparison.append(MethodResult("ridge", ridge(Rw, Qbw, lam), float(rpress.min()), lam))
        if x_iv is not None:  # no CV PRESS: the instruments come from the whole record
            comparison.append(MethodResult("iv", x_iv, float("nan"), float(self.iv_iterations)))
        chosen = {m.name: m for m in comparison}[self.method]
        # the IV sandwich for 'iv', else LS's (exact for OLS and PLS at full ν; PLS at smaller ν is biased to zero);
        # the noise's banded spectrum from the LS residuals either way
        dt = self._step(rate_hz) / rate_hz
        cov = banded_covariance(Aw, bw - Aw @ x_ls, sample, kind, dt, self.cutoff_hz, rate_hz, SPECTRUM_SPLITS,
                                instruments=Zw if self.method == "iv" else None)  # fmt: skip
        se = np.sqrt(np.diag(cov))
        top = top_pairs(cov / np.outer(se, se), syms)
        raw = b - A @ chosen.values
        rows = self.layout_.rows
        self.fit_ = FtPwmFit(
            symbols=syms,
            formulas=[db.formula(a) for a in range(db.rank)],
            values=chosen.values,
            se=se,
            method=self.method,
            n_components=self.pls_.n_components_ if self.method == "pls" else None,
            rank=int(rank),
            press=self.pls_.cv_.press if self.method == "pls" and self.pls_.cv_ is not None else np.zeros(0),
            q2=self.pls_.cv_.q2 if self.method == "pls" and self.pls_.cv_ is not None else np.zeros(0),
            comparison=comparison,
            row_sigma={r: float(raw[kind == k].std()) for k, r in enumerate(rows)},
            row_weights={r: float(w[k]) for k, r in enumerate(rows)},
            kappa=kappa(Rw),
            kappa_scaled=kappa(normalised_columns(Rw)[0]),
            samples=int(sample.max() + 1),
            vanishing=[db.names[i] for i in db.vanishing],
            top_correlations=top,
            units=[unit_of(db.names[i]) for i in db.independent],
            warnings=warnings,
        )
        self.cov_ = cov
        return self

    def true_values(self, params: str | ParameterSet, extra: FtPwmTruth) -> np.ndarray:
        """The identifiable combinations of a known robot (for synthetic tests and CAD comparisons)."""
        return self.base_.values(true_unknowns(self.model, self.layout_, params, extra))

    def _wrench_parameters(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(φ with the base values in the independent slots, w_O): dependent columns are combinations of the
        independent ones over all rows, F/T rows included, so Y_FT φ reproduces the base prediction."""
        n_in = self.layout_.n_inertial
        ind = np.asarray(self.base_.independent)
        inert, off = ind < n_in, (ind >= n_in) & (ind < n_in + 6)
        phi = np.zeros(n_in)
        phi[ind[inert]] = x[inert]
        offset = np.zeros(6)
        offset[ind[off] - n_in] = x[off]
        return phi, offset

    def wrench(
        self,
        q: np.ndarray,
        qd: np.ndarray,
        qdd: np.ndarray,
        values: np.ndarray | None = None,
        chunk: int = 4000,
    ) -> np.ndarray:
        """The F/T wrench (K, 6) the fitted (or given) parameters predict at states (K, n): Y_FT φ + w_O.
        `values` (M, p) gives M predictions (M, K, 6) from one regressor evaluation."""
        X = self.fit_.values if values is None else np.asarray(values, dtype=float)
        many = X.ndim == 2
        parts = [self._wrench_parameters(x) for x in np.atleast_2d(X)]
        phis = np.array([p[0] for p in parts])
        offsets = np.array([p[1] for p in parts])
        q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
        pred = np.empty((len(phis), len(q), 6))
        for s in range(0, len(q), chunk):
            c = slice(s, min(s + chunk, len(q)))
            Y = dyn.subtree_wrench_regressor(self.model, q[c], qd[c], qdd[c], self.sensor)
            pred[:, c] = np.einsum("kri,mi->mkr", Y, phis)
        pred += offsets[:, None, :]
        return pred if many else pred[0]

    def wrench_function(self, values: np.ndarray | None = None) -> ca.Function:
        """CasADi Function (q, qd, qdd) → predicted wrench (6,): microseconds per sample, for the online T²
        detector (identify.t2.StreamingT2) fed by the robot's state estimate."""
        phi, offset = self._wrench_parameters(self.fit_.values if values is None else values)
        W = dyn.subtree_wrench_regressor_function(self.model, self.sensor)
        q, qd, qdd = (ca.SX.sym(n, self.model.nq) for n in ("q", "qd", "qdd"))
        out = W(q, qd, qdd) @ ca.DM(phi) + ca.DM(offset)
        return ca.Function("ft_wrench", [q, qd, qdd], [out], ["q", "qd", "qdd"], ["wrench"])

    def predict_wrench(
        self, rec: FtPwmRecording, values: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, slice]:
        """(predicted, measured) F/T wrench at every sample (raw measurement, states from the zero-phase
        differentiation), trimmed of the filter's edges; and the slice of samples kept. `values` (M, p): M
        predictions (M, K, 6)."""
        self._check(rec)
        q, qd, qdd, edge = self._states(rec)
        keep = slice(edge, len(q) - edge)
        return self.wrench(q[keep], qd[keep], qdd[keep], values), rec.wrench[keep], keep


def cad_values(est: FtPwmEstimator, params: str | ParameterSet = "urdf") -> np.ndarray:
    """Base values with a parameter set's inertial part (e.g. the CAD model) and the estimate's other entries:
    the F/T prediction of the CAD model, offset taken from the fit (CAD cannot know it)."""
    ind = np.asarray(est.base_.independent)
    K = est.base_.combination_matrix()
    n_in = est.layout_.n_inertial
    phi = np.zeros(len(est.layout_.names))
    phi[:n_in] = dyn.standard_parameters(est.model, params)
    cad = K @ phi
    x = est.fit_.values.copy()
    inert = ind < n_in
    x[inert] = cad[inert]
    return x


def table_ii(pred: np.ndarray, meas: np.ndarray) -> dict:
    """Table II's quantities: mean and std of the force-error norm (N) and of the moment-error norm (N·m),
    plus per-axis mean/std of the error."""
    e = meas - pred
    fn, mn = np.linalg.norm(e[:, :3], axis=1), np.linalg.norm(e[:, 3:], axis=1)
    return {
        "force_error_n": {"mean": float(fn.mean()), "std": float(fn.std())},
        "moment_error_nm": {"mean": float(mn.mean()), "std": float(mn.std())},
        "per_axis": {
            r: {"mean": float(e[:, k].mean()), "std": float(e[:, k].std())} for k, r in enumerate(WRENCH_ROWS)
        },
    }
