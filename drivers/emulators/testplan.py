"""Small valid plans for tests and smoke runs (each posture with its own foot placement)."""

from __future__ import annotations

import math

import numpy as np

from formats.plan import Placement, Plan, Posture
from robots.kinematics import com_position, site_pose
from robots.stance import balance, other_site, random_double_support
from robots.tree import RobotModel


def random_plan(
    model: RobotModel,
    n: int,
    seed: int = 0,
    move_s: float = 3.0,
    hold_s: float = 4.0,
    margin: float = 0.03,
    params: str = "sim",
) -> Plan:
    """n random double-support postures (CoP margin >= `margin` with the guessed parameters)."""
    rng = np.random.default_rng(seed)
    qs = random_double_support(model, n, rng, params=params, base="right", margin=margin)
    placements, postures = [], []
    other = other_site(model, "right")
    for i, q in enumerate(qs):
        R, p = site_pose(model, q, params, other, "right")
        placements.append(Placement(i, (float(p[0]), float(p[1]), math.atan2(R[1, 0], R[0, 0]))))
        cop = com_position(model, q, params, "right")[:2]
        postures.append(
            Posture(i, i, q, move_s, hold_s, (float(cop[0]), float(cop[1])), balance(model, q, params).margin)
        )
    return Plan(model.name, "right", model.joint_names, placements, postures, params=params)
