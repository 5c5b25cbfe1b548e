"""Replicated postures: reported by `plan check` and `plan postures` (information, never an error)."""

import json

import casadi as ca
import numpy as np
import pytest

from design import planner
from design.problems import SolveResult
from design.replicates import find_replicates
from design.sampler import PostureSet
from design.uncertainty import left_pose
from design.verify import check_plan
from formats.plan import Placement, Plan, Posture, save_plan
from poise.cli import main
from robots.kinematics import site_pose_sym
from robots.stance import balance, random_double_support


def moved_on_placement(model, q0: np.ndarray, step: float, rng) -> np.ndarray:
    """A posture about `step` rad (2-norm) from q0 with the left foot flat at the same placement."""
    qs = ca.SX.sym("q", model.nq)
    R, p = site_pose_sym(model, qs, "sim", "sole_l", "right")
    c = ca.vertcat(p[0], p[1], p[2], R[0, 2], R[1, 2], ca.atan2(R[1, 0], R[0, 0]))
    f = ca.Function("foot", [qs], [c, ca.jacobian(c, qs)])
    target = np.asarray(f(q0)[0]).ravel()
    d = rng.normal(size=model.nq)
    q = q0 + step * d / np.linalg.norm(d)
    for _ in range(30):
        r, J = f(q)
        q = q - np.linalg.lstsq(np.asarray(J), np.asarray(r).ravel() - target, rcond=None)[0]
    return q


@pytest.fixture(scope="module")
def replicate_plan(model):
    """14 distinct postures, one per placement, then an exact repeat of 0, a near repeat of 1 (< 1e-3 rad)
    and a posture of placement 1 that is too far to be a repeat."""
    rng = np.random.default_rng(3)
    q = list(random_double_support(model, 14, rng, margin=0.06))
    near, far = moved_on_placement(model, q[1], 8e-4, rng), moved_on_placement(model, q[1], 0.05, rng)
    assert 1e-5 < np.abs(near - q[1]).max() < 1e-3 < np.abs(far - q[1]).max()
    placements = [Placement(k, tuple(left_pose(model, qi))) for k, qi in enumerate(q)]
    rows = [*zip(q, range(14), strict=True), (q[0], 0), (near, 1), (far, 1)]
    postures = []
    for k, (qi, j) in enumerate(rows):
        b = balance(model, qi)
        postures.append(Posture(k, j, qi, 2.0, 4.0, (float(b.cop[0]), float(b.cop[1])), b.margin))
    plan = Plan("tulip", "right", model.joint_names, placements, postures, settings={"required_margin": 0.05})
    plan.kappa = planner.plan_kappa(model, plan.q)
    return plan


def test_find_replicates_groups_exact_and_near_repeats(replicate_plan):
    reps = find_replicates(replicate_plan.postures)
    assert reps.total == 17 and reps.distinct == 15
    assert reps.repeats[14] == (0, 0.0)
    assert reps.repeats[15][0] == 1 and 1e-5 < reps.repeats[15][1] < 1e-3
    assert 16 not in reps.repeats
    assert reps.groups() == [[0, 14], [1, 15]]
    assert "15 of 17" in reps.describe() and "0 = 14; 1 = 15" in reps.describe()
    assert find_replicates(replicate_plan.postures, tol=1e-5).repeats.keys() == {14}


def test_same_angles_on_another_placement_are_not_a_repeat(replicate_plan):
    p0 = replicate_plan.postures[0]
    other = Posture(99, 1, p0.q.copy(), 2.0, 4.0, p0.predicted_cop, p0.margin)
    assert find_replicates([p0, other]).distinct == 2


def test_check_reports_replicates_without_failing(model, replicate_plan, tmp_path, capsys):
    assert check_plan(model, replicate_plan).ok  # repeats are not an error
    path = tmp_path / "p.json"
    save_plan(replicate_plan, path)
    assert main(["plan", "check", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["distinct_postures"] == 15 and report["repeat_tol_rad"] == 1e-3
    assert [(r["index"], r["of"]) for r in report["repeats"]] == [(14, 0), (15, 1)]
    assert main(["plan", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "repeat of" in out and "distinct postures: 15 of 17" in out and "0 = 14; 1 = 15" in out


def test_postures_summary_reports_replicates(model, replicate_plan, tmp_path, monkeypatch, capsys):
    plan = replicate_plan
    poses = np.array([pl.left_foot for pl in plan.placements])
    ps = PostureSet(plan.q, np.array([p.placement for p in plan.postures]), poses)
    best = SolveResult(ps, 500.0, plan.kappa["right"], plan.kappa["left"], 1.0, {"start": 0})
    summary = [{"start": 0, "kappa_initial": 500.0, "kappa": best.kappa, "kappa_other": best.kappa_other,
                "wall_s": 1.0, "sample_s": 0.5, "iterations": 1}]  # fmt: skip
    monkeypatch.setattr(planner, "design", lambda *a, **kw: (best, summary))  # no optimisation here
    argv = ["plan", "postures", "tulip", "--postures", "17", "--placements", "1", "--no-transitions"]
    assert main([*argv, "--out", str(tmp_path / "p.json"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["distinct_postures"] == 15 and [(r["index"], r["of"]) for r in d["repeats"]] == [
        (14, 0),
        (15, 1),
    ]
    assert main([*argv, "--out", str(tmp_path / "p.json"), "--force"]) == 0
    assert "distinct postures: 15 of 17" in capsys.readouterr().out
