"""Random feasible initial posture sets by the thesis's procedure (§3.5.1), in task space plus IK.

Per placement: draw the left-foot pose (reject intersecting feet), then draw CoM and torso orientation and
solve the 12×12 inverse kinematics (CoM, torso orientation, flat left foot at the placement) by damped
Gauss–Newton; keep solutions inside the joint limits with the required CoP margin.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import casadi as ca
import numpy as np
from shapely.geometry import Point

from design.geometry import bbox_centre, all_corners, foot_rects, placed_corners, support_polygon
from robots.errors import PoiseError
from robots.kinematics import com_position_sym, link_frames_sym, site_pose_sym
from robots.stance import other_site, posture_problems
from robots.tree import RobotModel
from shapely.geometry import Polygon

Y_MIN_CENTRED = 0.1488  # problem 2: y_s ≥ √(l12h² + l12a²) + l6a (m)


@dataclass
class PostureSet:
    """Postures with their placements: q (N, nq) rad; placement of each posture; left-foot poses (P, 3)."""

    q: np.ndarray
    placement: np.ndarray
    poses: np.ndarray


def _rpy(roll, pitch, yaw):
    cr, sr, cp, sp, cy, sy = ca.cos(roll), ca.sin(roll), ca.cos(pitch), ca.sin(pitch), ca.cos(yaw), ca.sin(yaw)
    Rz = ca.vertcat(ca.horzcat(cy, -sy, 0), ca.horzcat(sy, cy, 0), ca.horzcat(0, 0, 1))
    Ry = ca.vertcat(ca.horzcat(cp, 0, sp), ca.horzcat(0, 1, 0), ca.horzcat(-sp, 0, cp))
    Rx = ca.vertcat(ca.horzcat(1, 0, 0), ca.horzcat(0, cr, -sr), ca.horzcat(0, sr, cr))
    return Rz @ Ry @ Rx


@lru_cache(maxsize=4)
def ik_function(model: RobotModel, params: str = "sim", base: str = "right") -> ca.Function:
    """IK residual r(q; target) and ∂r/∂q; target = [CoM xyz, torso roll pitch yaw, foot x y psi]."""
    q = ca.SX.sym("q", model.nq)
    t = ca.SX.sym("t", 9)
    com = com_position_sym(model, q, params, base)
    R0 = link_frames_sym(model, q, params, base).R[0]
    E = _rpy(t[3], t[4], t[5]).T @ R0
    rot = ca.vertcat(E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]) / 2
    Rf, pf = site_pose_sym(model, q, params, other_site(model, base), base)
    foot = ca.vertcat(
        pf[0] - t[6], pf[1] - t[7], pf[2], Rf[0, 2], Rf[1, 2], -ca.sin(t[8]) * Rf[0, 0] + ca.cos(t[8]) * Rf[1, 0]
    )
    r = ca.vertcat(com - t[:3], rot, foot)
    return ca.Function("ik", [q, t], [r, ca.jacobian(r, q)])


def solve_ik(
    model: RobotModel, target: np.ndarray, q0: np.ndarray, params: str = "sim", base: str = "right", iters: int = 60
) -> tuple[np.ndarray, bool]:
    """Damped Gauss–Newton with joint-limit clipping; success when the residual is below 1e-10."""
    fn = ik_function(model, params, base)
    q = np.clip(np.array(q0, dtype=float), model.lower, model.upper)
    lam = 1e-3
    r, J = (np.asarray(v) for v in fn(q, target))
    r = r.ravel()
    for _ in range(iters):
        if np.linalg.norm(r) < 1e-10:
            return q, True
        step = np.linalg.solve(J.T @ J + lam * np.eye(model.nq), J.T @ r)
        qn = np.clip(q - step, model.lower, model.upper)
        rn, Jn = (np.asarray(v) for v in fn(qn, target))
        rn = rn.ravel()
        if np.linalg.norm(rn) < np.linalg.norm(r):
            q, r, J, lam = qn, rn, Jn, max(lam / 3, 1e-9)
        else:
            lam *= 10
            if lam > 1e6:
                break
    return q, bool(np.linalg.norm(r) < 1e-10)


def _neutral(model: RobotModel, rng: np.random.Generator) -> np.ndarray:
    q = np.zeros(model.nq)
    bend = rng.uniform(0.2, 0.8)
    for hip, knee, ankle in ((2, 3, 4), (8, 9, 10)):
        q[hip], q[knee], q[ankle] = -bend, 2 * bend, -bend
    return q


def sample_placement(
    model: RobotModel, rng: np.random.Generator, centred: bool = False, base: str = "right", feet_gap: float = 0.0
) -> np.ndarray:
    """Left-foot pose (x, y, psi) with disjoint feet: x ∈ [−0.75, 0.75], y ∈ [−0.1, 0.5] m, psi ∈ ±90°."""
    rb, ro = foot_rects(model, base)
    right = Polygon(rb)
    while True:
        pose = np.array([rng.uniform(-0.75, 0.75), rng.uniform(-0.1, 0.5), rng.uniform(-np.pi / 2, np.pi / 2)])
        if centred and pose[1] < Y_MIN_CENTRED:
            continue
        left = Polygon(placed_corners(ro, pose))
        if not right.intersects(left) and right.distance(left) >= feet_gap:
            return pose


def sample_posture_set(
    model: RobotModel,
    n_postures: int,
    n_placements: int,
    rng: np.random.Generator,
    margin: float = 0.08,
    centred: bool = False,
    params: str = "sim",
    base: str = "right",
    feet_gap: float = 0.002,
    max_tries: int = 400,
) -> PostureSet:
    """Thesis §3.5.1: n_placements placements × (n_postures / n_placements) CoM/torso draws, IK, limit check."""
    if n_placements < 1 or n_postures % n_placements:
        raise PoiseError(f"--postures ({n_postures}) must be a positive multiple of --placements ({n_placements})")
    per = n_postures // n_placements
    qs, pl, poses = [], [], []
    for j in range(n_placements):
        for _attempt in range(10_000):
            pose = sample_placement(model, rng, centred, base, feet_gap)
            poly = support_polygon(model, pose, base)
            if centred:
                region = None
                centre = bbox_centre(all_corners(model, pose, base))
            else:
                region = poly.buffer(-margin)
                if region.is_empty:
                    continue
            found: list[np.ndarray] = []
            for _try in range(max_tries):
                if centred:
                    xy = centre
                else:
                    minx, miny, maxx, maxy = region.bounds
                    xy = np.array([rng.uniform(minx, maxx), rng.uniform(miny, maxy)])
                    if not region.contains(Point(xy)):
                        continue
                target = np.concatenate([xy, [rng.uniform(0.55, 0.75)], np.radians(rng.uniform(-30, 30, 3)), pose])
                q, ok = solve_ik(model, target, _neutral(model, rng), params, base)
                if not ok or posture_problems(model, q, params, base, margin=0.0 if centred else margin):
                    if not found:
                        break  # thesis step 4: no posture yet for this placement -> new placement
                    continue
                found.append(q)
                if len(found) == per:
                    break
            if len(found) == per:
                qs += found
                pl += [j] * per
                poses.append(pose)
                break
        else:
            raise PoiseError("could not sample a feasible placement in 10000 attempts")
    return PostureSet(np.array(qs), np.array(pl), np.array(poses))
