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


def test_a_shared_source_that_follows_the_motion_is_filtered_and_cut_as_the_efforts(recording):
    """A board cell's gain error scales that cell's load, which swings with the motion: per sample, its effect
    passes the fit's own delay, pieces, filter and trimming. The covariance it adds is δx δxᵀ of the estimate's
    response to adding the series to both recordings' efforts, with a delay and a gap in one of them."""
    model, rec = recording
    keep = np.ones(len(rec.t), dtype=bool)
    keep[400:430] = False  # a gap: the fit cuts the recording in two pieces
    gapped = DynamicRecording(rec.robot, rec.base, rec.joint_names, rec.t[keep], rec.q[keep],
                              wrench=rec.wrench[keep], meta=META)  # fmt: skip
    recs = [rec, gapped]
    rng = np.random.default_rng(5)
    series = [
        0.05 * np.cumsum(rng.normal(size=(len(r.t), 3)), axis=0) / 20 for r in recs
    ]  # a slow random swing

    def fit(recs, **kw):
        est = DynamicEstimator(model, "right", True, False, quantity="wrench", weighted=False, delay=0.02)
        return est.fit(recs, **kw).fit_

    def moved(r: DynamicRecording, u: np.ndarray) -> DynamicRecording:
        w = r.wrench.copy()
        w[:, 2:5] += u
        return DynamicRecording(r.robot, r.base, r.joint_names, r.t, r.q, wrench=w, meta=META)

    plain = fit(recs)
    both = fit([moved(r, u) for r, u in zip(recs, series, strict=True)]).values - plain.values
    shared = fit(recs, shared_offsets=[series])
    np.testing.assert_allclose(shared.values, plain.values)
    np.testing.assert_allclose(shared.cov - plain.cov, np.outer(both, both), rtol=1e-6, atol=1e-14)
    assert np.linalg.norm(both) > 0
    # the same through the IV estimate (planned angles a little off the recorded ones as instruments)
    planned = [r.q + 0.002 * np.sin(3 * r.t)[:, None] for r in recs]
    plain_iv = fit(recs, instruments=planned)
    moved_iv = fit([moved(r, u) for r, u in zip(recs, series, strict=True)], instruments=planned)
    both_iv = moved_iv.values - plain_iv.values
    shared_iv = fit(recs, instruments=planned, shared_offsets=[series])
    assert shared_iv.instruments and not np.allclose(both_iv, both)
    np.testing.assert_allclose(
        shared_iv.cov - plain_iv.cov, np.outer(both_iv, both_iv), rtol=1e-6, atol=1e-14
    )
    with pytest.raises(DataError, match="3 finite numbers"):
        fit(recs, shared_offsets=[[series[0][:-1], None]])  # not one per sample


def test_cell_loads_round_trip_beside_the_wrench(recording, tmp_path):
    """The cells behind a wrench: written and read back with their positions, cut and moved with the wrench;
    malformed ones refused with one line."""
    from formats.dynamic_recording import (
        DynamicRecordingAppender,
        read_dynamic_recording,
        write_dynamic_recording,
    )
    from identify.delay import delayed, samples_of

    model, rec = recording
    K = len(rec.t)
    cells = np.random.default_rng(2).uniform(1.0, 4.0, (K, 8))
    xy = np.arange(16.0).reshape(8, 2) / 100
    meta = META | {"cells_xy_m": " ".join(map(str, xy.ravel()))}
    full = DynamicRecording(rec.robot, rec.base, rec.joint_names, rec.t, rec.q, wrench=rec.wrench, meta=meta,
                            cells=cells)  # fmt: skip
    write_dynamic_recording(full, tmp_path / "r.csv")
    back = read_dynamic_recording(tmp_path / "r.csv")
    np.testing.assert_allclose(back.cells, cells, rtol=1e-9)
    np.testing.assert_allclose(back.cell_xy(), xy)
    app = DynamicRecordingAppender(tmp_path / "a.csv", rec.robot, rec.base, list(rec.joint_names), tau=False,
                                   wrench=True, meta=meta, cells=8)  # fmt: skip
    for k in range(12):
        app.append(rec.t[k], rec.q[k], wrench=rec.wrench[k], cells=cells[k])
    with pytest.raises(DataError, match="cells missing"):
        app.append(rec.t[12], rec.q[12], wrench=rec.wrench[12])
    app.close()
    np.testing.assert_allclose(read_dynamic_recording(tmp_path / "a.csv").cells, cells[:12], rtol=1e-9)
    with pytest.raises(DataError, match="need 'cells_xy_m'"):  # a file its reader would refuse is not begun
        DynamicRecordingAppender(tmp_path / "b.csv", rec.robot, rec.base, list(rec.joint_names), tau=False,
                                 wrench=True, meta=META, cells=8)  # fmt: skip
    keep = np.arange(K) % 3 > 0
    assert np.array_equal(samples_of(full, keep).cells, cells[keep])
    assert np.allclose(delayed(full, 0.01).cells[:-5], cells[1:-4])  # 100 Hz: one sample earlier
    with pytest.raises(DataError, match="cells_xy_m must give x y"):
        DynamicRecording(rec.robot, rec.base, rec.joint_names, rec.t, rec.q, wrench=rec.wrench, meta=META,
                         cells=cells)  # fmt: skip
    with pytest.raises(DataError, match="beside a wrench"):
        DynamicRecording(rec.robot, rec.base, rec.joint_names, rec.t, rec.q, tau=np.zeros((K, 12)), meta=meta,
                         cells=cells)  # fmt: skip
    text = (tmp_path / "r.csv").read_text().replace("cell_kg:1,", "cell_kg:9,")
    (tmp_path / "bad.csv").write_text(text)
    with pytest.raises(DataError, match="cell columns must be cell_kg:0"):
        read_dynamic_recording(tmp_path / "bad.csv")


def test_a_scale_error_on_every_effort_adds_the_estimate_times_its_sd(recording):
    """The known calibration weight's error scales every gain alike: its source is the recordings' own efforts ×
    its relative SD, and a linear estimator's response to its own efforts is its estimate — so the covariance
    grows by σ² x xᵀ, every parameter's relative SE by σ in quadrature."""
    model, rec = recording
    est = DynamicEstimator(model, "right", True, False, quantity="wrench", weighted=False)
    plain = est.fit(rec).fit_
    sd = 1e-3
    scaled = est.fit(rec, shared_offsets=[[sd * rec.wrench[:, 2:5]]]).fit_
    x = plain.values
    np.testing.assert_allclose(scaled.cov - plain.cov, sd**2 * np.outer(x, x), rtol=1e-6, atol=1e-14)
