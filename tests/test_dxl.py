"""Dynamixel Protocol 2.0: codec on the wire, and dynamixel_sdk (unmodified) against the pty bus emulator."""

import time

import numpy as np
import pytest
from dynamixel_sdk import COMM_SUCCESS, PacketHandler, PortHandler
from hypothesis import given
from hypothesis import strategies as st

from drivers import dxl_protocol as D
from drivers.config import load_config
from drivers.dynamixel import DynamixelLink
from drivers.emulators.dxl_bus import ADDR_PRESENT_VEL as ADDR_PRESENT
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


def test_a_status_of_the_wrong_length_is_read_again_not_decoded(bus):
    """A status whose parameters are not the length asked for (a ping's 3 bytes answering a 4-byte READ: the late
    answer to an earlier request, after the process stalled past the sdk's timeout) is read again: it once raised
    IndexError inside the sdk, and a short SYNC READ block decoded into wrong angles. Both SYNC READs: the fast
    one (one packet for all) and the plain one (a packet per servo)."""
    cfg, plant, emu = bus
    plant.q[:] = np.radians(np.linspace(-20, 25, 12))
    link = DynamixelLink(emu.path, cfg.servos, [s.name for s in cfg.servos], baud=cfg.baud)
    ph = link.packet
    real_read, real_rx, real_fast = ph.readTxRx, ph.readRx, ph.fastSyncReadRx
    stale = {"read": 1, "rx": 0, "fast": 0}

    def read_tx_rx(port, sid, addr, size):
        data, res, err = real_read(port, sid, addr, size)
        if stale["read"]:
            stale["read"] -= 1
            return [0x06, 0x04, 0x2E], COMM_SUCCESS, 0  # an XM430's ping status: model 1030, firmware 46
        return data, res, err

    def read_rx(port, sid, size):
        data, res, err = real_rx(port, sid, size)
        if stale["rx"] and sid == 5:
            stale["rx"] -= 1
            return data[:4], res, err
        return data, res, err

    def fast_rx(port, sid, size):
        data, res, err = real_fast(port, sid, size)
        if stale["fast"]:
            stale["fast"] -= 1
            return data[:-14], res, err  # one servo's part short
        return data, res, err

    ph.readTxRx, ph.readRx, ph.fastSyncReadRx = read_tx_rx, read_rx, fast_rx
    link.connect()
    try:
        assert link.fast_sync_read and stale["read"] == 0 and link.comm_errors == 1
        assert link.position_limits[cfg.servos[0].id] == (0, 4095)
        tick = 1 / cfg.servos[0].ticks_per_rad
        stale["fast"] = 1
        np.testing.assert_allclose(link.read(), plant.q, atol=2 * tick)
        link.fast_sync_read, stale["rx"] = False, 1
        np.testing.assert_allclose(link.read(), plant.q, atol=2 * tick)
        assert stale == {"read": 0, "rx": 0, "fast": 0} and link.comm_errors == 3
    finally:
        link.close()


