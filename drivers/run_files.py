"""What every run directory writer shares: refusing a folder that already holds a run, and run.json replaced
whole. Its CSV files are `formats.synced_lines.SyncedLines`: whole lines, fsynced every 0.25 s off the streaming
thread (a killed run keeps what it recorded)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterable

from formats.atomic import write_text_atomic
from formats.errors import DataError


def new_run_dir(run_dir, run_files: Iterable[str]) -> pathlib.Path:
    """Create `run_dir` (parents too); DataError if it already holds any of `run_files`."""
    path = pathlib.Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    held = [n for n in run_files if (path / n).exists()]
    if held:
        raise DataError(f"{path} already holds a run ({', '.join(held)}); choose another --out")
    return path


COMPLETED = "completed"  # run.json `status` of a run that streamed its whole plan


def stopped_status(exc: BaseException) -> str:
    """run.json `status` of a run an exception stopped: its type, and its message when it has one."""
    said = str(exc).strip()
    return f"stopped: {type(exc).__name__}" + (f": {said}" if said else "")


def partial_status(meta: dict) -> str | None:
    """How a run that did not stream its whole plan ended, from its run.json (`meta`); None when it did (or
    when run.json does not say)."""
    status, ticks, planned = meta.get("status"), meta.get("ticks_streamed"), meta.get("ticks_planned")
    if not isinstance(status, str) or status == COMPLETED:
        return None
    said = status.rstrip().rstrip(":")
    return said + (
        f" after {ticks} of {planned} ticks" if isinstance(ticks, int) and isinstance(planned, int) else ""
    )


def run_meta_beside(recording) -> dict:
    """The run.json beside a recording (OSError when there is none, ValueError when it is no JSON object)."""
    meta = json.loads((pathlib.Path(recording).parent / "run.json").read_text(encoding="utf-8"))
    if not isinstance(meta, dict):
        raise ValueError("run.json is not a JSON object")
    return meta


def partial_run(recording) -> str | None:
    """`partial_status` of the run.json beside `recording`; None when there is none or it cannot be read."""
    try:
        return partial_status(run_meta_beside(recording))
    except (OSError, ValueError):
        return None


def write_run_meta(path: pathlib.Path, meta: dict) -> None:
    """Replace run.json whole (formats.atomic: a reader or a kill never sees half a file)."""
    write_text_atomic(path, json.dumps(meta, indent=1, default=float), "run metadata")
