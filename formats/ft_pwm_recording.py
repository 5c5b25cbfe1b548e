"""The F/T + PWM recording format (spec icub-pls.md): joint encoders, motor PWMs and a six-axis F/T sensor.

```
# poise ft-pwm recording v1
# robot: icub-right-arm
# sensor: r_arm_ft_sensor
# angle_unit: rad
t_s,q:JOINT…,pwm:MOTOR…,fx_n,fy_n,fz_n,mx_nm,my_nm,mz_nm[,contact]
```
Times in s (strictly increasing), angles in rad, PWM in the controller's duty units, the wrench in N and N·m in
the sensor frame. `contact` (0/1, optional) marks samples with a known external contact (ground truth of a
simulation or a tactile skin), used only to evaluate contact detection.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from formats.atomic import write_text_atomic
from formats.commented_csv import read_commented
from formats.dynamic_recording import SLOWEST_STEP_S  # one "t_s in ms?" threshold
from formats.errors import DataError

MAGIC = "poise ft-pwm recording"
VERSION = 1
WRENCH = ["fx_n", "fy_n", "fz_n", "mx_nm", "my_nm", "mz_nm"]


@dataclass
class FtPwmRecording:
    """Samples: t (K,), q (K, n), pwm (K, m), wrench (K, 6) in the sensor frame, contact (K,) bool or None."""

    robot: str
    sensor: str
    joint_names: list[str]
    motor_names: list[str]
    t: np.ndarray
    q: np.ndarray
    pwm: np.ndarray
    wrench: np.ndarray
    contact: np.ndarray | None = None
    meta: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        K = len(self.t)
        shapes = (("q", self.q, len(self.joint_names)), ("pwm", self.pwm, len(self.motor_names)))
        for name, a, cols in (*shapes, ("wrench", self.wrench, 6)):
            if a.shape != (K, cols):
                raise DataError(f"recording: {name} is {a.shape}, expected ({K}, {cols})")
            if not np.all(np.isfinite(a)):
                raise DataError(f"recording: {name} contains NaN or infinite values")
        if not np.all(np.isfinite(self.t)):
            raise DataError("recording: t contains NaN or infinite values")
        if self.contact is not None and self.contact.shape != (K,):
            raise DataError(f"recording: contact is {self.contact.shape}, expected ({K},)")
        if K < 10:
            raise DataError(f"recording has {K} samples; need at least 10")
        if np.any(np.diff(self.t) <= 0):
            raise DataError("recording: time stamps must strictly increase")

    @property
    def rate_hz(self) -> float:
        return float((len(self.t) - 1) / (self.t[-1] - self.t[0]))

    def __len__(self) -> int:
        return len(self.t)


def write_ft_pwm_recording(rec: FtPwmRecording, path: str | Path) -> None:
    """Write atomically (temp file, then rename)."""
    cols = ["t_s"] + [f"q:{j}" for j in rec.joint_names] + [f"pwm:{m}" for m in rec.motor_names] + WRENCH
    blocks = [rec.t[:, None], rec.q, rec.pwm, rec.wrench]
    if rec.contact is not None:
        cols.append("contact")
        blocks.append(rec.contact.astype(float)[:, None])
    buf = io.StringIO()
    buf.write(f"# {MAGIC} v{VERSION}\n# robot: {rec.robot}\n# sensor: {rec.sensor}\n# angle_unit: rad\n")
    for k, v in rec.meta.items():
        if k not in ("robot", "sensor", "angle_unit"):
            buf.write(f"# {k}: {v}\n")
    buf.write(",".join(cols) + "\n")
    np.savetxt(buf, np.hstack(blocks), delimiter=",", fmt="%.10g")
    write_text_atomic(path, buf.getvalue(), "recording")


def _check_cells(data: np.ndarray, header: list[str], line_no: list[int], path: Path) -> None:
    """Name the file, line and column of the first non-finite value or non-increasing time stamp, and refuse
    time stamps too far apart for seconds (logged in ms)."""
    bad = np.argwhere(~np.isfinite(data))
    if len(bad):
        r, c = bad[0]
        raise DataError(
            f"{path}:{line_no[r]}: column {header[c]} is {data[r, c]} (every value must be finite)"
        )
    t = data[:, 0]
    back = np.flatnonzero(np.diff(t) <= 0)
    if len(back):
        r = back[0] + 1
        raise DataError(
            f"{path}:{line_no[r]}: t_s = {t[r]:.10g} does not increase (previous row {t[r - 1]:.10g}): time "
            "stamps must strictly increase"
        )
    if len(t) > 1 and (step := float(np.median(np.diff(t)))) > SLOWEST_STEP_S:
        raise DataError(
            f"{path}: median time step {step:.4g} s ({1 / step:.3g} Hz), too slow for an arm's dynamics (at "
            f"most {SLOWEST_STEP_S:g} s): t_s in ms? t_s is in seconds"
        )


def read_ft_pwm_recording(path: str | Path) -> FtPwmRecording:
    """Read and validate an F/T + PWM recording (one-line DataError on anything malformed)."""
    path = Path(path)
    meta, lines, i = read_commented(path)
    if not meta.get("magic", "").startswith(MAGIC):
        raise DataError(f"{path}: not a poise F/T + PWM recording (first line '# {MAGIC} v{VERSION}')")
    for key in ("robot", "sensor"):
        if key not in meta:
            raise DataError(f"{path}: missing '# {key}: …' line")
    if meta.get("angle_unit", "rad") != "rad":
        raise DataError(f"{path}: angle_unit must be rad, got {meta['angle_unit']!r}")
    if i >= len(lines):
        raise DataError(f"{path}: no header row")
    header = [c.strip() for c in lines[i].split(",")]
    if header[0] != "t_s":
        raise DataError(f"{path}: first column must be t_s")
    joints = [c[2:] for c in header if c.startswith("q:")]
    motors = [c[4:] for c in header if c.startswith("pwm:")]
    missing = [w for w in WRENCH if w not in header]
    if missing:
        raise DataError(f"{path}: missing wrench column(s) {missing}")
    expected = ["t_s"] + [f"q:{j}" for j in joints] + [f"pwm:{m}" for m in motors] + WRENCH
    has_contact = header[-1] == "contact"
    if header != expected + (["contact"] if has_contact else []):
        raise DataError(f"{path}: columns must be {', '.join(expected)}[, contact] in this order")
    values, line_no = [], []
    for ln, r in enumerate(lines[i + 1 :], start=i + 2):
        if not r.strip():
            continue
        line_no.append(ln)
        cells = r.split(",")
        if len(cells) != len(header):
            raise DataError(
                f"{path}:{ln}: every row must have {len(header)} values, this one has {len(cells)}"
            )
        try:
            values.append([float(x) for x in cells])
        except ValueError:
            raise DataError(f"{path}:{ln}: non-numeric value in {r[:60]!r}") from None
    if not values:
        raise DataError(f"{path}: no samples")
    data = np.array(values, dtype=float)
    _check_cells(data, header, line_no, path)
    n, m = len(joints), len(motors)
    contact = None
    if has_contact:
        c = data[:, -1]
        if not np.all(np.isin(c, (0.0, 1.0))):
            raise DataError(f"{path}: contact must be 0 or 1")
        contact = c.astype(bool)
    return FtPwmRecording(
        robot=meta["robot"],
        sensor=meta["sensor"],
        joint_names=joints,
        motor_names=motors,
        t=data[:, 0],
        q=data[:, 1 : 1 + n],
        pwm=data[:, 1 + n : 1 + n + m],
        wrench=data[:, 1 + n + m : 7 + n + m],
        contact=contact,
        meta={k: v for k, v in meta.items() if k != "magic"},
    )
