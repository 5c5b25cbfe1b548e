"""URDF import validates at the boundary: a malformed number, a missing attribute, limits in degrees, a xacro
file are refused in one line naming the file and element (exit 2); a mimic joint's own limits are checked by
`plan check` and kept by the design's linear rows; self-collision adjacency sees fixed links on either side."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import ERD

from poise.cli import main
from robots.joint_limits import joint_limits
from robots.urdf import load_urdf

BODY = '<inertial><origin xyz="0 0 0.1"/><mass value="1.0"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.005"/></inertial>'  # fmt: skip
LIM = '<limit lower="-2" upper="2" effort="10" velocity="2"/>'


def _arm(
    j2: str = "", j3: str = "", l2: str = BODY, extra: str = "", head: str = "<robot name='arm'>"
) -> str:
    """Three links on revolute j1, j2 and an optional third joint (`j3`: its XML between the joint tags)."""
    third = f'<link name="l3">{BODY}</link><joint name="j3" type="revolute">{j3}</joint>' if j3 else ""
    return f"""<?xml version="1.0"?>
{head}
  <link name="base">{BODY}</link><link name="l1">{BODY}</link><link name="l2">{l2}</link>{third}{extra}
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.2"/><axis xyz="0 0 1"/>{LIM}</joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0 0 0.2"/><axis xyz="0 1 0"/>{j2 or LIM}</joint>
</robot>
"""


MIMIC = '<parent link="l2"/><child link="l3"/><origin xyz="0 0 0.2"/><axis xyz="0 1 0"/>'


def _write(tmp_path: Path, text: str, name: str = "r.urdf") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _refused(capsys, path: Path, *needles: str) -> str:
    """`model show` on `path` exits 2 with one line naming the file and every needle."""
    assert main(["model", "show", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    for s in (path.name, *needles):
        assert s in err, err
    return err


@pytest.mark.parametrize(
    ("old", "new", "needles"),
    [
        ('<axis xyz="0 1 0"/>', '<axis xyz="0 1"/>', ("joint 'j2'", "<axis xyz>", "3 numbers")),
        ('<axis xyz="0 1 0"/>', '<axis xyz="0 1 0 5"/>', ("joint 'j2'", "<axis xyz>", "3 numbers")),
        ('<origin xyz="0 0 0.2"/><axis xyz="0 1 0"/>', '<origin xyz="0 nan 0.2"/><axis xyz="0 1 0"/>',
         ("joint 'j2'", "<origin xyz>", "finite")),
        ('<mass value="1.0"/>', '<mass value="1.2kg"/>', ("link 'base'", "<mass value>", "not a number")),
        ('<mass value="1.0"/>', "<mass/>", ("link 'base'", "<mass>", "'value'")),
        ('<inertia ixx="0.01" ', "<inertia ", ("link 'base'", "<inertia>", "'ixx'")),
    ],
)  # fmt: skip
def test_malformed_numbers_name_file_and_element(tmp_path, capsys, old, new, needles):
    text = _arm().replace(old, new, 1)
    assert text != _arm()
    _refused(capsys, _write(tmp_path, text), *needles)


@pytest.mark.parametrize(
    ("limit", "needles"),
    [
        ('<limit lower="-inf" upper="inf" effort="10" velocity="2"/>', ("<limit lower>", "finite")),
        ('<limit lower="-2" upper="2" effort="-5" velocity="2"/>', ("<limit effort>", "≥ 0")),
        ('<limit lower="-170" upper="170" effort="10" velocity="2"/>', ("look like degrees", "±13 rad")),
        ('<limit lower="-2" upper="2" effort="10" velocity="180"/>', ("look like degrees", "110 rad/s")),
    ],
)
def test_implausible_limits_refused_naming_joint(tmp_path, capsys, limit, needles):
    _refused(capsys, _write(tmp_path, _arm(j2=limit)), "joint 'j2'", *needles)


def test_placeholder_range_warns_not_refused(tmp_path):
    """±3π (ANYmal's, Solo's ±10 rad) is a placeholder, not degrees: loaded, with a warning naming the joint."""
    m = load_urdf(_write(tmp_path, _arm(j2='<limit lower="-9.42" upper="9.42" effort="10" velocity="2"/>')))
    assert any("'j2'" in w and "2π" in w for w in m.warnings)


def test_xacro_refused_with_hint(tmp_path, capsys):
    head = '<robot name="arm" xmlns:xacro="http://www.ros.org/wiki/xacro">'
    extra = '<xacro:property name="L" value="0.2"/>'
    _refused(capsys, _write(tmp_path, _arm(head=head, extra=extra)), "expand it with xacro first")
    undeclared = _arm(extra=extra)  # the prefix not even declared: not well-formed XML
    _refused(capsys, _write(tmp_path, undeclared, "u.urdf"), "expand it with xacro first")


def test_expanded_xacro_output_loads(tmp_path):
    """xacro's output keeps xmlns:xacro on <robot>: that alone is no reason to refuse."""
    head = '<robot name="arm" xmlns:xacro="http://www.ros.org/wiki/xacro">'
    assert load_urdf(_write(tmp_path, _arm(head=head))).nq == 2


