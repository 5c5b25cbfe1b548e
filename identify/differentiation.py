"""Zero-phase differentiation of sampled joint positions: Butterworth low-pass run forwards and backwards
(`sosfiltfilt`), then central differences. Measured efforts go through the same filter so that the regressor and
the efforts see the same phase and attenuation (parallel filtering)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from scipy.signal import butter, sosfilt, sosfilt_zi, sosfiltfilt

from formats.errors import DataError

PAD_PERIODS = (
    2.0  # cut-off periods of odd extension at each end: the filter's start-up transient dies in them
)
DIFFERENTIATIONS = ("butterworth", "adaptive")  # low-pass then differences, or `identify.adaptive_window`


@functools.lru_cache(maxsize=64)
def _butterworth_design(order: int, cutoff_hz: float, rate_hz: float) -> np.ndarray:
    return butter(order, cutoff_hz, fs=rate_hz, output="sos")


def _butterworth(order: int, cutoff_hz: float, rate_hz: float) -> np.ndarray:
    """The filter's second-order sections, designed once per (order, cut-off, rate): designing them took a third of
    a short recording's filtering, and a fit filters every regressor column block with the same one. A copy:
    scipy's filters want a writable array."""
    return _butterworth_design(order, cutoff_hz, rate_hz).copy()


def lowpass(x: np.ndarray, rate_hz: float, cutoff_hz: float, order: int = 4) -> np.ndarray:
    """Zero-phase Butterworth low-pass of the columns of x (samples along axis 0). The ends are extended oddly
    by PAD_PERIODS cut-off periods (scipy's default, a few samples, left a 2 % q̈ error 2/f_c from a recording's
    end cut mid-motion; this, ≤ 0.15 %)."""
    if not (0 < cutoff_hz < rate_hz / 2):
        raise DataError(
            f"cut-off {cutoff_hz} Hz must lie between 0 and half the sample rate ({rate_hz / 2:.1f} Hz)"
        )
    sos = _butterworth(order, float(cutoff_hz), float(rate_hz))
    if x.shape[0] <= 3 * 2 * len(sos):
        raise DataError(f"{x.shape[0]} samples are too few to filter")
    pad = min(x.shape[0] - 1, int(np.ceil(PAD_PERIODS * rate_hz / cutoff_hz)))
    return sosfiltfilt(sos, x, axis=0, padlen=pad)


def lowpass_in_chunks(
    columns: Callable[[int, int], np.ndarray],
    K: int,
    rate_hz: float,
    cutoff_hz: float,
    at: np.ndarray,
    chunk: int,
    order: int = 4,
) -> np.ndarray:
    """`lowpass(X, rate_hz, cutoff_hz)[at]` for X (K, columns) given a chunk of rows at a time by `columns(a, b)`
    (rows a…b−1): scipy's `sosfiltfilt` on X's odd extension, run `chunk` rows at a time — the forward pass once to
    keep its state at each chunk's start, then back through the chunks, each filtered forward again from its
    state and then backward. The same operations in the same order: equal to `lowpass` but for the rounding of
    the columns computed apart. Memory: a few chunks, whatever K."""
    if not (0 < cutoff_hz < rate_hz / 2):  # as `lowpass` refuses
        lowpass(np.zeros((K, 1)), rate_hz, cutoff_hz)
    sos = _butterworth(order, float(cutoff_hz), float(rate_hz))  # `lowpass`'s filter and odd extension
    pad = min(K - 1, int(np.ceil(PAD_PERIODS * rate_hz / cutoff_hz)))
    if K <= 3 * 2 * len(sos) or pad < 1:
        raise DataError(f"{K} samples are too few to filter")
    first, last = columns(0, 1), columns(K - 1, K)

    def extended(a: int, b: int) -> np.ndarray:
        """Rows a…b−1 of the odd extension: 2 X₀ − X[pad − e] before X, 2 X_{K−1} − X[2K + pad − 2 − e] after."""
        parts = []
        if a < pad:  # e = a…min(b, pad) − 1 reads X[pad − e], descending
            e1 = min(b, pad)
            parts.append(2 * first - columns(pad - e1 + 1, pad - a + 1)[::-1])
        if b > pad and a < pad + K:
            parts.append(columns(max(a, pad) - pad, min(b, pad + K) - pad))
        if b > pad + K:  # e reads X[K − 2 − (e − pad − K)], descending
            e0 = max(a, pad + K)
            top, bottom = 2 * K + pad - 2 - e0, 2 * K + pad - 2 - (b - 1)
            parts.append(2 * last - columns(bottom, top + 1)[::-1])
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    N = K + 2 * pad
    starts = list(range(0, N, chunk))
    zi = sosfilt_zi(sos)[:, :, None]
    state = zi * extended(0, 1)  # sosfiltfilt's: the extension's first row
    states, y = [], None
    for a in starts:  # forward: each chunk's starting state
        states.append(state)
        y, state = sosfilt(sos, extended(a, min(a + chunk, N)), axis=0, zi=state)
    back = zi * y[-1:]
    out = np.empty((len(at), y.shape[1]))
    where = at + pad  # the rows wanted, in the extension
    for a, start in zip(reversed(starts), reversed(states), strict=True):
        b = min(a + chunk, N)
        if a != starts[-1]:
            y, _ = sosfilt(sos, extended(a, b), axis=0, zi=start)
        z, back = sosfilt(sos, y[::-1], axis=0, zi=back)
        inside = (where >= a) & (where < b)
        out[inside] = z[::-1][where[inside] - a]
    return out


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
