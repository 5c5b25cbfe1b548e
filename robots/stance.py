"""Double support: both soles flat on the ground; feet geometry, support polygon and balance margin.

The base sole defines the ground. The other sole is flat when its origin has z = 0 and its z axis is vertical
(three equations); its x, y and yaw on the ground are free (the foot placement).
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np
import shapely
from shapely.geometry import MultiPoint, Point, Polygon

from formats.errors import DataError
from robots.kinematics import com_position, site_pose, site_pose_sym
from robots.memo import per_model
from robots.tree import ParameterSet, RobotModel


def other_site(model: RobotModel, base: str) -> str:
    """The contact site of the non-base foot (bipeds: the other sole)."""
    others = [s.name for s in model.sites if s.rect is not None and s.name != model.bases[base]]
    if len(others) != 1:
        raise DataError(f"model {model.name!r} needs exactly one other contact site for base {base!r}")
    return others[0]


@per_model
def _flat_functions(model: RobotModel, params_name: str, base: str) -> ca.Function:
    q = ca.SX.sym("q", model.nq)
    R, p = site_pose_sym(model, q, params_name, other_site(model, base), base)
    c = ca.vertcat(p[2], R[0, 2], R[1, 2])
    return ca.Function("flat", [q], [c, ca.jacobian(c, q)])


def flat_residual(model: RobotModel, q: np.ndarray, params: str = "sim", base: str = "right") -> np.ndarray:
    """[z, R02, R12] of the other sole: zero when it lies flat on the ground (m, –, –)."""
    R, p = site_pose(model, q, params, other_site(model, base), base)
    return np.stack([p[..., 2], R[..., 0, 2], R[..., 1, 2]], axis=-1)


def project_flat(
    model: RobotModel,
    q0: np.ndarray,
    params: str = "sim",
    base: str = "right",
    tol: float = 1e-12,
    iters: int = 30,
) -> tuple[np.ndarray, bool]:
    """Nearest-step Gauss–Newton projection of q0 onto double support (minimum-norm joint change per step)."""
    fn = _flat_functions(model, params if isinstance(params, str) else params.name, base)
    q = np.array(q0, dtype=float)
    for _ in range(iters):
        c, J = fn(q)
        c, J = np.asarray(c).ravel(), np.asarray(J)
        if np.linalg.norm(c) < tol:
            return q, True
        q = q - np.linalg.lstsq(J, c, rcond=None)[0]
    c = np.asarray(fn(q)[0]).ravel()
    return q, bool(np.linalg.norm(c) < 1e-9)


def foot_corners(model: RobotModel, q: np.ndarray, params: str | ParameterSet = "sim", base: str = "right"):
    """x-y corners of every contact rectangle in the base frame: {site: (…, 4, 2)}."""
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
    model: RobotModel, q: np.ndarray, params: str | ParameterSet = "sim", base: str = "right"
) -> Balance:
    """Support polygon (convex hull of all foot corners), CoP margin and feet separation, with shapely."""
    q = model.check_q(q)
    if q.ndim != 1:
        raise DataError("balance() takes one posture")
    corners = foot_corners(model, q, params, base)
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


def signed_margin(polygon: Polygon, points: np.ndarray) -> np.ndarray:
    """Signed distance (positive inside) of points (N, 2) to a polygon's boundary, vectorised with shapely."""
    pts = shapely.points(np.asarray(points, dtype=float))
    d = shapely.distance(polygon.exterior, pts)
    return np.where(shapely.contains(polygon, pts), d, -d)


def posture_problems(
    model: RobotModel,
    q: np.ndarray,
    params: str | ParameterSet = "sim",
    base: str = "right",
    margin: float = 0.0,
) -> list[str]:
    """Everything wrong with one posture for static double-support measurement (empty list = fine)."""
    issues = model.limit_violations(q)
    res = flat_residual(model, q, params, base)
    if np.abs(res).max() > 1e-6:
        issues.append(
            f"other foot not flat on the ground (z {res[0] * 1000:.2f} mm, tilt {np.abs(res[1:]).max():.2e})"
        )
    b = balance(model, q, params, base)
    if b.feet_overlap:
        issues.append("feet overlap")
    if b.margin < margin - 1e-9:
        issues.append(f"CoP margin {b.margin * 1000:.1f} mm < required {margin * 1000:.1f} mm")
    return issues


def random_double_support(
    model: RobotModel,
    n: int,
    rng: np.random.Generator,
    params: str = "sim",
    base: str = "right",
    margin: float = 0.0,
    max_tries: int = 200_000,
) -> np.ndarray:
    """Random valid double-support postures: uniform joint samples projected onto flat feet, then filtered."""
    out: list[np.ndarray] = []
    tries = 0
    lo, hi = model.lower, model.upper
    while len(out) < n:
        if tries >= max_tries:
            raise DataError(
                f"found only {len(out)} of {n} valid double-support postures in {max_tries} tries"
            )
        tries += 1
        q0 = rng.uniform(lo, hi)
        q, ok = project_flat(model, q0, params, base)
        if not ok or posture_problems(model, q, params, base, margin):
            continue
        out.append(q)
    return np.array(out)
