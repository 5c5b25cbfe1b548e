"""The one check of a static plan's posture under the plan's own rules, shared by the planner (`plan augment`),
`plan check` (`design.verify`) and the executor's pre-flight (`drivers.setpoints.check_run`).

A plan predicts the CoP with its design parameters, or with the centre ϑ₀ of the identification ellipsoid in
its settings (`cop_rule`, the one place that decides which); on top of `robots.stance.check_posture` it holds
each posture to the load-share bound, the worst-case (robust) margin over the settings' ϑ_b ball or ellipsoid,
and the stored predicted CoP, margin and robust margin. The executor's ground path between two postures
(`ground_setpoints`: ticks at its rate, stretched to its velocity limit) is built here too, so that `plan check`
checks the very path a run takes where the plan stores no transition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from shapely.geometry import MultiPoint
from shapely.geometry.polygon import orient

from formats.errors import DataError
from formats.plan import Plan, Posture, plan_required_margin, settings_number
from robots.chain_path import MAX_STRETCH, Theta, ground_path, path_issues, plan_base_model, projection_jump
from robots.stance import (
    MARGIN_TOL,
    STATED_TOL,
    PostureStatus,
    balance,
    check_posture,
    lever_share,
    other_pose,
    placed_corners,
    signed_margin,
    sole_rects,
)
from robots.tree import ParameterSet, RobotModel

SHARE_TOL = 1e-6  # lever-rule share tolerance (the NLP's constraint is met to IPOPT's tolerance)
STEP_RTOL = 1e-6  # a tick may exceed the velocity limit by this relative amount (rounding)
STRETCHES = 3  # times a ground move is stretched to its velocity limit before it is refused


@dataclass(frozen=True)
class CopRule:
    """How a plan predicts the CoP: ϑ_b centre (m; None: the CoM of the parameter set itself), the shape Σ (m²)
    of the uncertainty its worst case is taken over (None: none) and the words naming that uncertainty."""

    theta: np.ndarray | None
    shape: np.ndarray | None
    what: str


def settings_rule(model: RobotModel, base: str, settings: dict | None) -> CopRule:
    """The CoP rule of plan (or design) settings, the one place that decides it: the centre of the
    identification ellipsoid in settings.ellipsoid if any, else the CoM of the parameter set; the worst case
    over that ellipsoid or over the ϑ_b ball of settings.uncertainty (m)."""
    s = settings or {}
    ell = s.get("ellipsoid")
    if ell:
        theta, cov, sigma = _ellipsoid(plan_base_model(model, base), ell)
        return CopRule(theta, sigma**2 * cov, f"the {sigma:g}σ ellipsoid")
    radius = settings_number(s.get("uncertainty"), "'uncertainty'")
    if radius > 0:
        bm = plan_base_model(model, base)
        return CopRule(None, radius**2 * np.eye(bm.n), f"the ϑ_b ball of {radius * 1000:.1f} mm")
    return CopRule(None, None, "")


def _ellipsoid(bm, ell) -> tuple[np.ndarray, np.ndarray, float]:
    """ϑ₀ (n, m), Σ (n×n, m²) and σ of settings.ellipsoid, each checked (DataError naming the field): σ finite and
    > 0, ϑ₀ finite, Σ finite, symmetric and positive semidefinite, symbols those of the base's parameters."""
    where = "plan settings: ellipsoid"
    if not isinstance(ell, dict):
        raise DataError(
            f"{where} must be a table (sigma, symbols, theta_m, cov_m2), not {type(ell).__name__}"
        )
    sigma = settings_number(ell.get("sigma", float("nan")), "ellipsoid.sigma")
    if sigma <= 0:
        raise DataError(f"{where}.sigma {sigma:g} must be > 0 (the confidence scale of the ellipsoid)")
    theta, cov = _array(ell, "theta_m", (bm.n,)), _array(ell, "cov_m2", (bm.n, bm.n))
    scale = float(np.abs(cov).max(initial=0.0))
    if not np.allclose(cov, cov.T, rtol=0.0, atol=1e-9 * scale):
        raise DataError(
            f"{where}.cov_m2 is not symmetric (largest |Σ − Σᵀ| {np.abs(cov - cov.T).max():.3g} m²)"
        )
    low = float(np.linalg.eigvalsh(cov).min(initial=0.0))
    if low < -1e-9 * scale:
        raise DataError(f"{where}.cov_m2 is not positive semidefinite (eigenvalue {low:.3g} m²)")
    symbols = ell.get("symbols")
    if symbols is not None and [str(v) for v in symbols] != list(bm.symbols):
        raise DataError(f"{where}.symbols {list(symbols)[:3]}… are not the base's {bm.n} parameters "
                        f"{bm.symbols[:3]}… in order")  # fmt: skip
    return theta, cov, sigma


