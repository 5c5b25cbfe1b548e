"""Standing on one sole: the balance and the lifted sole's place, evaluated on a batch of states.

One implementation shared by the single-support design's verification (`trajectories.verify`) and the drivers'
pre-flight check of every streamed tick (`drivers.single_support_stream`): the ZMP of the inverse dynamics with
the base sole held, its margin inside the base sole's rectangle, and where the lifted sole's corners are (lowest
and highest above the ground), how far its plane is tilted from the ground's and how far its footprint (its corners
seen from above) stays from the base sole: without collision geometry, the lifted sole keeps the stance's feet gap
beside the base sole rather than pass over the standing foot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely
from shapely.geometry import Polygon

from formats.errors import DataError
from robots import dynamics as dyn
from robots.kinematics import site_pose
from robots.stance import signed_margin
from robots.stance_spec import stance_spec
from robots.tree import RobotModel


def sole_polygon(model: RobotModel, base: str) -> Polygon:
    """The base sole's contact rectangle in the base frame (the sole's own frame: it does not move)."""
    site = model.base_site(base)
    if site.rect is None:
        raise DataError(f"{model.name!r}: base {base!r} has no contact rectangle to stand on")
    x0, x1, y0, y1 = site.rect
    return Polygon([(x0, y0), (x1, y0), (x1, y1), (x0, y1)])


def sole_corners(model: RobotModel, site: str) -> np.ndarray:
    """The four corners (4, 3) of a contact site's rectangle in the site frame."""
    rect = model.site(site).rect
    if rect is None:
        raise DataError(f"{model.name!r}: the other sole {site!r} has no contact rectangle")
    x0, x1, y0, y1 = rect
    return np.array([[x0, y0, 0], [x1, y0, 0], [x1, y1, 0], [x0, y1, 0]], dtype=float)


def placed_sole_corners(model: RobotModel, site: str, R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The corners (K, 4, 3) of a contact site's rectangle at its poses (R (K, 3, 3), p (K, 3); `site_pose`)."""
    return np.einsum("bij,kj->bki", R, sole_corners(model, site)) + p[:, None, :]


@dataclass
class OneSole:
    """Per state (K,): ZMP margin inside the base sole (m; −inf where Fz ≤ 0), vertical force Fz (N), the lifted
    sole's lowest and highest corner above the ground (m), its tilt from the ground's plane (rad) and its
    footprint's distance from the base sole (m; 0 where they overlap); the gap (m) the description's stance asks
    between the soles."""

    margin: np.ndarray
    fz: np.ndarray
    lowest: np.ndarray
    highest: np.ndarray
    tilt: np.ndarray
    apart: np.ndarray
    feet_gap: float


def one_sole(
    model: RobotModel, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, base: str, other: str, params
) -> OneSole:
    """Balance and lifted-sole place of states (K, nq) standing on `base` with `other` in the air (design
    parameters `params`: the ZMP is what the model predicts)."""
    q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
    w = dyn.base_wrench_regressor(model, q, qd, qdd, base, params) @ dyn.standard_parameters(model, params)
    fz, mx, my = w[:, 2], w[:, 3], w[:, 4]
    safe = np.where(fz > 0, fz, np.nan)
    zmp = np.stack([-my / safe, mx / safe], axis=1)
    margin = np.full(len(q), -np.inf)
    ok = np.isfinite(zmp).all(axis=1)
    if ok.any():
        margin[ok] = signed_margin(sole_polygon(model, base), zmp[ok])
    R, p = site_pose(model, q, params, other, base)
    corners = placed_sole_corners(model, other, R, p)
    z = corners[..., 2]
    tilt = np.arccos(np.clip(R[:, 2, 2], -1.0, 1.0))
    # seen from above, a flat rectangle is a parallelogram with its corners in the same order
    footprints = shapely.polygons(np.concatenate([corners[..., :2], corners[:, :1, :2]], axis=1))
    apart = shapely.distance(sole_polygon(model, base), footprints)
    return OneSole(margin, fz, z.min(axis=1), z.max(axis=1), tilt, apart, stance_spec(model).feet_gap)


def one_sole_problems(
    s: OneSole,
    base: str,
    other: str,
    margin: float,
    lift: float,
    max_lift: float | None = None,
    max_tilt: float | None = None,
    where=lambda k: "",
    margin_tol: float = 1e-4,
    place_tol: float = 1e-4,
) -> list[str]:
    """Why states on one sole are unsafe (empty: they are not): the base sole unloaded, the ZMP less than `margin`
    m inside it, the `other` sole's corners below `lift` m or above `max_lift` m, its plane tilted beyond
    `max_tilt` rad, its footprint less than the stance's feet gap from the base sole. `where(k)` prefixes a
    message with where state k is (e.g. a tick's time); the tolerances are the caller's (a design's constraint
    tolerance, or none for what is about to be sent)."""
    out = []
    if np.any(s.fz <= 0):
        k = int(np.argmax(s.fz <= 0))
        out.append(f"{where(k)}the base sole would leave the ground (Fz {s.fz[k]:.1f} N)")
    elif s.margin.min() < margin - margin_tol:
        k = int(np.argmin(s.margin))
        out.append(
            f"{where(k)}ZMP {s.margin[k] * 1000:.1f} mm inside the {base} sole < required {margin * 1000:.1f} mm"
        )
    if s.lowest.min() < lift - place_tol:
        k = int(np.argmin(s.lowest))
        out.append(f"{where(k)}the {other} sole comes {s.lowest[k] * 1000:.1f} mm above the ground "
                   f"(< {lift * 1000:.1f} mm)")  # fmt: skip
    if max_lift is not None and s.highest.max() > max_lift + place_tol:
        k = int(np.argmax(s.highest))
        out.append(f"{where(k)}the {other} sole rises {s.highest[k] * 1000:.0f} mm above the ground "
                   f"(> {max_lift * 1000:.0f} mm)")  # fmt: skip
    if max_tilt is not None and s.tilt.max() > max_tilt + place_tol:
        k = int(np.argmax(s.tilt))
        out.append(
            f"{where(k)}the {other} sole tilts {np.degrees(s.tilt[k]):.1f}° (> {np.degrees(max_tilt):.1f}°)"
        )
    if s.apart.min() < s.feet_gap - place_tol:
        k = int(np.argmin(s.apart))
        near = "passes over" if s.apart[k] <= 0 else f"comes {s.apart[k] * 1000:.1f} mm from"
        out.append(f"{where(k)}the {other} sole {near} the {base} sole, seen from above (< the stance's feet gap "
                   f"{s.feet_gap * 1000:.1f} mm: the feet could meet)")  # fmt: skip
    return out
