"""The header convention of poise's CSV recordings: `# magic vN` and `# key: value` comment lines, then the data."""

from __future__ import annotations

import difflib
from collections.abc import Collection
from pathlib import Path

from formats.errors import DataError


def read_text(path: str | Path, expected: str = "") -> str:
    """A text file's content (UTF-8; a spreadsheet's byte-order mark is not content); one-line DataError for an
    unreadable or non-text file, naming what was `expected` there."""
    path = Path(path)
    wanted = f" (expected {expected})" if expected else ""
    if path.is_dir():
        raise DataError(f"{path}: a folder, not a file{wanted}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if b"\0" in data[:4096]:  # NUL bytes: an image, a spreadsheet, an archive
            raise DataError(f"{path}: not a text file{wanted}") from None
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}, line {line}: byte 0x{data[exc.start]:02x} is not UTF-8 (another encoding, such "
                        f"as Latin-1 or Windows-1252){wanted}: save the file as UTF-8") from None  # fmt: skip
    return text.replace("\r\n", "\n").replace("\r", "\n")  # universal newlines, as text mode reads them


# what other spreadsheets and loggers put between fields, in the order named when a header row has no comma
OTHER_DELIMITERS = (";", "\t", "|")


def check_delimiter(path: str | Path, header: str) -> None:
    """A header row with no comma but another delimiter is from a spreadsheet set to another locale: DataError
    naming it, rather than "missing columns" for a row read as one field."""
    if "," in header:
        return
    used = next((d for d in OTHER_DELIMITERS if d in header), None)
    if used is not None:
        shown = "tab" if used == "\t" else repr(used)
        raise DataError(f"{path}: the file uses {shown} between fields; poise reads commas (export the CSV with "
                        "',' as the delimiter)")  # fmt: skip


def read_commented(
    path: str | Path, repeatable: Collection[str] = (), known: Collection[str] = ()
) -> tuple[dict[str, str], list[str], int]:
    """(header metadata, all lines, index of the first line after the comments) of a text file (UTF-8, a BOM
    allowed). The first line, if a comment without a colon, is stored as `magic`; later comments without a colon
    are the logger's own remarks. With `known` (the keys the caller reads), one of them given twice with another
    value is refused (but `repeatable` ones, read by the caller from the lines), and a key a letter or two off one
    of them as its typo (`# angle unit: deg` would otherwise leave the angles in the default unit); other keys are
    the logger's own, kept as given (the last of a repeated one). One-line DataError for unreadable
    or non-text files, and for a header row with another delimiter than commas (`check_delimiter`)."""
    path = Path(path)
    lines = read_text(path).splitlines()
    meta: dict[str, str] = {}
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        body = lines[i][1:].strip()
        if ":" in body:
            k, v = (x.strip() for x in body.split(":", 1))
            if k in meta and meta[k] != v and k in known and k not in repeatable:
                raise DataError(f"{path}, line {i + 1}: '# {k}:' given twice ({meta[k]!r}, then {v!r})")
            near = [] if k in known else difflib.get_close_matches(k, list(known), n=1, cutoff=0.8)
            if near:
                raise DataError(
                    f"{path}, line {i + 1}: unknown header '# {k}:': did you mean '# {near[0]}:'?"
                )
            meta[k] = v
        elif body and i == 0:
            meta["magic"] = body
        i += 1
    if i < len(lines):
        check_delimiter(path, lines[i])
    return meta, lines, i
