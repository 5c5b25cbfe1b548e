"""MuJoCo twin of an arm with a six-axis F/T sensor and PWM-driven motors (spec icub-pls.md §1).

MuJoCo's inverse dynamics of a URDF of the *true* parameters gives the joint torques and the F/T sensor's
wrench (force/torque sensors on a site at the sensor frame, as in tests/test_ft_subtree_oracle.py); the twin adds
what a real arm adds: asymmetric Coulomb + viscous friction at the joints and, behind tendon couplings, at the
motors; the PWM each motor needs (τ_m = k_pwm·PWM − motor friction, τ_joint = Tᵀ τ_m), a constant F/T offset,
sensor noise, encoder quantisation and optional external forces at a link (contacts).

Friction follows the sign convention of robots.actuation (the torque the drive must add to overcome it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from drivers.emulators.mujoco_arm import _COMPILER
from formats.errors import DataError
from formats.parameter_set import ParameterSet
from robots.actuation import FtPwmTruth, Transmission, friction_torque, motor_velocities
from robots.tree import RobotModel
from robots.urdf_write import model_to_urdf


@dataclass(frozen=True)
class FtPwmNoise:
    """Sensor noise σ: F/T force (N) and moment (N·m), PWM (PWM units); encoder ticks per rad (0: exact)."""

    force: float = 0.3
    moment: float = 0.02
    pwm: float = 0.2
    ticks_per_rad: float = 0.0


@dataclass
class TwinSamples:
    """What the twin measures: encoders q (K, n), PWM per motor (K, m), F/T wrench (K, 6) in the sensor frame;
    and, for evaluation only, the external force applied (K, 3, world frame) and its contact flag."""

    q: np.ndarray
    pwm: np.ndarray
    wrench: np.ndarray
    contact_force: np.ndarray
    contact: np.ndarray


def _sensor_model(model: RobotModel, truth: str | ParameterSet, sensor: str):
    import mujoco

    text = re.sub(r"<visual\b.*?</visual>", "", model_to_urdf(model, truth), flags=re.S)
    text = re.sub(r"(<robot\b[^>]*>)", r"\1" + _COMPILER, text, count=1)
    spec = mujoco.MjSpec.from_string(text)
    site = model.site(sensor)
    if any(isinstance(c, dict) and set(c) - {""} for c in site.offset):
        raise DataError(f"sensor site {sensor!r} has a symbolic offset; the twin needs numbers")
    pos = [float(c.get("", 0.0)) if isinstance(c, dict) else float(c) for c in site.offset]
    quat = np.empty(4)
    from robots.tree import rpy_matrix

    mujoco.mju_mat2Quat(quat, rpy_matrix(site.rpy).reshape(-1))
    try:
        spec.body(site.link).add_site(name="ft", pos=pos, quat=quat)
    except Exception:  # noqa: BLE001 (MuJoCo raises its own error types for unknown bodies)
        raise DataError(f"MuJoCo model has no body {site.link!r} for the F/T site") from None
    for name, kind in (("force", mujoco.mjtSensor.mjSENS_FORCE), ("torque", mujoco.mjtSensor.mjSENS_TORQUE)):
        spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname="ft")
    try:
        m = spec.compile()
    except ValueError as exc:
        raise DataError(f"MuJoCo cannot load the robot: {exc}") from None
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT  # no joint-limit or contact forces
    return m


def simulate_ft_pwm(
    model: RobotModel,
    truth: str | ParameterSet,
    groups: list[Transmission],
    extra: FtPwmTruth,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    sensor: str,
    noise: FtPwmNoise = FtPwmNoise(),
    contact_link: str | None = None,
    contact_force: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
) -> TwinSamples:
    """Measurements along commanded states (K, n); `contact_force` (K, 3, world frame) pushes at the centre of mass of
    `contact_link` (zero rows: no contact). The robot follows the commanded motion whatever the contact (stiff
    position control): the motors supply the torque the contact adds or removes."""
    import mujoco

    rng = rng or np.random.default_rng(0)
    m = _sensor_model(model, truth, sensor)
    d = mujoco.MjData(m)
    try:
        jids = [m.joint(j).id for j in model.joint_names]
    except KeyError:
        raise DataError(f"MuJoCo model joints do not cover {model.joint_names}") from None
    adr = np.array([m.jnt_qposadr[j] for j in jids])
    dof = np.array([m.jnt_dofadr[j] for j in jids])
    if m.nv != model.nq:
        raise DataError(f"MuJoCo model has {m.nv} degrees of freedom, {model.name!r} has {model.nq}")
    K = len(q)
    fext = np.zeros((K, 3)) if contact_force is None else np.asarray(contact_force, dtype=float)
    body = m.body(contact_link).id if contact_link is not None else -1
    if np.any(fext != 0) and body < 0:
        raise DataError("a contact force needs a contact link")
    tau = np.empty((K, model.nq))
    wrench = np.empty((K, 6))
    jac = np.zeros((3, m.nv))
    for k in range(K):
        d.qpos[adr], d.qvel[dof], d.qacc[dof] = q[k], qd[k], qdd[k]
        d.xfrc_applied[:] = 0.0
        if body >= 0:
            d.xfrc_applied[body, :3] = fext[k]
        mujoco.mj_inverse(m, d)
        tau[k] = d.qfrc_inverse[dof]
        if body >= 0 and np.any(fext[k] != 0):  # qfrc_inverse ignores applied forces: the motors do less
            mujoco.mj_jac(m, d, jac, None, d.xipos[body], body)
            tau[k] -= jac[:, dof].T @ fext[k]
        wrench[k] = np.concatenate([d.sensor("force").data, d.sensor("torque").data])
    pwm = []
    for g, fj, fm, kg in zip(groups, extra.joint_friction, extra.motor_friction, extra.pwm_gain, strict=True):
        j = list(g.joints)
        tau_j = tau[:, j] + friction_torque(qd[:, j], fj)  # what the transmission must deliver
        tau_m = g.motor_torque(tau_j)  # τ_j = Tᵀ τ_m
        if fm is not None:
            tau_m = tau_m + friction_torque(motor_velocities([g], qd), fm)
        pwm.append(tau_m / kg)
    pwm = np.concatenate(pwm, axis=1)
    pwm = pwm + rng.normal(0, noise.pwm, pwm.shape)
    sd = np.array([noise.force] * 3 + [noise.moment] * 3)
    wrench = wrench + extra.ft_offset + rng.normal(0, 1, wrench.shape) * sd
    qm = np.round(q * noise.ticks_per_rad) / noise.ticks_per_rad if noise.ticks_per_rad > 0 else q.copy()
    return TwinSamples(qm, pwm, wrench, fext, np.any(fext != 0, axis=1))
