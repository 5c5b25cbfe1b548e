"""The built-in iCub right arm: a sub-model of icub-models' iCubGenova04 with its F/T sensor frame."""

import numpy as np
import pytest

from formats.errors import DataError
from robots import dynamics as dyn
from robots.description import apply_description
from robots.registry import get_model
from robots.urdf import load_urdf


@pytest.fixture(scope="module")
def arm():
    return get_model("icub-right-arm")


def test_chain_sites_and_limits(arm):
    assert arm.joint_names == [
        "r_shoulder_pitch", "r_shoulder_roll", "r_shoulder_yaw", "r_elbow",
        "r_wrist_prosup", "r_wrist_pitch", "r_wrist_yaw",
    ]  # fmt: skip
    names = {lk.name for lk in arm.links}
    assert {"r_shoulder_3", "r_upper_arm"} <= names  # both sides of the sensor stay separate bodies
    assert not any(n.startswith(("l_", "neck", "head", "r_hip")) for n in names)
    for s in ("r_arm_ft_sensor", "r_arm_ft", "r_arm_ft_imu"):
        arm.site(s)
    # joint limits come from the URDF (elbow 15°…106°), the tendon constraints from the description
    i = arm.joint_names.index("r_elbow")
    assert np.degrees([arm.lower[i], arm.upper[i]]) == pytest.approx([15.0, 106.0], abs=0.01)
    assert len(arm.coupled_b) == 5
    ok = (arm.lower + arm.upper) / 2
    assert arm.limit_violations(ok) == []
    bad = ok.copy()
    bad[1], bad[2] = np.radians(150.0), np.radians(75.0)  # roll + yaw > 213.3°
    assert any("tendon 5" in v for v in arm.limit_violations(bad))


def test_sensor_frame_is_the_fixed_joint_frame(arm):
    rng = np.random.default_rng(3)
    q, qd, qdd = (rng.uniform(-1, 1, (3, arm.nq)) for _ in range(3))
    a = dyn.subtree_wrench_regressor(arm, q, qd, qdd, "r_arm_ft_sensor")
    b = dyn.subtree_wrench_regressor(arm, q, qd, qdd, "r_upper_arm")
    assert np.allclose(a, b, atol=1e-12)
    phi = dyn.standard_parameters(arm, "urdf")
    w = a @ phi
    assert np.all(np.abs(w[:, :3]).max(axis=1) > 1.0)  # the distal arm weighs ~2 kg
    # the proximal bodies (torso, shoulder up to r_shoulder_3) never enter the sensor wrench
    prox = [i for i, lk in enumerate(arm.links) if lk.name in ("chest", "r_shoulder_3")]
    for i in prox:
        assert np.all(a[..., 10 * i : 10 * i + 10] == 0)


def test_drop_names_unknown_joint(tmp_path):
    import icub_models

    m = load_urdf(icub_models.get_model_file("iCubGenova04"))
    with pytest.raises(DataError, match="no_such_joint"):
        apply_description(m, {"reduce": {"drop": ["no_such_joint"]}}, tmp_path / "x.poise.toml")
