"""How a legged robot stands for static CoP experiments, read from its description's [stance] table.

Everything static posture design needs to know about a particular robot (default base, foot-placement box,
initial-posture sampling box, neutral posture) lives here; design/ never names a foot, a joint or a length.
Keys a description leaves out get defaults scaled by the robot's own leg length (see `stance_spec`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from formats.errors import DataError
from robots.memo import per_model
from robots.tree import RobotModel

FEET_GAP = 0.002  # m between the soles standing on both boards, where the description's [stance] names none


@dataclass(frozen=True)
class StanceSpec:
    """The stance of a legged robot: bases, placement bounds (m, m, rad), initial-posture sampling box."""

    base: str  # default base (stance sole) of plans and recordings
    other: str | None  # the base name of the other foot, if the description names one
    placement_bounds: tuple[
        tuple[float, float], tuple[float, float], tuple[float, float]
    ]  # x, y (m), yaw (rad)
    centred_min_y: float | None  # centred-CoM problem: lower bound on the other foot's y (m)
    com_z: tuple[float, float]  # CoM height box of random initial postures (m)
    torso_angles_deg: tuple[float, float]  # torso roll/pitch/yaw box of random initial postures (deg)
    torso: str  # link whose orientation the initial-posture IK sets
    neutral: dict[str, float]  # joint -> coefficient: neutral posture = bend × coefficient (rad)
    neutral_bend: tuple[float, float]  # range of the random bend of IK start postures (rad)
    feet_gap: float = FEET_GAP  # m the soles keep apart standing on both boards (a single-support start)

    def neutral_posture(self, model: RobotModel, bend: float) -> np.ndarray:
        """The neutral posture for one bend (rad), clipped to the joint limits."""
        q = np.zeros(model.nq)
        for name, c in self.neutral.items():
            q[model.joint_names.index(name)] = c * bend
        return np.clip(q, model.lower, model.upper)


def default_base(model: RobotModel) -> str:
    """The robot's default base: the stance's declared base, else the first named base."""
    spec = model.stance if isinstance(model.stance, dict) else {}
    base = spec.get("base")
    if base is not None:
        if str(base) not in model.bases:
            raise DataError(
                f"model {model.name!r}: stance base {base!r} is not among [bases] {sorted(model.bases)}"
            )
        return str(base)
    if not model.bases:
        raise DataError(f"model {model.name!r} names no bases (soles); static posture design needs two")
    return next(iter(model.bases))


def declared_feet_gap(model: RobotModel) -> float | None:
    """The description's own [stance] feet_gap (m, validated by `stance_spec`); None where it names none (the
    single-support designer and weight shifts then keep FEET_GAP, `StanceSpec.feet_gap`)."""
    spec = model.stance if isinstance(model.stance, dict) else {}
    return stance_spec(model).feet_gap if "feet_gap" in spec else None


def resolve_base(model: RobotModel, base: str | None) -> str:
    """`base`, or the model's default base when None."""
    return default_base(model) if base is None else base


def other_base(model: RobotModel, base: str | None = None) -> str:
    """The name of the other foot's base (bipeds: the one named base on a different sole)."""
    base = resolve_base(model, base)
    site = model.base_site(base).name
    others = [b for b, s in model.bases.items() if s != site]
    if len(others) != 1:
        raise DataError(
            f"model {model.name!r} needs exactly one other named base than {base!r} (has {sorted(model.bases)})"
        )
    return others[0]


def design_params(model: RobotModel) -> str:
    """The parameter set design uses by default: the description's main (URDF) set, listed first."""
    return next(iter(model.params))


def _pair(spec: dict, key: str, default: tuple[float, float], scale: float = 1.0) -> tuple[float, float]:
    v = spec.get(key)
    if v is None:
        return default
    try:
        lo, hi = (float(x) * scale for x in v)
    except (TypeError, ValueError):
        raise DataError(f"[stance] {key} must be two numbers [low, high], got {v!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise DataError(f"[stance] {key} must be finite with low ≤ high, got {v!r}")
    return lo, hi


def _leg_length(model: RobotModel, base: str) -> float:
    """Height of the root above the base sole in the zero posture (m): the scale of the default boxes."""
    from robots.kinematics import site_pose

    q = np.clip(np.zeros(model.nq), model.lower, model.upper)
    h = float(np.linalg.norm(site_pose(model, q, design_params(model), model.root, base)[1]))
    return h if h > 0 else 1.0


def stance_spec(model: RobotModel) -> StanceSpec:
    """The [stance] table of a model's description, validated (DataError naming the robot and key), with
    leg-length-scaled defaults for what it leaves out."""
    try:
        return _stance_spec(model)
    except DataError as exc:
        msg = str(exc)
        raise DataError(msg if msg.startswith("model ") else f"model {model.name!r}: {msg}") from None


@per_model
def _stance_spec(model: RobotModel) -> StanceSpec:
    spec = model.stance if isinstance(model.stance, dict) else {}
    base = default_base(model)
    other = spec.get("other")
    if other is not None and str(other) not in model.bases:
        raise DataError(
            f"model {model.name!r}: stance other {other!r} is not among [bases] {sorted(model.bases)}"
        )
    h = _leg_length(model, base)
    bounds = (
        _pair(spec, "placement_x", (-h, h)),
        _pair(spec, "placement_y", (-h, h)),
        _pair(spec, "placement_yaw_deg", (-math.pi / 2, math.pi / 2), math.pi / 180),
    )
    torso = str(spec.get("torso", model.root))
    if not model.has_link(torso):
        raise DataError(f"model {model.name!r}: stance torso {torso!r} is not a link")
    neutral = spec.get("neutral", {})
    if not isinstance(neutral, dict):
        raise DataError("[stance] neutral must be a table {joint = coefficient}")
    for name, c in neutral.items():
        if name not in model.joint_names:
            raise DataError(f"[stance] neutral names unknown joint {name!r}")
        if not isinstance(c, int | float) or isinstance(c, bool) or not math.isfinite(c):
            raise DataError(f"[stance] neutral.{name} must be a finite number")
    cmy = spec.get("centred_min_y")
    if cmy is not None and not (isinstance(cmy, int | float) and math.isfinite(cmy)):
        raise DataError(f"[stance] centred_min_y must be a number (m), got {cmy!r}")
    gap = spec.get("feet_gap", FEET_GAP)
    if not (isinstance(gap, int | float) and not isinstance(gap, bool) and math.isfinite(gap) and gap >= 0):
        raise DataError(f"[stance] feet_gap must be a distance ≥ 0 (m), got {gap!r}")
    return StanceSpec(
        base=base,
        other=None if other is None else str(other),
        placement_bounds=bounds,
        centred_min_y=None if cmy is None else float(cmy),
        com_z=_pair(spec, "com_z", (0.5 * h, 0.9 * h)),
        torso_angles_deg=_pair(spec, "torso_angles_deg", (-30.0, 30.0)),
        torso=torso,
        neutral={str(k): float(v) for k, v in neutral.items()},
        neutral_bend=_pair(spec, "neutral_bend", (0.0, 0.0)),
        feet_gap=float(gap),
    )
