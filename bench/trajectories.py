"""Excitation design: poise (Fourier series, κ surrogate with exact gradients, exact grid Jacobians) against a
FIGAROH-style baseline (cubic splines through waypoints, cond(W) and the constraints by finite differences), on
the same robot, limits, grid and time budget — and poise designing the baseline's own splines (same waypoints, same
grid), so that the derivatives are compared apart from the parametrisation. Side by side too on the iCub right
arm's 60 s acceptance problem and on TUlip standing on both soles, where the baseline is given poise's balance
constraints (the closed chain, the ZMP margin, the load share) by finite differences — which no peer offers."""

from __future__ import annotations

import sysconfig
import time
from dataclasses import replace
from pathlib import Path

import casadi as ca
import numpy as np

from formats.errors import DataError
from robots import dynamics as dyn
from robots.base_params import RegressorSpec, cached_dynamic_base
from robots.conditioning import kappa, normalised_columns
from robots.interrupt import interruptible
from robots.registry import get_model
from trajectories.excitation import ExcitationSettings, optimise
from trajectories.spline import SplineTrajectory
from trajectories.verify import acceleration_limits, check_trajectory

UR5 = (
    Path(sysconfig.get_paths()["purelib"])
    / "cmeel.prefix/share/example-robot-data/robots/ur_description/urdf/ur5_robot.urdf"
)


class _Numeric(ca.Callback):
    """A numpy function of x as a CasADi node whose derivatives CasADi takes by finite differences."""

    def __init__(self, name: str, fn, nx: int, ny: int):
        ca.Callback.__init__(self)
        self.fn, self.nx, self.ny = fn, nx, ny
        self.construct(name, {"enable_fd": True, "fd_method": "forward"})

    def get_n_in(self):
        return 1

    def get_n_out(self):
        return 1

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self.nx, 1)

    def get_sparsity_out(self, i):
        return ca.Sparsity.dense(self.ny, 1)

    def eval(self, arg):
        return [ca.DM(self.fn(np.asarray(arg[0]).ravel()))]


def _fd_ipopt(name: str, objective, constraints, x0: np.ndarray, lbg, ubg, max_iter: int) -> tuple:
    """IPOPT on numpy callbacks whose every derivative CasADi takes by forward differences (L-BFGS Hessian): the
    baseline's solver. Returns (x, iterations, seconds)."""
    nx, ng = len(x0), len(lbg)
    fnode = _Numeric(f"{name}_f", lambda x: [objective(x)], nx, 1)
    gnode = _Numeric(f"{name}_g", constraints, nx, ng)
    x = ca.MX.sym("x", nx)
    opts = {"ipopt.print_level": 0, "print_time": False, "ipopt.max_iter": max_iter, "ipopt.sb": "yes",
            "ipopt.hessian_approximation": "limited-memory"}  # fmt: skip
    solver = ca.nlpsol(name, "ipopt", {"x": x, "f": fnode(x), "g": gnode(x)}, opts)
    t0 = time.perf_counter()
    with interruptible():
        sol = solver(x0=x0, lbg=lbg, ubg=ubg)
    return np.asarray(sol["x"]).ravel(), int(solver.stats()["iter_count"]), time.perf_counter() - t0


def _baseline_result(check, iterations: int, secs: float) -> dict:
    return {
        "method": "splines + cond(W) + finite differences (FIGAROH-style)",
        "kappa_scaled": check.kappa_scaled,
        "kappa": check.kappa,
        "iterations": iterations,
        "seconds": secs,
        "seconds_per_iteration": secs / max(1, iterations),
        "feasible": check.ok,
        "problems": check.problems,
    }


def _coupled(model, q: np.ndarray) -> np.ndarray:
    """The description's coupled position limits (a·q ≤ b: the iCub shoulder's tendons) at every sample, minus b."""
    return np.concatenate([q @ A - b for A, b in zip(model.coupled_A, model.coupled_b, strict=True)] + [[]])


