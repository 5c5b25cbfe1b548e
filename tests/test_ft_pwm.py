"""F/T + PWM identification of the iCub right arm (issue 14 §1, spec icub-pls.md): the stacked system (11) fitted
to MuJoCo measurements (the twin's wrench and efforts come from mj_inverse of the true URDF, not from poise's
regressor) recovers the inertial base parameters, friction, PWM gains and F/T offset within 3 SE; PLS at full ν
is least squares; T² flags ≈ 1 − α of contact-free samples and most 1–5 N contacts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from formats.errors import DataError
from formats.ft_pwm_recording import read_ft_pwm_recording, write_ft_pwm_recording
from identify.ft_pwm import FtPwmEstimator, RowWeights
from identify.ft_pwm_report import validate
from identify.pls import PLSRegression
from robots.actuation import transmissions
from robots.registry import get_model

pytest.importorskip("mujoco")
pytest.importorskip("icub_models")

SENSOR = "r_arm_ft_sensor"


def arm_twin() -> dict:
    """The iCub arm twin's simulation arguments (model, groups, sensor and one truth), shared by the ft-pwm tests."""
    from identify.ft_pwm_sim import default_truth

    model = get_model("icub-right-arm")
    groups = transmissions(model)
    truth = default_truth(model, groups, np.random.default_rng(7))
    return dict(model=model, groups=groups, sensor=SENSOR, truth=truth)


@pytest.fixture(scope="module")
def runs():
    from identify.ft_pwm_sim import simulate_experiment

    sim = arm_twin()
    model, groups, truth = sim["model"], sim["groups"], sim["truth"]
    ident = simulate_experiment(duration=120.0, seed=1, **sim)
    val = simulate_experiment(duration=60.0, seed=2, **sim)
    contact = simulate_experiment(duration=60.0, seed=3, contacts=(1.0, 5.0), **sim)
    est = FtPwmEstimator(model, SENSOR, groups, method="iv").fit(ident.recording)
    return model, groups, truth, ident, val, contact, est


def test_recovery_within_3_se(runs):
    *_, truth, ident, _, _, est = runs
    fit = est.fit_
    z = (fit.values - est.true_values(*truth)) / fit.se
    names = fit.symbols
    kinds = {
        "inertial": [s.startswith("ϑ") for s in names],
        "offset": [s.startswith("w_O") for s in names],
        "friction": [s[:2] in ("c+", "c-", "v+", "v-") for s in names],
        "gain": [s.startswith("k@") for s in names],
    }
    for kind, mask in kinds.items():
        assert any(mask), kind
        assert np.all(np.abs(z[np.array(mask)]) < 3.0), (kind, np.round(z[np.array(mask)], 2))
    # honest SE: the z-scores scatter like N(0, 1), neither hidden by inflated SE nor beyond them
    assert 0.6 < np.sqrt(np.mean(z**2)) < 1.5
    # the gains are the physical ones (≈ 0.1 N·m per PWM unit), recovered to better than 2 %
    k = np.array(kinds["gain"])
    assert np.all(np.abs(fit.values[k] / est.true_values(*truth)[k] - 1) < 0.02)


def test_least_squares_shrinks_gains_iv_does_not(runs):
    """A noisy PWM in the homogeneous joint rows biases OLS (errors in variables); IV removes it."""
    *_, truth, _, _, _, est = runs
    k = np.array([s.startswith("k@") for s in est.fit_.symbols])
    true = est.true_values(*truth)[k]
    ols = {m.name: m.values for m in est.fit_.comparison}["ols"][k]
    assert np.mean(ols / true) < np.mean(est.fit_.values[k] / true)


def test_pls_full_nu_equals_least_squares_on_the_stacked_system(runs):
    *_, ident, _, _, est = runs
    A, b, kind, _ = est.system(ident.recording)
    w = np.array(list(est.fit_.row_weights.values()))[kind]
    Aw, bw = A * w[:, None], b * w
    pls = PLSRegression(n_components=A.shape[1]).fit(Aw, bw)
    ls = np.linalg.lstsq(Aw, bw, rcond=None)[0]
    assert pls.n_components_ == A.shape[1] == est.fit_.rank
    assert np.max(np.abs(pls.coef_ - ls) / np.maximum(np.abs(ls), 1e-3)) < 1e-9


def test_cv_curve_and_comparison(runs):
    model, groups, _, ident, *_ = runs
    est = FtPwmEstimator(model, SENSOR, groups, method="pls", cv=4).fit(ident.recording)
    fit = est.fit_
    assert len(fit.press) == len(fit.q2) == fit.rank
    assert fit.n_components == int(np.argmin(fit.press)) + 1
    assert fit.q2[fit.n_components - 1] > 0.99 > fit.q2[0]  # one latent variable explains little
    names = [m.name for m in fit.comparison]
    assert set(names) == {"pls", "ols", "ridge", "iv"}
    d = fit.to_dict()
    assert d["n_components"] == fit.n_components and len(d["parameters"]) == fit.rank


