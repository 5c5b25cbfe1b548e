"""From a designed excitation to a trajectory plan file, and back to a trajectory with its model."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.errors import DataError
from formats.trajectory_plan import TrajectoryPlan
from robots.registry import check_described, get_model, is_named, source_beside
from robots.tree import RobotModel
from trajectories.excitation import ExcitationResult, ExcitationSettings, Prior, friction_rows
from trajectories.multistart import settings_dict
from trajectories.parametrisation import Trajectory, trajectory_from_json
from trajectories.recorded import RecordedMotion


def robot_reference(robot: str) -> tuple[str | None, str]:
    """(source path, or None for a named robot: built in or from a package; display name) for the robot argument
    a user gave."""
    if is_named(robot):
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
            # None: infinite (a motion that leaves parameters to its prior runs)
            "kappa": json_finite(result.kappa),
            "kappa_scaled": json_finite(result.kappa_scaled),
            "logdet_scaled": json_finite(result.logdet),
            "iterations": result.iterations,
            "seconds": result.seconds,
            "status": result.status,
            "base_parameters": list(result.base_symbols),
            "verification": json_finite(result.verification),
            "stages": json_finite(result.stages),  # the criterion's stages: sharpness, status, iterations, κ
            # rad per joint: the angle SD a free motion aims at; `plan check` fails one that barely moves
            "excursion_floor_rad": _floor(model, settings),
        },
        settings=settings_dict(settings),
        seed=seed,
    )


STANDING = ("double-support", "single-support")  # motions whose ZMP the plan keeps inside the soles


def _floor(model: RobotModel, settings: ExcitationSettings) -> list[float] | None:
    """A free motion's excursion floor per joint (rad; `excursion_floor`), None for a standing one or no floor."""
    from trajectories.excitation import excursion_floor

    if settings.motion != "free" or settings.min_excursion <= 0:
        return None
    return [float(v) for v in excursion_floor(model, settings)]


def json_finite(v):
    """For the plan file: None for an infinite or NaN number (JSON has neither), in lists and dicts too."""
    if isinstance(v, dict):
        return {k: json_finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_finite(x) for x in v]
    return None if isinstance(v, float) and not math.isfinite(v) else v


def plan_model(plan: TrajectoryPlan) -> RobotModel:
    """The robot a plan was made for (its description file when not built in: as given, or beside the plan), checked
    against the plan's joints, base and parameter set; errors name the plan's file."""
    name = plan.source or "plan"
    src = source_beside(plan.robot_source, plan.source or None) if plan.robot_source else None
    try:
        model = get_model(src or plan.robot)
    except DataError as exc:
        hint = (
            ""
            if src or is_named(plan.robot)
            else "; a plan for a robot that is not named (built in or from a package) names its description (robot_source)"
        )
        raise DataError(f"{name}: {exc}{hint}") from None
    if src:
        check_described(name, plan.robot, plan.robot_source, model)
    if list(model.joint_names) != list(plan.joint_names):
        raise DataError(
            f"{name}: plan joints {plan.joint_names} do not match robot {model.name!r} ({model.joint_names})"
        )
    if not (model.has_link(plan.base) or plan.base in model.bases):
        raise DataError(f"{name}: plan base {plan.base!r} is not a link of {model.name!r}")
    if plan.params is not None and plan.params not in model.params:
        raise DataError(f"{name}: params {plan.params!r} is no parameter set of {model.name!r} "
                        f"({', '.join(sorted(model.params))})")  # fmt: skip
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
    """The plan's trajectory object, checked against its joint count (closed chains need the model); a malformed
    one is a DataError naming the plan's file."""
    where = f"{plan.source}: " if plan.source else ""
    try:
        traj = trajectory_from_json(plan.trajectory, model)
    except DataError as exc:
        raise DataError(f"{where}trajectory: {exc}") from None
    if traj.n != len(plan.joint_names):
        raise DataError(f"{where}trajectory has {traj.n} joints, plan names {len(plan.joint_names)}")
    return traj


# the reasons `check_plan` went on without collision geometry that cannot be loaded, inside
# `collision_geometry_optional`; None outside it (the run's pre-flight: such a plan is refused)
_SKIPPED_GEOMETRY: ContextVar[list[str] | None] = ContextVar("skipped_geometry", default=None)


