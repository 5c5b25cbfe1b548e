"""Reading poise JSON files: the document with one clear error for an unreadable, non-text or non-JSON file, and
the `format` field a file declares, for commands that take several kinds of file."""

from __future__ import annotations

import json
from pathlib import Path

from formats.errors import DataError

ENCODING = "utf-8-sig"  # UTF-8, with or without a byte-order mark

# poise's JSON files by their `format` field, as a refusal names one given where another kind is expected
FORMAT_NAMES = {"poise.trajectory-plan": "a trajectory plan", "poise.posture-plan": "a posture plan",
                "poise parameter set": "a parameter set", "poise static result": "a static result",
                "poise pwm plan": "a PWM plan", "poise.doggy-excitation": "a doggy excitation plan",
                "poise board gains": "a board gains file"}  # fmt: skip


def format_name(doc: object) -> str | None:
    """What a parsed poise JSON document is ("a trajectory plan"), by its `format` (`FORMAT_NAMES`); None for any
    other document."""
    fmt = doc.get("format") if isinstance(doc, dict) else None
    return FORMAT_NAMES.get(fmt) if isinstance(fmt, str) else None


def read_json(path: str | Path, expected: str) -> object:
    """The parsed content of a JSON file; DataError (one line) when it cannot be read, is not UTF-8 text or not
    JSON. `expected` names what it should hold ("a posture plan") for the message. A leading UTF-8 byte-order mark
    (an editor's) is dropped, as the CSV readers drop it."""
    try:
        text = Path(path).read_text(encoding=ENCODING)
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text file (expected {expected} in JSON)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def json_format(path: str | Path) -> str | None:
    """The file's top-level `format` string; None when it is unreadable, not JSON or declares none."""
    try:
        fmt = json.loads(Path(path).read_text(encoding=ENCODING)).get("format")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return fmt if isinstance(fmt, str) else None


def check_numbers(value, where: str, what: str) -> None:
    """DataError naming `what` and `where` (e.g. a[2][1]) when `value`, or any item of its nested lists, is not a
    JSON number: a string or a boolean in a file is not silently converted."""
    if isinstance(value, list):
        for k, item in enumerate(value):
            check_numbers(item, f"{where}[{k}]", what)
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise DataError(f"{what} {where}: expected a number, got {value!r}")
