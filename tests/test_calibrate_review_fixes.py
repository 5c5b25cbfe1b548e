"""`poise calibrate` review fixes: degenerate or mis-scaled data refused or warned, options a recording would ignore
refused, result files in radians, clean one-line errors for malformed CSVs, no result left behind by a failed plot."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from formats.calibration_recording import (
    AccelRecording,
    DriveRecording,
    OffsetRecording,
    read_drive,
    write_accel,
    write_drive,
    write_offsets,
)
from formats.errors import DataError, IdentifiabilityError
from formats.pwm_plan import recommended, save_pwm_plan
from identify.accelerometer import AccelCalibration, check_excitation, plausibility_warnings
from identify.friction import MIN_BELOW_VS, FrictionFit, friction_torque, stribeck_notes

G = 9.81
STRIBECK = {"Kc": 0.85, "Kv": 1.2, "sigma+": 1.27, "sigma-": 1.95}
INERTIA = 0.06


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from poise.cli import main

    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


# --- synthetic recordings ----------------------------------------------------------------------------------


def _drive(path: Path, *, sign: float = 1.0, q_scale: float = 1.0, freq: float = 0.25) -> Path:
    """A 30 s motor-off recording at 100 Hz, q = sin(2π freq t) [rad] (0.25 Hz: |ω| ≤ 1.6 rad/s, |ω̇| ≤ 2.5
    rad/s²), tau = −f(ω) − I ω̇ with 0.01 N·m noise; `sign` −1 flips tau, `q_scale` 57.3 writes q in degrees."""
    t = np.arange(3000) / 100.0
    w0 = 2 * np.pi * freq
    q, w, wd = np.sin(w0 * t), w0 * np.cos(w0 * t), -(w0**2) * np.sin(w0 * t)
    tau = -friction_torque("stribeck", STRIBECK, w, 0.35) - INERTIA * wd
    tau += np.random.default_rng(1).normal(0, 0.01, len(t))
    write_drive(DriveRecording(t, np.zeros_like(t), q * q_scale, sign * tau, INERTIA), path)
    return path


def _accel_readings(directions: np.ndarray, scale: float = 1.0, seed: int = 0) -> AccelRecording:
    """Static readings r = o + C⁻¹ g·u per pose (10 rows each, 0.02 m/s² noise), `scale` 1/9.81 for g units."""
    o, C = np.array([0.25, -0.8, -0.12]), np.diag([1.01, 0.985, 0.98])
    u = directions / np.linalg.norm(directions, axis=1, keepdims=True)
    r = o + (G * u) @ np.linalg.inv(C).T
    rows = np.repeat(r, 10, axis=0) + np.random.default_rng(seed).normal(0, 0.02, (10 * len(r), 3))
    pose = np.repeat(np.arange(len(r)), 10)
    return AccelRecording(pose, rows * scale, np.zeros(len(pose), int))


def _sphere_directions(n: int = 30) -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.normal(size=(n, 3))


@pytest.fixture(scope="module")
def arm():
    from robots.registry import get_model

    return get_model("icub-right-arm")


def _offsets_file(path: Path, arm, n: int, *, t_scale: float = 1.0, acc_scale: float = 1.0) -> Path:
    from identify.encoder_offsets import default_sensors
    from identify.sensor_sim import simulate_offsets

    sensors = default_sensors(arm)
    q, acc, _ = simulate_offsets(arm, sensors, np.zeros(arm.nq), n=n, rate_hz=1000, speed_deg_s=4, seed=2)
    t = np.arange(n) / 1000.0 * t_scale
    write_offsets(OffsetRecording("icub-right-arm", arm.joint_names, sensors, q, acc * acc_scale, t), path)
    return path


# --- 1. accelerometer --------------------------------------------------------------------------------------


def test_accelerometer_refuses_poses_in_one_plane_and_names_the_axis(tmp_path, capsys):
    d = _sphere_directions()
    d[:, 2] = 0.0  # gravity only ever in the sensor's x–y plane
    write_accel(_accel_readings(d), tmp_path / "planar.csv")
    rc, out, err = _cli(["calibrate", "accelerometer", tmp_path / "planar.csv"], capsys)
    assert rc == 2 and out == ""
    assert "one plane" in err and "sensor z axis" in err and "Traceback" not in err


def test_accelerometer_refuses_identical_readings():
    r = np.tile([0.2, 9.5, 0.3], (35, 1))
    with pytest.raises(IdentifiabilityError, match="same reading"):
        check_excitation(r)
    check_excitation(_accel_readings(_sphere_directions()).a)  # a full sphere passes


@pytest.mark.parametrize(
    ("change", "message"),
    [("fraction", "column 'pose' must hold integers"), ("g", "look like g: multiply by 9.81")],
)
def test_accelerometer_refuses_fractional_poses_and_readings_in_g(tmp_path, capsys, change, message):
    rec = _accel_readings(_sphere_directions(), scale=1 / G if change == "g" else 1.0)
    path = tmp_path / "acc.csv"
    write_accel(rec, path)
    if change == "fraction":
        text = path.read_text().replace("\n1,", "\n1.5,", 1)
        path.write_text(text)
    rc, _, err = _cli(["calibrate", "accelerometer", path], capsys)
    assert rc == 2 and message in err, err


def test_accelerometer_result_has_units_residual_and_no_warnings_on_good_data(tmp_path, capsys):
    write_accel(_accel_readings(_sphere_directions()), tmp_path / "acc.csv")
    rc, out, err = _cli(["calibrate", "accelerometer", tmp_path / "acc.csv", "--json"], capsys)
    assert rc == 0 and err == ""
    doc = json.loads(out)
    assert doc["units"]["ox"] == "m/s²" and doc["units"]["gxx"] == "-"
    assert doc["warnings"] == []
    assert doc["methods"]["ellipsoid"]["rms_m_s2"] < 0.05
    rc, out, _ = _cli(["calibrate", "accelerometer", tmp_path / "acc.csv"], capsys)
    assert "rms [m/s²]" in out


def test_implausible_accelerometer_calibration_is_named():
    bad = AccelCalibration(np.array([0.0, 0.0, 1182.0]), np.diag([0.05, 0.05, 1.0]), 0.01, "ellipsoid")
    notes = plausibility_warnings(bad)
    assert any("exceeds g/2" in n for n in notes) and any("gains" in n for n in notes)
    assert plausibility_warnings(AccelCalibration(np.zeros(3), np.eye(3), 0.02, "ellipsoid")) == []


# --- 2. friction -------------------------------------------------------------------------------------------


def test_friction_refuses_sign_flipped_torque_naming_the_convention(tmp_path, capsys):
    rec = _drive(tmp_path / "flip.csv", sign=-1.0)
    rc, out, err = _cli(["calibrate", "friction", rec, "--model", "coulomb-viscous", "--json"], capsys)
    assert rc == 2
    assert "opposite sign" in err and "child link" in err
    assert json.loads(out)["ok"] is False


def test_friction_on_good_stribeck_data_gives_no_warnings(tmp_path, capsys):
    # 0.15 Hz: reversals slow enough (|ω̇| 0.9 rad/s²) for many samples below v_s (the Stribeck note counts them)
    rec = _drive(tmp_path / "good.csv", freq=0.15)
    rc, out, err = _cli(["calibrate", "friction", rec, "--model", "stribeck", "--json"], capsys)
    assert rc == 0 and err == ""
    doc = json.loads(out)
    assert doc["warnings"] == []
    assert doc["fits"][0]["params"]["Kc"] == pytest.approx(0.85, rel=0.05)


def test_friction_refuses_q_in_degrees_naming_the_unit(tmp_path, capsys):
    rec = _drive(tmp_path / "deg.csv", q_scale=np.degrees(1.0), freq=0.07)  # most samples too fast
    rc, out, err = _cli(["calibrate", "friction", rec, "--model", "coulomb-viscous"], capsys)
    assert (
        rc == 2 and out == "" and "degrees" in err and "radians" in err and len(err.strip().splitlines()) == 1
    )
    faster = _drive(tmp_path / "deg_fast.csv", q_scale=np.degrees(1.0))
    rc, _, err = _cli(["calibrate", "friction", faster, "--model", "coulomb-viscous"], capsys)
    assert rc == 2 and "degrees" in err and "radians" in err


def test_friction_warns_on_negative_static_friction_and_unsupported_stribeck_velocity(tmp_path, capsys):
    from identify.friction import check_signs

    fit = FrictionFit(
        "stribeck", {"Kc": 0.5, "Kv": 0.3, "sigma+": 0.52, "sigma-": -3.9}, {}, 0.0152, False, 1, 0, 0.0, 1.0
    )
    notes = check_signs(fit) + stribeck_notes(fit, np.array([0.022, -0.03, 1.0]), (0.005, 0.75))
    assert any("sigma- = -3.9" in n and "impossible" in n for n in notes), notes
    assert any("below v_s" in n for n in notes), notes
    edge = stribeck_notes(fit, np.array([0.01, 1.0]), (0.014, 0.75), at_end=True)
    assert any("end of its search range" in n for n in edge), edge
    good = FrictionFit("stribeck", STRIBECK, {}, 0.35, False, 1, 0, 0.0, 1.0)
    w = np.append(np.linspace(0.03, 0.34, MIN_BELOW_VS), 1.5)  # enough samples below v_s = 0.35
    assert check_signs(good) == [] and stribeck_notes(good, w, (0.005, 0.75)) == []


# --- 3. / 7. encoder offsets -------------------------------------------------------------------------------


def test_encoder_offsets_too_short_is_a_one_line_error(tmp_path, arm, capsys):
    path = _offsets_file(tmp_path / "short.csv", arm, 100)
    rc, _, err = _cli(["calibrate", "encoder-offsets", path], capsys)
    assert rc == 2 and "too short" in err and "short.csv" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("kw", "message"), [({"t_scale": 1000.0}, "is t in seconds?"), ({"acc_scale": 1 / G}, "look like g")]
)
def test_encoder_offsets_refuse_ms_stamps_and_accelerations_in_g(tmp_path, arm, capsys, kw, message):
    path = _offsets_file(tmp_path / "units.csv", arm, 300, **kw)
    rc, _, err = _cli(["calibrate", "encoder-offsets", path], capsys)
    assert rc == 2 and message in err, err


# --- 4. pwm-gain on a moving link --------------------------------------------------------------------------


def test_fixture_fit_of_a_moving_link_recording_is_refused(tmp_path, capsys):
    rec = _drive(tmp_path / "free.csv")
    rc, _, err = _cli(["calibrate", "pwm-gain", rec], capsys)
    assert rc == 2 and "the link moved" in err and "--link free" in err


# --- 5. options a recording or a fixture would ignore ------------------------------------------------------


@pytest.fixture
def files(tmp_path):
    drive = _drive(tmp_path / "drive.csv")
    plan = tmp_path / "fixture_plan.json"
    save_pwm_plan(recommended(link="fixture"), plan)
    fric = tmp_path / "fric.json"
    fric.write_text("{}")
    return {"drive": drive, "plan": plan, "fric": fric, "dir": tmp_path}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["friction", "{drive}", "--save-recording", "{dir}/x.csv"], "--save-recording writes the simulated"),
        (["friction", "{drive}", "--seed", "3"], "--seed seeds the simulation: not with a recording"),
        (["accelerometer", "{drive}", "--seed", "3"], "--seed seeds the simulation"),
        (["encoder-offsets", "{drive}", "--robot", "tulip"], "--robot picks the simulated robot"),
        (["pwm-gain", "{drive}", "--friction", "{fric}"], "--friction compensates a moving link's friction"),
        (["pwm-gain", "--simulate", "--inertia", "0.1"], "--inertia is the moving link's"),
        (["pwm-gain", "--simulate", "--link", "free", "--plan", "{plan}"], "its 'link' is 'fixture'"),
    ],
)
def test_options_that_would_be_ignored_are_refused(files, capsys, argv, message):
    rc, _, err = _cli(["calibrate", *(a.format(**files) for a in argv)], capsys)
    assert rc == 2 and message in err, err
    assert not (files["dir"] / "x.csv").exists()


# --- 6. result files in radians ----------------------------------------------------------------------------


def test_encoder_offset_result_rows_are_in_radians():
    from identify.encoder_offsets import OffsetFit, SpeedCheck

    fit = OffsetFit(
        ["a", "b"], np.radians([1.0, -2.0]), 0.02, 0.1, [], np.radians([[1.1, -2.0], [0.9, -2.0]])
    )
    doc = fit.as_dict(truth=np.radians([1.0, -1.0]), reference=np.radians([0.0, 0.0]))
    row = doc["joints"][1]
    assert row["offset_rad"] == pytest.approx(np.radians(-2.0)) and row["gap_rad"] == pytest.approx(
        -np.radians(1)
    )
    assert doc["joints"][0]["bucket_mean_rad"] == pytest.approx(np.radians(1.0))
    assert not [k for r in doc["joints"] for k in r if k.endswith("_deg")] and "mean_angle_rad" in doc
    speed = SpeedCheck(4.0, 8.0, 0.5, 0.01).as_dict()
    assert speed["max_speed_rad_s"] == pytest.approx(np.radians(4.0)) and speed["too_fast"] is False


def test_large_offset_residual_is_warned():
    from identify.encoder_offsets import OffsetFit

    notes = OffsetFit(["a"], np.zeros(1), 5.09, 30.0, ["a"]).warnings(20.0)
    assert any("m/s²" in n and "residual" in n for n in notes) and any("bound" in n for n in notes)
    assert OffsetFit(["a"], np.zeros(1), 0.021, 0.1, []).warnings(20.0) == []


# --- 8. CSV messages ---------------------------------------------------------------------------------------


def test_header_only_csv_gives_the_error_without_a_numpy_warning(tmp_path):
    path = tmp_path / "hdr.csv"
    path.write_text("# inertia: 0.06\nt,pwm,q,tau\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "input contained no data" would raise here
        with pytest.raises(DataError, match="no data rows"):
            read_drive(path)


def test_a_byte_order_mark_is_accepted(tmp_path):
    good = _drive(tmp_path / "good.csv")
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + good.read_bytes().replace(b"\n", b"\r\n"))
    assert np.array_equal(read_drive(bom).tau, read_drive(good).tau)


def test_ragged_rows_name_the_line_and_its_count(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("# inertia: 0.06\nt,pwm,q,tau\n0,0,0,0\n0.01,0,0\n")
    with pytest.raises(DataError, match=r"line 4 has 3 values, the header has 4 columns"):
        read_drive(path)


# --- 9. a failed plot leaves no result -----------------------------------------------------------------------


def test_a_failed_plot_writes_no_result_and_prints_only_the_error_json(tmp_path, capsys):
    rec = _drive(tmp_path / "drive.csv")
    out = tmp_path / "po.json"
    argv = ["calibrate", "friction", rec, "--model", "coulomb-viscous", "--out", out, "--plot", "/proc/x.png"]
    rc, stdout, _ = _cli([*argv, "--json"], capsys)
    assert rc == 2 and not out.exists()
    doc = json.loads(stdout)  # one JSON document: the error only
    assert doc["ok"] is False and "x.png" in doc["error"]
