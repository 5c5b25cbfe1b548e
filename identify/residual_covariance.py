"""Covariance of least-squares estimates from zero-phase low-passed, decimated rows whose noise is correlated in
time and across the rows of one sample.

Model: each row kind's noise before the filter has a piecewise-flat (cross-)spectrum over a few frequency bands;
after the filter (power response |H|⁴ of a forward-backward Butterworth) the rows' covariance is
Σ = Σ_b P_b ⊗ T_b, P_b the bands' cross-spectral levels (row kinds × row kinds), T_b their known autocovariances.
The levels are estimated without bias from the residuals r = M e (M the residual maker, which removes the part of
the noise the regressor absorbs — what a Newey–West estimate from residuals misses in a short recording):
E[rᵀB_a r] = Σ_c φ_c tr(B_a M B_c M) is solved for the levels φ (a MINQUE-type moment equation), each band's P_b
made positive semi-definite, then cov = H AᵀΣA H (H = (AᵀA)⁻¹, computed through a QR factorisation).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from formats.errors import IdentifiabilityError

FREQ_POINTS = 8001  # quadrature of the bands' autocovariances up to half the raw sample rate


def band_autocovariances(
    lag_s: np.ndarray, cutoff_hz: float, rate_hz: float, edges_hz: list[float], order: int = 4
) -> np.ndarray:
    """(bands, lags): autocovariance at `lag_s` of unit-density white noise confined to each band
    [edges_k, edges_k+1) and passed forward and backward through an `order` Butterworth low-pass."""
    f = np.linspace(0.0, rate_hz / 2, FREQ_POINTS)
    power = 1.0 / (1.0 + (f / cutoff_hz) ** (2 * order)) ** 2
    cosines = np.cos(2 * np.pi * np.outer(lag_s, f))
    bands = [power * ((f >= a) & (f < b)) for a, b in zip(edges_hz[:-1], edges_hz[1:], strict=True)]
    return np.array([2.0 * np.trapezoid(cosines * w, f, axis=1) for w in bands])


def _per_kind(
    values: np.ndarray, sample: np.ndarray, row: np.ndarray, kinds: int, samples: int
) -> np.ndarray:
    """Rows → (kinds, samples, …) with zeros where a kind has no row at a sample (dropped rows)."""
    out = np.zeros((kinds, samples) + values.shape[1:])
    out[row, sample] = values
    return out


def banded_covariance(
    Aw: np.ndarray,
    res: np.ndarray,
    sample: np.ndarray,
    row: np.ndarray,
    dt: float,
    cutoff_hz: float,
    rate_hz: float,
    splits: tuple[float, ...] = (0.5,),
) -> np.ndarray:
    """Covariance of x from Aw x ≈ bw with residuals `res`; each row's decimated `sample` index (spacing `dt` s)
    and its kind `row`. Bands split the pre-filter spectrum at `splits` × the cut-off."""
    m, p = Aw.shape
    sample, row = np.asarray(sample, dtype=int), np.asarray(row, dtype=int)
    n, S = int(row.max()) + 1, int(sample.max()) + 1
    edges = [0.0] + [s * cutoff_hz for s in splits] + [rate_hz / 2]
    lags = np.abs(np.arange(S)[:, None] - np.arange(S)[None, :])
    T = band_autocovariances(np.arange(S) * dt, cutoff_hz, rate_hz, edges)[:, lags]  # (bands, S, S)
    Q, Rq = np.linalg.qr(Aw)  # Aw = Q Rq: cov = Rq⁻¹ QᵀΣQ Rq⁻ᵀ stays positive for an ill-conditioned Aw
    U = _per_kind(Q, sample, row, n, S)  # the orthonormal basis of the columns, per kind
    present = _per_kind(np.ones(m), sample, row, n, S)
    levels = _band_levels(T, U, present, _per_kind(res, sample, row, n, S))
    meat = np.zeros((p, p))  # QᵀΣQ
    for Tb, P in zip(T, levels, strict=True):
        meat += np.einsum("jk,jsp,ksq->pq", P, U, np.einsum("st,ktp->ksp", Tb, U))
    Ri = solve_triangular(Rq, np.eye(p))
    cov = Ri @ meat @ Ri.T
    if not np.all(np.isfinite(cov)):
        raise IdentifiabilityError("the estimates' covariance is not finite: the regressor is rank deficient")
    return cov


def _band_levels(T: np.ndarray, U: np.ndarray, present: np.ndarray, R: np.ndarray) -> list[np.ndarray]:
    """Each band's (kinds × kinds) noise levels, unbiased from the residuals R (kinds, samples) — E[rᵀB_a r] =
    Σ_c φ_c tr(B_a M B_c M), B_a = T_b on the rows of kinds j, k — then positive semi-definite."""
    n = U.shape[0]
    pairs = [(j, k) for j in range(n) for k in range(j, n)]
    basis = [(b, j, k) for b in range(len(T)) for j, k in pairs]
    C, V, s = [], [], []  # B_a U as rows per kind, Uᵀ B_a U, rᵀ B_a r
    for b, j, k in basis:
        c = np.zeros_like(U)
        c[j] += present[j][:, None] * (T[b] @ U[k])
        if j != k:
            c[k] += present[k][:, None] * (T[b] @ U[j])
        C.append(c)
        V.append(np.einsum("ksp,ksq->pq", U, c))
        s.append(R[j] @ T[b] @ R[k] * (1 if j == k else 2))
    G = np.empty((len(basis), len(basis)))  # tr(B_a M B_c M), M = I − U Uᵀ
    for a, (b, j, k) in enumerate(basis):
        for c, (b2, j2, k2) in enumerate(basis[: a + 1]):
            same = (j, k) == (j2, k2)
            bb = (
                (1 if j == k else 2) * float(np.sum(np.outer(present[j], present[k]) * T[b] * T[b2]))
                if same
                else 0.0
            )
            G[a, c] = G[c, a] = bb - 2 * float(np.sum(C[a] * C[c])) + float(np.sum(V[a] * V[c]))
    phi = np.linalg.lstsq(G, np.array(s), rcond=1e-12)[0]
    levels = []
    for b in range(len(T)):
        P = np.zeros((n, n))
        for (j, k), v in zip(pairs, phi[b * len(pairs) : (b + 1) * len(pairs)], strict=True):
            P[j, k] = P[k, j] = v
        w, E = np.linalg.eigh(P)
        levels.append((E * np.maximum(w, 0.0)) @ E.T)  # a spectrum's levels cannot be negative
    return levels
