"""Are `identify dynamic`'s standard errors honest? A Monte-Carlo of the statistics alone: the regressor of a designed
TUlip double-support excitation (tests/data/tulip_double_support_10s.json: the twin acceptance test's former SETTINGS,
seed 3, made with `optimise_balance` + `make_plan`) through the estimator's own filtering, trimming, decimation,
weighting and covariance, efforts b = A ϑ + noise coloured in time and correlated across the Fz, Mx, My rows.
Over many draws z = (ϑ̂ − ϑ) / SE must behave like N(0, 1): mean z² ≈ 1, |z| > 3 rare."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import sampled_test_design
from scipy.signal import lfilter

from formats.dynamic_recording import DynamicRecording
from identify.dynamic import DynamicEstimator, ls_statistics

RATE = 100.0  # Hz, the boards' recording rate on the twin
CUTOFF = 2.0  # Hz
SIGMA = np.array([0.5, 0.05, 0.05])  # N, N·m, N·m before the filter
ROW_CORR = np.array([[1.0, 0.6, -0.5], [0.6, 1.0, -0.3], [-0.5, -0.3, 1.0]])
DRAWS = 120


@pytest.fixture(scope="module")
def system():
    """(estimator, A, row kind, sample index, ϑ, raw samples) for the design's states at the cut-off."""
    tulip, t, q = sampled_test_design(RATE)
    rec = DynamicRecording("tulip", "right", list(tulip.joint_names), t, q, wrench=np.zeros((t.size, 6)))
    est = DynamicEstimator(tulip, "right", True, False, cutoff_hz=CUTOFF, quantity="wrench")
    A, _, row, sample = est._system(rec)
    theta = np.random.default_rng(0).normal(size=A.shape[1])
    return est, A, row, sample, theta, t.size


def _noise(rng: np.random.Generator, samples: int, rho: float) -> np.ndarray:
    """(samples, 3): AR(1) with coefficient `rho` per raw sample (0: white), rows correlated by ROW_CORR."""
    w = rng.normal(size=(samples + 1000, 3)) @ np.linalg.cholesky(ROW_CORR).T
    e = lfilter([np.sqrt(1 - rho**2)], [1.0, -rho], w, axis=0)[-samples:]
    return e / e.std(axis=0) * SIGMA


def _z(system, rho: float, newey_west: bool = False) -> np.ndarray:
    """(DRAWS, parameters) of z; `newey_west`: the Bartlett sandwich over one cut-off period from the residuals."""
    est, A, row, sample, theta, K = system
    rng = np.random.default_rng(1)
    out = []
    for _ in range(DRAWS):
        b = A @ theta + est.filtered_rows(_noise(rng, K, rho), RATE).ravel()
        x, _, se, w = est._ls(A, b, row, sample, RATE)
        if newey_west:
            Wr = w[row][:, None]
            lags = int(np.ceil(RATE / (CUTOFF * est._step(RATE))))  # decimated samples in a cut-off period
            se = ls_statistics(A * Wr, b * Wr[:, 0], x, [""] * len(x), sample=sample, lags=lags)[1]
        out.append((x - theta) / se)
    return np.array(out)


@pytest.mark.parametrize("rho", [0.0, 0.98], ids=["white", "ar1-0.5s"])
def test_standard_errors_match_the_spread_of_the_estimates(system, rho):
    """White noise, and AR(1) noise with a 0.5 s correlation time (one cut-off period, as the twin's servo
    steps and sole rocking): the SEs neither overclaim nor hide the parameters in inflated errors."""
    z = _z(system, rho)
    assert 0.6 < np.mean(z**2) < 1.5, np.mean(z**2)
    # N(0, 1): 0.27 %; SEs estimated from a few dozen effective residual degrees of freedom have heavier tails (Student's t)
    assert np.mean(np.abs(z) > 3) < 0.02
    assert np.max(np.mean(z**2, axis=0)) < 4.0  # no parameter badly off on its own


def test_newey_west_from_the_residuals_overclaims(system):
    """Why the banded estimate: with 37 parameters in 67 filtered samples the regressor absorbs much of the
    noise, so residual-based Newey–West SEs (the previous estimator) are too small."""
    z = _z(system, 0.98, newey_west=True)
    assert np.mean(z**2) > 2.0, np.mean(z**2)
