"""Rigid-body dynamics of a `RobotModel`: inverse dynamics (RNEA) and its linear regressors.

One traversal, numeric (batched numpy) or symbolic (CasADi SX), in the **base frame** with the base held fixed:
the tree is walked outward from the base link (joints on the way to the URDF root are crossed backwards), every
body's spatial velocity and acceleration (gravity as a base acceleration) are propagated, and every body's
wrench is linear in its 10 standard parameters. Summing body wrenches gives

- joint torques (joint-torque regressor Y(q, q̇, q̈)),
- the wrench the ground exerts on the base (base-wrench regressor of a standing robot: Fz, Mx, My, the ZMP),
- the wrench transmitted across any joint or frame (sub-tree regressor seen at a sensor, e.g. an F/T sensor
  on a fixed joint; the links on both sides stay separate bodies).

Conventions (as Pinocchio): standard parameters per link [m, m·cx, m·cy, m·cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]
with the inertia about the link origin in the link frame; wrenches as (fx, fy, fz, nx, ny, nz); twists and
Jacobian rows as (vx, vy, vz, ωx, ωy, ωz).
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from formats.errors import DataError
from formats.parameter_set import ParameterSet
from formats.units import GRAVITY as G
from robots.kinematics import link_frames, link_frames_sym, site_pose, site_pose_sym
from robots.tree import RobotModel

GRAVITY = (0.0, 0.0, -G)
STANDARD_NAMES = ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
STANDARD_UNITS = dict(zip(STANDARD_NAMES, ("kg",) + ("kg·m",) * 3 + ("kg·m²",) * 6, strict=True))
_SYM = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))  # (row, col) of each inertia parameter


@dataclass(frozen=True)
class Edge:
    """A joint crossed outward from the base: `sign` −1 when crossed from its child to its parent."""

    joint: int
    src: int  # link index on the base side
    dst: int  # link index on the far side
    sign: float


@dataclass(frozen=True)
class Rooting:
    """The tree seen from a base link: edges in traversal order and, per edge, the links beyond it."""

    base_link: int
    edges: tuple[Edge, ...]
    beyond: tuple[tuple[int, ...], ...]


def rooting(model: RobotModel, base_link: str) -> Rooting:
    """Re-root the kinematic tree at `base_link` (breadth first)."""
    li = model.link_index
    adj: dict[int, list[tuple[int, int, float]]] = {i: [] for i in range(len(model.links))}
    for j, jt in enumerate(model.joints):
        p, c = li(jt.parent), li(jt.child)
        adj[p].append((j, c, 1.0))
        adj[c].append((j, p, -1.0))
    start = li(base_link)
    edges: list[Edge] = []
    seen = {start}
    frontier = [start]
    while frontier:
        nxt = []
        for a in frontier:
            for j, b, s in adj[a]:
                if b not in seen:
                    seen.add(b)
                    edges.append(Edge(j, a, b, s))
                    nxt.append(b)
        frontier = nxt
    children: dict[int, list[int]] = {}
    for e in edges:
        children.setdefault(e.src, []).append(e.dst)
    beyond = []
    for e in edges:
        out, stack = [], [e.dst]
        while stack:
            n = stack.pop()
            out.append(n)
            stack += children.get(n, [])
        beyond.append(tuple(sorted(out)))
    return Rooting(start, tuple(edges), tuple(beyond))


def standard_names(model: RobotModel) -> list[str]:
    """Names of the standard dynamic parameters, e.g. 'Izz@torso'."""
    return [f"{s}@{lk.name}" for lk in model.links for s in STANDARD_NAMES]


def link_standard(mass: float, com, inertia) -> np.ndarray:
    """[m, m·c, I_origin (6)] of one link from its mass, CoM (link frame) and inertia about the CoM."""
    c = np.asarray(com, dtype=float)
    inertia = tuple(inertia) if inertia is not None else (0.0,) * 6
    if len(inertia) == 3:  # principal moments
        ixx, iyy, izz = inertia
        ixy = ixz = iyz = 0.0
    elif len(inertia) == 6:
        ixx, ixy, ixz, iyy, iyz, izz = inertia
    else:
        raise DataError("an inertia needs 3 (principal) or 6 (ixx, ixy, ixz, iyy, iyz, izz) entries")
    Ic = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=float)
    Io = Ic + mass * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([mass, *(mass * c), *(Io[r, k] for r, k in _SYM)])


def standard_parameters(model: RobotModel, params: str | ParameterSet) -> np.ndarray:
    """φ (10 per link) of a parameter set; CoMs are converted from the stored convention to the link frame."""
    ps = model.parameter_set(params)
    out = []
    for lk in model.links:
        com = np.asarray(ps.com[lk.name], dtype=float) * np.asarray(lk.com_sign, dtype=float)
        out.append(link_standard(ps.mass[lk.name], com, ps.inertia.get(lk.name)))
    return np.concatenate(out)


class _Np:
    """Batched vectors (B, 3) and rotations (B, 3, 3)."""

    @staticmethod
    def cross(a, b):
        return np.cross(a, b)

    @staticmethod
    def mv(R, v):
        return np.einsum("bij,bj->bi", R, v)

    @staticmethod
    def mtv(R, v):
        return np.einsum("bji,bj->bi", R, v)

    @staticmethod
    def dot(a, b):
        return np.einsum("bi,bi->b", a, b)

    @staticmethod
    def col(v, x):
        return v * x[:, None]

    @staticmethod
    def zeros(batch):
        return np.zeros((batch, 3))

    @staticmethod
    def const(v, batch):
        return np.broadcast_to(np.asarray(v, dtype=float), (batch, 3)).copy()

    @staticmethod
    def stack_wrench(f, n):
        return np.concatenate([f, n], axis=-1)  # (B, 6)


class _Sx:
    """CasADi 3×1 vectors and 3×3 rotations."""

    @staticmethod
    def cross(a, b):
        return ca.cross(a, b)

    @staticmethod
    def mv(R, v):
        return R @ v

    @staticmethod
    def mtv(R, v):
        return R.T @ v

    @staticmethod
    def dot(a, b):
        return ca.dot(a, b)

    @staticmethod
    def col(v, x):
        return v * x

    @staticmethod
    def zeros(batch):
        return ca.SX.zeros(3, 1)

    @staticmethod
    def const(v, batch):
        return ca.DM(np.asarray(v, dtype=float))

    @staticmethod
    def stack_wrench(f, n):
        return ca.vertcat(f, n)


def _body_regressor(ops, R, p, w, v, dw, dv, batch):
    """World wrench (about the base origin) of one body per unit standard parameter: 10 (B, 6) columns.

    (w, v) is the body's spatial velocity in the base frame (v: velocity of the body point at the base origin),
    (dw, dv) its spatial acceleration including gravity; R, p its pose.
    """
    wb = ops.mtv(R, w)
    vb = ops.mtv(R, v + ops.cross(w, p))
    dwb = ops.mtv(R, dw)
    dvb = ops.mtv(R, dv + ops.cross(dw, p))
    cols_b = []
    zero = vb * 0
    # m: f = dv_b + w × v_b, n = 0
    cols_b.append((dvb + ops.cross(wb, vb), zero))
    for k in range(3):  # m·c_k
        e = ops.const(np.eye(3)[k], batch)
        f = ops.cross(dwb, e) + ops.cross(wb, ops.cross(wb, e))
        n = ops.cross(e, dvb) + ops.cross(wb, ops.cross(e, vb)) + ops.cross(vb, ops.cross(wb, e))
        cols_b.append((f, n))
    for r, c in _SYM:  # inertia entries: n = I dw + w × (I w)
        n = _sym_apply(ops, r, c, dwb) + ops.cross(wb, _sym_apply(ops, r, c, wb))
        cols_b.append((zero, n))
    out = []
    for f, n in cols_b:
        fw = ops.mv(R, f)
        nw = ops.mv(R, n) + ops.cross(p, fw)
        out.append((fw, nw))
    return out


def _sym_apply(ops, r: int, c: int, x):
    """E_rc · x for the symmetric unit matrix E_rc (ones at (r, c) and (c, r))."""
    if isinstance(x, np.ndarray):
        y = np.zeros_like(x)
        y[:, r] += x[:, c]
        if r != c:
            y[:, c] += x[:, r]
        return y
    comps = [ca.SX(0), ca.SX(0), ca.SX(0)]
    comps[r] = comps[r] + x[c]
    if r != c:
        comps[c] = comps[c] + x[r]
    return ca.vertcat(*comps)


@dataclass
class _Pass:
    """Per-link world quantities and per-edge joint twists of one evaluation."""

    wrench_cols: list  # per link: 10 (f, n) pairs
    twists: list  # per edge: (axis-part a, moment-part p×a) or None for fixed joints
    rooting: Rooting
    motion: list  # per link: (w, v, dw, dv) spatial velocity and acceleration in the base frame


def _forward(model, R, p, qd, qdd, root: Rooting, ops, gravity, batch):
    """Propagate twists/accelerations outward from the base and form every body's wrench regressor."""
    L = len(model.links)
    w = [None] * L
    v = [None] * L
    dw = [None] * L
    dv = [None] * L
    b = root.base_link
    w[b], v[b], dw[b] = ops.zeros(batch), ops.zeros(batch), ops.zeros(batch)
    dv[b] = ops.const(-np.asarray(gravity, dtype=float), batch)
    twists = []
    for e in root.edges:
        jt = model.joints[e.joint]
        cm = model.coordinate_map(e.joint)
        ws, vs, dws, dvs = w[e.src], v[e.src], dw[e.src], dv[e.src]
        if cm is None:
            twists.append(None)
            w[e.dst], v[e.dst], dw[e.dst], dv[e.dst] = ws, vs, dws, dvs
            continue
        k, mult, _ = cm
        child = model.link_index(jt.child)
        axis = np.asarray(jt.axis, dtype=float) / np.linalg.norm(jt.axis)
        a = ops.mv(R[child], ops.const(axis, batch))
        if jt.type == "prismatic":
            sw, sv = a * 0, a
        else:
            sw, sv = a, ops.cross(p[child], a)
        twists.append((sw, sv))
        s = e.sign * mult
        xd = qd_col(qd, k) * s
        xdd = qdd_col(qdd, k) * s
        w[e.dst] = ws + ops.col(sw, xd)
        v[e.dst] = vs + ops.col(sv, xd)
        # Ṡ = V_src × S (the joint line moves with the base-side body)
        dsw = ops.cross(ws, sw)
        dsv = ops.cross(ws, sv) + ops.cross(vs, sw)
        dw[e.dst] = dws + ops.col(sw, xdd) + ops.col(dsw, xd)
        dv[e.dst] = dvs + ops.col(sv, xdd) + ops.col(dsv, xd)
    cols = [_body_regressor(ops, R[i], p[i], w[i], v[i], dw[i], dv[i], batch) for i in range(L)]
    return _Pass(cols, twists, root, list(zip(w, v, dw, dv, strict=True)))


