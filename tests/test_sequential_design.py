"""Designing the next double-support experiment given those already made (`plan trajectory --prior`), and the
forecast of several plans fitted together (`plan forecast P1 P2`): the next design stands where the first did,
so the runs fit together, and completes the first's information better than repeating it."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from formats.errors import DataError
from formats.trajectory_plan import load_trajectory_plan, save_trajectory_plan
from poise.cli import main
from trajectories.balance_excitation import optimise_balance
from trajectories.closed_chain import make_chain
from trajectories.excitation import ExcitationSettings, criterion_value, optimise, with_prior
from trajectories.plan import make_plan, prior_experiments
from trajectories.verify import stacked_base_regressor

SETTINGS = ExcitationSettings(
    period=8.0, duration=8.0, harmonics=4, samples=32, max_iter=40, simplified=True, criterion="logvar",
    scaling="none", motion="double-support", zmp_margin=0.02,
)  # fmt: skip


@pytest.fixture(scope="module")
def plans(tulip, tmp_path_factory):
    """A first design, and the next designed with it as prior."""
    d = tmp_path_factory.mktemp("seq")
    chain = make_chain(tulip, "right", "sim", np.random.default_rng(3), candidates=20)
    first = optimise_balance(tulip, SETTINGS, seed=4, zmp_margin=SETTINGS.zmp_margin, chain=chain)
    p1 = make_plan("tulip", tulip, first, SETTINGS, 4, 100.0)
    save_trajectory_plan(p1, d / "first.json")
    prior = prior_experiments(tulip, SETTINGS, [p1])
    second = optimise(tulip, SETTINGS, seed=5, prior=prior)
    save_trajectory_plan(make_plan("tulip", tulip, second, SETTINGS, 5, 100.0), d / "second.json")
    return first, second, prior, d


def _rows(tulip, traj) -> np.ndarray:
    t = np.arange(SETTINGS.samples) * SETTINGS.period / SETTINGS.samples  # the design's grid
    return stacked_base_regressor(tulip, traj, "right", True, t)


def test_next_design_stands_where_the_first_did_and_passes_its_checks(plans):
    first, second, prior, _ = plans
    a, b = first.trajectory.chain, second.trajectory.chain
    for c in (prior.chain, b):  # the plan's placement, read back from its file, and the next design's
        assert c.target_p == pytest.approx(a.target_p, abs=1e-12) and c.nominal == pytest.approx(a.nominal)
        assert c.target_R == pytest.approx(a.target_R, abs=1e-12) and c.dependent == a.dependent
    assert second.verification["ok"], second.verification["problems"]
    assert second.verification["min_zmp_margin_m"] >= SETTINGS.zmp_margin - 1e-4
    assert second.kappa_with_prior_scaled is not None


def test_next_design_completes_the_first_better_than_repeating_it(tulip, plans):
    """The criterion (Σ log variances) of the two experiments together, on the design grid: the second one
    designed for the pair beats running the first twice, and its reported objective is that pair's value."""
    first, second, prior, _ = plans
    w1, w2 = _rows(tulip, first.trajectory), _rows(tulip, second.trajectory)
    assert prior.rows == pytest.approx(w1)
    repeat = criterion_value(with_prior(w1, SETTINGS, prior), SETTINGS, 1.0)[0]
    pair = criterion_value(with_prior(w2, SETTINGS, prior), SETTINGS, 1.0)[0]
    # (the design's dependent coordinates solve the sole's constraint to IPOPT's tolerance, the plan's exactly)
    assert second.objective == pytest.approx(pair, abs=0.01)
    assert pair < repeat - 1.0, (pair, repeat)