def _array(ell: dict, key: str, shape: tuple[int, ...]) -> np.ndarray:
    """settings.ellipsoid[key] as a finite float array of `shape` (DataError naming the field otherwise)."""
    try:
        x = np.array(ell[key], dtype=float)
    except KeyError:
        raise DataError(f"plan settings: ellipsoid.{key} is missing") from None
    except (TypeError, ValueError):
        raise DataError(f"plan settings: ellipsoid.{key} is not an array of numbers") from None
    if x.shape != shape:
        dims = "×".join(map(str, shape))
        raise DataError(
            f"plan settings: ellipsoid.{key} has shape {'×'.join(map(str, x.shape))}, needs {dims}"
        )
    if not np.all(np.isfinite(x)):
        raise DataError(f"plan settings: ellipsoid.{key} has a value that is not a finite number")
    return x


def cop_rule(model: RobotModel, plan: Plan, params: str | ParameterSet | None = None) -> CopRule:
    """The plan's CoP prediction (the one reading `plan check`, the planner and the executor share):
    `settings_rule` of its settings (`params`: kept for callers, the CoM's parameter set is theirs)."""
    return settings_rule(model, plan.base, plan.settings)


def cop_at(model: RobotModel, base: str, q: np.ndarray, rule: CopRule) -> np.ndarray | None:
    """Predicted CoP (x, y, m) of posture q (nq), or of each row of q (n, nq), under `rule` (None: the CoM of
    the caller's parameter set)."""
    if rule.theta is None:
        return None
    return plan_base_model(model, base).regressor(q)[..., :2, :] @ rule.theta


def rule_cop(model: RobotModel, plan: Plan, q: np.ndarray, rule: CopRule, params=None) -> np.ndarray | None:
    """Predicted CoP (x, y, m) of posture q under a plan's `rule` (None: the CoM of `params`, as
    `check_posture` computes it)."""
    return cop_at(model, plan.base, q, rule)


def path_theta(model: RobotModel, plan: Plan) -> Theta:
    """The plan's CoP rule for the path projection and per-tick checks (`robots.chain_path`): the ϑ_b centre
    (m) of its identification ellipsoid, or None for the CoM of its parameters (the paths' default)."""
    theta = cop_rule(model, plan).theta
    return None if theta is None else tuple(float(v) for v in theta)


def rule_balance(
    model: RobotModel, base: str, params, q: np.ndarray, rule: CopRule
) -> tuple[np.ndarray, float]:
    """Predicted CoP (x, y, m) of posture q under `rule` (ϑ_b centre, else the base parameters of `params`)
    and its signed margin (m) in the support polygon of `params`' geometry: what a plan stores."""
    bm = plan_base_model(model, base)
    theta = bm.values(params) if rule.theta is None else rule.theta
    cop = bm.regressor(q)[:2, :] @ theta
    rb, ro = sole_rects(model, base)
    poly = MultiPoint(np.vstack([rb, placed_corners(ro, other_pose(model, q, params, base))])).convex_hull
    return cop, float(signed_margin(poly, cop[None, :])[0])


