"""The posture-plan file (JSON): what `poise plan postures` writes and the drivers execute.

Lives in formats/ (the bottom layer) so that drivers/ can read plans without importing design/. Angles in radians, lengths in m,
durations in s. Postures are executed in list order; the feet (boards) are re-placed between placements.

Layout (format "poise.posture-plan", version 1)::

    {"format": "poise.posture-plan", "version": 1,
     "robot": "tulip", "robot_file": "/path/tulip.urdf" (optional), "base": "right", "params": "sim",
     "joint_names": ["theta1", ..., "theta12"],
     "placements": [{"index": 0, "other_foot": [x, y, psi]}, ...],
     "postures": [{"index": 0, "placement": 0, "q": [nq floats], "move_s": 30, "hold_s": 60,
                   "predicted_cop": [x, y] | null, "margin": 0.093 | null, "robust_margin": 0.087 | null}, ...],
     "transitions": [{"from": 0, "to": 1, "q": [[nq floats], ...], "foot_error_interp": 0.004,
                      "min_margin": 0.081, "lifted": false}, ...],  # optional; absent pair -> cosine profile
     "kappa": {"right": 251.3, "left": 240.2},
     "solver": {...}, "seed": 1, "settings": {...}}

`predicted_cop`, `margin` and `robust_margin` are what the design computed (optional: a plan written by hand
may leave them out); `plan check` recomputes them from `q` and fails a plan whose stored values differ.
A transition's `q` holds waypoints equally spaced in time over the destination posture's `move_s`,
first = the `from` posture, last = the `to` posture; executors interpolate linearly between them.
`lifted: true` (absent = false) marks a pair no path on the ground joins (the closed chain's feasible set is
split between them): the robot is lifted, moved in the air and set down again on the same placement; its `q`
is then just the two postures.
`other_foot` is the pose of the non-base sole relative to the base sole; files written before it was named so
call it `left_foot` (TUlip's right base) and are still read. `robot_file` names the robot description or URDF
a plan for a robot that is not built in was designed with, so `plan check` and `plan show` can load it.
"""

from __future__ import annotations

import difflib
import json
import math
import pathlib
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from formats.atomic import write_text_atomic
from formats.errors import DataError
from formats.json_format import json_format, read_json

FORMAT = "poise.posture-plan"
VERSION = 1

# The keys of a posture plan's `settings` that poise writes or reads, the one list of them: the design settings
# `plan postures` writes whole (`design.problems.Settings`: problem … load_share), the required margin every
# check and run holds the plan to (`required_margin`, else the older `margin`), what `plan postures` and `demo`
# record beside them (postures … design) and `plan augment`'s record. Any other key is read by nothing: a plan
# loads with a warning naming it (`unknown_settings`), so that "min_margin" is not silently a margin of 0.
SETTINGS_KEYS = frozenset({
    "problem", "margin", "feet_gap", "uncertainty", "ellipsoid", "params", "base", "sharpness", "max_iter",
    "max_rounds", "load_share", "required_margin", "postures", "placements", "starts", "backend", "design",
    "augmented",
})  # fmt: skip
# those `plan check` and the run's pre-flight hold the postures to (`robots.plan_rules`)
SAFETY_KEYS = frozenset({"required_margin", "margin", "uncertainty", "ellipsoid", "load_share"})


@dataclass
class Placement:
    """One foot placement: the other sole's pose on the ground relative to the base sole (m, m, rad)."""

    index: int
    other_foot: tuple[float, float, float]

    @property
    def left_foot(self) -> tuple[float, float, float]:
        """Old name of `other_foot` (TUlip stands on its right sole)."""
        return self.other_foot

    @left_foot.setter
    def left_foot(self, pose: tuple[float, float, float]) -> None:
        self.other_foot = pose


@dataclass
class Posture:
    """One static posture: joint angles (rad, model joint order) and the balance its design predicted (m; None:
    not stored, as in a plan written by hand — recompute it, e.g. `design.verify.posture_balance`)."""

    index: int
    placement: int
    q: np.ndarray
    move_s: float
    hold_s: float
    predicted_cop: tuple[float, float] | None = None
    margin: float | None = None
    robust_margin: float | None = None


@dataclass
class Transition:
    """A closed-chain motion between two consecutive postures of one placement (waypoints, rad)."""

    from_index: int
    to_index: int
    q: np.ndarray  # (K, nq), K ≥ 2
    foot_error_interp: float | None = None  # max foot-constraint violation of plain joint interpolation (m)
    min_margin: float | None = None  # smallest CoP margin along the motion (m)
    lifted: bool = False  # no path on the ground joins the postures: lift, move in the air, set down again


