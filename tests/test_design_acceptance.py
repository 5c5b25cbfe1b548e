"""Acceptance: the CLI plan (free CoM, 50 postures in 10 placements, margin 0.08 m, 1 start, seed 1)
passes an independent check (tests/indep_tulip.py: own kinematics + shapely) and beats the thesis's κ."""

import json

import indep_tulip as ind
import numpy as np
import pytest

from poise.cli import main

THESIS_KAPPA = 314.7


def test_independent_kinematics_agree_with_model(model, rng):
    from robots.kinematics import com_position

    q = rng.uniform(model.lower, model.upper, (5, 12))
    for qi in q:
        np.testing.assert_allclose(ind.com(qi), com_position(model, qi, "sim"), atol=1e-12)


@pytest.fixture(scope="module")
def acceptance_plan(tmp_path_factory):
    out = tmp_path_factory.mktemp("acc") / "p.json"
    argv = ["plan", "postures", "tulip", "--problem", "free-com", "--postures", "50", "--placements", "10",
            "--margin", "0.08", "--starts", "1", "--seed", "1", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    return out


@pytest.mark.slow
def test_acceptance_plan_independent_check(acceptance_plan):
    doc = json.loads(acceptance_plan.read_text())
    qs = np.array([p["q"] for p in doc["postures"]])
    assert qs.shape == (50, 12)
    assert len({p["placement"] for p in doc["postures"]}) == 10
    for i, q in enumerate(qs):
        assert ind.check_posture(q, 0.08) == [], f"posture {i}"
    # Postures on one placement share the left-foot pose.
    for j in {p["placement"] for p in doc["postures"]}:
        feet = [ind.in_right_sole(np.array(p["q"]))[2][1][:2] for p in doc["postures"] if p["placement"] == j]
        assert np.ptp(np.array(feet), axis=0).max() < 1e-6
    k = ind.kappa(qs)
    assert k <= THESIS_KAPPA
    assert k == pytest.approx(doc["kappa"]["right"], rel=1e-6)
    # Transitions: one per consecutive pair on a placement; plain joint interpolation would drag the free
    # foot (reported), the planned waypoints keep it flat and the margin (independent check).
    # A pair the closed chain cannot join on the ground (its feasible set split between them) is `lifted`:
    # just its two postures; those are few.
    assert len(doc["transitions"]) == 40
    assert max(t["foot_error_interp"] for t in doc["transitions"]) > 0.005
    lifted = [t for t in doc["transitions"] if t.get("lifted")]
    assert len(lifted) <= 4
    for t in doc["transitions"]:
        assert len(t["q"]) == 2 if t.get("lifted") else len(t["q"]) > 2
        for q in np.array(t["q"]):
            assert ind.check_posture(q, 0.08) == []


@pytest.mark.slow
def test_check_command_accepts_and_rejects(acceptance_plan, tmp_path, capsys):
    assert main(["plan", "check", str(acceptance_plan)]) == 0
    doc = json.loads(acceptance_plan.read_text())
    bad = tmp_path / "limit.json"
    doc["postures"][7]["q"][3] = -0.2  # knee beyond its 0 deg limit
    bad.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["plan", "check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "posture 7" in out and "theta4" in out
    # Margin violation: move one posture's CoP out by shifting the torso over with hip pitch.
    doc = json.loads(acceptance_plan.read_text())
    doc["postures"][12]["q"][2] += 0.35
    doc["postures"][12]["q"][8] += 0.35
    bad2 = tmp_path / "margin.json"
    bad2.write_text(json.dumps(doc))
    assert main(["plan", "check", str(bad2), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"]
    assert any(p.startswith("posture 12:") for p in report["problems"])


def test_plan_records_the_continuation_it_used(acceptance_plan):
    """Reproducibility: the problem's default continuation (8 → 64 for free-com) is written to the plan."""
    doc = json.loads(acceptance_plan.read_text())
    assert doc["settings"]["sharpness"] == [8.0, 64.0]


@pytest.mark.parametrize("value", ["64,8", "8,x", "0,64", "8,8"])
def test_bad_sharpness_is_a_clear_error(tmp_path, capsys, value):
    argv = ["plan", "postures", "tulip", "--postures", "15", "--placements", "3", "--sharpness", value,
            "--out", str(tmp_path / "p.json")]  # fmt: skip
    assert main(argv) == 2
    assert "--sharpness" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()
