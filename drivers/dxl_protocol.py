"""Dynamixel Protocol 2.0 packet codec (header FF FF FD 00, CRC-16 poly 0x8005, byte stuffing).

The driver talks through the official dynamixel_sdk; this codec is for the bus emulator and for tests
that check the bytes on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

HEADER = b"\xff\xff\xfd\x00"
BROADCAST = 0xFE
INST_PING, INST_READ, INST_WRITE, INST_REBOOT = 0x01, 0x02, 0x03, 0x08
INST_STATUS, INST_SYNC_READ, INST_SYNC_WRITE = 0x55, 0x82, 0x83
INST_FAST_SYNC_READ = 0x8A  # X-series firmware 45 and later: one status packet from all the servos read
# status packet error byte (e-Manual): bit 7 alert (see Hardware Error Status), bits 0-6 an error number
ERR_RESULT_FAIL, ERR_INSTRUCTION, ERR_CRC, ERR_DATA_RANGE = 0x01, 0x02, 0x03, 0x04
ERR_DATA_LENGTH, ERR_DATA_LIMIT, ERR_ACCESS, ERR_ALERT = 0x05, 0x06, 0x07, 0x80
ERROR_NAMES = {
    ERR_RESULT_FAIL: "Result Fail",
    ERR_INSTRUCTION: "Instruction Error",
    ERR_CRC: "CRC Error",
    ERR_DATA_RANGE: "Data Range Error",
    ERR_DATA_LENGTH: "Data Length Error",
    ERR_DATA_LIMIT: "Data Limit Error",
    ERR_ACCESS: "Access Error",
}
# Hardware Error Status (address 70 on X-series) bits
HARDWARE_ERRORS = {
    0: "input voltage",
    2: "overheating",
    3: "motor encoder",
    4: "electrical shock",
    5: "overload",
}


def error_name(error: int) -> str:
    """'Access Error', 'Data Length Error', ... for a status packet's error byte (alert bit ignored)."""
    num = error & 0x7F
    return ERROR_NAMES.get(num, f"error {num}")


def hardware_error_names(bits: int) -> list[str]:
    return [name for bit, name in HARDWARE_ERRORS.items() if bits >> bit & 1] or [f"0x{bits:02x}"]


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_TABLE = _crc_table()


def crc16(data: bytes) -> int:
    """CRC-16 (polynomial 0x8005, init 0, not reflected), over the whole packet before the CRC."""
    crc = 0
    for b in data:
        crc = ((crc << 8) ^ _TABLE[((crc >> 8) ^ b) & 0xFF]) & 0xFFFF
    return crc


def stuff(body: bytes) -> bytes:
    """Insert 0xFD after every FF FF FD inside instruction+parameters."""
    out = bytearray()
    for b in body:
        out.append(b)
        if b == 0xFD and len(out) >= 3 and out[-3] == 0xFF and out[-2] == 0xFF:
            out.append(0xFD)
    return bytes(out)


def unstuff(body: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(body):
        b = body[i]
        out.append(b)
        if (
            b == 0xFD
            and len(out) >= 3
            and out[-3] == 0xFF
            and out[-2] == 0xFF
            and i + 1 < len(body)
            and body[i + 1] == 0xFD
        ):
            i += 1  # skip the stuffed byte
        i += 1
    return bytes(out)


def encode(dxl_id: int, instruction: int, params: bytes = b"") -> bytes:
    body = stuff(bytes([instruction]) + params)
    length = len(body) + 2
    pkt = HEADER + bytes([dxl_id, length & 0xFF, length >> 8]) + body
    crc = crc16(pkt)
    return pkt + bytes([crc & 0xFF, crc >> 8])


def status(dxl_id: int, error: int = 0, params: bytes = b"") -> bytes:
    return encode(dxl_id, INST_STATUS, bytes([error]) + params)


def fast_status(parts: list[tuple[int, int, bytes]]) -> bytes:
    """The one status packet answering a Fast Sync Read, from each servo's (id, error, data) in the order asked:
    broadcast ID, then per servo its error, ID and data, each servo's part but the last closed by the CRC of the
    packet up to it (each servo appends its part on the bus after the one before), the last by the packet's CRC.
    Not byte-stuffed: the servos write their parts one after another."""
    length = 1 + sum(2 + len(d) for _, _, d in parts) + 2 * len(parts)  # instruction, parts, CRCs
    head = HEADER + bytes([BROADCAST, length & 0xFF, length >> 8])
    body = bytearray([INST_STATUS])
    for sid, error, data in parts:
        body += bytes([error, sid]) + data
        crc = crc16(head + body)
        body += bytes([crc & 0xFF, crc >> 8])
    return head + bytes(body)


@dataclass(frozen=True)
class Packet:
    id: int
    instruction: int
    params: bytes


class Parser:
    """Incremental parser; packets with a bad CRC are counted and skipped."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.bad_crc = 0

    def feed(self, data: bytes) -> list[Packet]:
        self.buf += data
        out = []
        buf = self.buf
        while True:
            i = buf.find(HEADER)
            if i < 0:
                del buf[: max(0, len(buf) - 3)]
                return out
            del buf[:i]
            if len(buf) < 7:
                return out
            length = buf[5] | (buf[6] << 8)
            if length < 3 or length > 1024:
                del buf[:1]
                continue
            total = 7 + length
            if len(buf) < total:
                return out
            pkt = bytes(buf[:total])
            if crc16(pkt[:-2]) != (pkt[-2] | (pkt[-1] << 8)):
                self.bad_crc += 1
                del buf[:1]
                continue
            del buf[:total]
            body = unstuff(pkt[7:-2])
            out.append(Packet(pkt[4], body[0], body[1:]))
