"""`identify dynamic --instruments PLAN`: the instrumental-variable estimate (IDIM-IV) with the planned angles'
regressor as instruments. Quantised encoders put noise, differentiated twice, into the regressor; least squares
then biases the estimates (errors in variables), the IV estimate does not. The recordings here are MuJoCo's
inverse dynamics of the stored TUlip double-support design (soles held), angles through a coarse encoder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from formats.dynamic_recording import read_dynamic_recording, write_dynamic_recording
from formats.errors import DataError, IdentifiabilityError
from formats.trajectory_plan import load_trajectory_plan
from identify.dynamic import DynamicEstimator
from poise.cli import main
from trajectories.plan import plan_trajectory

PLAN = str(Path(__file__).parent / "data" / "tulip_double_support_10s.json")
# encoder ticks per turn: a quarter of the Dynamixel's resolution, so that the bias shows in one 10 s recording
TICKS = 1024


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    d = tmp_path_factory.mktemp("iv")
    out = []
    for seed in (1, 2):  # one robot (the first's perturbed parameters), recorded twice
        rec, truth = d / f"rec{seed}.csv", d / f"truth{seed}.json"
        robot = "perturbed" if seed == 1 else str(out[0][1])
        args = ["simulate", "trajectory", PLAN, "--out", str(rec), "--truth", robot, "--truth-out", str(truth),
                "--encoder-ticks", str(TICKS), "--seed", str(seed), "--force-noise", "0.1",
                "--moment-noise", "0.02"]  # fmt: skip
        assert main(args) == 0
        out.append((rec, truth))
    return out


def _identify(capsys, rec: Path, truth: Path, *extra: str) -> dict:
    capsys.readouterr()
    argv = ["identify", "dynamic", str(rec), "--simplified", "--no-friction", "--reference", str(truth),
            "--json"]  # fmt: skip
    assert main(argv + list(extra)) == 0
    return json.loads(capsys.readouterr().out)


def test_instruments_remove_the_encoders_bias(recordings, capsys):
    for rec, truth in recordings:
        ls = _identify(capsys, rec, truth)
        iv = _identify(capsys, rec, truth, "--instruments", PLAN)
        assert (ls["estimator"], iv["estimator"]) == ("wls", "iv")
        z_ls, z_iv = (np.array(r["reference"]["z"], dtype=float) for r in (ls, iv))
        assert np.abs(z_ls).max() > 3  # least squares, biased: measured max |z| 3.9 for both seeds
        assert np.abs(z_iv).max() <= 3 and iv["reference"]["within_3se"] == 37  # measured 1.3
        assert np.mean(z_iv**2) < np.mean(z_ls**2) / 2  # measured 0.58 against 1.46
        total = next(k for k, p in enumerate(iv["parameters"]) if p["formula"].count("m@") == 13)
        assert iv["parameters"][total]["rel_se_pct"] < 1


def test_several_recordings_take_one_plan_or_one_each(recordings, tulip):
    recs = [read_dynamic_recording(r) for r, _ in recordings]
    traj = plan_trajectory(load_trajectory_plan(PLAN), tulip)
    planned = [traj.sample(r.t)[0] for r in recs]
    est = DynamicEstimator(tulip, "right", True, False, quantity="wrench")
    both = est.fit(recs, instruments=planned).fit_
    assert both.instruments and both.to_dict()["estimator"] == "iv"
    one = DynamicEstimator(tulip, "right", True, False, quantity="wrench")
    one = one.fit(recs[0], instruments=planned[0]).fit_
    assert np.all(both.se[:37] < one.se[:37])  # twice the data


def test_wrong_instruments_are_refused_with_the_reason(recordings, tulip, capsys):
    rec = read_dynamic_recording(recordings[0][0])
    est = DynamicEstimator(tulip, "right", True, False, quantity="wrench")
    traj = plan_trajectory(load_trajectory_plan(PLAN), tulip)
    q = traj.sample(rec.t)[0]
    with pytest.raises(DataError, match="for recording 1 of"):
        est.fit(rec, instruments=q[:-1])
    with pytest.raises(DataError, match="2 sets of planned angles for 1 recordings"):
        est.fit(rec, instruments=[q, q])
    with pytest.raises(DataError, match="not the plan this recording executed"):
        est.fit(rec, instruments=q[::-1].copy())  # the plan backwards: angles stray
    late = read_dynamic_recording(recordings[0][0])
    late.t = late.t + 5.0  # times that are not the plan's
    path = recordings[0][0].parent / "late.csv"
    write_dynamic_recording(late, path)
    capsys.readouterr()
    argv = ["identify", "dynamic", str(path), "--simplified", "--no-friction", "--instruments", PLAN]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "not a recording of this plan" in err and "Traceback" not in err


def test_instruments_that_do_not_excite_are_refused(recordings, tulip):
    rec = read_dynamic_recording(recordings[0][0])
    mean = rec.q.mean(axis=0, keepdims=True)
    rec.q = mean + 0.05 * (rec.q - mean)  # a small motion (still exciting), planned as its mean posture held
    still = np.repeat(mean, len(rec.t), axis=0)
    est = DynamicEstimator(tulip, "right", True, False, quantity="wrench")
    with pytest.raises(IdentifiabilityError, match="cannot serve as instruments"):
        est.fit(rec, instruments=still)
