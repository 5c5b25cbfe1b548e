"""A standing robot's design and its identification speak of the same base parameters: the design's criterion
(log variances are not invariant to how the base parameters are combined), its `--focus ϑN` and `plan forecast` /
`identify dynamic` number and combine them alike, whatever point the boards take moments about. Before, the
double-support design pivoted its base by column norm (its ϑ13 was mcz@upper_leg_r …, identification's
Ixx@hip_r_x + …), so a focus taken from a forecast aimed at other parameters."""

from __future__ import annotations

import numpy as np
import pytest

from drivers.wbb.geometry import PLATE_HEIGHT
from formats.dynamic_recording import DynamicRecording
from identify.dynamic import DynamicEstimator
from robots.base_params import DynamicBase
from robots.motion_class import standing_base
from tests.test_double_support_excitation import QUICK
from trajectories.balance_excitation import balance_start, chain_base, zmp_spec
from trajectories.closed_chain import ClosedChainTrajectory, make_chain


def _recording(model, t, q, **meta) -> DynamicRecording:
    """As `poise run` records a standing robot: moments about the boards' cells."""
    return DynamicRecording(
        robot=model.name, base="right", joint_names=list(model.joint_names), t=t, q=q, tau=None,
        wrench=np.zeros((len(t), 6)), meta={"moment_z_m": f"{-PLATE_HEIGHT:.6g}", **meta},
    )  # fmt: skip


def _fitted_base(model, rec) -> DynamicBase:
    est = DynamicEstimator(model, "right", True, False, quantity="wrench")
    est.prepare(rec)
    return est.dynamic_base_


def _same(design: DynamicBase, fit: DynamicBase) -> None:
    assert design.independent == fit.independent
    K, Kf = design.combination_matrix(), fit.combination_matrix()
    assert np.abs(K - Kf).max() < 1e-4 * np.abs(Kf).max()


def test_double_support_design_numbers_its_parameters_as_identification(tulip):
    chain = make_chain(tulip, "right", "sim", np.random.default_rng(3), candidates=20)
    _, fi = balance_start(tulip, QUICK, chain, np.random.default_rng(5), 0.15)
    t = np.arange(0.0, QUICK.duration, 0.01)
    q = ClosedChainTrajectory(tulip, chain, fi).sample(t)[0]
    design, fit = chain_base(tulip, chain, True), _fitted_base(tulip, _recording(tulip, t, q))
    _same(design, fit)
    assert design.formula(0).count("m@") == len(tulip.links)  # ϑ1: the total mass, as the fit names it


@pytest.mark.parametrize("simplified", [True, False])
def test_single_support_design_numbers_its_parameters_as_identification(tulip, simplified):
    t = np.arange(0.0, 2.0, 0.01)
    q = np.zeros((len(t), tulip.nq))
    est = DynamicEstimator(tulip, "right", simplified, False, quantity="wrench")
    est.prepare(_recording(tulip, t, q, motion="single-support"))
    _same(standing_base(tulip, zmp_spec("right"), simplified), est.dynamic_base_)


def test_model_show_numbers_a_standing_robots_wrench_as_identification(tulip, capsys):
    """`poise model show --regressor base-wrench` lists the ϑN a single-support fit reports (it pivoted before)."""
    import json

    from poise.cli import main

    assert (
        main(["model", "show", "tulip", "--regressor", "base-wrench:fz,mx,my", "--simplified", "--json"]) == 0
    )
    shown = json.loads(capsys.readouterr().out)["base_parameters"]
    t = np.arange(0.0, 2.0, 0.01)
    est = DynamicEstimator(tulip, "right", True, False, quantity="wrench")
    est.prepare(_recording(tulip, t, np.zeros((len(t), tulip.nq)), motion="single-support"))
    fit = est.dynamic_base_
    assert [r["symbol"] for r in shown] == list(fit.symbols)
    assert [r["formula"] for r in shown] == [fit.formula(a) for a in range(fit.rank)]
