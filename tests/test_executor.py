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
from drivers.emulators.testplan import plan_with_transition, random_plan
from drivers.emulators.wbb import Faults
from drivers.emulators.world import WorldOptions
from drivers.executor import cosine_profile, preflight, waypoint_profile
from formats.errors import DataError, DeviceError
from formats.plan import save_plan
from formats.static_recording import read_recording
from poise import cmd_run
from poise.cli import main
from robots.kinematics import com_position


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
        (lambda p: p.placements[0].__setattr__("left_foot", (0.5, 0.5, 0.0)), "away from its placement"),
    ],
)
def test_unsafe_plan_refused_before_any_setpoint(model, plan, cfg, tmp_path, monkeypatch, mutate, expect):
    bad = copy.deepcopy(plan)
    mutate(bad)
    assert any(expect in m for m in preflight(bad, model, cfg))

    def no_session(*a, **k):
        raise AssertionError("a session (robot link) was opened for a refused plan")

    monkeypatch.setattr("drivers.session.Session", no_session)
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
        straight = 2 * np.abs(b.q - a.q).max() / cfg.executor.velocity_limit
        # the straight move at the limit, or longer when it goes round a via posture to keep the feet apart
        assert t >= straight * (1 - 1e-9)
    assert len(result.completed) == 3
    joints = np.loadtxt(tmp_path / "run" / "raw_joints.csv", delimiter=",", skiprows=1, usecols=range(4, 16))
    robot_dt = 4.0 / cfg.executor.rate_hz  # one tick at time scale 4
    assert np.abs(np.diff(joints, axis=0)).max() / robot_dt <= cfg.executor.velocity_limit * 1.01


def test_air_move_goes_round_the_other_foot(model, cfg):
    from drivers.setpoints import AIR_CLEARANCE, air_move
    from formats.plan import Posture
    from robots.stance import contact_clearance

    q_to = np.radians([5.5, 22.0, -65.0, 0.0, 15.8, -14.6, 45.0, -13.5, -60.3, 35.1, -11.2, -17.0])
    p = random_plan(model, 1, seed=0)
    target = Posture(7, 0, q_to, 1.0, 1.0, (0.0, 0.0), 0.0)
    q0 = np.zeros(model.nq)
    straight = np.linspace(0, 1, 50)[:, None] * q_to
    assert contact_clearance(model, straight, p.params, p.base).min() < 1e-3  # the soles would cross
    move, problems = air_move(model, p, q0, target, cfg)
    assert problems == []
    need = min(AIR_CLEARANCE, contact_clearance(model, np.array([q0, q_to]), p.params, p.base).min()) - 1e-4
    assert contact_clearance(model, move.setpoints, p.params, p.base).min() >= need
    np.testing.assert_allclose(move.setpoints[-1], q_to)
    assert all(not model.limit_violations(q) for q in move.setpoints)


def test_waypoint_transitions_are_stretched_to_the_velocity_limit(model, cfg, tmp_path):
    fast = plan_with_transition(model, seed=2)
    fast.postures[1].move_s = 0.05  # planned far too fast: stretched so no tick exceeds the velocity limit
    assert preflight(fast, model, cfg) == []
    moves = []
    cmd_run.execute(_args(tmp_path, k=4.0), model, fast, cfg, world_opts=_quiet(),
                    progress=lambda p: p.phase == "move" and p.posture == 1 and moves.append(p.phase_total))  # fmt: skip
    wps = fast.transitions[0].q
    need = (len(wps) - 1) * np.abs(np.diff(wps, axis=0)).max() / cfg.executor.velocity_limit
    assert (
        moves and need <= moves[0] < need * 1.05
    )  # projection between waypoints lengthens the path a little
    joints = np.loadtxt(
        tmp_path / "run" / "raw_joints.csv", delimiter=",", skiprows=1, usecols=range(4, 4 + 24)
    )
    with open(tmp_path / "run" / "raw_joints.csv") as fh:
        phases = [line.split(",")[3] for line in fh.readlines()[1:]]
        fh.seek(0)
        postures = [line.split(",")[2] for line in fh.readlines()[1:]]
    sel = [i for i, (ph, po) in enumerate(zip(phases, postures, strict=True)) if ph == "move" and po == "1"]
    q_cmd = joints[sel, :12]
    dt = moves[0] / len(sel)  # robot time per tick
    assert np.abs(np.diff(q_cmd, axis=0)).max() / dt <= cfg.executor.velocity_limit * (1 + 1e-4)
    for w in wps[1:]:  # every later waypoint is commanded exactly (to the file's 6 decimals)
        assert np.abs(q_cmd - w).max(axis=1).min() < 2e-6
    # the ground move into posture 1 is told apart from the lifted moves to a new placement (run.json's report)
    import json

    report = json.loads((tmp_path / "run" / "run.json").read_text())["report"]
    assert [r["move_lifted"] for r in report] == [True, False, True]


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


