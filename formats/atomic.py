"""Writing a file so that it is either complete or absent: temp file in the same folder, fsync, rename.

A full disk (ENOSPC) or any other write error removes the temp file, leaves an existing file untouched and
raises one `DataError` line; a half-written file is never left looking complete.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from formats.errors import DataError


def write_atomic(path: str | Path, write: Callable[[Path], None], what: str = "file") -> None:
    """Let `write(tmp)` create the file under a temporary name (same suffix, same folder), then sync and
    rename it to `path`; DataError naming `what` and the reason if any step fails."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise DataError(f"{path}: cannot write the {what} ({exc.strerror or exc})") from None


def write_text_atomic(path: str | Path, text: str, what: str = "file") -> None:
    """Write UTF-8 `text` to `path` atomically (see `write_atomic`)."""

    def write(tmp: Path) -> None:
        data = memoryview(text.encode("utf-8"))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)

    write_atomic(path, write, what)


def save_figure(fig, out: str | Path, dpi: int = 110, tight: bool = False) -> Path:
    """Write a matplotlib figure (its suffix picks the format) whole or not at all, and release it; one DataError
    line if it cannot be written (an unknown suffix included)."""
    import matplotlib.pyplot as plt

    out = Path(out)
    extra = {"bbox_inches": "tight"} if tight else {}
    try:
        write_atomic(out, lambda tmp: fig.savefig(tmp, dpi=dpi, **extra), "figure")
    except ValueError as exc:
        raise DataError(f"cannot write figure {out}: {exc}") from None
    finally:
        plt.close(fig)
    return out
