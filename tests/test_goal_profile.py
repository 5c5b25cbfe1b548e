"""Dynamixel time-based goal profiles (Drive Mode bit 2, Profile Velocity in ms): the link sets them on connect, the
emulated bus passes them to the physics twin, whose servo target then moves linearly to each goal. Streamed at the
tick period, a stiff servo's effort read at the ticks carries the joint's whole damping; stepped goals hide half."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import UR5

from drivers.config import DEFAULT_CONFIG, ServoMap, load_config
from drivers.dynamixel import ADDR_DRIVE_MODE, ADDR_PROFILE_ACCELERATION, ADDR_PROFILE_VELOCITY, DynamixelLink
from drivers.emulators.dxl_bus import ADDR_TORQUE, DxlBusEmulator
from drivers.emulators.plant import JointPlant
from formats.errors import DataError, DeviceError


class _Plant(JointPlant):
    """The kinematic plant, noting the profiles the bus passes on."""

    def __init__(self, n: int) -> None:
        super().__init__(np.zeros(n))
        self.profiles: dict[int, float] = {}

    def set_profile(self, idx: int, seconds: float) -> None:
        self.profiles[idx] = seconds


def _register(bus: DxlBusEmulator, sid: int, addr: int, size: int) -> int:
    return int.from_bytes(bus.tables[sid][addr : addr + size], "little")


def test_the_link_sets_a_time_based_profile_on_every_servo():
    servos = [ServoMap("a", 1), ServoMap("b", 2, direction=-1)]
    plant = _Plant(2)
    bus = DxlBusEmulator(servos, plant)
    bus.tables[2][ADDR_DRIVE_MODE] = 0x01  # reverse mode already set: kept
    link = DynamixelLink(bus.path, servos, ["a", "b"], goal_profile_ms=10)
    try:
        link.connect()
    finally:
        link.close()
        bus.close()
    assert [bus.tables[s.id][ADDR_DRIVE_MODE] for s in servos] == [0x04, 0x05]
    for s in servos:
        assert _register(bus, s.id, ADDR_PROFILE_VELOCITY, 4) == 10
        assert _register(bus, s.id, ADDR_PROFILE_ACCELERATION, 4) == 0
        assert bus.tables[s.id][ADDR_TORQUE] == 1  # set before torque came on
    assert plant.profiles == {0: 0.01, 1: 0.01}


def test_a_servo_with_torque_on_is_not_switched_to_a_profile():
    """Drive Mode is EEPROM: writable with torque off only, and the link never turns torque off (an arm falls)."""
    servos = [ServoMap("a", 1)]
    plant = _Plant(1)
    bus = DxlBusEmulator(servos, plant)
    plant.set_torque(0, True)  # left on by an earlier session
    bus.tables[1][ADDR_TORQUE] = 1
    link = DynamixelLink(bus.path, servos, ["a"], goal_profile_ms=10)
    try:
        with pytest.raises(DeviceError, match="servo 1 \\(a\\) has torque on.*Drive Mode"):
            link.connect()
    finally:
        link.close()
        bus.close()
    assert bus.tables[1][ADDR_DRIVE_MODE] == 0


@pytest.mark.parametrize("value", ["-1", "10.5", "40000"])
def test_a_bad_goal_profile_is_refused(tmp_path, value):
    path = tmp_path / "robot.toml"
    path.write_text(
        DEFAULT_CONFIG.read_text().replace("[executor]\n", f"[executor]\ngoal_profile_ms = {value}\n", 1)
    )
    with pytest.raises(DataError, match="goal_profile_ms"):
        load_config(path)


def _sampled_damping(profile_s: float) -> tuple[float, float]:
    """(fitted, true) viscous damping of the UR5's last joint on the fixed-base twin: a 0.5 Hz sine streamed at
    100 Hz to its servo at Position P Gain 6000, its effort and encoder read at every tick, fitted as
    I·q̈ + d·q̇ + c·sign(q̇)."""
    from drivers.emulators.mujoco_twin import Twin, TwinOptions
    from robots.registry import get_model

    model = get_model(str(UR5))
    twin = Twin(model, model.parameter_set("urdf"), TwinOptions(fixed_base=True))
    for j in range(model.nq):
        twin.set_p_gain(j, 6000)
        twin.set_torque(j, True)
        twin.set_profile(j, profile_s)
    t, q, effort = [], [], []
    for k in range(600):
        twin.set_goal(5, 0.5 * np.sin(np.pi * k * 0.01))
        twin.run_steps(10)
        t.append(twin.t_sim), q.append(twin.measured()[5]), effort.append(twin.effort()[5])
    t, q = np.array(t), np.array(q)
    qd = np.gradient(q, t)
    A = np.c_[np.gradient(qd, t), qd, np.sign(qd)][50:-50]
    x = np.linalg.lstsq(A, np.array(effort)[50:-50], rcond=None)[0]
    return float(x[1]), twin.joint_truth()[model.joint_names[5]]["viscous"]


def test_a_profile_at_the_tick_period_lets_the_ticks_see_the_whole_damping():
    """Stepped goals: read just before the next step, the effort has settled and misses about half the damping
    (measured 4.13 of 8.75 N·m·s/rad); a 10 ms profile: 8.94."""
    stepped, truth = _sampled_damping(0.0)
    profiled, _ = _sampled_damping(0.01)
    assert stepped < 0.7 * truth
    assert profiled == pytest.approx(truth, rel=0.1)
