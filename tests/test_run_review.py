"""`poise run` review fixes, through the CLI on the emulated bench: goals outside the servos' position limits refused
before anything moves, a resume under other run conditions refused, no run directory from a bench that does not
open, run.json saying why a posture run stopped and what software and configuration it ran, Ctrl-C reporting the
postures kept."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import UR5, stop_after

from drivers.config import DEFAULT_CONFIG
from formats.plan import load_plan, save_plan
from poise.cli import main
from robots.registry import get_model

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
ARM_CONFIG = ROOT / "drivers" / "ur5_emulated.toml"
FAST = ["--robot", "sim", "--boards", "sim", "--physics", "kinematic", "--no-noise", "--time-scale", "20", "--yes"]  # fmt: skip


def _arm_plan(path: Path, joint: int, add_rad: float) -> Path:
    """The stored UR5 design on this machine's URDF, its start posture's `joint` moved by `add_rad`."""
    doc = json.loads((DATA / "ur5_6s.json").read_text())
    doc["robot_source"] = str(UR5)
    doc["trajectory"]["q0"][joint] += add_rad
    path.write_text(json.dumps(doc))
    return path


def _posture_plan(path: Path, n: int) -> Path:
    """`n` random double-support TUlip postures (the executor tests' plan: short moves and holds)."""
    from drivers.emulators.testplan import random_plan

    save_plan(random_plan(get_model("tulip"), n, seed=4, move_s=1.0, hold_s=2.0), path)
    return path


@pytest.fixture(scope="module")
def posture_run(tmp_path_factory):
    """A completed two-posture run on the kinematic emulated bench: (its plan, its run directory)."""
    d = tmp_path_factory.mktemp("posture")
    plan = _posture_plan(d / "plan.json", 2)
    assert main(["run", str(plan), *FAST, "--out", str(d / "run")]) == 0
    return plan, d / "run"


def test_arm_start_outside_a_servo_limit_is_refused_before_anything_moves(tmp_path, capsys):
    """4 rad added to shoulder_lift's start (inside the URDF's ±2π, beyond its servo's 0…4095 ticks): refused at
    connect, naming the joint, where and the limit; the encoders never left where the bench started."""
    plan = _arm_plan(tmp_path / "far.json", 1, 4.0)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", str(plan), "--robot", "sim", "--config", str(ARM_CONFIG), "--time-scale", "3",
                 "--out", str(out)]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("poise: error: plan refused before moving"), err
    assert "shoulder_lift_joint" in err[0] and "position limits" in err[0] and "nothing moved" in err[0]
    assert "on the move to the start at t = " in err[0]
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"].startswith("stopped: DataError: plan refused before moving")
    assert meta["ticks_streamed"] == 0
    joints = (out / "raw_joints.csv").read_text().splitlines()
    assert len(joints) <= 1, joints[:3]  # a header, no tick


def test_posture_outside_a_servo_limit_is_refused_before_anything_moves(tmp_path, capsys):
    """A config whose servo zero puts a posture's goal beyond the servo's ticks: the posture run is refused at
    connect, naming the joint and posture, with no posture recorded."""
    plan = _posture_plan(tmp_path / "plan.json", 2)
    top = max(p.q[0] for p in load_plan(plan, get_model("tulip")).postures)  # theta1's largest goal [rad]
    text = DEFAULT_CONFIG.read_text()
    per_rad = float(re.findall(r"ticks_per_rad\s*=\s*([\d.]+)", text)[0])  # theta1's, direction 1
    zero = round(4095 - per_rad * top) + 3  # that goal lands 3 ticks past the top of 0…4095
    cfg = tmp_path / "shifted.toml"
    cfg.write_text(re.sub(r"zero\s*=\s*\d+", f"zero = {zero}", text, count=1))
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", str(plan), *FAST, "--config", str(cfg), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "plan refused before moving: theta1" in err[0] and "nothing moved" in err[0], err
    assert re.search(r"posture \d", err[0]), err
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"].startswith("stopped: DataError")
    assert all(not s["completed"] for s in meta["segments"])


