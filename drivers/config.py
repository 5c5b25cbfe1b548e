"""Robot configuration (TOML, read with tomllib): joint<->servo map, executor limits, board offsets.

Every field is checked at this boundary (type, finite, range) and unknown keys are refused, so a typo or a
negative safety setting never reaches the executor; `validate_config` repeats the checks for configurations
built in code.
"""

from __future__ import annotations

import math
import pathlib
import tomllib
from dataclasses import dataclass, field, fields

import numpy as np

from formats.errors import DataError

DEFAULT_CONFIG = pathlib.Path(__file__).with_name("tulip_robot.toml")


HORN_TICKS_PER_RAD = 4096 / (2 * math.pi)  # a Dynamixel X horn's encoder: 4096 ticks per revolution


@dataclass(frozen=True)
class ServoMap:
    """One joint on one servo: ticks = zero + direction * ticks_per_rad * q. `torque_constant`: N·m at the joint
    per A of the servo's Present Current (motor constant × gear ratio × efficiency), when known: a fixed-base run
    then records it beside the currents, so `identify dynamic` turns them into joint efforts."""

    name: str
    id: int
    zero: int = 2048
    direction: int = 1
    ticks_per_rad: float = HORN_TICKS_PER_RAD
    torque_constant: float | None = None

    def to_ticks(self, q: float) -> int:
        return int(round(self.zero + self.direction * self.ticks_per_rad * q))

    def to_rad(self, ticks: int) -> float:
        return (ticks - self.zero) / (self.direction * self.ticks_per_rad)


@dataclass
class ExecutorSettings:
    rate_hz: float = 100.0  # setpoint streaming rate
    velocity_limit: float = 1.0  # rad/s, any joint
    settle_tol_deg: float = 0.5  # all joints within this of the target ...
    settle_offset_deg: float = 2.0  # ... or still, within this of the target (a loaded servo's steady offset)
    settle_timeout_s: float = 10.0  # ... within this long after the move (robot time)
    settle_attempts: int = 2  # settle windows before the run stops (the posture is never held unsettled)
    track_trip_deg: float = 15.0  # tracking error that trips safety (stop and hold)
    average_fraction: float = 0.5  # average the last half of each hold
    link_timeout_s: float = 0.5  # no answer from the robot for this long -> stop
    min_margin: float = 0.0  # required CoP margin (m) of every setpoint; the plan's own requirement if larger
    min_board_coverage: float = 0.5  # fraction of expected board samples in the averaging window
    pwm_limit_pct: float = 100.0  # PWM plans: the most a plan may command [% of full scale], pre-flight
    # gravity-compensation feed-forward (drivers.gravity): on the ground each goal is offset by τ_ff / kp, kp from
    # the servos' Position P Gain (register 84, Dynamixel units), which a Dynamixel link writes to every servo on
    # connect (drivers.dynamixel)
    gravity_compensation: bool = False
    position_p_gain: float = 800.0  # X-series factory default; a whole number in (0, 16383]
    # Dynamixel time-based profile (Drive Mode bit 2, Profile Velocity = this many ms; 0: none): each servo moves its
    # target to a new goal linearly over this time instead of stepping. At the tick period (e.g. 10 at 100 Hz) the
    # goals become a piecewise-linear path, and a current read at the tick no longer misses the step's transient
    goal_profile_ms: float = 0.0


