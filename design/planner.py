"""From solver results to a plan: pick the best start, order postures, add transitions, fill the plan file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from design.criteria import design_matrix, kappa
from design.multistart import StartSpec, run_starts, settings_dict
from design.problems import KAPPA_TIE_RTOL, Settings, SolveResult
from design.sampler import PostureSet
from design.uncertainty import design_rule, nominal_cop
from formats.plan import Placement, Plan, Posture
from robots.plan_rules import rule_margin
from robots.stance_spec import other_base
from robots.tree import RobotModel

if TYPE_CHECKING:
    from design.verify import Unidentified

FORMAT_NOTE = "angles rad, lengths m, durations s; CoP/margins from the design parameters"


def robust_margins(model: RobotModel, q: np.ndarray, s: Settings) -> np.ndarray | None:
    """Worst-case margin over the ϑ_b ball or ellipsoid of the settings (closed form), per posture (m)."""
    if s.uncertainty <= 0 and s.ellipsoid is None:
        return None
    rule = design_rule(model, s.base, s.uncertainty, s.ellipsoid)  # the one worst case (robots.plan_rules)
    return np.array([rule_margin(model, s.base, s.params, qi, rule) for qi in q])


def make_posture(
    model: RobotModel, index: int, placement: int, q: np.ndarray, move_s: float, hold_s: float,
    params: str, base: str, ellipsoid=None, robust_margin: float | None = None,
) -> Posture:  # fmt: skip
    """A plan posture with its predicted CoP and shapely margin (at the ellipsoid's centre when given)."""
    cop, margin = nominal_cop(model, q, params, base, ellipsoid)
    return Posture(index, placement, q, move_s, hold_s, (float(cop[0]), float(cop[1])), margin, robust_margin)


def plan_kappa(model: RobotModel, q: np.ndarray) -> dict[str, float]:
    """True κ of the design regressor for every named base of the robot."""
    return {b: kappa(design_matrix(model, q, b)) for b in model.bases}


def build_plan(
    model: RobotModel,
    ps: PostureSet,
    s: Settings,
    *,
    seed: int | None,
    move_s: float,
    hold_s: float,
    solver: dict,
    transitions: bool = True,
    extra_settings: dict | None = None,
    robot_file: str | None = None,
) -> Plan:
    """A plan from an optimised posture set: postures ordered within placements, with transitions.

    `robot_file`: the description or URDF the model was loaded from, recorded for robots not built in."""
    from design.transitions import make_transitions, order_postures

    s = s.resolved(model)

    order = order_postures(model, ps) if transitions else np.arange(len(ps.q))
    q = ps.q[order]
    placement = ps.placement[order]
    rob = robust_margins(model, q, s)
    postures = [
        make_posture(
            model,
            i,
            int(placement[i]),
            qi,
            move_s,
            hold_s,
            s.params,
            s.base,
            s.ellipsoid,
            None if rob is None else float(rob[i]),
        )  # fmt: skip
        for i, qi in enumerate(q)
    ]
    placements = [Placement(j, tuple(float(v) for v in pose)) for j, pose in enumerate(ps.poses)]
    settings = settings_dict(s)
    settings["required_margin"] = s.required_margin
    settings.update(extra_settings or {})
    plan = Plan(
        robot=model.name,
        base=s.base,
        joint_names=list(model.joint_names),
        placements=placements,
        postures=postures,
        kappa=plan_kappa(model, q),
        solver=solver,
        seed=seed,
        settings=settings,
        params=s.params,
        robot_file=robot_file,
    )
    if transitions:
        plan.transitions = make_transitions(model, plan, s)
    return plan


def design(
    model: RobotModel,
    s: Settings,
    n_postures: int,
    n_placements: int,
    starts: int,
    seed: int,
    backend: str = "casadi",
    scheduler: str | None = None,
    workers: int | None = None,
    on_result=None,
    robot: str | None = None,
) -> tuple[SolveResult, list[dict]]:
    """Run the starts; return the best result (lowest true κ) and a per-start summary.

    `robot` is what worker processes pass to `robots.registry.get_model` to rebuild the model: a built-in
    name or the path of the description/URDF file it came from (default: the model's name)."""
    s = s.resolved(model)
    ref = robot or model.name
    specs = [StartSpec(ref, n_postures, n_placements, seed, k, s, backend) for k in range(starts)]
    best: SolveResult | None = None
    best_key: tuple[bool, float] | None = None
    summary = []
    for k, res in run_starts(specs, workers, scheduler, model):
        row = start_summary(model, k, res, s.base)
        summary.append(row)
        # order of starts: those whose postures identify every parameter first (the row's rank decision, None:
        # not identifiable), then by true κ
        key = (row["kappa"] is None, res.kappa)
        if best_key is None or key < best_key:
            best, best_key = res, key
        if on_result:
            on_result(k, res, best)
    summary.sort(key=lambda d: d["start"])
    assert best is not None
    return best, summary


def start_summary(model: RobotModel, k: int, res: SolveResult, base: str) -> dict:
    """One start's row: κ before/after on the design base and after on the other (None: the postures cannot identify
    every parameter, `plan check`'s rank decision), how IPOPT ended and the times (s)."""
    from design.verify import base_kappa

    initial = res.stats.get("initial", {}).get("q")
    return {
        "start": k,
        "kappa_initial": None if initial is None else base_kappa(model, np.asarray(initial), base)[0],
        "kappa": base_kappa(model, res.postures.q, base)[0],
        "kappa_other": base_kappa(model, res.postures.q, other_base(model, base))[0],
        "true_kappa": {"initial": _finite(res.kappa_initial), "kept": _finite(res.kappa)},
        "start_broken": res.stats.get("start_broken"),
        "kappa_worse": bool(res.kappa > res.kappa_initial * (1 + KAPPA_TIE_RTOL)),
        **res.stats.get("outcome", {}),
        "wall_s": res.wall_s,
        "sample_s": res.stats.get("sample_s"),
        "iterations": res.stats.get("iterations"),
    }


def _finite(k: float) -> float | None:
    """κ for JSON: None when infinite (a singular design matrix)."""
    return float(k) if np.isfinite(k) else None


def placements_can_identify(
    model: RobotModel,
    s: Settings,
    n_placements: int,
    seed: int,
    per_placement: int = 24,
    bases: Sequence[str] | None = None,
) -> tuple[Unidentified | None, int]:
    """What random valid postures on `n_placements` placements leave undetermined on the first of `bases` where
    they leave anything (None: nothing; default bases: the design's), with the number sampled: whether more starts
    of this size can identify every parameter at all on the bases a design fell short on."""
    from design.sampler import sample_posture_set
    from design.verify import unidentified

    s = s.resolved(model)
    ps = sample_posture_set(model, per_placement * n_placements, n_placements, np.random.default_rng([seed, 7919]),
                            margin=s.margin, centred=s.centred, params=s.params, base=s.base, feet_gap=s.feet_gap)  # fmt: skip
    gaps = (unidentified(model, ps.q, b) for b in (bases or [s.base]))
    return next((g for g in gaps if g is not None), None), len(ps.q)
