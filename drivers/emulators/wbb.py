"""Wii Balance Board emulator: answers status, memory reads/writes and streams 0x32/0x34 reports.

It speaks the same bytes as a real board, over an AF_UNIX SOCK_SEQPACKET socket pair (standing in for
the L2CAP channels) or over a pty with the serial-bridge framing, so the real driver runs against it.
The load on each cell comes from a callable (the simulated robot); the emulator adds the board's
imperfections: per-cell gain error, zero-load offset, white noise, 16-bit quantisation.

Like a real board (and as hid-wiimote assumes), every status report 0x20 - asked for with 0x15 or sent
unsolicited (`emit_status()`, or every `status_every_s`) - resets the data reporting mode: no data reports
until the host sends 0x12 again. `KernelEvdevBoard` presents the same board the way the kernel's
hid-wiimote driver does (evdev axes in 10 g, clamped at 0), for the evdev driver.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from drivers.transports import Pty
from drivers.wbb import protocol as P
from drivers.wbb.board import BOARD_REPORT_HZ
from drivers.wbb.calibration import Calibration
from drivers.wbb.transports import BridgeDecoder, SocketHidTransport, bridge_frame

# a plausible factory block (raw counts at 0 / 17 / 34 kg; ~100 counts per kg, slightly non-linear)
CONVERSION_POLL_S = 0.002  # s: how often a board fed by a converter looks for new conversions
DEFAULT_CAL = np.array(
    [[4880, 17260, 2800, 1620], [6592, 18975, 4530, 3344], [8318, 20705, 6277, 5081]], dtype=float
)


@dataclass
class Faults:
    """Fault injection: probabilities per report, and a hard disconnect after a number of data reports."""

    drop: float = 0.0  # report silently not sent
    corrupt: float = 0.0  # report damaged (bad header/length on sockets, flipped byte on serial)
    disconnect_after: int | None = None  # close the link after this many data reports (once)
    refuse_reconnect: bool = False  # the board stays gone


@dataclass
class BoardImperfections:
    noise_kg: float = 0.0  # white noise std per cell per report
    gain_error: np.ndarray = field(default_factory=lambda: np.zeros(4))  # relative, per cell
    offset_kg: np.ndarray = field(default_factory=lambda: np.zeros(4))  # zero-load reading, per cell

    @classmethod
    def thesis_like(cls, rng: np.random.Generator, board: int = 0) -> BoardImperfections:
        """About the thesis's boards: ~2 % gain error, -0.75 / -2.45 kg zero-load readings, some noise."""
        total = (-0.753, -2.453)[board % 2]
        return cls(0.03, rng.normal(0.0, 0.02, 4), np.full(4, total / 4) + rng.normal(0, 0.05, 4))


