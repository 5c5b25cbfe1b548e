"""Balance board drivers: a HID board over any packet transport, and a board bound to hid-wiimote (evdev).

Each board runs one reader thread that decodes reports into `BoardSample`s in a queue; the consumer
`drain()`s them (nothing is dropped between drains). Bad reports are counted and skipped; a silent or
dropped link is reopened a few times, after which `check()` raises `DeviceError`.
"""

from __future__ import annotations

import abc
import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from drivers.clock import HOST_CLOCK, Clock
from drivers.wbb import protocol as P
from drivers.wbb.calibration import Calibration
from drivers.wbb.transports import LinkLost
from formats.errors import DeviceError


@dataclass(frozen=True)
class BoardSample:
    t: float  # time of receipt on the driver's clock (the host's monotonic clock, or the emulated bench's), s
    board: int  # board index (0 = under the right foot)
    seq: int  # per-board count of the reports that reached the driver, damaged ones included, continuous across
    # reconnects; a report lost over the air (Bluetooth drops bad packets before the host sees them; the board
    # numbers nothing) leaves no gap in it: `drivers.board_timeline` finds those from the arrival times
    raw: tuple[int, int, int, int]  # TR, BR, TL, BL as sent by the board (evdev: 10 g units)
    kg: np.ndarray  # (4,) calibrated and tared


@dataclass
class BoardStats:
    reports: int = 0  # good cell reports
    bad: int = 0  # short, corrupted, implausible or unknown reports (skipped)
    other: int = 0  # well-formed non-data reports seen while streaming (status, acks)
    reconnects: int = 0
    battery: int | None = None  # the last 0x20 status report's battery level byte (raw, 0..255)
    mode_resends: int = 0  # data reporting mode re-sent after a status report reset it

    @property
    def battery_percent(self) -> int | None:
        """The battery level in % as hid-wiimote gives it (`protocol.battery_percent`); None before a status."""
        return P.battery_percent(self.battery)


# a balance board's conversions (one data report each) per second in continuous reporting mode, as the emulated
# boards send them (`drivers.emulators.wbb`)
BOARD_REPORT_HZ = 80.0


