"""The same posture-design problems written in Pyomo, solved by IPOPT through cyipopt (PyNumero grey box).

The kinematics (foot-flat/at-placement residuals, CoP, design rows) and the κ surrogate enter as one
ExternalGreyBoxModel whose values and Jacobians come from the CasADi functions of problems.py; the
placement geometry (separating line, hull margins, bounding-box centre, coupled limit) is plain Pyomo
algebra. Same variables, bounds, continuation and structure re-detection as the CasADi backend.
"""

from __future__ import annotations

import os
import sys
import time
from functools import lru_cache

import casadi as ca
import numpy as np
from scipy.sparse import coo_matrix

from design import geometry as geo
from design.criteria import design_matrix, kappa, surrogate
from design.problems import (
    IPOPT_OPTIONS,
    PLACEMENT_BOUNDS,
    Settings,
    SolveResult,
    _structures,
    posture_function,
)
from design.sampler import Y_MIN_CENTRED, PostureSet
from robots.errors import PoiseError
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


@lru_cache(maxsize=4)
def _posture_jac(model: RobotModel, params: str, base: str) -> ca.Function:
    q = ca.SX.sym("q", model.nq)
    pose = ca.SX.sym("pose", 3)
    eq, cop, h, _ = posture_function(model, params, base)(q, pose)
    c = ca.vertcat(eq, cop)
    hv = ca.vec(h)  # h is 25×2: x row (25) then y row (25)
    return ca.Function(
        "posture_jac", [q, pose], [c, hv, ca.jacobian(c, q), ca.jacobian(c, pose), ca.jacobian(hv, q)]
    )


def _make_greybox(model: RobotModel, s: Settings, placement: np.ndarray, P: int, p: float):
    from pyomo.contrib.pynumero.interfaces.external_grey_box import ExternalGreyBoxModel

    N, nq = len(placement), model.nq
    fn = _posture_jac(model, s.params, s.base).map(N)

    class DesignBox(ExternalGreyBoxModel):
        """Inputs: all q, placement poses. Equalities: foot flat at placement (6N). Outputs: CoP (2N).
        Objective: the κ surrogate (so the NLP is the CasADi one: no extra objective variable)."""

        def __init__(self):
            self.x = np.zeros(N * nq + 3 * P)
            self._cache = None

            def pattern(nr):
                rows, cols = [], []
                for i in range(N):
                    j = placement[i]
                    for r in range(nr):
                        rows += [nr * i + r] * (nq + 3)
                        cols += [nq * i + k for k in range(nq)] + [N * nq + 3 * j + k for k in range(3)]
                return np.array(rows), np.array(cols)

            self._eq_pat, self._out_pat = pattern(6), pattern(2)

        def input_names(self):
            return [f"q{i}_{k}" for i in range(N) for k in range(nq)] + [
                f"pose{j}_{k}" for j in range(P) for k in range(3)
            ]

        def output_names(self):
            return [f"cop{i}_{r}" for i in range(N) for r in range(2)]

        def equality_constraint_names(self):
            return [f"foot{i}_{r}" for i in range(N) for r in range(6)]

        def set_input_values(self, input_values):
            self.x = np.asarray(input_values, dtype=float).copy()
            self._cache = None

        def _eval(self):
            if self._cache is None:
                Q = self.x[: N * nq].reshape(N, nq).T
                poses = self.x[N * nq :].reshape(P, 3)[placement].T
                c, hv, Jq, Jp, Jh = (np.asarray(v) for v in fn(Q, poses))
                H = hv.T.reshape(N * 2, -1)  # (2N × 25)
                f, G = surrogate(H, p)
                J = np.concatenate([Jq.reshape(8, N, nq), Jp.reshape(8, N, 3)], axis=2)  # 8 × N × (nq+3)
                Jh = Jh.reshape(2 * 25, N, nq)
                gq = np.einsum("ir,rik->ik", G.reshape(N, 2 * 25), Jh).ravel()
                grad = np.zeros(N * nq + 3 * P + 2 * N)
                grad[: N * nq] = gq
                self._cache = {
                    "eq": c[:6].T.ravel(),
                    "cop": c[6:].T.ravel(),
                    "Jeq": J[:6].transpose(1, 0, 2).ravel(),
                    "Jcop": J[6:].transpose(1, 0, 2).ravel(),
                    "f": f,
                    "grad": grad,
                }
            return self._cache

        def evaluate_equality_constraints(self):
            return self._eval()["eq"]

        def evaluate_jacobian_equality_constraints(self):
            r, c = self._eq_pat
            return coo_matrix((self._eval()["Jeq"], (r, c)), shape=(6 * N, N * nq + 3 * P))

        def evaluate_outputs(self):
            return self._eval()["cop"]

        def evaluate_jacobian_outputs(self):
            r, c = self._out_pat
            return coo_matrix((self._eval()["Jcop"], (r, c)), shape=(2 * N, N * nq + 3 * P))

        def has_objective(self):
            return True

        def evaluate_objective(self):
            return float(self._eval()["f"])

        def evaluate_grad_objective(self, out=None):
            g = self._eval()["grad"]
            if out is not None:
                np.copyto(out, g)
                return out
            return g.copy()

    return DesignBox()


