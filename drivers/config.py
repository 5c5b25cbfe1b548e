"""Robot configuration (TOML, read with tomllib): joint<->servo map, executor limits, board offsets."""

from __future__ import annotations

import math
import pathlib
import tomllib
from dataclasses import dataclass, field

import numpy as np

from formats.errors import DataError

DEFAULT_CONFIG = pathlib.Path(__file__).with_name("tulip_robot.toml")


@dataclass(frozen=True)
class ServoMap:
    """One joint on one servo: ticks = zero + direction * ticks_per_rad * q."""

    name: str
    id: int
    zero: int = 2048
    direction: int = 1
    ticks_per_rad: float = 4096 / (2 * math.pi)

    def to_ticks(self, q: float) -> int:
        return int(round(self.zero + self.direction * self.ticks_per_rad * q))

    def to_rad(self, ticks: int) -> float:
        return (ticks - self.zero) / (self.direction * self.ticks_per_rad)


@dataclass
class ExecutorSettings:
    rate_hz: float = 100.0  # setpoint streaming rate
    velocity_limit: float = 1.0  # rad/s, any joint
    settle_tol_deg: float = 0.5  # all joints within this of the target ...
    settle_timeout_s: float = 10.0  # ... within this long after the move (robot time)
    track_trip_deg: float = 15.0  # tracking error that trips safety (stop and hold)
    average_fraction: float = 0.5  # average the last half of each hold
    link_timeout_s: float = 0.5  # no answer from the robot for this long -> stop
    min_margin: float = 0.0  # required CoP margin in the balance pre-flight check (m), on top of the plan's
    min_board_coverage: float = 0.5  # fraction of expected board samples in the averaging window


@dataclass
class RobotConfig:
    robot: str = "tulip"
    baud: int = 1_000_000
    servos: list[ServoMap] = field(default_factory=list)
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)
    right_board: np.ndarray = field(
        default_factory=lambda: np.zeros(3)
    )  # board 1 in right-sole frame [m, m, rad]
    left_board: np.ndarray = field(default_factory=lambda: np.zeros(3))  # board 2 in left-sole frame
    placement_offsets: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    source: str = "<defaults>"

    def board_offsets(self, placement: int) -> tuple[np.ndarray, np.ndarray]:
        """Measured board poses for a placement (per-placement entry, else the defaults)."""
        return self.placement_offsets.get(placement, (self.right_board, self.left_board))


def _pose(v, where: str) -> np.ndarray:
    if not isinstance(v, list) or len(v) != 3:
        raise DataError(f"{where}: expected [x_m, y_m, psi_deg]")
    return np.array([float(v[0]), float(v[1]), math.radians(float(v[2]))])


def load_config(path: str | pathlib.Path | None = None) -> RobotConfig:
    """Read a robot TOML file (defaults: the bundled TUlip-on-Dynamixel file)."""
    path = pathlib.Path(path) if path else DEFAULT_CONFIG
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: not valid TOML ({exc})") from None
    cfg = RobotConfig(robot=str(doc.get("robot", "tulip")), source=str(path))
    link = doc.get("link", {})
    cfg.baud = int(link.get("baud", cfg.baud))
    for i, j in enumerate(doc.get("joints", [])):
        try:
            cfg.servos.append(
                ServoMap(
                    str(j["name"]),
                    int(j["id"]),
                    int(j.get("zero", 2048)),
                    int(j.get("direction", 1)),
                    float(j.get("ticks_per_rad", 4096 / (2 * math.pi))),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}: joints[{i}] needs name and id ({exc})") from None
        if cfg.servos[-1].direction not in (1, -1):
            raise DataError(f"{path}: joints[{i}].direction must be 1 or -1")
    ids = [s.id for s in cfg.servos]
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: duplicate servo ids {ids}")
    ex = doc.get("executor", {})
    known = ExecutorSettings.__dataclass_fields__
    unknown = set(ex) - set(known)
    if unknown:
        raise DataError(f"{path}: unknown [executor] keys {sorted(unknown)}")
    cfg.executor = ExecutorSettings(**{k: float(v) for k, v in ex.items()})
    boards = doc.get("boards", {})
    if "right" in boards:
        cfg.right_board = _pose(boards["right"], f"{path}: boards.right")
    if "left" in boards:
        cfg.left_board = _pose(boards["left"], f"{path}: boards.left")
    for k, entry in enumerate(boards.get("placements", [])):
        w = f"{path}: boards.placements[{k}]"
        cfg.placement_offsets[int(entry["index"])] = (_pose(entry["right"], w), _pose(entry["left"], w))
    return cfg


def servo_order(cfg: RobotConfig, joint_names: list[str]) -> list[ServoMap]:
    """The servos in model joint order; DataError if a joint has no servo."""
    by_name = {s.name: s for s in cfg.servos}
    missing = [n for n in joint_names if n not in by_name]
    if missing:
        raise DataError(f"{cfg.source}: no servo mapped for joints {missing}")
    return [by_name[n] for n in joint_names]
