"""Waiting, after a tare, for a load put on the boards to arrive and hold still, so that a reading's window
holds the load standing, not the stepping on."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

import numpy as np

# A load has arrived once the tared boards carry this much in all (a person, a robot, a calibration weight; the
# empty boards' noise is tens of grams) ...
ARRIVED_KG = 2.0
# ... and holds still once its total has stayed within this band over STILL_S (a person standing sways the total
# by well under a kilogram; stepping on swings it by tens).
STILL_KG = 0.5
STILL_SHARE = 0.03
STILL_S = 1.0


def wait_for_load(
    boards: list, timeout_s: float, poll_s: float = 0.05, monotonic: Callable[[], float] = time.monotonic
) -> float | None:
    """Block until the boards' tared total is at least ARRIVED_KG and has stayed within max(STILL_KG,
    STILL_SHARE × total) for STILL_S: the seconds that took, or None after `timeout_s` without. Every report
    read meanwhile is drained (a reading starts after it); a lost board raises as `check` does."""
    began = monotonic()
    recent: collections.deque[tuple[float, float]] = collections.deque()
    last = np.zeros(len(boards))
    while monotonic() - began < timeout_s:
        time.sleep(poll_s)
        for k, b in enumerate(boards):
            b.check()
            samples = b.drain()
            if samples:
                last[k] = float(np.sum(samples[-1].kg))
        now = monotonic()
        total = float(last.sum())
        recent.append((now, total))
        while len(recent) > 1 and recent[1][0] <= now - STILL_S:  # keep one reading at least STILL_S old
            recent.popleft()
        span = max(t for _, t in recent) - min(t for _, t in recent)
        held = now - recent[0][0] >= STILL_S - poll_s / 2  # the polls' own timing aside
        if total >= ARRIVED_KG and held and span <= max(STILL_KG, STILL_SHARE * total):
            return now - began
        if total < ARRIVED_KG:  # the stillness is the load's: it counts from its arrival
            recent.clear()
    return None


def drifted(totals: list[float]) -> float | None:
    """How far a reading's total moved (kg, last quarter's mean − first quarter's) when that is beyond what
    `wait_for_load` calls still (the load stepped on, or off, during the reading); None when it held still.
    `totals`: the boards' total at each poll, in order."""
    n = len(totals) // 4
    if n == 0:
        return None
    first, last = float(np.mean(totals[:n])), float(np.mean(totals[-n:]))
    return last - first if abs(last - first) > max(STILL_KG, STILL_SHARE * abs(last)) else None
