"""Ctrl-C during a streamed run (a trajectory plan on the emulated arm, a PWM plan on the emulated servo), through
the CLI: the run stops with exit 130, what it recorded stays on disk (recording rows up to the interrupt, run.json
saying it was interrupted), one stderr line says how much of the plan is kept and where, and --json prints it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import UR5, stop_after

from formats.dynamic_recording import read_dynamic_recording
from poise.cli import main

ROOT = Path(__file__).parent.parent
ARM_CONFIG = ROOT / "drivers" / "ur5_emulated.toml"
STANDING = ["--robot", "sim", "--boards", "sim", "--physics", "kinematic", "--no-noise", "--yes", "--json"]  # fmt: skip
ARM = ["--robot", "sim", "--config", str(ARM_CONFIG), "--time-scale", "3", "--yes", "--json"]


def _arm_plan(path: Path) -> Path:
    """The stored 6 s UR5 design on this machine's URDF."""
    doc = json.loads((Path(__file__).parent / "data" / "ur5_6s.json").read_text())
    path.write_text(json.dumps(doc | {"robot_source": str(UR5)}))
    return path


def _interrupt_at(monkeypatch, phase: str, after: int) -> None:
    """Ctrl-C at the executor's tick number `after` + 1 of `phase` (that tick is never sent)."""
    from drivers.trajectory_run import TrajectoryExecutor

    stop_after(
        monkeypatch, TrajectoryExecutor, "_tick", after, lambda self, q, posture, ph, *a, **k: ph == phase
    )


def _interrupted_arm_run(tmp_path, capsys, monkeypatch, phase: str, after: int):
    """The stored UR5 plan run on the emulated arm with Ctrl-C at tick `after` + 1 of `phase`: exit 130; its run
    folder, the captured output and the --json document."""
    _interrupt_at(monkeypatch, phase, after)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", str(_arm_plan(tmp_path / "arm.json")), *ARM, "--out", str(out)]) == 130
    got = capsys.readouterr()
    return out, got, json.loads(got.out)


def _kept(out: Path, doc: dict, ticks: int):
    """The run directory keeps what was streamed up to the interrupt, as the JSON says: run.json stopped by it after
    `ticks` ticks, a raw row for each, the recording's rows up to the last one's plan time; its recording."""
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "stopped: KeyboardInterrupt" == doc["status"] and meta["ticks_streamed"] == ticks
    raw = [r for r in (out / "raw_joints.csv").read_text().splitlines() if r.split(",")[1:2] == ["stream"]]
    assert (
        len(raw) == ticks == doc["ticks_recorded"] and doc["ticks_planned"] == meta["ticks_planned"] > ticks
    )
    assert (
        doc["interrupted"] is True
        and doc["run_dir"] == str(out)
        and doc["recording"] == str(out / "recording.csv")
    )
    rec = read_dynamic_recording(out / "recording.csv")
    period = 1.0 / meta["rate_hz"]
    assert doc["recording_rows"] == len(rec.t) and doc["t_recorded_s"] == pytest.approx((ticks - 1) * period)
    # the last row on the uniform grid lies within a period of the last tick (`UniformRows.finish`)
    assert rec.t_plan[-1] == pytest.approx(doc["t_recorded_s"], abs=1.5 * period)
    return rec, meta


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    return lines[0]


def test_ctrl_c_while_streaming_an_arm_trajectory_keeps_its_rows(tmp_path, capsys, monkeypatch):
    """Interrupted after 120 streamed ticks: those ticks kept (raw rows, the recording up to the last one's
    plan time), run.json stopped by the interrupt; the JSON and the one line say so."""
    out, got, doc = _interrupted_arm_run(tmp_path, capsys, monkeypatch, "stream", 120)
    rec, meta = _kept(out, doc, 120)
    assert rec.current is not None  # the arm's currents, for `identify dynamic`
    line = _one_line(got.err)
    assert (
        line.startswith("poise: interrupted; run stopped after 120 of ")
        and str(out / "recording.csv") in line
    )
    assert f"first {doc['t_recorded_s']:.2f} of {meta['duration_s']:.2f} s" in line


def test_ctrl_c_before_streaming_says_nothing_of_the_plan_is_recorded(tmp_path, capsys, monkeypatch):
    """Interrupted on the move to the trajectory's start: no tick of the plan recorded, run.json says why."""
    out, got, doc = _interrupted_arm_run(tmp_path, capsys, monkeypatch, "move", 5)
    assert doc["interrupted"] is True and doc["ticks_recorded"] == 0 and doc["t_recorded_s"] == 0.0
    assert json.loads((out / "run.json").read_text())["status"] == "stopped: KeyboardInterrupt"
    assert "nothing of the plan recorded" in _one_line(got.err)


def test_ctrl_c_before_the_run_begins_does_not_report_the_run_already_in_out(tmp_path, capsys, monkeypatch):
    """Ctrl-C while the plan is checked, --out holding an earlier run: nothing recorded, that run untouched."""
    import poise.cmd_run_trajectory as trajectory

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    out = tmp_path / "run"
    out.mkdir()
    earlier = json.dumps({"status": "completed", "ticks_streamed": 601, "ticks_planned": 601})
    (out / "run.json").write_text(earlier)
    monkeypatch.setattr(trajectory, "prepare", interrupted)
    capsys.readouterr()
    assert main(["run", str(_arm_plan(tmp_path / "arm.json")), *ARM, "--out", str(out)]) == 130
    got = capsys.readouterr()
    doc = json.loads(got.out)
    assert doc["run_dir"] is None and doc["ticks_recorded"] == 0
    assert "nothing recorded" in _one_line(got.err) and (out / "run.json").read_text() == earlier


def test_ctrl_c_during_a_pwm_plan_keeps_its_rows(tmp_path, capsys, monkeypatch):
    """A PWM plan interrupted after 40 of its ticks: its rows kept, run.json stopped by the interrupt."""
    from drivers.pwm_run import PwmRecorder
    from formats.pwm_plan import PwmPlan, Segment, save_pwm_plan

    stop_after(monkeypatch, PwmRecorder, "tick", 40)
    plan = tmp_path / "p.json"
    save_pwm_plan(PwmPlan((Segment("triangle", 8.0, 0.3, 1.0),), link="free"), plan)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", str(plan), "--robot", "sim", "--joint", "theta1", "--out", str(out), "--json"]) == 130
    got = capsys.readouterr()
    doc = json.loads(got.out)
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "stopped: KeyboardInterrupt" and meta["ticks_streamed"] == 40
    assert doc["ticks_recorded"] == 40 and doc["recording_rows"] == meta["rows"] > 0
    assert "run stopped after 40 of " in _one_line(got.err)


def test_ctrl_c_while_streaming_a_standing_trajectory_keeps_its_rows(tmp_path, capsys, monkeypatch):
    """TUlip standing on the emulated boards, interrupted after 150 streamed ticks: they are kept (angles and the
    boards' wrench), run.json stopped by the interrupt."""
    _interrupt_at(monkeypatch, "stream", 150)
    plan = Path(__file__).parent / "data" / "tulip_double_support_10s.json"
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", str(plan), *STANDING, "--out", str(out)]) == 130
    got = capsys.readouterr()
    doc = json.loads(got.out)
    rec, _ = _kept(out, doc, 150)
    assert rec.wrench is not None  # the boards' wrench
    assert "run stopped after 150 of " in _one_line(got.err)
