"""Balance-constrained excitation of TUlip in double support: exact closed-chain states, exact Jacobians of the
per-sample constraints, ZMP kept inside the support polygon (independent shapely check), the board wrench from
MuJoCo's own inverse dynamics, and exact identification of the placement's base parameters."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

from drivers.emulators.mujoco_arm import physical_truth, standing_wrench
from robots import dynamics as dyn
from robots.base_params import RegressorSpec
from robots.kinematics import site_pose
from robots.motion_class import held_sole_states, placement_base
from trajectories.balance_excitation import balance_start, chain_base, design_balance_problem
from trajectories.closed_chain import ClosedChainTrajectory, make_chain
from trajectories.excitation import ExcitationSettings, optimise
from trajectories.verify import check_trajectory, stacked_base_regressor

QUICK = ExcitationSettings(
    period=8.0, duration=8.0, harmonics=4, samples=32, max_iter=60, sharpness=(8.0,), simplified=True,
    motion="double-support", zmp_margin=0.02,
)  # fmt: skip


@pytest.fixture(scope="module")
def chain(tulip):
    return make_chain(tulip, "right", "sim", np.random.default_rng(3), candidates=20)


def test_closed_chain_samples_are_exact_double_support(tulip, chain):
    _, fi = balance_start(tulip, QUICK, chain, np.random.default_rng(0), 0.1)
    traj = ClosedChainTrajectory(tulip, chain, fi)
    t = np.linspace(0, QUICK.duration, 801)
    q, qd, qdd = traj.sample(t)
    R, p = site_pose(tulip, q, "sim", chain.other, "right")
    assert np.abs(p - chain.target_p).max() < 1e-9 and np.abs(R - chain.target_R).max() < 1e-9
    h = t[1] - t[0]
    assert np.abs((q[2:] - q[:-2]) / (2 * h) - qd[1:-1]).max() < 1e-3 * max(1, np.abs(qd).max())
    assert np.abs((qd[2:] - qd[:-2]) / (2 * h) - qdd[1:-1]).max() < 1e-3 * max(1, np.abs(qdd).max())


def test_per_sample_jacobian_matches_finite_differences(tulip, chain):
    prob = design_balance_problem(tulip, QUICK, chain, 0.02)
    x0, _ = balance_start(tulip, QUICK, chain, np.random.default_rng(1), 0.1)
    G = ca.Function("G", [prob["x"]], [prob["g"]])
    J = ca.Function("J", [prob["x"]], [ca.jacobian(prob["g"], prob["x"])])(x0).full()
    for k in np.random.default_rng(2).choice(x0.size, 5, replace=False):
        e = np.zeros_like(x0)
        e[k] = 1e-6
        fd = (G(x0 + e).full() - G(x0 - e).full())[:, 0] / 2e-6
        assert np.abs(fd - J[:, k]).max() <= 1e-5 * max(1.0, np.abs(J[:, k]).max())


def test_placement_base_is_what_one_placement_identifies(tulip, chain):
    spec = RegressorSpec("base-wrench", "right", None, ("fz", "mx", "my"))
    db = chain_base(tulip, chain, True)
    assert db.rank == placement_base(tulip, spec, chain.nominal, True).rank
    q, qd, qdd = held_sole_states(tulip, "right", chain.nominal, 80, np.random.default_rng(9))
    Y = dyn.base_wrench_regressor(tulip, q, qd, qdd, "right")[:, [2, 3, 4], :].reshape(
        -1, 10 * len(tulip.links)
    )
    keep = [i for i in range(Y.shape[1]) if i not in db.assumed_zero]
    assert np.linalg.matrix_rank(Y[:, keep], tol=1e-9 * np.abs(Y).max()) == db.rank


def test_ordered_placement_base_numbers_parameters_alike_at_any_posture(tulip, chain):
    """Identification's base (`ordered=True`): two postures of one placement (a trajectory's middle samples)
    give the same base parameters, and they are a base: the dependent columns are the independent ones × β.
    Pivoting by column norm breaks the left/right ties by the samples (recordings of one plan on the twin
    shared only 30–36 of 37 independent columns before)."""
    spec = RegressorSpec("base-wrench", "right", None, ("fz", "mx", "my"))
    _, fi = balance_start(tulip, QUICK, chain, np.random.default_rng(5), 0.15)
    q = ClosedChainTrajectory(tulip, chain, fi).sample(np.array([2.0, 3.0, 5.0]))[0]
    bases = [placement_base(tulip, spec, qr, True, ordered=True) for qr in q]
    assert all(b.independent == bases[0].independent for b in bases)
    assert bases[0].independent == sorted(bases[0].independent)
    assert bases[0].rank == placement_base(tulip, spec, q[0], True).rank
    qs, qd, qdd = held_sole_states(tulip, "right", q[1], 40, np.random.default_rng(8))
    Y = dyn.base_wrench_regressor(tulip, qs, qd, qdd, "right")[:, [2, 3, 4], :].reshape(
        -1, 10 * len(tulip.links)
    )
    b = bases[0]
    Y[:, b.assumed_zero] = 0.0
    assert np.abs(Y[:, b.dependent] - Y[:, b.independent] @ b.beta).max() < 1e-8 * np.abs(Y).max()


def test_design_keeps_zmp_inside_and_lowers_kappa(tulip, chain):
    x0, fi = balance_start(tulip, QUICK, chain, np.random.default_rng(4), 0.1)
    start = ClosedChainTrajectory(tulip, chain, fi)
    t = np.linspace(0, QUICK.period, 96, endpoint=False)
    k0 = np.linalg.cond(stacked_base_regressor(tulip, start, "right", True, t))
    from trajectories.balance_excitation import optimise_balance

    res = optimise_balance(tulip, QUICK, seed=4, zmp_margin=0.02, chain=chain)
    check = check_trajectory(tulip, res.trajectory, "right", "sim", 0.004, simplified=True, zmp_margin=0.02)
    assert check.ok, check.problems
    assert check.min_zmp_margin_m >= 0.02 - 1e-4 and check.max_foot_drift_m < 1e-8
    k1 = np.linalg.cond(stacked_base_regressor(tulip, res.trajectory, "right", True, t))
    assert k1 < k0 / 3 and k1 == pytest.approx(res.kappa, rel=0.5)


def test_mujoco_board_wrench_equals_the_base_wrench_regressor(tulip, chain):
    truth = physical_truth(tulip.parameter_set("sim"))
    q, qd, qdd = held_sole_states(tulip, "right", chain.nominal, 6, np.random.default_rng(5))
    w = standing_wrench(tulip, truth, "right", q, qd, qdd)
    ref = dyn.base_wrench_regressor(tulip, q, qd, qdd, "right", truth) @ dyn.standard_parameters(tulip, truth)
    assert np.abs(w - ref).max() < 1e-9 * np.abs(ref).max()
    assert w[:, 2].mean() == pytest.approx(truth.total_mass * 9.81, rel=0.2)


def test_exact_states_identify_the_placement_parameters_exactly(tulip, chain):
    truth = physical_truth(tulip.parameter_set("sim"))
    q, qd, qdd = held_sole_states(tulip, "right", chain.nominal, 120, np.random.default_rng(6))
    w = standing_wrench(tulip, truth, "right", q, qd, qdd)[:, [2, 3, 4]]
    spec = RegressorSpec("base-wrench", "right", None, ("fz", "mx", "my"))
    db = placement_base(tulip, spec, chain.nominal, False)
    Y = dyn.base_wrench_regressor(tulip, q, qd, qdd, "right")[:, [2, 3, 4], :][..., db.independent]
    x = np.linalg.lstsq(Y.reshape(-1, db.rank), w.reshape(-1), rcond=None)[0]
    ref = db.values(dyn.standard_parameters(tulip, truth))
    assert np.abs(x - ref).max() < 1e-6 * max(1.0, np.abs(ref).max())


def test_settings_route_to_the_balance_design(tulip):
    with pytest.raises(Exception, match="motion"):
        optimise(tulip, ExcitationSettings(motion="hopping"))
