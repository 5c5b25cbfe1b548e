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
from formats.commented_csv import check_delimiter
from formats.errors import DataError
from formats.units import GRAVITY as G


def _body_lines(text: str) -> tuple[dict[str, str], list[tuple[int, str]]]:
    """`# key: value` metadata and the non-comment, non-blank lines with their 1-based line numbers."""
    meta, body = {}, []
    for no, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if s.startswith("#"):
            key, sep, val = s[1:].partition(":")
            if sep:
                meta[key.strip()] = val.strip()
        elif s:
            body.append((no, s))
    return meta, body


def _check_ragged(src: str, body: list[tuple[int, str]], n_cols: int) -> None:
    """DataError naming the first line whose number of values differs from the header's."""
    for no, line in body[1:]:
        n = len(line.split(","))
        if n != n_cols:
            raise DataError(f"{src}: line {no} has {n} values, the header has {n_cols} columns")


def read_table(
    path: str | Path, required: list[str], what: str
) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """(metadata, columns) of a numeric CSV; DataError naming the file for anything malformed. A UTF-8 byte-order
    mark (as spreadsheet programs write) is accepted."""
    src = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{src}: not UTF-8 text (expected a {what} CSV)") from None
    meta, body = _body_lines(text)
    if not body:
        raise DataError(f"{src}: empty (expected a {what} CSV with a header row)")
    check_delimiter(src, body[0][1])
    header = [h.strip() for h in body[0][1].split(",")]
    missing = [c for c in required if c not in header]
    if missing:
        raise DataError(
            f"{src}: missing column(s) {', '.join(missing)} (a {what} CSV needs {', '.join(required)})"
        )
    if len(body) == 1:
        raise DataError(f"{src}: no data rows (only the header)")
    _check_ragged(src, body, len(header))
    try:
        data = np.loadtxt(io.StringIO("\n".join(s for _, s in body[1:])), delimiter=",", ndmin=2)
    except ValueError as exc:
        raise DataError(f"{src}: unreadable row ({str(exc).splitlines()[0]})") from None
    cols = {h: data[:, k] for k, h in enumerate(header)}
    for c in required:
        if not np.all(np.isfinite(cols[c])):
            row = int(np.flatnonzero(~np.isfinite(cols[c]))[0]) + 1
            raise DataError(f"{src}: non-finite value in column {c!r}, data row {row}")
    return meta, cols


def check_seconds(src: str, t: np.ndarray, min_step: float = 1e-4) -> None:
    """DataError unless t increases with a plausible median step for seconds (`min_step`–0.1 s): catches time
    stamps in ms, whose 1 kHz rows are 1 apart."""
    dt = np.diff(t)
    if not np.all(np.isfinite(t)) or np.any(dt <= 0):
        raise DataError(f"{src}: time stamps must increase")
    if not min_step <= np.median(dt) <= 0.1:
        raise DataError(f"{src}: median step {np.median(dt):g} s is implausible; is t in seconds?")


def check_gravity_units(src: str, a: np.ndarray, what: str) -> None:
    """DataError unless the median magnitude of (N, 3) accelerations is within a factor 2 of g: a static sensor
    feels gravity, so readings in g (≈ 1) or mg (≈ 1000) are named."""
    med = float(np.median(np.linalg.norm(a, axis=1)))
    if G / 2 <= med <= 2 * G:
        return
    guess = next((u for u, scale in (("g", 1.0), ("mg", 1000.0)) if 0.5 < med / scale < 2), None)
    hint = (
        f"; the readings look like {guess}: multiply by {G / (1.0 if guess == 'g' else 1000.0):g}"
        if guess
        else ""
    )
    raise DataError(
        f"{src}: median |{what}| {med:.3g} m/s² is far from gravity {G} m/s²; write accelerations in m/s²{hint}"
    )


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
    check_seconds(src, c["t"])
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
    for name, col in (("pose", c["pose"]), ("tumble", tumble)):
        if not np.all(np.isfinite(col)) or np.any(col != np.round(col)):
            row = int(np.flatnonzero(~np.isfinite(col) | (col != np.round(col)))[0]) + 1
            raise DataError(f"{path}: column {name!r} must hold integers (data row {row}: {col[row - 1]:g})")
    a = np.column_stack([c["ax"], c["ay"], c["az"]])
    check_gravity_units(str(path), a, "reading")
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
    if t is not None:
        if len(t) < 2:
            raise DataError(f"{src}: {len(t)} sample is too few")
        check_seconds(src, t, min_step=1e-5)  # accelerometers may be logged at 10–20 kHz
    q = np.column_stack([c[f"q:{j}"] for j in joints])
    acc = np.stack([np.column_stack([c[f"{s}:{ax}"] for ax in ("ax", "ay", "az")]) for s in sensors], axis=1)
    if np.max(np.abs(q)) > 4 * np.pi:
        raise DataError(f"{src}: joint readings beyond ±4π; write angles in radians")
    for k, s in enumerate(sensors):
        check_gravity_units(src, acc[:, k], f"{s} acceleration")
    return OffsetRecording(meta["robot"], joints, sensors, q, acc, t)


def write_offsets(rec: OffsetRecording, path: str | Path) -> None:
    cols = {} if rec.t is None else {"t": rec.t}
    cols.update({f"q:{j}": rec.q[:, k] for k, j in enumerate(rec.joints)})
    for s_i, s in enumerate(rec.sensors):
        for a_i, ax in enumerate(("ax", "ay", "az")):
            cols[f"{s}:{ax}"] = rec.acc[:, s_i, a_i]
    meta = {"format": "poise encoder-offset recording", "robot": rec.robot, "sensors": ",".join(rec.sensors)}
    write_table(path, meta, cols, "encoder-offset recording")
