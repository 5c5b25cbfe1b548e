"""The `format` field a poise JSON file declares, for commands that take several kinds of file."""

from __future__ import annotations

import json
from pathlib import Path


def json_format(path: str | Path) -> str | None:
    """The file's top-level `format` string; None when it is unreadable, not JSON or declares none."""
    try:
        fmt = json.loads(Path(path).read_text(encoding="utf-8")).get("format")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return fmt if isinstance(fmt, str) else None
