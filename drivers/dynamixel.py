"""Robot link over a Dynamixel Protocol 2.0 bus through the official dynamixel_sdk.

Sync write of goal positions, sync read of present current, velocity and position (one block, addresses 126–135,
so each tick's currents come with its angles at no extra packet), torque enable per servo; joint angles map
to ticks through the config's joint<->servo table (id, zero offset, direction, ticks per radian). Every
status packet's error byte is checked: an error number raises DeviceError naming the servo, the instruction
and the error; the alert bit makes the driver read Hardware Error Status and name its bits.

Position P Gain (XM430 control table, RAM, address 84, 2 bytes, 0 … 16383, factory default 800): with
`position_p_gain` the link writes it to every servo on connect, before torque comes on, and reads it back; the
servos' Position D Gain (80) and I Gain (82) are left as they are. `read_position_gains` reads all three from
every servo (what a run records: the gains the servos actually ran).

On connect (ROBOTIS e-Manual, X-series): every servo must be in Position Control Mode (Operating Mode 11 = 3), the
only mode whose Goal Position is bounded by Min/Max Position Limit (48/52) — current, velocity and PWM modes
ignore Goal Position; extended and current-based position modes do not use the limit registers — and must sit
inside those limits. The model number each servo answers PING with is recorded with its Velocity Limit (44), and
a configured `current_unit_ma` other than the model's Present Current unit is a warning (XL430/XC430/2XL430/2XC430
and the MX-28(2.0) hold Present Load at 126, not a current: their currents read NaN; the XC330 measures its current
at the power input, not in the motor phases, per its e-Manual); a model not in `MODELS` is
warned about once (its unit is not checked: the configured one is used). A status with error number 3 (CRC Error:
the servo got a damaged instruction and did not act on it) is retried like silence and counted in `comm_errors`; a
servo that answers every PING so is named as such (cabling or noise), not as silent. Warnings go to stderr, one
line each, and stay in `warnings` (a run records them with `servo_info`).
"""

from __future__ import annotations

import math
import numbers
import os
import re
import sys
import time

import numpy as np
from dynamixel_sdk import (
    BROADCAST_ID,
    COMM_RX_CORRUPT,
    COMM_SUCCESS,
    GroupSyncRead,
    GroupSyncWrite,
    PacketHandler,
    PortHandler,
)

from drivers import dxl_protocol as D
from drivers.config import ServoMap
from drivers.link import LinkTimeout
from formats.errors import DeviceError

