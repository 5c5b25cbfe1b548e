"""Gravity-compensation feed-forward (drivers/gravity.py): the torques are the gradient of the potential of gravity
and the chosen ground force, they are in static equilibrium in MuJoCo's own statics of the twin, and with them the
twin's servos hold the commanded posture with the base sole flat where plain P-only servos sag and rock it onto
an edge; the executor sends them only when enabled."""

import argparse
from dataclasses import replace

import numpy as np
import pytest

from drivers.emulators.sim_robot import true_parameters
from drivers.emulators.standing import stand
from drivers.emulators.world import WorldOptions
from drivers.gravity import G, feedforward_torques, goal_offsets, other_sole_force, servo_stiffness
from formats.errors import DataError
from formats.static_recording import read_recording
from poise import cmd_run
from robots.kinematics import com_position, site_pose
from robots.stance import foot_corners, other_site


def _potential(model, q, params, base, force, point_local):
    """m g z_com − F z_p: the potential whose gradient the feed-forward must be (p fixed on the other sole)."""
    other = other_site(model, base)
    R, p = site_pose(model, q, params, other, base)
    z_point = (p + R @ point_local)[2]
    return (
        model.parameter_set(params).total_mass * G * com_position(model, q, params, base)[2] - force * z_point
    )


@pytest.mark.parametrize("index", [0, 1])
def test_feedforward_is_the_gradient_of_gravity_and_ground_force(model, plan, index):
    """Virtual work: τ_ff = ∂/∂q [m g z_com − f_z z_p] at the chosen point p of the other sole (central
    differences of forward kinematics, independent of the dynamics code and of the Jacobian's sign)."""
    q, params, base = plan.postures[index].q, plan.params, plan.base
    force, point = other_sole_force(model, q, params, base)
    R, p = site_pose(model, q, params, other_site(model, base), base)
    local = R.T @ (point[0] - p)
    h = 1e-6
    fd = np.array(
        [
            (_potential(model, q + h * e, params, base, force[0], local)
             - _potential(model, q - h * e, params, base, force[0], local)) / (2 * h)
            for e in np.eye(model.nq)
        ]
    )  # fmt: skip
    tau = feedforward_torques(model, q, params, base)
    np.testing.assert_allclose(tau, fd, atol=1e-5 * np.abs(fd).max())
    assert np.abs(tau - feedforward_torques(model, q[None], params, base)[0]).max() == 0.0  # batch = single


def test_chosen_ground_forces_balance_the_weight_with_both_cops_inside_their_soles(model, plan):
    """The vertical split puts each sole's CoP at its centre + the same offset δ: the moments balance the weight
    at the CoM, and both CoPs lie inside their soles for the plan's postures."""
    from shapely.geometry import Point, Polygon

    from drivers.gravity import _sole_centre

    base = plan.base
    base_site = model.base_site(base).name
    for p in plan.postures:
        weight = model.parameter_set(plan.params).total_mass * G
        force, point = other_sole_force(model, p.q, plan.params, base)
        com = com_position(model, p.q, plan.params, base)[:2]
        c_b = _sole_centre(model, base_site)[:2]
        base_cop = (weight * com - force[0] * point[0, :2]) / (weight - force[0])
        np.testing.assert_allclose(base_cop - c_b, point[0, :2] - _other_centre(model, p.q, plan), atol=1e-12)
        corners = foot_corners(model, p.q, plan.params, base)
        assert Polygon(corners[base_site]).contains(Point(base_cop))
        assert Polygon(corners[other_site(model, base)]).contains(Point(point[0, :2]))
        assert 0.0 <= force[0] < weight  # clipped at 0 when the CoM is past the base sole's centre


def _other_centre(model, q, plan):
    from drivers.gravity import _sole_centre

    other = other_site(model, plan.base)
    R, p = site_pose(model, q, plan.params, other, plan.base)
    return (p + R @ _sole_centre(model, other))[:2]


