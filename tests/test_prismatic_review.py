"""Review of a prismatic joint through plan → MuJoCo twin → identify dynamic: MuJoCo's physics of a slide joint
against poise's inverse dynamics, the units the twin's joint truth is declared in, and the plan figure's labels
(design caps, the default acceleration limit, a continuous joint's unlimited position)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from drivers.emulators.mujoco_arm import ArmImperfections, arm_efforts, physical_truth
from formats.dynamic_recording import (
    KNOWN_KEYS,
    TRUE_JOINT_KEYS,
    TRUE_JOINT_UNITS,
    DynamicRecording,
    read_dynamic_recording,
    true_joint_units,
    write_dynamic_recording,
)
from robots import dynamics as dyn
from robots.params_io import perturbed
from robots.registry import get_model

G = 9.81

# a 0.5 m lift along z, then two revolute joints about y (the reviewer's robot)
LIFT = """<robot name="pr">
 <link name="base"/>
 <link name="slider"><inertial><origin xyz="0 0 0"/><mass value="2.0"/>
  <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="l1"><inertial><origin xyz="0.15 0 0"/><mass value="1.0"/>
  <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="l2"><inertial><origin xyz="0.1 0 0"/><mass value="0.5"/>
  <inertia ixx="0.005" iyy="0.005" izz="0.005" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <joint name="lift" type="prismatic"><parent link="base"/><child link="slider"/><axis xyz="0 0 1"/>
  <limit lower="0" upper="0.5" effort="200" velocity="0.5"/></joint>
 <joint name="j1" type="revolute"><parent link="slider"/><child link="l1"/><axis xyz="0 1 0"/>
  <limit lower="-2.5" upper="2.5" effort="20" velocity="3"/></joint>
 <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0"/><axis xyz="0 1 0"/>
  <limit lower="-2" upper="2" effort="10" velocity="3"/></joint>
</robot>"""

# a slide in the middle of the chain, on a tilted, offset axis in a rotated joint frame: every convention a slide
# joint has (its frame's origin and rpy, the axis's direction and sign, the child's CoM and inertia in it)
TILTED = """<robot name="tilted">
 <link name="base"/>
 <link name="a"><inertial><origin xyz="0.05 0.02 0.1" rpy="0.2 0 0.4"/><mass value="1.5"/>
  <inertia ixx="0.02" iyy="0.015" izz="0.01" ixy="0.001" ixz="0" iyz="0.002"/></inertial></link>
 <link name="b"><inertial><origin xyz="0.03 -0.04 0.06" rpy="0 0.3 0"/><mass value="0.8"/>
  <inertia ixx="0.004" iyy="0.006" izz="0.005" ixy="0" ixz="0.0005" iyz="0"/></inertial></link>
 <link name="c"><inertial><origin xyz="0.1 0.01 -0.02"/><mass value="0.6"/>
  <inertia ixx="0.003" iyy="0.004" izz="0.002" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <joint name="r1" type="revolute"><parent link="base"/><child link="a"/><origin xyz="0 0 0.2"/><axis xyz="0 0 1"/>
  <limit lower="-3" upper="3" effort="50" velocity="2"/></joint>
 <joint name="slide" type="prismatic"><parent link="a"/><child link="b"/><origin xyz="0.1 0.05 0.3" rpy="0.4 -0.7 0.3"/>
  <axis xyz="0.6 0 -0.8"/><limit lower="-0.2" upper="0.3" effort="100" velocity="0.4"/></joint>
 <joint name="r2" type="revolute"><parent link="b"/><child link="c"/><origin xyz="0 0.1 0"/><axis xyz="1 0 0"/>
  <limit lower="-2" upper="2" effort="20" velocity="3"/></joint>
</robot>"""


def _model(tmp_path, text: str, name: str):
    path = tmp_path / f"{name}.urdf"
    path.write_text(text)
    return get_model(str(path))


def _states(model, rng, k: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random states strictly inside the joint ranges (MuJoCo's limit constraints stay inactive)."""
    lo, hi = model.lower + 0.02, model.upper - 0.02
    q = rng.uniform(lo, hi, (k, model.nq))
    return q, rng.normal(0, 1.0, (k, model.nq)), rng.normal(0, 4.0, (k, model.nq))


