"""The feet apart in NLP form (robots.stance: a separating line's rows, the placement rows the single-support
designer bounds at its start) agree with the shapely check `balance` / `check_posture` use."""

from __future__ import annotations

from pathlib import Path

import casadi as ca
import numpy as np
import pytest
from conftest import tulip_with_stance
from shapely.geometry import Polygon

from formats.errors import DataError
from robots.registry import get_model
from robots.stance import (
    balance,
    feet_gap_problems,
    other_pose,
    other_pose_sym,
    placed_corners,
    placement_function,
    placement_line,
    placement_problems,
    placement_row_bounds,
    random_double_support,
    separating_line,
    separation_bounds,
    separation_sym,
    sole_rects,
)
from robots.stance_spec import FEET_GAP, stance_spec

# where the former test design (tests/test_single_support_excitation.py, before the start rows) held the left
# sole at its start: over the right one, so standing on both the feet overlapped (x, y m, yaw rad)
FORMER_START = (0.2145, -0.1315, -0.3983)


def _rows(base_xy: np.ndarray, other_xy: np.ndarray, line) -> np.ndarray:
    """`separation_sym` evaluated at a numeric line."""
    return np.array([float(ca.DM(r)) for r in separation_sym([ca.DM(v) for v in base_xy],
                     [ca.DM(v) for v in other_xy], *line)])  # fmt: skip


def _within(v: np.ndarray, lo, hi, tol: float = 1e-12) -> bool:
    return bool(np.all(v >= np.asarray(lo) - tol) and np.all(v <= np.asarray(hi) + tol))


def test_the_best_line_proves_shapelys_gap(tulip):
    """Random placements of the left sole around the right one: the best line's gap is shapely's distance
    (disjoint; no direction of a 1° scan does better) or ≤ 0 (overlapping; no direction separates them), its
    rows sit exactly gap/2 either side, and any line whose rows are within the bounds of a gap proves that gap."""
    rb, ro = sole_rects(tulip, "right")
    rng = np.random.default_rng(5)
    scan = np.stack([np.cos(a := np.linspace(-np.pi, np.pi, 361)), np.sin(a)], axis=1)
    seen = set()
    for pose in rng.uniform([-0.3, -0.3, -np.pi], [0.5, 0.4, np.pi], (300, 3)):
        other = placed_corners(ro, pose)
        a, b = Polygon(rb), Polygon(other)
        phi, c, gap = separating_line(rb, other)
        seen.add(a.intersects(b))
        assert gap <= 0 if a.intersects(b) else gap == pytest.approx(a.distance(b), abs=1e-12)
        best = ((other @ scan.T).min(axis=0) - (rb @ scan.T).max(axis=0)).max()  # of the scan's directions
        assert best <= (0.0 if a.intersects(b) else gap + 1e-12)
        rows = _rows(rb, other, (phi, c))
        assert min(-rows[:4].max(), rows[4:].min()) == pytest.approx(gap / 2, abs=1e-12)
        line = np.array([phi, c]) + rng.normal(0.0, [0.3, 0.03])  # near the best: often proving a gap
        if _within(_rows(rb, other, line), *separation_bounds(0.01)):
            assert not a.intersects(b) and a.distance(b) >= 0.01 - 1e-12
    assert seen == {True, False}


def test_standing_postures_gap_is_balances(tulip):
    """Flat double-support postures: the soles placed at `other_pose` are `balance`'s feet, the best line's gap
    its feet_gap."""
    rb, ro = sole_rects(tulip, "right")
    for q in random_double_support(tulip, 3, np.random.default_rng(2), base="right"):
        gap = separating_line(rb, placed_corners(ro, other_pose(tulip, q, base="right")))[2]
        b = balance(tulip, q, base="right")
        assert not b.feet_overlap and gap == pytest.approx(b.feet_gap, abs=1e-9)


def test_other_pose_sym_is_other_pose(tulip):
    q = ca.SX.sym("q", tulip.nq)
    f = ca.Function("pose", [q], [other_pose_sym(tulip, q, "sim", "right")])
    for qk in np.random.default_rng(3).uniform(tulip.lower, tulip.upper, (20, tulip.nq)):
        assert np.asarray(f(qk)).ravel() == pytest.approx(other_pose(tulip, qk, "sim", "right"), abs=1e-12)


def test_placement_rows_refuse_the_former_start(tulip):
    """The designer's start rows: the former design's start (left sole over the right one, y below the
    description's −0.1 m) is outside their bounds for every line; a standing posture's placement inside."""
    lo, hi = placement_row_bounds(tulip, "right")
    rows = placement_function(tulip, "right")
    bad = np.asarray(rows(FORMER_START, placement_line(tulip, "right", FORMER_START))).ravel()
    assert not _within(bad[3:], lo[3:], hi[3:]) and bad[1] < lo[1]
    q = random_double_support(tulip, 1, np.random.default_rng(2), base="right")[0]
    pose = other_pose(tulip, q, base="right")
    assert _within(np.asarray(rows(pose, placement_line(tulip, "right", pose))).ravel(), lo, hi)
    # the box is the description's, stated for its base: none for the other base
    assert np.all(np.isinf(placement_row_bounds(tulip, "left")[0][:3]))


def _with_gap(tmp_path: Path, gap: str) -> Path:
    """A copy of the TUlip description whose [stance] says feet_gap = `gap`."""
    return tulip_with_stance(tmp_path, feet_gap=gap)