def qd_col(qd, k):
    return qd[:, k] if isinstance(qd, np.ndarray) else qd[k]


qdd_col = qd_col


def _frames_numeric(model, q, params, base):
    fr = link_frames(model, q, params, base)
    L = len(model.links)
    return [fr.R[:, i] for i in range(L)], [fr.p[:, i] for i in range(L)]


def _base_link(model: RobotModel, base: str) -> str:
    return model.base_site(base).link


def _prepare(model, q, qd, qdd):
    q = model.check_q(q)
    single = q.ndim == 1
    qb = np.atleast_2d(q)
    qdb = np.broadcast_to(np.atleast_2d(np.asarray(qd, dtype=float)), qb.shape)
    qddb = np.broadcast_to(np.atleast_2d(np.asarray(qdd, dtype=float)), qb.shape)
    if not (np.all(np.isfinite(qdb)) and np.all(np.isfinite(qddb))):
        raise DataError("joint velocities or accelerations contain NaN or infinite values")
    return single, qb, qdb, qddb


def _numeric_pass(model, q, qd, qdd, params, base, gravity):
    single, qb, qdb, qddb = _prepare(model, q, qd, qdd)
    R, p = _frames_numeric(model, qb, params, base)
    root = rooting(model, _base_link(model, base))
    return single, _forward(model, R, p, qdb, qddb, root, _Np, gravity, qb.shape[0])


