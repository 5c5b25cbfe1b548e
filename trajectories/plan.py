"""From a designed excitation to a trajectory plan file, and back to a trajectory with its model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.errors import DataError
from formats.trajectory_plan import TrajectoryPlan
from robots.registry import BUILT_IN, get_model
from robots.tree import RobotModel
from trajectories.excitation import ExcitationResult, ExcitationSettings, Prior
from trajectories.multistart import settings_dict
from trajectories.parametrisation import Trajectory, trajectory_from_json


def robot_reference(robot: str) -> tuple[str | None, str]:
    """(source path or None for a built-in, display name) for the robot argument a user gave."""
    if robot.lower() in BUILT_IN:
        return None, robot.lower()
    return str(Path(robot).resolve()), robot


def make_plan(
    robot: str,
    model: RobotModel,
    result: ExcitationResult,
    settings: ExcitationSettings,
    seed: int,
    rate_hz: float,
) -> TrajectoryPlan:
    """The plan file's content for one designed trajectory."""
    source, _ = robot_reference(robot)
    return TrajectoryPlan(
        robot=model.name,
        robot_source=source,
        base=result.base,
        params=result.params,
        joint_names=list(model.joint_names),
        trajectory=result.trajectory.to_json(),
        rate_hz=rate_hz,
        design={
            "criterion": settings.criterion,
            "scaling": settings.scaling,
            "kappa": result.kappa,
            "kappa_scaled": result.kappa_scaled,
            "logdet_scaled": result.logdet,
            "iterations": result.iterations,
            "seconds": result.seconds,
            "status": result.status,
            "base_parameters": list(result.base_symbols),
            "verification": result.verification,
        },
        settings=settings_dict(settings),
        seed=seed,
    )


STANDING = ("double-support", "single-support")  # motions whose ZMP the plan keeps inside the soles


def plan_model(plan: TrajectoryPlan) -> RobotModel:
    """The robot a plan was made for (its file when not built in), checked against the plan's joints."""
    model = get_model(plan.robot_source or plan.robot)
    if list(model.joint_names) != list(plan.joint_names):
        raise DataError(
            f"plan joints {plan.joint_names} do not match robot {model.name!r} ({model.joint_names})"
        )
    if not (model.has_link(plan.base) or plan.base in model.bases):
        raise DataError(f"plan base {plan.base!r} is not a link of {model.name!r}")
    return model


@dataclass(frozen=True)
class Recording:
    """How a plan's motion is recorded and identified: the base (a standing robot's stance sole), whether it
    stands (board wrench) and on one sole, and the recording metadata `identify dynamic` reads from it."""

    base: str
    standing: bool
    single: bool
    meta: dict[str, str]


def plan_recording(plan: TrajectoryPlan, traj: Trajectory) -> Recording:
    """The `Recording` of a plan's trajectory: what `poise run`, `simulate trajectory` and `plan forecast` share."""
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.parametrisation import motion_band_hz
    from trajectories.single_support import SingleSupportTrajectory

    single = isinstance(traj, SingleSupportTrajectory)
    standing = single or isinstance(traj, ClosedChainTrajectory)
    base = traj.base if single else traj.chain.base if standing else plan.base
    meta = {}
    band = motion_band_hz(traj)
    if band is not None:  # the identification's default cut-off follows it
        meta["motion_band_hz"] = f"{band:.6g}"
    if single:  # the estimator's base parameters: the other sole moves freely
        meta["motion"] = "single-support"
    return Recording(base, standing, single, meta)


def plan_trajectory(plan: TrajectoryPlan, model: RobotModel | None = None) -> Trajectory:
    """The plan's trajectory object, checked against its joint count (closed chains need the model)."""
    traj = trajectory_from_json(plan.trajectory, model)
    if traj.n != len(plan.joint_names):
        raise DataError(f"trajectory has {traj.n} joints, plan names {len(plan.joint_names)}")
    return traj


def check_plan(
    plan: TrajectoryPlan, model: RobotModel, traj: Trajectory, params: str | None = None, dt: float = 0.001
):
    """The checks `plan check` applies to a trajectory plan (limits, balance/ZMP margin when standing,
    self-collision, with the plan's own settings) on a `dt` grid; `poise run` refuses on the same result."""
    from trajectories.verify import check_trajectory

    ps = params or plan.params or next(iter(model.params))
    model.parameter_set(ps)
    st = plan.settings
    return check_trajectory(
        model,
        traj,
        plan.base,
        ps,
        dt,
        float(st.get("acceleration_default", 20.0)),
        bool(st.get("simplified", False)),
        zmp_margin=float(st.get("zmp_margin", 0.0)) if st.get("motion") in STANDING else 0.0,
        collision_margin=float(st.get("collision_margin", 0.0)) if st.get("self_collision", True) else None,
        load_share=float(st.get("load_share", 0.0)) if st.get("motion") == "double-support" else 0.0,
    )


def prior_experiments(model: RobotModel, settings: ExcitationSettings, plans: list[TrajectoryPlan]) -> Prior:
    """Trajectories already executed, as the next design's prior: their base-regressor rows sampled at the
    design's grid step; standing in double support, the placement they share, which the next design keeps."""
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.verify import stacked_base_regressor

    if settings.motion not in ("free", "double-support"):
        raise DataError("a prior experiment is supported for fixed-base and double-support designs")
    rows, chain = [], None
    for p in plans:
        if p.robot != model.name or list(p.joint_names) != list(model.joint_names):
            raise DataError(f"prior plan for {p.robot!r} does not fit robot {model.name!r}")
        if bool(p.settings.get("simplified", False)) != settings.simplified:
            raise DataError("a prior plan identifies the " + ("simplified" if settings.simplified else "full")
                            + " model's parameters only if designed for it: give --simplified alike")  # fmt: skip
        traj = plan_trajectory(p, model)
        standing = isinstance(traj, ClosedChainTrajectory)
        if standing != (settings.motion == "double-support"):
            raise DataError(f"prior plan is a {p.settings.get('motion') or 'free'} motion; the design is "
                            f"{settings.motion}: their base parameters differ")  # fmt: skip
        if standing:
            chain = chain or traj.chain
            same_placement(chain, traj.chain)
        dt = settings.period / settings.samples  # the design's grid: a periodic motion's end is its start
        t = np.arange(int(np.ceil(traj.duration / dt - 1e-9))) * dt
        rows.append(stacked_base_regressor(model, traj, settings.base or model.root, settings.simplified, t))
    return Prior(np.vstack(rows), chain)


def same_placement(first, other, tol_m: float = 1e-6) -> None:
    """Two closed chains the runs of one fit stand in: the same base sole, other sole pose and nominal posture
    (the base parameters are chosen there)."""
    if (
        first.base != other.base
        or first.other != other.other
        or tuple(first.dependent) != tuple(other.dependent)
        or np.max(np.abs(first.target_p - other.target_p)) > tol_m
        or np.max(np.abs(first.target_R - other.target_R)) > tol_m
        or np.max(np.abs(first.nominal - other.nominal)) > tol_m
    ):
        raise DataError("prior plans stand in different foot placements: design after one placement's plans")
