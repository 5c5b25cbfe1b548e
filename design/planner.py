"""From solver results to a plan: pick the best start, order postures, add transitions, fill the plan file."""

from __future__ import annotations

import numpy as np

from design.criteria import design_matrix, kappa
from design.multistart import StartSpec, run_starts, settings_dict
from design.problems import Settings, SolveResult
from design.sampler import PostureSet
from design.uncertainty import nominal_cop
from formats.plan import Placement, Plan, Posture
from robots.tree import RobotModel

FORMAT_NOTE = "angles rad, lengths m, durations s; CoP/margins from the design parameters"


def robust_margins(model: RobotModel, q: np.ndarray, s: Settings) -> np.ndarray | None:
    """Worst-case margin over the ϑ_b ball or ellipsoid of the settings (closed form), per posture (m)."""
    if s.uncertainty <= 0 and s.ellipsoid is None:
        return None
    from design.uncertainty import robust_margin

    return np.array([robust_margin(model, qi, s.uncertainty, s.params, s.base, s.ellipsoid) for qi in q])


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
    summary = []
    for k, res in run_starts(specs, workers, scheduler, model):
        summary.append(
            {
                "start": k,
                "kappa_initial": res.kappa_initial,
                "kappa": res.kappa,
                "kappa_other": res.kappa_other,
                "wall_s": res.wall_s,
                "sample_s": res.stats.get("sample_s"),
                "iterations": res.stats.get("iterations"),
            }
        )
        if best is None or res.kappa < best.kappa:
            best = res
        if on_result:
            on_result(k, res, best)
    summary.sort(key=lambda d: d["start"])
    assert best is not None
    return best, summary