def test_explicit_row_weights_change_the_estimate_little(runs):
    model, groups, truth, ident, *_ = runs
    est = FtPwmEstimator(
        model, SENSOR, groups, method="iv", weights=RowWeights(force=1.0, moment=10.0, joint=20.0)
    )
    est.fit(ident.recording)
    assert est.fit_.row_weights["fx"] == 1.0 and est.fit_.row_weights["r_elbow"] == 20.0
    z = (est.fit_.values - est.true_values(*truth)) / est.fit_.se
    assert np.max(np.abs(z)) < 4.0
    with pytest.raises(DataError):
        RowWeights(force=-1.0)


def test_table_ii_and_contact_detection(runs):
    *_, ident, val, contact, est = runs
    v = validate(est, ident.recording, [val.recording, contact.recording])
    # the estimate predicts the validation wrench better than the CAD parameters (the truth is perturbed CAD)
    assert v.estimated["force_error_n"]["mean"] < v.cad["force_error_n"]["mean"]
    assert v.estimated["moment_error_nm"]["mean"] < v.cad["moment_error_nm"]["mean"]
    assert set(v.methods) == {"pls", "ols", "ridge", "iv"}
    assert v.methods["iv"] == v.estimated  # the estimator's own method, from the same prediction pass
    assert all(t["force_error_n"]["mean"] < v.cad["force_error_n"]["mean"] for t in v.methods.values())
    # contact-free: false alarms at the rate α promises (binomial 99.9 % band, Λ estimated adds a little)
    d = v.detection
    lo, hi = binom.ppf([0.0005, 0.9995], d.free_samples, 0.01) / d.free_samples
    assert lo <= d.fpr <= hi + 0.003, d.fpr
    assert d.contact_samples > 500 and d.tpr > 0.8, d.tpr
    assert d.roc is not None and d.roc.auc > 0.95
    assert np.all(np.diff(d.roc.fpr) <= 1e-12)


def test_recording_round_trip_and_bad_files(runs, tmp_path):
    *_, contact, _ = runs
    rec = contact.recording
    p = tmp_path / "rec.csv"
    write_ft_pwm_recording(rec, p)
    back = read_ft_pwm_recording(p)
    assert back.joint_names == rec.joint_names and back.motor_names == rec.motor_names
    assert np.allclose(back.wrench, rec.wrench, rtol=1e-9) and np.array_equal(back.contact, rec.contact)
    text = p.read_text().splitlines()
    cases = {
        "not a poise": ["hello"] + text[1:],
        "non-numeric": text[:6]
        + [",".join(["x" if j == 2 else c for j, c in enumerate(text[6].split(","))])]
        + text[7:],
        "every row": text[:6] + [text[6] + ",1"] + text[7:],
        "strictly increase": text[:6] + [text[7], text[6]] + text[8:],
        "missing wrench": text[:5] + [text[5].replace(",fz_n", "")] + text[6:],
    }
    for match, lines in cases.items():
        bad = tmp_path / "bad.csv"
        bad.write_text("\n".join(lines) + "\n")
        with pytest.raises(DataError, match=match):
            read_ft_pwm_recording(bad)


