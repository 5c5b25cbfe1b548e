"""Executor: pre-flight refusal, recording accuracy, fault injection, Ctrl-C, link loss, kill and resume."""

import argparse
import copy
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from drivers.config import load_config
from drivers.emulators.sim_robot import true_parameters
from drivers.emulators.testplan import random_plan
from drivers.emulators.wbb import Faults
from drivers.emulators.world import WorldOptions
from drivers.executor import cosine_profile, preflight, waypoint_profile
from formats.errors import DataError, DeviceError
from formats.plan import Transition, save_plan
from formats.static_recording import read_recording
from poise import cmd_run
from poise.cli import main
from robots.kinematics import com_position


@pytest.fixture(scope="module")
def plan(model):
    return random_plan(model, 3, seed=4, move_s=1.0, hold_s=2.0)


@pytest.fixture
def cfg():
    return load_config()


def _args(tmp_path, plan_path="plan.json", resume=False, k=2.0):
    return argparse.Namespace(plan=plan_path, robot="sim", boards="sim", out=str(tmp_path / "run"), resume=resume,
                              time_scale=k, yes=True, no_noise=True)  # fmt: skip


def _quiet():
    return WorldOptions(noise=False)


def test_cosine_profile_ends_at_rest():
    q0, q1 = np.zeros(3), np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(cosine_profile(q0, q1, 0.0), q0)
    np.testing.assert_allclose(cosine_profile(q0, q1, 1.0), q1)
    np.testing.assert_allclose(cosine_profile(q0, q1, 0.5), (q0 + q1) / 2)
    h = 1e-6  # zero velocity at both ends, peak 2Δq/T in the middle
    assert np.abs(cosine_profile(q0, q1, h) - q0).max() < 1e-9
    v_mid = (cosine_profile(q0, q1, 0.5 + h) - cosine_profile(q0, q1, 0.5 - h)) / (2 * h)
    np.testing.assert_allclose(v_mid, 2 * (q1 - q0), rtol=1e-5)
    wps = np.array([[0.0], [1.0], [3.0]])
    assert waypoint_profile(wps, 0.75)[0] == pytest.approx(2.0)


def test_valid_plan_passes_preflight(model, plan, cfg):
    assert preflight(plan, model, cfg) == []


@pytest.mark.parametrize(
    "mutate,expect",
    [
        (lambda p: p.postures[1].q.__setitem__(3, -0.2), "theta4"),  # knee below 0°
        (
            lambda p: (p.postures[0].q.__setitem__(0, -0.6), p.postures[0].q.__setitem__(6, 0.6)),
            "hip-x motors",
        ),
        (lambda p: p.placements[0].__setattr__("left_foot", (0.5, 0.5, 0.0)), "left foot at"),
    ],
)
def test_unsafe_plan_refused_before_any_setpoint(model, plan, cfg, tmp_path, monkeypatch, mutate, expect):
    bad = copy.deepcopy(plan)
    mutate(bad)
    assert any(expect in m for m in preflight(bad, model, cfg))

    def no_session(*a, **k):
        raise AssertionError("a session (robot link) was opened for a refused plan")

    monkeypatch.setattr(cmd_run, "Session", no_session)
    with pytest.raises(DataError, match="refused before moving"):
        cmd_run.execute(_args(tmp_path), model, bad, cfg)
    assert not (tmp_path / "run" / "recording.csv").exists()


def test_cosine_moves_are_stretched_to_the_velocity_limit(model, plan, cfg, tmp_path):
    fast = copy.deepcopy(plan)
    for p in fast.postures:
        p.move_s = 0.01
    assert preflight(fast, model, cfg) == []
    moves = []
    result, run_dir = cmd_run.execute(_args(tmp_path, k=4.0), model, fast, cfg, world_opts=_quiet(),
                                      progress=lambda p: p.phase == "move" and moves.append(p.phase_total))  # fmt: skip
    for a, b, t in zip(plan.postures[:-1], plan.postures[1:], moves[1:], strict=True):
        assert t == pytest.approx(2 * np.abs(b.q - a.q).max() / cfg.executor.velocity_limit)
    assert len(result.completed) == 3


def test_waypoint_transitions_are_stretched_to_the_velocity_limit(model, plan, cfg, tmp_path):
    fast = copy.deepcopy(plan)
    a, b = fast.postures[0], fast.postures[1]
    b.q, b.placement, b.move_s = a.q.copy(), a.placement, 0.05  # same placement: out and back along waypoints
    k = int(np.argmax(model.upper - a.q))
    out = a.q.copy()
    out[k] += 0.3
    path = np.array([a.q, out, a.q])
    fast.transitions = [t for t in fast.transitions if t.to_index != 1] + [Transition(0, 1, path)]
    assert preflight(fast, model, cfg) == []
    moves = []
    cmd_run.execute(_args(tmp_path, k=4.0), model, fast, cfg, world_opts=_quiet(),
                    progress=lambda p: p.phase == "move" and p.posture == 1 and moves.append(p.phase_total))  # fmt: skip
    need = 2 * 0.3 / cfg.executor.velocity_limit
    assert moves and moves[0] == pytest.approx(need)


def test_balance_check_uses_required_margin(model, plan, cfg):
    cfg.executor.min_margin = 0.5  # no posture has its CoP 0.5 m inside the support polygon
    assert any("CoP margin" in m for m in preflight(plan, model, cfg))