@dataclass
class Plan:
    """A posture plan; see the module docstring for the file layout."""

    robot: str
    base: str
    joint_names: list[str]
    placements: list[Placement]
    postures: list[Posture]
    transitions: list[Transition] = field(default_factory=list)
    kappa: dict[str, float] = field(default_factory=dict)
    solver: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    params: str = "sim"
    robot_file: str | None = None  # description or URDF of a robot that is not built in

    @property
    def q(self) -> np.ndarray:
        """All joint vectors, (postures, nq)."""
        return np.array([p.q for p in self.postures]).reshape(len(self.postures), len(self.joint_names))

    def placement(self, index: int) -> Placement:
        for pl in self.placements:
            if pl.index == index:
                return pl
        raise DataError(f"plan has no placement {index}")

    def transition(self, a: int, b: int) -> Transition | None:
        for t in self.transitions:
            if t.from_index == a and t.to_index == b:
                return t
        return None


def _clean(x: Any) -> Any:
    """JSON-safe copy: numpy scalars/arrays to Python; NaN/inf are refused (JSON has none)."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return _clean(x.tolist())
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating | float):
        v = float(x)
        if not math.isfinite(v):
            raise DataError("plan contains NaN or infinite values; refusing to write it")
        return v
    return x


def plan_to_dict(plan: Plan) -> dict:
    """The JSON document of a plan."""
    validate(plan)
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "robot": plan.robot,
        **({"robot_file": plan.robot_file} if plan.robot_file else {}),
        "base": plan.base,
        "params": plan.params,
        "joint_names": list(plan.joint_names),
        "placements": [{"index": p.index, "other_foot": list(p.other_foot)} for p in plan.placements],
        "postures": [
            {
                "index": p.index,
                "placement": p.placement,
                "q": np.asarray(p.q, dtype=float).tolist(),
                "move_s": p.move_s,
                "hold_s": p.hold_s,
                "predicted_cop": None if p.predicted_cop is None else list(p.predicted_cop),
                "margin": p.margin,
                "robust_margin": p.robust_margin,
            }
            for p in plan.postures
        ],
        "transitions": [
            {
                "from": t.from_index,
                "to": t.to_index,
                "q": np.asarray(t.q, dtype=float).tolist(),
                "foot_error_interp": t.foot_error_interp,
                "min_margin": t.min_margin,
                **({"lifted": True} if t.lifted else {}),
            }
            for t in plan.transitions
        ],
        "kappa": dict(plan.kappa),
        "solver": plan.solver,
        "seed": plan.seed,
        "settings": plan.settings,
    }
    return _clean(doc)


def save_plan(plan: Plan, path: str | pathlib.Path) -> None:
    """Validate and write a plan as JSON (atomically: temp file, then rename)."""
    write_text_atomic(path, json.dumps(plan_to_dict(plan), indent=1) + "\n", "plan")


# ---------------------------------------------------------------- reading and validation


def _need(doc: dict, key: str, where: str) -> Any:
    if not isinstance(doc, dict):
        raise DataError(f"{where}: expected an object, got {type(doc).__name__}")
    if key not in doc:
        raise DataError(f"{where}: missing field {key!r}")
    return doc[key]


def _num(x: Any, where: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise DataError(f"{where}: expected a number, got {x!r}")
    if not math.isfinite(float(x)):
        raise DataError(f"{where}: not a finite number")
    return float(x)


def _opt_num(x: Any, where: str) -> float | None:
    return None if x is None else _num(x, where)


def _opt_cop(x: Any, where: str) -> tuple[float, float] | None:
    """A stored predicted CoP [x, y] (m), or None when absent or null."""
    return None if x is None else tuple(float(v) for v in _vec(x, 2, where))


def _opt_str(x: Any, where: str) -> str | None:
    if x is not None and (not isinstance(x, str) or not x):
        raise DataError(f"{where}: expected a non-empty string, got {x!r}")
    return x


def _int(x: Any, where: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise DataError(f"{where}: expected an integer, got {x!r}")
    return int(x)


def _vec(x: Any, n: int, where: str) -> np.ndarray:
    if not isinstance(x, list) or len(x) != n:
        got = f"{len(x)} values" if isinstance(x, list) else repr(type(x).__name__)
        raise DataError(f"{where}: expected a list of {n} numbers, got {got}")
    return np.array([_num(v, f"{where}[{i}]") for i, v in enumerate(x)])


def is_posture_plan(path) -> bool:
    """True when the file is JSON whose format is a posture plan."""
    return json_format(path) == FORMAT


def refuse_mislabelled_trajectory(doc: Any, source: str) -> None:
    """DataError when a document declares a posture plan but holds a trajectory plan's content (its `trajectory`,
    no `placements`): its format field is wrong, not its content — said rather than a missing field."""
    if (
        isinstance(doc, dict)
        and doc.get("format") == FORMAT
        and "trajectory" in doc
        and "placements" not in doc
    ):
        from formats.trajectory_plan import FORMAT as TRAJECTORY

        raise DataError(f"{source}: declares a posture plan (format {FORMAT!r}) but holds a trajectory (its "
                        f"'trajectory' field): fix its format field to {TRAJECTORY!r}")  # fmt: skip


def plan_from_dict(doc: Any, source: str = "plan") -> Plan:
    """Parse and validate a plan document; DataError names the first problem."""
    if not isinstance(doc, dict):
        raise DataError(f"{source}: not a posture plan (top level is not a JSON object)")
    refuse_mislabelled_trajectory(doc, source)
    fmt = doc.get("format")
    if fmt != FORMAT:
        raise DataError(f"{source}: not a posture plan (format {fmt!r}, expected {FORMAT!r})")
    version = doc.get("version")
    if version != VERSION:
        raise DataError(
            f"{source}: plan format version {version!r} is not supported (this poise reads {VERSION})"
        )
    robot = _need(doc, "robot", source)
    base = _need(doc, "base", source)
    names = _need(doc, "joint_names", source)
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise DataError(f"{source}: joint_names must be a non-empty list of strings")
    nq = len(names)
    placements = []
    for i, p in enumerate(_need(doc, "placements", source)):
        w = f"{source}: placements[{i}]"
        key = (
            "left_foot"
            if isinstance(p, dict) and "other_foot" not in p and "left_foot" in p
            else "other_foot"
        )
        lf = _vec(_need(p, key, w), 3, f"{w}.{key}")
        placements.append(Placement(_int(_need(p, "index", w), f"{w}.index"), tuple(lf)))
    pl_ids = [p.index for p in placements]
    if len(set(pl_ids)) != len(pl_ids):
        raise DataError(f"{source}: duplicate placement indices")
    raw_postures = _need(doc, "postures", source)
    if not isinstance(raw_postures, list) or not raw_postures:
        raise DataError(f"{source}: postures must be a non-empty list")
    postures = []
    for i, p in enumerate(raw_postures):
        w = f"{source}: postures[{i}]"
        pl = _int(_need(p, "placement", w), f"{w}.placement")
        if pl not in pl_ids:
            raise DataError(f"{w}: placement {pl} is not defined in placements")
        move, hold = _num(_need(p, "move_s", w), f"{w}.move_s"), _num(_need(p, "hold_s", w), f"{w}.hold_s")
        _check_durations(move, hold, w)
        postures.append(
            Posture(
                index=_int(_need(p, "index", w), f"{w}.index"),
                placement=pl,
                q=_vec(_need(p, "q", w), nq, f"{w}.q (one angle per joint name)"),
                move_s=move,
                hold_s=hold,
                predicted_cop=_opt_cop(p.get("predicted_cop"), f"{w}.predicted_cop"),
                margin=_opt_num(p.get("margin"), f"{w}.margin"),
                robust_margin=_opt_num(p.get("robust_margin"), f"{w}.robust_margin"),
            )
        )
    ids = [p.index for p in postures]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise DataError(f"{source}: duplicate posture indices {dup}: each posture needs its own index")
    transitions = []
    raw_tr = doc.get("transitions")
    raw_tr = [] if raw_tr is None else raw_tr
    if not isinstance(raw_tr, list):
        raise DataError(f"{source}: transitions must be a list")
    for i, t in enumerate(raw_tr):
        w = f"{source}: transitions[{i}]"
        a, b = _int(_need(t, "from", w), f"{w}.from"), _int(_need(t, "to", w), f"{w}.to")
        if a not in ids or b not in ids:
            raise DataError(f"{w}: refers to unknown posture {a if a not in ids else b}")
        wps = _need(t, "q", w)
        if not isinstance(wps, list) or len(wps) < 2:
            raise DataError(f"{w}.q: expected at least 2 waypoints")
        q = np.array([_vec(v, nq, f"{w}.q[{k}]") for k, v in enumerate(wps)])
        lifted = t.get("lifted", False)
        if not isinstance(lifted, bool):
            raise DataError(f"{w}.lifted: expected true or false, got {lifted!r}")
        transitions.append(
            Transition(
                a, b, q, _opt_num(t.get("foot_error_interp"), w), _opt_num(t.get("min_margin"), w), lifted
            )
        )
    kappa = doc.get("kappa")
    kappa = {} if kappa is None else kappa
    if not isinstance(kappa, dict):
        raise DataError(f"{source}: kappa must be an object {{base: value}}, got {type(kappa).__name__}")
    kappa = {str(k): _num(v, f"{source}: kappa.{k}") for k, v in kappa.items()}
    seed = doc.get("seed")
    if seed is not None:
        seed = _int(seed, f"{source}: seed")
    solver = doc.get("solver")
    if solver is not None and not isinstance(solver, dict):
        raise DataError(f"{source}: solver must be an object {{name: value}}, got {type(solver).__name__}")
    settings = doc.get("settings")
    if settings is not None and not isinstance(settings, dict):
        raise DataError(
            f"{source}: settings must be an object {{name: value}}, got {type(settings).__name__}"
        )
    for line in unknown_settings(settings or {}, SETTINGS_KEYS, SAFETY_KEYS, source):
        warn(line)
    plan = Plan(
        robot=str(robot),
        base=str(base),
        joint_names=list(names),
        placements=placements,
        postures=postures,
        transitions=transitions,
        kappa=kappa,
        solver=solver or {},
        seed=seed,
        settings=settings or {},
        params=_opt_str(doc.get("params"), f"{source}: params") or "sim",
        robot_file=_opt_str(doc.get("robot_file"), f"{source}: robot_file"),
    )
    return plan


def _check_durations(move_s: float, hold_s: float, where: str) -> None:
    """One rule for reading and writing: a posture is held for some time and reached in non-negative time."""
    if not (move_s >= 0 and hold_s > 0):
        raise DataError(f"{where}: move_s must be ≥ 0 and hold_s > 0 (s)")


def validate(plan: Plan) -> None:
    """Structural checks of an in-memory plan (shapes, finiteness, references, durations)."""
    nq = len(plan.joint_names)
    pl_ids = {p.index for p in plan.placements}
    for p in plan.postures:
        _check_durations(p.move_s, p.hold_s, f"posture {p.index}")
        q = np.asarray(p.q, dtype=float)
        if q.shape != (nq,):
            raise DataError(f"posture {p.index}: {q.size} joint angles for {nq} joint names")
        if not np.all(np.isfinite(q)):
            raise DataError(f"posture {p.index}: joint angles contain NaN or infinite values")
        if p.placement not in pl_ids:
            raise DataError(f"posture {p.index}: placement {p.placement} is not defined")
    for t in plan.transitions:
        if np.asarray(t.q).ndim != 2 or np.asarray(t.q).shape[1] != nq:
            raise DataError(f"transition {t.from_index}→{t.to_index}: waypoints must be (K, {nq})")


def load_plan(path: str | pathlib.Path, model=None) -> Plan:
    """Read and validate a plan file; with `model`, also check it was made for that robot's joints."""
    path = pathlib.Path(path)
    doc = read_json(path, "a posture plan")
    plan = plan_from_dict(doc, str(path))
    if model is not None:
        check_compatible(plan, model, str(path))
    return plan


