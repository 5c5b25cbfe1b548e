"""The second user review of `poise solve doggy`: physically impossible fits and open-loop misses warned about,
unusable recordings (stuck channel, degrees, too short, no command) refused before the fit, rotations in rad in
the result file, --plot a directory whose stale figures are not left behind, --json without --out."""

import contextlib
import dataclasses
import io
import json
import math

import numpy as np
import pytest
from conftest import one_line_error

from formats.doggy_recording import DoggyRecording, write_csv
from formats.errors import IdentifiabilityError
from identify import doggy as dg
from identify import slom
from identify.doggy_sim import SimConfig, simulate
from poise.cli import main
from poise.cmd_solve import VERIFY_WARN, fit_warnings
from trajectories.doggy_excitation import make_plan


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _synthetic(n: int = 1500, rest: int = 1000, seed: int = 0) -> DoggyRecording:
    """A recording that passes the reader (noisy channels, 1 kHz, commands after `rest` samples) but is no
    experiment: for the checks that refuse before any fit."""
    rng = np.random.default_rng(seed)
    u = np.zeros((n, 3))
    u[rest:] = 0.1
    noise = lambda s: rng.normal(0.0, s, (n, 3))  # noqa: E731
    return DoggyRecording(np.arange(n) * 1e-3, u, noise(1e-3), noise(2e-3), noise(2e-3), np.zeros(3))


def _refused(tmp_path, capsys, rec: DoggyRecording) -> str:
    path, out = tmp_path / "rec.csv", tmp_path / "r.json"
    write_csv(rec, path)
    err = one_line_error(capsys, ["solve", "doggy", "--data", str(path), "--out", str(out)])
    assert not out.exists()
    return err


