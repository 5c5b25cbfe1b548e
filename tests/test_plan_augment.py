"""`poise plan augment`: greedy top-up of a plan with verified postures, each on its own placement."""

import json
import math

import numpy as np

from design.verify import check_plan
from poise.cli import main
from robots.kinematics import site_pose
from robots.plan_format import Placement, Plan, Posture, load_plan, save_plan
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
    plan.settings["uncertainty"] = 0.002
    save_plan(plan, src)
    assert main(["plan", "augment", str(src), "--add", "1", "--out", str(tmp_path / "x.json")]) == 2
    assert "not supported" in capsys.readouterr().err
