"""Standard errors of least-squares fits whose residuals are correlated in time (low-passed or smoothed signals), and
a runs test that flags a systematic model misfit. Shared by the friction, PWM-gain and encoder-offset fits.

For rows low-passed by a known filter (the CLI's fits) `fit_se` takes the banded-spectrum covariance of
`identify.residual_covariance`; otherwise a Newey–West (Bartlett) sandwich with a bandwidth from the residuals' own
autocorrelation, capped by the filter's correlation length and by a quarter of the samples (the Bartlett sum taken
by FFT, so its cost does not grow with the bandwidth).
"""

from __future__ import annotations

import numpy as np

LAGS_PER_CORRELATION = 10  # bandwidth cap, in correlation lengths of the filter


def null_space(C: np.ndarray | None, p: int) -> np.ndarray:
    """Basis N of {θ : C θ = 0} (θ = N φ imposes the equality rows exactly); the identity without C."""
    if C is None:
        return np.eye(p)
    _, _, Vt = np.linalg.svd(C)
    return Vt[C.shape[0] :].T


def _per_sample(values: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """Rows summed per time `sample` index (rows of one sample add up, as their scores do); gaps stay zero."""
    out = np.zeros((int(sample.max()) + 1,) + values.shape[1:])
    np.add.at(out, sample, values)
    return out


def residual_bandwidth(res: np.ndarray, sample: np.ndarray, corr_samples: int | None = None) -> int:
    """Newey–West lags: 3 × the first lag where the residuals' (per-sample) autocorrelation falls below 0.05,
    capped at LAGS_PER_CORRELATION × `corr_samples` (when known) and at a quarter of the samples (not rows)."""
    sample = np.asarray(sample, dtype=int)
    z = _per_sample(np.asarray(res, float), sample)
    m = _per_sample(np.ones(len(sample)), sample).clip(max=1.0)
    S = len(z)
    L = 1 << int(np.ceil(np.log2(2 * S)))
    acf = np.fft.irfft(np.abs(np.fft.rfft(z, L)) ** 2, L)[:S]
    cnt = np.round(np.fft.irfft(np.abs(np.fft.rfft(m, L)) ** 2, L)[:S])
    rho = np.where(cnt > 0, acf / np.maximum(cnt, 1), 0.0) / max(acf[0] / max(cnt[0], 1), 1e-300)
    below = np.flatnonzero(rho < 0.05)
    lags = 3 * (int(below[0]) if len(below) else S)
    if corr_samples is not None:
        lags = min(lags, LAGS_PER_CORRELATION * max(int(corr_samples), 1))
    return int(max(1, min(lags, int(m.sum()) // 4)))


def bartlett_meat(G: np.ndarray, lags: int) -> np.ndarray:
    """Σ_|l|≤lags (1 − |l|/(lags+1)) Σ_t G_{t+l} G_tᵀ for scores G (samples, p), by FFT: O(S log S · p²)."""
    S, p = G.shape
    n = 1 << int(np.ceil(np.log2(S + lags + 1)))
    k = np.zeros(n)
    lag = np.arange(min(lags, S - 1) + 1)
    k[lag] = 1.0 - lag / (lags + 1)
    k[n - lag[1:]] = k[lag[1:]]
    F = np.fft.fft(G, n, axis=0)
    M = (F.T * np.fft.fft(k).real) @ F.conj() / n
    M = M.real
    return (M + M.T) / 2


def hac_se(
    X: np.ndarray,
    y: np.ndarray,
    theta: np.ndarray,
    sample: np.ndarray,
    C: np.ndarray | None = None,
    corr_samples: int | None = None,
) -> tuple[np.ndarray, int]:
    """Newey–West standard errors of θ (rows at time `sample` indices, gaps keep their place), optionally under the
    equality rows C θ = 0; (se, lags)."""
    sample = np.asarray(sample, dtype=int)
    N = null_space(C, X.shape[1])
    A = X @ N
    res = y - X @ theta
    lags = residual_bandwidth(res, sample, corr_samples)
    H = np.linalg.inv(A.T @ A)
    m, p = A.shape
    M = bartlett_meat(_per_sample(A * res[:, None], sample), lags)
    cov = m / max(m - p, 1) * N @ H @ M @ H @ N.T
    return np.sqrt(np.maximum(np.diag(cov), 0.0)), lags


def misfit_note(res: np.ndarray, sample: np.ndarray, corr_samples: int | None, what: str) -> str | None:
    """A note when residuals `corr_samples` apart (the filter's correlation length, so that noise alone gives
    independent signs) run in long stretches of one sign (Wald–Wolfowitz runs test, z < −3): the model misses
    systematically. None without `corr_samples`: neighbouring filtered samples share their sign anyway."""
    if corr_samples is None:
        return None
    sample = np.asarray(sample, dtype=int)
    pick = np.flatnonzero(np.diff(np.concatenate([[-1], sample // max(int(corr_samples), 1)])) > 0)
    s = np.sign(np.asarray(res)[pick])
    s = s[s != 0]
    n1, n2 = float(np.sum(s > 0)), float(np.sum(s < 0))
    n = n1 + n2
    if n < 20 or n1 == 0 or n2 == 0:
        return None
    runs = 1 + int(np.sum(s[1:] != s[:-1]))
    mean = 1 + 2 * n1 * n2 / n
    var = 2 * n1 * n2 * (2 * n1 * n2 - n) / (n * n * (n - 1))
    if (runs - mean) / np.sqrt(max(var, 1e-300)) > -3:
        return None
    return (
        f"{what}: model misfit — the residuals run in long stretches of one sign ({runs} runs where noise "
        f"gives {mean:.0f} ± {np.sqrt(var):.0f}): the SEs do not bound the bias this leaves"
    )


def corr_samples(filtered: tuple[float, float] | None) -> int | None:
    """Samples over which a low-pass of (cut-off, rate) [Hz] correlates noise: the rate over the cut-off."""
    return None if filtered is None else max(1, int(np.ceil(filtered[1] / filtered[0])))


def fit_se(
    X: np.ndarray,
    y: np.ndarray,
    theta: np.ndarray,
    sample: np.ndarray,
    C: np.ndarray | None = None,
    filtered: tuple[float, float] | None = None,
) -> tuple[np.ndarray, str]:
    """SEs of θ and how they were found: for rows low-passed by a known zero-phase Butterworth (`filtered` = (cut-off,
    rate) [Hz], rows at raw-sample indices `sample`) the banded-spectrum covariance of `identify.residual_covariance`
    (closer to the estimates' spread than Newey–West, which misses the noise the regressor absorbs); else Newey–West."""
    if filtered is None:
        se, lags = hac_se(X, y, theta, sample, C)
        return se, f"Newey–West, {lags} lags"
    from identify.residual_covariance import SPECTRUM_SPLITS, banded_covariance

    cutoff, rate = filtered
    N = null_space(C, X.shape[1])
    A, sample = X @ N, np.asarray(sample, dtype=int)
    cov = banded_covariance(
        A, y - X @ theta, sample, np.zeros(len(sample), int), 1 / rate, cutoff, rate, SPECTRUM_SPLITS
    )
    return np.sqrt(np.maximum(np.diag(N @ cov @ N.T), 0.0)), f"banded spectrum, cut-off {cutoff:g} Hz"
