"""Normal equations with the state-estimation structure: a banded block for the eliminated variables (per-step
states, block-tridiagonal for Markov chains) plus a dense parameter border, solved by a banded Cholesky of the
state block and a dense Schur complement on the border. Work and memory are O(n · bandwidth²)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
from scipy.linalg import lapack

from formats.errors import PoiseError
from identify.slom.problem import Problem

MAX_BANDWIDTH = 400


@dataclass
class Layout:
    """Where each variable element's tangent block lives: in the eliminated (banded) or the border vector."""

    elim: dict[str, np.ndarray]  # name → (count,) offsets into the eliminated vector
    border: dict[str, np.ndarray]  # name → (count,) offsets into the border vector
    n_e: int
    n_b: int


def make_layout(problem: Problem) -> Layout:
    """Order eliminated families by (instance, family) so Markov chains give a narrow band."""
    elim_names = [n for n, v in problem.variables.items() if v.eliminate and not v.fixed]
    inst, fam, dims = [], [], []
    for f, n in enumerate(elim_names):
        v = problem.variables[n]
        inst.append(np.arange(v.count))
        fam.append(np.full(v.count, f))
        dims.append(np.full(v.count, v.manifold.tangent_dim))
    elim: dict[str, np.ndarray] = {}
    n_e = 0
    if elim_names:
        inst_a, fam_a, dim_a = map(np.concatenate, (inst, fam, dims))
        order = np.lexsort((fam_a, inst_a))
        offs = np.empty_like(order)
        offs[order] = np.concatenate([[0], np.cumsum(dim_a[order])[:-1]])
        n_e = int(dim_a.sum())
        start = 0
        for n in elim_names:
            c = problem.variables[n].count
            elim[n] = offs[start : start + c]
            start += c
    border: dict[str, np.ndarray] = {}
    n_b = 0
    for n, v in problem.variables.items():
        if not v.eliminate and not v.fixed:
            t = v.manifold.tangent_dim
            border[n] = n_b + t * np.arange(v.count)
            n_b += t * v.count
    return Layout(elim, border, n_e, n_b)


@dataclass
class _Pair:
    factor: int
    i: int
    j: int
    kind: str  # "ee" banded, "eb" border coupling (i eliminated, j border), "bb" dense border
    dest: np.ndarray | None = None  # flat destination indices of the kept entries
    sel: np.ndarray | None = None  # flat indices into the (K, t_i, t_j) product (None: all)
    mult: np.ndarray | None = None  # multiplicity for diagonal entries of i ≠ j pairs
    injective: bool = False
    transpose: bool = False  # "eb" pair whose first variable is the border one


def _offsets(layout: Layout, ref, count: int):
    if ref.name in layout.elim:
        offs, kind = layout.elim[ref.name], "e"
    elif ref.name in layout.border:
        offs, kind = layout.border[ref.name], "b"
    else:
        return None, "fixed"
    idx = ref.index if ref.index is not None else np.zeros(count, dtype=int)
    return offs[idx], kind


def _injective(a: np.ndarray) -> bool:
    s = np.sort(a)
    return not bool(np.any(s[1:] == s[:-1]))


@dataclass
class Plan:
    """Precomputed scatter plan from per-instance Jacobian products into the structured normal matrix."""

    layout: Layout
    bandwidth: int
    pairs: list[_Pair]
    grad: list[list[tuple[int, np.ndarray, str]]]  # per factor: (ref i, offsets (K,), kind)
    block: int = 0  # > 0: one eliminated family with this tangent size, factors couple neighbours only
    work: dict = field(default_factory=dict)  # reused zeroed arrays (first-touch page faults cost more)

    def zeros(self, name: str, shape: tuple) -> np.ndarray:
        a = self.work.get(name)
        if a is None or a.shape != shape:
            a = self.work[name] = np.zeros(shape)
        else:
            a.fill(0.0)
        return a


