"""Balance-constrained excitation of a standing biped in double support (both soles fixed on the boards).

Decision variables: Fourier coefficients (or spline waypoints, `design_grid`) of the independent coordinates
and, at every grid sample, the dependent coordinates with their velocities and accelerations; the foot constraint c(q) = 0, C q̇ = 0 and
C q̈ + (∂(C q̇)/∂q) q̇ = 0 hold at every sample as equalities, so every sample is an exact double-support state.
The regressor is the base wrench (Fz, Mx, My) the boards measure in sum; the ZMP (−My/Fz, Mx/Fz) computed with
the guessed parameters stays inside the support polygon by a margin: one linear inequality in (Fz, Mx, My) per
polygon edge and sample. Links that can meet (URDF collision geometry) keep a clearance at every sample
(`excitation.posture_clearance_rows`, as in the other designs). Joint torques lazily: only if the result needs
more than the efforts for every split of the load between the soles, the last stage again with each sample's
split as variables (`optimise_balance`).
All derivatives are exact (CasADi AD through `Function.map` over the grid).
"""

from __future__ import annotations

import time
from dataclasses import replace

import casadi as ca
import numpy as np
from shapely.geometry import MultiPoint

from robots import dynamics as dyn
from robots.base_params import RegressorSpec
from robots.interrupt import in_callback
from robots.memo import per_model
from robots.motion_class import standing_base
from robots.native import compiled
from robots.stance import foot_corners, lever_share, other_pose
from robots.tree import RobotModel
from trajectories.closed_chain import (
    ClosedChain,
    ClosedChainTrajectory,
    chain_rates,
    dependent_rates,
    foot_error,
    functions,
    make_chain,
    solve_dependent,
)
from trajectories.design_grid import (
    design_bases,
    design_rows,
    design_times,
    design_trajectory,
    is_spline,
    rest_rows,
    waypoints_around,
)
from trajectories.excitation import (
    ExcitationResult,
    ExcitationSettings,
    Prior,
    _JacobianNode,
    _limits,
    check_focus,
    check_prior,
    design_result,
    posture_clearance_rows,
    solve_stages,
)
from trajectories.fourier import FourierTrajectory
from trajectories.retighten import (
    SHARE_SLACK,
    SHARE_TOLERANCE,
    NoRoomError,
    moved_rate_fractions,
    moved_zmp_margin,
    solve_and_retighten,
)
from trajectories.spline import SplineTrajectory

ZMP_ROWS = ("fz", "mx", "my")
ZMP_BUFFER = 0.005  # m added to the ZMP margin at the grid samples
SHARE_BUFFER = 0.02  # added to the load-share bound at the grid samples
COUPLED_BUFFER = 0.01  # rad kept from coupled limits at the grid samples
BETWEEN_SAMPLES = (
    0.85  # fraction of the velocity/acceleration limits for dependent coordinates at the samples
)


def zmp_spec(base: str) -> RegressorSpec:
    return RegressorSpec("base-wrench", base, None, ZMP_ROWS)


def halfplanes(poly) -> tuple[np.ndarray, np.ndarray]:
    """A convex polygon (shapely) as N p ≤ d, one outward unit normal per edge."""
    xy = np.asarray(poly.exterior.coords)[:-1]
    if not poly.exterior.is_ccw:
        xy = xy[::-1]
    e = np.roll(xy, -1, axis=0) - xy
    N = np.stack([e[:, 1], -e[:, 0]], axis=1) / np.linalg.norm(e, axis=1)[:, None]  # outward (ccw ring)
    return N, np.einsum("ij,ij->i", N, xy)


def zmp_rows(w, poly, margin: float):
    """N·(−My, Mx) − (d − margin)·Fz per edge of the convex polygon `poly` (≤ 0: the ZMP of the wrench
    w = (Fz, Mx, My), Fz > 0, `margin` m inside it), as CasADi rows."""
    N, d = halfplanes(poly)
    return ca.DM(N) @ ca.vertcat(-w[2], w[1]) - ca.DM(d - margin) * w[0]


def support_halfplanes(model: RobotModel, chain: ClosedChain) -> tuple[np.ndarray, np.ndarray, object]:
    """Support polygon (convex hull of both contact rectangles at the fixed placement) as N p ≤ d, and itself."""
    corners = foot_corners(model, chain.nominal, chain.params, chain.base)
    hull = MultiPoint(np.concatenate(list(corners.values()))).convex_hull
    return (*halfplanes(hull), hull)


