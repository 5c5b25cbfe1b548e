"""`identify dynamic` on bad input: each refusal one line, exit 2, naming the file and saying what to do — a damaged
run.json beside a recording, a recording that does not excite the parameters (its still joint named), recordings
of two rates, format accidents (Latin-1, a trailing comma, a missing q: column), a plan or a folder given for a
recording or a plan for --reference; on success, --json says "ok": true; --help gives the recording's units."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from conftest import UR5, one_line_error

from drivers.emulators.mujoco_arm import ArmImperfections, arm_efforts
from formats.dynamic_recording import DynamicRecording, write_dynamic_recording
from poise.cli import build_parser, main
from robots.registry import get_model
from trajectories.fourier import FourierTrajectory

Q0 = np.array([0.0, -1.2, 1.4, -1.6, -1.5, 0.0])


def _recording(model, rate_hz: float, frozen: int | None = None, seconds: float = 10.0) -> DynamicRecording:
    """A UR5 Fourier motion (the twin's efforts, a little noise); `frozen`: that joint held still."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.0, 0.5, (6, 3)), rng.normal(0.0, 0.5, (6, 3))
    if frozen is not None:
        a[frozen] = b[frozen] = 0.0
    traj = FourierTrajectory(5.0, seconds, Q0, a, b)
    t = np.arange(int(seconds * rate_hz) + 1) / rate_hz
    q, qd, qdd = traj.sample(t)
    qm, tau = arm_efforts(
        model, model.parameter_set("urdf"), q, qd, qdd, ArmImperfections(viscous=0.3, coulomb=0.8)
    )
    tau = tau + np.random.default_rng(1).normal(0.0, 0.02, tau.shape)
    return DynamicRecording(model.name, model.root, list(model.joint_names), t, qm, tau,
                            meta={"robot_source": str(UR5), "motion_band_hz": "0.6"})  # fmt: skip


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad_input")
    model = get_model(str(UR5))
    good = d / "good.csv"
    write_dynamic_recording(_recording(model, 200.0), good)
    slow = d / "slow.csv"
    write_dynamic_recording(_recording(model, 100.0), slow)
    frozen = d / "frozen.csv"
    write_dynamic_recording(_recording(model, 200.0, frozen=5), frozen)
    return {"dir": d, "good": good, "slow": slow, "frozen": frozen, "model": model}


def _lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _run_folder(files, name: str, run_json: str) -> str:
    """A `poise run`-like folder: the good recording beside a run.json with this text."""
    folder = files["dir"] / name
    folder.mkdir(exist_ok=True)
    shutil.copy(files["good"], folder / "recording.csv")
    (folder / "run.json").write_text(run_json, encoding="utf-8")
    return str(folder / "recording.csv")


STOPPED = {"status": "stopped: interrupted", "plan": "plan.json", "plan_sha256": "0" * 64, "rate_hz": 200.0,
           "ticks_planned": 4001, "ticks_streamed": 2001, "duration_s": 20.0}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("truncated", json.dumps(STOPPED)[:-20], "is not valid JSON"),
        ("listed", json.dumps([STOPPED]), "is not a run's record (not a JSON object"),
        ("typed", json.dumps(STOPPED | {"status": 3}), "is damaged (status is a number, not a string)"),
    ],
)
def test_a_damaged_run_json_is_refused_naming_it(files, capsys, name, text, why):
    """Item 1: a stopped run's run.json, damaged, no longer lets the recording be fitted as a whole run."""
    rec = _run_folder(files, name, text)
    err = one_line_error(capsys, ["identify", "dynamic", rec])
    run_json = str(files["dir"] / name / "run.json")
    assert f"{run_json}, {why}" in err, err
    for said in ("status", "--partial", "tare", "late ticks", "repair it", "move it away"):
        assert said in err, err


def test_an_intact_stopped_run_is_still_refused_and_a_missing_run_json_is_not(files, capsys):
    """Item 1's bounds: the intact run.json's refusal stands; without a run.json the recording is read alone (the
    refusal here is the fit's own, for a rate it asks for, not a run's)."""
    rec = _run_folder(files, "intact", json.dumps(STOPPED))
    err = one_line_error(capsys, ["identify", "dynamic", rec])
    assert "its run stopped before the plan's end" in err and "--partial" in err, err
    err = one_line_error(capsys, ["identify", "dynamic", str(files["good"]), "--cutoff-hz", "0.001"])
    assert "run.json" not in err, err


