"""Double support: both soles flat on the ground; feet geometry, support polygon and balance margin.

The base sole defines the ground. The other sole is flat when its origin has z = 0 and its z axis is vertical
(three equations); its x, y and yaw on the ground are free (the foot placement).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import casadi as ca
import numpy as np
import shapely
from shapely.geometry import MultiPoint, Point, Polygon
from shapely.ops import nearest_points

from formats.errors import DataError
from robots.kinematics import com_position, site_pose, site_pose_sym
from robots.memo import per_model
from robots.stance_spec import (  # noqa: F401 (default_base, design_params, resolve_base re-exported)
    declared_feet_gap,
    default_base,
    design_params,
    resolve_base,
    stance_spec,
)
from robots.tree import ParameterSet, RobotModel

# The tolerances of the one posture check (`check_posture`) that design, `plan check` and the executor share.
FLAT_TOL = 1e-6  # other sole flat on the ground: |z| (m) and tilt (rad)
PLACE_TOL = 1e-6  # other sole at its placement: x, y (m) and yaw (rad)
MARGIN_TOL = 1e-9  # CoP margin below the requirement (m)
# a plan's stored predicted CoP or margin against the recomputed one (m): rounding to the mm passes
STATED_TOL = 5e-4
LIMIT_TOL = 1e-9  # joint and coupled limits (rad or m)
PROJECT_BATCH = 64  # random postures projected onto double support at once
# Recordings fitted together in double support (`identify dynamic A.csv B.csv`), and a recording taken as a
# design's prior (`plan trajectory --prior`): their other sole's pose (base sole frame) by at most this much from the
# first's (the prior plans'): an operator's placement on the boards' marks. Within it the first's base parameters
# (their dependent columns' β vary smoothly with the placement) serve the others (on the test design the model misses
# Mx by ~1.4 mN·m per mm the other sole stands off: 3.6 mN·m on the twin, 2.4 mm apart)
PLACEMENT_TOL_M = 0.02
PLACEMENT_TOL_DEG = 3.0


def other_site(model: RobotModel, base: str | None = None) -> str:
    """The contact site of the non-base foot (bipeds: the other sole)."""
    base = resolve_base(model, base)
    others = [s.name for s in model.sites if s.rect is not None and s.name != model.base_site(base).name]
    if len(others) != 1:
        raise DataError(f"model {model.name!r} needs exactly one other contact site for base {base!r}")
    return others[0]


def _p(model: RobotModel, params: str | ParameterSet | None) -> str | ParameterSet:
    return design_params(model) if params is None else params


@per_model
def _flat_functions(model: RobotModel, params_name: str, base: str) -> ca.Function:
    q = ca.SX.sym("q", model.nq)
    R, p = site_pose_sym(model, q, params_name, other_site(model, base), base)
    c = ca.vertcat(p[2], R[0, 2], R[1, 2])
    return ca.Function("flat", [q], [c, ca.jacobian(c, q)])


def flat_residual(
    model: RobotModel, q: np.ndarray, params: str | ParameterSet | None = None, base: str | None = None
) -> np.ndarray:
    """[z, R02, R12] of the other sole: zero when it lies flat on the ground (m, –, –)."""
    base = resolve_base(model, base)
    R, p = site_pose(model, q, _p(model, params), other_site(model, base), base)
    return np.stack([p[..., 2], R[..., 0, 2], R[..., 1, 2]], axis=-1)


def other_pose(
    model: RobotModel, q: np.ndarray, params: str | ParameterSet | None = None, base: str | None = None
) -> np.ndarray:
    """Pose (x, y, yaw) of the other sole on the ground, in the base sole's frame (m, m, rad)."""
    base = resolve_base(model, base)
    R, p = site_pose(model, q, _p(model, params), other_site(model, base), base)
    return np.stack([p[..., 0], p[..., 1], np.arctan2(R[..., 1, 0], R[..., 0, 0])], axis=-1)


