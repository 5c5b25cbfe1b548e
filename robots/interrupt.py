"""Ctrl-C that libraries lose. CasADi swallows the KeyboardInterrupt a Python callback (or its own signal check)
raises and returns the solve as failed ("NonIpopt_Exception_Thrown"), so a multi-stage design went on with its next
stage; trimesh catches BaseException around its optional imports, so Ctrl-C while yourdfpy imported it was lost and
the command ran to its end. Interrupts are counted (`watch`), and raised once such code has returned."""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_count = [0]


def _raise(signum: int, frame) -> None:
    _count[0] += 1
    raise KeyboardInterrupt


def in_callback(method: Callable) -> Callable:
    """A CasADi callback's eval whose Ctrl-C comes out as KeyboardInterrupt: one that lands while the eval is in a C
    call (numpy converting CasADi's matrices) comes out of it as SystemError ("returned a result with an exception
    set"), which CasADi prints with its traceback."""

    @functools.wraps(method)
    def wrapped(*args, **kwargs):
        before = _count[0]
        try:
            return method(*args, **kwargs)
        except SystemError as e:
            if _count[0] > before or isinstance(e.__cause__ or e.__context__, KeyboardInterrupt):
                raise KeyboardInterrupt from None
            raise

    return wrapped


def interrupts() -> int:
    """How many Ctrl-C's were counted in this process (see `watch`)."""
    return _count[0]


def watching() -> bool:
    """Whether Ctrl-C's are being counted (our handler in place, in the main thread)."""
    return threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is _raise


def watch() -> bool:
    """Count Ctrl-C's from now on, raising KeyboardInterrupt as Python does: in the main thread, in place of Python's
    default handler only (a worker that ignores it, a caller's own handler, stay). Whether this call put the counter
    in (a nested command's must not take out its caller's)."""
    if threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ):
        signal.signal(signal.SIGINT, _raise)
        return True
    return False


def unwatch() -> None:
    """Python's default handler back, if `watch` put ours in."""
    if watching():
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def interruptible() -> Iterator[None]:
    """A solve after which Ctrl-C during it raises KeyboardInterrupt, whatever CasADi made of it."""
    before, installed, counted = _count[0], False, False
    try:
        installed = watch()
        counted = watching()
        yield
    finally:
        if installed:  # counted for this solve only
            unwatch()
    if counted and _count[0] > before:
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
        if got and previous is _raise:  # counted even when the body failed: the CLI reports the interrupt
            _count[0] += 1
    if got and previous is not signal.SIG_IGN:
        raise KeyboardInterrupt