def test_clamp_soles_is_refused_off_the_physics_twin(model, plan, tmp_path, capsys):
    save_plan(plan, tmp_path / "p.json")
    for robot, physics in (("sim", ["--physics", "kinematic"]), ("dxl:/dev/null", [])):
        rc = main(["run", str(tmp_path / "p.json"), "--robot", robot, "--boards", "sim", *physics,
                   "--clamp-soles", "--out", str(tmp_path / "r")])  # fmt: skip
        assert rc == 2
        assert "--clamp-soles straps the physics twin" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_run_records_every_posture_accurately(model, plan, cfg, tmp_path):
    result, run_dir = cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet())
    rec = read_recording(run_dir / "recording.csv", joint_names=model.joint_names)
    assert list(rec.posture) == [p.index for p in plan.postures]
    truth = com_position(model, rec.q, true_parameters(model), "right")[:, :2]
    assert np.abs(rec.cop - truth).max() < 0.5e-3  # noise-free: the true CoP within 0.5 mm
    np.testing.assert_allclose(rec.q, plan.q, atol=0.01)
    assert np.all(rec.samples > 10)  # about 40 at 80 Hz; fewer when the machine is loaded
    assert rec.force[0] / 9.80665 == pytest.approx(true_parameters(model).total_mass, rel=0.01)
    joints = (run_dir / "raw_joints.csv").read_text().splitlines()
    boards = (run_dir / "raw_boards.csv").read_text().splitlines()
    assert len(joints) > 200 and len(boards) > 200
    seqs = {}
    for line in boards[1:]:
        f = line.split(",")
        seqs.setdefault(f[4], []).append(int(f[5]))
    for b, s in seqs.items():  # every report the driver decoded is in the raw file, once; the count skips
        # only the reports that arrived damaged (a loaded machine's serial bridge may cut a frame)
        assert all(np.diff(s) >= 1) and (s[-1] - s[0] + 1) - len(s) <= result.board_stats[int(b)].bad
    j = result.jitter()
    assert j["period_mean_ms"] == pytest.approx(10.0, rel=0.5)  # 100 Hz (late ticks on a loaded machine)
    # Execution report, from encoders and boards only, per posture (run.json and the printed table).
    import json

    from robots.stance import check_posture

    report = json.loads((run_dir / "run.json").read_text())["report"]
    assert [r["posture"] for r in report] == [p.index for p in plan.postures]
    # a move to a new placement is made lifted (its tracking told apart in the run's and the demo's tables)
    pl = [p.placement for p in plan.postures]
    assert [r["move_lifted"] for r in report] == [i == 0 or pl[i] != pl[i - 1] for i in range(len(pl))]
    for r, res, p in zip(report, result.completed, plan.postures, strict=True):
        assert r == res.report
        assert 0 <= r["hold_tracking_max_deg"] < 1.0 and r["settle_s"] >= 0
        assert r["slip_mm"] < 1.0  # the kinematic robot's soles stay where they were put
        true_margin = check_posture(model, p.q, true_parameters(model), "right").margin
        assert r["min_margin_mm"] == pytest.approx(1000 * true_margin, abs=2.0)  # the true CoM's margin
        assert sum(r["board_kg"]) == pytest.approx(true_parameters(model).total_mass, rel=0.01)
    table = cmd_run.execution_table(result.completed)
    assert table.row_count == len(plan.postures) and "slip \\[mm]" in [c.header for c in table.columns]