def _torque_rows(model, ps: _Pass, ops, batch, numeric: bool):
    """Joint-torque regressor rows: for each coordinate, Σ over its joints of sign·Sᵀ·(wrenches beyond)."""
    nstd = 10 * len(model.links)
    if numeric:
        Y = np.zeros((batch, model.nq, nstd))
    else:
        Y = [[ca.SX(0)] * nstd for _ in range(model.nq)]
    for e, tw, beyond in zip(ps.rooting.edges, ps.twists, ps.rooting.beyond, strict=True):
        if tw is None:
            continue
        k, mult, _ = model.coordinate_map(e.joint)
        sw, sv = tw
        s = e.sign * mult
        for i in beyond:
            for c, (f, n) in enumerate(ps.wrench_cols[i]):
                val = (ops.dot(sw, n) + ops.dot(sv, f)) * s
                if numeric:
                    Y[:, k, 10 * i + c] += val
                else:
                    Y[k][10 * i + c] = Y[k][10 * i + c] + val
    return Y if numeric else ca.vertcat(*[ca.horzcat(*row) for row in Y])


def torque_regressor(
    model: RobotModel,
    q,
    qd,
    qdd,
    base: str | None = None,
    params: str | ParameterSet | None = None,
    gravity=GRAVITY,
) -> np.ndarray:
    """Y(q, q̇, q̈) with τ = Y φ: (B, nq, 10L), or (nq, 10L) for one state. Base defaults to the root link."""
    base = base or model.root
    params = params if params is not None else next(iter(model.params.values()))
    single, ps = _numeric_pass(model, q, qd, qdd, params, base, gravity)
    Y = _torque_rows(model, ps, _Np, np.atleast_2d(q).shape[0], True)
    return Y[0] if single else Y


