"""Doggy model oracles (spec §5), residual block sizes, a short simulated calibration and the rank report."""

import casadi as ca
import numpy as np
import pytest

from formats.errors import IdentifiabilityError
from identify import doggy as dg
from identify import slom
from identify.doggy_sim import SimConfig, simulate
from identify.doggy_verify import verify
from identify.manifolds import so3_log
from robots import doggy
from trajectories.doggy_excitation import make_plan


def test_mass_matrix_oracles():
    M0 = doggy.mass_matrix_np([0.0, 0.0, 0.0]) * 1e3
    ref = [[506.238, -8.6822, 0.0916], [-8.6822, 543.7971, 0.0691], [0.0916, 0.0691, 514.2253]]
    np.testing.assert_allclose(M0, ref, atol=2e-3)
    np.testing.assert_allclose(np.linalg.eigvalsh(M0), [504.33, 514.23, 545.71], atol=0.01)
    mins = []
    for q2 in np.linspace(-np.pi, np.pi, 13):
        for q3 in np.linspace(-np.pi, np.pi, 13):
            M = doggy.mass_matrix_np([0.3, q2, q3])
            np.testing.assert_allclose(M, M.T, atol=1e-15)
            np.testing.assert_allclose(M, doggy.mass_matrix_np([-2.0, q2, q3]), atol=1e-15)
            mins.append(np.linalg.eigvalsh(M).min())
    assert min(mins) > 0.035  # kg·m², positive definite everywhere


def test_dynamics_at_rest_and_friction_shape():
    p = doggy.TABLE1_IDENTIFIED
    x = np.concatenate([[0.2, -0.3, 0.1], np.zeros(3), [0.2, -0.3, 0.1], np.zeros(3)])
    np.testing.assert_allclose(doggy.f_dyn_np(x, np.zeros(3), p), 0.0, atol=1e-12)
    # only friction differs between +v and −v on the motor side when springs are relaxed and u = 0
    v = 0.01
    xp = np.concatenate([np.zeros(3), np.full(3, v), np.zeros(3), np.zeros(3)])
    thdd = doggy.f_dyn_np(xp, np.zeros(3), p)[9:12]
    ds = np.array(p.d_s)
    expected = (ds * v - np.array(p.mu_fm) * np.tanh(200 * v)) / p.b
    np.testing.assert_allclose(thdd, expected, rtol=1e-12)
    s = 1 / (1 + np.exp(-400 * v)) - 0.5
    np.testing.assert_allclose(2 * s, np.tanh(200 * v), rtol=1e-12)  # eq 12 ≡ tanh form


def test_head_rotation_is_a_rotation_and_joint_rates_match_finite_differences():
    f = doggy.numeric()["head_rotation"]
    rate = doggy.numeric()["joint_rate_eof"]
    rng = np.random.default_rng(0)
    for _ in range(10):
        q, qd = rng.uniform(-1.5, 1.5, 3), rng.normal(size=3)
        R = np.asarray(f(q))
        np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-12)
        assert np.isclose(np.linalg.det(R), 1.0)
        h = 1e-6
        Rdot = (np.asarray(f(q + h * qd)) - np.asarray(f(q - h * qd))) / (2 * h)
        W = R.T @ Rdot  # body-frame (EOF) angular velocity relative to body 1, as a skew matrix
        w = np.array([W[2, 1], W[0, 2], W[1, 0]])
        np.testing.assert_allclose(w, np.asarray(rate(q, qd)).ravel(), atol=1e-7)
    # nominal head IMU frame equals frame 1 in the zero pose
    np.testing.assert_allclose(doggy.R_IMU2_NOMINAL @ np.asarray(f(np.zeros(3))).T, np.eye(3), atol=1e-12)


def test_table1_rotations_are_a_few_degrees_from_nominal():
    a1 = np.degrees(np.linalg.norm(so3_log(doggy.R_IMU1_NOMINAL.T @ doggy.TABLE1_IDENTIFIED.R_imu1)))
    a2 = np.degrees(np.linalg.norm(so3_log(doggy.R_IMU2_NOMINAL.T @ doggy.TABLE1_IDENTIFIED.R_imu2)))
    assert abs(a1 - 3.00) < 0.02 and abs(a2 - 2.36) < 0.02


def test_residual_block_dimensions():
    fns = dg.residual_functions()
    assert {k: f.size1_out(0) for k, f in fns.items()} == {
        "initial": 9,
        "measurement": 7,
        "dynamics": 12,
        "bias": 6,
    }
    sim = simulate(SimConfig(duration=1.5, seed=3), make_plan(1.5, 3))
    pr = dg.build_problem(sim.recording, doggy.TABLE1_INITIAL)
    counts = {f.name: f.count for f in pr.factors}
    n, m = sim.recording.n, sim.recording.zero_command_samples()
    assert counts == {"initial": 1, "measurement": n, "dynamics": n - 1, "bias": m}
    unknowns = sum(v.count * v.manifold.tangent_dim for v in pr.variables.values())
    assert unknowns == 12 * n + 24


def test_streamed_pwm_reproduces_the_simulated_commands():
    from formats.doggy_plan import pwm_command, pwm_program

    sim = simulate(SimConfig(duration=3.0, seed=5), make_plan(3.0, 5))
    rec = sim.recording
    target, ff, umax = pwm_program(sim.plan, rec.t)
    u = pwm_command(target, ff, umax, rec.theta - rec.theta0, sim.plan.kp)
    np.testing.assert_allclose(u, rec.u, atol=1e-9)
    assert np.abs(rec.u[rec.t < sim.plan.segments[0].duration - 1e-3]).max() == 0.0  # zero-command window
    assert np.abs(rec.u).max() <= 0.9 + 1e-12


