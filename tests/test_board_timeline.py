"""Board reports placed in time (`drivers.board_timeline`): the conversion grid recovered from late, bunched and
damaged arrivals, and interval means of the held conversions."""

from __future__ import annotations

import numpy as np
import pytest

from drivers.board_timeline import BoardTimeline

W, E0 = 0.025, 0.3  # s: the board's conversion period and the end of its first conversion


def _arrivals(n: int, seed: int) -> np.ndarray:
    """Arrival times of n conversions: late by 0–20 ms (a fifth on time), some read together with the next."""
    rng = np.random.default_rng(seed)
    late = rng.uniform(0.0, 0.02, n)
    late[rng.random(n) < 0.2] = 0.0
    t = E0 + W * np.arange(n) + late
    together = np.flatnonzero(rng.random(n - 1) < 0.1)
    t[together] = t[together + 1]
    return np.maximum.accumulate(t)


@pytest.mark.parametrize("seed", [0, 1])
def test_grid_is_recovered_from_late_bunched_and_damaged_reports(seed):
    n = 800
    t = _arrivals(n, seed)
    damaged = np.zeros(n, dtype=bool)
    damaged[[100, 400, 401, 650]] = True  # counted by the driver, never delivered
    tl = BoardTimeline()
    for k in np.flatnonzero(~damaged):
        tl.add(t[k], int(k), [float(k)])
    e0, w = tl.grid()
    assert w == pytest.approx(W, rel=1e-4)
    assert e0 == pytest.approx(E0, abs=1e-3)  # the earliest arrivals are on time
    assert tl.covered_until() == pytest.approx(E0 + (n - 1) * W, abs=2e-3)


def test_interval_means_hold_each_conversion_over_its_own_period():
    tl = BoardTimeline()
    t = _arrivals(200, 3)
    for k in range(200):
        tl.add(t[k], k, [float(k), 2.0 * k])  # conversion k's value: k (and 2k)
    e0, w = tl.grid()
    # inside one conversion's period: its value, wherever the reports arrived
    a = e0 + 150 * w - 0.8 * w
    np.testing.assert_allclose(tl.mean(a, a + 0.5 * w), [150.0, 300.0], atol=1e-9)
    # across two: weighted by the overlap (a quarter of 149's period, three quarters of 150's)
    a = e0 + 149 * w - 0.25 * w
    assert tl.mean(a, a + w)[0] == pytest.approx(149.75, abs=1e-9)
    # beyond the last report: the last conversion held
    assert tl.mean(e0 + 250 * w, e0 + 251 * w)[0] == pytest.approx(199.0)


def test_nothing_is_placed_before_the_period_is_known():
    tl = BoardTimeline()
    tl.add(1.0, 0, [1.0])
    tl.add(1.025, 1, [2.0])
    assert tl.grid() is None and tl.mean(0.9, 1.1) is None and tl.covered_until() == -np.inf


def test_a_clock_that_reads_back_or_a_repeated_count_does_not_break_the_order():
    tl = BoardTimeline()
    for k, t in enumerate([1.0, 1.03, 1.02, 1.075, 1.1, 1.125]):
        tl.add(t, min(k, 4), [float(k)])
    e0, w = tl.grid()
    assert w > 0 and np.all(np.diff(tl._t) >= 0) and np.all(np.diff(tl._live.k) >= 1)