ADDR_TORQUE_ENABLE = 64
ADDR_GOAL_POSITION = 116
ADDR_PRESENT_POSITION = 132
ADDR_PRESENT_CURRENT = 126  # 2 bytes, signed; then Present Velocity (128, 4) and Present Position (132, 4)
PRESENT_BLOCK = ADDR_PRESENT_POSITION + 4 - ADDR_PRESENT_CURRENT
ADDR_HARDWARE_ERROR = 70
ADDR_OPERATING_MODE, ADDR_MAX_POSITION_LIMIT, ADDR_MIN_POSITION_LIMIT = 11, 48, 52
ADDR_POSITION_D_GAIN, ADDR_POSITION_I_GAIN, ADDR_POSITION_P_GAIN = 80, 82, 84  # 2 bytes each, RAM
ADDR_DRIVE_MODE, TIME_BASED_PROFILE = 10, 0x04  # EEPROM; bit 2: Profile Velocity (112) is a time in ms
ADDR_PROFILE_ACCELERATION, ADDR_PROFILE_VELOCITY = 108, 112  # 4 bytes each, RAM
POSITION_CONTROL_MODE = 3  # the only mode in which the servo enforces the position limits
OPERATING_MODES = {
    0: "Current Control Mode",
    1: "Velocity Control Mode",
    3: "Position Control Mode",
    4: "Extended Position Control Mode",
    5: "Current-based Position Control Mode",
    16: "PWM Control Mode",
}
ADDR_VELOCITY_LIMIT, VELOCITY_UNIT = 44, 0.229 * 2 * math.pi / 60  # 4 bytes, 0.229 rev/min -> rad/s
# Model Number (PING / address 0) -> (name, mA per Present Current unit; None: address 126 is Present Load),
# each checked against its e-Manual control table (emanual.robotis.com/docs/en/dxl/x/<model>/ or dxl/mx/: model
# number and address 126); a model not listed is recorded without a unit check and warned about once per connect
# (`_read_setup`). The XH540, XD430/XD540, XW430/XW540 and XC330 tables were also checked for the addresses and units
# the link uses, all as on the XM430: Operating Mode 11, Velocity Limit 44 (0.229 rev/min), Min/Max Position Limit
# 48/52 (pulses), Present Current/Velocity/Position 126/128/132, Drive Mode 10, gains 80-84, profile 108/112.
# The XH540-V (24 V) count 2.69 mA, unlike the XH430-V (1.34 mA). The XC330 measure their current at the power input
# (e-Manual note), not the motor's phase current. Left out: the XD430-T350, whose e-Manual table gives 1000 (the
# XH430-W350's number; other model tables list 1001), and the XM335-T323 (table 1710, other tables 1701).
MODELS: dict[int, tuple[str, float | None]] = {
    30: ("MX-28(2.0)", None),
    311: ("MX-64(2.0)", 3.36),
    321: ("MX-106(2.0)", 3.36),
    1000: ("XH430-W350", 2.69),
    1010: ("XH430-W210", 2.69),
    1011: ("XD430-T210", 2.69),
    1020: ("XM430-W350", 2.69),
    1030: ("XM430-W210", 2.69),
    1040: ("XH430-V350", 1.34),
    1050: ("XH430-V210", 1.34),
    1060: ("XL430-W250", None),
    1070: ("XC430-W150", None),
    1080: ("XC430-W240", None),
    1090: ("2XL430-W250", None),
    1100: ("XH540-W270", 2.69),
    1101: ("XD540-T270", 2.69),
    1110: ("XH540-W150", 2.69),
    1111: ("XD540-T150", 2.69),
    1120: ("XM540-W270", 2.69),
    1130: ("XM540-W150", 2.69),
    1140: ("XH540-V270", 2.69),
    1150: ("XH540-V150", 2.69),
    1160: ("2XC430-W250", None),
    1170: ("XW540-T260", 2.69),
    1180: ("XW540-T140", 2.69),
    1190: ("XL330-M077", 1.0),
    1200: ("XL330-M288", 1.0),
    1210: ("XC330-T181", 1.0),
    1220: ("XC330-T288", 1.0),
    1230: ("XC330-M181", 1.0),
    1240: ("XC330-M288", 1.0),
    1270: ("XW430-T333", 2.69),
    1280: ("XW430-T200", 2.69),
    1310: ("XW540-H260", 2.69),
}
USB_SERIAL_SYSFS = "/sys/bus/usb-serial/devices"  # FTDI (U2D2) latency_timer, ms
READ_BLOCK_S = 0.001  # s: longest wait of one serial read inside a status packet (see connect)


