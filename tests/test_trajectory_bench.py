"""`make bench`'s excitation comparison kept runnable: the FIGAROH-style baseline (splines through waypoints,
cond(W) and the limits by finite differences) and one poise start, on a small UR5 problem and on TUlip standing on
both soles, report what bench/results/trajectories.json holds for each side. The figures themselves are the
benchmark's (README)."""

from __future__ import annotations

import json
import math

import pytest

from bench.trajectories import UR5, _ours, baseline, standing_baseline
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


def test_the_standing_baseline_is_checked_as_poise_designs_are(tulip):
    """The baseline on TUlip in double support (its closed chain solved at every sample, the ZMP and load-share rows
    by finite differences): its result carries the fields and the same fine-grid check (ZMP margin included)."""
    s = ExcitationSettings(period=4.0, duration=4.0, samples=16, max_iter=2, simplified=True,
                           motion="double-support", zmp_margin=0.06, load_share=0.25, velocity_fraction=0.3,
                           self_collision=False)  # fmt: skip
    figaroh = standing_baseline(tulip, s, 2, 3, 2)
    assert FIELDS <= figaroh.keys() and 1 <= figaroh["iterations"] <= 2
    assert 1.0 <= figaroh["kappa_scaled"] < math.inf
    assert figaroh["feasible"] == (not figaroh["problems"])
    margin = figaroh["min_zmp_margin_m"]
    assert math.isfinite(margin) and (
        margin >= 0.06 - 1e-4 or any("ZMP margin" in p for p in figaroh["problems"])
    )