def test_board_disconnecting_mid_posture(model, plan, cfg, tmp_path):
    """The second board drops its link during the first posture and reconnects; nothing is lost. Should the drop
    fall between the air move and the set-down, its last report (an empty board) is not taken for its load once
    the robot stands (`STALE_S`): with the boards tared side by side it fell there, and a fall was reported."""
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
           "--out", str(out), "--time-scale", "2", "--yes", "--json", "--no-noise", "--physics", "kinematic"]  # fmt: skip
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
    import json

    meta = json.loads((out / "run.json").read_text())  # the killed segment lists what it completed
    assert meta["segments"][0]["completed"] == list(before.posture)
    assert meta["segments"][1]["completed"] == list(after.posture[len(before) :])


# ------------------------------------------------------------------ issue 11 §1: every setpoint, config, resume


def test_every_ground_setpoint_passes_the_posture_check(model, cfg):
    from drivers.setpoints import check_run
    from robots.stance import check_posture

    p = plan_with_transition(model, seed=2)
    checked = check_run(p, model, cfg)
    assert checked.problems == [] and set(checked.moves) == {1}
    pose = p.placement(p.postures[1].placement).other_foot
    for q in checked.moves[1].setpoints:  # the interpolated ticks too, not only the waypoints
        assert check_posture(model, q, p.params, p.base, checked.margin, pose=pose).issues == []


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        ("lift", "not flat"),  # a waypoint with the other foot lifted and tilted
        ("cop", "CoP margin"),  # a waypoint with its CoP outside the support polygon
    ],
)
def test_unsafe_waypoint_refused(model, cfg, change, expect):
    from drivers.setpoints import project_to_chain
    from robots.stance import check_posture, foot_corners

    p = plan_with_transition(model, seed=2)
    wps = p.transitions[0].q
    pose = p.placement(p.postures[1].placement).other_foot
    k = len(wps) // 2
    if change == "lift":
        wps[k] = wps[k] + 0.05  # every joint off by 0.05 rad: the other sole leaves the ground
    else:  # on the chain, but with the CoP pushed 10 mm beyond the hull's extreme x
        corners = np.concatenate(list(foot_corners(model, wps[k], p.params, p.base).values()))
        target = np.array([corners[:, 0].max() + 0.01, corners[:, 1].mean()])
        wps[k] = project_to_chain(model, wps[k][None], pose, target[None], p.params, p.base, iters=60)[0]
    assert check_posture(model, wps[k], p.params, p.base, 0.0, pose=pose).issues  # plan check would refuse it
    problems = preflight(p, model, cfg)
    assert any("move 0->1" in m and expect in m for m in problems), problems


@pytest.mark.parametrize(
    ("line", "value", "expect"),
    [
        ("min_margin", "-1", "min_margin"),
        ("velocity_limit", "-1", "velocity_limit"),
        ("rate_hz", "nan", "rate_hz"),
        ("rate_hz", "0", "rate_hz"),
        ("link_timeout_s", '"soon"', "link_timeout_s"),
        ("settle_attempts", "0", "settle_attempts"),
        ("gravity_compensation", "1", "gravity_compensation"),
        ("position_p_gain", "0", "position_p_gain"),
        ("position_p_gain", "20000", "position_p_gain"),
        ("position_p_gain", "6000.5", "position_p_gain .*whole number"),
    ],
)
def test_unsafe_config_settings_refused(tmp_path, line, value, expect):
    from drivers.config import DEFAULT_CONFIG

    text = DEFAULT_CONFIG.read_text(encoding="utf-8")
    lines = [f"{line} = {value}" if ln.split("=")[0].strip() == line else ln for ln in text.splitlines()]
    assert lines != text.splitlines()
    bad = tmp_path / "robot.toml"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=expect):
        load_config(bad)


