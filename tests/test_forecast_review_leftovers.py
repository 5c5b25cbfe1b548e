"""Leftovers of a user review of the planning helpers (`plan forecast`, `plan reach`, `simulate trajectory`):
the forecast's memory bounded (the regressor built a chunk of samples at a time), repeat times in whole runs of
the plan, `--practical-s` shorter than the plan refused, plans named as plans, hints naming only the command's own
options, a truth without inertias refused before MuJoCo, and a motion that leaves parameters undetermined at any
length saying which and why."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import TEST_DESIGN, UR5, arm_motion, sampled_test_design

import identify.dynamic
from formats.errors import DataError
from formats.trajectory_plan import load_trajectory_plan
from identify.differentiation import lowpass, lowpass_in_chunks
from identify.dynamic import DynamicEstimator
from identify.forecast import UnexcitedError, forecast_motions
from poise.cli import build_parser, main
from poise.workflows import plan_forecast
from poise.workflows.plan_forecast import forecast_plans
from robots.registry import get_model

DATA = Path(__file__).parent / "data"
UR5_PLAN = DATA / "ur5_6s.json"  # a 6 s plan of the UR5 (its description: the plan's robot_source)
SINGLE = DATA / "tulip_single_support_6s.json"


def _error(capsys, argv: list[str]) -> str:
    """`poise ARGV` refused as a user error: exit 2, one line, no traceback; that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


# 1. memory: the rows at the recording rate are built a chunk at a time


def test_the_chunked_filter_is_lowpass():
    """`lowpass_in_chunks` (scipy's sosfiltfilt run a chunk at a time, forwards then back) against `lowpass` of the
    whole array, at the rows asked for: chunks shorter than the odd extension's pad, longer than the array, and
    not dividing it."""
    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(1000, 3)), axis=0)
    at = np.arange(7, 990, 3)
    whole = lowpass(X, 100.0, 2.0)[at]  # pad: 100 samples
    for chunk in (1, 37, 100, 333, 5000):
        got = lowpass_in_chunks(lambda a, b: X[a:b], len(X), 100.0, 2.0, at, chunk)
        np.testing.assert_allclose(got, whole, rtol=0, atol=1e-12 * np.abs(whole).max())


