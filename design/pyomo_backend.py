"""The same posture-design NLP written in Pyomo, solved by IPOPT through cyipopt (PyNumero grey box).

The kinematics (foot-flat/at-placement residuals, CoP, uncertainty quadratic form) are Pyomo algebra
translated from the CasADi expressions of problems.py (pyomo_algebra.py); only the κ surrogate, which needs
an SVD, is an ExternalGreyBoxModel (objective only, no extra variables or constraints). So the variables,
constraints, bounds and IPOPT options are those of the CasADi NLP, and the continuation and structure
re-detection are the same code (problems.continuation).
"""

from __future__ import annotations

import os
import sys

import casadi as ca
import numpy as np
from scipy.sparse import coo_matrix

from design import fpenv
from design import geometry as geo
from design.objective import Cached
from design.problems import (
    IPOPT_OPTIONS,
    Settings,
    SolveResult,
    _pack,
    _unpack,
    continuation,
    placement_bounds,
    posture_function,
)
from design.pyomo_algebra import sx_to_pyomo
from design.sampler import PostureSet
from formats.errors import PoiseError
from robots.memo import per_model
from robots.tree import RobotModel


def asl_library() -> str | None:
    """The PyNumero ASL library built by `make pynumero` (in the venv), if present."""
    path = os.path.join(sys.prefix, "pyomo", "lib", "libpynumero_ASL.so")
    return path if os.path.exists(path) else None


def ensure_available() -> None:
    """Point PyNumero at the venv's ASL library; PoiseError with the fix if cyipopt/ASL are missing."""
    from pyomo.contrib.pynumero.asl import AmplInterface

    lib = asl_library()
    current = AmplInterface.libname
    if lib is not None and not (isinstance(current, str) and os.path.exists(current)):
        AmplInterface.libname = lib
    if not AmplInterface.available():
        raise PoiseError("the Pyomo backend needs PyNumero's ASL library: run `make pynumero`")
    import pyomo.environ as pyo

    if not pyo.SolverFactory("cyipopt").available(exception_flag=False):
        raise PoiseError("the Pyomo backend needs cyipopt (pip install cyipopt-wheels)")


@per_model
def _algebra(model: RobotModel, params: str, base: str, spec) -> ca.Function:
    """Per posture, the expressions that become Pyomo algebra: equalities (6), CoP (2), G (3)."""
    q = ca.SX.sym("q", model.nq)
    pose = ca.SX.sym("pose", 3)
    eq, cop, G = posture_function(model, params, base, spec)(q, pose)
    return ca.Function("algebra", [q, pose], [eq, cop, G])


def _make_greybox(model: RobotModel, s: Settings, N: int):
    """Objective-only grey box: the κ surrogate f_p of the design matrix, inputs = all joint angles, with
    the exact gradient and Hessian of design/objective.py (the same numbers the CasADi backend uses)."""
    from pyomo.contrib.pynumero.interfaces.external_grey_box import ExternalGreyBoxModel

    nq = model.nq
    rows, cols = np.tril_indices(N * nq)

    class KappaBox(ExternalGreyBoxModel):
        """Inputs q (N·nq); no equalities, no outputs; objective f_p(H(q))."""

        def __init__(self):
            self.x = np.zeros(N * nq)
            self.p = 4.0
            self.cache = Cached(model, s.base, N)

        def input_names(self):
            return [f"q{i}_{k}" for i in range(N) for k in range(nq)]

        def output_names(self):
            return []

        def equality_constraint_names(self):
            return []

        def set_input_values(self, input_values):
            self.x = np.asarray(input_values, dtype=float).copy()

        def evaluate_equality_constraints(self):
            return np.zeros(0)

        def evaluate_jacobian_equality_constraints(self):
            return coo_matrix((0, N * nq))

        def evaluate_outputs(self):
            return np.zeros(0)

        def evaluate_jacobian_outputs(self):
            return coo_matrix((0, N * nq))

        def has_objective(self):
            return True

        def evaluate_objective(self):
            return self.cache(self.x, self.p).f

        def evaluate_grad_objective(self, out=None):
            g = self.cache(self.x, self.p).grad
            if out is not None:
                np.copyto(out, g)
                return out
            return g.copy()

        def evaluate_hessian_objective(self):
            H = self.cache(self.x, self.p).hess
            return coo_matrix((H[rows, cols], (rows, cols)), shape=H.shape)

    return KappaBox()


