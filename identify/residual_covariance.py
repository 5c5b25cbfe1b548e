"""Covariance of least-squares (or instrumental-variable) estimates from zero-phase low-passed, decimated rows whose
noise is correlated in time and across the rows of one sample.

Model: each row kind's noise before the filter has a piecewise-flat (cross-)spectrum over a few frequency bands;
after the filter (power response |H|⁴ of a forward-backward Butterworth) the rows' covariance is
Σ = Σ_b P_b ⊗ T_b, P_b the bands' cross-spectral levels (row kinds × row kinds), T_b their known autocovariances
(symmetric Toeplitz in the decimated samples: applied by FFT, never formed, so long recordings stay cheap).
The levels are estimated without bias from the least-squares residuals r = M e (M the residual maker, which removes
the part of the noise the regressor absorbs — what a Newey–West estimate from residuals misses in a short
recording): E[rᵀB_a r] = Σ_c φ_c tr(B_a M B_c M) is solved for the levels φ (a MINQUE-type moment equation), each
band's P_b made positive semi-definite, then cov = H AᵀΣA H (H = (AᵀA)⁻¹, computed through a QR factorisation),
or (ZᵀA)⁻¹ ZᵀΣZ (AᵀZ)⁻¹ for the IV estimate with instruments Z.
"""

from __future__ import annotations

import numpy as np
from scipy.fft import irfft, next_fast_len, rfft
from scipy.linalg import solve_triangular
from scipy.signal import fftconvolve

from formats.errors import IdentifiabilityError

# the residuals' spectrum is estimated flat within bands split at these fractions of the cut-off (`identify dynamic`
# and the calibration fits alike). Chosen by a Monte-Carlo (tests/test_dynamic_standard_errors.py) over white to
# AR(1) noise of up to 1 s correlation time: on a 10 s TUlip design at 2 Hz, mean z² 0.87–1.17 at a 0.35 split
# (0.5: 1.03–1.59; 0.25: 0.44–0.71, SEs too large); on a 20 s design at 1.2 Hz 0.95–1.10 (0.91–1.2 for the others)
SPECTRUM_SPLITS = (0.35,)
MIN_FFT = 2**16  # frequency points of the bands' autocovariance quadrature, at least
OVERSAMPLE = 8  # ... and enough that its periodic images lie beyond OVERSAMPLE × the longest lag
TOEPLITZ_BLOCK = 64  # columns transformed at once


