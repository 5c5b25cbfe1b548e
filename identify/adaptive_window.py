"""Non-causal adaptive-window differentiation (first-order adaptive windowing, Janabi-Sharifi, Hayward & Chen
2000), the paper's way to velocities and accelerations from quantised encoders (spec icub-pls.md §2).

For every sample the window ±n grows while the chord through y[k−n] and y[k+n] stays within a band d of every
sample between (the samples are explained by a straight line up to their uncertainty); the derivative is the
slope of the widest such chord. Slow motion gets long windows (low noise), fast motion short ones (low lag),
with no fixed cut-off. The band is given or estimated (3σ, σ from the median absolute second difference).
"""

from __future__ import annotations

import numpy as np

from formats.errors import DataError


def noise_band(y: np.ndarray, k: float = 3.0) -> np.ndarray:
    """Per column: k·σ of white noise (σ from the MAD of second differences, which are √6·σ), or the
    quantum of a quantised signal (its smallest step) if larger — chord ends and samples each carry ±q/2."""
    d2 = np.diff(y, 2, axis=0)
    mad = np.median(np.abs(d2 - np.median(d2, axis=0)), axis=0) / 0.6745
    d1 = np.abs(np.diff(y, axis=0))
    quantum = np.array([np.min(c[c > 0]) if np.any(c > 0) else 0.0 for c in d1.T])
    return np.maximum(k * mad / np.sqrt(6.0), quantum)


def adaptive_derivative(
    t: np.ndarray, y: np.ndarray, band: float | np.ndarray | None = None, max_half_window: int = 25
) -> np.ndarray:
    """dy/dt (K, m) of samples y (K, m) at uniform times t by centred adaptive windowing; `band` per column
    (None: estimated), windows up to ±`max_half_window` samples (±1 at least: a central difference)."""
    y = np.asarray(y, dtype=float)
    y2 = y.reshape(len(y), -1)
    K = len(y2)
    dt = np.diff(t)
    if K < 3 or np.max(np.abs(dt - dt.mean())) > 0.05 * dt.mean():
        raise DataError("adaptive differentiation needs ≥ 3 samples at uniform times (±5 %)")
    if max_half_window < 1:
        raise DataError(f"max_half_window must be ≥ 1, got {max_half_window}")
    h = float(dt.mean())
    d = noise_band(y2) if band is None else np.broadcast_to(np.asarray(band, dtype=float), (y2.shape[1],))
    d = np.maximum(d, 1e-15)
    out = np.gradient(y2, h, axis=0)  # ±1 everywhere (one-sided at the ends)
    growing = np.ones(y2.shape, dtype=bool)
    for n in range(1, min(max_half_window, (K - 1) // 2) + 1):
        k = np.arange(n, K - n)
        lo, hi = y2[k - n], y2[k + n]
        fits = np.ones((len(k), y2.shape[1]), dtype=bool)
        for i in range(-n + 1, n):
            line = lo + (i + n) / (2 * n) * (hi - lo)
            fits &= np.abs(y2[k + i] - line) <= d
        take = growing[k] & (fits | (n == 1))  # ±1 is taken whatever the fit
        growing[k] &= fits
        growing[:n] = growing[K - n :] = False  # the ends cannot grow further
        rows = out[k]
        rows[take] = ((hi - lo) / (2 * n * h))[take]
        out[k] = rows
        if not growing.any():
            break
    return out.reshape(y.shape)


def adaptive_states(
    t: np.ndarray, q: np.ndarray, band: float | np.ndarray | None = None, max_half_window: int = 25
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, q̇, q̈: the positions as recorded, q̇ and q̈ by adaptive windowing (q̈ from q̇ with its own band)."""
    qd = adaptive_derivative(t, q, band, max_half_window)
    qdd = adaptive_derivative(t, qd, None, max_half_window)
    return np.asarray(q, dtype=float), qd, qdd
