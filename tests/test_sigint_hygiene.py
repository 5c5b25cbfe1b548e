"""Ctrl-C's handler put back whatever is raised around it. A test worker once reached test_interrupt with SIGINT
ignored. Spawning workers ignored Ctrl-C in the parent for the spawn (SIG_IGN): a signal whose handler raised
while the handler was put back left it ignored for good (CPython runs pending handlers before it installs, and
signal.py's wrapper is one more place to be raised in), and a Ctrl-C during the spawn was lost. `held` and
`interruptible` could leave their own handler in place the same way."""

from __future__ import annotations

import multiprocessing as mp
import signal
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import pytest

from robots.interrupt import held, interruptible, watch
from robots.parallel import _children_ignore_interrupt, in_processes


@pytest.fixture(autouse=True)
def _python_ctrl_c():
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _untouched() -> bool:
    return signal.getsignal(signal.SIGINT) is signal.default_int_handler and (
        signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    )


class _Pending(Exception):
    """What a pending signal's handler raises (SIGTERM's `Terminated` in a run, a counted Ctrl-C)."""


def _raising_at(monkeypatch, call: int, when: str) -> None:
    """signal.signal and signal.pthread_sigmask as a pending signal's handler makes them: the `call`-th change of
    SIGINT's handler or mask raises, before it acts (CPython checks signals first; the signal.py wrapper's frame
    start) or after it (the check after a call returns, the mask's own check)."""
    real_signal, real_mask = signal.signal, signal.pthread_sigmask
    seen = [0]

    def maybe(real, args, about_sigint):
        if not about_sigint:
            return real(*args)
        seen[0] += 1
        if seen[0] == call and when == "before":
            raise _Pending
        out = real(*args)
        if seen[0] == call and when == "after":
            raise _Pending
        return out

    monkeypatch.setattr(signal, "signal", lambda s, h: maybe(real_signal, (s, h), s == signal.SIGINT))
    monkeypatch.setattr(
        signal, "pthread_sigmask", lambda how, m: maybe(real_mask, (how, m), signal.SIGINT in m)
    )


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("call", [1, 2])
@pytest.mark.parametrize("context", [held, interruptible, _children_ignore_interrupt])
def test_an_exception_as_a_handler_goes_in_or_out_leaves_python_s_own(monkeypatch, context, call, when):
    _raising_at(monkeypatch, call, when)
    with pytest.raises(_Pending):
        with context():
            pass
    monkeypatch.undo()
    assert _untouched()


def test_an_exception_as_watch_puts_the_counter_in_takes_it_out(monkeypatch):
    _raising_at(monkeypatch, 1, "after")
    with pytest.raises(_Pending):
        watch()
    monkeypatch.undo()
    assert _untouched()


def test_nested_contexts_in_either_order_leave_python_s_own():
    with held(), interruptible(), _children_ignore_interrupt(), held():
        pass
    with _children_ignore_interrupt(), interruptible(), held(), interruptible():
        pass
    assert _untouched()
    with pytest.raises(ValueError), interruptible(), held(), _children_ignore_interrupt():
        raise ValueError("a spawn that failed")
    assert _untouched()


def _square(x: int) -> int:
    return x * x


def test_a_ctrl_c_while_workers_start_is_raised_not_lost(monkeypatch):
    """The parent's Ctrl-C during the spawn waits for its end (it was ignored: the results came as if none)."""
    real = ProcessPoolExecutor.submit
    sent = []

    def submit_with_ctrl_c(self, *args, **kwargs):
        if not sent:
            sent.append(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
        return real(self, *args, **kwargs)

    before = set(mp.active_children())
    monkeypatch.setattr(ProcessPoolExecutor, "submit", submit_with_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        dict(in_processes(_square, {"a": (2,), "b": (3,)}, 2))
    assert sent and _untouched()
    assert set(mp.active_children()) <= before  # the workers ended


def _ctrl_c_state(_: int) -> tuple[bool, bool]:
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN, signal.SIGINT in signal.pthread_sigmask(
        signal.SIG_BLOCK, set()
    )


def test_workers_ignore_ctrl_c_once_started_and_the_parent_is_as_before():
    assert dict(in_processes(_ctrl_c_state, {0: (0,), 1: (1,)}, 2)) == {0: (True, False), 1: (True, False)}
    assert _untouched()


def test_a_child_started_while_workers_start_survives_a_ctrl_c_in_its_start():
    """As a worker's imports do: the Ctrl-C waits (or is ignored), the child runs to its end."""
    code = "import os, signal; os.kill(os.getpid(), signal.SIGINT); print('ran on')"
    with _children_ignore_interrupt():
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ran on", proc.stderr
    assert _untouched()