def test_an_unexcited_recording_names_itself_its_still_joint_and_the_parameters_in_order(files, capsys):
    """Item 2: the refusal names the file and the joint that never moves, the parameters in the model's order."""
    err = one_line_error(capsys, ["identify", "dynamic", str(files["frozen"])])
    assert f"error: {files['frozen']}: wrist_3_joint does not move (q:wrist_3_joint spans 0 rad" in err, err
    m = re.search(r"does not excite (\d+) parameter\(s\): ([^(]*?) \(", err)
    assert m, err
    named = m.group(2).split(", ")
    assert int(m.group(1)) == len(named)
    base = [int(s[1:]) for s in named if s.startswith("ϑ")]
    assert base == sorted(base) and len(base) >= 2, named
    friction = named[len(base) :]
    assert friction == ["fv@wrist_3_joint", "fc@wrist_3_joint"], named
    # a moving recording that the rank test refuses names no still joint
    err = one_line_error(capsys, ["identify", "dynamic", str(files["good"]), "--cutoff-hz", "40"])
    assert "does not move" not in err, err


def test_two_rates_are_named_by_file(files, capsys):
    """Item 2: which recording has which rate."""
    err = one_line_error(capsys, ["identify", "dynamic", str(files["good"]), str(files["slow"])])
    assert f"{files['good']} 200 Hz, {files['slow']} 100 Hz" in err, err


def test_format_accidents_say_what_happened(files, capsys):
    """Item 3: a Latin-1 byte, a trailing comma on every row, efforts without their q: column."""
    lines = _lines(files["good"])
    latin = files["dir"] / "latin1.csv"
    latin.write_bytes(("\n".join(lines[:2]) + "\n# operator: Müller\n").encode("latin-1")
                      + ("\n".join(lines[2:]) + "\n").encode())  # fmt: skip
    err = one_line_error(capsys, ["identify", "dynamic", str(latin)])
    assert f"{latin}, line 3: byte 0xfc is not UTF-8" in err and "save the file as UTF-8" in err, err
    header = next(k for k, line in enumerate(lines) if not line.startswith("#"))
    trail = files["dir"] / "trail.csv"
    trail.write_text("\n".join(x if x.startswith("#") else x + "," for x in lines) + "\n", encoding="utf-8")
    err = one_line_error(capsys, ["identify", "dynamic", str(trail)])
    assert f"{trail}, line {header + 1}: an empty column name" in err and "trailing comma" in err, err
    cols = lines[header].split(",")
    drop = cols.index("q:elbow_joint")
    missq = files["dir"] / "missq.csv"
    missq.write_text("\n".join(x if x.startswith("#") else ",".join(v for k, v in enumerate(x.split(",")) if k != drop)
                               for x in lines) + "\n", encoding="utf-8")  # fmt: skip
    err = one_line_error(capsys, ["identify", "dynamic", str(missq)])
    assert f"{missq}: the q:elbow_joint column is missing" in err, err


def test_a_plan_or_a_folder_given_for_a_recording_is_named(files, capsys):
    """Item 4: a trajectory plan for the recording or for --reference, a run's folder for its recording."""
    model = files["model"]
    plan = files["dir"] / "plan.json"
    doc = {"format": "poise.trajectory-plan", "version": 1, "robot": model.name, "base": model.root,
           "joint_names": list(model.joint_names), "rate_hz": 100.0}  # fmt: skip
    plan.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    err = one_line_error(capsys, ["identify", "dynamic", str(plan)])
    assert (
        f"{plan}: a trajectory plan (JSON), not a recording: identify dynamic reads dynamic recordings" in err
    )
    assert "poise run" in err and "poise simulate trajectory" in err, err
    folder = files["dir"] / "RUN"
    folder.mkdir(exist_ok=True)
    shutil.copy(files["good"], folder / "recording.csv")
    err = one_line_error(capsys, ["identify", "dynamic", str(folder)])
    assert (
        f"{folder}: a folder, not a recording; give the recording in it: {folder / 'recording.csv'}" in err
    ), err
    err = one_line_error(capsys, ["identify", "dynamic", str(files["good"]), "--reference", str(plan)])
    assert f"{plan}: a trajectory plan" in err and "not a parameter set" in err, err


def test_json_on_success_says_ok(files, capsys):
    """Item 5: the result object carries "ok": true, as the error object carries false."""
    capsys.readouterr()
    assert main(["identify", "dynamic", str(files["good"]), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["robot"] == files["model"].name and out["parameters"]


def test_help_gives_the_recordings_units_and_drift_is_a_degree():
    """Item 6."""
    sub = build_parser()._subparsers._group_actions[0].choices["identify"]
    d = sub._subparsers._group_actions[0].choices["dynamic"]
    text = d.format_help()
    flat = " ".join(text.split())
    for unit in ("t_s in s", "in rad", "angle_unit: deg", "N·m", "in A"):
        assert unit in flat, unit
    assert "--drift POLY_DEGREE" in text and "not an angle" in flat
