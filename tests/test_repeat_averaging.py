"""Repeated runs of one plan averaged before the fit (`identify.repeats`, `identify dynamic`'s default): a repeat
that shares its errors adds no information and must not shrink the SEs; independent repeats keep what they hold."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from formats.dynamic_recording import DynamicRecording
from identify.dynamic import DynamicEstimator
from identify.repeats import average_repeats
from tests.test_dynamic_identify import _record, setup  # noqa: F401 (setup: the module fixture)
from tests.test_recording_scatter import runs_of_plans


@pytest.fixture(scope="module")
def recs(setup):  # noqa: F811
    model, res, truth = setup
    return [_record(model, res.trajectory, truth, seed=s) for s in (1, 2, 3)]


@pytest.fixture(scope="module")
def five(setup):  # noqa: F811
    """Five runs of the design, each with its own noise, at 100 Hz (cheap to fit side by side)."""
    model, res, truth = setup
    return [_record(model, res.trajectory, truth, seed=s, rate=100.0) for s in range(11, 16)]


def _rec(n: int, value: float, t_plan=None) -> DynamicRecording:
    t = np.arange(n) * 0.01
    q = np.full((n, 2), value)
    return DynamicRecording("r", "b", ["a", "b"], t, q, wrench=np.full((n, 6), 2 * value), t_plan=t_plan)


def test_the_runs_of_one_plan_on_the_same_samples_are_averaged_and_nothing_else():
    runs = [
        _rec(12, 1.0),
        _rec(12, 3.0),
        _rec(13, 5.0),
        _rec(12, 7.0),
        _rec(12, 9.0),
        _rec(12, 4.0, np.arange(12) * 0.011),
    ]
    rep = average_repeats(runs, ["p", "p", "p", None, "q", "p"])
    # a run of another length, an unknown plan, another plan and a run whose plan times lag are not repeats
    assert rep.groups == [[0, 1], [2], [3], [4], [5]] and rep.averaged
    np.testing.assert_allclose(rep.recordings[0].q, 2.0)
    np.testing.assert_allclose(rep.recordings[0].wrench, 4.0)
    assert rep.recordings[0].meta["repeats_averaged"] == "2" and rep.recordings[1] is runs[2]
    single = average_repeats(runs[:1], ["p"])
    assert not single.averaged and single.recordings == runs[:1]
    with pytest.raises(ValueError, match="2 plan labels for 3 recordings"):
        average_repeats(runs[:3], ["p", "p"])
    other = replace(runs[1], joint_names=["a", "c"])
    assert average_repeats([runs[0], other], ["p", "p"]).groups == [[0], [1]]


def test_repeats_that_share_every_error_count_once(setup, recs):  # noqa: F811
    """Three identical runs (a perfectly repeatable bench: the same noise, quantisation and misfit each time) hold
    what one holds. Side by side they shrink the SEs by √3; averaged, the fit is the single run's."""
    model = setup[0]
    one = DynamicEstimator(model).fit(recs[0]).fit_
    stacked = DynamicEstimator(model).fit([recs[0]] * 3).fit_
    rep = average_repeats([recs[0]] * 3, ["p"] * 3)
    averaged = DynamicEstimator(model).fit(rep.recordings).fit_
    np.testing.assert_allclose(averaged.values, one.values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(averaged.se, one.se, rtol=1e-9)
    ratio = np.median(stacked.se / one.se)
    assert 0.5 < ratio < 0.65, ratio  # 1/√3 = 0.577: overconfident


def test_independent_repeats_keep_their_information(setup, recs):  # noqa: F811
    """Runs whose noise is their own (different seeds): averaged, the SEs are those of the runs side by side and
    the estimates agree within a fraction of them."""
    model = setup[0]
    stacked = DynamicEstimator(model).fit(recs).fit_
    averaged = DynamicEstimator(model).fit(average_repeats(recs, ["p"] * 3).recordings).fit_
    ratio = averaged.se / stacked.se
    assert 0.75 < np.median(ratio) < 1.33, np.median(ratio)
    assert np.median(np.abs(averaged.values - stacked.values) / stacked.se) < 0.5


def test_identify_dynamic_averages_the_runs_of_a_plan_unless_told(five, tmp_path, capsys):
    """Three runs of p1 and one of p2: averaged, two recordings' rows are fitted; with --no-average all four's.
    (Identical copies of a run are refused either way: tests/test_identical_repeats.py.)"""
    from poise.cli import main

    paths = runs_of_plans(five[:4], ["p1", "p1", "p1", "p2"], tmp_path)
    capsys.readouterr()
    assert main(["identify", "dynamic", *paths, "--json"]) == 0
    averaged = json.loads(capsys.readouterr().out)
    assert averaged["repeats_averaged"] == [[1, 2, 3], [4]]
    assert main(["identify", "dynamic", *paths, "--json", "--no-average"]) == 0
    apart = json.loads(capsys.readouterr().out)
    assert "repeats_averaged" not in apart
    assert apart["regressor_rows"] == 2 * averaged["regressor_rows"]  # p1's three runs side by side, not one
    assert main(["identify", "dynamic", *paths]) == 0
    assert "repeats averaged sample by sample" in capsys.readouterr().out


def test_repeats_on_one_emulated_noise_seed_are_named(five, tmp_path, capsys):
    """`poise run --robot sim` records its noise seed; repeats of a plan that share one are one noise realisation
    (averaging does not reduce it), and `identify dynamic` says so. Other seeds, or no seed (real hardware), pass."""
    from poise.cli import main

    paths = runs_of_plans(five, ["p1", "p1", "p1", "p2", "p2"], tmp_path)
    for path, seed in zip(paths, (0, 0, 1, 1, None), strict=True):  # p1: two of three share; p2: one seed
        run = tmp_path / path.split("/")[-2] / "run.json"
        meta = json.loads(run.read_text())
        run.write_text(json.dumps(meta | ({} if seed is None else {"noise_seed": seed})))
    capsys.readouterr()
    assert main(["identify", "dynamic", *paths, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["repeats_sharing_noise"] == [[1, 2]]
    assert main(["identify", "dynamic", *paths]) == 0
    err = capsys.readouterr().err
    assert "recordings 1, 2 ran on the emulated bench with one noise seed" in err and "4, 5" not in err


def test_recordings_of_boards_without_gains_are_named(five, tmp_path, capsys):
    """From their run.json: real boards without `--board-gains`, or noisy emulated ones, get a note; calibrated
    boards, ideal emulated ones (no noise seed) and no boards at all do not."""
    from poise.cli import main

    paths = runs_of_plans(five, ["p1", "p2", "p3", "p4", "p5"], tmp_path)
    extra = [{"boards": "bt:A,B"}, {"boards": "bt:A,B", "board_gains": {}}, {"boards": "sim", "noise_seed": 0},
             {"boards": "sim"}, {"boards": None}]  # fmt: skip
    for path, more in zip(paths, extra, strict=True):
        run = tmp_path / path.split("/")[-2] / "run.json"
        run.write_text(json.dumps(json.loads(run.read_text()) | more))
    capsys.readouterr()
    assert main(["identify", "dynamic", *paths, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["uncalibrated_boards"] == [1, 3]
    assert main(["identify", "dynamic", *paths]) == 0
    assert "recording(s) 1, 3 read boards without per-cell gains" in capsys.readouterr().err
