"""Dynamixel X-series bus emulator on a pty: Protocol 2.0 bytes, so dynamixel_sdk runs unmodified against it.

Serves PING (also broadcast: every servo answers, in id order, staggered), READ, WRITE (also broadcast:
applied, no status), SYNC READ, FAST SYNC READ (one status packet from all the servos read, as firmware 45 and
later answer; no packet when a servo asked for is missing) and SYNC WRITE over an XM430-like control table. Writes follow the ROBOTIS
e-Manual: read-only items and EEPROM items while Torque Enable = 1 -> Access Error; a write that ends inside
an item -> Data Length Error; a value outside the item's range -> Data Range Error; nothing is written on an
error. A hardware error (`inject_hardware_error`) turns torque off and sets the alert bit (0x80) in every
status packet until the bits are cleared. Each servo is one joint of a shared `JointPlant`.

Drive Mode (10) bit 2 with Profile Velocity (112) in ms: a time-based profile — the joint's target moves linearly
from where it was to each new goal over that time (`set_profile`; velocity-based profiles are not emulated).
Position D/I/P Gain (80/82/84, RAM, 0 … 16383) power on at the XM430 factory values 0/0/800; every write of
Position P Gain is passed to the plant (`set_p_gain`), so the physics twin's servo of that joint holds with the
gain the bus received (the kinematic plant takes note and ignores it). D and I stay table values only.

PWM control mode (Operating Mode 11 = 16, changed only while torque is off): a servo given a physics drive
(`drives`, drivers/emulators/pwm_drive.py) moves its joint by MuJoCo with the drive's true friction, gravity and
PWM gain while torque is on, Goal PWM (100) bounded by PWM Limit (36); Present PWM (124), Present Current (126),
Present Velocity (128, 0.229 rpm units) and Present Position (132, encoder ticks) come from that physics.
In position control mode, a plant with efforts (the physics twin's `effort`) gives each servo with a torque
constant (`torque_constants`, N·m at the joint per A) its Present Current: the effort over the constant, in 2.69 mA
units, saturating at Current Limit (38).
Operating Mode (11) is honoured as the e-Manual describes it for Goal Position (116): in Position Control Mode (3)
it is bounded by Min/Max Position Limit (48/52); in Extended (4) and Current-based (5) Position Control Mode the
limits are not used (range ±1,048,575); in Current (0), Velocity (1) and PWM (16) mode it is stored and ignored.
`models` gives servos another Model Number (answered to PING and at address 0); `velocity_limits` another Velocity
Limit (44) than the XM430-W350's default (200 × 0.229 rev/min), which the bus holds for a driver to read and does
not apply (a time-based profile's goal moves are not bounded by it); `damage_next` makes a servo answer its next
instructions with error number 3 (CRC Error: it received a damaged packet) and do nothing else.
The packets of one transmission (the bytes one read of the pty returns) act on it at the instant they arrived:
a SYNC WRITE of Goal PWM and the SYNC READ sent with it see the same physics time, as on a real servo.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np

from drivers import dxl_protocol as D
from drivers.config import ServoMap
from drivers.emulators.plant import JointPlant
from drivers.emulators.pty_device import PtyDevice
from drivers.emulators.pwm_drive import PwmDrive

MODEL_NUMBER = 1020  # XM430-W350
ADDR_MODEL, ADDR_FW, ADDR_ID, ADDR_BAUD = 0, 6, 7, 8
ADDR_OPERATING_MODE, ADDR_MAX_POS, ADDR_MIN_POS = 11, 48, 52
ADDR_TORQUE, ADDR_LED, ADDR_GOAL, ADDR_MOVING, ADDR_PRESENT_VEL, ADDR_PRESENT_POS = 64, 65, 116, 122, 128, 132
ADDR_HW_ERROR = 70
ADDR_PWM_LIMIT, ADDR_GOAL_PWM, ADDR_PRESENT_PWM, ADDR_PRESENT_CURRENT = 36, 100, 124, 126
ADDR_CURRENT_LIMIT, CURRENT_LIMIT_FACTORY = 38, 1193  # Current Limit: XM430-W350's power-on value (3.21 A)
# Velocity Limit (EEPROM, 4 bytes, 0 … 1023, 0.229 rev/min): the XM430-W350's default in the e-Manual's control table
# (200 = 45.8 rev/min, 4.80 rad/s)
ADDR_VELOCITY_LIMIT, VELOCITY_LIMIT_FACTORY = 44, 200
ADDR_DRIVE_MODE, TIME_BASED_PROFILE = 10, 0x04  # Drive Mode bit 2: Profile Velocity (112) is a time, ms
ADDR_PROFILE_ACCELERATION, ADDR_PROFILE_VELOCITY = 108, 112
ADDR_REALTIME_TICK = 120  # ms, 0 … 32767
ADDR_POSITION_P_GAIN = 84
P_GAIN_FACTORY = 800  # XM430 Position P Gain at power-on (D and I: 0)
PWM_MODE = 16
POSITION_MODES = (3, 4, 5)  # the modes whose Goal Position moves the joint
EXTENDED_GOAL = 1_048_575  # Goal Position range in extended / current-based position mode
VELOCITY_UNIT = 0.229 * 2 * 3.141592653589793 / 60  # rad/s per Present Velocity unit
CURRENT_UNIT = 2.69e-3  # A per Present Current unit
EEPROM_END = 64  # addresses below are EEPROM: writable only while torque is off
TABLE_SIZE = 147
STAGGER_S = 0.0005  # gap between the status packets of a broadcast PING
Sample = tuple[np.ndarray, np.ndarray | None]  # (angles, efforts or None) of the robot at one instant


@dataclass(frozen=True)
class Item:
    size: int
    writable: bool = True
    lo: int = 0
    hi: int | None = None  # None: the full unsigned range of `size` bytes (signed items give lo < 0)


# XM430 control table (e-Manual), address -> item; gaps are reserved.
ITEMS: dict[int, Item] = {
    0: Item(2, False),  # Model Number
    2: Item(4, False),  # Model Information
    6: Item(1, False),  # Firmware Version
    7: Item(1, True, 0, 252),  # ID
    8: Item(1, True, 0, 7),  # Baud Rate
    9: Item(1, True, 0, 254),  # Return Delay Time
    10: Item(1, True, 0, 13),  # Drive Mode
    11: Item(1, True, 0, 16),  # Operating Mode
    12: Item(1, True, 0, 252),  # Secondary ID
    13: Item(1, True, 1, 2),  # Protocol Type
    20: Item(4, True, -1_044_479, 1_044_479),  # Homing Offset
    24: Item(4, True, 0, 1023),  # Moving Threshold
    31: Item(1, True, 0, 100),  # Temperature Limit
    32: Item(2, True, 60, 160),  # Max Voltage Limit
    34: Item(2, True, 60, 160),  # Min Voltage Limit
    36: Item(2, True, 0, 885),  # PWM Limit
    38: Item(2, True, 0, 1193),  # Current Limit
    44: Item(4, True, 0, 1023),  # Velocity Limit
    48: Item(4, True, 0, 4095),  # Max Position Limit
    52: Item(4, True, 0, 4095),  # Min Position Limit
    60: Item(1, True, 0, 3),  # Startup Configuration
    63: Item(1),  # Shutdown
    64: Item(1, True, 0, 1),  # Torque Enable
    65: Item(1, True, 0, 1),  # LED
    68: Item(1, True, 0, 2),  # Status Return Level
    69: Item(1, False),  # Registered Instruction
    70: Item(1, False),  # Hardware Error Status
    76: Item(2, True, 0, 16383),  # Velocity I Gain
    78: Item(2, True, 0, 16383),  # Velocity P Gain
    80: Item(2, True, 0, 16383),  # Position D Gain
    82: Item(2, True, 0, 16383),  # Position I Gain
    84: Item(2, True, 0, 16383),  # Position P Gain
    88: Item(2, True, 0, 16383),  # Feedforward 2nd Gain
    90: Item(2, True, 0, 16383),  # Feedforward 1st Gain
    98: Item(1, True, 0, 127),  # Bus Watchdog
    100: Item(2, True, -885, 885),  # Goal PWM
    102: Item(2, True, -1193, 1193),  # Goal Current
    104: Item(4, True, -1023, 1023),  # Goal Velocity
    108: Item(4, True, 0, 32767),  # Profile Acceleration
    112: Item(4, True, 0, 32767),  # Profile Velocity
    116: Item(4, True, 0, 4095),  # Goal Position (position mode: Min..Max Position Limit)
    120: Item(2, False),  # Realtime Tick
    122: Item(1, False),  # Moving
    123: Item(1, False),  # Moving Status
    124: Item(2, False),  # Present PWM
    126: Item(2, False),  # Present Current
    128: Item(4, False),  # Present Velocity
    132: Item(4, False),  # Present Position
    136: Item(4, False),  # Velocity Trajectory
    140: Item(4, False),  # Position Trajectory
    144: Item(2, False),  # Present Input Voltage
    146: Item(1, False),  # Present Temperature
}


def _value(item: Item, data: bytes) -> int:
    return int.from_bytes(data, "little", signed=item.lo < 0)


class DxlBusEmulator(PtyDevice):
    def __init__(
        self,
        servos: list[ServoMap],
        plant: JointPlant,
        drop_every: int = 0,
        drives: dict[int, PwmDrive] | None = None,
        torque_constants: dict[int, float] | None = None,
        models: dict[int, int] | None = None,
        velocity_limits: dict[int, int] | None = None,
    ) -> None:
        """`velocity_limits`: servo id -> Velocity Limit (44) register value, others at VELOCITY_LIMIT_FACTORY."""
        self.servos = {s.id: (k, s) for k, s in enumerate(servos)}
        self.plant = plant
        self.torque_constants = dict(torque_constants or {})  # servo id -> N·m/A at the joint (position mode)
        self.drives = dict(drives or {})  # servo id -> the physics of its joint in PWM mode
        self.tables = {sid: bytearray(TABLE_SIZE) for sid in self.servos}
        for sid, table in self.tables.items():
            model = (models or {}).get(sid, MODEL_NUMBER)
            table[ADDR_MODEL : ADDR_MODEL + 2] = model.to_bytes(2, "little")
            table[ADDR_FW] = 46
            table[ADDR_ID] = sid
            table[ADDR_BAUD] = 3
            table[ADDR_OPERATING_MODE] = 3  # position control
            table[ADDR_MAX_POS : ADDR_MAX_POS + 4] = (4095).to_bytes(4, "little")
            table[ADDR_PWM_LIMIT : ADDR_PWM_LIMIT + 2] = (885).to_bytes(2, "little")
            table[ADDR_CURRENT_LIMIT : ADDR_CURRENT_LIMIT + 2] = CURRENT_LIMIT_FACTORY.to_bytes(2, "little")
            vlim = (velocity_limits or {}).get(sid, VELOCITY_LIMIT_FACTORY)
            if not 0 <= vlim <= (ITEMS[ADDR_VELOCITY_LIMIT].hi or 0):
                raise ValueError(
                    f"servo {sid}: Velocity Limit {vlim} outside 0 … {ITEMS[ADDR_VELOCITY_LIMIT].hi}"
                )
            table[ADDR_VELOCITY_LIMIT : ADDR_VELOCITY_LIMIT + 4] = int(vlim).to_bytes(4, "little")
            table[68] = 2  # status return level: answer everything
            table[ADDR_POSITION_P_GAIN : ADDR_POSITION_P_GAIN + 2] = P_GAIN_FACTORY.to_bytes(2, "little")
            plant.set_p_gain(self.servos[sid][0], P_GAIN_FACTORY)  # the physics starts as the servo powers on
        self.parser = D.Parser()
        self.drop_every = drop_every  # fault injection: ignore every n-th instruction packet
        self.packets = 0
        # instructions served, by (instruction, start address; None for PING and others): what the host sent
        self.served: Counter[tuple[int, int | None]] = Counter()
        self.errors: list[tuple[int, int]] = []  # (servo id, error) of every status packet with an error
        self.fail_writes: dict[tuple[int, int], int] = {}  # fault injection: (id, address) -> error number
        # fault injection: servo id -> instructions left to answer error 3
        self.damaged: Counter[int] = Counter()
        self._start("dxl-bus-emu")

    def inject_hardware_error(self, sid: int, bits: int) -> None:
        """Set Hardware Error Status bits (e.g. 0x20 overload): torque off, alert bit in every status."""
        k, _ = self.servos[sid]
        self.tables[sid][ADDR_HW_ERROR] = bits
        if bits:
            self.plant.set_torque(k, False)
            if sid in self.drives:
                self.drives[sid].set_torque(False)
            self.tables[sid][ADDR_TORQUE] = 0

    def damage_next(self, sid: int, n: int = 1) -> None:
        """The next `n` instructions addressed to servo `sid` arrive damaged: it answers CRC Error (3), acts on none."""
        self.damaged[sid] += n

    def _is_damaged(self, sid: int) -> bool:
        if self.damaged[sid] > 0:
            self.damaged[sid] -= 1
            return True
        return False

    def _status(self, sid: int, err: int = 0, data: bytes = b"") -> bytes:
        return D.status(sid, self._error(sid, err), data)

    def _error(self, sid: int, err: int) -> int:
        """A status's error byte: `err`, with the alert bit while a hardware error is set (logged in `errors`)."""
        if self.tables[sid][ADDR_HW_ERROR]:
            err |= 0x80
        if err:
            self.errors.append((sid, err))
        return err

    # -- control table, with the plant behind the live addresses
    def _refresh(self, sid: int, sample: Sample | None = None) -> None:
        """The servo's live addresses, from `sample` (the robot sampled once for a whole SYNC READ) or the plant."""
        k, s = self.servos[sid]
        t = self.tables[sid]
        tick = int(time.monotonic() * 1000) % 32768
        t[ADDR_REALTIME_TICK : ADDR_REALTIME_TICK + 2] = tick.to_bytes(2, "little")
        if self._pwm_mode(sid):
            self._refresh_pwm(sid)
            return
        measured, effort = sample or (self.plant.measured(), None)
        q = measured[k]
        t[ADDR_PRESENT_POS : ADDR_PRESENT_POS + 4] = (s.to_ticks(q) & 0xFFFFFFFF).to_bytes(4, "little")
        t[ADDR_TORQUE] = int(self.plant.torque[k])
        if sid in self.torque_constants:
            lim = int.from_bytes(t[ADDR_CURRENT_LIMIT : ADDR_CURRENT_LIMIT + 2], "little")
            effort = self.plant.effort() if effort is None else effort
            amps = s.direction * float(effort[k]) / self.torque_constants[sid]
            current = max(-lim, min(lim, round(amps / CURRENT_UNIT)))
            t[ADDR_PRESENT_CURRENT : ADDR_PRESENT_CURRENT + 2] = (current & 0xFFFF).to_bytes(2, "little")
        moving = abs(self.plant.goal[k] - self.plant.q[k]) * s.ticks_per_rad > 20
        t[ADDR_MOVING] = int(moving and self.plant.torque[k])

    def _pwm_mode(self, sid: int) -> bool:
        return self.tables[sid][ADDR_OPERATING_MODE] == PWM_MODE and sid in self.drives

    def _refresh_pwm(self, sid: int) -> None:
        """Present PWM/Current/Velocity/Position of a servo in PWM mode, from its physics (ticks, 0.229 rpm)."""
        k, s = self.servos[sid]
        t, drive = self.tables[sid], self.drives[sid]
        q, w, t_phys = drive.state()
        tick = int(t_phys * 1000) % 32768  # the sample's time on the servo's ms clock
        t[ADDR_REALTIME_TICK : ADDR_REALTIME_TICK + 2] = tick.to_bytes(2, "little")
        with self.plant.lock:
            self.plant.q[k] = self.plant.goal[k] = q  # the position plant follows the physics
        pwm = s.direction * drive.pwm if drive.torque else 0  # device units (the drive works joint-side)
        current = round(drive.drive_torque() / drive.truth.kt / CURRENT_UNIT) * s.direction
        vel = round(s.direction * w / VELOCITY_UNIT)
        t[ADDR_PRESENT_PWM : ADDR_PRESENT_PWM + 2] = (pwm & 0xFFFF).to_bytes(2, "little")
        t[ADDR_PRESENT_CURRENT : ADDR_PRESENT_CURRENT + 2] = (current & 0xFFFF).to_bytes(2, "little")
        t[ADDR_PRESENT_VEL : ADDR_PRESENT_VEL + 4] = (vel & 0xFFFFFFFF).to_bytes(4, "little")
        t[ADDR_PRESENT_POS : ADDR_PRESENT_POS + 4] = (s.to_ticks(q) & 0xFFFFFFFF).to_bytes(4, "little")
        t[ADDR_TORQUE] = int(drive.torque)
        t[ADDR_MOVING] = int(abs(vel) > 0)

    def _check_write(self, sid: int, addr: int, data: bytes) -> int:
        """The error a write would cause (0: none), item by item over the written range."""
        t = self.tables[sid]
        a, end = addr, addr + len(data)
        if not data or addr not in ITEMS:
            return D.ERR_ACCESS
        while a < end:
            item = ITEMS.get(a)
            if item is None:
                return D.ERR_ACCESS  # reserved address inside the range
            if a + item.size > end:
                return D.ERR_DATA_LENGTH  # fewer bytes than the item holds
            if not item.writable or (a < EEPROM_END and t[ADDR_TORQUE]):
                return D.ERR_ACCESS
            v = _value(item, data[a - addr : a - addr + item.size])
            hi = item.hi if item.hi is not None else (1 << 8 * item.size) - 1
            if a == ADDR_GOAL:
                lo = int.from_bytes(t[ADDR_MIN_POS : ADDR_MIN_POS + 4], "little")
                hi = int.from_bytes(t[ADDR_MAX_POS : ADDR_MAX_POS + 4], "little")
                v = int.from_bytes(data[a - addr : a - addr + 4], "little", signed=True)
                if t[ADDR_OPERATING_MODE] != 3:  # the limit registers are not used
                    lo, hi = -EXTENDED_GOAL, EXTENDED_GOAL
                if not lo <= v <= hi:
                    return D.ERR_DATA_RANGE
            elif a == ADDR_GOAL_PWM:  # e-Manual: −PWM Limit(36) … PWM Limit(36)
                lim = int.from_bytes(t[ADDR_PWM_LIMIT : ADDR_PWM_LIMIT + 2], "little")
                if not -lim <= v <= lim:
                    return D.ERR_DATA_RANGE
            elif not item.lo <= v <= hi:
                return D.ERR_DATA_RANGE
            a += item.size
        return 0

    def _write(self, sid: int, addr: int, data: bytes) -> int:
        err = self.fail_writes.get((sid, addr)) or self._check_write(sid, addr, data)
        if err:
            return err
        k, s = self.servos[sid]
        t = self.tables[sid]
        drive = self.drives.get(sid)
        was_pwm = self._pwm_mode(sid)
        t[addr : addr + len(data)] = data
        if drive is not None and addr <= ADDR_OPERATING_MODE < addr + len(data):
            if self._pwm_mode(sid) and not was_pwm:  # the physics takes the joint over where it is, at rest
                drive.set_active(True, float(self.plant.step()[k]))
            elif was_pwm and not self._pwm_mode(sid):
                q, _, _ = drive.state()
                drive.set_active(False)
                with self.plant.lock:
                    self.plant.q[k] = self.plant.goal[k] = q
        if drive is not None and addr <= ADDR_GOAL_PWM and addr + len(data) >= ADDR_GOAL_PWM + 2:
            drive.set_pwm(
                s.direction * int.from_bytes(t[ADDR_GOAL_PWM : ADDR_GOAL_PWM + 2], "little", signed=True)
            )
        if any(addr <= a < addr + len(data) for a in (ADDR_DRIVE_MODE, ADDR_PROFILE_VELOCITY)):
            self.plant.set_profile(k, self._profile_s(sid))
        if addr <= ADDR_POSITION_P_GAIN and addr + len(data) >= ADDR_POSITION_P_GAIN + 2:
            self.plant.set_p_gain(
                k, int.from_bytes(t[ADDR_POSITION_P_GAIN : ADDR_POSITION_P_GAIN + 2], "little")
            )
        if addr <= ADDR_TORQUE < addr + len(data):
            if t[ADDR_TORQUE] and t[ADDR_HW_ERROR]:
                t[ADDR_TORQUE] = 0  # a servo in hardware error stays off until it is rebooted
            if self._pwm_mode(sid):
                drive.set_torque(bool(t[ADDR_TORQUE]))
                self.plant.set_torque(k, False)
            else:
                self.plant.set_torque(k, bool(t[ADDR_TORQUE]))
        if addr <= ADDR_GOAL and addr + len(data) >= ADDR_GOAL + 4:
            ticks = int.from_bytes(t[ADDR_GOAL : ADDR_GOAL + 4], "little", signed=True)
            if self.plant.torque[k] and t[ADDR_OPERATING_MODE] in POSITION_MODES:
                self.plant.set_goal(k, s.to_rad(ticks))
        return 0

    def _profile_s(self, sid: int) -> float:
        """The servo's time-based profile (s; 0: none): Profile Velocity in ms when Drive Mode's bit 2 is set. The
        target then moves linearly (Profile Acceleration is not emulated: the driver writes 0)."""
        t = self.tables[sid]
        if not t[ADDR_DRIVE_MODE] & TIME_BASED_PROFILE:
            return 0.0
        return int.from_bytes(t[ADDR_PROFILE_VELOCITY : ADDR_PROFILE_VELOCITY + 4], "little") / 1000.0

    def _read(self, sid: int, addr: int, n: int, sample: Sample | None = None) -> tuple[int, bytes]:
        if addr + n > TABLE_SIZE or n == 0:
            return D.ERR_ACCESS, b""
        self._refresh(sid, sample)
        return 0, bytes(self.tables[sid][addr : addr + n])

    def _ping(self, sid: int) -> bytes:
        t = self.tables[sid]
        return self._status(sid, 0, bytes(t[ADDR_MODEL : ADDR_MODEL + 2]) + bytes([t[ADDR_FW]]))

    def _handle(self, pkt: D.Packet) -> list[bytes]:
        p = pkt.params
        inst = pkt.instruction
        if inst == D.INST_SYNC_WRITE:
            addr, n = p[0] | p[1] << 8, p[2] | p[3] << 8
            for off in range(4, len(p), n + 1):
                sid = p[off]
                if sid in self.servos:
                    self._write(sid, addr, p[off + 1 : off + 1 + n])  # no status: errors are silent
            return []
        if inst in (D.INST_SYNC_READ, D.INST_FAST_SYNC_READ):
            addr, n = p[0] | p[1] << 8, p[2] | p[3] << 8
            # the servos sample the robot at one instant
            sample = (self.plant.measured(), self.plant.effort() if self.torque_constants else None)
            read = [
                (sid, D.ERR_CRC, b"") if self._is_damaged(sid) else (sid, *self._read(sid, addr, n, sample))
                for sid in p[4:]
                if sid in self.servos
            ]
            if inst == D.INST_SYNC_READ:
                return [self._status(sid, err, data if not err else bytes(n)) for sid, err, data in read]
            # Fast Sync Read: a servo asked for that is missing breaks the chain, and no packet is sent
            if len(read) < len(p) - 4 or not read:
                return []
            return [D.fast_status([(sid, self._error(sid, err), data if not err else bytes(n))
                                   for sid, err, data in read])]  # fmt: skip
        if pkt.id == D.BROADCAST:
            if inst == D.INST_PING:
                return [self._ping(sid) for sid in sorted(self.servos)]
            if inst == D.INST_WRITE and len(p) > 2:
                for sid in self.servos:
                    self._write(sid, p[0] | p[1] << 8, p[2:])
            return []  # broadcast instructions other than PING get no status
        if pkt.id not in self.servos:
            return []
        if self._is_damaged(pkt.id):
            return [self._status(pkt.id, D.ERR_CRC)]
        if inst == D.INST_PING:
            return [self._ping(pkt.id)]
        if inst == D.INST_READ and len(p) == 4:
            err, data = self._read(pkt.id, p[0] | p[1] << 8, p[2] | p[3] << 8)
            return [self._status(pkt.id, err, data)]
        if inst == D.INST_WRITE and len(p) > 2:
            return [self._status(pkt.id, self._write(pkt.id, p[0] | p[1] << 8, p[2:]))]
        if inst in (D.INST_READ, D.INST_WRITE):
            return [self._status(pkt.id, D.ERR_DATA_LENGTH)]
        return [self._status(pkt.id, D.ERR_INSTRUCTION)]

    @contextmanager
    def _at(self, t: float) -> Iterator[None]:
        """Every drive's physics held at time t while one transmission is handled (PwmDrive.at)."""
        with ExitStack() as stack:
            for drive in self.drives.values():
                stack.enter_context(drive.at(t))
            yield

    def _loop(self) -> None:
        while not self._stop.is_set():
            data = self._recv(0.05)
            if data:
                with self._at(time.monotonic()):
                    self._serve(data)

    def _serve(self, data: bytes) -> None:
        """Answer the packets in `data`."""
        for pkt in self.parser.feed(data):
            self.packets += 1
            if self.drop_every and self.packets % self.drop_every == 0:
                continue
            with_addr = pkt.instruction != D.INST_PING and len(pkt.params) >= 2
            self.served[pkt.instruction, pkt.params[0] | pkt.params[1] << 8 if with_addr else None] += 1
            replies = self._handle(pkt)
            if pkt.id == D.BROADCAST and pkt.instruction == D.INST_PING:
                for rep in replies:  # each servo answers after its own delay, one after another
                    time.sleep(STAGGER_S)
                    self._send(rep)
            elif replies:
                self._send(b"".join(replies))
