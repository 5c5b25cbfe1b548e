"""Design internals: surrogate vs true κ, exact margins vs shapely, small solves of problems 1 and 2."""

import numpy as np
import pytest
import shapely
from shapely.geometry import MultiPoint, Point

from design import geometry as geo
from design.criteria import design_matrix, kappa, surrogate
from design.greedy import greedy_augment
from design.problems import Settings, solve
from design.sampler import sample_posture_set
from design.uncertainty import left_pose, robust_margin
from robots.stance import balance, posture_problems, random_double_support
from robots.stance_spec import stance_spec


def test_surrogate_bounds_and_gradient(rng):
    H = rng.normal(size=(40, 25)) @ np.diag(np.logspace(0, 3, 25))
    k = kappa(H)
    assert k == pytest.approx(np.linalg.cond(H))
    for p in (2.0, 16.0, 64.0):
        f, g = surrogate(H, p)
        assert np.log(k) <= f <= np.log(k) + np.log(25) / p + 1e-12
        E = rng.normal(size=H.shape)
        h = 1e-6
        fd = (surrogate(H + h * E, p)[0] - surrogate(H - h * E, p)[0]) / (2 * h)
        assert np.sum(g * E) == pytest.approx(fd, rel=1e-5, abs=1e-8)


def test_surrogate_survives_ill_conditioning(rng):
    H = rng.normal(size=(30, 25))
    H[:, 3] = H[:, 4] * (1 + 1e-13)  # κ ~ 1e13: powers of HᵀH would overflow/lose everything
    f, g = surrogate(H, 64.0)
    assert np.isfinite(f) and np.all(np.isfinite(g))
    assert f == pytest.approx(np.log(kappa(H)), abs=np.log(25) / 64 + 1e-9)


def test_design_matrix_rank_and_columns(model, rng):
    q = random_double_support(model, 15, rng)
    H = design_matrix(model, q)
    assert H.shape == (30, 25)
    assert np.linalg.matrix_rank(H) == 25
    # Left-base H differs from right-base H by a rotation per posture: same singular values.
    assert kappa(design_matrix(model, q, "left")) == pytest.approx(kappa(H), rel=1e-9)


def test_hull_and_margin_expressions_match_shapely(model, rng):
    import casadi as ca

    for _ in range(20):
        pose = np.array([rng.uniform(-0.4, 0.4), rng.uniform(0.2, 0.5), rng.uniform(-1.5, 1.5)])
        pts = geo.all_corners(model, pose)
        hull = geo.hull_indices(pts)
        poly = MultiPoint(pts).convex_hull
        assert len(hull) == len(poly.exterior.coords) - 1
        verts = [ca.DM(v) for v in pts]
        point = np.array(poly.centroid.coords[0]) + rng.normal(scale=0.02, size=2)
        d = min(float(m) for m in geo.edge_margins_sym(verts, tuple(hull), ca.DM(point)))
        ref = poly.exterior.distance(Point(point)) * (1 if poly.contains(Point(point)) else -1)
        if ref > 0:
            assert d == pytest.approx(ref, abs=1e-12)


@pytest.fixture(scope="module")
def small_free(model):
    start = sample_posture_set(model, 15, 3, np.random.default_rng(5), margin=0.08)
    return start, solve(model, start, Settings(problem="free-com", sharpness=(4.0, 32.0)))


def test_initial_set_is_feasible(model, small_free):
    start, _ = small_free
    assert start.q.shape == (15, 12)
    for q in start.q:
        assert posture_problems(model, q, margin=0.08) == []


def test_problem1_small(model, small_free):
    start, res = small_free
    assert res.kappa < 0.7 * res.kappa_initial
    assert res.kappa == pytest.approx(kappa(design_matrix(model, res.postures.q)))
    margins = []
    for q, j in zip(res.postures.q, res.postures.placement, strict=True):
        assert posture_problems(model, q, margin=0.08) == []
        np.testing.assert_allclose(left_pose(model, q), res.postures.poses[j], atol=1e-7)
        margins.append(balance(model, q).margin)
    # The smooth constraint is active somewhere and agrees with shapely there to 1e-6 m.
    assert min(margins) == pytest.approx(0.08, abs=1e-6)


