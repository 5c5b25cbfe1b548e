"""`make bench`'s excitation comparison kept runnable: the FIGAROH-style baseline (splines through waypoints,
cond(W) and the limits by finite differences) and one poise start, on a small UR5 problem, report what
bench/results/trajectories.json holds for each side. The figures themselves are the benchmark's (README)."""

from __future__ import annotations

import json
import math

import pytest

from bench.trajectories import UR5, _ours, baseline
from robots.registry import get_model
from trajectories.excitation import ExcitationSettings

FIELDS = {"kappa", "kappa_scaled", "iterations", "seconds", "seconds_per_iteration", "feasible", "problems"}


@pytest.fixture(scope="module")
def sides():
    model = get_model(str(UR5))
    s = ExcitationSettings(
        period=4.0, duration=4.0, harmonics=2, samples=12, max_iter=5, self_collision=False
    )
    return baseline(model, s, 3, 0, 5), _ours(model, s, 0)


def test_both_sides_report_the_benchmarks_fields(sides):
    figaroh, ours = sides
    assert "finite differences" in figaroh["method"]
    for side in sides:
        assert FIELDS <= side.keys()
        assert 1.0 <= side["kappa_scaled"] < math.inf and 1.0 <= side["kappa"] < math.inf
        assert side["seconds_per_iteration"] == pytest.approx(side["seconds"] / max(1, side["iterations"]))
        assert isinstance(side["feasible"], bool) and side["feasible"] == (not side["problems"])
    assert 1 <= figaroh["iterations"] <= 5  # the cap given, IPOPT's own count
    json.loads(json.dumps({"baseline": figaroh, "poise": [ours]}, default=float))  # as bench writes it
