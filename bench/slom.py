"""Benchmark: Doggy batch calibration (12N + 24 unknowns) with the SLOM-style solver vs scipy least_squares.

Each case runs in a fresh subprocess so its peak RSS is its own. Reports wall time, iterations, time per
iteration against N (should be linear), peak memory, accuracy against the simulated truth, and scipy's TRF
(sparse Jacobian, lsmr trust-region solver, rotations re-anchored between solves) on the same problem from the
same start, with a time cap (then the speed-up is a lower bound).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_child(kind: str, n: int, cap_s: float = 0.0, target_cost: float = 0.0) -> dict:
    code = (
        f"import json, bench.slom as b; print('@@' + json.dumps(b._{kind}({n}, {cap_s!r}, {target_cost!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    return {"error": (out.stderr or out.stdout)[-2000:]}


def _peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _setup(n: int):
    from identify import doggy as dg
    from identify.doggy_sim import SimConfig, simulate
    from trajectories.doggy_excitation import make_plan

    sim = simulate(SimConfig(duration=n / 1000.0, seed=0), make_plan(n / 1000.0, 0))
    return sim, dg.build_problem(sim.recording, dg.doggy.TABLE1_INITIAL)


def _ours(n: int, cap_s: float = 0.0, target_cost: float = 0.0) -> dict:
    """One SLOM solve (fresh process)."""
    from identify import doggy as dg
    from identify import slom

    sim, _ = _setup(n)
    t0 = time.perf_counter()
    cal = dg.calibrate(sim.recording, dg.doggy.TABLE1_INITIAL, solver=slom.Options())
    wall = time.perf_counter() - t0
    res = cal.result
    acc = [e.elapsed for e in res.log if e.accepted]
    per_iter = float(np.mean(np.diff(acc))) if len(acc) > 1 else float("nan")  # linearise + solve + trial
    rows = {r["name"]: r for r in dg.parameter_rows(cal, sim.params)}
    targets = ["k_pwm", "k_mi", "b"] + [f"{p}{i}" for p in ("mu_fm", "k_s", "d_s") for i in (1, 2, 3)]
    return {
        "N": n,
        "unknowns": 12 * n + 24,
        "wall_s": wall,
        "iterations": res.iterations,
        "trials": len(res.log),
        "seconds_per_iteration": per_iter,
        "setup_and_covariance_s": wall - per_iter * max(len(acc) - 1, 0),
        "cost": res.cost,
        "initial_cost": res.initial_cost,
        "converged": res.converged,
        "peak_rss_mb": _peak_mb(),
        "max_rel_error_pct": max(abs(rows[k]["error"]) / abs(rows[k]["truth"]) * 100 for k in targets),
        "max_error_sigmas": max(rows[k]["error_sigmas"] for k in targets),
        "rotation_error_deg": {k: rows[f"{k} angle from nominal"]["error"] for k in ("R1", "R2")},
        "rotation_error_sigmas": {k: rows[f"{k} angle from nominal"]["error_sigmas"] for k in ("R1", "R2")},
    }


class _Timeout(Exception):
    pass


def _scipy(n: int, cap_s: float, target_cost: float) -> dict:
    """scipy.optimize.least_squares (TRF, sparse Jacobian from the same AD blocks, x_scale='jac')."""
    import scipy.sparse as sp
    from scipy.optimize import least_squares

    from identify.slom import normal
    from identify.slom.evaluate import compile_factor, eval_jacobians, eval_residuals

    _, pr = _setup(n)
    lay = normal.make_layout(pr)
    compiled = [compile_factor(pr, f) for f in pr.factors]
    n_e, n_b = lay.n_e, lay.n_b

    def cols_of(ref, count, t):
        if ref.name in lay.elim:
            o = lay.elim[ref.name]
        else:
            o = n_e + lay.border[ref.name]
        idx = ref.index if ref.index is not None else np.zeros(count, int)
        return o[idx]

    rows_l, cols_l = [], []
    r0 = 0
    for f in pr.factors:
        for ref in f.variables:
            t = pr.variables[ref.name].manifold.tangent_dim
            c = cols_of(ref, f.count, t)
            rr = r0 + np.arange(f.count)[:, None, None] * f.dim + np.arange(f.dim)[None, :, None]
            cc = c[:, None, None] + np.arange(t)[None, None, :]
            rr, cc = np.broadcast_arrays(rr, cc)
            rows_l.append(rr.ravel())
            cols_l.append(cc.ravel())
        r0 += f.count * f.dim
    m = r0
    rows, cols = np.concatenate(rows_l), np.concatenate(cols_l)
    marker = sp.coo_matrix(
        (np.arange(1, len(rows) + 1, dtype=float), (rows, cols)), shape=(m, n_e + n_b)
    ).tocsr()
    order = marker.data.astype(np.int64) - 1  # csr.data[i] = vals[order[i]] (no duplicates by construction)

    anchor = {k: v.values.copy() for k, v in pr.variables.items()}

    def values_at(z):
        out = {}
        for name, var in pr.variables.items():
            t = var.manifold.tangent_dim
            if name in lay.elim:
                d = z[lay.elim[name][:, None] + np.arange(t)]
            else:
                d = z[n_e + lay.border[name][:, None] + np.arange(t)]
            out[name] = var.manifold.plus(anchor[name], d)
        return out

    t0 = time.perf_counter()
    best = {"cost": np.inf, "t": 0.0}
    reached = {"t": None}

    def fun(z):
        if time.perf_counter() - t0 > cap_s:
            raise _Timeout
        r = np.concatenate([eval_residuals(pr, cf, values_at(z)).ravel() for cf in compiled])
        c = 0.5 * float(r @ r)
        if c < best["cost"]:
            best["cost"], best["t"] = c, time.perf_counter() - t0
        if reached["t"] is None and c <= target_cost:
            reached["t"] = time.perf_counter() - t0
        return r

    def jac(z):
        if time.perf_counter() - t0 > cap_s:
            raise _Timeout
        vals = values_at(z)
        data = np.concatenate([J.reshape(-1) for cf in compiled for J in eval_jacobians(pr, cf, vals)[1]])
        J = marker.copy()
        J.data = data[order]
        return J

    outer, nfev, status, timed_out, last = 0, 0, None, False, np.inf
    try:
        for outer in range(1, 6):  # noqa: B007 (reported) — re-anchor rotations (and everything) between solves
            z0 = np.zeros(n_e + n_b)
            res = least_squares(
                fun,
                z0,
                jac=jac,
                method="trf",
                x_scale="jac",
                tr_solver="lsmr",
                max_nfev=200,
                ftol=1e-10,
                xtol=1e-10,
                gtol=1e-10,
            )
            nfev += res.nfev
            status = int(res.status)
            anchor.update(values_at(res.x))
            if res.cost >= last * (1 - 1e-9):
                break
            last = res.cost
    except _Timeout:
        timed_out = True
    return {
        "N": n,
        "wall_s": time.perf_counter() - t0,
        "timed_out": timed_out,
        "cap_s": cap_s,
        "best_cost": best["cost"],
        "time_to_best_s": best["t"],
        "target_cost": target_cost,
        "time_to_target_s": reached["t"],
        "outer_solves": outer,
        "nfev": nfev,
        "status": status,
        "jacobian_nnz": int(len(rows)),
        "residuals": m,
        "peak_rss_mb": _peak_mb(),
    }


def run(quick: bool) -> dict:
    sizes = [2000, 5000] if quick else [7500, 15000, 30000, 60000]
    ours = []
    for n in sizes:
        r = _run_child("ours", n)
        print(
            f"   slom N={n}: {r.get('wall_s', float('nan')):.1f} s, {r.get('iterations')} it, "
            f"{r.get('peak_rss_mb', float('nan')):.0f} MB",
            flush=True,
        )
        ours.append(r)
    ok = [r for r in ours if "wall_s" in r]
    per_iter = {str(r["N"]): r["seconds_per_iteration"] for r in ok}
    if len(ok) >= 2:
        Ns = np.array([r["N"] for r in ok], float)
        ts = np.array([r["seconds_per_iteration"] for r in ok])
        slope, icpt = np.polyfit(Ns, ts, 1)
        fit = {
            "seconds_per_iteration_per_1000_steps": slope * 1000,
            "intercept_s": icpt,
            "max_rel_residual": float(np.max(np.abs(ts - (slope * Ns + icpt)) / ts)),
        }
    else:
        fit = {}
    comparisons = []
    cmp_sizes = [2000] if quick else [5000, 60000]
    for n in cmp_sizes:
        mine = next((r for r in ok if r["N"] == n), None) or _run_child("ours", n)
        cap = 60.0 if quick else 300.0
        target = mine["cost"] * (1 + 1e-6)
        sc = _run_child("scipy", n, cap, target)
        t_sc = sc.get("time_to_target_s")
        speedup = (t_sc / mine["wall_s"]) if t_sc else (sc.get("wall_s", cap) / mine["wall_s"])
        comparisons.append(
            {
                "N": n,
                "slom_wall_s": mine["wall_s"],
                "slom_cost": mine["cost"],
                "scipy": sc,
                "speedup": speedup,
                "speedup_is_lower_bound": t_sc is None,
            }
        )
        print(
            f"   scipy N={n}: reached target: {t_sc is not None}, speed-up "
            f"{'≥ ' if t_sc is None else ''}{speedup:.1f}×",
            flush=True,
        )
    return {
        "benchmark": "slom doggy calibration",
        "quick": quick,
        "cpu_count": os.cpu_count(),
        "runs": ours,
        "seconds_per_iteration": per_iter,
        "linear_fit": fit,
        "scipy": comparisons,
        "targets": {"N60000_wall_s_max": 60, "N60000_peak_gb_max": 6, "speedup_min": 10},
    }


if __name__ == "__main__":
    print(json.dumps(run("--quick" in sys.argv), indent=1, default=float))