def check_compatible(plan: Plan, model, source: str = "plan") -> None:
    """DataError unless the plan's robot, joint names and base match `model`."""
    if plan.robot != model.name:
        raise DataError(f"{source}: plan is for robot {plan.robot!r}, not {model.name!r}")
    if list(plan.joint_names) != list(model.joint_names):
        raise DataError(
            f"{source}: plan joint names {plan.joint_names} do not match robot {model.name!r} ({model.joint_names})"
        )
    if plan.base not in model.bases:
        raise DataError(
            f"{source}: plan base {plan.base!r} is not a base of {model.name!r} ({sorted(model.bases)})"
        )


def plan_required_margin(plan: Plan) -> float:
    """The CoP margin (m) the plan was designed to keep (settings `required_margin` or `margin`, else 0): the one
    reading of it, shared by the executor (`drivers.setpoints`), `plan check`, `plan augment` and `plan show`."""
    s = plan.settings or {}
    return settings_number(s.get("required_margin", s.get("margin", 0.0)), "required margin")


def settings_number(v: Any, what: str) -> float:
    """A number of a plan's settings (absent or null: 0), DataError naming it when it is not a finite number."""
    try:
        x = float(v if v is not None else 0.0)
    except (TypeError, ValueError):
        x = float("nan")
    if not math.isfinite(x):
        raise DataError(
            f"plan settings: {what} is {v!r}; margins, shares, uncertainties and σ must be finite numbers"
        )
    return x


def unknown_settings(settings: dict, known: frozenset, safety: frozenset, source: str) -> list[str]:
    """One line per key of a plan's `settings` that is not in `known` (the keys poise writes or reads), naming
    the closest known key (difflib), said to be a safety bound when it is in `safety`: a warning, not a
    refusal, so that plans from newer versions still load."""
    out = []
    for key in sorted(str(k) for k in settings if k not in known):
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = ""
        if close:
            bound = ", a safety bound the plan is checked and run with" if close[0] in safety else ""
            hint = f" (did you mean {close[0]!r}{bound}?)"
        out.append(f"{source}: settings key {key!r} is not one poise reads, ignored{hint}")
    return out


_WARNED: set[str] = set()


def warn(line: str) -> None:
    """A one-line warning on stderr, once per process (a plan may be read again by the same command)."""
    if line not in _WARNED:
        _WARNED.add(line)
        print(f"warning: {line}", file=sys.stderr)
