"""PWM-to-torque gain (spec actuation.md §2, eqs. 2.50–2.51): τ₀ + K*_pwm PWM after friction compensation.

Moving link: y = τ_j + I ω̇ + f(ω) = τ₀ + K PWM (f the torque the drive must add to overcome friction, the
convention of identify/friction.py and robots/actuation.py), fitted where the friction model holds (outside sticking
and velocity reversals). Link in a fixture (procedure B): ω ≈ 0 and the drive's static friction winds the
flex-spline up, so the torque lags the PWM by a band (hysteresis); the band is modelled as an offset
−h·sign(dPWM/dt) and samples where the torque sticks at the turning points (|dτ/dt| small while the PWM moves)
are discarded. K is in N·m per % of PWM full scale (× 100 / full scale for device units).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats.errors import DataError, IdentifiabilityError
from identify.drive_signals import Unfiltered
from identify.friction import FrictionFit, filtered_friction, gated_lowpass, select_samples
from identify.robust_se import corr_samples, fit_se, misfit_note


@dataclass
class PwmGainFit:
    """τ_j = τ₀ + K PWM [− h sign(dPWM/dt)]; K [N·m/%], τ₀ [N·m], h [N·m, half the hysteresis width]."""

    k_pwm: float
    tau0: float
    hysteresis: float | None
    se: dict[str, float]
    n_used: int
    rms: float
    method: str
    misfit: str | None = None  # note when the residuals show a systematic misfit

    def warnings(self) -> list[str]:
        """Notes on physically impossible values: a negative gain (PWM and torque of opposite sign conventions)
        or a negative hysteresis half-width (the torque leads the PWM: not static friction)."""
        notes = []
        if self.k_pwm < 0:
            notes.append(
                f"K*_pwm = {self.k_pwm:.3g} N·m/% < 0: PWM and tau have opposite signs (tau is the torque "
                "applied to the child link, positive PWM drives it positive)"
            )
        if self.misfit:
            notes.append(self.misfit)
        if self.hysteresis is not None and self.hysteresis < 0:
            notes.append(
                f"hysteresis half-width h = {self.hysteresis:.3g} N·m < 0 is impossible for static friction: "
                "the torque leads the PWM (time stamps of PWM and tau shifted?)"
            )
        return notes

    def as_dict(self) -> dict:
        return {
            "method": self.method,
            "k_pwm_Nm_per_pct": self.k_pwm,
            "tau0_Nm": self.tau0,
            "hysteresis_half_width_Nm": self.hysteresis,
            "se": self.se,
            "n_used": self.n_used,
            "rms_Nm": self.rms,
            "model_misfit": self.misfit is not None,
        }


def _ls(X: np.ndarray, y: np.ndarray, names: list[str], sample: np.ndarray, filtered=None, raw: bool = False):
    """Least squares of rows at time indices `sample`: (θ, SEs for correlated residuals, rms, misfit note or None);
    `filtered` (cut-off, rate) [Hz] of the low-pass the rows went through (identify.robust_se.fit_se); `raw` rows
    are unfiltered samples, one sample their correlation length (for the misfit test)."""
    if X.shape[0] < X.shape[1] + 2:
        raise DataError(f"only {X.shape[0]} usable samples for the PWM gain")
    XtX = X.T @ X
    cond = np.linalg.cond(XtX)
    if not np.isfinite(cond) or cond > 1e12:
        raise IdentifiabilityError(
            f"PWM gain: regressor rank deficient (cond {cond:.3g}); {', '.join(names)} not separable "
            "— does the PWM vary?"
        )
    theta = np.linalg.solve(XtX, X.T @ y)
    res = y - X @ theta
    se, _ = fit_se(X, y, theta, sample, None, filtered)
    note = misfit_note(res, sample, 1 if raw else corr_samples(filtered), "PWM gain")
    return theta, dict(zip(names, map(float, se), strict=True)), float(np.sqrt(np.mean(res**2))), note


def fit_pwm_gain(
    pwm: np.ndarray,
    omega: np.ndarray,
    omega_dot: np.ndarray,
    tau_j: np.ndarray,
    inertia: float,
    friction: FrictionFit | None,
    accel_max: float | None = 5.0,
    speed_min: float = 0.05,
    margin: int = 5,
    exclude: np.ndarray | None = None,
    filtered: tuple[float, float] | None = None,
    raw: Unfiltered | None = None,
) -> PwmGainFit:
    """Moving-link gain regression after friction compensation, y = τ_j + I ω̇ + f(ω) on rows [1, PWMᵢ];
    `filtered`: (cut-off, rate) [Hz] of the signals' low-pass, for the SEs and the misfit test; with `raw` (the
    unfiltered signals) f(ω) and the rows are filtered as τ_j, stuck samples gated out (identify.friction
    `gated_lowpass`: the friction's jump at a reversal then rings alike on both sides)."""
    arrays = [np.asarray(a, dtype=float) for a in (pwm, omega, omega_dot, tau_j)]
    if len({len(a) for a in arrays}) != 1 or not all(np.all(np.isfinite(a)) for a in arrays):
        raise DataError("PWM gain: PWM, ω, ω̇, τ_j must be finite arrays of equal length")
    pwm, omega, omega_dot, tau_j = arrays
    y = tau_j + inertia * omega_dot
    ones = np.ones(len(y))
    if friction is not None and raw is not None and filtered is not None:
        moving = np.abs(raw.omega) > speed_min  # stuck: friction is no model's, gated out before filtering
        tau_j, pwm, ones = (gated_lowpass(a, moving, filtered) for a in (raw.tau, raw.pwm, moving))
        y = tau_j + inertia * omega_dot + filtered_friction(friction, raw, filtered, moving)
    elif friction is not None:
        y = y + friction.torque(omega)  # K PWM + τ₀ = τ_j + I ω̇ + f(ω)
    keep = (
        select_samples(omega, omega_dot, accel_max, speed_min, margin, exclude)
        if friction is not None
        else np.ones(len(y), bool)
    )
    if keep.sum() < 4 and np.mean(np.abs(omega) <= speed_min) > 0.9:
        raise DataError(
            f"PWM gain: the link hardly moves (|ω| ≤ {speed_min:g} rad/s in {100 * np.mean(np.abs(omega) <= speed_min):.0f} "
            "% of the samples): a recording of a held link needs --link fixture"
        )
    X = np.column_stack([ones[keep], pwm[keep]])
    theta, se, rms, note = _ls(X, y[keep], ["tau0", "k_pwm"], np.flatnonzero(keep), filtered)
    return PwmGainFit(float(theta[1]), float(theta[0]), None, se, int(keep.sum()), rms, "moving link", note)


def check_pwm_percent(pwm: np.ndarray, source: str, least: float = 1.0) -> None:
    """DataError when the PWM never reaches `least` % of full scale: PWM is in %, and a peak below 1 % looks
    like a fraction of full scale (gain 100× too large) — too little drive for a gain anyway."""
    peak = float(np.max(np.abs(pwm))) if len(pwm) else 0.0
    if 0 < peak < least:
        raise DataError(
            f"{source}: the PWM peaks at {peak:.3g} %: PWM is in % of full scale (−100…100); a fraction "
            "(−1…1) must be multiplied by 100"
        )


def check_held(q: np.ndarray, source: str, limit: float = 0.1) -> None:
    """DataError when the joint of a fixture recording moves by more than `limit` [rad]: the fixture fit
    assumes ω ≈ 0, a moving link needs its friction compensated (`--link free`). 0.1 rad: a held link's gear
    backlash and compliance give milliradians; the free-link sweeps swing ±0.6 rad."""
    span = float(np.ptp(q)) if len(q) else 0.0
    if span > limit:
        raise DataError(
            f"{source}: q spans {span:.3g} rad, so the link moved; a fixture fit (--link fixture, the default) "
            "needs a held link: use --link free --friction FRICTION.json"
        )


def fit_pwm_gain_fixture(
    t: np.ndarray, pwm: np.ndarray, tau_j: np.ndarray, stick_ratio: float = 0.5
) -> PwmGainFit:
    """Procedure B (link held): rows [1, PWM, −sign(dPWM/dt)] over the samples where τ_j follows the PWM (raw
    samples: Newey–West SEs, the misfit test on neighbours)."""
    t, pwm, tau_j = (np.asarray(a, dtype=float) for a in (t, pwm, tau_j))
    if not (len(t) == len(pwm) == len(tau_j)) or not all(np.all(np.isfinite(a)) for a in (t, pwm, tau_j)):
        raise DataError("PWM gain: t, PWM, τ_j must be finite arrays of equal length")
    dp = np.gradient(pwm, t)
    dtau = np.gradient(tau_j, t)
    moving = np.abs(dp) > 0.2 * np.median(np.abs(dp[dp != 0])) if np.any(dp != 0) else np.zeros(len(t), bool)
    if moving.sum() < 10:
        raise IdentifiabilityError("PWM gain: the PWM hardly varies; K_pwm is not identifiable")
    # rough slope from the moving samples, then keep only those where τ_j slips along with the PWM
    k0 = np.median(dtau[moving] / dp[moving])
    follows = moving & (np.sign(dtau) == np.sign(dp * k0)) & (np.abs(dtau) > stick_ratio * np.abs(k0 * dp))
    X = np.column_stack([np.ones(follows.sum()), pwm[follows], -np.sign(dp[follows])])
    names = ["tau0", "k_pwm", "hysteresis"]
    theta, se, rms, note = _ls(X, tau_j[follows], names, np.flatnonzero(follows), raw=True)
    return PwmGainFit(
        float(theta[1]), float(theta[0]), float(theta[2]), se, int(follows.sum()), rms, "fixture", note
    )
