"""Streaming a single-support trajectory: the robot stands on its base sole, the other sole in the air.

The run starts as on real hardware (`drivers.trajectory_run`): the robot is set down on both boards, shifts its
weight onto the base sole and lifts the free sole to the trajectory's start posture (at rest by design: q̇ = q̈ = 0
at t = 0, so its ZMP is its CoM; `trajectories.weight_shift`, every tick checked like the trajectory's), the free
sole above the other board (where its pose on the ground is), and afterwards, when the plan ends where it starts,
puts it back down and shifts back onto both soles (the same ticks backwards); or, with `poise run --start
set-down`, it is lifted, moved in the air to the start posture and set down on its base sole alone. Before
anything is sent, every streamed tick (not only the plan's 1 ms grid) must keep the ZMP of the design parameters
inside the base sole by the plan's margin (or the configuration's `min_margin`, whichever is larger), the base
sole loaded (Fz > 0) and the free sole's lowest corner at least the design's lift above the ground. While
streaming the boards must show the robot standing (the executor's tip and fall trips, about the base sole alone)
and the free sole's board unloaded: carrying more than TOUCH_SHARE of the robot's weight for TOUCH_HOLD_S means
the free sole touched down, and the run stops.

Standing on one leg, every goal sent on the boards is offset by the inverse-dynamics feed-forward Δq = τ / kp
(`feedforward_offsets`; the servo stiffness of `drivers.gravity`): with the base sole held and nothing touching
the free sole, τ = ID(q, q̇, q̈) are the joint torques exactly (no load split to assume, unlike double support).
Without it the stance leg's P-only servos sag under the whole robot: measured on the twin (P gain 6000), the
ZMP of a start posture 48 mm inside the toe moved onto the toe and the robot tipped over within 1 s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drivers.config import RobotConfig
from drivers.gravity import torque_offsets
from robots import dynamics as dyn
from robots.one_sole import one_sole, one_sole_problems
from robots.tree import RobotModel

REST_TOL = 1e-6  # rad/s, rad/s²: the start is at rest
TOUCH_SHARE = 0.1  # the free sole's board carrying this share of the weight ...
TOUCH_HOLD_S = 0.1  # ... for this long (robot time): the free sole touched down


@dataclass
class SingleSupport:
    """What streaming on one sole needs besides the angles: the free sole, the design's band for its corners
    (lift … max_lift m above the ground; None: no ceiling) and bound on its tilt (rad; None: any), the required
    ZMP margin (m) and the velocities and accelerations at the ticks."""

    other: str
    lift: float
    margin: float
    qd: np.ndarray
    qdd: np.ndarray
    max_lift: float | None = None
    max_tilt: float | None = None


def single_support_problems(
    model: RobotModel,
    config: RobotConfig,
    t: np.ndarray,
    q: np.ndarray,
    ss: SingleSupport,
    base: str,
    params: str,
) -> list[str]:
    """Why streaming these ticks on one sole is unsafe (empty: it is not); see the module docstring."""
    problems: list[str] = []
    rest = max(float(np.abs(ss.qd[0]).max()), float(np.abs(ss.qdd[0]).max()))
    if rest > REST_TOL:
        problems.append(
            f"the start is not at rest (|q̇|, |q̈| up to {rest:.3g}): the robot would be set down moving"
        )
    bal = one_sole(model, q, ss.qd, ss.qdd, base, ss.other, params)
    need = max(ss.margin, float(config.executor.min_margin))
    problems += one_sole_problems(bal, base, ss.other, need, ss.lift, ss.max_lift, ss.max_tilt,
                                  lambda k: "setpoint at the start: " if k == 0 else f"setpoint at t = {t[k]:.3f} s: ",
                                  margin_tol=1e-9)  # fmt: skip
    return problems


def feedforward_offsets(
    model: RobotModel,
    config: RobotConfig,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    base: str,
    params: str,
    p_gains: np.ndarray | None = None,
) -> np.ndarray:
    """Goal offsets Δq = τ / kp (rad, q's shape) with τ the inverse dynamics of the design parameters, base sole
    held, clipped to the effort limits (beyond them the servo saturates anyway); kp as `servo_stiffness`."""
    tau = dyn.rnea(model, np.atleast_2d(q), np.atleast_2d(qd), np.atleast_2d(qdd), params, base)
    return torque_offsets(model, config, tau, p_gains).reshape(np.shape(q))
