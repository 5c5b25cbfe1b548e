"""Self-collision review: collision meshes that cannot be loaded (the plan-reading commands go on, saying so once;
the run's pre-flight refuses, saying how to proceed), the designer's verdict is `plan check`'s (a design without
self-collision rows is held to links that do not meet), an accurate word for geometry without a pair to check,
and position margins in their joint's unit ("unlimited" for continuous joints)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from formats.trajectory_plan import TrajectoryPlan, load_trajectory_plan
from poise.cli import main
from poise.cmd_plan_trajectory import _margin_row, _standing_rows
from robots.collision import GeometryUnavailable, collision_pairs, link_spheres, unavailable_geometry
from robots.registry import get_model
from trajectories.fourier import FourierTrajectory
from trajectories.plan import check_plan, collision_geometry_optional, plan_model, plan_trajectory
from trajectories.verify import check_trajectory

INERTIAL = ('<inertial><origin xyz="0.15 0 0"/><mass value="{m}"/><inertia ixx="0.01" iyy="0.01" izz="0.01" '
            'ixy="0" ixz="0" iyz="0"/></inertial>')  # fmt: skip
MISSING = "package://nonexistent_pkg/meshes/l1.stl"
# a fast design: a 2-joint arm, 6 s, 3 harmonics, few iterations
DESIGN = ["--duration", "6", "--period", "6", "--harmonics", "3", "--max-iter", "30", "--seed", "1"]


def _arm(path: Path, base_geometry: str = "", l1_geometry: str = "", joint1: str = "revolute",
         axis1: str = "0 0 1") -> Path:  # fmt: skip
    """A two-joint arm (base → l1 → l2, 0.3 m links) with the collision elements given."""
    limit1 = '<limit lower="-2.5" upper="2.5" effort="20" velocity="3"/>' if joint1 != "continuous" else (
        '<limit effort="20" velocity="3"/>')  # fmt: skip
    path.write_text(f"""<robot name="{path.stem}">
 <link name="base">{base_geometry}</link>
 <link name="l1">{INERTIAL.format(m=1.0)}{l1_geometry}</link>
 <link name="l2">{INERTIAL.format(m=0.5)}<collision><origin xyz="0.15 0 0"/><geometry><box size="0.3 0.03 0.03"/>
  </geometry></collision></link>
 <joint name="j1" type="{joint1}"><parent link="base"/><child link="l1"/><axis xyz="{axis1}"/>{limit1}</joint>
 <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0"/><axis xyz="0 1 0"/>
  <limit lower="-2" upper="2" effort="10" velocity="3"/></joint>
