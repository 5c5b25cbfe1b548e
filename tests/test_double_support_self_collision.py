"""Self-collision rows in the double-support (closed-chain) design: TUlip with collision cylinders on its thighs
and shins (written into a copy of its description), designed standing on both soles with a clearance margin that
the same design without the rows goes below; the rows' exact Jacobian, per posture and through the chain rule
to the design variables (Fourier coefficients and the dependent joints of each sample)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import casadi as ca
import numpy as np
import pytest
from conftest import tulip_with_stance

from robots.collision import near_pairs
from robots.registry import get_model
from trajectories.balance_excitation import balance_start, design_balance_problem, optimise_balance
from trajectories.closed_chain import make_chain
from trajectories.excitation import ExcitationSettings, _SampleClearance
from trajectories.plan import check_plan, make_plan, plan_trajectory
from trajectories.verify import check_trajectory

MARGIN = 0.05  # m: the thighs start ≈ 66 mm apart (sphere sets); without the rows the design comes to ≈ 40 mm
SETTINGS = ExcitationSettings(
    period=8.0, duration=8.0, harmonics=3, samples=24, max_iter=40, sharpness=(8.0,), simplified=True,
    motion="double-support", zmp_margin=0.02, amplitude=0.2, collision_margin=MARGIN,
)  # fmt: skip
LEGS = {"upper_leg": 0.32, "lower_leg": 0.276}  # m: joint to joint along the link's −z


def leg_cylinders(folder: Path) -> Path:
    """A copy of the TUlip description whose URDF gives each thigh and shin a 3 cm collision cylinder along it."""
    robot = tulip_with_stance(folder)
    urdf = folder / "tulip.urdf"
    text = urdf.read_text(encoding="utf-8")
    for side in "rl":
        for link, length in LEGS.items():
            tag = f'<link name="{link}_{side}">'
            assert text.count(tag) == 1
            cylinder = (f'<collision><origin xyz="0 0 {-(length / 2 + 0.02):.4f}" rpy="0 0 0"/><geometry>'
                        f'<cylinder radius="0.03" length="{length - 0.04:.4f}"/></geometry></collision>')  # fmt: skip
            text = text.replace(tag, tag + cylinder)
    urdf.write_text(text, encoding="utf-8")
    return robot


@pytest.fixture(scope="module")
def robot(tmp_path_factory) -> Path:
    return leg_cylinders(tmp_path_factory.mktemp("legs"))


@pytest.fixture(scope="module")
def legs(robot):
    return get_model(str(robot))


@pytest.fixture(scope="module")
def chain(legs):
    return make_chain(legs, "right", "sim", np.random.default_rng(3), candidates=20)


def test_double_support_design_keeps_links_apart(robot, legs, chain):
    near = near_pairs(legs, "sim", MARGIN)
    assert "upper_leg_r–upper_leg_l" in near.names() and "lower_leg_r–lower_leg_l" in near.names()
    res = optimise_balance(legs, SETTINGS, seed=0, zmp_margin=0.02, amplitude=SETTINGS.amplitude, chain=chain)
    assert res.verification["ok"], res.verification["problems"]
    assert res.verification["min_self_clearance_m"] >= MARGIN - 1e-4  # the design's own check (2 ms grid)
    plan = make_plan(str(robot), legs, res, SETTINGS, 0, 100.0)
    assert plan.settings["self_collision"] and plan.settings["collision_margin"] == MARGIN
    report = check_plan(plan, legs, plan_trajectory(plan, legs))  # plan check: every pair exactly, 1 ms grid
    assert report.ok, report.problems
    assert report.min_self_clearance_m >= MARGIN - 1e-4
    # the same design without the rows brings the thighs closer than the margin
    free = optimise_balance(legs, replace(SETTINGS, self_collision=False), seed=0, zmp_margin=0.02,
                            amplitude=SETTINGS.amplitude, chain=chain)  # fmt: skip
    assert free.verification["min_self_clearance_m"] is None  # designed without: not held to the margin
    check = check_trajectory(
        legs, free.trajectory, "right", "sim", 0.001, simplified=True, collision_margin=MARGIN
    )
    # measured 47.0 mm, and 49.4 mm since the per-sample functions take the placement as an input (round-off
    # moved IPOPT's path); with the rows ≥ MARGIN − 0.1 mm above
    assert check.min_self_clearance_m < MARGIN - 3e-4
    assert any(p.startswith("links ") and "come" in p for p in check.problems)


def test_clearance_callback_jacobian_is_exact_and_block_diagonal(legs):
    pairs = near_pairs(legs, "sim", MARGIN)
    K, n, c = 3, legs.nq, len(pairs.pairs)
    node = _SampleClearance("clearance", legs, pairs, "sim", K)
    q = np.random.default_rng(7).uniform(legs.lower, legs.upper, size=(K, n))
    Qs = ca.MX.sym("Q", n * K)
    h = node(Qs)
    f = ca.Function("f", [Qs], [h, ca.jacobian(h, Qs)])
    _, J = f(q.reshape(-1))
    assert J.nnz() == K * c * n  # one dense block per sample
    J = J.full()
    fd = np.empty_like(J)
    for k in range(n * K):
        e = np.zeros(n * K)
        e[k] = 1e-7
        fd[:, k] = (f(q.reshape(-1) + e)[0].full() - f(q.reshape(-1) - e)[0].full())[:, 0] / 2e-7
    assert np.abs(fd - J).max() < 1e-5 * max(1.0, np.abs(J).max())
    for k in range(K):  # a sample's rows depend on its own posture only
        off = np.delete(J[c * k : c * (k + 1)], np.s_[n * k : n * (k + 1)], axis=1)
        assert not off.any()


def test_clearance_rows_chain_to_the_design_variables(legs, chain):
    """The rows of the double-support NLP (the last ones) against finite differences in the independent joints'
    Fourier coefficients and the dependent joints' positions at a sample."""
    prob = design_balance_problem(legs, SETTINGS, chain, 0.02)
    assert any(node.name() == "clearance" for node in prob["nodes"])
    rows = SETTINGS.samples * len(near_pairs(legs, "sim", MARGIN).pairs)
    g = prob["g"][prob["g"].size1() - rows :]
    G = ca.Function("G", [prob["x"]], [g, ca.jacobian(g, prob["x"])])
    x0, _ = balance_start(legs, SETTINGS, chain, np.random.default_rng(1), SETTINGS.amplitude)
    _, J = G(x0)
    J = J.full()
    nF, nD = prob["m"] * len(chain.independent), len(chain.dependent)
    cols = [0, 5, nF - 1] + [nF + 3 * nD * 5 + i for i in range(nD)]  # sample 5's dependent positions
    cols += [nF + nD]  # a dependent velocity: no effect on the clearances
    for k in cols:
        e = np.zeros_like(x0)
        e[k] = 1e-7
        fd = (G(x0 + e)[0].full() - G(x0 - e)[0].full())[:, 0] / 2e-7
        assert np.abs(fd - J[:, k]).max() <= 1e-5 * max(1.0, np.abs(J[:, k]).max()), k
    assert not J[:, nF + nD].any()