class DynamixelLink:
    def __init__(
        self,
        port: str,
        servos: list[ServoMap],
        joint_names: list[str],
        baud: int = 1_000_000,
        retries: int = 4,
        position_p_gain: float | None = None,
        current_unit_ma: float = 2.69,
        goal_profile_ms: int = 0,
    ):
        """`position_p_gain`: the Position P Gain (register 84) to write to every servo on connect; None leaves
        the servos' own. The servo judges its range (an XM430 answers Data Range Error above 16383).
        `current_unit_ma`: mA per Present Current unit (the servo model's e-Manual). `goal_profile_ms` > 0: every
        servo gets a time-based profile on connect (Drive Mode bit 2, Profile Acceleration 0, Profile Velocity this
        many ms): it moves its target to each new goal linearly over that time."""
        if not (isinstance(goal_profile_ms, int) and 0 <= goal_profile_ms <= 32767):
            raise DeviceError(
                f"dxl:{port}: goal profile {goal_profile_ms!r} must be a whole number of ms, 0 … 32767"
            )
        self.goal_profile_ms = goal_profile_ms
        if position_p_gain is not None:
            ok = isinstance(position_p_gain, numbers.Real) and not isinstance(position_p_gain, bool)
            if not (ok and float(position_p_gain).is_integer() and 0 <= position_p_gain <= 0xFFFF):
                raise DeviceError(
                    f"dxl:{port}: Position P Gain {position_p_gain!r} must be a whole number (register "
                    f"{ADDR_POSITION_P_GAIN} holds 2 bytes; an XM430 takes 0 … 16383)"
                )
            position_p_gain = int(position_p_gain)
        self.position_p_gain = position_p_gain
        self.port_name = port
        self.servos = servos
        self.joint_names = list(joint_names)
        self.baud = baud
        self.retries = retries
        self.port: PortHandler | None = None
        self.packet = PacketHandler(2.0)
        self._last = None
        self.comm_errors = 0
        self.position_limits: dict[int, tuple[int, int]] = {}  # servo id -> (min, max) ticks
        self.current_unit_a = current_unit_ma * 1e-3
        self.current_units_a = np.full(len(servos), self.current_unit_a)  # per servo; NaN: no Present Current
        self.fast_sync_read = False  # every servo answers FAST SYNC READ (found on connect)
        self.currents: np.ndarray | None = None  # A, joint side (servo direction applied), at the last read
        self.model_numbers: dict[int, int] = {}  # servo id -> model number it answered PING with
        # joint -> what its servo reported on connect (see `_read_setup`)
        self.servo_info: dict[str, dict] = {}
        self.warnings: list[str] = []  # the connect's warnings (also printed to stderr)

    def connect(self) -> None:
        port = PortHandler(self.port_name)
        try:
            ok = port.openPort()
        except Exception as exc:  # the sdk raises serial.SerialException / OSError
            raise DeviceError(f"dxl:{self.port_name}: cannot open port ({exc})") from exc
        if not ok or not port.setBaudRate(self.baud):
            raise DeviceError(f"dxl:{self.port_name}: cannot set baud rate {self.baud}")
        # the sdk opens the port non-blocking and polls it until a status packet is complete: a core spent
        # spinning per bus. A short blocking read returns as soon as the bytes asked for have arrived and leaves
        # the sdk's own packet timeout in charge.
        port.ser.timeout = READ_BLOCK_S
        self.port = port
        self.warnings = []
        try:
            self._ping_all()
            self._read_setup()
            latency = latency_timer_warning(self.port_name)
            if latency:
                self._warn(latency)
            if self.position_p_gain is not None:  # before torque on: the servos hold with the gain asked for
                self._write_position_p_gain(self.position_p_gain)
            if self.goal_profile_ms:
                self._set_time_profile(self.goal_profile_ms)
            self._reader = GroupSyncRead(port, self.packet, ADDR_PRESENT_CURRENT, PRESENT_BLOCK)
            for s in self.servos:
                self._reader.addParam(s.id)
            self.fast_sync_read = self._detect_fast_sync_read()
            self._writer = GroupSyncWrite(port, self.packet, ADDR_GOAL_POSITION, 4)
            q = self.read()
            self._check_inside_limits(q)
            self._send_goal(q)  # goal = where we are, before torque comes on
            self._torque(True)
        except DeviceError:
            self.close()
            raise

    def _ping_all(self) -> None:
        """PING every servo (retried); its model number is kept. Refused: servos that never answered (baud rate,
        id, power) and servos that answered only with error 3 (a damaged instruction: cabling or noise)."""
        missing, damaged = [], []
        for s in self.servos:
            crc = 0
            for _ in range(self.retries + 1):
                model, res, err = self.packet.ping(self.port, s.id)
                if res == COMM_SUCCESS and not damaged_instruction(err):
                    self._check(s.id, "PING", err)
                    self.model_numbers[s.id] = int(model)
                    break
                crc += int(res == COMM_SUCCESS)
                self.comm_errors += int(res == COMM_SUCCESS)  # error 3 counted; a silent servo: missing
            else:
                (damaged if crc else missing).append((s.id, crc))
        problems = []
        if damaged:
            tries = self.retries + 1
            problems.append(
                f"servos {[sid for sid, _ in damaged]} answered PING only with status error 3 (CRC Error: the "
                f"servo received a damaged instruction; {', '.join(f'{n} of {tries}' for _, n in damaged)} tries) — "
                "check the cabling, connectors and noise on the bus, not the baud rate"
            )
        if missing:
            problems.append(f"servos {[sid for sid, _ in missing]} do not answer ping at {self.baud} baud")
        if problems:
            raise DeviceError(f"dxl:{self.port_name}: " + "; ".join(problems))

    def _read(self, sid: int, addr: int, size: int, what: str) -> int:
        """READ one item (unsigned), retried while the servo is silent or the status carries another length (a
        late status of an earlier request, e.g. a ping answered after its timeout); its error byte is checked."""
        for _ in range(self.retries + 1):
            data, res, err = self.packet.readTxRx(self.port, sid, addr, size)
            if res == COMM_SUCCESS and len(data) == size and not damaged_instruction(err):
                self._check(sid, f"READ {what} (address {addr})", err)
                return int.from_bytes(bytes(data), "little")
            self.comm_errors += 1
        raise LinkTimeout(f"dxl:{self.port_name}: servo {sid} did not answer READ {what} (address {addr})")

    def _write(self, sid: int, addr: int, size: int, value: int, what: str) -> None:
        """WRITE one item, retried while the servo is silent; its status error byte is checked."""
        ph = self.packet
        fn = {1: ph.write1ByteTxRx, 2: ph.write2ByteTxRx, 4: ph.write4ByteTxRx}[size]
        instruction = f"WRITE {what} = {value} (address {addr})"
        for _ in range(self.retries + 1):
            res, err = fn(self.port, sid, addr, value & ((1 << 8 * size) - 1))  # two's complement
            if res == COMM_SUCCESS and not damaged_instruction(err):
                self._check(sid, instruction, err)
                return
            self.comm_errors += 1
        raise LinkTimeout(f"dxl:{self.port_name}: servo {sid} did not acknowledge {instruction}")

    def _write_position_p_gain(self, gain: int) -> None:
        """Position P Gain to every servo (D and I untouched), then read back: a servo holding anything else
        (a write lost without an error, another model's table) is an error before torque comes on."""
        for s in self.servos:
            self._write(s.id, ADDR_POSITION_P_GAIN, 2, gain, "Position P Gain")
        for s in self.servos:
            got = self._read(s.id, ADDR_POSITION_P_GAIN, 2, "Position P Gain")
            if got != gain:
                raise DeviceError(
                    f"dxl:{self.port_name}: servo {s.id} ({s.name}) holds Position P Gain {got} after "
                    f"{gain} was written (address {ADDR_POSITION_P_GAIN})"
                )

    def _set_time_profile(self, ms: int) -> None:
        """Time-based profile on every servo: Drive Mode bit 2 (EEPROM: written only with torque off, never turned
        off here — an arm would fall), Profile Acceleration 0 (a linear move), Profile Velocity `ms`, read back."""
        for s in self.servos:
            mode = self._read(s.id, ADDR_DRIVE_MODE, 1, "Drive Mode")
            if not mode & TIME_BASED_PROFILE:
                if self._read(s.id, ADDR_TORQUE_ENABLE, 1, "Torque Enable"):
                    raise DeviceError(
                        f"dxl:{self.port_name}: servo {s.id} ({s.name}) has torque on, so its Drive Mode (address "
                        f"{ADDR_DRIVE_MODE}, EEPROM) cannot take the time-based profile: turn its torque off first"
                    )
                self._write(s.id, ADDR_DRIVE_MODE, 1, mode | TIME_BASED_PROFILE, "Drive Mode")
            self._write(s.id, ADDR_PROFILE_ACCELERATION, 4, 0, "Profile Acceleration")
            self._write(s.id, ADDR_PROFILE_VELOCITY, 4, ms, "Profile Velocity")
            got = self._read(s.id, ADDR_PROFILE_VELOCITY, 4, "Profile Velocity")
            if got != ms:
                raise DeviceError(
                    f"dxl:{self.port_name}: servo {s.id} ({s.name}) holds Profile Velocity {got} after {ms} was "
                    f"written (address {ADDR_PROFILE_VELOCITY})"
                )

    def read_position_gains(self) -> dict[str, dict[str, int]]:
        """The position-loop gains present on each servo (Dynamixel units), by joint name:
        {"p": Position P Gain (84), "i": Position I Gain (82), "d": Position D Gain (80)}."""
        out = {}
        for s in self.servos:
            out[s.name] = {
                k: self._read(s.id, addr, 2, f"Position {k.upper()} Gain")
                for k, addr in (
                    ("p", ADDR_POSITION_P_GAIN), ("i", ADDR_POSITION_I_GAIN), ("d", ADDR_POSITION_D_GAIN)
                )
            }  # fmt: skip
        return out

    def _read_setup(self) -> None:
        """Each servo's Operating Mode (refused unless Position Control Mode), Min/Max Position Limit (a goal outside
        them would be dropped by the servo without a word — sync write has no status — so `_send_goal` refuses it
        first) and Velocity Limit; its model (from PING) against the configured current unit."""
        self.position_limits, self.servo_info = {}, {}
        units, unknown = [], {}
        for s in self.servos:
            mode = self._read(s.id, ADDR_OPERATING_MODE, 1, "operating mode")
            if mode != POSITION_CONTROL_MODE:
                name = OPERATING_MODES.get(mode, "an unknown mode")
                why = (
                    "it does not use its Min/Max Position Limit (48/52) there"
                    if mode in (4, 5)
                    else "it ignores Goal Position there"
                )
                raise DeviceError(
                    f"dxl:{self.port_name}: servo {s.id} ({s.name}) is in Operating Mode {mode} ({name}): poise "
                    f"needs Position Control Mode (3) — {why}; set address 11 to 3 (torque off) and connect again"
                )
            hi = self._read(s.id, ADDR_MAX_POSITION_LIMIT, 4, "max position limit")
            lo = self._read(s.id, ADDR_MIN_POSITION_LIMIT, 4, "min position limit")
            self.position_limits[s.id] = (lo, hi)
            vlim = self._read(s.id, ADDR_VELOCITY_LIMIT, 4, "velocity limit")
            model = self.model_numbers.get(s.id)
            name, unit_ma = MODELS.get(model, (None, None))
            units.append(self._current_unit_check(s, model, name, unit_ma))
            if name is None:
                unknown.setdefault(model, []).append(f"{s.id} ({s.name})")
            self.servo_info[s.name] = {
                "id": s.id,
                "model_number": model,
                "model": name,
                "operating_mode": mode,
                "position_limits_ticks": [lo, hi],
                "velocity_limit_rad_s": vlim * VELOCITY_UNIT,
                "velocity_limit_raw": vlim,
                "current_unit_ma": None if math.isnan(units[-1]) else units[-1] * 1e3,
            }
        self.current_units_a = np.array(units)
        for model, which in unknown.items():  # one line per unknown model, whatever the number of its servos
            self._warn(
                f"dxl:{self.port_name}: servo{'s' if len(which) > 1 else ''} {', '.join(which)}: model {model} is "
                f"not known to poise, so its Present Current unit was not checked; the configured "
                f"current_unit_ma {self.current_unit_a * 1e3:g} mA is used"
            )

    def _current_unit_check(
        self, s: ServoMap, model: int | None, name: str | None, unit_ma: float | None
    ) -> float:
        """A per Present Current unit the link reads this servo with: the configured unit, warned about when the
        model's e-Manual gives another; NaN for a model without Present Current (refused if its joint has a torque
        constant: its efforts would come from a load percentage)."""
        article = "a" if (name or "x")[0].isdigit() else "an"  # a 2XL430-W250, an XL430-W250
        where = f"dxl:{self.port_name}: servo {s.id} ({s.name}) is {article} {name} (model {model})"
        if name is not None and unit_ma is None:
            if s.torque_constant is not None:
                raise DeviceError(
                    f"{where}: it has no Present Current (address 126 is Present Load), so its "
                    f"torque_constant cannot turn currents into efforts; remove torque_constant for {s.name}"
                )
            self._warn(
                f"{where}: it has no Present Current (address 126 is Present Load): its currents read NaN"
            )
            return math.nan
        configured = self.current_unit_a * 1e3
        if name is not None and not math.isclose(unit_ma, configured, rel_tol=1e-6):
            self._warn(
                f"{where}, whose Present Current unit is {unit_ma:g} mA, but [link] current_unit_ma is "
                f"{configured:g}: its currents are off by a factor {configured / unit_ma:.3g}"
            )
        return self.current_unit_a

    def _warn(self, text: str) -> None:
        """A connect warning: kept in `warnings` and printed to stderr, one line."""
        self.warnings.append(text)
        print(f"warning: {text}", file=sys.stderr, flush=True)

    def _check_inside_limits(self, q: np.ndarray) -> None:
        """Refuse to connect a robot sitting outside a servo's position limits: its hold goal (where it is) would be
        dropped by the servo, and torque would come on towards its last goal."""
        for s, v in zip(self.servos, q, strict=True):
            ticks = s.to_ticks(float(v))
            lo, hi = self.position_limits[s.id]
            if not lo <= ticks <= hi:
                raise DeviceError(
                    f"dxl:{self.port_name}: servo {s.id} ({s.name}) is at {ticks} ticks, outside its position limits "
                    f"[{lo}, {hi}]; move it inside before connecting"
                )

    def outside_limits(self, goals: np.ndarray) -> tuple[int, int, float, float] | None:
        """The first goal the servos' position limits (read on connect) would refuse, checked before anything is
        sent: (row of `goals` (n, nq) rad, joint index, limit low, limit high in rad), or None."""
        g = np.atleast_2d(np.asarray(goals, dtype=float))
        first = None
        for j, s in enumerate(self.servos):
            if s.id not in self.position_limits:
                continue
            lo, hi = self.position_limits[s.id]
            ticks = np.rint(s.zero + s.direction * s.ticks_per_rad * g[:, j])
            bad = np.flatnonzero((ticks < lo) | (ticks > hi))
            if bad.size and (first is None or bad[0] < first[0]):
                a, b = sorted((s.to_rad(lo), s.to_rad(hi)))
                first = (int(bad[0]), j, a, b)
        return first

    def _check(self, sid: int, instruction: str, err: int) -> None:
        """Raise DeviceError for a status packet's error byte (0 = fine)."""
        if not err:
            return
        problems = [D.error_name(err)] if err & 0x7F else []
        if err & D.ERR_ALERT:
            bits, res, _ = self.packet.read1ByteTxRx(self.port, sid, ADDR_HARDWARE_ERROR)
            what = ", ".join(D.hardware_error_names(bits)) if res == COMM_SUCCESS else "unreadable"
            problems.append(f"hardware error alert: {what} (the servo turns its torque off; reboot it)")
        raise DeviceError(
            f"dxl:{self.port_name}: servo {sid} answered {instruction} with {'; '.join(problems)}"
        )

    def _torque(self, on: bool) -> None:
        for s in self.servos:
            self._write(s.id, ADDR_TORQUE_ENABLE, 1, int(on), "torque enable")

    def read(self) -> np.ndarray:
        """Present positions (rad); the currents read with them are kept in `currents`."""
        for _ in range(self.retries + 1):
            res, blocks = self._sync_read()
            if res == COMM_SUCCESS:
                ticks = [int.from_bytes(b[6:10], "little", signed=True) for b in blocks]
                raw = [int.from_bytes(b[0:2], "little", signed=True) for b in blocks]
                q = np.array([s.to_rad(t) for s, t in zip(self.servos, ticks, strict=True)])
                self.currents = (
                    np.array([s.direction * r for s, r in zip(self.servos, raw, strict=True)])
                    * self.current_units_a
                )
                self._last = q
                return q
            self.comm_errors += 1
            time.sleep(0.002)
        raise LinkTimeout(
            f"dxl:{self.port_name}: sync read of present positions failed ({self.packet.getTxRxResult(res)})"
        )

    def _sync_read(self) -> tuple[int, list[bytes]]:
        """One SYNC READ of the present block (current, velocity, position) through the sdk — FAST SYNC READ when
        the servos answered it on connect — keeping each servo's error byte (the sdk's group reads drop it)."""
        if self.fast_sync_read:
            res, got = self._fast_sync_read()
        else:
            res, got = self._plain_sync_read()
        if res != COMM_SUCCESS:
            return res, []
        if any(damaged_instruction(err) for _, err, _ in got):  # a damaged instruction: read again
            return COMM_RX_CORRUPT, []
        for sid, err, _ in got:
            if err:
                self._check(
                    sid, f"SYNC READ present current/velocity/position (address {ADDR_PRESENT_CURRENT})", err
                )
        return COMM_SUCCESS, [data for _, _, data in got]

    def _plain_sync_read(self) -> tuple[int, list[tuple[int, int, bytes]]]:
        """SYNC READ: one status packet per servo. (result, [(id, error, data)] in the servos' order)."""
        res = self._reader.txPacket()
        if res != COMM_SUCCESS:
            return res, []
        got = []
        for s in self.servos:
            data, res, err = self.packet.readRx(self.port, s.id, PRESENT_BLOCK)
            if res != COMM_SUCCESS:
                return res, []
            if len(data) != PRESENT_BLOCK:  # a late status of an earlier request: read again
                return COMM_RX_CORRUPT, []
            got.append((s.id, err, bytes(data)))
        return COMM_SUCCESS, got

    def _fast_sync_read(self) -> tuple[int, list[tuple[int, int, bytes]]]:
        """FAST SYNC READ (0x8A, X-series firmware 45+): one status packet, each servo's part error, ID, data and a
        CRC (the last part's is the packet's, which the sdk checks). (result, [(id, error, data)])."""
        res = self._reader.fastSyncReadTxPacket()
        if res != COMM_SUCCESS:
            return res, []
        part = PRESENT_BLOCK + 4
        raw, res, _ = self.packet.fastSyncReadRx(self.port, BROADCAST_ID, part * len(self.servos))
        if res != COMM_SUCCESS:
            return res, []
        if len(raw) != part * len(self.servos):
            return COMM_RX_CORRUPT, []
        got = []
        for i, s in enumerate(self.servos):
            err, sid = raw[i * part], raw[i * part + 1]
            if sid != s.id:  # another servo's part, or another packet
                return COMM_RX_CORRUPT, []
            got.append((sid, err, bytes(raw[i * part + 2 : i * part + 2 + PRESENT_BLOCK])))
        return COMM_SUCCESS, got

    def _detect_fast_sync_read(self) -> bool:
        """Whether every servo answers FAST SYNC READ (firmware 45 and later); older ones stay silent or answer
        another way, and the link then reads with SYNC READ (one status packet per servo)."""
        for _ in range(2):
            res, _ = self._fast_sync_read()
            if res == COMM_SUCCESS:
                return True
            time.sleep(0.01)
            self.port.clearPort()  # what an older servo may have answered
        return False

    def _send_goal(self, q: np.ndarray) -> None:
        self._writer.clearParam()
        for s, v in zip(self.servos, q, strict=True):
            ticks = s.to_ticks(float(v))
            lo, hi = self.position_limits.get(s.id, (-(1 << 31), (1 << 31) - 1))
            if not lo <= ticks <= hi:
                raise DeviceError(
                    f"dxl:{self.port_name}: goal {float(v):.4f} rad for {s.name} is {ticks} ticks, outside "
                    f"servo {s.id}'s position limits [{lo}, {hi}] (the servo would ignore it silently)"
                )
            self._writer.addParam(s.id, (ticks & 0xFFFFFFFF).to_bytes(4, "little"))
        res = self._writer.txPacket()
        if res != COMM_SUCCESS:
            raise DeviceError(f"dxl:{self.port_name}: sync write failed ({self.packet.getTxRxResult(res)})")

    def command(self, q: np.ndarray) -> np.ndarray:
        self._send_goal(np.asarray(q, dtype=float))
        return self.read()

    def stop(self) -> None:
        """Hold: goal = the present position (torque stays on so the robot does not collapse)."""
        if self.port is None:
            return
        try:
            self._send_goal(self.read())
        except DeviceError:
            pass

    def close(self) -> None:
        if self.port is not None:
            self.port.closePort()
            self.port = None


def damaged_instruction(err: int) -> bool:
    """A status saying error number 3 (CRC Error): the servo received a damaged instruction and did nothing; the
    instruction is sent again like one left unanswered. With the alert bit it stays an error (`_check`)."""
    return err == D.ERR_CRC


def latency_timer_warning(port: str, sysfs: str = USB_SERIAL_SYSFS) -> str | None:
    """For a /dev/ttyUSBn port (symlinks followed) whose USB serial adapter's latency timer is above 1 ms (FTDI and
    so the U2D2 default to 16): a one-line warning with the command that sets it to 1 ms, else None."""
    dev = os.path.basename(os.path.realpath(port)) if port.startswith("/dev/") else ""
    if not re.fullmatch(r"ttyUSB\d+", dev):
        return None
    path = os.path.join(sysfs, dev, "latency_timer")
    try:
        with open(path, encoding="ascii") as f:
            ms = int(f.read().strip())
    except (OSError, ValueError):
        return None
    if ms <= 1:
        return None
    return (
        f"dxl:{port}: the USB serial latency timer of {dev} is {ms} ms, so every sync read waits about that long "
        f"(a 100 Hz run cannot keep up); set it to 1 ms: echo 1 | sudo tee {path}"
    )
