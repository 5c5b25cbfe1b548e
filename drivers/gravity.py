"""Gravity-compensation feed-forward for position servos holding a biped in double support.

A position servo under load holds with a steady error e = τ / kp: stiff P-only servos sag, and in a closed chain
(both soles on the ground) the sag of every joint is a different internal deflection, so the chain's internal
moments push a sole onto its edge. The executor therefore offsets each goal by Δq = τ_ff / kp, so that at the
commanded posture the servos produce τ_ff — a *statically consistent* set of joint torques:

    τ_ff(q) = g(q) − J_o(q)ᵀ f_o,

g(q) the joint torques that hold the robot against gravity with the base sole fixed (inverse dynamics at rest),
J_o the Jacobian of a point on the other sole (base frame, base fixed) and f_o = (0, 0, s·m·g) the vertical
force the ground puts on the other sole there, s its share of the weight by the lever rule
(`robots.stance.lever_share`, clipped to [0, 1]). The base sole carries the rest of the weight. Neither sole
carries a horizontal force; each sole's CoP sits at its centre shifted by the CoM's offset δ from the line between
the centres (`other_sole_force`), so both stay as far inside their soles as a vertical split allows and nothing
rocks. (Putting f_o at the other sole's centre instead forces the base sole's CoP to c_b + δ / (1 − s), off its
corner when the other sole carries most of the weight: measured on the twin, the base sole then rocks.)

Virtual work gives the sign: the ground force f_o does work f_oᵀ δp = f_oᵀ J_o δq, a generalised force J_oᵀ f_o
that the servos need not supply. Equivalently τ_ff = ∂/∂q [m g z_com(q) − f_o,z z_p(q)], p the point of f_o
(tests/test_gravity.py checks this by finite differences, and against MuJoCo's own statics of the twin).

Servo stiffness (an assumption about the Dynamixel X-series position loop, documented in the e-Manual only as
PWM = K_P/128 · error): with Position P Gain `position_p_gain` (register 84) the PWM reaches the PWM limit (885 =
100 %) at an error of 885 · 128 / K_P ticks, and full PWM is taken to give the joint's effort limit (URDF
`effort`), torque proportional to PWM in between (no back-EMF at rest). Hence kp = effort / (885 · 128 / K_P ticks)
in N·m/rad, with the servo's ticks per radian from the configuration. The physics twin's servos follow the same
model, so on the twin the mapping is exact; on hardware it is as good as that linear PWM → torque assumption.
"""

from __future__ import annotations

import math

import numpy as np

from drivers.config import RobotConfig, servo_order
from formats.errors import DataError
from formats.parameter_set import ParameterSet
from formats.units import GRAVITY as G
from robots import dynamics as dyn
from robots.kinematics import com_position, site_pose
from robots.stance import lever_share, other_pose, other_site, resolve_base
from robots.tree import RobotModel

PWM_FULL_SCALE = 885  # X-series PWM limit register at 100 %


def servo_stiffness(model: RobotModel, config: RobotConfig, p_gains: np.ndarray | None = None) -> np.ndarray:
    """kp (N·m/rad) of each joint's position servo: effort limit over the error that saturates the PWM.
    `p_gains`: each joint's Position P Gain as its servo reports it (default: `[executor] position_p_gain`)."""
    if p_gains is None:
        gain = np.full(model.nq, float(config.executor.position_p_gain))
        if not (math.isfinite(gain[0]) and gain[0] > 0):
            raise DataError(f"{config.source}: [executor] position_p_gain = {gain[0]!r} must be positive")
    else:
        gain = np.asarray(p_gains, dtype=float)
        if gain.shape != (model.nq,):
            raise DataError(f"{gain.size} Position P Gains for {model.nq} joints")
        bad = [n for n, g in zip(model.joint_names, gain, strict=True) if not (math.isfinite(g) and g > 0)]
        if bad:
            raise DataError(
                f"gravity compensation needs a positive Position P Gain on every servo: {', '.join(bad)}"
            )
    effort = np.asarray(model.effort_limit, dtype=float) if model.effort_limit is not None else None
    if effort is None or effort.shape != (model.nq,) or not np.all(np.isfinite(effort) & (effort > 0)):
        raise DataError(
            f"model {model.name!r}: gravity compensation needs a positive effort limit on every joint"
        )
    ticks_per_rad = np.array([abs(s.ticks_per_rad) for s in servo_order(config, model.joint_names)])
    saturating_error = PWM_FULL_SCALE * 128.0 / gain / ticks_per_rad  # rad
    return effort / saturating_error


def _sole_centre(model: RobotModel, site: str) -> np.ndarray:
    """Centre of a contact rectangle in its site frame (3,)."""
    rect = model.site(site).rect
    if rect is None:
        raise DataError(f"model {model.name!r}: site {site!r} has no contact rectangle")
    x0, x1, y0, y1 = rect
    return np.array([(x0 + x1) / 2, (y0 + y1) / 2, 0.0])


