"""The servos' Velocity Limit (44) against what poise commands: the check's unit (ROBOTIS e-Manual, X series: 0.229
rev/min per unit), the emulated bus holding the register for the real driver to read, and trajectory and posture
runs refused before anything moves when they would command a joint faster than its servo's register."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest
from test_run_trajectory import arm_bench

from drivers.config import ServoMap, load_config, servo_order
from drivers.dynamixel import DynamixelLink
from drivers.emulators import dxl_bus
from drivers.emulators.dxl_bus import DxlBusEmulator
from drivers.emulators.plant import JointPlant
from drivers.emulators.testplan import random_plan
from drivers.emulators.world import WorldOptions
from drivers.setpoints import servo_speed_problems
from formats.errors import DataError
from poise import cmd_run
from poise.cli import main
from robots.registry import get_model

RPM = 2 * math.pi / 60  # rad/s per rev/min


def _rad_s(raw: int) -> float:
    """A Velocity Limit register value in rad/s, from the e-Manual's unit (0.229 rev/min)."""
    return raw * 0.229 * RPM


def _info(raw: dict[str, int]) -> dict[str, dict]:
    """`servo_info` as a Dynamixel link records it, for joints j0, j1, … on servos 1, 2, …"""
    return {
        n: {"id": i + 1, "velocity_limit_rad_s": _rad_s(v), "velocity_limit_raw": v}
        for i, (n, v) in enumerate(raw.items())
    }


def test_check_uses_the_e_manual_unit_and_names_servo_joint_peak_register_and_fix():
    info = _info({"j0": 200, "j1": 200, "j2": 35})
    names = ["j0", "j1", "j2"]
    lim = 35 * 0.229 / 60 * 2 * math.pi  # 8.015 rev/min
    assert servo_speed_problems(info, names, [1.0, 1.0, lim * 0.999]) == []
    problems = servo_speed_problems(info, names, [1.0, 1.0, lim * 1.01])
    assert len(problems) == 1
    p = problems[0]
    assert "\n" not in p and "servo 3 (j2)" in p and f"{lim * 1.01:.3f} rad/s" in p
    assert f"{lim:.3f} rad/s" in p and "35 × 0.229 rev/min" in p
    assert "Velocity Limit (44) with torque off" in p and "slower" in p
    # the default XM430-W350 register (200 = 45.8 rev/min = 4.796 rad/s) is no bound at 4.7 rad/s, one at 4.9
    assert servo_speed_problems(info, names, [4.7, 0.0, 0.0]) == []
    assert "servo 1 (j0)" in servo_speed_problems(info, names, [4.9, 0.0, 0.0])[0]


def test_check_skips_links_without_registers_a_zero_register_and_scales_a_geared_joint():
    names = ["j0", "j1"]
    fast = [50.0, 50.0]
    assert servo_speed_problems(None, names, fast) == []  # the framed link: no registers
    assert servo_speed_problems({}, names, fast) == []
    assert servo_speed_problems({"j0": {"id": 1}}, names, fast) == []
    # 0: Profile Velocity (112) may then only be 0, which the e-Manual calls an infinite velocity: no bound
    assert servo_speed_problems(_info({"j0": 0, "j1": 0}), names, fast) == []
    # a joint turning once per two horn turns (ticks_per_rad doubled) may go half the horn's speed
    info, horn = _info({"j0": 100, "j1": 100}), _rad_s(100)
    gear = {"j0": 2 * 4096 / (2 * math.pi)}
    assert servo_speed_problems(info, names, [0.6 * horn, 0.0]) == []
    problems = servo_speed_problems(info, names, [0.6 * horn, 0.0], ticks_per_rad=gear)
    assert len(problems) == 1 and f"{horn / 2:.3f} rad/s at the joint" in problems[0]


def test_emulated_bus_holds_the_register_the_driver_reads():
    servos = [ServoMap(f"j{i}", i + 1) for i in range(3)]
    bus = DxlBusEmulator(servos, JointPlant(np.zeros(3)), velocity_limits={2: 35})
    link = DynamixelLink(bus.path, servos, [s.name for s in servos])
    try:
        link.connect()
        got = {n: v["velocity_limit_rad_s"] for n, v in link.servo_info.items()}
        # the XM430-W350's default in the e-Manual's control table: 200 × 0.229 rev/min
        assert got["j0"] == pytest.approx(_rad_s(200)) and got["j2"] == pytest.approx(_rad_s(200))
        assert got["j1"] == pytest.approx(_rad_s(35))
        assert link._read(2, 44, 4, "velocity limit") == 35  # the EEPROM item, 4 bytes at 44
        assert link.servo_info["j1"]["velocity_limit_raw"] == 35
    finally:
        link.close()
        bus.close()
    with pytest.raises(ValueError):
        DxlBusEmulator(servos, JointPlant(np.zeros(3)), velocity_limits={1: 1024})  # outside 0 … 1023