class _BoardBase(abc.ABC):
    """Reader thread, sample queue, tare; subclasses implement `_open()` and `_read(timeout)`. Samples are
    stamped, and `collect` / `tare` timed, on `clock` (the bench clock); the lost-link watchdog on the host's."""

    # reports per second the board sends while streaming (None: unknown); `boards read` warns of a read that got
    # far fewer
    nominal_hz: float | None = None
    lost_after_s = 1.0
    reconnect_attempts = 3
    reconnect_delay_s = 0.2
    # called (from the reader thread) with a one-line status while a lost link is being reconnected, e.g. to
    # show it on stderr; None: silent
    on_link: Callable[[str], None] | None = None

    def __init__(self, index: int, name: str, clock: Clock | None = None) -> None:
        self.index = index
        self.name = name
        self.clock = clock if clock is not None else HOST_CLOCK
        self.stats = BoardStats()
        self.calibration: Calibration | None = None
        self._queue: collections.deque[BoardSample] = collections.deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: DeviceError | None = None
        self._seq = 0
        self._latest: BoardSample | None = None
        self.connected = False

    # -- lifecycle
    def start(self) -> _BoardBase:
        """Open and initialise the board (synchronously), then start streaming in the background."""
        self._open()
        self.connected = True
        self._thread = threading.Thread(target=self._run, name=f"board-{self.name}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._close_transport()
        self.connected = False

    def __enter__(self) -> _BoardBase:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- consumer side
    def drain(self) -> list[BoardSample]:
        out = []
        q = self._queue
        while q:
            out.append(q.popleft())
        return out

    def latest(self) -> BoardSample | None:
        return self._latest

    def check(self) -> None:
        """Raise the board's error if it was lost for good."""
        if self._error is not None:
            raise self._error

    def collect(self, seconds: float) -> list[BoardSample]:
        """Block for `seconds` and return every sample received meanwhile."""
        return collect_all([self], seconds)[0]

    def tare(self, seconds: float = 1.0) -> np.ndarray:
        """Zero-load offset from `seconds` of readings with nothing on the board; returns the offsets in kg."""
        return self.tare_from(self.collect(seconds))

    def tare_from(self, samples: list[BoardSample]) -> np.ndarray:
        """Zero-load offset from `samples` read with nothing on the board; returns the offsets in kg."""
        if not samples:
            raise DeviceError(f"board {self.name}: no data to tare from")
        self.calibration.tare(np.array([s.raw for s in samples]))
        return self.calibration.offset_kg

    # -- reader thread
    def _emit(self, raw: tuple[int, int, int, int]) -> None:
        kg = self.calibration.kg(np.asarray(raw, dtype=float))
        s = BoardSample(self.clock.now(), self.index, self._seq, raw, kg)
        self._seq += 1
        self.stats.reports += 1
        self._queue.append(s)
        self._latest = s

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            try:
                got = self._read(0.1)
            except LinkLost:
                got = None
                last = 0.0
            if got:
                last = time.monotonic()
                continue
            if time.monotonic() - last > self.lost_after_s and not self._stop.is_set():
                if not self._reconnect():
                    return
                last = time.monotonic()

    def _reconnect(self) -> bool:
        self.connected = False
        self._close_transport()
        reason = "no data"
        n = self.reconnect_attempts
        for k in range(n):
            if self._stop.wait(self.reconnect_delay_s):
                return False
            self._notify(f"board {self.name}: link lost, reconnecting (attempt {k + 1} of {n}) …")
            try:
                self._open()
            except DeviceError as exc:
                reason = str(exc)
                continue
            self.stats.reconnects += 1
            self.connected = True
            self._notify(f"board {self.name}: reconnected")
            return True
        self._error = DeviceError(
            f"board {self.name} lost and not reconnected after {self.reconnect_attempts} attempts ({reason})"
        )
        return False

    def _notify(self, text: str) -> None:
        if self.on_link is not None:
            try:
                self.on_link(text)
            except Exception:  # a status line that cannot be shown must not stop the reconnect
                pass

    @abc.abstractmethod
    def _open(self) -> None:
        """Connect and initialise the transport (raises DeviceError)."""

    @abc.abstractmethod
    def _read(self, timeout: float) -> bool:
        """Wait up to `timeout` s for reports, `_emit` them; True if any sample was emitted."""

    @abc.abstractmethod
    def _close_transport(self) -> None:
        """Release the transport."""


class HidBoard(_BoardBase):
    """A board speaking the Wiimote HID protocol over a packet transport (Bluetooth L2CAP, socket pair, serial).

    `open_transport()` returns a fresh transport; it is called again to reconnect.
    """

    nominal_hz = BOARD_REPORT_HZ

    def __init__(
        self,
        open_transport: Callable[[], object],
        index: int = 0,
        name: str = "board",
        mode: int = P.DEFAULT_MODE,
        method: str = "piecewise",
        request_timeout: float = 0.5,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(index, name, clock)
        self.open_transport = open_transport
        self.mode = mode
        self.method = method
        self.request_timeout = request_timeout
        self.transport = None
        self._plausible: tuple[np.ndarray, np.ndarray] | None = None
        self._tr_bad = 0

    # -- handshake
    def _open(self) -> None:
        try:
            tr = self.open_transport()
        except DeviceError:
            raise
        except OSError as exc:
            raise DeviceError(f"board {self.name}: cannot connect: {exc}") from exc
        try:
            self._handshake(tr)
        except (DeviceError, OSError) as exc:
            try:
                tr.close()
            except OSError:
                pass
            if isinstance(exc, DeviceError):
                raise
            raise DeviceError(f"board {self.name}: {exc}") from exc
        self.transport = tr
        self._tr_bad = getattr(tr, "bad_frames", 0)

    def _await(self, tr, want: type, match: Callable[[object], bool] = lambda r: True):
        deadline = time.monotonic() + self.request_timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeviceError(
                    f"board {self.name}: no {want.__name__} reply within {self.request_timeout} s"
                )
            data = tr.recv(left)
            if data is None:
                continue
            try:
                rep = P.decode(data)
            except P.ReportError:
                self.stats.bad += 1
                continue
            if isinstance(rep, want) and match(rep):
                return rep

    def _request(self, tr, report: bytes, want: type, match=lambda r: True, tries: int = 3):
        last: DeviceError | None = None
        for _ in range(tries):
            tr.send(report)
            try:
                return self._await(tr, want, match)
            except DeviceError as exc:
                last = exc
        raise last

    def _read_block(self, tr, address: int, size: int) -> bytes:
        for _ in range(3):
            tr.send(P.read_memory(address, size))
            got: dict[int, bytes] = {}
            try:
                while sum(len(v) for v in got.values()) < size:
                    rep = self._await(tr, P.ReadData)
                    if rep.error:
                        raise DeviceError(
                            f"board {self.name}: memory read 0x{address:06x} failed (error {rep.error})"
                        )
                    got[rep.offset] = rep.data
            except DeviceError as exc:
                if "failed" in str(exc):
                    raise
                continue
            base = address & 0xFFFF
            block = b"".join(got[k] for k in sorted(got))
            if min(got) == base and len(block) >= size:
                return block[:size]
        raise DeviceError(f"board {self.name}: memory read 0x{address:06x} got no complete answer")

    def _handshake(self, tr) -> None:
        status = self._request(tr, P.status_request(), P.Status)
        self.stats.battery = status.battery
        if not status.extension:
            raise DeviceError(f"board {self.name}: no extension reported - is this a Wii Balance Board?")
        for addr, value in (P.EXT_INIT1, P.EXT_INIT2):
            ack = self._request(
                tr, P.write_memory(addr, bytes([value])), P.Ack, lambda r: r.report == P.OUT_WRITE_MEMORY
            )
            if ack.error:
                raise DeviceError(f"board {self.name}: extension init write failed (error {ack.error})")
        ext_id = self._read_block(tr, P.EXT_ID_ADDR, P.EXT_ID_LEN)
        # as hid-wiimote: bytes 4–5 name the kind (third-party boards vary)
        if ext_id[4:6] != P.WBB_EXT_ID[4:6]:
            raise DeviceError(f"board {self.name}: extension id {ext_id.hex()} is not a balance board")
        cal_raw = P.decode_calibration(self._read_block(tr, P.CAL_ADDR, P.CAL_LEN))
        raw = np.array(cal_raw, float)
        try:  # a reconnect reads the factory block anew and keeps every correction made since (tare, gains)
            if self.calibration is None:
                cal = Calibration(raw, method=self.method)
            else:
                cal = replace(self.calibration, raw=raw, method=self.method)
        except ValueError as exc:
            raise DeviceError(f"board {self.name}: bad calibration block {cal_raw}: {exc}") from exc
        self.calibration = cal
        span = cal.raw[2] - cal.raw[0]
        self._plausible = (cal.raw[0] - 0.5 * span, cal.raw[2] + 3.0 * span)
        tr.send(P.set_leds(0x1))
        tr.send(P.report_mode(self.mode, continuous=True))

    # -- streaming
    def _read(self, timeout: float) -> bool:
        tr = self.transport
        if tr is None:
            raise LinkLost("not connected")
        data = tr.recv(timeout)
        tb = getattr(tr, "bad_frames", 0)  # serial bridge: frames that failed the CRC/length checks
        if tb > self._tr_bad:
            self.stats.bad += tb - self._tr_bad
            # reports all the same: the count includes what reached the driver damaged
            self._seq += tb - self._tr_bad
            self._tr_bad = tb
        if data is None:
            return False
        try:
            raw = P.decode_cells(data)
        except P.ReportError:
            try:
                rep = P.decode(data)
            except P.ReportError:
                self.stats.bad += 1
                self._seq += 1
                return False
            self.stats.other += 1
            if isinstance(rep, P.Status):
                # A status report (asked for or not) resets the board's data reporting mode, so data stops
                # until 0x12 is sent again (hid-wiimote does the same in its status handler).
                self.stats.battery = rep.battery
                tr.send(P.report_mode(self.mode, continuous=True))
                self.stats.mode_resends += 1
            return False
        lo, hi = self._plausible
        if any(v < lo[i] or v > hi[i] for i, v in enumerate(raw)):
            self.stats.bad += 1
            self._seq += 1
            return False
        # (0x34's extension byte 10 is not the status report's battery byte hid-wiimote converts: not used)
        self._emit(raw)
        return True

    def _close_transport(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None


# evdev axes of hid-wiimote's balance board device, in the board's cell order
EVDEV_AXES = ("ABS_HAT0X", "ABS_HAT0Y", "ABS_HAT1X", "ABS_HAT1Y")  # TR, BR, TL, BL
# The input core passes on changed values only (after its fuzz filter: hid-wiimote registers the axes with fuzz 2)
# and no SYN_REPORT when nothing changed, so evdev events are no count of the board's reports: the driver samples
# the cells' held state at the board's own rate instead, a still load included.
EVDEV_RATE_HZ = 100.0


class EvdevBoard(_BoardBase):
    """A board bound to the kernel's hid-wiimote driver, read through python-evdev.

    The kernel applies the factory calibration and reports 10 g units, clamped at zero; we only tare.
    `open_device()` returns an object with `read_one()` / `fileno()` / `absinfo(code)` / `close()` (an
    evdev.InputDevice). Samples are the cells' held state every 1/EVDEV_RATE_HZ s, seeded from the device's state
    when it opens (the kernel replays nothing: a cell that does not change sends no event); a lost device is one
    whose reads fail (hid-wiimote removes it when the board disconnects), not one that is silent.

    Because of the clamp, a cell whose unloaded reading is negative reads 0 at tare and its offset cannot be
    measured: every later reading of that cell would be low by the unknown offset (a board reading
    -2.45 kg unloaded: about 0.61 kg per cell). `tare()` therefore refuses when a cell reads exactly 0 in
    more than `max_zero_fraction` of the tare samples.
    """

    max_zero_fraction = 0.1
    nominal_hz = EVDEV_RATE_HZ  # the driver's own sampling of the held state

    def __init__(self, open_device: Callable[[], object], index: int = 0, name: str = "evdev") -> None:
        super().__init__(index, name)
        self.open_device = open_device
        self.device = None
        from evdev import ecodes

        self._codes = {getattr(ecodes, a): i for i, a in enumerate(EVDEV_AXES)}
        self._ev_abs = ecodes.EV_ABS
        self._values = [0, 0, 0, 0]
        self._next_tick: float | None = None

    def _open(self) -> None:
        try:
            self.device = self.open_device()
        except OSError as exc:
            raise DeviceError(f"board {self.name}: cannot open evdev device: {exc}") from exc
        try:
            for code, i in self._codes.items():  # the state before any event: unchanged cells send none
                self._values[i] = int(self.device.absinfo(code).value)
        except OSError as exc:
            self._close_transport()  # each reconnect attempt would leave a descriptor open
            raise DeviceError(f"board {self.name}: cannot read the evdev device's state: {exc}") from exc
        self._next_tick = None
        if self.calibration is None:
            # identity "calibration" in 10 g units: 0 / 1700 / 3400 -> 0 / 17 / 34 kg
            self.calibration = Calibration(
                np.array([[0] * 4, [1700] * 4, [3400] * 4], float), method="linear"
            )

    def tare_from(self, samples: list[BoardSample]) -> np.ndarray:
        if not samples:
            raise DeviceError(f"board {self.name}: no data to tare from")
        raw = np.array([s.raw for s in samples])
        zero = (raw == 0).mean(axis=0)
        clamped = [P.CELLS[i] for i in range(4) if zero[i] > self.max_zero_fraction]
        if clamped:
            raise DeviceError(
                f"board {self.name}: cell(s) {', '.join(clamped)} read exactly 0 with the board empty: the "
                "kernel's hid-wiimote clamps negative zero-load readings at 0, so the tare cannot measure "
                "their offset and they would read low by it (up to ~0.6 kg a cell); use the bt: or serial: "
                "transport, which reads raw counts"
            )
        self.calibration.tare(raw)
        return self.calibration.offset_kg

    def _read(self, timeout: float) -> bool:
        import select

        dev = self.device
        if dev is None:
            raise LinkLost("not connected")
        now = time.monotonic()
        if self._next_tick is None:
            self._next_tick = now
        try:
            ready, _, _ = select.select([dev], [], [], min(timeout, max(0.0, self._next_tick - now)))
            while ready and (ev := dev.read_one()) is not None:
                if ev.type == self._ev_abs and ev.code in self._codes:
                    self._values[self._codes[ev.code]] = ev.value
        except OSError as exc:
            raise LinkLost(f"{self.name}: {exc}") from exc
        now = time.monotonic()
        if now < self._next_tick:
            return False
        self._emit(tuple(self._values))
        period = 1.0 / EVDEV_RATE_HZ
        self._next_tick += period
        if self._next_tick < now:  # behind (a stalled thread): resume the rate from now, no burst
            self._next_tick = now + period
        return True

    def _close_transport(self) -> None:
        if self.device is not None:
            try:
                self.device.close()
            except OSError:
                pass
            self.device = None


# hid-wiimote names a balance board's input device WIIMOTE_NAME " Balance Board" (wiimod_bboard_probe in
# drivers/hid/hid-wiimote-modules.c; WIIMOTE_NAME is "Nintendo Wii Remote")
BOARD_EVDEV_NAME = "Nintendo Wii Remote Balance Board"


def is_board_evdev(name: str) -> bool:
    """Whether an evdev node's name is hid-wiimote's for a balance board (`boards list` and opening agree)."""
    return name == BOARD_EVDEV_NAME


def open_evdev(path: str):
    """Open an evdev node and check it is a balance board (`is_board_evdev`)."""
    import evdev

    dev = evdev.InputDevice(path)
    if not is_board_evdev(dev.name):
        dev.close()
        raise DeviceError(f"{path} is {dev.name!r}, not a hid-wiimote balance board")
    return dev


def collect_all(boards: list[_BoardBase], seconds: float) -> list[list[BoardSample]]:
    """Every board's samples over the same `seconds` (on the first board's clock): boards read side by side, not
    one after another."""
    for b in boards:
        b.drain()
    if not boards:
        return []
    clock = boards[0].clock
    end = clock.now() + seconds
    out: list[list[BoardSample]] = [[] for _ in boards]
    while (now := clock.now()) < end:
        for b in boards:
            b.check()
        clock.sleep_until(min(end, now + 0.02))
        for got, b in zip(out, boards, strict=True):
            got.extend(b.drain())
    return out


def tare_all(boards: list[_BoardBase], seconds: float) -> list[np.ndarray]:
    """Tare every board from the same `seconds` of empty readings (each board's offsets in kg)."""
    return [b.tare_from(got) for b, got in zip(boards, collect_all(boards, seconds), strict=True)]
