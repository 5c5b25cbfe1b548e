"""The bench clock the drivers pace and stamp by (in the spirit of ROS `use_sim_time`).

Every wait, hold, settle, tick schedule and board-sample timestamp of a run reads one `Clock`. On real hardware
it is the host's monotonic clock (`HOST_CLOCK`); an emulated bench may supply its own, e.g. one that follows a
physics twin's simulated time, so the drivers keep step with the simulated robot however slow the machine is.
Transport watchdogs (reply timeouts, a silent link, a lost board) stay on the host clock: they are about the
devices' bytes, not the robot's time.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Seconds on a monotonic time line, and a way to wait until a time on it."""

    def now(self) -> float:
        """The present time (s); only differences between readings mean anything."""
        ...

    def sleep_until(self, t: float) -> None:
        """Return once `now() >= t` (at once when it already is)."""
        ...


class HostClock:
    """The host's monotonic clock: what real servos and boards run by."""

    def now(self) -> float:
        return time.monotonic()

    def sleep_until(self, t: float) -> None:
        wait = t - time.monotonic()
        if wait > 0:
            time.sleep(wait)


HOST_CLOCK = HostClock()


def sleep_for(clock: Clock, seconds: float) -> None:
    """Wait `seconds` on `clock`."""
    clock.sleep_until(clock.now() + seconds)