@contextmanager
def collision_geometry_optional() -> Iterator[list[str]]:
    """Within it, `check_plan` goes on without a description's collision geometry that cannot be loaded (a
    `package://` mesh not found, a mesh file unreadable): self-collision is not checked, and why is appended to
    the list yielded, for the command's one warning. Outside it — `poise run`'s pre-flight, which must not move
    a robot whose links it cannot keep apart — that is a problem of the plan, saying how to proceed."""
    skipped: list[str] = []
    token = _SKIPPED_GEOMETRY.set(skipped)
    try:
        yield skipped
    finally:
        _SKIPPED_GEOMETRY.reset(token)


def check_plan(
    plan: TrajectoryPlan, model: RobotModel, traj: Trajectory, params: str | None = None, dt: float = 0.001
):
    """The checks `plan check` applies to a trajectory plan (limits, balance/ZMP margin when standing,
    self-collision, with the plan's own settings) on a `dt` grid, and in double support where the held sole
    stands (`robots.stance.other_sole_problems`, the placement check of static plans: the description's
    placement box and feet gap); `poise run` refuses on the same result. Collision geometry that cannot be
    loaded: see `collision_geometry_optional`."""
    from robots.stance import other_sole_problems
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.verify import DEFAULT_ACCELERATION, check_trajectory, sample_grid

    ps = params or plan.params or next(iter(model.params))
    model.parameter_set(ps)
    st = plan.settings
    check = check_trajectory(
        model,
        traj,
        plan.base,
        ps,
        dt,
        float(st.get("acceleration_default", DEFAULT_ACCELERATION)),
        bool(st.get("simplified", False)),
        zmp_margin=float(st.get("zmp_margin", 0.0)) if st.get("motion") in STANDING else 0.0,
        # a plan designed without self-collision rows is still held to links that do not meet
        collision_margin=float(st.get("collision_margin", 0.0)) if st.get("self_collision", True) else 0.0,
        load_share=float(st.get("load_share", 0.0)) if st.get("motion") == "double-support" else 0.0,
        rest_posture=_rest(st.get("rest_posture")),
    )
    if check.self_collision == "geometry unavailable":
        skipped = _SKIPPED_GEOMETRY.get()
        if skipped is not None:
            skipped.append(check.self_collision_note)
        else:
            check.problems.append(
                f"self-collision cannot be checked ({check.self_collision_note}): `poise run` moves a robot only "
                "after checking that its links do not meet — make the collision meshes findable and readable "
                "(ROS_PACKAGE_PATH for package:// ones), then run again"
            )
    if isinstance(traj, ClosedChainTrajectory):  # where the held sole stands
        where = other_sole_problems(model, traj.chain.base, traj.chain.ground_pose())
        check.problems += [f"placement: {m}" for m in where]
    floor = (plan.design or {}).get("excursion_floor_rad")
    if floor is not None and len(floor) == model.nq:  # the designer's own check of the joints' motion
        from trajectories.excitation import barely_moving

        q, _, _ = traj.sample(sample_grid(traj, max(dt, traj.duration / 20000)))  # an SD needs no finer grid
        if problem := barely_moving(model.joint_names, q, np.asarray(floor, dtype=float)):
            check.problems.append(problem)
    return check


def _rest(value) -> np.ndarray | None:
    """A plan's recorded rest posture (rad) as an array, or None; a malformed one is a malformed plan."""
    if value is None:
        return None
    try:
        r = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        r = np.array([np.nan])
    if r.ndim != 1 or not np.all(np.isfinite(r)):
        raise DataError(f"plan settings: rest_posture must be a list of angles in rad, got {value!r}")
    return r


def plan_motion(traj: Trajectory) -> str:
    """What a plan's trajectory is, in `ExcitationSettings.motion`'s terms: free (fixed base), double-support or
    single-support."""
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.single_support import SingleSupportTrajectory

    if isinstance(traj, ClosedChainTrajectory):
        return "double-support"
    return "single-support" if isinstance(traj, SingleSupportTrajectory) else "free"


