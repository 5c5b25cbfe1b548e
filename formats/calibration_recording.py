"""CSV recordings for actuation and sensor calibration (`poise calibrate`), read with one-line DataErrors.

All three are numeric CSVs with a header row (order free, extra columns ignored) after optional `# key: value`
comment lines. SI units, radians.

Drive recording (`friction`, `pwm-gain`): `t` [s], `pwm` [% of full scale], `q` [rad, joint encoder],
`tau` [N·m, joint torque applied to the child link]; optional `gap_ms` [ms, the interval between the two
measurements a resampled row was interpolated in: rows inside a long gap are left out of the fits]. Comment
keys: `inertia` [kg·m², drive inertia reflected to the joint] (optional), `joint`.

Accelerometer recording (`accelerometer`): `pose` [integer id; rows of one static pose are averaged],
`ax, ay, az` [m/s², raw readings], `tumble` [0 for the orientation grid; +k and −k for the two orientations
of tumble pair k, rotated by π about a horizontal axis].

Encoder-offset recording (`encoder-offsets`): comment keys `robot` (built-in name or description path) and
`sensors` (site names, comma separated); columns `q:<joint>` [rad, encoder readings] for every joint of the
robot and `<site>:ax, <site>:ay, <site>:az` [m/s², calibrated proper acceleration in the sensor frame]; an
optional `t` [s] lets `poise calibrate` check the slow-motion requirement.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.atomic import write_text_atomic
from formats.errors import DataError


def read_table(
    path: str | Path, required: list[str], what: str
) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """(metadata, columns) of a numeric CSV; DataError naming the file for anything malformed."""
    src = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{src}: not UTF-8 text (expected a {what} CSV)") from None
    meta, body = {}, []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            key, sep, val = s[1:].partition(":")
            if sep:
                meta[key.strip()] = val.strip()
        elif s:
            body.append(s)
    if not body:
        raise DataError(f"{src}: empty (expected a {what} CSV with a header row)")
    header = [h.strip() for h in body[0].split(",")]
    missing = [c for c in required if c not in header]
    if missing:
        raise DataError(
            f"{src}: missing column(s) {', '.join(missing)} (a {what} CSV needs {', '.join(required)})"
        )
    try:
        data = np.loadtxt(io.StringIO("\n".join(body[1:])), delimiter=",", ndmin=2)
    except ValueError as exc:
        raise DataError(f"{src}: unreadable row ({str(exc).splitlines()[0]})") from None
    if data.shape[0] == 0:
        raise DataError(f"{src}: no data rows")
    if data.shape[1] != len(header):
        raise DataError(f"{src}: rows have {data.shape[1]} values for {len(header)} header columns")
    cols = {h: data[:, k] for k, h in enumerate(header)}
    for c in required:
        if not np.all(np.isfinite(cols[c])):
            row = int(np.flatnonzero(~np.isfinite(cols[c]))[0]) + 1
            raise DataError(f"{src}: non-finite value in column {c!r}, data row {row}")
    return meta, cols


def write_table(path: str | Path, meta: dict[str, str], cols: dict[str, np.ndarray], what: str) -> None:
    lines = [f"# {k}: {v}" for k, v in meta.items()]
    names = list(cols)
    lines.append(",".join(names))
    M = np.column_stack([np.asarray(cols[n], dtype=float) for n in names])
    lines += [",".join(f"{v:.10g}" for v in row) for row in M]
    write_text_atomic(path, "\n".join(lines) + "\n", what)


@dataclass
class DriveRecording:
    """One joint drive: t [s], pwm [%], q [rad], tau [N·m]; inertia [kg·m²] if known."""

    t: np.ndarray
    pwm: np.ndarray
    q: np.ndarray
    tau: np.ndarray
    inertia: float | None = None
    joint: str = "joint"
    gap_ms: np.ndarray | None = None  # optional: measurement gap around each (resampled) row

    def gaps(self, factor: float = 2.5) -> np.ndarray | None:
        """Rows interpolated across more than `factor` sample periods (None without a gap_ms column)."""
        if self.gap_ms is None:
            return None
        return self.gap_ms > factor * 1000.0 * float(np.median(np.diff(self.t)))


def read_drive(path: str | Path) -> DriveRecording:
    meta, c = read_table(path, ["t", "pwm", "q", "tau"], "drive recording")
    src = str(path)
    if len(c["t"]) < 50:
        raise DataError(f"{src}: {len(c['t'])} samples are too few (need ≥ 50)")
    dt = np.diff(c["t"])
    if np.any(dt <= 0):
        raise DataError(f"{src}: time stamps must increase")
    if not 1e-4 <= np.median(dt) <= 0.1:
        raise DataError(f"{src}: median step {np.median(dt):g} s is implausible; is t in seconds?")
    if np.max(np.abs(c["pwm"])) > 100:
        raise DataError(f"{src}: |pwm| > 100 %; write PWM in % of full scale")
    inertia = None
    if "inertia" in meta:
        try:
            inertia = float(meta["inertia"])
        except ValueError:
            raise DataError(f"{src}: inertia {meta['inertia']!r} is not a number") from None
        if not (np.isfinite(inertia) and inertia >= 0):
            raise DataError(f"{src}: inertia must be finite and ≥ 0")
    gap = c.get("gap_ms")
    if gap is not None and not (np.all(np.isfinite(gap)) and np.all(gap >= 0)):
        raise DataError(f"{src}: column 'gap_ms' must hold finite non-negative milliseconds")
    return DriveRecording(c["t"], c["pwm"], c["q"], c["tau"], inertia, meta.get("joint", "joint"), gap)


def write_drive(rec: DriveRecording, path: str | Path) -> None:
    meta = {"format": "poise drive recording", "joint": rec.joint}
    if rec.inertia is not None:
        meta["inertia"] = f"{rec.inertia:.10g}"
    cols = {"t": rec.t, "pwm": rec.pwm, "q": rec.q, "tau": rec.tau}
    if rec.gap_ms is not None:
        cols["gap_ms"] = rec.gap_ms
    write_table(path, meta, cols, "drive recording")


@dataclass
class AccelRecording:
    """Raw static accelerometer readings a (N, 3) [m/s²], pose ids (N,), tumble labels (N,)."""

    pose: np.ndarray
    a: np.ndarray
    tumble: np.ndarray


def read_accel(path: str | Path) -> AccelRecording:
    _, c = read_table(path, ["pose", "ax", "ay", "az"], "accelerometer recording")
    n = len(c["pose"])
    tumble = c.get("tumble", np.zeros(n))
    if not np.all(np.isfinite(tumble)) or np.any(tumble != np.round(tumble)):
        raise DataError(f"{path}: column 'tumble' must hold integers")
    a = np.column_stack([c["ax"], c["ay"], c["az"]])
    if np.max(np.linalg.norm(a, axis=1)) > 1000:
        raise DataError(f"{path}: readings above 1000 m/s²; write accelerations in m/s²")
    return AccelRecording(c["pose"].astype(int), a, tumble.astype(int))


def write_accel(rec: AccelRecording, path: str | Path) -> None:
    cols = {"pose": rec.pose, "ax": rec.a[:, 0], "ay": rec.a[:, 1], "az": rec.a[:, 2], "tumble": rec.tumble}
    write_table(path, {"format": "poise accelerometer recording"}, cols, "accelerometer recording")


@dataclass
class OffsetRecording:
    """Encoder readings q (N, nq) and per-sensor proper accelerations acc (N, S, 3) for the robot's sensors."""

    robot: str
    joints: list[str]
    sensors: list[str]
    q: np.ndarray
    acc: np.ndarray
    t: np.ndarray | None = None  # s, optional (lets the reader check the slow-motion requirement)


