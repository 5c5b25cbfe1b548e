"""Top up a plan greedily: add the feasible postures that lower κ most (thesis §4.5: the rescue of run 4).

Each added posture brings its own foot placement (the boards are re-placed for it), passes the posture checks
of `check_plan` under the plan's rules (for `--uncertainty` plans also the worst-case margin over the plan's
ϑ_b ball or ellipsoid), and is executed with the plan's move/hold durations and a cosine velocity profile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from design.greedy import greedy_augment
from design.planner import plan_kappa
from design.replicates import find_replicates
from design.verify import base_kappa, own_posture_issues, unidentified
from formats.errors import DataError
from formats.plan import Placement, Plan, Posture, plan_required_margin
from robots.kinematics import site_pose
from robots.plan_rules import cop_rule, rule_balance, worst_case_margin
from robots.stance import other_pose, other_site, other_sole_problems, random_double_support
from robots.tree import RobotModel

DRAWS_PER_CANDIDATE = 20  # give up after this many plain double-support draws per wanted candidate


@dataclass
class AugmentResult:
    plan: Plan
    kappa_before: float | None  # None: the plan's postures could not identify every parameter (plan's base)
    kappa_after: list[float | None]  # κ after each added posture (None while still not identifiable)
    pool: int
    draws: int  # double-support postures drawn to fill the pool (more than `pool` for robust plans)


def candidate_pool(model: RobotModel, plan: Plan, n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """`n` random double-support postures that `check_plan` accepts under the plan's rules (posture and placement),
    and the draws used."""
    required, rule = plan_required_margin(plan), cop_rule(model, plan)
    # Prefilter on the design CoP's margin; with an ellipsoid the checked CoP is its centre ϑ₀, so none.
    pre = required if rule.theta is None else -np.inf
    out: list[np.ndarray] = []
    max_draws = DRAWS_PER_CANDIDATE * max(n, 5)
    for draws in range(1, max_draws + 1):
        q = random_double_support(model, 1, rng, params=plan.params, base=plan.base, margin=pre)[0]
        pose = other_pose(
            model, q, plan.params, plan.base
        )  # its own placement: the description's stance rules
        if not own_posture_issues(model, plan, q)[0] and not other_sole_problems(model, plan.base, pose):
            out.append(q)
            if len(out) == n:
                return np.array(out), draws
    what = "" if rule.shape is None else " (worst case over the plan's ϑ_b uncertainty)"
    raise DataError(
        f"only {len(out)} of {max_draws} random double-support postures keep the plan's "
        f"{required * 1000:.1f} mm CoP margin{what}, fewer than --pool {n}; use a smaller --pool"
    )


def check_additions(model: RobotModel, plan: Plan, add: int, pool: int) -> None:
    """Refuse, before anything is sampled, an --add/--pool that cannot work: fewer than one posture, a pool smaller
    than the additions, or too few additions to identify every parameter (DataError)."""
    if add < 1 or pool < add:
        raise DataError("need --add ≥ 1 and --pool ≥ --add")
    short = _too_few(model, plan, add)
    if short:
        raise DataError(f"--add {add} is too few: {short}")


def augment_plan(model: RobotModel, plan: Plan, add: int, pool: int, seed: int) -> AugmentResult:
    """A new plan with `add` postures chosen greedily from `pool` random postures that pass the plan's check."""
    check_additions(model, plan, add, pool)
    rule = cop_rule(model, plan)  # the plan's CoP and worst case (`robots.plan_rules.settings_rule`)
    cand, draws = candidate_pool(model, plan, pool, np.random.default_rng(seed))
    k0 = base_kappa(model, plan.q, plan.base)[0]
    res = greedy_augment(model, plan.q, cand, add, plan.base)
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
        cop, margin = rule_balance(model, plan.base, plan.params, q, rule)  # stored as the planner stores it
        rm = worst_case_margin(model, plan, q, rule)
        postures.append(Posture(next_po + k, next_pl + k, q, move_s, hold_s, (float(cop[0]), float(cop[1])),
                                margin, rm))  # fmt: skip
    settings = dict(plan.settings)
    settings["augmented"] = {"added": add, "pool": pool, "seed": seed, "kappa_before": k0, "draws": draws}
    new = replace(plan, placements=placements, postures=postures, settings=settings)
    short = _too_few(model, new, 0)
    if short:
        raise DataError(
            f"after adding {add} postures from a pool of {pool}, {short}: use a larger --add or --pool"
        )
    return AugmentResult(replace(new, kappa=plan_kappa(model, new.q)), k0, res.kappas, pool, draws)


def _too_few(model: RobotModel, plan: Plan, add: int) -> str:
    """Why `add` more postures cannot make the plan identify every parameter ("" when they can, or may)."""
    for base in sorted(model.bases, key=lambda b: b != plan.base):
        gap = unidentified(model, plan.q, base)
        if gap is not None and add < gap.postures_short:
            return gap.message(len(plan.postures), find_replicates(plan.postures).distinct)
    return ""
