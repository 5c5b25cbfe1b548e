"""MuJoCo twin of a fixed-base robot for dynamic identification: the joint efforts a trajectory needs, computed by
MuJoCo's own inverse dynamics (not by poise's RNEA) from a URDF of the *true* parameters, plus the effects a real
arm adds — rotor inertia reflected at the joints (MuJoCo's armature), viscous and Coulomb joint friction, encoder
quantisation and effort-sensor noise."""

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
        raise DataError(_load_error(str(exc))) from None


def _load_error(msg: str) -> str:
    """MuJoCo's load error as one line, naming the link for its best-known one (a moving body without mass)."""
    body = re.search(r"Element name '([^']*)'", msg)
    if "mjMINVAL" in msg and body:
        return (f"MuJoCo cannot simulate link {body.group(1)!r}: a joint moves it but it has no mass or no inertia; "
                "give it an <inertial> (mass and inertia > 0) or a --truth set that does")  # fmt: skip
    return "MuJoCo cannot load the robot: " + " ".join(msg.replace("Error:", "").split())


@dataclass(frozen=True)
class ArmImperfections:
    """Per-joint viscous (N·m·s/rad) and Coulomb (N·m) friction, effort noise σ (N·m), encoder ticks per rad, rotor
    inertia reflected at each joint (kg·m², kg on a prismatic joint: MuJoCo's armature, Ia·q̈ on the joint's own
    effort)."""

    viscous: np.ndarray | float = 0.0
    coulomb: np.ndarray | float = 0.0
    effort_noise: float = 0.0
    ticks_per_rad: float = 0.0  # 0: no quantisation
    armature: np.ndarray | float = 0.0  # one for all joints, or one per joint in the model's order


@dataclass(frozen=True)
class _TwinJoints:
    """Where the model's coordinates and its mimic joints live in the MuJoCo twin. MuJoCo's URDF import turns each
    `<mimic>` into a joint equality (follower = offset + multiplier · leader, `polycoef`); the followers have no
    motor, so the constraint carries their effort to the leaders (`actuated`)."""

    adr: np.ndarray  # qpos address of each coordinate (the model's joint order)
    dof: np.ndarray  # dof address of each coordinate
    f_adr: np.ndarray  # qpos address of each moving mimic joint
    f_dof: np.ndarray  # its dof address
    lead: np.ndarray  # index of the coordinate it follows
    mult: np.ndarray
    off: np.ndarray

    def set_state(self, d, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> None:
        """Coordinates and mimic joints of data `d` set from one commanded state (n,)."""
        d.qpos[self.adr], d.qvel[self.dof], d.qacc[self.dof] = q, qd, qdd
        if len(self.f_dof):
            d.qpos[self.f_adr] = self.mult * q[self.lead] + self.off
            d.qvel[self.f_dof] = self.mult * qd[self.lead]
            d.qacc[self.f_dof] = self.mult * qdd[self.lead]

    def actuated(self, m, d) -> np.ndarray:
        """The coordinates' efforts after `mj_inverse`: the mimic equalities' forces λ (MuJoCo's own constraint
        Jacobian J) chosen so the followers need no effort of their own, qfrc_inverse − Jᵀλ = 0 on them."""
        f = d.qfrc_inverse.copy()
        if len(self.f_dof):
            import mujoco

            rows = np.flatnonzero(d.efc_type[: d.nefc] == mujoco.mjtConstraint.mjCNSTR_EQUALITY)
            J = d.efc_J[: d.nefc * m.nv].reshape(d.nefc, m.nv)[rows]
            if len(rows) != len(self.f_dof) or np.max(np.abs(d.efc_pos[rows]), initial=0.0) > 1e-9:
                raise DataError("the MuJoCo twin's mimic equalities do not hold the model's mimic joints")
            lam = np.linalg.solve(J[:, self.f_dof].T, f[self.f_dof])
            f -= J.T @ lam
        return f[self.dof]


def _twin_joints(m, model: RobotModel, free: int = 0) -> _TwinJoints:
    """The twin's joint addresses; `free`: degrees of freedom of a floating root's free joint (6) beside them."""
    import mujoco

    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, i) for i in range(m.njnt)]
    mimics = [jt for jt in model.joints if jt.moves and jt.mimic is not None]
    try:
        at = [names.index(j) for j in model.joint_names]
        f_at = [names.index(jt.name) for jt in mimics]
    except ValueError:
        raise DataError(f"MuJoCo model joints {names} do not cover {model.joint_names}") from None
    if m.nv != free + model.nq + len(mimics):
        raise DataError(f"MuJoCo model has {m.nv - free} joint degrees of freedom, {model.name!r} has {model.nq}"
                        + (f" and {len(mimics)} mimic joint(s)" if mimics else ""))  # fmt: skip
    if m.neq != len(mimics):
        raise DataError(f"the MuJoCo twin of {model.name!r} has {m.neq} joint equalities for {len(mimics)} mimic "
                        "joint(s)")  # fmt: skip
    maps = [model.coordinate_map(model.joint_index(jt.name)) for jt in mimics]
    return _TwinJoints(
        m.jnt_qposadr[at], m.jnt_dofadr[at], m.jnt_qposadr[f_at].astype(int), m.jnt_dofadr[f_at].astype(int),
        np.array([c[0] for c in maps], dtype=int), np.array([c[1] for c in maps]), np.array([c[2] for c in maps]),
    )  # fmt: skip


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
    im = imperfections
    tau = rigid_efforts(model, truth, q, qd, qdd, im.armature)
    return with_imperfections(q, qd, tau, im, rng or np.random.default_rng(0))


