"""The trajectory-plan file (JSON): what `poise plan trajectory` writes and the executor streams.

Angles in radians, times in seconds, torques in N·m. Layout (format "poise.trajectory-plan", version 1)::

    {"format": "poise.trajectory-plan", "version": 1,
     "robot": "ur5", "robot_source": "/path/ur5.urdf" | null, "base": "base_link", "params": "urdf",
     "joint_names": ["shoulder_pan_joint", ...],
     "rate_hz": 100,
     "trajectory": {"kind": "fourier", "period_s": 10, "duration_s": 60,
                    "q0": [n], "a": [[L] * n], "b": [[L] * n]}
                 | {"kind": "spline", "times_s": [K], "q": [[n] * K]},
     "design": {"criterion": "kappa", "scaling": "columns", "kappa": 191.6, "kappa_scaled": 3.1,
                "base_parameters": ["Izz@link1 + ...", ...], "verification": {...}},
     "settings": {...}, "seed": 1}

Fourier: q_i(t) = q0_i + Σ_l [a_il/(ωl)·sin(ωlt) − b_il/(ωl)·cos(ωlt)], ω = 2π/period (Swevers). Spline: clamped
cubic spline through the waypoints (at rest at both ends). Users may write either kind from their own tools.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from formats.atomic import write_text_atomic
from formats.errors import DataError
from formats.json_format import ENCODING, json_format, read_json
from formats.plan import _clean, _need, _num, refuse_mislabelled_trajectory, unknown_settings, warn

FORMAT = "poise.trajectory-plan"
VERSION = 1
MAX_RATE_HZ = 10_000.0  # the streaming rate a plan may ask for (`plan trajectory --rate-hz` takes up to it)

# The keys of a trajectory plan's `settings` that poise writes or reads, the one list of them: the design settings
# `plan trajectory` writes whole (`trajectories.excitation.ExcitationSettings`). Any other key is read by nothing:
# a plan loads with a warning naming it and the closest of these (`formats.plan.unknown_settings`).
SETTINGS_KEYS = frozenset({
    "period", "duration", "harmonics", "samples", "dense_factor", "criterion", "scaling", "sharpness",
    "position_margin", "velocity_fraction", "acceleration_fraction", "torque_fraction", "acceleration_default",
    "max_iter", "base", "params", "simplified", "motion", "zmp_margin", "load_share", "amplitude", "lift",
    "max_lift", "max_sole_tilt", "max_kappa", "row_noise", "self_collision", "collision_margin", "focus",
    "rest_posture", "parametrisation", "waypoints", "friction", "min_excursion",
})  # fmt: skip
# those `plan check` and the run hold the motion to (`trajectories.plan.check_plan`, the streams)
SAFETY_KEYS = frozenset({
    "zmp_margin", "load_share", "collision_margin", "self_collision", "acceleration_default", "torque_fraction",
    "motion", "rest_posture",
})  # fmt: skip


@dataclass
class TrajectoryPlan:
    """A designed (or user-written) excitation trajectory for one robot and its design record."""

    robot: str
    base: str
    joint_names: list[str]
    trajectory: dict
    rate_hz: float = 100.0
    params: str | None = None
    robot_source: str | None = None
    design: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    seed: int | None = None
    source: str = ""  # where it was read from (a file), for messages about its content; not written


def plan_to_dict(plan: TrajectoryPlan) -> dict:
    """The JSON document of a trajectory plan."""
    return _clean(
        {
            "format": FORMAT,
            "version": VERSION,
            "robot": plan.robot,
            "robot_source": plan.robot_source,
            "base": plan.base,
            "params": plan.params,
            "joint_names": list(plan.joint_names),
            "rate_hz": plan.rate_hz,
            "trajectory": plan.trajectory,
            "design": plan.design,
            "settings": plan.settings,
            "seed": plan.seed,
        }
    )


def plan_digest(plan: TrajectoryPlan) -> str:
    """sha256 of the plan's canonical JSON: what a run records, so that its plan can be found again unchanged."""
    return hashlib.sha256(
        json.dumps(plan_to_dict(plan), sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def save_trajectory_plan(plan: TrajectoryPlan, path: str | pathlib.Path) -> None:
    """Write atomically (temp file, then rename)."""
    write_text_atomic(path, json.dumps(plan_to_dict(plan), indent=1) + "\n", "plan")


def trajectory_plan_from_dict(doc: Any, source: str = "trajectory plan") -> TrajectoryPlan:
    """Validate the document's structure (the trajectory's own contents are checked when it is built)."""
    refuse_mislabelled_trajectory(doc, source)  # a trajectory plan whose format field says posture plan
    fmt = _need(doc, "format", source)
    if fmt != FORMAT:
        raise DataError(f"{source}: format {fmt!r} is not {FORMAT!r}")
    if _need(doc, "version", source) != VERSION:
        raise DataError(f"{source}: version {doc['version']!r} not supported (this poise reads {VERSION})")
    names = _need(doc, "joint_names", source)
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise DataError(f"{source}: joint_names must be a non-empty list of strings")
    traj = _need(doc, "trajectory", source)
    if not isinstance(traj, dict) or "kind" not in traj:
        raise DataError(f"{source}: trajectory must be an object with a 'kind'")
    rate = _num(doc.get("rate_hz", 100.0), f"{source}: rate_hz")
    if not 0 < rate <= MAX_RATE_HZ:
        raise DataError(f"{source}: rate_hz must lie in (0, {MAX_RATE_HZ:g}] Hz (a servo rate), got {rate:g}")
    for key in ("robot", "base"):
        if not isinstance(_need(doc, key, source), str):
            raise DataError(f"{source}: {key} must be a string")
    for key in ("params", "robot_source"):
        if doc.get(key) is not None and not (isinstance(doc[key], str) and doc[key]):
            raise DataError(f"{source}: {key} must be a non-empty string, got {doc[key]!r}")
    for key in ("design", "settings"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise DataError(
                f"{source}: {key} must be an object {{name: value}}, got {type(doc[key]).__name__}"
            )
    for line in unknown_settings(doc.get("settings") or {}, SETTINGS_KEYS, SAFETY_KEYS, source):
        warn(line)
    seed = doc.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise DataError(f"{source}: seed must be an integer, got {seed!r}")
    return TrajectoryPlan(
        robot=doc["robot"],
        base=doc["base"],
        joint_names=list(names),
        trajectory=traj,
        rate_hz=rate,
        params=doc.get("params"),
        robot_source=doc.get("robot_source"),
        design=doc.get("design") or {},
        settings=doc.get("settings") or {},
        seed=seed,
        source=source,
    )


def load_trajectory_plan(path: str | pathlib.Path, command: str = "") -> TrajectoryPlan:
    """Read and structurally validate a trajectory plan file. With `command` (the poise command reading it, e.g.
    "plan forecast"), any other file is refused as `plan check` refuses it, naming what that command reads
    (`plan_document`)."""
    doc = plan_document(path, command) if command else read_json(pathlib.Path(path), "a trajectory plan")
    return trajectory_plan_from_dict(doc, str(pathlib.Path(path)))


# what a command reads, as its refusal of another file names it: the plan kinds by their format fields
_READS = {"posture": "posture plans ({fmt!r}, `plan postures`)", "trajectory": "trajectory plans ({fmt!r}, "
          "`plan trajectory`)", "recording": "dynamic recordings (CSV)"}  # fmt: skip
_NAMED = {"posture": "a posture plan (JSON)", "trajectory": "a trajectory plan (JSON)",
          "recording": "a dynamic recording (CSV)"}  # fmt: skip


def plan_document(
    path: str | pathlib.Path, command: str, kinds: Sequence[str] = ("trajectory",), prefix: str = ""
) -> Any:
    """The parsed JSON of `path` when its format field is one of the plan `kinds` ("posture", "trajectory") that
    `command` (the poise command reading it, e.g. "plan forecast") reads; any other file refused in one line led by
    `prefix` (e.g. "--prior "), naming the file, what it is and what `command` reads: a dynamic recording as one
    (`refuse_recording`), an unreadable or non-JSON file in the JSON reader's words, a trajectory whose format
    field says posture plan as that, other JSON by its format field. Every plan reader's one recognition of the
    kind of file it is given. With "recording" among `kinds` (the caller reads recordings itself: this refuses
    what is neither), a file not meant as JSON (not named .json, nor opening with a brace or a bracket) is refused
    as neither kind, rather than in the JSON reader's words."""
    from formats import plan as posture
    from formats.dynamic_recording import refuse_recording

    path = str(path)
    plans = [k for k in kinds if k != "recording"]
    formats = {"posture": posture.FORMAT, "trajectory": FORMAT}
    reads = " and ".join(_READS[k].format(fmt=formats.get(k)) for k in kinds)
    what = f"a {plans[0]} plan" if len(plans) == 1 else "a plan"
    try:
        if "recording" in kinds:
            if not _meant_as_json(path):
                raise DataError(f"{path}: neither {' nor '.join(_NAMED[k] for k in kinds)}")
        else:
            refuse_recording(path, command, "plans" if len(plans) > 1 else f"{plans[0]} plans")
        doc = read_json(path, what)
        fmt = doc.get("format") if isinstance(doc, dict) else None
        if fmt in {formats[k] for k in plans}:
            return doc
        refuse_mislabelled_trajectory(doc, path)
        raise DataError(f"{path}: not {what} (format {fmt!r}): `poise {command}` reads {reads}")
    except DataError as exc:
        if prefix:
            raise DataError(f"{prefix}{exc}") from None
        raise


def _meant_as_json(path: str) -> bool:
    """True when a file is named .json or opens with a brace or a bracket: JSON, however broken."""
    try:
        with open(path, encoding=ENCODING, errors="replace") as fh:
            return path.lower().endswith(".json") or fh.read(4096).lstrip()[:1] in ("{", "[")
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def is_trajectory_plan(path: str | pathlib.Path) -> bool:
    """True when the file is JSON whose format is a trajectory plan (for commands taking either plan kind)."""
    return json_format(path) == FORMAT
