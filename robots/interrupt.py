"""Ctrl-C that libraries lose. CasADi swallows the KeyboardInterrupt a Python callback (or its own signal check)
raises and returns the solve as failed ("NonIpopt_Exception_Thrown"), so a multi-stage design went on with its next
stage; trimesh catches BaseException around its optional imports, so Ctrl-C while yourdfpy imported it was lost and
the command ran to its end. Interrupts are counted (`watch`), and raised once such code has returned."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_count = [0]


def _raise(signum: int, frame) -> None:
    _count[0] += 1
    raise KeyboardInterrupt


def interrupts() -> int:
    """How many Ctrl-C's were counted in this process (see `watch`)."""
    return _count[0]


def watch() -> bool:
    """Count Ctrl-C's from now on, raising KeyboardInterrupt as Python does: in the main thread, in place of Python's
    default handler only (a worker that ignores it, a caller's own handler, stay). Whether they are counted."""
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _raise)
    return main and signal.getsignal(signal.SIGINT) is _raise


def unwatch() -> None:
    """Python's default handler back, if `watch` put ours in."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is _raise:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def interruptible() -> Iterator[None]:
    """A solve after which Ctrl-C during it raises KeyboardInterrupt, whatever CasADi made of it."""
    ours = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is _raise
    if not ours and not watch():
        yield
        return
    before = _count[0]
    try:
        yield
    finally:
        if not ours:  # watched for this solve only: Python's handler back
            signal.signal(signal.SIGINT, signal.default_int_handler)
    if _count[0] > before:
        raise KeyboardInterrupt


@contextmanager
def held() -> Iterator[None]:
    """Ctrl-C during the body raised after it, not inside it: for imports of libraries that swallow exceptions."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    got: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if got and previous is not signal.SIG_IGN:
        if previous is _raise:
            _count[0] += 1
        raise KeyboardInterrupt
