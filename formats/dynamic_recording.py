"""The dynamic recording format: time-stamped joint positions with measured joint efforts and/or the contact
wrench, one CSV row per sample, `#` metadata lines on top.

```
# poise dynamic recording v1
# robot: ur5
# base: base_link
# angle_unit: rad
# torque_constant:shoulder_pan_joint: 12.5
t_s,q:shoulder_pan_joint,...,tau:shoulder_pan_joint,...[,fx_n,fy_n,fz_n,mx_nm,my_nm,mz_nm][,t_plan_s]
```
Times in seconds (strictly increasing), angles in radians (``deg`` accepted when declared), efforts in N·m (N for
prismatic joints), the wrench in N and N·m in the base frame. Velocities and accelerations are not recorded: the
estimator differentiates positions with a zero-phase filter. Either the efforts or the wrench may be absent.
Instead of the efforts, columns `i:JOINT` may hold each joint's motor current in A (every joint, never both `tau:`
and `i:`); optional metadata lines `torque_constant:JOINT` give the N·m/A at the joint (motor torque constant ×
gear ratio × efficiency) that `efforts_from_currents` turns them into efforts with (a caller may override them).
Optional metadata `motion_band_hz` (the motion's highest frequency) sets `identify dynamic`'s default cut-off.
Optional column `t_plan_s`: the plan time the commanded setpoint had reached at each sample (`poise run` writes it;
a late tick or a stall puts it behind t_s), where the planned angles are taken as instruments.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from formats.atomic import write_text_atomic
from formats.commented_csv import read_commented
from formats.errors import DataError
from formats.synced_lines import SYNC_S, SyncedLines
from formats.units import ANGLE_UNITS, check_angle_unit

MAGIC = "poise dynamic recording"
VERSION = 1
WRENCH = ["fx_n", "fy_n", "fz_n", "mx_nm", "my_nm", "mz_nm"]
T_PLAN = "t_plan_s"
# a recording sampled slower than this cannot resolve any excitation's dynamics: time stamps stepping by more
# are in another unit (ms, µs, a sample counter)
SLOWEST_STEP_S = 0.5
MIN_SAMPLES = 10  # fewer do not make a recording (nor a plan meant to be recorded)
CURRENT = "i:"  # column prefix: a joint's motor current, A
CELL = "cell_kg:"  # column prefix: a load cell's reading, kg (`cell_kg:0` …), at `# cells_xy_m` in the base frame
CELLS_XY = "cells_xy_m"  # metadata: each cell's x y (m) in the base frame, in the cells' plane
TORQUE_CONSTANT = "torque_constant"  # metadata key prefix: `# torque_constant:JOINT: N·m/A`
# what boards measure (their cells' vertical loads); the other wrench columns read 0 when absent
WRENCH_NEEDED = ("fz_n", "mx_nm", "my_nm")
# the motion classes' names, one definition for the whole program (formats is the bottom layer: robots and the
# command line take them from here): a fixed-base robot's, and a biped's standing on two soles or on one
MOTIONS = ("free", "double-support", "single-support")
# `# motion:` of a standing recording (default: double support)
STANDING_MOTIONS = MOTIONS[1:]
# a physics twin's joint truth, one value for every joint (`poise simulate trajectory` writes them; `identify dynamic
# --reference` compares with them): the keys name a revolute joint's units, kept for the recordings written with them
TRUE_JOINT_KEYS = {
    "viscous": "true_viscous_nm_s_rad",
    "coulomb": "true_coulomb_nm",
    "armature": "true_armature_kg_m2",
}
TRUE_JOINT_UNITS = "true_joint_units"  # metadata: the units of the keys above, where a joint is prismatic
# the header keys poise reads: a key a letter or two off one of them is refused as a typo (`read_commented`)
KNOWN_KEYS = ("robot", "base", "angle_unit", "robot_source", "motion", "motion_band_hz", "moment_z_m", CELLS_XY,
              TORQUE_CONSTANT, *TRUE_JOINT_KEYS.values(), TRUE_JOINT_UNITS)  # fmt: skip
_TRUE_UNITS = {"viscous": ("N·m·s/rad", "N·s/m"), "coulomb": ("N·m", "N"), "armature": ("kg·m²", "kg")}


def true_joint_units(joint_names: Sequence[str], prismatic: Sequence[str]) -> dict[str, str]:
    """The header entry naming the units of the twin's joint truth (`TRUE_JOINT_KEYS`) when some of the recorded
    joints are prismatic: each key names a revolute joint's unit, its one value is in N·s/m, N and kg on a prismatic
    joint. {} when none is (the keys' names say it all). The writer adds it to the recording's metadata beside the
    keys."""
    lin = [j for j in joint_names if j in set(prismatic)]
    if not lin:
        return {}
    rot = [j for j in joint_names if j not in set(lin)]
    parts = [", ".join(f"{kind} {units[k]}" for kind, units in _TRUE_UNITS.items()) + f" ({', '.join(names)})"
             for k, names in ((1, lin), (0, rot)) if names]  # fmt: skip
    return {TRUE_JOINT_UNITS: "; ".join(parts)}


@dataclass
class DynamicRecording:
    """Samples in SI units: t (K,), q (K, n), tau (K, n) or None, wrench (K, 6) or None; or, instead of tau, the
    motor currents (K, n) in A with the joints' torque constants (N·m/A, some or all joints)."""

    robot: str
    base: str
    joint_names: list[str]
    t: np.ndarray
    q: np.ndarray
    tau: np.ndarray | None = None
    wrench: np.ndarray | None = None
    meta: dict[str, str] = field(default_factory=dict)
    t_plan: np.ndarray | None = None  # (K,) the plan time commanded at each sample, when a plan was streamed
    current: np.ndarray | None = None  # (K, n) motor currents in A, the alternative to tau
    torque_constant: dict[str, float] = field(default_factory=dict)  # N·m/A at the joint, by joint name
    # (K, m) the load cells' readings in kg behind the wrench (optional; `# cells_xy_m` places them)
    cells: np.ndarray | None = None
    # what messages call it among recordings fitted together (`identify.dynamic`): the path it was read from
    # (`read_dynamic_recording`), a forecast plan's file; "" numbers it ("recording 2"). Not written to the file
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        K, n = len(self.t), len(self.joint_names)
        if self.q.shape != (K, n):
            raise DataError(f"recording: q is {self.q.shape}, expected ({K}, {n})")
        for name, a, cols in (("tau", self.tau, n), ("current", self.current, n), ("wrench", self.wrench, 6)):
            if a is not None and a.shape != (K, cols):
                raise DataError(f"recording: {name} is {a.shape}, expected ({K}, {cols})")
        if self.t_plan is not None and self.t_plan.shape != (K,):
            raise DataError(f"recording: t_plan is {self.t_plan.shape}, expected ({K},)")
        if self.cells is not None:
            if self.wrench is None or self.cells.ndim != 2 or self.cells.shape[0] != K:
                raise DataError(
                    f"recording: cell loads are {self.cells.shape}: ({K}, cells), beside a wrench"
                )
            self.cell_xy()  # their positions, checked
        if self.tau is None and self.current is None and self.wrench is None:
            raise DataError(
                "recording has neither joint efforts (tau:… or currents i:…) nor a wrench (fx_n…)"
            )
        if self.tau is not None and self.current is not None:
            raise DataError("recording has both joint torques (tau:…) and motor currents (i:…): keep one")
        for name, a in (("t", self.t), ("q", self.q), ("tau", self.tau), ("current", self.current),
                        ("wrench", self.wrench), ("t_plan", self.t_plan), ("cells", self.cells)):  # fmt: skip
            if a is not None and not np.all(np.isfinite(a)):
                raise DataError(f"recording: {name} contains NaN or infinite values")
        _check_constants(self.torque_constant, self.joint_names, "torque_constant")
        if K < MIN_SAMPLES:
            raise DataError(f"recording has {K} samples; need at least {MIN_SAMPLES}")
        if np.any(np.diff(self.t) <= 0):
            raise DataError("recording: time stamps must strictly increase")
        step = float(np.median(np.diff(self.t)))
        if step > SLOWEST_STEP_S:
            raise DataError(
                f"recording: median time step {step:.4g} s ({1 / step:.3g} Hz), too slow to resolve a motion's "
                f"dynamics (at most {SLOWEST_STEP_S:g} s); are the time stamps in ms? t_s is in seconds"
            )

    def cell_xy(self) -> np.ndarray:
        """The load cells' positions (m, cells × 2) in the base frame, from `# cells_xy_m` (cells recorded)."""
        try:
            xy = np.array([float(v) for v in str(self.meta.get(CELLS_XY, "")).split()], dtype=float)
        except ValueError:
            xy = np.array([np.nan])
        m = 0 if self.cells is None else self.cells.shape[1]
        if xy.shape != (2 * m,) or not np.all(np.isfinite(xy)):
            raise DataError(f"recording: {CELLS_XY} must give x y (m) of each of its {m} cells")
        return xy.reshape(m, 2)

    @property
    def motion(self) -> str:
        """A standing recording's motion: `single-support` (the other sole free) or `double-support` (default)."""
        return self.meta.get("motion", STANDING_MOTIONS[0])

    @property
    def rate_hz(self) -> float:
        return float((len(self.t) - 1) / (self.t[-1] - self.t[0]))


def in_joint_order(rec: DynamicRecording, names: Sequence[str]) -> DynamicRecording:
    """The recording with its joint columns in the order `names` gives (a robot's); DataError naming the joints
    missing from it or not among `names`."""
    names = list(names)
    if list(rec.joint_names) == names:
        return rec
    missing = [j for j in names if j not in rec.joint_names]
    unknown = [j for j in rec.joint_names if j not in names]
    if missing or unknown:
        raise DataError("the recording's joints are not the robot's: "
                        + "; ".join(f"{w} {', '.join(js)}" for w, js in (("missing", missing),
                                    ("not the robot's", unknown)) if js))  # fmt: skip
    k = [rec.joint_names.index(j) for j in names]
    return replace(rec, joint_names=names, q=rec.q[:, k], tau=None if rec.tau is None else rec.tau[:, k],
                   current=None if rec.current is None else rec.current[:, k])  # fmt: skip


def _check_constants(constants: Mapping[str, float], joint_names: Sequence[str], what: str) -> None:
    """Torque constants name known joints and are positive and finite (N·m/A): DataError naming the first bad one."""
    unknown = [j for j in constants if j not in joint_names]
    if unknown:
        raise DataError(f"{what}: no joint {', '.join(unknown)} (joints: {', '.join(joint_names)})")
    for j, k in constants.items():
        try:
            ok = math.isfinite(float(k)) and float(k) > 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise DataError(f"{what} of {j}: must be a positive finite number (N·m/A), got {k}")


def _header(
    robot: str,
    base: str,
    joint_names: list[str],
    tau: bool,
    wrench: bool,
    meta: dict,
    t_plan: bool = False,
    current: bool = False,
    torque_constant: Mapping[str, float] | None = None,
    cells: int = 0,
) -> str:
    """The metadata lines and the column header (radians, SI units); a board-wrench recording's `# motion:` line
    always (the default written out: identify dynamic checks the other sole against it)."""
    cols = ["t_s"] + [f"q:{j}" for j in joint_names]
    cols += [f"tau:{j}" for j in joint_names] if tau else []
    cols += [f"{CURRENT}{j}" for j in joint_names] if current else []
    cols += WRENCH if wrench else []
    cols += [f"{CELL}{c}" for c in range(cells)]
    cols += [T_PLAN] if t_plan else []
    head = f"# {MAGIC} v{VERSION}\n# robot: {robot}\n# base: {base}\n# angle_unit: rad\n"
    if wrench and not (tau or current) and "motion" not in meta:  # a board wrench says its motion class
        head += f"# motion: {STANDING_MOTIONS[0]}\n"
    for k, v in meta.items():
        if k not in ("magic", "robot", "base", "angle_unit", TORQUE_CONSTANT):  # written above, or below
            head += f"# {k}: {v}\n"
    for j, k in (torque_constant or {}).items():
        head += f"# {TORQUE_CONSTANT}:{j}: {float(k)!r}\n"  # repr: the exact float back
    return head + ",".join(cols) + "\n"


def write_dynamic_recording(rec: DynamicRecording, path: str | Path) -> None:
    """Write atomically (temp file, then rename), radians and SI units."""
    blocks = [rec.t[:, None], rec.q] + [
        a for a in (rec.tau, rec.current, rec.wrench, rec.cells) if a is not None
    ]
    blocks += [rec.t_plan[:, None]] if rec.t_plan is not None else []
    buf = io.StringIO()
    buf.write(_header(rec.robot, rec.base, rec.joint_names, rec.tau is not None, rec.wrench is not None,
                      rec.meta, rec.t_plan is not None, rec.current is not None,
                      rec.torque_constant, 0 if rec.cells is None else rec.cells.shape[1]))  # fmt: skip
    np.savetxt(buf, np.hstack(blocks), delimiter=",", fmt="%.10g")
    write_text_atomic(path, buf.getvalue(), "recording")


class DynamicRecordingAppender:
    """A dynamic recording written while it is recorded: whole lines only, synced every `sync_s` seconds off the
    recording thread and on close (`SyncedLines`), so a killed run leaves a readable file holding what was
    recorded."""

    def __init__(
        self,
        path: str | Path,
        robot: str,
        base: str,
        joint_names: list[str],
        tau: bool,
        wrench: bool,
        meta: dict | None = None,
        sync_s: float = SYNC_S,
        t_plan: bool = False,
        current: bool = False,
        torque_constant: Mapping[str, float] | None = None,
        cells: int = 0,
    ) -> None:
        """`cells`: how many load cells' readings (kg) each row carries beside the wrench (`meta` places them)."""
        if tau and current:
            raise DataError("recording: joint torques (tau:…) or motor currents (i:…), not both")
        if cells and (not wrench or len(str((meta or {}).get(CELLS_XY, "")).split()) != 2 * cells):
            raise DataError(
                f"recording: {cells} cells beside a wrench need '{CELLS_XY}' with x y (m) of each"
            )
        _check_constants(torque_constant or {}, joint_names, TORQUE_CONSTANT)
        self.n, self.tau, self.wrench = len(joint_names), tau, wrench
        self.t_plan, self.current, self.cells = t_plan, current, cells
        self.rows = 0
        header = _header(
            robot, base, joint_names, tau, wrench, meta or {}, t_plan, current, torque_constant, cells
        )
        self._lines = SyncedLines(path, header, sync_s)
        self._lines.sync()  # a reader finds the header at once

    def append(
        self,
        t: float,
        q: np.ndarray,
        tau: np.ndarray | None = None,
        wrench: np.ndarray | None = None,
        t_plan: float | None = None,
        current: np.ndarray | None = None,
        cells: np.ndarray | None = None,
    ) -> None:
        """One sample (s, rad, N·m, N, s, A, kg); the columns the file was opened with must all be given."""
        vals = [np.atleast_1d(float(t)), np.asarray(q, dtype=float).reshape(self.n)]
        tp = None if t_plan is None else np.atleast_1d(float(t_plan))
        for name, on, a, k in (("tau", self.tau, tau, self.n), ("current", self.current, current, self.n),
                               ("wrench", self.wrench, wrench, 6), ("cells", self.cells > 0, cells, self.cells),
                               ("t_plan", self.t_plan, tp, 1)):  # fmt: skip
            if on != (a is not None):
                raise DataError(f"recording row: {name} {'missing' if on else 'not a column of this file'}")
            if a is not None:
                vals.append(np.asarray(a, dtype=float).reshape(k))
        self._lines.add(",".join(f"{v:.10g}" for v in np.concatenate(vals)))
        self.rows += 1

    def close(self) -> None:
        self._lines.close()


def is_dynamic_recording(path: str | Path) -> bool:
    """True when the file opens with the format's first line (for commands taking a recording or a plan)."""
    try:
        with open(path, "rb") as fh:
            first = fh.read(256).decode("utf-8", errors="replace").lstrip("\ufeff").split("\n", 1)[0]
    except OSError:
        return False
    return first.startswith("#") and first[1:].strip().startswith(MAGIC)


def _read_constants(comments: list[str], path: Path) -> dict[str, float]:
    """The `# torque_constant:JOINT: VALUE` lines among a file's comment lines (N·m/A, by joint)."""
    out: dict[str, float] = {}
    for line in comments:
        key, _, rest = line.lstrip("#").strip().partition(":")
        if key.strip() != TORQUE_CONSTANT:
            continue
        joint, sep, value = (x.strip() for x in rest.rpartition(":"))
        if not sep or not joint:
            raise DataError(f"{path}: {line.strip()!r}: expected '# {TORQUE_CONSTANT}:JOINT: VALUE' (N·m/A)")
        if joint in out:
            raise DataError(f"{path}: {TORQUE_CONSTANT} of {joint} given twice")
        try:
            out[joint] = float(value)
        except ValueError:
            raise DataError(f"{path}: {TORQUE_CONSTANT} of {joint}: not a number ({value!r})") from None
    return out


def refuse_recording(path: str, command: str, reads: str = "plans") -> None:
    """DataError when `path` is a dynamic recording (CSV) named where `command` reads `reads` (JSON): what it is
    and which command reads it, rather than a JSON parser's first complaint. Every plan reader's one check."""
    if is_dynamic_recording(path):
        raise DataError(f"{path}: a dynamic recording; `poise {command}` reads {reads} (JSON) — `poise identify "
                        "dynamic` reads recordings")  # fmt: skip


def _what_else(lines: list[str], reader: str) -> str:
    """What a file that is not a dynamic recording is instead, when a JSON document (a plan, a parameter set), as
    the start of its refusal ("" when not JSON)."""
    import json

    from formats.json_format import format_name

    text = "\n".join(lines)
    if not text.lstrip().startswith(("{", "[")):
        return ""
    try:
        doc = json.loads(text)
    except ValueError:
        return ""
    name = format_name(doc)
    if name is not None:
        what = f"{name} (JSON)"
    elif isinstance(doc, dict) and "parameters" in doc and "robot" in doc:
        what = "an identification result (JSON)"
    else:
        what = "a JSON file"
    record = (": `poise run PLAN --out DIR` or `poise simulate trajectory PLAN --out REC.csv` records one"
              if name == "a trajectory plan" else "")  # fmt: skip
    return f"{what}, not a recording: {reader or 'this command'} reads dynamic recordings (CSV){record}"


def read_dynamic_recording(path: str | Path, reader: str = "") -> DynamicRecording:
    """Read and validate a dynamic recording: one-line DataError naming the file (and line and column) on anything
    malformed — a folder, or another poise file (a trajectory plan) given for it, named as such, with what the
    command (`reader`, e.g. "identify dynamic") reads. Effort and current columns are taken by joint name, in the q
    columns' order. Its `label` is `path` as given, as the commands name the file."""
    label = str(path)
    path = Path(path)
    if path.is_dir():
        inside = path / "recording.csv"
        raise DataError(f"{path}: a folder, not a recording"
                        + (f"; give the recording in it: {inside}" if inside.is_file() else
                           " (a dynamic recording is a CSV file; `poise run` writes one as recording.csv in its --out "
                           "folder)"))  # fmt: skip
    meta, lines, i = read_commented(path, repeatable=(TORQUE_CONSTANT,), known=KNOWN_KEYS)
    magic = meta.get("magic", "")
    if not magic.startswith(MAGIC):
        other = _what_else(lines, reader)
        raise DataError(f"{path}: {other}" if other else f"{path}: not a poise dynamic recording (first line must be "
                        f"'# {MAGIC} v{VERSION}')")  # fmt: skip
    if magic != f"{MAGIC} v{VERSION}":
        raise DataError(f"{path}: '# {magic}': this poise reads '# {MAGIC} v{VERSION}'")
    for key in ("robot", "base"):
        if key not in meta:
            raise DataError(f"{path}: missing '# {key}: …' line")
    meta.pop(TORQUE_CONSTANT, None)  # `torque_constant:JOINT: …` lines: read on their own, below
    constants = _read_constants(lines[:i], path)
    unit = meta.get("angle_unit", "rad")
    if unit not in ANGLE_UNITS:
        raise DataError(f"{path}: angle_unit {unit!r} unknown (rad or deg)")
    numbered = [(i + 1 + k, r) for k, r in enumerate(csv.reader(lines[i:]))]  # (line number, row)
    if not numbered:
        raise DataError(f"{path}: no header row")
    header = [c.strip() for c in numbered[0][1]]
    body = [(n, r) for n, r in numbered[1:] if r]  # blank lines skipped, their numbers kept
    if "" in header:
        k = header.index("")
        last = k == len(header) - 1
        raise DataError(f"{path}, line {numbered[0][0]}: an empty column name (column {k + 1} of "
                        f"{len(header)}{', the last' if last else ''})"
                        + (": a trailing comma at the end of each row? remove it" if last else
                           ": every column needs its name (README: the dynamic recording)"))  # fmt: skip
    if "t_s" not in header:
        raise DataError(f"{path}: no t_s column (the time stamps, s)")
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise DataError(f"{path}: columns given twice: {', '.join(twice)}")
    joints = [c[2:] for c in header if c.startswith("q:")]
    tau_cols = [c[4:] for c in header if c.startswith("tau:")]
    cur_cols = [c[len(CURRENT) :] for c in header if c.startswith(CURRENT)]
    if tau_cols and cur_cols:
        both = [j for j in tau_cols if j in cur_cols]
        raise DataError(
            f"{path}: both torque (tau:…) and motor current (i:…) columns"
            + (f", for {', '.join(both)}" if both else "")
            + ": a recording holds one or the other, for every joint"
        )
    for prefix, cols in (("tau:", tau_cols), (CURRENT, cur_cols)):
        no_q = [j for j in cols if j not in joints]
        if no_q:
            raise DataError(f"{path}: the q:{' q:'.join(no_q)} column{'s are' if len(no_q) > 1 else ' is'} missing "
                            f"(the angles beside {', '.join(prefix + j for j in no_q)}; q columns: "
                            f"{', '.join('q:' + j for j in joints) or 'none'})")  # fmt: skip
    for what, cols in (("tau", tau_cols), ("current (i:)", cur_cols)):
        if cols and sorted(cols) != sorted(joints):
            missing, unknown = [j for j in joints if j not in cols], [j for j in cols if j not in joints]
            raise DataError(f"{path}: {what} columns must name the q columns' joints: "
                            + "; ".join(f"{w} {', '.join(js)}" for w, js in (("missing", missing),
                                        ("not among the q columns", unknown)) if js))  # fmt: skip
    wrench_cols = [w for w in WRENCH if w in header]
    if wrench_cols and not all(w in wrench_cols for w in WRENCH_NEEDED):
        raise DataError(f"{path}: a board wrench needs {', '.join(WRENCH_NEEDED)}; missing "
                        f"{', '.join(w for w in WRENCH_NEEDED if w not in wrench_cols)}")  # fmt: skip
    if meta.get("motion", STANDING_MOTIONS[0]) not in STANDING_MOTIONS:  # told by what the columns record
        motion = meta["motion"]
        raise DataError(
            f"{path}: motion {motion!r} unknown: {STANDING_MOTIONS[0]} (the default) or {STANDING_MOTIONS[1]}"
            if wrench_cols
            else f"{path}: '# motion: {motion}': the line names a standing recording's class (board wrench columns: "
            f"{' or '.join(STANDING_MOTIONS)}); this one has none, a fixed-base robot's joint efforts: drop the line"
        )
    has_plan = T_PLAN in header
    cell_cols = [c for c in header if c.startswith(CELL)]
    if cell_cols != [f"{CELL}{k}" for k in range(len(cell_cols))]:
        raise DataError(f"{path}: cell columns must be {CELL}0, {CELL}1, … in order, got {cell_cols}")
    extra = [
        c
        for c in header
        if not (c in ("t_s", T_PLAN) or c.startswith(("q:", "tau:", CURRENT, CELL)) or c in WRENCH)
    ]
    if extra:
        raise DataError(f"{path}: unknown columns {extra} (README: the dynamic recording)")
    if not body:
        raise DataError(f"{path}: no samples (a header only: the run recorded nothing)")
    data = np.empty((len(body), len(header)))
    for k, (line, r) in enumerate(body):
        if len(r) != len(header):
            raise DataError(f"{path}, line {line}: {len(r)} values for {len(header)} columns")
        for c, x in enumerate(r):
            try:
                data[k, c] = float(x)
            except ValueError:
                raise DataError(f"{path}, line {line}, column {header[c]}: not a number ({x!r})") from None
    bad = ~np.isfinite(data)
    if bad.any():
        k, c = np.argwhere(bad)[0]
        raise DataError(f"{path}, line {body[k][0]}, column {header[c]}: {body[k][1][c].strip()} (NaN or "
                        "infinite values are not samples: drop the row or fill it)")  # fmt: skip
    col = {c: k for k, c in enumerate(header)}
    ct = col["t_s"]
    back = np.flatnonzero(np.diff(data[:, ct]) <= 0)
    if back.size:
        k = int(back[0]) + 1
        raise DataError(f"{path}, line {body[k][0]}: t_s {body[k][1][ct].strip()} does not follow "
                        f"{body[k - 1][1][ct].strip()} (time stamps must strictly increase)")  # fmt: skip
    raw = data[:, [col[f"q:{j}"] for j in joints]]
    check_angle_unit(raw, unit, str(path), rad_limit=False)  # continuous joints may wind past 2π
    q = raw * ANGLE_UNITS[unit]
    tau = data[:, [col[f"tau:{j}"] for j in joints]] if tau_cols else None
    current = data[:, [col[f"{CURRENT}{j}"] for j in joints]] if cur_cols else None
    wrench = None
    if wrench_cols:
        wrench = np.column_stack([data[:, col[w]] if w in col else np.zeros(len(data)) for w in WRENCH])
        if float(np.mean(wrench[:, 2])) < 0:
            raise DataError(
                f"{path}: fz_n averages {np.mean(wrench[:, 2]):.4g} N: the wrench is the boards' push on the "
                "robot (Fz ≈ +m·g standing); this one looks like the robot's on the boards: negate it"
            )
    t_plan = data[:, col[T_PLAN]] if has_plan else None
    cells = data[:, [col[c] for c in cell_cols]] if cell_cols else None
    try:
        return DynamicRecording(meta["robot"], meta["base"], joints, data[:, col["t_s"]], q, tau, wrench, meta, t_plan,
                                current, constants, cells, label)  # fmt: skip
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from None


def torque_constants(
    joint_names: Sequence[str],
    recorded: Mapping[str, float],
    given: float | Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Each joint's torque constant (N·m/A): `given` (one for every joint, or some joints') over `recorded` (the
    recording's metadata). DataError naming the joints left without one, or a bad or unknown one."""
    if given is not None and not isinstance(given, Mapping):
        given = dict.fromkeys(joint_names, given)
    _check_constants(given or {}, joint_names, "--torque-constant")
    out = {j: (given or {}).get(j, recorded.get(j)) for j in joint_names}
    missing = [j for j, k in out.items() if k is None]
    if missing:
        raise DataError(
            f"motor currents (i:…) without a torque constant for {', '.join(missing)}: add "
            f"'# {TORQUE_CONSTANT}:JOINT: VALUE' lines (N·m/A) to the recording or give --torque-constant"
        )
    return {j: float(k) for j, k in out.items()}


def efforts_from_currents(
    rec: DynamicRecording, given: float | Mapping[str, float] | None = None
) -> DynamicRecording:
    """The recording with its motor currents turned into joint efforts, current × torque constant (N·m; the
    constants by `torque_constants`, kept in the result's `torque_constant`); a recording without currents as is."""
    if rec.current is None:
        return rec
    k = torque_constants(rec.joint_names, rec.torque_constant, given)
    tau = rec.current * np.array([k[j] for j in rec.joint_names])
    return replace(rec, tau=tau, current=None, torque_constant=k)
