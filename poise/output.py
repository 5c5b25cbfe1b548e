"""Shared output helpers for commands: rich tables on a terminal, JSON for scripts."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress

from formats.errors import DataError

# Pipes and CI logs get wide tables instead of folded 80-column ones.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
# Errors and warnings stay one line each in a log or a pipe (README: "one line"); a terminal folds them itself.
err_console = Console(stderr=True, highlight=False, soft_wrap=not sys.stderr.isatty())


def draws_progress() -> bool:
    """Whether progress bars and spinners are drawn: on stderr when it is a terminal, with `--json` too (stdout keeps
    the JSON; a log or a pipe gets neither)."""
    return err_console.is_terminal


def rel_se_text(pct: float) -> str:
    """A relative SE (%) for a table: two significant digits below 10 % (0.0147 → '0.015', not '0.0'), '—' where
    it is undefined (an estimate of 0)."""
    if not math.isfinite(pct):
        return "—"
    return f"{pct:.2g}" if pct < 10 else f"{pct:.0f}"


def _default(o: Any):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _finite(o: Any) -> Any:
    """The same structure with numpy values made plain and NaN/±inf as null (strict JSON has no NaN)."""
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_finite(v) for v in o]
    if isinstance(o, np.ndarray | np.generic):
        return _finite(o.tolist())
    if isinstance(o, float) and not np.isfinite(o):
        return None
    return o


def dumps(obj: Any) -> str:
    return json.dumps(_finite(obj), indent=2, default=_default, allow_nan=False)


_json_written = [False]  # whether this command wrote its JSON (an error object of its own included)


def print_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj) + "\n")
    _json_written[0] = True


def json_written(reset: bool = False) -> bool:
    """Whether `print_json` wrote since the last reset (`reset`: start a command afresh)."""
    was = _json_written[0]
    if reset:
        _json_written[0] = False
    return was


def mm(x: float, digits: int = 3) -> str:
    """A length in m shown in mm."""
    return "—" if x is None or not np.isfinite(x) else f"{x * 1000:.{digits}f}"


@contextmanager
def vanish_on_error(progress: Progress) -> Iterator[Progress]:
    """Run a progress bar that disappears if the work fails, so the error stays the only line on stderr."""
    console, quiet = progress.console, progress.console.quiet
    try:
        with progress:
            try:
                yield progress
            except BaseException:
                progress.live.transient = True  # a terminal erases the bar
                console.quiet = quiet or not console.is_terminal  # a log file gets no final render
                raise
    finally:
        console.quiet = quiet


def quantity_table(title: str, rows: list[tuple[str, str, str]], first: str = "quantity"):
    """A rich table of (quantity, value, unit) rows: the summary every run and plan command prints."""
    from rich.table import Table

    t = Table(title=title)
    t.add_column(first)
    t.add_column("value", justify="right")
    t.add_column("unit")
    for row in rows:
        t.add_row(*row)
    return t


@contextmanager
def run_progress() -> Iterator[Any]:
    """A run's one-line live status on stderr (a rich `Live`; None when stderr draws no progress), stopped on
    leaving — before a Ctrl-C's or an error's message is printed."""
    from rich.live import Live

    live = Live(console=err_console, refresh_per_second=8) if draws_progress() else None
    if live:
        live.start()
    try:
        yield live
    finally:
        if live:
            live.stop()


@contextmanager
def named_errors(what: str | None) -> Iterator[None]:
    """A DataError from the work inside names `what` (the file it is about) when it does not already."""
    try:
        yield
    except DataError as exc:
        if what is None or str(what) in str(exc):
            raise
        raise DataError(f"{what}: {exc}") from None