def test_massless_link_with_negative_inertia_refused(tmp_path, capsys):
    l2 = '<inertial><mass value="0"/><inertia ixx="-5" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.005"/></inertial>'
    _refused(capsys, _write(tmp_path, _arm(l2=l2)), "link 'l2'", "not positive definite")


@pytest.mark.parametrize(
    ("mimic", "needle"),
    [
        ('<mimic joint="j3"/>', "mimics itself"),
        ('<mimic joint="j9"/>', "does not exist"),
    ],
)
def test_mimic_errors_name_file(tmp_path, capsys, mimic, needle):
    _refused(capsys, _write(tmp_path, _arm(j3=MIMIC + LIM + mimic)), "joint 'j3'", needle)


def test_chained_mimic_named(tmp_path, capsys):
    j2 = LIM + '<mimic joint="j1"/>'
    _refused(capsys, _write(tmp_path, _arm(j2=j2, j3=MIMIC + LIM + '<mimic joint="j2"/>')), "chained")


def test_mimic_multiplier_zero_kept(tmp_path):
    m = load_urdf(_write(tmp_path, _arm(j3=MIMIC + LIM + '<mimic joint="j2" multiplier="0" offset="0.1"/>')))
    mim = next(j.mimic for j in m.joints if j.name == "j3")
    assert (mim.multiplier, mim.offset) == (0.0, 0.1)


def test_fixed_joint_zero_axis_is_quiet(tmp_path):
    extra = '<link name="tool"/><joint name="f" type="fixed"><parent link="l2"/><child link="tool"/><axis xyz="0 0 0"/></joint>'  # fmt: skip
    extra = extra.replace('<link name="tool"/>', f'<link name="tool">{BODY}</link>')
    m = load_urdf(_write(tmp_path, _arm(extra=extra)), keep_massless=True)
    from robots.kinematics import link_frames

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        frames = link_frames(m, np.zeros((1, m.nq)), "urdf", m.root)
    assert np.all(np.isfinite(frames.p))


TIGHT = MIMIC + '<limit lower="-0.5" upper="0.5" effort="10" velocity="0.5"/><mimic joint="j2" multiplier="-2" offset="0.1"/>'  # fmt: skip


def test_mimic_limits_expand_from_the_coordinates(tmp_path):
    m = load_urdf(_write(tmp_path, _arm(j3=TIGHT)))
    lim = joint_limits(m)
    assert lim.names == ["j1", "j2", "j3"]
    q = np.array([[0.3, 0.4]])
    assert lim.positions(q)[0].tolist() == pytest.approx([0.3, 0.4, -2 * 0.4 + 0.1])
    assert lim.velocities(q)[0, 2] == pytest.approx(-0.8)
    assert (lim.lower[2], lim.upper[2], lim.velocity[2]) == (-0.5, 0.5, 0.5)


def _check(m, amplitude: float):
    """`check_trajectory` of a 2 s plan moving every coordinate's first two harmonics by ±`amplitude` rad."""
    from trajectories.fourier import FourierTrajectory
    from trajectories.verify import check_trajectory

    a = np.zeros((m.nq, 2))
    a[:, 0], a[:, 1] = amplitude, -amplitude
    traj = FourierTrajectory(2.0, 2.0, np.zeros(m.nq), a, np.zeros((m.nq, 2)))
    return check_trajectory(m, traj, m.root, "urdf", dt=0.01, collision_margin=None)