def other_sole_force(
    model: RobotModel, q: np.ndarray, params: str | ParameterSet, base: str | None = None,
    share: np.ndarray | None = None, qd: np.ndarray | None = None, qdd: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The chosen ground force on the other sole at postures q (B, nq): vertical force (B,) in N, its lever-rule
    share s of the weight, and its point of application (B, 3) in the base frame: the sole's centre shifted by
    the CoM's offset δ from the lever point (1 − s)·c_b + s·c_o. The base sole's force (1 − s)·m·g then acts at
    c_b + δ: both soles' CoPs sit the same (smallest possible) distance |δ| from their centres, δ ⟂ c_o − c_b.
    `share` (B,): the other sole's share of the weight instead of the lever rule's (a weight shift unloading it).
    In motion (`qd`, `qdd` (B, nq) given): the ground's vertical force and its centre of pressure (the motion's
    ZMP, from the base wrench of the inverse dynamics) in place of the weight at the CoM."""
    base = resolve_base(model, base)
    q = np.atleast_2d(np.asarray(q, dtype=float))
    other = other_site(model, base)
    if qd is None or qdd is None:
        weight = model.parameter_set(params).total_mass * G
        com = com_position(model, q, params, base)[:, :2]
    else:
        w = dyn.base_wrench_regressor(model, q, np.atleast_2d(qd), np.atleast_2d(qdd), base, params)
        w = w @ dyn.standard_parameters(model, params)
        weight, com = w[:, 2], dyn.zmp_of(w)
    poses = other_pose(model, q, params, base)
    if share is None:
        share = np.array([lever_share(model, c, pose, base) for c, pose in zip(com, poses, strict=True)])
    share = np.clip(np.broadcast_to(np.asarray(share, dtype=float), (len(q),)), 0.0, 1.0)
    R, p = site_pose(model, q, params, other, base)
    c_o = p + R @ _sole_centre(model, other)
    c_b = _sole_centre(model, model.base_site(base).name)  # the base site's frame is the base frame
    delta = com - ((1.0 - share)[:, None] * c_b[:2] + share[:, None] * c_o[:, :2])
    return share * weight, c_o + np.column_stack([delta, np.zeros(len(q))])


def feedforward_torques(
    model: RobotModel, q: np.ndarray, params: str | ParameterSet, base: str | None = None,
    share: np.ndarray | None = None, qd: np.ndarray | None = None, qdd: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """τ_ff = g(q) − J_oᵀ f_o (B, nq) or (nq,): the joint torques that hold posture q in double support with the
    ground's vertical force f_o at the other sole's centre (see the module docstring; `share` as
    `other_sole_force`). In motion (`qd`, `qdd` given): the inverse dynamics in place of g, and f_o the other
    sole's lever-rule share of the ground's vertical force at the motion's ZMP instead of the weight at the CoM."""
    base = resolve_base(model, base)
    q = model.check_q(q)
    single = q.ndim == 1
    qb = np.atleast_2d(q)
    moving = qd is not None and qdd is not None
    qdb, qddb = (np.atleast_2d(qd), np.atleast_2d(qdd)) if moving else (np.zeros_like(qb), np.zeros_like(qb))
    g = dyn.rnea(model, qb, qdb, qddb, params, base)
    force, point = other_sole_force(model, qb, params, base, share, *((qdb, qddb) if moving else ()))
    other = other_site(model, base)
    J = dyn.frame_jacobian(model, qb, other, base, params)  # (B, 6, nq): [v; ω] of the site origin
    _, origin = site_pose(model, qb, params, other, base)
    r = point - origin
    # velocity of the sole centre: v + ω × r, so its vertical row is Jv_z + (ω × r)_z = Jv_z + ωx ry − ωy rx
    jz = J[:, 2] + J[:, 3] * r[:, 1, None] - J[:, 4] * r[:, 0, None]
    tau = g - force[:, None] * jz
    return tau[0] if single else tau


def goal_offsets(
    model: RobotModel, config: RobotConfig, q: np.ndarray, params: str | ParameterSet, base: str | None = None,
    p_gains: np.ndarray | None = None, share: np.ndarray | None = None, qd: np.ndarray | None = None,
    qdd: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """Δq = τ_ff / kp (rad), τ_ff clipped to the effort limit (beyond it the servo saturates anyway): added to
    the goal, the position servo produces τ_ff when the joint is at q. kp from `p_gains` (as `servo_stiffness`);
    `share` as `other_sole_force`; `qd`, `qdd`: in motion (`feedforward_torques`)."""
    tau = feedforward_torques(model, q, params, base, share, qd, qdd)
    return torque_offsets(model, config, tau, p_gains)


def torque_offsets(
    model: RobotModel, config: RobotConfig, tau: np.ndarray, p_gains: np.ndarray | None = None
) -> np.ndarray:
    """Goal offsets Δq = τ / kp (rad) that make the position servos produce torques τ (…, nq), clipped to the
    effort limits (beyond them a servo saturates anyway); kp as `servo_stiffness`."""
    effort = np.asarray(model.effort_limit, dtype=float)
    return np.clip(tau, -effort, effort) / servo_stiffness(model, config, p_gains)
