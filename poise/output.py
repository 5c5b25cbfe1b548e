"""Shared output helpers for commands: rich tables on a terminal, JSON for scripts."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
from rich.console import Console

# Pipes and CI logs get wide tables instead of folded 80-column ones.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False)


def _default(o: Any):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=_default, allow_nan=False)


def print_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj) + "\n")


def mm(x: float, digits: int = 3) -> str:
    """A length in m shown in mm."""
    return "—" if x is None or not np.isfinite(x) else f"{x * 1000:.{digits}f}"
