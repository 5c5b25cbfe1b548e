"""iCub right-arm F/T sensor (issue 10, spec icub-pls.md §1): the sub-tree regressor at `r_arm_ft_sensor` times
the URDF's parameters equals the wrench two independent engines give at the sensor, static and moving:

- Pinocchio: the same URDF with the sensor's fixed joint made a revolute joint held at 0 (same kinematics and
  bodies; Pinocchio would otherwise merge both sides of the sensor into one body); after RNEA, data.f of that
  joint is the wrench the proximal side exerts on the distal sub-tree, in the joint (= sensor) frame.
- MuJoCo: the URDF compiled with fusestatic="false" (static bodies kept), a site at the sensor frame with force
  and torque sensors, evaluated by mj_inverse (constraints disabled: the other limbs rest at 0, outside some
  of their limits, and a joint-limit force must not enter; no geoms, so no contacts). MuJoCo's force/torque
  sensors report the force the parent exerts on the site's body sub-tree, in the site frame, like ours.

The arm is the built-in `icub-right-arm` (iCubGenova04, torso locked at 0, root_link fixed): the full iCub
with torso, legs, head and left arm at rest gives the same sensor wrench.
"""

from __future__ import annotations

import numpy as np
import pytest
from lxml import etree

pin = pytest.importorskip("pinocchio")
mujoco = pytest.importorskip("mujoco")
icub_models = pytest.importorskip("icub_models")

from robots import dynamics as dyn  # noqa: E402
from robots.base_params import random_states  # noqa: E402
from robots.registry import get_model  # noqa: E402

SENSOR = "r_arm_ft_sensor"
TOL = 1e-9
MEASURED: dict[str, float] = {}


def _urdf_tree():
    root = etree.parse(icub_models.get_model_file("iCubGenova04")).getroot()
    for el in root.xpath("//visual|//collision"):  # meshes are neither needed nor shipped
        el.getparent().remove(el)
    return root


@pytest.fixture(scope="module")
def arm():
    model = get_model("icub-right-arm")
    return model, dyn.standard_parameters(model, "urdf")


@pytest.fixture(scope="module")
def pin_model():
    root = _urdf_tree()
    (jt,) = root.xpath(f"//joint[@name='{SENSOR}']")
    assert jt.get("type") == "fixed"
    jt.set("type", "revolute")
    etree.SubElement(jt, "axis", xyz="0 0 1")
    etree.SubElement(jt, "limit", lower="-1", upper="1", effort="1", velocity="1")
    pm = pin.buildModelFromXML(etree.tostring(root, encoding="unicode"))
    return pm, pm.createData()


@pytest.fixture(scope="module")
def mj_model():
    root = _urdf_tree()
    extra = etree.SubElement(root, "mujoco")
    etree.SubElement(extra, "compiler", fusestatic="false", discardvisual="true", balanceinertia="false")
    spec = mujoco.MjSpec.from_string(etree.tostring(root, encoding="unicode"))
    (jt,) = root.xpath(f"//joint[@name='{SENSOR}']")
    spec.body(jt.find("child").get("link")).add_site(name="ft")  # the fixed joint's frame is its child's
    for name, kind in (("force", mujoco.mjtSensor.mjSENS_FORCE), ("torque", mujoco.mjtSensor.mjSENS_TORQUE)):
        spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname="ft")
    m = spec.compile()
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    return m, mujoco.MjData(m)


def _states(arm_model, moving: bool, seed: int):
    q, qd, qdd = random_states(arm_model, 4, np.random.default_rng(seed))
    scale = 3.0 if moving else 0.0  # a few rad/s and rad/s²: dynamic terms comparable to gravity
    return q, scale * qd, scale * qdd


def _pin_wrench(pm, pd, names, q, qd, qdd):
    qp, vp, ap = np.zeros(pm.nq), np.zeros(pm.nv), np.zeros(pm.nv)
    for k, n in enumerate(names):
        j = pm.getJointId(n)
        qp[pm.idx_qs[j]], vp[pm.idx_vs[j]], ap[pm.idx_vs[j]] = q[k], qd[k], qdd[k]
    pin.rnea(pm, pd, qp, vp, ap)
    return pd.f[pm.getJointId(SENSOR)].vector.copy()  # (f, n) in the joint frame


def _mj_wrench(m, d, names, q, qd, qdd):
    d.qpos[:], d.qvel[:], d.qacc[:] = 0.0, 0.0, 0.0
    for k, n in enumerate(names):
        j = m.joint(n)
        d.qpos[j.qposadr[0]], d.qvel[j.dofadr[0]], d.qacc[j.dofadr[0]] = q[k], qd[k], qdd[k]
    mujoco.mj_inverse(m, d)
    return np.concatenate([d.sensor("force").data, d.sensor("torque").data])


@pytest.mark.parametrize("moving", [False, True], ids=["static", "moving"])
@pytest.mark.parametrize("engine", ["pinocchio", "mujoco"])
def test_ft_wrench_matches(arm, pin_model, mj_model, engine, moving):
    model, phi = arm
    q, qd, qdd = _states(model, moving, 7 if moving else 8)
    ours = dyn.subtree_wrench_regressor(model, q, qd, qdd, SENSOR) @ phi
    still = dyn.subtree_wrench_regressor(model, q, 0 * qd, 0 * qdd, SENSOR) @ phi
    for b in range(len(q)):
        if engine == "pinocchio":
            ref = _pin_wrench(*pin_model, model.joint_names, q[b], qd[b], qdd[b])
        else:
            ref = _mj_wrench(*mj_model, model.joint_names, q[b], qd[b], qdd[b])
        err = np.abs(ours[b] - ref).max()
        key = f"{engine} {'moving' if moving else 'static'}"
        MEASURED[key] = max(MEASURED.get(key, 0.0), err)
        assert err < TOL, (ours[b], ref)
        assert np.linalg.norm(ref[:3]) > 10.0  # the distal arm (~1.9 kg) hangs on the sensor
        if moving:  # motion changes the wrench: the dynamic terms are really compared
            assert np.abs(ours[b] - still[b]).max() > 0.5


def teardown_module(module):
    for k, v in sorted(MEASURED.items()):
        print(f"F/T {k}: max error {v:.3g}")
