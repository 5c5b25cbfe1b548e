"""The bench clock: on the emulated bench the drivers pace and stamp by the physics twin's simulated time, so a
machine too slow for --time-scale (here: the twin's physics capped at a quarter of the asked speed) makes the
run take longer, not the holds shorter; on the host clock (real-hardware timing) the same holds cover a fraction
of their planned simulated time."""

import argparse
import csv
import json
import time

import numpy as np
import pytest
from conftest import UR5

from drivers.clock import HOST_CLOCK, HostClock, sleep_for
from drivers.config import load_config
from drivers.emulators.mujoco_twin import Twin, TwinOptions
from drivers.emulators.sim_robot import true_parameters
from drivers.emulators.testplan import random_plan
from drivers.emulators.twin_clock import TwinClock
from drivers.emulators.world import SimWorld, WorldOptions
from formats.errors import DataError, DeviceError
from formats.static_recording import read_recording
from poise import cmd_run

SCALE = 4.0  # asked: simulated time 4 × the wall clock
CAP = 1000.0  # physics steps per wall second (1 ms steps): at most 1 × the wall clock, a quarter of the asked
HOLD_S = 1.5


def _run(model, plan, tmp_path, clock: str):
    """Run `plan` on the throttled twin; returns (run dir, run.json, per-hold twin times, settle twin times)."""
    sessions, holds, settles = [], [], {}

    def progress(p):
        if not sessions:
            return
        t = sessions[0].world.twin.t_sim
        if p.phase == "settle":
            settles[p.posture] = [t, None]
        elif p.phase == "hold":
            if not holds or holds[-1]["posture"] != p.posture or p.phase_elapsed < holds[-1]["elapsed"][-1]:
                holds.append({"posture": p.posture, "t_sim": [], "elapsed": []})
                settles[p.posture][1] = t
            holds[-1]["t_sim"].append(t)
            holds[-1]["elapsed"].append(p.phase_elapsed)

    args = argparse.Namespace(plan="p.json", robot="sim", boards="sim", out=str(tmp_path / clock), resume=False,
                              time_scale=SCALE, yes=True)  # fmt: skip
    opts = WorldOptions(
        noise=False, physics="mujoco", time_scale=SCALE, clock=clock, twin_max_steps_per_s=CAP
    )
    result, run_dir = cmd_run.execute(args, model, plan, load_config(), world_opts=opts, progress=progress,
                                      prepare=sessions.append, tare_s=0.25)  # fmt: skip
    meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    return result, run_dir, meta, holds, settles


def _rows(path, phase=None):
    with open(path, encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if phase is None or r["phase"] == phase]


