"""Small valid plans for tests and smoke runs (each posture with its own foot placement)."""

from __future__ import annotations

import math

import numpy as np

from formats.plan import Placement, Plan, Posture, Transition
from robots.kinematics import com_position, site_pose
from robots.stance import balance, other_pose, other_site, other_sole_problems, random_double_support
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
    """n random double-support postures (CoP margin >= `margin` with the guessed parameters), each with its other
    sole where a run may put it down (`robots.stance.other_sole_problems`: drawn again where not)."""
    rng = np.random.default_rng(seed)
    qs: list[np.ndarray] = []
    while len(qs) < n:  # one at a time: the draws that are kept are the same as n at once
        q = random_double_support(model, 1, rng, params=params, base="right", margin=margin)[0]
        if not other_sole_problems(model, "right", other_pose(model, q, params, "right")):
            qs.append(q)
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


def plan_with_transition(
    model: RobotModel,
    seed: int = 0,
    step: float = 0.15,
    waypoints: int = 5,
    move_s: float = 1.0,
    hold_s: float = 2.0,
    params: str = "sim",
) -> Plan:
    """Three postures: 0 and 1 on placement 0 joined by a closed-chain transition (waypoints projected onto
    the other sole at its placement, CoP on the straight line), then 2 on placement 1. Valid by construction
    (checked with the shared posture check)."""
    from drivers.setpoints import project_to_chain
    from robots.stance import check_posture

    plan = random_plan(model, 2, seed=seed, move_s=move_s, hold_s=hold_s, params=params)
    a = plan.postures[0]
    pose = plan.placement(a.placement).other_foot
    cop_a = com_position(model, a.q, params, "right")[:2]
    rng = np.random.default_rng(seed)
    for _ in range(200):
        q0 = a.q + rng.normal(0.0, step, model.nq)
        qb = project_to_chain(
            model, q0[None], pose, cop_a[None] + rng.normal(0.0, 0.003, (1, 2)), params, "right"
        )[0]
        if not check_posture(model, qb, params, "right", 0.0, pose=pose).issues:
            break
    else:
        raise RuntimeError("no second posture found on the placement")
    cop_b = com_position(model, qb, params, "right")[:2]
    ts = np.linspace(0.0, 1.0, waypoints)[1:-1]
    inner = project_to_chain(model, np.array([(1 - t) * a.q + t * qb for t in ts]), pose,
                             np.array([(1 - t) * cop_a + t * cop_b for t in ts]), params, "right")  # fmt: skip
    b = Posture(
        1,
        a.placement,
        qb,
        move_s,
        hold_s,
        (float(cop_b[0]), float(cop_b[1])),
        balance(model, qb, params).margin,
    )
    c = plan.postures[1]
    c.index = 2
    plan.postures = [a, b, c]
    plan.transitions = [Transition(0, 1, np.vstack([a.q, inner, qb]))]
    return plan