def polygon_depth(polygon) -> float:
    """How deep (m) the deepest point of a convex polygon (shapely) lies inside its edges."""
    from shapely.ops import polylabel

    return float(polygon.exterior.distance(polylabel(polygon, tolerance=1e-4)))


def check_zmp_room(polygon, zmp_margin: float, where: str = "the support polygon") -> None:
    """NoRoomError when no ZMP stays `zmp_margin` (+ the design's ZMP_BUFFER) inside the convex `polygon`
    (shapely): the NLP would have no feasible point, and its result no posture to check."""
    depth = polygon_depth(polygon)
    if zmp_margin + ZMP_BUFFER >= depth:
        raise NoRoomError(f"a ZMP margin of {1000 * zmp_margin:.1f} mm leaves no room: with the design's "
                          f"{1000 * ZMP_BUFFER:.0f} mm buffer it needs {1000 * (zmp_margin + ZMP_BUFFER):.1f} mm, "
                          f"and {where}'s deepest point lies {1000 * depth:.1f} mm inside its edges")  # fmt: skip


def share_coefficients(model: RobotModel, chain: ClosedChain) -> tuple[float, float, float]:
    """(s0, gx, gy) with the other sole's lever-rule share of the load (`robots.stance.lever_share`, linear in
    the CoP) = s0 + gx·x + gy·y at this chain's placement: Fz·share = s0·Fz − gx·My + gy·Mx is linear in the
    wrench, so a share bound is one linear inequality per sample, like the ZMP's polygon edges."""
    pose = other_pose(model, chain.nominal, chain.params, chain.base)
    s0 = lever_share(model, np.zeros(2), pose, chain.base)
    gx = lever_share(model, np.array([1.0, 0.0]), pose, chain.base) - s0
    gy = lever_share(model, np.array([0.0, 1.0]), pose, chain.base) - s0
    return s0, gx, gy


def other_share(
    model: RobotModel,
    chain: ClosedChain,
    zmp: np.ndarray,
    coefficients: tuple[float, float, float] | None = None,
) -> np.ndarray:
    """The other sole's lever-rule share of the load at ZMPs (K, 2) in this chain's placement (`share_coefficients`,
    or their values given — computed once where this is evaluated again and again; unclipped: beyond [0, 1] a sole
    would leave the ground)."""
    s0, gx, gy = coefficients if coefficients is not None else share_coefficients(model, chain)
    return s0 + zmp @ np.array([gx, gy])


def chain_base(model: RobotModel, chain: ClosedChain, simplified: bool):
    """Base parameters of (Fz, Mx, My) with the other sole held at this chain's placement, as identification's."""
    return standing_base(model, zmp_spec(chain.base), simplified, chain.nominal)


def _per_sample(model: RobotModel, chain: ClosedChain, db, guess: str, torques: bool = False):
    """S(qI, qD, vI, vD, aI, aD, placement[, μ]) → (18 constraint residuals, 3 guessed wrench rows[, nq joint
    torques]), its Jacobian in everything but the placement (compiled to native code, `robots.native`), and
    the r·3 base-regressor entries; `placement` = (vec Rt, pt), the other sole's pose (`placement`). `torques`:
    the joint torques τ_b − Cᵀ (m·g·μ) of double support, τ_b with the base sole fixed and the other sole free, μ
    the other sole's contact wrench in the foot constraint's coordinates (C = ∂c/∂q spans the same wrenches as
    the sole's Jacobian: c is the sole's pose error), per weight. One set per robot, chain split and columns
    (4 s to build, 16 s to compile all four, once per machine): every placement and design shares it."""
    columns = tuple(int(i) for i in db.independent)
    return _sample_functions(
        model,
        chain.base,
        chain.other,
        chain.params,
        chain.independent,
        chain.dependent,
        columns,
        guess,
        torques,
    )


def placement(chain: ClosedChain) -> np.ndarray:
    """The other sole's held pose as the per-sample functions take it: (vec Rt column-major, pt), 12 numbers."""
    return np.concatenate([np.asarray(chain.target_R, dtype=float).ravel(order="F"), chain.target_p])


