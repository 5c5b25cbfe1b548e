"""Forward kinematics of a `RobotModel`, numeric (batched numpy) or symbolic (CasADi), from one traversal.

All frames are expressed in a chosen base site's frame (e.g. the right sole for TUlip's right-foot base).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any

import casadi as ca
import numpy as np

from robots.tree import ParameterSet, RobotModel, Site, eval_form, rpy_matrix


class _NumpyOps:
    """Batched numpy primitives: rotations are (B, 3, 3), vectors (B, 3)."""

    def __init__(self, batch: int):
        self.batch = batch

    def eye(self):
        return np.broadcast_to(np.eye(3), (self.batch, 3, 3)).copy()

    def zeros(self):
        return np.zeros((self.batch, 3))

    def rot(self, axis, angle):
        k = np.asarray(axis, dtype=float)
        kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        c, s = np.cos(angle)[:, None, None], np.sin(angle)[:, None, None]
        return np.eye(3) + s * kx + (1 - c) * (kx @ kx)

    def mm(self, a, b):
        return a @ b

    def mv(self, a, v):
        v = np.asarray(v, dtype=float)
        return np.einsum("bij,j->bi", a, v) if v.ndim == 1 else np.einsum("bij,bj->bi", a, v)

    def tr(self, a):
        return np.swapaxes(a, -1, -2)

    def const(self, R):
        return np.asarray(R, dtype=float)

    def scale(self, v, x):
        return np.asarray(v, dtype=float)[None, :] * np.asarray(x)[:, None]


class _CasadiOps:
    """CasADi primitives on 3×3 / 3×1 symbolic matrices."""

    def eye(self):
        return ca.SX.eye(3)

    def zeros(self):
        return ca.SX.zeros(3, 1)

    def rot(self, axis, angle):
        k = np.asarray(axis, dtype=float)
        kx = ca.DM([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        return ca.DM.eye(3) + ca.sin(angle) * kx + (1 - ca.cos(angle)) * (kx @ kx)

    def mm(self, a, b):
        return a @ b

    def mv(self, a, v):
        return a @ ca.vec(ca.DM(v) if isinstance(v, np.ndarray | list | tuple) else v)

    def tr(self, a):
        return a.T

    def const(self, R):
        return ca.DM(np.asarray(R, dtype=float))

    def scale(self, v, x):
        return ca.DM(np.asarray(v, dtype=float)) * x


@dataclass
class Frames:
    """Rotation and origin of every link frame in the base frame; numpy (B, L, 3, 3)/(B, L, 3) or CasADi lists."""

    R: Any
    p: Any


def _offset(form3, lengths: dict[str, float]) -> np.ndarray:
    return np.array([eval_form(f, lengths) for f in form3])


def _joint_value(model: RobotModel, j: int, qcol):
    """Position of joint j from the coordinates (None for a fixed joint)."""
    cm = model.coordinate_map(j)
    if cm is None:
        return None
    k, mult, off = cm
    x = qcol(k)
    return x if (mult == 1.0 and off == 0.0) else mult * x + off


def _traverse(model: RobotModel, q, lengths: dict[str, float], ops, qcol):
    """Frames of all links in the root frame: R_child = R_parent·R_origin·Rot(axis, q), p likewise."""
    R = {model.root: ops.eye()}
    p = {model.root: ops.zeros()}
    for j in model.topo_joints():
        joint = model.joints[j]
        Rp, pp = R[joint.parent], p[joint.parent]
        pc = pp + ops.mv(Rp, _offset(joint.offset, lengths))
        Rc = Rp if not any(joint.rpy) else ops.mm(Rp, ops.const(rpy_matrix(joint.rpy)))
        if not joint.moves:  # a fixed joint's axis (often 0 0 0) is never used
            p[joint.child], R[joint.child] = pc, Rc
            continue
        x = _joint_value(model, j, qcol)
        axis = np.asarray(joint.axis, dtype=float) / np.linalg.norm(joint.axis)
        if joint.type in ("revolute", "continuous"):
            Rc = ops.mm(Rc, ops.rot(axis, x))
        elif joint.type == "prismatic":
            pc = pc + ops.mv(Rc, ops.scale(axis, x))
        p[joint.child], R[joint.child] = pc, Rc
    return R, p


def _site_in_root(model: RobotModel, site: Site, R, p, lengths, ops):
    Rl = R[site.link]
    ps = p[site.link] + ops.mv(Rl, _offset(site.offset, lengths))
    Rs = Rl if not any(site.rpy) else ops.mm(Rl, ops.const(rpy_matrix(site.rpy)))
    return Rs, ps


_RECENT: collections.OrderedDict = collections.OrderedDict()  # single postures' traversals, newest last
_RECENT_SIZE = 16


def _numeric_root_frames(model: RobotModel, q: np.ndarray, params: str | ParameterSet, base: str):
    """Batched root-frame traversal plus the base site's frame: (single, lengths, ops, R, p, RbT, pb).

    The last few single postures are remembered: a posture check asks for the same posture's frames
    several times (sites, CoM, feet corners). Callers must not modify the returned arrays."""
    q = model.check_q(q)
    if q.ndim == 1:
        key = (id(model), params if isinstance(params, str) else id(params), q.tobytes(), base)
        hit = _RECENT.get(key)
        if hit is not None and hit[0] is model and (isinstance(params, str) or hit[1] is params):
            _RECENT.move_to_end(key)
            return hit[2]
        out = _root_frames(model, q, params, base)
        _RECENT[key] = (model, params, out)  # the references keep the ids from being reused
        if len(_RECENT) > _RECENT_SIZE:
            _RECENT.popitem(last=False)
        return out
    return _root_frames(model, q, params, base)


def _root_frames(model: RobotModel, q: np.ndarray, params: str | ParameterSet, base: str):
    qb = q.reshape(-1, model.nq)
    lengths = model.parameter_set(params).lengths
    ops = _NumpyOps(qb.shape[0])
    R, p = _traverse(model, qb, lengths, ops, lambda j: qb[:, j])
    Rb, pb = _site_in_root(model, model.base_site(base), R, p, lengths, ops)
    return q.ndim == 1, lengths, ops, R, p, ops.tr(Rb), pb


def link_frames(model: RobotModel, q: np.ndarray, params: str | ParameterSet, base: str) -> Frames:
    """Numeric frames for a batch of postures q (B, nq) or one posture (nq,): R (B, L, 3, 3), p (B, L, 3)."""
    single, _, _, R, p, RbT, pb = _numeric_root_frames(model, q, params, base)
    names = [lk.name for lk in model.links]
    Rout = np.stack([RbT @ R[n] for n in names], axis=1)
    pout = np.stack([np.einsum("bij,bj->bi", RbT, p[n] - pb) for n in names], axis=1)
    if single:
        return Frames(Rout[0], pout[0])
    return Frames(Rout, pout)


def link_frames_sym(model: RobotModel, q: ca.SX, params: str | ParameterSet, base: str) -> Frames:
    """Symbolic frames for q (nq×1 SX): lists of 3×3 and 3×1 SX, link order."""
    lengths = model.parameter_set(params).lengths
    ops = _CasadiOps()
    R, p = _traverse(model, q, lengths, ops, lambda j: q[j])
    Rb, pb = _site_in_root(model, model.base_site(base), R, p, lengths, ops)
    names = [lk.name for lk in model.links]
    return Frames([Rb.T @ R[n] for n in names], [Rb.T @ (p[n] - pb) for n in names])


def site_pose(model: RobotModel, q: np.ndarray, params: str | ParameterSet, site: str, base: str):
    """Rotation (…, 3, 3) and position (…, 3) of a site in the base frame."""
    single, lengths, ops, R, p, RbT, pb = _numeric_root_frames(model, q, params, base)
    Rs, ps = _site_in_root(model, model.site(site), R, p, lengths, ops)
    Rrel = RbT @ Rs
    prel = np.einsum("bij,bj->bi", RbT, ps - pb)
    return (Rrel[0], prel[0]) if single else (Rrel, prel)


def site_pose_sym(model: RobotModel, q: ca.SX, params: str | ParameterSet, site: str, base: str):
    """Symbolic rotation and position of a site in the base frame."""
    lengths = model.parameter_set(params).lengths
    ops = _CasadiOps()
    R, p = _traverse(model, q, lengths, ops, lambda j: q[j])
    Rb, pb = _site_in_root(model, model.base_site(base), R, p, lengths, ops)
    Rs, ps = _site_in_root(model, model.site(site), R, p, lengths, ops)
    return Rb.T @ Rs, Rb.T @ (ps - pb)


def com_position(
    model: RobotModel, q: np.ndarray, params: str | ParameterSet, base: str = "right"
) -> np.ndarray:
    """Whole-body centre of mass in the base frame, computed directly from link frames (…, 3)."""
    ps = model.parameter_set(params)
    fr = link_frames(model, q, ps, base)
    total = np.zeros(fr.p.shape[:-2] + (3,))
    for i, link in enumerate(model.links):
        m = ps.mass[link.name]
        c = np.asarray(ps.com[link.name]) * np.asarray(link.com_sign)
        total = total + m * (fr.p[..., i, :] + fr.R[..., i, :, :] @ c)
    return total / ps.total_mass


def com_position_sym(model: RobotModel, q: ca.SX, params: str | ParameterSet, base: str = "right") -> ca.SX:
    """Symbolic CoM in the base frame (3×1)."""
    ps = model.parameter_set(params)
    fr = link_frames_sym(model, q, ps, base)
    total = ca.SX.zeros(3, 1)
    for i, link in enumerate(model.links):
        c = np.asarray(ps.com[link.name]) * np.asarray(link.com_sign)
        total += ps.mass[link.name] * (fr.p[i] + fr.R[i] @ ca.DM(c))
    return total / ps.total_mass
