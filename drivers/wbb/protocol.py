"""Wii Balance Board HID protocol (the Wiimote protocol, board exposed as an extension): pure codec.

Output reports (host -> board) start with 0xA2, input reports (board -> host) with 0xA1, the transaction
header byte of a Bluetooth HID DATA packet. All multi-byte fields are big-endian.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

HID_OUT = 0xA2
HID_IN = 0xA1

# output report ids
OUT_LEDS = 0x11
OUT_REPORT_MODE = 0x12
OUT_STATUS_REQUEST = 0x15
OUT_WRITE_MEMORY = 0x16
OUT_READ_MEMORY = 0x17

# input report ids (lengths below include the 0xA1 header: 0x32 = 2 button + 8 extension bytes, 0x34 = 2 + 19)
IN_STATUS = 0x20
IN_READ_DATA = 0x21
IN_ACK = 0x22
IN_BUTTONS_EXT8 = 0x32
IN_BUTTONS_EXT19 = 0x34
# The data reporting mode asked for by default: 0x34, as Linux's hid-wiimote asks every balance board for it
# (hid-wiimote-core.c: some third-party boards are hard-coded to report in that mode); 0x32 stays selectable.
DEFAULT_MODE = IN_BUTTONS_EXT19

REPORT_LENGTHS = {IN_STATUS: 8, IN_READ_DATA: 23, IN_ACK: 6, IN_BUTTONS_EXT8: 12, IN_BUTTONS_EXT19: 23}

SPACE_REGISTERS = 0x04  # address-space byte of 0x16/0x17: control registers (extension lives there)

EXT_INIT1 = (0xA400F0, 0x55)  # unencrypted extension init, step 1
EXT_INIT2 = (0xA400FB, 0x00)  # step 2
EXT_ID_ADDR = 0xA400FA
EXT_ID_LEN = 6
WBB_EXT_ID = bytes([0x00, 0x00, 0xA4, 0x20, 0x04, 0x02])
CAL_ADDR = 0xA40024  # 0 kg @0x24, 17 kg @0x2C, 34 kg @0x34: 4 cells x uint16 each
CAL_LEN = 24

CELLS = ("TR", "BR", "TL", "BL")  # order of the cells in reports and in the calibration block

STATUS_FLAG_EXTENSION = 0x02

_CELLS_FMT = struct.Struct(">HHHH")


class ReportError(ValueError):
    """A report that is short, corrupted or of an unknown kind (counted and skipped by the drivers)."""


# ---------------------------------------------------------------- host -> board


def report_mode(mode: int = DEFAULT_MODE, continuous: bool = True) -> bytes:
    """0x12: choose the data reporting mode (0x32 or 0x34 for the board); continuous = report even if unchanged."""
    return bytes([HID_OUT, OUT_REPORT_MODE, 0x04 if continuous else 0x00, mode])


def status_request() -> bytes:
    """0x15: ask for a 0x20 status report (battery, extension flag)."""
    return bytes([HID_OUT, OUT_STATUS_REQUEST, 0x00])


def set_leds(mask: int) -> bytes:
    """0x11: the board's single blue LED is LED 1 (mask bit 4)."""
    return bytes([HID_OUT, OUT_LEDS, (mask & 0x0F) << 4])


def write_memory(address: int, data: bytes, space: int = SPACE_REGISTERS) -> bytes:
    """0x16: write up to 16 bytes at a 24-bit address; the board answers with a 0x22 acknowledgement."""
    if not 1 <= len(data) <= 16:
        raise ValueError("write_memory carries 1..16 bytes")
    payload = bytes(data) + bytes(16 - len(data))
    return (
        bytes([HID_OUT, OUT_WRITE_MEMORY, space]) + address.to_bytes(3, "big") + bytes([len(data)]) + payload
    )


def read_memory(address: int, size: int, space: int = SPACE_REGISTERS) -> bytes:
    """0x17: read `size` bytes; the board answers with ceil(size/16) 0x21 replies."""
    return bytes([HID_OUT, OUT_READ_MEMORY, space]) + address.to_bytes(3, "big") + size.to_bytes(2, "big")


# ---------------------------------------------------------------- board -> host


def battery_percent(level: int | None) -> int | None:
    """The battery level byte of a 0x20 status report ("BB BB LF 00 00 VV": VV) as a percentage, as the Linux
    kernel's hid-wiimote reports it (wiimod_battery_get_property: capacity = VV * 100 / 255, integer division):
    0xB0 (176) -> 69 %."""
    return None if level is None else int(level) * 100 // 255


@dataclass(frozen=True)
class Status:
    buttons: int
    extension: bool
    battery: int  # raw level byte 0..255 (`battery_percent` converts it)


@dataclass(frozen=True)
class ReadData:
    buttons: int
    size: int
    error: int
    offset: int  # low 16 bits of the address
    data: bytes


