"""Where the efforts' delay (`identify.delay`, `identify dynamic --delay auto|MS`) meets the recording's ends and the
instruments: the samples a delay leaves without recorded efforts are cut, not fitted as held values; a delay that
leaves too little is refused; the lag is the least-squares profile's, with instruments too (the IV estimate is
then made at it)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from drivers.emulators.mujoco_arm import arm_efforts
from formats.dynamic_recording import DynamicRecording, write_dynamic_recording
from formats.errors import DataError
from identify.delay import delayed, held_free, samples_of, trimmed
from identify.dynamic import GAP_FACTOR, DynamicEstimator
from poise.cli import main
from tests.test_dynamic_identify import IMPERFECT, UR5, setup  # noqa: F401 (setup: the module fixture)
from trajectories.verify import sample_grid

LAG = 0.008  # s
LEAD = 0.02  # s: the plan runs this far ahead of the encoders (a controller's tracking lag)


def _recording(model, traj, truth, late=0.0, rate=500.0, encoder_noise=0.0, seed=1):
    """MuJoCo's efforts (friction, noise) on the UR5 trajectory, stamped `late` s late — the trajectory is periodic,
    so the efforts before its start and after its end are known, and none is held; and the planned angles, LEAD s
    ahead of the encoders, as instruments. `encoder_noise` (rad): white noise on the recorded angles."""
    t = sample_grid(traj, 1 / rate)
    q, qd, qdd = traj.sample(t)
    qm, _ = arm_efforts(model, truth, q, qd, qdd, IMPERFECT, np.random.default_rng(seed))
    _, tau = arm_efforts(model, truth, *traj.sample(t - late), IMPERFECT, np.random.default_rng(seed + 1))
    qm = qm + np.random.default_rng(seed + 2).normal(0.0, encoder_noise, qm.shape)
    rec = DynamicRecording(model.name, model.root, list(model.joint_names), t, qm, tau)
    return rec, traj.sample(t + LEAD)[0]


def test_the_samples_a_delay_leaves_without_recorded_efforts_are_found():
    """`held_free`: |delay| s at the end (positive delay) or the start (negative), and as much before or after a
    gap (here 0.5–0.8 s, no samples between), have no recorded effort to take; a range of delays cuts both."""
    t = np.concatenate([np.arange(0.0, 0.505, 0.01), np.arange(0.8, 1.005, 0.01)])
    late = held_free(t, 0.05, 0.05, GAP_FACTOR)
    assert np.array_equal(t[~late], t[((t > 0.455) & (t < 0.505)) | (t > 0.955)])
    early = held_free(t, -0.05, -0.05, GAP_FACTOR)
    assert np.array_equal(t[~early], t[(t < 0.045) | ((t > 0.795) & (t < 0.845))])
    assert np.array_equal(held_free(t, -0.05, 0.05, GAP_FACTOR), late & early)
    assert held_free(t, 0.0, 0.0, GAP_FACTOR).all()


def test_trimmed_is_the_moved_recording_without_the_held_samples(setup):  # noqa: F811
    model, res, truth = setup
    rec, _ = _recording(model, res.trajectory, truth)
    for d in (0.3, -0.3):
        moved, keep = trimmed(rec, d, GAP_FACTOR)
        assert np.count_nonzero(~keep) == round(0.3 * rec.rate_hz)
        whole = delayed(rec, d)
        assert np.array_equal(moved.t, rec.t[keep]) and np.array_equal(moved.q, rec.q[keep])
        assert np.array_equal(moved.tau, whole.tau[keep])
    assert samples_of(rec, np.ones(len(rec.t), dtype=bool)) is rec


def test_a_known_lag_is_found_alike_with_and_without_instruments(setup):  # noqa: F811
    """Efforts stamped 8 ms late, the plan 20 ms ahead of the encoders: least squares and IV find the lag to within
    0.5 ms, the same lag (the least-squares profile's), and the IV fit is the one at that lag as given."""
    model, res, truth = setup
    rec, plan = _recording(model, res.trajectory, truth, late=LAG)
    ls = DynamicEstimator(model, delay="auto").fit(rec).fit_
    iv = DynamicEstimator(model, delay="auto").fit(rec, plan).fit_
    assert iv.instruments and not ls.instruments and ls.delay_estimated and iv.delay_estimated
    assert ls.delays_s[0] == pytest.approx(LAG, abs=5e-4)
    assert iv.delays_s == ls.delays_s
    given = DynamicEstimator(model, delay=iv.delays_s[0]).fit(rec, plan).fit_
    assert np.array_equal(given.values, iv.values)


def test_the_iv_residual_does_not_choose_the_lag(setup):  # noqa: F811
    """Noisy encoders (5 mrad at 100 Hz): least squares and IV estimates part by several SE — encoder noise biases
    least squares (errors in variables) — and the IV residual's norm takes that difference, which lies in the
    regressor's span, for a misfit: its profile put the lag at 1.3 ms where least squares put it at 4.6 ms (3.9 ms
    now, on the samples every searched lag leaves recorded). The lag is the least-squares profile's, with
    instruments or without."""
    model, res, truth = setup
    rec, plan = _recording(model, res.trajectory, truth, late=LAG, rate=100.0, encoder_noise=0.005)
    ls = DynamicEstimator(model, delay="auto").fit(rec).fit_
    iv = DynamicEstimator(model, delay="auto").fit(rec, plan).fit_
    assert np.max(np.abs(iv.values - ls.values) / ls.se) > 2.0  # the instruments matter here
    assert iv.delays_s == ls.delays_s
    assert 0.0 < ls.delays_s[0] < LAG  # errors in variables shrink the lag too: what --delay auto cannot undo


@pytest.mark.parametrize("late", [0.5, -0.5])
def test_a_large_delay_cuts_the_samples_without_recorded_efforts(setup, late):  # noqa: F811
    """Efforts stamped 0.5 s late (or early) and a delay of 0.5 s (−0.5 s) given: the 0.5 s at the end (start)
    whose efforts would be held is cut — the fitted time drops by it, the edges rise by it (what `needed_s`
    adds) — and the residual is the timely recording's, where the held efforts (fitted before) raised some
    joint's σ 3–8×."""
    model, res, truth = setup
    timely, _ = _recording(model, res.trajectory, truth)
    rec, plan = _recording(model, res.trajectory, truth, late=late)
    est = DynamicEstimator(model)
    base = est.fit(timely).fit_
    fit = DynamicEstimator(model, delay=late).fit(rec).fit_
    assert fit.fitted_s == pytest.approx(base.fitted_s - abs(late), abs=0.02)
    assert fit.edges_s == pytest.approx(base.edges_s + abs(late), abs=0.01)
    assert fit.samples < base.samples and fit.delays_s == [late]
    assert np.all(fit.sigma < 1.25 * base.sigma), (fit.sigma, base.sigma)
    held = DynamicEstimator(model).fit(delayed(rec, late)).fit_  # every sample, the ends held
    assert held.fitted_s == base.fitted_s and np.max(held.sigma / base.sigma) > 2.0
    ref = est.reference_values(truth)
    assert np.max(np.abs(fit.values[: len(ref)] - ref) / fit.se[: len(ref)]) < 3.5
    iv = DynamicEstimator(model, delay=late).fit(rec, plan).fit_  # the planned angles cut alike
    assert iv.instruments and iv.fitted_s == fit.fitted_s and iv.samples == fit.samples
    # validating on another recording of this recorder: its held samples cut too, its rows and times alike
    other = DynamicEstimator(model, delay=late).fit(rec)
    pred, meas = other.predict(rec)
    times = other.predicted_times(rec)
    assert len(pred) == len(meas) == len(times)
    if late > 0:  # none of its rows from the last 0.5 s (first, for an early recorder), held before
        assert times.max() < rec.t[-1] - late
    else:
        assert times.min() > rec.t[0] - late
    on_time = np.subtract(*est.predict(timely))  # the timely recording's own prediction errors
    assert np.sqrt(np.mean((pred - meas) ** 2)) < 1.25 * np.sqrt(np.mean(on_time**2))


@pytest.mark.parametrize("late", [1.0, -1.0])
def test_a_delay_that_leaves_too_little_is_refused(setup, late):  # noqa: F811
    model, res, truth = setup
    rec, _ = _recording(model, res.trajectory, truth)
    short = samples_of(rec, rec.t <= 1.8)
    DynamicEstimator(model, delay=0.008).fit(short)  # it can be fitted
    ms = f"{1000 * late:g}"
    with pytest.raises(DataError, match=rf"a delay of {ms} ms leaves 0\.8 s of the 1\.8 s recording"):
        DynamicEstimator(model, delay=late).fit(short)


def test_identify_dynamic_reports_the_cut_and_refuses_an_absurd_delay(setup, tmp_path, capsys):  # noqa: F811
    """`--delay MS` on the command line (ms): the JSON's fitted time drops by the delay; a delay that would leave
    less of a recording than it cuts is refused in one line."""
    model, res, truth = setup
    rec, _ = _recording(model, res.trajectory, truth, late=1.0)
    rec = replace(rec, meta={**rec.meta, "robot_source": str(UR5)})
    path, short = tmp_path / "late.csv", tmp_path / "short.csv"
    write_dynamic_recording(rec, path)
    write_dynamic_recording(samples_of(rec, rec.t <= 1.8), short)
    capsys.readouterr()
    fitted = []
    for ms in ("0", "1000"):
        assert main(["identify", "dynamic", str(path), "--delay", ms, "--json"]) == 0
        fitted.append(json.loads(capsys.readouterr().out)["fitted_s"])
    assert fitted[1] == pytest.approx(fitted[0] - 1.0, abs=0.02)
    assert main(["identify", "dynamic", str(short), "--delay", "1000"]) == 2
    err = capsys.readouterr().err.strip()
    assert "a delay of 1000 ms leaves 0.8 s of the 1.8 s recording" in err
    assert "\n" not in err and "Traceback" not in err
