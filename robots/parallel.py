"""Independent calls (design starts, a reach's designs) in worker processes, results as each finishes.

Fresh interpreters (spawn): a forked copy of a process with threads (the CLI's progress, a caller's) can deadlock
on a lock one of them held. The workers ignore Ctrl-C and the parent ends them: with the signal in every worker,
CasADi swallowed it in their solves while the interrupted parent waited for them at exit."""

from __future__ import annotations

import multiprocessing as mp
import signal
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any


def _ignore_interrupt() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _keyed(job: tuple[Hashable, Callable[..., Any], tuple]) -> tuple[Hashable, Any]:
    key, fn, args = job
    return key, fn(*args)


def in_processes(
    fn: Callable[..., Any], calls: Mapping[Hashable, tuple], workers: int
) -> Iterator[tuple[Hashable, Any]]:
    """(key, fn(*args)) for each `calls` entry, in the order they finish, from `workers` processes. A worker's
    exception is raised here; an exception here (Ctrl-C) or a caller that stops iterating ends the workers."""
    pool = mp.get_context("spawn").Pool(workers, initializer=_ignore_interrupt)
    try:
        yield from pool.imap_unordered(_keyed, [(key, fn, args) for key, args in calls.items()])
    except BaseException:  # GeneratorExit included: the caller stopped, or its frame unwound
        pool.terminate()
        raise
    else:
        pool.close()
    finally:
        pool.join()