def rule_margin(model: RobotModel, base: str, params, q: np.ndarray, rule: CopRule) -> float:
    """Smallest CoP margin (m) of posture q over `rule`'s ϑ_b ball or ellipsoid (none: the nominal margin),
    centred on rule.theta or the base parameters of `params`: per hull edge, inward normal n,
    n·(CoP₀ − a) − √(nᵀ R Σ Rᵀ n), closed form since the CoP is linear in ϑ_b."""
    bm = plan_base_model(model, base)
    Rxy = bm.regressor(q)[:2, :]
    theta = bm.values(params) if rule.theta is None else rule.theta
    shape = np.zeros((bm.n, bm.n)) if rule.shape is None else rule.shape
    cop = Rxy @ theta
    rb, ro = sole_rects(model, base)
    pts = np.vstack([rb, placed_corners(ro, other_pose(model, q, params, base))])
    ring = np.asarray(orient(MultiPoint(pts).convex_hull, 1.0).exterior.coords)  # counter-clockwise, closed
    out = np.inf
    for a, b in zip(ring[:-1], ring[1:], strict=True):
        e = (b - a) / np.linalg.norm(b - a)
        n = np.array([-e[1], e[0]])
        w = Rxy.T @ n
        out = min(out, float(n @ (cop - a) - np.sqrt(max(w @ shape @ w, 0.0))))
    return out


def worst_case_margin(
    model: RobotModel, plan: Plan, q: np.ndarray, rule: CopRule | None = None
) -> float | None:
    """Smallest CoP margin (m) of posture q over the plan's ϑ_b ball or ellipsoid (None: no uncertainty)."""
    rule = cop_rule(model, plan) if rule is None else rule
    if rule.shape is None:
        return None
    return rule_margin(model, plan.base, plan.params, q, rule)


def plan_posture_check(
    model: RobotModel, plan: Plan, q: np.ndarray, pose=None, *, params=None, stated: Posture | None = None,
    margin: float | None = None,
) -> PostureStatus:  # fmt: skip
    """`check_posture` under the plan's own rules: CoP by `cop_rule`, nominal and worst-case margins ≥ `margin`
    (default: the plan's required margin; the executor's is the larger of it and its config's min_margin, as
    `plan check --config` requires), load share within settings.load_share (with `pose`) and `stated`'s stored
    CoP, margin and robust margin equal to the recomputed ones."""
    required = plan_required_margin(plan) if margin is None else margin
    margin = required
    params = plan.params if params is None else params
    rule = cop_rule(model, plan, params)
    cop = rule_cop(model, plan, q, rule)
    st = check_posture(model, q, params, plan.base, margin, pose=pose, cop=cop, geometry=plan.params,
                       stated_cop=None if stated is None else stated.predicted_cop,
                       stated_margin=None if stated is None else stated.margin)  # fmt: skip
    issues = st.issues + _share_problems(model, plan, q, pose, params, cop)
    stated_rm = None if stated is None else stated.robust_margin
    rm = worst_case_margin(model, plan, q, rule) if required > 0 or stated_rm is not None else None
    if rm is not None and required > 0 and rm < required - MARGIN_TOL:
        issues.append(
            f"worst-case CoP margin {rm * 1000:.2f} mm over {rule.what} < required {required * 1000:.1f} mm"
        )
    issues += stated_robust_problems(stated_rm, rm)
    return PostureStatus(issues, st.margin, st.feet_gap)


def _share_problems(model: RobotModel, plan: Plan, q, pose, params, cop) -> list[str]:
    """The lever-rule load share of the predicted CoP outside [f, 1 − f], f = settings.load_share (one line)."""
    share = settings_number((plan.settings or {}).get("load_share"), "'load_share'")
    if share <= 0 or pose is None:
        return []
    if cop is None:
        cop = balance(model, q, params, plan.base, plan.params).cop  # the CoM `check_posture` uses
    s = lever_share(model, cop, pose, plan.base)
    if share - SHARE_TOL <= s <= 1 - share + SHARE_TOL:
        return []
    return [f"load share {s:.3f} (lever rule, 0 = base sole) outside [{share:g}, {1 - share:g}]"]


def stated_robust_problems(stated: float | None, recomputed: float | None) -> list[str]:
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


def ticks(duration_s: float, rate_hz: float, multiple: int = 1) -> int:
    """Number of control ticks for a move of `duration_s` robot seconds, a multiple of `multiple` (≥ 1): the rate
    is the robot's, so an emulated bench's time compression (`--time-scale`) streams the same setpoints faster
    instead of fewer, coarser ones (at 6× the robot saw a step every 60 ms, and its soles slid up to 17 mm)."""
    n = max(1, math.ceil(duration_s * rate_hz - 1e-9))
    return multiple * math.ceil(n / multiple)


