"""Dynamixel link review fixes: operating mode, model number and current unit, error 3, limits at connect, USB
latency timer, baud rates — against the pty bus emulator running dynamixel_sdk unmodified."""

import contextlib
import math
import time

import numpy as np
import pytest

from drivers import dxl_protocol as D
from drivers.config import ServoMap, load_config
from drivers.dxl_pwm import PwmChannel
from drivers.dynamixel import DynamixelLink, latency_timer_warning
from drivers.emulators.dxl_bus import DxlBusEmulator
from drivers.emulators.plant import JointPlant
from drivers.link import link_meta, open_link
from formats.errors import DataError, DeviceError


@contextlib.contextmanager
def bench(n=3, servos=None, connect=True, models=None, **kw):
    """(bus, plant, link) on the pty bus emulator, the link connected unless `connect` is False; both closed after."""
    servos = servos or [ServoMap(f"j{i}", i + 1) for i in range(n)]
    plant = JointPlant(np.zeros(len(servos)))
    bus = DxlBusEmulator(servos, plant, models=models)
    link = DynamixelLink(bus.path, servos, [s.name for s in servos], **kw)
    try:
        if connect:
            link.connect()
        yield bus, plant, link
    finally:
        link.close()
        bus.close()


@pytest.mark.parametrize("mode", [0, 1, 4, 5, 16])
def test_connect_refuses_every_mode_but_position_control(mode):
    with bench(connect=False) as (bus, plant, link):
        bus.tables[2][11] = mode
        with pytest.raises(DeviceError) as exc:
            link.connect()
        msg = str(exc.value)
        assert "\n" not in msg and "servo 2 (j1)" in msg and f"Operating Mode {mode}" in msg
        assert "Position Control Mode (3)" in msg
        assert not plant.torque.any() and link.port is None  # torque never came on


def test_emulator_ignores_goal_position_outside_position_modes():
    """The emulator honours the mode: a goal moves the joint in mode 3, not in velocity mode (the servo would not)."""
    for mode, moves in ((3, True), (1, False)):
        with bench(n=1) as (bus, plant, link):  # in mode 3, then switch like a misconfigured servo would be
            if mode != 3:
                link._torque(False)
                link._write(1, 11, 1, mode, "operating mode")
                link._torque(True)
            link._send_goal(np.array([0.3]))
            time.sleep(0.05)  # the sync write has no status: let the emulator take it
            assert bool(abs(plant.goal[0] - 0.3) < 1e-3) is moves


def test_model_number_recorded_and_a_wrong_current_unit_warned(capsys):
    with bench(models={1: 1040, 2: 1020, 3: 4242}) as (bus, plant, link):  # XH430-V350, XM430-W350, unknown
        info = link_meta(link)["servos"]
        assert [info[n]["model_number"] for n in ("j0", "j1", "j2")] == [1040, 1020, 4242]
        assert info["j0"]["model"] == "XH430-V350" and info["j2"]["model"] is None
        # the XM430-W350 default the emulator holds at address 44: 200 × 0.229 rev/min
        assert info["j0"]["velocity_limit_rad_s"] == pytest.approx(200 * 0.229 * 2 * math.pi / 60)
        assert len(link.warnings) == 2 and "XH430-V350" in link.warnings[0] and "1.34 mA" in link.warnings[0]
        assert "model 4242 is not known" in link.warnings[1]
        assert "servo 1 (j0)" in link.warnings[0] and link.warnings[0] in capsys.readouterr().err
    with bench(models={1: 1040, 2: 1040, 3: 1040}, current_unit_ma=1.34) as (bus, plant, link):
        assert link.warnings == []


def test_servo_without_present_current_reads_nan_or_is_refused_with_a_torque_constant():
    with bench(models={2: 1060}) as (bus, plant, link):  # XL430-W250: Present Load at 126
        link.read()
        assert np.isnan(link.currents[1]) and np.isfinite(link.currents[[0, 2]]).all()
        assert any("XL430-W250" in w and "Present Load" in w for w in link.warnings)
    servos = [ServoMap("j0", 1), ServoMap("j1", 2, torque_constant=1.5)]
    with bench(servos=servos, models={2: 1060}, connect=False) as (bus, plant, link):
        with pytest.raises(DeviceError, match=r"servo 2 \(j1\).*torque_constant"):
            link.connect()


def test_pwm_channel_reads_currents_in_the_links_unit():
    with bench(n=2, current_unit_ma=1.0) as (bus, plant, link):
        ch = PwmChannel(link, link.servos[1])
        assert ch.current_unit_a == pytest.approx(1.0e-3)


def test_error_3_is_retried_like_silence_and_counted():
    with bench() as (bus, plant, link):
        before = link.comm_errors
        bus.damage_next(2, 2)  # the next two instructions servo 2 receives are damaged
        link.command(np.array([0.1, 0.0, 0.0]))
        assert link.comm_errors - before == 2
        bus.damage_next(3, 1)
        assert link._read(3, 11, 1, "operating mode") == 3
        assert link.comm_errors - before == 3
        bus.damage_next(1, 100)  # a servo that keeps getting damaged packets: the link gives up
        with pytest.raises(DeviceError):
            link.read()


def test_error_4_and_the_alert_stay_fatal():
    with bench(connect=False) as (bus, plant, link):
        bus.fail_writes[(2, 64)] = D.ERR_DATA_RANGE
        with pytest.raises(DeviceError, match="Data Range Error"):
            link.connect()


def test_robot_outside_servo_limits_at_connect_names_where_it_is():
    with bench(connect=False) as (bus, plant, link):
        plant.q[:] = [2.0, 0, 0]
        for sid in (1, 2, 3):
            bus.tables[sid][48:52] = (3000).to_bytes(4, "little")
            bus.tables[sid][52:56] = (1000).to_bytes(4, "little")
        with pytest.raises(DeviceError) as exc:
            link.connect()
        ticks = link.servos[0].to_ticks(2.0)
        assert f"servo 1 (j0) is at {ticks} ticks, outside its position limits [1000, 3000]" in str(exc.value)
        assert "goal" not in str(exc.value)


def test_latency_timer_warning(tmp_path):
    dev = tmp_path / "ttyUSB3"
    dev.mkdir()
    (dev / "latency_timer").write_text("16\n")
    msg = latency_timer_warning("/dev/ttyUSB3", str(tmp_path))
    assert "16 ms" in msg and f"echo 1 | sudo tee {dev / 'latency_timer'}" in msg and "\n" not in msg
    (dev / "latency_timer").write_text("1\n")
    assert latency_timer_warning("/dev/ttyUSB3", str(tmp_path)) is None
    assert latency_timer_warning("/dev/pts/4", str(tmp_path)) is None  # not an USB serial adapter


@pytest.mark.parametrize("baud", [250_000, 1_000_001, "fast"])
def test_baud_rates_outside_the_dynamixel_set_are_refused(tmp_path, baud):
    cfg = load_config()
    with pytest.raises(DataError, match="not a Dynamixel baud rate"):
        open_link(f"dxl:/dev/null?baud={baud}", [s.name for s in cfg.servos], cfg)
    bad = tmp_path / "robot.toml"
    val = f'"{baud}"' if isinstance(baud, str) else baud
    text = open(cfg.source, encoding="utf-8").read()
    assert "baud = 1000000" in text
    bad.write_text(text.replace("baud = 1000000", f"baud = {val}", 1))
    with pytest.raises(DataError, match=r"\[link\] baud"):
        load_config(bad)
    assert open_link("dxl:/dev/null?baud=57600", [s.name for s in cfg.servos], cfg).baud == 57_600
