"""Setpoints: a trajectory plan sampled on a uniform grid for a controller poise does not drive (a robot's own
streaming interface, a ROS joint trajectory), one CSV row per sample, `#` metadata lines on top.

```
# poise setpoints v1
# robot: ur5
# angle_unit: rad
# rate_hz: 500
# plan_sha256: 3f…
t_s,q:JOINT,...,qd:JOINT,...,qdd:JOINT,...[,tau:JOINT,...]
```
Times in s from the plan's start, angles in rad (m for prismatic joints), velocities in rad/s, accelerations in
rad/s², optional feed-forward efforts in N·m from the plan's guessed parameters. The first row is where the robot
must stand, at rest, before the stream starts.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from formats.atomic import write_text_atomic
from formats.commented_csv import read_commented
from formats.errors import DataError

MAGIC = "poise setpoints"
VERSION = 1
KINDS = ("q", "qd", "qdd", "tau")
# the columns' units, written into every file so that it says them itself
UNITS = "t_s s; q rad (m prismatic); qd rad/s (m/s); qdd rad/s² (m/s²); tau N·m (N)"


@dataclass
class Setpoints:
    """t (K,) s; q, qd, qdd (K, n) in rad, rad/s, rad/s²; tau (K, n) N·m or None."""

    robot: str
    joint_names: list[str]
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray | None = None
    meta: dict[str, str] = field(default_factory=dict)


def write_setpoints(sp: Setpoints, path: str | Path) -> None:
    """Write atomically, radians and SI units."""
    blocks = [sp.t[:, None], sp.q, sp.qd, sp.qdd] + ([sp.tau] if sp.tau is not None else [])
    kinds = KINDS if sp.tau is not None else KINDS[:3]
    buf = io.StringIO()
    buf.write(f"# {MAGIC} v{VERSION}\n# robot: {sp.robot}\n# angle_unit: rad\n# units: {UNITS}\n")
    for k, v in sp.meta.items():
        if k not in ("magic", "robot", "angle_unit", "units"):
            buf.write(f"# {k}: {v}\n")
    buf.write(",".join(["t_s"] + [f"{k}:{j}" for k in kinds for j in sp.joint_names]) + "\n")
    np.savetxt(buf, np.hstack(blocks), delimiter=",", fmt="%.12g")
    write_text_atomic(path, buf.getvalue(), "setpoints")


def read_setpoints(path: str | Path) -> Setpoints:
    """Read a setpoints file; one-line DataError naming what is wrong."""
    meta, lines, i = read_commented(path)
    if meta.get("magic") != f"{MAGIC} v{VERSION}":
        raise DataError(f"{path}: not poise setpoints (first line must be '# {MAGIC} v{VERSION}')")
    if meta.get("angle_unit", "rad") != "rad":
        raise DataError(f"{path}: angle_unit {meta['angle_unit']!r}; setpoints are in rad")
    if i >= len(lines):
        raise DataError(f"{path}: no column header")
    cols = lines[i].split(",")
    names = [c[2:] for c in cols if c.startswith("q:")]
    kinds = [k for k in KINDS if f"{k}:{names[0]}" in cols] if names else []
    if cols[:1] != ["t_s"] or not names or cols[1:] != [f"{k}:{j}" for k in kinds for j in names]:
        raise DataError(f"{path}: columns must be t_s, then q:, qd:, qdd: (and tau:) for every joint")
    try:
        data = (
            np.loadtxt(lines[i + 1 :], delimiter=",", ndmin=2)
            if len(lines) > i + 1
            else np.zeros((0, len(cols)))
        )
    except ValueError as exc:
        raise DataError(f"{path}: malformed number ({exc})") from None
    if data.shape[1] != len(cols) or not np.all(np.isfinite(data)):
        raise DataError(f"{path}: every row needs {len(cols)} finite numbers")
    t = data[:, 0]
    if len(t) < 2 or np.any(np.diff(t) <= 0):
        raise DataError(f"{path}: needs two or more rows with strictly increasing t_s")
    n = len(names)
    parts = [data[:, 1 + k * n : 1 + (k + 1) * n] for k in range(len(kinds))]
    return Setpoints(meta.get("robot", ""), names, t, *parts[:3], parts[3] if len(parts) > 3 else None, meta)