def move_time_at_limit(q_from: np.ndarray, q_to: np.ndarray, tr, velocity_limit: float) -> float:
    """Shortest duration that keeps every joint within the velocity limit: a cosine move peaks at twice its
    mean speed; a waypoint path (equal time per segment) is limited by its longest segment."""
    if tr is None:
        return 2.0 * float(np.max(np.abs(np.asarray(q_to) - np.asarray(q_from)))) / velocity_limit
    return (len(tr.q) - 1) * float(np.max(np.abs(np.diff(tr.q, axis=0)))) / velocity_limit


@dataclass
class _Waypoints:
    q: np.ndarray


def move_label(a: int, b: int, stored: bool) -> str:
    """How `plan check`, the planner and the run name the ground move from posture a to b (one format)."""
    return f"move {a}->{b}" + ("" if stored else " (no stored transition: the run's cosine path)")


def ground_setpoints(
    model: RobotModel, plan: Plan, wps: np.ndarray, cosine: bool, move_s: float, velocity_limit: float,
    rate_hz: float, pose, margin: float, what: str,
) -> tuple[np.ndarray, float, list[str]]:  # fmt: skip
    """The executor's setpoints along waypoints wps on the ground (a cosine profile between two postures when
    `cosine`, the plan's default without a stored transition), one per tick at `rate_hz`, stretched until no
    tick exceeds `velocity_limit` (rad/s), and what is unsafe about them: (setpoints, duration s, problems)."""
    theta = path_theta(model, plan)  # the plan's CoP rule, for the projection and the checks
    d = max(move_s, move_time_at_limit(wps[0], wps[-1], None if cosine else _Waypoints(wps), velocity_limit))
    seg, d0, limit = len(wps) - 1, d, velocity_limit * (1 + STEP_RTOL)
    sp, used, speed, jump = _stretched(model, plan, wps, cosine, d, rate_hz, pose, theta)
    for _ in range(STRETCHES):
        # projection lengthens the path a little: stretch until no tick is too fast (a jump, a branch switch
        # of the projection, does not shrink with it; beyond MAX_STRETCH the path is not merely longer)
        d = used * speed / velocity_limit * (1 + 1e-3)
        if speed <= limit or jump or d > MAX_STRETCH * d0:
            break
        sp, used, speed, jump = _stretched(model, plan, wps, cosine, d, rate_hz, pose, theta)
    problems = []
    if jump:  # the planner's and plan check's criterion, at these ticks
        problems.append(f"{what}: {jump}")
    elif speed > MAX_STRETCH * limit:  # a tick's step no stretching of the move brings under the limit
        problems.append(
            f"{what}: setpoints jump (a tick moves at {speed:.2f} rad/s, over {MAX_STRETCH:g}× velocity_limit "
            f"{velocity_limit:g} rad/s): the path cannot be kept on the ground"
        )
    elif speed > limit:
        problems.append(
            f"{what}: setpoints exceed the velocity limit ({speed:.2f} rad/s > velocity_limit "
            f"{velocity_limit:g} rad/s with the move stretched to {used:.1f} s, at most {MAX_STRETCH:g}× "
            f"{d0:.1f} s): the path projected on the closed chain is too long for the move"
        )
    problems += path_issues(model, sp, seg, pose, plan.params, plan.base, margin, what, theta)
    return sp, used, problems


def _stretched(
    model: RobotModel, plan: Plan, wps: np.ndarray, cosine: bool, d: float, rate_hz: float, pose, theta: Theta,
) -> tuple[np.ndarray, float, float, str | None]:  # fmt: skip
    """`ground_path` of wps over d s at `rate_hz`: (setpoints, d, fastest joint speed rad/s, branch switch or
    None)."""
    n = ticks(d, rate_hz, len(wps) - 1)
    sp = ground_path(model, wps, n, cosine, pose, plan.params, plan.base, theta)
    speed = float(np.abs(np.diff(np.vstack([wps[0], sp]), axis=0)).max()) * n / d
    return sp, d, speed, projection_jump(wps, sp, cosine)
