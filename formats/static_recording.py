"""The static recording format: one CSV row per measured posture, with `#` metadata lines on top.

```
# poise static recording v1
# robot: tulip
# base: right
# angle_unit: rad
# length_unit: m
posture,placement,theta1,...,theta12,cop_x,cop_y[,cop_sd_x,cop_sd_y,force_n,samples]
```
Angles in radians, lengths in metres (``deg``/``mm`` are accepted when declared), CoP in the base-foot
frame (x forward, y left, origin on the ground under the base ankle). Rows can be appended one posture at
a time, so a logger can write it incrementally; `RecordingWriter` flushes and fsyncs each row.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from formats.atomic import write_text_atomic
from formats.commented_csv import check_delimiter, read_text
from formats.errors import DataError
from formats.units import ANGLE_UNITS, LENGTH_UNITS, check_angle_unit, check_length_unit

MAGIC = "poise static recording"
VERSION = 1
OPTIONAL_COLUMNS = ["cop_sd_x", "cop_sd_y", "force_n", "samples"]
# Header keys the writer owns: a recording's `meta` never overrides them (it may hold values read from a file
# in other units, which the written numbers — always rad and m — no longer have).
RESERVED_META = ("robot", "base", "angle_unit", "length_unit")


@dataclass
class StaticRecording:
    """Per-posture joint angles and measured CoP (SI units)."""

    robot: str
    base: str
    joint_names: list[str]
    posture: np.ndarray  # (m,) int
    placement: np.ndarray  # (m,) int
    q: np.ndarray  # (m, nq) rad
    cop: np.ndarray  # (m, 2) m
    cop_sd: np.ndarray | None = None  # (m, 2) m, spread (SD) of the CoP samples averaged, per sample
    force: np.ndarray | None = None  # (m,) N
    samples: np.ndarray | None = None  # (m,) samples averaged per posture
    meta: dict[str, str] = field(default_factory=dict)
    # why cop_sd is implausible (smaller than any force plate's spread: written in another unit), None if it is not;
    # refused where the spreads are used (weighted fits), a warning where they are not
    spread_issue: str | None = None

    def __len__(self) -> int:
        return len(self.posture)


def _header(
    robot: str, base: str, joint_names: list[str], extra_meta: dict[str, str] | None, optional: list[str]
):
    lines = [
        f"# {MAGIC} v{VERSION}",
        f"# robot: {robot}",
        f"# base: {base}",
        "# angle_unit: rad",
        "# length_unit: m",
    ]
    for k, v in (extra_meta or {}).items():
        if k.lower() not in RESERVED_META:
            lines.append(f"# {k}: {v}")
    cols = ["posture", "placement", *joint_names, "cop_x", "cop_y", *optional]
    return "\n".join(lines) + "\n" + ",".join(cols) + "\n"


def _row(posture: int, placement: int, q, cop, extra: dict[str, float], optional: list[str]) -> str:
    vals = [str(int(posture)), str(int(placement))]
    vals += [repr(float(v)) for v in q] + [repr(float(c)) for c in cop]
    vals += [_optional(k, extra.get(k)) for k in optional]
    return ",".join(vals) + "\n"


def _optional(key: str, value) -> str:
    """An optional column's cell: blank for none or a non-finite value; `samples` a whole count."""
    if value is None or not math.isfinite(value):
        return ""
    return str(int(value)) if key == "samples" else repr(float(value))


def write_recording(path: str | Path, rec: StaticRecording) -> None:
    """Write a whole recording (atomically: temp file, then rename); NaN/inf angles or CoPs are refused."""
    if not (np.all(np.isfinite(rec.q)) and np.all(np.isfinite(rec.cop))):
        raise DataError(f"{path}: NaN or infinite joint angles or CoPs; refusing to write the recording")
    optional = [
        k
        for k, v in (("cop_sd_x", rec.cop_sd), ("force_n", rec.force), ("samples", rec.samples))
        if v is not None
    ]
    optional = (["cop_sd_x", "cop_sd_y"] if "cop_sd_x" in optional else []) + [
        k for k in optional if k != "cop_sd_x"
    ]
    buf = io.StringIO()
    buf.write(_header(rec.robot, rec.base, rec.joint_names, rec.meta, optional))
    for i in range(len(rec)):
        extra = {}
        if rec.cop_sd is not None:
            extra.update(cop_sd_x=rec.cop_sd[i, 0], cop_sd_y=rec.cop_sd[i, 1])
        if rec.force is not None:
            extra["force_n"] = rec.force[i]
        if rec.samples is not None:
            extra["samples"] = rec.samples[i]
        buf.write(_row(rec.posture[i], rec.placement[i], rec.q[i], rec.cop[i], extra, optional))
    write_text_atomic(path, buf.getvalue(), "recording")