def rigid_efforts(
    model: RobotModel,
    truth: str | ParameterSet,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    armature: np.ndarray | float = 0.0,
) -> np.ndarray:
    """MuJoCo's inverse-dynamics efforts (K, n) for the commanded states, the base fixed at the model's root, with
    rotor inertia `armature` (`ArmImperfections.armature`) and no friction or noise (`with_imperfections`)."""
    import mujoco

    m = mujoco_from_urdf_text(model_to_urdf(model, truth))
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE  # the mimic equalities' rows read below
    js = _twin_joints(m, model)
    armature = np.asarray(armature, dtype=float)
    if armature.ndim > 1 or armature.size not in (1, model.nq):
        raise DataError(f"armature: one value or one per joint ({model.nq}), got shape {armature.shape}")
    if not np.all(np.isfinite(armature) & (armature >= 0)):
        raise DataError(f"armature must be finite and non-negative (kg·m²), got {armature.tolist()}")
    m.dof_armature[js.dof] = np.broadcast_to(armature, (model.nq,))  # MuJoCo adds Ia·q̈ to each joint
    d = mujoco.MjData(m)
    tau = np.empty_like(q)
    for k in range(len(q)):
        js.set_state(d, q[k], qd[k], qdd[k])
        mujoco.mj_inverse(m, d)
        tau[k] = js.actuated(m, d)
    return tau


def with_imperfections(
    q: np.ndarray, qd: np.ndarray, tau: np.ndarray, im: ArmImperfections, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(measured q, measured efforts): `rigid_efforts`' `tau` with `im`'s friction and effort noise (drawn from
    `rng`), q quantised to its encoder ticks (`im.armature` is already in `tau`)."""
    tau = tau + np.asarray(im.viscous) * qd + np.asarray(im.coulomb) * np.sign(qd)
    if im.effort_noise > 0:
        tau = tau + rng.normal(0, im.effort_noise, tau.shape)
    qm = np.round(q * im.ticks_per_rad) / im.ticks_per_rad if im.ticks_per_rad > 0 else q.copy()
    return qm, tau


def _matrix(i6) -> np.ndarray:
    ixx, ixy, ixz, iyy, iyz, izz = i6
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=float)


def physical_truth(ps: ParameterSet) -> ParameterSet:
    """The parameter set with every inertia made physically realisable (principal moments a + b ≥ c): the two
    smaller moments are scaled up where needed. MuJoCo, like any physics engine, refuses anything else."""
    inertia = {}
    for link, i6 in ps.inertia.items():
        if len(i6) == 3:
            i6 = (i6[0], 0.0, 0.0, i6[1], 0.0, i6[2])
        lam, U = np.linalg.eigh(_matrix(i6))
        if lam[0] + lam[1] < lam[2] * (1 + 1e-9):
            lam = lam.copy()
            f = 1.02 * lam[2] / max(lam[0] + lam[1], 1e-300)
            lam[:2] *= f
        M = U @ np.diag(lam) @ U.T
        inertia[link] = (M[0, 0], M[0, 1], M[0, 2], M[1, 1], M[1, 2], M[2, 2])
    return ParameterSet(ps.name, dict(ps.mass), dict(ps.com), dict(ps.lengths), inertia, ps.description)


def standing_wrench(
    model: RobotModel,
    truth: str | ParameterSet,
    base: str,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    force_noise: float = 0.0,
    moment_noise: float = 0.0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """The wrench (fx, fy, fz, mx, my, mz) the ground exerts on a robot standing on `base` (about the base
    sole's origin, in its frame), by MuJoCo's inverse dynamics of the robot floating at the root link.

    The root's pose, velocity and acceleration follow from the joint motion with the base sole held still."""
    import mujoco

    from robots import dynamics as dyn
    from robots.kinematics import link_frames

    rng = rng or np.random.default_rng(0)
    text = re.sub(r"(<robot\b[^>]*>)", r"\1" + _COMPILER, model_to_urdf(model, truth), count=1)
    spec = mujoco.MjSpec.from_string(text)
    spec.worldbody.first_body().add_freejoint()
    try:
        m = spec.compile()
    except ValueError as exc:
        raise DataError(f"MuJoCo cannot load the robot: {exc}") from None
    js = _twin_joints(m, model, free=6)  # the root's wrench needs no mimic forces: they are internal
    root = model.root
    fr = link_frames(model, q, truth, base)
    k = model.link_index(root)
    R, p = fr.R[:, k], fr.p[:, k]  # root pose in the base-sole frame
    J = dyn.frame_jacobian(model, q, root, base, truth)  # (B, 6, nq): [v; ω] in the base frame
    acc = dyn.frame_acceleration(model, q, qd, qdd, root, base, truth)
    d = mujoco.MjData(m)
    out = np.empty((len(q), 6))
    for b in range(len(q)):
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, R[b].reshape(-1))
        v = J[b] @ qd[b]
        js.set_state(d, q[b], qd[b], qdd[b])
        d.qpos[:3], d.qpos[3:7] = p[b], quat
        d.qvel[:3], d.qvel[3:6] = v[:3], R[b].T @ v[3:]
        d.qacc[:3], d.qacc[3:6] = acc[b, :3], R[b].T @ acc[b, 3:]
        mujoco.mj_inverse(m, d)
        f = d.qfrc_inverse[:3].copy()
        n = R[b] @ d.qfrc_inverse[3:6] + np.cross(p[b], f)  # local torque about the root → about the sole
        out[b] = np.concatenate([f, n])
    if force_noise > 0 or moment_noise > 0:
        out += rng.normal(0, 1, out.shape) * np.array([force_noise] * 3 + [moment_noise] * 3)
    return out
