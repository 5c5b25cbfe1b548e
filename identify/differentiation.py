"""Zero-phase differentiation of sampled joint positions: Butterworth low-pass run forwards and backwards
(`sosfiltfilt`), then central differences. Measured efforts go through the same filter so that the regressor and
the efforts see the same phase and attenuation (parallel filtering)."""

from __future__ import annotations

import numpy as np
from scipy.signal import butter, sosfiltfilt

from formats.errors import DataError

PAD_PERIODS = (
    2.0  # cut-off periods of odd extension at each end: the filter's start-up transient dies in them
)
DIFFERENTIATIONS = ("butterworth", "adaptive")  # low-pass then differences, or `identify.adaptive_window`


def lowpass(x: np.ndarray, rate_hz: float, cutoff_hz: float, order: int = 4) -> np.ndarray:
    """Zero-phase Butterworth low-pass of the columns of x (samples along axis 0). The ends are extended oddly
    by PAD_PERIODS cut-off periods (scipy's default, a few samples, left a 2 % q̈ error 2/f_c from a recording's
    end cut mid-motion; this, ≤ 0.15 %)."""
    if not (0 < cutoff_hz < rate_hz / 2):
        raise DataError(
            f"cut-off {cutoff_hz} Hz must lie between 0 and half the sample rate ({rate_hz / 2:.1f} Hz)"
        )
    sos = butter(order, cutoff_hz, fs=rate_hz, output="sos")
    if x.shape[0] <= 3 * 2 * len(sos):
        raise DataError(f"{x.shape[0]} samples are too few to filter")
    pad = min(x.shape[0] - 1, int(np.ceil(PAD_PERIODS * rate_hz / cutoff_hz)))
    return sosfiltfilt(sos, x, axis=0, padlen=pad)


def derivatives(
    t: np.ndarray, q: np.ndarray, cutoff_hz: float, order: int = 4
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Filtered q, q̇, q̈ from positions sampled at (nearly) uniform times t."""
    dt = np.diff(t)
    worst = int(np.argmax(np.abs(dt - dt.mean())))
    if abs(dt[worst] - dt.mean()) > 0.05 * dt.mean():
        raise DataError(
            f"time stamps are not uniform (±5 %): the step after t = {t[worst]:.6g} s is {dt[worst]:.4g} s against "
            f"a mean of {dt.mean():.4g} s; resample the recording first"
        )
    rate = 1.0 / dt.mean()
    qf = lowpass(q, rate, cutoff_hz, order)
    qd = np.gradient(qf, t, axis=0)
    qdd = np.gradient(qd, t, axis=0)
    return qf, qd, qdd


def velocity(t: np.ndarray, q: np.ndarray, method: str, cutoff_hz: float) -> np.ndarray:
    """q̇ alone by `method` (`states`' second; adaptive windowing skips the second pass q̈ would take)."""
    if method == "adaptive":
        from identify.adaptive_window import adaptive_derivative

        return adaptive_derivative(t, q)
    return derivatives(t, q, cutoff_hz)[1]


def states(
    t: np.ndarray, q: np.ndarray, method: str, cutoff_hz: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, q̇, q̈ by `method` (DIFFERENTIATIONS): low-passed at `cutoff_hz` then differenced (`derivatives`), or the
    angles as recorded with q̇, q̈ by adaptive windowing (`identify.adaptive_window`; no fixed band)."""
    if method == "adaptive":
        from identify.adaptive_window import adaptive_states

        return adaptive_states(t, q)
    return derivatives(t, q, cutoff_hz)
