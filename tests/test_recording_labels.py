"""Recordings fitted together are named by their files in the fit's own checks (`DynamicEstimator._same_experiment`,
`_placement_misfits`): the reader labels each recording with its path as given, and `identify dynamic A.csv B.csv`
refuses another motion kind or foot placement naming both files — also when the runs of one plan were averaged or a
gap split the first recording, where a number counted what was fitted, not what was given. A recording without a
label keeps its number ("recording 2", "the first"); `plan forecast`'s plans are named as plans
(tests/test_forecast_review_leftovers.py)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import TEST_DESIGN

from formats.dynamic_recording import DynamicRecording, read_dynamic_recording, write_dynamic_recording
from formats.errors import DataError
from formats.trajectory_plan import load_trajectory_plan
from identify.dynamic import DynamicEstimator
from poise.cli import main
from robots.registry import get_model
from trajectories.plan import plan_trajectory

RATE = 50.0
META = {"motion_band_hz": "0.3", "moment_z_m": "-0.053"}
FAR = "25.0 mm / 0.00°"  # the moved recording's other sole from the design's: beyond 20 mm


@pytest.fixture(scope="module")
def tulip():
    return get_model("tulip")


def _design(tulip, shift_y: float) -> DynamicRecording:
    """Two periods of the stored double-support design with the other sole `shift_y` m further out; a constant
    wrench (the checks at stake come before any row is fitted)."""
    plan = load_trajectory_plan(TEST_DESIGN)
    moved = copy.deepcopy(plan.trajectory)
    moved["chain"]["target_p"][1] += shift_y
    traj = plan_trajectory(replace(plan, trajectory=moved), tulip)
    t = np.arange(int(2 * traj.duration * RATE) + 1) / RATE
    wrench = np.zeros((t.size, 6))
    wrench[:, 2] = 250.0
    return DynamicRecording("tulip", "right", list(tulip.joint_names), t, traj.sample(t)[0], wrench=wrench,
                            meta=dict(META))  # fmt: skip


@pytest.fixture(scope="module")
def pair(tulip):
    """(the design, the design with its other sole 25 mm further in)"""
    return _design(tulip, 0.0), _design(tulip, -0.025)


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_identify_dynamic_names_the_files_of_another_placement_or_motion(pair, tmp_path, capsys):
    home, far = pair
    a, b, single = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "single.csv"
    write_dynamic_recording(home, a)
    write_dynamic_recording(far, b)
    write_dynamic_recording(replace(far, meta={**far.meta, "motion": "single-support"}), single)
    err = _error(capsys, ["identify", "dynamic", str(a), str(b), "--simplified"])
    assert f"{b}'s other sole stands {FAR} from {a}'s (at most 20 mm / 3°)" in err, err
    assert "fit the recordings apart" in err and "recording 2" not in err and "the first" not in err
    # a double-support motion labelled single-support is refused on its own (its other sole never leaves the
    # ground): the fit's check of motion kinds is met by recordings read in code
    err = _error(capsys, ["identify", "dynamic", str(a), str(single), "--simplified"])
    assert f"{single}: sole_l stays on the ground" in err, err
    est = DynamicEstimator(get_model("tulip"), "right", True, False, quantity="wrench", cutoff_hz=1.2)
    with pytest.raises(DataError) as exc:
        est.fit([read_dynamic_recording(a), read_dynamic_recording(single)])
    said = str(exc.value)
    assert f"{single} is a single-support recording, {a} a double-support one: fit them apart" in said


def test_averaged_runs_are_named_by_file_not_by_their_fitted_number(pair, tmp_path, capsys):
    """r1 and r2 ran one plan (their run.json say so) and are averaged into one fitted recording: r3, the
    third given, was the fit's "recording 2"."""
    home, far = pair
    paths = []
    again = replace(home, wrench=home.wrench + np.random.default_rng(1).normal(0.0, 2.0, home.wrench.shape))
    for name, rec, sha in (("r1", home, "aa"), ("r2", again, "aa"), ("r3", far, "bb")):  # r2: its own noise
        (tmp_path / name).mkdir()
        write_dynamic_recording(rec, tmp_path / name / "rec.csv")
        (tmp_path / name / "run.json").write_text(json.dumps({"plan": f"{sha}.json", "plan_sha256": sha}))
        paths.append(str(tmp_path / name / "rec.csv"))
    err = _error(capsys, ["identify", "dynamic", *paths, "--simplified"])
    assert f"{paths[2]}'s other sole stands {FAR} from {paths[0]}'s" in err, err
    assert "recording 2" not in err


def test_without_labels_recordings_keep_their_numbers_as_given(tulip, pair):
    """Unlabelled recordings (built in code) are numbered as given, even when a gap splits the first into two
    pieces (the check used to number the pieces: "recording 3" of two), with the message as before."""
    home, far = pair
    keep = ~((home.t > 9.0) & (home.t < 9.5))
    gapped = replace(home, t=home.t[keep], q=home.q[keep], wrench=home.wrench[keep])
    est = DynamicEstimator(tulip, "right", True, False, quantity="wrench", cutoff_hz=1.2)
    with pytest.raises(DataError) as exc:
        est.fit([gapped, far])
    assert str(exc.value) == (
        f"recording 2's other sole stands {FAR} from the first's (at most 20 mm / 3°): another foot placement "
        "identifies other base parameters — fit the recordings apart"
    )
    single = replace(far, meta={**far.meta, "motion": "single-support"})
    with pytest.raises(DataError, match="^recording 2 is a single-support recording, the first a double-support "
                                        "one: fit them apart$"):  # fmt: skip
        est.fit([home, single])


def test_the_label_is_the_path_as_given_and_not_written(pair, tmp_path, monkeypatch):
    home, _ = pair
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    write_dynamic_recording(replace(home, label="elsewhere.csv"), "runs/a.csv")
    assert "elsewhere" not in (tmp_path / "runs" / "a.csv").read_text()
    write_dynamic_recording(home, "runs/plain.csv")  # the same recording without a label: the same file
    assert (tmp_path / "runs" / "a.csv").read_text() == (tmp_path / "runs" / "plain.csv").read_text()
    assert read_dynamic_recording("./runs/a.csv").label == "./runs/a.csv"
    assert read_dynamic_recording(tmp_path / "runs" / "a.csv").label == str(tmp_path / "runs" / "a.csv")
