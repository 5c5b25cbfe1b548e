"""Non-causal adaptive-window differentiation (identify/adaptive_window.py)."""

import numpy as np
import pytest

from formats.errors import DataError
from identify.adaptive_window import adaptive_derivative, adaptive_states, noise_band

T = np.arange(0, 30, 0.01)
W1, W2 = 0.3 * 2 * np.pi, 0.11 * 2 * np.pi


def _signal():
    q = 0.5 * np.sin(W1 * T) + 0.2 * np.sin(W2 * T + 1)
    qd = 0.5 * W1 * np.cos(W1 * T) + 0.2 * W2 * np.cos(W2 * T + 1)
    qdd = -0.5 * W1**2 * np.sin(W1 * T) - 0.2 * W2**2 * np.sin(W2 * T + 1)
    return q, qd, qdd


def _rms(e):
    return float(np.sqrt(np.mean(e[100:-100] ** 2)))


def test_quantised_encoder_beats_central_differences():
    q, qd, qdd = _signal()
    tick = 2 * np.pi / 2**14
    qq = np.round(q / tick) * tick
    assert tick <= noise_band(qq[:, None])[0] < 3 * tick  # at least the quantum
    v = adaptive_derivative(T, qq)
    central = np.gradient(qq, T)
    assert _rms(v - qd) < 0.6 * _rms(central - qd)
    _, v2, a2 = adaptive_states(T, qq[:, None])
    assert np.allclose(v2[:, 0], v) and _rms(a2[:, 0] - qdd) < 0.2 * np.std(qdd)


def test_exact_line_takes_the_widest_window_and_noise_band():
    y = 0.7 * T + 2.0
    assert np.allclose(adaptive_derivative(T, y), 0.7)
    rng = np.random.default_rng(0)
    sd = 1e-3
    band = noise_band(rng.normal(0, sd, (5000, 2)))
    assert np.allclose(band, 3 * sd, rtol=0.1)


def test_bad_input():
    with pytest.raises(DataError, match="uniform"):
        adaptive_derivative(np.array([0.0, 0.1, 0.5, 0.6]), np.zeros(4))
    with pytest.raises(DataError, match="max_half_window"):
        adaptive_derivative(T, np.zeros(len(T)), max_half_window=0)
