"""Where elements and attribute values sit in an XML text (character offsets), for in-place edits.

A small tokenizer over the text: comments, CDATA, processing instructions and DOCTYPE are skipped, start and
end tags are matched on a stack, attribute values are located between their quotes. It only reads structure;
the text itself is never re-serialised, so an edit touches nothing but the bytes it replaces.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from formats.errors import DataError

_NAME = re.compile(r"[^\s=/>]+")
_ATTR = re.compile(r"\s*([^\s=/>]+)\s*=\s*(\"[^\"]*\"|'[^']*')")
_SKIP = (("<!--", "-->"), ("<![CDATA[", "]]>"), ("<?", "?>"), ("<!", ">"))


@dataclass
class Attr:
    value: str  # unescaped
    start: int  # offsets of the raw value between the quotes
    end: int


@dataclass
class Element:
    """One element: `start`..`tag_end` is its start tag, `start`..`end` the whole element."""

    name: str
    start: int
    tag_end: int
    end: int = -1
    self_closing: bool = False
    attrs: dict[str, Attr] = field(default_factory=dict)
    children: list[Element] = field(default_factory=list)

    def child(self, name: str) -> Element | None:
        return next((c for c in self.children if c.name == name), None)

    @property
    def content_start(self) -> int:
        return self.tag_end

    @property
    def content_end(self) -> int:
        """Offset of the end tag ('</name>') of a non-empty element."""
        return self.end - len(f"</{self.name}>") if not self.self_closing else self.tag_end


def _start_tag(text: str, i: int, source: str) -> tuple[Element, bool]:
    m = _NAME.match(text, i + 1)
    if not m:
        raise DataError(f"{source}: malformed tag at character {i}")
    el = Element(m.group(0), i, -1)
    pos = m.end()
    while True:
        a = _ATTR.match(text, pos)
        if not a:
            break
        raw = a.group(2)
        vstart = a.start(2) + 1
        el.attrs[a.group(1)] = Attr(html.unescape(raw[1:-1]), vstart, vstart + len(raw) - 2)
        pos = a.end()
    close = re.compile(r"\s*(/?)>").match(text, pos)
    if not close:
        raise DataError(f"{source}: malformed tag <{el.name}> at character {i}")
    el.tag_end = close.end()
    el.self_closing = close.group(1) == "/"
    if el.self_closing:
        el.end = el.tag_end
    return el, el.self_closing


def parse_spans(text: str, source: str = "XML") -> Element:
    """The root element of `text` with every element's offsets (DataError on unbalanced tags)."""
    stack: list[Element] = []
    root: Element | None = None
    i = text.find("<")
    while i != -1:
        for opener, closer in _SKIP:
            if text.startswith(opener, i):
                j = text.find(closer, i + len(opener))
                if j == -1:
                    raise DataError(f"{source}: unterminated {opener} at character {i}")
                i = text.find("<", j + len(closer))
                break
        else:
            if text.startswith("</", i):
                j = text.find(">", i)
                name = text[i + 2 : j].strip()
                if j == -1 or not stack or stack[-1].name != name:
                    raise DataError(f"{source}: unexpected </{name}> at character {i}")
                el = stack.pop()
                el.end = j + 1
                i = text.find("<", j + 1)
                continue
            el, closed = _start_tag(text, i, source)
            if stack:
                stack[-1].children.append(el)
            elif root is None:
                root = el
            else:
                raise DataError(f"{source}: more than one root element")
            if not closed:
                stack.append(el)
            i = text.find("<", el.tag_end)
    if stack or root is None:
        raise DataError(
            f"{source}: unbalanced XML (unclosed <{stack[-1].name}>)"
            if stack
            else f"{source}: no root element"
        )
    return root