def test_cli_refuses_bad_plan_with_exit_2(model, plan, tmp_path, capsys):
    bad = copy.deepcopy(plan)
    bad.postures[0].q[3] = -0.3
    save_plan(bad, tmp_path / "bad.json")
    rc = main(
        ["run", str(tmp_path / "bad.json"), "--robot", "sim", "--boards", "sim", "--out", str(tmp_path / "r")]
    )
    assert rc == 2
    assert "refused before moving" in capsys.readouterr().err


def test_run_records_every_posture_accurately(model, plan, cfg, tmp_path):
    result, run_dir = cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet())
    rec = read_recording(run_dir / "recording.csv", joint_names=model.joint_names)
    assert list(rec.posture) == [p.index for p in plan.postures]
    truth = com_position(model, rec.q, true_parameters(model), "right")[:, :2]
    assert np.abs(rec.cop - truth).max() < 0.5e-3  # noise-free: the true CoP within 0.5 mm
    np.testing.assert_allclose(rec.q, plan.q, atol=0.01)
    assert np.all(rec.samples > 20)
    assert rec.force[0] / 9.80665 == pytest.approx(true_parameters(model).total_mass, rel=0.01)
    joints = (run_dir / "raw_joints.csv").read_text().splitlines()
    boards = (run_dir / "raw_boards.csv").read_text().splitlines()
    assert len(joints) > 200 and len(boards) > 200
    seqs = {}
    for line in boards[1:]:
        f = line.split(",")
        seqs.setdefault(f[4], []).append(int(f[5]))
    for s in seqs.values():  # every report the driver decoded is in the raw file, once
        assert s == list(range(s[0], s[0] + len(s)))
    j = result.jitter()
    assert j["period_mean_ms"] == pytest.approx(10.0, abs=0.5)


def test_board_disconnecting_mid_posture(model, plan, cfg, tmp_path):
    opts = WorldOptions(noise=False, faults=(Faults(), Faults(disconnect_after=140)))
    result, run_dir = cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=opts)
    assert result.board_stats[1].reconnects == 1
    rec = read_recording(run_dir / "recording.csv")
    assert len(rec) == len(plan.postures)
    truth = com_position(model, rec.q, true_parameters(model), "right")[:, :2]
    assert np.abs(rec.cop - truth).max() < 0.5e-3


def test_ctrl_c_stops_and_keeps_completed_postures(model, plan, cfg, tmp_path):
    def progress(p):
        if p.position == 2 and p.phase == "hold":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet(), progress=progress)
    rec = read_recording(tmp_path / "run" / "recording.csv")
    assert list(rec.posture) == [plan.postures[0].index]


def test_link_timeout_stops_and_keeps_completed_postures(model, plan, cfg, tmp_path):
    sessions = []

    def progress(p):
        if p.position == 2 and p.phase == "hold":
            sessions[0].world.bus.drop_every = 1  # the servo bus goes silent

    with pytest.raises(DeviceError, match="timed out"):
        cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet(), progress=progress,
                        prepare=sessions.append)  # fmt: skip
    rec = read_recording(tmp_path / "run" / "recording.csv")
    assert list(rec.posture) == [plan.postures[0].index]


def test_existing_run_needs_resume(model, plan, cfg, tmp_path):
    (tmp_path / "run").mkdir()
    cmd_run.RunRecorder(tmp_path / "run", model.name, "right", model.joint_names, resume=False).close()
    (tmp_path / "run" / "recording.csv").write_text((tmp_path / "run" / "recording.csv").read_text())
    with open(tmp_path / "run" / "recording.csv", "a") as fh:
        fh.write("0,0," + ",".join(["0.0"] * 12) + ",0.0,0.0,,,,\n")
    with pytest.raises(DataError, match="--resume"):
        cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet())


def test_killed_run_resumes_without_loss_or_duplicates(model, cfg, tmp_path):
    plan = random_plan(model, 4, seed=7, move_s=1.0, hold_s=2.0)
    save_plan(plan, tmp_path / "plan.json")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "poise", "run", str(tmp_path / "plan.json"), "--robot", "sim", "--boards", "sim",
           "--out", str(out), "--time-scale", "2", "--yes", "--json", "--no-noise"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    rec_path = out / "recording.csv"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (
                rec_path.exists()
                and sum(1 for line in rec_path.read_text().splitlines() if line[:1].isdigit()) >= 2
            ):
                break
            time.sleep(0.05)
        else:
            pytest.fail("first postures never recorded")
        os.killpg(proc.pid, signal.SIGKILL)  # no cleanup at all
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    before = read_recording(rec_path, allow_partial_last_line=True)
    assert 2 <= len(before) < 4
    result, _ = cmd_run.execute(
        argparse.Namespace(plan=str(tmp_path / "plan.json"), robot="sim", boards="sim", out=str(out), resume=True,
                           time_scale=2.0, yes=True), model, plan, cfg, world_opts=_quiet())  # fmt: skip
    after = read_recording(rec_path)
    assert list(after.posture) == [p.index for p in plan.postures]  # all, in order, none twice
    np.testing.assert_array_equal(after.cop[: len(before)], before.cop)  # completed ones untouched
    assert result.skipped == list(after.posture[: len(before)])
    segments = {line.split(",")[1] for line in (out / "raw_joints.csv").read_text().splitlines()[1:] if line}
    assert segments == {"0", "1"}
