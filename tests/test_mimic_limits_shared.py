"""A mimic joint's own limits through every check (design refusals up front, `plan check`, posture and stream
checks via `RobotModel.limit_violations`), and the URDF boundary's degrees heuristic, speed warnings and inertia
tolerance as the README states them."""

from __future__ import annotations

import numpy as np
import pytest
from test_urdf_boundary import MIMIC, _arm, _check, _write

from poise.cli import main
from robots.description import placeholder_limits
from robots.urdf import load_urdf

QUICK = ["--duration", "4", "--period", "4", "--harmonics", "2", "--starts", "1", "--max-iter", "30", "--seed",
         "1", "--no-self-collision", "--force"]  # fmt: skip


def _mimic(limit: str, multiplier: float = 1.0, offset: float = 0.0) -> str:
    """j3 mimicking j2 (±2 rad) with its own `<limit>` XML."""
    return MIMIC + f'{limit}<mimic joint="j2" multiplier="{multiplier:g}" offset="{offset:g}"/>'


def _design_refused(tmp_path, capsys, text: str, *extra: str) -> str:
    """`plan trajectory` on the URDF `text`: exit 2, one line, no plan written; returns the message."""
    out = tmp_path / "plan.json"
    assert main(["plan", "trajectory", str(_write(tmp_path, text)), "--out", str(out), *QUICK, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert not out.exists()
    return err


def test_zero_mimic_velocity_is_refused_and_cannot_hide_a_violation(tmp_path, capsys):
    text = _arm(j3=_mimic('<limit lower="-2" upper="2" effort="10" velocity="0"/>'))
    m = load_urdf(_write(tmp_path, text))
    c = _check(m, 1.5)  # j1, j2 at 1.5·2π/2 rad/s > 2 rad/s; j3 follows j2 against a zero limit
    assert c.velocity_ratio == np.inf  # not NaN: 0/0 would have hidden every velocity violation
    assert any("j3" in p and "velocity limit is 0 rad/s" in p for p in c.problems), c.problems
    err = _design_refused(tmp_path, capsys, text)
    assert "j3" in err and "velocity 0" in err


def test_mimic_whose_range_the_followed_joint_cannot_meet_is_refused(tmp_path, capsys):
    """PR2's gripper: multiplier −1 maps j2's [0, 0.548] onto [−0.548, 0]; j3's own [0, 0.548] meets it at 0 only."""
    j2 = '<limit lower="0" upper="0.548" effort="10" velocity="2"/>'
    text = _arm(j2=j2, j3=_mimic(j2, multiplier=-1))
    for margin in ("0", "0.05"):
        err = _design_refused(tmp_path, capsys, text, "--position-margin", margin)
        assert "j3" in err and "j2" in err and "only at j2 = 0" in err and "--max-iter" not in err


def test_mimic_with_lower_and_upper_left_out_is_named_pinned(tmp_path, capsys):
    text = _arm(j3=_mimic('<limit effort="10" velocity="2"/>'))
    for margin in ("0", "0.05"):
        err = _design_refused(tmp_path, capsys, text, "--position-margin", margin)
        assert "j3" in err and "[0, 0]" in err and "--position-margin" not in err


def test_margin_that_leaves_a_mimic_no_range_is_told(tmp_path, capsys):
    text = _arm(j3=_mimic('<limit lower="-0.04" upper="0.04" effort="10" velocity="2"/>'))
    err = _design_refused(tmp_path, capsys, text, "--position-margin", "0.05")
    assert "j3" in err and "lower --position-margin" in err


def test_posture_check_sees_a_mimic_joints_own_range(tmp_path):
    """`limit_violations` (the executor's stream and posture checks) reports j3 = −2·j2 + 0.1 outside ±0.5 rad."""
    lim = '<limit lower="-0.5" upper="0.5" effort="10" velocity="2"/>'
    m = load_urdf(_write(tmp_path, _arm(j3=_mimic(lim, multiplier=-2, offset=0.1))))
    assert m.limit_violations(np.array([0.0, 0.1])) == []
    bad = m.limit_violations(np.array([0.0, 0.4]))  # j3 = −0.7 rad
    assert len(bad) == 1 and bad[0].startswith("j3 = ") and "deg" in bad[0]
    assert np.degrees(-0.7) == pytest.approx(float(bad[0].split()[2]), abs=0.01)


def test_prismatic_mimic_reported_in_metres(tmp_path):
    text = _arm(j3=_mimic('<limit lower="-0.1" upper="0.1" effort="10" velocity="0.1"/>')).replace(
        '<joint name="j3" type="revolute">', '<joint name="j3" type="prismatic">'
    )
    m = load_urdf(_write(tmp_path, text))
    bad = m.limit_violations(np.array([0.0, 0.5]))
    assert len(bad) == 1 and "j3 = 0.5000 m" in bad[0] and "deg" not in bad[0]
    c = _check(m, 0.3)
    msgs = [p for p in c.problems if "j3" in p]
    assert msgs and all("rad" not in p for p in msgs) and any(" m" in p or "m/s" in p for p in msgs), msgs


def _description(tmp_path, urdf: str, limits: str) -> str:
    _write(tmp_path, urdf, "d.urdf")
    toml = f'format = "poise robot description"\nurdf = "d.urdf"\nname = "d"\n{limits}'
    return str(_write(tmp_path, toml, "d.poise.toml"))


def test_description_overrides_a_degrees_like_limit(tmp_path, capsys):
    """A URDF speed of 180 (degrees/s) is refused alone; the description's [joint_limits] value applies instead."""
    urdf = _arm(j2='<limit lower="-2" upper="2" effort="10" velocity="180"/>')
    assert main(["model", "show", _description(tmp_path, urdf, "")]) == 2
    assert "look like degrees" in capsys.readouterr().err
    path = _description(tmp_path, urdf, "[joint_limits.j2]\nvelocity = 2.0\n")
    assert main(["model", "show", path]) == 0
    from robots.description import load_description

    assert load_description(path).velocity_limit.tolist() == [2.0, 2.0]


@pytest.mark.parametrize(
    ("limit", "warned"),
    [
        (
            '<limit lower="-12.5664" upper="12.5664" effort="10" velocity="2"/>',
            "exceeds ±2π",
        ),  # 4π rounded up
        ('<limit lower="-2" upper="2" effort="10" velocity="100"/>', None),  # iCub's, Alex's placeholder
        ('<limit lower="-2" upper="2" effort="10" velocity="1000"/>', "implausibly high"),
    ],
)
def test_placeholders_load(tmp_path, limit, warned):
    m = load_urdf(_write(tmp_path, _arm(j2=limit)))
    hits = [w for w in m.warnings if "'j2'" in w]
    assert (warned is None and not hits) or (warned is not None and any(warned in w for w in hits)), hits


def test_placeholder_speed_is_a_placeholder_not_a_warning(tmp_path):
    """≥ 1e4 rad/s (iCub's 50000) is a placeholder: no load warning, listed by `placeholder_limits` instead."""
    m = load_urdf(_write(tmp_path, _arm(j2='<limit lower="-2" upper="2" effort="10" velocity="50000"/>')))
    assert not [w for w in m.warnings if "'j2'" in w]
    assert placeholder_limits(m)["velocity"] == {"j2": 50000.0}


def test_massless_link_with_rounding_noise_inertia_loads(tmp_path):
    inertia = '<inertia ixx="1e-9" ixy="0" ixz="0" iyy="-1e-12" iyz="0" izz="1e-9"/>'
    l2 = f'<inertial><mass value="0"/>{inertia}</inertial>'
    assert load_urdf(_write(tmp_path, _arm(l2=l2))).nq == 2