def placement_deviation(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """How far placement b (x, y, yaw) lies from a: distance on the ground (m) and the yaw between them (rad)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.hypot(*(b[:2] - a[:2]))), float(abs(np.angle(np.exp(1j * (b[2] - a[2])))))


def placement_apart(a: np.ndarray, b: np.ndarray) -> str | None:
    """None when placements a and b (x, y, yaw) count as one: within PLACEMENT_TOL_M and PLACEMENT_TOL_DEG (the
    limits PLACEMENT_LIMITS states); else how far b stands from a, e.g. "25.0 mm / 0.00°"."""
    shift, turn = placement_deviation(a, b)
    turn = float(np.degrees(turn))
    if shift <= PLACEMENT_TOL_M and turn <= PLACEMENT_TOL_DEG:
        return None
    return f"{shift * 1000:.1f} mm / {turn:.2f}°"


PLACEMENT_LIMITS = f"at most {PLACEMENT_TOL_M * 1000:g} mm / {PLACEMENT_TOL_DEG:g}°"


def project_flat(
    model: RobotModel,
    q0: np.ndarray,
    params: str | None = None,
    base: str | None = None,
    tol: float = 1e-12,
    iters: int = 30,
) -> tuple[np.ndarray, np.ndarray]:
    """Nearest-step Gauss–Newton projection of postures q0 (B, nq) onto double support (minimum-norm joint change
    per step), all at once: the projections (B, nq) and which converged (B,). Each posture takes the steps it
    would alone."""
    params, base = _p(model, params), resolve_base(model, base)
    q = np.array(np.atleast_2d(q0), dtype=float)
    fn = _flat_functions(model, params if isinstance(params, str) else params.name, base).map(len(q))
    active = np.ones(len(q), dtype=bool)
    for _ in range(iters):
        c, J = fn(q.T)
        c, J = np.asarray(c).T, np.asarray(J).reshape(3, len(q), model.nq).transpose(1, 0, 2)
        active &= np.linalg.norm(c, axis=1) >= tol
        if not active.any():
            return q, ~active
        for i in np.flatnonzero(active):
            q[i] -= np.linalg.lstsq(J[i], c[i], rcond=None)[0]
    c = np.asarray(fn(q.T)[0]).T
    return q, ~active | (np.linalg.norm(c, axis=1) < 1e-9)


def foot_corners(
    model: RobotModel, q: np.ndarray, params: str | ParameterSet | None = None, base: str | None = None
) -> dict[str, np.ndarray]:
    """x-y corners of every contact rectangle in the base frame: {site: (…, 4, 2)}."""
    params, base = _p(model, params), resolve_base(model, base)
    out = {}
    for site in model.sites:
        if site.rect is None:
            continue
        x0, x1, y0, y1 = site.rect
        local = np.array([[x0, y0, 0], [x1, y0, 0], [x1, y1, 0], [x0, y1, 0]], dtype=float)
        R, p = site_pose(model, q, params, site.name, base)
        out[site.name] = (np.einsum("...ij,kj->...ki", R, local) + p[..., None, :])[..., :2]
    return out


@dataclass
class Balance:
    """Balance geometry of one double-support posture (m)."""

    cop: np.ndarray  # predicted CoP = CoM x-y
    margin: float  # signed distance from CoP to the support-polygon boundary (positive inside)
    feet_gap: float  # distance between the two foot rectangles (0 when touching or overlapping)
    feet_overlap: bool
    polygon: Polygon
    feet: dict[str, Polygon]


def balance(
    model: RobotModel,
    q: np.ndarray,
    params: str | ParameterSet | None = None,
    base: str | None = None,
    geometry: str | ParameterSet | None = None,
) -> Balance:
    """Support polygon (convex hull of all foot corners), CoP margin and feet separation, with shapely: the
    soles placed by the kinematics of `geometry` (default: `params`), the CoP the CoM of `params`."""
    params, base = _p(model, params), resolve_base(model, base)
    geometry = params if geometry is None else geometry
    q = model.check_q(q)
    if q.ndim != 1:
        raise DataError("balance() takes one posture")
    corners = foot_corners(model, q, geometry, base)
    params = mass_on_geometry(model, params, geometry)
    feet = {name: Polygon(c) for name, c in corners.items()}
    hull = MultiPoint(np.concatenate(list(corners.values()))).convex_hull
    cop = com_position(model, q, params, base)[:2]
    point = Point(cop)
    d = hull.exterior.distance(point)
    margin = d if hull.contains(point) else -d
    polys = list(feet.values())
    overlap = bool(polys[0].intersects(polys[1]))
    gap = 0.0 if overlap else float(polys[0].distance(polys[1]))
    return Balance(cop, float(margin), gap, overlap, hull, feet)


def mass_on_geometry(
    model: RobotModel, params: str | ParameterSet, geometry: str | ParameterSet
) -> str | ParameterSet:
    """The mass distribution of `params` on the lengths of `geometry`: another parameter set's CoM where the soles
    stand as `geometry` puts them (one robot, two guesses of its masses)."""
    mass, geo = model.parameter_set(params), model.parameter_set(geometry)
    if mass is geo or mass.lengths == geo.lengths:
        return params
    return replace(mass, name=f"{mass.name} on {geo.name}'s lengths", lengths=dict(geo.lengths))


def signed_margin(polygon: Polygon, points: np.ndarray) -> np.ndarray:
    """Signed distance (positive inside) of points (N, 2) to a polygon's boundary, vectorised with shapely."""
    pts = shapely.points(np.asarray(points, dtype=float))
    d = shapely.distance(polygon.exterior, pts)
    return np.where(shapely.contains(polygon, pts), d, -d)


# The feet apart in a form an NLP can use: `balance` says whether two soles flat on the ground overlap and how far
# apart they are (shapely); a separating line (φ, c) with every sole corner on its side by gap/2 proves them gap
# apart, smoothly, and the best line proves exactly shapely's distance (`separating_line`).


def rect_corners(rect: tuple[float, float, float, float]) -> np.ndarray:
    """Counter-clockwise corners (4, 2) of a rectangle (xmin, xmax, ymin, ymax) in its own frame."""
    x0, x1, y0, y1 = rect
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=float)


