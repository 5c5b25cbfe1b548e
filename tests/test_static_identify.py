"""Static CoM identification: statistics, synthetic round trips, malformed input."""

import numpy as np
import pytest

from formats.errors import DataError, IdentifiabilityError
from formats.static_recording import RecordingWriter, read_recording, write_recording
from identify.static import StaticCoMEstimator
from identify.synthetic import simulate_static
from robots.com_variants import base_model
from robots.params_io import perturbed


@pytest.fixture(scope="module")
def truth(model):
    return perturbed(model.params["sim"], np.random.default_rng(7), name="truth")


@pytest.fixture(scope="module")
def recording(model, truth):
    return simulate_static(model, 50, truth, cop_noise=0.003, seed=11)


def test_full_model_recovers_truth_within_3_se(model, truth, recording):
    est = StaticCoMEstimator(model, "right", "full").fit(recording)
    fit = est.result_
    true_theta = base_model(model, "right").values(truth)
    z = np.abs(fit.theta - true_theta)[fit.estimated] / fit.se[fit.estimated]
    assert len(fit.estimated) == 25
    assert z.max() < 3.0 + 0.5  # 25 parameters: allow the largest of 25 normal deviates a little slack
    assert np.mean(z < 2.0) > 0.8
    assert fit.sigma == pytest.approx(0.003, rel=0.25)


def test_simplified_model_recovers_mc_truth(model):
    rec = simulate_static(model, 40, "mc", cop_noise=0.002, seed=3)
    fit = StaticCoMEstimator(model, "right", "simplified").fit(rec).result_
    true_theta = base_model(model, "right").values("mc")
    z = np.abs(fit.theta - true_theta)[fit.estimated] / fit.se[fit.estimated]
    assert len(fit.estimated) == 13 and z.max() < 3.5


def test_statistics_are_consistent(model, recording):
    fit = StaticCoMEstimator(model, "right", "full", reference="mc").fit(recording).result_
    est = fit.estimated
    assert np.allclose(np.diag(fit.corr), 1.0)
    assert np.all(np.abs(fit.corr) <= 1 + 1e-12)
    assert np.allclose(fit.rel_se_pct[est], 100 * fit.se[est] / np.abs(fit.theta[est]))
    norms = np.linalg.norm(fit.residuals, axis=1)
    assert fit.residual_norm_mean == pytest.approx(norms.mean())
    assert fit.dof == 2 * 50 - 25
    # thesis: the ankle-roll range keeps cos θ6 ≈ 1, so ϑ12/ϑ13 are strongly correlated
    a, b, rho = fit.top_correlations[0]
    assert abs(rho) > 0.9
    assert fit.reference["cop_error_mean"] > fit.residual_norm_mean


def test_weighted_least_squares_uses_cop_sd(model, truth):
    rec = simulate_static(model, 30, truth, cop_noise=0.003, seed=5)
    rec.cop_sd = rec.cop_sd.copy()
    rec.cop_sd[:15] *= 10.0  # the first half is declared ten times noisier
    plain = StaticCoMEstimator(model, "right", "simplified").fit(rec).result_
    w = StaticCoMEstimator(model, "right", "simplified", weighted=True).fit(rec).result_
    assert w.weighted and not np.allclose(w.theta, plain.theta)
    # σ̂ stays a length (the residuals' own SD, m); the weighted scale is the residuals in units of cop_sd — the
    # simulation's 3 mm noise against cop_sd values declared 10× too large for half the postures
    resid_sd = np.sqrt(np.sum(w.residuals**2) / w.dof)
    assert w.sigma == pytest.approx(resid_sd) and 0.001 < w.sigma < 0.006
    assert np.isnan(plain.sigma_scale) and w.sigma_scale > 0
    e = w.residuals.reshape(-1) / rec.cop_sd.reshape(-1)
    assert w.sigma_scale == pytest.approx(np.sqrt(e @ e / w.dof))


def test_predict_cop_matches_fitted_residuals(model, recording):
    est = StaticCoMEstimator(model, "right", "full").fit(recording)
    assert np.allclose(recording.cop - est.predict_cop(recording.q), est.result_.residuals)


