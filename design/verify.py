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
from design.uncertainty import Ellipsoid, nominal_cop, robust_margin
from formats.errors import DataError
from formats.plan import Plan, Posture, check_compatible, plan_required_margin
from robots.chain_path import air_route, ground_transition_issues
from robots.com_base import rank_report
from robots.params_io import resolve_params
from robots.stance import (  # noqa: F401 (tolerances re-exported)
    FLAT_TOL,
    MARGIN_TOL,
    PLACE_TOL,
    STATED_TOL,
    check_posture,
    lever_share,
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
            "required_margin_m": self.required_margin,
            "kappa": self.kappa,
            "min_margin_m": min((p.margin for p in self.postures), default=None),
            "problems": self.problems(),
            **(self.replicates.to_dict() if self.replicates else {}),
            "postures": [
                {"index": p.index, "margin_m": p.margin, "feet_gap_m": p.feet_gap, "issues": p.issues}
                for p in self.postures
            ],
        }


SHARE_TOL = 1e-6  # lever-rule share tolerance (the NLP's constraint is met to IPOPT's tolerance)


def posture_issues(
    model: RobotModel, q: np.ndarray, params, base: str, margin: float, pose=None, ellipsoid=None,
    geometry=None, stated: Posture | None = None,
) -> tuple[list[str], float, float]:  # fmt: skip
    """Issues of one double-support posture by the shared check (`robots.stance.check_posture`); the CoP
    from `params`, or from the ellipsoid's centre if given; with `stated`, its stored CoP and margin checked
    against them. Returns (issues, CoP margin m, feet gap m)."""
    cop = None if ellipsoid is None else nominal_cop(model, q, params, base, ellipsoid)[0]
    st = check_posture(model, q, params, base, margin, pose=pose, cop=cop, geometry=geometry,
                       stated_cop=None if stated is None else stated.predicted_cop,
                       stated_margin=None if stated is None else stated.margin)  # fmt: skip
    return st.issues, st.margin, st.feet_gap


def posture_balance(model: RobotModel, plan: Plan, q: np.ndarray) -> tuple[np.ndarray, float]:
    """Predicted CoP (x, y, m) and its margin (m) of a plan posture, recomputed under the plan's rules (its
    design parameters, or its identification ellipsoid's centre): what `plan show` draws, never the file's."""
    return nominal_cop(model, q, plan.params, plan.base, plan_ellipsoid(plan))


def plan_ellipsoid(plan: Plan) -> Ellipsoid | None:
    """The identification ellipsoid recorded in a plan's settings, if any (DataError if malformed)."""
    d = plan.settings.get("ellipsoid")
    if not d:
        return None
    try:
        return Ellipsoid.from_dict(d)
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"plan settings: malformed 'ellipsoid' ({exc})") from None


def margin_rules(plan: Plan) -> tuple[float, float, Ellipsoid | None]:
    """Required margin (m), ϑ_b ball radius (m, 0 = none) and identification ellipsoid of a plan's settings."""
    required = plan_required_margin(plan)  # the executor's own reading of the settings
    try:
        radius = float(plan.settings.get("uncertainty") or 0.0)
    except (TypeError, ValueError):
        radius = float("nan")
    if not np.isfinite(radius):
        raise DataError("plan settings: 'required_margin'/'margin' and 'uncertainty' must be finite numbers")
    return required, radius, plan_ellipsoid(plan)


def plan_robust_margin(model: RobotModel, plan: Plan, q: np.ndarray) -> float | None:
    """Worst-case CoP margin (m) of a posture over the plan's ϑ_b ball or ellipsoid (None: no uncertainty)."""
    _, radius, ell = margin_rules(plan)
    if radius <= 0 and ell is None:
        return None
    return robust_margin(model, q, radius, plan.params, plan.base, ell)


def own_posture_issues(
    model: RobotModel, plan: Plan, q: np.ndarray, pose=None, params=None, stated: Posture | None = None
) -> tuple[list[str], float, float]:
    """`posture_issues` under the plan's own rules, as `check_plan` applies them without other parameters:
    nominal margin (ellipsoid centre if any) and the worst case over the plan's ball/ellipsoid; with
    `stated`, the posture's stored CoP, margin and robust margin checked against the recomputed ones."""
    required, radius, ell = margin_rules(plan)
    params = resolve_params(params or plan.params, model)
    issues, m, gap = posture_issues(model, q, params, plan.base, required, pose, ell, plan.params, stated)
    share = float((plan.settings or {}).get("load_share") or 0.0)
    if share > 0 and pose is not None:
        cop = nominal_cop(model, q, params, plan.base, ell)[0]
        s = lever_share(model, cop, pose, plan.base)
        if not (share - SHARE_TOL <= s <= 1 - share + SHARE_TOL):
            issues.append(
                f"load share {s:.3f} (lever rule, 0 = base sole) outside [{share:g}, {1 - share:g}]"
            )
    stated_rm = None if stated is None else stated.robust_margin
    rm = plan_robust_margin(model, plan, q) if required > 0 or stated_rm is not None else None
    what = f"the ϑ_b ball of {radius * 1000:.1f} mm" if ell is None else f"the {ell.sigma:g}σ ellipsoid"
    if rm is not None and required > 0 and rm < required - MARGIN_TOL:
        issues.append(
            f"worst-case CoP margin {rm * 1000:.2f} mm over {what} < required {required * 1000:.1f} mm"
        )
    issues += _stated_robust_problems(stated_rm, rm)
    return issues, m, gap


def _stated_robust_problems(stated: float | None, recomputed: float | None) -> list[str]:
    """A stored robust_margin (m) the plan's settings cannot reproduce: no uncertainty to take the worst case
    over, or a value other than the recomputed one (beyond STATED_TOL), one line in mm."""
    if stated is None:
        return []
    if recomputed is None:
        return [
            f"stored robust_margin {stated * 1000:.1f} mm cannot be recomputed: the plan's settings give no "
            "uncertainty (ball radius or ellipsoid); drop it or add the settings it was designed with"
        ]
    if abs(stated - recomputed) > STATED_TOL:
        return [
            f"stored robust_margin {stated * 1000:.1f} mm differs from the recomputed {recomputed * 1000:.1f} mm "
            f"(tolerance {STATED_TOL * 1000:g} mm)"
        ]
    return []


KAPPA_RTOL = 1e-4  # a plan's stated κ against the recomputed one (relative)


def check_plan(model: RobotModel, plan: Plan, params=None, kappa_rtol: float = KAPPA_RTOL) -> CheckReport:
    """Verify every posture and transition of a plan; `params` defaults to the plan's design parameters
    (with an identification ellipsoid in the settings: its centre for the CoP and its worst case)."""
    check_compatible(plan, model)
    params_arg = params
    params = resolve_params(params or plan.params, model)
    base = plan.base
    required, _, ell = margin_rules(plan)
    own = params_arg is None or params.name == plan.params  # the design guess, not another parameter set
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
                model, qk, params, base, required, pose, ell if own else None, plan.params
            )
            if iss:
                tr_issues.append(f"{what} waypoint {k}: {iss[0]}")
                bad = True
                break
        if not bad:
            tr_issues += ground_transition_issues(model, t.q, pose, plan.params, base, required, what)
    reps = find_replicates(plan.postures)
    return CheckReport(results, tr_issues, plan_issues, ks, params.name, required, reps, kappa_issues)


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