def _block_mode(problem: Problem, layout: Layout, info) -> int:
    """Tangent size t if the eliminated block is block-tridiagonal in one family (the Markov-chain case)."""
    if len(layout.elim) != 1:
        return 0
    t = problem.variables[next(iter(layout.elim))].manifold.tangent_dim
    for offs in info:
        for i, (oi, ki, _) in enumerate(offs):
            for j, (oj, kj, _) in enumerate(offs):
                if j < i or ki != "e" or kj != "e":
                    continue
                dlt = np.unique(oj - oi)
                if len(dlt) != 1 or abs(int(dlt[0])) not in (0, t):
                    return 0
    for offs in info:
        for oi, ki, _ in offs:
            if ki == "b" and np.any(oi != oi[0]):
                return 0
    return t


def make_plan(problem: Problem, layout: Layout) -> Plan:
    """Find the bandwidth and the destination of every Hessian entry once; reused by every iteration."""
    pairs: list[_Pair] = []
    grad = []
    info = []
    bw = 0
    for f in problem.factors:
        offs = []
        for r in f.variables:
            o, kind = _offsets(layout, r, f.count)
            t = problem.variables[r.name].manifold.tangent_dim
            offs.append((o, kind, t))
        info.append(offs)
        grad.append([(i, o, kind) for i, (o, kind, _) in enumerate(offs) if kind != "fixed"])
        for i, (oi, ki, ti) in enumerate(offs):
            for j, (oj, kj, tj) in enumerate(offs):
                if j < i or ki == "fixed" or kj == "fixed":
                    continue
                if ki == "e" and kj == "e":
                    bw = max(bw, int(np.max(np.maximum(oi + ti - 1 - oj, oj + tj - 1 - oi))))
    if bw > MAX_BANDWIDTH:
        raise PoiseError(
            f"eliminated variables couple too far apart (bandwidth {bw} > {MAX_BANDWIDTH}); "
            "declare long-range variables with eliminate=False"
        )
    n_e = layout.n_e
    block = _block_mode(problem, layout, info)
    if block:
        pairs = [
            _Pair(fi, i, j, "ee" if ki == kj == "e" else ("bb" if ki == kj == "b" else "eb"))
            for fi, offs in enumerate(info)
            for i, (_, ki, _) in enumerate(offs)
            for j, (_, kj, _) in enumerate(offs)
            if j >= i and "fixed" not in (ki, kj)
        ]
        return Plan(layout, bw, pairs, grad, block)
    for fi, offs in enumerate(info):
        K = problem.factors[fi].count
        for i, (oi, ki, ti) in enumerate(offs):
            for j, (oj, kj, tj) in enumerate(offs):
                if j < i or ki == "fixed" or kj == "fixed":
                    continue
                if ki == "e" and kj == "e":
                    r = (oi[:, None, None] + np.arange(ti)[None, :, None]) + np.zeros((1, 1, tj), dtype=int)
                    c = (oj[:, None, None] + np.arange(tj)[None, None, :]) + np.zeros((1, ti, 1), dtype=int)
                    r, c = r.ravel(), c.ravel()
                    if i == j:
                        keep = r >= c
                        sel = np.flatnonzero(keep)
                        mult = None
                        rr, cc = r[sel], c[sel]
                    else:
                        sel = None
                        rr, cc = np.maximum(r, c), np.minimum(r, c)
                        mult = np.where(r == c, 2.0, 1.0)
                        mult = None if np.all(mult == 1.0) else mult
                    dest = (rr - cc) * n_e + cc
                    if sel is not None and len(sel) == K * ti * tj:
                        sel = None
                    inj = _injective(dest)
                    pairs.append(_Pair(fi, i, j, "ee", dest, sel, mult, inj))
                elif ki == "b" and kj == "b":
                    pairs.append(_Pair(fi, i, j, "bb"))
                else:
                    # eliminated side first: rows of B; the product is transposed when i is the border side
                    (oe, te), (ob, tb) = ((oi, ti), (oj, tj)) if ki == "e" else ((oj, tj), (oi, ti))
                    rows = (oe[:, None, None] + np.arange(te)[None, :, None]) + np.zeros((1, 1, tb), int)
                    cols = (ob[:, None, None] + np.arange(tb)[None, None, :]) + np.zeros((1, te, 1), int)
                    dest = (rows * layout.n_b + cols).ravel()
                    inj = _injective(dest)
                    pairs.append(_Pair(fi, i, j, "eb", dest, None, None, inj, ki == "b"))
    return Plan(layout, bw, pairs, grad, _block_mode(problem, layout, info))


