"""Which robot a dynamic recording is of, and whether it can be that robot's: checked before any fit, so a file
from another logger that would be fitted wrongly (degrees written as radians, another robot's joints, efforts in
another unit) is told in one line naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from formats.dynamic_recording import DynamicRecording, in_joint_order
from formats.errors import DataError
from identify.recording_checks import limits_problem, standing_problem
from robots.registry import check_described, get_model, is_named, source_beside
from robots.tree import RobotModel

EFFORT_LIMIT_FACTOR = 3.0  # recorded efforts this many times a joint's effort limit are in another unit


def check_base(model: RobotModel, base: str, quantity: str) -> None:
    """The recording's base names what its quantity is measured from: for joint efforts a link fixed in the world
    (the root, a link no joint moves it against, or a sole the robot stands on), for the boards' wrench a sole (a
    site with a contact rectangle)."""
    if quantity == "wrench":
        model.base_site(base)
        return
    if not model.has_link(base):
        raise DataError(f"{model.name!r} has no link {base!r} for the base")
    moved = [model.joints[j].name for j in model.joint_path(base) if model.joints[j].moves]
    stands = {model.site(s).link for s in model.bases.values()} | {
        s.link for s in model.sites if s.rect is not None
    }
    if moved and base not in stands:  # joint efforts are modelled from a base fixed in the world
        raise DataError(f"base {base!r} is moved by {', '.join(moved)}: joint efforts are modelled from a base fixed "
                        f"in the world: {model.name!r}'s root {model.root!r}, a link fixed to it, or a sole it "
                        "stands on")  # fmt: skip


def model_of_recording(rec: DynamicRecording, path: str | Path) -> RobotModel:
    """The robot a recording names (`model_of`)."""
    return model_of(rec.robot, rec.meta, path)


def model_of(robot: str, meta: dict, path: str | Path) -> RobotModel:
    """The robot a recording's header names: its `robot_source` (a description file, as given or beside the
    recording), which must describe the robot its `robot` line names, else a built-in robot."""
    src = meta.get("robot_source")
    if not src:
        try:
            return get_model(robot)
        except DataError as exc:
            if is_named(robot):  # its package is missing: the error says which
                raise DataError(f"{path}: {exc}") from None
            raise DataError(f"{path}: {exc}; a recording of another robot names its description: "
                            "'# robot_source: PATH' (absolute, or beside the recording)") from None  # fmt: skip
    try:
        model = get_model(source_beside(src, path))
    except DataError as exc:
        raise DataError(f"{path}: robot_source: {exc}") from None
    check_described(str(path), robot, src, model)
    return model


def checked_for_model(
    rec: DynamicRecording, path: str | Path, model: RobotModel, own_cutoff: bool = True
) -> DynamicRecording:
    """The recording with its columns in the model's joint order, checked against the robot: its base, every joint
    within its limits (degrees written as radians reach far beyond them), with `own_cutoff` (the fit takes its
    cut-off from the recording, not from the user) the motion band its metadata declares, and a board wrench as the
    robot's standing on its soles as labelled (`standing_problem`: units, base sole, motion class)."""
    from identify.dynamic import default_cutoff, moment_reference

    quantity = "torque" if rec.tau is not None or rec.current is not None else "wrench"
    try:
        rec = in_joint_order(rec, model.joint_names)
        check_base(model, rec.base, quantity)
        if own_cutoff:
            default_cutoff(rec)
        if rec.wrench is not None:
            moment_reference(rec)
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from None
    degrees = rec.meta.get("angle_unit") == "deg"
    if problem := limits_problem(model, rec.q, "q:", degrees):
        raise DataError(f"{path}: {problem}")
    if rec.wrench is not None and rec.tau is None and rec.current is None:
        problem = standing_problem(model, rec.q, rec.wrench, rec.base, rec.motion, next(iter(model.params)),
                                   moment_reference(rec))  # fmt: skip
        if problem:
            raise DataError(f"{path}: {problem}")
    return rec


def efforts_beyond_limits(rec: DynamicRecording, path: str | Path, model: RobotModel) -> list[str]:
    """A warning when a recording's joint efforts reach EFFORT_LIMIT_FACTOR × a joint's effort limit (from the
    robot description, where finite): no motor gives that, so the efforts (or currents) are in another unit."""
    if rec.tau is None:
        return []
    peak = np.abs(rec.tau).max(axis=0)
    limit = model.effort_limit
    ratio = np.where(np.isfinite(limit) & (limit > 0), peak / np.where(limit > 0, limit, 1.0), 0.0)
    j = int(np.argmax(ratio))
    if ratio[j] < EFFORT_LIMIT_FACTOR:
        return []
    unit = "N" if model.joints[model.coordinates[j]].type == "prismatic" else "N·m"
    how = ("currents in mA rather than A, or a torque constant in another unit?" if rec.torque_constant
           else f"efforts in milli-units rather than {unit}?")  # fmt: skip
    return [f"{path}: {model.joint_names[j]}'s efforts reach {peak[j]:.4g} {unit}, {ratio[j]:.0f}× its effort "
            f"limit {limit[j]:.4g} {unit}: {how} (the fit goes on)"]  # fmt: skip