def test_fast_sync_read_is_one_packet_and_falls_back_on_older_servos(bus):
    """On connect the link finds whether the servos answer FAST SYNC READ (0x8A): the emulated XM430s (firmware
    46) do — one status packet per tick instead of one per servo, its bytes as `dxl_protocol.fast_status` lays them
    out and each part's CRC that of the packet up to it — and a bus that ignores the instruction (older firmware)
    is read with SYNC READ; the angles and currents read are the same either way."""
    cfg, plant, emu = bus
    plant.q[:] = np.radians(np.linspace(-20, 25, 12))
    servos = cfg.servos
    pkt = D.fast_status([(s.id, 0, bytes(10)) for s in servos[:2]])
    part = 2 + 10 + 2
    assert pkt[4] == D.BROADCAST and pkt[7] == D.INST_STATUS and len(pkt) == 8 + 2 * part
    first_crc = D.crc16(pkt[: 8 + part - 2])
    assert pkt[8 + part - 2 : 8 + part] == bytes([first_crc & 0xFF, first_crc >> 8])
    assert pkt[-2:] == bytes([D.crc16(pkt[:-2]) & 0xFF, D.crc16(pkt[:-2]) >> 8])
    got = []
    for fast in (True, False):
        if not fast:
            real = emu._handle
            emu._handle = lambda p, real=real: [] if p.instruction == D.INST_FAST_SYNC_READ else real(p)
        before = emu.packets
        link = DynamixelLink(emu.path, servos, [s.name for s in servos], baud=cfg.baud)
        link.connect()
        try:
            assert link.fast_sync_read is fast
            sent, real_send = [], emu._send
            emu._send = lambda data, real_send=real_send, sent=sent: (sent.append(data), real_send(data))[1]
            got.append(link.read())
            emu._send = real_send
            statuses = b"".join(sent).count(D.HEADER)
            assert statuses == (1 if fast else len(servos)) and emu.packets > before
        finally:
            link.close()
    tick = 1 / servos[0].ticks_per_rad
    np.testing.assert_allclose(got[0], plant.q, atol=2 * tick)
    np.testing.assert_allclose(got[1], got[0], atol=2 * tick)


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


@pytest.fixture
def sdk(bus):
    """dynamixel_sdk's own PortHandler/PacketHandler on the emulated bus, for checking the servo's answers."""
    cfg, plant, emu = bus
    port = PortHandler(emu.path)
    assert port.openPort() and port.setBaudRate(cfg.baud)
    yield cfg, plant, emu, port, PacketHandler(2.0)
    port.closePort()


def test_broadcast_ping_is_answered_by_every_servo(sdk):
    cfg, plant, emu, port, ph = sdk
    found, res = ph.broadcastPing(port)
    assert res == COMM_SUCCESS
    assert sorted(found) == sorted(s.id for s in cfg.servos)
    assert all(model == 1020 for model, _fw in found.values())


def test_broadcast_write_is_applied_without_status(sdk):
    cfg, plant, emu, port, ph = sdk
    assert ph.write1ByteTxOnly(port, D.BROADCAST, 65, 1) == COMM_SUCCESS  # LED on, every servo
    time.sleep(0.1)
    assert len(port.readPort(64)) == 0  # no status packet for a broadcast WRITE
    assert all(emu.tables[s.id][65] == 1 for s in cfg.servos)


def test_eeprom_is_writable_only_with_torque_off(sdk):
    cfg, plant, emu, port, ph = sdk
    sid = cfg.servos[0].id
    res, err = ph.write4ByteTxRx(port, sid, 48, 3500)  # Max Position Limit, EEPROM, torque off
    assert (res, err) == (COMM_SUCCESS, 0)
    assert ph.read4ByteTxRx(port, sid, 48)[:2] == (3500, COMM_SUCCESS)
    assert ph.write1ByteTxRx(port, sid, 64, 1) == (COMM_SUCCESS, 0)
    res, err = ph.write4ByteTxRx(port, sid, 48, 3000)
    assert (res, err) == (COMM_SUCCESS, D.ERR_ACCESS)
    assert ph.read4ByteTxRx(port, sid, 48)[0] == 3500  # refused write left it alone
    assert ph.getRxPacketError(err).startswith("[RxPacketError] Writing or Reading is not available")