def build_model(model: RobotModel, s: Settings, start: PostureSet):
    """The structure-independent part: variables with bounds, objective grey box, kinematic algebra,
    foot equalities and the coupled limit. Returns the Pyomo model; `set_structures` adds the rest."""
    import pyomo.environ as pyo
    from pyomo.contrib.pynumero.interfaces.external_grey_box import ExternalGreyBoxBlock

    s = s.resolved(model)
    N, P, nq = len(start.placement), len(start.poses), model.nq
    m = pyo.ConcreteModel()
    m.box = ExternalGreyBoxBlock(external_model=_make_greybox(model, s, N))
    m.q = [[m.box.inputs[f"q{i}_{k}"] for k in range(nq)] for i in range(N)]
    for i in range(N):
        for k in range(nq):
            m.q[i][k].setlb(float(model.lower[k]))
            m.q[i][k].setub(float(model.upper[k]))
    bounds = placement_bounds(model, s)
    m.pose = pyo.Var(range(P), range(3), bounds=lambda _m, j, k: tuple(bounds[k]))
    m.phi = pyo.Var(range(P))
    m.off = pyo.Var(range(P))
    m.e = pyo.Expression(pyo.Any)  # shared subexpressions of the kinematics

    def named(expr):
        k = len(m.e)
        m.e[k] = expr
        return m.e[k]

    fn = _algebra(model, s.params, s.base, s.cop_spec(model))
    m.cop, m.G = [], []
    m.kin = pyo.ConstraintList()
    eqs = []
    for i in range(N):
        j = int(start.placement[i])
        eq, cop, G = sx_to_pyomo(fn, [m.q[i], [m.pose[j, k] for k in range(3)]], named)
        eqs.append(eq)
        m.cop.append(cop)
        m.G.append(G)
    for eq in eqs:  # same order as the CasADi NLP: all equalities, then the coupled limit
        for e in eq:
            m.kin.add(e == 0)
    for i in range(N):
        for k in range(len(model.coupled_b)):
            expr = sum(float(model.coupled_A[k, t]) * m.q[i][t] for t in range(nq) if model.coupled_A[k, t])
            m.kin.add(expr <= float(model.coupled_b[k]))
    return m


def set_structures(m, model: RobotModel, s: Settings, placement: np.ndarray, structs) -> None:
    """(Re)build the structure-dependent constraints: separating lines, convexity, bounding box, margins."""
    import pyomo.environ as pyo

    s = s.resolved(model)
    if hasattr(m, "geo"):
        m.del_component(m.geo)
    m.geo = pyo.ConstraintList()

    def add(expr):
        if not isinstance(expr, bool | np.bool_):  # relations between constant corners are left out
            m.geo.add(expr)

    rb, ro = geo.foot_rects(model, s.base)
    d = s.required_margin + (1e-7 if s.required_margin > 0 else 0.0)
    spec = s.cop_spec(model)
    for j, st in enumerate(structs):
        x, y, psi = m.pose[j, 0], m.pose[j, 1], m.pose[j, 2]
        c, sn = pyo.cos(psi), pyo.sin(psi)
        verts = [(float(a), float(b)) for a, b in rb] + [
            (x + c * a - sn * b, y + sn * a + c * b) for a, b in ro
        ]
        n = (pyo.cos(m.phi[j]), pyo.sin(m.phi[j]))
        for v in verts[:4]:
            m.geo.add(n[0] * v[0] + n[1] * v[1] - m.off[j] <= -s.feet_gap / 2)
        for v in verts[4:]:
            m.geo.add(n[0] * v[0] + n[1] * v[1] - m.off[j] >= s.feet_gap / 2)
        hull = st.hull
        for k in range(len(hull)):
            a, b, cc = verts[hull[k - 1]], verts[hull[k]], verts[hull[(k + 1) % len(hull)]]
            add((b[0] - a[0]) * (cc[1] - b[1]) - (b[1] - a[1]) * (cc[0] - b[0]) >= 0)
        normals = []
        for k in range(len(hull)):
            a, b = verts[hull[k]], verts[hull[(k + 1) % len(hull)]]
            ex, ey = b[0] - a[0], b[1] - a[1]
            length = pyo.sqrt(ex**2 + ey**2)
            normals.append((-ey / length, ex / length))
        idx = np.flatnonzero(placement == j)
        if s.centred:
            ix0, ix1, iy0, iy1 = st.bbox
            for kk, v in enumerate(verts):
                for i_ext, ax, sign in ((ix0, 0, 1), (ix1, 0, -1), (iy0, 1, 1), (iy1, 1, -1)):
                    if kk != i_ext:
                        add(sign * (v[ax] - verts[i_ext][ax]) >= 0)
            for i in idx:
                m.geo.add(m.cop[i][0] - (verts[ix0][0] + verts[ix1][0]) / 2 == 0)
                m.geo.add(m.cop[i][1] - (verts[iy0][1] + verts[iy1][1]) / 2 == 0)
        if s.load_share > 0:  # lever rule along the soles' centres (as the CasADi NLP)
            cb = rb.mean(axis=0)
            co = [sum(v[t] for v in verts[4:]) / 4 for t in (0, 1)]
            ax, ay = co[0] - cb[0], co[1] - cb[1]
            for i in idx:
                share = ((m.cop[i][0] - cb[0]) * ax + (m.cop[i][1] - cb[1]) * ay) / (ax**2 + ay**2)
                m.geo.add(share >= s.load_share)
                m.geo.add(share <= 1.0 - s.load_share)
        for i in idx:
            cop, G = m.cop[i], m.G[i]
            for k, ne in enumerate(normals):
                a = verts[hull[k]]
                mg = ne[0] * (cop[0] - a[0]) + ne[1] * (cop[1] - a[1])
                if spec is not None and spec.scale > 0:
                    quad = ne[0] ** 2 * G[0] + 2 * ne[0] * ne[1] * G[1] + ne[1] ** 2 * G[2]
                    mg = mg - spec.scale * pyo.sqrt(quad + 1e-12)
                m.geo.add(mg >= d)