class RecordingWriter:
    """Appends postures to a recording file, flushing and fsyncing every row so a killed run loses nothing."""

    def __init__(
        self,
        path: str | Path,
        robot: str,
        base: str,
        joint_names: list[str],
        meta: dict[str, str] | None = None,
        optional: list[str] | None = None,
    ):
        self.path = Path(path)
        self.optional = list(OPTIONAL_COLUMNS if optional is None else optional)
        self.done: set[int] = set()
        if self.path.exists() and self.path.stat().st_size > 0:
            existing = read_recording(self.path, allow_partial_last_line=True)
            if existing.joint_names != list(joint_names) or existing.base != base:
                raise DataError(f"{self.path}: existing recording has a different robot/base; use a new file")
            self.done = set(int(p) for p in existing.posture)
            self.optional = [c for c in _columns(self.path) if c in OPTIONAL_COLUMNS]
            _truncate_partial_line(self.path)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (long-lived handle)
        else:
            self._fh = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
            self._fh.write(_header(robot, base, list(joint_names), meta, self.optional))
            self._sync()

    def append(self, posture: int, placement: int, q, cop, **extra: float) -> None:
        """Write one posture row; a posture already in the file is refused (no duplicates on resume)."""
        if int(posture) in self.done:
            raise DataError(f"posture {posture} is already recorded in {self.path}")
        q, cop = np.asarray(q, dtype=float), np.asarray(cop, dtype=float)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(cop))):
            raise DataError(f"posture {posture}: NaN in joint angles or CoP, not recorded")
        self._fh.write(_row(posture, placement, q, cop, extra, self.optional))
        self._sync()
        self.done.add(int(posture))

    def _sync(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _columns(path: Path) -> list[str]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            return [c.strip() for c in line.split(",")]
    return []


def _truncate_partial_line(path: Path) -> None:
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


def _parse_meta(path: Path, lines: list[str]) -> tuple[dict[str, str], int | None]:
    """The `# key: value` lines (checked: format line, version, robot and base present) and the header's line index."""
    meta: dict[str, str] = {}
    body_start = None
    for n, line in enumerate(lines):
        if line.startswith("#"):
            content = line[1:].strip()
            if ":" in content:
                k, v = (s.strip() for s in content.split(":", 1))
                k = k.lower()
                if k in RESERVED_META and k in meta and meta[k] != v:
                    raise DataError(f"{path}: conflicting '# {k}:' lines ({meta[k]!r} and {v!r})")
                meta[k] = v
            elif content.lower().startswith(MAGIC):
                meta["_magic"] = content
        elif line.strip():
            body_start = n
            break
    if "_magic" not in meta:
        raise DataError(f"{path}: not a poise static recording (first line must be '# {MAGIC} v{VERSION}')")
    version = meta["_magic"][len(MAGIC) :].strip().lstrip("v")
    if version != str(VERSION):
        raise DataError(f"{path}: recording format version {version!r} is not supported (expected {VERSION})")
    for key in ("robot", "base"):
        if key not in meta:
            raise DataError(f"{path}: missing metadata line '# {key}: …'")
    return meta, body_start


def read_meta(path: str | Path) -> dict[str, str]:
    """A recording's metadata lines only (robot, base, robot_source, …): to find the robot before reading rows."""
    path = Path(path)
    meta, _ = _parse_meta(path, read_text(path, "a poise static recording").splitlines())
    return {k: v for k, v in meta.items() if not k.startswith("_")}


def read_recording(
    path: str | Path,
    joint_names: list[str] | None = None,
    allow_partial_last_line: bool = False,
    bases: Collection[str] | None = None,
) -> StaticRecording:
    """Read and validate a recording; every problem is a `DataError` naming the file, line and column.

    With `joint_names` / `bases` (from the robot model) the joint columns and the base are checked too.
    """
    path = Path(path)
    text = read_text(path, "a poise static recording")
    if allow_partial_last_line and text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    lines = text.splitlines()
    meta, body_start = _parse_meta(path, lines)
    if bases is not None and meta["base"] not in bases:
        raise DataError(
            f"{path}: base {meta['base']!r} is not a base of the robot (allowed: {', '.join(sorted(bases))})"
        )
    aunit = meta.get("angle_unit", "rad")
    lunit = meta.get("length_unit", "m")
    if aunit not in ANGLE_UNITS:
        raise DataError(f"{path}: angle_unit {aunit!r} not understood (use rad or deg)")
    if lunit not in LENGTH_UNITS:
        raise DataError(f"{path}: length_unit {lunit!r} not understood (use m or mm)")
    if body_start is None:
        raise DataError(f"{path}: no column header line")
    check_delimiter(path, lines[body_start])
    reader = csv.reader(lines[body_start:])
    header = [c.strip() for c in next(reader)]
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise DataError(f"{path}: column(s) {', '.join(repeated)} appear more than once in the header")
    jnames = [c for c in header if c not in ("posture", "placement", "cop_x", "cop_y", *OPTIONAL_COLUMNS)]
    missing = [c for c in ("posture", "cop_x", "cop_y") if c not in header]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
    if joint_names is not None:
        _check_joint_columns(path, jnames, list(joint_names))
    rows, linenos = [], []
    for k, row in enumerate(reader):
        lineno = body_start + 2 + k
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise DataError(f"{path}, line {lineno}: {len(row)} values for {len(header)} columns")
        vals = {}
        for col, cell in zip(header, row, strict=True):
            cell = cell.strip()
            if cell == "" and col in OPTIONAL_COLUMNS:
                vals[col] = math.nan
                continue
            try:
                vals[col] = float(cell)
            except ValueError:
                raise DataError(f"{path}, line {lineno}, column {col}: {cell!r} is not a number") from None
            if not math.isfinite(vals[col]):
                raise DataError(f"{path}, line {lineno}, column {col}: value is {cell} (NaN/inf not allowed)")
        rows.append(vals)
        linenos.append(lineno)
    if not rows:
        raise DataError(f"{path}: no postures recorded")
    col = lambda c: np.array([r[c] for r in rows])  # noqa: E731
    q = np.stack([col(j) for j in jnames], axis=1)
    check_angle_unit(q, aunit, str(path))
    q = q * ANGLE_UNITS[aunit]
    cop = np.stack([col("cop_x"), col("cop_y")], axis=1)
    check_length_unit(cop, lunit, str(path))
    cop = cop * LENGTH_UNITS[lunit]
    posture = _integers(path, linenos, col("posture"), "posture")
    if len(set(posture.tolist())) != len(posture):
        dup = sorted({p for p in posture.tolist() if (posture == p).sum() > 1})
        raise DataError(f"{path}: posture index repeated: {dup}")
    placement = (
        _integers(path, linenos, col("placement"), "placement", posture)
        if "placement" in header
        else np.zeros(len(rows), dtype=int)
    )
    opt = {c: col(c) for c in OPTIONAL_COLUMNS if c in header}
    cop_sd, spread_issue = None, None
    if "cop_sd_x" in opt and "cop_sd_y" in opt:
        raw_sd = np.stack([opt["cop_sd_x"], opt["cop_sd_y"]], axis=1)
        cop_sd = _spreads(path, linenos, posture, raw_sd, lunit)
        spread_issue = None if cop_sd is None else _tiny_spreads(path, raw_sd, lunit)
    if "force_n" in opt:
        _positive(path, linenos, posture, opt["force_n"], "force_n", "the load on the boards, in N")
    if "samples" in opt:
        _positive(path, linenos, posture, opt["samples"], "samples", "the count of CoP samples averaged")
        _integers(path, linenos, np.nan_to_num(opt["samples"], nan=1.0), "samples", posture)
    extra_meta = {k: v for k, v in meta.items() if not k.startswith("_")}
    return StaticRecording(
        robot=meta["robot"],
        base=meta["base"],
        joint_names=jnames,
        posture=posture,
        placement=placement,
        q=q,
        cop=cop,
        cop_sd=cop_sd,
        force=opt.get("force_n"),
        samples=opt.get("samples"),
        meta=extra_meta,
        spread_issue=spread_issue,
    )


# no CoP sample can spread a metre about its mean on a support polygon a robot stands on: a larger "m" spread is in mm
SPREAD_MAX_M = 1.0
# nor does any force plate's CoP spread less than 10 µm, in either unit: a smaller spread is in another unit (in mm
# files, m); refused where it weights a fit (`StaticRecording.spread_issue`)
SPREAD_MIN_M = 1e-5


def _check_joint_columns(path: Path, jnames: list[str], model_joints: list[str]) -> None:
    """The joint columns must be the model's joints in its order; columns that are not joints are named."""
    unknown = [c for c in jnames if c not in model_joints]
    if unknown:
        raise DataError(
            f"{path}: column(s) {', '.join(unknown)} are not joints of the robot (its joints: "
            f"{', '.join(model_joints)}; the other columns are {', '.join(['posture', 'placement', 'cop_x', 'cop_y', *OPTIONAL_COLUMNS])})"
        )
    absent = [j for j in model_joints if j not in jnames]
    if absent:
        raise DataError(
            f"{path}: {len(jnames)} joint columns, the model has {len(model_joints)}: {', '.join(absent)} missing"
        )
    if jnames != model_joints:
        raise DataError(f"{path}: joint columns {jnames} are not in the model's order {model_joints}")


def _integers(
    path: Path, linenos: list[int], values: np.ndarray, column: str, posture: np.ndarray | None = None
) -> np.ndarray:
    """Index columns hold whole numbers: 0.5 is not silently posture 0. Errors name the posture where it is known
    (`posture`), as the other columns' do."""
    bad = np.flatnonzero(values != np.round(values))
    if bad.size:
        k = bad[0]
        where = f"line {linenos[k]}" + ("" if posture is None else f" (posture {posture[k]})")
        raise DataError(f"{path}, {where}, column {column}: {values[k]:g} is not a whole number")
    return values.astype(int)


def _positive(
    path: Path, linenos: list[int], posture: np.ndarray, values: np.ndarray, column: str, what: str
):
    """An optional column's filled cells must be positive (`what` it holds says why): blank cells pass."""
    bad = np.flatnonzero(values <= 0)
    if bad.size:
        k = bad[0]
        more = f" ({bad.size} postures in all)" if bad.size > 1 else ""
        raise DataError(
            f"{path}, line {linenos[k]} (posture {posture[k]}), column {column}: {values[k]:g} is not positive "
            f"({what}){more}"
        )


def _spreads(
    path: Path, linenos: list[int], posture: np.ndarray, raw: np.ndarray, lunit: str
) -> np.ndarray | None:
    """The CoP spreads in m (blank cells NaN; None when all are blank): negative or mm-sized ones refused."""
    if np.all(np.isnan(raw)):
        return None
    neg = np.flatnonzero(np.any(raw < 0, axis=1))
    if neg.size:
        k = neg[0]
        more = f" ({neg.size} postures in all)" if neg.size > 1 else ""
        raise DataError(f"{path}, line {linenos[k]} (posture {posture[k]}): negative cop_sd{more}")
    sd = raw * LENGTH_UNITS[lunit]
    if np.nanmax(sd) > SPREAD_MAX_M:
        raise DataError(
            f"{path}: cop_sd up to {np.nanmax(raw):g} {lunit} — a CoP cannot spread that far; these look like mm: "
            f"write cop_sd in the file's length unit ({lunit}), as cop_x/cop_y"
        )
    return sd


def _tiny_spreads(path: Path, raw: np.ndarray, lunit: str) -> str | None:
    """Why cop_sd is smaller than any force plate's CoP spread, in either length unit (None: it is not); the
    caller refuses it where the spreads weight the fit and warns where they are not used."""
    top = float(np.nanmax(raw)) * LENGTH_UNITS[lunit]
    if not 0 < top < SPREAD_MIN_M:
        return None
    smaller = {"m": "written in a smaller unit than m?", "mm": "these look like m"}.get(
        lunit, "another unit?"
    )
    return (f"{path}: cop_sd at most {np.nanmax(raw):g} {lunit} — no force plate's CoP spreads less than "
            f"{SPREAD_MIN_M / LENGTH_UNITS[lunit]:g} {lunit}; {smaller}: write cop_sd in the file's length unit "
            f"({lunit}), as cop_x/cop_y")  # fmt: skip
