"""A design's bounds moved in where its own fine-grid check finds them exceeded, and the design solved again.

The NLPs bound the ZMP margin, a lifted sole's height and tilt, a sole's load share or the rates of the coordinates
a closed chain solves for at their grid samples only, with a buffer for the motion between them. Where the 2 ms check still finds a bound exceeded, the design is solved
again from its start with that bound moved in by the excess + TIGHTEN_SLACK, at most RETIGHTEN times: a planner
never hands out a plan that fails its own check when a little more room would do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from formats.errors import DataError


class NoRoomError(DataError):
    """A design's bound leaves its problem no feasible point (a ZMP margin beyond the support polygon's depth)."""


RETIGHTEN = 2
TIGHTEN_SLACK = (
    0.002  # m (seed 13 of the single-support test's options: lifted 251 mm against a 250 mm ceiling)
)
SHARE_SLACK = 0.01  # of a load share, beyond its excess
SHARE_TOLERANCE = 1e-3  # a load share this far below the required one still passes the check
RATE_SLACK = 0.02  # of a velocity or acceleration limit, beyond its excess
RATE_TOLERANCE = 1e-6  # the check's own: a ratio to a limit this far above 1 still passes


def moved_rate_fractions(design, check) -> dict[str, float]:
    """The design's velocity and acceleration fractions (of the limits) scaled down by how far the fine-grid check
    found a joint beyond its limit, less RATE_SLACK: {"velocity_fraction": …} for each exceeded, {} if none was."""
    moved = {}
    for kind in ("velocity", "acceleration"):
        ratio = getattr(check, f"{kind}_ratio")
        if ratio > 1.0 + RATE_TOLERANCE:
            moved[f"{kind}_fraction"] = getattr(design, f"{kind}_fraction") / ratio - RATE_SLACK
    return moved


def moved_zmp_margin(design_margin: float, plan_margin: float, check) -> float:
    """The design's ZMP margin moved in by what the fine-grid check (`verify.TrajectoryCheck`) found short of the
    plan's, plus TIGHTEN_SLACK; unchanged where the check keeps the plan's."""
    found = check.min_zmp_margin_m
    if found is None or found >= plan_margin:
        return design_margin
    return design_margin + plan_margin - found + TIGHTEN_SLACK


def solve_and_retighten(
    solve: Callable[[Any], tuple],
    finish: Callable[..., tuple],
    tighten: Callable[[Any, Any], Any | None],
    bounds: Any,
) -> tuple:
    """`solve(bounds)` → (problem, x, iterations, status, stages); `finish(problem, x, iterations, status, stages)`
    → (result, check); `tighten(bounds, check)` → the bounds moved in, or None when the check keeps the plan's.
    Returns the last (result, check); the stages of a re-solve are marked `tightened`. Bounds moved in so far that
    the problem has no room left (a ZMP margin beyond the polygon's depth: `solve` raises NoRoomError) end the loop
    with the last design, its check's problems saying so — not with an error about bounds the user never set.
    (Re-solved warm from the first solution's sharp stage alone, seed 13's single-support κ went 395 → 42 229:
    each re-solve starts over.)"""
    prob, x, iterations, status, stages = solve(bounds)
    for _ in range(RETIGHTEN):
        result, check = finish(prob, x, iterations, status, stages)
        moved = tighten(bounds, check)
        if moved is None:
            return result, check
        bounds = moved
        try:
            prob, x, extra, status, again = solve(bounds)
        except NoRoomError as exc:
            check.problems.append("moving the design's bounds in by what its fine-grid check found short left no "
                                  f"room ({exc}): no design keeps the plan's bounds between the grid's samples")  # fmt: skip
            return result, check
        iterations += extra
        stages = stages + [{**st, "tightened": True} for st in again]
    return finish(prob, x, iterations, status, stages)