def test_forecast_of_two_plans_is_their_joint_fit(plans, capsys):
    """`plan forecast P1 P2` forecasts the runs fitted together: one plan twice halves every variance exactly
    (independent noise, same rows), and the designed pair determines the parameters better than the repeat."""
    _, _, _, d = plans
    first, second = str(d / "first.json"), str(d / "second.json")

    def forecast(*paths: str) -> dict:
        assert main(["plan", "forecast", *paths, "--noise", "0.5", "1.4", "1.3", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        return {p["symbol"]: p["se"] for p in out["parameters"]} | {"_duration": out["duration_s"]}

    one, twice, pair = forecast(first), forecast(first, first), forecast(first, second)
    syms = [s for s in one if not s.startswith("_")]
    assert twice["_duration"] == pytest.approx(2 * one["_duration"])
    assert np.array([twice[s] / one[s] for s in syms]) == pytest.approx(2**-0.5, rel=1e-6)
    log_twice = sum(np.log(twice[s]) for s in syms)
    log_pair = sum(np.log(pair[s]) for s in syms)
    assert log_pair < log_twice, (log_pair, log_twice)


def test_prior_plans_must_share_robot_model_and_placement(tulip, plans):
    first, _, _, d = plans
    p1 = make_plan("tulip", tulip, first, SETTINGS, 4, 100.0)
    with pytest.raises(DataError, match="simplified"):
        prior_experiments(tulip, replace(SETTINGS, simplified=False), [p1])
    with pytest.raises(DataError, match="fixed-base and double-support"):
        prior_experiments(tulip, replace(SETTINGS, motion="single-support"), [p1])
    doc = json.loads((d / "first.json").read_text())
    doc["trajectory"]["chain"]["target_p"][1] += 0.005  # the other sole 5 mm further out
    (d / "moved.json").write_text(json.dumps(doc))
    with pytest.raises(DataError, match="different foot placements"):
        prior_experiments(tulip, SETTINGS, [p1, load_trajectory_plan(d / "moved.json")])


def test_row_noise_weights_the_criterion_as_the_fit_weights_the_rows():
    """`row_noise` (σ of Fz, Mx, My): the criterion is that of the rows scaled by 1/σ, with a prior too, and the
    callback's gradient is exact (finite differences)."""
    import casadi as ca

    from trajectories.excitation import Prior, _Criterion

    rng = np.random.default_rng(0)
    s = replace(SETTINGS, row_noise=(0.5, 1.4, 1.3), duration=16.0)  # two periods: the new rows weigh √2
    W, P = rng.normal(size=(12, 4)), rng.normal(size=(9, 4))
    prior = Prior(P)
    w = np.tile([2.0, 1 / 1.4, 1 / 1.3], 4)
    both = with_prior(W, s, prior)
    assert both == pytest.approx(np.vstack([P * w[:9, None], np.sqrt(2) * W * w[:, None]]))
    assert with_prior(W, s, None, weighted=False) is W
    grad = _Criterion("g", W.shape, s, None, prior)
    crit = _Criterion("f", W.shape, s, grad, prior)
    f0 = float(crit(ca.DM(W.reshape(-1, order="F"))))
    assert f0 == pytest.approx(criterion_value(both, s, 1.0)[0])
    G = np.asarray(grad(ca.DM(W.reshape(-1, order="F")))).reshape(W.shape, order="F")
    for i, j in [(0, 0), (4, 2), (11, 3)]:
        E = np.zeros_like(W)
        E[i, j] = 1e-6
        fd = (
            float(crit(ca.DM((W + E).reshape(-1, order="F"))))
            - float(crit(ca.DM((W - E).reshape(-1, order="F"))))
        ) / 2e-6
        assert G[i, j] == pytest.approx(fd, rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("noise", [(1.0, 1.0), (1.0, -1.0, 1.0), (1.0, float("nan"), 1.0)])
def test_row_noise_is_three_positive_sigmas_of_a_double_support_design(noise):
    with pytest.raises(DataError, match="row_noise"):
        replace(SETTINGS, row_noise=noise).validate()
    with pytest.raises(DataError, match="row_noise"):
        replace(SETTINGS, motion="free", row_noise=(1.0, 1.0, 1.0)).validate()