@dataclass
class NormalSystem:
    """H = [[A, B], [Bᵀ, C]] (A banded lower storage) and gradient g = Jᵀr, both unscaled."""

    ab: np.ndarray  # (bw+1, n_e)
    B: np.ndarray  # (n_e, n_b)
    C: np.ndarray  # (n_b, n_b)
    g_e: np.ndarray
    g_b: np.ndarray


def assemble(problem: Problem, plan: Plan, residuals: list[np.ndarray], jacobians: list[list[np.ndarray]]):
    """Accumulate JᵀJ and Jᵀr from the per-factor blocks (already whitened and robust-weighted)."""
    lay = plan.layout
    n_e, n_b = lay.n_e, lay.n_b
    ab = plan.zeros("ab", (plan.bandwidth + 1, n_e))  # valid until the next assemble() with this plan
    abf = ab.reshape(-1)
    B = plan.zeros("B", (n_e, n_b))
    C = np.zeros((n_b, n_b))
    g_e = np.zeros(n_e)
    g_b = np.zeros(n_b)
    for fi, refs in enumerate(plan.grad):
        r = residuals[fi]
        for i, offs, kind in refs:
            J = jacobians[fi][i]
            t = J.shape[2]
            gi = np.einsum("kd,kdt->kt", r, J)
            idx = (offs[:, None] + np.arange(t)[None, :]).ravel()
            if kind == "e":
                g_e += np.bincount(idx, weights=gi.ravel(), minlength=n_e)
            else:
                g_b += np.bincount(idx, weights=gi.ravel(), minlength=n_b)
    if plan.block:
        _assemble_blocks(problem, plan, jacobians, ab, B, C)
        return NormalSystem(ab, B, C, g_e, g_b)
    for p in plan.pairs:
        Ji = jacobians[p.factor][p.i]
        Jj = jacobians[p.factor][p.j]
        P = np.matmul(Ji.transpose(0, 2, 1), Jj)  # (K, t_i, t_j)
        if p.kind == "ee":
            vals = P.reshape(-1) if p.sel is None else P.reshape(-1)[p.sel]
            if p.mult is not None:
                vals = vals * p.mult
            if p.injective:
                abf[p.dest] += vals
            else:
                abf += np.bincount(p.dest, weights=vals, minlength=abf.size)
        elif p.kind == "eb":
            vals = (P.transpose(0, 2, 1) if p.transpose else P).reshape(-1)
            if p.injective:
                B.reshape(-1)[p.dest] += vals
            else:
                B.reshape(-1)[:] += np.bincount(p.dest, weights=vals, minlength=B.size)
        else:
            f = problem.factors[p.factor]
            oi, _ = _offsets(lay, f.variables[p.i], f.count)
            oj, _ = _offsets(lay, f.variables[p.j], f.count)
            ti, tj = P.shape[1], P.shape[2]
            if np.all(oi == oi[0]) and np.all(oj == oj[0]):
                S = P.sum(axis=0)
                C[oi[0] : oi[0] + ti, oj[0] : oj[0] + tj] += S
                if p.i != p.j:
                    C[oj[0] : oj[0] + tj, oi[0] : oi[0] + ti] += S.T
            else:
                rows = (oi[:, None, None] + np.arange(ti)[None, :, None]) + np.zeros((1, 1, tj), int)
                cols = (oj[:, None, None] + np.arange(tj)[None, None, :]) + np.zeros((1, ti, 1), int)
                np.add.at(C, (rows.ravel(), cols.ravel()), P.ravel())
                if p.i != p.j:
                    np.add.at(C, (cols.ravel(), rows.ravel()), P.ravel())
    return NormalSystem(ab, B, C, g_e, g_b)


def _as_slice(idx: np.ndarray) -> slice | None:
    """idx as a slice if it is a contiguous ascending range (the usual case: k = a, a+1, …)."""
    if len(idx) and idx[-1] - idx[0] == len(idx) - 1 and np.all(np.diff(idx) == 1):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return None


