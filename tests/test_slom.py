"""The generic solver: S²+SO(3) sensor calibration, exactness of the banded Schur solve, covariances, rank."""

import casadi as ca
import numpy as np
import pytest

from identify import slom
from identify.manifolds import S2, SO3, Rn, so3_exp, so3_log

G = 9.81


def accel_problem(rng, K=60, rig=None, outliers=0.0, loss=None):
    """Accelerometer at unknown mounting R_s on a rig at known rotations R_k; unknown gravity direction g."""
    R_s = so3_exp(np.array([0.2, -0.1, 0.4]))
    g = np.array([0.05, -0.1, -1.0])
    g /= np.linalg.norm(g)
    R_k = so3_exp(rng.normal(size=(K, 3))) if rig is None else rig
    a = np.einsum("ij,kjl,l->ki", R_s.T, np.swapaxes(R_k, 1, 2), G * g) + rng.normal(size=(K, 3)) * 0.02
    bad = rng.uniform(size=K) < outliers
    a[bad] += rng.normal(size=(bad.sum(), 3)) * 3.0
    p = slom.Problem()
    p.add_variable("Rs", SO3(), SO3.to_flat(np.eye(3)))
    p.add_variable("g", S2(), np.array([0.0, 0.0, -1.0]))
    x, gs, r, z = ca.SX.sym("x", 9), ca.SX.sym("g", 3), ca.SX.sym("R", 9), ca.SX.sym("z", 3)
    f = ca.Function("acc", [x, gs, r, z], [ca.reshape(x, 3, 3).T @ ca.reshape(r, 3, 3).T @ (G * gs) - z])
    p.add_factor("acc", f, ["Rs", "g"], [SO3.to_flat(R_k), a], sigma=0.02, loss=loss)
    return p, R_s, g


def test_s2_so3_calibration_recovers_truth_within_3_sigma():
    p, R_s, g = accel_problem(np.random.default_rng(1))
    res = slom.solve(p)
    assert res.converged and not res.rank.deficient
    dR = so3_log(R_s.T @ SO3.to_matrix(res.values["Rs"][0]))  # error in R_s's own tangent frame
    sig = np.sqrt(np.diag(res.covariance))
    assert np.all(np.abs(dR) < 3 * sig[:3])
    dg = S2().minus(res.values["g"], g[None, :])[0]
    assert np.all(np.abs(dg) < 3 * sig[3:5] + 1e-12)
    chi2 = res.stats[0].chi2_per_dof
    assert 0.6 < chi2 < 1.4


def test_covariance_matches_monte_carlo_spread():
    errs, sigs = [], []
    for seed in range(25):
        p, R_s, _ = accel_problem(np.random.default_rng(100 + seed), K=30)
        res = slom.solve(p)
        errs.append(so3_log(R_s.T @ SO3.to_matrix(res.values["Rs"][0])))
        sigs.append(np.sqrt(np.diag(res.covariance))[:3])
    ratio = np.std(errs, axis=0) / np.mean(sigs, axis=0)
    assert np.all((ratio > 0.5) & (ratio < 1.6)), ratio


@pytest.mark.parametrize("loss", [slom.Cauchy(2.0), slom.Huber(1.0)], ids=["cauchy", "huber"])
def test_robust_loss_resists_outliers(loss):
    rng_plain, rng_robust = np.random.default_rng(3), np.random.default_rng(3)
    p1, R_s, _ = accel_problem(rng_plain, K=120, outliers=0.15)
    p2, _, _ = accel_problem(rng_robust, K=120, outliers=0.15, loss=loss)
    e_plain = np.linalg.norm(so3_log(R_s.T @ SO3.to_matrix(slom.solve(p1).values["Rs"][0])))
    e_robust = np.linalg.norm(so3_log(R_s.T @ SO3.to_matrix(slom.solve(p2).values["Rs"][0])))
    assert e_robust < 0.3 * e_plain


