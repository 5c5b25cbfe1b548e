"""`poise calibrate` review revK: standard errors honest for filtered (correlated) residuals and flagged model misfit,
options a subcommand ignores refused, unit mistakes refused, per-run accelerometer and encoder-offset SEs, nits."""

from __future__ import annotations

import json

import numpy as np
import pytest

from formats.calibration_recording import DriveRecording, write_drive
from formats.errors import DataError, IdentifiabilityError
from formats.pwm_plan import recommended
from identify.differentiation import lowpass
from identify.friction import fit_friction, friction_torque

STRIBECK = {"Kc": 0.85, "Kv": 1.2, "sigma+": 1.27, "sigma-": 1.95}


def _cli(argv: list, capsys) -> tuple[int, str, str]:
    from poise.cli import main

    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _filtered_noise_data(seed: int, cutoff_hz: float = 2.0):
    """ω over a slow sweep at 100 Hz and y = −(Kc sign ω + Kv ω) + noise low-passed at `cutoff_hz` (correlated over
    ~rate/cutoff samples, as after the differentiating filter)."""
    t = np.arange(6000) / 100.0
    w = 1.5 * np.sin(2 * np.pi * 0.1 * t)
    e = lowpass(np.random.default_rng(seed).normal(0, 0.05, (len(t), 1)), 100.0, cutoff_hz)[:, 0]
    y = -(0.8 * np.sign(w) + 1.1 * w) + e
    return w, y


