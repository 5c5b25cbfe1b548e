"""Joint actuation and sensor calibration (spec actuation.md): friction, PWM gain, plans, sensors, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from formats.errors import DataError, IdentifiabilityError
from formats.pwm_plan import load_pwm_plan, recommended, samples, save_pwm_plan, sweeps
from identify.actuation_sim import DriveTruth, simulate_external, simulate_fixture, simulate_free
from identify.drive_signals import drive_signals
from identify.friction import fit_friction, friction_torque, regressor
from identify.pwm_gain import fit_pwm_gain, fit_pwm_gain_fixture

TRUTH = DriveTruth()
K_PCT = TRUTH.k_pwm * TRUTH.pwm_full_scale / 100  # N·m per % PWM


@pytest.fixture(scope="module")
def friction_data():
    rec = simulate_external(truth=TRUTH)
    return drive_signals(rec)


def _fit(sig, **kw):
    opts = dict(accel_max=5.0, speed_min=0.02, margin=5)
    opts.update(kw)
    return fit_friction(sig.omega, sig.omega_dot, sig.tau - TRUTH.tau_offset, TRUTH.inertia, **opts)


def test_stribeck_form_is_continuous_in_magnitude_and_flat_at_zero_plus_with_the_constraint():
    p = TRUTH.params()
    w = np.array([1e-9, -1e-9])
    f = friction_torque("stribeck", p, w, TRUTH.v_s)  # the torque the drive must add: sign of ω
    assert f[0] == pytest.approx(p["sigma+"], rel=1e-6) and f[1] == pytest.approx(-p["sigma-"], rel=1e-6)
    h = 1e-6
    slope = (friction_torque("stribeck", p, np.array([2 * h]), TRUTH.v_s) - f[0]) / (2 * h)
    assert abs(slope[0]) < 1e-3  # TRUTH satisfies σs⁺ − Kc = Kv v_s
    ws = np.linspace(-3, 3, 61)
    assert np.allclose(friction_torque("stribeck", p, ws, TRUTH.v_s), [TRUTH.friction(x) for x in ws])


def test_one_friction_convention_with_the_ft_pwm_model(friction_data):
    """identify/friction.py's asymmetric model is robots/actuation.py's f(q̇) (parameters ≥ 0, sign of q̇)."""
    from robots.actuation import friction_torque as f_actuation

    w = np.array([0.5, -0.5, 0.0, 2.0, -3.0])
    assert np.allclose(regressor("asymmetric", w[:2]), [[1, 0, 0.5, 0], [0, -1, 0, -0.5]])
    p = {"Kc+": 0.3, "Kc-": 0.5, "Kv+": 1.1, "Kv-": 0.7}
    phi = np.array([[p["Kc+"], p["Kc-"], p["Kv+"], p["Kv-"]]])
    assert np.allclose(friction_torque("asymmetric", p, w), f_actuation(w[:, None], phi)[:, 0])
    assert np.all(np.sign(friction_torque("coulomb-viscous", {"Kc": 0.2, "Kv": 1.0}, w)) == np.sign(w))
    # the drive's motion under it: a motor-off run measures y = τ_j + I ω̇ = −f(ω)
    sig = friction_data
    moving = np.abs(sig.omega) > 0.3
    y = sig.tau - TRUTH.tau_offset + TRUTH.inertia * sig.omega_dot
    assert np.mean(np.sign(y[moving]) == -np.sign(sig.omega[moving])) > 0.99


def test_stribeck_coulomb_viscous_recovered_within_2_percent(friction_data):
    for kw in ({"v_s": TRUTH.v_s}, {"v_s": TRUTH.v_s, "zero_slope": True}):
        fit = _fit(friction_data, model="stribeck", **kw)
        for k, v in TRUTH.params().items():
            assert fit.params[k] == pytest.approx(v, rel=0.02), (kw, k, fit.params)
        assert fit.n_rejected > 0
    searched = _fit(friction_data, model="stribeck")
    assert searched.v_s == pytest.approx(TRUTH.v_s, rel=0.25)
    assert searched.params["Kv"] == pytest.approx(TRUTH.kv, rel=0.02)


def test_outlier_rejection_at_reversals_matters(friction_data):
    kept = _fit(friction_data, model="stribeck", v_s=TRUTH.v_s)
    raw = _fit(friction_data, model="stribeck", v_s=TRUTH.v_s, accel_max=None, speed_min=0.0, margin=0)
    err = lambda f: max(abs(f.params[k] / v - 1) for k, v in TRUTH.params().items())  # noqa: E731
    assert err(raw) > 3 * err(kept)


def test_coulomb_viscous_and_asymmetric_fits_on_the_fast_part(friction_data):
    # far from zero velocity the Stribeck term has decayed: a Coulomb + viscous line fits Kc, Kv there
    sym = _fit(friction_data, model="coulomb-viscous", speed_min=3 * TRUTH.v_s)
    assert sym.params["Kv"] == pytest.approx(TRUTH.kv, rel=0.05)
    asym = _fit(friction_data, model="asymmetric", speed_min=3 * TRUTH.v_s)
    assert asym.params["Kc+"] == pytest.approx(TRUTH.kc, rel=0.1)
    assert asym.params["Kc-"] == pytest.approx(TRUTH.kc, rel=0.1)
    with pytest.raises(IdentifiabilityError, match="rank deficient"):
        w = np.abs(friction_data.omega)  # only positive velocities: Kc⁻, Kv⁻ have no data
        fit_friction(w, friction_data.omega_dot, friction_data.tau, 0.06, model="asymmetric", speed_min=0.01)


def test_pwm_gain_recovered_within_2_percent_moving_and_fixture(friction_data):
    fric = _fit(friction_data, model="stribeck", v_s=TRUTH.v_s)
    sig = drive_signals(simulate_free(recommended(link="free"), TRUTH))
    g = fit_pwm_gain(sig.pwm, sig.omega, sig.omega_dot, sig.tau, TRUTH.inertia, fric)
    assert g.k_pwm == pytest.approx(K_PCT, rel=0.02)
    assert g.tau0 == pytest.approx(TRUTH.tau_offset, abs=0.05)
    rec = simulate_fixture(recommended(), TRUTH)
    fx = fit_pwm_gain_fixture(rec.t, rec.pwm, rec.tau)
    assert fx.k_pwm == pytest.approx(K_PCT, rel=0.02)
    assert fx.hysteresis == pytest.approx((TRUTH.sigma_pos + TRUTH.sigma_neg) / 2, rel=0.05)
    naive = np.polyfit(rec.pwm, rec.tau, 1)[0]  # ignoring the hysteresis biases the slope
    assert abs(naive / K_PCT - 1) > 0.03


def test_pwm_plan_recommended_sweeps_round_trip_and_validation(tmp_path):
    t, u = samples(recommended())
    assert len(t) == 6001 and u[-1] == 0.0 and np.max(u) == pytest.approx(8.0)
    assert np.allclose(np.diff(t), 0.01)
    f = np.fft.rfftfreq(len(u) - 1, 0.01)[np.argmax(np.abs(np.fft.rfft(u[:-1])))]
    assert f == pytest.approx(0.3, abs=0.02)
    sw = sweeps()
    assert sorted({s.amplitude_pct for s in sw.segments}) == [4, 8, 12, 16]
    assert sorted({s.frequency_hz for s in sw.segments}) == [0.1, 0.3, 0.6, 0.9]
    save_pwm_plan(sw, tmp_path / "p.json")
    assert load_pwm_plan(tmp_path / "p.json") == sw
    doc = json.loads((tmp_path / "p.json").read_text())
    for edit, msg in [
        (lambda d: d["segments"][0].update(amplitude_pct=120), "amplitude_pct"),
        (lambda d: d["segments"][0].update(frequency_hz=float("nan")), "frequency_hz"),
        (lambda d: d.update(link="hand"), "link"),
        (lambda d: d["segments"][0].pop("shape"), "malformed"),
        (lambda d: d.update(format="other"), "not a"),
    ]:
        bad = json.loads(json.dumps(doc))
        edit(bad)
        (tmp_path / "b.json").write_text(json.dumps(bad))
        with pytest.raises(DataError, match=msg):
            load_pwm_plan(tmp_path / "b.json")


# --- accelerometer calibration (spec §4) --------------------------------------------------------------------


def test_ellipsoid_fit_exact_on_noise_free_full_sphere():
    from identify.accelerometer import fit_ellipsoid

    rng = np.random.default_rng(3)
    u = rng.normal(size=(60, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    C = np.array([[1.02, 0.01, -0.02], [0.01, 0.97, 0.005], [-0.02, 0.005, 1.01]])
    o = np.array([0.3, -0.2, 0.5])
    r = (9.81 * u) @ np.linalg.inv(C).T + o
    cal = fit_ellipsoid(r)
    assert np.allclose(cal.offset, o, atol=1e-6) and np.allclose(cal.C, C, atol=1e-6)
    assert np.allclose(np.linalg.norm(cal.apply(r), axis=1), 9.81, atol=1e-6)


def test_ellipsoid_on_the_manifold_with_slom_matches_the_entrywise_fit():
    from identify.accelerometer import fit_ellipsoid, split_recording
    from identify.sensor_sim import AccelExperiment, simulate_accelerometer

    rec, _ = simulate_accelerometer(exp=AccelExperiment(seed=4))
    grid, _, _ = split_recording(rec.pose, rec.a, rec.tumble)
    a, b = fit_ellipsoid(grid, solver="slom"), fit_ellipsoid(grid, solver="scipy")
    assert np.allclose(a.vector(), b.vector(), atol=1e-4)
    assert a.rms == pytest.approx(b.rms, rel=1e-6)
    assert np.allclose(a.C, a.C.T) and np.all(np.linalg.eigvalsh(a.C) > 0)


def test_tumble_plus_bounded_ellipsoid_cuts_offset_spread_at_least_5x():
    from identify.accelerometer import calibrate_two_step, fit_ellipsoid, split_recording, tumble_offset
    from identify.sensor_sim import AccelExperiment, simulate_accelerometer

    free, two = [], []
    for seed in range(6):
        rec, (o_true, C_true) = simulate_accelerometer(exp=AccelExperiment(seed=seed))
        grid, first, second = split_recording(rec.pose, rec.a, rec.tumble)
        free.append(fit_ellipsoid(grid).vector())
        two.append(calibrate_two_step(grid, tumble_offset(first, second)).vector())
    free, two = np.array(free), np.array(two)
    ratio = free[:, :3].std(axis=0).max() / two[:, :3].std(axis=0).max()
    assert ratio >= 5, ratio
    assert np.allclose(two[:, :3].mean(axis=0), o_true, atol=0.03)
    assert np.allclose(two[:, 3:6].mean(axis=0), np.diag(C_true), atol=0.01)


# --- encoder offsets from accelerometers (spec §5) ---------------------------------------------------------

TABLE_3_5_AUTO_DEG = [-0.1, -4.7, 2.5, -4.5, -4.6, 6.0]  # left leg, automatic calibration (thesis Table 3.5)


@pytest.fixture(scope="module")
def arm():
    from robots.registry import get_model

    return get_model("icub-right-arm")


def test_encoder_offsets_recovered_within_0p1_deg_with_bucket_report(arm):
    from identify.encoder_offsets import default_sensors, fit_with_buckets, prepare
    from identify.sensor_sim import simulate_offsets

    sensors = default_sensors(arm)
    assert len(sensors) >= int(np.ceil(arm.nq / 3))
    truth = np.radians(TABLE_3_5_AUTO_DEG + [1.5])[: arm.nq]
    q, acc, _ = simulate_offsets(arm, sensors, truth, n=20000, rate_hz=1000, speed_deg_s=4, seed=5)
    q, acc = prepare(q, acc, 201, 10)
    fit = fit_with_buckets(arm, q, acc, sensors, n_buckets=5, bucket_size=200)
    err = np.degrees(fit.offsets - truth)
    assert np.max(np.abs(err)) < 0.1, err
    report = fit.as_dict(truth)
    assert [r["joint"] for r in report["joints"]] == arm.joint_names
    assert all(abs(np.degrees(r["gap_rad"])) < 0.1 for r in report["joints"])  # files carry radians
    assert all(np.degrees(r["bucket_std_rad"]) < 0.3 for r in report["joints"])  # 200-sample buckets: noisier
    assert not fit.active_bounds


def test_encoder_offsets_refuse_unobservable_joints(arm):
    from identify.encoder_offsets import fit_offsets
    from identify.sensor_sim import simulate_offsets

    sensors = ["r_arm_ft_sensor"]  # nothing beyond the shoulder: elbow and wrist offsets are invisible
    q, acc, _ = simulate_offsets(arm, sensors, np.zeros(arm.nq), n=300, seed=1)
    with pytest.raises(IdentifiabilityError, match="r_elbow"):
        fit_offsets(arm, q, acc, sensors)


# --- coupled joints (spec §3) ------------------------------------------------------------------------------


def test_torso_coupling_matrices_match_the_spec():
    from identify.coupled import load_coupled

    d = load_coupled()
    R, r = 0.04, 0.022
    T_thesis = np.array([[r / R, r / (2 * R), r / (2 * R)], [0, 0.5, 0.5], [0, -0.5, 0.5]])  # ω_j = T_th ω_m
    T_inv_spec = np.array([[R / r, -1, 0], [0, 1, -1], [0, 1, 1]])
    assert np.allclose(d.T, T_inv_spec)  # poise: ω_m = T ω_j, so T = T_thesis⁻¹
    assert np.allclose(d.T @ T_thesis, np.eye(3))
    w_j = np.array([[0.3, -0.2, 0.5]])
    tau_m = np.array([[1.0, -0.4, 0.25]])
    tr = d.transmission
    # power balance τ_jᵀ ω_j = τ_mᵀ ω_m, and the thesis's τ_j = T_th⁻ᵀ τ_m
    assert np.sum(tr.joint_torque(tau_m) * w_j) == pytest.approx(np.sum(tau_m * tr.motor_velocity(w_j)))
    assert np.allclose(tr.joint_torque(tau_m), tau_m @ np.linalg.inv(T_thesis))
    assert np.allclose(tr.joint_velocity(tr.motor_velocity(w_j)), w_j)
    assert np.allclose(tr.motor_torque(tr.joint_torque(tau_m)), tau_m)
    assert d.joints == ("torso_yaw", "torso_roll", "torso_pitch")


def test_motor_wise_recovers_motor_friction_and_beats_joint_wise():
    from identify.actuation_sim import simulate_coupled
    from identify.coupled import compare, load_coupled
    from identify.differentiation import derivatives, lowpass

    d = load_coupled()
    kc = np.array([d.reference[m][0] for m in d.motors])
    kv = np.array([d.reference[m][1] for m in d.motors])
    Im, Ml = np.full(3, 0.02), np.diag([0.5, 0.8, 0.8])

    def signals(seed):
        t, q, tau = simulate_coupled(d.T, kc, kv, Im, Ml, duration_s=20.0, seed=seed)
        _, w, wd = derivatives(t, q, 12.0)
        return w, wd, lowpass(tau, 100.0, 12.0)

    c = compare(d, *signals(0), Im, validation=signals(1))
    for i, m in enumerate(d.motors):
        assert c.motor_fits[m].params["Kc"] == pytest.approx(kc[i], abs=0.02)
        assert c.motor_fits[m].params["Kv"] == pytest.approx(kv[i], rel=0.03)
    assert (c.unknowns_motor_wise, c.unknowns_joint_wise) == (6, 18)
    assert c.rms_joint_wise > 5 * c.rms_motor_wise
    kv_joint = c.joint_coeffs[:, 1::2]  # composite viscous gains: Tᵀ diag(Kv) T is not diagonal
    assert np.abs(kv_joint - np.diag(np.diag(kv_joint))).max() > 0.05


# --- link acceleration from distributed accelerometers (spec §6) -------------------------------------------

POS = np.array([[0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1], [-0.05, -0.05, 0.02]])


def test_link_acceleration_exact_without_noise_and_rank_checks():
    from identify.link_acceleration import design, estimate, noise_gain
    from identify.sensor_sim import simulate_link

    t, acc, gyro, wd, alpha = simulate_link(POS, acc_noise=0.0, gyro_noise=0.0)
    est = estimate(POS, acc, gyro, t[1] - t[0])
    assert np.abs(est.omega_dot - wd).max() < 1e-2 * np.abs(wd).max()
    assert np.abs(est.alpha - alpha).max() < 1e-3
    with pytest.raises(IdentifiabilityError, match="non-collinear"):
        design(np.array([[0.1, 0, 0], [0.2, 0, 0], [0.3, 0, 0]]))
    with pytest.raises(IdentifiabilityError):
        design(POS[:2])
    assert noise_gain(3 * POS) < noise_gain(POS) / 2  # wider spacing, less noise amplification


def test_tikhonov_variants_reduce_angular_acceleration_error():
    from identify.link_acceleration import estimate
    from identify.sensor_sim import simulate_link

    t, acc, gyro, wd, alpha = simulate_link(POS, seed=2)
    dt = t[1] - t[0]
    err = {
        e: np.std(estimate(POS, acc, gyro, dt, e, 0.01).omega_dot - wd)
        for e in ("pinv", "tikhonov", "gyro-rate")
    }
    assert err["tikhonov"] < err["pinv"] / 1.2
    assert err["gyro-rate"] < err["pinv"] / 1.2


# --- command line ------------------------------------------------------------------------------------------


def _run(argv, capsys):
    from poise.cli import main

    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


def test_cli_friction_and_pwm_gain_end_to_end_through_files(tmp_path, capsys):
    fr, rec = tmp_path / "fr.json", tmp_path / "free.csv"
    argv = ["calibrate", "friction", "--simulate", "--model", "stribeck", "--vs", "0.35", "--zero-slope"]
    doc = json.loads(_run([*argv, "--out", str(fr), "--plot", str(tmp_path / "f.png"), "--json"], capsys))
    p = doc["fits"][0]["params"]
    assert all(p[k] == pytest.approx(v, rel=0.02) for k, v in TRUTH.params().items())
    assert (tmp_path / "f.png").stat().st_size > 10_000
    sim = ["calibrate", "pwm-gain", "--simulate", "--link", "free", "--save-recording", str(rec), "--json"]
    g_sim = json.loads(_run([*sim, "--friction", str(fr)], capsys))
    g_file = json.loads(
        _run(["calibrate", "pwm-gain", str(rec), "--link", "free", "--friction", str(fr), "--json"], capsys)
    )
    assert g_file["k_pwm_Nm_per_pct"] == pytest.approx(g_sim["k_pwm_Nm_per_pct"], rel=1e-6)
    assert g_file["k_pwm_Nm_per_pct"] == pytest.approx(K_PCT, rel=0.02)
    table = _run(["calibrate", "pwm-gain", "--simulate"], capsys)
    assert "hysteresis" in table and "N·m/%" in table
    _run(["calibrate", "pwm-plan", "--out", str(tmp_path / "plan.json")], capsys)
    assert load_pwm_plan(tmp_path / "plan.json") == recommended()


def test_cli_accelerometer_and_encoder_offsets(tmp_path, capsys):
    doc = json.loads(_run(["calibrate", "accelerometer", "--simulate", "--runs", "4", "--json"], capsys))
    two = doc["methods"]["tumble + bounded ellipsoid"]
    assert np.allclose(two["mean"][:3], doc["truth"][:3], atol=0.03)
    assert max(doc["methods"]["ellipsoid"]["std"][:3]) > 5 * max(two["std"][:3])
    rec = tmp_path / "off.csv"
    sim = json.loads(
        _run(["calibrate", "encoder-offsets", "--simulate", "--save-recording", str(rec), "--json"], capsys)
    )
    assert all(abs(np.degrees(r["gap_rad"])) < 0.1 for r in sim["joints"])
    manual = ",".join(["1.0"] * len(sim["joints"]))
    out = tmp_path / "off.json"
    table = _run(
        ["calibrate", "encoder-offsets", str(rec), "--reference-deg", manual, "--out", str(out)], capsys
    )
    assert "buckets std [deg]" in table and "gap to ref. [deg]" in table and "r_elbow" in table
    again = json.loads(out.read_text())
    assert [r["offset_rad"] for r in again["joints"]] == pytest.approx(
        [r["offset_rad"] for r in sim["joints"]], abs=2e-5
    )
    first = again["joints"][0]
    assert first["gap_reference_rad"] == pytest.approx(first["offset_rad"] - np.radians(1.0))
    assert again["speed_check"]["too_fast"] is False
    assert "max joint speed" in table


def test_friction_with_constant_torque_term_on_an_unzeroed_sensor():
    sig = drive_signals(simulate_external(truth=TRUTH))
    fit = fit_friction(
        sig.omega, sig.omega_dot, sig.tau, TRUTH.inertia, "stribeck", v_s=TRUTH.v_s, accel_max=5.0,
        speed_min=0.02, margin=5, offset=True,
    )  # fmt: skip
    assert fit.tau_s == pytest.approx(TRUTH.tau_offset, abs=0.01)
    assert all(fit.params[k] == pytest.approx(v, rel=0.02) for k, v in TRUTH.params().items())
    biased = fit_friction(
        sig.omega, sig.omega_dot, sig.tau, TRUTH.inertia, "stribeck", v_s=TRUTH.v_s, accel_max=5.0
    )
    assert abs(biased.params["sigma+"] / TRUTH.sigma_pos - 1) > 0.05  # the offset leaks into σs± without τ_s


def test_drive_recording_reader_refuses_bad_files(tmp_path):
    from formats.calibration_recording import DriveRecording, read_drive, write_drive

    t = np.arange(100) * 0.01
    write_drive(DriveRecording(t, np.zeros(100), np.zeros(100), np.zeros(100), 0.06), tmp_path / "ok.csv")
    assert read_drive(tmp_path / "ok.csv").inertia == 0.06
    good = (tmp_path / "ok.csv").read_text()
    cases = {
        "nan": (good.replace("\n0.5,0,0,0", "\n0.5,0,nan,0"), "non-finite"),
        "cols": (good.replace("t,pwm,q,tau", "t,pwm,q,torque"), "missing column"),
        "ms": (good.replace("0.01,0", "10,0"), "increase"),
        "pct": (good.replace("\n0.5,0,", "\n0.5,250,"), "pwm"),
        "inertia": (good.replace("# inertia: 0.06", "# inertia: heavy"), "inertia"),
    }
    for name, (text, msg) in cases.items():
        (tmp_path / f"{name}.csv").write_text(text)
        with pytest.raises(DataError, match=msg):
            read_drive(tmp_path / f"{name}.csv")


def test_model_2_32_friction_and_pwm_gain_from_triangle_sweeps_within_2_percent():
    """Free link driven by the PWM triangle sweeps (4–16 %, 0.1–0.9 Hz): one regression y = K PWM − f + τ_s."""
    sig = drive_signals(simulate_free(sweeps(link="free"), TRUTH))
    fit = fit_friction(
        sig.omega, sig.omega_dot, sig.tau, TRUTH.inertia, "stribeck", v_s=TRUTH.v_s, accel_max=5.0,
        speed_min=0.02, margin=5, offset=True, pwm=sig.pwm,
    )  # fmt: skip
    for k, v in TRUTH.params().items():
        assert fit.params[k] == pytest.approx(v, rel=0.02), (k, fit.params)
    assert fit.extra["k_pwm"] == pytest.approx(K_PCT, rel=0.02)
    assert fit.tau_s == pytest.approx(TRUTH.tau_offset, abs=0.02)


def test_slow_motion_requirement_is_checked(arm):
    from identify.encoder_offsets import check_speed, default_sensors, speed_limit
    from identify.sensor_sim import simulate_offsets

    assert np.degrees(speed_limit(0.5, 0.01)) == pytest.approx(8.1, abs=0.05)  # the thesis's ≈ 8 deg/s
    sensors = default_sensors(arm)
    for speed, fast in ((4.0, False), (20.0, True)):
        q, _, _ = simulate_offsets(arm, sensors, np.zeros(arm.nq), n=20000, rate_hz=1000, speed_deg_s=speed)
        chk = check_speed(arm, np.arange(len(q)) / 1000, q, sensors)
        assert chk.max_speed_deg_s == pytest.approx(speed, rel=0.05)
        assert chk.too_fast is fast
