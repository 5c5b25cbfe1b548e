"""What every run directory writer shares: refusing a folder that already holds a run, and append-only CSV
files written in whole lines and fsynced at least every SYNC_S seconds (a killed run keeps what it recorded)."""

from __future__ import annotations

import json
import os
import pathlib
import time
from collections.abc import Iterable

from formats.atomic import write_text_atomic
from formats.errors import DataError

SYNC_S = 0.25  # s: raw files and recordings are fsynced at least this often


def new_run_dir(run_dir, run_files: Iterable[str]) -> pathlib.Path:
    """Create `run_dir` (parents too); DataError if it already holds any of `run_files`."""
    path = pathlib.Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    held = [n for n in run_files if (path / n).exists()]
    if held:
        raise DataError(f"{path} already holds a run ({', '.join(held)}); choose another --out")
    return path


class SyncedLines:
    """An append-only CSV written in whole lines, flushed and fsynced every SYNC_S seconds and on close."""

    def __init__(self, path: pathlib.Path, header: str) -> None:
        self.fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 - long-lived
        self.pending = [header + "\n"]
        self.last = 0.0

    def add(self, line: str) -> None:
        self.pending.append(line + "\n")
        if time.monotonic() - self.last >= SYNC_S:
            self.sync()

    def sync(self) -> None:
        if self.fh.closed:
            return
        self.fh.write("".join(self.pending))
        self.pending.clear()
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.last = time.monotonic()

    def close(self) -> None:
        if not self.fh.closed:
            try:
                self.sync()
            finally:
                self.fh.close()


def write_run_meta(path: pathlib.Path, meta: dict) -> None:
    """Replace run.json whole (formats.atomic: a reader or a kill never sees half a file)."""
    write_text_atomic(path, json.dumps(meta, indent=1, default=float), "run metadata")