def test_plan_check_sees_a_mimic_joints_own_limits(tmp_path):
    """A motion inside j2's ±2 rad, 2 rad/s drives its mimic j3 (×−2) beyond j3's own ±0.5 rad, 0.5 rad/s."""
    m = load_urdf(_write(tmp_path, _arm(j3=TIGHT)))
    big = _check(m, 0.6)
    assert any("j3" in p and "position range" in p for p in big.problems), big.problems
    assert any("j3" in p and "velocity limit" in p for p in big.problems), big.problems
    assert not any("j1" in p or "j2" in p for p in big.problems), big.problems
    assert not any("j3" in p for p in _check(m, 0.01).problems)


def test_design_rows_keep_a_mimic_in_its_range(tmp_path):
    """The design's linear rows bound q_j3 = −2 q_j2 + 0.1 to j3's range less the margin, and its speed."""
    from trajectories.excitation import ExcitationSettings, linear_limit_rows

    m = load_urdf(_write(tmp_path, _arm(j3=TIGHT)))
    s = ExcitationSettings(duration=2.0, period=2.0, harmonics=2, position_margin=0.05)
    G, lbg, ubg = linear_limit_rows(m, s)
    lb, ub = lbg[0], ubg[0]
    bound = np.isclose(ub, 0.5 - 0.05 - 0.1) & np.isclose(lb, -0.5 + 0.05 - 0.1)
    assert bound.any()  # the mimic's position rows, shifted by its offset
    assert np.isclose(ub, 0.5 * s.velocity_fraction).any()


@pytest.mark.skipif(not (ERD / "z1_description/urdf/z1.urdf").is_file(), reason="example-robot-data lacks Z1")
def test_z1_gripper_adjacent_through_fixed_stator():
    from robots.collision import _adjacent  # the rule under test: no public view of adjacency

    z1 = load_urdf(ERD / "z1_description/urdf/z1.urdf")
    assert _adjacent(z1, "link06", "gripperMover")


def test_parameter_set_without_lengths_keeps_the_models(tmp_path):
    """A parameter-set file without lengths, read where users pass one (`--params FILE`, `model export --params`),
    keeps the model's named lengths; a length it gives wins."""
    from formats.parameter_set import FORMAT
    from robots.full_set import load_full_set
    from robots.params_io import resolve_params
    from robots.registry import get_model

    model = get_model("tulip")
    own = next(iter(model.params.values())).lengths
    assert own, "TUlip names lengths: the test needs them"
    urdf = next(iter(model.params.values()))
    d = {"format": FORMAT, "mass": dict(urdf.mass), "com": {k: list(v) for k, v in urdf.com.items()}}
    path = tmp_path / "lab.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    assert resolve_params(str(path), model).lengths == own
    assert load_full_set(path, model).params.lengths == own
    first = next(iter(own))
    path.write_text(json.dumps(d | {"lengths": {first: own[first] + 0.5}}), encoding="utf-8")
    assert resolve_params(str(path), model).lengths == own | {first: own[first] + 0.5}
    assert load_full_set(path, model).params.lengths == own | {first: own[first] + 0.5}


def test_export_warns_on_a_thousandfold_mass(tmp_path, capsys):
    src = _write(tmp_path, _arm())
    out = tmp_path / "out.urdf"
    assert main(["model", "show", str(src), "--json"]) == 0
    capsys.readouterr()
    from formats.parameter_set import FORMAT

    pset = {"format": FORMAT,
            "mass": {"base": 1.0, "l1": 1.0, "l2": 1000.0}, "com": {n: [0, 0, 0.1] for n in ("base", "l1", "l2")}}  # fmt: skip
    p = tmp_path / "g.json"
    p.write_text(json.dumps(pset), encoding="utf-8")
    assert main(["model", "export", str(src), "--params", str(p), "--out", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert any("'l2'" in w and "grams" in w for w in res["warnings"])
    assert not any("'l1'" in w for w in res["warnings"])
