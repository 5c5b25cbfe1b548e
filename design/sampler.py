"""Random feasible initial posture sets by the thesis's procedure (§3.5.1), in task space plus IK.

Per placement: draw the other foot's pose (reject intersecting feet), then draw CoM and torso orientation and
solve the inverse kinematics (CoM, torso orientation, flat other foot at the placement) by damped Gauss–Newton;
keep solutions that pass the one posture check (`robots.stance.posture_problems`). The sampling boxes, the
torso link and the neutral start posture come from the robot's stance (`robots.stance_spec`).
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np
import shapely
from shapely.geometry import Polygon

from design.geometry import all_corners, bbox_centre, foot_rects, placed_corners, support_polygon
from formats.errors import PoiseError
from robots.kinematics import com_position_sym, link_frames_sym, site_pose_sym
from robots.memo import per_model
from robots.native import compiled
from robots.stance import other_site, posture_problems
from robots.stance_spec import design_params, resolve_base, stance_spec
from robots.tree import RobotModel


@dataclass
class PostureSet:
    """Postures with their placements: q (N, nq) rad; placement of each posture; other-foot poses (P, 3)."""

    q: np.ndarray
    placement: np.ndarray
    poses: np.ndarray


def _rpy(roll, pitch, yaw):
    cr, sr, cp, sp, cy, sy = (
        ca.cos(roll),
        ca.sin(roll),
        ca.cos(pitch),
        ca.sin(pitch),
        ca.cos(yaw),
        ca.sin(yaw),
    )
    Rz = ca.vertcat(ca.horzcat(cy, -sy, 0), ca.horzcat(sy, cy, 0), ca.horzcat(0, 0, 1))
    Ry = ca.vertcat(ca.horzcat(cp, 0, sp), ca.horzcat(0, 1, 0), ca.horzcat(-sp, 0, cp))
    Rx = ca.vertcat(ca.horzcat(1, 0, 0), ca.horzcat(0, cr, -sr), ca.horzcat(0, sr, cr))
    return Rz @ Ry @ Rx


def ik_function(model: RobotModel, params: str | None = None, base: str | None = None) -> ca.Function:
    """IK residual r(q; target) and ∂r/∂q; target = [CoM xyz, torso roll pitch yaw, foot x y psi]."""
    return _ik_function(model, params or design_params(model), resolve_base(model, base))


@per_model
def _ik_function(model: RobotModel, params: str, base: str) -> ca.Function:
    q = ca.SX.sym("q", model.nq)
    t = ca.SX.sym("t", 9)
    com = com_position_sym(model, q, params, base)
    torso = [lk.name for lk in model.links].index(stance_spec(model).torso)
    R0 = link_frames_sym(model, q, params, base).R[torso]
    E = _rpy(t[3], t[4], t[5]).T @ R0
    rot = ca.vertcat(E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]) / 2
    Rf, pf = site_pose_sym(model, q, params, other_site(model, base), base)
    foot = ca.vertcat(
        pf[0] - t[6],
        pf[1] - t[7],
        pf[2],
        Rf[0, 2],
        Rf[1, 2],
        -ca.sin(t[8]) * Rf[0, 0] + ca.cos(t[8]) * Rf[1, 0],
    )
    r = ca.vertcat(com - t[:3], rot, foot)
    return ca.Function("ik", [q, t], [r, ca.jacobian(r, q)])


def solve_ik(
    model: RobotModel,
    target: np.ndarray,
    q0: np.ndarray,
    params: str | None = None,
    base: str | None = None,
    iters: int = 40,
) -> tuple[np.ndarray, np.ndarray]:
    """Batched damped Gauss–Newton with joint-limit clipping: targets (K, 9), starts (K, nq).

    Returns q (K, nq) and a success mask (residual below 1e-10). One mapped CasADi call per iteration.
    """
    target, q = np.atleast_2d(target), np.atleast_2d(np.array(q0, dtype=float))
    K, nq = q.shape
    fn = _mapped_ik(model, params or design_params(model), resolve_base(model, base), K)
    q = np.clip(q, model.lower, model.upper)

    tgt = np.ascontiguousarray(target, dtype=float)  # (K, 9) C order = 9×K column-major
    buf, run = fn.buffer()
    buf.set_arg(1, memoryview(tgt))

    def ev(qq):
        qc = np.ascontiguousarray(qq, dtype=float)
        r = np.zeros((K, nq))  # = nq×K column-major
        J = np.zeros((K, nq, nq))  # = nq×(nq·K) column-major: J[k, col, row]
        buf.set_arg(0, memoryview(qc))
        buf.set_res(0, memoryview(r))
        buf.set_res(1, memoryview(J))
        run()
        return r, J.transpose(0, 2, 1).copy()

    r, J = ev(q)
    lam = np.full(K, 1e-3)
    eye = np.eye(nq)
    for it in range(iters):
        nr = np.linalg.norm(r, axis=1)
        active = (nr > 1e-10) & (lam < 1e6) & ~((it >= 15) & (nr > 1e-2))
        if not active.any():
            break
        JT = J.transpose(0, 2, 1)
        A = JT @ J + lam[:, None, None] * eye
        step = np.linalg.solve(A, np.einsum("kij,kj->ki", JT, r)[..., None])[..., 0]
        qn = np.where(active[:, None], np.clip(q - step, model.lower, model.upper), q)
        rn, Jn = ev(qn)
        better = active & (np.linalg.norm(rn, axis=1) < nr)
        q = np.where(better[:, None], qn, q)
        r = np.where(better[:, None], rn, r)
        J = np.where(better[:, None, None], Jn, J)
        lam = np.where(better, np.maximum(lam / 3, 1e-9), np.where(active, lam * 10, lam))
    return q, np.linalg.norm(r, axis=1) < 1e-10


@per_model
def _mapped_ik(model: RobotModel, params: str, base: str, k: int) -> ca.Function:
    f = ik_function(model, params, base)
    q, t = ca.SX.sym("q", model.nq), ca.SX.sym("t", 9)
    r, J = f(q, t)
    dense = ca.Function("ik_dense", [q, t], [r, ca.densify(J)])
    return compiled(dense).map(k)


def _neutral(model: RobotModel, rng: np.random.Generator) -> np.ndarray:
    """An IK start posture: the stance's neutral posture with a random bend."""
    spec = stance_spec(model)
    return spec.neutral_posture(model, rng.uniform(*spec.neutral_bend))