def placed_corners(local: np.ndarray, pose) -> np.ndarray:
    """Corners (4, 2) of a sole flat on the ground at pose (x, y, yaw), from its local corners (numpy)."""
    x, y, psi = pose
    c, s = np.cos(psi), np.sin(psi)
    R = np.array([[c, -s], [s, c]])
    return local @ R.T + np.array([x, y])


def placed_corners_sym(local: np.ndarray, x, y, psi) -> list:
    """`placed_corners` at a symbolic pose: a list of four 2×1 CasADi vectors."""
    c, s = ca.cos(psi), ca.sin(psi)
    return [ca.vertcat(x + c * px - s * py, y + s * px + c * py) for px, py in local]


def other_pose_sym(model: RobotModel, q: ca.SX, params: str | ParameterSet, base: str) -> ca.SX:
    """`other_pose` of a symbolic posture (3×1 CasADi: x, y, yaw), for exact derivatives in an NLP."""
    R, p = site_pose_sym(model, q, params, other_site(model, base), base)
    return ca.vertcat(p[0], p[1], ca.atan2(R[1, 0], R[0, 0]))


def flat_at_pose_sym(model: RobotModel, q: ca.SX, params: str | ParameterSet, base: str, pose) -> ca.SX:
    """The 6 rows, zero when the other sole of symbolic posture q lies flat at `pose` (x, y, yaw): z, the two
    tilts (R02, R12), x, y and yaw (as sin of the yaw error, −sin ψ R00 + cos ψ R10) — the chain's and the
    design NLP's equalities."""
    R, p = site_pose_sym(model, q, params, other_site(model, base), base)
    return ca.vertcat(
        p[2],
        R[0, 2],
        R[1, 2],
        p[0] - pose[0],
        p[1] - pose[1],
        -ca.sin(pose[2]) * R[0, 0] + ca.cos(pose[2]) * R[1, 0],
    )