# (low, high, low inclusive, unit) of every executor setting; all must be finite.
EXECUTOR_RANGES: dict[str, tuple[float, float, bool, str]] = {
    "rate_hz": (1.0, 1000.0, True, "Hz"),
    "velocity_limit": (0.0, 10.0, False, "rad/s"),
    "settle_tol_deg": (0.0, 10.0, False, "deg"),
    "settle_offset_deg": (0.0, 15.0, True, "deg"),
    "settle_timeout_s": (0.0, 600.0, False, "s"),
    "settle_attempts": (1, 10, True, ""),
    "track_trip_deg": (0.0, 90.0, False, "deg"),
    "average_fraction": (0.0, 1.0, False, ""),
    "link_timeout_s": (0.0, 10.0, False, "s"),
    "min_margin": (0.0, 1.0, True, "m"),
    "min_board_coverage": (0.0, 1.0, True, ""),
    "pwm_limit_pct": (0.0, 100.0, False, "%"),
    "position_p_gain": (0.0, 16383.0, False, ""),
    "goal_profile_ms": (0.0, 32767.0, True, "ms"),
}
BOOL_SETTINGS = ("gravity_compensation",)
# Dynamixel Baud Rate (8) values (ROBOTIS e-Manual: X-series 0 … 7 = 9 600 … 4.5 M bps; PRO series also 10.5 M)
DXL_BAUDS = (9_600, 57_600, 115_200, 1_000_000, 2_000_000, 3_000_000, 4_000_000, 4_500_000, 10_500_000)
MAX_TORQUE_CONSTANT = 1e4  # N·m/A at the joint
MAX_CURRENT_UNIT_MA = 100.0


@dataclass
class RobotConfig:
    robot: str = "tulip"
    baud: int = 1_000_000
    current_unit_ma: float = 2.69  # mA per Present Current unit (XM430/XM540/XH430 e-Manual; XL/XC330: 1.0)
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

    def require_robot(self, name: str) -> None:
        """Refuse (DataError) a plan for another robot than the configuration's: its limits would not apply."""
        if self.robot != name:
            raise DataError(
                f"the robot configuration is for {self.robot!r}, the plan for {name!r} (--config)"
            )


# ------------------------------------------------------------------ field checks


