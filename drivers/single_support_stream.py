"""Streaming a single-support trajectory: the robot stands on its base sole, the other sole in the air.

The run starts as on real hardware (`drivers.trajectory_run`): the robot is set down on both boards, shifts its
weight onto the base sole and lifts the free sole to the trajectory's start posture (at rest by design: q̇ = q̈ = 0
at t = 0, so its ZMP is its CoM; `trajectories.weight_shift`, every tick checked like the trajectory's), the free
sole above the other board (where its pose on the ground is), and afterwards puts it back down and shifts back onto
both soles: the start's ticks backwards when the plan ends where it starts, else those of a weight shift planned
to the plan's end posture, backwards (`plan_transitions`, shared with `plan check`); or, with `poise run --start
set-down`, it is lifted, moved in the air to the start posture and set down on its base sole alone (and the run
ends at rest on that sole). Before anything is sent, every streamed tick (not only the plan's 1 ms grid) must
keep the ZMP of the design parameters inside the base sole by the plan's margin (or the configuration's
`min_margin`, whichever is larger), the base sole loaded (Fz > 0) and the free sole's lowest corner at least the
design's lift above the ground. While streaming the boards must show the robot standing (the executor's tip and
fall trips, about the base sole alone) and the free sole's board unloaded: carrying more than TOUCH_SHARE of the
robot's weight for TOUCH_HOLD_S means the free sole touched down, and the run stops.

Standing on one leg, every goal sent on the boards is offset by the inverse-dynamics feed-forward Δq = τ / kp
(`feedforward_offsets`; the servo stiffness of `drivers.gravity`): with the base sole held and nothing touching
the free sole, τ = ID(q, q̇, q̈) are the joint torques exactly (no load split to assume, unlike double support).
Without it the stance leg's P-only servos sag under the whole robot: measured on the twin (P gain 6000), the
ZMP of a start posture 48 mm inside the toe moved onto the toe and the robot tipped over within 1 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from drivers.config import RobotConfig
from drivers.gravity import torque_offsets
from drivers.setpoints import tick_problems
from formats.errors import DataError
from formats.trajectory_plan import TrajectoryPlan
from robots import dynamics as dyn
from robots.one_sole import one_sole, one_sole_problems
from robots.stance import check_posture, other_pose, other_sole_problems
from robots.tree import RobotModel
from trajectories.weight_shift import WeightShift, plan_weight_shift

if TYPE_CHECKING:
    from trajectories.single_support import SingleSupportTrajectory

REST_TOL = 1e-6  # rad/s, rad/s²: the start is at rest
TOUCH_SHARE = 0.1  # the free sole's board carrying this share of the weight ...
TOUCH_HOLD_S = 0.1  # ... for this long (robot time): the free sole touched down
# rad: a plan ending this close to its start is put back on both soles by its start's weight shift
END_TOL = 1e-6


@dataclass
class SingleSupport:
    """What streaming on one sole needs besides the angles: the free sole, the design's band for its corners
    (lift … max_lift m above the ground; None: no ceiling) and bound on its tilt (rad; None: any), the required
    ZMP margin (m); the ticks' velocities and accelerations come with the stream (`StreamPlan.qd`, `qdd`)."""

    other: str
    lift: float
    margin: float
    max_lift: float | None = None
    max_tilt: float | None = None


def single_support_problems(
    model: RobotModel,
    config: RobotConfig,
    t: np.ndarray,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    ss: SingleSupport,
    base: str,
    params: str,
) -> list[str]:
    """Why streaming these ticks (angles, velocities, accelerations) on one sole is unsafe (empty: it is not); see
    the module docstring."""
    problems: list[str] = []
    rest = max(float(np.abs(qd[0]).max()), float(np.abs(qdd[0]).max()))
    if rest > REST_TOL:
        problems.append(
            f"the start is not at rest (|q̇|, |q̈| up to {rest:.3g}): the robot would be set down moving"
        )
    bal = one_sole(model, q, qd, qdd, base, ss.other, params)
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