def test_config_typos_and_zero_ticks_per_rad_refused(tmp_path):
    from drivers.config import DEFAULT_CONFIG

    text = DEFAULT_CONFIG.read_text(encoding="utf-8")
    for bad_text, expect in (
        (text.replace("velocity_limit", "velocty_limit", 1), "unknown key"),
        (text.replace("ticks_per_rad = 651.8986469", "ticks_per_rad = 0", 1), "ticks_per_rad"),
    ):
        bad = tmp_path / "robot.toml"
        bad.write_text(bad_text, encoding="utf-8")
        with pytest.raises(DataError, match=expect):
            load_config(bad)


def test_config_built_in_code_is_validated_before_moving(model, plan, cfg):
    cfg.executor.velocity_limit = -1.0
    with pytest.raises(DataError, match="velocity_limit"):
        preflight(plan, model, cfg)


def test_short_silence_within_link_timeout_is_ridden_out(model, plan, cfg, tmp_path):
    import threading

    cfg.executor.link_timeout_s = 3.0
    sessions, fired = [], []

    def progress(p):
        if p.position == 2 and p.phase == "hold" and not fired:
            fired.append(True)
            bus = sessions[0].world.bus
            bus.drop_every = 1  # silent for 0.6 s: longer than the default 0.5 s, within this config's 3 s
            threading.Timer(0.6, lambda: setattr(bus, "drop_every", 0)).start()

    result, run_dir = cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet(), progress=progress,
                                      prepare=sessions.append)  # fmt: skip
    assert [r.posture for r in result.completed] == [p.index for p in plan.postures]


def test_a_late_host_and_one_lost_exchange_are_not_a_silent_robot(model, plan, cfg, tmp_path):
    """The host away for longer than link_timeout_s between two ticks (a loaded machine), then one whole read lost
    (every retry of it): the robot was asked once, not for 0.5 s, so the run goes on. Counted from the last answer
    it stopped ('no answer for 0.62 s': a test machine running three test workers on two cores)."""
    from drivers import dxl_protocol as D

    sessions, lost = [], []

    def progress(p):
        if p.position == 2 and p.phase == "hold" and not lost:
            bus, link = sessions[0].world.bus, sessions[0].link
            handle = bus._handle

            def losing(pkt):
                reads = (D.INST_SYNC_READ, D.INST_FAST_SYNC_READ)
                if pkt.instruction in reads and len(lost) <= link.retries:  # each try of one read
                    lost.append(pkt.instruction)
                    return []
                return handle(pkt)

            bus._handle = losing
            time.sleep(1.5 * cfg.executor.link_timeout_s)  # the host away

    result, _ = cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet(), progress=progress,
                                prepare=sessions.append)  # fmt: skip
    assert len(lost) == sessions[0].link.retries + 1  # a whole read() failed: one LinkTimeout
    assert [r.posture for r in result.completed] == [p.index for p in plan.postures]


