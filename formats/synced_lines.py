"""An append-only text file written while it is recorded, whose disk work never holds up the recording thread.

The recording thread hands over whole lines; a thread of the file's own writes, flushes and fsyncs them every
`sync_s` seconds, and `close` writes the rest. An fsync can take over 100 ms while other writers fill the page
cache (127 ms measured beside six `dd` writers on a 2-core test machine), longer than a control tick. A killed
process keeps every line handed over before the last sync; a failed write is raised in the recording thread at
its next line or at `close`.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path

SYNC_S = 0.25  # s: how often the lines handed over are written and fsynced


class SyncedLines:
    """Lines appended to `path` (created or truncated, starting with the `header` lines), synced every `sync_s` s."""

    def __init__(self, path: str | Path, header: str = "", sync_s: float = SYNC_S) -> None:
        self.path = Path(path)
        self.sync_s = sync_s
        self._fh = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - long-lived, closed by close()
        self._pending: deque[str] = deque([header.removesuffix("\n") + "\n"] if header else [])
        self._io = threading.Lock()  # one writer of the file at a time: the syncing thread or `sync`/`close`
        self._stop = threading.Event()
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._loop, name=f"sync {self.path.name}", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def add(self, line: str) -> None:
        """Append one line (without its newline)."""
        self._raise_error()
        self._pending.append(line + "\n")

    def sync(self) -> None:
        """Write, flush and fsync what was added, now, in the calling thread."""
        self._write()
        self._raise_error()

    def close(self) -> None:
        """Write the rest and close; raises a write that failed meanwhile."""
        if self._fh.closed:
            return
        self._stop.set()
        self._thread.join()
        try:
            self._write()
        finally:
            with self._io:
                self._fh.close()
        self._raise_error()

    def _loop(self) -> None:
        while not self._stop.wait(self.sync_s) and self._error is None:
            self._write()

    def _write(self) -> None:
        with self._io:
            if self._fh.closed or self._error is not None:
                return
            # taken one by one (a deque's append and popleft are atomic): lines added meanwhile wait for the next sync
            lines = [self._pending.popleft() for _ in range(len(self._pending))]
            try:
                if lines:
                    self._fh.write("".join(lines))
                self._fh.flush()
                os.fsync(self._fh.fileno())
            except OSError as exc:
                self._error = exc

    def _raise_error(self) -> None:
        if self._error is not None:
            raise OSError(f"{self.path}: writing failed ({self._error})") from self._error