def test_short_out_of_range_and_read_only_writes_are_refused(sdk):
    cfg, plant, emu, port, ph = sdk
    sid = cfg.servos[1].id
    before = bytes(emu.tables[sid])
    assert ph.write2ByteTxRx(port, sid, 116, 2000) == (COMM_SUCCESS, D.ERR_DATA_LENGTH)  # 4-byte goal
    assert ph.write1ByteTxRx(port, sid, 64, 2) == (COMM_SUCCESS, D.ERR_DATA_RANGE)  # torque enable 0/1
    assert ph.write4ByteTxRx(port, sid, 48, 5000) == (COMM_SUCCESS, D.ERR_DATA_RANGE)  # > 4095
    assert ph.write4ByteTxRx(port, sid, 132, 0) == (COMM_SUCCESS, D.ERR_ACCESS)  # present position
    assert ph.write1ByteTxRx(port, sid, 66, 0) == (COMM_SUCCESS, D.ERR_ACCESS)  # reserved address
    assert bytes(emu.tables[sid])[:ADDR_PRESENT] == before[:ADDR_PRESENT]
    # goal position must lie within the position limits
    assert ph.write4ByteTxRx(port, sid, 48, 3000) == (COMM_SUCCESS, 0)
    assert ph.write1ByteTxRx(port, sid, 64, 1) == (COMM_SUCCESS, 0)
    assert ph.write4ByteTxRx(port, sid, 116, 3001) == (COMM_SUCCESS, D.ERR_DATA_RANGE)
    assert ph.write4ByteTxRx(port, sid, 116, 2999) == (COMM_SUCCESS, 0)


def _link(cfg, emu, **kw):
    return DynamixelLink(emu.path, cfg.servos, [s.name for s in cfg.servos], baud=cfg.baud, **kw)


def test_refused_torque_enable_is_an_error_naming_servo_instruction_and_error(bus):
    cfg, plant, emu = bus
    sid = cfg.servos[2].id
    emu.fail_writes[(sid, 64)] = D.ERR_ACCESS
    with pytest.raises(DeviceError, match=rf"servo {sid} answered WRITE torque enable = 1 .*Access Error"):
        _link(cfg, emu).connect()
    assert not plant.torque[2]


def test_hardware_error_alert_is_reported_with_its_cause(bus):
    cfg, plant, emu = bus
    sid = cfg.servos[4].id
    emu.inject_hardware_error(sid, 0x20)
    with pytest.raises(DeviceError, match=rf"servo {sid} answered PING with hardware error alert: overload"):
        _link(cfg, emu).connect()


def test_hardware_error_during_streaming_stops_the_link(bus):
    cfg, plant, emu = bus
    link = _link(cfg, emu)
    link.connect()
    try:
        link.read()
        sid = cfg.servos[7].id
        emu.inject_hardware_error(sid, 0x04 | 0x20)
        with pytest.raises(DeviceError, match=rf"servo {sid} answered SYNC READ .*overheating, overload"):
            link.read()
        assert not plant.torque[7]
    finally:
        link.close()


def test_goal_outside_the_servo_position_limits_is_refused_before_sending(bus):
    cfg, plant, emu = bus
    s = cfg.servos[3]
    hi = s.zero + round(s.ticks_per_rad * np.radians(30))  # max position limit 30° past the zero
    assert ph_write_limit(emu, s.id, hi)
    link = _link(cfg, emu)
    link.connect()
    try:
        assert link.position_limits[s.id] == (0, hi)
        goal = np.zeros(12)
        goal[3] = np.radians(40) * s.direction  # 40° toward the limit, whatever the servo's direction
        base = bytes(emu.tables[s.id][116:120])
        with pytest.raises(
            DeviceError, match=rf"{s.name} is \d+ ticks, outside servo {s.id}'s position limits"
        ):
            link.command(goal)
        assert bytes(emu.tables[s.id][116:120]) == base  # nothing sent
    finally:
        link.close()


def ph_write_limit(emu, sid, value):
    """Set Max Position Limit through the sdk, as a user would (torque is off before connect)."""
    port = PortHandler(emu.path)
    try:
        assert port.openPort() and port.setBaudRate(1_000_000)
        return PacketHandler(2.0).write4ByteTxRx(port, sid, 48, value) == (COMM_SUCCESS, 0)
    finally:
        port.closePort()


@pytest.mark.parametrize("error", sorted(set(D.ERROR_NAMES) - {3}))  # 3, a damaged instruction: retried
def test_every_error_number_is_named(bus, error):
    cfg, plant, emu = bus
    sid = cfg.servos[0].id
    emu.fail_writes[(sid, 64)] = error
    with pytest.raises(
        DeviceError, match=rf"servo {sid} answered WRITE torque enable .* {D.ERROR_NAMES[error]}$"
    ):
        _link(cfg, emu).connect()