def test_simulated_plan_has_the_paper_stages():
    plan = make_plan(60.0, seed=0)
    kinds = [s.kind for s in plan.segments]
    assert kinds[0] == "zero" and "chirp" in kinds
    assert {s.u_max for s in plan.segments if s.kind == "goto"} == {0.15, 0.9}
    assert abs(plan.duration - 60.0) < 1e-9
    assert plan.from_json(plan.to_json(), setpoint_range=doggy.robot().setpoint_range) == plan


@pytest.fixture(scope="module")
def short_solve():
    sim = simulate(SimConfig(duration=4.0, seed=11), make_plan(4.0, 11))
    cal = dg.calibrate(sim.recording, doggy.TABLE1_INITIAL, solver=slom.Options(max_iter=40))
    return sim, cal


def test_short_simulated_solve_recovers_parameters(short_solve):
    sim, cal = short_solve
    assert cal.result.converged
    rows = {r["name"]: r for r in dg.parameter_rows(cal, sim.params)}
    for name in doggy.PHYS_NAMES:
        r = rows[name]
        assert abs(r["error"]) < 3.5 * r["sigma"], (name, r)
        tol = 0.30 if name.startswith("mu") else 0.06  # 4 s of data: friction is the weakest
        assert abs(r["error"]) < tol * abs(r["truth"]), (name, r)
    for key, attr in (("R1", "R_imu1"), ("R2", "R_imu2")):
        d = so3_log(getattr(sim.params, attr).T @ getattr(cal.estimate, attr))  # ≈ tangent error
        sig = np.array([cal.sigma[f"{key}_{c}"] for c in "xyz"])
        assert np.all(np.abs(d) < 3.5 * sig + 1e-9), (key, d, sig)
    assert np.degrees(np.linalg.norm(so3_log(sim.params.R_imu2.T @ cal.estimate.R_imu2))) < 0.3
    # the states track the truth: link velocity error far below the raw encoder-difference noise
    err = cal.states[:, 3:6] - sim.states[:, 3:6]
    assert np.sqrt(np.mean(err**2)) < 0.02


def test_open_loop_verification_tracks_velocities(short_solve):
    sim, cal = short_solve
    ver = verify(sim.recording, cal.estimate, cal.states[0])
    assert max(ver.rmse["theta_dot"]) < 0.05  # rad/s
    assert max(ver.rmse["gyro2"]) < 0.1
    assert set(ver.rmse) == {"theta", "theta_dot", "gyro1", "gyro2"}


def test_dropping_bias_block_makes_horizontal_gyro1_bias_unobservable():
    sim = simulate(SimConfig(duration=1.5, seed=2), make_plan(1.5, 2))
    opts = dg.ModelOptions(bias_block=False, debias_gyro1=False)  # eq 26 as printed
    with pytest.raises(IdentifiabilityError, match="bias1"):
        dg.calibrate(sim.recording, doggy.TABLE1_INITIAL, opts, slom.Options(max_iter=4))
    cal = dg.calibrate(
        sim.recording, doggy.TABLE1_INITIAL, opts, slom.Options(max_iter=4), allow_unobservable=True
    )
    rank = cal.result.rank
    assert rank.size - rank.rank == 2
    null_names = {k for d in rank.null_directions for k in d}
    assert null_names <= {"bias1_x", "bias1_y", "bias1_z"}
    # the unobservable subspace is orthogonal to the gyro-1 axis direction R1·e_z (the "vertical" one)
    axis = cal.estimate.R_imu1[:, 2]
    for d in rank.null_directions:
        v = np.array([d.get(f"bias1_{c}", 0.0) for c in "xyz"])
        assert abs(v @ axis) < 0.1 * np.linalg.norm(v)


def test_bias_block_restores_full_rank():
    sim = simulate(SimConfig(duration=1.5, seed=2), make_plan(1.5, 2))
    opts = dg.ModelOptions(debias_gyro1=False)
    cal = dg.calibrate(sim.recording, doggy.TABLE1_INITIAL, opts, slom.Options(max_iter=4))
    assert not cal.result.rank.deficient


def test_gyro2_prediction_is_exact_on_noise_free_model():
    p = doggy.TABLE1_IDENTIFIED
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-1, 1, 3), rng.normal(size=3), np.zeros(6)])
    wobble = np.array([0.1, -0.2, 0.0])
    g1, g2 = doggy.numeric()["true_gyros"](
        x, np.asarray(p.bias1), np.asarray(p.bias2), p.R_imu1, p.R_imu2, wobble
    )
    xs = ca.SX.sym("x", 12)
    pred = ca.Function(
        "p",
        [xs],
        [
            doggy.gyro2_prediction(
                xs, ca.DM(p.bias1), ca.DM(p.bias2), ca.DM(p.R_imu1), ca.DM(p.R_imu2), ca.DM(g1)
            )
        ],
    )
    np.testing.assert_allclose(np.asarray(pred(x)).ravel(), np.asarray(g2).ravel(), atol=1e-12)
    f1 = ca.Function("g1", [xs], [doggy.gyro1_residual(xs, ca.DM(p.bias1), ca.DM(p.R_imu1), ca.DM(g1))])
    assert abs(float(f1(x))) < 1e-12
