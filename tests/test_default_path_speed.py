"""One default-path test: the moves a plan makes without a stored transition are checked as the run's very
setpoints (`robots.plan_rules.ground_setpoints`) by `plan check`, `plan augment`, the planner's call
(`design.verify.plan_default_path_issues`) and the run's pre-flight, named alike; and a plan's ellipsoid
settings are refused in one line naming the bad field."""

from __future__ import annotations

import json

import numpy as np
import pytest

# two postures of one placement whose default cosine path cannot be kept on the ground (found by
# `test_posture_checks_shared`, which builds the same pair)
from test_posture_checks_shared import _pair_plan

from design.verify import check_plan, plan_default_path_issues
from drivers.config import load_config
from drivers.setpoints import check_run
from formats.plan import Placement, Plan, Posture, save_plan
from poise.cli import main
from robots.chain_path import project_to_chain
from robots.plan_rules import plan_base_model
from robots.stance import balance, check_posture, default_base, other_pose, random_double_support


def _bad_moves(messages: list[str]) -> set[str]:
    """The move labels ("move a->b") the messages name."""
    return {m.split(" (")[0].split(":")[0] for m in messages if m.startswith("move ")}


def _one_placement_plan(model, seed: int, n: int = 4, spread: float = 0.3) -> Plan:
    """n postures on one placement (the first random, the others projected neighbours), no transitions."""
    rng = np.random.default_rng(seed)
    q0 = random_double_support(model, 1, rng, margin=0.03)[0]
    base, pose = default_base(model), other_pose(model, q0)
    qs = [q0]
    while len(qs) < n:
        cop = balance(model, q0).cop + rng.uniform(-0.01, 0.01, 2)
        q = project_to_chain(
            model, q0 + rng.uniform(-spread, spread, model.nq), pose, cop[None, :], "sim", base
        )[0]
        if (
            not model.limit_violations(q, 0.0)
            and not check_posture(model, q, "sim", base, 0.0, pose=pose).issues
        ):
            qs.append(q)
    postures = [Posture(i, 0, q, 1.0, 1.0) for i, q in enumerate(qs)]
    return Plan(model.name, base, model.joint_names, [Placement(0, tuple(float(v) for v in pose))], postures,
                params="sim")  # fmt: skip


@pytest.mark.parametrize("seed", [None, 4, 7])
def test_check_and_run_agree_on_the_default_paths(tulip, seed):
    """A plan without transitions: the moves `plan check` fails are those the run's pre-flight refuses or lifts
    (None: the pair whose move fails, else random postures of one placement, whose moves pass)."""
    plan = _pair_plan(tulip) if seed is None else _one_placement_plan(tulip, seed)
    report = check_plan(tulip, plan)
    run = check_run(plan, tulip, load_config(None))
    if any(p.issues for p in report.postures):
        pytest.skip("a posture fails: the run checks no moves then")
    assert report.default_paths > 0
    assert _bad_moves(report.transitions) == _bad_moves(run.problems + run.warnings)
    assert bool(report.transitions) == (seed is None)
    assert plan_default_path_issues(tulip, plan) == report.transitions


def test_check_and_run_name_a_failing_default_path_alike(tulip):
    """The pair whose default path fails: the same one-line message in `plan check` and in the run's warning."""
    plan = _pair_plan(tulip)
    report = check_plan(tulip, plan)
    run = check_run(plan, tulip, load_config(None))
    assert report.transitions and run.warnings
    assert run.warnings[0].startswith(report.transitions[0])
    assert all("\n" not in m for m in report.transitions)
    said = report.transitions[0]
    assert ("jumps" in said and "°" in said) or "exceed the velocity limit" in said


def test_augment_refuses_with_plan_checks_default_path_verdict(tulip, tmp_path, capsys):
    """`plan augment` applies the run's default-path test: it refuses the pair with `plan check`'s first problem."""
    path = tmp_path / "pair.json"
    save_plan(_pair_plan(tulip), path)
    assert main(["plan", "check", str(path), "--json"]) == 1
    listed = json.loads(capsys.readouterr().out)["problems"]
    first = check_plan(tulip, _pair_plan(tulip)).feasibility_problems()[0]
    assert first.startswith("move 0->1") and first in listed
    assert main(["plan", "augment", str(path), "--add", "12", "--out", str(tmp_path / "o.json")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert " ".join(first.split()) in err and "augmenting keeps every posture" in err


def _ellipsoid_plan(model, **change) -> Plan:
    """Two postures with an identification ellipsoid centred on the design parameters; `change` edits its fields."""
    base = default_base(model)
    bm = plan_base_model(model, base)
    qs = random_double_support(model, 2, np.random.default_rng(5), margin=0.03)
    ell = {"source": "test", "sigma": 2.0, "symbols": list(bm.symbols),
           "theta_m": [float(v) for v in bm.values("sim")], "cov_m2": (1e-8 * np.eye(bm.n)).tolist(), **change}  # fmt: skip
    plan = Plan(model.name, base, model.joint_names, [Placement(0, tuple(float(v) for v in other_pose(model, qs[0])))],
                [], settings={"ellipsoid": ell})  # fmt: skip
    for i, q in enumerate(qs[:1]):
        b = balance(model, q)
        plan.postures.append(Posture(i, 0, q, 1.0, 1.0, (float(b.cop[0]), float(b.cop[1])), b.margin))
    return plan


def _asymmetric(n: int) -> list:
    cov = 1e-8 * np.eye(n)
    cov[0, 1] = 1e-7
    return cov.tolist()


def _indefinite(n: int) -> list:
    cov = 1e-8 * np.eye(n)
    cov[0, 0] = -1e-8
    return cov.tolist()


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("sigma", 0.0, "ellipsoid.sigma"),
        ("sigma", float("nan"), "ellipsoid.sigma"),
        ("theta_m", "nan", "ellipsoid.theta_m"),
        ("cov_m2", "asymmetric", "ellipsoid.cov_m2"),
        ("cov_m2", "indefinite", "ellipsoid.cov_m2"),
        ("symbols", "reversed", "ellipsoid.symbols"),
    ],
)
def test_malformed_ellipsoid_is_one_line_naming_the_field(tulip, tmp_path, capsys, field, value, said):
    n = plan_base_model(tulip, default_base(tulip)).n
    bm = plan_base_model(tulip, default_base(tulip))
    value = {
        "nan": [float("nan")] * n,
        "asymmetric": _asymmetric(n),
        "indefinite": _indefinite(n),
        "reversed": list(reversed(bm.symbols)),
    }.get(value, value)
    path = tmp_path / "ell.json"
    save_plan(_ellipsoid_plan(tulip), path)
    doc = json.loads(path.read_text())
    doc["settings"]["ellipsoid"][field] = value  # NaN as a hand-edited file holds it (save_plan refuses it)
    path.write_text(json.dumps(doc))
    assert main(["plan", "check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1


def test_check_title_names_the_ellipsoid_centre(tulip, tmp_path, capsys):
    """An ellipsoid plan's CoP comes from ϑ₀: the table's title and --json say so, not the parameter set."""
    path = tmp_path / "ell.json"
    save_plan(_ellipsoid_plan(tulip), path)
    main(["plan", "check", str(path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert "ϑ₀" in doc["cop_from"] and "2σ ellipsoid" in doc["cop_from"]
    main(["plan", "check", str(path)])
    out = capsys.readouterr().out
    assert "ϑ₀" in out and "CoP from 'sim'" not in out