def _add_rows(target: np.ndarray, idx: np.ndarray, vals: np.ndarray) -> None:
    """target[idx] += vals; a slice when possible (10× faster than fancy indexing), correct for repeats."""
    sl = _as_slice(idx)
    if sl is not None:
        target[sl] += vals
    elif _injective(idx):
        target[idx] += vals
    else:
        np.add.at(target, idx, vals)


def _outer(Ji: np.ndarray, Jj: np.ndarray) -> np.ndarray:
    """Per-instance J_iᵀJ_j, (K, t_i, t_j); the Jacobians are views of contiguous (K, t, d) buffers."""
    return np.einsum("kad,kbd->kab", Ji.transpose(0, 2, 1), Jj.transpose(0, 2, 1), optimize=True)


def _assemble_blocks(problem: Problem, plan: Plan, jacobians, ab, B, C) -> None:
    """Block-tridiagonal accumulation: diagonal blocks D, sub-diagonal blocks E, border rows B — all by
    leading-axis slices of contiguous t×t blocks — then copied into LAPACK lower band storage."""
    lay, t = plan.layout, plan.block
    n_blk = lay.n_e // t
    D = plan.zeros("D", (n_blk, t, t))
    E = plan.zeros("E", (max(n_blk - 1, 0), t, t))
    B3 = B.reshape(n_blk, t, lay.n_b)
    for p in plan.pairs:
        f = problem.factors[p.factor]
        oi, ki = _offsets(lay, f.variables[p.i], f.count)
        oj, kj = _offsets(lay, f.variables[p.j], f.count)
        Ji, Jj = jacobians[p.factor][p.i], jacobians[p.factor][p.j]
        if p.kind == "bb":
            S = np.einsum("kad,kbd->ab", Ji.transpose(0, 2, 1), Jj.transpose(0, 2, 1), optimize=True)
            o1, o2 = int(oi[0]), int(oj[0])
            C[o1 : o1 + S.shape[0], o2 : o2 + S.shape[1]] += S
            if p.i != p.j:
                C[o2 : o2 + S.shape[1], o1 : o1 + S.shape[0]] += S.T
            continue
        if p.kind == "ee":
            bi, bj = oi // t, oj // t
            if bi[0] == bj[0]:
                P = _outer(Ji, Jj)
                _add_rows(D, bi, P if p.i == p.j else P + P.transpose(0, 2, 1))
            elif bj[0] > bi[0]:
                _add_rows(E, bi, _outer(Jj, Ji))  # A[b+1, b] = J_jᵀ J_i
            else:
                _add_rows(E, bj, _outer(Ji, Jj))
        else:
            if ki == "b":
                Ji, Jj, oi, oj = Jj, Ji, oj, oi
            P = _outer(Ji, Jj)
            tb = P.shape[2]
            be, ob = oi // t, int(oj[0])
            sl = _as_slice(be)
            if sl is not None:
                B3[sl, :, ob : ob + tb] += P
            elif _injective(be):
                B3[be, :, ob : ob + tb] += P
            else:
                np.add.at(B3, (be, slice(None), slice(ob, ob + tb)), P)
    # band storage ab[d, c] = A[c + d, c]; with c = t·k + j, row d of block k holds the (−d)-th diagonal of
    # D_k (j < t − d) followed by the (t − d)-th diagonal of E_k (the part of A[k+1, k] inside the band).
    for d in range(ab.shape[0]):
        row = ab[d].reshape(n_blk, t)
        if d < t:
            row[:, : t - d] = np.diagonal(D, offset=-d, axis1=1, axis2=2)
        if d >= 1 and n_blk > 1:
            diag = np.diagonal(E, offset=t - d, axis1=1, axis2=2)
            j0 = max(0, t - d)
            row[: n_blk - 1, j0 : j0 + diag.shape[1]] = diag


@dataclass
class Scaling:
    """Jacobi scaling D = √diag(H) (1 where the diagonal vanishes), applied symmetrically."""

    d_e: np.ndarray
    d_b: np.ndarray


def jacobi_scaling(ns: NormalSystem) -> Scaling:
    def s(diag):
        return np.where(diag > 0, np.sqrt(np.maximum(diag, 0)), 1.0)

    return Scaling(s(ns.ab[0]) if ns.ab.size else np.zeros(0), s(np.diag(ns.C)))