def test_a_stalled_host_resumes_its_ticks_instead_of_sending_the_missed_ones_back_to_back(
    model, plan, cfg, tmp_path
):
    """The host away for 15 hold periods: the ticks after it keep their period (the missed setpoints are not sent
    in a burst, which in a motion is a step of its velocity × the delay: a 15.5° trip on the arm twin)."""
    stalled = []

    def progress(p):
        if p.position == 2 and p.phase == "hold" and not stalled:
            stalled.append(p.posture)
            time.sleep(15 / cfg.executor.rate_hz)

    result, _ = cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet(), progress=progress)
    assert [r.posture for r in result.completed] == [p.index for p in plan.postures]
    rows = [line.split(",") for line in (tmp_path / "run" / "raw_joints.csv").read_text().splitlines()[1:]]
    t = np.array([float(r[0]) for r in rows if r[2] == str(stalled[0]) and r[3] == "hold"])
    dt, period = np.diff(t), 1 / cfg.executor.rate_hz
    after = int(np.argmax(dt))
    assert dt[after] > 10 * period  # the stall
    assert np.all(dt[after + 1 : after + 6] > 0.5 * period), dt[after : after + 6]
    assert result.jitter()["late_max_ms"] > 10e3 * period  # and it is reported, though not caught up


def test_silence_is_counted_from_the_first_unanswered_exchange_and_needs_two():
    from drivers.link import Silence

    s = Silence(0.2)
    assert not s.missed(time.monotonic() - 1.0)  # one miss, however long it (or the host) took: not yet
    assert s.missed(time.monotonic())  # a second, 1 s after the first began: timed out
    s = Silence(0.2)
    t = time.monotonic()
    assert not s.missed(t) and not s.missed(t)  # two quick misses: not silent for 0.2 s yet
    time.sleep(0.25)
    assert s.missed(time.monotonic()) and s.seconds >= 0.25


def test_resume_with_another_plan_is_refused(model, plan, cfg, tmp_path):
    def progress(p):
        if p.position == 2 and p.phase == "move":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet(), progress=progress)
    meta = (tmp_path / "run" / "run.json").read_text(encoding="utf-8")
    other = copy.deepcopy(plan)
    other.postures[2].hold_s += 1.0
    with pytest.raises(DataError, match="different plan"):
        cmd_run.execute(_args(tmp_path, resume=True), model, other, cfg, world_opts=_quiet())
    assert len(read_recording(tmp_path / "run" / "recording.csv")) == 1  # nothing lost, nothing mixed in
    assert (tmp_path / "run" / "run.json").read_text(encoding="utf-8") == meta  # refused before it changed


def test_run_failing_before_its_first_posture_leaves_a_usable_folder(model, plan, cfg, tmp_path):
    def progress(p):
        if p.phase == "move":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet(), progress=progress)
    for resume in (False, True):  # the same --out works with or without --resume
        out = tmp_path / f"copy{resume}"
        import shutil

        shutil.copytree(tmp_path / "run", out)
        # the whole plan at the interrupted run's 2×: at 8× a 2 s hold lasted 0.25 s of wall time and its averaged
        # last half needs half the boards' samples, so a host busy for 63 ms in three holds running lost the posture
        # ("board data missing in three holds") — a loaded machine's failure, not the resume's
        args = _args(tmp_path, resume=resume)
        args.out = str(out)
        result, _ = cmd_run.execute(args, model, plan, cfg, world_opts=_quiet())
        assert [r.posture for r in result.completed] == [p.index for p in plan.postures]


@pytest.mark.parametrize("robot", ["sim", "sim:framed"])
def test_run_records_the_gains_the_servos_report(model, plan, cfg, tmp_path, robot):
    """The configured Position P Gain goes to the servos on connect; run.json records what they read back and
    whether the bus was read with FAST SYNC READ (the framed protocol has neither: nulls)."""
    import json

    cfg.executor.position_p_gain = 2500.0
    sessions = []

    def progress(p):
        raise KeyboardInterrupt  # the gains are recorded before the first progress report (tare)

    args = _args(tmp_path)
    args.robot = robot
    with pytest.raises(KeyboardInterrupt):
        cmd_run.execute(
            args, model, plan, cfg, world_opts=_quiet(), progress=progress, prepare=sessions.append
        )
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["position_p_gain_configured"] == 2500
    if robot == "sim:framed":
        assert (
            meta["position_p_gain"] is None and meta["servo_gains"] is None and meta["fast_sync_read"] is None
        )
        return
    assert meta["fast_sync_read"] is True  # the emulated servos' firmware answers it, as X-series 45+ do
    assert meta["position_p_gain"] == 2500
    assert meta["servo_gains"] == {n: {"p": 2500, "i": 0, "d": 0} for n in model.joint_names}
    np.testing.assert_array_equal(sessions[0].world.plant.p_gain, 2500)  # the emulated servos' plant got it