def test_too_few_postures_is_a_clear_error(model, truth):
    rec = simulate_static(model, 12, truth, seed=1)
    with pytest.raises(IdentifiabilityError, match="need at least 13 postures"):
        StaticCoMEstimator(model, "right", "full").fit(rec)


def test_repeated_postures_name_the_unidentifiable_parameters(model, truth, recording):
    q = np.repeat(recording.q[:3], 10, axis=0)
    cop = np.repeat(recording.cop[:3], 10, axis=0)
    with pytest.raises(IdentifiabilityError, match=r"cannot identify \d+ parameter\(s\): ϑ\d+"):
        StaticCoMEstimator(model, "right", "full").fit(q, cop)


def test_single_support_postures_are_refused(model, recording):
    q = recording.q.copy()
    q[4, 8] += 0.3  # left hip pitch: the left foot leaves the ground
    with pytest.raises(DataError, match="not in double support.*#4"):
        StaticCoMEstimator(model, "right", "full").fit(q, recording.cop)


def test_nan_and_shape_errors(model, recording):
    cop = recording.cop.copy()
    cop[2, 0] = np.nan
    with pytest.raises(DataError, match="NaN"):
        StaticCoMEstimator(model).fit(recording.q, cop)
    with pytest.raises(DataError, match="12 joint angles"):
        StaticCoMEstimator(model).fit(recording.q[:, :11], recording.cop)


def test_recording_round_trip_and_incremental_writer(model, recording, tmp_path):
    path = tmp_path / "rec.csv"
    write_recording(path, recording)
    back = read_recording(path, model.joint_names)
    assert np.array_equal(back.q, recording.q) and np.array_equal(back.cop, recording.cop)
    inc = tmp_path / "inc.csv"
    with RecordingWriter(inc, "tulip", "right", model.joint_names) as w:
        for i in range(3):
            w.append(i, 0, recording.q[i], recording.cop[i], force_n=220.0)
    with open(inc, "a") as fh:  # a run killed mid-row leaves a partial line
        fh.write("3,0,0.1,0.2")
    with RecordingWriter(inc, "tulip", "right", model.joint_names) as w:
        assert w.done == {0, 1, 2}
        with pytest.raises(DataError, match="already recorded"):
            w.append(1, 0, recording.q[1], recording.cop[1])
        w.append(3, 0, recording.q[3], recording.cop[3])
    back = read_recording(inc)
    assert list(back.posture) == [0, 1, 2, 3] and np.allclose(back.force[:3], 220.0)


HEADER = "# poise static recording v1\n# robot: tulip\n# base: right\n"
COLS = "posture,placement," + ",".join(f"theta{i}" for i in range(1, 13)) + ",cop_x,cop_y\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ("hello\n", "not a poise static recording"),
        ("# poise static recording v7\n# robot: tulip\n# base: right\n" + COLS, "version"),
        (HEADER.replace("# base: right\n", "") + COLS + "0,0," + "0," * 12 + "0,0\n", "base"),
        (HEADER + COLS.replace(",cop_y", "") + "0,0," + "0," * 12 + "0\n", "missing column.*cop_y"),
        (HEADER + COLS + "0,0," + "0," * 12 + "nan,0\n", "line 5, column cop_x.*NaN"),
        (HEADER + COLS + "0,0," + "0," * 11 + "0,0\n", "line 5: 15 values for 16 columns"),
        (HEADER + COLS + "0,0," + "x," + "0," * 11 + "0,0\n", "'x' is not a number"),
        (HEADER + COLS + "0,0," + "45," * 12 + "0,0\n", "look like degrees"),
        (HEADER + COLS, "no postures"),
        (HEADER + COLS + ("0,0," + "0," * 12 + "0,0\n") * 2, "posture index repeated"),
        (HEADER.replace("right", "right\n# angle_unit: grad") + COLS, "angle_unit"),
    ],
)
def test_malformed_recordings_are_rejected(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=message):
        read_recording(path)


def test_wrong_joint_count_against_model(tmp_path, model):
    cols = "posture,placement," + ",".join(f"theta{i}" for i in range(1, 12)) + ",cop_x,cop_y\n"
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + cols + "0,0," + "0," * 11 + "0,0\n")
    with pytest.raises(DataError, match="11 joint columns, the model has 12"):
        read_recording(path, model.joint_names)
