"""Vectorised evaluation of factors: one `Function.map` call per block gives all whitened residuals and the
Jacobians w.r.t. the tangent ⊞-increments (CasADi AD through a first-order retraction, exact at δ = 0)."""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from identify.slom.problem import Factor, Problem


@dataclass
class CompiledFactor:
    """A factor with its mapped CasADi functions and data already laid out column-wise."""

    factor: Factor
    res_fn: ca.Function  # (ambient…, data…) → whitened residual, mapped over K
    jac_fn: ca.Function  # (ambient…, aux…, data…) → (whitened residual, J_1 … J_n), mapped over K
    data_cols: list[np.ndarray]
    tangent_dims: list[int]


def _map(fn: ca.Function, K: int, threads: int) -> ca.Function:
    if K == 1:
        return fn
    return fn.map(K, "thread", threads) if threads > 1 else fn.map(K, "serial")


def compile_factor(problem: Problem, f: Factor, threads: int = 2) -> CompiledFactor:
    """Build the whitened residual and tangent-Jacobian functions of one factor and map them over K."""
    mans = [problem.variables[r.name].manifold for r in f.variables]
    xs = [ca.SX.sym(f"x{i}", m.ambient_dim) for i, m in enumerate(mans)]
    ds = [ca.SX.sym(f"d{i}", m.tangent_dim) for i, m in enumerate(mans)]
    auxs = [ca.SX.sym(f"a{i}", m.aux_dim) for i, m in enumerate(mans)]
    data = [ca.SX.sym(f"z{j}", f.fn.size1_in(len(xs) + j)) for j in range(len(f.data))]
    L = ca.DM(f.sqrt_info)
    r = L @ f.fn(*xs, *data)
    moved = [m.plus_linear_sym(x, d, a) for m, x, d, a in zip(mans, xs, ds, auxs, strict=False)]
    r_moved = L @ f.fn(*moved, *data)
    jacs = [
        ca.substitute(ca.jacobian(r_moved, d), ca.vertcat(*ds), ca.DM.zeros(sum(m.tangent_dim for m in mans)))
        for d in ds
    ]
    res = ca.Function(f"{f.name}_res", [*xs, *data], [r])
    jac = ca.Function(f"{f.name}_jac", [*xs, *auxs, *data], [r, *jacs])
    cols = [np.ascontiguousarray(d.T) if d.ndim == 2 else d.reshape(-1, 1) for d in f.data]
    return CompiledFactor(
        f, _map(res, f.count, threads), _map(jac, f.count, threads), cols, [m.tangent_dim for m in mans]
    )


def _inputs(problem: Problem, cf: CompiledFactor, values: dict[str, np.ndarray], with_aux: bool):
    xs, auxs = [], []
    for r in cf.factor.variables:
        var = problem.variables[r.name]
        v = values[r.name]
        sel = v[r.index] if r.index is not None else v[:1]
        xs.append(np.ascontiguousarray(sel.T))
        if with_aux:
            auxs.append(np.ascontiguousarray(var.manifold.aux(sel).T))
    return xs, auxs


def eval_residuals(problem: Problem, cf: CompiledFactor, values: dict[str, np.ndarray]) -> np.ndarray:
    """Whitened residuals (K, d) of one factor at `values`."""
    xs, _ = _inputs(problem, cf, values, False)
    out = cf.res_fn(*xs, *cf.data_cols)
    return np.asarray(out.full() if hasattr(out, "full") else out).T


def eval_jacobians(problem: Problem, cf: CompiledFactor, values: dict[str, np.ndarray]):
    """Whitened residuals (K, d) and tangent Jacobians [(K, d, t_i)] of one factor at `values`."""
    xs, auxs = _inputs(problem, cf, values, True)
    outs = cf.jac_fn(*xs, *auxs, *cf.data_cols)
    if not isinstance(outs, (list, tuple)):
        outs = [outs]
    K, d = cf.factor.count, cf.factor.dim
    r = np.asarray(outs[0].full()).T
    jacs = []
    for J, t in zip(outs[1:], cf.tangent_dims, strict=False):
        a = np.asarray(J.full())  # (d, K*t), instance k in columns k*t:(k+1)*t
        jacs.append(np.ascontiguousarray(a.reshape(d, K, t).transpose(1, 0, 2)))
    return r, jacs
