"""The real board drivers against emulated boards over socket pairs and ptys, with fault injection."""

import time
from types import SimpleNamespace

import numpy as np
import pytest
from evdev import ecodes

from drivers.emulators.wbb import (
    BoardImperfections,
    Faults,
    KernelEvdevBoard,
    WbbEmulator,
    kernel_defuzz,
    kernel_units,
)
from drivers.wbb import protocol as P
from drivers.wbb.board import EVDEV_RATE_HZ, EvdevBoard, HidBoard
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
    seqs = np.array([s.seq for s in samples])  # the damaged ones keep their places in the count
    assert np.all(np.diff(seqs) >= 1) and seqs[-1] - seqs[0] + 1 > len(samples)


def test_board_disconnecting_reconnects_and_keeps_counting(emu_factory):
    emu = emu_factory(faults=Faults(disconnect_after=30))
    board = HidBoard(emu.connect_socketpair)
    board.lost_after_s = 0.3
    samples = _run(board, 1.5)
    assert board.stats.reconnects == 1
    seqs = [s.seq for s in samples]
    assert seqs == sorted(set(seqs))  # no duplicates, counter continuous across the reconnect
    assert len(samples) > 60


def test_a_reconnect_keeps_every_correction_made_before_it(emu_factory):
    emu = emu_factory(faults=Faults(disconnect_after=40))
    board = HidBoard(emu.connect_socketpair)
    board.lost_after_s = 0.3
    board.start()
    try:
        board.collect(0.1)  # connected, before the link drops
        cal = board.calibration
        cal.offset_kg, cal.offset_se = np.array([1.0, 0.5, 2.0, 0.2]), np.full(4, 0.003)
        cal.gain, cal.gain_se, cal.noise_sd = (
            np.array([1.1, 0.9, 1.05, 0.95]),
            np.full(4, 0.01),
            np.full(4, 0.02),
        )
        before = dict(vars(cal))
        samples = board.collect(1.5)
    finally:
        board.close()
    assert board.stats.reconnects == 1 and board.calibration is not cal  # the factory block was read anew
    for name, value in before.items():
        np.testing.assert_array_equal(getattr(board.calibration, name), value, err_msg=name)
    kg = np.mean([s.kg for s in samples[-20:]], axis=0)  # after the reconnect: tared, then the gains
    np.testing.assert_allclose(kg, (LOAD - cal.offset_kg) * cal.gain, atol=0.02)


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
    """Stands in for evdev.InputDevice: the axes' held state (`absinfo`) and a queue of the changes the kernel
    sends (changed axes only, then SYN_REPORT), selectable via a pipe."""

    CODES = (ecodes.ABS_HAT0X, ecodes.ABS_HAT0Y, ecodes.ABS_HAT1X, ecodes.ABS_HAT1Y)

    def __init__(self, state, changes):
        import os

        self.r, self.w = os.pipe()
        self.state = dict(zip(self.CODES, state, strict=True))
        self.events = []
        for change in changes:
            self.events += [
                SimpleNamespace(type=ecodes.EV_ABS, code=self.CODES[k], value=v) for k, v in change
            ]
            self.events.append(SimpleNamespace(type=ecodes.EV_SYN, code=ecodes.SYN_REPORT, value=0))
        os.write(self.w, b"x")
        os.set_blocking(self.r, False)

    def fileno(self):
        return self.r

    def absinfo(self, code):
        return SimpleNamespace(value=self.state[code])

    def read_one(self):
        import os

        if self.events:
            return self.events.pop(0)
        try:
            os.read(self.r, 64)  # drained: the pipe is no longer ready (as a real evdev fd once read)
        except BlockingIOError:
            pass
        return None

    def close(self):
        import os

        os.close(self.r)
        os.close(self.w)


