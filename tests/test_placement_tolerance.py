"""Board recordings fitted together in double support need not stand at exactly one foot placement: an operator puts
the robot down a few millimetres off each time (2.4 mm between two twin runs). The first recording's base
parameters then miss the others' wrench slightly; `identify dynamic` fits them together when the bias this puts
on every estimate is under half its SE, reports it, and refuses otherwise. Checked on the stored double-support
design moved to another placement (its dependent joints re-solved), with the model's own wrench."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
from conftest import TEST_DESIGN

import identify.dynamic as dynamic
from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError
from formats.trajectory_plan import load_trajectory_plan
from identify.dynamic import DynamicEstimator
from robots import dynamics as dyn
from robots.base_params import RegressorSpec, evaluate, zero_set
from robots.registry import get_model
from trajectories.plan import plan_trajectory

RATE = 100.0
MOMENT_Z = -0.053
TWIN_NOISE = np.array([0.49, 1.42, 1.29])  # the twin's white-noise equivalent per sample (N, N·m, N·m)


@pytest.fixture(scope="module")
def tulip():
    return get_model("tulip")


@pytest.fixture(scope="module")
def truth(tulip):
    """The guessed set within the simplified model: what the placement check itself predicts with."""
    theta = dyn.standard_parameters(tulip, next(iter(tulip.params)))
    theta[zero_set(tulip, list(tulip.simplified_dynamic_zero))] = 0.0
    return theta


def _recording(tulip, theta, shift_y: float, sigma, seed: int) -> DynamicRecording:
    """Two periods of the stored design with the other sole `shift_y` m further out, its board wrench + noise."""
    plan = load_trajectory_plan(TEST_DESIGN)
    moved = copy.deepcopy(plan.trajectory)
    moved["chain"]["target_p"][1] += shift_y
    traj = plan_trajectory(replace(plan, trajectory=moved), tulip)
    t = np.arange(int(2 * traj.duration * RATE) + 1) / RATE
    q, qd, qdd = traj.sample(t)
    spec = RegressorSpec("base-wrench", "right", None, ("fz", "mx", "my"), moment_z=MOMENT_Z)
    w = evaluate(tulip, spec, q, qd, qdd) @ theta
    wrench = np.zeros((t.size, 6))
    wrench[:, 2:5] = w + np.random.default_rng(seed).normal(size=w.shape) * np.asarray(sigma)
    meta = {"motion_band_hz": "0.3", "moment_z_m": str(MOMENT_Z)}
    return DynamicRecording("tulip", "right", list(tulip.joint_names), t, q, wrench=wrench, meta=meta)


def _estimator(tulip) -> DynamicEstimator:
    return DynamicEstimator(tulip, "right", True, False, quantity="wrench", cutoff_hz=1.2)


def test_a_few_millimetres_apart_at_the_boards_noise_are_fitted_together(tulip, truth):
    recs = [_recording(tulip, truth, dy, TWIN_NOISE, seed) for dy, seed in ((0.0, 1), (0.005, 2))]
    est = _estimator(tulip).fit(recs)
    (pl,) = est.fit_.placements
    assert pl["recording"] == 2
    assert pl["shift_mm"] == pytest.approx(5.0, abs=0.01) and pl["turn_deg"] == pytest.approx(0.0, abs=1e-3)
    assert pl["misfit"][1] > 1e-3  # the placement is felt (Mx, N·m) ...
    assert pl["max_bias_se"] < dynamic.PLACEMENT_BIAS_SE  # ... but under the noise
    nb = est.fit_.inertial
    z = (est.fit_.values[:nb] - est.dynamic_base_.values(truth)) / est.fit_.se[:nb]
    assert np.abs(z).max() < 4.0


def test_the_bias_it_reports_is_the_bias_the_fit_gets(tulip, truth, monkeypatch):
    """Nearly noiseless data: the estimates' error is the placement's bias, which the check predicts — up to the
    filter's own differentiation error (the wrench here comes from the exact accelerations), 8 % of it here."""
    monkeypatch.setattr(dynamic, "PLACEMENT_BIAS_SE", np.inf)
    recs = [_recording(tulip, truth, dy, 1e-7 * TWIN_NOISE, seed) for dy, seed in ((0.0, 1), (0.01, 2))]
    est = _estimator(tulip).fit(recs)
    nb = est.fit_.inertial
    err = np.abs(est.fit_.values[:nb] - est.dynamic_base_.values(truth)) / est.fit_.se[:nb]
    assert err.max() > 2  # the misfit is all there is in the residuals: it decides the SEs and biases the fit
    assert est.fit_.placements[0]["max_bias_se"] == pytest.approx(err.max(), rel=0.15)


def test_a_placement_whose_bias_matters_is_refused_by_name(tulip, truth):
    recs = [_recording(tulip, truth, dy, 0.01 * TWIN_NOISE, seed) for dy, seed in ((0.0, 1), (0.005, 2))]
    with pytest.raises(
        DataError, match=r"recording 2's other sole stands 5\.0 mm .* would bias ϑ\d+ by [\d.]+ SE"
    ):
        _estimator(tulip).fit(recs)


def test_placements_are_numbered_by_recording_when_a_gap_splits_one(tulip, truth):
    """A gap splits the first recording into two pieces: its second piece is its own placement, not a recording
    of its own; the other recording keeps its number."""
    first, other = (_recording(tulip, truth, dy, TWIN_NOISE, seed) for dy, seed in ((0.0, 1), (0.005, 2)))
    keep = ~((first.t > 9.0) & (first.t < 9.5))
    gapped = replace(first, t=first.t[keep], q=first.q[keep], wrench=first.wrench[keep])
    est = _estimator(tulip).fit([gapped, other])
    assert [g["recording"] for g in est.fit_.gaps] == [1]
    (pl,) = est.fit_.placements
    assert pl["recording"] == 2 and pl["shift_mm"] == pytest.approx(5.0, abs=0.01)