def sample_placement(
    model: RobotModel,
    rng: np.random.Generator,
    centred: bool = False,
    base: str | None = None,
    feet_gap: float | None = None,
) -> np.ndarray:
    """Other-foot pose (x, y, psi) with the feet `feet_gap` (m; None: the description's [stance] feet_gap) apart,
    uniform in the stance's placement box (centred-CoM problem: y at least the stance's `centred_min_y`)."""
    spec = stance_spec(model)
    feet_gap = spec.feet_gap if feet_gap is None else feet_gap
    (x0, x1), (y0, y1), (a0, a1) = spec.placement_bounds
    rb, ro = foot_rects(model, base)
    base_foot = Polygon(rb)
    for _ in range(20_000):  # bounded: an unreachable gap must fail, not hang
        pose = np.array([rng.uniform(x0, x1), rng.uniform(y0, y1), rng.uniform(a0, a1)])
        if centred and spec.centred_min_y is not None and pose[1] < spec.centred_min_y:
            continue
        other = Polygon(placed_corners(ro, pose))
        if not base_foot.intersects(other) and base_foot.distance(other) >= feet_gap:
            return pose
    raise PoiseError(
        f"no foot placement with the feet {feet_gap * 1000:.0f} mm apart (--feet-gap or the description's [stance] "
        "feet_gap too large)"
    )


def sample_posture_set(
    model: RobotModel,
    n_postures: int,
    n_placements: int,
    rng: np.random.Generator,
    margin: float = 0.08,
    centred: bool = False,
    params: str | None = None,
    base: str | None = None,
    feet_gap: float | None = None,
    batch_size: int = 32,
    max_batches: int = 20,
) -> PostureSet:
    """Thesis §3.5.1: n_placements placements × (n_postures / n_placements) CoM/torso draws, IK, limit check;
    `feet_gap` (m) None: the description's [stance] feet_gap."""
    if n_placements < 1 or n_postures % n_placements:
        raise PoiseError(
            f"--postures ({n_postures}) must be a positive multiple of --placements ({n_placements})"
        )
    per = n_postures // n_placements
    params, base = params or design_params(model), resolve_base(model, base)
    spec = stance_spec(model)
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
            for _batch in range(max_batches):
                if centred:
                    xy = np.tile(centre, (batch_size, 1))
                else:
                    minx, miny, maxx, maxy = region.bounds
                    xy = np.empty((0, 2))
                    while len(xy) < batch_size:
                        cand = rng.uniform([minx, miny], [maxx, maxy], size=(4 * batch_size, 2))
                        inside = shapely.contains_xy(region, cand[:, 0], cand[:, 1])
                        xy = np.vstack([xy, cand[inside]])
                    xy = xy[:batch_size]
                z = rng.uniform(*spec.com_z, (batch_size, 1))
                ang = np.radians(rng.uniform(*spec.torso_angles_deg, (batch_size, 3)))
                targets = np.hstack([xy, z, ang, np.tile(pose, (batch_size, 1))])
                q0 = np.array([_neutral(model, rng) for _ in range(batch_size)])
                q, ok = solve_ik(model, targets, q0, params, base)
                for k in np.flatnonzero(ok):
                    if len(found) < per and not posture_problems(
                        model, q[k], params, base, margin=0.0 if centred else margin
                    ):
                        found.append(q[k])
                if not found or len(found) == per:
                    break  # thesis step 4: nothing reachable from this placement -> draw a new placement
            if len(found) == per:
                qs += found
                pl += [j] * per
                poses.append(pose)
                break
        else:
            raise PoiseError("could not sample a feasible placement in 10000 attempts")
    return PostureSet(np.array(qs), np.array(pl), np.array(poses))