def test_throttled_twin_holds_and_settles_last_their_planned_simulated_time(model, tmp_path):
    plan = random_plan(model, 2, seed=4, move_s=1.0, hold_s=HOLD_S)
    result, run_dir, meta, holds, settles = _run(model, plan, tmp_path, "twin")
    tick_sim = SCALE / load_config().executor.rate_hz  # one tick in simulated seconds

    timing = meta["twin_timing"]
    assert timing["drivers_clock"] == "twin" and timing["behind_sim_s"] == 0.0
    assert timing["achieved_scale"] < 0.5 * SCALE  # the cap really slowed the physics below the asked scale
    assert timing["lost_sim_s"] > 1.0
    assert meta["twin_events"] == []  # no fall, no slip: the robot saw its setpoints at the planned pace
    assert list(read_recording(run_dir / "recording.csv").posture) == [0, 1]

    # every hold spans its planned duration of simulated time, as the twin itself counts it
    assert [h["posture"] for h in holds] == [0, 1]
    for h in holds:
        span = h["t_sim"][-1] - h["t_sim"][0]
        assert abs(span - HOLD_S) < 2 * tick_sim, (h["posture"], span)
        # the executor's own elapsed time (robot seconds, read before each tick, so one tick behind) is the twin's.
        # The test reads the twin's time from another thread than the physics', which may take one more 1 ms step
        # in between (seen once in a loaded full run: 0.043 against 0.042 s and 0.037 against 0.038 s, net zero)
        step = TwinOptions().timestep
        np.testing.assert_allclose(np.diff(h["elapsed"])[1:], np.diff(h["t_sim"])[:-1], atol=step + 1e-6)
        assert abs((h["elapsed"][-1] - h["elapsed"][1]) - (h["t_sim"][-2] - h["t_sim"][0])) <= step + 1e-6
    # the settle time reported per posture is the twin's simulated time from the settle's start to the hold
    for rep in meta["report"]:
        t0, t1 = settles[rep["posture"]]
        assert abs(rep["settle_s"] - (t1 - t0)) < 2 * tick_sim

    # the recording's timeline is the twin's: hold rows and board samples span simulated time / scale
    joints = _rows(run_dir / "raw_joints.csv", "hold")
    boards = _rows(run_dir / "raw_boards.csv", "hold")
    for h in holds:
        tj = [float(r["t"]) for r in joints if int(r["posture"]) == h["posture"]]
        tb = [float(r["t"]) for r in boards if int(r["posture"]) == h["posture"]]
        assert abs((tj[-1] - tj[0]) * SCALE - (h["t_sim"][-1] - h["t_sim"][0])) < 2 * tick_sim
        # board samples stamped on the same clock: inside the hold's ticks (drained at them), filling it
        assert tj[0] - 2 * tick_sim / SCALE <= tb[0] and tb[-1] <= tj[-1] + tick_sim / SCALE
        assert (tb[-1] - tb[0]) > 0.8 * (tj[-1] - tj[0])
    all_j = [float(r["t"]) for r in _rows(run_dir / "raw_joints.csv")]
    assert (all_j[-1] - all_j[0]) * SCALE < timing["sim_s"]  # the whole run fits in the twin's simulated time


def test_on_the_host_clock_the_same_hold_is_cut_short_in_simulated_time(model, tmp_path):
    """The contrast: real-hardware timing on the throttled twin — the hold lasts HOLD_S / SCALE wall seconds,
    in which the capped physics runs at most a quarter of HOLD_S."""
    plan = random_plan(model, 1, seed=4, move_s=1.0, hold_s=HOLD_S)
    _, _, meta, holds, _ = _run(model, plan, tmp_path, "host")
    timing = meta["twin_timing"]
    assert timing["drivers_clock"] == "host" and timing["behind_sim_s"] > 0.5
    span = holds[0]["t_sim"][-1] - holds[0]["t_sim"][0]
    assert span < 0.5 * HOLD_S
    assert holds[0]["elapsed"][-1] > 0.9 * HOLD_S  # while the executor believed it held the whole time


def test_twin_clock_reads_and_waits_on_simulated_time(model):
    """Without a physics thread, waiting on the twin's clock runs the physics up to the time waited for."""
    tw = Twin(model, true_parameters(model), TwinOptions(time_scale=2.0))
    clock = TwinClock(tw)
    assert tw.clocked and tw.timing()["drivers_clock"] == "twin"
    t0 = clock.now()
    assert t0 == pytest.approx(tw.t_sim / 2.0)
    sleep_for(clock, 0.05)  # 0.05 clock seconds = 0.1 simulated s
    assert tw.t_sim - 2.0 * t0 == pytest.approx(0.1, abs=1.5e-3)
    assert clock.now() - t0 == pytest.approx(0.05, abs=1e-3)


def test_physics_waits_for_late_drivers_on_its_clock_then_runs_free(model):
    """Lockstep: drivers on the twin's clock that have not come back for their next tick hold the physics
    DRIVER_LEAD_S past the time they last waited for (a late setpoint never meets a robot that moved on);
    drivers that wait on something else for over FREE_AFTER_S let it run free again."""
    from drivers.emulators import mujoco_twin as mt

    tw = Twin(model, true_parameters(model), TwinOptions(time_scale=1.0))
    clock = TwinClock(tw)
    tw.start()
    try:
        t = clock.now() + 0.02
        clock.sleep_until(t)  # the drivers' tick at t; then they are "busy"
        time.sleep(0.5 * mt.FREE_AFTER_S)
        held = tw.t_sim
        assert t <= held <= t + mt.DRIVER_LEAD_S + 0.006  # one physics chunk past the lead at most
        assert tw.timing()["held_for_drivers_wall_s"] > 0.3 * mt.FREE_AFTER_S
        time.sleep(mt.FREE_AFTER_S + 0.1)
        assert tw.t_sim > held + 0.1  # free again: ~0.2 simulated s at 1×
        t2 = clock.now() + 0.01
        clock.sleep_until(t2)  # back on the clock: held again near their time
        time.sleep(0.1)
        assert t2 <= tw.t_sim <= t2 + mt.DRIVER_LEAD_S + 0.006
    finally:
        tw.close()


