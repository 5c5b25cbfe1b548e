"""Are `identify ft-pwm`'s standard errors honest? A Monte-Carlo on the estimator's own pipeline: one noise-free
40 s twin recording of the iCub right arm (the test_ft_pwm truth, seed 1), then many draws of the twin's sensor
noise (F/T 0.3 N / 0.02 N·m, PWM 0.2 units, white) through the same low-pass, trimming and decimation as `fit`
(`filtered_rows`; the PWM's noise enters the gain columns, `pwm_columns`), fitted by `fit_system` with auto weights.
z = (x̂ − x̂_noise-free) / SE per parameter (the noise-free fit is within 0.02 SE of the truth: no model bias).

Measured (40 s: 760 decimated samples, 87 parameters; this test's 60 draws, then 100 draws): IV mean z² 1.07 / 1.01,
|z| > 3 0.61 % / 0.33 %, worst parameter's mean z² 1.59 / 1.44 (120 s, 100 draws: 1.06, 0.54 %); OLS spread
var(x̂)/SE² 0.98 / 0.98 (120 s: 1.02) — its mean z² about the noise-free fit is 1.70 / 1.62, the PWM noise biasing
the gains (errors in variables, shoulder gains' mean z −2.7), which no SE covers. The former Newey–West SEs
(Bartlett over one cut-off period of residual scores): OLS spread 1.49 / 1.50 (120 s: 1.26); IV (100 draws) mean z²
1.57, |z| > 3 1.9 % (120 s: 1.30, 1.1 %).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from identify.dynamic import ls_statistics
from identify.ft_pwm import FtPwmEstimator, pwm_columns
from robots.actuation import transmissions
from robots.registry import get_model

pytest.importorskip("mujoco")
pytest.importorskip("icub_models")
pytestmark = pytest.mark.slow

SENSOR = "r_arm_ft_sensor"
DRAWS = 60


@pytest.fixture(scope="module")
def twin():
    """(model, groups, noise-free recording, the twin's default noise)."""
    from drivers.emulators.mujoco_ft_arm import FtPwmNoise
    from identify.ft_pwm_sim import default_truth, simulate_experiment

    model = get_model("icub-right-arm")
    groups = transmissions(model)
    truth = default_truth(model, groups, np.random.default_rng(7))
    rec = simulate_experiment(model, groups, SENSOR, 40.0, seed=1, noise=FtPwmNoise(0, 0, 0), truth=truth)
    return model, groups, rec.recording, FtPwmNoise()


def _noise(rec, noise, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Raw (PWM, wrench) noise of one draw, as the twin adds it."""
    sd = np.array([noise.force] * 3 + [noise.moment] * 3)
    return rng.normal(0, noise.pwm, rec.pwm.shape), rng.normal(size=rec.wrench.shape) * sd


def _noisy_rows(est: FtPwmEstimator, rec, clean, pwm_noise, wrench_noise):
    """The noise-free rows plus the filtered, decimated noise: the PWM's in its gain columns, the F/T's in b."""
    A0, b0, kind, sample = clean
    nj = est.layout_.joint_rows
    gains = [c for cols in est._gain_columns() for c in cols]
    A, b = A0.copy(), b0.copy()
    A[:, gains] += pwm_columns(est.layout_, est.filtered_rows(pwm_noise, rec.rate_hz))[sample, kind]
    ft = kind >= nj
    b[ft] += est.filtered_rows(wrench_noise, rec.rate_hz)[sample[ft], kind[ft] - nj]
    return A, b


def _draws(twin, method: str):
    """(estimator, noise-free rows, estimates (DRAWS, p), SEs, Newey–West SEs of the LS estimate)."""
    model, groups, rec, noise = twin
    est = FtPwmEstimator(model, SENSOR, groups, method=method, compare=False)
    clean = est.system(rec)
    ref = est.fit_system(*clean, rec.rate_hz).fit_.values
    _, _, kind, sample = clean
    lags = int(np.ceil(rec.rate_hz / est.cutoff_hz / est._step(rec.rate_hz)))  # one cut-off period
    rng = np.random.default_rng(1)
    x, se, se_nw = [], [], []
    for _ in range(DRAWS):
        A, b = _noisy_rows(est, rec, clean, *_noise(rec, noise, rng))
        fit = est.fit_system(A, b, kind, sample, rec.rate_hz).fit_
        x.append(fit.values)
        se.append(fit.se)
        if method == "ols":
            w = np.array(list(fit.row_weights.values()))[kind]
            Aw, bw = A * w[:, None], b * w
            se_nw.append(ls_statistics(Aw, bw, fit.values, fit.symbols, sample=sample, lags=lags)[1])
    return est, clean, ref, np.array(x), np.array(se), np.array(se_nw)


def test_the_monte_carlo_rows_are_the_pipelines(twin):
    """Adding the filtered noise to the noise-free rows is what `system` makes of the noisy recording."""
    model, groups, rec, noise = twin
    est = FtPwmEstimator(model, SENSOR, groups, method="ols", compare=False)
    clean = est.system(rec)
    pwm_noise, wrench_noise = _noise(rec, noise, np.random.default_rng(5))
    A, b = _noisy_rows(est, rec, clean, pwm_noise, wrench_noise)
    A2, b2, kind, sample = est.system(replace(rec, pwm=rec.pwm + pwm_noise, wrench=rec.wrench + wrench_noise))
    assert np.array_equal(kind, clean[2]) and np.array_equal(sample, clean[3])
    assert np.max(np.abs(A - A2)) < 1e-10 * np.max(np.abs(A2))
    assert np.max(np.abs(b - b2)) < 1e-10 * np.max(np.abs(b2))
    assert np.max(np.abs(A - clean[0])) > 1e-6 * np.max(np.abs(A2))  # the PWM noise did reach the regressor


def test_iv_standard_errors_match_the_spread_of_the_estimates(twin):
    """IV is consistent despite the noisy PWM in the regressor: z about the noise-free fit behaves like N(0, 1)."""
    _, _, ref, x, se, _ = _draws(twin, "iv")
    z = (x - ref) / se
    assert 0.7 < np.mean(z**2) < 1.4, np.mean(z**2)
    assert np.mean(np.abs(z) > 3) < 0.01, np.mean(np.abs(z) > 3)  # N(0, 1): 0.27 %
    assert np.max(np.mean(z**2, axis=0)) < 2.5  # no parameter badly off on its own


def test_ols_standard_errors_match_the_spread_newey_west_overclaims(twin):
    """OLS's SEs against the spread of its estimates (their mean is biased by the PWM noise, which no SE covers);
    the former Newey–West SEs from the residuals were too small."""
    est, _, _, x, se, se_nw = _draws(twin, "ols")
    spread = np.var(x, axis=0, ddof=1)
    ratio = spread / np.mean(se**2, axis=0)
    assert 0.7 < np.mean(ratio) < 1.4, np.mean(ratio)
    assert np.max(ratio) < 2.0, est.fit_.symbols[int(np.argmax(ratio))]
    assert np.mean(spread / np.mean(se_nw**2, axis=0)) > 1.3