def test_cli_simulate_json_and_plot(tmp_path, capsys):
    import json

    from poise.cli import main

    png = tmp_path / "ft.png"
    argv = ["identify", "ft-pwm", "--simulate", "--duration", "40", "--method", "iv", "--json"]
    argv += ["--differentiation", "adaptive"]
    assert main(argv + ["--plot", str(png), "--save-dir", str(tmp_path / "runs")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "iv" and out["rank"] == len(out["parameters"])
    assert out["truth"]["within_3se"] >= 0.9 * out["rank"]
    det = out["validation"]["detection"]
    assert 0 <= det["fpr"] < 0.05 and det["tpr"] > 0.5 and len(det["roc"]["tpr"]) == len(det["roc"]["alpha"])
    assert {"estimated", "cad"} <= set(out["validation"]["table_ii"])
    assert png.stat().st_size > 10_000
    # the saved recordings identify again through the file path
    runs = tmp_path / "runs"
    argv = ["identify", "ft-pwm", str(runs / "identification.csv"), "--validate", str(runs / "contacts.csv")]
    assert main(argv + ["--method", "ols", "--weights", "1,10,10", "--covariance", "full", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["row_weights"]["mx"] == 10.0 and again["validation"]["detection"]["contact_samples"] > 0


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["identify", "ft-pwm"], "recording or --simulate"),
        (["identify", "ft-pwm", "--simulate", "--weights", "1,2"], "--weights"),
        (["identify", "ft-pwm", "NOFILE.csv"], "NOFILE"),
        (["identify", "ft-pwm", "--simulate", "--noise", "0.1,-1,0"], "--noise"),
        (["identify", "ft-pwm", "--simulate", "--sensor", "nowhere", "--duration", "5"], "nowhere"),
    ],
)
def test_cli_bad_input_one_line(argv, match, capsys):
    from poise.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err and "Traceback" not in err


def test_streaming_detector_online(runs):
    """Sample by sample: predicted wrench from the state, T² update; the same alarms as the batch rule."""
    from identify.differentiation import derivatives
    from identify.ft_pwm_report import detector
    from identify.t2 import StreamingT2

    *_, ident, _, contact, est = runs
    det = detector(est, ident.recording)
    rec = contact.recording
    q, qd, qdd = derivatives(rec.t, rec.q, est.cutoff_hz)
    stream = StreamingT2(det)
    f = est.wrench_function()
    span = range(1000, 2500)
    alarms = np.array([stream.update(rec.wrench[k] - f(q[k], qd[k], qdd[k]).full().ravel())[1] for k in span])
    batch = det.predict(rec.wrench[1000:2500] - est.wrench(q[1000:2500], qd[1000:2500], qdd[1000:2500]))
    assert np.array_equal(alarms, batch)
    truth = rec.contact[1000:2500]
    assert truth.any() and (~truth).any()
    assert alarms[truth].mean() > 0.8 and alarms[~truth].mean() < 0.05


def test_bad_data_named(runs):
    """A joint that never moves or a motor whose PWM sign is flipped gets a one-line error naming it."""
    from dataclasses import replace

    from formats.errors import IdentifiabilityError

    model, groups, _, _, val, _, _ = runs
    rec = val.recording
    est = FtPwmEstimator(model, SENSOR, groups, method="iv", compare=False)
    q = rec.q.copy()
    q[:, model.joint_names.index("r_elbow")] = q[0, model.joint_names.index("r_elbow")]
    with pytest.raises(IdentifiabilityError, match="does not excite"):
        est.fit(replace(rec, q=q))
    pwm = rec.pwm.copy()
    pwm[:, -1] *= -1
    with pytest.raises(DataError, match="k@r_elbow_m"):
        est.fit(replace(rec, pwm=pwm))
    with pytest.raises(DataError, match="motors"):
        est.fit(replace(rec, motor_names=rec.motor_names[::-1]))
    with pytest.raises(DataError, match="NaN"):
        replace(rec, wrench=np.where(np.arange(6) == 2, np.nan, rec.wrench))


def test_twin_and_stacked_system_agree_without_noise(runs):
    """MuJoCo's wrench/torques + the twin's friction, Tᵀ and gains satisfy eq. (11) at the true parameters:
    the friction sign convention and the coupling are the same on both sides (rows relative to their size)."""
    from drivers.emulators.mujoco_ft_arm import FtPwmNoise
    from identify.ft_pwm_sim import simulate_experiment

    model, groups, truth, *_, est = runs
    ex = simulate_experiment(model, groups, SENSOR, 20.0, seed=5, noise=FtPwmNoise(0, 0, 0), truth=truth)
    A, b, kind, _ = est.system(ex.recording)
    x = est.true_values(*truth)
    r = b - A @ x
    terms = np.abs(A) @ np.abs(x)  # the size of the terms that cancel in a joint row (b = 0 there)
    for k, row in enumerate(est.layout_.rows):
        scale = np.sqrt(np.mean(terms[kind == k] ** 2))
        assert np.sqrt(np.mean(r[kind == k] ** 2)) < 1e-3 * scale, row
    # and a wrong friction sign would not: flip the elbow's Coulomb terms
    x = x.copy()
    x[est.fit_.symbols.index("c+@r_elbow")] *= -1
    elbow = est.layout_.rows.index("r_elbow")
    assert np.sqrt(np.mean((b - A @ x)[kind == elbow] ** 2)) > 0.05


def test_actuation_groups_validated():
    from robots.actuation import motor_velocities, parse_actuation

    model = get_model("icub-right-arm")
    groups = transmissions(model)
    shoulder = groups[0]
    assert shoulder.coupled and shoulder.transpose[0, 1] == -1.625
    qd = np.zeros((1, model.nq))
    qd[0, :3] = [0.1, 0.2, 0.3]
    assert np.allclose(motor_velocities(groups, qd)[0, :3], shoulder.transpose.T @ [0.1, 0.2, 0.3])
    good = {"joints": ["r_elbow"], "motors": ["m"], "transpose": [[1.0]]}
    for bad, match in [
        ({**good, "joints": ["nope"]}, "unknown joint"),
        ({**good, "transpose": [[0.0]]}, "singular"),
        ({**good, "transpose": [[1.0, 2.0]]}, "1×1"),
        ({"joints": ["r_elbow"]}, "needs joints"),
    ]:
        with pytest.raises(DataError, match=match):
            parse_actuation(model, [bad])
    with pytest.raises(DataError, match="already belong"):
        parse_actuation(model, [good, good])


def test_adaptive_window_differentiation_also_recovers(runs):
    """The paper's adaptive-window differentiation instead of the Butterworth: still within 3 SE (+ margin)."""
    model, groups, truth, ident, *_ = runs
    est = FtPwmEstimator(model, SENSOR, groups, method="iv", compare=False, differentiation="adaptive")
    est.fit(ident.recording)
    z = (est.fit_.values - est.true_values(*truth)) / est.fit_.se
    assert np.mean(np.abs(z) < 3) > 0.97 and np.max(np.abs(z)) < 4.0
    with pytest.raises(DataError, match="differentiation"):
        FtPwmEstimator(model, SENSOR, groups, differentiation="magic")