def prior_experiments(
    model: RobotModel, settings: ExcitationSettings, priors: Sequence[TrajectoryPlan | RecordedMotion]
) -> Prior:
    """Experiments already made — trajectory plans executed, and motions recorded (`recorded.RecordedMotion`) — as
    the next design's prior: their base-regressor rows sampled at the design's grid step (a recording's on its
    own clock, interpolated); standing in double support, the placement they share, which the next design keeps
    (the prior plans' closed chain, else one built at the first recording's: `recorded_chain`); on one sole, the
    design's stance sole."""
    from robots.stance_spec import resolve_base

    stance = resolve_base(model, settings.base) if settings.motion == "single-support" else None
    dt = settings.period / settings.samples  # the design's grid: a periodic motion's end is its start
    rows, chain = {}, None
    for k, p in enumerate(priors):
        if isinstance(p, RecordedMotion):
            continue
        name = f"prior plan {p.source}" if p.source else "prior plan"
        if p.robot != model.name or list(p.joint_names) != list(model.joint_names):
            raise DataError(f"{name} is for {p.robot!r}: it does not fit robot {model.name!r}")
        traj = plan_trajectory(p, model)
        motion = plan_motion(traj)
        if motion != settings.motion:
            raise DataError(f"{name} is a {motion} motion; the design is {settings.motion}: their base "
                            "parameters differ")  # fmt: skip
        if bool(p.settings.get("simplified", False)) != settings.simplified:
            raise DataError(f"{name} identifies the " + ("simplified" if settings.simplified else "full")
                            + " model's parameters only if designed for it: give --simplified alike")  # fmt: skip
        if motion == "double-support":
            chain = chain or traj.chain
            same_placement(chain, traj.chain)
        elif motion == "single-support" and traj.base != stance:
            raise DataError(f"prior plan stands on {traj.base!r}, the design on {stance!r}: their base "
                            f"parameters differ (--base {traj.base} designs on its sole)")  # fmt: skip
        t = np.arange(int(np.ceil(traj.duration / dt - 1e-9))) * dt
        base = settings.base or model.root
        rows[k] = motion_rows(model, traj, base, settings.simplified, settings.friction, t)
    recorded = [(k, p) for k, p in enumerate(priors) if isinstance(p, RecordedMotion)]
    for _, m in recorded:
        check_recorded(model, settings, m, stance)
    if recorded and settings.motion == "double-support" and chain is None:
        chain = recorded_chain(model, settings, recorded[0][1])
    for k, m in recorded:
        rows[k] = recorded_rows(model, settings, m, chain, dt, "the prior plans'" if len(recorded) < len(priors)
                                else f"{recorded[0][1].source}'s")  # fmt: skip
    stacked = np.vstack([rows[k] for k in range(len(priors))])
    if settings.motion == "single-support":  # in the design's row order
        from trajectories.single_support import by_component

        return Prior(by_component(stacked))
    return Prior(stacked, chain)


def motion_rows(
    model: RobotModel, traj: Trajectory, base: str, simplified: bool, friction: bool, t: np.ndarray
) -> np.ndarray:
    """A planned motion's base-regressor rows at times t, with each joint's friction columns when the design's
    criterion had them (`friction`): what a design's κ, and a prior plan's rows in the next design, are of."""
    from trajectories.verify import stacked_base_regressor

    rows = stacked_base_regressor(model, traj, base, simplified, t)
    return np.hstack([rows, friction_rows(traj.sample(t)[1])]) if friction else rows


RECORDING_KINDS = {"free": "joint-torque", "double-support": "double-support board",
                   "single-support": "single-support board"}  # fmt: skip