def baseline(model, settings: ExcitationSettings, waypoints: int, seed: int, max_iter: int) -> dict:
    """Splines through `waypoints` interior points per joint (at rest at both ends), IPOPT on cond(W) and the
    same limits, coupled ones included (and q̈ = 0 at both ends, as poise's), every derivative by finite differences (as FIGAROH does)."""
    rng = np.random.default_rng(seed)
    base, params = model.root, next(iter(model.params))
    db = cached_dynamic_base(model, RegressorSpec("torque", base))
    n, T = model.nq, settings.duration
    times = np.linspace(0, T, waypoints + 2)
    lo, hi = model.lower + settings.position_margin, model.upper - settings.position_margin
    mid = (lo + hi) / 2
    K = settings.samples * int(round(T / settings.period))
    t = np.linspace(0, T, K)
    vmax = model.velocity_limit * settings.velocity_fraction
    amax = acceleration_limits(model, settings.acceleration_default) * settings.acceleration_fraction
    tmax = model.effort_limit * settings.torque_fraction

    def spline(x):
        Q = np.vstack([mid, x.reshape(waypoints, n), mid])
        return SplineTrajectory(times, Q)

    def cond(x):
        q, qd, qdd = spline(x).sample(t)
        W = dyn.torque_regressor(model, q, qd, qdd, base)[..., db.independent].reshape(-1, db.rank)
        return kappa(normalised_columns(W)[0])

    def cons(x):
        q, qd, qdd = spline(x).sample(t)
        tau = dyn.rnea(model, q, qd, qdd, params, base)
        return np.concatenate([(q - mid).ravel(), qd.ravel(), qdd.ravel(), tau.ravel(), qdd[[0, -1]].ravel(),
                               _coupled(model, q)])  # fmt: skip

    half = (hi - lo) / 2
    rest = np.zeros(2 * n)  # q̈ = 0 where it starts and ends, as poise's designs (no step of torque)
    bound = np.concatenate([np.tile(half, K), np.tile(vmax, K), np.tile(amax, K), np.tile(tmax, K), rest])
    coupled = np.zeros(K * len(model.coupled_b))
    lbg, ubg = np.concatenate([-bound, coupled - np.inf]), np.concatenate([bound, coupled])
    x0 = (mid + rng.uniform(-0.3, 0.3, (waypoints, n)) * half).ravel()
    xs, iterations, secs = _fd_ipopt("baseline", cond, cons, x0, lbg, ubg, max_iter)
    check = check_trajectory(model, spline(xs), base, params, dt=0.002)
    return _baseline_result(check, iterations, secs)


