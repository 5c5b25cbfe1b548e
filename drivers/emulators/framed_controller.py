"""Emulated custom joint controller speaking the poise framed protocol on a pty (first-order servos).

Watchdog: no valid frame for `watchdog_s` -> hold the current position and raise the watchdog flag until
the next setpoint. Duplicate requests (same seq as the last one) get the cached reply, not re-applied; a
HELLO opens a new session and clears that cache. Frames with a bad CRC, an unknown type or a wrong length
get one NACK each (never cached), so every request gets exactly one reply.
"""

from __future__ import annotations

import struct
import time

from drivers import framed as F
from drivers.emulators.plant import JointPlant
from drivers.emulators.pty_device import PtyDevice


class FramedControllerEmulator(PtyDevice):
    def __init__(
        self,
        plant: JointPlant,
        watchdog_s: float = 0.25,
        drop_every: int = 0,
        corrupt_every: int = 0,
        corrupt_rx_every: int = 0,
    ):
        self.plant = plant
        self.n = len(plant.q)
        self.watchdog_s = watchdog_s
        self.drop_every = drop_every  # fault injection: ignore every n-th request
        self.corrupt_every = corrupt_every  # flip a byte in every n-th reply
        self.corrupt_rx_every = corrupt_rx_every  # flip a CRC byte in every n-th chunk the host sends
        self.parser = F.FrameParser(
            {F.HELLO: 0, F.SETPOINT: 4 * self.n, F.READ: 0, F.HEARTBEAT: 0, F.ENABLE: 1, F.STOP: 0},
            report_bad=True,
        )
        self.frames = 0
        self.chunks = 0
        self.nacks: list[int] = []  # reasons of the NACKs sent
        self.applied_setpoints = 0
        self.watchdog_trips = 0
        self._last_seq: int | None = None
        self._last_reply = b""
        self._last_rx = time.monotonic()
        self.watchdog = False
        self._start("framed-emu")

    def _flags(self) -> int:
        return (F.FLAG_ENABLED if self.plant.torque.all() else 0) | (F.FLAG_WATCHDOG if self.watchdog else 0)

    def _state(self, seq: int) -> bytes:
        q = self.plant.measured()
        return F.encode(seq, F.STATE, F.pack_q(q) + bytes([self._flags()]))

    def _hold(self) -> None:
        q = self.plant.step()
        for k in range(self.n):
            self.plant.set_goal(k, q[k])

    def _handle(self, fr: F.Frame) -> bytes:
        if fr.error:
            self.nacks.append(fr.error)
            return F.encode(fr.seq, F.NACK, bytes([fr.error]))  # not cached: the resend is handled anew
        k = fr.kind
        if k == F.HELLO:
            self._last_seq, self._last_reply = None, b""  # new session: forget the last one's replies
        if fr.seq == self._last_seq and self._last_reply:
            return self._last_reply  # duplicate: answer again, do not apply twice
        if k == F.HELLO:
            rep = F.encode(fr.seq, F.HELLO_ACK, bytes([self.n, F.VERSION]))
        elif k == F.READ:
            rep = self._state(fr.seq)
        elif k == F.SETPOINT:
            q = struct.unpack(f"<{self.n}f", fr.payload)
            for j in range(self.n):
                self.plant.set_goal(j, q[j])
            self.applied_setpoints += 1
            self.watchdog = False
            rep = self._state(fr.seq)
        elif k == F.HEARTBEAT:
            rep = F.encode(
                fr.seq, F.HEARTBEAT_ACK, struct.pack("<I", int(time.monotonic() * 1000) & 0xFFFFFFFF)
            )
        elif k == F.ENABLE:
            on = bool(fr.payload[:1] == b"\x01")
            for j in range(self.n):
                self.plant.set_torque(j, on)
            rep = F.encode(fr.seq, F.ACK)
        elif k == F.STOP:
            self._hold()
            rep = F.encode(fr.seq, F.ACK)
        else:  # the parser only lets the kinds above through; never crash the serving thread
            self.nacks.append(F.NACK_TYPE)
            return F.encode(fr.seq, F.NACK, bytes([F.NACK_TYPE]))
        self._last_seq, self._last_reply = fr.seq, rep
        return rep

    def _loop(self) -> None:
        replies = 0
        while not self._stop.is_set():
            if (
                not self.watchdog
                and time.monotonic() - self._last_rx > self.watchdog_s
                and self.plant.torque.any()
            ):
                self.watchdog = True
                self.watchdog_trips += 1
                self._hold()
            data = self._recv(0.01)
            if not data:
                continue
            self.chunks += 1
            if self.corrupt_rx_every and self.chunks % self.corrupt_rx_every == 0:
                data = data[:-1] + bytes([data[-1] ^ 0x55])
            for fr in self.parser.feed(data):
                self._last_rx = time.monotonic()
                self.frames += 1
                if self.drop_every and self.frames % self.drop_every == 0:
                    continue
                rep = self._handle(fr)
                replies += 1
                if self.corrupt_every and replies % self.corrupt_every == 0:
                    b = bytearray(rep)
                    b[-3] ^= 0x55
                    rep = bytes(b)
                self._send(rep)