@dataclass
class Factorization:
    """Cholesky L of the scaled, damped state block, Z = L⁻¹B and the Schur complement on the border."""

    chol_ab: np.ndarray | None
    Z_B: np.ndarray  # L⁻¹B (scaled)
    S: np.ndarray  # C − BᵀA⁻¹B = C − Z_BᵀZ_B (scaled, damped)
    lam: float


def scaled(ns: NormalSystem, sc: Scaling):
    """Return scaled copies (ab, B, C, g_e, g_b) with unit diagonal: H_s = D⁻¹HD⁻¹, g_s = D⁻¹g."""
    inv_e, inv_b = 1.0 / sc.d_e, 1.0 / sc.d_b
    ab = ns.ab * inv_e[None, :]
    n_e = ab.shape[1]
    for d in range(ab.shape[0]):
        ab[d, : n_e - d] *= inv_e[d:]
    B = ns.B * inv_e[:, None]
    B *= inv_b[None, :]
    C = ns.C * np.outer(inv_b, inv_b)
    return ab, B, C, ns.g_e * inv_e, ns.g_b * inv_b


def _tb(cb: np.ndarray, rhs: np.ndarray, trans: str) -> np.ndarray:
    x, info = lapack.dtbtrs(cb, np.asfortranarray(rhs), uplo="L", trans=trans)
    if info != 0:
        raise np.linalg.LinAlgError(f"dtbtrs failed ({info})")
    return x


def factor_and_solve(ab, B, C, g_e, g_b, lam: float):
    """Solve (H + λI) y = −g for scaled H: banded Cholesky A = LLᵀ, Z = L⁻¹[B g], Schur complement on the
    border, then one back substitution. Returns (y_e, y_b, factorization)."""
    n_e, n_b = ab.shape[1], C.shape[0]
    if n_e:
        a = ab.copy()
        a[0] += lam
        try:
            cb = sla.cholesky_banded(a, lower=True, check_finite=False)
        except np.linalg.LinAlgError as exc:
            raise np.linalg.LinAlgError("state block not positive definite") from exc
        rhs_e = np.empty((n_e, n_b + 1), order="F")
        rhs_e[:, :n_b] = B
        rhs_e[:, n_b] = g_e
        Z = _tb(cb, rhs_e, "N")
        Z_B, z_g = Z[:, :n_b], Z[:, n_b]
    else:
        cb, Z_B, z_g = None, np.zeros((0, n_b)), np.zeros(0)
    S = C + lam * np.eye(n_b) - Z_B.T @ Z_B
    rhs = -g_b + Z_B.T @ z_g
    if n_b:
        try:
            y_b = sla.cho_solve(sla.cho_factor(S, check_finite=False), rhs, check_finite=False)
        except np.linalg.LinAlgError:
            y_b = np.linalg.lstsq(S, rhs, rcond=1e-12)[0]
    else:
        y_b = np.zeros(0)
    y_e = -_tb(cb, (z_g + Z_B @ y_b)[:, None], "T")[:, 0] if n_e else np.zeros(0)
    return y_e, y_b, Factorization(cb, Z_B, S, lam)


def _decrement_parts(fact: Factorization, g_e: np.ndarray, g_b: np.ndarray):
    """(½‖z‖², ½ rᵀS⁻¹r, y_b) with z = L⁻¹g_e, r = g_b − Z_Bᵀz and y_b = S⁻¹r: the decrease a step of the states
    alone (parameters held) predicts, what moving the parameters too (the states following) adds (∞ if S is
    singular), and that parameter step (scaled coordinates; None if S is singular)."""
    z = _tb(fact.chol_ab, g_e[:, None], "N")[:, 0] if g_e.size else np.zeros(0)
    r = g_b - fact.Z_B.T @ z
    try:
        y = sla.cho_solve(sla.cho_factor(fact.S, check_finite=False), r, check_finite=False) if r.size else r
    except np.linalg.LinAlgError:
        return float(0.5 * (z @ z)), float("inf"), None
    return float(0.5 * (z @ z)), float(0.5 * (r @ y)), y