def standing_baseline(model, settings: ExcitationSettings, waypoints: int, seed: int, max_iter: int) -> dict:
    """The baseline on a biped standing on both soles, with the constraints poise's double-support design has:
    splines of the closed chain's independent coordinates through `waypoints` interior points (starting and
    ending in the placement's posture, at rest), the dependent ones solved at every sample; cond of the column-
    scaled base regressor of (Fz, Mx, My); every joint's position, velocity and acceleration, the ZMP `zmp_margin`
    inside the soles' polygon, each sole's lever-rule share of the load and the joint torques of the split of the
    load that needs least, all on the grid — every derivative by finite differences. The placement is the one poise's
    design of the same seed stands in."""
    from robots.dynamics import zmp_of
    from trajectories.balance_excitation import (
        other_share,
        share_coefficients,
        support_halfplanes,
        zmp_spec,
    )
    from trajectories.closed_chain import ClosedChainTrajectory, make_chain
    from trajectories.verify import base_regressor_rows, double_support_split

    rng = np.random.default_rng(seed)
    base = settings.base or (model.stance or {}).get("base") or next(iter(model.bases))
    params = settings.params or next(iter(model.params))
    chain = make_chain(model, base, params, rng)  # as `optimise_balance(seed=seed)` draws it
    ind = list(chain.independent)  # q̈ = 0 at both ends asked of these: with q̇ = 0 there, the rest follow
    nI, T = len(ind), settings.duration
    times = np.linspace(0, T, waypoints + 2)
    t = np.linspace(0, T, settings.samples * int(round(T / settings.period)))
    lo, hi = model.lower + settings.position_margin, model.upper - settings.position_margin
    vmax = model.velocity_limit * settings.velocity_fraction
    amax = acceleration_limits(model, settings.acceleration_default) * settings.acceleration_fraction
    tmax = model.effort_limit * settings.torque_fraction
    N, d, _ = support_halfplanes(model, chain)
    phi = dyn.standard_parameters(model, params)
    start = chain.nominal[ind]

    def states(x):
        Q = np.vstack([start, x.reshape(waypoints, nI), start])
        return ClosedChainTrajectory(model, chain, SplineTrajectory(times, Q)).sample(t)

    def cond(x):
        try:
            W = base_regressor_rows(
                model, zmp_spec(base), "double-support", settings.simplified, *states(x), chain
            )
        except DataError:  # the chain does not close along this motion: IPOPT cuts its step back
            return np.nan
        return kappa(normalised_columns(W)[0])

    share = share_coefficients(model, chain)  # the placement's: once, not per finite-difference evaluation

    def cons(x):
        try:
            q, qd, qdd = states(x)
        except DataError:
            return np.full(len(lbg), np.nan)
        w = dyn.base_wrench_regressor(model, q, qd, qdd, base, params) @ phi
        zmp = zmp_of(w)
        ratio = double_support_split(model, chain, q, qd, qdd, params, tmax).ratio
        return np.concatenate([q.ravel(), qd.ravel(), qdd.ravel(), (zmp @ N.T - d).ravel(),
                               other_share(model, chain, zmp, share), ratio, qdd[[0, -1]][:, ind].ravel()])  # fmt: skip

    K = len(t)
    lbg = np.concatenate([np.tile(lo, K), np.tile(-vmax, K), np.tile(-amax, K), np.full(K * len(d), -np.inf),
                          np.full(K, settings.load_share), np.zeros(K), np.zeros(2 * nI)])  # fmt: skip
    ubg = np.concatenate([np.tile(hi, K), np.tile(vmax, K), np.tile(amax, K),
                          np.full(K * len(d), -settings.zmp_margin), np.full(K, 1 - settings.load_share),
                          np.ones(K), np.zeros(2 * nI)])  # fmt: skip
    x0 = (start + rng.uniform(-1, 1, (waypoints, nI)) * settings.amplitude / 2).ravel()
    xs, iterations, secs = _fd_ipopt("standing_baseline", cond, cons, x0, lbg, ubg, max_iter)
    Q = np.vstack([start, xs.reshape(waypoints, nI), start])
    traj = ClosedChainTrajectory(model, chain, SplineTrajectory(times, Q))
    check = check_trajectory(model, traj, base, params, 0.002, settings.acceleration_default, settings.simplified,
                             zmp_margin=settings.zmp_margin, load_share=settings.load_share,
                             collision_margin=None)  # fmt: skip
    return _baseline_result(check, iterations, secs) | {"min_zmp_margin_m": check.min_zmp_margin_m}


def _ours(model, settings: ExcitationSettings, seed: int) -> dict:
    """One poise start, its result checked as the baseline's is (links that meet are a problem on both sides)."""
    r = optimise(model, settings, seed=seed)
    check = check_trajectory(model, r.trajectory, model.root, next(iter(model.params)), dt=0.002)
    return {"seed": seed, "kappa_scaled": check.kappa_scaled, "kappa": check.kappa, "iterations": r.iterations,
            "seconds": r.seconds, "seconds_per_iteration": r.seconds / max(1, r.iterations), "feasible": check.ok,
            "problems": check.problems, "min_self_clearance_m": check.min_self_clearance_m}  # fmt: skip


BASELINE_WAYPOINTS = (
    6  # interior waypoints of the baseline's splines, and of poise's spline designs beside it
)
ICUB_START_BUDGET_S = 120.0  # issue 13: one start of the iCub right arm's 60 s design within 2 min on 2 cores
ICUB_KAPPA_LIMIT = 100.0  # issue 13: κ of its base torque regressor (column-scaled here)


