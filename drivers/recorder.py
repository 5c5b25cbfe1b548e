"""Loss-free run recording: raw time-stamped samples plus the per-posture static recording.

RUN_DIR/
  recording.csv   per-posture averages, the static recording format (formats/static_recording.py)
  raw_joints.csv  every control tick: t (unix s), segment, posture, phase, q_cmd (12), q_meas (12), rad
  raw_boards.csv  every board report: t, segment, posture, phase, board, seq, raw (4), kg (4, tared)
  run.json        run metadata (plan, endpoints, segments, tare offsets, counters)
Raw files are appended (a resumed run adds a new `segment`), flushed at least every second and fsynced at
the end of each posture, right before the posture's row is written to recording.csv.
"""

from __future__ import annotations

import json
import os
import pathlib
import time

import numpy as np

from formats.errors import DataError
from formats.static_recording import RecordingWriter


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


class RunRecorder:
    def __init__(
        self, run_dir: str | pathlib.Path, model_name: str, base: str, joint_names: list[str], resume: bool
    ):
        self.dir = pathlib.Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        rec_path = self.dir / "recording.csv"
        if rec_path.exists() and rec_path.stat().st_size > 0 and not resume:
            raise DataError(
                f"{self.dir} already holds a recording; pass --resume to continue it or choose another --out"
            )
        self.meta_path = self.dir / "run.json"
        self.meta = json.loads(self.meta_path.read_text()) if self.meta_path.exists() and resume else {}
        self.meta_path.parent.mkdir(parents=True, exist_ok=True)
        self.segment = len(self.meta.get("segments", []))  # one segment per start of the run (resume = +1)
        self.update_meta(
            segments=self.meta.get("segments", []) + [{"started_unix": time.time(), "completed": []}]
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
        self._t_offset = time.time() - time.monotonic()  # monotonic -> unix time

    @property
    def done(self) -> set[int]:
        return self.writer.done

    def update_meta(self, **kw) -> None:
        self.meta.update(kw)
        tmp = self.meta_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.meta, indent=1, default=float))
        tmp.replace(self.meta_path)

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

    def close(self) -> None:
        try:
            self.sync()
        finally:
            for fh in (self.joints, self.boards):
                fh.close()
            self.writer.close()
