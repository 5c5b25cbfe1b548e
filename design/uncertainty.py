"""Uncertainty-aware CoP margin: the CoP is linear in ϑ_b, so its worst case over an ellipsoid is closed form.

For a hull edge with inward unit normal n through vertex a, and ϑ_b ∈ {ϑ₀ + L u : ‖u‖ ≤ 1},
    min_u n·(R_xy(q)(ϑ₀ + L u) − a) = n·(CoP₀ − a) − ‖Lᵀ R_xyᵀ n‖.
Here L = r·I (a ball of radius r in metres of ϑ_b); the optimiser uses the same expression symbolically.
"""

from __future__ import annotations

import numpy as np

from design.criteria import base_model
from design.geometry import all_corners, hull_indices
from robots.kinematics import site_pose
from robots.stance import other_site
from robots.tree import RobotModel


def left_pose(model: RobotModel, q: np.ndarray, params: str = "sim", base: str = "right") -> np.ndarray:
    """Pose (x, y, psi) of the other sole on the ground (m, m, rad)."""
    R, p = site_pose(model, q, params, other_site(model, base), base)
    return np.array([p[0], p[1], np.arctan2(R[1, 0], R[0, 0])])


def robust_margin(
    model: RobotModel, q: np.ndarray, radius: float, params: str = "sim", base: str = "right"
) -> float:
    """Smallest CoP margin (m) over all ϑ_b within `radius` (m) of the design values."""
    bm = base_model(model, base)
    Rxy = bm.regressor(q)[:2, :]
    cop = Rxy @ bm.values(params)
    pts = all_corners(model, left_pose(model, q, params, base), base)
    hull = hull_indices(pts)
    out = np.inf
    for k in range(len(hull)):
        a, b = pts[hull[k]], pts[hull[(k + 1) % len(hull)]]
        e = (b - a) / np.linalg.norm(b - a)
        n = np.array([-e[1], e[0]])
        out = min(out, float(n @ (cop - a) - radius * np.linalg.norm(Rxy.T @ n)))
    return out
