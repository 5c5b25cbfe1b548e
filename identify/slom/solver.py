"""Levenberg–Marquardt (Gauss–Newton when undamped) on manifolds, with covariance, rank and residual reports."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from identify.slom import normal
from identify.slom.evaluate import compile_factor, eval_jacobians, eval_residuals, jit_available
from identify.slom.problem import Problem

REUSE_MAX_LAMBDA = 1e-12  # damping (relative to the unit scaled diagonal) still treated as 0 for covariances


@dataclass
class Options:
    """Solver settings; `method="gn"` takes undamped Gauss–Newton steps (λ = 0, always accepted)."""

    method: str = "lm"
    max_iter: int = 100
    lam0: float = 1e-9  # relative to the unit diagonal of the Jacobi-scaled normal matrix
    lam_down: float = 0.1  # smallest factor λ is multiplied by after a very good step (Nielsen uses 1/3)
    lam_min: float = 0.0
    ftol: float = 1e-10  # stop when the relative cost decrease of an accepted step is below this
    xtol: float = 1e-10  # … or the Jacobi-scaled step norm is below this
    gtol: float = 1e-10  # … or the scaled gradient's max-norm is below this
    # Stalled (not converged): the cost fell by less than stall_rtol (relative) over the last stall_window
    # iterations — LM creeping along a flat valley of weakly determined parameters instead of settling.
    stall_rtol: float = 1e-4
    stall_window: int = 5
    # … and a stall counts as converged only when the undamped Gauss–Newton step (the states re-optimised along)
    # would move no parameter by more than stall_sigma of its own marginal 1σ (the reported one: with the
    # rescale_blocks' variance factors when they are rescaled, else under the solve's weights) — an
    # absolute test, whatever the recording's length; else it is reported not converged. The states' own part of
    # the Newton decrement is left out: stiff friction lets LM creep the states for hundreds of iterations with the
    # parameters fixed. Weak directions need no separate test: their σ is large, but so is the step a flat valley
    # leaves.
    stall_sigma: float = 0.1
    threads: int = 1  # CasADi map threads; serial is fastest on a loaded 2-core machine
    jit: bool | None = None  # compile blocks to C; None: if a C compiler exists and ≥ 20 000 instances
    rank_rtol: float = 1e-10  # eigenvalue of the scaled border information below rtol·max → unobservable
    covariance: bool = True
    # Covariance with each listed block's weight divided by its variance factor χ²_k / r_k — the whitened χ² over
    # the block's redundancy r_k = n_k − tr(J_k H⁻¹ J_kᵀ), its residual count less the unknowns it absorbs (exact,
    # from the factorisation: `normal.selected_inverse`), iterated to the fixed point (Förstner's variance-component
    # estimation; secant steps, at most variance_passes refactorisations, until the factors change by < 1 %);
    # estimates unchanged: σ as the residuals' own scale says.
    rescale_blocks: tuple[str, ...] = ()
    variance_passes: int = 4
    # eigenvalue of the scaled border information below weak_rtol·max → weakly determined: a combination known
    # more than 1/√weak_rtol (100) times worse than its components one at a time
    weak_rtol: float = 1e-4
    state_covariance: dict[str, list[int]] = field(default_factory=dict)  # name → element indices


@dataclass
class IterationLog:
    """One trial step (a rejected trial shares its iteration number with the trials after it)."""

    iteration: int
    cost: float
    # Euclidean norm of the step in Jacobi-scaled tangent coordinates: each component times the square root of
    # its normal-matrix diagonal (√ of its information), so dimensionless — a step of 1 moves a variable by about
    # its one-at-a-time 1σ; it does not mean the variables move by that much in their own units.
    step_norm: float
    lam: float
    accepted: bool
    seconds: float  # this trial: factorise, solve, evaluate the cost
    elapsed: float  # since the start of solve()


@dataclass
class BlockStats:
    """Per-factor residual summary: whitened χ²/(K·d) ≈ 1 when the assumed Σ fits; raw RMS per component."""

    name: str
    count: int
    dim: int
    cost: float
    chi2_per_dof: float
    rms: list[float]


@dataclass
class RankReport:
    """Observability of the border (parameter) block from the Schur-complement information matrix."""

    rank: int
    size: int
    eigenvalues: list[float]
    null_directions: list[dict[str, float]]  # per unobservable direction: component label → weight
    # per weakly determined direction (eigenvalue < weak_rtol·max of the Jacobi-scaled information, i.e. a
    # combination known far worse than its components one at a time): component label → weight (scaled
    # coordinates, largest 1)
    weak_directions: list[dict[str, float]] = field(default_factory=list)
    condition: float = float("nan")  # largest / smallest eigenvalue of the Jacobi-scaled border information
    # 1σ of each border component from this same information (label → σ; NaN where unobservable): with
    # `Options.rescale_blocks`, the σ under the weights the solve used, before the rescale
    sigmas: dict[str, float] = field(default_factory=dict)

    @property
    def deficient(self) -> bool:
        return self.rank < self.size


@dataclass
class SolveResult:
    values: dict[str, np.ndarray]
    cost: float
    initial_cost: float
    iterations: int
    converged: bool
    reason: str
    log: list[IterationLog]
    stats: list[BlockStats]
    border_labels: list[str]
    covariance: np.ndarray | None  # border block, tangent coordinates (NaN where unobservable)
    rank: RankReport | None
    state_covariance: dict[str, dict[int, np.ndarray]]
    seconds: float
    variance_factors: dict[str, float] = field(
        default_factory=dict
    )  # block → χ²/redundancy its weight was divided by
    redundancy: dict[str, float] = field(default_factory=dict)  # rescaled block → its r_k at those weights

    def sigmas(self) -> dict[str, float]:
        """1σ of every border tangent component (label → σ; NaN where unobservable)."""
        if self.covariance is None:
            return {}
        return {lab: float(np.sqrt(self.covariance[i, i])) for i, lab in enumerate(self.border_labels)}


def border_labels(problem: Problem, layout: normal.Layout) -> list[str]:
    labels = [""] * layout.n_b
    for name, offs in layout.border.items():
        var = problem.variables[name]
        comp = var.component_labels()
        for e, o in enumerate(offs):
            for i, lab in enumerate(comp):
                labels[o + i] = lab if var.count == 1 else f"{lab}#{e}"
    return labels


def _retract(problem: Problem, layout: normal.Layout, values, y_e, y_b):
    new = {}
    for name, var in problem.variables.items():
        t = var.manifold.tangent_dim
        if name in layout.elim:
            d = y_e[layout.elim[name][:, None] + np.arange(t)[None, :]]
        elif name in layout.border:
            d = y_b[layout.border[name][:, None] + np.arange(t)[None, :]]
        else:
            new[name] = values[name]
            continue
        new[name] = var.manifold.plus(values[name], d)
    return new


def _robust(problem: Problem, residuals):
    """Total cost ½Σρ and per-instance IRLS weights."""
    cost, weights = 0.0, []
    for f, r in zip(problem.factors, residuals, strict=False):
        s = np.einsum("kd,kd->k", r, r)
        if f.loss is None:
            cost += 0.5 * float(s.sum())
            weights.append(None)
        else:
            cost += 0.5 * float(f.loss.rho(s).sum())
            weights.append(np.sqrt(f.loss.weight(s)))
    return cost, weights


def solve(
    problem: Problem, options: Options | None = None, callback: Callable[[IterationLog], None] | None = None
) -> SolveResult:
    """Minimise ½ Σ ρ(‖L r‖²) over all variables; return estimates, covariance and diagnostics."""
    opt = options or Options()
    t_start = time.perf_counter()
    layout = normal.make_layout(problem)
    plan = normal.make_plan(problem, layout)
    jit = opt.jit
    if jit is None:
        jit = jit_available() and sum(f.count for f in problem.factors) >= 20000
    compiled = [compile_factor(problem, f, opt.threads, jit and f.count >= 5000) for f in problem.factors]
    values = {n: v.values.copy() for n, v in problem.variables.items()}

    def linearize(vals):
        rs, js = zip(*(eval_jacobians(problem, cf, vals) for cf in compiled), strict=False)
        cost, w = _robust(problem, rs)
        rs, js = list(rs), [list(j) for j in js]
        for i, wi in enumerate(w):
            if wi is not None:
                rs[i] = rs[i] * wi[:, None]
                js[i] = [J * wi[:, None, None] for J in js[i]]
        ns = normal.assemble(problem, plan, rs, js)
        return cost, ns

    def cost_at(vals):
        return _robust(problem, [eval_residuals(problem, cf, vals) for cf in compiled])[0]

    cost, ns = linearize(values)
    initial_cost = cost
    reuse = None  # (normal system, scaling, factorisation) of the current linearisation
    lam = 0.0 if opt.method == "gn" else opt.lam0
    nu = 2.0
    log: list[IterationLog] = []
    converged, reason = False, "maximum iterations reached"
    it = 0
    costs = [cost]  # the cost after each iteration (the first: at the start)
    for it in range(1, opt.max_iter + 1):
        t0 = time.perf_counter()
        sc = normal.jacobi_scaling(ns)
        ab, B, C, g_e, g_b = normal.scaled(ns, sc)
        gmax = float(max(np.abs(g_e).max(initial=0), np.abs(g_b).max(initial=0)))
        if gmax < opt.gtol:
            converged, reason = True, "gradient below gtol"
            it -= 1  # no step taken in this iteration
            break
        while True:
            try:
                y_e, y_b, fact = normal.factor_and_solve(ab, B, C, g_e, g_b, lam)
                reuse = (ns, sc, fact)
            except np.linalg.LinAlgError:
                lam = max(lam * nu, 1e-9)
                nu *= 2
                if lam > 1e16:
                    raise
                continue
            step = float(np.sqrt(y_e @ y_e + y_b @ y_b))
            pred = 0.5 * (lam * step**2 - (g_e @ y_e + g_b @ y_b))
            if opt.method != "gn" and 0 <= pred <= 0.5 * opt.ftol * cost:
                converged, reason = True, "predicted decrease below ftol"
                if not log or log[-1].iteration != it:
                    it -= 1  # no trial in this iteration: `iterations` is the last one in the log
                break
            trial = _retract(problem, layout, values, y_e / sc.d_e, y_b / sc.d_b)
            new_cost = cost_at(trial)
            gain = (cost - new_cost) / pred if pred > 0 else -1.0
            accepted = opt.method == "gn" or (np.isfinite(new_cost) and gain > 0)
            now = time.perf_counter()
            entry = IterationLog(
                it, new_cost if accepted else cost, step, lam, accepted, now - t0, now - t_start
            )
            log.append(entry)
            if callback:
                callback(entry)
            if accepted:
                break
            lam = max(lam * nu, 1e-12)
            nu *= 2
            t0 = time.perf_counter()
            if lam > 1e20:
                return _finish(
                    problem,
                    layout,
                    plan,
                    compiled,
                    values,
                    cost,
                    initial_cost,
                    it,
                    False,
                    "damping diverged (no descent step found)",
                    log,
                    opt,
                    t_start,
                )
        if converged:
            break
        old_cost = cost
        values = trial
        if opt.method != "gn":
            lam = max(lam * max(opt.lam_down, 1 - (2 * gain - 1) ** 3), opt.lam_min)
            nu = 2.0
        cost, ns = linearize(values)
        if abs(old_cost - cost) <= opt.ftol * max(old_cost, 1e-300):
            converged, reason = True, "relative cost decrease below ftol"
            break
        if step <= opt.xtol:
            converged, reason = True, "step below xtol"
            break
        costs.append(cost)
        w = opt.stall_window
        if w > 0 and len(costs) > w and costs[-1 - w] - cost <= opt.stall_rtol * abs(costs[-1 - w]):
            rel = (costs[-1 - w] - cost) / max(abs(costs[-1 - w]), 1e-300)
            reason = (
                f"stalled: the cost fell by {rel:.2g} (relative) over the last {w} iterations, less than "
                f"{opt.stall_rtol:g}"
            )
            break
    return _finish(
        problem,
        layout,
        plan,
        compiled,
        values,
        cost,
        initial_cost,
        it,
        converged,
        reason,
        log,
        opt,
        t_start,
        ns,
        reuse,
    )


def _finish(
    problem,
    layout,
    plan,
    compiled,
    values,
    cost,
    initial_cost,
    it,
    converged,
    reason,
    log,
    opt,
    t_start,
    ns=None,
    reuse=None,
) -> SolveResult:
    labels = border_labels(problem, layout)
    stats = residual_stats(problem, compiled, values)
    cov, rank, state_cov = None, None, {}
    factors: dict[str, float] = {}
    redundancy: dict[str, float] = {}
    if opt.covariance:
        lin = None
        if ns is None or any(f.name in opt.rescale_blocks for f in problem.factors):
            lin = _jacobians(problem, compiled, values)
        if ns is None:
            ns = normal.assemble(problem, plan, *lin)
        # rank, weak directions and condition from the information with the weights the solve used: a rescale
        # (×1/variance factor of a block) would lift a direction only that block fixes, hiding it
        sc, fact = _factor(ns, reuse)
        cov, rank, state_cov = _covariance(problem, layout, sc, fact, labels, opt)
        wanted = [i for i, f in enumerate(problem.factors) if f.name in opt.rescale_blocks]
        if wanted:
            factors, redundancy, sc_r, fact_r = _variance_components(
                problem, plan, lin, stats, wanted, opt, sc, fact
            )
        if factors:
            cov, rank_r, state_cov = _covariance(problem, layout, sc_r, fact_r, labels, opt)
            rank.null_directions = rank.null_directions or rank_r.null_directions
            rank.rank = min(rank.rank, rank_r.rank)
        if reason.startswith("stalled") and not rank.deficient:
            # the step (from the factorisation above, the solve's weights) over the 1σ the result reports — the
            # rescaled one when opt.rescale_blocks rescaled (`cov` is unscaled; the step is in sc's coordinates)
            sd = np.sqrt(np.diag(cov)) * sc.d_b
            dec, z = normal.parameter_step(fact, ns.g_e / sc.d_e, ns.g_b / sc.d_b, sd)
            moves = float(np.abs(z).max(initial=0.0)) if z is not None else float("inf")
            who = labels[int(np.argmax(np.abs(z)))] if z is not None and z.size else "a parameter"
            if moves <= opt.stall_sigma:
                converged = True  # a flat cost and no parameter that the quadratic model would still move
                reason = reason.replace(
                    "stalled:",
                    f"stalled at the minimum (the Gauss–Newton step would move no parameter by more than "
                    f"{moves:.2g}σ, within stall_sigma = {opt.stall_sigma:g}σ):",
                    1,
                )
            else:
                reason += (
                    f"; not at the minimum: the Gauss–Newton step would still move {who} by {moves:.3g}σ "
                    f"(> stall_sigma = {opt.stall_sigma:g}σ; it would lower the cost by {dec:.3g})"
                )
    return SolveResult(
        values,
        cost,
        initial_cost,
        it,
        converged,
        reason,
        log,
        stats,
        labels,
        cov,
        rank,
        state_cov,
        time.perf_counter() - t_start,
        factors,
        redundancy,
    )


def _jacobians(problem, compiled, values):
    """Whitened residuals and Jacobians at `values`, robust-weighted as the solve's normal system is."""
    rs, js = zip(*(eval_jacobians(problem, cf, values) for cf in compiled), strict=False)
    rs, js = list(rs), [list(j) for j in js]
    _, w = _robust(problem, rs)
    for i, wi in enumerate(w):
        if wi is not None:
            rs[i] = rs[i] * wi[:, None]
            js[i] = [J * wi[:, None, None] for J in js[i]]
    return rs, js


