"""Robot link over a Dynamixel Protocol 2.0 bus through the official dynamixel_sdk.

Sync write of goal positions, sync read of present positions, torque enable per servo; joint angles map
to ticks through the config's joint<->servo table (id, zero offset, direction, ticks per radian).
"""

from __future__ import annotations

import time

import numpy as np
from dynamixel_sdk import COMM_SUCCESS, GroupSyncRead, GroupSyncWrite, PacketHandler, PortHandler

from drivers.config import ServoMap
from drivers.link import LinkTimeout
from formats.errors import DeviceError

ADDR_TORQUE_ENABLE = 64
ADDR_GOAL_POSITION = 116
ADDR_PRESENT_POSITION = 132


class DynamixelLink:
    def __init__(
        self,
        port: str,
        servos: list[ServoMap],
        joint_names: list[str],
        baud: int = 1_000_000,
        retries: int = 4,
    ):
        self.port_name = port
        self.servos = servos
        self.joint_names = list(joint_names)
        self.baud = baud
        self.retries = retries
        self.port: PortHandler | None = None
        self.packet = PacketHandler(2.0)
        self._last = None
        self.comm_errors = 0

    def connect(self) -> None:
        port = PortHandler(self.port_name)
        try:
            ok = port.openPort()
        except Exception as exc:  # the sdk raises serial.SerialException / OSError
            raise DeviceError(f"dxl:{self.port_name}: cannot open port ({exc})") from exc
        if not ok or not port.setBaudRate(self.baud):
            raise DeviceError(f"dxl:{self.port_name}: cannot set baud rate {self.baud}")
        self.port = port
        missing = []
        for s in self.servos:
            for _ in range(self.retries + 1):
                _, res, _ = self.packet.ping(port, s.id)
                if res == COMM_SUCCESS:
                    break
            else:
                missing.append(s.id)
        if missing:
            port.closePort()
            self.port = None
            raise DeviceError(
                f"dxl:{self.port_name}: servos {missing} do not answer ping at {self.baud} baud"
            )
        self._reader = GroupSyncRead(port, self.packet, ADDR_PRESENT_POSITION, 4)
        for s in self.servos:
            self._reader.addParam(s.id)
        self._writer = GroupSyncWrite(port, self.packet, ADDR_GOAL_POSITION, 4)
        q = self.read()
        self._send_goal(q)  # goal = where we are, before torque comes on
        self._torque(True)

    def _torque(self, on: bool) -> None:
        for s in self.servos:
            for _ in range(self.retries + 1):
                res, err = self.packet.write1ByteTxRx(self.port, s.id, ADDR_TORQUE_ENABLE, int(on))
                if res == COMM_SUCCESS:
                    break
                self.comm_errors += 1
            else:
                raise LinkTimeout(
                    f"dxl:{self.port_name}: servo {s.id} did not acknowledge torque {'on' if on else 'off'}"
                )

    def read(self) -> np.ndarray:
        for _ in range(self.retries + 1):
            res = self._reader.txRxPacket()
            if res == COMM_SUCCESS:
                q = np.empty(len(self.servos))
                for k, s in enumerate(self.servos):
                    ticks = self._reader.getData(s.id, ADDR_PRESENT_POSITION, 4)
                    if ticks >= 1 << 31:
                        ticks -= 1 << 32
                    q[k] = s.to_rad(ticks)
                self._last = q
                return q
            self.comm_errors += 1
            time.sleep(0.002)
        raise LinkTimeout(
            f"dxl:{self.port_name}: sync read of present positions failed ({self.packet.getTxRxResult(res)})"
        )

    def _send_goal(self, q: np.ndarray) -> None:
        self._writer.clearParam()
        for s, v in zip(self.servos, q, strict=True):
            self._writer.addParam(s.id, (s.to_ticks(float(v)) & 0xFFFFFFFF).to_bytes(4, "little"))
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
