"""Units accepted in recording headers, and the checks that catch a header contradicting its numbers."""

from __future__ import annotations

import math

import numpy as np

from formats.errors import DataError

ANGLE_UNITS = {"rad": 1.0, "deg": math.pi / 180.0}
LENGTH_UNITS = {"m": 1.0, "mm": 1e-3}
GRAVITY = 9.81  # m/s²: the models' gravity (robots.dynamics), and what a static accelerometer reads
STANDARD_GRAVITY = 9.80665  # m/s²: the kilogram-force the boards' kilograms are defined by


def check_angle_unit(raw: np.ndarray, unit: str, source: str, rad_limit: bool = True) -> None:
    """Refuse angles whose size contradicts the declared unit.

    Declared `deg` with every |value| ≤ 2π is a whole recording moving less than 6.3°: those are radians.
    Declared `rad` with values beyond 2π are degrees (skip with `rad_limit=False` where joints may wind).
    """
    peak = float(np.abs(raw).max()) if raw.size else 0.0
    if unit == "deg" and 0.0 < peak <= 2 * math.pi:
        raise DataError(
            f"{source}: angle_unit is deg but every joint angle is within ±{peak:.3g}: "
            "these look like radians; set '# angle_unit: rad'"
        )
    if unit == "rad" and rad_limit and peak > 2 * math.pi:
        raise DataError(
            f"{source}: joint angles up to {peak:.1f} — these look like degrees; set '# angle_unit: deg'"
        )


def check_length_unit(raw: np.ndarray, unit: str, source: str, what: str = "CoP values") -> None:
    """Refuse lengths whose size contradicts the declared unit (m vs mm) for a robot-sized quantity."""
    peak = float(np.abs(raw).max()) if raw.size else 0.0
    if unit == "m" and peak > 5.0:
        raise DataError(f"{source}: {what} up to {peak:.0f} — these look like mm; set '# length_unit: mm'")
    if unit == "mm" and 0.0 < peak < 1.0:
        raise DataError(
            f"{source}: length_unit is mm but all {what} are within ±{peak:.3g} mm: "
            "these look like metres; set '# length_unit: m'"
        )
