"""Keep the garbage collector from stalling a streaming loop.

A full collection walks every live object with the interpreter locked; in a process that holds CasADi, MuJoCo or
Pyomo models that takes 100–200 ms, far beyond a 10 ms tick and a 30 ms reply timeout. While a run streams, the
objects that existed before it are collected once and frozen (`gc.freeze`), so later collections only walk what
the run itself allocates.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0


@contextmanager
def steady_gc() -> Iterator[None]:
    """Collect, then freeze the surviving objects for the duration (nests; unfrozen by the outermost exit)."""
    global _depth
    if _depth == 0:
        gc.collect()
        gc.freeze()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.unfreeze()
