"""MuJoCo twin of a fixed-base robot for dynamic identification: the joint efforts a trajectory needs, computed by
MuJoCo's own inverse dynamics (not by poise's RNEA) from a URDF of the *true* parameters, plus the effects a real
arm adds — viscous and Coulomb joint friction, encoder quantisation and effort-sensor noise."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from formats.errors import DataError
from formats.parameter_set import ParameterSet
from robots.tree import RobotModel
from robots.urdf_write import model_to_urdf

_COMPILER = '<mujoco><compiler discardvisual="true" fusestatic="false" balanceinertia="false"/></mujoco>'


def mujoco_from_urdf_text(text: str):
    """An MjModel from URDF text, geometry stripped (meshes are not needed for dynamics)."""
    import mujoco

    text = re.sub(r"<visual\b.*?</visual>", "", text, flags=re.S)
    text = re.sub(r"<collision\b.*?</collision>", "", text, flags=re.S)
    text = re.sub(r"(<robot\b[^>]*>)", r"\1" + _COMPILER, text, count=1)
    try:
        return mujoco.MjModel.from_xml_string(text)
    except ValueError as exc:
        raise DataError(f"MuJoCo cannot load the robot: {exc}") from None


@dataclass(frozen=True)
class ArmImperfections:
    """Per-joint viscous (N·m·s/rad) and Coulomb (N·m) friction, effort noise σ (N·m), encoder ticks per rad."""

    viscous: np.ndarray | float = 0.0
    coulomb: np.ndarray | float = 0.0
    effort_noise: float = 0.0
    ticks_per_rad: float = 0.0  # 0: no quantisation


def arm_efforts(
    model: RobotModel,
    truth: str | ParameterSet,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    imperfections: ArmImperfections = ArmImperfections(),
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(measured q, measured efforts) for the commanded states (K, n), the base fixed at the model's root."""
    import mujoco

    rng = rng or np.random.default_rng(0)
    m = mujoco_from_urdf_text(model_to_urdf(model, truth))
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, i) for i in range(m.njnt)]
    try:
        dof = np.array([m.jnt_dofadr[names.index(j)] for j in model.joint_names])
        adr = np.array([m.jnt_qposadr[names.index(j)] for j in model.joint_names])
    except ValueError:
        raise DataError(f"MuJoCo model joints {names} do not cover {model.joint_names}") from None
    if m.nv != model.nq:
        raise DataError(f"MuJoCo model has {m.nv} degrees of freedom, {model.name!r} has {model.nq}")
    d = mujoco.MjData(m)
    tau = np.empty_like(q)
    for k in range(len(q)):
        d.qpos[adr] = q[k]
        d.qvel[dof] = qd[k]
        d.qacc[dof] = qdd[k]
        mujoco.mj_inverse(m, d)
        tau[k] = d.qfrc_inverse[dof]
    im = imperfections
    tau = tau + np.asarray(im.viscous) * qd + np.asarray(im.coulomb) * np.sign(qd)
    if im.effort_noise > 0:
        tau = tau + rng.normal(0, im.effort_noise, tau.shape)
    qm = np.round(q * im.ticks_per_rad) / im.ticks_per_rad if im.ticks_per_rad > 0 else q.copy()
    return qm, tau