@per_model
def _sample_functions(
    model: RobotModel,
    base: str,
    other: str,
    params: str,
    ind: tuple,
    dep: tuple,
    columns: tuple,
    guess: str,
    torques: bool,
):
    n = model.nq
    ind, dep = list(ind), list(dep)
    xs = [
        ca.SX.sym(nm, len(ix))
        for nm, ix in zip(("qI", "qD", "vI", "vD", "aI", "aD"), (ind, dep) * 3, strict=True)
    ]
    place = ca.SX.sym("placement", 12)
    mu = [ca.SX.sym("mu", 6)] if torques else []

    def full(a, b):
        v = [None] * n
        for i, k in enumerate(ind):
            v[k] = a[i]
        for i, k in enumerate(dep):
            v[k] = b[i]
        return ca.vertcat(*v)

    q, qd, qdd = full(xs[0], xs[1]), full(xs[2], xs[3]), full(xs[4], xs[5])
    c = foot_error(model, q, params, other, base, ca.reshape(place[:9], 3, 3), place[9:])
    Wfun = dyn.base_wrench_regressor_function(model, base, guess)
    W = Wfun(q, qd, qdd)[[2, 3, 4], :]  # fz, mx, my
    phi = ca.DM(dyn.standard_parameters(model, guess))
    Wb = W[:, list(columns)]
    opts = {"cse": True}
    blocks = [ca.vertcat(c, *chain_rates(c, q, qd, qdd)), W @ phi]
    if torques:  # Cᵀ(m·g·μ) by one reverse sweep
        tau_b = dyn.torque_regressor_function(model, base, guess)(q, qd, qdd) @ phi
        blocks.append(tau_b - ca.jtimes(c, q, weight(model, guess) * mu[0], True))
    ins, wrt = [*xs, place, *mu], ca.vertcat(*xs, *mu)
    out = ca.vertcat(*blocks)
    jac = ca.vertcat(*(ca.jacobian(b, wrt) for b in blocks))  # by block: a quarter of one Jacobian's code
    tag = "_torques" if torques else ""
    return (
        compiled(ca.Function(f"poise_sample_constraints{tag}", ins, [out], opts)),
        compiled(ca.Function(f"poise_sample_constraints_jac{tag}", ins, [out, jac], opts)),
        ca.Function("sample_regressor", xs, [ca.vec(Wb.T)], opts),
    )


def weight(model: RobotModel, params: str) -> float:
    """m·g of a parameter set (N): the scale of the soles' contact wrenches."""
    return float(model.parameter_set(params).total_mass * -dyn.GRAVITY[2])


class _SampleMap(_JacobianNode):
    """Per-sample outputs (foot constraints, guessed Fz/Mx/My[, joint torques]) stacked over the grid, as a function
    of the design vector [vec(X); vec(Z)] (Z's column per sample: q_D, q̇_D, q̈_D[, the other sole's wrench]), with its sparse Jacobian assembled from per-sample SX Jacobians and the Fourier bases
    (an order of magnitude faster than differentiating the mapped expression graph)."""

    def __init__(
        self, name, Fv: ca.Function, F: ca.Function, bases, place, nI: int, nD: int, jac: bool = True
    ):
        ca.Callback.__init__(self)
        self.P, self.V, self.A = bases
        self.K, self.m = self.P.shape
        self.place = np.repeat(np.asarray(place, dtype=float).reshape(-1, 1), self.K, axis=1)  # every sample
        self.nI, self.nD = nI, nD
        self.nL = F.size1_in(7) if F.n_in() > 7 else 0  # per-sample variables after q̈_D (the sole's wrench)
        self.nz = 3 * nD + self.nL
        self.F = F.map(self.K)
        self.Fv = Fv.map(self.K)
        self.c = F.size1_out(0)
        self.nx = self.m * nI + self.nz * self.K
        K, c, m = self.K, self.c, self.m
        rows, cols = [], []
        for k in range(K):
            r = np.arange(c * k, c * (k + 1))
            cf = np.arange(m * nI)
            cz = m * nI + self.nz * k + np.arange(self.nz)
            cc = np.concatenate([cf, cz])
            rows.append(np.repeat(r, cc.size))
            cols.append(np.tile(cc, c))
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        self.jac_sparsity = ca.Sparsity.triplet(K * c, self.nx, rows.tolist(), cols.tolist())
        self.perm = np.lexsort((rows, cols))
        self.is_jac = not jac
        self.jac_node = _SampleMap(name + "_jac", Fv, F, bases, place, nI, nD, jac=False) if jac else None
        self.construct(name, {"enable_fd": False})

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self.nx, 1) if i == 0 else ca.Sparsity.dense(self.K * self.c, 1)

    def get_sparsity_out(self, i):
        return self.jac_sparsity if self.is_jac else ca.Sparsity.dense(self.K * self.c, 1)

    def has_eval_buffer(self):
        return True

    @in_callback
    def eval_buffer(self, arg, res):
        """Straight into CasADi's memory (the Jacobian's nonzeros, column-major): building the DM from numpy
        cost twice the compiled evaluation."""
        x = np.frombuffer(arg[0], dtype=np.float64)
        out = np.frombuffer(res[0], dtype=np.float64)
        m, nI, nD, K, c = self.m, self.nI, self.nD, self.K, self.c
        X = x[: m * nI].reshape(m, nI, order="F")
        Z = x[m * nI :].reshape(self.nz, K, order="F")
        ins = ((self.P @ X).T, Z[:nD], (self.V @ X).T, Z[nD : 2 * nD], (self.A @ X).T, Z[2 * nD : 3 * nD])
        ins += (self.place,) + ((Z[3 * nD :],) if self.nL else ())
        if not self.is_jac:
            out[:] = np.asarray(self.Fv(*ins)).reshape(-1, order="F")
            return 0
        _, J = self.F(*ins)
        J = np.asarray(J).reshape(c, K, 3 * (nI + nD) + self.nL).transpose(1, 0, 2)  # K, c, inputs
        o = np.cumsum([0, nI, nD, nI, nD, nI, nD, self.nL])
        JqI, JqD, JvI, JvD, JaI, JaD, JL = (J[:, :, o[i] : o[i + 1]] for i in range(7))
        dX = (
            np.einsum("kci,kl->kcil", JqI, self.P)
            + np.einsum("kci,kl->kcil", JvI, self.V)
            + np.einsum("kci,kl->kcil", JaI, self.A)
        ).reshape(K, c, nI * m)
        dZ = np.concatenate([JqD, JvD, JaD, JL], axis=2)
        vals = np.concatenate([dX, dZ], axis=2).reshape(-1)  # triplet order: sample, row, column
        out[:] = vals[self.perm]
        return 0