def _is_int(v) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _number(v, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
        raise DataError(f"{where} = {v!r}: must be a number")
    x = float(v)
    if not math.isfinite(x):
        raise DataError(f"{where} = {v!r}: must be a finite number")
    return x


def _integer(v, where: str, lo: int, hi: int) -> int:
    if not _is_int(v) or not lo <= int(v) <= hi:
        raise DataError(f"{where} = {v!r}: must be an integer in [{lo}, {hi}]")
    return int(v)


def _setting(name: str, v, where: str) -> float | int | bool:
    what = f"{where}[executor] {name}"
    if name in BOOL_SETTINGS:
        if not isinstance(v, bool):
            raise DataError(f"{what} = {v!r}: must be true or false")
        return v
    lo, hi, lo_incl, unit = EXECUTOR_RANGES[name]
    if name == "settle_attempts":
        return _integer(v, what, int(lo), int(hi))
    x = _number(v, what)
    if not ((x >= lo if lo_incl else x > lo) and x <= hi):
        rng = f"{'[' if lo_incl else '('}{lo:g}, {hi:g}]"
        raise DataError(f"{what} = {v!r}: must be in {rng}{' ' + unit if unit else ''}")
    if name == "position_p_gain" and not x.is_integer():
        raise DataError(f"{what} = {v!r}: must be a whole number (the servos' register 84 holds an integer)")
    if name == "goal_profile_ms" and not x.is_integer():
        raise DataError(f"{what} = {v!r}: must be a whole number of ms (Profile Velocity, register 112)")
    return x


def _unknown(d: dict, known, what: str) -> None:
    extra = sorted(set(d) - set(known))
    if extra:
        raise DataError(f"{what}: unknown key(s) {extra} (known: {sorted(known)})")


def _table(doc: dict, key: str, where: str) -> dict:
    v = doc.get(key, {})
    if not isinstance(v, dict):
        raise DataError(f"{where}[{key}] must be a table")
    return v


def _pose(v, where: str) -> np.ndarray:
    if not isinstance(v, list) or len(v) != 3:
        raise DataError(f"{where} = {v!r}: expected [x_m, y_m, psi_deg]")
    x, y, psi = (_number(c, where) for c in v)
    if abs(x) > 2.0 or abs(y) > 2.0 or abs(psi) > 360.0:
        raise DataError(f"{where} = {v!r}: |x|, |y| must be <= 2 m and |psi| <= 360 deg")
    return np.array([x, y, math.radians(psi)])


def _servo(j, where: str) -> ServoMap:
    if not isinstance(j, dict):
        raise DataError(f"{where} must be a table with name and id")
    _unknown(j, ("name", "id", "zero", "direction", "ticks_per_rad", "torque_constant"), where)
    for k in ("name", "id"):
        if k not in j:
            raise DataError(f"{where}: missing {k}")
    name = j["name"]
    if not isinstance(name, str) or not name.strip():
        raise DataError(f"{where}.name = {name!r}: must be a non-empty string")
    sid = _integer(j["id"], f"{where}.id", 0, 252)
    zero = _integer(j.get("zero", 2048), f"{where}.zero", -(2**31), 2**31 - 1)
    direction = j.get("direction", 1)
    if not _is_int(direction) or direction not in (1, -1):
        raise DataError(f"{where}.direction = {direction!r}: must be 1 or -1")
    tpr = _number(j.get("ticks_per_rad", HORN_TICKS_PER_RAD), f"{where}.ticks_per_rad")
    if tpr == 0 or abs(tpr) > 1e7:
        raise DataError(f"{where}.ticks_per_rad = {tpr!r}: must be non-zero and at most 1e7 in magnitude")
    kt = j.get("torque_constant")
    if kt is not None:
        kt = _number(kt, f"{where}.torque_constant")
        if not 0 < kt <= MAX_TORQUE_CONSTANT:
            raise DataError(
                f"{where}.torque_constant = {kt!r}: must be in (0, {MAX_TORQUE_CONSTANT:g}] N·m/A at the joint"
            )
    return ServoMap(name, sid, zero, int(direction), tpr, kt)


def dxl_baud(v, where: str) -> int:
    """A Dynamixel bus baud rate (an int, or the text of an endpoint's ?baud=): DataError unless the servos' Baud Rate
    register (8) can hold it: a servo set to anything else never answers."""
    x = v
    if isinstance(v, str):
        try:
            x = int(v.strip())
        except ValueError:
            x = v
    if not _is_int(x) or int(x) not in DXL_BAUDS:
        rates = ", ".join(f"{b:_}".replace("_", " ") for b in DXL_BAUDS)
        raise DataError(f"{where} = {v!r}: not a Dynamixel baud rate ({rates})")
    return int(x)


def _current_unit(v, where: str) -> float:
    x = _number(v, where)
    if not 0 < x <= MAX_CURRENT_UNIT_MA:
        raise DataError(
            f"{where} = {v!r}: must be in (0, {MAX_CURRENT_UNIT_MA:g}] mA per Present Current unit"
        )
    return x


def validate_config(cfg: RobotConfig) -> None:
    """DataError naming the first field of `cfg` that is out of range (type, finite, range)."""
    where = f"{cfg.source}: "
    for f in fields(ExecutorSettings):
        _setting(f.name, getattr(cfg.executor, f.name), where)
    dxl_baud(cfg.baud, f"{where}[link] baud")
    _current_unit(cfg.current_unit_ma, f"{where}[link] current_unit_ma")
    for k, s in enumerate(cfg.servos):
        _servo(
            {
                "name": s.name,
                "id": s.id,
                "zero": s.zero,
                "direction": s.direction,
                "ticks_per_rad": s.ticks_per_rad,
            }
            | ({} if s.torque_constant is None else {"torque_constant": s.torque_constant}),
            f"{where}joints[{k}]",
        )
    for what, pose in [("boards.right", cfg.right_board), ("boards.left", cfg.left_board)] + [
        (f"boards.placements[index={i}].{side}", p)
        for i, pair in cfg.placement_offsets.items()
        for side, p in zip(("right", "left"), pair, strict=True)
    ]:
        a = np.asarray(pose, dtype=float)
        if a.shape != (3,) or not np.all(np.isfinite(a)):
            raise DataError(f"{where}{what}: expected three finite numbers")


def _known_robot(robot: str, where: str) -> None:
    """A robot name that is neither known nor a description file is refused here, naming the config file: the
    registry's own refusal (`get_model`) would come later without it."""
    from robots.registry import SUFFIX, get_model, is_named

    if (
        is_named(robot)
        or pathlib.Path(robot).suffix.lower() in (".urdf", ".toml", ".xml")
        or robot.endswith(SUFFIX)
    ):
        return
    try:
        get_model(robot)
    except DataError as exc:
        raise DataError(f"{where}robot = {robot!r}: {exc}") from None


def load_config(path: str | pathlib.Path | None = None) -> RobotConfig:
    """Read a robot TOML file (defaults: the bundled TUlip-on-Dynamixel file); DataError names a bad field."""
    path = pathlib.Path(path) if path else DEFAULT_CONFIG
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: not valid TOML ({exc})") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a UTF-8 text file") from None
    where = f"{path}: "
    _unknown(doc, ("robot", "link", "executor", "boards", "joints"), f"{path}")
    robot = doc.get("robot", "tulip")
    if not isinstance(robot, str) or not robot.strip():
        raise DataError(f"{where}robot = {robot!r}: must be a non-empty string")
    _known_robot(robot, where)
    cfg = RobotConfig(robot=robot, source=str(path))
    link = _table(doc, "link", where)
    _unknown(link, ("baud", "current_unit_ma"), f"{where}[link]")
    cfg.baud = dxl_baud(link.get("baud", cfg.baud), f"{where}[link] baud")
    cfg.current_unit_ma = _current_unit(
        link.get("current_unit_ma", cfg.current_unit_ma), f"{where}[link] current_unit_ma"
    )
    joints = doc.get("joints", [])
    if not isinstance(joints, list):
        raise DataError(f"{where}joints must be an array of tables ([[joints]])")
    cfg.servos = [_servo(j, f"{where}joints[{i}]") for i, j in enumerate(joints)]
    for what, vals in (
        ("servo ids", [s.id for s in cfg.servos]),
        ("joint names", [s.name for s in cfg.servos]),
    ):
        if len(set(vals)) != len(vals):
            raise DataError(f"{where}duplicate {what} {vals}")
    ex = _table(doc, "executor", where)
    known = [f.name for f in fields(ExecutorSettings)]
    _unknown(ex, known, f"{where}[executor]")
    cfg.executor = ExecutorSettings(**{k: _setting(k, v, where) for k, v in ex.items()})
    boards = _table(doc, "boards", where)
    _unknown(boards, ("right", "left", "placements"), f"{where}[boards]")
    if "right" in boards:
        cfg.right_board = _pose(boards["right"], f"{where}boards.right")
    if "left" in boards:
        cfg.left_board = _pose(boards["left"], f"{where}boards.left")
    entries = boards.get("placements", [])
    if not isinstance(entries, list):
        raise DataError(f"{where}boards.placements must be an array of tables")
    for k, entry in enumerate(entries):
        w = f"{where}boards.placements[{k}]"
        if not isinstance(entry, dict):
            raise DataError(f"{w} must be a table with index, right and left")
        _unknown(entry, ("index", "right", "left"), w)
        if not all(key in entry for key in ("index", "right", "left")):
            raise DataError(f"{w}: needs index, right and left")
        idx = _integer(entry["index"], f"{w}.index", 0, 1_000_000)
        if idx in cfg.placement_offsets:
            raise DataError(f"{w}.index = {idx}: placement listed twice")
        cfg.placement_offsets[idx] = (_pose(entry["right"], f"{w}.right"), _pose(entry["left"], f"{w}.left"))
    validate_config(cfg)
    return cfg


def servo_order(cfg: RobotConfig, joint_names: list[str]) -> list[ServoMap]:
    """The servos in model joint order; DataError if a joint has no servo."""
    by_name = {s.name: s for s in cfg.servos}
    missing = [n for n in joint_names if n not in by_name]
    if missing:
        raise DataError(f"{cfg.source}: no servo mapped for joints {missing}")
    return [by_name[n] for n in joint_names]
