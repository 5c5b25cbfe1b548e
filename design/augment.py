"""Top up a plan greedily: add the feasible postures that lower κ most (thesis §4.5: the rescue of run 4).

Each added posture brings its own foot placement (the boards are re-placed for it), is verified like any
designed posture, and is executed with the plan's move/hold durations and a cosine velocity profile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from design.criteria import design_matrix, kappa
from design.greedy import greedy_augment
from design.planner import make_posture, plan_kappa
from robots.errors import DataError
from robots.kinematics import site_pose
from robots.plan_format import Placement, Plan
from robots.stance import other_site, random_double_support
from robots.tree import RobotModel


@dataclass
class AugmentResult:
    plan: Plan
    kappa_before: float
    kappa_after: list[float]  # κ after each added posture
    pool: int


def augment_plan(model: RobotModel, plan: Plan, add: int, pool: int, seed: int) -> AugmentResult:
    """A new plan with `add` postures chosen greedily from `pool` random verified double-support postures."""
    if add < 1 or pool < add:
        raise DataError("need --add ≥ 1 and --pool ≥ --add")
    if float(plan.settings.get("uncertainty") or 0.0) > 0 or plan.settings.get("ellipsoid"):
        raise DataError("augmenting plans designed with --uncertainty is not supported (robust margins)")
    margin = float(plan.settings.get("required_margin", plan.settings.get("margin", 0.0)))
    rng = np.random.default_rng(seed)
    cand = random_double_support(model, pool, rng, params=plan.params, base=plan.base, margin=margin)
    q0 = plan.q
    k0 = kappa(design_matrix(model, q0, plan.base))
    res = greedy_augment(model, q0, cand, add, plan.base)
    other = other_site(model, plan.base)
    placements, postures = list(plan.placements), list(plan.postures)
    move_s = postures[-1].move_s if postures else 30.0
    hold_s = postures[-1].hold_s if postures else 60.0
    next_pl = max((pl.index for pl in placements), default=-1) + 1
    next_po = max((p.index for p in postures), default=-1) + 1
    for k, i in enumerate(res.chosen):
        q = cand[i]
        R, p = site_pose(model, q, plan.params, other, plan.base)
        placements.append(Placement(next_pl + k, (float(p[0]), float(p[1]), math.atan2(R[1, 0], R[0, 0]))))
        postures.append(
            make_posture(model, next_po + k, next_pl + k, q, move_s, hold_s, plan.params, plan.base)
        )
    settings = dict(plan.settings)
    settings["augmented"] = {"added": add, "pool": pool, "seed": seed, "kappa_before": k0}
    q_all = np.array([p.q for p in postures])
    new = replace(
        plan, placements=placements, postures=postures, kappa=plan_kappa(model, q_all), settings=settings
    )
    return AugmentResult(new, k0, res.kappas, pool)