def test_posture_that_does_not_settle_stops_the_run(model, plan, cfg, tmp_path):
    from drivers.executor import SafetyTrip

    cfg.executor.settle_timeout_s = 0.4

    def progress(p):
        if p.position == 2 and p.phase == "move":
            # finer than a servo tick (0.088 deg): the second posture can never settle
            cfg.executor.settle_tol_deg = 0.01
            cfg.executor.settle_offset_deg = 0.0  # and no steady offset accepted

    with pytest.raises(SafetyTrip, match="did not settle"):
        cmd_run.execute(_args(tmp_path), model, plan, cfg, world_opts=_quiet(), progress=progress)
    rec = read_recording(tmp_path / "run" / "recording.csv")
    assert list(rec.posture) == [plan.postures[0].index]  # never held unsettled; the completed one kept
    raw = (tmp_path / "run" / "raw_joints.csv").read_text().splitlines()[1:]
    assert not any(f.split(",")[2] == str(plan.postures[1].index) and f.split(",")[3] == "hold" for f in raw)


def test_unfollowable_ground_path_is_done_lifted(model, cfg, tmp_path, monkeypatch):
    """Valid waypoints whose path cannot be kept on the ground: the robot is lifted and set down again, as an
    operator would, with a warning — not refused, not streamed."""
    import drivers.setpoints as sp

    p = plan_with_transition(model, seed=2)
    real = sp.ground_move

    def broken(model_, plan_, a, b, *args, **kw):
        move, _ = real(model_, plan_, a, b, *args, **kw)
        return move, [f"move {a.index}->{b.index} setpoint 1/{len(move.setpoints)}: (a jump, for the test)"]

    monkeypatch.setattr(sp, "ground_move", broken)
    checked = sp.check_run(p, model, cfg)
    assert checked.problems == [] and checked.relift == {1}
    assert "lifted instead" in checked.warnings[0]
    phases = []
    result, _ = cmd_run.execute(_args(tmp_path, k=4.0), model, p, cfg, world_opts=_quiet(),
                                progress=lambda pr: phases.append((pr.posture, pr.phase)))  # fmt: skip
    assert [r.posture for r in result.completed] == [0, 1, 2]
    assert (1, "lift") in phases and (1, "place") in phases  # set down again on the same placement
    assert [r.report["move_lifted"] for r in result.completed] == [True, True, True]  # posture 1 relifted


def test_planned_lifted_transition_is_done_lifted_without_warning(model, cfg):
    """A transition the planner marked `lifted` (no ground path joins the postures) is done in the air by plan,
    and a jump between two waypoints of an unmarked transition is named by the shared ground-path check."""
    import dataclasses

    import drivers.setpoints as sp
    from robots.chain_path import ground_transition_issues

    p = plan_with_transition(model, seed=2)
    tr = p.transitions[0]
    a, b = p.postures[0], p.postures[1]
    lifted = dataclasses.replace(tr, q=np.array([a.q, b.q]), lifted=True)
    checked = sp.check_run(dataclasses.replace(p, transitions=[lifted]), model, cfg)
    assert checked.problems == [] and checked.warnings == [] and checked.relift == {1}
    # All the motion in one of four segments: a jump, not a path.
    jump = np.array([a.q, a.q, a.q, b.q, b.q])
    pose = p.placement(a.placement).other_foot
    issues = ground_transition_issues(model, jump, pose, p.params, p.base, 0.0, "t")
    assert issues and "jump" in issues[0]
    assert ground_transition_issues(model, tr.q, pose, p.params, p.base, 0.0, "t") == []


