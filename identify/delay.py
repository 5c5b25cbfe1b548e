"""The measured efforts' lag behind the encoders: a constant delay, estimated with the parameters.

A recorder stamps each sample with the time it arrived. The boards' reports are placed in time by assuming the
earliest arrival came the moment its conversion ended (`drivers.board_timeline`), and current sensors are read some
time after the encoders; soft contacts make the forces themselves lag the motion. Either way the measured efforts
lag the joint angles by a few ms that nobody can measure beforehand. Inertial terms are derivatives of the motion,
so a lag of a few ms leaks into them. On the physics twin the boards lag the encoders by ~1 ms (0.4 ms of it the
pads' compliance); 2.7 ms, before the twin's boards averaged each step's forces at the state they act at, moved ϑ8
(the torso's Ixz) by 5.9 SE over 15 double-support runs. The lag is
estimated like any other parameter (`DynamicEstimator(delay="auto")`): the delay that minimises the weighted
residual given the parameters, alternating with the fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError

MAX_DELAY_S = 0.05  # searched from −MAX to +MAX: a link's lag left by the recorder's own timing is a few ms
SCAN_STEP_S = (
    0.001  # the coarse scan's step; the minimum is then refined by a parabola through its neighbours
)
ROUNDS = 2  # fit, delays, fit again: the parameters barely move the delays after the first round


def delayed(rec: DynamicRecording, delay_s: float) -> DynamicRecording:
    """The recording with its measured efforts (torques or wrench) moved `delay_s` earlier: the value recorded at
    t + delay_s is taken as the effort at t (linear interpolation; the ends hold, and the fit drops them)."""
    if delay_s == 0.0:
        return rec

    def shift(M: np.ndarray | None) -> np.ndarray | None:
        if M is None:
            return None
        return np.stack([np.interp(rec.t + delay_s, rec.t, M[:, j]) for j in range(M.shape[1])], axis=1)

    return replace(rec, tau=shift(rec.tau), wrench=shift(rec.wrench))


def checked_delays(delay: float | Sequence[float] | None, n: int) -> list[float] | None:
    """A delay (s) for all n recordings, one each, or None (none given): finite values, at most 1 s."""
    if delay is None:
        return None
    values = [float(delay)] * n if np.ndim(delay) == 0 else [float(d) for d in delay]
    if len(values) != n:
        raise DataError(f"{len(values)} delays for {n} recordings: give one for all or one each")
    if not all(np.isfinite(d) and abs(d) <= 1.0 for d in values):
        raise DataError(f"delays must be finite and within ±1 s, got {values}")
    return values


def best_delay(cost: Callable[[float], float], max_s: float = MAX_DELAY_S) -> float:
    """The delay in [−max_s, max_s] with the least cost: a scan at SCAN_STEP_S, then the vertex of the parabola
    through the best point and its neighbours (kept only if it lies between them)."""
    grid = np.arange(-max_s, max_s + SCAN_STEP_S / 2, SCAN_STEP_S)
    c = np.array([cost(float(d)) for d in grid])
    k = int(np.argmin(c))
    if 0 < k < len(grid) - 1:
        a, b, _ = np.polyfit(grid[k - 1 : k + 2] - grid[k], c[k - 1 : k + 2], 2)
        if a > 0:
            step = -b / (2 * a)
            if abs(step) <= SCAN_STEP_S:
                return float(grid[k] + step)
    return float(grid[k])
