"""The robot-link interface every robot driver implements, and the endpoint-string factory."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from formats.errors import DeviceError


class LinkTimeout(DeviceError):
    """The robot did not answer in time."""


@dataclass
class Silence:
    """How long a robot has left a setpoint unanswered: from the first failed exchange of it, and a timeout only
    once a second exchange failed too. A host that was late (a loaded machine descheduling it) before or during an
    exchange is not a silent robot: counted from the last answer, one lost status after the host had been away
    for `timeout_s` stopped a run ('no answer for 0.62 s' on a test machine with three workers on two cores)."""

    timeout_s: float
    since: float | None = None  # monotonic s the first unanswered exchange began
    misses: int = 0

    def missed(self, asked: float) -> bool:
        """The exchange begun at `asked` (time.monotonic) went unanswered: whether the link has now timed out."""
        if self.since is None:
            self.since = asked
        self.misses += 1
        return self.misses >= 2 and self.seconds >= self.timeout_s

    @property
    def seconds(self) -> float:
        """Seconds since the first unanswered exchange began."""
        return 0.0 if self.since is None else time.monotonic() - self.since


class RobotLink(Protocol):
    """connect, read joint positions, command joint setpoints, stop (hold where you are)."""

    joint_names: list[str]

    def connect(self) -> None: ...

    def read(self) -> np.ndarray:
        """Measured joint positions (rad, model joint order)."""
        ...

    def command(self, q: np.ndarray) -> np.ndarray:
        """Send a joint setpoint (rad); returns the latest measured positions."""
        ...

    def stop(self) -> None:
        """Stop following setpoints and hold the current measured position (torque stays on)."""
        ...

    def close(self) -> None: ...


def open_link(endpoint: str, joint_names: list[str], config) -> RobotLink:
    """'dxl:PORT[?baud=...]' or 'serial:PORT[?baud=...]' -> an unconnected link. A Dynamixel link writes the
    configuration's `[executor] position_p_gain` to every servo's Position P Gain on connect (the framed
    protocol has no such register: its controller's gain is its own)."""
    from drivers.transports import parse_endpoint

    ep = parse_endpoint(endpoint)
    if ep.scheme == "dxl":
        from drivers.config import dxl_baud, servo_order
        from drivers.dynamixel import DynamixelLink

        baud = dxl_baud(ep.options.get("baud", config.baud), f"robot endpoint {endpoint!r}: baud")
        return DynamixelLink(
            ep.target, servo_order(config, joint_names), joint_names, baud=baud,
            position_p_gain=config.executor.position_p_gain, current_unit_ma=config.current_unit_ma,
            goal_profile_ms=int(config.executor.goal_profile_ms),
        )  # fmt: skip
    if ep.scheme == "serial":
        from drivers.framed import FramedLink

        baud = int(ep.options.get("baud", 1_000_000))
        return FramedLink(ep.target, joint_names, baud=baud)
    raise DeviceError(f"unknown robot endpoint {endpoint!r} (use sim, dxl:PORT[?baud=N] or serial:PORT)")


def link_meta(link) -> dict:
    """What a run records about its link, read from the servos themselves: `servo_gains` (joint -> {"p", "i",
    "d"}, Dynamixel units), `position_p_gain` (the P gain they all hold, or null when they differ) and
    `fast_sync_read` (whether each tick reads the bus with one FAST SYNC READ), `servos` (joint -> what each servo
    reported on connect: id, model number and name, operating mode, velocity limit, current unit) and
    `link_warnings` (the connect's warnings, one line each). A link that cannot tell (the framed protocol) records
    nulls."""
    fast = getattr(link, "fast_sync_read", None)
    info = {"servos": getattr(link, "servo_info", None), "link_warnings": getattr(link, "warnings", None)}
    read = getattr(link, "read_position_gains", None)
    if read is None:
        return {"position_p_gain": None, "servo_gains": None, "fast_sync_read": fast} | info
    gains = read()
    ps = {g["p"] for g in gains.values()}
    return {
        "position_p_gain": ps.pop() if len(ps) == 1 else None,
        "servo_gains": gains,
        "fast_sync_read": fast,
    } | info