def _white_se(w: np.ndarray, y: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The plain least-squares SEs (independent residuals) the fit reported before."""
    X = -np.column_stack([np.sign(w[keep]), w[keep]])
    theta = np.linalg.lstsq(X, y[keep], rcond=None)[0]
    r = y[keep] - X @ theta
    return np.sqrt(np.diag(r @ r / (len(r) - 2) * np.linalg.inv(X.T @ X)))


def test_se_matches_the_spread_of_estimates_over_seeds_when_residuals_are_filtered():
    est, se, white = [], [], []
    for seed in range(150):  # the ratio of spreads then has a ±6 % standard error
        w, y = _filtered_noise_data(seed)
        fit = fit_friction(
            w, np.zeros_like(w), y, 0.0, "coulomb-viscous", speed_min=0.05, filtered=(2.0, 100.0)
        )
        est.append([fit.params["Kc"], fit.params["Kv"]])
        se.append([fit.se["Kc"], fit.se["Kv"]])
        white.append(_white_se(w, y, np.abs(w) > 0.05))
    spread = np.std(est, axis=0, ddof=1)
    ratio = spread / np.mean(se, axis=0)
    assert np.all((ratio > 0.8) & (ratio < 1.25)), ratio  # the reported SE is the estimates' scatter
    assert np.all(spread / np.mean(white, axis=0) > 2), spread / np.mean(
        white, axis=0
    )  # the white-residual one not


def test_motor_off_simulation_se_covers_stribeck_error_over_seeds(capsys):
    for seed in (1, 2, 4):  # seeds where Kv was 2.7–3.1 plain SEs off
        rc, out, _ = _cli(
            ["calibrate", "friction", "--simulate", "--seed", seed, "--model", "stribeck", "--json"], capsys
        )
        assert rc == 0
        doc = json.loads(out)
        fit, truth = doc["fits"][0], doc["truth"]
        for k in ("Kc", "Kv", "sigma+", "sigma-"):
            assert abs(fit["params"][k] - truth[k]) <= 3 * fit["se"][k], (seed, k)
        assert abs(fit["v_s_rad_s"] - truth["v_s"]) <= 3 * fit["se"]["v_s"]
        assert fit["se_method"].startswith("banded spectrum")


def test_wrong_friction_model_is_flagged_as_misfit(tmp_path, capsys):
    t = np.arange(3000) / 100.0
    w0 = 2 * np.pi * 0.25
    q, w, wd = np.sin(w0 * t), w0 * np.cos(w0 * t), -(w0**2) * np.sin(w0 * t)
    tau = (
        -friction_torque("stribeck", STRIBECK, w, 0.35)
        - 0.06 * wd
        + np.random.default_rng(1).normal(0, 0.01, len(t))
    )
    path = tmp_path / "fr.csv"
    write_drive(DriveRecording(t, np.zeros_like(t), q, tau, 0.06), path)
    rc, out, err = _cli(["calibrate", "friction", path, "--model", "coulomb-viscous", "--json"], capsys)
    assert rc == 0 and json.loads(out)["fits"][0]["model_misfit"] is True
    assert "model misfit" in err and "do not bound the bias" in err
    rc, out, _ = _cli(["calibrate", "friction", path, "--model", "coulomb-viscous"], capsys)
    assert "MODEL MISFIT" in out


def test_right_model_on_filtered_noise_is_no_misfit():
    for seed in range(5):
        w, y = _filtered_noise_data(seed)
        fit = fit_friction(
            w, np.zeros_like(w), y, 0.0, "coulomb-viscous", speed_min=0.05, filtered=(2.0, 100.0)
        )
        assert fit.misfit is None and not any("misfit" in n for n in fit.warnings), seed


def test_misfit_test_needs_the_filter_and_every_caller_gives_it(monkeypatch, capsys):
    import identify.friction as friction
    from identify.coupled import compare, load_coupled

    t = np.arange(3000) / 100.0
    w = 1.5 * np.sin(2 * np.pi * 0.25 * t)
    y = -friction_torque("stribeck", STRIBECK, w, 0.35)  # a coulomb-viscous fit misses it
    unknown = fit_friction(w, np.zeros_like(w), y, 0.0, "coulomb-viscous", speed_min=0.05)
    known = fit_friction(
        w, np.zeros_like(w), y, 0.0, "coulomb-viscous", speed_min=0.05, filtered=(12.0, 100.0)
    )
    assert unknown.misfit is None and unknown.se_method.startswith("Newey–West")
    assert known.misfit is not None
    given = []
    real = friction.fit_friction
    monkeypatch.setattr(
        friction, "fit_friction", lambda *a, **k: given.append(k.get("filtered")) or real(*a, **k)
    )
    _cli(["calibrate", "pwm-gain", "--simulate", "--link", "free"], capsys)  # fits its own friction first
    assert given and all(f is not None and f[0] == 12.0 for f in given)
    import identify.coupled as coupled

    monkeypatch.setattr(coupled, "fit_friction", friction.fit_friction)
    d = load_coupled()
    wj = np.column_stack([np.sin(t + k) for k in range(3)])
    given.clear()
    compare(d, wj, np.zeros_like(wj), -wj, np.full(3, 0.02), filtered=(12.0, 100.0))
    assert given == [(12.0, 100.0)] * 3


def test_robust_se_cost_is_bounded_on_a_long_misfit_recording():
    import time

    from identify.robust_se import hac_se

    t = np.arange(60000) / 1000.0  # two minutes' worth at 1 kHz, three times over per sensor row
    w = 1.5 * np.sin(2 * np.pi * 0.02 * t)
    X = np.column_stack([np.sign(w), w, np.exp(-np.abs(w)), w**2, np.ones_like(w)])
    y = -friction_torque("stribeck", STRIBECK, w, 0.35)
    theta = np.linalg.lstsq(X, y, rcond=None)[0]
    start = time.perf_counter()
    _, lags = hac_se(X, y, theta, np.arange(len(y)))  # was 3.4 s (a Bartlett loop over 10 185 lags)
    assert time.perf_counter() - start < 1.0
    rows = np.repeat(np.arange(2000), 3)  # 3 rows per sample: the cap counts samples
    _, lags = hac_se(np.repeat(X[::30], 3, axis=0), np.repeat(y[::30], 3), theta, rows)
    assert lags <= 2000 // 4
    _, capped = hac_se(X, y, theta, np.arange(len(y)), corr_samples=84)
    assert capped <= 840


def test_fast_motion_in_radians_is_fitted_and_degrees_are_refused(tmp_path, capsys):
    from identify.actuation_sim import Noise, simulate_external

    t = np.arange(6001) / 100.0
    w0 = 2 * np.pi * 0.5
    q, w, wd = np.sin(w0 * t), w0 * np.cos(w0 * t), -(w0**2) * np.sin(w0 * t)  # 1 rad at 0.5 Hz: 9.9 rad/s²
    tau = -friction_torque("coulomb-viscous", {"Kc": 0.8, "Kv": 1.1}, w) - 0.06 * wd
    tau = tau + np.random.default_rng(0).normal(0, 0.01, len(t))
    path = tmp_path / "fast.csv"
    write_drive(DriveRecording(t, np.zeros_like(t), q, tau, 0.06), path)
    rc, out, _ = _cli(["calibrate", "friction", path, "--model", "coulomb-viscous", "--json"], capsys)
    assert rc == 0 and json.loads(out)["fits"][0]["params"]["Kv"] == pytest.approx(1.1, rel=0.05)
    rec = simulate_external(noise=Noise(seed=0))
    rec.q = np.degrees(rec.q)
    write_drive(rec, tmp_path / "deg.csv")
    rc, out, err = _cli(["calibrate", "friction", tmp_path / "deg.csv"], capsys)
    assert rc == 2 and out == "" and "degrees" in err and len(err.strip().splitlines()) == 1


def test_offsets_held_at_the_tumble_bound_have_no_se():
    from identify.accelerometer import calibrate_two_step, split_recording
    from identify.sensor_sim import AccelExperiment, simulate_accelerometer

    rec, (o, _) = simulate_accelerometer(exp=AccelExperiment(seed=0))
    grid = split_recording(rec.pose, rec.a, rec.tumble)[0]
    tumble = o + np.array([0.3, 0.0, 0.0])
    held = calibrate_two_step(grid, tumble, bound=0.01)  # x pulled to its bound
    free = calibrate_two_step(grid, o, bound=1.0)
    at_bound = np.isclose(np.abs(held.offset - tumble), 0.01, rtol=1e-6)
    assert at_bound[0] and np.array_equal(np.isnan(held.se[:3]), at_bound)
    assert np.all(np.isfinite(held.se[3:])) and np.all(np.isfinite(free.se))


@pytest.mark.parametrize(
    "extra", [["--cutoff-hz", "1"], ["--accel-max", "0.001"], ["--speed-min", "50"], ["--margin", "1000"]]
)
def test_pwm_gain_fixture_refuses_moving_link_options(extra, capsys):
    rc, out, err = _cli(["calibrate", "pwm-gain", "--simulate", *extra], capsys)
    assert rc == 2 and out == "" and extra[0] in err and "--link free" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "extra", [["--zero-slope", "--model", "coulomb-viscous"], ["--vs", "0.35", "--model", "asymmetric"]]
)
def test_friction_refuses_stribeck_options_with_another_model(extra, capsys):
    rc, _, err = _cli(["calibrate", "friction", "--simulate", *extra], capsys)
    assert rc == 2 and "Stribeck model only" in err and extra[0] in err


def test_pwm_gain_refuses_pwm_given_as_a_fraction(tmp_path, capsys):
    from identify.actuation_sim import Noise, simulate_fixture

    rec = simulate_fixture(recommended(link="fixture"), noise=Noise(seed=0))
    rec.pwm = rec.pwm / 100.0
    path = tmp_path / "frac.csv"
    write_drive(rec, path)
    rc, _, err = _cli(["calibrate", "pwm-gain", path], capsys)
    assert rc == 2 and "PWM is in %" in err and "100" in err


def test_accelerometer_single_run_se_covers_the_error():
    from identify.accelerometer import fit_ellipsoid, split_recording
    from identify.sensor_sim import AccelExperiment, simulate_accelerometer

    z = []
    for seed in range(8):
        rec, (o, C) = simulate_accelerometer(exp=AccelExperiment(seed=seed))
        truth = np.array([*o, C[0, 0], C[1, 1], C[2, 2], C[1, 0], C[2, 0], C[2, 1]])
        cal = fit_ellipsoid(split_recording(rec.pose, rec.a, rec.tumble)[0])
        z.append((cal.vector() - truth) / cal.se)
    assert np.mean(np.abs(np.array(z)) <= 3) >= 0.9


def test_accelerometer_table_and_json_carry_the_se(capsys):
    rc, out, _ = _cli(["calibrate", "accelerometer", "--simulate", "--json"], capsys)
    doc = json.loads(out)
    se = doc["methods"]["ellipsoid"]["se"]
    assert rc == 0 and len(se) == 9 and all(v > 0 for v in se)
    rc, out, _ = _cli(["calibrate", "accelerometer", "--simulate"], capsys)
    assert "± SE" in out


def test_encoder_offsets_report_an_se_that_covers_the_gap(capsys):
    rc, out, _ = _cli(["calibrate", "encoder-offsets", "--simulate", "--json"], capsys)
    rows = json.loads(out)["joints"]
    assert rc == 0 and all(r["se_rad"] > 0 for r in rows)
    assert sum(abs(r["gap_rad"]) <= 3 * r["se_rad"] for r in rows) >= len(rows) - 1


def test_encoder_offsets_constant_posture_says_nothing_moved():
    from identify.encoder_offsets import default_sensors, fit_offsets
    from identify.sensor_sim import simulate_offsets
    from robots.registry import get_model

    model = get_model("icub-right-arm")
    sensors = default_sensors(model)
    q, acc, _ = simulate_offsets(
        model, sensors, np.zeros(model.nq), n=500, rate_hz=1000, speed_deg_s=4, seed=0
    )
    q = np.repeat(q[:1], len(q), axis=0)
    with pytest.raises(IdentifiabilityError, match="no joint moved"):
        fit_offsets(model, q, acc, sensors)


def test_pwm_gain_with_an_all_models_friction_says_which_it_used(tmp_path, capsys):
    fr = tmp_path / "fr.json"
    assert _cli(["calibrate", "friction", "--simulate", "--out", fr, "--json"], capsys)[0] == 0
    rc, out, err = _cli(
        ["calibrate", "pwm-gain", "--simulate", "--link", "free", "--friction", fr, "--json"], capsys
    )
    doc = json.loads(out)
    assert rc == 0 and doc["friction_model"] == "stribeck"
    assert any("the stribeck one is used" in n for n in doc["warnings"])


def test_fixture_table_shows_the_true_offset_and_hysteresis(capsys):
    from identify.actuation_sim import DriveTruth

    rc, out, _ = _cli(["calibrate", "pwm-gain", "--simulate", "--json"], capsys)
    doc, tr = json.loads(out), DriveTruth()
    assert doc["true_hysteresis_half_width_Nm"] == pytest.approx((tr.sigma_pos + tr.sigma_neg) / 2)
    assert doc["hysteresis_half_width_Nm"] == pytest.approx(doc["true_hysteresis_half_width_Nm"], abs=0.01)
    assert doc["tau0_Nm"] == pytest.approx(doc["true_tau0_Nm"], abs=0.01)


def test_nits_give_the_cause(tmp_path, capsys):
    from identify.accelerometer import split_recording

    with pytest.raises(DataError, match="no grid poses"):
        split_recording(np.array([1, 2]), np.ones((2, 3)), np.array([1, -1]))
    rc, _, err = _cli(["calibrate", "pwm-plan", "--joint", "", "--out", tmp_path / "p.json"], capsys)
    assert rc == 2 and "--joint" in err and not (tmp_path / "p.json").exists()
    rc, out, err = _cli(
        ["calibrate", "friction", "--simulate", "--model", "stribeck", "--vs", "50", "--json"], capsys
    )
    assert rc == 0 and any("above the fastest speed" in n for n in json.loads(out)["warnings"])


def test_pwm_gain_free_on_a_held_link_names_the_cause(tmp_path, capsys):
    from identify.actuation_sim import Noise, simulate_fixture

    rec_path, fr = tmp_path / "held.csv", tmp_path / "fr.json"
    write_drive(simulate_fixture(recommended(link="fixture"), noise=Noise(seed=0)), rec_path)
    assert _cli(["calibrate", "friction", "--simulate", "--model", "stribeck", "--out", fr], capsys)[0] == 0
    rc, _, err = _cli(["calibrate", "pwm-gain", rec_path, "--link", "free", "--friction", fr], capsys)
    assert rc == 2 and "hardly moves" in err and "--link fixture" in err


def test_friction_plot_draws_each_fit_over_its_own_data(tmp_path, capsys, monkeypatch):
    import identify.calibration_plots as plots

    drawn = {}
    monkeypatch.setattr(
        plots, "plot_friction", lambda omega, ys, kept, fits, *a: drawn.update(o=omega, ys=ys, k=kept, f=fits)
    )
    rc, _, _ = _cli(
        ["calibrate", "friction", "--simulate", "--plan", "recommended", "--plot", tmp_path / "f.png"], capsys
    )
    assert rc == 0 and len(drawn["ys"]) == 3
    for y, f in zip(
        drawn["ys"], drawn["f"], strict=True
    ):  # every curve passes through its data (rms ≤ 0.2 N·m)
        w = drawn["o"][drawn["k"]]
        assert np.sqrt(np.mean((y[drawn["k"]] - f.torque(w)) ** 2)) < 0.2, f.model
