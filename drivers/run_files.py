"""What every run directory writer shares: refusing a folder that already holds a run, and run.json replaced
whole. Its CSV files are `formats.synced_lines.SyncedLines`: whole lines, fsynced every 0.25 s off the streaming
thread (a killed run keeps what it recorded)."""

from __future__ import annotations

import contextlib
import json
import pathlib
import signal
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence

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


def streamed_ticks(meta: dict) -> tuple[int | None, int | None]:
    """run.json's ticks_streamed and ticks_planned, None where absent or not whole numbers."""
    ticks, planned = meta.get("ticks_streamed"), meta.get("ticks_planned")
    whole = [v if isinstance(v, int) and not isinstance(v, bool) else None for v in (ticks, planned)]
    return whole[0], whole[1]


def partial_status(meta: dict) -> str | None:
    """How a run that did not stream its whole plan ended, from its run.json (`meta`); None when it did (its
    status completed, or its ticks_streamed reaching ticks_planned: stopped after its stream, in the stop or the
    lead-out — `stopped_after_stream`) or when run.json does not say."""
    status = _stopped(meta)
    if status is None or stopped_after_stream(meta):
        return None
    ticks, planned = streamed_ticks(meta)
    return status + (
        f" after {ticks} of {planned} ticks" if ticks is not None and planned is not None else ""
    )


def stopped_after_stream(meta: dict) -> str | None:
    """The status of a run that streamed its whole plan (ticks_streamed ≥ ticks_planned) and stopped after it (a
    Ctrl-C in the stop or lead-out, a fault there), with its ticks; None otherwise (completed, or stopped before
    its plan's end, or run.json does not say)."""
    status = _stopped(meta)
    ticks, planned = streamed_ticks(meta)
    if status is None or ticks is None or planned is None or ticks < planned:
        return None
    return f"{status}, {ticks} of {planned} ticks streamed"


def _stopped(meta: dict) -> str | None:
    """run.json's status of a run that did not complete, its trailing colon dropped; None when it completed or
    run.json does not say."""
    status = meta.get("status")
    if not isinstance(status, str) or status == COMPLETED:
        return None
    return status.rstrip().rstrip(":")


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


def held_run(out) -> bool:
    """Whether `out` already holds a run's run.json: one a Ctrl-C before this run began must not report."""
    return (pathlib.Path(out) / "run.json").exists()


def recording_rows(path) -> int | None:
    """The data rows of a recording file (its `#` metadata and column header not counted); None without one."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = sum(1 for line in f if line.strip() and not line.startswith("#"))
    except OSError:
        return None
    return max(lines - 1, 0)


def stopped_run(out, held: bool, raw: str | None = None) -> dict:
    """What a stopped streamed run's directory `out` keeps, from its run.json (written at the stop), its recording
    and its per-tick file `raw` (the run kind's own name); `held` (`held_run` before the run began): that run.json
    is an earlier run's, so nothing is kept."""
    recording = pathlib.Path(out) / "recording.csv"
    raw_path = pathlib.Path(out) / raw if raw else None
    try:
        meta = {} if held else run_meta_beside(recording)
    except (OSError, ValueError):
        meta = {}  # interrupted before the run directory was made (or after it was removed: nothing sent)
    ticks, rate, duration = (meta.get(k) for k in ("ticks_streamed", "rate_hz", "duration_s"))
    ticks = ticks if isinstance(ticks, int) else 0
    t = 0.0
    if ticks and isinstance(rate, int | float) and isinstance(duration, int | float):
        t = min((ticks - 1) / rate, float(duration))  # plan ticks at k / rate_hz, the last at its end
    rows = recording_rows(recording) if meta else None
    return {"interrupted": True, "run_dir": str(out) if meta else None, "status": meta.get("status"),
            "ticks_recorded": ticks, "ticks_planned": meta.get("ticks_planned"), "t_recorded_s": t,
            "duration_s": duration, "rate_hz": rate, "recording": str(recording) if rows is not None else None,
            "recording_rows": rows,
            "raw": str(raw_path) if meta and raw_path is not None and raw_path.is_file() else None}  # fmt: skip


def left_to_run(order: Sequence[int], done: Collection[int]) -> list[int]:
    """The postures (indices in plan order) a resumed posture run still makes: those after the last one already
    recorded (`done`), as the executor resumes (`drivers.executor.Executor.todo`)."""
    last = max((i for i, p in enumerate(order) if p in done), default=-1)
    return list(order[last + 1 :])


def recorded_postures(run_dir) -> set[int]:
    """The postures a posture run's recording.csv in `run_dir` holds (empty without one), read as the recorder
    reads them on --resume."""
    from formats.static_recording import read_recording

    path = pathlib.Path(run_dir) / "recording.csv"
    if recording_rows(path) in (None, 0):
        return set()
    return {int(p) for p in read_recording(path, allow_partial_last_line=True).posture}


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`): stops a run as Ctrl-C does, so what is recorded is kept and run.json says it stopped."""

    def __init__(self) -> None:
        super().__init__("SIGTERM")


def _raise_terminated(signum, frame) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises `Terminated` (a KeyboardInterrupt) in the main thread: the run's Ctrl-C
    path then keeps its completed postures and records the stop; the previous handler is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
