"""One Dynamixel X-series servo in PWM control mode (Protocol 2.0 through dynamixel_sdk), on a connected
`DynamixelLink` whose other servos keep holding their positions.

Control table (ROBOTIS e-Manual, X-series): Operating Mode (11) = 16 for PWM control, writable only while
Torque Enable (64) = 0; PWM Limit (36, 0…885); Goal PWM (100, 2 bytes signed, −PWM Limit … PWM Limit,
885 = 100 %, 0.113 % per unit); Present PWM (124, 2), Present Current (126, 2, in the
link's `[link] current_unit_ma`; NaN on a model without it), Present Velocity
(128, 4, 0.229 rpm), Present Position (132, 4, ticks) — read in one SYNC READ of the 16 bytes from Realtime
Tick (120, 2, ms, wraps at 32767), which stamps each sample with the servo's own clock (the host's clock
jitters with its load; the servo's does not).
Goal PWM goes out by SYNC WRITE (no status packet: the value is checked against PWM Limit before sending).
`exchange` hands the SYNC WRITE and the SYNC READ to the port in one write, so they reach the servo back to
back: the read's Realtime Tick is then also when the Goal PWM took effect (less the SYNC READ's 15 bytes on the
wire: 0.15 ms at 1 Mbps, 2.6 ms at 57 600 baud), however late the host is. A host descheduled between two
separate writes left the servo on the new PWM for an unknown time before the read that reported it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from dynamixel_sdk import COMM_SUCCESS, GroupSyncRead, GroupSyncWrite, PortHandler

from drivers.config import ServoMap
from drivers.dynamixel import (
    ADDR_OPERATING_MODE,
    ADDR_TORQUE_ENABLE,
    VELOCITY_UNIT,
    DynamixelLink,
    damaged_instruction,
)
from drivers.link import LinkTimeout
from formats.errors import DeviceError

ADDR_PWM_LIMIT, ADDR_GOAL_PWM, ADDR_REALTIME_TICK = 36, 100, 120
PWM_CONTROL_MODE = 16
PWM_FULL_SCALE = 885  # Goal PWM units at 100 %
STATE_BYTES = 16  # Realtime Tick, Moving, Moving Status, Present PWM, Current, Velocity, Position
TICK_WRAP = 32768  # Realtime Tick counts 0 … 32767 ms


def pct_to_units(pct: float) -> int:
    """% of full scale → Goal PWM units (885 = 100 %)."""
    return int(round(pct * PWM_FULL_SCALE / 100.0))


def units_to_pct(units: int) -> float:
    return units * 100.0 / PWM_FULL_SCALE


@contextmanager
def one_write(port: PortHandler) -> Iterator[None]:
    """The packets the SDK sends inside go to the port in one write at the end: back to back on the bus."""
    held: list[bytes] = []

    def hold(packet: list[int]) -> int:
        held.append(bytes(packet))
        return len(packet)

    port.writePort = hold  # the instance's own writePort, for the duration only
    try:
        yield
    finally:
        del port.writePort
    data = b"".join(held)
    if data and port.writePort(data) != len(data):
        raise LinkTimeout(f"{port.getPortName()}: {len(data)} bytes not written in one piece")


@dataclass(frozen=True)
class PwmState:
    """One SYNC READ, joint side: t [s, the servo's Realtime Tick, unwrapped from the first read], q [rad],
    ω [rad/s] (Present Velocity), PWM [%], current [A]; host [s, monotonic, the middle of the exchange]."""

    t: float
    q: float
    qd: float
    pwm_pct: float
    current_a: float
    host: float


class PwmChannel:
    """Switch a servo to PWM mode, stream Goal PWM, read its state, and put it back (Goal PWM 0, torque off,
    the original operating mode)."""

    def __init__(self, link: DynamixelLink, servo: ServoMap) -> None:
        if link.port is None:
            raise DeviceError("PWM channel: the Dynamixel link is not connected")
        self.link, self.servo = link, servo
        self.where = f"dxl:{link.port_name}: servo {servo.id} ({servo.name})"
        k = next(i for i, s in enumerate(link.servos) if s.id == servo.id)
        # A per Present Current unit, as the link reads it (NaN: a model without Present Current)
        self.current_unit_a = float(link.current_units_a[k])
        self.original_mode = link._read(servo.id, ADDR_OPERATING_MODE, 1, "operating mode")
        self.pwm_limit = self._read2(ADDR_PWM_LIMIT, "PWM limit")
        self._writer = GroupSyncWrite(link.port, link.packet, ADDR_GOAL_PWM, 2)
        self._reader = GroupSyncRead(link.port, link.packet, ADDR_REALTIME_TICK, STATE_BYTES)
        self._reader.addParam(servo.id)
        self.active = False
        self._tick: int | None = None
        self._ms = 0

    @property
    def limit_pct(self) -> float:
        return units_to_pct(self.pwm_limit)

    def _read2(self, addr: int, what: str) -> int:
        return self.link._read(self.servo.id, addr, 2, what)

    def _write(self, addr: int, size: int, value: int, what: str) -> None:
        self.link._write(self.servo.id, addr, size, value, what)

    def enter(self) -> None:
        """Torque off → Operating Mode 16 → Goal PWM 0 → torque on."""
        self._write(ADDR_TORQUE_ENABLE, 1, 0, "torque enable")
        self.active = True  # from here on `leave` must restore the mode
        self._write(ADDR_OPERATING_MODE, 1, PWM_CONTROL_MODE, "operating mode")
        self._write(ADDR_GOAL_PWM, 2, 0, "goal PWM")
        self._write(ADDR_TORQUE_ENABLE, 1, 1, "torque enable")

    def exchange(self, pct: float) -> PwmState | None:
        """SYNC WRITE Goal PWM [%] and SYNC READ Realtime Tick … Present Position in one transmission (module
        docstring); None when the servo did not answer."""
        t0 = time.monotonic()
        with one_write(self.link.port):
            self.send(pct)
            sent = self._reader.txPacket() == COMM_SUCCESS
        return self._receive(t0) if sent else self._silent()

    def send(self, pct: float) -> int:
        """SYNC WRITE Goal PWM for a joint-side PWM [%]; returns the device units sent."""
        units = self.servo.direction * pct_to_units(pct)
        if abs(units) > self.pwm_limit:
            raise DeviceError(
                f"{self.where}: goal PWM {pct:.2f} % is {units} units, beyond its PWM Limit (36) of "
                f"{self.pwm_limit} (the servo would drop it silently)"
            )
        self._writer.clearParam()
        self._writer.addParam(self.servo.id, (units & 0xFFFF).to_bytes(2, "little"))
        res = self._writer.txPacket()
        if res != COMM_SUCCESS:
            raise LinkTimeout(
                f"{self.where}: sync write of goal PWM failed ({self.link.packet.getTxRxResult(res)})"
            )
        return units

    def _silent(self) -> None:
        """A missed answer: counted on the link."""
        self.link.comm_errors += 1
        return None

    def _receive(self, t0: float) -> PwmState | None:
        """The SYNC READ's status packet, decoded (None when none came); t0: host time it was sent."""
        lk = self.link
        data, res, err = lk.packet.readRx(lk.port, self.servo.id, STATE_BYTES)
        t1 = time.monotonic()
        if res != COMM_SUCCESS or damaged_instruction(err):  # error 3: the servo got a damaged instruction
            return self._silent()
        lk._check(
            self.servo.id, f"SYNC READ realtime tick…present position (address {ADDR_REALTIME_TICK})", err
        )
        b = bytes(data)
        tick = int.from_bytes(b[0:2], "little")
        pwm = int.from_bytes(b[4:6], "little", signed=True)
        cur = int.from_bytes(b[6:8], "little", signed=True)
        vel = int.from_bytes(b[8:12], "little", signed=True)
        pos = int.from_bytes(b[12:16], "little", signed=True)
        if self._tick is not None:
            self._ms += (tick - self._tick) % TICK_WRAP
        self._tick = tick
        d = self.servo.direction
        return PwmState(
            self._ms / 1000.0,
            self.servo.to_rad(pos),
            d * vel * VELOCITY_UNIT,
            d * units_to_pct(pwm),
            d * cur * self.current_unit_a,
            (t0 + t1) / 2,
        )

    def leave(self) -> list[str]:
        """Goal PWM 0, torque off, the original operating mode; every step tried, failures returned."""
        failed = []
        if not self.active:
            return failed
        for addr, size, value, what in (
            (ADDR_GOAL_PWM, 2, 0, "goal PWM"),
            (ADDR_TORQUE_ENABLE, 1, 0, "torque enable"),
            (ADDR_OPERATING_MODE, 1, self.original_mode, "operating mode"),
        ):
            try:
                self._write(addr, size, value, what)
            except DeviceError as exc:
                failed.append(str(exc))
        self.active = bool(failed)
        return failed
