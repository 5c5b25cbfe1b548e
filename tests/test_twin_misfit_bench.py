"""The spectral split and lag search of `bench.twin_misfit` (the run-level analysis itself runs in `make bench`)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.twin_misfit import _band_shares, _parabola_min


def test_band_shares_split_the_power_at_the_motions_band_and_half_the_cut_off():
    dt = 0.05
    t = np.arange(0, 40, dt)
    x = np.stack(
        [np.sin(2 * np.pi * 0.25 * t), 2 * np.sin(2 * np.pi * 0.8 * t) + np.sin(2 * np.pi * 3 * t)], 1
    )
    shares = _band_shares(x, dt, band_hz=0.3, cutoff_hz=2.0)
    assert shares[0] == pytest.approx([1, 0, 0], abs=1e-6)
    assert shares[1] == pytest.approx([0, 0.8, 0.2], abs=1e-6)  # power 4 : 1 between and above 1 Hz


def test_lag_minimum_is_refined_between_the_samples():
    lags = np.arange(-5, 6)
    assert _parabola_min(lags, list((lags + 1.7) ** 2 + 3)) == pytest.approx(-1.7)
    assert _parabola_min(lags, list(np.abs(lags - 9.0))) == 4.0  # at the edge: the last interior sample


def _pinned_states(m, model, q: np.ndarray, tilt_x: float = 0.0) -> np.ndarray:
    """MuJoCo qpos of the twin for joint angles q (K, n): the base sole flat at the placement's origin on board 0's
    top, or the whole robot turned by tilt_x rad about the x axis through that origin (`m`: the twin's MuJoCo model)."""
    import mujoco

    from drivers.emulators.mujoco_twin import BOARD_SIZE, root_pose_for
    from robots.stance_spec import default_base

    d = mujoco.MjData(m)
    site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, model.base_site(default_base(model)).name)
    qadr = [m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)] for n in model.joint_names]
    c, s = np.cos(tilt_x), np.sin(tilt_x)
    T = np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    origin = np.array([0.0, 0.0, BOARD_SIZE[2]])
    out = np.zeros((len(q), m.nq))
    for k, qk in enumerate(q):
        d.qpos[:] = 0.0
        d.qpos[3] = 1.0
        d.qpos[qadr] = qk
        out[k] = d.qpos
        out[k, :3], out[k, 3:7] = root_pose_for(m, d, 1, site, T, origin)
    return out


def test_sole_motion_is_none_for_a_pinned_sole_and_the_weights_lever_for_a_tilted_one(tulip):
    """`_sole_motion` (what the model's fixed sole misses): nothing while the base sole stays where the model puts
    it, however the joints move; the robot tilted as a whole by α about the sole's x axis adds M g Δy_com to Mx."""
    import mujoco

    from bench.twin_misfit import _sole_motion, twin_model
    from drivers.emulators.sim_robot import twin_truth
    from robots.stance_spec import default_base

    truth = twin_truth(tulip)
    m = twin_model(tulip, truth)
    t = np.arange(0.0, 4.0, 0.001)
    q = np.zeros((len(t), tulip.nq))
    q[:, :2] = 0.05 * np.sin(2 * np.pi * 0.5 * t)[:, None]  # two joints swing: the wrench changes
    inner = slice(500, -500)
    pinned = _sole_motion(m, tulip, default_base(tulip), t, _pinned_states(m, tulip, q), t, 2.8)
    # N, N·m: the filter on a nonlinear motion; the twin's rocking adds 0.04–0.3
    assert np.abs(pinned[inner]).max() < 5e-3
    still = np.zeros((len(t), tulip.nq))
    alpha = 1e-3
    tilted = _sole_motion(m, tulip, default_base(tulip), t, _pinned_states(m, tulip, still, alpha), t, 2.8)
    d = mujoco.MjData(m)
    com = []
    for a in (0.0, alpha):
        d.qpos[:] = _pinned_states(m, tulip, still[:1], a)[0]
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        com.append(d.subtree_com[1].copy())
    lever = truth.total_mass * 9.81 * (com[1][1] - com[0][1])
    assert abs(lever) > 0.05  # N·m: the tilt moves the CoM sideways by millimetres
    np.testing.assert_allclose(tilted[inner, 1], lever, rtol=1e-3)
    np.testing.assert_allclose(tilted[inner, [0, 2]], 0.0, atol=1e-3 * abs(lever) + 1e-6)


def test_sole_paths_see_a_slide_a_turn_and_a_corner_off_the_board(tulip):
    """`_sole_paths` (how each sole moves on its board): the base sole pinned flat stays put with all its corners
    down; slid by 100 µm along x over the run it reports that slide; tilted by 1 mrad about x its corners on one
    side rise off the plate all the time."""
    from bench.twin_misfit import _sole_paths, twin_model
    from drivers.emulators.sim_robot import twin_truth
    from robots.stance_spec import default_base

    m = twin_model(tulip, twin_truth(tulip))
    base = tulip.base_site(default_base(tulip)).name
    t = np.arange(0.0, 2.0, 0.001)
    q = np.zeros((len(t), tulip.nq))
    pinned = _pinned_states(m, tulip, q)
    still = _sole_paths(m, tulip, t, pinned, t, 2.8)[base]
    assert still["corner_off_share"] == 0.0 and np.abs(still["slide_um"]).max() < 1e-6
    assert max(still["band_xy_rms_um"]) < 1e-6 and max(still["band_tilt_rms_mrad"]) < 1e-9
    slid = pinned.copy()
    slid[:, 0] += 1e-4 * t / t[-1]
    moved = _sole_paths(m, tulip, t, slid, t, 2.8)[base]
    assert moved["slide_um"] == pytest.approx([100.0, 0.0], abs=0.01)
    assert moved["band_xy_rms_um"][0] > 10 and moved["corner_off_share"] == 0.0
    tilted = _sole_paths(m, tulip, t, _pinned_states(m, tulip, q, 1e-3), t, 2.8)[base]
    assert tilted["corner_off_share"] == 1.0


def test_board_loads_give_the_friction_cones_use_and_the_soles_squeeze():
    """`_board_loads`: each board's tangential / normal force ratio (largest, 99th percentile) and half the
    difference of the two boards' horizontal forces — the closed chain pushing the soles apart."""
    from bench.twin_misfit import _board_loads

    k = np.arange(1000)
    f = np.zeros((1000, 2, 3))
    f[:, :, 2] = 120.0
    f[:, 0, 1] = 6.0 * np.sin(k / 50)  # the soles pushed apart and together along y, the same on both
    f[:, 1, 1] = -f[:, 0, 1]
    f[:, 0, 0] = 2.0  # and a net push along x on one
    out = _board_loads(f)
    assert out["tangential_over_normal_max"][1] == pytest.approx(6.0 / 120, rel=1e-3)
    assert out["tangential_over_normal_max"][0] == pytest.approx(np.hypot(2.0, 6.0) / 120, rel=1e-3)
    assert out["internal_horizontal_rms_n"] == pytest.approx([1.0, 6.0 / np.sqrt(2)], rel=0.01)