def test_feet_gap_comes_from_the_description(tulip, tmp_path):
    """[stance] feet_gap (m), else FEET_GAP; a negative one refused, naming the robot and key."""
    assert stance_spec(tulip).feet_gap == FEET_GAP
    for gap in ("0.05", "-1"):
        robot = _with_gap(tmp_path, gap)
        model = get_model(str(robot))
        if gap == "-1":
            with pytest.raises(DataError, match="feet_gap must be a distance ≥ 0"):
                stance_spec(model)
        else:
            assert stance_spec(model).feet_gap == 0.05
            assert placement_row_bounds(model, "right")[0][-1] == 0.025


def test_a_ground_pose_outside_the_placement_box_is_named_with_the_box(tulip):
    """`placement_problems`: the box `placement_row_bounds` gives the designer ([stance], for its base), checked
    at a numeric pose — inside (to PLACE_TOL) nothing; outside one line naming the pose, the box and the
    coordinates out of range; the other base has no box."""
    lo, hi = placement_row_bounds(tulip, "right")
    inside = (0.087, 0.2516, np.radians(5.0))
    assert placement_problems(tulip, "right", inside) == []
    assert placement_problems(tulip, "right", (hi[0] + 5e-7, lo[1] - 5e-7, hi[2])) == []  # within PLACE_TOL
    (msg,) = placement_problems(tulip, "right", (0.087, hi[1] + 0.05, np.radians(97.4)))
    assert msg == (
        "the sole_l sole's ground pose (x 87.0 mm, y 550.0 mm, yaw 97.4 deg) is outside the placement box of the "
        "tulip description ([stance] placement_x [-750, 750] mm, placement_y [-100, 500] mm, placement_yaw_deg "
        "[-90, 90] deg): y and yaw out of range"
    )
    (msg,) = placement_problems(tulip, "right", (lo[0] - 0.01, 0.25, 0.0))
    assert msg.endswith("): x out of range")
    assert placement_problems(tulip, "left", (5.0, -5.0, 3.0)) == []


def test_soles_closer_than_the_descriptions_feet_gap_are_named_with_it(tulip, tmp_path):
    """`feet_gap_problems`: the gap `placement_row_bounds` gives the designer ([stance] feet_gap), measured by the
    best separating line at a numeric pose — at least that apart (to PLACE_TOL) nothing; closer, one line naming
    the pose, the soles' gap and the description's; overlapping (the former start) said so."""
    rb, ro = sole_rects(tulip, "right")
    pose = (0.087, 0.2516, np.radians(5.0))
    gap = Polygon(rb).distance(Polygon(placed_corners(ro, pose)))
    assert gap > 0.05 and feet_gap_problems(tulip, "right", pose) == []  # FEET_GAP, 2 mm
    for k, (more, refused) in enumerate(((5e-7, False), (5e-6, True))):
        (tmp_path / str(k)).mkdir()
        model = get_model(str(tulip_with_stance(tmp_path / str(k), feet_gap=repr(float(gap + more)))))
        assert bool(feet_gap_problems(model, "right", pose)) is refused
    (msg,) = feet_gap_problems(model, "right", pose)
    assert msg == (
        f"the sole_l sole's ground pose (x 87.0 mm, y 251.6 mm, yaw 5.0 deg) is {gap * 1000:.1f} mm from the sole_r "
        f"sole, closer than the tulip description's [stance] feet_gap {(gap + 5e-6) * 1000:.4g} mm"
    )
    (msg,) = feet_gap_problems(tulip, "right", FORMER_START)
    assert msg.endswith("touches or overlaps the sole_r sole, closer than the tulip description's [stance] "
                        "feet_gap 2 mm")  # fmt: skip


@pytest.mark.parametrize(
    ("robot", "extra", "gap"),
    [("tulip", [], FEET_GAP), ("gap", [], 0.05), ("gap", ["--feet-gap", "0.01"], 0.01)],
)
def test_the_posture_designer_keeps_the_descriptions_feet_gap(tmp_path, monkeypatch, robot, extra, gap):
    """`plan postures` without --feet-gap designs with the description's [stance] feet_gap (FEET_GAP where it
    names none); --feet-gap overrides it. The starts' settings are caught before any is run."""
    from design.problems import Settings
    from poise.cli import main

    seen = []

    def caught(specs, *args, **kwargs):
        seen.extend(specs)
        raise DataError("caught before designing")

    monkeypatch.setattr("design.planner.run_starts", caught)
    name = str(_with_gap(tmp_path, "0.05")) if robot == "gap" else robot
    args = ["plan", "postures", name, "--postures", "14", "--placements", "2", "--out", f"{tmp_path}/p.json"]
    assert main(args + extra) == 2 and seen
    assert all(spec.settings.feet_gap == gap for spec in seen)
    model = get_model(name)  # the library's default, as the CLI's
    assert Settings().resolved(model).feet_gap == (gap if not extra else 0.05)


def test_placements_are_drawn_the_descriptions_feet_gap_apart(tmp_path):
    """`sample_placement` without a feet_gap keeps the description's [stance] feet_gap, as the designers do:
    TUlip's placement box holds many poses with the soles closer than 0.3 m, and none is drawn for a description
    asking for 0.3 m; an explicit feet_gap (0 here) still wins."""
    from design.sampler import sample_placement

    model = get_model(str(_with_gap(tmp_path, "0.3")))
    rb, ro = sole_rects(model, "right")
    rng = np.random.default_rng(7)
    gaps = [
        Polygon(rb).distance(Polygon(placed_corners(ro, sample_placement(model, rng)))) for _ in range(40)
    ]
    assert min(gaps) >= 0.3
    free = [sample_placement(model, rng, feet_gap=0.0) for _ in range(40)]
    assert min(Polygon(rb).distance(Polygon(placed_corners(ro, pose))) for pose in free) < 0.3