def test_rank_report_names_unobservable_directions():
    rig = np.broadcast_to(np.eye(3), (40, 3, 3)).copy()  # one rig pose only: R_s and g trade off
    p, _, _ = accel_problem(np.random.default_rng(4), K=40, rig=rig)
    res = slom.solve(p, slom.Options(max_iter=20))
    assert res.rank.deficient and res.rank.rank == 2  # only the measured direction's 2 DOF
    names = {k for d in res.rank.null_directions for k in d}
    assert names & {"Rs[x]", "Rs[y]", "Rs[z]"}
    assert np.isnan(res.covariance).any()


def chain_problem(n=400, seed=5):
    """Linear chain (p, v) with a shared acceleration a and a shared sensor offset c: exact in one GN step."""
    rng = np.random.default_rng(seed)
    T, a_true, c_true = 0.01, 0.7, 0.05
    v = np.cumsum(np.full(n, a_true * T)) + rng.normal(size=n) * 0.001
    pos = np.cumsum(v * T)
    y = pos + c_true + rng.normal(size=n) * 0.002
    sm, sp, sv = 0.002, 1e-4, 1e-3
    p = slom.Problem()
    X = p.add_variable("x", Rn(2), np.zeros((n, 2)), eliminate=True)
    p.add_variable("a", Rn(1), [0.0])
    p.add_variable("c", Rn(1), [0.0])
    x, x1, a, c = ca.SX.sym("x", 2), ca.SX.sym("x1", 2), ca.SX.sym("a"), ca.SX.sym("c")
    z = ca.SX.sym("z")
    dyn = ca.Function("dyn", [x, x1, a], [ca.vertcat(x[0] + T * x[1] - x1[0], x[1] + T * a - x1[1])])
    meas = ca.Function("meas", [x, c, z], [x[0] + c - z])
    prior = ca.Function("prior", [x], [x])
    p.add_factor("dyn", dyn, [X[: n - 1], X[1:], "a"], sigma=[sp, sv])
    p.add_factor("meas", meas, [X, "c"], [y[:, None]], sigma=sm)
    p.add_factor("prior", prior, [X[0:1]], sigma=[0.01, 0.01])
    # Dense reference: unknowns (p_0, v_0, …, p_{n-1}, v_{n-1}, a, c).
    m = 2 * n + 2
    rows, rhs = [], []
    for k in range(n - 1):
        r = np.zeros(m)
        r[2 * k], r[2 * k + 1], r[2 * k + 2] = 1, T, -1
        rows.append(r / sp)
        rhs.append(0.0)
        r = np.zeros(m)
        r[2 * k + 1], r[2 * k + 3], r[2 * n] = 1, -1, T
        rows.append(r / sv)
        rhs.append(0.0)
    for k in range(n):
        r = np.zeros(m)
        r[2 * k], r[2 * n + 1] = 1, 1
        rows.append(r / sm)
        rhs.append(y[k] / sm)
    for j in range(2):
        r = np.zeros(m)
        r[j] = 1 / 0.01
        rows.append(r)
        rhs.append(0.0)
    return p, np.array(rows), np.array(rhs)