def test_posture_run_records_status_version_and_config(posture_run):
    plan, run = posture_run
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "completed"
    assert re.fullmatch(r"\d+\.\d+.*", meta["poise_version"])
    assert meta["config"]["path"] == str(DEFAULT_CONFIG.resolve())
    assert len(meta["config"]["sha256"]) == 64
    assert set(meta["config"]["servo_zeros_ticks"]) == set(get_model("tulip").joint_names)
    assert len(meta["board_offsets"]["right_board"]) == 3
    assert meta["segments"][-1]["time_scale"] == 20.0


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--gravity-comp"], ["gravity compensation False then, True now"]),
        (["--config", "BOARDS"], ["right board [m, m, rad] [0.058,", "config sha256"]),
    ],
)
def test_resume_under_other_conditions_is_refused(posture_run, tmp_path, capsys, extra, words):
    """A resumed run's postures are measured like the earlier ones: another config (boards moved 20 mm, 5°) or
    gravity compensation switched on is refused before the bench opens, naming what differs; run.json unchanged."""
    plan, run = posture_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    before = (copy / "run.json").read_text()
    if "BOARDS" in extra:
        moved = tmp_path / "moved.toml"
        text = DEFAULT_CONFIG.read_text()
        m = re.search(r"right\s*=\s*\[([^\]]*)\]", text)
        x, y, psi = (float(v) for v in m.group(1).split(","))
        moved.write_text(text.replace(m.group(0), f"right = [{x + 0.02}, {y}, {psi + 5.0}]"))
        extra = ["--config", str(moved)]
    capsys.readouterr()
    assert main(["run", str(plan), *FAST, "--resume", *extra, "--out", str(copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("poise: error: --resume:"), err
    for w in words:
        assert w in err[0], (w, err[0])
    assert (copy / "run.json").read_text() == before


def test_posture_bench_that_does_not_open_leaves_no_run_files(tmp_path, capsys):
    plan = _posture_plan(tmp_path / "plan.json", 1)
    out = tmp_path / "u"
    assert main(["run", str(plan), "--robot", "serial:/dev/nonexistent", "--boards", "serial:/dev/x,/dev/y",
                 "--yes", "--out", str(out)]) == 2  # fmt: skip
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())


def test_ctrl_c_reports_the_postures_kept(tmp_path, capsys, monkeypatch):
    """Ctrl-C during the second posture's hold: exit 130, JSON says interrupted and one posture kept, the message
    says --resume continues; run.json says it was stopped by the interrupt."""
    from drivers.executor import Executor

    plan = _posture_plan(tmp_path / "plan.json", 2)
    stop_after(monkeypatch, Executor, "_hold", 1)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", str(plan), *FAST, "--json", "--out", str(out)]) == 130
    got = capsys.readouterr()
    doc = json.loads(got.out)
    assert doc["interrupted"] is True and doc["postures_kept"] == 1
    assert "1 completed posture(s) kept" in got.err and "--resume" in got.err
    assert json.loads((out / "run.json").read_text())["status"] == "stopped: KeyboardInterrupt"


def test_arm_plan_with_the_default_config_names_the_config_to_pass(tmp_path, capsys):
    plan = _arm_plan(tmp_path / "arm.json", 1, 0.0)
    capsys.readouterr()
    assert main(["run", str(plan), "--robot", "sim", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "ur5_emulated.toml" in err and "'tulip'" in err, err


def test_a_still_posture_settles_on_a_compressed_bench(tmp_path, capsys):
    """At --time-scale 20 the 0.3 s stillness window is 15 ms of bench clock, less than two 10 ms settle ticks: a
    joint held with a steady offset (here the servos' tick quantisation against a 0.01 deg tolerance, which only the
    stillness rule accepts) must still count as still."""
    plan = _posture_plan(tmp_path / "plan.json", 2)
    cfg = tmp_path / "tight.toml"
    cfg.write_text(
        re.sub(r"settle_tol_deg\s*=\s*[\d.]+", "settle_tol_deg = 0.01", DEFAULT_CONFIG.read_text())
    )
    capsys.readouterr()
    assert (
        main(["run", str(plan), *FAST, "--config", str(cfg), "--json", "--out", str(tmp_path / "run")]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert [p["posture"] for p in doc["postures"]] == [0, 1]
    assert all(0 < p["settle_s"] < 10.0 for p in doc["postures"])  # within the first settle window