@pytest.mark.parametrize("text, name", [(LIFT, "lift"), (TILTED, "tilted")])
def test_mujoco_slide_joint_physics_matches_poise_inverse_dynamics(tmp_path, text, name):
    """MuJoCo's mj_inverse on the twin's model (a URDF slide joint, friction and noise off) gives poise's RNEA
    efforts — N on the slide, N·m on the hinges — at random states, for the URDF's and a perturbed truth (CoMs off
    the axis, other masses and inertias: the reviewer's `--truth perturbed`)."""
    model = _model(tmp_path, text, name)
    assert "prismatic" in {model.joints[model.coordinates[j]].type for j in range(model.nq)}
    rng = np.random.default_rng(4)
    for truth in (model.parameter_set("urdf"),
                  physical_truth(perturbed(model.parameter_set("urdf"), rng, 0.1, 0.01, inertia_rel=0.2))):  # fmt: skip
        q, qd, qdd = _states(model, rng)
        _, mj = arm_efforts(model, truth, q, qd, qdd)
        ours = dyn.rnea(model, q, qd, qdd, truth)
        scale = np.abs(mj).max(axis=0)
        assert np.all(scale > 0.1)  # every joint loaded: the comparison is not of zeros
        assert np.max(np.abs(mj - ours) / scale) < 1e-9


def test_mujoco_lift_holds_the_weight_above_it(tmp_path):
    """At rest the vertical lift carries the weight of everything above it, +m·g along its +z axis (URDF: the
    child moves by q along `axis`; gravity −z): MuJoCo's effort, and poise's, from the masses alone."""
    model = _model(tmp_path, LIFT, "lift")
    truth = model.parameter_set("urdf")
    rng = np.random.default_rng(1)
    q = rng.uniform(model.lower + 0.02, model.upper - 0.02, (6, 3))
    zero = np.zeros_like(q)
    weight = sum(truth.mass.values()) * G
    assert weight == pytest.approx(3.5 * G)
    _, mj = arm_efforts(model, truth, q, zero, zero)
    assert np.allclose(mj[:, 0], weight, rtol=1e-6, atol=0)
    assert np.allclose(dyn.rnea(model, q, zero, zero, truth)[:, 0], weight, rtol=1e-6, atol=0)
    # lifting at a: the whole moving mass times a on top of its weight
    acc = zero.copy()
    acc[:, 0] = 2.0
    _, up = arm_efforts(model, truth, q, zero, acc)
    assert np.allclose(up[:, 0] - mj[:, 0], 3.5 * 2.0, rtol=1e-6, atol=0)


def test_twin_friction_and_armature_on_the_slide_are_the_declared_ones(tmp_path):
    """The twin adds exactly fv·q̇ + fc·sign(q̇) + Ia·q̈ on the slide as on the hinges (N·s/m, N, kg there): no
    damping, friction loss or armature of its own on a URDF slide joint."""
    model = _model(tmp_path, LIFT, "lift")
    truth = model.parameter_set("urdf")
    q, qd, qdd = _states(model, np.random.default_rng(2))
    _, rigid = arm_efforts(model, truth, q, qd, qdd)
    im = ArmImperfections(viscous=0.3, coulomb=0.8, armature=np.array([0.05, 0.01, 0.02]))
    _, real = arm_efforts(model, truth, q, qd, qdd, im)
    expected = rigid + 0.3 * qd + 0.8 * np.sign(qd) + np.array([0.05, 0.01, 0.02]) * qdd
    assert np.abs(real - rigid).max() > 0.5  # the imperfections show
    assert np.allclose(real, expected, rtol=0, atol=1e-9)


def test_true_joint_units_name_a_prismatic_joints_units(tmp_path):
    """The twin's joint truth keys name revolute units; a robot with a prismatic joint gets a header line saying
    which joints read them in N·s/m, N and kg — and it reads back."""
    assert true_joint_units(["j1", "j2"], []) == {}
    units = true_joint_units(["lift", "j1", "j2"], ["lift"])[TRUE_JOINT_UNITS]
    lin, rot = units.split("; ")
    assert lin == "viscous N·s/m, coulomb N, armature kg (lift)"
    assert rot == "viscous N·m·s/rad, coulomb N·m, armature kg·m² (j1, j2)"
    assert (
        true_joint_units(["lift"], ["lift"])[TRUE_JOINT_UNITS]
        == "viscous N·s/m, coulomb N, armature kg (lift)"
    )
    assert TRUE_JOINT_UNITS in KNOWN_KEYS and set(TRUE_JOINT_KEYS.values()) <= set(KNOWN_KEYS)
    t = np.arange(20) * 0.01
    meta = {key: "0.3" for key in TRUE_JOINT_KEYS.values()} | true_joint_units(["lift", "j1"], ["lift"])
    rec = DynamicRecording("pr", "base", ["lift", "j1"], t, np.zeros((20, 2)), np.zeros((20, 2)), meta=meta)
    path = tmp_path / "rec.csv"
    write_dynamic_recording(rec, path)
    back = read_dynamic_recording(path)
    assert back.meta[TRUE_JOINT_UNITS] == meta[TRUE_JOINT_UNITS]