def test_problem2_small(model):
    s = Settings(problem="centred-com", sharpness=(4.0, 32.0))
    start = sample_posture_set(model, 15, 3, np.random.default_rng(2), centred=True)
    res = solve(model, start, s)
    assert res.kappa < res.kappa_initial
    for q, j in zip(res.postures.q, res.postures.placement, strict=True):
        pose = res.postures.poses[j]
        assert pose[1] >= stance_spec(model).centred_min_y - 1e-9
        pts = geo.all_corners(model, pose)
        np.testing.assert_allclose(balance(model, q).cop, geo.bbox_centre(pts), atol=1e-7)
        assert posture_problems(model, q, margin=0.0) == []


def test_robust_margin_closed_form_is_the_worst_case(model, rng):
    from design.criteria import base_model

    q = random_double_support(model, 1, rng, margin=0.05)[0]
    r = 0.003
    rm = robust_margin(model, q, r)
    bm = base_model(model, "right")
    R = bm.regressor(q)[:2]
    poly = geo.support_polygon(model, left_pose(model, q))
    u = rng.normal(size=(4000, bm.n))
    u = r * u / np.linalg.norm(u, axis=1, keepdims=True)
    cops = (R @ (bm.values("sim")[:, None] + u.T)).T
    sampled = shapely.distance(poly.exterior, shapely.points(cops)).min()
    assert rm <= sampled + 1e-12  # never optimistic
    assert rm == pytest.approx(balance(model, q).margin - r * max(
        np.linalg.norm(R.T @ n) for n in [np.array([np.cos(a), np.sin(a)]) for a in np.linspace(0, 2 * np.pi, 9)]
    ), abs=0.02)  # fmt: skip


def test_uncertainty_margin_in_optimiser(model):
    s = Settings(problem="free-com", uncertainty=0.002, sharpness=(8.0,))
    start = sample_posture_set(model, 15, 3, np.random.default_rng(7), margin=0.08 + 0.02)
    res = solve(model, start, s)
    for q in res.postures.q:
        assert robust_margin(model, q, 0.002) >= 0.08 - 1e-7
    assert res.kappa < res.kappa_initial


def test_greedy_picks_the_best_addition(model, rng):
    base = random_double_support(model, 14, rng)
    pool = random_double_support(model, 6, rng)
    res = greedy_augment(model, base, pool, 2)
    first = [kappa(design_matrix(model, np.vstack([base, pool[i]]))) for i in range(6)]
    assert res.chosen[0] == int(np.argmin(first))
    assert res.kappas[1] == pytest.approx(kappa(design_matrix(model, np.vstack([base, pool[res.chosen]]))))


def test_load_share_keeps_both_soles_loaded_and_plan_check_verifies_it(tmp_path, capsys):
    """--load-share f: every posture's CoP lies between the soles' centres with lever-rule share in [f, 1 − f]
    (a lightly loaded sole lifts or slides under stiff position servos: measured on the physics twin); plan
    check verifies it from the plan's settings and names a posture that breaks it."""
    import json

    from formats.plan import load_plan
    from poise.cli import main
    from robots.kinematics import com_position
    from robots.stance import lever_share
    from robots.tulip import tulip

    out = tmp_path / "p.json"
    argv = ["plan", "postures", "tulip", "--postures", "15", "--placements", "3", "--load-share", "0.3",
            "--seed", "2", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    model = tulip()
    plan = load_plan(out, model)
    assert plan.settings["load_share"] == 0.3
    shares = [
        lever_share(
            model, com_position(model, p.q, "sim", "right")[:2], plan.placement(p.placement).other_foot
        )
        for p in plan.postures
    ]
    assert min(shares) >= 0.3 - 1e-6 and max(shares) <= 0.7 + 1e-6
    assert main(["plan", "check", str(out)]) == 0
    doc = json.loads(out.read_text())
    doc["settings"]["load_share"] = 0.49  # stricter than designed: some posture must now fail
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["plan", "check", str(bad)]) == 1
    assert "load share" in capsys.readouterr().out
