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
        try:
            signal.signal(signal.SIGINT, _raise)
        except BaseException:  # raised by a pending signal's handler, before or after ours went in
            _put_back(signal.default_int_handler)
            raise
        return True
    return False


def unwatch() -> None:
    """Python's default handler back, if `watch` put ours in."""
    if watching():
        _put_back(signal.default_int_handler)


def _put_back(handler) -> None:
    """SIGINT's handler back to `handler`, even when a pending signal's handler raises: CPython runs the pending
    handlers before it installs, and one that raised (a Ctrl-C counted by `_raise`, SIGTERM's `Terminated`) left
    the one being replaced in place for good. Its exception raised after."""
    try:
        signal.signal(signal.SIGINT, handler)
    except BaseException:
        signal.signal(signal.SIGINT, handler)  # the pending handlers have run: it goes in now
        raise


@contextmanager
def interruptible() -> Iterator[None]:
    """A solve after which Ctrl-C during it raises KeyboardInterrupt, whatever CasADi made of it."""
    before = _count[0]
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    ours = previous is signal.default_int_handler  # what `watch` puts ours in for, decided before it goes in
    counted = ours or previous is _raise
    try:
        if ours:
            signal.signal(signal.SIGINT, _raise)
        yield
    finally:
        if ours:  # counted for this solve only; put back even if it never went in (nothing to undo then)
            try:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            except BaseException:  # as in `_put_back`, inline: a call is one more place to be raised in
                signal.signal(signal.SIGINT, signal.default_int_handler)
                raise
    if counted and _count[0] > before:
        raise KeyboardInterrupt


@contextmanager
def held() -> Iterator[None]:
    """Ctrl-C during the body raised after it, not inside it: for imports of libraries that swallow exceptions."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:  # a handler not put in from Python, which could not be put back
        yield
        return
    got: list[int] = []
    try:  # in the try: an exception as it goes in (a pending signal's handler) must not leave it there
        signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
        yield
    finally:
        try:
            signal.signal(signal.SIGINT, previous)
        except BaseException:  # as in `_put_back`, inline: a call is one more place to be raised in
            signal.signal(signal.SIGINT, previous)
            raise
        finally:
            if got and previous is _raise:  # counted even when the body failed: the CLI reports the interrupt
                _count[0] += 1
    if got and previous is not signal.SIG_IGN:
        raise KeyboardInterrupt