def _next_factor(hist: list[tuple[float, float]]) -> float:
    """The next variance factor to try for the fixed point v = f(v) (f: χ²/redundancy at weights 1/v), from the
    (v, f(v)) pairs so far: f(v) at first, then a secant step on log f(v) − log v (the plain iteration oscillates
    about the fixed point and needs 4–5 refactorisations on Doggy where the secant needs 2–3)."""
    v1, f1 = hist[-1]
    if len(hist) < 2:
        return f1
    v0, f0 = hist[-2]
    x0, x1 = np.log(v0), np.log(v1)
    g0, g1 = np.log(f0) - x0, np.log(f1) - x1
    if g1 == g0 or not np.isfinite(g0 - g1):
        return f1
    x = x1 - g1 * (x1 - x0) / (g1 - g0)
    lo, hi = sorted((np.log(f1), x1))
    span = max(hi - lo, 1e-12)
    return (
        float(np.exp(x)) if lo - span <= x <= hi + span else f1
    )  # a wild secant step: the plain one instead


def _variance_components(problem, plan, lin, stats, wanted, opt: Options, sc, fact):
    """Variance factors χ²_k / r_k of the factors `wanted` (r_k = n_k − tr(J_k H⁻¹ J_kᵀ), H at the current
    weights), iterated: reweight by them, refactorise, recompute, until they change by < 1 % or
    opt.variance_passes refactorisations. Returns (factors, redundancies, scaling, factorisation at those weights);
    a block with no redundancy (r_k ≤ 0) or no χ² keeps its weight and is left out."""
    rs, js = lin
    chi2 = {i: stats[i].chi2_per_dof * stats[i].count * stats[i].dim for i in wanted}
    vf = dict.fromkeys(wanted, 1.0)
    red: dict[int, float] = {}
    hist: dict[int, list[tuple[float, float]]] = {
        i: [] for i in wanted
    }  # (factor applied, its fixed-point map)
    for p in range(opt.variance_passes + 1):
        S = 0.5 * (fact.S + fact.S.T)
        w, V = np.linalg.eigh(S) if S.size else (np.zeros(0), np.zeros((0, 0)))
        good = w > opt.rank_rtol * max(float(w.max(initial=0.0)), 1e-300)
        si = normal.selected_inverse(fact, (V[:, good] / w[good]) @ V[:, good].T)
        new = {}
        for i in wanted:
            a = 1.0 / np.sqrt(vf[i])
            h = normal.factor_leverage(problem, plan, i, [J * a for J in js[i]], sc, si)
            red[i] = stats[i].count * stats[i].dim - h
            new[i] = chi2[i] / red[i] if red[i] > 0 and chi2[i] > 0 and np.isfinite(chi2[i]) else vf[i]
            hist[i].append((vf[i], new[i]))
        del si
        if p > 0 and all(abs(new[i] - vf[i]) <= 1e-2 * vf[i] for i in wanted):
            break
        if p == opt.variance_passes:
            break
        vf = {i: _next_factor(hist[i]) for i in wanted}
        scale = [1.0 / np.sqrt(vf.get(i, 1.0)) for i in range(len(problem.factors))]
        ns = normal.assemble(
            problem,
            plan,
            [r * a for r, a in zip(rs, scale, strict=True)],
            [[J * a for J in j] for j, a in zip(js, scale, strict=True)],
        )
        sc, fact = _factor(ns)
    names = {i: problem.factors[i].name for i in wanted}
    kept = [i for i in wanted if red[i] > 0 and vf[i] != 1.0]
    return {names[i]: vf[i] for i in kept}, {names[i]: red[i] for i in wanted}, sc, fact


