"""Which robot a dynamic recording is of, and whether it can be that robot's: checked before any fit, so a file
from another logger that would be fitted wrongly (degrees written as radians, another robot's joints, efforts in
another unit) is told in one line naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from formats.dynamic_recording import DynamicRecording, in_joint_order
from formats.errors import DataError
from identify.recording_checks import effort_scale_problem, limits_problem, standing_problem
from robots.registry import check_described, get_model, is_named, source_beside
from robots.tree import ParameterSet, RobotModel

EFFORT_LIMIT_FACTOR = 3.0  # recorded efforts this many times a joint's effort limit are in another unit
# a moving joint whose effort reads exactly 0 in more than this share of its moving samples has no sensor behind
# it most of the time (a current read after its servo settled, a column not wired)
STUCK_SHARE = 0.5
# a joint moves when its encoder spans at least this (rad for revolute joints, m for prismatic ones) and
# MOVING_TICKS of its smallest step: a still joint's encoder flickers by a tick or two
MOVING_SPAN = {"revolute": 0.01, "prismatic": 0.001}
MOVING_TICKS = 5
# a recording and its run.json (`poise run`) disagree when its rows or time step are off by more than this share
RUN_TOLERANCE = 0.02
# recordings fitted together that share at least this share of the smaller one's distinct samples (angles and
# efforts) are copies, or one is cut from the other. Separate runs of one plan share samples too (quantised
# encoders and currents): measured up to 71 % for two noiseless runs, 21–34 % across noise seeds
SHARED_SAMPLES = 0.95


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


def effort_scale(
    rec: DynamicRecording, path: str | Path, model: RobotModel, guess: str | ParameterSet | None = None
) -> list[str]:
    """A warning when a recording's joint efforts are far off the inverse dynamics of `guess` (default: the
    description's first parameter set), DataError when a unit off (`effort_scale_problem`), on its filtered motion as
    the fit differentiates it."""
    from identify.dynamic import filtered_motion

    if rec.tau is None:
        return []
    try:
        pieces, _ = filtered_motion(rec)
    except DataError:  # too short: the fit says so in its own words
        return []
    at = np.concatenate([np.searchsorted(rec.t, p.t) for p in pieces])
    motion = tuple(np.concatenate([getattr(p, k) for p in pieces]) for k in ("q", "qd", "qdd"))
    found = effort_scale_problem(model, motion, rec.tau[at], guess or next(iter(model.params)), rec.base,
                                 bool(rec.torque_constant))  # fmt: skip
    if found is None:
        return []
    if found[1]:
        raise DataError(f"{path}: {found[0]}")
    return [f"{path}: {found[0]}"]


def moving_joints(rec: DynamicRecording, model: RobotModel) -> np.ndarray:
    """The joints (bool, nq) that move: their encoder spans MOVING_SPAN and MOVING_TICKS of its smallest step."""
    out = np.zeros(rec.q.shape[1], dtype=bool)
    for j, name in enumerate(rec.joint_names):
        steps = np.abs(np.diff(rec.q[:, j]))
        steps = steps[steps > 0]
        if not steps.size:
            continue
        least = MOVING_SPAN["prismatic" if _prismatic(model, name) else "revolute"]
        out[j] = np.ptp(rec.q[:, j]) >= max(least, MOVING_TICKS * steps.min())
    return out


def _prismatic(model: RobotModel, joint: str) -> bool:
    """Whether a joint of the model slides (m) rather than turns (rad)."""
    return model.joints[model.coordinates[model.joint_names.index(joint)]].type == "prismatic"


def stuck_efforts(rec: DynamicRecording, path: str | Path, model: RobotModel) -> list[str]:
    """Joints that move (`moving_joints`) while their effort does not: DataError for one whose effort is one value
    throughout; a warning for one reading exactly 0 in over STUCK_SHARE of its moving samples (those next to an
    encoder change)."""
    if rec.tau is None:
        return []
    step = np.diff(rec.q, axis=0) != 0
    moving = np.zeros(rec.q.shape, dtype=bool)
    moving[1:] |= step
    moving[:-1] |= step
    what = "current" if rec.torque_constant else "effort"
    out = []
    for j in np.flatnonzero(moving_joints(rec, model)):
        name = rec.joint_names[j]
        unit = "m" if _prismatic(model, name) else "rad"
        if np.ptp(rec.tau[:, j]) == 0:
            raise DataError(f"{path}: {name} moves (its encoder spans {np.ptp(rec.q[:, j]):.3g} {unit}) but its "
                            f"{what} reads {rec.tau[0, j]:g} in every sample: nothing measured it, and its parameters "
                            "would be fitted to that")  # fmt: skip
        share = float(np.mean(rec.tau[moving[:, j], j] == 0))
        if share > STUCK_SHARE:
            out.append(f"{path}: {name} moves but its {what} reads exactly 0 in {100 * share:.0f} % of its "
                       f"{int(moving[:, j].sum())} moving samples: sampled while its servo rested between "
                       "goals (a low rate?), or not measured; its friction and the rest are fitted to those "
                       "zeros")  # fmt: skip
    return out


def run_problem(rec: DynamicRecording, path: str | Path, ticks: int | None, rate_hz: float | None) -> None:
    """DataError when a recording disagrees with its run.json: its time step against run.json's rate_hz, its rows
    against its ticks_streamed (one row per tick; a stall delays the rows after it, the count stays), beyond
    RUN_TOLERANCE."""
    if len(rec.t) < 2:
        return
    step = float(np.median(np.diff(rec.t)))
    if rate_hz and abs(step * rate_hz - 1) > RUN_TOLERANCE:
        raise DataError(f"{path}: samples {1000 * step:.4g} ms apart ({1 / step:.4g} Hz), its run.json's rate_hz "
                        f"{rate_hz:g} Hz: not the run's recording as written (resampled?); fit the recording the run "
                        "wrote")  # fmt: skip
    rows = len(rec.t)
    if ticks and abs(rows - ticks) > max(RUN_TOLERANCE * ticks, 2):
        at = f" at {rate_hz:g} Hz" if rate_hz else ""
        raise DataError(f"{path}: {rows} samples, its run.json streamed {ticks} ticks{at} (one row each): "
                        f"{abs(rows - ticks)} rows {'missing' if rows < ticks else 'more'}, not the run's recording "
                        "as written (cut or decimated?); fit the recording the run wrote")  # fmt: skip


def _sample_rows(rec: DynamicRecording) -> set[bytes]:
    """A recording's distinct samples (angles and efforts, times left out: a copy shifted in time is one) as
    bytes."""
    parts = [rec.q] + [a for a in (rec.tau, rec.current, rec.wrench) if a is not None]
    rows = np.ascontiguousarray(np.hstack(parts), dtype=float)
    return set(rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel().tolist())


def repeated_recordings(
    recs: list[DynamicRecording], paths: list[str], plans: list[str | None], validate=None
) -> None:
    """DataError for recordings fitted together of which one holds SHARED_SAMPLES of the other's distinct samples (a
    copy, or one cut from another: its noise counted twice shrinks the SEs), unless runs of one plan (`plans`, by
    their run.json: averaged, a noiseless bench's repeats alike) of which neither holds every sample of the other,
    and for a `validate` (recording, path) that holds them of a fitted one (in-sample validation). Separate runs
    share fewer: fitted together, each brings its own noise."""
    rows = [_sample_rows(r) for r in recs]

    def share(a: set, b: set) -> float:
        return len(a & b) / max(1, min(len(a), len(b)))

    for i in range(len(rows)):
        for k in range(i + 1, len(rows)):
            s = share(rows[i], rows[k])
            if plans[i] is not None and plans[i] == plans[k] and s < 1:
                continue
            if s >= SHARED_SAMPLES:
                raise DataError(f"{paths[k]} repeats {100 * s:.0f} % of the samples of {paths[i]} (a copy, or cut "
                                "from it): the same noise twice would shrink the SEs as if it were new data; fit it "
                                "once")  # fmt: skip
    if validate is not None:
        v = _sample_rows(validate[0])
        for r, path in zip(rows, paths, strict=True):
            if (s := share(v, r)) >= SHARED_SAMPLES:
                raise DataError(f"--validate {validate[1]} repeats {100 * s:.0f} % of the samples of {path}, which "
                                "is fitted: an in-sample validation says nothing of prediction; validate on another "
                                "recording")  # fmt: skip
