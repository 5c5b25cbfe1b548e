"""A trajectory run's recording.csv (`drivers.trajectory_run.TrajectoryRecorder`): one row per streamed tick on
the uniform grid t0 + k·period, even when the last tick is measured before its grid time. The grid starts at the
first tick's measured time, so a first tick later than the last one (a few ms of scheduling jitter) puts the last
grid point after the last measurement: its row waited for a later tick that never came and was lost. Driven with
hand-made ticks and board reports: no bench, no MuJoCo."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from drivers.trajectory_run import TrajectoryRecorder, UniformRows, board_wrench
from formats.dynamic_recording import read_dynamic_recording

PERIOD = 0.01  # s: 100 Hz, the bundled configuration's rate
TICKS = 60
T0 = 100.0  # s on the run clock


def _late(first_ms: float, last_ms: float, seed: int = 0) -> np.ndarray:
    """Each tick's lateness behind its schedule T0 + k·PERIOD (s): the first and last as given, the others 0–2 ms."""
    late = np.random.default_rng(seed).uniform(0.0, 0.002, TICKS)
    late[0], late[-1] = first_ms / 1000, last_ms / 1000
    return late


def _signal(t: np.ndarray) -> np.ndarray:
    """A linear signal of the run clock (two channels): its interpolation — and extrapolation — is exact."""
    t = np.asarray(t, dtype=float)
    return np.stack([0.3 + 2.0 * (t - T0), -1.0 + 0.5 * (t - T0)], axis=-1)


@pytest.mark.parametrize(("first_ms", "last_ms"), [(3.0, 0.0), (0.0, 0.0), (0.0, 3.0), (1.0, 0.5)])
def test_every_tick_gets_its_row_on_the_grid(first_ms, last_ms):
    """As many rows as ticks, at k·PERIOD, each the signal at the grid time T0 + late_0 + k·PERIOD — the last one
    too when the last tick came earlier on the grid than the first (3 ms late first, on time last: lost before)."""
    t = T0 + np.arange(TICKS) * PERIOD + _late(first_ms, last_ms)
    rows: list[tuple[float, np.ndarray]] = []
    u = UniformRows(PERIOD, lambda tk, x: rows.append((tk, x)))
    for tk in t:
        u.add(tk, _signal(tk))
    u.finish()
    assert len(rows) == TICKS
    times = np.array([r[0] for r in rows])
    assert np.allclose(times, np.arange(TICKS) * PERIOD, atol=1e-12)
    assert np.allclose([r[1] for r in rows], _signal(t[0] + times), atol=1e-9)
    u.finish()  # once written, nothing more
    assert len(rows) == TICKS


def test_a_last_tick_bunched_with_the_one_before_extrapolates_from_further_back():
    """The last tick (on time, the first 2 ms late) 1 ms after a very late one: its row is extrapolated along the
    slope over a longer base (from the tick before them), not between two measurements 1 ms apart — noise of 0.01
    on the late one would have put it 0.02 off."""
    late = _late(2.0, 0.0)
    late[-2] = 0.009
    t = T0 + np.arange(TICKS) * PERIOD + late
    x = _signal(t)
    x[-2] += 0.01
    rows: list[np.ndarray] = []
    u = UniformRows(PERIOD, lambda tk, v: rows.append(v))
    for tk, xk in zip(t, x, strict=True):
        u.add(tk, xk)
    u.finish()
    assert len(rows) == TICKS
    assert np.allclose(rows[-1], _signal(t[0] + (TICKS - 1) * PERIOD), atol=1e-9)


