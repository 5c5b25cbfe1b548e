"""Board geometry and placement: cell forces -> CoP in the robot's right-sole base frame, over both boards.

Board frame: origin at the board centre on its top surface, x toward the right edge (the TR/BR side,
long side), y toward the top edge (TR/TL side). Cells sit at (+-a, +-b) with 2a = 433 mm, 2b = 238 mm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats.errors import DataError
from formats.units import STANDARD_GRAVITY

CELL_SPAN_X = 0.433
CELL_SPAN_Y = 0.238
# m, the top surface above the plane the cells measure in (the floor): vertical cells give the moments about
# that plane, which include the lever PLATE_HEIGHT of the horizontal forces on the plate
PLATE_HEIGHT = 0.053
G = STANDARD_GRAVITY  # the boards' kilograms are kilograms-force


def cell_levers(cells_xy: np.ndarray) -> np.ndarray:
    """(m, 3) what a unit vertical force on each cell at `cells_xy` (m, 2) puts on the wrench (Fz, Mx, My): 1, y,
    −x — the boards' wrench is these rows weighted by the cells' forces."""
    xy = np.asarray(cells_xy, dtype=float)
    return np.stack([np.ones(len(xy)), xy[:, 1], -xy[:, 0]], axis=1)


def cell_positions(span_x: float = CELL_SPAN_X, span_y: float = CELL_SPAN_Y) -> np.ndarray:
    """(4, 2) cell positions in the board frame, order TR, BR, TL, BL."""
    a, b = span_x / 2, span_y / 2
    return np.array([[a, b], [a, -b], [-a, b], [-a, -b]])


def pose_matrix(pose: tuple[float, float, float] | np.ndarray) -> np.ndarray:
    """Planar pose [x, y, psi] -> 3x3 homogeneous transform."""
    x, y, psi = (float(v) for v in pose)
    c, s = np.cos(psi), np.sin(psi)
    return np.array([[c, -s, x], [s, c, y], [0.0, 0.0, 1.0]])


def compose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pose a then b (b expressed in a's frame) -> [x, y, psi]."""
    m = pose_matrix(a) @ pose_matrix(b)
    return np.array([m[0, 2], m[1, 2], np.arctan2(m[1, 0], m[0, 0])])


def cells_in_base(board_poses: list[np.ndarray], span=(CELL_SPAN_X, CELL_SPAN_Y)) -> np.ndarray:
    """(4 * n_boards, 2) cell positions in the base frame for boards at the given poses (base frame)."""
    local = cell_positions(*span)
    out = []
    for pose in board_poses:
        m = pose_matrix(pose)
        out.append(local @ m[:2, :2].T + m[:2, 2])
    return np.vstack(out)


@dataclass(frozen=True)
class CopResult:
    cop: np.ndarray  # (2,) m, base frame
    total_kg: float
    per_board_kg: np.ndarray


MIN_COP_KG = 0.5  # below this total there is no load to locate


def cop(cell_kg: np.ndarray, cell_xy: np.ndarray, min_total_kg: float = MIN_COP_KG) -> CopResult:
    """CoP = sum F_i p_i / sum F_i over all cells; cell_kg (n,) matched to cell_xy (n, 2)."""
    f = np.asarray(cell_kg, dtype=float).ravel()
    total = float(f.sum())
    if total < min_total_kg:
        raise DataError(
            f"total load {total:.2f} kg is below {min_total_kg} kg: nothing standing on the boards?"
        )
    c = f @ cell_xy / total
    return CopResult(c, total, f.reshape(-1, 4).sum(axis=1))


def board_poses_for(
    left_foot: np.ndarray, right_offset: np.ndarray, left_offset: np.ndarray
) -> list[np.ndarray]:
    """Board 1 sits under the right foot (pose `right_offset` in the right-sole frame), board 2 under the left
    foot (pose `left_offset` in the left-sole frame, whose pose in the base frame is `left_foot`)."""
    return [
        np.asarray(right_offset, float),
        compose(np.asarray(left_foot, float), np.asarray(left_offset, float)),
    ]
