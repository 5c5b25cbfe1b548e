"""The MuJoCo twin with point masses welded by fixed joints (a force-sensor frame, a gripper mount: mass, zero
inertia) and with mimic joints (MuJoCo's joint equality): MuJoCo's inverse dynamics against poise's model, MuJoCo's
own fusion of welded bodies against `robots.rigid_groups`, and plan → simulate → identify within 3 SE of the truth."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from drivers.emulators.mujoco_arm import arm_efforts, mujoco_from_urdf_text
from poise.cli import main
from robots import dynamics as dyn
from robots.rigid_groups import group_inertia, groups_without_inertia, rigid_groups
from robots.urdf import URDF_SET, load_urdf

LIMIT = '<limit lower="-2.5" upper="2.5" effort="20" velocity="3"/>'
ZERO = '<inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/>'


def _inertial(xyz: str, mass: float, inertia: str | None = None) -> str:
    inertia = (
        inertia or '<inertia ixx="0.004" iyy="0.006" izz="0.005" ixy="0.0004" ixz="-0.0003" iyz="0.0002"/>'
    )
    return f'<inertial><origin xyz="{xyz}"/><mass value="{mass}"/>{inertia}</inertial>'


def _robot(extra_links: str = "", extra_joints: str = "", l2: str | None = None) -> str:
    """Base welded to the world, two revolute links, anything else appended."""
    l2 = l2 if l2 is not None else _inertial("0.1 0.01 -0.02", 0.6)
    return (
        '<robot name="pmx"><link name="world"/>'
        f'<link name="base">{_inertial("0 0 0.05", 2.0)}</link>'
        f'<link name="l1">{_inertial("0.15 0.02 0", 1.0)}</link>'
        f'<link name="l2">{l2}</link>{extra_links}'
        '<joint name="fix" type="fixed"><parent link="world"/><child link="base"/><origin xyz="0 0 0.1"/></joint>'
        f'<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>{LIMIT}</joint>'
        '<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0"/>'
        f'<axis xyz="0 1 0"/>{LIMIT}</joint>{extra_joints}</robot>'
    )


# a force-sensor frame (0.3 kg point mass) welded to l2 with a rotated origin, a tool point mass welded to it
WELDED = _robot(
    f'<link name="ft">{_inertial("0.01 0 0.02", 0.3, ZERO)}</link>'
    f'<link name="tip">{_inertial("0.03 0.01 0", 0.1, ZERO)}</link>',
    '<joint name="ftfix" type="fixed"><parent link="l2"/><child link="ft"/><origin xyz="0.2 0 0" rpy="0.3 0 0.5"/>'
    '</joint><joint name="tipfix" type="fixed"><parent link="ft"/><child link="tip"/><origin xyz="0 0 0.05" '
    'rpy="0 0.4 0"/></joint>',
)

# a gripper: two prismatic fingers on a welded tool, the second mimicking the first (multiplier and offset)
MIMIC = _robot(
    f'<link name="tool">{_inertial("0.02 0 0", 0.2)}</link>'
    f'<link name="fa">{_inertial("0 0.01 0", 0.05)}</link><link name="fb">{_inertial("0 -0.01 0", 0.07)}</link>',
    '<joint name="toolfix" type="fixed"><parent link="l2"/><child link="tool"/><origin xyz="0.2 0 0"/></joint>'
    '<joint name="fa_j" type="prismatic"><parent link="tool"/><child link="fa"/><axis xyz="0 1 0"/>'
    '<limit lower="0" upper="0.04" effort="20" velocity="0.2"/></joint>'
    '<joint name="fb_j" type="prismatic"><parent link="tool"/><child link="fb"/><axis xyz="0 -1 0"/>'
    '<limit lower="0" upper="0.1" effort="20" velocity="0.4"/><mimic joint="fa_j" multiplier="1.5" offset="0.01"/>'
    "</joint>",
)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _states(model, n: int = 25, seed: int = 0):
    rng = np.random.default_rng(seed)
    lo, hi = model.sampling_bounds()
    q = rng.uniform(lo, hi, (n, model.nq))
    return q, rng.normal(0, 1.5, q.shape), rng.normal(0, 4, q.shape)


@pytest.mark.parametrize("text", [WELDED, MIMIC], ids=["welded point masses", "mimic gripper"])
def test_mujoco_inverse_dynamics_matches_the_model(tmp_path, text):
    """MuJoCo's inverse dynamics of the twin (welded zero-inertia bodies; a follower carried by its equality) is
    poise's RNEA, to rounding, at random states."""
    model = load_urdf(_write(tmp_path / "r.urdf", text))
    q, qd, qdd = _states(model)
    _, tau = arm_efforts(model, URDF_SET, q, qd, qdd)
    ref = dyn.rnea(model, q, qd, qdd, URDF_SET)
    assert np.max(np.abs(ref)) > 0.1
    np.testing.assert_allclose(tau, ref, atol=1e-9 * np.max(np.abs(ref)))


def test_mimic_follower_effort_reaches_its_leader(tmp_path):
    """The follower's load is on the leader's effort: a heavier follower finger changes the leader's effort by
    multiplier × (what the follower alone would need) — the coupling is not dropped."""
    light = load_urdf(_write(tmp_path / "a.urdf", MIMIC))
    heavy = load_urdf(
        _write(tmp_path / "b.urdf", MIMIC.replace('<mass value="0.07"/>', '<mass value="0.57"/>'))
    )
    q, qd, qdd = _states(light)
    _, t_light = arm_efforts(light, URDF_SET, q, qd, qdd)
    _, t_heavy = arm_efforts(heavy, URDF_SET, q, qd, qdd)
    lead = light.joint_names.index("fa_j")
    assert np.max(np.abs(t_heavy[:, lead] - t_light[:, lead])) > 1e-2