def separation_sym(base_xy: list, other_xy: list, phi, c) -> list:
    """n·v − c, n = (cos φ, sin φ), at the base sole's corners, then at the other's: within `separation_bounds`
    they prove the soles at least the gap apart (the smooth form of `balance`'s feet_gap)."""
    n = ca.vertcat(ca.cos(phi), ca.sin(phi))
    return [ca.dot(n, v) - c for v in (*base_xy, *other_xy)]


def separation_bounds(gap: float, n_base: int = 4, n_other: int = 4) -> tuple[list[float], list[float]]:
    """Bounds of `separation_sym`: the base sole's corners ≤ −gap/2, the other sole's ≥ gap/2 (m)."""
    return ([-np.inf] * n_base + [gap / 2] * n_other, [-gap / 2] * n_base + [np.inf] * n_other)


def separating_line(base_xy: np.ndarray, other_xy: np.ndarray) -> tuple[float, float, float]:
    """The line (φ, c) that separates two convex soles best and the gap (m) it proves: disjoint, along their
    nearest points, the gap shapely's distance (`balance`'s feet_gap); overlapping, along their centroids, ≤ 0."""
    a, b = Polygon(base_xy), Polygon(other_xy)
    if a.intersects(b):
        pa, pb = a.centroid, b.centroid
    else:
        pa, pb = nearest_points(a, b)
    phi = float(np.arctan2(pb.y - pa.y, pb.x - pa.x))
    n = np.array([np.cos(phi), np.sin(phi)])
    hi, lo = float((np.asarray(base_xy) @ n).max()), float((np.asarray(other_xy) @ n).min())
    return phi, (hi + lo) / 2, lo - hi


def sole_rects(model: RobotModel, base: str) -> tuple[np.ndarray, np.ndarray]:
    """Local corners (4, 2) of the base sole and of the other sole."""
    return rect_corners(model.base_site(base).rect), rect_corners(model.site(other_site(model, base)).rect)


def placement_function(model: RobotModel, base: str) -> ca.Function:
    """(pose, line) → the other sole's ground pose (x, y, yaw), then `separation_sym` of both soles flat on the
    ground, the other at pose, about line (φ, c): a double-support placement as NLP rows (`placement_row_bounds`)."""
    pose, line = ca.SX.sym("pose", 3), ca.SX.sym("line", 2)
    rb, ro = sole_rects(model, base)
    sep = separation_sym(
        [ca.DM(v) for v in rb], placed_corners_sym(ro, pose[0], pose[1], pose[2]), line[0], line[1]
    )
    return ca.Function("placement", [pose, line], [ca.vertcat(pose, *sep)])


def placement_box(model: RobotModel, base: str) -> tuple[tuple[float, float], ...]:
    """The box (x, y in m, yaw in rad) of the other sole's ground pose: the description's ([stance] placement_x,
    placement_y, placement_yaw_deg), stated for the stance's base; unbounded for the other base."""
    spec = stance_spec(model)
    return spec.placement_bounds if base == spec.base else ((-np.inf, np.inf),) * 3