@pytest.mark.parametrize("register", [None, 10])
def test_trajectory_run_refused_when_a_servo_is_slower_than_its_streamed_goals(tmp_path, capsys, register):
    """Servo 2's register at 10 (2.29 rev/min, 0.240 rad/s), below the arm's streamed speeds: refused after
    connect, before the first tick, as the servo position-limit refusal is; at the default register it runs."""
    arm, cfg, _ = arm_bench(tmp_path)
    plant = JointPlant(np.zeros(arm.nq), tau=0.03)
    bus = DxlBusEmulator(
        servo_order(cfg, arm.joint_names), plant, velocity_limits={2: register} if register else None
    )
    out = tmp_path / "run"
    capsys.readouterr()
    try:
        args = ["run", str(tmp_path / "arm.json"), "--robot", f"dxl:{bus.path}?baud={cfg.baud}",
                "--config", str(tmp_path / "arm.toml"), "--out", str(out), "--yes", "--json"]  # fmt: skip
        code = main(args)
    finally:
        bus.close()
    meta = json.loads((out / "run.json").read_text())
    servo2 = arm.joint_names[1]
    assert meta["servos"][servo2]["velocity_limit_rad_s"] == pytest.approx(_rad_s(register or 200))
    if register is None:
        assert code == 0 and meta["status"] == "completed" and meta["ticks_streamed"] > 0
        return
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("poise: error: plan refused before moving: "), err
    assert f"servo 2 ({servo2})" in err[0] and "10 × 0.229 rev/min" in err[0] and "nothing moved" in err[0]
    assert f"{_rad_s(10):.3f} rad/s" in err[0] and "between ticks" in err[0] and "torque off" in err[0]
    # the fix follows where the peak is: the move to the start is stretched to [executor] velocity_limit
    assert ("on the move to the start" in err[0]) == ("or lower [executor] velocity_limit" in err[0])
    assert ("of the trajectory at t =" in err[0]) == ("or plan the trajectory slower" in err[0])
    assert (
        meta["status"].startswith("stopped: DataError: plan refused before moving")
        and meta["ticks_streamed"] == 0
    )
    joints = (out / "raw_joints.csv").read_text().splitlines()
    assert len(joints) <= 1, joints[:3]  # a header, no tick
    assert not np.any(plant.goal)  # the servos never got a goal beyond the hold where they started (0)


def _posture_args(tmp_path) -> argparse.Namespace:
    return argparse.Namespace(plan="plan.json", robot="sim", boards="sim", out=str(tmp_path / "run"), resume=False,
                              time_scale=20.0, yes=True, no_noise=True)  # fmt: skip


@pytest.mark.parametrize("register", [None, 35])
def test_posture_run_refused_when_its_velocity_limit_exceeds_a_servo_register(
    tmp_path, monkeypatch, register
):
    """Every emulated servo's register at 35 (8.0 rev/min, 0.839 rad/s) under the configuration's velocity_limit
    of 1 rad/s, to which the moves are stretched: refused after connect, nothing beyond the hold sent, the run
    folder saying why as for the servo position-limit refusal; at the default register it runs."""
    model = get_model("tulip")
    cfg = load_config()
    assert cfg.executor.velocity_limit == 1.0
    if register is not None:
        monkeypatch.setattr(dxl_bus, "VELOCITY_LIMIT_FACTORY", register)
    plan = random_plan(model, 1, seed=4, move_s=1.0, hold_s=1.0)
    sessions, goals = [], []

    def prepare(s):
        sessions.append(s)
        goals.append(s.world.plant.goal.copy())  # the hold the link sent on connect

    opts = WorldOptions(noise=False, physics="kinematic")
    if register is None:
        result, _ = cmd_run.execute(
            _posture_args(tmp_path), model, plan, cfg, world_opts=opts, prepare=prepare
        )
        assert [r.posture for r in result.completed] == [p.index for p in plan.postures]
        assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "completed"
        return
    with pytest.raises(DataError) as exc:
        cmd_run.execute(_posture_args(tmp_path), model, plan, cfg, world_opts=opts, prepare=prepare)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("plan refused before moving: [executor] velocity_limit 1 rad/s")
    assert "exceeds servo 1 (" in msg and f"Velocity Limit {_rad_s(35):.3f} rad/s (35 × 0.229 rev/min)" in msg
    assert f"({model.nq} servos in all)" in msg and "nothing moved" in msg
    assert (
        f"lower [executor] velocity_limit to at most {math.floor(_rad_s(35) * 1000) / 1000:.3f} rad/s" in msg
    )
    np.testing.assert_array_equal(sessions[0].world.plant.goal, goals[0])  # nothing sent beyond the hold
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["status"].startswith(
        "stopped: DataError: plan refused before moving: [executor] velocity_limit"
    )
    assert all(not s["completed"] for s in meta["segments"])