@pytest.mark.parametrize("case", ["arm", "arm rotor inertia", "double support", "single support"])
def test_rows_built_in_chunks_give_the_forecast_of_the_whole(case, monkeypatch):
    """The forecast from rows built a small chunk of samples at a time (`identify.dynamic.CHUNK_BYTES` lowered)
    equals the one from the whole rows (two recordings fitted together; an arm with friction — rows around velocity
    reversals dropped — and a σ per joint; the board wrench with its base parameters at the middle posture), and
    the chunked filter is then what built them."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[5])  # the chunk
        return lowpass_in_chunks(*args, **kwargs)

    if case == "single support":
        plan = load_trajectory_plan(SINGLE)
        whole = forecast_plans([plan], ["p"], [2.0, 0.3, 0.3])
        assert not calls
        monkeypatch.setattr(identify.dynamic, "CHUNK_BYTES", 2**20)  # 336 samples of the 601
        monkeypatch.setattr(identify.dynamic, "lowpass_in_chunks", counted)
        chunked = forecast_plans([plan], ["p"], [2.0, 0.3, 0.3])
        monkeypatch.undo()
        assert calls and max(calls) == 336
        _same(whole.forecast, chunked.forecast)
        return
    if case.startswith("arm"):
        model = get_model(str(UR5))
        motions, sig = [arm_motion(1), arm_motion(2)], np.linspace(0.1, 0.3, 6)

        def est():
            return DynamicEstimator(model, armature=case.endswith("inertia"))
    else:
        tulip, t, q = sampled_test_design(100.0)
        motions, sig = [(t, q, {"motion_band_hz": "0.3", "moment_z_m": "-0.053"})] * 2, [2.0, 0.3, 0.3]

        def est():
            return DynamicEstimator(tulip, "right", True, False, quantity="wrench")

    first = est()
    whole = forecast_motions(first, motions, sig)
    samples = max(len(t) for t, _, _ in motions)
    e = est()
    per_sample = 8 * (e.model.nq if e.quantity == "torque" else 3) * 10 * len(e.model.links)
    monkeypatch.setattr(identify.dynamic, "CHUNK_BYTES", per_sample * (samples // 20))
    monkeypatch.setattr(identify.dynamic, "lowpass_in_chunks", counted)
    chunked = forecast_motions(e, motions, sig)
    assert calls and all(c == samples // 20 for c in calls)
    _same(whole, chunked)
    if (
        case == "double support"
    ):  # two recordings standing: what the base parameters miss of each, chunked alike
        assert len(first._misses) == len(e._misses) == 2
        for a, b in zip(first._misses, e._misses, strict=True):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-9 * np.abs(a).max())


def _refused(*_args, **_kwargs):
    raise AssertionError("MuJoCo was reached")


def _same(a, b):
    assert a.symbols == b.symbols and a.fitted_s == b.fitted_s and a.inertial == b.inertial
    np.testing.assert_allclose(b.se, a.se, rtol=1e-12, atol=0)
    np.testing.assert_allclose(b.isolated_se, a.isolated_se, rtol=1e-12, atol=0)


def test_a_long_fast_motion_holds_a_chunk_of_regressor_rows_not_all_of_them():
    """60 s of the UR5 at 1 kHz: the whole regressor at the recording rate is 60 001 × 6 × 80 doubles (230 MB),
    which the forecast used to hold several times over; now the peak of what numpy allocates stays under a
    quarter of it (the joint states at the recording rate, a few 8 MB chunks)."""
    model = get_model(str(UR5))
    t, q, meta = arm_motion(3, seconds=60.0, rate=1000.0)
    whole_regressor = len(t) * model.nq * 10 * len(model.links) * 8
    tracemalloc.start()
    try:
        identify.dynamic.CHUNK_BYTES, saved = 8 * 2**20, identify.dynamic.CHUNK_BYTES
        try:
            fc = forecast_motions(DynamicEstimator(model), [(t, q, meta)], 0.2)
        finally:
            identify.dynamic.CHUNK_BYTES = saved
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.all(np.isfinite(fc.se)) and fc.duration_s == pytest.approx(60.0)
    assert peak < whole_regressor / 4, (peak / 1e6, whole_regressor / 1e6)


def test_a_rate_whose_samples_would_not_fit_is_refused_with_one_that_does(capsys, monkeypatch):
    """Past the joint states' allowance (here made 2 MB), `plan forecast` names the fastest rate within it, and
    that rate is accepted."""
    monkeypatch.setattr(plan_forecast, "STATE_BYTES", 2 * 2**20)
    err = _error(capsys, ["plan", "forecast", str(UR5_PLAN), "--noise", "0.2", "--rate-hz", "5000"])
    fits = re.search(r"--rate-hz (\d+) or less", err)
    assert fits and "GiB" in err, err
    rate = int(fits.group(1))
    assert 100 < rate < 5000
    assert main(["plan", "forecast", str(UR5_PLAN), "--noise", "0.2", "--rate-hz", str(rate), "--json"]) == 0
    capsys.readouterr()
    _error(capsys, ["plan", "forecast", str(UR5_PLAN), "--noise", "0.2", "--rate-hz", str(int(rate * 1.05))])


# 2. wording


def test_repeat_times_are_whole_runs_of_the_plan(capsys):
    """A 6 s plan's "if repeated: 9 s" was no length one can record; now each is the fewest whole runs, recorded
    apart and fitted together, that bring the relative SE to 15 %: checked against the forecast of the plan given
    that many times (`plan forecast P P …`), and one run fewer."""
    assert main(["plan", "forecast", str(UR5_PLAN), "--noise", "0.5"]) == 0
    shown = [float(s) for s in re.findall(r"if repeated: (\d+) s", capsys.readouterr().out)]
    assert shown and all(s % 6 == 0 and s >= 12 for s in shown), shown
    plan = load_trajectory_plan(UR5_PLAN)
    fc = forecast_plans([plan], ["p"], [0.5]).forecast
    need = fc.needed_s(15.0)
    out = fc.to_dict(15.0, 600.0)
    assert out["determined_if_repeated"]
    assert all(need[fc.symbols.index(s)] == fc.duration_s for s in out["determined"])
    runs = {s: int(round(need[fc.symbols.index(s)] / fc.duration_s)) for s in out["determined_if_repeated"]}
    assert all(n >= 2 and n * fc.duration_s == need[fc.symbols.index(s)] for s, n in runs.items())
    for n in sorted(set(runs.values()))[:3]:  # the fewest runs: forecast with that many copies and one fewer
        at, fewer = (forecast_plans([plan] * m, ["p"] * m, [0.5]).forecast for m in (n, n - 1))
        for s in (s for s, m in runs.items() if m == n):
            k = fc.symbols.index(s)
            assert at.rel_se_pct[k] <= 15.0 * (1 + 1e-9) < fewer.rel_se_pct[k], (s, n)


def test_a_practical_length_shorter_than_the_plan_is_refused(capsys):
    err = _error(capsys, ["plan", "forecast", str(UR5_PLAN), "--noise", "0.5", "--practical-s", "3"])
    assert "--practical-s 3" in err and "6 s" in err and "--practical-s 6" in err
    assert main(["plan", "forecast", str(UR5_PLAN), "--noise", "0.5", "--practical-s", "6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["determined_if_repeated"] == []  # one run: nothing to repeat
    # plan reach: against its runs' --duration, before any design
    err = _error(capsys, ["plan", "reach", str(UR5), "--noise", "0.2", "--duration", "5", "--period", "5",
                          "--practical-s", "4", "--workers", "1"])  # fmt: skip
    assert "--practical-s 4" in err and "one run of --duration (5 s)" in err


def test_plans_forecast_together_are_named_as_plans(capsys, tmp_path):
    """The fit's own checks (`DynamicEstimator._same_experiment`) with the plans' names: another motion kind, or
    another foot placement, is refused naming both plans as plans."""
    err = _error(capsys, ["plan", "forecast", str(TEST_DESIGN), str(SINGLE), "--noise", "2", "0.3", "0.3"])
    assert "recording" not in err and str(SINGLE) in err and str(TEST_DESIGN) in err and "plan" in err
    assert (
        f"{SINGLE} is a single-support plan, {TEST_DESIGN} a double-support one: forecast them apart" in err
    )
    # two double-support plans at different foot placements (the second's other sole 25 mm further in)
    doc = json.loads(TEST_DESIGN.read_text())
    doc["trajectory"]["chain"]["target_p"][1] -= 0.025
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(doc))
    err = _error(capsys, ["plan", "forecast", str(TEST_DESIGN), str(moved), "--noise", "2", "0.3", "0.3"])
    assert f"{moved}'s other sole stands 25.0 mm / 0.00° from {TEST_DESIGN}'s" in err, err
    assert "recording" not in err and "forecast the plans apart" in err
    # the motions themselves (the second's joints 0.05 rad off): named by their labels; one placement forecast
    tulip, t, q = sampled_test_design(100.0)
    meta = {"motion_band_hz": "0.3", "moment_z_m": "-0.053"}
    est = DynamicEstimator(tulip, "right", True, False, quantity="wrench")
    with pytest.raises(DataError) as exc:
        forecast_motions(est, [(t, q, meta), (t, q + 0.05, meta)], [2.0, 0.3, 0.3], labels=["a.json", "b.json"],
                         what="plan")  # fmt: skip
    assert "b.json" in str(exc.value) and "a.json" in str(exc.value) and "recording" not in str(exc.value)
    assert "forecast the plans apart" in str(exc.value)
    fc = forecast_motions(est, [(t, q, meta)] * 2, [2.0, 0.3, 0.3], labels=["a.json", "b.json"], what="plan")
    assert np.all(np.isfinite(fc.se))


def test_a_rate_too_slow_for_the_cutoff_names_a_rate_not_an_option_plan_forecast_lacks(capsys):
    err = _error(capsys, ["plan", "forecast", str(UR5_PLAN), "--noise", "0.5", "--rate-hz", "3"])
    forecast = build_parser()._subparsers._group_actions[0].choices["plan"]
    options = {o for a in forecast._subparsers._group_actions[0].choices["forecast"]._actions
               for o in a.option_strings}  # fmt: skip
    named = set(re.findall(r"--[a-z][a-z-]*", err))
    assert named and named <= options, named - options
    rate = int(re.search(r"--rate-hz (\d+) or more", err).group(1))
    assert main(["plan", "forecast", str(UR5_PLAN), "--noise", "0.5", "--rate-hz", str(rate), "--json"]) == 0
    capsys.readouterr()
    _error(capsys, ["plan", "forecast", str(UR5_PLAN), "--noise", "0.5", "--rate-hz", str(rate - 1)])


# 3. simulate trajectory: a truth without inertias


def test_a_truth_without_inertias_is_refused_before_mujoco(tmp_path, capsys, monkeypatch):
    import drivers.emulators.mujoco_arm as twin

    monkeypatch.setattr(twin, "standing_wrench", _refused)  # MuJoCo is not reached
    out = tmp_path / "r.csv"
    err = _error(capsys, ["simulate", "trajectory", str(TEST_DESIGN), "--truth", "mc", "--out", str(out)])
    assert "--truth mc" in err and "inertia" in err and "--truth sim" in err and "mjMINVAL" not in err
    # perturbed varies the plan's own set: a plan made with `mc` is refused alike
    doc = json.loads(TEST_DESIGN.read_text())
    doc["params"] = "mc"
    plan = tmp_path / "mc.json"
    plan.write_text(json.dumps(doc))
    err = _error(capsys, ["simulate", "trajectory", str(plan), "--out", str(out)])
    assert "perturbed" in err and "'mc'" in err and "--truth sim" in err
    assert not out.exists()
    monkeypatch.undo()
    assert (
        main(["simulate", "trajectory", str(plan), "--truth", "sim", "--rate-hz", "50", "--out", str(out)])
        == 0
    )


# 4. a motion that cannot determine some parameters at any length


def test_a_still_joint_is_named_with_the_parameters_it_leaves_undetermined(tmp_path, capsys):
    """The UR5 plan with its last joint held still: its friction columns are zero, so no length determines them;
    `plan forecast` names those parameters and the joint to move, and points at `plan trajectory --prior`."""
    doc = json.loads(UR5_PLAN.read_text())
    for key in ("a", "b"):
        doc["trajectory"][key][-1] = [0.0] * len(doc["trajectory"][key][-1])
    plan = tmp_path / "still.json"
    plan.write_text(json.dumps(doc))
    err = _error(capsys, ["plan", "forecast", str(plan), "--noise", "0.5"])
    assert "fv@wrist_3_joint" in err and "add motion of joint(s) wrist_3_joint" in err, err
    assert "plan trajectory" in err and f"--prior {plan}" in err
    with pytest.raises(UnexcitedError) as exc:
        forecast_plans([load_trajectory_plan(plan)], [str(plan)], [0.5])
    assert exc.value.still == ["wrist_3_joint"]
    assert {"fv@wrist_3_joint", "fc@wrist_3_joint"} <= set(exc.value.unexcited)


def test_plan_reach_says_which_parameters_its_design_leaves_unexcited_and_why(capsys):
    """A design that does not move (one harmonic, two iterations): `plan reach` used to say only "rank-deficient
    regressor"; now it names the design, the parameters, the joints that do not move and the options to change."""
    err = _error(capsys, ["plan", "reach", str(UR5), "--noise", "0.2", "--duration", "2", "--period", "2",
                          "--harmonics", "1", "--samples", "10", "--max-iter", "2", "--workers", "1", "--only",
                          "ϑ1"])  # fmt: skip
    assert "the design for all at once does not excite" in err and "ϑ1" in err
    assert "do not move" in err and "--harmonics" in err and "--max-iter" in err
    assert "--waypoints" not in err  # a Fourier design's options only
