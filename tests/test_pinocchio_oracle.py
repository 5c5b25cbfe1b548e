"""Pinocchio as an independent oracle (issue 10): RNEA, the joint-torque regressor, CoM, frame poses and
Jacobians agree to 1e-9 for random states, and base-parameter ranks equal the rank of Pinocchio's stacked
regressor — on iCubGenova04 (icub-models), TUlip and three robots of example-robot-data (UR5, Panda, Z1).

Pinocchio differs from our model in bookkeeping only, which the test maps explicitly: it merges links on fixed
joints into the moving joint's body (so one Pinocchio body = several of our links, mapped through the pose of
each link in the joint frame, computed by Pinocchio itself), it appends links fixed to the world to the universe
(absent from its regressor and CoM), it orders joints its own way (mapped by name), and it gives a URDF mimic
joint its own coordinate (ours is the master's: q_mimic = k·q + offset, so τ = τ_master + k·τ_mimic).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import ERD

pin = pytest.importorskip("pinocchio")

from robots import dynamics as dyn  # noqa: E402
from robots.base_params import derive_dynamic_base, parse_regressor, random_states  # noqa: E402
from robots.kinematics import com_position, link_frames, site_pose  # noqa: E402
from robots.registry import BUILT_IN, get_model  # noqa: E402
from robots.tree import RobotModel  # noqa: E402
from robots.urdf import load_urdf  # noqa: E402

TOL = 1e-9
ROBOTS = {
    "icub": None,  # iCubGenova04 from icub-models, all 32 joints
    "tulip": Path(BUILT_IN["tulip"]).parent / "tulip.urdf",
    "ur5": ERD / "ur_description/urdf/ur5_robot.urdf",
    "panda": ERD / "panda_description/urdf/panda.urdf",  # two prismatic fingers, one a mimic
    "z1": ERD / "z1_description/urdf/z1.urdf",
}
MEASURED: dict[str, float] = {}  # largest errors seen, printed at the end (pytest -s)


@dataclass
class Pair:
    """Our model and Pinocchio's of the same URDF, with the maps between their coordinates and bodies."""

    ours: RobotModel
    params: str
    pm: object  # pin.Model
    pd: object  # pin.Data
    P: np.ndarray  # pin v = P @ our q̇ (and q, up to mimic offsets): (nv_pin, nq)
    off: np.ndarray  # pin q = P @ q + off
    A: np.ndarray  # Pinocchio's body parameters = A @ our standard parameters: (10 (njoints-1), 10 L)
    world_links: list[int]  # our links fixed to Pinocchio's universe

    def q_pin(self, q):
        return self.P @ q + self.off


def _urdf(name: str) -> Path:
    if name == "icub":
        import icub_models

        return Path(icub_models.get_model_file("iCubGenova04"))
    return ROBOTS[name]


def _body_map(pm, ours: RobotModel) -> tuple[np.ndarray, list[int]]:
    """A: our per-link standard parameters → Pinocchio's per-joint body parameters.

    Each of our links is a BODY frame of Pinocchio attached to a joint at a fixed placement; the placement acts
    linearly on the dynamic parameters, and Pinocchio's own `SE3.act(Inertia)` gives that map.
    """
    nb = pm.njoints - 1
    A = np.zeros((10 * nb, 10 * len(ours.links)))
    world = []
    for i, lk in enumerate(ours.links):
        fr = pm.frames[pm.getFrameId(lk.name, pin.FrameType.BODY)]
        j = fr.parentJoint
        if j == 0:
            world.append(i)
            continue
        unit = np.eye(10)

        def act(phi, X=fr.placement):
            return X.act(pin.Inertia.FromDynamicParameters(phi)).toDynamicParameters()

        e0 = act(unit[0])  # m = 1 (a point mass needs m ≠ 0 to be built); the map is linear
        cols = [e0] + [act(unit[0] + unit[k]) - e0 for k in range(1, 10)]
        A[10 * (j - 1) : 10 * j, 10 * i : 10 * i + 10] += np.column_stack(cols)
    return A, world


def make_pair(name: str) -> Pair:
    path = _urdf(name)
    if name == "tulip":
        ours, params = get_model("tulip"), "sim"  # the built-in description (CoM sign conventions applied)
    else:
        ours, params = load_urdf(path), "urdf"
    pm = pin.buildModelFromUrdf(str(path))
    P = np.zeros((pm.nv, ours.nq))
    off = np.zeros(pm.nq)
    assert pm.nq == pm.nv  # no continuous joints in these robots
    for jt in ours.joints:
        if not jt.moves:
            continue
        k, mult, offset = ours.coordinate_map(ours.joint_index(jt.name))
        jid = pm.getJointId(jt.name)
        assert jid < pm.njoints, f"{name}: Pinocchio has no joint {jt.name}"
        P[pm.idx_vs[jid], k] = mult
        off[pm.idx_qs[jid]] = offset
    assert np.all(P.sum(axis=0) != 0) and np.count_nonzero(P) == pm.nv
    A, world = _body_map(pm, ours)
    return Pair(ours, params, pm, pm.createData(), P, off, A, world)


@pytest.fixture(scope="module", params=list(ROBOTS))
def pair(request):
    return make_pair(request.param)


