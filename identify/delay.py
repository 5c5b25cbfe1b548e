"""The measured efforts' lag behind the encoders: a constant delay, estimated with the parameters.

A recorder stamps each sample with the time it arrived. The boards' reports are placed in time by assuming the
earliest arrival came the moment its conversion ended (`drivers.board_timeline`), and current sensors are read some
time after the encoders; soft contacts make the forces themselves lag the motion. Either way the measured efforts
lag the joint angles by a few ms that nobody can measure beforehand. Inertial terms are derivatives of the motion,
so a lag of a few ms leaks into them. On the physics twin the boards lag the encoders by ~1 ms (0.4 ms of it the
pads' compliance); 2.7 ms, before the twin's boards averaged each step's forces at the state they act at, moved ϑ8
(the torso's Ixz) by 5.9 SE over 15 double-support runs. The lag is
estimated like any other parameter (`DynamicEstimator(delay="auto")`): the delay that minimises the weighted
least-squares residual given the parameters, alternating with the fit.

Moving the efforts by a delay leaves |delay| s at one end of the recording (and next to each gap) with no recorded
effort to take: those samples are cut before the fit (`held_free`, `trimmed`), and the filter's edges are dropped
from what remains, so a given delay of a second costs a second of the recording rather than fitting held values.

With instruments (IDIM-IV) the delay is still the least-squares profile's, and the IV estimate is made at it. The
IV residual b − A·x_IV is no criterion for a profile: with as many instruments as parameters Zᵀ·W·r = 0 holds at
every trial delay, and what ‖r‖² adds to the least-squares residual's is ‖A·(x_LS − x_IV)‖² — the IV and LS
estimates' difference, in the regressor's own span, which IV leaves in the residual and whose correlation with the
delay's effect on the efforts tilts the profile. On a TUlip double-support twin run (simplified model) that term
was 13× the least-squares residual's and pushed the profile's minimum from a few ms to the −50 ms edge of the search;
on an arm run it moved it from 8 to 12 ms.

Noise on the recorded angles biases the lag low (errors in variables): an 8 ms lag on a UR5 recording at 100 Hz is
found at 7.7–8.1 ms with a 4096-tick encoder's quantisation noise (0.44 mrad), 7.1–7.6 with 1.5 mrad, 3.9–4.6 with
5 mrad (6.4–6.7 at 500 Hz; README, "Efforts that lag the encoders"). Nothing corrects it.
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
    """The recording with its measured efforts (torques or wrench, and the cells behind it) moved `delay_s` earlier: the value recorded at
    t + delay_s is taken as the effort at t (linear interpolation). Every sample is kept: where t + delay_s lies
    beyond the recording the end value holds, and across a gap it is interpolated — `trimmed` drops those samples,
    as the fit does."""
    if delay_s == 0.0:
        return rec

    def shift(M: np.ndarray | None) -> np.ndarray | None:
        if M is None:
            return None
        return np.stack([np.interp(rec.t + delay_s, rec.t, M[:, j]) for j in range(M.shape[1])], axis=1)

    return replace(rec, tau=shift(rec.tau), wrench=shift(rec.wrench), cells=shift(rec.cells))


def gaps_after(t: np.ndarray, gap_factor: float) -> np.ndarray:
    """The samples after which a recording (times t, s) has a gap: a step over gap_factor × its median step
    (samples lost, a logger that stalled); the fit cuts it there into pieces (`identify.dynamic.fit_pieces`)."""
    dt = np.diff(t)
    return np.flatnonzero(dt > gap_factor * np.median(dt))


def held_free(t: np.ndarray, lo: float, hi: float, gap_factor: float) -> np.ndarray:
    """Which samples (times t, s) still have recorded efforts when moved by any delay in [lo, hi] s (`delayed`):
    t + delay within the recording and not inside one of its gaps (a step over gap_factor × the median step),
    where `delayed` would hold the end value or interpolate across the samples lost."""
    dt = np.diff(t)
    tol = 1e-6 * float(np.median(dt))
    ok = (t + lo >= t[0] - tol) & (t + hi <= t[-1] + tol)
    for k in gaps_after(t, gap_factor):
        ok &= ~((t + hi > t[k] + tol) & (t + lo < t[k + 1] - tol))
    return ok


def samples_of(rec: DynamicRecording, keep: np.ndarray) -> DynamicRecording:
    """The recording's samples where `keep` (a boolean per sample), everything else as it is."""
    if keep.all():
        return rec

    def cut(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[keep]

    return replace(rec, t=rec.t[keep], q=rec.q[keep], tau=cut(rec.tau), wrench=cut(rec.wrench),
                   t_plan=cut(rec.t_plan), current=cut(rec.current), cells=cut(rec.cells))  # fmt: skip


def trimmed(rec: DynamicRecording, delay_s: float, gap_factor: float) -> tuple[DynamicRecording, np.ndarray]:
    """`delayed` without the samples whose moved efforts were not recorded (`held_free`: |delay_s| s at the end,
    for a positive delay, or at the start, and as much before or after each gap); and which samples are kept."""
    keep = held_free(rec.t, delay_s, delay_s, gap_factor)
    return samples_of(delayed(rec, delay_s), keep), keep


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