@pytest.fixture(scope="module")
def stuck_midway(tmp_path_factory):
    """A 4 s simulated recording whose encoder 2 sticks halfway (the channel still changes, so it is fitted):
    exit code, stderr and result. The fit converges to negative k_pwm, b, ... and misses θ̇ open loop."""
    d = tmp_path_factory.mktemp("stuck")
    rec = simulate(SimConfig(duration=4.0, seed=3), make_plan(4.0, 3)).recording
    theta = rec.theta.copy()
    theta[rec.n // 2 :, 1] = theta[rec.n // 2, 1]
    write_csv(dataclasses.replace(rec, theta=theta), d / "rec.csv")
    code, _, err = _run(["solve", "doggy", "--data", str(d / "rec.csv"), "--out", str(d / "r.json")])
    return code, err, json.loads((d / "r.json").read_text())


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    """`solve doggy --simulate 4 --seed 3 --json --plot DIR --force` without --out, into a directory holding an
    earlier run's figures and an unrelated image: exit code, stdout, stderr, the directory."""
    figs = tmp_path_factory.mktemp("good") / "figs"
    figs.mkdir()
    for name in (
        "doggy_verification_1.png",
        "doggy_verification_3.png",
        "doggy_verification_12.png",
        "mine.png",
    ):
        (figs / name).write_text("earlier")
    code, out, err = _run(["solve", "doggy", "--simulate", "4", "--seed", "3", "--json", "--plot", str(figs),
                           "--force"])  # fmt: skip
    return code, out, err, figs


# 1a. estimates that must be positive


def _report_with(estimates: dict[str, float]) -> dict:
    rows = [{"name": k, "unit": "u", "estimate": v} for k, v in estimates.items()]
    return {"converged": True, "residuals": [], "parameters": rows}


def test_a_negative_belt_stiffness_is_warned_and_a_positive_one_not():
    units = dict(zip(dg.PHYS_NAMES, dg.ROBOT.phys_units, strict=True))
    rows = lambda k_s1: [{"name": n, "unit": units[n], "estimate": k_s1 if n == "k_s1" else 1.0}  # noqa: E731
                         for n in dg.PHYS_NAMES]  # fmt: skip
    (note,) = fit_warnings({"converged": True, "residuals": [], "parameters": rows(-12.5)})
    assert "physically impossible" in note and "k_s1 -12.5 N·m/rad" in note and "k_s2" not in note
    assert fit_warnings({"converged": True, "residuals": [], "parameters": rows(400.0)}) == []


def test_what_must_be_positive_is_marked_in_doggys_description(monkeypatch):
    from formats.errors import DataError

    par = dg.ROBOT.model.extra["flexible_joints"]["parameters"]
    flags = [n != "k_s1" for n in dg.PHYS_NAMES]  # a description that lets k_s1 take any sign
    monkeypatch.setitem(par, "positive", flags)
    assert "k_s1" not in dg.must_be_positive() and "k_s2" in dg.must_be_positive()
    est = {"k_s1": -12.5, "k_s2": -1.0}
    (note,) = fit_warnings(_report_with(est))
    assert "k_s2 -1" in note and "k_s1" not in note
    monkeypatch.setitem(par, "positive", flags[:-1])
    with pytest.raises(DataError, match="positive: expected 12 true/false flags"):
        dg.must_be_positive()


def test_nonpositive_estimates_are_named_and_others_not():
    est = {"k_pwm": -1.38, "b": -2.0, "mu_fm1": 0.0, "k_s2": 2.5, "k_mi": float("nan"), "bias1_x": -0.02}
    (note,) = fit_warnings(_report_with(est))
    assert "physically impossible" in note
    assert "k_pwm -1.38" in note and "b -2" in note and "mu_fm1 0" in note and "k_mi nan" in note
    assert "k_s2" not in note and "bias1_x" not in note
    assert fit_warnings(_report_with({"k_pwm": 4.69, "b": 2.43, "bias1_x": -0.02})) == []


# 1b. the open-loop verification against what noise and the fit explain


def _verification_report(got: list[float], floor: list[float]) -> dict:
    return {"converged": True, "residuals": [], "verification_rmse": {"theta_dot": got},
            "verification_explained_rmse": {"theta_dot": floor}}  # fmt: skip


def test_open_loop_miss_is_warned_per_axis():
    floor = [0.0108, 0.0103, 0.0107]
    assert fit_warnings(_verification_report([0.0116, 0.011, 0.0114], floor)) == []  # the simulated 10 s run
    (note,) = fit_warnings(_verification_report([0.376, 0.426, 0.0114], floor))  # the stuck encoder
    assert "open-loop verification misses" in note and "axis 1 0.376 rad/s" in note and "axis 2 0.426" in note
    assert "axis 3" not in note and f"{0.426 / 0.0103:.3g}×" in note and f"above {VERIFY_WARN:g}×" in note
    assert fit_warnings(_verification_report([VERIFY_WARN * 0.0099] * 3, [0.01] * 3)) == []


def test_encoder_stuck_midway_warns_on_signs_and_verification(stuck_midway):
    code, err, rep = stuck_midway
    # the stalled fit leans on weak directions (the rank analysis under the solve's own weights): not converged
    assert (
        code == 1
        and not rep["converged"]
        and rep["reason"].startswith("stalled")
        and rep["weakly_determined"]
    )
    assert all(b["chi2_per_dof"] < 100 for b in rep["residuals"])  # the χ² warning alone would not catch it
    neg = {r["name"] for r in rep["parameters"] if r["estimate"] <= 0 and r["name"] in dg.must_be_positive()}
    assert {"k_pwm", "b"} <= neg
    (signs,) = [w for w in rep["warnings"] if "physically impossible" in w]
    assert all(f"{n} " in signs for n in neg)
    (miss,) = [w for w in rep["warnings"] if "open-loop verification misses" in w]
    assert "axis 2" in miss
    got, floor = rep["verification_rmse"]["theta_dot"][1], rep["verification_explained_rmse"]["theta_dot"][1]
    assert got > VERIFY_WARN * floor
    assert "physically impossible" in err and "open-loop verification misses" in err


# 1c, 2. recordings the calibration cannot use are refused before the fit, naming the cause


def test_a_channel_that_never_changes_is_named(tmp_path, capsys):
    rec = _synthetic()
    rec.theta[:, 1] = 0.25
    rec.gyro2[:, 2] = 0.0
    err = _refused(tmp_path, capsys, rec)
    assert "theta2, w2z never change" in err and "stuck sensor" in err and "0.25" in err


def test_encoder_angles_in_degrees_are_named(tmp_path, capsys):
    rec = _synthetic()
    rec.theta[:, 0] = np.degrees(np.linspace(0.0, 1.0, rec.n)) + rec.theta[:, 0]
    err = _refused(tmp_path, capsys, rec)
    assert "theta1" in err and "degrees" in err and "rad" in err and "unobservable" not in err


def test_angles_within_reach_are_not_mistaken_for_degrees(tmp_path):
    rec = _synthetic()
    rec.theta[:, 0] = np.linspace(-3.1, 3.1, rec.n)  # within the joints' ±π
    dg.check_recording(rec)


def test_gyros_in_degrees_per_second_are_named_before_the_fit(tmp_path, capsys):
    rec = simulate(SimConfig(duration=4.0, seed=5), make_plan(4.0, 3)).recording
    dg.check_recording(rec)  # as simulated, in rad/s
    assert dg.gyro_excess(rec) < 1.5
    biased = dataclasses.replace(rec, gyro1=rec.gyro1 + 2.0, gyro2=rec.gyro2 - 2.0)  # biases are no motion
    assert dg.gyro_excess(biased) == pytest.approx(dg.gyro_excess(rec), rel=1e-3)
    degrees = dataclasses.replace(rec, gyro1=np.degrees(rec.gyro1), gyro2=np.degrees(rec.gyro2))
    err = _refused(tmp_path, capsys, degrees)
    assert "deg/s" in err and "rad/s" in err and "faster than the encoders" in err


def test_a_too_short_recording_is_named(tmp_path, capsys):
    err = _refused(tmp_path, capsys, _synthetic(n=20, rest=20))
    assert "0.019 s (20 samples) is too short" in err and "unobservable" not in err


def test_a_recording_without_any_command_is_named(tmp_path, capsys):
    err = _refused(tmp_path, capsys, _synthetic(rest=1500))
    assert "u1..u3 is 0 in every sample" in err and "k_pwm" in err


def test_unobservable_with_a_bias_window_asks_for_excitation_not_a_window():
    """The first 1.5 s of a 10 s experiment: 1 s at rest, 0.5 s of commands."""
    rec = simulate(SimConfig(duration=10.0, seed=0), make_plan(10.0, 0)).recording.slice(0, 1500)
    with pytest.raises(IdentifiabilityError) as exc:
        dg.calibrate(rec, solver=slom.Options(max_iter=30))
    msg = str(exc.value)
    assert "more excitation" in msg and "1 s at rest" in msg and "zero-command window" not in msg


# 3. rotations in rad in the result, degrees in the table


def test_result_gives_rotation_angles_in_rad_and_the_table_in_deg(good_run):
    code, out, err, _ = good_run
    assert code == 0
    rep = json.loads(out)
    rows = {r["name"]: r for r in rep["parameters"]}
    r2 = rows["R2 angle from nominal"]
    assert r2["unit"] == "rad" and 0.02 < r2["truth"] < 0.06  # the simulator's 2.36° misalignment
    assert r2["sigma"] < 0.01 and abs(r2["estimate"] - r2["truth"]) < 5 * r2["sigma"]
    assert rep["warnings"] == [] and "warning" not in err  # a good run warns about nothing
    assert all(x <= VERIFY_WARN * f for x, f in zip(rep["verification_rmse"]["theta_dot"],
                                                  rep["verification_explained_rmse"]["theta_dot"], strict=True))  # fmt: skip


def test_parameter_rows_default_to_degrees_for_other_callers():
    rec = simulate(SimConfig(duration=2.0, seed=4), make_plan(2.0, 4)).recording
    cal = dg.calibrate(rec, solver=slom.Options(max_iter=30))
    deg = {r["name"]: r for r in dg.parameter_rows(cal)}["R1 angle from nominal"]
    rad = {r["name"]: r for r in dg.parameter_rows(cal, angle_unit="rad")}["R1 angle from nominal"]
    assert deg["unit"] == "deg" and rad["unit"] == "rad"
    assert rad["estimate"] == pytest.approx(math.radians(deg["estimate"]), rel=1e-12)
    assert rad["sigma"] == pytest.approx(math.radians(deg["sigma"]), rel=1e-12)


# 4. --plot is a directory; an earlier run's figures are not left behind


def test_plot_given_a_figure_file_name_is_refused(tmp_path, capsys):
    target = tmp_path / "figs" / "foo.png"
    err = one_line_error(capsys, ["solve", "doggy", "--simulate", "2", "--plot", str(target), "--json"])
    assert "--plot takes a directory" in err and "doggy_verification_N.png" in err
    assert not target.exists() and not target.parent.exists()


def test_plot_with_force_removes_an_earlier_runs_extra_figures(good_run):
    _, out, _, figs = good_run
    assert json.loads(out)["figures"] == [str(figs / "doggy_verification_1.png")]
    assert (figs / "doggy_verification_1.png").read_bytes().startswith(b"\x89PNG")
    assert (
        not (figs / "doggy_verification_3.png").exists() and not (figs / "doggy_verification_12.png").exists()
    )
    assert (figs / "mine.png").read_text() == "earlier"  # only the figures this command writes


def test_plot_refuses_an_earlier_runs_extra_figures_without_force(tmp_path, capsys):
    stale = tmp_path / "doggy_verification_4.png"
    stale.write_text("earlier")
    err = one_line_error(capsys, ["solve", "doggy", "--simulate", "2", "--plot", str(tmp_path), "--json"])
    assert f"{stale} exists, from an earlier run" in err and "--force" in err
    assert stale.read_text() == "earlier"


# 5. --json prints the result; --out is then optional


def test_json_without_out_prints_the_result(good_run):
    code, out, *_ = good_run
    rep = json.loads(out)
    assert code == 0 and rep["samples"] == 4000 and rep["converged"]


def test_neither_out_nor_json_is_refused_with_the_reason(capsys):
    err = one_line_error(capsys, ["solve", "doggy", "--simulate", "2"])
    assert "--out FILE is needed for the result file (or --json" in err