def _build_pyomo(model: RobotModel, s: Settings, start: PostureSet, x_q, poses, seps, structs, p: float):
    import pyomo.environ as pyo
    from pyomo.contrib.pynumero.interfaces.external_grey_box import ExternalGreyBoxBlock

    N, P, nq = len(start.placement), len(structs), model.nq
    m = pyo.ConcreteModel()
    m.box = ExternalGreyBoxBlock(external_model=_make_greybox(model, s, start.placement, P, p))
    inp, out = m.box.inputs, m.box.outputs
    qv = {(i, k): inp[f"q{i}_{k}"] for i in range(N) for k in range(nq)}
    pv = {(j, k): inp[f"pose{j}_{k}"] for j in range(P) for k in range(3)}
    for i in range(N):
        for k in range(nq):
            v = qv[i, k]
            v.setlb(model.lower[k])
            v.setub(model.upper[k])
            v.set_value(float(x_q[i, k]))
    for j in range(P):
        for k in range(3):
            pv[j, k].setlb(PLACEMENT_BOUNDS[k][0])
            pv[j, k].setub(PLACEMENT_BOUNDS[k][1])
            pv[j, k].set_value(float(poses[j, k]))
        if s.centred:
            pv[j, 1].setlb(Y_MIN_CENTRED)
    # initialise outputs from the model
    gb = m.box.get_external_model()
    gb.set_input_values(np.concatenate([np.asarray(x_q).ravel(), np.asarray(poses).ravel()]))
    vals = gb.evaluate_outputs()
    for idx, name in enumerate(gb.output_names()):
        out[name].set_value(float(vals[idx]), skip_validation=True)
    m.phi = pyo.Var(range(P), initialize=lambda _m, j: float(seps[j, 0]))
    m.off = pyo.Var(range(P), initialize=lambda _m, j: float(seps[j, 1]))
    m.cons = pyo.ConstraintList()

    def add(expr):
        if not isinstance(expr, bool | np.bool_):  # relations between constant corners are trivially true
            m.cons.add(expr)

    for k in range(len(model.coupled_b)):
        for i in range(N):
            m.cons.add(sum(model.coupled_A[k, t] * qv[i, t] for t in range(nq)) <= float(model.coupled_b[k]))
    rb, ro = geo.foot_rects(model, s.base)
    d = s.required_margin + (1e-7 if s.required_margin > 0 else 0.0)
    for j, st in enumerate(structs):
        x, y, psi = pv[j, 0], pv[j, 1], pv[j, 2]
        verts = [(float(a), float(b)) for a, b in rb] + [
            (x + pyo.cos(psi) * a - pyo.sin(psi) * b, y + pyo.sin(psi) * a + pyo.cos(psi) * b) for a, b in ro
        ]
        n = (pyo.cos(m.phi[j]), pyo.sin(m.phi[j]))
        for v in verts[:4]:
            m.cons.add(n[0] * v[0] + n[1] * v[1] - m.off[j] <= -s.feet_gap / 2)
        for v in verts[4:]:
            m.cons.add(n[0] * v[0] + n[1] * v[1] - m.off[j] >= s.feet_gap / 2)
        hull = st.hull
        for k in range(len(hull)):
            a, b, c = verts[hull[k - 1]], verts[hull[k]], verts[hull[(k + 1) % len(hull)]]
            add((b[0] - a[0]) * (c[1] - b[1]) - (b[1] - a[1]) * (c[0] - b[0]) >= 0)
        idx = np.flatnonzero(start.placement == j)
        if s.centred:
            ix0, ix1, iy0, iy1 = st.bbox
            for kk, v in enumerate(verts):
                for i_ext, ax, sign in ((ix0, 0, 1), (ix1, 0, -1), (iy0, 1, 1), (iy1, 1, -1)):
                    if kk != i_ext:
                        add(sign * (v[ax] - verts[i_ext][ax]) >= 0)
            for i in idx:
                m.cons.add(out[f"cop{i}_0"] == (verts[ix0][0] + verts[ix1][0]) / 2)
                m.cons.add(out[f"cop{i}_1"] == (verts[iy0][1] + verts[iy1][1]) / 2)
        for i in idx:
            cx, cy = out[f"cop{i}_0"], out[f"cop{i}_1"]
            for k in range(len(hull)):
                a, b = verts[hull[k]], verts[hull[(k + 1) % len(hull)]]
                ex, ey = b[0] - a[0], b[1] - a[1]
                length = pyo.sqrt(ex**2 + ey**2)
                m.cons.add((ex * (cy - a[1]) - ey * (cx - a[0])) / length >= d)
    return m, qv, pv


