"""poise framed protocol: a small binary protocol over a serial line for custom joint controllers.

Frame:  A5 5A | seq u8 | type u8 | len u8 | payload (len bytes) | crc u16 LE
        crc = CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF) over seq..payload.
Every host request gets exactly one reply carrying the same seq. Floats are IEEE-754 float32 little-endian.
See README.md, "The poise framed protocol (`serial:PORT`)", for the message table, retransmission and the
controller's heartbeat watchdog.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import numpy as np
import serial

from drivers.link import LinkTimeout
from drivers.transports import open_serial
from formats.errors import DeviceError

SYNC = b"\xa5\x5a"
VERSION = 1
# host -> controller
HELLO, SETPOINT, READ, HEARTBEAT, ENABLE, STOP = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
# controller -> host
HELLO_ACK, STATE, HEARTBEAT_ACK, ACK, NACK = 0x81, 0x82, 0x84, 0x85, 0xFF
NACK_CRC, NACK_TYPE, NACK_LENGTH = 1, 2, 3
FLAG_ENABLED, FLAG_WATCHDOG = 0x01, 0x02


def crc16_ccitt(data: bytes, crc: int = 0xFFFF) -> int:
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def encode(seq: int, kind: int, payload: bytes = b"") -> bytes:
    if len(payload) > 255:
        raise ValueError("payload too long")
    body = bytes([seq & 0xFF, kind, len(payload)]) + payload
    return SYNC + body + struct.pack("<H", crc16_ccitt(body))


@dataclass(frozen=True)
class Frame:
    """A decoded frame; `error` is a NACK reason (NACK_CRC/TYPE/LENGTH) for a damaged or refused one."""

    seq: int
    kind: int
    payload: bytes
    error: int = 0


NACK_REASONS = {NACK_CRC: "bad CRC", NACK_TYPE: "unknown type", NACK_LENGTH: "bad length"}


class FrameParser:
    """Incremental parser: skips to the next sync on a bad CRC (counted). With `kinds` ({type: payload
    length or None}), a header with an unknown type or a wrong length is skipped at once instead of waiting
    for its (bogus) length, so one damaged byte cannot stall the stream. With `report_bad` (the controller
    side) every rejected header comes out as a Frame with `error` set, so it can be answered with a NACK."""

    def __init__(self, kinds: dict[int, int | None] | None = None, report_bad: bool = False) -> None:
        self.buf = bytearray()
        self.bad = 0
        self.kinds = kinds
        self.report_bad = report_bad

    def _reject(self, out: list[Frame], reason: int) -> None:
        self.bad += 1
        if self.report_bad:
            out.append(Frame(self.buf[2], self.buf[3], b"", reason))

    def _crc_ok(self, n: int) -> bool:
        return crc16_ccitt(bytes(self.buf[2 : 5 + n])) == struct.unpack_from("<H", self.buf, 5 + n)[0]

    def feed(self, data: bytes) -> list[Frame]:
        self.buf += data
        out: list[Frame] = []
        buf = self.buf
        while True:
            i = buf.find(SYNC)
            if i < 0:
                del buf[: max(0, len(buf) - 1)]
                return out
            del buf[:i]
            if len(buf) < 5:
                return out
            n = buf[4]
            if self.kinds is not None and (buf[3] not in self.kinds or self.kinds[buf[3]] not in (None, n)):
                reason = NACK_TYPE if buf[3] not in self.kinds else NACK_LENGTH
                if len(buf) >= 7 + n and self._crc_ok(n):
                    self._reject(out, reason)  # intact frame the controller does not accept
                    del buf[: 7 + n]
                    continue
                # damaged, or not all here yet: decide now, never wait for a length that may be bogus
                self._reject(out, NACK_CRC if len(buf) >= 7 + n else reason)
                del buf[:1]
                continue
            total = 7 + n
            if len(buf) < total:
                return out
            if not self._crc_ok(n):
                self._reject(out, NACK_CRC)
                del buf[:1]
                continue
            body = bytes(buf[2 : 5 + n])
            del buf[:total]
            out.append(Frame(body[0], body[1], body[3:]))


def pack_q(q: np.ndarray) -> bytes:
    return struct.pack(f"<{len(q)}f", *np.asarray(q, dtype=float))


def unpack_state(payload: bytes, n: int) -> tuple[np.ndarray, int]:
    if len(payload) != 4 * n + 1:
        raise DeviceError(f"STATE payload has {len(payload)} bytes, expected {4 * n + 1}")
    return np.array(struct.unpack_from(f"<{n}f", payload)), payload[-1]


class FramedLink:
    """Host side: request/reply with retransmission; a heartbeat keeps the controller's watchdog fed.

    The protocol has no servo gains: the controller's position gain is its own (its firmware's), so this link
    neither writes `[executor] position_p_gain` nor reads one back (no `read_position_gains`; a run on it
    records null gains, and gravity compensation assumes the configured value matches the controller)."""

    def __init__(
        self,
        port: str,
        joint_names: list[str],
        baud: int = 1_000_000,
        reply_timeout: float = 0.03,
        retries: int = 3,
    ):
        self.port_name = port
        self.joint_names = list(joint_names)
        self.n = len(joint_names)
        self.baud = baud
        self.reply_timeout = reply_timeout
        self.retries = retries
        self.ser: serial.SerialBase | None = None
        self.parser = FrameParser({HELLO_ACK: 2, STATE: 4 * self.n + 1, HEARTBEAT_ACK: 4, ACK: 0, NACK: 1})
        self.seq = 0
        self.retransmissions = 0
        self.nacks = 0
        self.flags = 0
        self._last = np.zeros(self.n)

    # -- transport
    def _request(self, kind: int, payload: bytes = b"") -> Frame:
        if self.ser is None:
            raise DeviceError(f"serial:{self.port_name}: not connected")
        self.seq = (self.seq + 1) & 0xFF
        frame = encode(self.seq, kind, payload)
        for attempt in range(self.retries + 1):
            refused = 0
            if attempt:
                self.retransmissions += 1
                self.parser.buf.clear()  # drop stale partial replies: resync on the next one
            try:
                self.ser.write(frame)
            except (serial.SerialException, OSError) as exc:
                raise DeviceError(f"serial:{self.port_name}: write failed ({exc})") from exc
            deadline = time.monotonic() + self.reply_timeout
            while time.monotonic() < deadline:
                try:
                    data = self.ser.read(max(1, self.ser.in_waiting))
                except (serial.SerialException, OSError) as exc:
                    raise DeviceError(f"serial:{self.port_name}: read failed ({exc})") from exc
                for rep in self.parser.feed(data):
                    if rep.seq != self.seq:
                        continue  # a late reply to an earlier (retransmitted) request
                    if rep.kind == NACK:
                        self.nacks += 1
                        refused = rep.payload[0]
                        deadline = 0.0  # resend now
                        break
                    return rep
        if refused:
            why = NACK_REASONS.get(refused, f"reason {refused}")
            raise DeviceError(
                f"serial:{self.port_name}: controller refused request 0x{kind:02x} ({why}), "
                f"last of {self.retries + 1} tries"
            )
        raise LinkTimeout(f"serial:{self.port_name}: no reply to 0x{kind:02x} after {self.retries + 1} tries")

    # -- RobotLink
    def connect(self) -> None:
        self.ser = open_serial(self.port_name, baudrate=self.baud, timeout=0.005)
        rep = self._request(HELLO)
        if rep.kind != HELLO_ACK or len(rep.payload) < 2:
            raise DeviceError(f"serial:{self.port_name}: unexpected reply to HELLO")
        n, version = rep.payload[0], rep.payload[1]
        if version != VERSION:
            raise DeviceError(
                f"serial:{self.port_name}: controller speaks protocol v{version}, poise v{VERSION}"
            )
        if n != self.n:
            raise DeviceError(f"serial:{self.port_name}: controller has {n} joints, the model {self.n}")
        self.read()
        self._request(ENABLE, b"\x01")

    def _state(self, rep: Frame) -> np.ndarray:
        if rep.kind != STATE:
            raise DeviceError(f"serial:{self.port_name}: expected STATE, got 0x{rep.kind:02x}")
        q, self.flags = unpack_state(rep.payload, self.n)
        bad = np.flatnonzero(~np.isfinite(q))
        if bad.size:  # an intact frame (its CRC checked) carrying a non-number: the controller's own fault
            j = int(bad[0])
            raise DeviceError(
                f"serial:{self.port_name}: controller fault: its STATE reply gives {self.joint_names[j]} a "
                f"non-finite angle ({q[j]}) in an intact frame"
            )
        self._last = q
        return q

    def read(self) -> np.ndarray:
        return self._state(self._request(READ))

    def command(self, q: np.ndarray) -> np.ndarray:
        return self._state(self._request(SETPOINT, pack_q(q)))

    def heartbeat(self) -> None:
        self._request(HEARTBEAT)

    def stop(self) -> None:
        if self.ser is not None:
            try:
                self._request(STOP)
            except DeviceError:
                pass

    def close(self) -> None:
        if self.ser is not None:
            self.ser.close()
            self.ser = None
