"""The poise framed protocol: codec, and the link against the pty controller emulator with faults."""

import time

import numpy as np
import pytest
import serial
from hypothesis import given
from hypothesis import strategies as st

from drivers import framed as F
from drivers.config import load_config
from drivers.emulators.framed_controller import FramedControllerEmulator
from drivers.emulators.plant import JointPlant
from drivers.link import LinkTimeout, open_link
from formats.errors import DeviceError

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


def _replies(ser, parser, quiet=0.15):
    """Every frame the controller sends until it has been quiet for `quiet` s."""
    out, last = [], time.monotonic()
    while time.monotonic() - last < quiet:
        data = ser.read(256)
        if data:
            out += parser.feed(data)
            last = time.monotonic()
    return out


def test_every_damaged_or_unknown_request_gets_exactly_one_nack(ctrl):
    plant, emu = ctrl
    ser = serial.serial_for_url(emu.path, timeout=0.01)
    host = F.FrameParser()
    try:
        good = F.encode(7, F.READ)
        bad_crc = bytearray(F.encode(8, F.SETPOINT, bytes(48)))
        bad_crc[-2] ^= 0x01
        cases = [
            (F.encode(9, 0x42), F.NACK_TYPE),  # intact frame of a type the controller does not know
            (F.encode(10, F.SETPOINT, bytes(46)), F.NACK_LENGTH),  # 2 bytes short
            (F.encode(11, F.ENABLE), F.NACK_LENGTH),
            (bytes(bad_crc), F.NACK_CRC),
        ]
        for frame, reason in cases:
            ser.write(frame)
            reps = _replies(ser, host)
            assert [(r.seq, r.kind, r.payload) for r in reps] == [(frame[2], F.NACK, bytes([reason]))]
        ser.write(good)
        reps = _replies(ser, host)
        assert [(r.seq, r.kind) for r in reps] == [(7, F.STATE)]  # the stream is still in sync
        assert emu.nacks == [reason for _, reason in cases]
        assert emu.applied_setpoints == 0
    finally:
        ser.close()


def test_host_resends_on_nack_and_never_applies_twice(ctrl):
    plant, emu = ctrl
    link = F.FramedLink(emu.path, NAMES, reply_timeout=5.0)  # a timeout would make this test crawl
    link.connect()
    try:
        emu.corrupt_rx_every = 3
        base = emu.applied_setpoints
        for k in range(20):
            link.command(np.full(12, 0.001 * k))
        assert link.nacks >= 5 and link.nacks == len(emu.nacks)
        assert set(emu.nacks) == {F.NACK_CRC}
        assert emu.applied_setpoints - base == 20
        assert link.retransmissions == link.nacks
    finally:
        link.close()


def test_host_reports_a_request_the_controller_keeps_refusing(ctrl):
    plant, emu = ctrl
    link = F.FramedLink(emu.path, NAMES, reply_timeout=5.0)
    link.connect()
    try:
        with pytest.raises(DeviceError, match=r"refused request 0x02 \(bad length\)"):
            link._state(link._request(F.SETPOINT, bytes(44)))  # a controller with 11 joints' worth
        assert link.nacks == link.retries + 1
        assert emu.nacks == [F.NACK_LENGTH] * (link.retries + 1)
    finally:
        link.close()


def test_new_session_hello_is_not_answered_from_the_old_cache(ctrl):
    plant, emu = ctrl
    first = F.FramedLink(emu.path, NAMES)
    first.connect()  # HELLO seq 1, READ seq 2, ENABLE seq 3
    first.seq = 0  # the next request is seq 1 again
    q = first.read()
    assert first.seq == 1
    first.close()
    second = F.FramedLink(emu.path, NAMES)
    second.connect()  # HELLO with seq 1: the controller's last reply was a STATE for seq 1
    try:
        assert second.read().shape == (12,)
        np.testing.assert_allclose(second._last, q, atol=1e-3)
    finally:
        second.close()