def _sdk_read2(emu, sid, addr, baud=1_000_000):
    """A 2-byte item read through dynamixel_sdk on its own port (no link open)."""
    port = PortHandler(emu.path)
    try:
        assert port.openPort() and port.setBaudRate(baud)
        value, res, err = PacketHandler(2.0).read2ByteTxRx(port, sid, addr)
        assert (res, err) == (COMM_SUCCESS, 0)
        return value
    finally:
        port.closePort()


def test_position_p_gain_is_written_on_connect_and_the_servos_hold_it(bus):
    cfg, plant, emu = bus
    servos = cfg.servos
    assert {_sdk_read2(emu, s.id, 84) for s in servos} == {800}  # XM430 factory value at power-on
    port = PortHandler(emu.path)  # a servo with its own D and I gains set
    assert port.openPort() and port.setBaudRate(cfg.baud)
    ph = PacketHandler(2.0)
    assert ph.write2ByteTxRx(port, servos[5].id, 80, 30) == (COMM_SUCCESS, 0)
    assert ph.write2ByteTxRx(port, servos[5].id, 82, 7) == (COMM_SUCCESS, 0)
    port.closePort()
    link = _link(cfg, emu, position_p_gain=6000)
    link.connect()
    try:
        gains = link.read_position_gains()
    finally:
        link.close()
    assert [gains[s.name]["p"] for s in servos] == [6000] * len(servos)
    assert gains[servos[5].name] == {"p": 6000, "i": 7, "d": 30}  # D and I left as they were
    assert gains[servos[0].name] == {"p": 6000, "i": 0, "d": 0}
    assert [_sdk_read2(emu, s.id, 84) for s in servos] == [6000] * len(servos)  # the servos' own tables
    assert (_sdk_read2(emu, servos[5].id, 80), _sdk_read2(emu, servos[5].id, 82)) == (30, 7)
    np.testing.assert_array_equal(plant.p_gain, 6000)  # the bus told its plant


def test_link_without_a_gain_leaves_the_servos_gain_alone(bus):
    cfg, plant, emu = bus
    link = _link(cfg, emu)
    link.connect()
    try:
        assert {g["p"] for g in link.read_position_gains().values()} == {800}
    finally:
        link.close()


def test_out_of_range_p_gain_is_refused_by_the_servo_before_torque_on(bus):
    cfg, plant, emu = bus
    sid = cfg.servos[0].id
    with pytest.raises(
        DeviceError,
        match=rf"servo {sid} answered WRITE Position P Gain = 20000 \(address 84\) with Data Range",
    ):
        _link(cfg, emu, position_p_gain=20000).connect()
    assert not plant.torque.any()  # the gain goes first: no servo was switched on
    assert int.from_bytes(emu.tables[sid][84:86], "little") == 800  # nothing written on an error


@pytest.mark.parametrize("gain", [-1, 6000.5, float("nan"), 70000, True])
def test_p_gain_that_cannot_be_a_register_value_is_refused_before_opening(bus, gain):
    cfg, plant, emu = bus
    with pytest.raises(DeviceError, match="Position P Gain .* must be a whole number"):
        _link(cfg, emu, position_p_gain=gain)
    assert emu.packets == 0


def test_p_gain_the_servo_does_not_keep_is_an_error(bus, monkeypatch):
    cfg, plant, emu = bus
    write = emu._write
    monkeypatch.setattr(emu, "_write", lambda sid, addr, data: 0 if addr == 84 else write(sid, addr, data))
    s = cfg.servos[0]
    with pytest.raises(DeviceError, match=rf"servo {s.id} \({s.name}\) holds Position P Gain 800 after 6000"):
        _link(cfg, emu, position_p_gain=6000).connect()
    assert not plant.torque.any()
