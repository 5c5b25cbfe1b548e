"""Endpoint strings -> byte transports, the way pyserial's `serial_for_url` selects them.

`scheme:target?key=value&...`; serial targets are anything `serial_for_url` opens: device paths
(including pty slaves such as /dev/pts/7), `loop://`, `socket://host:port`, `rfc2217://...`.
"""

from __future__ import annotations

import os
import termios
import tty
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

import serial

from formats.errors import DeviceError


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    target: str = ""
    options: dict[str, str] = field(default_factory=dict)


def parse_endpoint(text: str) -> Endpoint:
    """'dxl:/dev/ttyUSB0?baud=57600' -> Endpoint('dxl', '/dev/ttyUSB0', {'baud': '57600'}); 'sim' -> ('sim').

    Everything after the last '?' is poise's options (pyserial URL options are not passed through).
    """
    text = text.strip()
    if not text:
        raise DeviceError("empty endpoint")
    scheme, _, rest = text.partition(":")
    target, sep, query = rest.rpartition("?")
    if not sep:
        target, query = rest, ""
    return Endpoint(scheme.lower(), target, dict(parse_qsl(query)))


def open_serial(url: str, baudrate: int = 115200, timeout: float = 0.05) -> serial.SerialBase:
    """Open a serial-like port by URL or path; DeviceError with the reason if it cannot be opened."""
    try:
        return serial.serial_for_url(url, baudrate=baudrate, timeout=timeout, write_timeout=1.0)
    except (serial.SerialException, OSError, ValueError) as exc:
        raise DeviceError(f"cannot open serial port {url!r}: {exc}") from exc


class Pty:
    """A pseudo-terminal for emulators: the emulator owns `master`; a driver opens `path` like a device."""

    def __init__(self) -> None:
        self.master, self._slave = os.openpty()
        tty.setraw(self._slave, termios.TCSANOW)  # no echo / line discipline before the client configures it
        self.path = os.ttyname(self._slave)
        os.set_blocking(self.master, False)

    def close(self) -> None:
        for fd in (self.master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass
