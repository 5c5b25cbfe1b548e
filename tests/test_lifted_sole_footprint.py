"""Standing on one sole, the lifted sole keeps beside the standing one (seen from above, the stance's feet gap):
without collision geometry, the rule that keeps it from passing over the standing foot (`robots.one_sole`, the one
check of plan check, the run's pre-flight and its weight shifts)."""

from __future__ import annotations

import numpy as np
from shapely.geometry import Polygon

from robots.kinematics import site_pose
from robots.one_sole import one_sole, one_sole_problems, placed_sole_corners, sole_polygon
from robots.stance import other_site
from robots.stance_spec import stance_spec


def _footprints(model, q):
    other = other_site(model, "right")
    return placed_sole_corners(model, other, *site_pose(model, q, "sim", other, "right"))[..., :2]


def test_a_sole_over_the_standing_one_is_named(tulip):
    rng = np.random.default_rng(7)
    q = rng.uniform(np.maximum(tulip.lower, -1.0), np.minimum(tulip.upper, 1.0), (600, tulip.nq))
    z = np.zeros_like(q)
    s = one_sole(tulip, q, z, z, "right", other_site(tulip, "right"), "sim")
    base = sole_polygon(tulip, "right")
    shapely_apart = np.array([base.distance(Polygon(c).convex_hull) for c in _footprints(tulip, q)])
    np.testing.assert_allclose(s.apart, shapely_apart, atol=1e-9)
    assert s.feet_gap == stance_spec(tulip).feet_gap
    over, beside = np.flatnonzero(s.apart == 0), np.flatnonzero(s.apart > 0.05)
    assert over.size and beside.size  # random postures put it both ways
    k = over[0]
    assert Polygon(_footprints(tulip, q[[k]])[0]).intersects(base)
    one = one_sole(tulip, q[[k]], z[[k]], z[[k]], "right", other_site(tulip, "right"), "sim")
    problems = one_sole_problems(
        one, "right", "left", -1.0, -1.0
    )  # no balance or height asked: only the feet
    assert len(problems) == 1 and "the left sole passes over the right sole, seen from above" in problems[0]
    far = one_sole(tulip, q[[beside[0]]], z[[k]], z[[k]], "right", other_site(tulip, "right"), "sim")
    assert one_sole_problems(far, "right", "left", -1.0, -1.0) == []
    near = far.__class__(**{**far.__dict__, "feet_gap": float(far.apart[0]) + 0.01})  # a wider gap asked
    msg = one_sole_problems(near, "right", "left", -1.0, -1.0)
    assert len(msg) == 1 and f"comes {far.apart[0] * 1000:.1f} mm from the right sole" in msg[0]
