"""A balance board's reports placed in time: the load over any interval of the run clock.

A board converts on its own clock at a steady rate and sends each conversion once; the reports arrive late by a
varying delay (the link, the driver's reading), some together, a lost one now and then. Taking each report as the
load of the moment it arrived, or averaging whatever arrived within a servo tick, puts the loads at the wrong times
— and the robot's servos load the boards in steps at the tick rate, so a few ms of error carry newtons into a
dynamic identification's band. Here the k-th conversion covers (e_k − W, e_k] on a regular grid e_k = e_0 + k·W:
W from the arrivals' rate over the latest FIT_WINDOW reports, the grid's phase from the earliest recent arrivals (a
report cannot arrive before its conversion ends), k from the arrivals themselves.

The driver's count (`BoardSample.seq`) numbers what reached it, damaged reports included, but a report lost over
the air leaves no trace in it (Bluetooth drops bad packets before the host sees them, a board has no report
counter, and a status report stops the data for a few conversions): counted on, every report after a loss would
be placed a period early, and the period itself would come out long. So each report's conversion index is the
latest one that had ended by its arrival on the grid of the reports before it (a report that arrives a period or
more after the previous one's slot means lost ones), never less than the driver's count allows; a report that
arrives earlier than its index's slot shows that an earlier "loss" was only a late report (reports read
together after a stall), and the indices since then are moved back.
"""

from __future__ import annotations

import math

import numpy as np

TAIL = 64  # reports searched for an interval's conversions (intervals lie near the latest report)
MIN_REPORTS = 4  # reports before a period is estimated
DETECT_FROM = (
    32  # reports before lost ones are looked for (the period of fewer, jittered arrivals is too rough)
)
ANCHOR = 16  # recent reports whose earliest arrival (against the grid) sets the grid's phase
# a report counts as after a loss when it arrives at least 1 − LATE_TOL periods after the slot of the one
# counted on: a report late by less than 0.75 W is never taken for a loss, a later one only until a prompt one
# arrives (it moves the indices back)
LATE_TOL = 0.25
REFIT_EVERY = 256  # reports between fits of the period after the last RESOLVE_AT
FIT_WINDOW = 4096  # latest reports the period is fitted to (~50 s at 80 Hz: each fit's cost stays bounded)
RESOLVE_AT = frozenset(
    2**p for p in range(5, 11)
)  # report counts at which every index is found again (32 … 1024)


class BoardTimeline:
    """One board's reports (`add`) → time-weighted mean loads over run-clock intervals (`mean`)."""

    def __init__(self) -> None:
        self._t: list[float] = []  # arrival times
        self._step: list[int] = []  # the least index step from the report before (the driver's count)
        self._k: list[int] = []  # conversion index of each report
        self._v: list[np.ndarray] = []  # its load (any shape, e.g. four cells in kg)
        self._seq: int | None = None  # the driver's count of the latest report
        self._w: float | None = None  # the period, fitted now and then (`_fit`)
        self._grid: tuple[float, float] | None = None  # (e_0, W), cached until the next report

    def __len__(self) -> int:
        return len(self._t)

    def period(self) -> float | None:
        """The conversion period W (run-clock s): a straight line through the latest FIT_WINDOW arrivals on their
        conversion indices, fitted again to the half that arrived soonest after it (delays only make reports late: a
        stall's late burst must not tilt it), so the arrival jitter averages out (None before MIN_REPORTS reports)."""
        return self._w

    def _fit(self) -> None:
        n = len(self._t)
        if n < MIN_REPORTS:
            self._w = None
            return
        lo = max(0, n - FIT_WINDOW)
        n -= lo
        k = np.asarray(self._k[lo:], dtype=float)
        t = np.asarray(self._t[lo:]) - self._t[lo]
        use = np.ones(n, dtype=bool)
        w = None
        for _ in range(3):
            kc = k[use] - k[use].mean()
            if not kc @ kc > 0:
                break
            w = float(kc @ (t[use] - t[use].mean()) / (kc @ kc))
            r = t - k * w
            use = r <= np.median(r[use])
            if use.sum() < MIN_REPORTS:
                break
        self._w = w if w is not None and w > 0 else None

    def _expected(self, i: int, w: float) -> int:
        """The latest conversion that had ended when report i arrived, on the grid of the ANCHOR reports before it."""
        lo = max(0, i - ANCHOR)
        a = min(self._t[j] - self._k[j] * w for j in range(lo, i))
        return math.floor((self._t[i] - a) / w + LATE_TOL)

    def _place(self, i: int, w: float | None) -> None:
        """Report i's conversion index from the ones before it (they may move back, see the module's note)."""
        if i == 0:
            self._k.append(0)
            return
        k = self._k[i - 1] + self._step[i]
        if w is not None and w > 0:
            want = self._expected(i, w)
            if want > k:  # arrived a period or more after its slot: reports lost in between
                k = want
            j = i - 1
            while want < k and j > 0 and i - j <= TAIL:  # arrived before its slot: an earlier "loss" was late
                slack = self._k[j] - self._k[j - 1] - self._step[j]
                if slack > 0:
                    r = min(slack, k - want)
                    for m in range(j, i):
                        self._k[m] -= r
                    k -= r
                j -= 1
        self._k.append(k)

    def _resolve(self) -> None:
        """Every report's index found again on the current period (the early ones were placed on a rough one)."""
        for _ in range(2):
            self._fit()
            self._k = []
            for i in range(len(self._t)):
                self._place(i, self._w)
        self._fit()

    def add(self, t: float, seq: int, value) -> None:
        """A report that arrived at run-clock time t, the driver's `seq`-th (its count includes the reports it
        received damaged: a gap in it is a conversion that never arrived; silent losses are found from the
        arrival times)."""
        if self._t and t < self._t[-1]:
            t = self._t[-1]  # a clock reading never runs back; equal stamps: arrived together
        step = 1 if self._seq is None else max(1, int(seq) - self._seq)
        self._seq = int(seq) if self._seq is None else max(self._seq + 1, int(seq))
        self._t.append(float(t))
        self._step.append(step)
        self._v.append(np.asarray(value, dtype=float))
        n = len(self._t)
        self._place(n - 1, self._w if n > DETECT_FROM else None)
        if n in RESOLVE_AT:
            self._resolve()
        elif n < DETECT_FROM or n % REFIT_EVERY == 0:  # the grid's phase is local: W drifts slowly enough
            self._fit()
        self._grid = None

    def grid(self) -> tuple[float, float] | None:
        """(e_0, W): conversion k ends at e_0 + k·W (a report arrives at or after its conversion's end; the
        phase from the latest ANCHOR reports, so a board that restarted its conversions is followed)."""
        if self._grid is None:
            w = self.period()
            if w is None or not w > 0:
                return None
            lo = max(0, len(self._t) - ANCHOR)
            t, k = np.asarray(self._t[lo:]), np.asarray(self._k[lo:], dtype=float)
            self._grid = (float(np.min(t - k * w)), w)
        return self._grid

    def ends(self) -> np.ndarray | None:
        """Every report's conversion end on the current grid (None before the period is known)."""
        g = self.grid()
        return None if g is None else g[0] + np.asarray(self._k, dtype=float) * g[1]

    def lost(self) -> int:
        """Conversions that never arrived (damaged or lost) between the first report and the latest."""
        return self._k[-1] - self._k[0] + 1 - len(self._k) if self._k else 0

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