def read_offsets(path: str | Path, joint_names: list[str] | None = None) -> OffsetRecording:
    """Read an encoder-offset recording; `joint_names` (the robot's) if known, else from the header."""
    src = str(path)
    meta, _ = read_table(path, [], "encoder-offset recording")
    if "robot" not in meta or "sensors" not in meta:
        raise DataError(f"{src}: needs '# robot:' and '# sensors:' comment lines")
    sensors = [s.strip() for s in meta["sensors"].split(",") if s.strip()]
    if not sensors:
        raise DataError(f"{src}: '# sensors:' lists no sensor")
    _, c0 = read_table(path, [], "encoder-offset recording")
    joints = joint_names or [h[2:] for h in c0 if h.startswith("q:")]
    req = [f"q:{j}" for j in joints] + [f"{s}:{ax}" for s in sensors for ax in ("ax", "ay", "az")]
    _, c = read_table(path, req, "encoder-offset recording")
    t = c.get("t")
    if t is not None and (not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0)):
        raise DataError(f"{src}: column 't' must hold increasing time stamps in seconds")
    q = np.column_stack([c[f"q:{j}"] for j in joints])
    acc = np.stack([np.column_stack([c[f"{s}:{ax}"] for ax in ("ax", "ay", "az")]) for s in sensors], axis=1)
    if np.max(np.abs(q)) > 4 * np.pi:
        raise DataError(f"{src}: joint readings beyond ±4π; write angles in radians")
    return OffsetRecording(meta["robot"], joints, sensors, q, acc, t)


def write_offsets(rec: OffsetRecording, path: str | Path) -> None:
    cols = {} if rec.t is None else {"t": rec.t}
    cols.update({f"q:{j}": rec.q[:, k] for k, j in enumerate(rec.joints)})
    for s_i, s in enumerate(rec.sensors):
        for a_i, ax in enumerate(("ax", "ay", "az")):
            cols[f"{s}:{ax}"] = rec.acc[:, s_i, a_i]
    meta = {"format": "poise encoder-offset recording", "robot": rec.robot, "sensors": ",".join(rec.sensors)}
    write_table(path, meta, cols, "encoder-offset recording")
