"""Independent calls (design starts, a reach's designs) in worker processes, results as each finishes.

Fresh interpreters (spawn): a forked copy of a process with threads (the CLI's progress, a caller's) can deadlock
on a lock one of them held. The workers ignore Ctrl-C and the parent ends them: with the signal in every worker,
CasADi swallowed it in their solves while the interrupted parent waited for them at exit."""

from __future__ import annotations

import multiprocessing as mp
import signal
from collections.abc import Callable, Hashable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any

_SIGMASK = hasattr(signal, "pthread_sigmask")  # not on Windows, where children inherit neither


def _ignore_interrupt() -> None:
    """The workers' initializer: Ctrl-C ignored, then taken out of the mask they started with (a Ctrl-C that came
    during their imports, held there, is dropped by the ignore)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _SIGMASK:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextmanager
def _children_ignore_interrupt() -> Iterator[None]:
    """Ctrl-C blocked in this thread while workers start: they inherit the mask, so that it waits through their
    imports (the initializer only runs after them). The parent's handler is not touched: its Ctrl-C waits too and is
    raised as the block ends. (It was SIG_IGN for the spawn: a Ctrl-C then was lost, and a signal whose handler
    raised while the handler was put back, which CPython runs before it installs, left Ctrl-C ignored for good.)
    The mask is per thread; the block ends whatever a pending signal's handler raises as it is taken out."""
    if not _SIGMASK:
        yield
        return
    was_blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        yield
    finally:
        if not was_blocked:
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            except BaseException:  # a pending signal's handler, run as the call starts (signal.py wraps it)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
                raise


def in_processes(
    fn: Callable[..., Any], calls: Mapping[Hashable, tuple], workers: int
) -> Iterator[tuple[Hashable, Any]]:
    """(key, fn(*args)) for each `calls` entry, in the order they finish, from `workers` processes. A worker's
    exception is raised here, and a worker that dies (killed, out of memory) raises BrokenProcessPool; an exception
    here (Ctrl-C) or a caller that stops iterating ends the workers."""
    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=_ignore_interrupt)
    try:
        with _children_ignore_interrupt():  # a spawn pool starts a worker per submit, up to `workers`
            futures = {pool.submit(fn, *args): key for key, args in calls.items()}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()
    except BaseException:  # GeneratorExit included: the caller stopped, or its frame unwound
        for proc in list(
            (pool._processes or {}).values()
        ):  # no public handle before 3.14's terminate_workers
            proc.terminate()
        # then wait for the executor's own clean-up: it finds its workers gone and joins every one it has
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
