"""CasADi NLPs for problems 1 (free CoM, margin d_s) and 2 (CoM at the support-polygon centre), solved by IPOPT.

Joint-space formulation: decision variables are all joint angles plus, per placement, the other foot's pose
(x, y, psi) and a separating line (phi, c) that proves the feet disjoint. Foot-flat and foot-at-placement
are equality constraints. The objective is the smooth log-κ surrogate (criteria.py) with a continuation in
its sharpness p; IPOPT gets the exact Hessian of the Lagrangian (lagrangian.py, objective part objective.py).
The true κ is always reported. Hull and bounding-box structure is fixed per solve and re-detected afterwards
(re-solving from the result while it changes), so margins are exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import casadi as ca
import numpy as np

from design import geometry as geo
from design.criteria import base_model, design_matrix, kappa
from design.lagrangian import LagrangianHessian
from design.objective import CasadiObjective
from design.sampler import PostureSet
from design.uncertainty import CopSpec, Ellipsoid, cop_spec
from robots.interrupt import interruptible
from robots.memo import per_model
from robots.stance import flat_at_pose_sym, separation_bounds, separation_sym
from robots.stance_spec import design_params, other_base, resolve_base, stance_spec
from robots.tree import RobotModel


def placement_bounds(model: RobotModel, s: Settings) -> list[list[float]]:
    """Bounds [[lo, hi] for x, y (m), yaw (rad)] of the other foot's placement, from the robot's stance
    (the centred-CoM problem raises y to the stance's `centred_min_y`)."""
    spec = stance_spec(model)
    bounds = [list(b) for b in spec.placement_bounds]
    if s.centred and spec.centred_min_y is not None:
        bounds[1][0] = max(bounds[1][0], spec.centred_min_y)
    return bounds


# Continuation of the surrogate's sharpness, measured on 6 starts × 50 postures (bench): on problem 1,
# 8 → 64 needs 32 % fewer iterations than 4 → 16 → 64 for a median κ 2 % higher; on problem 2 the
# gentler 4 → 16 → 64 found the lower best κ (394.4 vs 401.1) and already takes < 60 s a start.
DEFAULT_SHARPNESS = {"free-com": (8.0, 64.0), "centred-com": (4.0, 16.0, 64.0)}


@dataclass
class Settings:
    """What to design: problem, margins (m), ϑ_b uncertainty (ball radius in m, or an identification's
    ellipsoid, which also moves the design CoP to its estimate), solver knobs."""

    problem: str = "free-com"  # or "centred-com"
    margin: float = 0.08
    feet_gap: float | None = None  # m; None: the robot description's [stance] feet_gap (else FEET_GAP)
    uncertainty: float = 0.0
    ellipsoid: Ellipsoid | None = None
    params: str | None = None  # None: the robot's design parameter set (its description's main set)
    base: str | None = None  # None: the robot's stance base
    sharpness: tuple[float, ...] | None = None  # None: DEFAULT_SHARPNESS of the problem
    max_iter: int = 800
    max_rounds: int = 4
    load_share: float = 0.0  # each sole's share of the weight by the lever rule ≥ this (0: no constraint)

    def __post_init__(self):
        if self.sharpness is None:
            self.sharpness = DEFAULT_SHARPNESS[self.problem]

    def resolved(self, model: RobotModel) -> Settings:
        """These settings with the robot's defaults filled in (base, parameter set, feet gap)."""
        if self.base is not None and self.params is not None and self.feet_gap is not None:
            return self
        return replace(
            self,
            base=resolve_base(model, self.base),
            params=design_params(model) if self.params is None else self.params,
            feet_gap=stance_spec(model).feet_gap if self.feet_gap is None else self.feet_gap,
        )

    @property
    def centred(self) -> bool:
        return self.problem == "centred-com"

    @property
    def required_margin(self) -> float:
        return 0.0 if self.centred else self.margin

    def cop_spec(self, model: RobotModel) -> CopSpec | None:
        """The CoP centre and robust-margin term the NLPs use (None: design parameters, no robust term)."""
        return cop_spec(model, self.base, self.uncertainty, self.ellipsoid)


@dataclass
class SolveResult:
    """Optimised posture set, true κ before/after, solver statistics."""

    postures: PostureSet
    kappa_initial: float
    kappa: float
    kappa_other: float  # true κ of the result for the robot's other base
    wall_s: float
    stats: dict = field(default_factory=dict)

    @property
    def kappa_left(self) -> float:
        """Old name of `kappa_other` (TUlip's other base is the left sole)."""
        return self.kappa_other


@per_model
def posture_function(model: RobotModel, params: str, base: str, spec: CopSpec | None = None) -> ca.Function:
    """Per posture: equalities (flat + at placement, 6), CoP (2), G = R_xy S R_xyᵀ (3).

    CoP and S come from `spec` (default: the parameter set `params`, S = I)."""
    q = ca.SX.sym("q", model.nq)
    pose = ca.SX.sym("pose", 3)
    eq = flat_at_pose_sym(model, q, params, base, pose)
    bm = base_model(model, base)
    Rxy = bm.regressor_sym(q)[0:2, :]
    theta = bm.values(params) if spec is None or spec.theta is None else np.array(spec.theta)
    cop = Rxy @ ca.DM(theta)
    G = Rxy @ Rxy.T if spec is None or spec.shape is None else Rxy @ ca.DM(np.array(spec.shape)) @ Rxy.T
    fn = ca.Function("posture", [q, pose], [eq, cop, ca.vertcat(G[0, 0], G[0, 1], G[1, 1])])
    return fn


@per_model
def _mapped_posture(model: RobotModel, params: str, base: str, n: int, spec: CopSpec | None) -> ca.Function:
    """The per-posture function mapped over n postures; cached so CasADi reuses its derivatives. Not
    JIT-compiled: the exact Hessian needs second derivatives, and compiling those per structure cost ≈ 8 s
    a build while interpreted evaluation costs 1–6 ms an iteration (15–50 postures)."""
    return posture_function(model, params, base, spec).map(n)


def _structures(model: RobotModel, poses: np.ndarray, base: str) -> list[geo.Structure]:
    return [geo.structure(model, p, base) for p in poses]


def _varies(expr, V: ca.SX) -> bool:
    """Whether a constraint depends on the variables (constant ones are left out of the NLP)."""
    return isinstance(expr, ca.SX) and ca.depends_on(expr, V)


def _geometry(model: RobotModel, s: Settings, placement: np.ndarray, structs: list[geo.Structure]):
    """Feet separation, hull convexity, centring and margin constraints as one SX function of (CoP 2×N,
    G 3×N, placement variables 5×P), with bounds: small, so its derivatives are cheap to build and run."""
    s = s.resolved(model)
    N, P = len(placement), len(structs)
    cop, G, PL = ca.SX.sym("cop", 2, N), ca.SX.sym("G", 3, N), ca.SX.sym("pl", 5, P)
    V = ca.vertcat(ca.vec(cop), ca.vec(G), ca.vec(PL))
    spec = s.cop_spec(model)
    rb, ro = geo.foot_rects(model, s.base)
    g, lbg, ubg, names = [], [], [], []  # names: (what, unit) per entry of lbg
    d = s.required_margin + (1e-7 if s.required_margin > 0 else 0.0)
    for j, st in enumerate(structs):
        verts = [ca.DM(v) for v in rb] + geo.placed_corners_sym(ro, PL[0, j], PL[1, j], PL[2, j])
        g += separation_sym(verts[:4], verts[4:], PL[3, j], PL[4, j])
        lo, hi = separation_bounds(s.feet_gap)
        lbg += [[v] for v in lo]
        ubg += [[v] for v in hi]
        names += [(f"feet apart (placement {j})", "m")] * len(lo)
        for c in geo.convexity_sym(verts, st.hull):
            if _varies(c, V):  # turns between three base-foot corners are constant: left out
                g.append(c)
                lbg.append([0.0])
                ubg.append([np.inf])
                names.append((f"support hull convex (placement {j})", "m²"))
        normals = geo.edge_normals_sym(verts, st.hull)
        idx = np.flatnonzero(placement == j)
        if s.centred:
            imin_x, imax_x, imin_y, imax_y = st.bbox
            centre = ca.vertcat(
                (verts[imin_x][0] + verts[imax_x][0]) / 2, (verts[imin_y][1] + verts[imax_y][1]) / 2
            )
            for k, v in enumerate(verts):  # keep the chosen extreme corners extreme
                for i_ext, ax, sign in ((imin_x, 0, 1), (imax_x, 0, -1), (imin_y, 1, 1), (imax_y, 1, -1)):
                    c = sign * (v[ax] - verts[i_ext][ax])
                    if k != i_ext and _varies(c, V):
                        g.append(c)
                        lbg.append([0.0])
                        ubg.append([np.inf])
                        names.append((f"support box corners (placement {j})", "m"))
            for i in idx:
                g.append(cop[:, i] - centre)
                lbg.append(np.zeros(2))
                ubg.append(np.zeros(2))
                names.append((f"CoP at the support centre (posture {i})", "m"))
        if (
            s.load_share > 0
        ):  # lever rule along the soles' centres: s = 0 all on the base sole, 1 all on the other
            cb = ca.DM(rb.mean(axis=0))
            co = (verts[4] + verts[5] + verts[6] + verts[7]) / 4
            axis = co - cb
            for i in idx:
                g.append(ca.dot(cop[:, i] - cb, axis) / ca.dot(axis, axis))
                lbg.append([s.load_share])
                ubg.append([1.0 - s.load_share])
                names.append(
                    (f"load share {s.load_share:g}–{1 - s.load_share:g} (posture {i})", "of the weight")
                )
        for i in idx:
            for k, ne in enumerate(normals):
                a = verts[st.hull[k]]
                m = ca.dot(ne, cop[:, i] - a)
                if spec is not None and spec.scale > 0:
                    Gi = G[:, i]
                    quad = ne[0] ** 2 * Gi[0] + 2 * ne[0] * ne[1] * Gi[1] + ne[1] ** 2 * Gi[2]
                    m = m - spec.scale * ca.sqrt(quad + 1e-12)
                g.append(m)
                lbg.append([d])
                ubg.append([np.inf])
                robust = "robust " if spec is not None and spec.scale > 0 else ""
                names.append((f"{robust}CoP margin ≥ {s.required_margin * 1e3:g} mm (posture {i})", "m"))
    fn = ca.Function("geometry", [cop, G, PL], [ca.vertcat(*g)])
    return fn, lbg, ubg, [nm for nm, b in zip(names, lbg, strict=True) for _ in np.ravel(b)]


def _build(model: RobotModel, s: Settings, placement: np.ndarray, structs: list[geo.Structure]):
    """Assemble the NLP for fixed structures; returns (nlp dict, bounds, unpack info)."""
    s = s.resolved(model)
    N, P, nq = len(placement), len(structs), model.nq
    X = ca.MX.sym("x", N * nq + 5 * P)
    Q = ca.reshape(X[: N * nq], nq, N)
    PL = ca.reshape(X[N * nq :], 5, P)
    poses = ca.horzcat(*[PL[:3, j] for j in placement])
    spec = s.cop_spec(model)
    eq, cop, G = _mapped_posture(model, s.params, s.base, N, spec)(Q, poses)
    sharp = ca.MX.sym("p")
    obj = CasadiObjective(model, s.base, N)  # must outlive the solver
    f = obj.value(X[: N * nq], sharp)
    g, lbg, ubg = [ca.vec(eq)], [np.zeros(6 * N)], [np.zeros(6 * N)]
    if model.coupled_b.size:
        A = ca.DM(model.coupled_A)
        g.append(ca.vec(A @ Q))
        lbg.append(np.full(N * len(model.coupled_b), -np.inf))
        ubg.append(np.tile(model.coupled_b, N))
    geometry, lbgeo, ubgeo, geo_names = _geometry(model, s, placement, structs)
    g.append(geometry(cop, G, PL))
    lbg += lbgeo
    ubg += ubgeo
    bounds = placement_bounds(model, s)
    lbx = np.concatenate([np.tile(model.lower, N)] + [[b[0] for b in bounds] + [-np.inf, -np.inf]] * P)
    ubx = np.concatenate([np.tile(model.upper, N)] + [[b[1] for b in bounds] + [np.inf, np.inf]] * P)
    g = ca.vertcat(*g)
    n_linear = N * len(model.coupled_b)
    posture = posture_function(model, s.params, s.base, spec)
    hess_lag = LagrangianHessian(posture, geometry, placement, nq, n_linear, obj.cache)
    g_names = [(f"foot flat at its placement (posture {k // 6})", "m or rad") for k in range(6 * N)]
    g_names += [(f"coupled joint limits (posture {k // len(model.coupled_b)})", "rad")
                for k in range(N * len(model.coupled_b))] + geo_names  # fmt: skip
    x_names = [(f"joint limits (posture {k // nq})", "rad") for k in range(N * nq)]
    x_names += [(f"placement bounds (placement {k // 5})", "m or rad") for k in range(5 * P)]
    nlp = {"x": X, "p": sharp, "f": f, "g": g, "_keep": (obj, hess_lag), "_names": (g_names, x_names)}
    return nlp, (
        lbx,
        ubx,
        np.concatenate([np.ravel(v) for v in lbg]),
        np.concatenate([np.ravel(v) for v in ubg]),
    )


def _pack(ps: PostureSet, seps: np.ndarray) -> np.ndarray:
    return np.concatenate([ps.q.ravel(), np.hstack([ps.poses, seps]).ravel()])


def _unpack(x: np.ndarray, N: int, P: int, nq: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.asarray(x).ravel()
    q = x[: N * nq].reshape(N, nq)
    pl = x[N * nq :].reshape(P, 5)
    return q, pl[:, :3], pl[:, 3:]


IPOPT_OPTIONS = {
    "tol": 1e-7,
    "acceptable_tol": 1e-5,
    "acceptable_iter": 30,
    "constr_viol_tol": 1e-9,
    "bound_relax_factor": 0.0,
    "mu_strategy": "adaptive",
    "print_level": 0,
    "sb": "yes",  # no banner
}


Stage = Callable[[list, np.ndarray, float], tuple[np.ndarray, str, int, float]]


def continuation(model: RobotModel, start: PostureSet, s: Settings, stage: Stage, log=None) -> SolveResult:
    """The continuation shared by both backends: per sharpness p, solve with fixed structures, keep the result if
    feasible (max violation < 1e-6) and no worse in true κ (ties within `KAPPA_TIE_RTOL` keep it), whatever IPOPT's
    status; re-detect and repeat if it changed. A start that breaks a constraint is replaced by any feasible stage. Each stage's IPOPT status and whether it was kept go to `stats["stages"]` (`solver_outcome`).

    `stage(structs, x0, p)` returns (x, status, iterations, max violation) for the packed variable vector.
    """
    t0 = time.perf_counter()
    s = s.resolved(model)
    N, P, nq = len(start.q), len(start.poses), model.nq
    seps = np.array([geo.separating_line(pose, model, s.base)[:2] for pose in start.poses])
    x = _pack(start, seps)
    k0 = kappa(design_matrix(model, start.q, s.base))
    broken = worst_violation(model, s, start.placement, _structures(model, start.poses, s.base), x)
    # feasibility first: a start that breaks a constraint (the sampler does not draw for the load share or the
    # robust margin) is replaced by any feasible stage, even one of higher κ; `stats["start_broken"]` says so
    feasible = broken["violation"] < 1e-6
    kk = k0 if feasible else np.inf
    stats: dict = {"stages": [], "iterations": 0, "start_broken": None if feasible else broken}
    for p in s.sharpness:
        for rnd in range(s.max_rounds):
            _, poses, _ = _unpack(x, N, P, nq)
            structs = _structures(model, poses, s.base)
            x_new, status, iters, viol = stage(structs, x, p)
            k_new = kappa(design_matrix(model, _unpack(x_new, N, P, nq)[0], s.base))
            rejected = _rejected(viol, k_new, kk)
            if rejected is None:
                x, kk = x_new, k_new
            stats["stages"].append(
                {
                    "p": p,
                    "round": rnd,
                    "status": status,
                    "iterations": iters,
                    "max_violation": viol,
                    "accepted": rejected is None,
                    "rejected": rejected,
                    "kappa": k_new,
                }
            )
            stats["iterations"] += iters
            if log:
                log(
                    f"p={p:g} round {rnd}: {status}, {iters} it, κ={k_new:.1f}"
                    + (f" ({rejected})" if rejected else "")
                )
            if rejected is not None or _structures(model, _unpack(x, N, P, nq)[1], s.base) == structs:
                break
    stats["outcome"] = solver_outcome(stats["stages"])
    q, poses, _ = _unpack(x, N, P, nq)
    return SolveResult(
        PostureSet(q, start.placement.copy(), poses),
        k0,
        kappa(design_matrix(model, q, s.base)),
        kappa(design_matrix(model, q, other_base(model, s.base))),
        time.perf_counter() - t0,
        stats,
    )


def violation(model: RobotModel, s: Settings, placement: np.ndarray, structs: list, x: np.ndarray) -> float:
    """Largest violation of the NLP's constraints and bounds at packed x: a sampled start meets the margin but
    not necessarily the load share or robust margin, so it is a point to keep only when this is ~0."""
    return worst_violation(model, s, placement, structs, x)["violation"]


def worst_violation(
    model: RobotModel, s: Settings, placement: np.ndarray, structs: list, x: np.ndarray
) -> dict:
    """The largest violation at packed x with the constraint it breaks and its unit (`violation`), so a report can
    say why a start was not a point to keep."""
    nlp, (lbx, ubx, lbg, ubg) = _build(model, s, placement, structs)
    g = np.asarray(ca.Function("g", [nlp["x"]], [nlp["g"]])(x)).ravel()
    g_names, x_names = nlp["_names"]
    over = np.concatenate([lbg - g, g - ubg, lbx - x, x - ubx])
    names = [*g_names, *g_names, *x_names, *x_names]
    k = int(np.argmax(over)) if over.size else 0
    v = float(max(over[k], 0.0)) if over.size else 0.0
    return {
        "violation": v,
        "constraint": names[k][0] if v > 0 else None,
        "unit": names[k][1] if v > 0 else None,
    }


# κ of a later stage within this relative amount of the current point's is a tie, and ties keep the later stage
# (re-solved with re-detected hull structures): round-off moves κ by ~1e-9 relative between equal solutions.
KAPPA_TIE_RTOL = 1e-6


def _rejected(viol: float, k_new: float, k_old: float) -> str | None:
    """Why a stage's end point may not replace the current one of κ `k_old` (inf: an infeasible sample), None if
    it may: infeasible, or a worse true κ (a failed IPOPT stage can end feasible with κ raised by orders)."""
    if not viol < 1e-6:
        return f"infeasible (violation {viol:.1e})"
    if not k_new <= k_old * (1 + KAPPA_TIE_RTOL):
        return "κ worse than at its start"
    return None


def solver_outcome(stages: list[dict]) -> dict:
    """How IPOPT ended in a start: each distinct stage status (in order) and how many stages were kept."""
    statuses = list(dict.fromkeys(str(st["status"]) for st in stages))
    return {
        "ipopt_status": statuses,
        "stages": len(stages),
        "stages_kept": sum(bool(st["accepted"]) for st in stages),
    }


def solve(model: RobotModel, start: PostureSet, s: Settings, log=None) -> SolveResult:
    """Optimise a feasible initial set with CasADi + IPOPT (continuation and re-detection: `continuation`)."""
    s = s.resolved(model)
    built: dict = {}  # structures -> (solver, bounds, callbacks): rebuilt only when the structure changes
    builds = 0

    def stage(structs, x, p):
        nonlocal builds
        key = tuple(structs)
        if key not in built:
            built.clear()
            nlp, bounds = _build(model, s, start.placement, structs)
            keep = nlp.pop("_keep")
            nlp.pop("_names")
            opts = {
                "ipopt": dict(IPOPT_OPTIONS, max_iter=s.max_iter),
                "print_time": False,
                "hess_lag": keep[1],
            }
            built[key] = (ca.nlpsol("design", "ipopt", nlp, opts), bounds, keep)
            builds += 1
        solver, (lbx, ubx, lbg, ubg), _ = built[key]
        with interruptible():
            sol = solver(x0=x, p=p, lbx=lbx, ubx=ubx, lbg=lbg, ubg=ubg)
        st = solver.stats()
        g = np.asarray(sol["g"]).ravel()
        viol = float(max(np.max(lbg - g, initial=0), np.max(g - ubg, initial=0)))
        return np.asarray(sol["x"]).ravel(), st["return_status"], st["iter_count"], viol

    res = continuation(model, start, s, stage, log)
    built.clear()
    res.stats["builds"] = builds
    return res