class WbbEmulator:
    """One emulated board. `connect_socketpair()` / `open_pty()` give the driver side of a fresh link."""

    def __init__(
        self,
        load_kg: Callable[[], np.ndarray],
        *,
        rate_hz: float = BOARD_REPORT_HZ,
        imperfections: BoardImperfections | None = None,
        calibration: np.ndarray = DEFAULT_CAL,
        battery: int = 0xB0,
        faults: Faults | None = None,
        seed: int = 0,
        name: str = "emu",
        conversions: Callable[[], list[np.ndarray]] | None = None,
    ) -> None:
        """`conversions`: the board's converter, when the load source runs one on its own clock (the physics
        twin's simulated time): returns the conversions (cells, kg) completed since it was last called, and each
        becomes one report, sent as soon as it is seen — `rate_hz` then only bounds how long that takes."""
        self.load_kg = load_kg
        self.conversions = conversions
        self.rate_hz = rate_hz
        self.imp = imperfections or BoardImperfections()
        self.cal = Calibration(calibration)
        self.battery = battery
        self.faults = faults or Faults()
        self.rng = np.random.default_rng(seed)
        self.name = name
        self.memory = bytearray(256)  # extension registers 0xA400xx
        self.memory[0x24 : 0x24 + 24] = P.encode_calibration(calibration.astype(int).tolist())
        self.memory[0xFA:0x100] = P.WBB_EXT_ID
        self.sent_reports = 0
        self.requests: list[int] = []
        self.modes: list[int] = []  # the data reporting modes the host asked for (0x32 / 0x34), in order
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ptys: list[Pty] = []
        self._disconnected_once = False
        self.off_s = 1.0  # how long a serial-bridge board stays off after an injected disconnect
        self.load_override: np.ndarray | None = None  # per-cell kg, e.g. a known weight during recalibration
        self.status_every_s: float | None = None  # send an unsolicited status report this often
        self.status_reports = 0  # status reports sent (asked for or not)
        self._status_gen = 0

    # ------------------------------------------------------------ link endpoints
    def connect_socketpair(self) -> SocketHidTransport:
        """A new 'Bluetooth' link: returns the driver side; the emulator serves the other side."""
        if self.faults.refuse_reconnect and self._disconnected_once:
            raise OSError(f"{self.name}: board is switched off")
        ctrl_a, ctrl_b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        intr_a, intr_b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        link = _PacketLink(ctrl_b, intr_b)
        self._serve(link)
        return SocketHidTransport(ctrl_a, intr_a, name=f"{self.name}(socketpair)")

    def open_pty(self) -> str:
        """Serve the serial-bridge protocol on a new pty; returns the path the driver opens."""
        pty = Pty()
        self._ptys.append(pty)
        self._serve(_SerialLink(pty.master))
        return pty.path

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2.0)
        for p in self._ptys:
            p.close()

    # ------------------------------------------------------------ board behaviour
    def reading_raw(self, load_kg: np.ndarray | None = None) -> list[int]:
        """One report's raw values for the current load (or for `load_kg`, per cell)."""
        over = self.load_override
        if over is not None:
            load = np.asarray(over, dtype=float)
        else:
            load = np.asarray(self.load_kg() if load_kg is None else load_kg, dtype=float)
        meas = load * (1.0 + self.imp.gain_error) + self.imp.offset_kg
        if self.imp.noise_kg > 0:
            meas = meas + self.rng.normal(0.0, self.imp.noise_kg, 4)
        return [int(v) for v in np.clip(np.rint(self.cal.raw_for(meas)), 0, 0xFFFF)]

    def emit_status(self) -> None:
        """Make every open link send one unsolicited status report (as on a battery or extension event)."""
        with self._lock:
            self._status_gen += 1

    def _send_status(self, link, state: dict) -> None:
        link.send(P.encode_status(self.battery, extension=True))
        state["mode"] = None  # the board drops back to its default reporting: no more data reports
        with self._lock:
            self.status_reports += 1

    def _serve(self, link) -> None:
        t = threading.Thread(target=self._loop, args=(link,), name=f"wbb-emu-{self.name}", daemon=True)
        self._threads.append(t)
        t.start()

    def _handle(self, link, state: dict, report: bytes) -> None:
        try:
            rid, payload = P.parse_output(report)
        except P.ReportError:
            return
        self.requests.append(rid)
        if rid == P.OUT_STATUS_REQUEST:
            self._send_status(link, state)
        elif rid == P.OUT_REPORT_MODE and len(payload) >= 2:
            if payload[1] in (P.IN_BUTTONS_EXT8, P.IN_BUTTONS_EXT19):  # 12- or 23-byte reports (with 0xA1)
                self.modes.append(payload[1])
                state["mode"] = payload[1]
                state["next"] = time.monotonic()
            if payload[0] & 0x02:
                link.send(P.encode_ack(rid, 0))
        elif rid == P.OUT_WRITE_MEMORY and len(payload) >= 21:
            addr = int.from_bytes(payload[1:4], "big")
            size = payload[4]
            if addr >> 8 != 0xA400 or (addr & 0xFF) + size > 256:
                link.send(P.encode_ack(rid, 0x04))
                return
            if addr in (P.EXT_INIT1[0], P.EXT_INIT2[0]):
                state["init"].add(addr)
            else:
                self.memory[addr & 0xFF : (addr & 0xFF) + size] = payload[5 : 5 + size]
            link.send(P.encode_ack(rid, 0))
        elif rid == P.OUT_READ_MEMORY and len(payload) >= 6:
            addr = int.from_bytes(payload[1:4], "big")
            size = int.from_bytes(payload[4:6], "big")
            if addr >> 8 != 0xA400 or (addr & 0xFF) + size > 256:
                link.send(P.encode_read_data(addr & 0xFFFF, b"", error=8))
                return
            initialised = len(state["init"]) == 2
            mem = bytes(self.memory) if initialised else bytes([0xFF]) * 256
            for off in range(0, size, 16):
                a = (addr & 0xFF) + off
                link.send(P.encode_read_data((addr & 0xFFFF) + off, mem[a : a + min(16, size - off)]))
        # LEDs and anything else: accepted silently, like the real board

    def _loop(self, link) -> None:
        state = {"mode": None, "next": 0.0, "init": set(), "status_gen": self._status_gen}
        state["next_status"] = time.monotonic() + (self.status_every_s or 0.0)
        period = 1.0 / self.rate_hz
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                wait = max(0.0, state["next"] - now) if state["mode"] else 0.05
                for report in link.recv(min(wait, 0.05)):
                    self._handle(link, state, report)
                every = self.status_every_s
                if state["status_gen"] != self._status_gen or (
                    every and time.monotonic() >= state["next_status"]
                ):
                    state["status_gen"] = self._status_gen
                    state["next_status"] = time.monotonic() + (every or 0.0)
                    self._send_status(link, state)
                if self.conversions is not None:  # one report per conversion of the source's converter
                    pending = self.conversions()  # before a reporting mode is set: converted, never sent
                    state["next"] = time.monotonic() + CONVERSION_POLL_S
                    if not pending or not state["mode"]:
                        continue
                    raws = [self.reading_raw(c) for c in pending]
                elif not state["mode"] or time.monotonic() < state["next"]:
                    continue
                else:
                    state["next"] += period
                    if state["next"] < time.monotonic() - 5 * period:  # fell behind: don't burst
                        state["next"] = time.monotonic() + period
                    raws = [self.reading_raw()]
                for raw in raws:
                    if not state["mode"]:  # the serial bridge went off and back: the driver asks again
                        break
                    if self._send_report(link, state, raw):
                        return
        except OSError:
            pass
        finally:
            link.close()

    def _send_report(self, link, state: dict, raw: list[int]) -> bool:
        """One data report, through the configured faults; True when the link went away (stop serving it)."""
        f = self.faults
        report = P.encode_cells(raw, state["mode"], battery=self.battery)
        with self._lock:
            self.sent_reports += 1
            n = self.sent_reports
        if f.disconnect_after is not None and n >= f.disconnect_after and not self._disconnected_once:
            self._disconnected_once = True
            if not isinstance(link, _SerialLink):
                return True  # the Bluetooth link drops; the driver must open a new one
            # serial bridge: the board goes off for a while, then answers again from scratch
            if f.refuse_reconnect:
                self._stop.wait()
                return True
            self._stop.wait(self.off_s)
            link.drain()
            state.update(mode=None, init=set())
            return False
        u = self.rng.random()
        if u < f.drop:
            return False
        link.send(report, damage=self.rng if u < f.drop + f.corrupt else None)
        return False


