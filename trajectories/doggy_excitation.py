"""Doggy's calibration excitation (spec doggy-slom.md §5) as a streamable PWM plan (`formats.doggy_plan`).

Three stages fill the duration: a zero-command window (the bias window), a slow stage (|u| ≤ 0.15, P-control
to random set-points within the description's set-point range, for friction) and a fast stage (|u| ≤ 0.9,
random set-points plus one 0.5→4 Hz chirp, for springs and dampers). The ranges and rate come from Doggy's
description (robots/data/doggy), not from constants here.
"""

from __future__ import annotations

import numpy as np

from formats.doggy_plan import ExcitationPlan, Segment
from formats.errors import DataError
from robots import doggy

SLOW_U = 0.15  # PWM duty bound of the slow (friction) stage
FAST_U = 0.9  # PWM duty bound of the fast (spring/damper) stage
CHIRP = (0.5, 4.0, 3.0)  # Hz, Hz, s: the sweep of the fast stage
CHIRP_AMPLITUDE = 0.5  # PWM duty of the sweep per joint
ZERO_S = 1.0  # s, the default zero-command (bias) window
# The bias window's largest share of the experiment: the slow and fast stages need the rest.
ZERO_FRACTION = 0.2


def default_zero_time(duration: float) -> float:
    """The bias window when none is asked for: 1 s, or ZERO_FRACTION of a short experiment."""
    return min(ZERO_S, ZERO_FRACTION * duration)


def make_plan(
    duration: float, seed: int = 0, zero_time: float | None = None, slow_fraction: float = 0.45
) -> ExcitationPlan:
    """Zero window (default `default_zero_time`; at most ZERO_FRACTION of `duration`), slow stage (|u| ≤ 0.15)
    and fast stage (|u| ≤ 0.9, with a 0.5→4 Hz chirp) filling `duration`."""
    robot = doggy.robot()
    rng = np.random.default_rng(seed)
    zero_time = default_zero_time(duration) if zero_time is None else zero_time
    if not 0.0 < zero_time <= ZERO_FRACTION * duration + 1e-12:
        raise DataError(
            f"zero-command window {zero_time:g} s: must be > 0 and at most {ZERO_FRACTION:g} × the duration "
            f"({ZERO_FRACTION * duration:g} s)"
        )
    segs = [Segment("zero", zero_time)]
    rest = duration - zero_time
    slow_end = zero_time + slow_fraction * rest
    t = zero_time
    lim = np.array(robot.setpoint_range)

    def target():
        return tuple(float(v) for v in rng.uniform(-lim, lim))

    while t < slow_end - 1e-9:
        d = min(float(rng.uniform(1.5, 3.0)), slow_end - t)
        segs.append(Segment("goto", d, SLOW_U, target()))
        t += d
    chirp_at = t + 0.4 * (duration - t)
    chirp_done = False
    f0, f1, chirp_s = CHIRP
    while t < duration - 1e-9:
        if not chirp_done and t >= chirp_at:
            d = min(chirp_s, duration - t)
            segs.append(Segment("chirp", d, FAST_U, (0.0, 0.0, 0.0), f0, f1, (CHIRP_AMPLITUDE,) * 3))
            chirp_done = True
        else:
            d = min(float(rng.uniform(0.6, 1.5)), duration - t)
            segs.append(Segment("goto", d, FAST_U, target()))
        t += d
    return ExcitationPlan(segs, rate=float(robot.rate_hz))