def design_balance_problem(
    model: RobotModel,
    settings: ExcitationSettings,
    chain: ClosedChain,
    zmp_margin: float,
    torque_rows: bool = False,
):
    """The NLP of a double-support excitation: variables, criterion input W(w), constraints and bounds.
    `torque_rows`: six more variables per sample, the other sole's contact wrench, with the joint torques it
    leaves within the effort limits (× `torque_fraction`) — the split of the load the soles may choose."""
    settings.validate()
    lo, hi, vmax, amax, tmax = _limits(model, settings)  # refuses missing rate limits, as arm designs do
    guess = settings.params or chain.params
    db = chain_base(model, chain, settings.simplified)
    ind, dep = list(chain.independent), list(chain.dependent)
    nI, nD, K = len(ind), len(dep), settings.samples
    P, V, A = (ca.DM(B) for B in design_bases(settings, design_times(settings, K)))
    m = design_rows(settings)
    nL = 6 if torque_rows else 0
    xF = ca.MX.sym("xF", m * nI)
    Z = ca.MX.sym("Z", 3 * nD + nL, K)
    X = ca.reshape(xF, m, nI)
    qI, vI, aI = (ca.transpose(B @ X) for B in (P, V, A))  # nI × K
    Sv, Sj, S2 = _per_sample(model, chain, db, guess, torque_rows)
    args = (qI, Z[:nD, :], vI, Z[nD : 2 * nD, :], aI, Z[2 * nD : 3 * nD, :])
    wb = S2.map(K)(*args)
    node = _SampleMap("samples", Sv, Sj, tuple(np.asarray(B) for B in (P, V, A)), placement(chain), nI, nD)
    rows = 21 + (model.nq if torque_rows else 0)
    out = ca.reshape(node(ca.vertcat(xF, ca.vec(Z))), rows, K)
    eq, w3 = out[:18, :], out[18:21, :]
    r = db.rank
    W = ca.transpose(ca.reshape(wb, r, 3 * K))  # 3K × r, rows (fz, mx, my) per sample
    Kd = K * settings.dense_factor
    Pd, Vd, Ad = (ca.DM(B) for B in design_bases(settings, design_times(settings, Kd)))
    N, d, hull = support_halfplanes(model, chain)
    # dependent coordinates are bounded at the grid samples only: keep a buffer for the motion between them
    zmp_opt = zmp_margin + ZMP_BUFFER
    zmp = ca.mtimes(ca.DM(N), ca.vertcat(-w3[2, :], w3[1, :])) - ca.mtimes(ca.DM(d - zmp_opt), w3[0, :])
    E = rest_rows(settings)
    g = [
        ca.vec(ca.DM(E) @ X),
        ca.vec(Pd @ X),
        ca.vec(Vd @ X),
        ca.vec(Ad @ X),
        ca.vec(eq),
        ca.vec(zmp),
        ca.vec(w3[0, :]),
    ]
    rest = np.zeros(len(E) * nI)
    lbg = [rest, np.repeat(lo[ind], Kd), np.repeat(-vmax[ind], Kd), np.repeat(-amax[ind], Kd)]
    ubg = [rest, np.repeat(hi[ind], Kd), np.repeat(vmax[ind], Kd), np.repeat(amax[ind], Kd)]
    lbg += [np.zeros(18 * K), np.full(len(d) * K, -np.inf), np.zeros(K)]
    ubg += [np.zeros(18 * K), np.zeros(len(d) * K), np.full(K, np.inf)]
    if torque_rows:  # rows by sample, then joint
        g.append(ca.vec(out[21:, :]))
        lbg.append(np.tile(-tmax, K))
        ubg.append(np.tile(tmax, K))
    if settings.load_share > 0:  # neither sole nearly unloaded: a light sole rocks on an edge or slides
        s0, gx, gy = share_coefficients(model, chain)
        share = s0 * w3[0, :] - gx * w3[2, :] + gy * w3[1, :]  # Fz · the other sole's share
        f = settings.load_share + SHARE_BUFFER
        g += [ca.vec(share - f * w3[0, :]), ca.vec((1 - f) * w3[0, :] - share)]
        lbg += [np.zeros(K), np.zeros(K)]
        ubg += [np.full(K, np.inf), np.full(K, np.inf)]
    Q = ca.vertcat(qI, Z[:nD, :])[np.argsort(ind + dep).tolist(), :]  # nq × K: each sample's posture
    if len(model.coupled_b):
        g.append(ca.vec(ca.DM(model.coupled_A) @ Q))
        lbg.append(np.full(len(model.coupled_b) * K, -np.inf))
        ubg.append(np.tile(model.coupled_b - COUPLED_BUFFER, K))
    nodes = [node] + posture_clearance_rows(model, settings, guess, Q, g, lbg, ubg)  # links kept apart
    # a wider position margin for the dependent coordinates: they are bounded at the samples only, and a leg
    # that reaches a limit (e.g. a stretched knee) between samples may leave the foot unreachable
    dlo, dhi = lo[dep] + 2 * settings.position_margin, hi[dep] - 2 * settings.position_margin
    dlo, dhi = np.minimum(dlo, (lo[dep] + hi[dep]) / 2), np.maximum(dhi, (lo[dep] + hi[dep]) / 2)
    zlo = np.concatenate(
        [dlo, -vmax[dep] * BETWEEN_SAMPLES, -amax[dep] * BETWEEN_SAMPLES, np.full(nL, -np.inf)]
    )
    zhi = np.concatenate([dhi, vmax[dep] * BETWEEN_SAMPLES, amax[dep] * BETWEEN_SAMPLES, np.full(nL, np.inf)])
    x = ca.vertcat(xF, ca.vec(Z))
    return {
        "x": x,
        "W": W,
        "W_fun": ca.Function("W", [x], [W]),
        "w3_fun": ca.Function("w3", [x], [w3]),
        "g": ca.vertcat(*g),
        "lbg": np.concatenate(lbg),
        "ubg": np.concatenate(ubg),
        "lbx": np.concatenate([np.full(m * nI, -np.inf), np.tile(zlo, K)]),
        "ubx": np.concatenate([np.full(m * nI, np.inf), np.tile(zhi, K)]),
        "base": db,
        "hull": hull,
        "nodes": nodes,  # callbacks must outlive the solver
        "m": m,
        "params": guess,
        "bases": tuple(np.asarray(B) for B in (P, V, A)),
        "split": nL,
        **({"tau_fun": ca.Function("tau", [x], [out[21:, :]])} if torque_rows else {}),  # nq × K
    }


