"""Packet transports for HID boards: Bluetooth L2CAP (AF_BLUETOOTH, no PyBluez), socket pairs, serial bridge.

A packet transport moves whole HID reports: `send(report)`, `recv(timeout) -> report | None` (None on
timeout), `close()`. A lost link raises `LinkLost`.
"""

from __future__ import annotations

import select
import socket

import serial

from drivers.transports import open_serial
from formats.errors import DeviceError

PSM_CONTROL = 0x11
PSM_INTERRUPT = 0x13


class LinkLost(DeviceError):
    """The board's link dropped (socket closed, port gone)."""


class SocketHidTransport:
    """HID over two message sockets (control + interrupt), as Bluetooth HID uses L2CAP PSMs 0x11 and 0x13.

    Reports travel on the interrupt channel with their 0xA2/0xA1 header; the control channel is only
    kept open (required by the HID profile). Works unchanged over AF_UNIX SOCK_SEQPACKET socket pairs.
    """

    def __init__(self, control: socket.socket, interrupt: socket.socket, name: str = "socket") -> None:
        self.control = control
        self.interrupt = interrupt
        self.name = name

    def send(self, report: bytes) -> None:
        try:
            self.interrupt.send(report)
        except OSError as exc:
            raise LinkLost(f"{self.name}: send failed: {exc}") from exc

    def recv(self, timeout: float) -> bytes | None:
        try:
            ready, _, _ = select.select([self.interrupt], [], [], timeout)
            if not ready:
                return None
            data = self.interrupt.recv(64)
        except (OSError, ValueError) as exc:
            raise LinkLost(f"{self.name}: receive failed: {exc}") from exc
        if not data:
            raise LinkLost(f"{self.name}: link closed by the board")
        return data

    def close(self) -> None:
        for s in (self.interrupt, self.control):
            try:
                s.close()
            except OSError:
                pass


def open_bluetooth(address: str, timeout: float = 5.0) -> SocketHidTransport:
    """Connect to a paired board's L2CAP HID channels (Linux BlueZ sockets, Python's own AF_BLUETOOTH)."""
    if not hasattr(socket, "AF_BLUETOOTH"):
        raise DeviceError("this Python has no AF_BLUETOOTH support (Linux with BlueZ headers is needed)")
    socks = []
    try:
        for psm in (PSM_CONTROL, PSM_INTERRUPT):
            s = socket.socket(socket.AF_BLUETOOTH, socket.SOCK_SEQPACKET, socket.BTPROTO_L2CAP)
            s.settimeout(timeout)
            s.connect((address, psm))
            s.settimeout(None)
            socks.append(s)
    except OSError as exc:
        for s in socks:
            s.close()
        raise DeviceError(
            f"bt:{address}: cannot open L2CAP HID channels ({exc}); is the board paired and its red sync "
            "button pressed? (docs/drivers.md)"
        ) from exc
    return SocketHidTransport(socks[0], socks[1], name=f"bt:{address}")


# ------------------------------------------------------------------ serial bridge framing

SYNC = 0x7E


def crc8(data: bytes) -> int:
    """CRC-8, polynomial 0x07, init 0x00 (CRC-8/SMBUS)."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


_CRC8_TABLE = [crc8(bytes([i])) for i in range(256)]


def crc8_fast(data: bytes) -> int:
    crc = 0
    for b in data:
        crc = _CRC8_TABLE[crc ^ b]
    return crc


def bridge_frame(report: bytes) -> bytes:
    """Serial bridge frame: 0x7E, length, report bytes (with 0xA1/0xA2 header), CRC-8 over length+report."""
    body = bytes([len(report)]) + report
    return bytes([SYNC]) + body + bytes([crc8_fast(body)])


class BridgeDecoder:
    """Incremental frame parser: resynchronises on the next 0x7E after a bad length or CRC."""

    MAX_LEN = 64

    def __init__(self) -> None:
        self.buf = bytearray()
        self.bad_frames = 0

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out = []
        buf = self.buf
        while True:
            start = buf.find(SYNC)
            if start < 0:
                buf.clear()
                break
            if start:
                del buf[:start]
            if len(buf) < 2:
                break
            n = buf[1]
            if n == 0 or n > self.MAX_LEN:
                self.bad_frames += 1
                del buf[0]
                continue
            if len(buf) < n + 3:
                break
            body = bytes(buf[1 : n + 2])
            if crc8_fast(body) != buf[n + 2]:
                self.bad_frames += 1
                del buf[0]
                continue
            out.append(body[1:])
            del buf[: n + 3]
        return out


class SerialBridgeTransport:
    """The same HID reports carried over a serial line (e.g. a microcontroller bridging the board's Bluetooth)."""

    def __init__(self, port: serial.SerialBase, name: str = "serial") -> None:
        self.port = port
        self.name = name
        self.decoder = BridgeDecoder()
        self._pending: list[bytes] = []

    def send(self, report: bytes) -> None:
        try:
            self.port.write(bridge_frame(report))
        except (serial.SerialException, OSError) as exc:
            raise LinkLost(f"{self.name}: write failed: {exc}") from exc

    def recv(self, timeout: float) -> bytes | None:
        if self._pending:
            return self._pending.pop(0)
        self.port.timeout = min(timeout, 0.05)
        import time

        deadline = time.monotonic() + timeout
        while True:
            try:
                waiting = self.port.in_waiting
                chunk = self.port.read(max(1, min(waiting, 4096)))
            except (serial.SerialException, OSError, TypeError) as exc:
                raise LinkLost(f"{self.name}: read failed: {exc}") from exc
            if chunk:
                self._pending.extend(self.decoder.feed(chunk))
                if self._pending:
                    return self._pending.pop(0)
            if time.monotonic() >= deadline:
                return None

    @property
    def bad_frames(self) -> int:
        return self.decoder.bad_frames

    def close(self) -> None:
        try:
            self.port.close()
        except (serial.SerialException, OSError):
            pass


def open_serial_bridge(url: str, baudrate: int = 115200) -> SerialBridgeTransport:
    return SerialBridgeTransport(open_serial(url, baudrate=baudrate, timeout=0.05), name=f"serial:{url}")
