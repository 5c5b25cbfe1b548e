"""Board endpoint strings -> started board drivers: bt:ADDR,ADDR | evdev:PATH,PATH | serial:PORT,PORT."""

from __future__ import annotations

import re

from drivers.clock import Clock
from drivers.transports import parse_endpoint
from drivers.wbb import protocol as P
from drivers.wbb.board import EvdevBoard, HidBoard, _BoardBase, open_evdev
from drivers.wbb.transports import open_bluetooth, open_serial_bridge
from formats.errors import DeviceError

USAGE = "one of sim, bt:MAC,MAC, serial:PORT,PORT or evdev:PATH,PATH"
_MAC = re.compile(r"[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}")


def check_bt_address(address: str) -> str:
    """A Bluetooth MAC address XX:XX:XX:XX:XX:XX (hex digits), else DeviceError naming it (before any socket is
    tried: a typo is not reported as a missing Bluetooth stack)."""
    if not _MAC.fullmatch(address):
        raise DeviceError(
            f"bt:{address}: not a Bluetooth address (expected XX:XX:XX:XX:XX:XX in hex, e.g. 00:1E:35:3B:7C:12)"
        )
    return address


def board_drivers(spec: str, openers=None, clock: Clock | None = None) -> list[_BoardBase]:
    """Unstarted drivers, board 0 first (under the right foot). `openers` (sim) overrides the transports;
    `clock` (sim) is the emulated bench's clock the samples are stamped by (default: the host's)."""
    if openers is not None:
        return [HidBoard(op, index=i, name=f"sim{i}", clock=clock) for i, op in enumerate(openers)]
    ep = parse_endpoint(spec)
    if ep.scheme not in ("bt", "serial", "evdev"):
        what = "the emulated boards need the emulated bench" if ep.scheme == "sim" else "unknown endpoint"
        raise DeviceError(f"boards {spec!r}: {what} ({USAGE})")
    targets = [t for t in ep.target.split(",") if t]
    if ep.scheme == "bt":
        for t in targets:
            check_bt_address(t)
    if not targets:
        raise DeviceError(f"boards {spec!r}: no addresses given")
    mode = {"32": P.IN_BUTTONS_EXT8, "34": P.IN_BUTTONS_EXT19}.get(ep.options.get("mode", ""), P.DEFAULT_MODE)
    method = ep.options.get("fit", "piecewise")
    out: list[_BoardBase] = []
    for i, t in enumerate(targets):
        if ep.scheme == "bt":
            out.append(HidBoard(lambda a=t: open_bluetooth(a), i, f"bt:{t}", mode=mode, method=method))
        elif ep.scheme == "serial":
            baud = int(ep.options.get("baud", 115200))
            out.append(
                HidBoard(
                    lambda p=t, b=baud: open_serial_bridge(p, b), i, f"serial:{t}", mode=mode, method=method
                )
            )
        else:  # evdev
            out.append(EvdevBoard(lambda p=t: open_evdev(p), i, f"evdev:{t}"))
    return out


def start_all(boards: list[_BoardBase]) -> list[_BoardBase]:
    started = []
    try:
        for b in boards:
            started.append(b.start())
    except BaseException:
        for b in started:
            b.close()
        raise
    return started