def balance_start(
    model: RobotModel,
    settings: ExcitationSettings,
    chain: ClosedChain,
    rng: np.random.Generator,
    amplitude: float,
) -> tuple[np.ndarray, FourierTrajectory | SplineTrajectory]:
    """Small random harmonics (or waypoints, starting and ending there) of the independent coordinates around
    the nominal posture, dependent ones solved."""
    ind = list(chain.independent)
    if is_spline(settings):
        X = waypoints_around(settings, chain.nominal[ind], amplitude, rng)
        traj = design_trajectory(settings, X)
        return _variables(model, settings, chain, traj, X), traj
    L, nI = settings.harmonics, len(ind)
    a = rng.uniform(-1, 1, (nI, L)) * amplitude / L
    b = rng.uniform(-1, 1, (nI, L)) * amplitude / L
    a -= a.mean(axis=1, keepdims=True)
    ls = np.arange(1, L + 1)
    b -= np.outer((b * ls).sum(axis=1), ls) / (ls**2).sum()
    fi = FourierTrajectory(settings.period, settings.duration, chain.nominal[ind].copy(), a, b)
    return _variables(model, settings, chain, fi, fi.coefficients()), fi


def _variables(model: RobotModel, settings: ExcitationSettings, chain: ClosedChain, traj, X: np.ndarray):
    """The design vector of the independent coordinates' trajectory `traj` (design matrix X), dependent ones solved
    at the grid's samples."""
    qI, vI, aI = traj.sample(design_times(settings, settings.samples))
    q = solve_dependent(model, chain, qI)
    qd, qdd = dependent_rates(model, chain, q, vI, aI)
    dep = list(chain.dependent)
    Z = np.vstack([q[:, dep].T, qd[:, dep].T, qdd[:, dep].T])
    return np.concatenate([X.reshape(-1, order="F"), Z.reshape(-1, order="F")])


