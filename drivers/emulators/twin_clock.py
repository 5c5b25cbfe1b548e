"""The emulated bench's clock: the physics twin's simulated time, so the drivers keep step with the physics.

Readings are simulated seconds divided by the twin's `time_scale`: the drivers' existing scaling (durations
divided by the scale, trajectory ticks multiplied by it) keeps its meaning, and on a machine that keeps up the
clock runs with the wall clock. On one that does not, it runs slower, and so do every wait, hold, settle and
tick schedule of the drivers and the timestamps of the board samples: the simulated robot sees the setpoints at
the simulated times planned for them however slow the machine is.
"""

from __future__ import annotations

from drivers.emulators.mujoco_twin import Twin


class TwinClock:
    """A `drivers.clock.Clock` reading the twin's simulated time / time_scale (marks the twin as followed)."""

    def __init__(self, twin: Twin) -> None:
        self.twin = twin
        self.scale = twin.opts.time_scale
        twin.clocked = True

    def now(self) -> float:
        return self.twin.t_sim / self.scale

    def sleep_until(self, t: float) -> None:
        """Wait for the physics to reach `t` (this clock's seconds); raises DeviceError if the physics stopped."""
        self.twin.wait_until(t * self.scale)