def icub_acceptance(seed: int) -> dict:
    """Issue 13's iCub acceptance design, one start: `poise plan trajectory icub-right-arm --duration 60 --period
    10 --harmonics 5 --samples 60 --max-iter 200` (self-collision on); `seconds` without the final 1 ms check."""
    s = ExcitationSettings(period=10.0, duration=60.0, harmonics=5, samples=60, max_iter=200)
    t0 = time.perf_counter()
    r = optimise(get_model("icub-right-arm"), s, seed=seed)
    total = time.perf_counter() - t0
    v = r.verification
    return {
        "seed": seed,
        "kappa": v["kappa"],
        "kappa_scaled": v["kappa_scaled"],
        "kappa_scaled_within_limit": v["kappa_scaled"] <= ICUB_KAPPA_LIMIT,
        "base_parameters": len(r.base_symbols),
        "iterations": r.iterations,
        "seconds": r.seconds,
        "seconds_with_check": total,
        "within_budget": r.seconds <= ICUB_START_BUDGET_S,
        "min_self_clearance_m": v.get("min_self_clearance_m"),
        "feasible": v["ok"],
        "problems": v["problems"],
    }


def run(quick: bool = False) -> dict:
    model = get_model(str(UR5))
    # the baseline has no self-collision constraints, so neither has poise here: the same problem on both sides
    s = ExcitationSettings(period=10.0, duration=20.0, harmonics=4, samples=40 if quick else 60,
                           max_iter=60 if quick else 200, sharpness=(8.0, 32.0), self_collision=False)  # fmt: skip
    out: dict = {"robot": "ur5 (example-robot-data)", "grid_per_period": s.samples, "duration_s": s.duration,
                 "constraints": "position (margin), velocity, acceleration, torque (RNEA) on the grid; "
                                "no self-collision on either side"}  # fmt: skip
    seeds = range(1 if quick else 3)  # the same starts and iteration cap on every side
    out["poise"] = [_ours(model, s, seed) for seed in seeds]
    # what the baseline cannot do, for reference: the same design keeping the links ≥ 10 mm apart
    out["poise_self_collision"] = [
        _ours(model, replace(s, self_collision=True), seed) for seed in range(1 if quick else 2)
    ]
    # the baseline's parametrisation designed by poise: splines through the same waypoints, on the same grid (the
    # baseline's samples over the whole duration)
    spline = replace(s, parametrisation="spline", waypoints=BASELINE_WAYPOINTS, period=s.duration,
                     samples=s.samples * int(round(s.duration / s.period)))  # fmt: skip
    out["poise_spline"] = [_ours(model, spline, seed) for seed in seeds]
    out["baseline"] = [baseline(model, s, BASELINE_WAYPOINTS, seed, s.max_iter) for seed in seeds]
    if not quick:
        out["icub_right_arm_60s"] = [icub_acceptance(seed) for seed in (1, 7)]
        tulip = get_model("tulip")
        ts = ExcitationSettings(period=10.0, duration=20.0, harmonics=3, samples=40, max_iter=200,
                                simplified=True, motion="double-support")  # fmt: skip
        r = optimise(tulip, ts, seed=1)
        out["tulip_double_support"] = {
            "kappa_scaled": r.verification["kappa_scaled"],
            "kappa": r.verification["kappa"],
            "base_parameters": len(r.base_symbols),
            "thesis_kappa_simplified": 74131,
            "min_zmp_margin_m": r.verification["min_zmp_margin_m"],
            "seconds": r.seconds,
            "iterations": r.iterations,
            "feasible": r.verification["ok"],
        }
        out["tulip_double_support_fourier_vs_spline"] = standing_parametrisations()
        out["icub_right_arm_side_by_side"] = icub_side_by_side()
    out["tulip_double_support_side_by_side"] = standing_side_by_side(quick)
    return out