def optimise_balance(
    model: RobotModel,
    settings: ExcitationSettings,
    seed: int = 0,
    zmp_margin: float = 0.02,
    amplitude: float = 0.1,
    chain: ClosedChain | None = None,
    prior: Prior | None = None,
) -> ExcitationResult:
    """Design one balance-constrained double-support excitation from a random start (standing as `chain`, else
    in the best-conditioned placement near the feet side by side); `prior`: the experiments it should complete.
    Joint torques lazily, as `excitation.solve_lazy_torques`: the result is checked on the design grid for the
    split of the load between the soles that needs least (`verify.double_support_split`), and only if that
    exceeds the efforts (× `torque_fraction`) the last stage is solved again with the split as variables."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    base = settings.base or (model.stance or {}).get("base") or next(iter(model.bases))
    guess = settings.params or next(iter(model.params))
    chain = chain or make_chain(model, base, guess, rng)
    x0, _ = balance_start(model, settings, chain, rng, amplitude)

    def solve(bounds: tuple[ExcitationSettings, float]):
        design, margin = bounds
        check_zmp_room(
            support_halfplanes(model, chain)[2], margin
        )  # a margin moved in by the retightening too
        prob = design_balance_problem(model, design, chain, margin)
        check_prior(prior, prob["base"].rank)
        check_focus(design, prob["base"].rank)
        x, iterations, status, stages = solve_stages(
            prob, design, prior, x0, warm=False, name="balance_excitation"
        )
        ratio = grid_torque_ratio(model, chain, design, prob, x)
        if ratio > 1.0:
            stages[-1]["torque_ratio"] = ratio  # without the torque rows: why they were added
            prob = design_balance_problem(model, design, chain, margin, torque_rows=True)
            x = with_split(model, chain, design, prob, x)
            x, extra, status, again = solve_stages(
                prob, design, prior, x, last_only=True, warm=False, name="balance_excitation"
            )
            iterations += extra
            stages += [{**st, "torque_rows": True} for st in again]
            ratio = grid_torque_ratio(model, chain, design, prob, x)
        stages[-1]["torque_ratio"] = ratio
        return prob, x, iterations, status, stages

    def finish(prob: dict, x: np.ndarray, iterations: int, status: str, stages: list[dict]):
        return _balance_result(
            model, settings, chain, prob, x, iterations, status, stages, prior, zmp_margin, t0
        )

    result, check = solve_and_retighten(
        solve, finish, lambda b, check: balance_tightened(b[0], b[1], settings, zmp_margin, check),
        (settings, zmp_margin),
    )  # fmt: skip
    result.verification = check.to_dict()
    return result


def _balance_result(model, settings, chain, prob, x, iterations, status, stages, prior, zmp_margin, t0):
    """The design's result and its check on the fine grid against the plan's own bounds (`settings`, `zmp_margin`)."""
    from trajectories.verify import check_trajectory

    m, nI = prob["m"], len(chain.independent)
    traj = ClosedChainTrajectory(
        model, chain, design_trajectory(settings, x[: m * nI].reshape(m, nI, order="F"))
    )
    W = np.asarray(prob["W_fun"](x))
    result = design_result(traj, W, prob["base"].symbols, iterations, status, stages, chain.base, prob["params"],
                           settings, prior, t0)  # fmt: skip
    check = check_trajectory(
        model, traj, chain.base, prob["params"], 0.002, settings.acceleration_default, settings.simplified,
        zmp_margin=zmp_margin, load_share=settings.load_share,
        collision_margin=settings.collision_margin if settings.self_collision else None,
    )  # fmt: skip
    return result, check


def balance_tightened(
    design: ExcitationSettings, margin: float, plan: ExcitationSettings, plan_margin: float, check
) -> tuple[ExcitationSettings, float] | None:
    """The design's ZMP margin, load share and rate fractions moved in by what the fine grid found beyond the plan's
    (`check`, a `verify.TrajectoryCheck`) plus a slack, or None if none was exceeded. (The dependent coordinates'
    rates are bounded at the samples only: seed 4 of `tests/test_sequential_design.py` had a knee at 1.033× its
    acceleration limit between them.)"""
    moved_margin, changes = moved_zmp_margin(margin, plan_margin, check), moved_rate_fractions(design, check)
    if plan.load_share > 0 and check.load_share_range is not None:
        lo, hi = check.load_share_range
        least = min(lo, 1.0 - hi)
        if least < plan.load_share - SHARE_TOLERANCE:
            changes["load_share"] = design.load_share + plan.load_share - least + SHARE_SLACK
    if not changes and moved_margin == margin:
        return None
    return replace(design, **changes), moved_margin


def grid_states(model: RobotModel, chain: ClosedChain, prob: dict, x: np.ndarray):
    """(q, q̇, q̈) at the design grid's samples (K, nq) of a design vector x of `prob`."""
    ind, dep = list(chain.independent), list(chain.dependent)
    m, nI, nD = prob["m"], len(ind), len(dep)
    P, V, A = prob["bases"]
    X = x[: m * nI].reshape(m, nI, order="F")
    Z = x[m * nI :].reshape(3 * nD + prob["split"], P.shape[0], order="F")
    out = []
    for i, B in enumerate((P, V, A)):
        s = np.empty((P.shape[0], model.nq))
        s[:, ind] = B @ X
        s[:, dep] = Z[i * nD : (i + 1) * nD].T
        out.append(s)
    return tuple(out)


