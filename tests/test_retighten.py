"""`trajectories.retighten.solve_and_retighten`: a design whose check finds a bound exceeded is solved again with
that bound moved in; when the moved bound leaves the problem no room, the last design comes back with its check
saying so (the user never set the moved bound, so an error about it would mislead)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from trajectories.retighten import RETIGHTEN, NoRoomError, solve_and_retighten


@dataclass
class Check:
    margin: float
    problems: list[str] = field(default_factory=list)


def _design(solved: list[float], room: float = 0.075):
    """A design that misses its ZMP margin by 30 mm on the fine grid and refuses a margin (+ 5 mm) ≥ `room` (m),
    as the single-support design does beyond its sole's deepest point."""

    def solve(margin: float):
        if margin + 0.005 >= room:
            raise NoRoomError(f"a ZMP margin of {1000 * margin:.1f} mm leaves no room")
        solved.append(margin)
        return "prob", margin, 10, "ok", [{"margin": margin}]

    def finish(prob, x, iterations, status, stages):
        found = x - 0.03
        return {"x": x, "iterations": iterations}, Check(
            found, [] if found >= 0.04 else [f"ZMP margin {1000 * found:.1f} mm < required 40.0 mm"]
        )

    def tighten(margin: float, check: Check):
        return None if check.margin >= 0.04 else margin + 0.04 - check.margin

    return solve, finish, tighten


def test_a_moved_bound_without_room_returns_the_last_design_with_its_problems():
    solved: list[float] = []
    result, check = solve_and_retighten(*_design(solved), 0.04)
    assert solved == [0.04]  # the moved margin (70 mm + 5 mm buffer ≥ 75 mm) was never solved
    assert result["x"] == 0.04
    assert check.problems[0].startswith("ZMP margin 10.0 mm")
    assert "left no room" in check.problems[-1] and "70.0 mm leaves no room" in check.problems[-1]


def test_bounds_with_room_are_moved_in_and_solved_again():
    solved: list[float] = []
    result, check = solve_and_retighten(*_design(solved, room=1.0), 0.04)
    assert solved == [0.04, pytest.approx(0.07)] and len(solved) <= RETIGHTEN + 1
    assert not check.problems and result["iterations"] == 20
