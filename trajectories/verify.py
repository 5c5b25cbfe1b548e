"""Re-verification of a trajectory on a fine grid, independent of the optimiser's expressions: limits from the
robot description, torques from numpy RNEA with the guessed parameters, κ of the stacked base regressor."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from robots import dynamics as dyn
from robots.base_params import RegressorSpec, cached_dynamic_base
from robots.conditioning import kappa, normalised_columns
from robots.tree import RobotModel
from trajectories.parametrisation import Trajectory

DEFAULT_ACCELERATION = 20.0  # rad/s², where the robot description gives no acceleration limit


@dataclass
class TrajectoryCheck:
    """Worst ratios to the limits over the grid (≤ 1 is within), margins in rad, κ raw and column-scaled."""

    grid_points: int
    dt: float
    min_position_margin_rad: float
    velocity_ratio: float
    acceleration_ratio: float
    torque_ratio: float | None
    starts_at_rest: bool
    ends_at_rest: bool
    kappa: float
    kappa_scaled: float
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return asdict(self) | {"ok": self.ok}


def acceleration_limits(model: RobotModel, default: float = DEFAULT_ACCELERATION) -> np.ndarray:
    """Per-joint acceleration limits (rad/s²): the description's, else `default`."""
    a = np.asarray(model.acceleration_limit, dtype=float)
    return np.where(np.isfinite(a), a, default)


def sample_grid(traj: Trajectory, dt: float) -> np.ndarray:
    """Times covering the whole trajectory at step `dt` (s), ending exactly at its duration."""
    n = max(2, int(np.ceil(traj.duration / dt)) + 1)
    return np.linspace(0.0, traj.duration, n)


def check_trajectory(
    model: RobotModel,
    traj: Trajectory,
    base: str,
    params: str,
    dt: float = 0.001,
    acceleration_default: float = DEFAULT_ACCELERATION,
    simplified: bool = False,
) -> TrajectoryCheck:
    """Every limit of the description checked at step `dt` (s) over the whole trajectory."""
    if traj.n != model.nq:
        from formats.errors import DataError

        raise DataError(f"trajectory has {traj.n} joints, robot {model.name!r} has {model.nq}")
    t = sample_grid(traj, dt)
    q, qd, qdd = traj.sample(t)
    problems: list[str] = []
    lo = np.where(np.isfinite(model.lower), model.lower, -np.inf)
    hi = np.where(np.isfinite(model.upper), model.upper, np.inf)
    margin = float(min(np.min(q - lo), np.min(hi - q)))
    if margin < -1e-9:
        j = int(np.argmin(np.minimum(q - lo, hi - q).min(axis=0)))
        problems.append(f"joint {model.joint_names[j]} leaves its position range by {-margin:.4g} rad")
    vr = np.abs(qd) / model.velocity_limit
    ar = np.abs(qdd) / acceleration_limits(model, acceleration_default)
    for name, r, unit in (("velocity", vr, "rad/s"), ("acceleration", ar, "rad/s²")):
        if r.max() > 1 + 1e-6:
            j = int(np.argmax(r.max(axis=0)))
            problems.append(
                f"joint {model.joint_names[j]} exceeds its {name} limit ({r.max():.3f}× the limit in {unit})"
            )
    tmax = model.effort_limit
    tr = None
    if np.all(np.isfinite(tmax)):
        tau = dyn.rnea(model, q, qd, qdd, params, base)
        r = np.abs(tau) / tmax
        tr = float(r.max())
        if tr > 1 + 1e-6:
            j = int(np.argmax(r.max(axis=0)))
            problems.append(f"joint {model.joint_names[j]} needs {tr:.3f}× its effort limit")
    v0, a0 = (np.abs(x[0]).max() for x in (qd, qdd))
    v1 = np.abs(qd[-1]).max()
    starts, ends = bool(v0 < 1e-6), bool(v1 < 1e-6)
    if not starts:
        problems.append(f"does not start at rest (|q̇| = {v0:.3g} rad/s)")
    if not ends:
        problems.append(f"does not end at rest (|q̇| = {v1:.3g} rad/s)")
    W = stacked_base_regressor(model, traj, base, simplified, t[:: max(1, len(t) // 2000)])
    return TrajectoryCheck(
        grid_points=len(t),
        dt=float(t[1] - t[0]),
        min_position_margin_rad=margin,
        velocity_ratio=float(vr.max()),
        acceleration_ratio=float(ar.max()),
        torque_ratio=tr,
        starts_at_rest=starts,
        ends_at_rest=ends,
        kappa=kappa(W),
        kappa_scaled=kappa(normalised_columns(W)[0]),
        problems=problems,
    )


def stacked_base_regressor(
    model: RobotModel, traj: Trajectory, base: str, simplified: bool, t: np.ndarray
) -> np.ndarray:
    """The base joint-torque regressor stacked over times t: (len(t)·n) × rank."""
    db = cached_dynamic_base(model, RegressorSpec("torque", base), simplified)
    q, qd, qdd = traj.sample(t)
    Y = dyn.torque_regressor(model, q, qd, qdd, base)
    return Y[..., db.independent].reshape(-1, len(db.independent))