def newton_decrement(fact: Factorization, g_e: np.ndarray, g_b: np.ndarray) -> float:
    """½ gᵀ(H + λI)⁻¹g for the scaled gradient (g_e, g_b) of the system `fact` factorises, from the factorisation
    alone (one banded solve, no new Cholesky): with λ = 0, the cost decrease the Gauss–Newton step predicts.
    gᵀH⁻¹g = ‖z‖² + rᵀS⁻¹r with z = L⁻¹g_e and r = g_b − Z_Bᵀz (∞ if S is singular)."""
    state, param, _ = _decrement_parts(fact, g_e, g_b)
    return state + param


def parameter_step(
    fact: Factorization, g_e: np.ndarray, g_b: np.ndarray, sd: np.ndarray | None = None
) -> tuple[float, np.ndarray | None]:
    """The border (parameter) part of the Gauss–Newton step of the system `fact` factorises (λ = 0), the states
    re-optimised along: (½ rᵀS⁻¹r — the parameter part of `newton_decrement`, the Schur complement term, in χ²
    units —, each parameter's step over `sd`, its 1σ in the same (scaled) coordinates — default its marginal 1σ
    under `fact`'s weights, √(S⁻¹)_ii; None if S is singular). With the default, scale-free: the same in scaled
    and unscaled coordinates."""
    _, dec, y = _decrement_parts(fact, g_e, g_b)
    if y is None:
        return dec, None
    if not y.size:
        return dec, y
    if sd is None:
        sd = np.sqrt(np.diag(sla.cho_solve(sla.cho_factor(fact.S, check_finite=False), np.eye(len(y)))))
    return dec, y / sd


def state_marginal(fact: Factorization, S_inv: np.ndarray, offset: int, t: int) -> np.ndarray:
    """Scaled marginal covariance of the eliminated block [offset, offset+t): (A⁻¹)_kk + W_k S⁻¹ W_kᵀ with
    X = L⁻¹E_k, (A⁻¹)_kk = XᵀX and W_k = (A⁻¹B)_k = XᵀZ_B."""
    n_e = fact.chol_ab.shape[1]
    E = np.zeros((n_e, t))
    E[offset + np.arange(t), np.arange(t)] = 1.0
    X = _tb(fact.chol_ab, E, "N")
    Wk = X.T @ fact.Z_B
    return X.T @ X + Wk @ S_inv @ Wk.T


