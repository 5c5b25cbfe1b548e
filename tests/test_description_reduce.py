"""A robot description's `[reduce] lock`: a locked joint is a fixed joint at that coordinate, so the sub-model's
frames and joint torques are the full model's with the joint held there — for revolute joints and for prismatic
ones (a gripper's fingers), and a joint that mimics a locked one stays where the mimic puts it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ERD

from formats.errors import DataError
from robots import dynamics as dyn
from robots.description import load_description
from robots.kinematics import link_frames
from robots.urdf import load_urdf
from trajectories.excitation import position_range

PANDA = ERD / "panda_description/urdf/panda.urdf"


def _describe(tmp_path, lock: str):
    path = tmp_path / "panda.poise.toml"
    path.write_text(
        f'format = "poise robot description"\nurdf = "{PANDA}"\nname = "panda"\n\n[reduce]\nlock = {{ {lock} }}\n',
        encoding="utf-8",
    )
    return load_description(path)


def test_locked_prismatic_and_revolute_joints_hold_the_full_models_frames_and_torques(tmp_path):
    full = load_urdf(PANDA)
    assert full.joint_names[-1] == "panda_finger_joint1" and full.nq == 8  # finger 2 mimics finger 1
    finger, wrist = 0.031, 0.4
    sub = _describe(tmp_path, f"panda_finger_joint1 = {finger}, panda_joint7 = {wrist}")
    assert sub.joint_names == full.joint_names[:6]
    rng = np.random.default_rng(3)
    q6 = rng.uniform(sub.lower, sub.upper, size=(20, 6))
    qd6, qdd6 = rng.normal(size=(20, 6)), rng.normal(size=(20, 6))
    q8 = np.column_stack([q6, np.full(20, wrist), np.full(20, finger)])
    z2 = np.zeros((20, 2))
    ps, base = next(iter(full.params)), full.root
    ours = link_frames(sub, q6, ps, base)
    theirs = link_frames(full, q8, ps, base)
    names = [lk.name for lk in full.links]
    for k, lk in enumerate(sub.links):
        j = names.index(lk.name)
        np.testing.assert_allclose(ours.p[:, k], theirs.p[:, j], atol=1e-12, err_msg=lk.name)
        np.testing.assert_allclose(ours.R[:, k], theirs.R[:, j], atol=1e-12, err_msg=lk.name)
    # both fingers moved apart by the lock (the mimic's too), not left at 0
    k_left, k_right = (names.index(n) for n in ("panda_leftfinger", "panda_rightfinger"))
    gap = np.linalg.norm(theirs.p[:, k_left] - theirs.p[:, k_right], axis=1)
    np.testing.assert_allclose(gap, 2 * finger, atol=1e-12)
    tau_sub = dyn.rnea(sub, q6, qd6, qdd6, ps)
    tau_full = dyn.rnea(full, q8, np.column_stack([qd6, z2]), np.column_stack([qdd6, z2]), ps)
    np.testing.assert_allclose(tau_sub, tau_full[:, :6], atol=1e-9)


@pytest.mark.parametrize(
    "lock, message",
    [
        ("panda_finger_joint1 = 0.2", "panda_finger_joint1 = 0.2 is outside its limits [0, 0.04]"),
        ("panda_hand_joint = 0.0", "'panda_hand_joint' is fixed already"),
    ],
)
def test_a_lock_outside_the_limits_or_on_a_fixed_joint_is_refused(tmp_path, lock, message):
    with pytest.raises(DataError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _describe(tmp_path, lock)


def test_a_joint_the_margin_leaves_no_range_is_named_with_the_way_out():
    with pytest.raises(DataError) as err:
        position_range(load_urdf(PANDA), 0.05)
    assert "panda_finger_joint1" in str(err.value) and "[reduce] lock" in str(err.value)
