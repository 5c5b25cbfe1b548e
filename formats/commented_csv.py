"""The header convention of poise's CSV recordings: `# magic vN` and `# key: value` comment lines, then the data."""

from __future__ import annotations

from pathlib import Path

from formats.errors import DataError


def read_commented(path: str | Path) -> tuple[dict[str, str], list[str], int]:
    """(header metadata, all lines, index of the first line after the comments) of a text file; the first
    comment without a colon is stored as `magic`. One-line DataError for unreadable or non-text files."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text file") from None
    except OSError as exc:
        raise DataError(f"{path}: {exc.strerror}") from None
    lines = text.splitlines()
    meta: dict[str, str] = {}
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        body = lines[i][1:].strip()
        if ":" in body:
            k, v = body.split(":", 1)
            meta[k.strip()] = v.strip()
        elif body:
            meta["magic"] = body
        i += 1
    return meta, lines, i
