"""One placement check (`robots.stance.other_sole_problems`: the description's placement box and [stance] feet_gap)
shared by `plan check` and `poise run` of static posture plans and double-support trajectory plans: a placement
outside the box or too close to the base sole is reported by `plan check` and refused by the run's pre-flight,
naming the placement, before any device is opened."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from conftest import TEST_DESIGN, tulip_with_stance

from design.verify import check_plan
from drivers.emulators.testplan import random_plan
from drivers.executor import preflight
from drivers.trajectory_run import RUN_FILES
from formats.errors import DataError
from formats.plan import Placement, Posture, save_plan
from formats.trajectory_plan import load_trajectory_plan, save_trajectory_plan
from poise import cmd_run, cmd_run_trajectory
from poise.cli import main
from robots.kinematics import com_position
from robots.registry import get_model
from robots.stance import (
    balance,
    other_pose,
    other_sole_problems,
    placement_problems,
    random_double_support,
    sole_rects,
)


def _no_session(*a, **k):
    raise AssertionError("a session (robot link) was opened for a refused plan")


def _feasibility(problems: list[str]) -> list[str]:
    """`plan check --json`'s problems without the identifiability ones (these plans are too small to identify)."""
    return [p for p in problems if "cannot identify" not in p]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_declared_feet_gap_is_checked_beside_the_box(tulip, tmp_path):
    """`other_sole_problems` = the box (`placement_problems`) + the feet gap: the description's [stance]
    feet_gap where it names one; where it names none, FEET_GAP (2 mm) only with `default_gap` (the weight
    shifts), so TUlip's static plans may stand 1 mm apart, as before."""
    rb, ro = sole_rects(tulip, "right")
    close = (0.0, float(rb[:, 1].max() - ro[:, 1].min()) + 0.001, 0.0)  # side by side, 1 mm apart
    assert other_sole_problems(tulip, "right", close) == []
    (why,) = other_sole_problems(tulip, "right", close, default_gap=True)
    assert "is 1.0 mm from the sole_r sole" in why and why.endswith("[stance] feet_gap 2 mm")
    gapped = get_model(str(tulip_with_stance(tmp_path, feet_gap="0.002")))
    assert other_sole_problems(gapped, "right", close) == [why]
    far = (0.0, 0.6, 0.0)  # y beyond the box: one line for the box, none for the gap
    assert other_sole_problems(gapped, "right", far) == placement_problems(gapped, "right", far) != []


def _outside_the_box(model):
    """A balanced double-support posture whose other sole stands outside TUlip's placement box (y < −100 mm:
    over the base sole's side), the first of a seeded draw."""
    rng = np.random.default_rng(7)
    for _ in range(50):
        q = random_double_support(model, 1, rng, params="sim", base="right", margin=0.03)[0]
        if placement_problems(model, "right", other_pose(model, q, "sim", "right")):
            return q
    raise AssertionError("no posture outside the box drawn")