def test_standing_checks_trip_on_lasting_falls_and_tips_not_on_late_reports():
    """Falling (boards carry < half the weight, also when they carry nothing at all) and tipping (CoP > 5 mm
    outside) stop the run only when they last: a board report arriving late is not a fall."""
    from drivers.executor import FALL_HOLD_S, TIP_HOLD_S, Executor, RunResult, SafetyTrip

    clock = [100.0]
    ex = Executor.__new__(Executor)
    ex.clock = argparse.Namespace(now=lambda: clock[0])  # the bench clock, stepped by hand
    ex.k, ex._weight_kg, ex.result = 2.0, 22.6, RunResult()
    ex._light_since = ex._outside_since = None
    p = argparse.Namespace(index=3)
    cop = np.zeros(2)

    def check(cop_, margin, kg, dt):
        clock[0] += dt / ex.k  # dt in robot seconds
        ex._check_standing(p, cop_, margin, kg)

    check(cop, 0.05, 11.0, 0.0)
    check(cop, 0.05, 22.5, 0.9 * FALL_HOLD_S)  # the late board caught up: not a fall
    check(cop, 0.05, 11.0, 0.1)
    with pytest.raises(SafetyTrip, match="posture 3: boards carry 0.1 kg .*falling"):
        check(None, None, 0.1, 1.01 * FALL_HOLD_S)  # nothing on the boards at all: no CoP, still a fall
    ex._light_since = None
    check(cop, -0.01, 22.6, 0.0)
    check(cop, -0.01, 22.6, 0.5 * TIP_HOLD_S)
    with pytest.raises(SafetyTrip, match="10.0 mm outside the support polygon \\(tipping\\)"):
        check(cop, -0.01, 22.6, 0.51 * TIP_HOLD_S)


def test_operator_prompts_name_the_robots_soles_and_a_lifted_start():
    """The person at a real bench is told which contact site goes where, from the robot description; a single-
    support start asks for the robot on its base sole alone."""
    from drivers.session import PromptOperator, sole_names
    from formats.plan import Placement
    from robots.registry import get_model

    asked: list[str] = []
    op = PromptOperator(sole_names(get_model("tulip")), ask=asked.append)
    op.place(Placement(2, (0.01, 0.13, 0.05)), None, None)
    op.place(Placement(0, (0.0, 0.13, 0.0)), None, None, lifted=True)
    assert "sole_l at x=10 mm, y=130 mm, yaw=2.9 deg from sole_r" in asked[0] and "on the boards" in asked[0]
    assert "on sole_r alone" in asked[1] and "sole_l kept in the air" in asked[1]
    assert sole_names(get_model("icub-right-arm")) == ("the base sole", "the other sole")  # no soles: generic


def test_twin_events_are_attributed_to_the_phase_they_happened_in():
    """An event belongs to the phase that began last at or before it (robot time); a ground move is the
    transition to its posture, a set-down or air move too; settling and holding are the posture's own."""
    from drivers.run_events import attribute, per_posture

    timeline = [
        {"t_s": 0.0, "posture": 0, "placement": 0, "phase": "tare"},
        {"t_s": 1.0, "posture": 0, "placement": 0, "phase": "move"},
        {"t_s": 3.0, "posture": 0, "placement": 0, "phase": "place"},
        {"t_s": 3.0, "posture": 0, "placement": 0, "phase": "settle"},
        {"t_s": 4.0, "posture": 0, "placement": 0, "phase": "hold"},
        {"t_s": 9.0, "posture": 1, "placement": 0, "phase": "transition"},
        {"t_s": 11.0, "posture": 1, "placement": 0, "phase": "settle"},
    ]
    events = [
        {"t_sim_s": t, "kind": k, "detail": d}
        for t, k, d in (
            (3.0, "edge", "a"),
            (5.0, "slip", "b"),
            (9.0, "lift", "c"),
            (10.9, "feet-contact", "d"),
        )
    ]
    out = attribute(events, timeline)
    assert [(e["posture"], e["phase"]) for e in out] == [
        (0, "settle"),
        (0, "hold"),
        (1, "transition"),
        (1, "transition"),
    ]
    assert attribute([{"t_sim_s": -0.5, "kind": "fall", "detail": ""}], timeline) == [
        {"t_sim_s": -0.5, "kind": "fall", "detail": ""}
    ]
    assert per_posture(out) == {
        0: {"transition": [], "posture": ["edge: a", "slip: b"]},
        1: {"transition": ["lift: c", "feet-contact: d"], "posture": []},
    }


