"""A board tare's error is a constant offset on every effort row of its run, which the residuals cannot show:
`DynamicEstimator.fit(..., offsets=)` adds its effect through the estimator to the covariance (`identify
dynamic` takes it from run.json `tare_wrench_cov`, which `poise run` writes from each cell's tare SE)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import design_wrench

from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError
from identify.dynamic import DynamicEstimator

META = {"motion_band_hz": "0.3", "moment_z_m": "-0.053"}


@pytest.fixture(scope="module")
def recording():
    model, t, q, w = design_wrench(1, 100.0, -0.053)
    wrench = np.zeros((len(t), 6))
    wrench[:, 2:5] = w + np.random.default_rng(0).normal(0.0, [0.2, 0.05, 0.05], w.shape)
    return model, DynamicRecording("tulip", "right", list(model.joint_names), t, q, wrench=wrench, meta=META)


def _fit(model, rec, offsets=None):
    est = DynamicEstimator(model, "right", True, False, quantity="wrench", weighted=False)
    return est.fit(rec, offsets=offsets).fit_


def test_the_added_covariance_is_the_estimators_response_to_the_offset(recording):
    """Ordinary least squares is linear in the efforts: a unit offset on one row kind moves the estimate by that
    row's response, and the covariance added for independent offsets of σ_j is Σ σ_j² δx_j δx_jᵀ."""
    model, rec = recording
    plain = _fit(model, rec)
    sigma = np.array([0.1, 0.02, 0.03])  # Fz N, Mx, My N·m
    with_tare = _fit(model, rec, [np.diag(sigma**2)])
    np.testing.assert_allclose(with_tare.values, plain.values)  # the estimate itself does not move
    expected = np.zeros_like(plain.cov)
    for j, col in enumerate((2, 3, 4)):
        moved = rec.wrench.copy()
        moved[:, col] += 1.0
        dx = _fit(model, DynamicRecording(rec.robot, rec.base, rec.joint_names, rec.t, rec.q, wrench=moved,
                                          meta=META)).values - plain.values  # fmt: skip
        expected += sigma[j] ** 2 * np.outer(dx, dx)
    np.testing.assert_allclose(with_tare.cov - plain.cov, expected, rtol=1e-6, atol=1e-12)
    mass = next(k for k, f in enumerate(plain.formulas) if f.count("m@") == len(model.links))
    assert with_tare.se[mass] > 1.5 * plain.se[mass]  # an Fz offset of 0.1 N is 0.01 kg of mass
    assert with_tare.se[mass] == pytest.approx(np.hypot(plain.se[mass], 0.1 / 9.81), rel=0.05)


def test_offsets_are_checked(recording):
    model, rec = recording
    with pytest.raises(DataError, match="2 offset covariances for 1 recordings"):
        _fit(model, rec, [None, None])
    with pytest.raises(DataError, match="3 × 3 finite"):
        _fit(model, rec, [np.full((3, 3), np.nan)])
    assert np.array_equal(_fit(model, rec, [None]).cov, _fit(model, rec).cov)


def test_an_offset_shared_by_recordings_adds_its_joint_effect(recording):
    """A source common to two recordings (a board cell's gain error in two runs on the same boards) moves both at
    once: its covariance is δx δxᵀ of the estimate's response to offsetting both, not the sum of each one's."""
    model, rec = recording
    other = DynamicRecording(rec.robot, rec.base, rec.joint_names, rec.t, rec.q,
                             wrench=rec.wrench + np.random.default_rng(1).normal(0.0, 0.1, rec.wrench.shape),
                             meta=META)  # fmt: skip
    u = np.array([0.2, 0.03, -0.01])  # one SD of the source, on Fz N, Mx, My N·m of each recording

    def fit(recs, **kw):
        est = DynamicEstimator(model, "right", True, False, quantity="wrench", weighted=False)
        return est.fit(recs, **kw).fit_

    plain = fit([rec, other])

    def moved(r: DynamicRecording) -> DynamicRecording:
        w = r.wrench.copy()
        w[:, 2:5] += u
        return DynamicRecording(r.robot, r.base, r.joint_names, r.t, r.q, wrench=w, meta=META)

    both = fit([moved(rec), moved(other)]).values - plain.values
    first = fit([moved(rec), other]).values - plain.values
    second = fit([rec, moved(other)]).values - plain.values
    shared = fit([rec, other], shared_offsets=[[u, u]])
    np.testing.assert_allclose(shared.values, plain.values)
    np.testing.assert_allclose(shared.cov - plain.cov, np.outer(both, both), rtol=1e-6, atol=1e-14)
    apart = fit([rec, other], offsets=[np.outer(u, u), np.outer(u, u)])  # the same offsets, independent
    np.testing.assert_allclose(apart.cov - plain.cov, np.outer(first, first) + np.outer(second, second),
                               rtol=1e-6, atol=1e-14)  # fmt: skip
    mass = next(k for k, f in enumerate(plain.formulas) if f.count("m@") == len(model.links))
    assert shared.se[mass] > apart.se[mass]  # a common error does not average out over the recordings
    with pytest.raises(DataError, match="one entry .* for each of the 2 recordings"):
        fit([rec, other], shared_offsets=[[u]])
    with pytest.raises(DataError, match="3 finite numbers"):
        fit([rec, other], shared_offsets=[[u, np.array([np.nan, 0.0, 0.0])]])