def test_the_recording_holds_every_streamed_tick(tulip, tmp_path):
    """The recorder as `poise run` drives it: per tick the joints, then the boards' reports drained, then the
    streamed tick; closed after the last. The first tick 3 ms late, the last on time: every tick's row is in
    recording.csv, the angles on the grid, the boards' wrench (constant loads) exact."""
    t = T0 + np.arange(TICKS) * PERIOD + _late(3.0, 0.0)
    kg = np.array([[3.0, 2.5, 3.5, 2.0], [2.0, 3.0, 2.5, 1.5]])  # two boards, four cells each
    cells = np.random.default_rng(1).uniform(-0.2, 0.3, (8, 2))
    q = np.zeros((TICKS, tulip.nq))
    q[:, :2] = _signal(t)
    rec = TrajectoryRecorder(tmp_path / "run", tulip, "right", True, {"kind": "trajectory"}, PERIOD)
    rec.open_wrench_recording(cells)  # as the executor does before streaming
    seq = 0
    reported = T0 - 0.05  # the boards convert at 200 Hz, each report arriving 1 ms after its conversion
    for k, tk in enumerate(t):
        rec.joint_row(tk, 0, "stream", q[k], q[k])
        samples = []
        while reported + 0.005 <= tk:
            reported += 0.005
            seq += 1
            samples += [SimpleNamespace(t=reported + 0.001, board=b, seq=seq, kg=kg[b]) for b in (0, 1)]
        rec.board_rows(samples, 0, "stream")
        rec.stream_tick(tk, q[k], cells, k * PERIOD)
    rec.close()
    out = read_dynamic_recording(tmp_path / "run" / "recording.csv")
    assert len(out.t) == TICKS
    assert np.allclose(out.t, np.arange(TICKS) * PERIOD, atol=1e-9)
    assert np.abs(out.t_plan - out.t).max() < 0.004  # the ticks' jitter only: no stall
    assert np.allclose(out.q[:, :2], _signal(t[0] + out.t), atol=1e-8)
    assert np.allclose(out.wrench, board_wrench(kg.ravel(), cells), rtol=1e-9, atol=1e-6)
    # the cells behind it, placed where they were
    assert np.allclose(out.cells, kg.ravel()) and np.allclose(out.cell_xy(), cells, atol=1e-6)


def test_a_stall_leaves_a_gap_and_the_plan_time_behind():
    """A tick 0.3 s late and the schedule slipped by it (a stalled driver loop): no row is drawn across the stall
    — the grid points inside it get none — and after it the plan time commanded lags the run clock by 0.3 s."""
    stall = 0.3
    t = T0 + np.arange(TICKS) * PERIOD + _late(0.0, 0.0)
    t[30:] += stall
    tp = np.arange(TICKS) * PERIOD  # the plan time each tick commands
    rows: list[tuple[float, np.ndarray]] = []
    u = UniformRows(PERIOD, lambda tk, x: rows.append((tk, x)))
    for tk, p in zip(t, tp, strict=True):
        u.add(tk, np.append(_signal(tk), p))
    u.finish()
    times = np.array([r[0] for r in rows])
    x = np.array([r[1] for r in rows])
    gap = (times > t[29] - t[0]) & (times < t[30] - t[0] - 1e-9)
    assert not gap.any(), times[gap]
    assert np.diff(times).max() > 5 * PERIOD  # the recording shows the gap
    assert np.allclose(x[:, :2], _signal(t[0] + times), atol=1e-9)  # every row from measurements either side
    after = times > t[30] - t[0]
    assert np.abs(times[after] - x[after, 2] - stall).max() < 0.004
    # a row per measurement but the first after the stall, whose grid point lies inside it (nothing made up after
    # the last tick to make the count)
    assert len(rows) == TICKS - 1 and times[-1] <= t[-1] - t[0]


def test_a_late_tick_is_interpolated_not_a_gap():
    """Lateness up to GAP_PERIODS is bridged: a tick 3.5 periods late (4.5 after the one before) leaves no gap."""
    t = T0 + np.arange(TICKS) * PERIOD
    t[20] += 3.5 * PERIOD
    rows: list[float] = []
    u = UniformRows(PERIOD, lambda tk, x: rows.append(tk))
    for tk in t:
        u.add(tk, _signal(tk))
    u.finish()
    assert np.allclose(rows, np.arange(TICKS) * PERIOD)


def test_a_stall_caught_up_in_a_burst_adds_no_rows_after_the_last_tick():
    """A 0.2 s stall the driver catches up with (the ticks after it sent at once, then on schedule again): fewer
    grid points than ticks, and `finish` writes none past the last measurement — it once wrote rows up to one per
    tick, extrapolating the last slope 0.2 s beyond the run (a loaded CI machine: a recording 3.6 s longer)."""
    t = T0 + np.arange(TICKS) * PERIOD + _late(0.0, 0.0)
    t[20:40] = np.maximum(t[20:40], T0 + 0.4 + np.arange(20) * 1e-4)  # the stall, then a burst
    rows: list[tuple[float, np.ndarray]] = []
    u = UniformRows(PERIOD, lambda tk, x: rows.append((tk, x)))
    for tk in t:
        u.add(tk, _signal(tk))
    u.finish()
    times = np.array([r[0] for r in rows])
    assert times.max() < t[-1] - t[0] + PERIOD
    assert len(rows) < TICKS and np.diff(times).max() > 5 * PERIOD
    assert np.allclose([r[1] for r in rows], _signal(t[0] + times), atol=1e-9)
