"""Loss-free run recording: raw time-stamped samples plus the per-posture static recording.

RUN_DIR/
  recording.csv   per-posture averages, the static recording format (formats/static_recording.py)
  raw_joints.csv  every control tick: t (unix s: the run's start plus the bench clock since), segment, posture, phase, q_cmd (12), q_meas (12), rad
  raw_boards.csv  every board report: t, segment, posture, phase, board, seq, raw (4), kg (4, tared)
  run.json        run metadata (plan and its sha256, endpoints, segments with their completed postures,
                  tare offsets, counters), rewritten atomically after every posture
Raw files are appended (a resumed run adds a new `segment`), flushed at least every second and fsynced at
the end of each posture, right before the posture's row is written to recording.csv. A folder whose
recording holds no posture yet (a run that failed before its first one) is started afresh, with or without
--resume; --resume with a different plan (sha256 of its canonical JSON) is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import time

import numpy as np

from drivers.clock import Clock
from drivers.run_files import write_run_meta
from formats.errors import DataError
from formats.plan import Plan, plan_to_dict
from formats.static_recording import RecordingWriter, read_recording

RUN_FILES = ("recording.csv", "raw_joints.csv", "raw_boards.csv", "run.json")


def plan_sha256(plan: Plan) -> str:
    """sha256 of the plan's canonical JSON (sorted keys, no whitespace): equal iff the plans are identical."""
    doc = json.dumps(plan_to_dict(plan), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(doc.encode("ascii")).hexdigest()


def _data_lines(path: pathlib.Path) -> int:
    """Posture rows in a recording file (lines after the column header, comments and blanks skipped)."""
    if not path.exists():
        return 0
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a UTF-8 recording; choose another --out") from None
    rows = [ln for ln in lines if ln.strip() and not ln.startswith("#")]
    return max(0, len(rows) - 1)


def _open_csv(path: pathlib.Path, header: str):
    new = not path.exists() or path.stat().st_size == 0
    fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - long-lived
    if new:
        fh.write(header + "\n")
    else:  # a killed run may have left half a line: end it so the next row starts cleanly
        with open(path, "rb") as r:
            r.seek(-1, os.SEEK_END)
            if r.read(1) != b"\n":
                fh.write("\n")
    return fh


def read_run_meta(path: pathlib.Path) -> dict:
    """A posture run's run.json (one-line DataError for anything else)."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc}); choose another --out") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("segments", []), list):
        raise DataError(f"{path}: not a run.json of poise run; choose another --out")
    return meta


def check_run_folder(
    run_dir: pathlib.Path, resume: bool, plan_sha256: str | None = None, same: dict | None = None
) -> dict | None:
    """The refusals of a posture run's folder, read only (so that a run checks them before its bench opens): a
    recording there without `resume`, or one made with another plan or other `same` values (`RunRecorder`).
    Returns the run.json to resume (empty without one), or None for a folder with no recorded posture."""
    rec_path = run_dir / "recording.csv"
    if _data_lines(rec_path) == 0:  # nothing completed yet: started afresh
        return None
    if not resume:
        raise DataError(
            f"{run_dir} already holds a recording; pass --resume to continue it or choose another --out"
        )
    meta_path = run_dir / "run.json"
    meta = read_run_meta(meta_path) if meta_path.exists() else {}
    if plan_sha256 is not None and meta.get("plan_sha256") != plan_sha256:
        had = meta.get("plan_sha256")
        raise DataError(
            f"{run_dir} was recorded with a different plan (sha256 {had[:12]}…, this plan {plan_sha256[:12]}…); "
            "resume with the same plan or choose another --out"
            if had
            else f"{run_dir}: run.json has no plan sha256, so it cannot be resumed safely; choose another --out"
        )
    for key, value in (same or {}).items():  # a resumed run's postures are measured alike, or not at all
        if meta.get(key) != value:
            raise DataError(f"{run_dir}: its postures were recorded with {key} {meta.get(key)!r}, this run has "
                            f"{value!r}; resume alike or choose another --out")  # fmt: skip
    return meta


class RunRecorder:
    def __init__(
        self,
        run_dir: str | pathlib.Path,
        model_name: str,
        base: str,
        joint_names: list[str],
        resume: bool,
        plan_sha256: str | None = None,
        same: dict | None = None,
    ):
        """`same`: run.json values a resumed run's postures must share with those recorded (e.g. the noise seed
        and board gains they were measured with), checked before run.json changes (`check_run_folder`); then
        recorded."""
        self.dir = pathlib.Path(run_dir)
        kept = check_run_folder(self.dir, resume, plan_sha256, same)
        self.dir.mkdir(parents=True, exist_ok=True)
        rec_path = self.dir / "recording.csv"
        self.meta_path = self.dir / "run.json"
        if kept is None:  # nothing completed yet (or a run that failed before its first posture)
            for name in RUN_FILES:
                (self.dir / name).unlink(missing_ok=True)
        self.meta = kept or {}
        segments = self.meta.get("segments", [])
        if rec_path.exists():  # a kill between a posture's row and run.json: credit the row to its segment
            listed = {p for seg in segments for p in seg.get("completed", [])}
            done = read_recording(rec_path, allow_partial_last_line=True).posture
            missing = [int(p) for p in done if int(p) not in listed]
            if missing and segments:
                segments[-1]["completed"] = list(segments[-1].get("completed", [])) + missing
        self.segment = len(segments)  # one segment per start of the run (resume = +1)
        self.update_meta(
            **({"plan_sha256": plan_sha256} if plan_sha256 else {}),
            **{k: v for k, v in (same or {}).items() if v is not None},
            segments=segments + [{"started_unix": time.time(), "completed": []}],
        )
        self.writer = RecordingWriter(rec_path, model_name, base, joint_names, meta={"source": "poise run"})
        n = len(joint_names)
        self.joints = _open_csv(
            self.dir / "raw_joints.csv",
            ",".join(
                ["t", "segment", "posture", "phase"]
                + [f"q_cmd_{j}" for j in joint_names]
                + [f"q_meas_{j}" for j in joint_names]
            ),
        )
        self.boards = _open_csv(
            self.dir / "raw_boards.csv",
            "t,segment,posture,phase,board,seq,raw_tr,raw_br,raw_tl,raw_bl,kg_tr,kg_br,kg_tl,kg_bl",
        )
        self.n = n
        self._last_flush = time.monotonic()
        self._t_offset = time.time() - time.monotonic()  # monotonic -> unix time (until `use_clock`)

    def use_clock(self, clock: Clock) -> None:
        """Stamp rows given on `clock` (the bench clock the executor and boards run by) as unix times from now."""
        self._t_offset = time.time() - clock.now()

    @property
    def done(self) -> set[int]:
        return self.writer.done

    def update_meta(self, **kw) -> None:
        self.meta.update(kw)
        write_run_meta(self.meta_path, self.meta)

    def joint_row(self, t: float, posture: int, phase: str, q_cmd: np.ndarray, q_meas: np.ndarray) -> None:
        vals = [f"{t + self._t_offset:.4f}", str(self.segment), str(posture), phase]
        vals += [f"{v:.6f}" for v in q_cmd] + [f"{v:.6f}" for v in q_meas]
        self.joints.write(",".join(vals) + "\n")
        self._maybe_flush()

    def board_rows(self, samples, posture: int, phase: str) -> None:
        lines = []
        for s in samples:
            lines.append(
                f"{s.t + self._t_offset:.4f},{self.segment},{posture},{phase},{s.board},{s.seq},"
                + ",".join(str(v) for v in s.raw)
                + ","
                + ",".join(f"{v:.4f}" for v in s.kg)
            )
        if lines:
            self.boards.write("\n".join(lines) + "\n")

    def _maybe_flush(self) -> None:
        if time.monotonic() - self._last_flush > 1.0:
            self.joints.flush()
            self.boards.flush()
            self._last_flush = time.monotonic()

    def sync(self) -> None:
        for fh in (self.joints, self.boards):
            fh.flush()
            os.fsync(fh.fileno())

    def posture_done(self, posture: int, placement: int, q: np.ndarray, cop: np.ndarray, **extra) -> None:
        """Persist the raw data first, then the posture's row (flushed and fsynced by RecordingWriter)."""
        self.sync()
        self.writer.append(posture, placement, q, cop, **extra)
        segments = self.meta["segments"]
        segments[-1]["completed"] = list(segments[-1]["completed"]) + [int(posture)]
        self.update_meta(segments=segments)

    def close(self) -> None:
        try:
            self.sync()
        finally:
            for fh in (self.joints, self.boards):
                fh.close()
            self.writer.close()
