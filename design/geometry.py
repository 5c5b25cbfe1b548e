"""Support-polygon geometry for the optimiser: foot corners, hull structure, separating lines, bbox centre.

Numeric helpers (numpy/shapely) pick a combinatorial structure (which corners form the hull, which corners
are extreme); the CasADi expressions then use that structure, so constraints are smooth and, while the
structure holds, *exact* (they equal shapely's distances). `problems.py` re-detects the structure and
re-solves if it changed.
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np
from shapely.geometry import MultiPoint, Polygon

from robots.stance import placed_corners, placed_corners_sym, rect_corners, sole_rects  # noqa: F401 (re-exported)
from robots.stance_spec import resolve_base
from robots.tree import RobotModel


def foot_rects(model: RobotModel, base: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Local corners of the base foot and of the other foot."""
    return sole_rects(model, resolve_base(model, base))


def all_corners(model: RobotModel, pose, base: str | None = None) -> np.ndarray:
    """The 8 corners: base foot (0–3), other foot (4–7), in the base sole's frame (m)."""
    rb, ro = foot_rects(model, base)
    return np.vstack([rb, placed_corners(ro, pose)])


def hull_indices(points: np.ndarray) -> list[int]:
    """Indices of the convex-hull vertices of `points`, counter-clockwise (collinear points dropped)."""
    pts = np.asarray(points, dtype=float)
    order = sorted(range(len(pts)), key=lambda i: (pts[i, 0], pts[i, 1]))

    def cross(o, a, b):
        return (pts[a, 0] - pts[o, 0]) * (pts[b, 1] - pts[o, 1]) - (pts[a, 1] - pts[o, 1]) * (
            pts[b, 0] - pts[o, 0]
        )

    lower: list[int] = []
    for i in order:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], i) <= 1e-14:
            lower.pop()
        lower.append(i)
    upper: list[int] = []
    for i in reversed(order):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], i) <= 1e-14:
            upper.pop()
        upper.append(i)
    return lower[:-1] + upper[:-1]


@dataclass(frozen=True)
class Structure:
    """Combinatorial state of one placement: hull vertex order and bounding-box extreme corners."""

    hull: tuple[int, ...]
    bbox: tuple[int, int, int, int]  # argmin x, argmax x, argmin y, argmax y


def structure(model: RobotModel, pose, base: str | None = None) -> Structure:
    pts = all_corners(model, pose, base)
    bbox = (
        int(np.argmin(pts[:, 0])),
        int(np.argmax(pts[:, 0])),
        int(np.argmin(pts[:, 1])),
        int(np.argmax(pts[:, 1])),
    )
    return Structure(tuple(hull_indices(pts)), bbox)


def support_polygon(model: RobotModel, pose, base: str | None = None) -> Polygon:
    """Shapely support polygon (convex hull of the 8 corners) for a placement."""
    return MultiPoint(all_corners(model, pose, base)).convex_hull


def bbox_centre(points: np.ndarray) -> np.ndarray:
    """Support-polygon centre of problem 2: bounding-box midpoint ((max + min)/2 per axis)."""
    return (points.max(axis=0) + points.min(axis=0)) / 2


def separating_line(pose, model: RobotModel, base: str | None = None) -> tuple[float, float, float]:
    """Best separating line (phi, c, gap) between the base foot and the placed other foot, by angle scan.

    n = (cos phi, sin phi); base corners satisfy n·v ≤ c − gap/2, other corners n·v ≥ c + gap/2.
    """
    rb, ro = foot_rects(model, base)
    lo = placed_corners(ro, pose)
    phis = np.linspace(-np.pi, np.pi, 721)
    n = np.stack([np.cos(phis), np.sin(phis)], axis=1)
    a = (rb @ n.T).max(axis=0)
    b = (lo @ n.T).min(axis=0)
    k = int(np.argmax(b - a))
    return float(phis[k]), float((a[k] + b[k]) / 2), float(b[k] - a[k])


def edge_margins_sym(verts: list, hull: tuple[int, ...], point) -> list:
    """Signed distances of `point` to the lines of the hull edges (positive inside), CasADi."""
    out = []
    for k in range(len(hull)):
        a, b = verts[hull[k]], verts[hull[(k + 1) % len(hull)]]
        e = b - a
        length = ca.sqrt(e[0] ** 2 + e[1] ** 2)
        out.append((e[0] * (point[1] - a[1]) - e[1] * (point[0] - a[0])) / length)
    return out


def edge_normals_sym(verts: list, hull: tuple[int, ...]) -> list:
    """Inward unit normals of the hull edges, CasADi 2×1."""
    out = []
    for k in range(len(hull)):
        a, b = verts[hull[k]], verts[hull[(k + 1) % len(hull)]]
        e = b - a
        length = ca.sqrt(e[0] ** 2 + e[1] ** 2)
        out.append(ca.vertcat(-e[1], e[0]) / length)
    return out


def convexity_sym(verts: list, hull: tuple[int, ...]) -> list:
    """Turn cross products at every hull vertex (≥ 0 keeps the chosen polygon convex), CasADi."""
    out = []
    n = len(hull)
    for k in range(n):
        a, b, c = verts[hull[k - 1]], verts[hull[k]], verts[hull[(k + 1) % n]]
        u, v = b - a, c - b
        out.append(u[0] * v[1] - u[1] * v[0])
    return out
