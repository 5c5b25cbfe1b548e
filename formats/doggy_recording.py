"""Doggy recording format: one CSV row per sample (encoders, gyros, PWM), read/write/validate.

Columns (header row required, order free, extra columns ignored):
  t [s] · u1 u2 u3 [PWM duty, −1…1] · theta1 theta2 theta3 [rad, motor angles on the link side] ·
  w1x w1y w1z [rad/s, gyro 1 in the IMU1 frame] · w2x w2y w2z [rad/s, gyro 2 in the IMU2 frame]
Optional leading comment lines `# key: v1 v2 v3` carry metadata; `theta0` is the encoder zero position [rad]
(default 0). u_k is the command applied from t_k to t_{k+1}.
"""

from __future__ import annotations

import io
import pathlib
from dataclasses import dataclass

import numpy as np

from formats.atomic import write_text_atomic
from formats.commented_csv import check_delimiter
from formats.doggy_plan import is_doggy_plan
from formats.errors import DataError

COLUMNS = ["t", "u1", "u2", "u3", "theta1", "theta2", "theta3", "w1x", "w1y", "w1z", "w2x", "w2y", "w2z"]
# Doggy samples encoders and gyros at 1 kHz; a median step outside this band means the time column is not in
# seconds (ms or µs stamps, or a sample counter).
PLAUSIBLE_STEP_S = (1e-5, 0.05)
UNITS = ["s", "1", "1", "1", "rad", "rad", "rad", "rad/s", "rad/s", "rad/s", "rad/s", "rad/s", "rad/s"]


@dataclass
class DoggyRecording:
    """Time series of N samples: t (N,), u (N,3), theta (N,3), gyro1 (N,3), gyro2 (N,3); theta0 (3,)."""

    t: np.ndarray
    u: np.ndarray
    theta: np.ndarray
    gyro1: np.ndarray
    gyro2: np.ndarray
    theta0: np.ndarray

    @property
    def n(self) -> int:
        return len(self.t)

    def dt(self) -> np.ndarray:
        """Per-step sample times T_s,k = t_{k+1} − t_k (N−1,)."""
        return np.diff(self.t)

    def zero_command_samples(self) -> int:
        """M: number of leading samples with u = 0 (the bias window)."""
        moving = np.flatnonzero(np.any(self.u != 0.0, axis=1))
        return int(moving[0]) if len(moving) else self.n

    def slice(self, start: int, stop: int) -> DoggyRecording:
        s = slice(start, stop)
        return DoggyRecording(self.t[s], self.u[s], self.theta[s], self.gyro1[s], self.gyro2[s], self.theta0)


def validate(
    rec: DoggyRecording, source: str = "recording", file_lines: np.ndarray | None = None
) -> DoggyRecording:
    """Raise DataError with a one-line reason if shapes, finiteness or time stamps are wrong; with `file_lines`
    (each sample's 1-based line in the file) the reason names the file line after the 0-based sample index."""
    n = len(rec.t)

    def at(k: int) -> str:
        return f"sample {k}" + (f" (file line {int(file_lines[k])})" if file_lines is not None else "")

    if n < 3:
        raise DataError(f"{source}: need at least 3 samples, got {n}")
    for name, arr, cols in (
        ("u", rec.u, 3),
        ("theta", rec.theta, 3),
        ("gyro1", rec.gyro1, 3),
        ("gyro2", rec.gyro2, 3),
    ):
        if arr.shape != (n, cols):
            raise DataError(f"{source}: {name} has shape {arr.shape}, expected ({n}, {cols})")
    if not np.all(np.isfinite(rec.theta0)):
        raise DataError(f"{source}: non-finite value (NaN/inf) in the theta0 metadata")
    table = np.column_stack([rec.t, rec.u, rec.theta, rec.gyro1, rec.gyro2])  # COLUMNS' order
    bad = ~np.isfinite(table)
    if bad.any():
        row, col = (int(v) for v in np.argwhere(bad)[0])  # the first bad sample, its first bad column
        family = ["t"] + ["u"] * 3 + ["theta"] * 3 + ["gyro1"] * 3 + ["gyro2"] * 3
        raise DataError(
            f"{source}: non-finite value (NaN/inf) in column {COLUMNS[col]} of {family[col]} at {at(row)}"
        )
    dt = np.diff(rec.t)
    if np.any(dt <= 0):
        k = int(np.flatnonzero(dt <= 0)[0])
        raise DataError(
            f"{source}: time stamps not strictly increasing at {at(k + 1)} "
            f"(t={rec.t[k]:.6f} s then {rec.t[k + 1]:.6f} s)"
        )
    med = float(np.median(dt))
    lo, hi = PLAUSIBLE_STEP_S
    if not lo <= med <= hi:
        guess = "ms" if 0.1 <= med <= 100 else "another unit"
        raise DataError(
            f"{source}: median time step {med:.6g} s ({1 / med:.4g} Hz) is implausible for 1 kHz encoders and "
            f"gyros; are the time stamps in {guess}? column t must be in seconds"
        )
    if np.any(dt > 20 * med):
        k = int(np.flatnonzero(dt > 20 * med)[0])
        raise DataError(
            f"{source}: gap of {dt[k]:.4f} s after {at(k)} (median step {med:.5f} s); split the log"
        )
    if np.any(np.abs(rec.u) > 1.0):
        k = int(np.argmax(np.abs(rec.u).max(axis=1)))
        raise DataError(
            f"{source}: PWM duty outside [-1, 1] (largest |u| {np.abs(rec.u).max():.4g}, at {at(k)}): if u1..u3 are in percent, as `poise calibrate` takes them, divide by 100"
        )
    return rec


