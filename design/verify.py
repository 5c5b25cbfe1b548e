"""Independent verification of a posture plan with shapely: limits, flat disjoint feet, placements within the
description's box and feet gap, CoP margins, κ.

Uses the numeric kinematics and shapely only (never the optimiser's smooth constraints), for postures and
for every waypoint of the transitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from design.criteria import base_model, design_columns, design_matrix, kappa
from design.geometry import foot_rects, placed_corners
from design.replicates import Replicates, find_replicates
from formats.errors import DataError
from formats.plan import Plan, Posture, check_compatible, plan_required_margin
from robots.chain_path import air_route, ground_transition_issues
from robots.com_base import rank_report
from robots.params_io import resolve_params
from robots.plan_rules import (  # noqa: F401 (SHARE_TOL re-exported)
    SHARE_TOL,
    CopRule,
    cop_at,
    cop_rule,
    ground_setpoints,
    move_label,
    path_theta,
    plan_posture_check,
    rule_cop,
)
from robots.stance import (  # noqa: F401 (tolerances re-exported)
    FLAT_TOL,
    MARGIN_TOL,
    PLACE_TOL,
    STATED_TOL,
    balance,
    check_posture,
    other_sole_problems,
)
from robots.tree import RobotModel


@dataclass
class PostureCheck:
    index: int
    margin: float  # m, shapely, with the chosen parameters
    feet_gap: float  # m
    issues: list[str] = field(default_factory=list)


@dataclass
class Unidentified:
    """Base parameters a set of postures cannot identify (the shared rank decision, `rank_report`)."""

    base: str
    rank: int
    n: int  # identifiable parameters of static design (`design_columns`)
    names: list[str]  # "ϑ7 (−z of 3)" for each parameter left undetermined

    @property
    def postures_short(self) -> int:
        """Fewest postures to add: each brings two CoP equations, so at most two to the rank."""
        return -(-(self.n - self.rank) // 2)

    def message(self, postures: int, distinct: int) -> str:
        what = f"{postures} postures" + (f" ({distinct} distinct)" if distinct != postures else "")
        return (
            f"the {what} cannot identify {len(self.names)} parameter(s) ({self.base} base): "
            f"{', '.join(self.names)} — rank {self.rank} of {self.n}; add at least {self.postures_short} "
            "posture(s) that move these columns (`plan augment`)"
        )


def _rows(model: RobotModel, q: np.ndarray, base: str) -> np.ndarray:
    """H of postures q on a base (no rows for no postures)."""
    q = np.atleast_2d(q)
    return design_matrix(model, q, base) if len(q) else np.zeros((0, len(design_columns(model, base))))


def unidentified(
    model: RobotModel, q: np.ndarray, base: str, H: np.ndarray | None = None
) -> Unidentified | None:
    """What the postures' CoP equations leave undetermined on a base (None: they identify every parameter); H,
    when the caller has it, is their design matrix (not built again)."""
    bm, cols = base_model(model, base), design_columns(model, base)
    H = _rows(model, q, base) if H is None else H
    rank, dep = rank_report(H, [bm.symbols[g] for g in cols])
    if rank == len(cols):
        return None
    names = [f"{bm.symbols[cols[j]]} ({bm.params[cols[j]].column})" for j in dep]
    return Unidentified(base, rank, len(cols), names)


@dataclass
class CheckReport:
    """Result of `check_plan`: per-posture results, plan-level issues, recomputed κ and what the postures
    cannot identify (`kappa_issues`: the one kind `plan augment` mends, so kept apart)."""

    postures: list[PostureCheck]
    transitions: list[str]
    plan_issues: list[str]
    kappa: dict[str, float | None]  # None: the postures cannot identify every parameter on that base
    params: str
    required_margin: float
    replicates: Replicates | None = None
    kappa_issues: list[str] = field(default_factory=list)
    default_paths: int = 0  # moves without a stored transition whose executor path was checked
    default_paths_skipped: int = 0  # such moves not checked: one of their postures fails already
    cop_from: str = ""  # what predicts the CoP: the parameter set ('sim') or the plan's ellipsoid centre ϑ₀

    @property
    def ok(self) -> bool:
        return not self.kappa_issues and not self.feasibility_problems()

    def feasibility_problems(self) -> list[str]:
        """Everything wrong with the postures, placements and transitions themselves (κ aside)."""
        out = list(self.plan_issues)
        out += [f"posture {p.index}: {m}" for p in self.postures for m in p.issues]
        return out + self.transitions

    def problems(self) -> list[str]:
        return self.kappa_issues + self.feasibility_problems()

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "params": self.params,
            "cop_from": self.cop_from or repr(self.params),
            "required_margin_m": self.required_margin,
            "kappa": self.kappa,
            "min_margin_m": min((p.margin for p in self.postures), default=None),
            "default_paths_checked": self.default_paths,
            "default_paths_skipped": self.default_paths_skipped,
            "problems": self.problems(),
            **(self.replicates.to_dict() if self.replicates else {}),
            "postures": [
                {"index": p.index, "margin_m": p.margin, "feet_gap_m": p.feet_gap, "issues": p.issues}
                for p in self.postures
            ],
        }


def posture_issues(
    model: RobotModel, q: np.ndarray, params, base: str, margin: float, pose=None, rule: CopRule | None = None,
    geometry=None, stated: Posture | None = None,
) -> tuple[list[str], float, float]:  # fmt: skip
    """Issues of one double-support posture by the shared check (`robots.stance.check_posture`); the CoP
    from `params`, or by `rule` if given (the plan's `robots.plan_rules.cop_rule`: its ellipsoid's centre);
    with `stated`, its stored CoP and margin checked against them. Returns (issues, CoP margin m, feet gap m)."""
    cop = None if rule is None else cop_at(model, base, q, rule)
    st = check_posture(model, q, params, base, margin, pose=pose, cop=cop, geometry=geometry,
                       stated_cop=None if stated is None else stated.predicted_cop,
                       stated_margin=None if stated is None else stated.margin)  # fmt: skip
    return st.issues, st.margin, st.feet_gap


def posture_balance(model: RobotModel, plan: Plan, q: np.ndarray) -> tuple[np.ndarray, float]:
    """Predicted CoP (x, y, m) and its margin (m) of a plan posture, recomputed under the plan's rules (its
    design parameters, or its identification ellipsoid's centre: `robots.plan_rules.cop_rule`): what `plan
    show` draws, never the file's."""
    cop = rule_cop(model, plan, q, cop_rule(model, plan))
    if cop is None:
        cop = balance(model, q, plan.params, plan.base).cop
    return cop, check_posture(model, q, plan.params, plan.base, cop=cop).margin


def own_posture_issues(
    model: RobotModel, plan: Plan, q: np.ndarray, pose=None, params=None, stated: Posture | None = None
) -> tuple[list[str], float, float]:
    """The posture check under the plan's own rules (`robots.plan_rules.plan_posture_check`, which the executor's
    pre-flight applies too): nominal margin, load share, worst case and, with `stated`, the stored values."""
    params = resolve_params(params or plan.params, model)
    st = plan_posture_check(model, plan, q, pose, params=params, stated=stated)
    return st.issues, st.margin, st.feet_gap


KAPPA_RTOL = 1e-4  # a plan's stated κ against the recomputed one (relative)


def check_plan(
    model: RobotModel, plan: Plan, params=None, kappa_rtol: float = KAPPA_RTOL,
    executor: tuple[float, float] | None = None,
) -> CheckReport:  # fmt: skip
    """Verify every posture and transition of a plan, and the moves without a stored transition as the run makes
    them (`default_path_issues`; `executor`: the robot configuration's velocity limit rad/s and rate Hz, default
    the bundled configuration's); `params`
    defaults to the plan's design parameters (with an identification ellipsoid in the settings: its centre for
    the CoP and its worst case)."""
    check_compatible(plan, model)
    params_arg = params
    params = resolve_params(params or plan.params, model)
    base = plan.base
    required = plan_required_margin(plan)
    own = params_arg is None or params.name == plan.params  # the design guess, not another parameter set
    rule, theta = cop_rule(model, plan), path_theta(model, plan)  # the plan's CoP rule: waypoints, ticks
    results = []
    for p in plan.postures:
        pose = plan.placement(p.placement).other_foot
        # the stored CoP and margins are the plan's parameters' (or ellipsoid's): checked only under them
        if own:
            issues, m, gap = own_posture_issues(model, plan, p.q, pose, params, stated=p)
        else:
            issues, m, gap = posture_issues(model, p.q, params, base, required, pose, geometry=plan.params)
        results.append(PostureCheck(p.index, m, gap, issues))
    plan_issues = []
    # Feet polygons of each placement, from the file's poses (the drivers place boards from these).
    rb, ro = foot_rects(model, base)
    from shapely.geometry import Polygon

    for pl in plan.placements:
        if Polygon(rb).intersects(Polygon(placed_corners(ro, pl.other_foot))):
            plan_issues.append(f"placement {pl.index}: feet polygons intersect")
        # the box the posture designer bounds every placement to and the description's feet gap: the one
        # placement check the executor's pre-flight and the weight shifts share (robots.stance)
        plan_issues += [f"placement {pl.index}: {m}" for m in other_sole_problems(model, base, pl.other_foot)]
    ks, kappa_issues = plan_kappa_issues(model, plan, kappa_rtol)
    by_index = {p.index: p for p in plan.postures}
    tr_issues = []
    for t in plan.transitions:
        a, b_ = by_index[t.from_index], by_index[t.to_index]
        if a.placement != b_.placement:
            tr_issues.append(f"transition {t.from_index}→{t.to_index}: postures are on different placements")
            continue
        if np.abs(t.q[0] - a.q).max() > 1e-9 or np.abs(t.q[-1] - b_.q).max() > 1e-9:
            tr_issues.append(f"transition {t.from_index}→{t.to_index}: does not start/end at its postures")
        pose = plan.placement(a.placement).other_foot
        what = f"transition {t.from_index}→{t.to_index}"
        if t.lifted:
            if air_route(model, a.q, b_.q, plan.params, base, seed=b_.index)[0] is None:
                tr_issues.append(f"{what} (lifted): no move in the air keeps the soles apart")
            continue
        bad = False
        for k, qk in enumerate(t.q[1:-1], start=1):
            iss, _, _ = posture_issues(
                model, qk, params, base, required, pose, rule if own else None, plan.params
            )
            if iss:
                tr_issues.append(f"{what} waypoint {k}: {iss[0]}")
                bad = True
                break
        if not bad:
            tr_issues += ground_transition_issues(model, t.q, pose, plan.params, base, required, what, theta)
    bad_postures = {pc.index for pc in results if pc.issues}
    n_default, default_issues = default_path_issues(model, plan, required, bad_postures, executor)
    n_skipped = len(default_moves(plan)) - n_default  # those `default_path_issues` left out
    reps = find_replicates(plan.postures)
    cop_from = (
        f"the centre ϑ₀ of {rule.what} in its settings"
        if own and rule.theta is not None
        else repr(params.name)
    )
    return CheckReport(results, tr_issues + default_issues, plan_issues, ks, params.name, required, reps,
                       kappa_issues, n_default, n_skipped, cop_from)  # fmt: skip


def default_moves(plan: Plan) -> list[tuple[Posture, Posture]]:
    """The moves a run makes on the ground without a stored transition: consecutive postures of one placement."""
    return [(a, b) for a, b in zip(plan.postures[:-1], plan.postures[1:], strict=True)
            if a.placement == b.placement and plan.transition(a.index, b.index) is None]  # fmt: skip


def bundled_executor() -> tuple[float, float]:
    """Velocity limit (rad/s) and rate (Hz) of the bundled robot configuration: what a run streams at unless
    its --config says otherwise (the default of every default-path check)."""
    from drivers.config import load_config  # the run's own reading of its configuration

    ex = load_config(None).executor
    return ex.velocity_limit, ex.rate_hz


def default_path_issues(
    model: RobotModel, plan: Plan, required: float, skip: set[int] = frozenset(),
    executor: tuple[float, float] | None = None,
) -> tuple[int, list[str]]:  # fmt: skip
    """The moves the executor makes on the ground without a stored transition (consecutive postures of one
    placement, neither in `skip`): its default path, a cosine profile between the two postures projected onto
    the closed chain, as the very setpoints a run streams (`robots.plan_rules.ground_setpoints`) at `executor`'s
    velocity limit rad/s and rate Hz (default: `bundled_executor`). Returns the moves checked and their problems."""
    executor = bundled_executor() if executor is None else executor
    n, out = 0, []
    for a, b in default_moves(plan):
        if {a.index, b.index} & skip:
            continue
        n += 1
        pose = np.asarray(plan.placement(a.placement).other_foot, dtype=float)
        wps = np.array([a.q, b.q], dtype=float)
        what = move_label(a.index, b.index, stored=False)
        out += ground_setpoints(model, plan, wps, True, b.move_s, *executor, pose, required, what)[2][:1]
    return n, out


def plan_default_path_issues(
    model: RobotModel, plan: Plan, executor: tuple[float, float] | None = None
) -> list[str]:
    """The run's default paths of a plan (`default_path_issues` at its required margin) that cannot be followed
    on the ground, one line each: what the planner reports for a plan it writes without transitions."""
    return default_path_issues(model, plan, plan_required_margin(plan), executor=executor)[1]


def base_kappa(model: RobotModel, q: np.ndarray, base: str) -> tuple[float | None, Unidentified | None]:
    """κ of postures q on one base, or (None, what they leave undetermined) when the rank is short: κ is then
    infinite or a meaningless ~1e16–1e35, shown as "not identifiable" (one rank decision, `unidentified`)."""
    H = _rows(model, q, base)
    gap = unidentified(model, q, base, H)
    return (None, gap) if gap is not None else (float(kappa(H)), None)


def plan_kappa_issues(
    model: RobotModel, plan: Plan, rtol: float
) -> tuple[dict[str, float | None], list[str]]:
    """κ of the plan's postures on every base (None: not identifiable), and what is wrong with it: parameters
    the postures cannot identify or a κ other than the plan states (beyond `rtol`, relative)."""
    try:
        both = {b: base_kappa(model, plan.q, b) for b in model.bases}
    except DataError as exc:
        return {}, [str(exc)]
    ks, issues = {b: k for b, (k, _) in both.items()}, []
    for b in sorted(both, key=lambda b: b != plan.base):  # the plan's base first; one base's gap is enough
        gap = both[b][1]
        if gap is not None:
            return ks, [gap.message(len(plan.postures), find_replicates(plan.postures).distinct)]
    for b, k in ks.items():
        if b in plan.kappa and not abs(plan.kappa[b] - k) <= rtol * k:
            issues.append(f"κ ({b} base) recomputed {k:.2f} differs from the plan's {plan.kappa[b]:.2f}")
    return ks, issues