def rnea(model: RobotModel, q, qd, qdd, params: str | ParameterSet, base: str | None = None, gravity=GRAVITY):
    """Joint torques/forces of inverse dynamics with the base fixed: (B, nq) or (nq,)."""
    phi = standard_parameters(model, params)
    return torque_regressor(model, q, qd, qdd, base, params, gravity) @ phi


def _sum_wrench(ps: _Pass, links, numeric: bool, batch):
    """(6, 10L) regressor of Σ over `links` of the body wrenches about the base origin, [f; n] rows."""
    L = len(ps.wrench_cols)
    if numeric:
        W = np.zeros((batch, 6, 10 * L))
        for i in links:
            for c, (f, n) in enumerate(ps.wrench_cols[i]):
                W[:, :3, 10 * i + c] = f
                W[:, 3:, 10 * i + c] = n
        return W
    cols = []
    zero = ca.SX.zeros(6, 1)
    linkset = set(links)
    for i in range(L):
        for c in range(10):
            cols.append(ca.vertcat(*ps.wrench_cols[i][c]) if i in linkset else zero)
    return ca.horzcat(*cols)


def base_wrench_regressor(
    model: RobotModel, q, qd, qdd, base: str, params: str | ParameterSet | None = None, gravity=GRAVITY
) -> np.ndarray:
    """Regressor of the wrench the environment exerts on the robot, at the base frame: (B, 6, 10L).

    For a robot standing on its base foot (the base frame on the ground), rows (fx, fy, fz, nx, ny, nz): Fz and
    the moments Mx = nx, My = ny about the base origin — what force plates under the feet measure in sum,
    whatever the contact distribution (double support included).
    """
    params = params if params is not None else next(iter(model.params.values()))
    single, ps = _numeric_pass(model, q, qd, qdd, params, base, gravity)
    W = _sum_wrench(ps, range(len(model.links)), True, np.atleast_2d(q).shape[0])
    return W[0] if single else W


