"""One posture check: the sampler/executor (`posture_problems`) and `plan check` agree at each tolerance."""

import numpy as np
import pytest
from conftest import tulip_with_stance

from design.verify import check_plan
from formats.plan import Placement, Plan, Posture
from robots.stance import (
    FLAT_TOL,
    MARGIN_TOL,
    PLACE_TOL,
    _flat_functions,
    balance,
    check_posture,
    default_base,
    other_pose,
    placement_problems,
    posture_problems,
    random_double_support,
)


@pytest.fixture(scope="module")
def posture(model):
    return random_double_support(model, 1, np.random.default_rng(11), margin=0.03)[0]


def _plan(model, q, required, pose=None):
    b = balance(model, q)
    pose = other_pose(model, q) if pose is None else pose
    placements = [Placement(0, tuple(float(v) for v in pose))]
    postures = [Posture(0, 0, q, 1.0, 2.0, (float(b.cop[0]), float(b.cop[1])), b.margin)]
    return Plan(model.name, default_base(model), model.joint_names, placements, postures,
                settings={"required_margin": required})  # fmt: skip


def _plan_ok(model, q, required, pose=None) -> bool:
    report = check_plan(model, _plan(model, q, required, pose))
    return not report.postures[0].issues


def test_margin_boundary_agrees(model, posture):
    m = balance(model, posture).margin
    for required, expect in ((m + 0.5 * MARGIN_TOL, True), (m + 3 * MARGIN_TOL, False), (m - 1e-4, True)):
        assert (posture_problems(model, posture, margin=required) == []) is expect
        assert _plan_ok(model, posture, required) is expect


def test_flat_boundary_agrees(model, posture):
    _, J = _flat_functions(model, "sim", default_base(model))(posture)
    lift = np.linalg.lstsq(np.asarray(J), np.array([1.0, 0.0, 0.0]), rcond=None)[0]  # raises the sole in z
    for t, expect in ((0.5 * FLAT_TOL, True), (2 * FLAT_TOL, False)):
        q = posture + t * lift
        assert (posture_problems(model, q) == []) is expect
        assert _plan_ok(model, q, 0.0) is expect
        flagged = [m for m in check_posture(model, q).issues if "not flat" in m]
        assert bool(flagged) is not expect


def test_placement_boundary(model, posture):
    pose = other_pose(model, posture)
    assert _plan_ok(model, posture, 0.0, pose + [0.5 * PLACE_TOL, 0, 0])
    assert not _plan_ok(model, posture, 0.0, pose + [0, 0, 3 * PLACE_TOL])
    st = check_posture(model, posture, pose=pose + [0, 3 * PLACE_TOL, 0])
    assert len(st.issues) == 1 and "placement" in st.issues[0]


def test_limits_and_defaults(model, posture):
    base = default_base(model)
    assert posture_problems(model, posture) == posture_problems(model, posture, "sim", base, 0.0)
    q = posture.copy()
    q[0] = model.upper[0] + 1e-6
    assert any(model.joint_names[0] in m for m in posture_problems(model, q))
    assert not _plan_ok(model, q, 0.0)


def _outside_box(model, posture, tmp_path):
    """(plan of the posture, a copy of the TUlip description whose placement_y box starts 10 mm beyond the
    posture's placement, that start in m)."""
    pose = other_pose(model, posture)
    lo = round(float(pose[1]) + 0.01, 4)
    return (
        _plan(model, posture, 0.0, pose),
        tulip_with_stance(tmp_path, placement_y=f"[{lo}, {lo + 0.1:.4f}]"),
        lo,
    )


def test_a_placement_outside_the_descriptions_box_is_refused(model, posture, tmp_path):
    """plan check keeps every placement in the description's placement box (`placement_problems`, the weight
    shifts' check, the box the posture designer bounds placements to): the posture's own placement passes with
    TUlip's box; with a box whose y range starts 10 mm beyond it, the plan fails with one line naming the
    placement, its pose and the box (its postures themselves fine)."""
    from robots.registry import get_model

    plan, robot, lo = _outside_box(model, posture, tmp_path)
    assert not check_plan(model, plan).feasibility_problems()  # one posture: it identifies nothing on its own
    boxed = get_model(str(robot))
    report = check_plan(boxed, plan)
    (why,) = placement_problems(boxed, plan.base, plan.placements[0].other_foot)
    assert why.endswith("y out of range") and f"placement_y [{lo * 1000:.4g}, " in why
    assert not report.ok and report.feasibility_problems() == [f"placement 0: {why}"]
    assert not any(p.issues for p in report.postures)


def test_plan_check_prints_a_problems_stance_keys(model, posture, tmp_path, capsys):
    """`plan check` prints a static plan's problems as they are: the "[stance]" of the placement box is text,
    not a rich markup tag that would swallow it."""
    from formats.plan import save_plan
    from poise.cli import main

    plan, robot, _ = _outside_box(model, posture, tmp_path)
    plan.robot_file = str(robot)
    save_plan(plan, tmp_path / "plan.json")
    capsys.readouterr()
    assert main(["plan", "check", str(tmp_path / "plan.json")]) == 1
    text = " ".join(capsys.readouterr().out.split())
    assert "FAIL placement 0: the sole_l sole's ground pose (x " in text
    assert "outside the placement box of the tulip description ([stance] placement_x [-750, 750] mm" in text
