"""Ellipsoidal ϑ_b uncertainty from a static identification result: loading, design, check, worst case."""

import json

import numpy as np
import pytest
import shapely

from design import geometry as geo
from design.augment import augment_plan
from design.criteria import base_model
from design.planner import build_plan
from design.problems import Settings, solve
from design.sampler import sample_posture_set
from design.uncertainty import left_pose, load_ellipsoid, nominal_cop, robust_margin
from design.verify import check_plan
from formats.errors import DataError
from formats.plan import load_plan, save_plan
from identify.static import StaticCoMEstimator, fit_to_json
from identify.synthetic import simulate_static
from robots.params_io import perturbed


@pytest.fixture(scope="module")
def result_file(model, tmp_path_factory):
    truth = perturbed(model.params["sim"], np.random.default_rng(3), name="truth")
    rec = simulate_static(model, 30, truth, cop_noise=0.004, seed=5)
    est = StaticCoMEstimator(model)
    est.fit(rec)
    path = tmp_path_factory.mktemp("ident") / "result.json"
    path.write_text(json.dumps(fit_to_json(est.result_, est.base_model_)))
    return path


def boundary_samples(ell, rng, n):
    """Parameter vectors on the ellipsoid's boundary: ϑ₀ + L u, ‖u‖ = 1, Σ = L Lᵀ."""
    lam, V = np.linalg.eigh(ell.sigma_matrix)
    L = V * np.sqrt(np.clip(lam, 0, None))
    u = rng.normal(size=(n, len(lam)))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return np.array(ell.theta_m) + u @ L.T


def test_load_ellipsoid_covariance(model, result_file):
    ell = load_ellipsoid(str(result_file), model, "right", 3.0)
    d = json.loads(result_file.read_text())
    syms = list(ell.symbols)
    cov = np.array(ell.cov_m2)
    est = d["correlation"]["symbols"]
    se = {p["symbol"]: p.get("se_m") for p in d["parameters"]}
    for a in est:  # diagonal = se², correlations reproduced
        assert cov[syms.index(a), syms.index(a)] == pytest.approx(se[a] ** 2, rel=1e-12)
    i, j = syms.index(est[0]), syms.index(est[1])
    rho = d["correlation"]["matrix"][0][1]
    assert cov[i, j] == pytest.approx(rho * se[est[0]] * se[est[1]], rel=1e-9, abs=1e-18)
    for k, p in enumerate(d["parameters"]):  # not estimated: no uncertainty
        if not p["estimated"]:
            assert not np.any(cov[k]) and not np.any(cov[:, k])
    np.testing.assert_allclose(ell.theta_m, [p["value_m"] for p in d["parameters"]])


def test_load_ellipsoid_rejects_bad_files(model, tmp_path, result_file):
    bad = tmp_path / "x.json"
    bad.write_text('{"format": "poise parameter set"}')
    with pytest.raises(DataError, match="not a static identification result"):
        load_ellipsoid(str(bad), model, "right", 3.0)
    with pytest.raises(DataError, match="cannot read"):
        load_ellipsoid(str(tmp_path / "missing.json"), model, "right", 3.0)
    with pytest.raises(DataError, match="sigma"):
        load_ellipsoid(str(result_file), model, "right", -1.0)


@pytest.fixture(scope="module")
def ellipsoid_plan(model, result_file):
    """A tiny plan (15 postures in 3 placements) designed over the 3σ ellipsoid of `result_file`."""
    ell = load_ellipsoid(str(result_file), model, "right", 3.0)
    s = Settings(problem="free-com", margin=0.06, ellipsoid=ell, sharpness=(8.0,), max_iter=200)
    start = sample_posture_set(model, 15, 3, np.random.default_rng(4), margin=0.09)
    res = solve(model, start, s)
    return build_plan(model, res.postures, s, seed=4, move_s=30, hold_s=60, solver={}, transitions=False)


def test_plan_keeps_margin_on_the_ellipsoid_boundary(model, result_file, ellipsoid_plan, tmp_path):
    ell = load_ellipsoid(str(result_file), model, "right", 3.0)
    save_plan(ellipsoid_plan, tmp_path / "plan.json")
    plan = load_plan(tmp_path / "plan.json", model)
    assert plan.settings["ellipsoid"]["sigma"] == 3.0
    report = check_plan(model, plan)
    assert report.ok, report.problems()
    bm = base_model(model, "right")
    rng = np.random.default_rng(0)
    thetas = boundary_samples(ell, rng, 3000)
    worst = []
    S = ell.sigma_matrix
    for p in plan.postures:
        R = bm.regressor(p.q)[:2]
        poly = geo.support_polygon(model, left_pose(model, p.q))
        xy = np.array(poly.exterior.coords)
        extreme = []  # per hull edge, the boundary vector ϑ₀ − Σ Rᵀn / √(nᵀ R Σ Rᵀ n) that pushes the CoP out
        for a, b in zip(xy[:-1], xy[1:], strict=True):
            n0 = np.array([a[1] - b[1], b[0] - a[0]]) / np.linalg.norm(b - a)
            for n in (n0, -n0):  # whichever way the exterior is oriented
                w = S @ R.T @ n
                extreme.append(np.array(ell.theta_m) - w / np.sqrt(n @ R @ w))
        cops = np.vstack([thetas, extreme]) @ R.T
        inside = shapely.contains_xy(poly, cops[:, 0], cops[:, 1])
        d = shapely.distance(poly.exterior, shapely.points(cops))
        sampled = np.where(inside, d, -d).min()
        assert sampled >= 0.06 - 1e-7  # the margin holds for every sampled boundary vector
        rm = robust_margin(model, p.q, 0.0, ellipsoid=ell)
        assert rm <= sampled + 1e-12  # closed form never optimistic
        assert p.robust_margin == pytest.approx(rm, abs=1e-12)
        assert sampled - rm < 1e-4  # ... and tight: (nearly) attained on the boundary
        worst.append((p.margin - 0.06) / (p.margin - rm))
    # The check uses the recorded ellipsoid: one 1.5× too large for some posture fails it.
    d = json.loads((tmp_path / "plan.json").read_text())
    d["settings"]["ellipsoid"]["sigma"] = 3.0 * 1.5 * min(worst)
    (tmp_path / "plan_big.json").write_text(json.dumps(d))
    report = check_plan(model, load_plan(tmp_path / "plan_big.json", model))
    assert not report.ok and "ellipsoid" in report.problems()[0]


def test_augment_keeps_the_ellipsoid_margin_and_cop(model, result_file, ellipsoid_plan):
    ell = load_ellipsoid(str(result_file), model, "right", 3.0)
    res = augment_plan(model, ellipsoid_plan, 2, 6, seed=1)
    report = check_plan(model, res.plan)
    assert report.ok, report.problems()
    assert res.plan.settings["ellipsoid"] == ellipsoid_plan.settings["ellipsoid"]
    for p in res.plan.postures[15:]:
        rm = robust_margin(model, p.q, 0.0, ellipsoid=ell)
        assert rm >= 0.06 - 1e-9 and p.robust_margin == pytest.approx(rm, abs=1e-12)
        cop, margin = nominal_cop(model, p.q, "sim", "right", ell)  # the CoP at the ellipsoid's centre
        np.testing.assert_allclose(p.predicted_cop, cop, atol=1e-12)
        assert p.margin == pytest.approx(margin, abs=1e-12)