def solve_pyomo(model: RobotModel, start: PostureSet, s: Settings, log=None) -> SolveResult:
    """Problem 1 or 2 with Pyomo + cyipopt; mirrors design.problems.solve (uncertainty not supported here)."""
    import pyomo.environ as pyo

    if s.uncertainty > 0:
        raise PoiseError("--uncertainty is only implemented for the CasADi backend")
    ensure_available()
    t0 = time.perf_counter()
    N, P, nq = len(start.q), len(start.poses), model.nq
    q, poses = start.q.copy(), start.poses.copy()
    seps = np.array([geo.separating_line(pose, model, s.base)[:2] for pose in poses])
    k0 = kappa(design_matrix(model, q, s.base))
    stats: dict = {"stages": [], "iterations": None, "backend": "pyomo+cyipopt"}
    opts = {k: v for k, v in IPOPT_OPTIONS.items() if k != "print_level"}
    opts["max_iter"] = s.max_iter
    for p in s.sharpness:
        for rnd in range(s.max_rounds):
            structs = _structures(model, poses, s.base)
            m, qv, pv = _build_pyomo(model, s, start, q, poses, seps, structs, p)
            solver = pyo.SolverFactory("cyipopt")
            solver.config.options.update(opts)
            res = solver.solve(m, tee=False)
            status = str(res.solver.termination_condition)
            ok = status in ("optimal", "locallyOptimal") or "acceptable" in str(res.solver.message).lower()
            if ok:
                q = np.array([[pyo.value(qv[i, k]) for k in range(nq)] for i in range(N)])
                poses = np.array([[pyo.value(pv[j, k]) for k in range(3)] for j in range(P)])
                seps = np.array([[pyo.value(m.phi[j]), pyo.value(m.off[j])] for j in range(P)])
            kk = kappa(design_matrix(model, q, s.base))
            stats["stages"].append({"p": p, "round": rnd, "status": status, "accepted": ok, "kappa": kk})
            if log:
                log(f"[pyomo] p={p:g} round {rnd}: {status}, κ={kk:.1f}")
            if not ok or _structures(model, poses, s.base) == structs:
                break
    out = PostureSet(q, start.placement.copy(), poses)
    return SolveResult(
        out,
        k0,
        kappa(design_matrix(model, q, s.base)),
        kappa(design_matrix(model, q, "left")),
        time.perf_counter() - t0,
        stats,
    )