@dataclass(frozen=True)
class Ack:
    report: int
    error: int


@dataclass(frozen=True)
class CellReport:
    """One data report: the four raw cell values (TR, BR, TL, BL), plus temperature/battery for 0x34."""

    buttons: int
    raw: tuple[int, int, int, int]
    temperature: int | None = None
    battery: int | None = None


def decode_cells(report: bytes) -> tuple[int, int, int, int]:
    """Fast path for 0x32/0x34: the four raw cell values. Raises ReportError on anything else."""
    if len(report) < 12 or report[0] != HID_IN or report[1] not in (IN_BUTTONS_EXT8, IN_BUTTONS_EXT19):
        raise ReportError("not a cell report")
    if len(report) != REPORT_LENGTHS[report[1]]:
        raise ReportError(f"report 0x{report[1]:02x} has {len(report)} bytes")
    return _CELLS_FMT.unpack_from(report, 4)


def decode(report: bytes) -> Status | ReadData | Ack | CellReport:
    """Decode one input report (with its 0xA1 header)."""
    if len(report) < 2 or report[0] != HID_IN:
        raise ReportError("missing 0xA1 input-report header")
    rid = report[1]
    need = REPORT_LENGTHS.get(rid)
    if need is None:
        raise ReportError(f"unknown report 0x{rid:02x}")
    if len(report) != need:
        raise ReportError(f"report 0x{rid:02x} has {len(report)} bytes, expected {need}")
    buttons = (report[2] << 8) | report[3]
    if rid == IN_BUTTONS_EXT8:
        return CellReport(buttons, _CELLS_FMT.unpack_from(report, 4))
    if rid == IN_BUTTONS_EXT19:
        return CellReport(buttons, _CELLS_FMT.unpack_from(report, 4), report[12], report[14])
    if rid == IN_STATUS:
        return Status(buttons, bool(report[4] & STATUS_FLAG_EXTENSION), report[7])
    if rid == IN_READ_DATA:
        se = report[4]
        size = (se >> 4) + 1
        return ReadData(buttons, size, se & 0x0F, (report[5] << 8) | report[6], bytes(report[7 : 7 + size]))
    return Ack(report[4], report[5])


# ---------------------------------------------------------------- board side (used by the emulator)


def parse_output(report: bytes) -> tuple[int, bytes]:
    """Split a host output report into (report id, payload). Raises ReportError if malformed."""
    if len(report) < 3 or report[0] != HID_OUT:
        raise ReportError("missing 0xA2 output-report header")
    return report[1], bytes(report[2:])


def encode_status(battery: int, extension: bool = True, buttons: int = 0) -> bytes:
    flags = STATUS_FLAG_EXTENSION if extension else 0
    return bytes([HID_IN, IN_STATUS, buttons >> 8, buttons & 0xFF, flags, 0, 0, battery & 0xFF])


def encode_read_data(offset: int, data: bytes, error: int = 0, buttons: int = 0) -> bytes:
    size = max(len(data), 1)
    body = bytes(data) + bytes(16 - len(data))
    se = ((size - 1) << 4) | (error & 0x0F)
    return (
        bytes([HID_IN, IN_READ_DATA, buttons >> 8, buttons & 0xFF, se, (offset >> 8) & 0xFF, offset & 0xFF])
        + body
    )


def encode_ack(report: int, error: int = 0, buttons: int = 0) -> bytes:
    return bytes([HID_IN, IN_ACK, buttons >> 8, buttons & 0xFF, report, error])


def encode_cells(
    raw: tuple[int, int, int, int] | list[int],
    mode: int = DEFAULT_MODE,
    temperature: int = 0x19,
    battery: int = 0x83,
    buttons: int = 0,
) -> bytes:
    vals = [min(max(int(v), 0), 0xFFFF) for v in raw]
    head = bytes([HID_IN, mode, buttons >> 8, buttons & 0xFF]) + _CELLS_FMT.pack(*vals)
    if mode == IN_BUTTONS_EXT8:
        return head
    ext_rest = bytes([temperature & 0xFF, 0, battery & 0xFF]) + bytes(8)  # 8 + 11 = 19 extension bytes
    return head + ext_rest


def encode_calibration(cal_raw: list[list[int]]) -> bytes:
    """The 24-byte calibration block: rows 0/17/34 kg, each TR, BR, TL, BL as big-endian uint16."""
    return b"".join(_CELLS_FMT.pack(*row) for row in cal_raw)


def decode_calibration(block: bytes) -> list[list[int]]:
    if len(block) < CAL_LEN:
        raise ReportError(f"calibration block has {len(block)} bytes, expected {CAL_LEN}")
    return [list(_CELLS_FMT.unpack_from(block, 8 * k)) for k in range(3)]
