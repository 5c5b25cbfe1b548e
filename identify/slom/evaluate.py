"""Vectorised evaluation of factors: one `Function.map` call per block gives all whitened residuals and the
Jacobians w.r.t. the tangent ⊞-increments (CasADi AD through a first-order retraction, exact at δ = 0)."""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from identify.slom.problem import Factor, Problem
from robots.native import compiled, compiler


@dataclass
class CompiledFactor:
    """A factor with its mapped CasADi functions and data laid out for zero-copy buffer evaluation."""

    factor: Factor
    res_fn: ca.Function  # (ambient…, data…) → whitened residual, mapped over K
    jac_fn: ca.Function  # (ambient…, aux…, data…) → (whitened residual, J_1 … J_n), mapped over K
    data: list[np.ndarray]  # C-contiguous (K, n) rows or (n,) shared
    tangent_dims: list[int]
    chunk: int  # instances per mapped call (map construction cost grows with the map size)


CHUNK = 1024


def _map(fn: ca.Function, K: int, shared: list[int], threads: int) -> ca.Function:
    if K == 1:
        return fn
    par = "thread" if threads > 1 else "serial"
    return fn.map(f"{fn.name()}_map", par, K, shared, [], {"n_threads": threads} if threads > 1 else {})


def jit_available() -> bool:
    """A C compiler can build factors to native code (`robots.native`)."""
    return compiler() is not None


def compile_factor(problem: Problem, f: Factor, threads: int = 1, jit: bool = False) -> CompiledFactor:
    """Build the whitened residual and tangent-Jacobian functions of one factor and map them over K."""
    mans = [problem.variables[r.name].manifold for r in f.variables]
    xs = [ca.SX.sym(f"x{i}", m.ambient_dim) for i, m in enumerate(mans)]
    ds = [ca.SX.sym(f"d{i}", m.tangent_dim) for i, m in enumerate(mans)]
    auxs = [ca.SX.sym(f"a{i}", m.aux_dim) for i, m in enumerate(mans)]
    data = [ca.SX.sym(f"z{j}", f.fn.size1_in(len(xs) + j)) for j in range(len(f.data))]
    L = ca.DM(f.sqrt_info)
    r = L @ f.fn(*xs, *data)
    moved = [m.plus_linear_sym(x, d, a) for m, x, d, a in zip(mans, xs, ds, auxs, strict=True)]
    r_moved = L @ f.fn(*moved, *data)
    zero = ca.DM.zeros(sum(m.tangent_dim for m in mans))
    jacs = [ca.densify(ca.substitute(ca.jacobian(r_moved, d), ca.vertcat(*ds), zero)) for d in ds]
    res = ca.Function(f"{f.name}_res", [*xs, *data], [ca.densify(r)])
    jac = ca.Function(f"{f.name}_jac", [*xs, *auxs, *data], [ca.densify(r), *jacs])
    nv, nd = len(xs), len(data)
    shared_vars = [i for i, ref in enumerate(f.variables) if ref.index is None]
    shared_data = [j for j, d in enumerate(f.data) if d.ndim == 1]
    res_shared = shared_vars + [nv + j for j in shared_data]
    jac_shared = shared_vars + [nv + i for i in shared_vars] + [2 * nv + j for j in shared_data]
    cols = [np.ascontiguousarray(d, dtype=float) for d in f.data]
    assert len(cols) == nd
    if jit:
        res, jac = compiled(res), compiled(jac)
    chunk = min(f.count, CHUNK)
    return CompiledFactor(
        f,
        _map(res, chunk, res_shared, threads),
        _map(jac, chunk, jac_shared, threads),
        cols,
        [m.tangent_dim for m in mans],
        chunk,
    )


def _inputs(problem: Problem, cf: CompiledFactor, values: dict[str, np.ndarray], with_aux: bool):
    xs, auxs = [], []
    for r in cf.factor.variables:
        var = problem.variables[r.name]
        v = values[r.name]
        sel = np.ascontiguousarray(v[r.index] if r.index is not None else v[0])
        xs.append(sel)
        if with_aux:
            aux = var.manifold.aux(np.atleast_2d(sel))
            auxs.append(np.ascontiguousarray(aux if sel.ndim == 2 else aux[0]))
    return xs, auxs


def _call(
    fn: ca.Function, args: list[np.ndarray], out_shapes: list[tuple], K: int, chunk: int
) -> list[np.ndarray]:
    """Evaluate chunk by chunk with CasADi's zero-copy buffers; (K, n) C-order rows are (n, K) column-major.

    Per-instance arguments are 2-D (K, n); shared ones are 1-D and passed once.
    """
    n_chunks = -(-K // chunk)
    Kp = n_chunks * chunk
    per = [a.ndim == 2 for a in args]
    if Kp != K:
        args = [
            np.concatenate([a, np.repeat(a[-1:], Kp - K, axis=0)]) if p else a
            for a, p in zip(args, per, strict=True)
        ]
    outs = [np.empty((Kp,) + s[1:]) for s in out_shapes]
    buf, run = fn.buffer()
    for i, (a, p) in enumerate(zip(args, per, strict=True)):
        if not p:
            buf.set_arg(i, memoryview(a if a.size else np.zeros(1)))
    for c in range(n_chunks):
        sl = slice(c * chunk, (c + 1) * chunk)
        for i, (a, p) in enumerate(zip(args, per, strict=True)):
            if p:
                buf.set_arg(i, memoryview(a[sl] if a.shape[1:] and a.shape[1] else np.zeros(1)))
        for i, o in enumerate(outs):
            buf.set_res(i, memoryview(o[sl]))
        run()
    return [o[:K] for o in outs]


def eval_residuals(problem: Problem, cf: CompiledFactor, values: dict[str, np.ndarray]) -> np.ndarray:
    """Whitened residuals (K, d) of one factor at `values`."""
    xs, _ = _inputs(problem, cf, values, False)
    K, d = cf.factor.count, cf.factor.dim
    return _call(cf.res_fn, [*xs, *cf.data], [(K, d)], K, cf.chunk)[0]


def eval_jacobians(problem: Problem, cf: CompiledFactor, values: dict[str, np.ndarray]):
    """Whitened residuals (K, d) and tangent Jacobians [(K, d, t_i)] of one factor at `values`.

    The Jacobians come back as strided views (K, d, t) of (K, t, d) buffers: J_kᵀ is contiguous per instance.
    """
    xs, auxs = _inputs(problem, cf, values, True)
    K, d = cf.factor.count, cf.factor.dim
    outs = _call(
        cf.jac_fn, [*xs, *auxs, *cf.data], [(K, d)] + [(K, t, d) for t in cf.tangent_dims], K, cf.chunk
    )
    return outs[0], [o.transpose(0, 2, 1) for o in outs[1:]]
