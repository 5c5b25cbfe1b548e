"""The design objective as a function of all joint angles: f_p(H(q)) with its exact gradient and Hessian.

Both backends evaluate the objective through this one numpy/CasADi code path (CasADi as callbacks, Pyomo as
a grey box), so IPOPT sees the same numbers from either front end. The Hessian is spectral calculus on
M = HᵀH (criteria.Spectrum) chained with the first and second derivatives of the design rows:
    ∂²f/∂qₐ∂q_b = D²F[∂ₐM, ∂_bM] + 2 Σᵣ (∂ₐhᵣᵀ G ∂_bhᵣ + hᵣᵀ G ∂²ₐ_bhᵣ)   (G = ∂F/∂M; same posture only)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import casadi as ca
import numpy as np

from design.criteria import base_model, design_columns, spectrum
from robots.interrupt import in_callback
from robots.memo import per_model
from robots.tree import RobotModel


@per_model
def _row_functions(model: RobotModel, base: str) -> tuple[ca.Function, ca.Function]:
    """Per posture: (rows hᵣ (x then y, 2·n) with their Jacobian) and (w ↦ ∂²(wᵀh)/∂q²)."""
    q = ca.SX.sym("q", model.nq)
    w = ca.SX.sym("w", 2 * len(design_columns(model, base)))
    Rxy = base_model(model, base).regressor_sym(q)[0:2, :]
    h = ca.vec(Rxy[:, list(design_columns(model, base))].T)
    rows = ca.Function("design_rows", [q], [h, ca.jacobian(h, q)])
    curv = ca.Function("design_curvature", [q, w], [ca.hessian(ca.dot(w, h), q)[0]])
    return rows, curv


@per_model
def _mapped(model: RobotModel, base: str, N: int) -> tuple[ca.Function, ca.Function]:
    rows, curv = _row_functions(model, base)
    return rows.map(N), curv.map(N)


@dataclass
class ObjectiveValue:
    """f_p and ∇f at one point; ∇²f is computed on first use from the parts the gradient already needed."""

    f: float
    grad: np.ndarray  # (N·nq,)
    _parts: tuple = field(repr=False)

    @cached_property
    def hess(self) -> np.ndarray:
        """(N·nq, N·nq), dense symmetric."""
        q, h, J, sp, Gh, curv = self._parts
        N, nq = q.shape
        n = h.shape[2]
        hess = sp.form_rows(h, J)
        gn = 2 * np.einsum("nrka,kl,nrlb->nab", J, sp.grad, J, optimize=True)
        cv = np.asarray(curv(q.T, Gh.reshape(N, 2 * n).T)).reshape(nq, N, nq).transpose(1, 0, 2)
        for i in range(N):
            s = slice(i * nq, (i + 1) * nq)
            hess[s, s] += gn[i] + 2 * cv[i]
        return (hess + hess.T) / 2


def evaluate(model: RobotModel, base: str, q: np.ndarray, p: float) -> ObjectiveValue:
    """f_p, ∇f and (lazily, `.hess`) ∇²f w.r.t. the joint angles q (N × nq, postures in rows)."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    N, nq = q.shape
    rows, curv = _mapped(model, base, N)
    hv, Jv = (np.asarray(v) for v in rows(q.T))
    n = hv.shape[0] // 2
    h = hv.T.reshape(N, 2, n)  # posture, x/y, column
    J = Jv.reshape(2 * n, N, nq).transpose(1, 0, 2).reshape(N, 2, n, nq)
    sp = spectrum(h.reshape(2 * N, n).T, p)
    Gh = np.einsum("kl,nrl->nrk", sp.grad, h, optimize=True)
    grad = 2 * np.einsum("nrk,nrka->na", Gh, J, optimize=True).ravel()
    return ObjectiveValue(sp.f, grad, (q, h, J, sp, Gh, curv))


class Cached:
    """Last evaluation, shared by the value, gradient and Hessian callbacks (IPOPT asks for all three)."""

    def __init__(self, model: RobotModel, base: str, N: int):
        self.model, self.base, self.N = model, base, N
        self.key: tuple | None = None
        self.value: ObjectiveValue | None = None

    def __call__(self, qv: np.ndarray, p: float) -> ObjectiveValue:
        qv = np.array(qv, dtype=float).ravel()  # a copy: CasADi reuses its buffers, `.hess` is lazy
        key = (qv.tobytes(), float(p))
        if self.key != key:
            self.value = evaluate(self.model, self.base, qv.reshape(self.N, -1), p)
            self.key = key
        return self.value


class _Node(ca.Callback):
    """f (1×1) or ∇fᵀ (1×n) as a CasADi node with inputs (q stacked by posture, p)."""

    def __init__(self, name: str, kind: str, cache: Cached, n: int, child: _Node | None = None):
        ca.Callback.__init__(self)
        self.kind, self.cache, self.n, self.child = kind, cache, n, child
        self.construct(name, {"enable_fd": False})

    def get_n_in(self):
        return 2

    def get_n_out(self):
        return 1

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self.n, 1) if i == 0 else ca.Sparsity.dense(1, 1)

    def get_sparsity_out(self, i):
        return ca.Sparsity.dense(1, 1) if self.kind == "f" else ca.Sparsity.dense(1, self.n)

    def has_eval_buffer(self):
        return True

    @in_callback
    def eval_buffer(self, arg, res):
        """Write straight into CasADi's buffers."""
        v = self.cache(np.frombuffer(arg[0], dtype=float), float(np.frombuffer(arg[1], dtype=float)[0]))
        out = np.frombuffer(res[0], dtype=float)
        out[:] = v.f if self.kind == "f" else v.grad
        return 0

    def has_jacobian(self):
        return self.child is not None

    def get_jacobian(self, name, inames, onames, opts):
        q = ca.MX.sym("q", self.n)
        p = ca.MX.sym("p")
        out = ca.MX.sym("out", self.sparsity_out(0))
        rows = self.sparsity_out(0).numel()
        return ca.Function(name, [q, p, out], [self.child(q, p), ca.MX(rows, 1)], inames, onames, opts)


class CasadiObjective:
    """f_p(q) for CasADi NLPs: `value(q, p)` is differentiable once (exact gradient); the Hessian goes into the
    NLP's custom Hessian of the Lagrangian through `cache` (lagrangian.py). Keep it alive as long as the solver."""

    def __init__(self, model: RobotModel, base: str, N: int):
        n = N * model.nq
        self.cache = Cached(model, base, N)
        self._grad = _Node("kappa_grad", "grad", self.cache, n)
        self._f = _Node("kappa", "f", self.cache, n, self._grad)

    def value(self, q: ca.MX, p: ca.MX) -> ca.MX:
        return self._f(q, p)