def placement_row_bounds(model: RobotModel, base: str) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of `placement_function`: the pose within `placement_box` and the soles at least the stance's
    feet_gap apart."""
    box = placement_box(model, base)
    lo, hi = separation_bounds(stance_spec(model).feet_gap)
    return np.r_[[b[0] for b in box], lo], np.r_[[b[1] for b in box], hi]


def placement_problems(model: RobotModel, base: str, pose, tol: float = PLACE_TOL) -> list[str]:
    """Why the other sole cannot be put down at ground pose (x, y, yaw) — outside `placement_box`, the box the
    single-support designer bounds its start to (`placement_row_bounds`) — in one line naming the pose and the
    box (empty: inside, within `tol` m or rad)."""
    box = placement_box(model, base)
    x, y, yaw = float(pose[0]), float(pose[1]), _wrap(float(pose[2]))
    out = [(name, v) for name, v, (lo, hi) in zip(("x", "y", "yaw"), (x, y, yaw), box, strict=True)
           if not lo - tol <= v <= hi + tol]  # fmt: skip
    if not out:
        return []

    bx, by, byaw = ([f"{v * k:.4g}" for v in b] for b, k in zip(box, (1000, 1000, 180 / np.pi), strict=True))
    return [
        f"{_ground_pose_text(model, base, (x, y, yaw))} is outside the placement box of the {model.name} "
        f"description ([stance] placement_x [{bx[0]}, {bx[1]}] mm, placement_y [{by[0]}, {by[1]}] mm, "
        f"placement_yaw_deg [{byaw[0]}, {byaw[1]}] deg): {' and '.join(name for name, _ in out)} out of range"
    ]


def feet_gap_problems(
    model: RobotModel, base: str, pose, tol: float = PLACE_TOL, need: float | None = None
) -> list[str]:
    """Why the other sole cannot be put down at ground pose (x, y, yaw) beside the base sole — closer to it than
    `need` m (default: the description's [stance] feet_gap, the gap the single-support designer keeps at its
    start, `placement_row_bounds`), measured by the best separating line (`separating_line`: shapely's
    distance) — in one line naming the pose, the gap and the description's (empty: at least that far apart,
    within `tol` m)."""
    need = stance_spec(model).feet_gap if need is None else need
    rb, ro = sole_rects(model, base)
    gap = separating_line(rb, placed_corners(ro, pose))[2]
    if gap >= need - tol:
        return []
    how = "touches or overlaps" if gap <= 0 else f"is {gap * 1000:.1f} mm from"
    return [
        f"{_ground_pose_text(model, base, pose)} {how} the {model.base_site(base).name} sole, closer than the "
        f"{model.name} description's [stance] feet_gap {need * 1000:.4g} mm"
    ]


def other_sole_problems(
    model: RobotModel, base: str, pose, *, default_gap: bool = False, tol: float = PLACE_TOL
) -> list[str]:
    """Everything wrong with putting the other sole down flat at ground pose (x, y, yaw) in the base sole's frame,
    one line each: outside the description's placement box (`placement_problems`) and closer to the base sole
    than the description's [stance] feet_gap (`feet_gap_problems`). The one check of a placement that `plan
    check`, the executor's pre-flight (`drivers.setpoints.check_run`), double-support trajectory plans and the
    weight shifts share. Where the description names no feet_gap, the gap is checked only with `default_gap`
    (against FEET_GAP, the gap the single-support designer keeps at its start, so its weight shifts require
    it); a static or double-support plan of such a robot is held only to feet that do not overlap (the posture
    check's "feet overlap")."""
    need = declared_feet_gap(model)
    if need is None and default_gap:
        need = stance_spec(model).feet_gap
    gap = [] if need is None else feet_gap_problems(model, base, pose, tol, need)
    return placement_problems(model, base, pose, tol) + gap


def _ground_pose_text(model: RobotModel, base: str, pose) -> str:
    """The words "the <other> sole's ground pose (x … mm, y … mm, yaw … deg)" for a pose (x, y m, yaw rad)."""
    x, y, yaw = float(pose[0]), float(pose[1]), _wrap(float(pose[2]))
    return (
        f"the {other_site(model, base)} sole's ground pose (x {x * 1000:.1f} mm, y {y * 1000:.1f} mm, yaw "
        f"{yaw * (180 / np.pi):.1f} deg)"
    )


def placement_line(model: RobotModel, base: str, pose) -> np.ndarray:
    """The best separating line (φ, c) of both soles flat on the ground, the other at pose (`separating_line`)."""
    rb, ro = sole_rects(model, base)
    return np.array(separating_line(rb, placed_corners(ro, pose))[:2])


@dataclass
class PostureStatus:
    """Result of the one posture check: what is wrong (empty = fine), CoP margin and feet gap (m)."""

    issues: list[str]
    margin: float
    feet_gap: float

    @property
    def ok(self) -> bool:
        return not self.issues


def lever_share(model: RobotModel, cop: np.ndarray, pose, base: str | None = None) -> float:
    """Where the CoP lies between the soles' centres, by the lever rule: 0 = all the weight on the base sole,
    1 = all on the other sole (placed at `pose`). A sole carrying little lifts or slides under the internal
    forces of stiff position-controlled legs; the design can keep this within [f, 1 − f]."""
    base = resolve_base(model, base)
    x0, x1, y0, y1 = model.base_site(base).rect
    cb = np.array([(x0 + x1) / 2, (y0 + y1) / 2])
    ox0, ox1, oy0, oy1 = model.site(other_site(model, base)).rect
    local = np.array([(ox0 + ox1) / 2, (oy0 + oy1) / 2])
    x, y, psi = pose
    co = np.array(
        [
            x + np.cos(psi) * local[0] - np.sin(psi) * local[1],
            y + np.sin(psi) * local[0] + np.cos(psi) * local[1],
        ]
    )
    axis = co - cb
    return float(np.dot(np.asarray(cop, dtype=float)[:2] - cb, axis) / np.dot(axis, axis))


def sole_poses(model: RobotModel, other: np.ndarray, base: str | None = None) -> list[tuple[str, np.ndarray]]:
    """The two soles of a biped standing with the other sole at `other` (x, y, yaw in the base sole's frame): their
    sites and poses, base sole first — the order of its boards (`drivers.wbb.geometry.board_poses_for`)."""
    base = resolve_base(model, base)
    return [
        (model.base_site(base).name, np.zeros(3)),
        (other_site(model, base), np.asarray(other, dtype=float)),
    ]


def corner_index(model: RobotModel, site: str, pose: np.ndarray, cop: np.ndarray) -> np.ndarray:
    """Where a sole's own CoP (base frame, (…, 2) m) lies on its contact rectangle placed at `pose` (x, y, yaw):
    |u|/a + |v|/b from the rectangle's centre, a and b its half sides. A rigid sole resting on equally stiff corners
    keeps all four loaded while this is ≤ 1; beyond, it tips onto three and rocks, a motion a model with fixed
    soles misses (at the middle of an edge the index is 1, at a corner 2)."""
    x0, x1, y0, y1 = model.site(site).rect
    x, y, psi = (float(v) for v in pose)
    d = np.asarray(cop, dtype=float)[..., :2] - np.array([x, y])
    c, s = np.cos(psi), np.sin(psi)
    u, v = c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]  # in the sole's frame
    return np.abs(u - (x0 + x1) / 2) / ((x1 - x0) / 2) + np.abs(v - (y0 + y1) / 2) / ((y1 - y0) / 2)


def _wrap(a: float) -> float:
    return float(np.angle(np.exp(1j * a)))


def check_posture(
    model: RobotModel,
    q: np.ndarray,
    params: str | ParameterSet | None = None,
    base: str | None = None,
    margin: float = 0.0,
    *,
    pose: np.ndarray | tuple[float, float, float] | None = None,
    cop: np.ndarray | None = None,
    geometry: str | ParameterSet | None = None,
    stated_cop: tuple[float, float] | None = None,
    stated_margin: float | None = None,
) -> PostureStatus:
    """The one check of a static double-support posture, shared by the planner, `plan check` and the executor.

    Joint and coupled limits, other sole flat on the ground, feet disjoint, CoP margin ≥ `margin` (m), with
    `pose` (x, y, yaw) the other sole at that placement, and a plan's stored CoP/margin (`stated_cop`,
    `stated_margin`, m; None: not stored) equal to the recomputed ones. The CoP is the CoM of `params` unless
    `cop` (x, y) is given; kinematics use `geometry` (default: `params`). Tolerances: FLAT_TOL, PLACE_TOL,
    MARGIN_TOL, LIMIT_TOL, STATED_TOL of this module.
    """
    params, base = _p(model, params), resolve_base(model, base)
    geometry = params if geometry is None else geometry
    other = other_site(model, base)
    issues = model.limit_violations(q, LIMIT_TOL)
    res = flat_residual(model, q, geometry, base)
    if np.abs(res).max() > FLAT_TOL:
        issues.append(
            f"{other} not flat on the ground (z {res[0] * 1000:.3f} mm, tilt {np.abs(res[1:]).max():.1e} rad)"
        )
    b = balance(model, q, params, base, geometry)
    if cop is None:
        cop, m = b.cop, b.margin
    else:
        cop = np.reshape(cop, 2)
        m = float(signed_margin(b.polygon, np.reshape(cop, (1, 2)))[0])
    if b.feet_overlap:
        issues.append("feet overlap")
    if m < margin - MARGIN_TOL:
        issues.append(f"CoP margin {m * 1000:.2f} mm < required {margin * 1000:.1f} mm")
    if pose is not None:
        off = placement_error(other, other_pose(model, q, geometry, base), pose)
        if off:
            issues.append(off)
    issues += stated_problems(cop, m, stated_cop, stated_margin)
    return PostureStatus(issues, m, b.feet_gap)


def placement_error(sole: str, actual, pose, tol: float = PLACE_TOL) -> str | None:
    """Why a sole standing at `actual` (x, y, yaw) is not at its placement `pose`: the x/y distance (mm) and the
    yaw (mrad), which exceeds `tol` (m, rad), and both poses (None: within `tol`)."""
    dx, dy = float(actual[0]) - float(pose[0]), float(actual[1]) - float(pose[1])
    dyaw = _wrap(float(actual[2]) - float(pose[2]))
    shift_bad, yaw_bad = max(abs(dx), abs(dy)) > tol, abs(dyaw) > tol
    if not (shift_bad or yaw_bad):
        return None

    tol_mm = f"{tol * 1000:g}"
    return (
        f"{sole} away from its placement: x/y off by {_fix(np.hypot(dx, dy) * 1000)} mm "
        f"({'>' if shift_bad else '≤'} {tol_mm} mm), yaw by {_fix(abs(dyaw) * 1000)} mrad "
        f"({'>' if yaw_bad else '≤'} {tol_mm} mrad); the sole stands at {_pose_mm(actual)}, its placement at "
        f"{_pose_mm(pose)}"
    )


def _fix(v: float) -> str:
    """v to 3 decimals without a "-0.000"."""
    return f"{round(float(v), 3) + 0.0:.3f}"


def _pose_mm(pose) -> str:
    """A ground pose (x, y m, yaw rad) as "(x … mm, y … mm, yaw … deg)"."""
    x, y, yaw = float(pose[0]) * 1000, float(pose[1]) * 1000, np.degrees(_wrap(float(pose[2])))
    return f"(x {_fix(x)} mm, y {_fix(y)} mm, yaw {_fix(yaw)} deg)"


def stated_problems(
    cop, margin: float, stated_cop=None, stated_margin: float | None = None, tol: float = STATED_TOL
) -> list[str]:
    """Where a plan's stored predicted CoP or margin (m; None: not stored) differs from the recomputed `cop`
    (x, y) and `margin` by more than `tol` m, one line each in mm: stored values are shown and drawn, so
    they must be the checked ones."""
    out = []
    if (
        stated_cop is not None
        and np.hypot(*(np.asarray(stated_cop, float) - np.asarray(cop, float)[:2])) > tol
    ):
        sx, sy = (float(v) * 1000 for v in stated_cop)
        rx, ry = (float(v) * 1000 for v in cop[:2])
        out.append(
            f"stored predicted_cop ({sx:.1f}, {sy:.1f}) mm differs from the recomputed ({rx:.1f}, {ry:.1f}) mm "
            f"(tolerance {tol * 1000:g} mm)"
        )
    if stated_margin is not None and abs(stated_margin - margin) > tol:
        out.append(
            f"stored margin {stated_margin * 1000:.1f} mm differs from the recomputed {margin * 1000:.1f} mm "
            f"(tolerance {tol * 1000:g} mm)"
        )
    return out


def posture_problems(
    model: RobotModel,
    q: np.ndarray,
    params: str | ParameterSet | None = None,
    base: str | None = None,
    margin: float = 0.0,
) -> list[str]:
    """Everything wrong with one posture for static double-support measurement (empty list = fine).

    `check_posture` without a placement; `params` and `base` default to the model's design set and base.
    """
    return check_posture(model, q, params, base, margin).issues


def random_double_support(
    model: RobotModel,
    n: int,
    rng: np.random.Generator,
    params: str | None = None,
    base: str | None = None,
    margin: float = 0.0,
    max_tries: int = 200_000,
) -> np.ndarray:
    """Random valid double-support postures: uniform joint samples projected onto flat feet, then filtered."""
    params, base = _p(model, params), resolve_base(model, base)
    out: list[np.ndarray] = []
    tries = 0
    lo, hi = model.sampling_bounds()
    while len(out) < n:
        if tries >= max_tries:
            raise DataError(
                f"found only {len(out)} of {n} valid double-support postures in {max_tries} tries"
            )
        state = rng.bit_generator.state
        batch = min(PROJECT_BATCH, max_tries - tries)
        qs, ok = project_flat(model, rng.uniform(lo, hi, (batch, model.nq)), params, base)
        for k, (q, good) in enumerate(zip(qs, ok, strict=True)):
            # most projections leave a limit (4 in 5 on TUlip): refused before the full check's kinematics, by it
            if (
                good
                and not model.limit_violations(q, LIMIT_TOL)
                and not posture_problems(model, q, params, base, margin)
            ):
                out.append(q)
            if len(out) == n:  # the generator left as if drawn one posture at a time
                rng.bit_generator.state = state
                rng.uniform(lo, hi, (k + 1, model.nq))
                break
        tries += batch
    return np.array(out)


EDGE_STEP = 0.005  # m: spacing of the points sampled along each contact rectangle's edges


def _rect_edge_points(rect) -> np.ndarray:
    """Points (k, 3) along the edges of a contact rectangle, in its site frame."""
    x0, x1, y0, y1 = rect
    pts = []
    for (ax, ay), (bx, by) in (
        ((x0, y0), (x1, y0)),
        ((x1, y0), (x1, y1)),
        ((x1, y1), (x0, y1)),
        ((x0, y1), (x0, y0)),
    ):
        n = max(2, int(np.ceil(np.hypot(bx - ax, by - ay) / EDGE_STEP)) + 1)
        t = np.linspace(0.0, 1.0, n)[:-1]
        pts.append(np.column_stack([ax + t * (bx - ax), ay + t * (by - ay), np.zeros_like(t)]))
    return np.vstack(pts)


def contact_clearance(
    model: RobotModel, q: np.ndarray, params: str | ParameterSet | None = None, base: str | None = None
) -> np.ndarray:
    """Smallest 3-D distance (m) between any two contact rectangles (the soles) for postures q (B, nq): the
    edges of each, sampled every EDGE_STEP, against the other's rectangle (0 when they touch or cross). Used
    where the feet are off the ground (air moves), where the planar support-polygon checks say nothing."""
    params, base = _p(model, params), resolve_base(model, base)
    q = np.atleast_2d(np.asarray(q, dtype=float))
    sites = [s for s in model.sites if s.rect is not None]
    frames = {s.name: site_pose(model, q, params, s.name, base) for s in sites}
    out = np.full(len(q), np.inf)
    for i, a in enumerate(sites):
        for b in sites[i + 1 :]:
            for s, t in ((a, b), (b, a)):
                Rs, ps = frames[s.name]
                Rt, pt = frames[t.name]
                world = ps[:, None, :] + np.einsum("bij,kj->bki", Rs, _rect_edge_points(s.rect))
                local = np.einsum("bji,bkj->bki", Rt, world - pt[:, None, :])  # in t's site frame
                x0, x1, y0, y1 = t.rect
                clamped = np.stack(
                    [
                        np.clip(local[..., 0], x0, x1),
                        np.clip(local[..., 1], y0, y1),
                        np.zeros(local.shape[:2]),
                    ],
                    axis=-1,
                )
                out = np.minimum(out, np.linalg.norm(local - clamped, axis=-1).min(axis=1))
    return out