def test_evdev_board_samples_the_held_state_of_hid_wiimote_units():
    """The cells' state when the device opens (no event replays it), then only TR and BR change: every sample
    holds all four cells, in 10 g units, at the board's rate."""
    dev = _FakeEvdev((300, 200, 400, 100), [[(0, 310), (1, 190)]])
    board = EvdevBoard(lambda: dev)
    board.start()
    try:
        time.sleep(0.3)
        samples = board.drain()
    finally:
        board.close()
    assert len(samples) > 0.3 * EVDEV_RATE_HZ / 2
    kg = np.array([s.kg for s in samples])
    np.testing.assert_allclose(kg[-1], [3.1, 1.9, 4.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(kg[:, 2:], np.tile([4.0, 1.0], (len(kg), 1)), atol=1e-9)  # as opened: no event
    t = np.array([s.t for s in samples])
    assert np.median(np.diff(t)) == pytest.approx(1 / EVDEV_RATE_HZ, rel=0.3)


def test_a_still_load_on_an_evdev_board_is_read_without_any_event(emu_factory):
    """A noise-free still load: after the first report the kernel sends nothing (no change), yet the board is read
    from its state, for longer than the silence that would call a HID link lost, with no reconnect."""
    emu = emu_factory()  # noise-free, LOAD on the cells since before the device opened
    dev = KernelEvdevBoard(emu)
    board = EvdevBoard(lambda: dev, name="kernel")
    samples = _run(board, 1.5)
    assert board.stats.reconnects == 0 and len(samples) > 1.5 * EVDEV_RATE_HZ / 2
    np.testing.assert_allclose(
        np.array([s.kg for s in samples]), np.tile(LOAD, (len(samples), 1)), atol=0.011
    )


def test_the_kernels_fuzz_filter_smooths_small_steps_as_the_input_core_does():
    assert [kernel_defuzz(v, 1000) for v in (1000, 1001, 999, 1002, 998, 1003, 1005)] == [
        1000, 1000, 999, 1001, 999, 1001, 1005]  # fmt: skip


def _reports(tr, seconds):
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        data = tr.recv(0.02)
        if data is not None:
            out.append(P.decode(data))
    return out


def test_status_report_stops_data_until_the_mode_is_sent_again(emu_factory):
    emu = emu_factory()
    tr = emu.connect_socketpair()
    try:
        tr.send(P.report_mode(P.IN_BUTTONS_EXT8))
        assert sum(isinstance(r, P.CellReport) for r in _reports(tr, 0.2)) > 5
        emu.emit_status()  # unsolicited, as on a battery or extension event
        got = _reports(tr, 0.3)
        kinds = [type(r) for r in got]
        assert kinds.count(P.Status) == 1
        assert P.CellReport not in kinds[kinds.index(P.Status) :]  # data reporting stopped
        tr.send(P.report_mode(P.IN_BUTTONS_EXT8))
        assert sum(isinstance(r, P.CellReport) for r in _reports(tr, 0.2)) > 5
    finally:
        tr.close()


@pytest.mark.parametrize("path", ["socketpair", "pty"])
def test_driver_resends_the_mode_after_unsolicited_status_without_reconnecting(emu_factory, path):
    emu = emu_factory()
    emu.status_every_s = 0.25
    board = HidBoard(_opener(emu, path), name=path)
    samples = _run(board, 1.2)
    assert emu.status_reports >= 4  # the handshake's, then unsolicited ones
    assert board.stats.mode_resends >= 3
    assert board.stats.reconnects == 0
    assert len(samples) > 90  # ~100 Hz throughout
    gaps = np.diff([s.t for s in samples])
    assert gaps.max() < 0.15  # far below the 1 s silence that would trigger a reconnect


def _evdev_board(emu_factory, offset_per_cell):
    emu = emu_factory(imperfections=BoardImperfections(offset_kg=np.full(4, offset_per_cell)))
    emu.load_override = np.zeros(4)
    dev = KernelEvdevBoard(emu)
    return emu, EvdevBoard(lambda: dev, name="kernel")


def test_evdev_tare_refuses_a_zero_load_reading_the_kernel_clamped(emu_factory):
    emu, board = _evdev_board(emu_factory, -2.453 / 4)  # the thesis's second board
    board.start()
    try:
        with pytest.raises(DeviceError, match=r"TR, BR, TL, BL read exactly 0 .*clamps negative"):
            board.tare(0.3)
        # the bias such a tare would leave: each cell low by its offset
        emu.load_override = LOAD.copy()
        board.collect(0.1)  # reports already in flight still carry the old load
        kg = np.mean([s.kg for s in board.collect(0.3)], axis=0)
        np.testing.assert_allclose(kg, LOAD - 2.453 / 4, atol=0.02)
    finally:
        board.close()


def test_evdev_tare_of_a_positive_zero_load_reading_is_applied(emu_factory):
    emu, board = _evdev_board(emu_factory, 0.4)
    board.start()
    try:
        offsets = board.tare(0.3)
        np.testing.assert_allclose(offsets, 0.4, atol=0.015)
        emu.load_override = LOAD.copy()
        board.collect(0.1)  # reports already in flight still carry the old load
        kg = np.mean([s.kg for s in board.collect(0.3)], axis=0)
        np.testing.assert_allclose(kg, LOAD, atol=0.02)
    finally:
        board.close()


def test_kernel_units_follow_the_factory_points_and_clamp_at_zero():
    cal = WbbEmulator(lambda: LOAD).cal
    r = cal.raw.astype(int)
    np.testing.assert_array_equal(kernel_units(cal, r[0]), 0)
    np.testing.assert_array_equal(kernel_units(cal, r[1]), 1700)
    np.testing.assert_array_equal(kernel_units(cal, r[2]), 3400)
    np.testing.assert_array_equal(kernel_units(cal, r[0] - 50), 0)  # below the 0 kg point


def test_boards_are_tared_and_recalibrated_side_by_side(emu_factory):
    """`tare_all` and `recalibrate_boards` read every board over the same window (one wait for all, not one per
    board): each board gets its own offsets and gains from its own reports — an HID board and a kernel evdev board
    with different offsets and cell gains."""
    from drivers.wbb.board import collect_all, tare_all
    from drivers.wbb.recalibrate import recalibrate_boards

    gain_error = np.array([0.05, -0.04, 0.02, -0.07])
    hid_emu = emu_factory(imperfections=BoardImperfections(gain_error=gain_error, offset_kg=np.full(4, 0.3)))
    ev_emu, ev = _evdev_board(emu_factory, 0.5)
    boards = [HidBoard(_opener(hid_emu, "socketpair"), name="hid"), ev]
    emus = [hid_emu, ev_emu]
    for e in emus:
        e.load_override = np.zeros(4)
    for b in boards:
        b.start()
    try:
        spans = [(s[0].t, s[-1].t) for s in collect_all(boards, 0.3)]
        assert max(a for a, _ in spans) < min(b for _, b in spans)  # the windows overlap: read side by side
        offsets = tare_all(boards, 0.3)
        np.testing.assert_allclose(offsets[0], 0.3, atol=0.015)
        np.testing.assert_allclose(offsets[1], 0.5, atol=0.015)

        def put(cell):
            for e in emus:
                e.load_override = np.zeros(4) if cell is None else np.eye(4)[cell] * 10.0

        got = recalibrate_boards(boards, put, 10.0, 0.3)
        for e in emus:
            e.load_override = LOAD.copy()
        collect_all(boards, 0.1)  # reports already in flight still carry the old load
        for b, g in zip(boards, got, strict=True):
            assert g.shape == (4,)
            np.testing.assert_allclose(np.mean([s.kg for s in b.collect(0.3)], axis=0), LOAD, atol=0.05)
    finally:
        for b in boards:
            b.close()


def test_a_board_is_known_by_its_extension_kind_as_hid_wiimote_knows_it(emu_factory):
    """hid-wiimote takes any extension id whose bytes 4–5 are 04 02 for a balance board (third-party boards differ
    in the others); another kind (a Nunchuk's 00 00) is refused by name."""
    emu = emu_factory()
    emu.memory[0xFA:0x100] = bytes([0x01, 0x00, 0xA4, 0x20, 0x04, 0x02])
    assert len(_run(HidBoard(emu.connect_socketpair), 0.3)) > 10
    other = emu_factory()
    other.memory[0xFA:0x100] = bytes([0x00, 0x00, 0xA4, 0x20, 0x00, 0x00])
    board = HidBoard(other.connect_socketpair)
    with pytest.raises(DeviceError, match="extension id 0000a4200000 is not a balance board"):
        board.start()
    board.close()
