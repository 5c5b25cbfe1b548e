"""The spectral split and lag search of `bench.twin_misfit` (the run-level analysis itself runs in `make bench`)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.twin_misfit import _band_shares, _parabola_min


def test_band_shares_split_the_power_at_the_motions_band_and_half_the_cut_off():
    dt = 0.05
    t = np.arange(0, 40, dt)
    x = np.stack(
        [np.sin(2 * np.pi * 0.25 * t), 2 * np.sin(2 * np.pi * 0.8 * t) + np.sin(2 * np.pi * 3 * t)], 1
    )
    shares = _band_shares(x, dt, band_hz=0.3, cutoff_hz=2.0)
    assert shares[0] == pytest.approx([1, 0, 0], abs=1e-6)
    assert shares[1] == pytest.approx([0, 0.8, 0.2], abs=1e-6)  # power 4 : 1 between and above 1 Hz


def test_lag_minimum_is_refined_between_the_samples():
    lags = np.arange(-5, 6)
    assert _parabola_min(lags, list((lags + 1.7) ** 2 + 3)) == pytest.approx(-1.7)
    assert _parabola_min(lags, list(np.abs(lags - 9.0))) == 4.0  # at the edge: the last interior sample