def check_recorded(
    model: RobotModel, settings: ExcitationSettings, m: RecordedMotion, stance: str | None
) -> None:
    """A recording taken as a prior must be of the design's robot and joints, and identify what the design does:
    joint torques on its fixed base, or the boards' wrench in its motion (single support: on its stance sole)."""
    if m.robot != model.name:
        raise DataError(f"prior recording {m.source} is of {m.robot!r}; the design of {model.name!r}")
    if list(m.joint_names) != list(model.joint_names):
        raise DataError(f"prior recording {m.source} has joints {list(m.joint_names)}; {model.name!r} has "
                        f"{list(model.joint_names)}")  # fmt: skip
    if m.motion != settings.motion:
        raise DataError(f"prior recording {m.source} is a {RECORDING_KINDS[m.motion]} recording; the design is "
                        f"{settings.motion}: their base parameters differ")  # fmt: skip
    if m.motion == "free" and m.base != (settings.base or model.root):
        raise DataError(f"prior recording {m.source} has base {m.base!r}, the design {settings.base or model.root!r}"
                        f": their base parameters differ (--base {m.base} designs on it)")  # fmt: skip
    if m.motion != "free" and m.base not in model.bases:
        raise DataError(f"prior recording {m.source} stands on {m.base!r}, not a sole of {model.name!r} "
                        f"({', '.join(model.bases)})")  # fmt: skip
    if m.motion == "single-support" and m.base != stance:
        raise DataError(f"prior recording {m.source} stands on {m.base!r}, the design on {stance!r}: their base "
                        f"parameters differ (--base {m.base} designs on its sole)")  # fmt: skip
    if m.motion == "double-support" and settings.base and settings.base != m.base:
        raise DataError(f"prior recording {m.source} stands on {m.base!r}, the design on {settings.base!r}: "
                        "their base parameters differ")  # fmt: skip


def recorded_chain(model: RobotModel, settings: ExcitationSettings, m: RecordedMotion):
    """The next design's closed chain when only recordings say where the robot stood: the other sole flat at the
    recording's placement (its ground pose at the middle sample), the recording's first posture — at rest before
    it moves — as the nominal (`closed_chain.placed_chain`: it must be balanced, placed as the description allows)."""
    from robots.stance import other_pose
    from trajectories.closed_chain import placed_chain

    guess = settings.params or next(iter(model.params))  # as the design's own chain (`optimise_balance`)
    pose = other_pose(model, m.middle, guess, m.base)
    try:
        return placed_chain(model, m.base, guess, pose, m.start, settings.zmp_margin)
    except DataError as exc:
        raise DataError(f"prior recording {m.source}: its first posture cannot be the next design's nominal "
                        f"standing posture ({exc})") from None  # fmt: skip


def recorded_rows(
    model: RobotModel,
    settings: ExcitationSettings,
    m: RecordedMotion,
    chain,
    dt: float,
    where: str = "the chain's",
) -> np.ndarray:
    """A recording's base-regressor rows at the design's grid step (`RecordedMotion.grid`), by sample, with the
    base parameters and rows of a plan of the same motion (`verify.regressor_spec`); in double support those of
    the chain's placement, which the recording's other sole must keep within identify's tolerance for fitting
    recordings together (`robots.stance.PLACEMENT_TOL_M`, `PLACEMENT_TOL_DEG`)."""
    from robots.base_params import RegressorSpec
    from robots.stance import PLACEMENT_LIMITS, other_pose, placement_apart
    from trajectories.verify import sampled_base_regressor

    if m.motion == "double-support":
        if m.base != chain.base:
            raise DataError(f"prior recording {m.source} stands on {m.base!r}, {where} placement on "
                            f"{chain.base!r}: design after one placement's experiments")  # fmt: skip
        if apart := placement_apart(chain.ground_pose(), other_pose(model, m.middle, chain.params, m.base)):
            raise DataError(
                f"prior recording {m.source}'s other sole stands {apart} from {where} placement ({PLACEMENT_LIMITS}): "
                "another foot placement identifies other base parameters — design after one placement's experiments"
            )
    t = m.grid(dt)
    if not len(t):
        raise DataError(f"prior recording {m.source}: its {m.duration:.3g} s left after the filter's edges hold "
                        f"no sample of the design's {dt:.3g} s grid")  # fmt: skip
    if m.motion == "free":
        spec = RegressorSpec("torque", m.base)
    else:
        spec = RegressorSpec("base-wrench", m.base, None, ("fz", "mx", "my"))
    rows = sampled_base_regressor(model, spec, "free", settings.simplified, m, t,
                                  chain if m.motion == "double-support" else None)  # fmt: skip
    if (
        settings.friction
    ):  # a joint-torque recording (friction is a fixed-base design's): its friction columns too
        rows = np.hstack([rows, friction_rows(m.sample(t)[1])])
    return rows


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
