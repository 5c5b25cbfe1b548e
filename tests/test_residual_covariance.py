"""identify.residual_covariance against its definitions written out densely: the bands' autocovariances against
adaptive quadrature (long lags included, where a coarse frequency grid aliases), and the covariance (LS and IV)
against explicit S×S matrices, traces and residual maker on a small problem with dropped rows."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.linalg import toeplitz

from identify.residual_covariance import band_autocovariances, banded_covariance

RATE, CUTOFF, STEP = 100.0, 5.0, 5


def test_band_autocovariances_match_quadrature_at_every_lag():
    edges = [0.0, 0.35 * CUTOFF, RATE / 2]
    lags = 6000  # 300 s of samples 0.05 s apart
    c = band_autocovariances(lags, STEP, CUTOFF, RATE, edges)
    power = lambda f: 1.0 / (1.0 + (f / CUTOFF) ** 8) ** 2  # noqa: E731
    for b, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        for k in (0, 1, 7, 2000, lags - 1):
            tau = k * STEP / RATE
            opts = {"weight": "cos", "wvar": 2 * np.pi * tau} if k else {}
            exact = 2 * quad(power, lo, min(hi, 8 * CUTOFF), limit=400, **opts)[0]
            assert abs(c[b, k] - exact) < 1e-3 * c[b, 0], (b, k, c[b, k], exact)


def _dense(Aw, res, sample, row, splits, Z=None) -> np.ndarray:
    """The module's estimate with every matrix formed: Σ_b P_b ⊗ T_b on the rows present, levels from
    E[rᵀB_a r] = Σ_c φ_c tr(B_a M B_c M), then (XᵀA)⁻¹ XᵀΣX (AᵀX)⁻¹, X = Aw or Z."""
    m = len(res)
    n, S = row.max() + 1, sample.max() + 1
    edges = [0.0] + [s * CUTOFF for s in splits] + [RATE / 2]
    T = [toeplitz(cb) for cb in band_autocovariances(S, STEP, CUTOFF, RATE, edges)]
    idx = row * S + sample

    def block(P: np.ndarray, b: int) -> np.ndarray:
        return np.kron(P, T[b])[np.ix_(idx, idx)]

    units = []
    for j in range(n):
        for k in range(j, n):
            E = np.zeros((n, n))
            E[j, k] = E[k, j] = 1.0
            units.append(E)
    basis = [(b, E) for b in range(len(T)) for E in units]
    M = np.eye(m) - Aw @ np.linalg.pinv(Aw)
    Bs = [block(E, b) for b, E in basis]
    G = np.array([[np.trace(Ba @ M @ Bc @ M) for Bc in Bs] for Ba in Bs])
    phi = np.linalg.lstsq(G, np.array([res @ Ba @ res for Ba in Bs]), rcond=1e-12)[0]
    Sigma = np.zeros((m, m))
    for b in range(len(T)):
        P = sum(v * E for v, (bb, E) in zip(phi, basis, strict=True) if bb == b)
        w, V = np.linalg.eigh(P)
        Sigma += block((V * np.maximum(w, 0)) @ V.T, b)
    X = Aw if Z is None else Z
    H = np.linalg.inv(X.T @ Aw)
    return H @ X.T @ Sigma @ X @ H.T


@pytest.mark.parametrize("iv", [False, True], ids=["ls", "iv"])
def test_banded_covariance_equals_its_dense_definition(iv):
    rng = np.random.default_rng(3)
    n, S = 3, 40
    sample = np.repeat(np.arange(S), n)
    row = np.tile(np.arange(n), S)
    keep = (rng.random(n * S) > 0.15) | (sample == S - 1)  # dropped rows; every kind keeps the last sample
    sample, row = sample[keep], row[keep]
    t = sample * STEP / RATE
    Aw = np.column_stack(
        [np.sin(2 * np.pi * f * t + f) * (1 + row) for f in (0.3, 0.8, 1.4, 2.1)] + [row == 0]
    )
    e = rng.normal(size=len(row))
    res = e - Aw @ np.linalg.lstsq(Aw, e, rcond=None)[0]
    Z = Aw + 0.3 * rng.normal(size=Aw.shape) if iv else None
    fast = banded_covariance(Aw, res, sample, row, STEP / RATE, CUTOFF, RATE, (0.35,), instruments=Z)
    dense = _dense(Aw, res, sample, row, (0.35,), Z)
    assert np.max(np.abs(fast - dense)) < 1e-9 * np.max(np.abs(dense))
    assert np.all(np.linalg.eigvalsh(fast) > 0)


def test_a_spacing_between_raw_samples_is_refused():
    Aw = np.ones((6, 1))
    with pytest.raises(ValueError, match="whole number"):
        banded_covariance(Aw, np.zeros(6), np.arange(6), np.zeros(6, int), 0.033, CUTOFF, RATE)