def _figure(model, settings):
    from trajectories.fourier import FourierTrajectory
    from trajectories.plot import trajectory_figure

    lo = np.where(np.isfinite(model.lower), model.lower, -1.0)
    hi = np.where(np.isfinite(model.upper), model.upper, 1.0)
    a = np.zeros((model.nq, 2))
    a[:, 0] = 0.2 * (hi - lo) / 2
    traj = FourierTrajectory(4.0, 4.0, (lo + hi) / 2, a, np.zeros_like(a))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inf − inf on an unlimited joint warned (RuntimeWarning)
        return trajectory_figure(model, traj, model.root, "urdf", "p.json", settings=settings)


SETTINGS = {"position_margin": 0.05, "velocity_fraction": 0.98, "torque_fraction": 0.95,
            "acceleration_fraction": 0.9, "acceleration_default": 20.0}  # fmt: skip


def _labels(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_plan_figure_labels_a_prismatic_joints_caps_and_default_acceleration(tmp_path):
    import matplotlib.pyplot as plt

    model = _model(tmp_path, LIFT, "lift")
    fig = _figure(model, SETTINGS)
    labels = _labels(fig)
    caps = [x for x in labels if x.startswith("design cap")]
    assert "design cap: 0.05 rad (m on lift) from the limits (narrowest, widest range)" in caps
    assert {"design cap: 0.98 × the velocity limit", "design cap: 0.95 × the torque limit",
            "design cap: 0.9 × the acceleration limit"} <= set(caps)  # fmt: skip
    assert len(caps) == 4
    title = fig.legends[0].get_title().get_text()
    assert "the plan's default 20 rad/s² or m/s², the description gives none" in title
    assert labels[0].startswith("lift: 0…0.5 m, 0.5 m/s, 20 m/s², 200 N")
    plt.close(fig)


def test_plan_figure_of_a_continuous_joint_computes_nothing_on_infinite_limits(tmp_path):
    """A continuous joint: no RuntimeWarning (`_figure` turns it into an error), its curve in rad / π around 0 as
    the legend says, and the position margin drawn for the limited joint's range only."""
    import matplotlib.pyplot as plt

    text = LIFT.replace('type="revolute"><parent link="slider"', 'type="continuous"><parent link="slider"')
    model = _model(tmp_path, text, "cont")
    j1 = model.joint_names.index("j1")
    assert not np.isfinite(model.lower[j1]) and not np.isfinite(model.upper[j1])
    fig = _figure(model, SETTINGS)
    labels = _labels(fig)
    assert labels[j1].startswith("j1: unlimited (drawn in rad / π)")
    pos = fig.axes[0]
    curve = pos.lines[j1].get_ydata()
    assert np.all(np.isfinite(curve)) and np.abs(curve).max() > 0
    assert np.allclose(curve * np.pi, np.asarray(_figure_q(model))[:, j1], atol=1e-12)
    levels = sorted({round(abs(float(ln.get_ydata()[0])), 3) for ln in pos.lines
                     if ln.get_label().startswith("design cap")})  # fmt: skip
    half = [(model.upper[j] - model.lower[j]) / 2 for j in range(model.nq) if j != j1]
    assert levels == sorted({round(1 - 0.05 / h, 3) for h in half})  # not 1 − 0.05/π for j1
    assert "design cap: 0.05 rad (m on lift) from the limits (narrowest, widest range)" in labels
    plt.close(fig)


def _figure_q(model):
    """The angles `_figure` draws, on the figure's own time grid."""
    from trajectories.fourier import FourierTrajectory
    from trajectories.verify import sample_grid

    lo = np.where(np.isfinite(model.lower), model.lower, -1.0)
    hi = np.where(np.isfinite(model.upper), model.upper, 1.0)
    a = np.zeros((model.nq, 2))
    a[:, 0] = 0.2 * (hi - lo) / 2
    traj = FourierTrajectory(4.0, 4.0, (lo + hi) / 2, a, np.zeros_like(a))
    return traj.sample(sample_grid(traj, 0.01))[0]
