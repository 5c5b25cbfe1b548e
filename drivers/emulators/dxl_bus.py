"""Dynamixel X-series bus emulator on a pty: Protocol 2.0 bytes, so dynamixel_sdk runs unmodified against it.

Serves PING, READ, WRITE, SYNC READ and SYNC WRITE over the control-table addresses poise uses (torque
enable 64, goal position 116, moving 122, present velocity 128, present position 132); each servo is
one joint of a shared `JointPlant` (first-order tracking).
"""

from __future__ import annotations

from drivers import dxl_protocol as D
from drivers.config import ServoMap
from drivers.emulators.plant import JointPlant
from drivers.emulators.pty_device import PtyDevice

MODEL_NUMBER = 1020  # XM430-W350
ADDR_MODEL, ADDR_FW, ADDR_ID, ADDR_BAUD = 0, 6, 7, 8
ADDR_TORQUE, ADDR_LED, ADDR_GOAL, ADDR_MOVING, ADDR_PRESENT_VEL, ADDR_PRESENT_POS = 64, 65, 116, 122, 128, 132
TABLE_SIZE = 147


class DxlBusEmulator(PtyDevice):
    def __init__(self, servos: list[ServoMap], plant: JointPlant, drop_every: int = 0) -> None:
        self.servos = {s.id: (k, s) for k, s in enumerate(servos)}
        self.plant = plant
        self.tables = {sid: bytearray(TABLE_SIZE) for sid in self.servos}
        for sid, table in self.tables.items():
            table[ADDR_MODEL : ADDR_MODEL + 2] = MODEL_NUMBER.to_bytes(2, "little")
            table[ADDR_FW] = 46
            table[ADDR_ID] = sid
            table[ADDR_BAUD] = 3
        self.parser = D.Parser()
        self.drop_every = drop_every  # fault injection: ignore every n-th instruction packet
        self.packets = 0
        self._start("dxl-bus-emu")

    # -- control table, with the plant behind the live addresses
    def _refresh(self, sid: int) -> None:
        k, s = self.servos[sid]
        q = self.plant.measured()[k]
        t = self.tables[sid]
        t[ADDR_PRESENT_POS : ADDR_PRESENT_POS + 4] = (s.to_ticks(q) & 0xFFFFFFFF).to_bytes(4, "little")
        t[ADDR_TORQUE] = int(self.plant.torque[k])
        moving = abs(self.plant.goal[k] - self.plant.q[k]) * s.ticks_per_rad > 20
        t[ADDR_MOVING] = int(moving and self.plant.torque[k])

    def _write(self, sid: int, addr: int, data: bytes) -> int:
        if addr + len(data) > TABLE_SIZE or addr < ADDR_TORQUE:
            return D.ERR_ACCESS
        k, s = self.servos[sid]
        t = self.tables[sid]
        if (
            addr <= ADDR_GOAL < addr + len(data)
            and self.tables[sid][ADDR_TORQUE] == 0
            and addr != ADDR_TORQUE
        ):
            pass  # goal accepted but ignored while torque is off (as on the real servo it is accepted too)
        t[addr : addr + len(data)] = data
        if addr <= ADDR_TORQUE < addr + len(data):
            self.plant.set_torque(k, bool(t[ADDR_TORQUE]))
        if addr <= ADDR_GOAL and addr + len(data) >= ADDR_GOAL + 4:
            ticks = int.from_bytes(t[ADDR_GOAL : ADDR_GOAL + 4], "little", signed=True)
            if self.plant.torque[k]:
                self.plant.set_goal(k, s.to_rad(ticks))
        return 0

    def _read(self, sid: int, addr: int, n: int) -> tuple[int, bytes]:
        if addr + n > TABLE_SIZE:
            return D.ERR_ACCESS, b""
        self._refresh(sid)
        return 0, bytes(self.tables[sid][addr : addr + n])

    def _handle(self, pkt: D.Packet) -> list[bytes]:
        p = pkt.params
        inst = pkt.instruction
        if inst == D.INST_SYNC_WRITE:
            addr, n = p[0] | p[1] << 8, p[2] | p[3] << 8
            for off in range(4, len(p), n + 1):
                sid = p[off]
                if sid in self.servos:
                    self._write(sid, addr, p[off + 1 : off + 1 + n])
            return []
        if inst == D.INST_SYNC_READ:
            addr, n = p[0] | p[1] << 8, p[2] | p[3] << 8
            out = []
            for sid in p[4:]:
                if sid in self.servos:
                    err, data = self._read(sid, addr, n)
                    out.append(D.status(sid, err, data))
            return out
        if pkt.id not in self.servos:
            return []
        if inst == D.INST_PING:
            return [D.status(pkt.id, 0, MODEL_NUMBER.to_bytes(2, "little") + bytes([46]))]
        if inst == D.INST_READ:
            err, data = self._read(pkt.id, p[0] | p[1] << 8, p[2] | p[3] << 8)
            return [D.status(pkt.id, err, data)]
        if inst == D.INST_WRITE:
            err = self._write(pkt.id, p[0] | p[1] << 8, p[2:])
            return [D.status(pkt.id, err)]
        return [D.status(pkt.id, D.ERR_INSTRUCTION)]

    def _loop(self) -> None:
        while not self._stop.is_set():
            data = self._recv(0.05)
            if not data:
                continue
            for pkt in self.parser.feed(data):
                self.packets += 1
                if self.drop_every and self.packets % self.drop_every == 0:
                    continue
                reply = b"".join(self._handle(pkt))
                if reply:
                    self._send(reply)