def test_servo_stiffness_follows_the_configured_p_gain(model, cfg):
    """kp = effort / (885 · 128 / P ticks): the twin's servo model with the same P gain agrees."""
    from drivers.emulators.mujoco_twin import ServoModel

    kp = servo_stiffness(model, cfg)
    np.testing.assert_allclose(
        kp, [ServoModel(p_gain=cfg.executor.position_p_gain).kp(e) for e in model.effort_limit]
    )
    cfg.executor.position_p_gain = 3000.0
    np.testing.assert_allclose(servo_stiffness(model, cfg), kp / 2)
    cfg.executor.position_p_gain = 0.0
    with pytest.raises(DataError, match="position_p_gain"):
        servo_stiffness(model, cfg)


def test_servo_stiffness_from_the_gains_the_servos_report(model, cfg):
    """Per-servo Position P Gains as read back (the executor's source when the link can read them) win over the
    configured one; a servo reporting no gain is named."""
    gains = np.full(model.nq, 6000.0)
    gains[2] = 1500.0
    kp = servo_stiffness(model, cfg, gains)
    cfg.executor.position_p_gain = 6000.0
    ref = servo_stiffness(model, cfg)
    np.testing.assert_allclose(kp / ref, np.where(np.arange(model.nq) == 2, 0.25, 1.0))
    gains[5] = 0.0
    with pytest.raises(DataError, match=model.joint_names[5]):
        servo_stiffness(model, cfg, gains)
    with pytest.raises(DataError, match="3 Position P Gains for"):
        servo_stiffness(model, cfg, gains[:3] + 1)