def test_banded_schur_solution_and_marginals_equal_dense_least_squares():
    p, A, b = chain_problem()
    res = slom.solve(p, slom.Options(method="gn", max_iter=3, state_covariance={"x": [0, 200]}))
    z = np.linalg.lstsq(A, b, rcond=None)[0]
    n = (len(z) - 2) // 2
    np.testing.assert_allclose(res.values["x"].ravel(), z[: 2 * n], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        [res.values["a"][0, 0], res.values["c"][0, 0]], z[2 * n :], rtol=1e-6, atol=1e-9
    )
    cov = np.linalg.inv(A.T @ A)
    np.testing.assert_allclose(res.covariance, cov[2 * n :, 2 * n :], rtol=1e-5)
    np.testing.assert_allclose(res.state_covariance["x"][200], cov[400:402, 400:402], rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(res.state_covariance["x"][0], cov[0:2, 0:2], rtol=1e-5, atol=1e-12)


def test_levenberg_marquardt_logs_iterations_and_decreases_cost():
    p, _, _ = accel_problem(np.random.default_rng(9))
    seen = []
    res = slom.solve(p, callback=seen.append)
    assert seen and seen == res.log
    accepted = [e.cost for e in res.log if e.accepted]
    assert all(b <= a + 1e-9 for a, b in zip(accepted, accepted[1:], strict=False))
    assert res.cost < res.initial_cost


def split_chain_problem(n=300, seed=6):
    """The chain with positions and velocities as two eliminated families: exercises the general banded path."""
    rng = np.random.default_rng(seed)
    T, a_true = 0.01, -0.4
    v = np.cumsum(np.full(n, a_true * T)) + rng.normal(size=n) * 0.001
    y = np.cumsum(v * T) + rng.normal(size=n) * 0.002
    p = slom.Problem()
    P = p.add_variable("p", Rn(1), np.zeros((n, 1)), eliminate=True)
    V = p.add_variable("v", Rn(1), np.zeros((n, 1)), eliminate=True)
    p.add_variable("a", Rn(1), [0.0])
    s = [ca.SX.sym(k) for k in ("p", "v", "p1", "v1", "a", "z")]
    dp = ca.Function("dp", s[0:3], [s[0] + T * s[1] - s[2]])
    dv = ca.Function("dv", [s[1], s[3], s[4]], [s[1] + T * s[4] - s[3]])
    meas = ca.Function("meas", [s[0], s[5]], [s[0] - s[5]])
    prior = ca.Function("prior", [s[1]], [s[1]])
    p.add_factor("dp", dp, [P[: n - 1], V[: n - 1], P[1:]], sigma=1e-4)
    p.add_factor("dv", dv, [V[: n - 1], V[1:], "a"], sigma=1e-3)
    p.add_factor("meas", meas, [P], [y[:, None]], sigma=0.002)
    p.add_factor("prior", prior, [V[0:1]], sigma=0.01)
    return p


def test_general_banded_path_matches_block_path():
    split = split_chain_problem()
    res = slom.solve(split, slom.Options(method="gn", max_iter=3, state_covariance={"v": [150]}))
    assert res.converged
    # same problem with (p, v) stacked as one R² family goes through the block-tridiagonal path
    n = split.variables["p"].count
    p2 = slom.Problem()
    X = p2.add_variable("x", Rn(2), np.zeros((n, 2)), eliminate=True)
    p2.add_variable("a", Rn(1), [0.0])
    T = 0.01
    x, x1, a, z = ca.SX.sym("x", 2), ca.SX.sym("x1", 2), ca.SX.sym("a"), ca.SX.sym("z")
    p2.add_factor(
        "dyn",
        ca.Function("d", [x, x1, a], [ca.vertcat(x[0] + T * x[1] - x1[0], x[1] + T * a - x1[1])]),
        [X[: n - 1], X[1:], "a"],
        sigma=[1e-4, 1e-3],
    )
    y = split.factors[2].data[0]
    p2.add_factor("meas", ca.Function("m", [x, z], [x[0] - z]), [X], [y], sigma=0.002)
    p2.add_factor("prior", ca.Function("pr", [x], [x[1]]), [X[0:1]], sigma=0.01)
    ref = slom.solve(p2, slom.Options(method="gn", max_iter=3, state_covariance={"x": [150]}))
    np.testing.assert_allclose(res.values["p"][:, 0], ref.values["x"][:, 0], rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(res.values["a"], ref.values["a"], rtol=1e-7)
    np.testing.assert_allclose(res.covariance, ref.covariance, rtol=1e-6)
    np.testing.assert_allclose(
        res.state_covariance["v"][150][0, 0], ref.state_covariance["x"][150][1, 1], rtol=1e-6
    )