def _distal(model: RobotModel, frame: str) -> tuple[list[int], str, float]:
    """Links beyond a sensor frame (URDF child side), the frame's site name, and how to find them."""
    for jt in model.joints:
        if jt.name == frame:
            return _subtree(model, jt.child), jt.child, 1.0
    site = model.site(frame)
    return _subtree(model, site.link), frame, 1.0


def _subtree(model: RobotModel, link: str) -> list[int]:
    out, stack = [], [link]
    while stack:
        n = stack.pop()
        out.append(model.link_index(n))
        stack += [jt.child for jt in model.joints if jt.parent == n]
    return sorted(out)


def _at_frame(ops, W_f, W_n, R, p):
    """Wrench about the base origin → the same wrench in frame (R, p): f' = Rᵀf, n' = Rᵀ(n − p × f)."""
    return ops.mtv(R, W_f), ops.mtv(R, W_n - ops.cross(p, W_f))


def subtree_wrench_regressor(
    model: RobotModel,
    q,
    qd,
    qdd,
    frame: str,
    base: str | None = None,
    params: str | ParameterSet | None = None,
    gravity=GRAVITY,
) -> np.ndarray:
    """Regressor (B, 6, 10L) of the wrench the proximal side exerts on the links beyond `frame`, in `frame`.

    `frame` is a joint (e.g. a fixed F/T-sensor joint: the links beyond are its child's sub-tree), a site or a
    link; the wrench is expressed in that frame about its origin, (fx, fy, fz, nx, ny, nz). The base (default:
    the root link) must lie on the proximal side.
    """
    base = base or model.root
    params = params if params is not None else next(iter(model.params.values()))
    links, site, _ = _distal(model, frame)
    if model.link_index(_base_link(model, base)) in links:
        raise DataError(f"the base {base!r} lies beyond {frame!r}: choose a base on the proximal side")
    single, ps = _numeric_pass(model, q, qd, qdd, params, base, gravity)
    B = np.atleast_2d(q).shape[0]
    W = _sum_wrench(ps, links, True, B)
    Rs, pos = site_pose(model, np.atleast_2d(q), params, site, base)
    out = np.empty_like(W)
    for c in range(W.shape[2]):
        f, n = _at_frame(_Np, W[:, :3, c], W[:, 3:, c], Rs, pos)
        out[:, :3, c], out[:, 3:, c] = f, n
    return out[0] if single else out


def frame_jacobian(
    model: RobotModel, q, frame: str, base: str | None = None, params: str | ParameterSet | None = None
) -> np.ndarray:
    """Geometric Jacobian of a frame (site, link or joint child) in the base frame: (B, 6, nq), rows [v; ω].

    v is the velocity of the frame origin, both expressed in the base frame (Pinocchio's LOCAL_WORLD_ALIGNED).
    """
    base = base or model.root
    params = params if params is not None else next(iter(model.params.values()))
    q = model.check_q(q)
    single = q.ndim == 1
    qb = np.atleast_2d(q)
    site = frame
    for jt in model.joints:
        if jt.name == frame:
            site = jt.child
    R, p = _frames_numeric(model, qb, params, base)
    _, pf = site_pose(model, qb, params, site, base)
    root = rooting(model, _base_link(model, base))
    target = model.link_index(model.site(site).link)
    J = np.zeros((qb.shape[0], 6, model.nq))
    for e, beyond in zip(root.edges, root.beyond, strict=True):
        cm = model.coordinate_map(e.joint)
        if cm is None or target not in beyond:
            continue
        k, mult, _ = cm
        jt = model.joints[e.joint]
        child = model.link_index(jt.child)
        axis = np.asarray(jt.axis, dtype=float) / np.linalg.norm(jt.axis)
        a = np.einsum("bij,j->bi", R[child], axis)
        s = e.sign * mult
        if jt.type == "prismatic":
            J[:, :3, k] += s * a
        else:
            J[:, :3, k] += s * np.cross(a, pf - p[child])
            J[:, 3:, k] += s * a
    return J[0] if single else J