</robot>
""")
    return path


def _missing_mesh_arm(path: Path) -> Path:
    return _arm(path, l1_geometry=f'<collision><geometry><mesh filename="{MISSING}"/></geometry></collision>')


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "self-collision is not checked" in line]


@pytest.fixture(scope="module")
def missing_plan(tmp_path_factory) -> Path:
    """A plan designed with --no-self-collision for an arm whose collision mesh cannot be resolved."""
    d = tmp_path_factory.mktemp("missing")
    urdf = _missing_mesh_arm(d / "mm.urdf")
    out = d / "a.json"
    assert main(["plan", "trajectory", str(urdf), "--out", str(out), *DESIGN, "--no-self-collision"]) == 0
    return out


def test_a_design_keeping_links_apart_still_needs_the_meshes(tmp_path, capsys):
    urdf = _missing_mesh_arm(tmp_path / "mm.urdf")
    rc = main(["plan", "trajectory", str(urdf), "--out", str(tmp_path / "a.json"), *DESIGN])
    err = capsys.readouterr().err
    assert rc == 2 and MISSING in err and "--no-self-collision" in err
    assert not (tmp_path / "a.json").exists()


def test_commands_reading_the_plan_go_on_saying_once_why_self_collision_is_unchecked(missing_plan, capsys):
    capsys.readouterr()
    plan = load_trajectory_plan(str(missing_plan))
    assert plan.settings["self_collision"] is False
    # the design's own verdict said it too (the plan check it applies)
    assert plan.design["verification"]["self_collision"] == "geometry unavailable"
    for argv in (["plan", "check", str(missing_plan)],
                 ["plan", "show", str(missing_plan), "--out", str(missing_plan.with_suffix(".png"))],
                 ["simulate", "trajectory", str(missing_plan), "--out", str(missing_plan.with_suffix(".csv"))],
                 ["plan", "sample", str(missing_plan), "--out", str(missing_plan.with_name("s.csv"))],
                 ["plan", "forecast", str(missing_plan), "--noise", "0.1", "--json"]):  # fmt: skip
        rc = main(argv)
        out, err = capsys.readouterr()
        said = _warnings(err)
        assert rc == 0, (argv, err)
        assert len(said) == 1 and MISSING in said[0] and "poise run" in said[0], (argv, err)
        assert "--no-self-collision" not in err  # the option the plan was designed with already
        if argv[:2] == ["plan", "forecast"]:
            assert json.loads(out)["plan_problems"] == []
    assert main(["plan", "check", str(missing_plan), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["self_collision"] == "geometry unavailable" and MISSING in got["self_collision_note"]
    assert got["ok"] and got["min_self_clearance_m"] is None


def test_the_runs_preflight_refuses_a_plan_whose_collision_geometry_cannot_load(missing_plan, tmp_path):
    """Outside `collision_geometry_optional` (the run's pre-flight: `poise run` and `plan check --config`) it is a
    problem saying what to do, not a pass without the check."""
    from drivers.config import DEFAULT_CONFIG, load_config
    from poise.cmd_run_trajectory import preflight

    plan = load_trajectory_plan(str(missing_plan))
    model = plan_model(plan)
    traj = plan_trajectory(plan, model)
    strict = check_plan(plan, model, traj, "urdf", dt=0.01).problems
    assert len(strict) == 1 and MISSING in strict[0] and "poise run" in strict[0]
    assert "ROS_PACKAGE_PATH" in strict[0] and "--no-self-collision" not in strict[0]
    with collision_geometry_optional() as skipped:
        assert check_plan(plan, model, traj, "urdf", dt=0.01).problems == []
    assert len(skipped) == 1 and MISSING in skipped[0]
    # the run's own pre-flight: a configuration mapping the two joints (the bundled file's executor settings)
    head = DEFAULT_CONFIG.read_text().split("[boards]")[0].replace('robot = "tulip"', 'robot = "ur5"')
    joints = "".join(
        f'\n[[joints]]\nname = "{n}"\nid = {i + 1}\ndirection = 1\n' for i, n in enumerate(("j1", "j2"))
    )
    cfg_path = tmp_path / "arm.toml"
    cfg_path.write_text(head + joints)
    pf = preflight(plan, model, traj, load_config(cfg_path), "urdf")
    assert any(MISSING in p and "self-collision cannot be checked" in p for p in pf.problems)


def test_unloadable_geometry_is_remembered_and_named(tmp_path):
    model = get_model(str(_missing_mesh_arm(tmp_path / "mm.urdf")))
    reason = unavailable_geometry(model)
    assert reason is not None and MISSING in reason
    with pytest.raises(GeometryUnavailable) as exc:
        collision_pairs(model)
    assert exc.value.reason == reason and "--no-self-collision" in str(exc.value)
    ok = get_model(str(_arm(tmp_path / "ok.urdf")))
    assert unavailable_geometry(ok) is None and len(link_spheres(ok)) == 1


def test_the_designers_verdict_is_plan_checks(tmp_path, capsys):
    """A design without self-collision rows whose arm sweeps its forearm through a table: `plan check` fails it
    at 0 mm, and so does the designer (the plan written, `poise run` refusing it)."""
    table = ('<collision><origin xyz="0 0 -0.2"/><geometry><cylinder radius="0.45" length="0.04"/></geometry>'
             '</collision>')  # fmt: skip
    l1 = '<collision><origin xyz="0.15 0 0"/><geometry><box size="0.3 0.04 0.04"/></geometry></collision>'
    urdf = _arm(tmp_path / "table.urdf", table, l1)
    out = tmp_path / "n.json"
    rc = main(["plan", "trajectory", str(urdf), "--out", str(out), *DESIGN, "--no-self-collision", "--json"])
    design = json.loads(capsys.readouterr().out)
    assert main(["plan", "check", str(out), "--json"]) == 1
    check = json.loads(capsys.readouterr().out)
    assert check["problems"] and any("base–l2 come" in p for p in check["problems"])
    assert rc == 1 and design["ok"] is False
    assert design["verification"]["problems"] == check["problems"]
    assert design["verification"]["min_self_clearance_m"] == pytest.approx(check["min_self_clearance_m"])
    assert load_trajectory_plan(str(out)).design["verification"]["problems"] == check["problems"]
    # the table says it too
    assert (
        main(["plan", "trajectory", str(urdf), "--out", str(out), *DESIGN, "--no-self-collision", "--force"])
        == 1
    )
    out_, err = capsys.readouterr()
    assert (
        "closest links (base–l2)" in out_ and "fails verification" in err and "poise run` refuses it" in err
    )


def _still(model, q) -> FourierTrajectory:
    zeros = np.zeros((model.nq, 1))
    return FourierTrajectory(1.0, 1.0, np.asarray(q, dtype=float), zeros, zeros)


def test_geometry_on_adjacent_links_only_is_no_pair_not_no_geometry(tmp_path):
    model = get_model(str(_arm(tmp_path / "adj.urdf", l1_geometry='<collision><origin xyz="0.15 0 0"/><geometry>'
                                                                 '<box size="0.3 0.04 0.04"/></geometry></collision>')))  # fmt: skip
    assert len(link_spheres(model)) == 2 and collision_pairs(model).pairs == ()
    check = check_trajectory(model, _still(model, [0.0, 0.0]), model.root, "urdf", 0.01, collision_margin=0.0)
    assert check.self_collision == "no link pair" and "only adjacent links" in check.self_collision_note
    rows = {label: value for label, value, _ in _standing_rows(check.to_dict())}
    assert "no collision geometry" not in rows["self-collision"] and "adjacent" in rows["self-collision"]


def test_position_margins_in_the_joints_unit(tmp_path):
    cont = get_model(str(_arm(tmp_path / "cont.urdf", joint1="continuous")))
    # a continuous joint at the minimum: the revolute j2's margin, in rad
    check = check_trajectory(cont, _still(cont, [5.0, 1.5]), cont.root, "urdf", 0.01)
    assert check.min_position_margin_joint == "j2" and check.min_position_margin_rad == pytest.approx(0.5)
    assert _margin_row(check.to_dict(), 3) == ("min position margin (j2)", "0.500", "rad")
    # no joint with a position limit: unlimited, not "inf rad"
    only = tmp_path / "one.urdf"
    only.write_text(f"""<robot name="one"><link name="base"/><link name="l1">{INERTIAL.format(m=1.0)}</link>
 <joint name="j1" type="continuous"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/>
 <limit effort="20" velocity="3"/></joint></robot>""")
    one = get_model(str(only))
    free = check_trajectory(one, _still(one, [7.0]), one.root, "urdf", 0.01)
    label, value, unit = _margin_row(free.to_dict(), 3)
    assert "unlimited" in value and "inf" not in value and unit != "rad"
    # a prismatic joint at the minimum: metres
    pris = tmp_path / "pris.urdf"
    pris.write_text(f"""<robot name="pris"><link name="base"/><link name="s">{INERTIAL.format(m=1.0)}</link>
 <link name="l1">{INERTIAL.format(m=0.5)}</link>
 <joint name="lift" type="prismatic"><parent link="base"/><child link="s"/><axis xyz="0 0 1"/>
 <limit lower="0" upper="0.5" effort="200" velocity="0.5"/></joint>
 <joint name="j1" type="revolute"><parent link="s"/><child link="l1"/><axis xyz="0 1 0"/>
 <limit lower="-2.5" upper="2.5" effort="20" velocity="3"/></joint></robot>""")
    pm = get_model(str(pris))
    c = check_trajectory(pm, _still(pm, [0.02, 0.0]), pm.root, "urdf", 0.01)
    assert (c.min_position_margin_joint, c.min_position_margin_unit) == ("lift", "m")
    assert _margin_row(c.to_dict(), 3) == ("min position margin (lift)", "0.020", "m")
    plan = TrajectoryPlan(
        pm.name, pm.root, list(pm.joint_names), _still(pm, [0.02, 0.0]).to_json(), params="urdf"
    )
    assert check_plan(plan, pm, _still(pm, [0.02, 0.0]), dt=0.01).min_position_margin_unit == "m"


def test_position_margin_help_names_both_units(capsys):
    assert main(["plan", "trajectory", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--position-margin POSITION_MARGIN ")
    said = text[start : start + 200]
    assert "m on a prismatic joint (0.05 m by default), else rad (default 0.05 rad)" in said