def grid_torque_ratio(
    model: RobotModel, chain: ClosedChain, settings: ExcitationSettings, prob: dict, x: np.ndarray
) -> float:
    """Peak joint torque / (effort × `torque_fraction`) on the design grid for the split of the load between
    the soles that needs least (`verify.double_support_split`)."""
    from trajectories.verify import double_support_split

    tmax = _limits(model, settings)[4]
    q, qd, qdd = grid_states(model, chain, prob, x)
    return float(double_support_split(model, chain, q, qd, qdd, prob["params"], tmax).ratio.max())


def with_split(
    model: RobotModel, chain: ClosedChain, settings: ExcitationSettings, prob: dict, x: np.ndarray
):
    """x of the problem without torque rows → x of `prob` (with them): each sample's wrench variables μ started
    at the weighted least-squares split of its torques."""
    q, qd, qdd = grid_states(model, chain, prob | {"split": 0}, x)
    K = q.shape[0]
    tmax = _limits(model, settings)[4]
    tau_b = dyn.rnea(model, q, qd, qdd, prob["params"], chain.base) / tmax
    _, C = functions(model, chain)[0].map(K)(q.T)
    C = np.asarray(C).reshape(6, K, model.nq).transpose(1, 0, 2)
    A = np.transpose(C, (0, 2, 1)) * weight(model, prob["params"]) / tmax[None, :, None]
    mu = np.einsum("bij,bj->bi", np.linalg.pinv(A), tau_b)
    nF = prob["m"] * len(chain.independent)
    Z = x[nF:].reshape(-1, K, order="F")
    return np.r_[x[:nF], np.vstack([Z, mu.T]).reshape(-1, order="F")]