@dataclass
class SelectedInverse:
    """The entries of A⁻¹ (scaled state block) within A's band, as a block-tridiagonal matrix of b×b blocks
    (b = the bandwidth: a band of width b is block tridiagonal in blocks of b), W = A⁻¹B (scaled) and S⁺, the
    Schur complement's inverse on its observable subspace — together every entry of H⁻¹ a factor touches:
    H⁻¹ = [[A⁻¹ + W S⁺ Wᵀ, −W S⁺], [−S⁺ Wᵀ, S⁺]]."""

    b: int
    diag: np.ndarray  # (n_blocks, b, b): A⁻¹ diagonal blocks
    sub: np.ndarray  # (n_blocks − 1, b, b): A⁻¹[k+1, k] blocks
    W: np.ndarray  # (n_e, n_b)
    S_inv: np.ndarray  # (n_b, n_b)

    def a_inv(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """A⁻¹[i, j] for index arrays with |i − j| within the band."""
        b = self.b
        bi, bj, ii, jj = i // b, j // b, i % b, j % b
        out = self.diag[bi, ii, jj]
        if len(self.sub):
            lo = np.minimum(bi, bj).clip(0, len(self.sub) - 1)
            below = np.where(bi > bj, self.sub[lo, ii, jj], self.sub[lo, jj, ii])
            out = np.where(bi == bj, out, below)
        return out


def selected_inverse(fact: Factorization, S_inv: np.ndarray) -> SelectedInverse:
    """A⁻¹ within its band from the banded Cholesky factor alone (the block form of Takahashi's recurrence:
    Σ_{k+1,k} = −Σ_{k+1,k+1} C_k D_k⁻¹, Σ_kk = D_k⁻ᵀD_k⁻¹ − Σ_{k+1,k}ᵀ C_k D_k⁻¹ for L's diagonal blocks D_k and
    sub-diagonal blocks C_k) — O(n_e · b²), no dense inverse."""
    n_b = fact.S.shape[0]
    if fact.chol_ab is None or fact.chol_ab.shape[1] == 0:
        return SelectedInverse(1, np.zeros((0, 1, 1)), np.zeros((0, 1, 1)), np.zeros((0, n_b)), S_inv)
    cb = fact.chol_ab
    p, n = cb.shape[0] - 1, cb.shape[1]
    b = max(p, 1)
    nb = -(-n // b)
    D = np.zeros((nb, b, b))
    C = np.zeros((max(nb - 1, 0), b, b))
    pad = np.arange(n, nb * b)
    D[pad // b, pad % b, pad % b] = 1.0  # padding: decoupled unit rows
    c = np.arange(n)
    for d in range(p + 1):
        cc = c[: n - d]
        r = cc + d
        same = r // b == cc // b
        D[cc[same] // b, r[same] % b, cc[same] % b] = cb[d, : n - d][same]
        C[cc[~same] // b, r[~same] % b, cc[~same] % b] = cb[d, : n - d][~same]
    Dinv = np.linalg.inv(D)
    del D
    M = np.matmul(C, Dinv[:-1]) if nb > 1 else C  # C_k D_k⁻¹, becomes Σ_{k+1,k}
    del C
    diag = np.matmul(Dinv.transpose(0, 2, 1), Dinv)  # D_k⁻ᵀ D_k⁻¹, becomes Σ_kk
    del Dinv
    for k in range(nb - 2, -1, -1):
        s = -diag[k + 1] @ M[k]
        diag[k] -= s.T @ M[k]
        M[k] = s
    sub = M
    W = _tb(cb, fact.Z_B, "T") if n_b else np.zeros((n, 0))
    return SelectedInverse(b, diag, sub, W, S_inv)


def factor_leverage(
    problem: Problem, plan: Plan, fi: int, jacobians: list[np.ndarray], sc: Scaling, si: SelectedInverse
) -> float:
    """tr(J_f H⁻¹ J_fᵀ) for factor `fi`'s whitened Jacobians (unscaled; H the undamped normal matrix `si` comes
    from): the part of the unknowns this block's residuals absorb. Its residual count minus this is the block's
    redundancy (degrees of freedom); over all blocks the leverages add up to the number of observable unknowns."""
    lay = plan.layout
    f = problem.factors[fi]
    e_parts, b_parts = [], []
    for ref, J in zip(f.variables, jacobians, strict=True):
        offs, kind = _offsets(lay, ref, f.count)
        if kind == "fixed":
            continue
        t = J.shape[2]
        idx = offs[:, None] + np.arange(t)[None, :]  # (K, t)
        d = (sc.d_e if kind == "e" else sc.d_b)[idx]
        (e_parts if kind == "e" else b_parts).append((idx, J / d[:, None, :]))
    n_b = lay.n_b
    total = 0.0
    chunk = max(1, 2_000_000 // max(1, f.dim * (n_b + 64)))
    for s in range(0, f.count, chunk):
        sl = slice(s, min(s + chunk, f.count))
        k = sl.stop - sl.start
        V = np.zeros((k, f.dim, n_b))
        for idx, J in b_parts:
            ib = idx[sl]
            if np.all(ib == ib[0]):
                V[:, :, ib[0]] += J[sl]
            else:
                for a in range(ib.shape[1]):
                    np.add.at(V.transpose(0, 2, 1), (np.arange(k), ib[:, a]), J[sl][:, :, a])
        if e_parts:
            ie = np.concatenate([idx[sl] for idx, _ in e_parts], axis=1)
            Je = np.concatenate([J[sl] for _, J in e_parts], axis=2)
            Pe = np.einsum("kda,kdc->kac", Je, Je, optimize=True)
            total += float(np.sum(Pe * si.a_inv(ie[:, :, None], ie[:, None, :])))
            if n_b:
                V -= np.einsum("kda,kab->kdb", Je, si.W[ie], optimize=True)
        if n_b:
            total += float(np.sum(V * (V @ si.S_inv)))
    return total