def _checked(r) -> dict:
    """A poise design's own fine-grid check (2 ms), as the baseline's result reports it."""
    v = r.verification
    return {"kappa_scaled": v["kappa_scaled"], "kappa": v["kappa"], "iterations": r.iterations,
            "seconds": r.seconds, "seconds_per_iteration": r.seconds / max(1, r.iterations), "feasible": v["ok"],
            "problems": v["problems"], "min_zmp_margin_m": v.get("min_zmp_margin_m")}  # fmt: skip


def standing_side_by_side(quick: bool = False, seed: int = 3) -> dict:
    """TUlip on both soles, the acceptance's bounds (10 s, ZMP 60 mm inside, each sole ≥ 25 % of the load, a third
    of the velocity limits), κ of the column-scaled simplified ZMP base regressor minimised on the same 64-sample
    grid and the same placement by poise (Fourier series; and splines through the baseline's waypoints) and by the
    FIGAROH-style baseline (`standing_baseline`), each given the same iteration cap; no self-collision on any side."""
    cap = 20 if quick else 100
    s = ExcitationSettings(period=10.0, duration=10.0, harmonics=7, samples=64, max_iter=cap, simplified=True,
                           motion="double-support", zmp_margin=0.06, load_share=0.25, velocity_fraction=0.3,
                           self_collision=False)  # fmt: skip
    spline = replace(s, parametrisation="spline", waypoints=BASELINE_WAYPOINTS)
    tulip = get_model("tulip")
    return {
        "robot": "tulip, double support",
        "constraints": "every joint's position (margin), velocity, acceleration; ZMP 60 mm inside the soles' polygon; "
        "load share ≥ 0.25 per sole; joint torques of the least-demanding split; on the grid; no self-collision",
        "iteration_cap": cap,
        "poise": _checked(optimise(tulip, s, seed=seed)),
        "poise_spline": _checked(optimise(tulip, spline, seed=seed)),
        "baseline": standing_baseline(tulip, s, BASELINE_WAYPOINTS, seed, cap),
    }


def icub_side_by_side(seed: int = 1, cap: int = 100) -> dict:
    """The iCub right arm's 60 s acceptance design (5 harmonics, 60 samples a period) and the baseline on the same
    grid and limits, both without self-collision rows (the baseline has none), the same iteration cap."""
    model = get_model("icub-right-arm")
    s = ExcitationSettings(
        period=10.0, duration=60.0, harmonics=5, samples=60, max_iter=cap, self_collision=False
    )
    return {"iteration_cap": cap, "poise": _ours(model, s, seed),
            "baseline": baseline(model, s, BASELINE_WAYPOINTS, seed, cap)}  # fmt: skip


def standing_parametrisations(seed: int = 3) -> dict:
    """TUlip in double support at the twin test's options, as a Fourier series (7 harmonics) and as a spline (20
    waypoints): κ, time, iterations and the forecast at the twin's white-noise equivalent (README, Standing
    splines)."""
    from poise.workflows.plan_forecast import forecast_plans
    from trajectories.plan import make_plan

    tulip = get_model("tulip")
    s = ExcitationSettings(period=10.0, duration=10.0, harmonics=7, samples=64, max_iter=200, simplified=True,
                           criterion="logvar", scaling="none", motion="double-support", zmp_margin=0.06,
                           load_share=0.25, velocity_fraction=0.3)  # fmt: skip
    out = {}
    for name, settings in (("fourier_7_harmonics", s),
                           ("spline_20_waypoints", replace(s, parametrisation="spline", waypoints=20))):  # fmt: skip
        r = optimise(tulip, settings, seed=seed)
        plan = make_plan("tulip", tulip, r, settings, seed, 100.0)
        fc = forecast_plans([plan], [name], [0.49, 1.42, 1.29]).forecast
        rel = fc.rel_se_pct[np.isfinite(fc.rel_se_pct)]
        out[name] = {"kappa_scaled": r.verification["kappa_scaled"], "seconds": r.seconds,
                     "iterations": r.iterations, "feasible": r.verification["ok"],
                     "forecast_determined": len(fc.determined()[0]),
                     "forecast_median_rel_se_pct": float(np.median(rel))}  # fmt: skip
    return out
