"""What a user review of the dynamic workflow found: a design IPOPT did not finish, or whose motion leaves base
parameters unexcited, said so; options of another kind of design refused instead of ignored; the identification's
title naming its recording and its residuals their rows and units; time stamps in ms caught; run.json problems and
other files named as plans told in words."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from conftest import UR5

from drivers.emulators.mujoco_arm import ArmImperfections, arm_efforts
from formats.dynamic_recording import DynamicRecording, read_dynamic_recording, write_dynamic_recording
from formats.errors import DataError
from poise.cli import main
from poise.cmd_plan_trajectory import design_notes
from robots.params_io import resolve_params
from robots.registry import get_model
from trajectories.excitation import ExcitationResult
from trajectories.fourier import FourierTrajectory
from trajectories.verify import sample_grid, unexcited_columns

PLAN = "tests/data/ur5_6s.json"


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """A 10 s UR5 motion, its efforts from MuJoCo's inverse dynamics with friction (independent of poise's)."""
    model = get_model(str(UR5))
    rng = np.random.default_rng(3)
    traj = FourierTrajectory(5.0, 10.0, np.array([0.0, -1.2, 1.2, -1.5, -1.5, 0.0]),
                             rng.normal(0.0, 0.5, (6, 3)), rng.normal(0.0, 0.5, (6, 3)))  # fmt: skip
    t = sample_grid(traj, 1.0 / 200.0)
    q, qd, qdd = traj.sample(t)
    qm, tau = arm_efforts(
        model, resolve_params("urdf", model), q, qd, qdd, ArmImperfections(viscous=0.3, coulomb=0.8)
    )
    tau = tau + np.random.default_rng(0).normal(0.0, 0.02, tau.shape)
    path = tmp_path_factory.mktemp("rec") / "recording.csv"
    rec = DynamicRecording(model.name, model.root, list(model.joint_names), t, qm, tau,
                           meta={"robot_source": str(UR5)})  # fmt: skip
    write_dynamic_recording(rec, path)
    return path


def test_the_table_names_the_recording_and_its_residuals_their_joints_and_units(recording, capsys):
    assert main(["identify", "dynamic", str(recording), "--reference", "urdf"]) == 0
    out = capsys.readouterr().out
    # was "from run.json twin_joints" whenever --reference was given
    assert f"dynamic base parameters from {recording}" in out.replace("\n", "")
    assert "twin_joints" not in out
    line = next(x for x in out.splitlines() if "residual RMS" in x)
    assert re.search(r"shoulder_pan_joint \d\S* N·m", line), line


def test_a_prior_without_essential_is_refused(recording, capsys):
    assert main(["identify", "dynamic", str(recording), "--prior", "urdf"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--essential" in err


def test_time_stamps_in_ms_are_caught(recording, tmp_path, capsys):
    rec = read_dynamic_recording(recording)
    with pytest.raises(DataError, match="in ms"):
        DynamicRecording(rec.robot, rec.base, rec.joint_names, rec.t * 1000, rec.q, rec.tau, meta=rec.meta)
    text = recording.read_text(encoding="utf-8").splitlines()
    head = [x for x in text if x.startswith("#")]
    rows = [x for x in text if not x.startswith("#")]
    cols = rows[0].split(",")
    assert cols[0] == "t_s"
    scaled = [rows[0]] + [
        ",".join([f"{float(r.split(',')[0]) * 1000:.6f}", *r.split(",")[1:]]) for r in rows[1:]
    ]
    ms = tmp_path / "ms.csv"
    ms.write_text("\n".join(head + scaled) + "\n", encoding="utf-8")
    assert main(["identify", "dynamic", str(ms)]) == 2
    err = capsys.readouterr().err
    assert "ms.csv" in err and "in ms" in err


def test_a_run_json_missing_or_broken_is_told_in_words(recording, tmp_path, capsys):
    rec = tmp_path / "recording.csv"
    shutil.copy(recording, rec)
    cases = [(None, "is not there"), ('{"plan": ', "is not valid JSON"), ('{"x": 1}', "names no plan"),
             ("[1]", "is not a run's record")]  # fmt: skip
    for text, says in cases:
        if text is not None:
            (tmp_path / "run.json").write_text(text, encoding="utf-8")
        assert main(["identify", "dynamic", str(rec), "--instruments"]) == 2
        err = capsys.readouterr().err
        assert says in err and "Error" not in err, err


def test_another_file_named_as_a_plan(tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"plan": "p.json", "status": "completed"}), encoding="utf-8")
    for cmd in (["plan", "check", str(run)], ["plan", "show", str(run), "--out", str(tmp_path / "x.png")]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert "posture plans" in err and "trajectory plans" in err, err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--waypoints", "1"], "--waypoints"),
        (["--waypoints", "4", "--harmonics", "2"], "--harmonics applies to a Fourier design"),
        (["--lift", "0.05"], "--lift applies to --single-support"),
        (["--load-share", "0.2"], "--load-share applies to --double-support"),
    ],
)
def test_options_of_another_kind_of_design_are_refused(extra, says, tmp_path, capsys):
    out = tmp_path / "t.json"
    argv = ["plan", "trajectory", str(UR5), "--out", str(out), "--duration", "4", "--period", "4", *extra]
    assert main(argv) == 2
    assert says in capsys.readouterr().err
    assert not out.exists()


def _result(status: str, unexcited: list[str], with_prior: float | None = None) -> ExcitationResult:
    return ExcitationResult(None, 10.0, 5.0, 0.0, 7, 1.0, status, ["ϑ1", "ϑ2"],
                            verification={"ok": True, "unexcited": unexcited}, kappa_with_prior_scaled=with_prior)  # fmt: skip


def test_a_design_says_when_ipopt_stopped_early_or_its_motion_leaves_parameters_unexcited():
    assert design_notes(_result("Solve_Succeeded", []), False) == []
    (note,) = design_notes(_result("Maximum_Iterations_Exceeded", []), False)
    assert "Maximum_Iterations_Exceeded" in note and "--max-iter" in note
    (note,) = design_notes(_result("Solve_Succeeded", ["ϑ2"]), False)
    assert "does not excite 1 base parameter" in note and "ϑ2" in note
    # designed to complete prior runs that take the rest: their combined regressor has full rank
    assert design_notes(_result("Solve_Succeeded", ["ϑ2"], with_prior=40.0), True) == []
    assert design_notes(_result("Solve_Succeeded", ["ϑ2"], with_prior=float("inf")), True)


def test_unexcited_columns_are_the_dependent_ones_whatever_their_units():
    rng = np.random.default_rng(1)
    W = rng.normal(size=(200, 4)) * np.array([1.0, 1e4, 1e-3, 1.0])
    assert unexcited_columns(W) == []
    W[:, 3] = 2.0 * W[:, 0] / 1.0 + 1e-4 * W[:, 1]  # a combination of two others
    names = unexcited_columns(W)
    assert len(names) == 1 and names[0] in ("ϑ1", "ϑ2", "ϑ4")
    W[:, 2] = 0.0  # not moved at all
    assert "ϑ3" in unexcited_columns(W) and len(unexcited_columns(W)) == 2


def test_plan_check_warns_of_unexcited_parameters_and_shows_the_load_share(tmp_path, capsys):
    plan = json.loads(open("tests/data/tulip_double_support_10s.json", encoding="utf-8").read())
    assert main(["plan", "check", "tests/data/tulip_double_support_10s.json", "--json"]) == 0
    check = json.loads(capsys.readouterr().out)
    assert check["unexcited"] == [] and check["ok"]
    assert main(["plan", "check", "tests/data/tulip_double_support_10s.json"]) == 0
    assert "other sole's share of the load" in capsys.readouterr().out
    # the same plan standing still: every coefficient of its motion zero, nothing but the rest posture
    coeffs = plan["trajectory"]
    _zero_motion(coeffs)
    still = tmp_path / "still.json"
    still.write_text(json.dumps(plan), encoding="utf-8")
    main(["plan", "check", str(still), "--json"])
    check = json.loads(capsys.readouterr().out)
    assert len(check["unexcited"]) > 10, check["unexcited"]


def _zero_motion(node) -> None:
    """Zero a trajectory document's Fourier coefficients (keys a and b), wherever they are nested."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("a", "b") and isinstance(v, list):
                node[k] = np.zeros(np.shape(v)).tolist()
            else:
                _zero_motion(v)
    elif isinstance(node, list):
        for v in node:
            _zero_motion(v)