def _violation(m) -> float:
    """Largest violation of the model's constraints at the current values (as the CasADi path measures)."""
    import pyomo.environ as pyo

    worst = 0.0
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        if c.has_lb():
            worst = max(worst, pyo.value(c.lower) - body)
        if c.has_ub():
            worst = max(worst, body - pyo.value(c.upper))
    return float(worst)


def solve_pyomo(model: RobotModel, start: PostureSet, s: Settings, log=None) -> SolveResult:
    """Problem 1 or 2 with Pyomo + cyipopt: the CasADi NLP, options and continuation (`continuation`)."""
    import pyomo.environ as pyo
    from pyomo.contrib.pynumero.algorithms.solvers.cyipopt_solver import _cyipopt_status_enum

    ensure_available()
    s = s.resolved(model)
    N, P, nq = len(start.q), len(start.poses), model.nq
    m = build_model(model, s, start)
    box = m.box.get_external_model()
    solver = pyo.SolverFactory("cyipopt")
    solver.config.options.update(dict(IPOPT_OPTIONS, max_iter=s.max_iter))
    current: list = [None]

    def stage(structs, x, p):
        if structs != current[0]:
            set_structures(m, model, s, start.placement, structs)
            current[0] = structs
        q, poses, seps = _unpack(x, N, P, nq)
        for i in range(N):
            for k in range(nq):
                m.q[i][k].set_value(float(q[i, k]))
        for j in range(P):
            for k in range(3):
                m.pose[j, k].set_value(float(poses[j, k]))
            m.phi[j].set_value(float(seps[j, 0]))
            m.off[j].set_value(float(seps[j, 1]))
        box.p = float(p)
        iters = [0]

        def count(*args):
            iters[0] = int(args[2])
            return True

        for obj in list(m.component_objects(pyo.Objective)):  # PyNumero leaves a dummy `_obj` behind
            m.del_component(obj)
        with fpenv.kept():  # AMPL's library, reading the model, sets the x87 precision to 53 bits for good
            res = solver.solve(m, tee=False, intermediate_callback=count)
        msg = res.solver.message
        status = _cyipopt_status_enum.get(msg if isinstance(msg, bytes) else str(msg).encode(), str(msg))
        qn = np.array([[pyo.value(v) for v in row] for row in m.q])
        pn = np.array([[pyo.value(m.pose[j, k]) for k in range(3)] for j in range(P)])
        sn = np.array([[pyo.value(m.phi[j]), pyo.value(m.off[j])] for j in range(P)])
        return _pack(PostureSet(qn, start.placement, pn), sn), str(status), iters[0], _violation(m)

    res = continuation(model, start, s, stage, log)
    res.stats["backend"] = "pyomo+cyipopt"
    return res
