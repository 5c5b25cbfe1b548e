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
be placed a period early, and the period itself would come out long. A report is its conversion's end plus a
delay that is never negative but may vary by a period or more (a loaded host reads late), so one report arriving
a period late shows nothing: a loss shows as the reports after it ALL arriving a period or more late against the
earliest arrivals of the FLOOR_OF reports before them (the lower envelope of the delays shifted by W). Each
report is placed one index after the one before (or as far as the driver's count says); a run of reports all a
period late becomes a loss once it is long enough to be improbable from the delays alone (LOSS_EVIDENCE at the
share of recent reports that arrived that late: a few reports when the delays are small, up to LOOK_MAX when
they spread over a period), and the loss is placed where the shift starts (before the run's last stretch that
is late by the whole shift). Until then those reports are not counted as placed (`covered_until`). A report that
arrives before its index's slot shows that an earlier "loss" was only a late stretch (reports read together
after a stall, a latency step), and the indices since then are moved back. The period is fitted to the earliest
arrivals on their indices, and found again from where the arrival times repeat (`_coherent_period`) while the
run is young, so that a period made long by losses not yet found does not hide them (every index placed again
beside the live placement, REPLACE_PER_ADD reports per report added, so that no report's `add` takes long).
"""

from __future__ import annotations

import bisect
import math
from itertools import repeat
from operator import mul, sub

import numpy as np

TAIL = 64  # reports searched for an interval's conversions (intervals lie near the latest report)
MIN_REPORTS = 4  # reports before a period is estimated
# reports before lost ones are looked for (the period of fewer, jittered arrivals is too rough)
DETECT_FROM = 32
ANCHOR = 16  # recent reports whose earliest arrival (against the grid) sets the grid's phase
# a report counts as a period late when it arrives at least 1 − LATE_TOL periods after the slot of the one
# counted on, and as early (an earlier loss was only a late report) when it arrives LATE_TOL periods before its slot
LATE_TOL = 0.25
# a loss is taken only once the reports after it have all arrived a period late (the lower envelope of their
# delays shifted by W), as many of them as make such a run improbable without one: LOSS_EVIDENCE at the share of
# the latest LATE_SHARE_OF reports that arrived that late, never fewer than LOOK_MIN nor more than LOOK_MAX
LOSS_EVIDENCE = 1e-6
LATE_SHARE_OF = 128
LOOK_MIN = 3
LOOK_MAX = 32  # 0.4 s at 80 Hz
# the reports whose earliest arrival (against the grid) is the phase a report's lateness is measured on: more than
# ANCHOR, so that the earliest of them is on time even when the delays spread over more than a period
FLOOR_OF = 64
# periods a report after a loss may seem early by (the phase is from a few arrivals' earliest)
SHIFT_TOL = 0.15
COHERE_OF = 1024  # the latest reports whose arrival times show the period at `_resolve`
COHERENT = 4.0  # the gathering of their phases (× √n) that shows it: far above what scattered arrivals make
UNDO_REACH = 1024  # reports back an early report may show a loss to have been a late stretch (~13 s at 80 Hz)
REFIT_EVERY = 256  # reports between fits of the period after the last RESOLVE_AT
FIT_WINDOW = 4096  # latest reports the period is fitted to (~50 s at 80 Hz: each fit's cost stays bounded)
# reports a pending re-placement (`_resolve`) places per `add` (each add's work stays bounded)
REPLACE_PER_ADD = 128
SPECTRUM_PAD = 5  # the coarse period search's spectrum: bins per peak width of the phases' gathering
# report counts at which every index is found again (32 … 1024)
RESOLVE_AT = frozenset(2**p for p in range(5, 11))


class _Placement:
    """Conversion indices placed report by report (`place`) on a timeline's arrival times `t` and least index
    steps `step`: its own lists, shared, not copied (reports 0 … len(k) − 1 of them are placed)."""

    def __init__(self, t: list[float], step: list[int]) -> None:
        self.t, self.step = t, step
        self.k: list[int] = []  # conversion index of each report placed
        self.gaps: list[int] = []  # the reports a loss was found before (ascending)
        self.run: int | None = None  # the first of the latest reports that all arrived a period late, if any
        self.run_need = LOOK_MIN  # how many such reports make a loss before the first of them
        self.moved = 0  # counts the moves of placed reports (a cached phase is stale after one)
        self.floor: tuple | None = None  # `anchor`'s cache: (W, moves, lo, hi, earliest's index, its t − k·W)

    def fit(self) -> float | None:
        """The period fitted to the reports, once all are placed (see `BoardTimeline.period`)."""
        n = len(self.t)
        if n < MIN_REPORTS:
            return None
        lo = max(0, n - FIT_WINDOW)
        n -= lo
        k = np.asarray(self.k[lo:], dtype=float)
        t = np.asarray(self.t[lo:]) - self.t[lo]
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
        return w if w is not None and w > 0 else None

    def anchor(self, lo: int, hi: int, w: float) -> float:
        """The grid's phase from reports lo..hi−1: their earliest arrival against their conversion ends."""
        lo = max(0, lo)
        c = self.floor
        if c is not None and c[0] == w and c[1] == self.moved and c[2] <= lo <= c[4] and c[3] <= hi:
            v, at = c[5], c[4]  # the window moved on by a report or two: the earliest is still in it
            for j in range(c[3], hi):
                x = self.t[j] - self.k[j] * w
                if x < v:
                    v, at = x, j
        else:
            f = list(map(sub, self.t[lo:hi], map(mul, self.k[lo:hi], repeat(w))))
            v = min(f)
            at = lo + f.index(v)
        self.floor = (w, self.moved, lo, hi, at, v)
        return v

    def excess(self, i: int, k: int, a: float, w: float) -> int:
        """Conversions that had ended by report i's arrival (within LATE_TOL) beyond its index k, on phase a."""
        return math.floor((self.t[i] - a) / w + LATE_TOL) - k

    def look_ahead(self, p: int, a: float, w: float) -> int:
        """Reports that must stay a period late from report p on before a loss there is taken: as many as make a
        run that long of late reports improbable (< LOSS_EVIDENCE) at the share of the recent reports that arrived
        as late, within [LOOK_MIN, LOOK_MAX]."""
        lo = max(0, p - LATE_SHARE_OF)
        t = np.asarray(self.t[lo:p])
        k = np.asarray(self.k[lo:p], dtype=float)
        q = float(np.mean(t - k * w - a >= (1 - LATE_TOL) * w)) if p > lo else 0.0
        if not q > 0:
            return LOOK_MIN
        if q >= 1:
            return LOOK_MAX
        return int(min(LOOK_MAX, max(LOOK_MIN, math.ceil(math.log(LOSS_EVIDENCE) / math.log(q)))))

    def place(self, i: int, w: float | None) -> None:
        """Report i's conversion index from the ones before it (they may move, see the module's note)."""
        if i == 0:
            self.k.append(0)
            return
        k = self.k[i - 1] + self.step[i]
        self.k.append(k)
        if w is None or not w > 0:
            return
        p = i if self.run is None else self.run  # a run's reports are measured against the phase before it
        a = self.anchor(p - FLOOR_OF, p, w)
        ex = self.excess(i, k, a, w)
        if ex < 0:
            # arrived before its slot: an earlier "loss" was only a late stretch (or the run of late ones was none)
            self.run = None
            want = k + ex
            g = len(self.gaps)
            while want < k and g > 0 and i - self.gaps[g - 1] <= UNDO_REACH:  # the latest losses first
                g -= 1
                j = self.gaps[g]
                slack = self.k[j] - self.k[j - 1] - self.step[j]
                r = min(slack, k - want)
                for m in range(j, i + 1):
                    self.k[m] -= r
                self.moved += 1
                k -= r
                if r == slack:
                    del self.gaps[g]
            return
        if ex == 0:  # on time, or late by less than a period: no run of late reports (any more)
            self.run = None
            return
        if self.run is None:  # the first report a period late: maybe reports were lost just before it
            self.run = i
            self.run_need = self.look_ahead(i, a, w)
        self.settle(i, w)

    def settle(self, i: int, w: float) -> None:
        """Reports run..i all arrived a period or more late against the phase before the run: once enough have,
        the lowest of their shifts is a loss, placed before the first report of the run's last stretch that all
        arrived that shift late within SHIFT_TOL (the ones before it were late reports); reports still later
        after the shift start a new run."""
        while self.run is not None and i - self.run + 1 >= self.run_need:
            p = self.run
            a = self.anchor(p - FLOOR_OF, p, w)
            late = [(self.t[j] - a) / w - self.k[j] for j in range(p, i + 1)]
            s = min(math.floor(x + LATE_TOL) for x in late)
            m = i + 1
            while m > p and late[m - 1 - p] >= s - SHIFT_TOL:
                m -= 1
            if m > i:  # late by less than the shift all through: not a loss (yet); look again from the next
                self.run = None
                return
            for j in range(m, i + 1):
                self.k[j] += s
            self.moved += 1
            if not self.gaps or self.gaps[-1] != m:
                bisect.insort(self.gaps, m)
            # reports still a period late after the shift: a further loss, found from where their run starts
            start, m = m, i + 1
            while m > start and math.floor(late[m - 1 - p] - s + LATE_TOL) >= 1:
                m -= 1
            self.run = m if m <= i else None


class BoardTimeline:
    """One board's reports (`add`) → time-weighted mean loads over run-clock intervals (`mean`)."""

    def __init__(self) -> None:
        self._t: list[float] = []  # arrival times
        self._step: list[int] = []  # the least index step from the report before (the driver's count)
        self._v: list[np.ndarray] = []  # its load (any shape, e.g. four cells in kg)
        self._seq: int | None = None  # the driver's count of the latest report
        self._w: float | None = None  # the period, fitted now and then (`_Placement.fit`)
        self._grid: tuple[float, float] | None = None  # (e_0, W), cached until the next report
        self._live = _Placement(self._t, self._step)  # the reports' conversion indices
        # a pending re-placement: (its placement, the period it places on, its pass)
        self._pending: tuple[_Placement, float | None, int] | None = None

    def __len__(self) -> int:
        return len(self._t)

    def period(self) -> float | None:
        """The conversion period W (run-clock s): a straight line through the latest FIT_WINDOW arrivals on their
        conversion indices, fitted again to the half that arrived soonest after it and then to the soonest half of
        those, a quarter (delays only make reports late: a stall's late burst must not tilt it), so the arrival
        jitter averages out (None before MIN_REPORTS reports)."""
        return self._w

    def _resolve(self) -> None:
        """Every report's index found again on the current period (the early ones were placed on a rough one): a
        re-placement from the first report on, done REPLACE_PER_ADD reports per `add` beside the live placement
        (`_advance`), which it replaces once it has caught up with the latest report."""
        # a period fitted to the driver's count alone is long by the share of reports lost, and on it the reports
        # after a loss drift back to on time before enough of them are seen: start from the period the arrival
        # times repeat at, when they show one
        self._w = self._live.fit()
        self._pending = (_Placement(self._t, self._step), self._coherent_period(), 1)

    def _advance(self) -> None:
        """The pending re-placement moved on by at most REPLACE_PER_ADD reports; caught up with the latest report,
        the period is fitted to it and, unless that period is the one it placed on (a fixed point) or it was the
        third pass, it starts again on that period; else it replaces the live placement."""
        budget = REPLACE_PER_ADD
        while self._pending is not None and budget > 0:
            job, w, passes = self._pending
            start = len(job.k)
            stop = min(len(self._t), start + budget)
            for i in range(start, stop):
                job.place(i, w)
            budget -= stop - start
            if stop < len(self._t):
                return
            fitted = job.fit()
            if fitted != w and passes < 3:
                self._pending = (_Placement(self._t, self._step), fitted, passes + 1)
            else:
                self._pending, self._live, self._w = None, job, fitted

    def _coherence(self, t: np.ndarray, periods: np.ndarray) -> np.ndarray:
        """How closely the arrival times t gather in phase on each of the periods (1: all at one phase)."""
        return np.abs(np.exp(2j * np.pi * t[None, :] / periods[:, None]).mean(axis=1))

    def _coherent_period(self) -> float | None:
        """The period the latest COHERE_OF arrival times repeat at (the one their phases gather at most, searched
        from the driver's count's period down by a quarter), if they gather clearly; else the fitted one. The
        coarse search reads the gathering of every candidate off one spectrum of the arrivals (shifted down to
        the candidates' band and binned), then checks the best few candidates exactly and refines the best."""
        n = min(len(self._t), COHERE_OF)
        if n < MIN_REPORTS:
            return self._w
        t = np.asarray(self._t[-n:])
        span = t[-1] - t[0]
        if not span > 0:
            return self._w
        t = t - t[0]
        steps = sum(self._step[-n + 1 :])
        hi = span / steps * 1.02
        grid = np.arange(hi / 1.3, hi, 0.2 * hi * hi / span)
        d = grid[1] - grid[0]
        # the spectrum: frequencies 1/period within ±half of the band's centre fc, on bins of h (phase error
        # ≤ π/32) and SPECTRUM_PAD times finer in frequency than the gatherings' peak width (1/span)
        fc = (1 / grid[0] + 1 / grid[-1]) / 2
        half = (1 / grid[0] - 1 / grid[-1]) / 2
        h = 1 / (32 * half)
        m = np.rint(t / h).astype(np.int64)
        size = 1 << int(math.ceil(math.log2(max(m[-1] + 1, SPECTRUM_PAD * span / h))))
        z = np.exp(2j * np.pi * fc * t)
        spec = np.abs(np.fft.ifft(np.bincount(m, z.real, size) + 1j * np.bincount(m, z.imag, size)))
        at = np.rint((1 / grid - fc) * size * h).astype(np.int64) % size
        best = int(np.argmax(spec[at]))
        lo = max(0, best - 3)
        best = lo + int(np.argmax(self._coherence(t, grid[lo : best + 4])))
        grid = np.linspace(grid[best] - d, grid[best] + d, 41)
        c = self._coherence(t, grid)
        best = int(np.argmax(c))
        d = grid[1] - grid[0]
        grid = np.linspace(grid[best] - d, grid[best] + d, 41)
        if c.max() * math.sqrt(n) < COHERENT:
            return self._w
        return float(grid[20])

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
        self._live.place(n - 1, self._w if n > DETECT_FROM else None)
        if n in RESOLVE_AT:
            self._resolve()
        elif n < DETECT_FROM or n % REFIT_EVERY == 0:  # the grid's phase is local: W drifts slowly enough
            self._w = self._live.fit()
        if self._pending is not None:
            self._advance()
        self._grid = None

    def grid(self) -> tuple[float, float] | None:
        """(e_0, W): conversion k ends at e_0 + k·W (a report arrives at or after its conversion's end; the
        phase from the latest ANCHOR reports before any run that may yet show a loss, so a board that restarted
        its conversions is followed and the reports placed for good are not moved by one undecided)."""
        if self._grid is None:
            w = self.period()
            if w is None or not w > 0:
                return None
            # the reports of an undecided run are left out: their indices are still short by the loss not yet taken
            run = self._live.run
            hi = len(self._t) if run is None else max(1, run)
            lo = max(0, hi - ANCHOR)
            t, k = np.asarray(self._t[lo:hi]), np.asarray(self._live.k[lo:hi], dtype=float)
            self._grid = (float(np.min(t - k * w)), w)
        return self._grid

    def ends(self) -> np.ndarray | None:
        """Every report's conversion end on the current grid (None before the period is known)."""
        g = self.grid()
        return None if g is None else g[0] + np.asarray(self._live.k, dtype=float) * g[1]

    def lost(self) -> int:
        """Conversions that never arrived (damaged or lost) between the first report and the latest."""
        k = self._live.k
        return k[-1] - k[0] + 1 - len(k) if k else 0

    def covered_until(self) -> float:
        """The end of the last conversion received and placed for good (−inf before any can be placed): the
        latest reports, while they may yet show a loss before them, are not counted."""
        g = self.grid()
        if g is None:
            return -np.inf
        k, run = self._live.k, self._live.run
        return g[0] + k[len(k) - 1 if run is None else max(0, run - 1)] * g[1]

    def mean(self, a: float, b: float) -> np.ndarray | None:
        """The time-weighted mean load over (a, b]: each conversion held over its interval, the first and the last
        extended beyond the reports' span (None before the period is known)."""
        g = self.grid()
        if g is None or not b > a:
            return None
        e0, w = g
        k = self._live.k
        first = max(0, len(k) - TAIL)
        ends = e0 + np.asarray(k[first:], dtype=float) * w
        # each report holds from the previous one's end (a lost report's interval goes to the one after it)
        starts = np.concatenate([[e0 + k[first - 1] * w if first else -np.inf], ends[:-1]])
        ends[-1] = np.inf
        overlap = np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0.0, None)
        if not overlap.sum() > 0:  # before the searched reports: the earliest of them
            return self._v[first].copy()
        return np.tensordot(overlap, np.asarray(self._v[first:]), axes=1) / overlap.sum()