def test_forecast_refuses_a_recording_rate_too_slow_for_the_motion(capsys):
    assert main(["plan", "forecast", PLAN, "--noise", "0.1", "--rate-hz", "1"]) == 2
    assert "too slow" in capsys.readouterr().err
    assert main(["plan", "forecast", PLAN, "--noise", "0.1", "--rate-hz", "2"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "above half the sample rate" in err


def test_forecast_lists_the_friction_ses(capsys):
    assert main(["plan", "forecast", PLAN, "--noise", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "friction SE" in out and "fv@shoulder_pan_joint" in out and "N·m·s/rad" in out


def test_a_cut_off_error_names_its_cause(recording, capsys):
    # a high cut-off raises the speed under which friction's rows are dropped: that, not the length, is the cause
    assert main(["identify", "dynamic", str(recording), "--cutoff-hz", "60"]) == 2
    err = capsys.readouterr().err
    assert "dropped" in err and "velocity reversals" in err and "--no-friction" in err, err
    assert main(["identify", "dynamic", str(recording), "--cutoff-hz", "60", "--no-friction"]) == 0
    capsys.readouterr()
    # a recording without gaps too short for its cut-off is not said to have gaps
    assert main(["identify", "dynamic", str(recording), "--cutoff-hz", "0.01"]) == 2
    err = capsys.readouterr().err
    assert "too short for a 0.01 Hz cut-off" in err and "gap" not in err, err


def test_a_malformed_trajectory_is_named_by_its_plan_file(tmp_path, capsys):
    plan = json.loads(open(PLAN, encoding="utf-8").read())
    plan["trajectory"]["duration_s"] = -6.0
    bad = tmp_path / "bad_traj.json"
    bad.write_text(json.dumps(plan), encoding="utf-8")
    for cmd in (["plan", "check", str(bad)], ["plan", "forecast", str(bad), "--noise", "0.1"]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert f"{bad}: trajectory: " in err and len(err.strip().splitlines()) == 1, err


def test_a_jittered_time_stamp_is_named(recording):
    """A sample stamped 30 % of a step late (a jitter, not a gap: under 1.5 steps) is refused at its time."""
    from identify.dynamic import DynamicEstimator

    rec = read_dynamic_recording(recording)
    t = rec.t.copy()
    t[100] += 0.3 * (t[1] - t[0])
    bad = DynamicRecording(rec.robot, rec.base, rec.joint_names, t, rec.q, rec.tau, meta=rec.meta)
    with pytest.raises(DataError, match=rf"the step after t = {t[99]:.6g} s is .* resample"):
        DynamicEstimator(get_model(str(UR5))).fit(bad)
