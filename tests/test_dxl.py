"""Dynamixel Protocol 2.0: codec on the wire, and dynamixel_sdk (unmodified) against the pty bus emulator."""

import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers import dxl_protocol as D
from drivers.config import load_config
from drivers.dynamixel import DynamixelLink
from drivers.emulators.dxl_bus import DxlBusEmulator
from drivers.emulators.plant import JointPlant
from drivers.link import LinkTimeout
from formats.errors import DeviceError


def test_ping_packet_matches_the_emanual_example():
    assert D.encode(1, D.INST_PING).hex(" ") == "ff ff fd 00 01 03 00 01 19 4e"


@given(st.binary(max_size=40))
def test_stuffing_roundtrip_and_no_header_inside(body):
    stuffed = D.stuff(body)
    assert D.unstuff(stuffed) == body
    pkt = D.encode(3, D.INST_WRITE, body)
    assert pkt[4:].find(b"\xff\xff\xfd") in (-1,) or pkt[4:].find(b"\xff\xff\xfd\xfd") >= 0
    got = D.Parser().feed(b"\x00\xff" + pkt)
    assert got == [D.Packet(3, D.INST_WRITE, body)]


def test_parser_skips_corrupted_packets():
    good = D.encode(2, D.INST_READ, bytes([132, 0, 4, 0]))
    bad = bytearray(good)
    bad[-3] ^= 0xFF
    p = D.Parser()
    assert p.feed(bytes(bad) + good) == [D.Packet(2, D.INST_READ, bytes([132, 0, 4, 0]))]
    assert p.bad_crc == 1


@pytest.fixture
def bus():
    cfg = load_config()
    plant = JointPlant(np.zeros(12), tau=0.02)
    emu = DxlBusEmulator(cfg.servos, plant)
    yield cfg, plant, emu
    emu.close()


def test_sdk_link_tracks_goal_positions(bus):
    cfg, plant, emu = bus
    names = [s.name for s in cfg.servos]
    link = DynamixelLink(emu.path, cfg.servos, names, baud=cfg.baud)
    link.connect()
    try:
        assert plant.torque.all()  # torque enabled through the sdk
        goal = np.radians([5, -3, -10, 40, -20, 2, 0, 4, -12, 35, -18, -3])
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            q = link.command(goal)
        tick = 1 / cfg.servos[0].ticks_per_rad
        np.testing.assert_allclose(q, goal, atol=2 * tick)
        # direction and zero offset really applied on the wire: knee (direction -1) goal ticks < zero
        knee = emu.tables[4][116:120]
        assert int.from_bytes(knee, "little") == cfg.servos[3].to_ticks(goal[3]) < 2048
        link.stop()
        np.testing.assert_allclose(plant.goal, plant.q, atol=2 * tick)
    finally:
        link.close()


def test_sdk_link_retries_through_lost_packets(bus):
    cfg, plant, emu = bus
    emu.drop_every = 5
    link = DynamixelLink(emu.path, cfg.servos, [s.name for s in cfg.servos], baud=cfg.baud)
    link.connect()
    try:
        for _ in range(20):
            link.read()
        assert link.comm_errors > 0
    finally:
        link.close()


def test_missing_servo_is_reported(bus):
    cfg, plant, emu = bus
    servos = list(cfg.servos)
    servos[0] = type(servos[0])("theta1", 42)
    link = DynamixelLink(emu.path, servos, [s.name for s in servos], baud=cfg.baud)
    with pytest.raises(DeviceError, match=r"servos \[42\]"):
        link.connect()


def test_silent_bus_times_out(bus):
    cfg, plant, emu = bus
    link = DynamixelLink(emu.path, cfg.servos, [s.name for s in cfg.servos], baud=cfg.baud, retries=1)
    link.connect()
    emu.drop_every = 1  # the bus goes silent
    try:
        with pytest.raises(LinkTimeout):
            link.read()
    finally:
        link.close()
