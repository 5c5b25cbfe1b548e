"""The poise framed protocol: codec, and the link against the pty controller emulator with faults."""

import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers import framed as F
from drivers.config import load_config
from drivers.emulators.framed_controller import FramedControllerEmulator
from drivers.emulators.plant import JointPlant
from drivers.link import LinkTimeout, open_link

NAMES = [f"theta{i}" for i in range(1, 13)]


def test_crc_check_value():
    assert F.crc16_ccitt(b"123456789") == 0x29B1  # CRC-16/CCITT-FALSE check value


@given(st.integers(0, 255), st.integers(0, 255), st.binary(max_size=60), st.binary(max_size=10))
def test_frames_roundtrip_through_noise(seq, kind, payload, junk):
    p = F.FrameParser()
    frame = F.encode(seq, kind, payload)
    damaged = bytearray(frame)
    damaged[-1] ^= 0x01
    out = p.feed(junk + bytes(damaged) + frame + bytes(262))  # a bogus length can hold resync this long
    assert F.Frame(seq, kind, payload) in out
    assert p.bad >= 1


@pytest.fixture
def ctrl():
    plant = JointPlant(np.zeros(12), tau=0.02)
    emu = FramedControllerEmulator(plant)
    yield plant, emu
    emu.close()


def test_link_commands_and_reads(ctrl):
    plant, emu = ctrl
    link = open_link(f"serial:{emu.path}", NAMES, load_config())
    link.connect()
    try:
        goal = np.radians(np.r_[5, 0, -10, 20, -10, 0, 0, 0, -10, 20, -10, 0])
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            q = link.command(goal)
        np.testing.assert_allclose(q, goal, atol=1e-4)
        assert link.flags & F.FLAG_ENABLED
    finally:
        link.close()


def test_faults_never_apply_a_setpoint_twice(ctrl):
    plant, emu = ctrl
    emu.drop_every, emu.corrupt_every = 4, 3
    link = open_link(f"serial:{emu.path}", NAMES, load_config())
    link.connect()
    try:
        base = emu.applied_setpoints
        for k in range(30):
            link.command(np.full(12, 0.001 * k))
        assert link.retransmissions > 5
        assert emu.applied_setpoints - base == 30
    finally:
        link.close()


def test_watchdog_holds_when_host_goes_quiet(ctrl):
    plant, emu = ctrl
    link = open_link(f"serial:{emu.path}", NAMES, load_config())
    link.connect()
    try:
        link.command(np.full(12, 0.3))
        time.sleep(0.45)
        assert emu.watchdog_trips == 1
        q = link.read()
        assert link.flags & F.FLAG_WATCHDOG
        np.testing.assert_allclose(plant.goal, q, atol=1e-3)  # held where it was, not driven on to 0.3
        assert np.all(q < 0.3)
    finally:
        link.close()


def test_dead_controller_times_out(ctrl):
    plant, emu = ctrl
    link = open_link(f"serial:{emu.path}", NAMES, load_config())
    link.connect()
    emu.drop_every = 1
    try:
        with pytest.raises(LinkTimeout):
            link.read()
    finally:
        link.close()