def test_a_fixed_base_arms_physics_waits_longer_for_its_drivers():
    """An arm's bench has nothing that needs simulated time but the drivers' clock: drivers away for twice
    FREE_AFTER_S (a stalled streaming thread) still hold its physics, which runs free only after
    FREE_AFTER_S_FIXED_BASE. Before, it ran on after 0.25 s and the stream's next setpoints met an arm that had
    stopped (a 15.5° tracking trip at 3×)."""
    from drivers.emulators import mujoco_twin as mt
    from robots.registry import get_model

    arm = get_model(str(UR5))
    tw = Twin(arm, arm.parameter_set("urdf"), TwinOptions(time_scale=1.0, fixed_base=True))
    clock = TwinClock(tw)
    tw.start()
    try:
        t = clock.now() + 0.02
        clock.sleep_until(t)
        time.sleep(2 * mt.FREE_AFTER_S)
        assert t <= tw.t_sim <= t + mt.DRIVER_LEAD_S + 0.006 and tw.timing()["freed_at_sim_s"] == []
        time.sleep(mt.FREE_AFTER_S_FIXED_BASE)
        assert tw.t_sim > t + 0.1 and len(tw.timing()["freed_at_sim_s"]) == 1  # then free, and said so
    finally:
        tw.close()


def test_a_stall_of_the_whole_process_is_not_taken_for_drivers_gone_elsewhere(model):
    """The process frozen for twice FREE_AFTER_S (SIGSTOP: a loaded machine descheduling it) between two ticks: on
    waking, the physics is still held for the drivers — before, the wall time since their last tick said they had
    gone elsewhere and the physics ran free, leaving 0.1–0.6 s gaps in an arm's recording on a loaded CI run."""
    import os
    import subprocess

    from drivers.emulators import mujoco_twin as mt

    tw = Twin(model, true_parameters(model), TwinOptions(time_scale=1.0))
    clock = TwinClock(tw)
    tw.start()
    try:
        t = clock.now() + 0.02
        clock.sleep_until(t)
        freeze = (
            f"sleep 0.02; kill -STOP {os.getpid()}; sleep {2 * mt.FREE_AFTER_S}; kill -CONT {os.getpid()}"
        )
        subprocess.run(["sh", "-c", freeze], check=True)
        time.sleep(0.05)
        assert t <= tw.t_sim <= t + mt.DRIVER_LEAD_S + 0.006
    finally:
        tw.close()


def test_twin_stopped_while_waited_for_fails_clearly(model):
    tw = Twin(model, true_parameters(model), TwinOptions())
    tw.start()
    tw._stop.set()  # the physics thread ends as if it had died
    tw._thread.join(timeout=2.0)
    with pytest.raises(DeviceError, match="physics twin stopped"):
        TwinClock(tw).sleep_until(tw.t_sim + 10.0)
    tw.close()


def test_kinematic_bench_and_real_hardware_run_on_the_host_clock(model):
    world = SimWorld(model, load_config(), WorldOptions(noise=False))
    try:
        assert world.clock is HOST_CLOCK
    finally:
        world.close()
    c = HostClock()
    t = c.now()
    c.sleep_until(t + 0.01)
    assert c.now() >= t + 0.01


def test_bad_clock_options_refused(model):
    with pytest.raises(ValueError, match="unknown bench clock 'wall'"):
        SimWorld(model, load_config(), WorldOptions(clock="wall"))
    with pytest.raises(DataError, match="max_steps_per_s 0"):
        Twin(model, true_parameters(model), TwinOptions(max_steps_per_s=0.0))