def test_a_static_placement_outside_the_box_is_refused_by_run(model, tmp_path, monkeypatch, capsys):
    """A static plan whose placement 1 puts the other sole outside the description's box (its posture itself
    valid): `plan check --json` reports it, and `poise run` refuses the plan before opening any device, naming
    placement 1 (before, the executor's pre-flight did not check the box and ran it)."""
    plan = random_plan(model, 1, seed=4, move_s=1.0, hold_s=2.0)
    q = _outside_the_box(model)
    pose = tuple(float(v) for v in other_pose(model, q, "sim", "right"))
    cop = com_position(model, q, "sim", "right")[:2]
    plan.placements.append(Placement(1, pose))
    plan.postures.append(
        Posture(1, 1, q, 1.0, 2.0, (float(cop[0]), float(cop[1])), balance(model, q, "sim").margin)
    )
    (why,) = placement_problems(model, "right", pose)
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    capsys.readouterr()
    assert main(["plan", "check", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert _feasibility(report["problems"]) == [f"placement 1: {why}"]
    assert not any(p["issues"] for p in report["postures"])
    monkeypatch.setattr("drivers.session.Session", _no_session)
    out = tmp_path / "run"
    args = ["run", str(path), "--robot", "sim", "--boards", "sim", "--out", str(out), "--yes", "--json"]
    assert main(args) == 2
    err = _flat(capsys.readouterr().err)
    assert "plan refused before moving (1 problem(s)): placement 1: the sole_l sole's ground pose" in err
    assert why in err and not (out / "recording.csv").exists()


def test_a_static_placement_closer_than_the_feet_gap_is_refused(model, cfg, tmp_path, monkeypatch, capsys):
    """With a description whose [stance] feet_gap (100 mm) exceeds placement 0's gap (72 mm; placement 1:
    251 mm), `plan check` and the run's pre-flight report the same one line for placement 0 and the run is
    refused before any device is opened; on TUlip's own description (no feet_gap) the plan is fine."""
    plan = random_plan(model, 2, seed=4, move_s=1.0, hold_s=2.0)
    assert preflight(plan, model, cfg) == [] and not check_plan(model, plan).feasibility_problems()
    robot = tulip_with_stance(tmp_path, feet_gap="0.1")
    gapped = get_model(str(robot))
    (why,) = other_sole_problems(gapped, "right", plan.placements[0].other_foot)
    expect = [f"placement 0: {why}"]
    assert why.endswith("closer than the tulip description's [stance] feet_gap 100 mm")
    assert check_plan(gapped, plan).feasibility_problems() == expect
    plan.robot_file = str(robot)
    save_plan(plan, tmp_path / "plan.json")
    capsys.readouterr()
    assert main(["plan", "check", str(tmp_path / "plan.json"), "--json"]) == 1
    assert _feasibility(json.loads(capsys.readouterr().out)["problems"]) == expect
    assert preflight(plan, gapped, cfg) == expect
    monkeypatch.setattr("drivers.session.Session", _no_session)
    args = argparse.Namespace(plan="plan.json", robot="sim", boards="sim", out=str(tmp_path / "run"), resume=False,
                              time_scale=2.0, yes=True, no_noise=True)  # fmt: skip
    with pytest.raises(DataError, match=r"refused before moving \(1 problem\(s\)\): placement 0: "):
        cmd_run.execute(args, gapped, plan, cfg)
    assert not (tmp_path / "run" / "recording.csv").exists()
    # from the command line, the run checks the plan against the description it names, as `plan check` does
    out = tmp_path / "run2"
    assert main(["run", str(tmp_path / "plan.json"), "--robot", "sim", "--boards", "sim", "--out", str(out),
                 "--yes"]) == 2  # fmt: skip
    assert f"placement 0: {why}" in _flat(capsys.readouterr().err)
    assert not (out / "recording.csv").exists()


def test_a_double_support_trajectorys_placement_is_checked(tmp_path, monkeypatch, capsys):
    """The stored double-support design holds the left sole at (−12, 200) mm, yaw 23.6°, 57 mm from the right
    one. For a description whose placement_y starts at 210 mm and whose feet_gap is 100 mm, `plan check --json`
    reports both (`other_sole_problems` of the chain's target pose) and `poise run` refuses the plan with the
    same lines, before any device is opened."""
    plan = load_trajectory_plan(TEST_DESIGN)
    plan.robot_source = str(tulip_with_stance(tmp_path, placement_y="[0.21, 0.5]", feet_gap="0.1"))
    path = tmp_path / "ds.json"
    save_trajectory_plan(plan, path)
    capsys.readouterr()
    assert main(["plan", "check", str(path), "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert len(problems) == 2 and all(
        p.startswith("placement: the sole_l sole's ground pose (x -12") for p in problems
    )
    assert problems[0].endswith("y out of range")
    assert problems[1].endswith("closer than the tulip description's [stance] feet_gap 100 mm")
    monkeypatch.setattr(cmd_run_trajectory, "Session", _no_session)
    out = tmp_path / "run"
    assert main(["run", str(path), "--robot", "sim", "--boards", "sim", "--out", str(out), "--yes"]) == 2
    err = _flat(capsys.readouterr().err)
    assert "refused before moving" in err and all(p in err for p in problems)
    assert not any((out / n).exists() for n in RUN_FILES)


def test_a_double_support_design_stands_where_the_description_allows(tmp_path):
    """`make_chain` (where a double-support design stands) keeps to the description's placement box: with a box
    that excludes the placement it picks on TUlip's own description, it picks another inside, and with a box no
    balanced candidate reaches, it refuses before any design."""
    from trajectories.closed_chain import make_chain

    free = make_chain(get_model("tulip"), "right", "sim", np.random.default_rng(3), candidates=20)
    assert free.target_p[1] > 0.2
    narrow = get_model(str(tulip_with_stance(tmp_path, placement_y="[0.12, 0.2]")))
    chain = make_chain(narrow, "right", "sim", np.random.default_rng(3), candidates=20)
    pose = other_pose(narrow, chain.nominal, "sim", "right")
    assert 0.12 <= pose[1] <= 0.2 and other_sole_problems(narrow, "right", pose) == []
    (tmp_path / "none").mkdir()
    none = get_model(str(tulip_with_stance(tmp_path / "none", placement_y="[0.6, 0.7]")))
    with pytest.raises(DataError, match="placement box and feet gap"):
        make_chain(none, "right", "sim", np.random.default_rng(3), candidates=20)