def frame_acceleration(
    model: RobotModel,
    q,
    qd,
    qdd,
    frame: str,
    base: str | None = None,
    params: str | ParameterSet | None = None,
) -> np.ndarray:
    """Classical acceleration of a frame in the base frame, no gravity: (B, 6) [a of the origin; ω̇].

    With q̈ = 0 this is the bias term J̇q̇ of the frame's Jacobian (constraint of a foot held flat).
    """
    base = base or model.root
    params = params if params is not None else next(iter(model.params.values()))
    single, ps = _numeric_pass(model, q, qd, qdd, params, base, (0.0, 0.0, 0.0))
    site = next((jt.child for jt in model.joints if jt.name == frame), frame)
    w, v, dw, dv = ps.motion[model.link_index(model.site(site).link)]
    _, pf = site_pose(model, np.atleast_2d(q), params, site, base)
    vel = v + np.cross(w, pf)
    acc = dv + np.cross(dw, pf) + np.cross(w, vel)
    out = np.concatenate([acc, dw], axis=1)
    return out[0] if single else out


# ----------------------------------------------------------------------------------------------- symbolic


def _symbolic_pass(model, params, base, gravity):
    q = ca.SX.sym("q", model.nq)
    qd = ca.SX.sym("qd", model.nq)
    qdd = ca.SX.sym("qdd", model.nq)
    fr = link_frames_sym(model, q, params, base)
    root = rooting(model, _base_link(model, base))
    return q, qd, qdd, _forward(model, fr.R, fr.p, qd, qdd, root, _Sx, gravity, None)


def torque_regressor_function(
    model: RobotModel, base: str | None = None, params: str | ParameterSet | None = None, gravity=GRAVITY
) -> ca.Function:
    """CasADi Function (q, qd, qdd) → Y (nq × 10L), SX, ready for `Function.map` over samples."""
    base = base or model.root
    params = params if params is not None else next(iter(model.params.values()))
    q, qd, qdd, ps = _symbolic_pass(model, params, base, gravity)
    Y = _torque_rows(model, ps, _Sx, None, False)
    return ca.Function("torque_regressor", [q, qd, qdd], [Y], ["q", "qd", "qdd"], ["Y"])


def zmp_of(w: np.ndarray) -> np.ndarray:
    """The ZMP (−My/Fz, Mx/Fz) of base wrenches w (K, 6: fx, fy, fz, mx, my, mz), base frame (m): where the
    ground's vertical force acts for a robot standing on its base frame, whatever the contacts."""
    return np.stack([-w[:, 4] / w[:, 2], w[:, 3] / w[:, 2]], axis=1)


def base_wrench_regressor_function(
    model: RobotModel, base: str, params: str | ParameterSet | None = None, gravity=GRAVITY
) -> ca.Function:
    """CasADi Function (q, qd, qdd) → W (6 × 10L): the base-wrench regressor, rows (f, n)."""
    params = params if params is not None else next(iter(model.params.values()))
    q, qd, qdd, ps = _symbolic_pass(model, params, base, gravity)
    W = _sum_wrench(ps, range(len(model.links)), False, None)
    return ca.Function("base_wrench_regressor", [q, qd, qdd], [W], ["q", "qd", "qdd"], ["W"])


def subtree_wrench_regressor_function(
    model: RobotModel,
    frame: str,
    base: str | None = None,
    params: str | ParameterSet | None = None,
    gravity=GRAVITY,
) -> ca.Function:
    """CasADi Function (q, qd, qdd) → W (6 × 10L): the sub-tree wrench regressor at `frame`."""
    base = base or model.root
    params = params if params is not None else next(iter(model.params.values()))
    links, site, _ = _distal(model, frame)
    q, qd, qdd, ps = _symbolic_pass(model, params, base, gravity)
    W = _sum_wrench(ps, links, False, None)
    Rs, pos = site_pose_sym(model, q, params, site, base)
    cols = []
    for c in range(W.shape[1]):
        f, n = _at_frame(_Sx, W[:3, c], W[3:, c], Rs, pos)
        cols.append(ca.vertcat(f, n))
    return ca.Function(
        "subtree_wrench_regressor", [q, qd, qdd], [ca.horzcat(*cols)], ["q", "qd", "qdd"], ["W"]
    )