@dataclass
class Transitions:
    """The weight shifts that start a single-support run from both soles and end it there (played backwards):
    `end` is `start` itself when the plan ends where it starts (`periodic`); None where there is none, `problems`
    saying why."""

    start: WeightShift | None
    end: WeightShift | None
    periodic: bool  # the plan ends where it starts
    problems: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        """What `plan check --json` reports: feasible, each transition's `WeightShift.summary` (or None)."""
        end = None if self.end is None or self.periodic else self.end.summary()
        return {"feasible": not self.problems, "ends_where_it_starts": self.periodic, "problems": self.problems,
                "start": None if self.start is None else self.start.summary(), "end": end}  # fmt: skip


def plan_margin(plan: TrajectoryPlan) -> float:
    """The ZMP margin (m) a single-support plan was designed to keep (settings `zmp_margin`, else 0)."""
    return float(plan.settings.get("zmp_margin", 0.0))


def plan_torque_fraction(plan: TrajectoryPlan) -> float:
    """The share of the joint efforts a plan was designed to stay within (settings `torque_fraction`, else 1)."""
    try:
        f = float(plan.settings.get("torque_fraction", 1.0))
    except (TypeError, ValueError):
        f = math.nan
    if not 0.0 < f <= 1.0:
        raise DataError(
            f"plan settings torque_fraction {plan.settings.get('torque_fraction')!r} must be in (0, 1]"
        )
    return f


def plan_transitions(
    model: RobotModel, config: RobotConfig, plan: TrajectoryPlan, traj: SingleSupportTrajectory, params: str
) -> Transitions:
    """The run's weight shifts for a plan's single-support trajectory `traj` (`trajectories.weight_shift`), as
    `poise run` plays them and `plan check` reports them: to the start posture and, unless the plan ends there, to
    the end posture; ZMP margin the plan's or the configuration's `min_margin` (the larger), speed and rate the
    executor's."""
    config.require_robot(model.name)
    q = traj.sample(np.array([0.0, traj.duration]))[0]
    start, problems = _transition(model, config, plan, traj, params, q[0], "")
    if np.abs(q[1] - q[0]).max() <= END_TOL:
        return Transitions(start, start, True, problems)
    end, more = _transition(model, config, plan, traj, params, q[1], "at the plan's end, ")
    return Transitions(start, end, False, problems + more)


def _transition(
    model: RobotModel,
    config: RobotConfig,
    plan: TrajectoryPlan,
    traj: SingleSupportTrajectory,
    params: str,
    q: np.ndarray,
    where: str,
) -> tuple[WeightShift | None, list[str]]:
    """(the weight shift to posture q or None, its problems prefixed `where`): planned, its ticks within the joint
    limits and the run's velocity limit (`drivers.setpoints.tick_problems`, as every streamed tick), its
    standing posture through the executor's posture check (`robots.stance.check_posture`) and the free sole's
    ground pose within the description's placement box and at least its feet_gap (FEET_GAP where it names none)
    from the base sole (`robots.stance.other_sole_problems`, the placement check of static plans too, with the
    default gap: the box and gap the designer keeps at the start)."""
    ex = config.executor
    need = max(plan_margin(plan), float(ex.min_margin))
    stand_at = f"{where}standing on both soles before the weight shift: "
    pose = other_pose(model, q, params, traj.base)  # where the free sole is put down (the shift's `pose`)
    placed = [stand_at + p for p in other_sole_problems(model, traj.base, pose, default_gap=True)]
    try:
        ws = plan_weight_shift(model, traj.base, params, q, traj.lift, need, ex.velocity_limit, ex.rate_hz,
                               traj.max_lift, traj.max_tilt, plan_torque_fraction(plan))  # fmt: skip
    except DataError as exc:
        return None, placed + [f"{where}{exc}"]
    problems = [f"{where}{what}, {p}" for what, part in (("shifting", ws.shift), ("lifting", ws.lift))
                for p in tick_problems(model, config, part.t, part.q)]  # fmt: skip
    stand = check_posture(model, ws.stand, params, traj.base, float(ex.min_margin), pose=ws.pose).issues
    return ws, placed + problems + [stand_at + p for p in stand]
