"""TUlip, the 12-joint biped of the seed thesis: loaded from its URDF and robot description in robots/data."""

from __future__ import annotations

from robots.registry import get_model
from robots.tree import RobotModel


def tulip() -> RobotModel:
    """The TUlip model with right-foot and left-foot bases (robots/data/tulip)."""
    return get_model("tulip")