def band_autocovariances(
    lags: int, step: int, cutoff_hz: float, rate_hz: float, edges_hz: list[float], order: int = 4
) -> np.ndarray:
    """(bands, lags): autocovariance at 0, step, 2·step, … raw samples of unit-density white noise confined to each
    band [edges_k, edges_k+1) and passed forward and backward through an `order` Butterworth low-pass."""
    n = max(MIN_FFT, 1 << int(np.ceil(np.log2(OVERSAMPLE * step * lags))))
    f = np.arange(n // 2 + 1) * rate_hz / n
    power = 1.0 / (1.0 + (f / cutoff_hz) ** (2 * order)) ** 2
    bands = [power * ((f >= a) & (f < b)) for a, b in zip(edges_hz[:-1], edges_hz[1:], strict=True)]
    # trapezoid rule of 2∫ P(f) cos(2πfτ) df on the FFT grid
    return np.array([rate_hz * np.fft.irfft(w, n)[: step * lags : step] for w in bands])


def _per_kind(
    values: np.ndarray, sample: np.ndarray, row: np.ndarray, kinds: int, samples: int
) -> np.ndarray:
    """Rows → (kinds, samples, …) with zeros where a kind has no row at a sample (dropped rows)."""
    out = np.zeros((kinds, samples) + values.shape[1:])
    out[row, sample] = values
    return out


def _toeplitz(c: np.ndarray, X: np.ndarray) -> np.ndarray:
    """T X along the samples axis of X (kinds, samples, …), T the symmetric Toeplitz matrix of autocovariance c:
    a circulant embedding of length ≥ 2 samples − 1, multiplied by FFT."""
    n, S = X.shape[:2]
    L = next_fast_len(2 * S - 1, real=True)
    kernel = rfft(np.concatenate([c, np.zeros(L - 2 * S + 1), c[:0:-1]]))
    flat = np.moveaxis(X, 1, 0).reshape(S, -1)
    out = np.empty_like(flat)
    for i in range(0, flat.shape[1], TOEPLITZ_BLOCK):  # columns in blocks: the transforms' memory stays small
        cols = slice(i, i + TOEPLITZ_BLOCK)
        out[:, cols] = irfft(kernel[:, None] * rfft(flat[:, cols], L, axis=0), L, axis=0)[:S]
    return np.moveaxis(out.reshape((S, n) + X.shape[2:]), 0, 1)


def toeplitz_gram(c: np.ndarray, X: np.ndarray, sample: np.ndarray, row: np.ndarray) -> np.ndarray:
    """XᵀΣX for rows X (rows, p) whose noise covariance Σ is c[|sᵢ − sⱼ|] between rows of one kind (`row`) at
    decimated samples sᵢ, sⱼ (`sample`; one row per kind and sample) and zero between kinds: Σ_k X_kᵀ T X_k, T the
    symmetric Toeplitz matrix of c (at least max(sample) + 1 lags) applied by FFT — time O(p · rows · log rows),
    memory O(p · rows): Σ is never formed."""
    sample, row = np.asarray(sample, dtype=int), np.asarray(row, dtype=int)
    S = int(sample.max()) + 1
    if len(c) < S:
        raise ValueError(f"{len(c)} autocovariance lags for samples 0…{S - 1}")
    U = _per_kind(X, sample, row, int(row.max()) + 1, S)
    gram = U.reshape(-1, X.shape[1]).T @ _toeplitz(c[:S], U).reshape(-1, X.shape[1])
    return (gram + gram.T) / 2


def banded_covariance(
    Aw: np.ndarray,
    res: np.ndarray,
    sample: np.ndarray,
    row: np.ndarray,
    dt: float,
    cutoff_hz: float,
    rate_hz: float,
    splits: tuple[float, ...] = (0.5,),
    instruments: np.ndarray | None = None,
) -> np.ndarray:
    """Covariance of x from Aw x ≈ bw, `res` the least-squares residuals bw − Aw x̂_LS; each row's decimated `sample`
    index (spacing `dt` s, a whole number of raw samples) and its kind `row`. Bands split the pre-filter spectrum at
    `splits` × the cut-off. With `instruments` Zw: the covariance of the IV estimate (ZwᵀAw)⁻¹Zwᵀbw instead."""
    m, p = Aw.shape
    sample, row = np.asarray(sample, dtype=int), np.asarray(row, dtype=int)
    n, S = int(row.max()) + 1, int(sample.max()) + 1
    step = int(round(dt * rate_hz))
    if step < 1 or abs(step - dt * rate_hz) > 1e-6 * step:
        raise ValueError(f"the decimated spacing {dt} s is not a whole number of raw samples at {rate_hz} Hz")
    edges = [0.0] + [s * cutoff_hz for s in splits] + [rate_hz / 2]
    c = band_autocovariances(S, step, cutoff_hz, rate_hz, edges)  # (bands, S)
    Q, Rq = np.linalg.qr(Aw)  # Aw = Q Rq: cov = Rq⁻¹ WᵀΣW Rq⁻ᵀ stays positive for an ill-conditioned Aw
    U = _per_kind(Q, sample, row, n, S)  # the orthonormal basis of the columns, per kind
    present = _per_kind(np.ones(m), sample, row, n, S)
    TU = np.array([_toeplitz(cb, U) for cb in c])  # (bands, kinds, S, p): T_b U_k
    levels = _band_levels(c, U, TU, present, _per_kind(res, sample, row, n, S))
    if instruments is None:
        W, TW = U, TU  # x − ϑ = Rq⁻¹ Qᵀ e
    else:  # x − ϑ = (ZᵀA)⁻¹ Zᵀ e = Rq⁻¹ Wᵀ e, W = Z (QᵀZ)⁻¹
        W = _per_kind(np.linalg.solve((Q.T @ instruments).T, instruments.T).T, sample, row, n, S)
        TW = np.array([_toeplitz(cb, W) for cb in c])
    meat = np.zeros((p, p))  # WᵀΣW = Σ_b Σ_jk P_b[j, k] W_jᵀ T_b W_k
    for Tw, P in zip(TW, levels, strict=True):
        mixed = np.einsum("jk,ksq->jsq", P, Tw)
        meat += W.reshape(-1, p).T @ mixed.reshape(-1, p)
    Ri = solve_triangular(Rq, np.eye(p))
    cov = Ri @ (meat + meat.T) / 2 @ Ri.T
    if not np.all(np.isfinite(cov)):
        raise IdentifiabilityError("the estimates' covariance is not finite: the regressor is rank deficient")
    return cov


def _band_levels(
    c: np.ndarray, U: np.ndarray, TU: np.ndarray, present: np.ndarray, R: np.ndarray
) -> list[np.ndarray]:
    """Each band's (kinds × kinds) noise levels, unbiased from the residuals R (kinds, samples) — E[rᵀB_a r] =
    Σ_c φ_c tr(B_a M B_c M), B_a = T_b on the rows of kinds j, k and M = D − U Uᵀ (D: rows present) — then positive
    semi-definite. tr(B_a M B_c M) = tr(B_a D B_c D) − 2 tr(Uᵀ B_a D B_c U) + tr(Uᵀ B_a U Uᵀ B_c U)."""
    n, S, p = U.shape
    nb = len(c)
    pairs = [(j, k) for j in range(n) for k in range(j, n)]
    basis = [(b, j, k) for b in range(nb) for j, k in pairs]
    # tr(B_a D B_c D): the presence masks' correlations over every lag against the autocovariances' products
    counts = {(j, k): np.round(fftconvolve(present[j], present[k][::-1])) for j, k in pairs}
    sym = np.concatenate([c[:, :0:-1], c], axis=1)  # lags −(S−1) … S−1
    # tr(Uᵀ B_a D B_c U) = Σ_m Σ_s D_m[s] ⟨(B_a U)_m[s], (B_c U)_m[s]⟩, (B_a U)_j = T_b U_k, (B_a U)_k = T_b U_j
    per_sample = np.moveaxis(TU.reshape(nb * n, S, p), 1, 0)
    gram = np.einsum("ms,sac->mac", present, per_sample @ per_sample.transpose(0, 2, 1))
    # Uᵀ B_a U = N_bjk + N_bkj, N_bjk = U_jᵀ T_b U_k
    Uf = np.moveaxis(U, 1, 0).reshape(S, n * p)
    N = [(Uf.T @ np.moveaxis(t, 1, 0).reshape(S, n * p)).reshape(n, p, n, p) for t in TU]
    V = np.array([N[b][j, :, k] + (N[b][k, :, j] if j != k else 0.0) for b, j, k in basis]).reshape(
        len(basis), -1
    )
    G = V @ V.T
    for a, (b, j, k) in enumerate(basis):
        ends = {j: k, k: j}  # (B_a U)_m = T_b U_ends[m]
        for c2, (b2, j2, k2) in enumerate(basis[: a + 1]):
            ends2 = {j2: k2, k2: j2}
            g = -2.0 * sum(
                gram[mm, b * n + ends[mm], b2 * n + ends2[mm]] for mm in ends.keys() & ends2.keys()
            )
            if (j, k) == (j2, k2):
                g += (1 if j == k else 2) * float(counts[j, k] @ (sym[b] * sym[b2]))
            G[a, c2] += g
            if c2 != a:
                G[c2, a] += g
    TR = np.array([_toeplitz(cb, R) for cb in c])  # (bands, kinds, S)
    s = np.array([(1 if j == k else 2) * R[j] @ TR[b, k] for b, j, k in basis])
    phi = np.linalg.lstsq(G, s, rcond=1e-12)[0]
    levels = []
    for b in range(nb):
        P = np.zeros((n, n))
        for (j, k), v in zip(pairs, phi[b * len(pairs) : (b + 1) * len(pairs)], strict=True):
            P[j, k] = P[k, j] = v
        w, E = np.linalg.eigh(P)
        levels.append((E * np.maximum(w, 0.0)) @ E.T)  # a spectrum's levels cannot be negative
    return levels
