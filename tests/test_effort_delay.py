"""The measured efforts' lag behind the encoders (`identify.delay`, `identify dynamic --delay auto|MS`): estimated
with the parameters, one for all recordings, and undone before the fit."""

from __future__ import annotations

import numpy as np
import pytest

from formats.errors import DataError
from identify.delay import best_delay, checked_delays, delayed, trimmed
from identify.dynamic import GAP_FACTOR, DynamicEstimator
from poise.cli import main
from tests.test_dynamic_identify import _record, setup  # noqa: F401 (setup: the module fixture)

LAG = 0.008  # s


def _lagged(rec, lag: float):
    """The recording as a recorder that stamps the efforts `lag` s late would have it."""
    return delayed(rec, -lag)


def test_delayed_moves_the_efforts_not_the_angles(setup):  # noqa: F811
    model, res, truth = setup
    rec = _record(model, res.trajectory, truth, seed=1)
    moved = delayed(rec, 0.004)
    assert np.array_equal(moved.q, rec.q) and np.array_equal(moved.t, rec.t)
    inner = slice(10, -10)
    expected = np.stack([np.interp(rec.t + 0.004, rec.t, rec.tau[:, j]) for j in range(model.nq)], axis=1)
    assert np.allclose(moved.tau[inner], expected[inner])
    assert delayed(rec, 0.0) is rec


def test_best_delay_finds_a_parabolas_vertex_between_the_grid_points():
    assert best_delay(lambda d: (d - 0.0123) ** 2) == pytest.approx(0.0123, abs=1e-9)
    assert best_delay(lambda d: (d + 0.2) ** 2) == pytest.approx(-0.05)  # beyond the search: its edge


def test_a_lag_of_the_efforts_is_found_and_undone(setup):  # noqa: F811
    """MuJoCo's efforts on a UR5 trajectory, stamped 8 ms late: the fit finds the lag and, undone, estimates as
    from the timely recording, where ignoring it moves the parameters by several SE."""
    model, res, truth = setup
    rec = _record(model, res.trajectory, truth, seed=1)
    timely = DynamicEstimator(model).fit(rec).fit_
    late = _lagged(rec, LAG)
    ignored = DynamicEstimator(model).fit(late).fit_
    found = DynamicEstimator(model, delay="auto").fit(late).fit_
    assert found.delay_estimated and len(found.delays_s) == 1
    assert found.delays_s[0] == pytest.approx(LAG, abs=5e-4)
    shift = lambda f: np.max(np.abs(f.values - timely.values) / timely.se)  # noqa: E731
    assert shift(found) < 0.5 < 3.0 < shift(ignored), (shift(found), shift(ignored))
    assert np.all(found.sigma < ignored.sigma)


def test_a_given_delay_is_the_recording_moved(setup):  # noqa: F811
    """... and cut to the samples whose moved efforts were recorded (not held from its last one)."""
    model, res, truth = setup
    rec = _record(model, res.trajectory, truth, seed=1)
    a = DynamicEstimator(model, delay=0.004).fit(rec).fit_
    b = DynamicEstimator(model).fit(trimmed(rec, 0.004, GAP_FACTOR)[0]).fit_
    assert np.array_equal(a.values, b.values) and a.delays_s == [0.004] and not a.delay_estimated
    two = DynamicEstimator(model, delay=[0.004, 0.002]).fit([rec, rec]).fit_
    assert two.delays_s == [0.004, 0.002]


@pytest.mark.parametrize(
    "delay, n, message",
    [([0.001], 2, "1 delays for 2 recordings"), (float("nan"), 1, "finite"), (2.0, 1, "within ±1 s")],
)
def test_bad_delays_are_refused(delay, n, message):
    with pytest.raises(DataError, match=message):
        checked_delays(delay, n)


def test_a_delay_that_is_neither_seconds_nor_auto_is_refused(setup, tmp_path, capsys):  # noqa: F811
    model = setup[0]
    with pytest.raises(DataError, match="seconds or 'auto'"):
        DynamicEstimator(model, delay="soon")
    assert main(["identify", "dynamic", str(tmp_path / "r.csv"), "--delay", "soon"]) == 2
    err = capsys.readouterr().err
    assert "auto or a delay in ms" in err and "Traceback" not in err


def test_validation_moves_the_other_recording_by_the_fits_lag(setup):  # noqa: F811
    """The lag is the recorder's: `predict` (`--validate`) moves another recording of it by the fitted lag, so
    its prediction error is that of a timely recording."""
    model, res, truth = setup
    fit_rec, other = (_record(model, res.trajectory, truth, seed=s) for s in (1, 2))
    est = DynamicEstimator(model, delay="auto").fit(_lagged(fit_rec, LAG))
    timely = DynamicEstimator(model).fit(fit_rec)
    err = [
        np.sqrt(np.mean((p - m) ** 2)) for p, m in (est.predict(_lagged(other, LAG)), timely.predict(other))
    ]
    assert err[0] < 1.05 * err[1], err
    plain = DynamicEstimator(model).fit(_lagged(fit_rec, LAG))
    p, m = plain.predict(_lagged(other, LAG))
    assert np.sqrt(np.mean((p - m) ** 2)) > 1.2 * err[1]


def test_identify_dynamic_prints_the_lag_it_found(setup, tmp_path, capsys):  # noqa: F811
    from dataclasses import replace

    from formats.dynamic_recording import write_dynamic_recording
    from tests.test_dynamic_identify import UR5

    model, res, truth = setup
    path = tmp_path / "late.csv"
    rec = _lagged(_record(model, res.trajectory, truth, seed=1), LAG)
    write_dynamic_recording(replace(rec, meta={**rec.meta, "robot_source": str(UR5)}), path)
    capsys.readouterr()
    assert main(["identify", "dynamic", str(path), "--delay", "auto"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "lag the encoders" in ln)
    ms = float(line.split(" by ")[1].split(" ms")[0])
    assert ms == pytest.approx(1000 * LAG, abs=0.5) and "estimated" in line


def test_a_lag_beyond_the_search_is_refused_not_guessed(setup):  # noqa: F811
    model, res, truth = setup
    rec = _lagged(_record(model, res.trajectory, truth, seed=1), 0.2)
    with pytest.raises(DataError, match="edge of the ±50 ms search"):
        DynamicEstimator(model, delay="auto").fit(rec)
    assert DynamicEstimator(model, delay=0.2).fit(rec).fit_.delays_s == [0.2]  # given, it is used
