"""Mends from the whole-diff re-read: every recording format names another delimiter, a plan's settings must be
an object, the plan check's note on a missing required margin, and an interrupted PWM run names its own raw file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from design.criteria import min_postures
from drivers.emulators.testplan import random_plan
from formats.calibration_recording import DriveRecording, write_drive
from formats.doggy_recording import write_csv
from formats.plan import save_plan
from poise.cli import main


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    return lines[0]


def _semicolons(path: Path) -> Path:
    """The file with ';' between fields (a spreadsheet in a comma-decimal locale), comments untouched."""
    lines = path.read_text().splitlines()
    path.write_text("\n".join(s if s.startswith("#") else s.replace(",", ";") for s in lines) + "\n")
    return path


def test_a_drive_recording_with_semicolons_is_named_so(tmp_path, capsys):
    t = np.arange(200) / 100.0
    path = tmp_path / "drive.csv"
    write_drive(DriveRecording(t, np.zeros_like(t), np.sin(t), np.cos(t), 0.06), path)
    assert main(["calibrate", "friction", str(_semicolons(path))]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "uses ';' between fields" in err and "missing column" not in err


def test_a_doggy_recording_with_semicolons_is_named_so(tmp_path, capsys):
    from identify.doggy_sim import SimConfig, simulate
    from trajectories.doggy_excitation import make_plan

    path = tmp_path / "rec.csv"
    write_csv(simulate(SimConfig(duration=0.5, seed=1), make_plan(0.5, 1)).recording, path)
    assert main(["solve", "doggy", "--data", str(_semicolons(path)), "--out", str(tmp_path / "r.json")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "uses ';' between fields" in err and "missing column" not in err


@pytest.fixture(scope="module")
def plan(model):
    return random_plan(model, min_postures(model) + 1, seed=11, margin=0.03)


def _plan_file(tmp_path: Path, plan, settings) -> Path:
    path = tmp_path / "p.json"
    save_plan(plan, path)
    doc = json.loads(path.read_text())
    doc["settings"] = settings
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("settings", [[0.05], "0.05", 5])
@pytest.mark.parametrize("command", [["plan", "check"], ["plan", "augment", "--add", "2", "--pool", "4"]])
def test_plan_settings_that_are_no_object_are_refused_in_one_line(plan, tmp_path, capsys, settings, command):
    path = _plan_file(tmp_path, plan, settings)
    argv = [*command[:2], str(path), *command[2:]]
    if command[1] == "augment":
        argv += ["--out", str(tmp_path / "p2.json")]
    assert main(argv) == 2
    assert "settings must be an object" in _one_line(capsys.readouterr().err)


def test_settings_without_a_margin_are_said_to_lack_one(plan, tmp_path, capsys):
    path = _plan_file(tmp_path, plan, {"note": "written by hand"})
    assert main(["plan", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "no required margin in the plan's settings" in out and "no settings in the plan" not in out
    assert main(["plan", "check", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["required_margin_m"] == 0.0
    assert "no required margin in the plan's settings" in doc["required_margin_from"]


def test_an_interrupted_pwm_run_without_its_recording_names_raw_csv(tmp_path, capsys, monkeypatch):
    """Ctrl-C after 40 ticks of a PWM plan whose recording.csv is gone: the note and --json name raw.csv, the
    PWM run's per-tick file (not a trajectory run's raw_joints.csv)."""
    from drivers.pwm_run import PwmRecorder
    from formats.pwm_plan import PwmPlan, Segment, save_pwm_plan

    out = tmp_path / "run"
    tick, calls = PwmRecorder.tick, []

    def interrupted(self, *a, **k):
        calls.append(1)
        if len(calls) > 40:
            (out / "recording.csv").unlink()
            raise KeyboardInterrupt
        return tick(self, *a, **k)

    monkeypatch.setattr(PwmRecorder, "tick", interrupted)
    plan = tmp_path / "p.json"
    save_pwm_plan(PwmPlan((Segment("triangle", 8.0, 0.3, 1.0),), link="free"), plan)
    capsys.readouterr()
    assert main(["run", str(plan), "--robot", "sim", "--joint", "theta1", "--out", str(out), "--json"]) == 130
    got = capsys.readouterr()
    doc = json.loads(got.out)
    assert doc["ticks_recorded"] == 40 and doc["recording"] is None and doc["raw"] == str(out / "raw.csv")
    err = _one_line(got.err)
    assert f"kept in {out / 'raw.csv'}" in err and "raw_joints" not in err