def _factor(ns, reuse=None):
    """Jacobi scaling and undamped factorisation of the normal system `ns` (scaling, factorisation)."""
    if reuse is not None and reuse[0] is ns and reuse[2].lam <= REUSE_MAX_LAMBDA:
        return reuse[1], reuse[2]  # the last trial factorised this very system with negligible damping
    sc = normal.jacobi_scaling(ns)
    return sc, normal.factor_and_solve(*normal.scaled(ns, sc), 0.0)[2]


def _covariance(problem: Problem, layout, sc, fact, labels, opt: Options):
    """Marginal covariance of the border block (S⁻¹ on the observable subspace) and chosen states, from the
    scaling and undamped factorisation `_factor` gives."""
    S = 0.5 * (fact.S + fact.S.T)
    n_b = S.shape[0]
    w, V = np.linalg.eigh(S) if n_b else (np.zeros(0), np.zeros((0, 0)))
    tol = opt.rank_rtol * max(float(w.max(initial=0.0)), 1e-300)
    good = w > tol
    S_inv = (V[:, good] / w[good]) @ V[:, good].T
    nulls = []
    for k in np.flatnonzero(~good):
        v = V[:, k] / sc.d_b  # back to unscaled tangent coordinates, then normalise for reading
        v = v / np.abs(v).max()
        nulls.append({labels[i]: float(v[i]) for i in np.flatnonzero(np.abs(v) > 0.1)})
    rank = normal_rank = int(good.sum())
    cov = S_inv / np.outer(sc.d_b, sc.d_b)
    if normal_rank < n_b:
        bad = np.zeros(n_b, bool)
        for k in np.flatnonzero(~good):
            bad |= np.abs(V[:, k]) > 1e-6
        cov[bad, :] = np.nan
        cov[:, bad] = np.nan
    weak = []
    wmax = float(w.max(initial=0.0))
    for k in np.flatnonzero(good & (w < opt.weak_rtol * wmax)):
        v = V[:, k] / np.abs(V[:, k]).max()  # scaled coordinates: comparable across units
        weak.append({labels[i]: float(v[i]) for i in np.flatnonzero(np.abs(v) > 0.1)})
    cond = wmax / float(w[good].min()) if good.any() else float("inf")
    sig = {
        labels[i]: float(np.sqrt(cov[i, i])) if np.isfinite(cov[i, i]) else float("nan") for i in range(n_b)
    }
    report = RankReport(rank, n_b, [float(x) for x in w], nulls, weak, cond, sig)
    state_cov: dict[str, dict[int, np.ndarray]] = {}
    for name, idxs in opt.state_covariance.items():
        var = problem.variables[name]
        t = var.manifold.tangent_dim
        state_cov[name] = {}
        for k in idxs:
            o = int(layout.elim[name][k])
            block = normal.state_marginal(fact, S_inv, o, t)
            d = sc.d_e[o : o + t]
            state_cov[name][k] = block / np.outer(d, d)
    return cov, report, state_cov


def residual_stats(problem: Problem, compiled, values) -> list[BlockStats]:
    out = []
    for f, cf in zip(problem.factors, compiled, strict=False):
        r = eval_residuals(problem, cf, values)
        raw = np.linalg.solve(f.sqrt_info, r.T).T
        s = np.einsum("kd,kd->k", r, r)
        cost = 0.5 * float((f.loss.rho(s) if f.loss else s).sum())
        out.append(
            BlockStats(
                f.name,
                f.count,
                f.dim,
                cost,
                float(s.sum() / r.size),
                [float(x) for x in np.sqrt(np.mean(raw**2, axis=0))],
            )
        )
    return out