def _states(model: RobotModel, n: int, seed: int):
    return random_states(model, n, np.random.default_rng(seed))


def _record(key: str, err: float) -> None:
    MEASURED[key] = max(MEASURED.get(key, 0.0), err)


def test_rnea_and_torque_regressor(pair: Pair):
    m, pm, pd = pair.ours, pair.pm, pair.pd
    q, qd, qdd = _states(m, 4, 11)
    tau = dyn.rnea(m, q, qd, qdd, pair.params)
    Y = dyn.torque_regressor(m, q, qd, qdd, None, pair.params)
    phi = dyn.standard_parameters(m, pair.params)
    phi_pin = np.concatenate([pm.inertias[j].toDynamicParameters() for j in range(1, pm.njoints)])
    assert np.allclose(pair.A @ phi, phi_pin, rtol=0, atol=1e-12)  # the body map reproduces pin's own bodies
    for b in range(len(q)):
        qp, vp, ap = pair.q_pin(q[b]), pair.P @ qd[b], pair.P @ qdd[b]
        tau_pin = pair.P.T @ pin.rnea(pm, pd, qp, vp, ap)  # mimic: τ = τ_master + k τ_mimic
        Yp = pair.P.T @ pin.computeJointTorqueRegressor(pm, pd, qp, vp, ap) @ pair.A
        e_tau = np.abs(tau[b] - tau_pin).max()
        e_Y = np.abs(Y[b] - Yp).max()
        _record(f"{m.name}: rnea", e_tau)
        _record(f"{m.name}: torque regressor", e_Y)
        assert e_tau < TOL and e_Y < TOL
        assert np.abs(tau_pin).max() > 0.1  # a real comparison, not of zeros
    for i in pair.world_links:  # links fixed to the base never enter joint torques
        assert np.all(Y[:, :, 10 * i : 10 * i + 10] == 0)


def test_com_frames_and_jacobians(pair: Pair):
    m, pm, pd = pair.ours, pair.pm, pair.pd
    q, _, _ = _states(m, 3, 12)
    root = m.root
    com = com_position(m, q, pair.params, root)
    fr = link_frames(m, q, pair.params, root)
    ps = m.parameter_set(pair.params)
    for b in range(len(q)):
        qp = pair.q_pin(q[b])
        pin.forwardKinematics(pm, pd, qp)
        pin.updateFramePlacements(pm, pd)
        pin.computeJointJacobians(pm, pd, qp)
        # Pinocchio's CoM leaves out the universe's bodies: add them (they sit at the world frame)
        c_pin = pin.centerOfMass(pm, pd, qp)
        m0 = pm.inertias[0]
        c_all = (pd.mass[0] * c_pin + m0.mass * m0.lever) / (pd.mass[0] + m0.mass)
        assert pd.mass[0] + m0.mass == pytest.approx(ps.total_mass, abs=1e-12)
        e = np.abs(com[b] - c_all).max()
        _record(f"{m.name}: CoM", e)
        assert e < TOL
        for i, lk in enumerate(m.links):
            X = pd.oMf[pm.getFrameId(lk.name, pin.FrameType.BODY)]
            e = max(np.abs(fr.R[b, i] - X.rotation).max(), np.abs(fr.p[b, i] - X.translation).max())
            _record(f"{m.name}: frame poses", e)
            assert e < TOL, lk.name
        frames = [lk.name for lk in m.links] + [s.name for s in m.sites]
        for name in frames:
            fid = pm.getFrameId(name, pin.FrameType.BODY)
            if fid >= len(pm.frames):  # a site the URDF does not name (from a description)
                continue
            R, p = site_pose(m, q[b], pair.params, name, root)
            X = pd.oMf[fid]
            e_pose = max(np.abs(R - X.rotation).max(), np.abs(p - X.translation).max())
            J = dyn.frame_jacobian(m, q[b], name, None, pair.params)
            Jp = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED) @ pair.P
            e_J = np.abs(J - Jp).max()
            _record(f"{m.name}: frame poses", e_pose)
            _record(f"{m.name}: Jacobians", e_J)
            assert e_pose < TOL and e_J < TOL, name


def test_base_parameter_rank(pair: Pair):
    """Our numeric base (QR over random states) has the rank of Pinocchio's stacked regressor."""
    m, pm, pd = pair.ours, pair.pm, pair.pd
    db = derive_dynamic_base(m, parse_regressor("torque", m), seed=5)
    q, qd, qdd = _states(m, max(40, 3 * 10 * len(m.links) // m.nq), 21)
    W = np.vstack(
        [
            pair.P.T
            @ pin.computeJointTorqueRegressor(pm, pd, pair.q_pin(q[b]), pair.P @ qd[b], pair.P @ qdd[b])
            for b in range(len(q))
        ]
    )
    s = np.linalg.svd(W, compute_uv=False)
    rank_pin = int(np.sum(s > s[0] * 1e-10))
    MEASURED[f"{m.name}: base-parameter rank (ours / pin)"] = float(db.rank)
    assert db.rank == rank_pin
    assert 0 < db.rank < 10 * len(m.links)


def teardown_module(module):
    for k, v in sorted(MEASURED.items()):
        print(f"{k}: {v:.3g}")
