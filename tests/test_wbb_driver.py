"""The real board drivers against emulated boards over socket pairs and ptys, with fault injection."""

import time
from types import SimpleNamespace

import numpy as np
import pytest
from evdev import ecodes

from drivers.emulators.wbb import BoardImperfections, Faults, WbbEmulator
from drivers.wbb.board import EvdevBoard, HidBoard
from drivers.wbb.geometry import cell_positions, cop
from drivers.wbb.transports import open_serial_bridge
from formats.errors import DeviceError

LOAD = np.array([3.0, 2.0, 4.0, 1.0])


def _opener(emu, path):
    if path == "socketpair":
        return emu.connect_socketpair
    pty = emu.open_pty()
    return lambda: open_serial_bridge(pty)


@pytest.fixture
def emu_factory():
    made = []

    def make(**kw):
        e = WbbEmulator(lambda: LOAD, rate_hz=kw.pop("rate_hz", 100), **kw)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


def _run(board, seconds):
    board.start()
    try:
        return board.collect(seconds)
    finally:
        board.close()


@pytest.mark.parametrize("path", ["socketpair", "pty"])
def test_board_reads_calibrated_cells(emu_factory, path):
    emu = emu_factory()
    opener = _opener(emu, path)
    board = HidBoard(opener, name=path)
    samples = _run(board, 0.5)
    assert len(samples) > 25
    kg = np.mean([s.kg for s in samples], axis=0)
    np.testing.assert_allclose(kg, LOAD, atol=0.01)  # 16-bit counts ~ 10 g
    assert [s.seq for s in samples] == list(range(samples[0].seq, samples[0].seq + len(samples)))
    assert board.stats.bad == 0 and board.stats.battery == emu.battery
    # the driver did the handshake the protocol asks for: status, extension init writes, reads, mode
    for rid in (0x15, 0x16, 0x17, 0x12):
        assert rid in emu.requests


def test_noise_free_board_gives_true_cop_within_half_mm(emu_factory):
    emu = emu_factory()
    board = HidBoard(emu.connect_socketpair)
    samples = _run(board, 0.3)
    res = cop(np.mean([s.kg for s in samples], axis=0), cell_positions())
    true = LOAD @ cell_positions() / LOAD.sum()
    assert np.linalg.norm(res.cop - true) < 0.5e-3


@pytest.mark.parametrize("path", ["socketpair", "pty"])
def test_dropped_and_corrupted_reports_are_counted_and_skipped(emu_factory, path):
    emu = emu_factory(faults=Faults(drop=0.1, corrupt=0.2), seed=3)
    opener = _opener(emu, path)
    board = HidBoard(opener)
    samples = _run(board, 1.0)
    assert board.stats.bad > 5  # corrupted frames/reports noticed
    assert len(samples) < emu.sent_reports
    kg = np.array([s.kg for s in samples])
    assert np.abs(kg - LOAD).max() < 0.02  # no garbage got through


def test_board_disconnecting_reconnects_and_keeps_counting(emu_factory):
    emu = emu_factory(faults=Faults(disconnect_after=30))
    board = HidBoard(emu.connect_socketpair)
    board.lost_after_s = 0.3
    samples = _run(board, 1.5)
    assert board.stats.reconnects == 1
    seqs = [s.seq for s in samples]
    assert seqs == sorted(set(seqs))  # no duplicates, counter continuous across the reconnect
    assert len(samples) > 60


def test_board_gone_for_good_fails_clearly(emu_factory):
    emu = emu_factory(faults=Faults(disconnect_after=10, refuse_reconnect=True))
    board = HidBoard(emu.connect_socketpair, name="b1")
    board.lost_after_s, board.reconnect_delay_s = 0.2, 0.05
    board.start()
    try:
        got = board.drain()
        deadline = time.monotonic() + 3
        with pytest.raises(DeviceError, match="b1 lost"):
            while time.monotonic() < deadline:
                got += board.drain()
                board.check()
                time.sleep(0.02)
        assert len(got) >= 8  # what arrived before the loss is kept
    finally:
        board.close()


def test_not_a_board_is_refused(emu_factory):
    emu = emu_factory()
    emu.memory[0xFA:0x100] = bytes([0, 0, 0xA4, 0x20, 0, 0])  # nunchuk id
    with pytest.raises(DeviceError, match="not a balance board"):
        HidBoard(emu.connect_socketpair).start()


def test_imperfect_board_error_levels(emu_factory):
    rng = np.random.default_rng(0)
    imp = BoardImperfections.thesis_like(rng, 1)
    emu = emu_factory(imperfections=imp)
    board = HidBoard(emu.connect_socketpair)
    board.start()
    try:
        emu.load_kg = lambda: np.zeros(4)
        board.collect(0.1)  # reports already in flight still carry the old load
        offs = board.tare(0.3)
        assert offs.sum() == pytest.approx(imp.offset_kg.sum(), abs=0.03)
        assert offs.sum() == pytest.approx(-2.453, abs=0.3)  # about the thesis's board-2 zero-load reading
        emu.load_kg = lambda: LOAD
        board.collect(0.1)
        kg = np.mean([s.kg for s in board.collect(0.3)], axis=0)
    finally:
        board.close()
    rel = abs(kg.sum() - LOAD.sum()) / LOAD.sum()
    assert 0.0 < rel < 0.05


class _FakeEvdev:
    """Stands in for evdev.InputDevice: a queue of events, selectable via a pipe."""

    def __init__(self, frames):
        import os

        self.r, self.w = os.pipe()
        self.events = []
        for vals in frames:
            for code, v in zip(  # noqa: B905
                (ecodes.ABS_HAT0X, ecodes.ABS_HAT0Y, ecodes.ABS_HAT1X, ecodes.ABS_HAT1Y), vals
            ):
                self.events.append(SimpleNamespace(type=ecodes.EV_ABS, code=code, value=v))
            self.events.append(SimpleNamespace(type=ecodes.EV_SYN, code=ecodes.SYN_REPORT, value=0))
        os.write(self.w, b"x")

    def fileno(self):
        return self.r

    def read_one(self):
        return self.events.pop(0) if self.events else None

    def close(self):
        import os

        os.close(self.r)
        os.close(self.w)


def test_evdev_board_decodes_hid_wiimote_units():
    dev = _FakeEvdev([(300, 200, 400, 100), (310, 190, 400, 100)])
    board = EvdevBoard(lambda: dev)
    board.start()
    samples, deadline = [], time.monotonic() + 5.0
    try:  # drain (not collect: collect() drops what arrived before it was called, and the fake is instant)
        while len(samples) < 2 and time.monotonic() < deadline:
            samples += board.drain()
            time.sleep(0.01)
    finally:
        board.close()
    assert len(samples) == 2
    np.testing.assert_allclose(samples[0].kg, [3.0, 2.0, 4.0, 1.0], atol=1e-9)  # 10 g units
    np.testing.assert_allclose(samples[1].kg, [3.1, 1.9, 4.0, 1.0], atol=1e-9)