def test_welded_groups_compose_as_mujoco_fuses_them(tmp_path):
    """`robots.rigid_groups` composes l2 + ft + tip (parallel axis, rotated origins) as MuJoCo's compiler fuses
    static bodies (fusestatic): same mass, CoM and principal moments."""
    import mujoco

    model = load_urdf(_write(tmp_path / "w.urdf", WELDED))
    ps = model.parameter_set(URDF_SET)
    groups = rigid_groups(model)
    assert groups["l2"] == ["l2", "ft", "tip"]
    gi = group_inertia(model, ps, "l2", groups["l2"])
    m = mujoco_from_urdf_text(WELDED)  # the twin: bodies kept apart
    spec = mujoco.MjSpec.from_string(
        re.sub(
            r"(<robot\b[^>]*>)",
            r'\1<mujoco><compiler fusestatic="true" balanceinertia="false"/></mujoco>',
            WELDED,
            count=1,
        )  # fmt: skip
    )
    fused = spec.compile()
    b = mujoco.mj_name2id(fused, mujoco.mjtObj.mjOBJ_BODY, "l2")
    assert fused.nbody < m.nbody  # MuJoCo did fuse
    assert fused.body_mass[b] == pytest.approx(gi.mass, rel=1e-12)
    np.testing.assert_allclose(fused.body_ipos[b], gi.com, atol=1e-12)
    np.testing.assert_allclose(np.sort(fused.body_inertia[b]), np.linalg.eigvalsh(gi.inertia), rtol=1e-9)
    assert groups_without_inertia(model, ps) == {}


def test_a_point_mass_a_joint_moves_is_refused_with_its_link(tmp_path, capsys):
    """A zero-inertia link on a moving joint (nothing with inertia welded to it) is named before MuJoCo, in one
    line; the same mass welded to l2 instead simulates (test above)."""
    text = _robot(
        f'<link name="pm">{_inertial("0.05 0 0", 0.3, ZERO)}</link>',
        '<joint name="j3" type="revolute"><parent link="l2"/><child link="pm"/><origin xyz="0.2 0 0"/>'
        f'<axis xyz="0 0 1"/>{LIMIT}</joint>',
    )
    model = load_urdf(_write(tmp_path / "p.urdf", text))
    assert groups_without_inertia(model, model.parameter_set(URDF_SET)) == {"pm": ["pm"]}
    plan = tmp_path / "p.json"
    assert main(["plan", "trajectory", str(tmp_path / "p.urdf"), "--out", str(plan), "--duration", "4",
                 "--period", "4", "--harmonics", "2", "--max-iter", "5", "--samples", "30", "--seed", "1",
                 "--no-self-collision"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["simulate", "trajectory", str(plan), "--out", str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no inertia" in err and "pm" in err and "point mass" in err and "ft" not in err, err
    assert "\n" not in err and "Traceback" not in err and "mjMINVAL" not in err
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize(
    "text, plan_extra, sim_extra, fit_extra",
    [
        (WELDED, [], ["--coulomb", "0.04", "--viscous", "0.015"], []),
        (MIMIC, ["--position-margin", "0.01"], ["--coulomb", "0", "--viscous", "0"], ["--no-friction"]),
    ],
    ids=["welded point masses", "mimic gripper"],
)
def test_plan_simulate_identify_recovers_the_twins_truth(
    tmp_path, capsys, text, plan_extra, sim_extra, fit_extra
):
    """plan trajectory → simulate trajectory (perturbed truth: the point masses' masses and CoMs vary too) →
    identify dynamic: every estimated base parameter within 3 SE of the truth the twin simulated."""
    urdf = _write(tmp_path / "r.urdf", text)
    plan, rec, truth = tmp_path / "p.json", tmp_path / "r.csv", tmp_path / "truth.json"
    assert (
        main(
            [
                "plan",
                "trajectory",
                str(urdf),
                "--out",
                str(plan),
                "--duration",
                "10",
                "--period",
                "10",
                "--harmonics",
                "3",
                "--max-iter",
                "30",
                "--seed",
                "1",
                "--no-self-collision",
                *plan_extra,
            ]
        )
        == 0
    )
    assert main(["simulate", "trajectory", str(plan), "--out", str(rec), "--seed", "1", "--truth-out", str(truth),
                 "--effort-noise", "0.01", *sim_extra]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["identify", "dynamic", str(rec), "--reference", str(truth), "--json", *fit_extra]) == 0
    ref = json.loads(capsys.readouterr().out)["reference"]
    print(f"max |z| {ref['max_abs_z']:.2f} over {ref['estimated']} base parameters")
    assert ref["estimated"] >= 8 and ref["within_3se"] == ref["estimated"], ref
    assert ref["max_abs_z"] < 3
    # the truth kept its point masses (mass, no inertia) where the URDF has them; the URDF's own set simulates too
    t = json.loads(truth.read_text())
    for link in {"ft", "tip"} & set(t["mass"]):
        assert t["mass"][link] > 0 and not any(t.get("inertia", {}).get(link, []))
    assert (
        main(["simulate", "trajectory", str(plan), "--out", str(tmp_path / "u.csv"), "--truth", URDF_SET])
        == 0
    )