# Postures 0, 2 and 8 of `poise plan postures tulip --postures 18 --placements 3 --load-share 0.25 --seed 1`
# (each sole carries >= 25 % of the weight): without the feed-forward the twin rocks the base sole 0.3-0.56 deg.
DESIGNED = [
    (
        [-0.16703678395221958, -0.13843673139535329, -1.1344640135034807, 6.403857852790653e-10, 0.29511731908273187,
         0.16862786694444412, -0.004289533679426815, -0.3839724353505935, -1.011835674008919, 0.35835667652331293,
         -0.19949765713746553, 0.2133293276663474],
        (-0.13920458262657734, 0.10580967545954151, 0.2932410977923911),
    ),
    (
        [-0.7853981620524276, -0.4264702376396165, -0.6742632686991851, 1.1497466089562491, -0.6184812597469345,
         0.2967059727807481, -0.4691371548364476, -0.3839724354018638, -0.3827990447389513, 0.9531165075204724,
         -0.6632251156414073, 0.2201320171780345],
        (-0.13920458262657734, 0.10580967545954151, 0.2932410977923911),
    ),
    (
        [-0.7853981628587473, 0.1752301503703557, -1.134464012171023, 0.514103917086626, -0.22209400262946064,
         0.29670597281862304, -0.21913031651421178, -0.10092080084758753, -1.1344640129099184, 5.44700341388828e-10,
         0.17945683129289142, 0.011983657936500055],
        (-0.01683713672874698, 0.3247911969031232, 0.5687705861939812),
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def designed(model):
    from formats.plan import Placement, Plan, Posture

    placements = [Placement(i, pose) for i, (_, pose) in enumerate(DESIGNED)]
    postures = [Posture(i, i, np.array(q), 1.0, 2.0, (0.0, 0.0), 0.08) for i, (q, _) in enumerate(DESIGNED)]
    return Plan(model.name, "right", model.joint_names, placements, postures, params="sim")


def test_feedforward_and_chosen_ground_forces_are_in_static_equilibrium_in_mujoco(model, designed, cfg):
    """MuJoCo's own statics of the twin (true parameters, free base, posture set with the base sole flat at the
    origin): its gravity generalised forces minus the chosen ground forces on both soles (points on the foot
    bodies, MuJoCo's Jacobians) leave nothing on the free base (the forces balance the weight and its moment)
    and exactly τ_ff on the joints (the feed-forward's sign and frame, independent of robots.dynamics)."""
    import mujoco

    from drivers.emulators.mujoco_twin import Twin
    from drivers.gravity import _sole_centre

    truth = true_parameters(model)
    model.params[truth.name] = truth
    for p in designed.postures:
        tw = Twin(model, truth, base=designed.base)
        tw.d.qpos[tw.qadr] = p.q
        tw._teleport(*tw._root_pose_for(tw.base_site, np.eye(3), np.zeros(3)))
        weight = truth.total_mass * G
        force, point = other_sole_force(model, p.q, truth.name, designed.base)
        delta = point[0, :2] - _other_centre(model, p.q, replace(designed, params=truth.name))
        base_point = _sole_centre(model, tw.base_site) + np.r_[delta[:2], 0.0]
        residual = tw.d.qfrc_bias.copy() * (9.81 / -tw.m.opt.gravity[2])  # the model's g = 9.81
        for site, f, at in (
            (tw.base_site, weight - force[0], base_point),
            (other_site(model, designed.base), force[0], point[0]),
        ):
            jacp = np.zeros((3, tw.m.nv))
            mujoco.mj_jac(tw.m, tw.d, jacp, None, at, tw.m.site_bodyid[tw.site_ids[site]])
            residual -= jacp.T @ np.array([0.0, 0.0, f])
        tau = feedforward_torques(model, p.q, truth.name, designed.base)
        assert np.abs(residual[:6]).max() < 1e-6 * weight
        np.testing.assert_allclose(residual[tw.vadr], tau, atol=1e-6 * np.abs(tau).max())


@pytest.mark.parametrize("index", [0, 1, 2])
def test_feedforward_keeps_the_base_sole_flat_and_the_posture_held(model, designed, cfg, index):
    """The executor's feed-forward (from the plan's guessed parameters, not the truth) on designed postures: the
    servos hold the commanded posture within 0.2 deg and the base sole within 0.05 deg of flat, where without it
    the joints sag 0.4-0.6 deg and the sole rocks 0.23-0.36 deg on its pads; the true model's CoP at the held and
    at the commanded angles comes within 1.1 mm of the boards' (at the commanded angles 4.7-8.0 mm without)."""
    on = stand(model, designed, index, cfg, feedforward=True)
    off = stand(model, designed, index, cfg, feedforward=False)
    print(f"posture {index}: without {off}\n            with {on}")
    assert off.base_tilt_deg > 0.2 and off.hold_error_deg > 0.3
    assert on.hold_error_deg < 0.2 and on.base_tilt_deg < 0.05
    # < 1.5 mm: the servos' ±½-tick deadband leaves every joint up to half a tick off its goal (measured 0.26-1.04)
    assert (
        on.model_cop_mm < 1.5
        and on.model_cop_cmd_mm < 1.5
        and on.model_cop_cmd_mm < 0.5 * off.model_cop_cmd_mm
    )
    assert on.slide_mm < 0.5 and on.events == []


def test_feedforward_needs_effort_limits(model, plan, cfg):
    import copy

    m = copy.copy(model)
    m.effort_limit = np.zeros(model.nq)
    with pytest.raises(DataError, match="effort limit"):
        goal_offsets(m, cfg, plan.postures[0].q, plan.params, plan.base)


@pytest.mark.parametrize("on", [False, True])
def test_executor_offsets_goals_only_when_enabled(model, plan, cfg, tmp_path, on):
    """On the kinematic robot (no load: the joints go where they are sent) the recorded angles are the goals:
    the plan's postures plus the feed-forward offsets when gravity compensation is on, the postures when off."""
    cfg.executor.gravity_compensation = on
    args = argparse.Namespace(plan="plan.json", robot="sim", boards="sim", out=str(tmp_path / "run"), resume=False,
                              time_scale=2.0, yes=True, no_noise=True)  # fmt: skip
    _, run_dir = cmd_run.execute(args, model, plan, cfg, world_opts=WorldOptions(noise=False))
    rec = read_recording(run_dir / "recording.csv", joint_names=model.joint_names)
    offsets = goal_offsets(model, cfg, plan.q, plan.params, plan.base)
    assert np.abs(offsets).max() > np.radians(0.3)  # large enough to tell apart
    expected = plan.q + offsets if on else plan.q
    np.testing.assert_allclose(rec.q, expected, atol=2e-3)


def test_feedforward_in_motion_matches_mujocos_inverse_dynamics(model, designed, cfg):
    """In motion (random joint velocities and accelerations, the base sole fixed flat at the origin): MuJoCo's
    inverse dynamics of the twin (true parameters, gravity 9.81 as the model's) less the chosen vertical force on
    the other sole leaves, once the base sole's own wrench takes the free base's rows, exactly τ_ff on the joints;
    and the two soles' CoPs sit equally far off their centres (the lever rule at the motion's ZMP)."""
    import mujoco

    from drivers.emulators.mujoco_twin import Twin, physical_truth
    from drivers.gravity import _sole_centre

    truth = true_parameters(model)
    model.params[truth.name] = truth
    simulated = physical_truth(model, truth)  # the inertias as MuJoCo simulates them (made realisable)
    model.params[simulated.name] = simulated
    rng = np.random.default_rng(7)
    for p in designed.postures:
        tw = Twin(model, truth, base=designed.base)
        m, d = tw.m, tw.d
        m.opt.gravity[:] = [0.0, 0.0, -9.81]
        qd, qdd = rng.normal(0, 0.3, model.nq), rng.normal(0, 0.5, model.nq)  # rad/s, rad/s²: as designs move
        h = 1e-4
        states = []
        for s in (-h, 0.0, h):  # the base sole held flat at the origin along q + q̇ s + q̈ s²/2
            d.qpos[tw.qadr] = p.q + qd * s + qdd * s**2 / 2
            tw._teleport(*tw._root_pose_for(tw.base_site, np.eye(3), np.zeros(3)))
            states.append(d.qpos.copy())
        v0, v1 = np.zeros(m.nv), np.zeros(m.nv)
        mujoco.mj_differentiatePos(m, v0, h, states[0], states[1])
        mujoco.mj_differentiatePos(m, v1, h, states[1], states[2])
        d.qpos[:], d.qvel[:] = states[1], (v0 + v1) / 2
        mujoco.mj_forward(m, d)
        d.qacc[:] = (v1 - v0) / h
        f = np.zeros(m.nv)
        mujoco.mj_rne(m, d, 1, f)  # M q̈ + bias: the generalised forces the motion needs
        tau = feedforward_torques(model, p.q, simulated.name, designed.base, qd=qd, qdd=qdd)
        # the other sole's vertical force at its point, as feedforward_torques chose it in motion
        force, point = other_sole_force(model, p.q, simulated.name, designed.base, qd=qd, qdd=qdd)
        jacp = np.zeros((3, m.nv))
        mujoco.mj_jac(
            m, d, jacp, None, point[0], m.site_bodyid[tw.site_ids[other_site(model, designed.base)]]
        )
        residual = f - jacp.T @ np.array([0.0, 0.0, force[0]])
        # the base sole's wrench (force, moment about its site) that takes the free base's rows
        sid = tw.site_ids[tw.base_site]
        jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jac(m, d, jp, jr, d.site_xpos[sid], m.site_bodyid[sid])
        J = np.vstack([jp, jr])
        wb = np.linalg.solve(J[:, :6].T, residual[:6])
        np.testing.assert_allclose(
            residual[tw.vadr] - J[:, tw.vadr].T @ wb, tau, atol=1e-6 * np.abs(tau).max()
        )
        # the soles share the motion's vertical force (MuJoCo's: the free base's vertical row, world frame)
        assert wb[2] + force[0] == pytest.approx(f[2], rel=1e-6)
        assert min(wb[2], force[0]) > 0.1 * f[2]  # both soles loaded: their CoPs mean something
        base_cop = np.array([-wb[4] / wb[2], wb[3] / wb[2]]) - _sole_centre(model, tw.base_site)[:2]
        other_cop = point[0, :2] - _other_centre(model, p.q, replace(designed, params=truth.name))
        np.testing.assert_allclose(base_cop, other_cop, atol=1e-5)
