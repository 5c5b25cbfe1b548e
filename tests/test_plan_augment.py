"""`poise plan augment`: greedy top-up of a plan with verified postures, each on its own placement."""

import json
import math

import numpy as np
import pytest

from design import augment
from design.planner import build_plan
from design.problems import Settings, solve
from design.sampler import sample_posture_set
from design.uncertainty import left_pose, robust_margin
from design.verify import check_plan
from formats.errors import DataError
from formats.plan import Placement, Plan, Posture, load_plan, save_plan
from poise.cli import main
from robots.kinematics import site_pose
from robots.stance import balance, random_double_support


def small_plan(model, n=14, seed=3) -> Plan:
    q = random_double_support(model, n, np.random.default_rng(seed), margin=0.05)
    placements, postures = [], []
    for k, qi in enumerate(q):
        R, p = site_pose(model, qi, "sim", "sole_l", "right")
        placements.append(Placement(k, (float(p[0]), float(p[1]), math.atan2(R[1, 0], R[0, 0]))))
        b = balance(model, qi)
        postures.append(Posture(k, k, qi, 2.0, 4.0, (float(b.cop[0]), float(b.cop[1])), b.margin))
    return Plan("tulip", "right", model.joint_names, placements, postures, settings={"required_margin": 0.05})


def test_augment_lowers_kappa_and_passes_the_check(model, tmp_path, capsys):
    src, out = tmp_path / "p.json", tmp_path / "p2.json"
    save_plan(small_plan(model), src)
    assert (
        main(
            [
                "plan",
                "augment",
                str(src),
                "--add",
                "3",
                "--pool",
                "20",
                "--seed",
                "2",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["postures"] == 17
    assert summary["kappa"]["right"] < summary["kappa_before"]
    assert summary["kappa_after_each"] == sorted(summary["kappa_after_each"], reverse=True)
    plan = load_plan(out, model)
    assert len({p.placement for p in plan.postures}) == 17
    report = check_plan(model, plan)
    assert report.ok, (report.plan_issues, report.transitions)
    assert all(p.margin >= 0.05 - 1e-9 for p in plan.postures)


def test_augment_refuses_bad_arguments(model, tmp_path, capsys):
    src = tmp_path / "p.json"
    plan = small_plan(model)
    save_plan(plan, src)
    assert (
        main(["plan", "augment", str(src), "--add", "5", "--pool", "2", "--out", str(tmp_path / "x.json")])
        == 2
    )
    assert "--pool ≥ --add" in capsys.readouterr().err
    plan.settings["uncertainty"] = "large"
    save_plan(plan, src)
    assert main(["plan", "augment", str(src), "--add", "1", "--out", str(tmp_path / "x.json")]) == 2
    assert "must be finite numbers" in capsys.readouterr().err


@pytest.fixture(scope="module")
def ball_plan(model):
    """A tiny plan designed with a 3 mm ϑ_b ball (15 postures in 3 placements, one start), its transitions planned:
    without them `check_plan` tests the run's default paths, and with casadi 3.8.2 / numpy 2.4 move 13→14 jumps."""
    s = Settings(problem="free-com", margin=0.06, uncertainty=0.003, sharpness=(8.0,), max_iter=300)
    start = sample_posture_set(model, 15, 3, np.random.default_rng(4), margin=0.09)
    res = solve(model, start, s)
    return build_plan(model, res.postures, s, seed=4, move_s=30, hold_s=60, solver={}, transitions=True)


def test_augment_robust_plan_keeps_the_worst_case_margin(model, ball_plan, tmp_path, capsys):
    assert check_plan(model, ball_plan).ok
    src, out = tmp_path / "p.json", tmp_path / "p2.json"
    save_plan(ball_plan, src)
    argv = ["plan", "augment", str(src), "--add", "3", "--pool", "12", "--seed", "1", "--out", str(out)]
    assert main([*argv, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kappa"]["right"] == pytest.approx(summary["kappa_after_each"][-1])
    plan = load_plan(out, model)
    report = check_plan(model, plan)
    assert report.ok, report.problems()
    added = plan.postures[15:]
    assert len(added) == 3 and [a["index"] for a in summary["added"]] == [p.index for p in added]
    for p in added:
        rm = robust_margin(model, p.q, 0.003)
        assert rm >= 0.06 - 1e-9
        assert p.robust_margin == pytest.approx(rm, abs=1e-12)
        assert p.margin >= rm


def plan_of(model, q, settings) -> Plan:
    """A plan with one placement per posture (the left foot where `q` puts it)."""
    placements = [Placement(k, tuple(left_pose(model, qi))) for k, qi in enumerate(q)]
    postures = []
    for k, qi in enumerate(q):
        b = balance(model, qi)
        postures.append(Posture(k, k, qi, 2.0, 4.0, (float(b.cop[0]), float(b.cop[1])), b.margin))
    return Plan("tulip", "right", model.joint_names, placements, postures, settings=settings)


def test_augment_never_adds_a_posture_failing_the_robust_margin(model, monkeypatch):
    r, need = 0.005, 0.05
    q = random_double_support(model, 30, np.random.default_rng(3), margin=need)
    rm = np.array([robust_margin(model, qi, r) for qi in q])
    good, bad = q[rm >= need], q[rm < need]  # bad: plain margin ≥ 50 mm, worst case over 5 mm < 50 mm
    assert len(good) >= 17 and len(bad) >= 3
    offered = [bad[0], good[14], bad[1], bad[2], good[15], good[16]]

    def fake_draw(model, n, rng, **kw):  # the pool's draws, in this order, then the same again
        fake_draw.k += 1
        return offered[(fake_draw.k - 1) % len(offered)][None]

    monkeypatch.setattr(augment, "random_double_support", fake_draw)
    plain = plan_of(model, good[:14], {"required_margin": need})
    fake_draw.k = 0
    res = augment.augment_plan(model, plain, 3, len(offered), seed=0)
    added = [p.q for p in res.plan.postures[14:]]
    assert any(np.array_equal(a, b) for a in added for b in bad)  # without uncertainty, a bad one is best
    robust = plan_of(model, good[:14], {"required_margin": need, "uncertainty": r})
    assert check_plan(model, robust).ok
    fake_draw.k = 0
    res = augment.augment_plan(model, robust, 3, 3, seed=0)
    added = np.array([p.q for p in res.plan.postures[14:]])
    assert res.draws == len(offered)
    assert sorted(map(tuple, added)) == sorted(map(tuple, good[14:17]))
    assert check_plan(model, res.plan).ok
    assert min(p.robust_margin for p in res.plan.postures[14:]) >= need
    monkeypatch.setattr(augment, "random_double_support", lambda model, n, rng, **kw: bad[0][None])
    with pytest.raises(DataError, match="worst case.*use a smaller --pool"):
        augment.augment_plan(model, robust, 1, 1, seed=0)
