"""A balance board's reports placed in time: the load over any interval of the run clock.

A board converts on its own clock at a steady rate and sends each conversion once; the reports arrive late by a
varying delay (the link, the driver's reading), some together, a lost one now and then. Taking each report as the
load of the moment it arrived, or averaging whatever arrived within a servo tick, puts the loads at the wrong times
— and the robot's servos load the boards in steps at the tick rate, so a few ms of error carry newtons into a
dynamic identification's band. Here the k-th conversion covers (e_k − W, e_k] on a regular grid e_k = e_0 + k·W:
W from the arrivals' long-run rate, the grid's phase from the earliest arrivals (a report cannot arrive before its
conversion ends), k from the driver's count of the board's reports (damaged ones included).
"""

from __future__ import annotations

import numpy as np

TAIL = 64  # reports searched for an interval's conversions (intervals lie near the latest report)
MIN_REPORTS = 4  # reports before a period is estimated


class BoardTimeline:
    """One board's reports (`add`) → time-weighted mean loads over run-clock intervals (`mean`)."""

    def __init__(self) -> None:
        self._t: list[float] = []  # arrival times
        self._k: list[int] = []  # conversion index of each report
        self._v: list[np.ndarray] = []  # its load (any shape, e.g. four cells in kg)
        self._grid: tuple[float, float] | None = None  # (e_0, W), cached until the next report

    def __len__(self) -> int:
        return len(self._t)

    def period(self) -> float | None:
        """The conversion period W (run-clock s): least squares of the arrivals on their conversion indices, so
        the arrival jitter averages out (None before MIN_REPORTS reports)."""
        if len(self._t) < MIN_REPORTS:
            return None
        k = np.asarray(self._k, dtype=float)
        t = np.asarray(self._t) - self._t[0]
        kc = k - k.mean()
        return float(kc @ (t - t.mean()) / (kc @ kc))

    def add(self, t: float, seq: int, value) -> None:
        """A report that arrived at run-clock time t, the board's `seq`-th conversion (the driver's count, which
        includes the reports it received damaged: a gap in it is a conversion that never arrived)."""
        if self._t and t < self._t[-1]:
            t = self._t[-1]  # a clock reading never runs back; equal stamps: arrived together
        if self._k and seq <= self._k[-1]:
            seq = self._k[-1] + 1
        self._t.append(float(t))
        self._k.append(int(seq))
        self._v.append(np.asarray(value, dtype=float))
        self._grid = None

    def grid(self) -> tuple[float, float] | None:
        """(e_0, W): conversion k ends at e_0 + k·W (a report arrives at or after its conversion's end)."""
        if self._grid is None:
            w = self.period()
            if w is None or not w > 0:
                return None
            t, k = np.asarray(self._t), np.asarray(self._k, dtype=float)
            self._grid = (float(np.min(t - k * w)), w)
        return self._grid

    def covered_until(self) -> float:
        """The end of the last conversion received (−inf before any can be placed)."""
        g = self.grid()
        return -np.inf if g is None else g[0] + self._k[-1] * g[1]

    def mean(self, a: float, b: float) -> np.ndarray | None:
        """The time-weighted mean load over (a, b]: each conversion held over its interval, the first and the last
        extended beyond the reports' span (None before the period is known)."""
        g = self.grid()
        if g is None or not b > a:
            return None
        e0, w = g
        first = max(0, len(self._k) - TAIL)
        ends = e0 + np.asarray(self._k[first:], dtype=float) * w
        # each report holds from the previous one's end (a lost report's interval goes to the one after it)
        starts = np.concatenate([[e0 + self._k[first - 1] * w if first else -np.inf], ends[:-1]])
        ends[-1] = np.inf
        overlap = np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0.0, None)
        if not overlap.sum() > 0:  # before the searched reports: the earliest of them
            return self._v[first].copy()
        return np.tensordot(overlap, np.asarray(self._v[first:]), axes=1) / overlap.sum()