def write_csv(rec: DoggyRecording, path: str | pathlib.Path) -> None:
    """Write the documented CSV (metadata comment lines, header, one row per sample)."""
    data = np.column_stack([rec.t, rec.u, rec.theta, rec.gyro1, rec.gyro2])
    buf = io.StringIO()
    buf.write("# poise doggy recording v1\n")
    buf.write("# units: " + " ".join(f"{c}[{u}]" for c, u in zip(COLUMNS, UNITS, strict=True)) + "\n")
    buf.write("# theta0: " + " ".join(f"{v:.9g}" for v in rec.theta0) + "\n")
    buf.write(",".join(COLUMNS) + "\n")
    np.savetxt(buf, data, delimiter=",", fmt="%.9g")
    write_text_atomic(path, buf.getvalue(), "recording")


def _not_a_csv(text: str, path: pathlib.Path) -> None:
    """DataError for JSON given as a recording (a plan file is the likely mix-up: say where it goes)."""
    if not text.lstrip().startswith(("{", "[")):
        return
    import json

    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return
    if is_doggy_plan(doc):
        raise DataError(
            f"{path}: looks like a Doggy excitation plan (JSON), not a recording CSV; give it as --plan "
            "(with --simulate)"
        )
    raise DataError(f"{path}: is JSON, not a Doggy recording CSV")


def _check_header(header: list[str], path: pathlib.Path) -> None:
    """DataError naming the missing columns (once), or saying the header row is not a Doggy one at all."""
    missing = [c for c in COLUMNS if c not in header]
    if not missing:
        return
    if len(missing) == len(COLUMNS):
        shown = ",".join(header[:4]) + (",…" if len(header) > 4 else "")
        raise DataError(f"{path}: header row {shown!r} has none of the columns {','.join(COLUMNS)}")
    raise DataError(f"{path}: missing column(s) {', '.join(missing)} (need {', '.join(COLUMNS)})")


def _bad_row(lines: list[str], first: int, header: list[str], path: pathlib.Path) -> DataError:
    """The first data line (1-based file line number) with the wrong field count or a field that is no number."""
    for k in range(first, len(lines)):
        line = lines[k].split("#", 1)[0]
        if not line.strip():
            continue
        fields = line.split(",")
        if len(fields) != len(header):
            n = len(fields)
            return DataError(f"{path}: line {k + 1} has {n} column{'s' * (n != 1)}, the header {len(header)}")
        for name, field in zip(header, fields, strict=True):
            try:
                float(field)
            except ValueError:
                return DataError(f"{path}: line {k + 1}, column {name}: {field.strip()!r} is not a number")
    return DataError(f"{path}: unreadable numbers")


def _load_body(lines: list[str], first: int, header: list[str], path: pathlib.Path) -> np.ndarray:
    """The data rows below the header as an (N, columns) array; DataError naming the first bad line."""
    body = "\n".join(lines[first:])
    if not body.strip():
        return np.zeros((0, len(header)))
    try:
        data = np.loadtxt(io.StringIO(body), delimiter=",", ndmin=2)
    except ValueError:
        raise _bad_row(lines, first, header, path) from None
    if data.shape[1] != len(header):
        raise DataError(f"{path}: the rows have {data.shape[1]} columns, the header {len(header)}")
    return data


def read_csv(path: str | pathlib.Path) -> DoggyRecording:
    """Read and validate a recording; missing columns, bad numbers or bad time stamps raise DataError."""
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text file (expected a Doggy recording CSV)") from None
    _not_a_csv(text, path)
    lines = text.splitlines()
    meta: dict[str, str] = {}
    i = 0
    while i < len(lines) and (lines[i].startswith("#") or not lines[i].strip()):
        if ":" in lines[i]:
            k, v = lines[i][1:].split(":", 1)
            meta[k.strip()] = v.strip()
        i += 1
    if i >= len(lines):
        raise DataError(f"{path}: no header row")
    check_delimiter(path, lines[i])
    header = [h.strip() for h in lines[i].split(",")]
    _check_header(header, path)
    data = _load_body(lines, i + 1, header, path)
    # the file line (1-based) of each data row, as np.loadtxt skips comment-only and blank lines
    file_lines = np.array([k + 1 for k in range(i + 1, len(lines)) if lines[k].split("#", 1)[0].strip()])
    col = {h: data[:, j] for j, h in enumerate(header)}
    try:
        theta0 = np.array([float(v) for v in meta.get("theta0", "0 0 0").split()], float)
    except ValueError:
        raise DataError(f"{path}: bad theta0 metadata {meta['theta0']!r}") from None
    if theta0.shape != (3,):
        raise DataError(f"{path}: theta0 needs 3 values")
    rec = DoggyRecording(
        t=col["t"].copy(),
        u=np.column_stack([col[c] for c in ("u1", "u2", "u3")]),
        theta=np.column_stack([col[c] for c in ("theta1", "theta2", "theta3")]),
        gyro1=np.column_stack([col[c] for c in ("w1x", "w1y", "w1z")]),
        gyro2=np.column_stack([col[c] for c in ("w2x", "w2y", "w2z")]),
        theta0=theta0,
    )
    return validate(rec, str(path), file_lines if len(file_lines) == len(rec.t) else None)