def test_lagging_servos_reach_the_posture_in_the_air_before_the_set_down(model, plan, cfg, tmp_path):
    """Servos slower than the air move (the kinematic plant's time constant 0.4 s) are held at its last setpoint
    until within half the tracking trip: the operator sets down a robot in its posture, and the settle does not
    trip on the air move's lag (`poise demo --physics kinematic` at 8× once stopped so: θ7 16.5° > 15°)."""
    result, run_dir = cmd_run.execute(_args(tmp_path, k=1.0), model, plan, cfg,
                                      world_opts=WorldOptions(noise=False, tau=0.4))  # fmt: skip
    assert len(result.completed) == len(plan.postures)
    lines = (run_dir / "raw_joints.csv").read_text().splitlines()
    head, rows = lines[0].split(","), [r.split(",") for r in lines[1:]]
    phase, n = head.index("phase"), model.nq
    cmd, meas = head.index(f"q_cmd_{model.joint_names[0]}"), head.index(f"q_meas_{model.joint_names[0]}")
    first_settle = next(i for i, r in enumerate(rows) if r[phase] == "settle")
    moves = [r for r in rows[:first_settle] if r[phase] == "move"]

    def err(r: list[str]) -> float:
        return np.degrees(
            np.max(np.abs(np.array(r[cmd : cmd + n], float) - np.array(r[meas : meas + n], float)))
        )

    assert (
        max(err(r) for r in moves) > cfg.executor.track_trip_deg / 2
    )  # the servos lagged during the move ...
    assert err(moves[-1]) <= cfg.executor.track_trip_deg / 2  # ... and caught up before the set-down


def test_resume_with_other_board_gains_or_noise_is_refused(model, plan, cfg, tmp_path):
    """A resumed run's postures are measured as its first ones were: the same board gains and emulated noise."""
    from formats.board_gains import BoardGains

    def progress(p):
        if p.position == 2 and p.phase == "move":
            raise KeyboardInterrupt

    first = _args(tmp_path)
    first.gains = BoardGains(("sim0", "sim1"), np.ones((2, 4)), 10.0, "sim")
    with pytest.raises(KeyboardInterrupt):
        cmd_run.execute(first, model, plan, cfg, world_opts=_quiet(), progress=progress)
    meta = (tmp_path / "run" / "run.json").read_text(encoding="utf-8")
    again = _args(tmp_path, resume=True)  # no gains this time
    with pytest.raises(DataError, match="recorded with board_gains"):
        cmd_run.execute(again, model, plan, cfg, world_opts=_quiet())
    noisy = _args(tmp_path, resume=True)
    noisy.gains = first.gains
    with pytest.raises(DataError, match="recorded with noise_seed None, this run has 3"):
        cmd_run.execute(noisy, model, plan, cfg, world_opts=WorldOptions(noise=True, noise_seed=3))
    assert len(read_recording(tmp_path / "run" / "recording.csv")) == 1  # nothing lost, nothing mixed in
    assert (tmp_path / "run" / "run.json").read_text(encoding="utf-8") == meta  # refused before it changed
