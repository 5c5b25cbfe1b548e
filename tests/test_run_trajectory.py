"""`poise run TRAJECTORY_PLAN`: a TUlip double-support trajectory streamed on the emulated bench (real Dynamixel
and board drivers over pty/socket), recorded in the dynamic recording format; refused before anything is sent
when it breaks a limit; a stopped or killed run keeps what it recorded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from drivers.config import load_config
from drivers.emulators.sim_robot import true_parameters
from drivers.emulators.world import WorldOptions
from drivers.executor import SafetyTrip
from drivers.trajectory_run import (
    GAP_PERIODS,
    RUN_FILES,
    StreamPlan,
    TrajectoryExecutor,
    check_stream,
    tick_times,
)
from formats.dynamic_recording import read_dynamic_recording
from formats.trajectory_plan import TrajectoryPlan, load_trajectory_plan, save_trajectory_plan
from identify.differentiation import derivatives
from poise import cmd_run_trajectory
from poise.cli import main
from robots.kinematics import com_position
from robots.registry import get_model
from trajectories.balance_excitation import balance_start
from trajectories.closed_chain import ClosedChainTrajectory, make_chain
from trajectories.excitation import ExcitationSettings
from trajectories.multistart import settings_dict
from trajectories.plan import plan_trajectory

DURATION = 3.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def plan_file(tulip, tmp_path_factory):
    """A small hand-made double-support trajectory in the plan format (random harmonics around a balanced
    closed-chain posture, as the designer's starts are made), valid under `plan check`'s checks."""
    s = ExcitationSettings(period=DURATION, duration=DURATION, harmonics=3, samples=32, simplified=True,
                           motion="double-support", zmp_margin=0.02)  # fmt: skip
    chain = make_chain(tulip, "right", "sim", np.random.default_rng(3), candidates=20)
    _, fi = balance_start(tulip, s, chain, np.random.default_rng(4), 0.1)
    traj = ClosedChainTrajectory(tulip, chain, fi)
    plan = TrajectoryPlan(tulip.name, "right", list(tulip.joint_names), traj.to_json(), params="sim",
                          settings=settings_dict(s), seed=1)  # fmt: skip
    path = tmp_path_factory.mktemp("traj") / "ds.json"
    save_trajectory_plan(plan, path)
    return path


def _raw(run_dir):
    with open(run_dir / "raw_joints.csv") as f:
        header = f.readline().strip().split(",")
        rows = [line.strip().split(",") for line in f if line.strip()]
    stream = [r for r in rows if r[1] == "stream"]
    n = (len(header) - 3) // 2
    t = np.array([float(r[2]) for r in stream])
    q = np.array([[float(x) for x in r[3:]] for r in stream])
    return t, q[:, :n], q[:, n:]


def _raw_times(run_dir):
    with open(run_dir / "raw_joints.csv") as f:
        f.readline()
        return np.array([float(r.split(",")[0]) for r in f if r.split(",")[1:2] == ["stream"]])


def _spanned_rows(run_dir) -> int:
    """Grid rows t0 + k / rate within the wall-clock span of the streamed ticks, every one of which has its row
    (a tick's row waits for the boards' reports around it; the last ones are written when streaming ends or
    stops). A late first tick or a loaded machine stretches or squeezes that span, so the count comes from the raw
    tick times, not from the number of ticks."""
    t_raw = _raw_times(run_dir)
    period = 1.0 / load_config(None).executor.rate_hz
    return int(np.floor((t_raw[-1] - t_raw[0]) / period + 1e-6)) + 1


def _grid_rows(rec, run_dir) -> tuple[int, int]:
    """(grid points the recording's rows span, how many of them have no row). Rows lie on the uniform grid, in
    order; grid points have no row only where the streamed ticks stalled for more than GAP_PERIODS periods (a
    loaded machine: the servos held a setpoint no measurement saw), at most one gap per stall."""
    rate = load_config(None).executor.rate_hz
    k = np.rint(rec.t * rate).astype(int)
    assert np.allclose(rec.t, k / rate, atol=1e-9) and np.all(np.diff(k) >= 1)
    stalls = int(np.sum(np.diff(_raw_times(run_dir)) > GAP_PERIODS / rate))
    assert np.sum(np.diff(k) > 1) <= stalls
    return int(k[-1]) + 1, int(k[-1]) + 1 - len(rec.t)


def test_trajectory_runs_end_to_end(tulip, plan_file, tmp_path):
    out = tmp_path / "run"
    args = ["run", str(plan_file), "--robot", "sim", "--boards", "sim", "--out", str(out), "--yes", "--json",
            "--physics", "kinematic"]  # fmt: skip
    assert main(args) == 0
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "completed" and meta["kind"] == "trajectory"
    plan = load_trajectory_plan(plan_file)
    traj = plan_trajectory(plan, tulip)
    t_tr, q_cmd, q_meas = _raw(out)
    # each sole's own CoP on its corners, tick by tick from its board (the kinematic bench's boards weigh each
    # sole at its true CoM share: nothing rocks)
    soles = meta["soles"]
    assert sorted(soles) == sorted(s.name for s in tulip.sites if s.rect is not None)
    assert all(v["ticks"] >= 0.9 * meta["ticks_streamed"] and v["rocked_share"] == 0 for v in soles.values())
    # every streamed setpoint is the trajectory's sample at its tick, ticks at the configuration's rate
    rate = load_config(None).executor.rate_hz
    assert np.allclose(t_tr, tick_times(DURATION, rate), atol=1e-6)
    assert np.abs(q_cmd - traj.sample(t_tr)[0]).max() < 2e-6
    # the servos follow (first-order lag of the emulated servo): within 1.5 deg (a late tick on a loaded machine
    # widens the lag: 1.08 deg seen), well under the 15 deg trip
    assert np.degrees(np.abs(q_meas - q_cmd)).max() < 1.5
    rec = read_dynamic_recording(out / "recording.csv")
    assert rec.robot == "tulip" and rec.base == "right" and rec.tau is None
    # the plan's band (its top harmonic), which `identify dynamic`'s default cut-off follows
    assert float(rec.meta["motion_band_hz"]) == pytest.approx(traj.independent.highest_frequency)
    assert float(rec.meta["motion_band_hz"]) == pytest.approx(3 / DURATION)
    # rows on the uniform tick grid (what `identify dynamic` needs), the measured angles interpolated to it
    assert len(t_tr) == meta["ticks_streamed"] and len(rec.t) > 0.8 * len(t_tr)
    spanned, skipped = _grid_rows(rec, out)
    # a row (or a gap's grid point) for every streamed tick, the last one too when it came earlier on the grid
    # than the first (tests/test_trajectory_recording.py)
    assert spanned >= len(t_tr) and abs(spanned - _spanned_rows(out)) <= 1 + skipped
    # no stall: rows on the whole grid, accepted as uniform (else piece by piece, as identify dynamic does)
    if not skipped:
        assert abs(len(rec.t) - _spanned_rows(out)) <= 1
        derivatives(rec.t, rec.q, 5.0)
    t_run = _raw_times(out)
    q_at = np.array([np.interp(rec.t, t_run - t_run[0], q_meas[:, j]) for j in range(q_meas.shape[1])]).T
    assert np.abs(rec.q - q_at).max() < 5e-5  # 1/30 of an encoder tick (1.07e-5 seen with jittery ticks)
    # the boards' wrench: the robot's true weight, and its CoP (−My/Fz, Mx/Fz) at the true CoM (kinematic bench)
    truth = true_parameters(tulip)
    fz = rec.wrench[:, 2]
    assert np.abs(fz / (truth.total_mass * 9.80665) - 1).max() < 0.03
    cop = np.stack([-rec.wrench[:, 4] / fz, rec.wrench[:, 3] / fz], axis=1)
    com = com_position(tulip, rec.q, truth, "right")[:, :2]
    assert np.median(np.linalg.norm(cop - com, axis=1)) < 0.005


@pytest.mark.parametrize("on", [False, True])
def test_double_support_streams_the_gravity_feedforward_when_enabled(tulip, plan_file, tmp_path, on):
    """`--gravity-comp`: every streamed goal is the setpoint plus the feed-forward at its posture, velocity and
    acceleration (the kinematic servos follow their goals, so the encoders show the offsets); off, the setpoints
    alone."""
    from drivers.gravity import goal_offsets

    out = tmp_path / "run"
    args = ["run", str(plan_file), "--robot", "sim", "--boards", "sim", "--out", str(out), "--yes", "--json",
            "--physics", "kinematic"] + (["--gravity-comp"] if on else [])  # fmt: skip
    assert main(args) == 0
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "completed" and meta["gravity_compensation"] is on
    t_tr, q_cmd, q_meas = _raw(out)
    plan = load_trajectory_plan(plan_file)
    _, qd, qdd = plan_trajectory(plan, tulip).sample(t_tr)
    offsets = goal_offsets(tulip, load_config(None), q_cmd, plan.params, plan.base, qd=qd, qdd=qdd)
    assert np.degrees(np.abs(offsets).max()) > 0.3  # large enough to tell apart
    shift = np.degrees((q_meas - q_cmd).mean(axis=0))  # the servos' lag averages out over the motion
    expected = np.degrees(offsets.mean(axis=0)) if on else np.zeros(tulip.nq)
    assert np.abs(shift - expected).max() < 0.1, (shift, expected)


def test_limit_violation_refused_before_anything_is_sent(tulip, plan_file, tmp_path, monkeypatch, capsys):
    doc = json.loads(plan_file.read_text())
    a = doc["trajectory"]["independent"]["a"]
    a[0][0], a[0][1] = (
        a[0][0] + 1.0,
        a[0][1] - 1.0,
    )  # one joint's first harmonics (still at rest at both ends)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert main(["plan", "check", str(bad), "--json"]) == 1  # the checks `plan check` applies ...
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert problems and all("at rest" not in p for p in problems)

    def no_session(*a, **k):
        raise AssertionError("a session was opened for a refused plan")

    monkeypatch.setattr(cmd_run_trajectory, "Session", no_session)
    out = tmp_path / "run"
    args = ["run", str(bad), "--robot", "sim", "--boards", "sim", "--out", str(out), "--yes"]
    assert main(args) == 2  # ... refuse the run, before any device is opened
    err = capsys.readouterr().err
    assert "refused before moving" in err and all(p in err for p in problems[:4])
    assert not any((out / n).exists() for n in RUN_FILES)


def test_every_tick_within_the_runs_velocity_limit(tulip, plan_file, tmp_path):
    from dataclasses import replace

    plan = load_trajectory_plan(plan_file)
    traj = plan_trajectory(plan, tulip)
    cfg = load_config(None)
    t = tick_times(traj.duration, cfg.executor.rate_hz)
    sp = StreamPlan(t, traj.sample(t)[0], "right", "sim", standing=True)
    assert check_stream(tulip, cfg, sp).problems == []
    peak = float(np.abs(np.diff(sp.q, axis=0) / np.diff(t)[:, None]).max())
    slow = replace(cfg, executor=replace(cfg.executor, velocity_limit=0.9 * peak))
    problems = check_stream(tulip, slow, sp).problems
    assert len(problems) == 1 and "velocity_limit" in problems[0]
    sp.q[7, 2] = tulip.upper[2] + 0.01  # one tick past a joint limit (and a jump)
    assert any("t = 0.070 s" in p for p in check_stream(tulip, cfg, sp).problems)


@pytest.mark.parametrize("stop", ["ctrl-c", "tracking"])
def test_stopped_run_keeps_its_rows(plan_file, tmp_path, monkeypatch, stop):
    stop_after = 120

    def progress(p):
        if stop == "ctrl-c" and p.phase == "stream" and p.position >= stop_after:
            raise KeyboardInterrupt

    tick = TrajectoryExecutor._tick

    def slipping(
        self, q_cmd, posture, phase, store, offset=None
    ):  # an encoder 20 deg off from tick stop_after
        q = tick(self, q_cmd, posture, phase, store, offset)
        if stop == "tracking" and phase == "stream" and self.traj_result.ticks >= stop_after - 1:
            q = q + np.radians(20.0) * (np.arange(len(q)) == 4)
        return q

    monkeypatch.setattr(TrajectoryExecutor, "_tick", slipping)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt if stop == "ctrl-c" else SafetyTrip):
        cmd_run_trajectory.run_trajectory(str(plan_file), "sim", "sim", str(out), load_config(None),
                                          WorldOptions(noise=False), prompt=False, progress=progress, tare_s=0.3)  # fmt: skip
    meta = json.loads((out / "run.json").read_text())
    why = "KeyboardInterrupt" if stop == "ctrl-c" else "SafetyTrip: tracking error"
    assert meta["status"].startswith(f"stopped: {why}") and meta["ticks_streamed"] == stop_after
    rec = read_dynamic_recording(out / "recording.csv")
    spanned, skipped = _grid_rows(rec, out)
    assert _spanned_rows(out) - 3 <= spanned <= _spanned_rows(out) + 1 + skipped
    # every tick streamed has its row (or its grid point is in a stall's gap): the one that tripped (recorded
    # before the checks) and the last one measured before its grid time (`UniformRows.finish`)
    assert spanned >= stop_after
    assert len(_raw(out)[0]) == stop_after


def test_killed_run_keeps_a_readable_recording(plan_file, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "poise", "run", str(plan_file), "--robot", "sim", "--boards", "sim",
           "--out", str(out), "--yes", "--json", "--physics", "kinematic"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = 0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            path = out / "recording.csv"
            lines = path.read_text().splitlines() if path.exists() else []
            seen = max(0, len([x for x in lines if x and not x.startswith("#")]) - 1)
            if seen >= 60:
                break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert seen >= 60, "the run did not get to streaming"
    rec = read_dynamic_recording(out / "recording.csv")  # whole lines only: it parses
    assert len(rec.t) >= seen
    assert json.loads((out / "run.json").read_text())["status"] == "running"  # killed: no word from it


def arm_bench(tmp_path):
    """An iCub right arm's trajectory plan (tmp_path / "arm.json", at rest at both ends) and its configuration on the
    emulated Dynamixel bus (tmp_path / "arm.toml", joint k on servo k + 1): (the model, the configuration, the
    plan's trajectory)."""
    from drivers.config import DEFAULT_CONFIG
    from trajectories.fourier import FourierTrajectory

    arm = get_model("icub-right-arm")
    mid = (np.asarray(arm.lower) + np.asarray(arm.upper)) / 2
    a = np.zeros((arm.nq, 2))
    a[:, 0], a[:, 1] = 0.15, -0.15  # at rest at both ends (Σ a = 0, b = 0)
    traj = FourierTrajectory(2.0, 2.0, mid, a, np.zeros((arm.nq, 2)))
    plan = TrajectoryPlan(
        arm.name, arm.root, list(arm.joint_names), traj.to_json(), params=next(iter(arm.params))
    )
    save_trajectory_plan(plan, tmp_path / "arm.json")
    head = (
        DEFAULT_CONFIG.read_text().split("[boards]")[0].replace('robot = "tulip"', 'robot = "icub-right-arm"')
    )
    joints = "".join(
        f'\n[[joints]]\nname = "{n}"\nid = {i + 1}\nzero = 2048\ndirection = 1\nticks_per_rad = 651.8986469\n'
        for i, n in enumerate(arm.joint_names)
    )
    (tmp_path / "arm.toml").write_text(head + joints)
    return arm, load_config(tmp_path / "arm.toml"), traj


def test_fixed_base_arm_streams_encoders_over_dynamixel(tmp_path):
    """An arm (no boards) on the emulated Dynamixel bus: moved to the start, streamed, encoders recorded."""
    from drivers.config import servo_order
    from drivers.emulators.dxl_bus import DxlBusEmulator
    from drivers.emulators.plant import JointPlant

    arm, cfg, traj = arm_bench(tmp_path)
    plant = JointPlant(np.zeros(arm.nq), tau=0.03)
    bus = DxlBusEmulator(servo_order(cfg, arm.joint_names), plant)
    out = tmp_path / "run"
    try:
        args = ["run", str(tmp_path / "arm.json"), "--robot", f"dxl:{bus.path}?baud={cfg.baud}",
                "--config", str(tmp_path / "arm.toml"), "--out", str(out), "--yes", "--json"]  # fmt: skip
        assert main(args) == 0
    finally:
        bus.close()
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "completed" and meta["boards"] is None and not meta["standing"]
    assert meta["position_p_gain"] == cfg.executor.position_p_gain == 6000  # written on connect, read back
    assert plant.p_gain.tolist() == [6000] * arm.nq
    # the link reads Present Current with the angles: a recording of both, on the uniform grid (the kinematic
    # plant has no efforts: its servos report 0 A), with no torque constant known to turn them into efforts
    rec = read_dynamic_recording(out / "recording.csv")
    assert rec.current is not None and rec.tau is None and rec.wrench is None
    assert not np.any(rec.current) and rec.torque_constant == {} and meta["torque_constants"] == {}
    assert len(rec.t) == meta["ticks_streamed"]
    t_tr, q_cmd, q_meas = _raw(out)
    assert np.abs(q_cmd - traj.sample(t_tr)[0]).max() < 2e-6
    # as above: a loaded machine's late ticks widen the lag
    assert np.degrees(np.abs(q_meas - q_cmd)).max() < 1.5
    assert np.abs(plant.goal - q_cmd[-1]).max() < 1e-2  # the last goal the servos got is the trajectory's end
    # every tick's goals in one SYNC WRITE (ROBOTIS Protocol 2.0, instruction 0x83, Goal Position 116) and its
    # encoders with the currents in one (Fast) SYNC READ from Present Current (126) through Present Position (132);
    # no goal servo by servo
    from drivers import dxl_protocol as D
    from drivers.dxl_protocol import INST_FAST_SYNC_READ, INST_SYNC_READ, INST_SYNC_WRITE, INST_WRITE

    assert (
        INST_SYNC_WRITE == 0x83
        and INST_SYNC_READ == 0x82
        and INST_FAST_SYNC_READ == 0x8A
        and INST_WRITE == 0x03
    )
    assert bus.served[INST_SYNC_WRITE, 116] >= meta["ticks_streamed"] and bus.served[INST_WRITE, 116] == 0
    assert bus.served[D.INST_READ, 126] == bus.served[D.INST_READ, 132] == 0
    assert bus.served[INST_SYNC_READ, 126] + bus.served[INST_FAST_SYNC_READ, 126] >= meta["ticks_streamed"]