class _PacketLink:
    def __init__(self, ctrl: socket.socket, intr: socket.socket) -> None:
        self.ctrl, self.intr = ctrl, intr

    def recv(self, timeout: float) -> list[bytes]:
        r, _, _ = select.select([self.intr, self.ctrl], [], [], timeout)
        out = []
        for s in r:
            data = s.recv(64)
            if not data:
                raise OSError("peer closed")
            out.append(data)
        return out

    def send(self, report: bytes, damage: np.random.Generator | None = None) -> None:
        if damage is not None:
            report = self.corrupt(report, damage)
        try:
            self.intr.send(report, socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass  # host not reading: the report is lost, as over the air

    @staticmethod
    def corrupt(report: bytes, rng: np.random.Generator) -> bytes:
        kind = rng.integers(3)
        if kind == 0:
            return report[: rng.integers(1, len(report))]  # short
        if kind == 1:
            return bytes([P.HID_IN, 0x3F]) + report[2:]  # unknown report id
        b = bytearray(report)
        b[4] = 0xFF  # implausible cell value (top byte of TR)
        return bytes(b)

    def close(self) -> None:
        for s in (self.intr, self.ctrl):
            s.close()


class _SerialLink:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.decoder = BridgeDecoder()

    def recv(self, timeout: float) -> list[bytes]:
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return []
        try:
            data = os.read(self.fd, 4096)
        except BlockingIOError:
            return []
        except OSError:  # EIO: no client has the slave open right now
            time.sleep(timeout)
            return []
        return self.decoder.feed(data)

    def drain(self) -> None:
        """Forget whatever the host sent while the board was off."""
        while self.recv(0.0):
            pass
        self.decoder.buf.clear()

    def send(self, report: bytes, damage: np.random.Generator | None = None) -> None:
        frame = bytearray(bridge_frame(report))
        if damage is not None:  # line noise: one byte of the frame flipped, or the frame cut short
            if damage.random() < 0.5:
                frame[int(damage.integers(1, len(frame)))] ^= 0x5A
            else:
                del frame[int(damage.integers(2, len(frame))) :]
        try:
            os.write(self.fd, bytes(frame))
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        pass


def kernel_units(cal: Calibration, raw: np.ndarray) -> np.ndarray:
    """What hid-wiimote reports for raw cell counts: 10 g units from the factory 0/17/34 kg points,
    integer arithmetic, and 0 for anything at or below the 0 kg point (negative loads are clamped)."""
    r = cal.raw.astype(int)
    raw = np.asarray(raw, dtype=int)
    lo = (raw - r[0]) * 1700 // (r[1] - r[0])
    hi = 1700 + (raw - r[1]) * 1700 // (r[2] - r[1])
    return np.where(raw <= r[0], 0, np.where(raw < r[1], lo, hi))


# hid-wiimote registers the balance board's axes with input_set_abs_params(dev, ABS_HAT*, 0, 65535, 2, 4): fuzz 2
KERNEL_FUZZ = 2


def kernel_defuzz(value: int, old: int, fuzz: int = KERNEL_FUZZ) -> int:
    """The input core's input_defuzz_abs_event: small changes are dropped or averaged into the old value."""

    def cdiv(a: int, b: int) -> int:  # C integer division: truncated toward zero (Python's // floors)
        q = abs(a) // b
        return q if a >= 0 else -q

    if fuzz:
        if old - cdiv(fuzz, 2) < value < old + cdiv(fuzz, 2):
            return old
        if old - fuzz < value < old + fuzz:
            return cdiv(old * 3 + value, 4)
        if old - fuzz * 2 < value < old + fuzz * 2:
            return cdiv(old + value, 2)
    return value


class KernelEvdevBoard:
    """The emulated board as the kernel's hid-wiimote presents it through evdev: stands in for an
    evdev.InputDevice (fileno / read_one / absinfo / close). At the board's rate each axis's value passes the input
    core's fuzz filter, and only changed ones are sent (ABS_HAT0X/0Y/1X/1Y), a SYN_REPORT after them only when one
    was; `absinfo` gives the held state. Values come from `emu.reading_raw()` through `kernel_units`, so the clamp
    at 0 is the kernel's."""

    def __init__(self, emu: WbbEmulator) -> None:
        from evdev import ecodes

        self.emu = emu
        self.name = "Nintendo Wii Remote Balance Board"
        self._codes = [ecodes.ABS_HAT0X, ecodes.ABS_HAT0Y, ecodes.ABS_HAT1X, ecodes.ABS_HAT1Y]
        self._abs, self._syn, self._report = ecodes.EV_ABS, ecodes.EV_SYN, ecodes.SYN_REPORT
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        self._events: list[tuple[int, int, int]] = []
        self._state = [int(v) for v in kernel_units(emu.cal, np.array(emu.reading_raw()))]  # before the open
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"kernel-evdev-{emu.name}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        period = 1.0 / self.emu.rate_hz
        while not self._stop.wait(period):
            vals = kernel_units(self.emu.cal, np.array(self.emu.reading_raw()))
            with self._lock:
                changed = []
                for k, (c, v) in enumerate(zip(self._codes, vals, strict=True)):
                    new = kernel_defuzz(int(v), self._state[k])
                    if new != self._state[k]:
                        self._state[k] = new
                        changed.append((self._abs, c, new))
                if not changed:
                    continue
                self._events += [*changed, (self._syn, self._report, 0)]
            try:
                os.write(self._w, b"x")
            except OSError:
                return

    def fileno(self) -> int:
        return self._r

    def absinfo(self, code: int):
        """The axis's held value, as evdev.InputDevice.absinfo gives it (the fields the driver reads)."""
        from types import SimpleNamespace

        with self._lock:
            return SimpleNamespace(value=self._state[self._codes.index(code)], fuzz=KERNEL_FUZZ, flat=4)

    def read_one(self):
        from types import SimpleNamespace

        with self._lock:
            if not self._events:
                try:
                    os.read(self._r, 4096)  # nothing queued: clear the wake-up bytes
                except BlockingIOError:
                    pass
                return None
            t, c, v = self._events.pop(0)
        return SimpleNamespace(type=t, code=c, value=v)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
