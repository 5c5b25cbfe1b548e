"""TUlip standing on its right sole (issue 10): the re-rooted base-wrench regressor times φ equals the contact
wrench Pinocchio gives for a floating-base TUlip whose right sole is held still at the world origin.

Pinocchio's model is the URDF with a free-flyer at the torso (its own root, not re-rooted). For random q, q̇, q̈ of
the joints, the torso pose, twist and acceleration are chosen so that the sole frame sits at the world origin
with zero velocity and zero acceleration; RNEA's free-flyer wrench is then the total wrench the environment must
supply, moved to the sole frame. Our regressor walks the tree outward from the sole instead.
"""

from __future__ import annotations

import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")

from robots import dynamics as dyn  # noqa: E402
from robots.base_params import random_states  # noqa: E402
from robots.kinematics import site_pose  # noqa: E402
from robots.registry import get_model  # noqa: E402

TOL = 1e-9


@pytest.fixture(scope="module")
def tulip():
    model = get_model("tulip")
    return model, dyn.standard_parameters(model, "sim")


@pytest.fixture(scope="module")
def floating(tulip):
    model, _ = tulip
    pm = pin.buildModelFromUrdf(model.source, pin.JointModelFreeFlyer())
    site = model.base_site("right")
    R, p = site_pose(model, np.zeros(model.nq), "sim", site.name, site.link)  # the sole in its foot's frame
    foot = pm.frames[pm.getFrameId(site.link, pin.FrameType.BODY)]
    placement = foot.placement * pin.SE3(R, p)
    sole = pm.addFrame(pin.Frame("sole", foot.parentJoint, placement, pin.FrameType.OP_FRAME))
    return pm, pm.createData(), sole


def _contact_wrench(pm, pd, sole, names, q, qd, qdd):
    """Free-flyer RNEA wrench, at the sole, with the sole fixed at the world origin."""
    qp = pin.neutral(pm)
    vp, ap = np.zeros(pm.nv), np.zeros(pm.nv)
    for k, n in enumerate(names):
        j = pm.getJointId(n)
        qp[pm.idx_qs[j]], vp[pm.idx_vs[j]], ap[pm.idx_vs[j]] = q[k], qd[k], qdd[k]
    # pose: torso = (sole in torso)⁻¹, so that the sole is the world frame
    pin.framesForwardKinematics(pm, pd, qp)
    qp[:7] = pin.SE3ToXYZQUAT(pd.oMf[sole].inverse())
    pin.framesForwardKinematics(pm, pd, qp)
    assert np.allclose(pd.oMf[sole].homogeneous, np.eye(4), atol=1e-12)
    # twist and acceleration of the torso that keep the sole still: J_b v_b = −J_q q̇, J_b a_b = −(J_q q̈ + bias)
    J = pin.computeFrameJacobian(pm, pd, qp, sole, pin.LOCAL)
    vp[:6] = np.linalg.solve(J[:, :6], -J[:, 6:] @ vp[6:])
    pin.forwardKinematics(pm, pd, qp, vp, np.concatenate([np.zeros(6), ap[6:]]))
    bias = pin.getFrameAcceleration(pm, pd, sole, pin.LOCAL).vector
    ap[:6] = np.linalg.solve(J[:, :6], -bias)
    pin.forwardKinematics(pm, pd, qp, vp, ap)
    assert np.abs(pin.getFrameVelocity(pm, pd, sole, pin.LOCAL).vector).max() < 1e-12
    assert np.abs(pin.getFrameAcceleration(pm, pd, sole, pin.LOCAL).vector).max() < 1e-10
    tau = pin.rnea(pm, pd, qp, vp, ap)
    assert np.abs(tau[6:]).max() > 0.0
    torso_in_sole = pd.oMf[sole].actInv(pd.oMi[1])
    return torso_in_sole.act(pin.Force(tau[:6])).vector  # (f, n) at the sole, in the sole (= world) frame


@pytest.mark.parametrize("scale", [0.0, 2.0], ids=["static", "moving"])
def test_base_wrench_matches_floating_rnea(tulip, floating, scale):
    model, phi = tulip
    q, qd, qdd = random_states(model, 5, np.random.default_rng(31))
    qd, qdd = scale * qd, scale * qdd
    W = dyn.base_wrench_regressor(model, q, qd, qdd, "right") @ phi
    worst = 0.0
    for b in range(len(q)):
        ref = _contact_wrench(*floating, model.joint_names, q[b], qd[b], qdd[b])
        worst = max(worst, np.abs(W[b] - ref).max())
        assert np.abs(W[b] - ref).max() < TOL, (W[b], ref)
        if scale == 0.0:  # at rest the ground carries the weight
            assert ref[2] == pytest.approx(9.81 * model.parameter_set("sim").total_mass, rel=1e-12)
    print(f"TUlip base wrench ({'moving' if scale else 'static'}): max error {worst:.3g}")
    if scale:
        still = dyn.base_wrench_regressor(model, q, 0 * qd, 0 * qdd, "right") @ phi
        assert np.abs(W - still).max() > 1.0  # the dynamic terms are really compared
