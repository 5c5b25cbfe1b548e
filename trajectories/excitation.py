"""Optimal excitation trajectories for a fixed-base robot: minimise the condition number (or −log det) of the
stacked base joint-torque regressor over Fourier coefficients (or C² spline waypoints: `design_grid`), with
CasADi + IPOPT.

The regressor is built symbolically (SX) and vectorised over the time grid with `Function.map`; the criterion
(an SVD) is a CasADi callback whose exact gradient ∂f/∂W is chained to the coefficients by CasADi's AD.
Position, velocity and acceleration limits are linear in the coefficients; torque limits come from RNEA with the
guessed parameters. For a Fourier series one period is enough: the trajectory repeats, so the stacked regressor
over the whole duration has the same singular values up to a factor (a spline's grid covers it all). Everything is
re-verified on a 10× finer grid afterwards.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import casadi as ca
import numpy as np
from scipy import sparse

from formats.dynamic_recording import MOTIONS
from formats.errors import DataError
from robots import dynamics as dyn
from robots.base_params import RegressorSpec, cached_dynamic_base
from robots.collision import near_pairs, soft_clearance
from robots.conditioning import (
    kappa,
    log_det_information,
    log_variances,
    normalised_columns,
    normalised_gradient,
    surrogate,
)
from robots.interrupt import in_callback, interruptible
from robots.joint_limits import mimic_limits, mimic_ranges
from robots.tree import RobotModel
from trajectories.design_grid import (
    design_bases,
    design_times,
    design_trajectory,
    random_rows,
    rest_rows,
    shift_to_rest,
    start_rows,
)
from trajectories.fourier import FourierTrajectory
from trajectories.spline import SplineTrajectory
from trajectories.verify import acceleration_limits, check_trajectory

CRITERIA = ("kappa", "logdet", "logvar")
SCALINGS = ("columns", "none")
PARAMETRISATIONS = ("fourier", "spline")
COUPLED_MARGIN = 1e-3  # rad (or its combination) kept from coupled limits while optimising
COLLISION_BUFFER = 0.01  # m added to the clearance on the criterion grid: links move between its points
# max_kappa: the κ surrogate's sharpness (it overestimates log κ by at most 2·log(rank)/(2p): ≤ 12 % in κ at rank
# 45) and the weight of the squared excess of log κ over log max_kappa added to the criterion. A penalty, not a
# constraint row: a dense row through the regressor made IPOPT's constraint Jacobian 13× slower per iteration.
KAPPA_BOUND_SHARPNESS = 32.0
KAPPA_BOUND_WEIGHT = 1e4
# rad/s: the design's Coulomb column is tanh(q̇ / this), a smooth sign(q̇) (identify dynamic drops the rows within
# ~0.013 rad/s of a reversal, where the sign is not observed)
FRICTION_VELOCITY = 0.02


@dataclass(frozen=True)
class ExcitationSettings:
    """What to design: durations (s), harmonics, grid, criterion, column scaling and limit margins."""

    period: float = 10.0
    duration: float = 60.0
    harmonics: int = 5
    samples: int = 100  # grid points per period for the criterion and the torque limits
    dense_factor: int = 4  # position/velocity/acceleration limits (linear, cheap) on a grid this much finer
    criterion: str = "kappa"
    scaling: str = "columns"  # columns: κ of the column-normalised regressor (scale-free); none: raw
    sharpness: tuple[float, ...] = (8.0, 32.0)
    position_margin: float = 0.05  # rad kept from each position limit
    # Fractions of the limits used while optimising: IPOPT may stop a hair outside its constraints, and the
    # verification on the fine grid uses the full limits.
    velocity_fraction: float = 0.98  # of the joint velocity limits
    acceleration_fraction: float = 0.98  # of the acceleration limits
    torque_fraction: float = 0.95  # of the joint effort limits
    acceleration_default: float = 20.0  # rad/s² where the robot description gives none
    max_iter: int = 400
    base: str | None = None  # fixed base link (default: the root)
    params: str | None = None  # guessed parameters for torque limits (default: the model's first set)
    simplified: bool = False
    motion: str = "free"  # free: fixed-base joint torques; double-support: a biped on two boards (Fz, Mx, My)
    zmp_margin: float = 0.02  # m, double support: ZMP distance inside the support polygon at every sample
    load_share: float = 0.0  # double support: each sole's lever-rule share of the load ≥ this at every sample
    amplitude: float = 0.1  # rad, standing: harmonic amplitude of the random start
    lift: float = 0.02  # m, single support: the other sole's corners at least this far above the ground
    max_lift: float | None = 0.25  # m, single support: ... and at most this far (None: no ceiling)
    max_sole_tilt: float | None = math.radians(30.0)  # rad, single support: the lifted sole's plane within
    # this of the ground's (None: any; a sole swung upside down is no experiment a person stands next to)
    # κ of the column-scaled base regressor kept ≤ this (a penalty on any criterion; None: unbounded)
    max_kappa: float | None = None
    # standing (double or single support): σ of the boards' Fz [N], Mx, My [N·m] per sample — the criterion weights
    # the rows by 1/σ, as the fit (WLS) will; None: raw units (a newton of Fz counts as a newton-metre of moment)
    row_noise: tuple[float, ...] | None = None
    self_collision: bool = True  # keep links apart (sphere sets from the URDF's collision geometry), if any
    collision_margin: float = 0.01  # m of clearance between links that can meet
    # logvar: the base parameters (0-based indices) whose log variances the criterion sums — the next experiment for
    # the parameters still undetermined, not for all (None: every base parameter)
    focus: tuple[int, ...] | None = None
    # free motion: the posture (rad, every joint) it starts and ends in, at rest — no move to a designed start
    # before the run; None: where the design puts it (q̇ = q̈ = 0 there all the same)
    rest_posture: tuple[float, ...] | None = None
    # free motion: Swevers' Fourier series (periodic; `harmonics`) or C² cubic splines through `waypoints`
    # interior waypoints over the whole duration (then `period` = `duration` and `samples` cover it all)
    parametrisation: str = "fourier"
    waypoints: int = 8
    # free motion: the criterion's regressor has each joint's viscous and Coulomb friction columns, as `identify
    # dynamic` fits them — a motion that excites friction apart from gravity (one that never reverses a joint has
    # a Coulomb column as constant as a gravity term)
    friction: bool = False
    # free motion: every joint's position std over the criterion grid ≥ this fraction of that of the largest
    # fundamental sinusoid its limits allow (`excursion_floor`): column scaling makes κ blind to a joint left still
    # (a 2-joint arm's j1 spanned 0.0006 rad at scaled κ 1.98); 0: no floor
    min_excursion: float = 0.25

    def validate(self) -> None:
        if not (np.isfinite(self.min_excursion) and 0 <= self.min_excursion <= 1):
            raise DataError(f"min_excursion must be in [0, 1], got {self.min_excursion}")
        if self.friction and self.motion != "free":
            raise DataError(f"friction columns are the joint torques' (a fixed-base arm); a {self.motion} motion "
                            "is identified from the boards' wrench")  # fmt: skip
        if self.parametrisation not in PARAMETRISATIONS:
            raise DataError(
                f"parametrisation must be one of {PARAMETRISATIONS}, got {self.parametrisation!r}"
            )
        if self.parametrisation == "spline":
            if not (isinstance(self.waypoints, (int, np.integer)) and 1 <= self.waypoints <= 1000):
                raise DataError(f"waypoints must be an integer in [1, 1000], got {self.waypoints}")
            if self.period != self.duration:
                raise DataError(f"a spline is not periodic: its period is its duration ({self.duration} s), "
                                f"got {self.period} s")  # fmt: skip
            if self.samples < self.waypoints + 2:
                raise DataError(
                    f"need samples ≥ waypoints + 2 ({self.waypoints + 2}) over a spline's duration"
                )
        if self.motion not in MOTIONS:
            raise DataError(f"motion must be one of {MOTIONS}, got {self.motion!r}")
        if self.rest_posture is not None:
            if self.motion != "free":
                raise DataError(f"a rest posture is for a fixed-base (free) motion; a {self.motion} motion starts "
                                "where its stance and balance put it")  # fmt: skip
            r = np.asarray(self.rest_posture, dtype=float)
            if r.ndim != 1 or not r.size or not np.all(np.isfinite(r)):
                raise DataError(f"rest_posture must be finite joint angles in rad, got {self.rest_posture}")
        if not (np.isfinite(self.zmp_margin) and self.zmp_margin >= 0):
            raise DataError(f"zmp_margin must be a non-negative number of metres, got {self.zmp_margin}")
        if not (np.isfinite(self.lift) and 0 <= self.lift <= 1):
            raise DataError(f"lift must be in [0, 1] m, got {self.lift}")
        if self.max_lift is not None and not (np.isfinite(self.max_lift) and self.max_lift > 2 * self.lift):
            raise DataError(f"--max-lift (max_lift) must be a height in m above twice --lift (lift {self.lift:g} m): "
                            f"above {2 * self.lift:g} m, got --max-lift {self.max_lift:g} m: the lifted sole's corners "
                            "stay between the two above the ground, and a design needs room to move between them")  # fmt: skip
        if self.max_sole_tilt is not None and not (
            np.isfinite(self.max_sole_tilt) and 0 < self.max_sole_tilt <= math.pi
        ):
            raise DataError(f"max_sole_tilt must be in (0, π] rad, got {self.max_sole_tilt}")
        if not (np.isfinite(self.load_share) and 0 <= self.load_share < 0.5):
            raise DataError(f"load_share must be in [0, 0.5), got {self.load_share}")
        if not (np.isfinite(self.collision_margin) and 0 <= self.collision_margin <= 1):
            raise DataError(f"collision_margin must be in [0, 1] m, got {self.collision_margin}")
        if self.max_kappa is not None and not (np.isfinite(self.max_kappa) and self.max_kappa > 1):
            raise DataError(f"max_kappa must be a condition number > 1, got {self.max_kappa}")
        if self.row_noise is not None:
            sig = np.asarray(self.row_noise, dtype=float)
            if (
                self.motion not in ("double-support", "single-support")
                or sig.shape != (3,)
                or not np.all(np.isfinite(sig) & (sig > 0))
            ):
                raise DataError(f"row_noise is three positive σ (Fz N, Mx, My N·m) of a standing design, "
                                f"got {self.row_noise} for motion {self.motion!r}")  # fmt: skip
        if self.criterion not in CRITERIA:
            raise DataError(f"criterion must be one of {CRITERIA}, got {self.criterion!r}")
        if self.focus is not None:
            if self.criterion != "logvar":
                raise DataError(
                    f"a focus on some base parameters needs the logvar criterion, not {self.criterion!r}"
                )
            f = list(self.focus)
            if not f or any(not isinstance(i, (int, np.integer)) or i < 0 for i in f) or len(set(f)) < len(f):
                raise DataError(
                    f"focus must name distinct base parameters (0-based indices ≥ 0), got {self.focus}"
                )
        if self.scaling not in SCALINGS:
            raise DataError(f"scaling must be one of {SCALINGS}, got {self.scaling!r}")
        for name in ("period", "duration", "acceleration_default"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise DataError(f"{name} must be a positive number, got {v}")
        for name in ("velocity_fraction", "acceleration_fraction", "torque_fraction"):
            v = getattr(self, name)
            if not (np.isfinite(v) and 0 < v <= 1):
                raise DataError(f"{name} must be in (0, 1], got {v}")
        ratio = self.duration / self.period
        if abs(ratio - round(ratio)) > 1e-9:
            raise DataError(f"duration {self.duration} s must be a whole number of periods ({self.period} s)")
        if self.dense_factor < 1:
            raise DataError(f"dense_factor must be ≥ 1, got {self.dense_factor}")
        if self.parametrisation == "fourier" and (
            self.harmonics < 1 or self.samples < 2 * self.harmonics + 2
        ):
            raise DataError("need harmonics ≥ 1 and samples ≥ 2·harmonics + 2 per period")


@dataclass
class ExcitationResult:
    """The designed trajectory with its true condition numbers and verification on a finer grid."""

    trajectory: FourierTrajectory | SplineTrajectory
    kappa: float  # raw base regressor
    kappa_scaled: float  # column-normalised base regressor
    logdet: float  # log det(WᵀW) of the column-normalised regressor
    iterations: int
    seconds: float
    status: str
    base_symbols: list[str]
    base: str = ""
    params: str = ""
    verification: dict = field(default_factory=dict)
    stages: list[dict] = field(default_factory=list)
    kappa_with_prior_scaled: float | None = (
        None  # κ of [prior; new] (column-scaled), when designed with a prior
    )
    objective: float = (
        math.nan
    )  # logdet/logvar criteria: the criterion's value (of [prior; new] with a prior)
    seed: int | None = None  # the random start's seed (`multistart.design_starts` sets it)


@dataclass(frozen=True)
class Prior:
    """Experiments already made: their stacked base-regressor rows, sampled every period/samples s of the next
    design (in its row order: `row_weights`), and for a robot standing on both soles the closed chain (foot
    placement) they stood in, which the next design keeps so that the runs are fitted together."""

    rows: np.ndarray
    chain: object | None = None  # trajectories.closed_chain.ClosedChain


def row_weights(settings: ExcitationSettings, rows: int) -> np.ndarray:
    """1/σ of each row of a stacked regressor, ones without `row_noise`: double support's rows by sample, then Fz,
    Mx, My; single support's by component, Fz at every sample, then Mx, then My (`single_support.by_component`)."""
    if settings.row_noise is None:
        return np.ones(rows)
    w = 1.0 / np.asarray(settings.row_noise, dtype=float)
    return (np.repeat if settings.motion == "single-support" else np.tile)(w, rows // len(w))


def with_prior(
    W: np.ndarray, settings: ExcitationSettings, prior: Prior | None, weighted: bool = True
) -> np.ndarray:
    """[prior; w·W], w = √periods (W covers one period), or W alone; rows weighted by `row_weights`."""

    def rw(M: np.ndarray) -> np.ndarray:
        return M * row_weights(settings, M.shape[0])[:, None] if weighted else M

    if prior is None:
        return rw(W)
    return np.vstack([rw(prior.rows), np.sqrt(settings.duration / settings.period) * rw(W)])


def design_result(
    traj,
    W: np.ndarray,
    symbols,
    iterations: int,
    status: str,
    stages: list[dict],
    base: str,
    params: str,
    settings: ExcitationSettings,
    prior,
    t0: float,
) -> ExcitationResult:
    """A design's result from its final objective matrix W (samples · rows × base parameters): κ raw and
    column-scaled, log det of the scaled information, the criterion's value and, with a prior, κ of the experiments
    together; time since t0 (perf_counter)."""
    Wn, _ = normalised_columns(W)
    sv = np.linalg.svd(Wn, compute_uv=False)
    with np.errstate(divide="ignore"):  # a rank-deficient motion: −inf, said by κ = inf beside it
        logdet = float(2 * np.sum(np.log(sv)))
    result = ExcitationResult(
        traj,
        kappa(W),
        kappa(Wn),
        logdet,
        iterations,
        time.perf_counter() - t0,
        status,
        symbols,
        base=base,
        params=params,
        stages=stages,
    )
    finish_with_prior(result, W, settings, prior)
    return result  # fmt: skip


def finish_with_prior(result: ExcitationResult, W: np.ndarray, settings: ExcitationSettings, prior) -> None:
    """Fill the result's criterion value and, with a prior, κ of the experiments together."""
    both = with_prior(W, settings, prior)
    if settings.criterion in ("logdet", "logvar"):
        result.objective = float(criterion_value(both, replace(settings, max_kappa=None), 1.0)[0])
    if prior is not None:
        result.kappa_with_prior_scaled = kappa(normalised_columns(with_prior(W, settings, prior, False))[0])


class _Criterion(ca.Callback):
    """f(W) or ∂f/∂W (row) as a CasADi node; W is the stacked base regressor (vec, column-major). With `prior`
    (rows of the same base regressor from experiments already made), the criterion is that of [prior; w·W]:
    the next experiment completes the information at hand (w = √periods: W covers one period)."""

    def __init__(
        self,
        name: str,
        shape: tuple[int, int],
        settings: ExcitationSettings,
        grad: _Criterion | None,
        prior: Prior | None = None,
    ):
        ca.Callback.__init__(self)
        self.shape, self.settings, self.grad_node = shape, settings, grad
        self.p = settings.sharpness[0]
        self.prior = prior
        self.weight = np.sqrt(settings.duration / settings.period)
        self.construct(name, {"enable_fd": False})

    def get_n_in(self):
        return 1

    def get_n_out(self):
        return 1

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self.shape[0] * self.shape[1], 1)

    def get_sparsity_out(self, i):
        n = self.shape[0] * self.shape[1]
        return ca.Sparsity.dense(1, 1) if self.grad_node is not None else ca.Sparsity.dense(1, n)

    @in_callback
    def eval(self, arg):
        W = np.asarray(arg[0]).reshape(self.shape, order="F")
        f, G = criterion_value(with_prior(W, self.settings, self.prior), self.settings, self.p)
        if self.prior is not None:
            G = self.weight * G[self.prior.rows.shape[0] :]
        G = G * row_weights(self.settings, W.shape[0])[:, None]
        if self.grad_node is not None:
            return [ca.DM(f)]
        return [ca.DM(G.reshape(-1, order="F")).T]

    def has_jacobian(self):
        return self.grad_node is not None

    def get_jacobian(self, name, inames, onames, opts):
        w = ca.MX.sym("w", self.sparsity_in(0))
        out = ca.MX.sym("out", self.sparsity_out(0))
        return ca.Function(name, [w, out], [self.grad_node(w)], inames, onames, opts)


Values = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
Partials = Callable[[np.ndarray, np.ndarray, np.ndarray], list[tuple[np.ndarray, np.ndarray]]]


class _JacobianNode(ca.Callback):
    """A numpy-evaluated node of one input and one output whose Jacobian is `jac_node` — an instance of the same
    class built with jac=False, inputs (x, out) — of sparsity `jac_sparsity` (None: dense). The subclasses set
    these before `construct`."""

    is_jac = False
    jac_node: ca.Callback | None = None
    jac_sparsity: ca.Sparsity | None = None

    def get_n_in(self):
        return 2 if self.is_jac else 1

    def get_n_out(self):
        return 1

    def has_jacobian(self):
        return self.jac_node is not None

    def has_jac_sparsity(self, oind, iind):
        return self.jac_node is not None and self.jac_sparsity is not None

    def get_jac_sparsity(self, oind, iind, symmetric):
        return self.jac_sparsity

    def get_jacobian(self, name, inames, onames, opts):
        x = ca.MX.sym("x", self.sparsity_in(0))
        out = ca.MX.sym("out", self.sparsity_out(0))
        return ca.Function(name, [x, out], [self.jac_node(x, out)], inames, onames, opts)


class _GridCallback(_JacobianNode):
    """c outputs at each of K grid samples of the trajectory x = vec(X) (q = P X, q̇ = V X, q̈ = A X), stacked by
    output, then sample (like vec of a K × c matrix), with an exact Jacobian node assembled from per-sample
    Jacobians and the constant bases — no AD through the grid. `values(q, q̇, q̈)` (states (n, K)) gives the
    (c, K) outputs, `partials` a list of (∂h/∂s (K, c, n), basis of s) for each state s they depend on."""

    def __init__(
        self, name: str, bases, n: int, c: int, values: Values, partials: Partials, jac: bool = True
    ):
        ca.Callback.__init__(self)
        self.P, self.V, self.A = bases
        self.K, self.m = self.P.shape
        self.n, self.c = n, c
        self.values, self.partials = values, partials
        self.is_jac = not jac
        self.jac_node = (
            _GridCallback(name + "_jac", bases, n, c, values, partials, jac=False) if jac else None
        )
        self.construct(name, {"enable_fd": False})

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self.m * self.n, 1) if i == 0 else ca.Sparsity.dense(self.K * self.c, 1)

    def get_sparsity_out(self, i):
        if self.is_jac:
            return ca.Sparsity.dense(self.K * self.c, self.m * self.n)
        return ca.Sparsity.dense(self.K * self.c, 1)

    def _states(self, x):
        X = np.asarray(x).reshape(self.m, self.n, order="F")
        return (self.P @ X).T, (self.V @ X).T, (self.A @ X).T

    def has_eval_buffer(self):
        return True

    @in_callback
    def eval_buffer(self, arg, res):
        """Writes straight into CasADi's memory (column-major): converting a dense Jacobian to a DM cost more
        than computing it."""
        states = self._states(np.frombuffer(arg[0], dtype=np.float64))
        out = np.frombuffer(res[0], dtype=np.float64)
        if not self.is_jac:
            out[:] = np.asarray(self.values(*states)).reshape(-1)  # (c, K) rows: by output, then sample
            return 0
        J = out.reshape(self.n, self.m, self.c, self.K)  # column (joint, coefficient), row (output, sample)
        J[...] = sum(np.einsum("kci,kj->ijck", D, B) for D, B in self.partials(*states))
        return 0


def _mapped_grid(name: str, h: ca.Function, bases) -> _GridCallback:
    """h(q, q̇, q̈) (a small SX function) and its per-sample Jacobian, both mapped over the grid."""
    P, V, A = bases
    K, n = P.shape[0], h.size1_in(0)
    c = h.size1_out(0)
    hmap = h.map(K)
    q, qd, qdd = (ca.SX.sym(nm, n) for nm in ("q", "qd", "qdd"))
    dh = ca.Function("dh", [q, qd, qdd], [ca.jacobian(h(q, qd, qdd), ca.vertcat(q, qd, qdd))]).map(K)

    def partials(q, qd, qdd):
        D = np.asarray(dh(q, qd, qdd)).reshape(c, K, 3 * n).transpose(1, 0, 2)  # K, c, 3n
        return [(D[..., :n], P), (D[..., n : 2 * n], V), (D[..., 2 * n :], A)]

    return _GridCallback(name, bases, n, c, lambda q, qd, qdd: np.asarray(hmap(q, qd, qdd)), partials)


class _SampleClearance(_JacobianNode):
    """The links' soft clearances at K postures: vec(Q) (Q: nq × K, a posture per column) ↦ vec of the
    (pairs × K) clearances, with a block-diagonal Jacobian (a sample's rows depend on its posture only). Numpy
    evaluation (robots.collision.soft_clearance): CasADi's SX graph of every sphere pair made each IPOPT iteration
    ~3× slower. The designs compose it with their postures (Fourier series, dependent joints), CasADi's chain rule
    doing the rest; values and Jacobian at one point come from one evaluation (IPOPT asks for both)."""

    def __init__(self, name: str, model: RobotModel, pairs, params: str, K: int, jac: bool = True, memo=None):
        ca.Callback.__init__(self)
        self.model, self.pairs, self.params = model, pairs, params
        self.K, self.n, self.c = K, model.nq, len(pairs.pairs)
        self.memo = {} if memo is None else memo  # shared with the Jacobian node
        K, n, c = self.K, self.n, self.c
        # column (sample k, joint i) holds rows (sample k, pairs 0..c): column-major nonzeros in (k, i, pair) order
        cols = np.repeat(np.arange(K * n), c)
        rows = (c * np.repeat(np.arange(K), n * c) + np.tile(np.arange(c), K * n)).tolist()
        self.jac_sparsity = ca.Sparsity.triplet(K * c, K * n, rows, cols.tolist())
        self.is_jac = not jac
        self.jac_node = (
            _SampleClearance(name + "_jac", model, pairs, params, K, jac=False, memo=self.memo)
            if jac
            else None
        )
        self.construct(name, {"enable_fd": False})

    def evaluate(self, q: np.ndarray, jacobian: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """soft_clearance at postures q (K, nq), memoised for the last point."""
        key = q.tobytes()
        hit = self.memo.get(key)
        if hit is None or (jacobian and hit[1] is None):
            hit = soft_clearance(self.model, self.pairs, q, self.params, jacobian=jacobian)
            self.memo.clear()
            self.memo[key] = hit
        return hit

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self.K * self.n, 1) if i == 0 else ca.Sparsity.dense(self.K * self.c, 1)

    def get_sparsity_out(self, i):
        return self.jac_sparsity if self.is_jac else ca.Sparsity.dense(self.K * self.c, 1)

    def has_eval_buffer(self):
        return True

    @in_callback
    def eval_buffer(self, arg, res):
        """Straight into CasADi's memory: the values (K, pairs) row-major are vec of pairs × K; the Jacobian's
        nonzeros (K, nq, pairs) row-major are its column-major order."""
        q = np.frombuffer(arg[0], dtype=np.float64).reshape(self.K, self.n)
        out = np.frombuffer(res[0], dtype=np.float64)
        values, J = self.evaluate(q, self.is_jac)
        out[:] = (J.transpose(0, 2, 1) if self.is_jac else values).reshape(-1)
        return 0


def check_prior(prior: Prior | None, rank: int) -> None:
    """The prior's rows must be of the design's base regressor."""
    if prior is not None and (prior.rows.ndim != 2 or prior.rows.shape[1] != rank):
        raise DataError(f"prior regressor has shape {prior.rows.shape}; expected (rows, {rank})")


def focus_record(stage: ExcitationSettings) -> dict:
    """What a stage record says of its focus: the base parameters it was for, when not all."""
    return {} if stage.focus is None else {"focus": [f"ϑ{i + 1}" for i in stage.focus]}


def check_focus(settings: ExcitationSettings, rank: int) -> None:
    """The focus must name base parameters of the design's regressor."""
    if settings.focus is not None and max(settings.focus) >= rank:
        bad = ", ".join(f"ϑ{i + 1}" for i in settings.focus if i >= rank)
        raise DataError(f"focus names {bad}; the base regressor has {rank} parameters (ϑ1–ϑ{rank})")


def focus_weights(settings: ExcitationSettings, rank: int) -> np.ndarray | None:
    """1 on the focused base parameters, 0 elsewhere (None: all count)."""
    if settings.focus is None:
        return None
    w = np.zeros(rank)
    w[list(settings.focus)] = 1.0
    return w


def criterion_value(W: np.ndarray, settings: ExcitationSettings, p: float) -> tuple[float, np.ndarray]:
    """The criterion and its gradient w.r.t. the raw stacked regressor W."""
    if settings.scaling == "columns":
        Wn, d = normalised_columns(W)
    else:
        Wn, d = W, None
    if settings.criterion == "kappa":
        f, G = surrogate(Wn, p)
    elif settings.criterion == "logvar":
        f, G = log_variances(Wn, focus_weights(settings, W.shape[1]))
    else:
        f, G = log_det_information(Wn)
    G = normalised_gradient(Wn, d, G) if d is not None else G
    if (
        settings.max_kappa is not None
    ):  # the squared excess of log κ (surrogate, column-scaled) over the bound
        Wk, dk = (Wn, d) if d is not None else normalised_columns(W)
        fk, Gk = surrogate(Wk, KAPPA_BOUND_SHARPNESS)
        excess = fk - float(np.log(settings.max_kappa))
        if excess > 0:
            f += KAPPA_BOUND_WEIGHT * excess**2
            G = G + 2 * KAPPA_BOUND_WEIGHT * excess * normalised_gradient(Wk, dk, Gk)
    return f, G


def criterion_stages(settings: ExcitationSettings) -> list[tuple[ExcitationSettings, float]]:
    """The continuation's stages, (settings, surrogate sharpness) each: the κ surrogate from blunt to sharp, or
    one D-optimal stage. D-optimality with `max_kappa` starts from the κ criterion's stages (without the bound):
    from a well-conditioned start the bound's penalty only guards, where from a random one it dominated (on TUlip
    100 iterations left κ 964 against a bound of 500). Log variances start from D-optimality's stage, and a focus
    on some parameters from the design for all."""
    if settings.criterion == "kappa":
        return [(settings, p) for p in settings.sharpness]
    stages = []
    if settings.max_kappa is not None:
        plain = replace(settings, criterion="kappa", scaling="columns", max_kappa=None)
        stages = [(plain, p) for p in settings.sharpness]
    if settings.criterion == "logvar":  # from D-optimality's optimum: from a random start it stalled higher
        stages.append((replace(settings, criterion="logdet", focus=None), 1.0))
        if (
            settings.focus is not None
        ):  # from the design for all: from D-optimality's, one parameter's stalled
            stages.append(
                (replace(settings, focus=None), 1.0)
            )  # worse than that design (TUlip ϑ7: 1564 % vs 226)
    return stages + [(settings, 1.0)]


def position_range(model: RobotModel, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """The positions a design may use: the limits less `margin` (continuous joints ±π); DataError names a joint
    the margin leaves no range (a gripper finger, say: lock it in a robot description)."""
    lo, hi = model.sampling_bounds(model.lower + margin, model.upper - margin)
    if np.any(lo >= hi):
        bad = [model.joint_names[i] for i in np.flatnonzero(lo >= hi)]
        raise DataError(
            f"position margin {margin:g} leaves no range for joint(s) {', '.join(bad)}: lower --position-margin, "
            "or fix the joint(s) in a robot description (.poise.toml: [reduce] lock = {NAME = VALUE}, README "
            '"Robot descriptions")'
        )
    return lo, hi


def check_rate_limits(model: RobotModel) -> None:
    """DataError naming the joints whose velocity or effort limit is zero or missing (CAD URDFs often leave them
    out): a design bounds its speed and torques by them, and without them would run unbounded or not at all."""
    bad = []
    for name, v, e in zip(model.joint_names, model.velocity_limit, model.effort_limit, strict=True):
        what = [f"{kind} {'missing' if not np.isfinite(x) else f'{x:g}'}"
                for kind, x in (("velocity", v), ("effort", e)) if not (np.isfinite(x) and x > 0)]  # fmt: skip
        if what:
            bad.append(f"{name} ({', '.join(what)})")
    m = mimic_limits(model)  # a mimic's own velocity limit: missing is no limit, zero allows no motion
    bad += [f"{n} (mimic joint: velocity {v:g})" for n, v in zip(m.names, m.velocity, strict=True) if v <= 0]
    if bad:
        raise DataError(
            f"joint limit(s) zero or missing: {'; '.join(bad)}; a design needs every joint's velocity [rad/s] and "
            "effort [N·m] limits: set them in a robot description (.poise.toml: [joint_limits.NAME] velocity = …, "
            'effort = …, README "Robot models (`robots/`)")'
        )


def _limits(model: RobotModel, settings: ExcitationSettings):
    """Position range less the margin, and the velocity, acceleration and effort limits less their fractions."""
    check_rate_limits(model)
    lo, hi = position_range(model, settings.position_margin)
    vmax = model.velocity_limit * settings.velocity_fraction
    amax = acceleration_limits(model, settings.acceleration_default) * settings.acceleration_fraction
    tmax = model.effort_limit * settings.torque_fraction
    return lo, hi, vmax, amax, tmax


def rest_posture(model: RobotModel, settings: ExcitationSettings) -> np.ndarray | None:
    """The settings' rest posture (rad) checked against the robot: one angle per joint, each inside its range
    less the position margin (the design keeps every sample there); None when there is none."""
    if settings.rest_posture is None:
        return None
    r = np.asarray(settings.rest_posture, dtype=float)
    if r.shape != (model.nq,):
        raise DataError(f"rest posture has {r.size} angles; {model.name!r} has {model.nq} joints "
                        f"({', '.join(model.joint_names)})")  # fmt: skip
    lo, hi = _limits(model, settings)[:2]
    bad = [f"{model.joint_names[i]} ({r[i]:.4g} rad not in [{lo[i]:.4g}, {hi[i]:.4g}])"
           for i in np.flatnonzero((r < lo - 1e-12) | (r > hi + 1e-12))]  # fmt: skip
    if bad:
        raise DataError(f"rest posture outside the joint ranges less the {settings.position_margin:g} rad "
                        f"margin: {', '.join(bad)}")  # fmt: skip
    return r


def _mimic_rows(
    model: RobotModel, settings: ExcitationSettings, bases, blocks: list, lbg: list, ubg: list
) -> None:
    """Appends the mimic joints' own position range (less the margin) and velocity limit (times its fraction) on
    the dense grid: q_m = A q + b (`robots.joint_limits`), rows kron(A, P) and kron(A, V)."""
    m = mimic_ranges(model, *position_range(model, settings.position_margin), settings.position_margin)
    Pd, Vd = bases
    K = Pd.shape[0]
    lo = np.where(np.isfinite(m.lower), m.lower + settings.position_margin - m.b, -np.inf)
    hi = np.where(np.isfinite(m.upper), m.upper - settings.position_margin - m.b, np.inf)
    vmax = m.velocity * settings.velocity_fraction
    for B, lb, ub in ((Pd, lo, hi), (Vd, -vmax, vmax)):
        keep = np.isfinite(lb) | np.isfinite(ub)
        if np.any(keep):
            blocks.append(sparse.kron(m.A[keep], B))
            lbg.append(np.repeat(lb[keep], K))
            ubg.append(np.repeat(ub[keep], K))


def linear_limit_rows(
    model: RobotModel, settings: ExcitationSettings
) -> tuple[sparse.csc_matrix, list, list]:
    """Rest at both ends, position/velocity/acceleration and coupled limits on the dense grid: rows G x with
    bounds, x = vec(X) of every joint's Fourier coefficients or spline waypoints. Linear in x — vec(B X) =
    (I ⊗ B) x — so one constant sparse matrix (IPOPT then need not re-derive it through the MX graph: 150 ms on the
    iCub)."""
    lo, hi, vmax, amax, _ = _limits(model, settings)
    n = model.nq
    Kd = settings.samples * settings.dense_factor
    Pd, Vd, Ad = design_bases(settings, design_times(settings, Kd))
    eye = sparse.identity(n)
    E = rest_rows(settings)
    blocks = [sparse.kron(eye, B) for B in (E, Pd, Vd, Ad)]
    lbg = [np.zeros(len(E) * n), np.repeat(lo, Kd), np.repeat(-vmax, Kd), np.repeat(-amax, Kd)]
    ubg = [np.zeros(len(E) * n), np.repeat(hi, Kd), np.repeat(vmax, Kd), np.repeat(amax, Kd)]
    rest = rest_posture(model, settings)
    if rest is not None:  # q = rest where the motion starts and ends (a Fourier series: every period's end)
        S = start_rows(settings)
        blocks.append(sparse.kron(eye, S))
        lbg.append(np.repeat(rest, len(S)))
        ubg.append(np.repeat(rest, len(S)))
    _mimic_rows(model, settings, (Pd, Vd), blocks, lbg, ubg)
    if len(model.coupled_b):  # linear coupled limits (e.g. tendon lengths) on the dense grid
        blocks.append(sparse.kron(model.coupled_A, Pd))
        lbg.append(np.full(Kd * len(model.coupled_b), -np.inf))
        ubg.append(np.repeat(model.coupled_b - COUPLED_MARGIN, Kd))
    G = sparse.vstack(blocks).tocsr()
    G.eliminate_zeros()
    lb, ub = np.concatenate(lbg), np.concatenate(ubg)
    # rows with no entry (a clamped spline's velocity at its ends) hold by construction; IPOPT wants none
    keep = (np.diff(G.indptr) > 0) | (lb > 0) | (ub < 0)
    return G[keep].tocsc(), [lb[keep]], [ub[keep]]


def clearance_rows(model: RobotModel, settings: ExcitationSettings, params: str, bases, x, g: list, lbg: list,
                   ubg: list) -> list:  # fmt: skip
    """Appends the links' soft clearances ≥ margin + buffer on the design grid of the Fourier coefficients x
    (q = P X) to (g, lbg, ubg), when the robot has link pairs that can meet; returns the callback nodes."""
    P = bases[0]
    X = ca.reshape(x, P.shape[1], model.nq)
    return posture_clearance_rows(model, settings, params, ca.transpose(ca.DM(P) @ X), g, lbg, ubg)


def posture_clearance_rows(model: RobotModel, settings: ExcitationSettings, params: str, Q: ca.MX, g: list,
                           lbg: list, ubg: list) -> list:  # fmt: skip
    """Appends the links' soft clearances ≥ margin + buffer at the postures Q (nq × K, any expression of the
    design variables) to (g, lbg, ubg), when `settings.self_collision` and the robot has link pairs that can
    meet (all pairs are verified exactly on the fine grid afterwards); returns the callback nodes."""
    pairs = near_pairs(model, params, settings.collision_margin) if settings.self_collision else None
    if pairs is None or not pairs.pairs:
        return []
    if Q.size1() != model.nq:
        raise DataError(f"clearance rows need postures of {model.nq} joints, got {Q.size1()}")
    K = Q.size2()
    node = _SampleClearance("clearance", model, pairs, params, K)
    g.append(node(ca.vec(Q)))
    lbg.append(np.full(K * len(pairs.pairs), settings.collision_margin + COLLISION_BUFFER))
    ubg.append(np.full(K * len(pairs.pairs), np.inf))
    return [node]


def fourier_problem(x, W, tau, g, lbg, ubg, db, limits, params, base, nodes, **extra) -> dict:
    """The NLP pieces of a design over every joint's Fourier coefficients (or spline waypoints) x, as
    `solve_lazy_torques` takes them."""
    return {
        "x": x,
        "W": W,
        "g": ca.vertcat(*g),
        "lbg": np.concatenate(lbg),
        "ubg": np.concatenate(ubg),
        "W_fun": ca.Function("W", [x], [W]),
        "tau_fun": ca.Function("tau", [x], [tau]),
        "base": db,
        "limits": limits,
        "params": params,
        "base_link": base,
        "nodes": nodes,
        **extra,
    }  # fmt: skip  (callbacks in `nodes` must outlive the solver)


def design_problem(
    model: RobotModel, settings: ExcitationSettings, torque_rows: bool = True, excursion_rows: bool = False
):
    """The NLP pieces: decision X ((1+2L) × n coefficients or (waypoints+2) × n, vec), W(X) (MX), constraints
    g(X) with bounds, helpers.
    `torque_rows` False leaves the torque limits out of g (`tau_fun` still evaluates them); `excursion_rows` True
    adds every joint's minimum excursion (`excursion_floor`): see `optimise`."""
    settings.validate()
    base = settings.base or model.root
    params = settings.params or next(iter(model.params))
    db = cached_dynamic_base(model, RegressorSpec("torque", base), settings.simplified)
    n, K = model.nq, settings.samples
    P, V, A = design_bases(settings, design_times(settings, K))
    m = P.shape[1]
    x = ca.MX.sym("x", m * n)
    X = ca.reshape(x, m, n)
    Q, Qd, Qdd = ca.DM(P) @ X, ca.DM(V) @ X, ca.DM(A) @ X  # K × n
    ysx = dyn.torque_regressor_function(model, base, params)
    qs, qds, qdds = (ca.SX.sym(nm, n) for nm in ("q", "qd", "qdd"))
    Y = ysx(qs, qds, qdds)
    phi = dyn.standard_parameters(model, params)
    # per sample: the base-regressor rows and the torques with the guessed parameters, mapped over the grid
    Yb = Y[:, db.independent]
    if settings.friction:
        Yb = ca.horzcat(Yb, friction_columns(qds))
    rows = ca.Function("rows", [qs, qds, qdds], [Yb]).map(K)
    r = Yb.size2()
    W = ca.reshape(rows(Q.T, Qd.T, Qdd.T).T, r, K * n).T  # K·n × r (rows by joint, then sample)
    tau_node = _mapped_grid("torques", ca.Function("torque", [qs, qds, qdds], [Y @ ca.DM(phi)]), (P, V, A))
    tau = tau_node(x)  # K·n torques, by joint then sample
    lo, hi, vmax, amax, tmax = _limits(model, settings)
    G, lbg, ubg = linear_limit_rows(model, settings)
    linear = (G, lbg[0], ubg[0])  # `onto_equalities` moves the solution onto these rows' equalities
    g = [ca.mtimes(ca.DM(G), x)]
    if torque_rows and np.all(np.isfinite(tmax)):
        g.append(tau)
        lbg.append(np.repeat(-tmax, K))  # rows ordered by joint, then sample (as W's)
        ubg.append(np.repeat(tmax, K))
    if excursion_rows:  # variance of each joint's angle over the grid ≥ the floor squared
        g.append(grid_variances(P, X))
        lbg.append(excursion_floor(model, settings) ** 2)
        ubg.append(np.full(n, np.inf))
    nodes = [tau_node] + clearance_rows(model, settings, params, (P, V, A), x, g, lbg, ubg)
    symbols = list(db.symbols) + (friction_symbols(model) if settings.friction else [])
    return fourier_problem(
        x, W, tau, g, lbg, ubg, db, (lo, hi, vmax, amax, tmax), params, base, nodes, symbols=symbols,
        linear=linear,
    )  # fmt: skip


def grid_variances(P: np.ndarray, X) -> ca.MX:
    """Each joint's angle variance over the grid q = P X (n × 1): quadratic in the design's coefficients."""
    C = P - P.mean(axis=0)
    M = C.T @ C / P.shape[0]
    return ca.transpose(ca.sum1(X * (ca.DM(M) @ X)))


def excursion_floor(model: RobotModel, settings: ExcitationSettings) -> np.ndarray:
    """Per joint, the least std of its angle (rad) a free design keeps: `min_excursion` × that of the largest
    sinusoid at the fundamental frequency its position, velocity and acceleration limits allow (A/√2). Over a
    period the RMS velocity is then at least 2π/period × this (Wirtinger), so friction and inertia see motion."""
    lo, hi, vmax, amax, _ = _limits(model, settings)
    w = 2 * math.pi / settings.period
    amplitude = np.minimum.reduce([(hi - lo) / 2, vmax / w, amax / w**2])
    return settings.min_excursion * amplitude / math.sqrt(2)


def short_joints(
    model: RobotModel, settings: ExcitationSettings, x: np.ndarray, slack: float = 1.0
) -> list[int]:
    """The joints whose angle std on the criterion grid falls below `slack` × `excursion_floor`."""
    q = grid_angles(model, settings, x)
    return [int(j) for j in np.flatnonzero(q.std(axis=0) < slack * excursion_floor(model, settings))]


def grid_angles(model: RobotModel, settings: ExcitationSettings, x: np.ndarray) -> np.ndarray:
    """The design's joint angles (K, n) on its criterion grid."""
    P, _, _ = design_bases(settings, design_times(settings, settings.samples))
    return P @ np.asarray(x, float).reshape(P.shape[1], model.nq, order="F")


def solve_free(
    model: RobotModel, settings: ExcitationSettings, x0: np.ndarray, prior: Prior | None
) -> tuple[dict, np.ndarray, int, str, list[dict]]:
    """`solve_lazy_torques` on the free-motion problem, then the joints' excursion floor the same lazy way: a
    design that leaves a joint short is solved again (last stage) with the floor's rows — designs that move
    every joint enough are unchanged."""
    prob, x, iterations, status, stages = solve_lazy_torques(
        lambda rows: design_problem(model, settings, torque_rows=rows), settings, x0, prior
    )
    short = short_joints(model, settings, x)
    if not short:
        return prob, x, iterations, status, stages
    torques = any(st.get("torque_rows") for st in stages)
    for rows in (torques, True) if not torques else (True,):
        prob = design_problem(model, settings, torque_rows=rows, excursion_rows=True)
        x, extra, status, again = solve_stages(prob, settings, prior, x, last_only=True)
        iterations += extra
        names = [model.joint_names[j] for j in short]
        stages += [{**st, "excursion_rows": names} | ({"torque_rows": True} if rows else {}) for st in again]
        ratio = _torque_ratio(prob, x) if np.all(np.isfinite(prob["limits"][4])) else None
        stages[-1]["torque_ratio"] = ratio
        if ratio is None or ratio <= 1.0:
            break
    return prob, x, iterations, status, stages


def friction_columns(qd: ca.SX) -> ca.SX:
    """One sample's friction columns (n × 2n): viscous q̇ and smooth Coulomb tanh(q̇ / FRICTION_VELOCITY) per joint,
    in `identify dynamic`'s order (`friction_symbols`)."""
    return ca.horzcat(ca.diag(qd), ca.diag(ca.tanh(qd / FRICTION_VELOCITY)))


def friction_rows(qd: np.ndarray) -> np.ndarray:
    """`friction_columns` of sampled velocities qd (K, n), evaluated over the samples, rows by sample then joint:
    (K·n, 2n) — a prior's rows, with the columns the design's criterion has."""
    K, n = qd.shape
    s = ca.SX.sym("qd", n)
    out = ca.Function("friction", [s], [friction_columns(s)]).map(K)(qd.T).full()  # n × (K·2n), by sample
    return out.reshape(n, K, 2 * n).transpose(1, 0, 2).reshape(K * n, 2 * n)


def friction_symbols(model: RobotModel) -> list[str]:
    return [f"{kind}@{j}" for kind in ("fv", "fc") for j in model.joint_names]


def onto_equalities(G, lb: np.ndarray, ub: np.ndarray, x: np.ndarray) -> np.ndarray:
    """x moved the least distance onto the equalities (lb = ub) among the linear rows G x (`linear_limit_rows`: rest
    at the ends, the rest posture): IPOPT keeps them to its constraint tolerance (a spline's last waypoint ended
    1.4e-5 rad off its rest posture, beyond the check's 1e-5), and a plan must start and end exactly where it says."""
    eq = np.flatnonzero(lb == ub)
    if not len(eq):
        return x
    A = G[eq].toarray()
    return x - A.T @ np.linalg.lstsq(A @ A.T, A @ x - lb[eq], rcond=None)[0]


def random_start(model: RobotModel, settings: ExcitationSettings, rng: np.random.Generator) -> np.ndarray:
    """A feasible-looking start (vec of the design matrix): mid-range, small random harmonics at rest at t = 0 or
    waypoints within reach of each other; moved to start in the rest posture when there is one."""
    lo, hi, vmax, amax, _ = _limits(model, settings)
    X = random_rows(settings, lo, hi, vmax, amax, rng)
    rest = rest_posture(model, settings)
    if rest is not None:
        X = shift_to_rest(settings, X, rest)
    return X.reshape(-1, order="F")


def _torque_ratio(prob: dict, x: np.ndarray) -> float:
    """Largest |τ| / (fraction of the effort limit) on the criterion grid, with the guessed parameters."""
    tmax = prob["limits"][4]
    tau = np.asarray(prob["tau_fun"](x)).reshape(len(tmax), -1)  # by joint, then sample
    return float(np.max(np.abs(tau) / tmax[:, None]))


def ipopt_options(settings: ExcitationSettings) -> dict:
    """IPOPT's options for an excitation design (quasi-Newton Hessian: the criterion is a callback)."""
    return {
        "ipopt.print_level": 0,
        "print_time": False,
        "ipopt.hessian_approximation": "limited-memory",
        "ipopt.max_iter": settings.max_iter,
        "ipopt.tol": 1e-6,
        "ipopt.acceptable_tol": 1e-4,
        "ipopt.sb": "yes",
    }


def solve_stages(
    prob: dict,
    settings: ExcitationSettings,
    prior: Prior | None,
    x: np.ndarray,
    last_only: bool = False,
    warm: bool = True,
    name: str = "excitation",
) -> tuple[np.ndarray, int, str, list[dict]]:
    """IPOPT through the criterion's continuation (blunt surrogates warm-start the sharp one) from x, on any
    problem with the design vector `x`, objective matrix `W` (`W_fun`) and constraints `g` of `prob`; `last_only`:
    the final stage alone (x is a solution of the earlier ones); `warm`: the earlier stages with half the
    iterations and a loose tolerance (False: every stage with the settings' options)."""
    Wshape = prob["W_fun"].size_out(0)  # (samples · rows, base parameters)
    grad = _Criterion("criterion_grad", Wshape, settings, None, prior)
    crit = _Criterion("criterion", Wshape, settings, grad, prior)
    f = crit(ca.vec(prob["W"]))
    opts = ipopt_options(settings)
    nlp = {"x": prob["x"], "f": f, "g": prob["g"]}
    # the blunter surrogates only warm-start the last: half the iterations and a loose tolerance (on the iCub
    # arm: 400 → 269–300 iterations, 146–158 → 89 s, the same κ)
    loose = {
        **opts,
        "ipopt.max_iter": max(1, settings.max_iter // 2),
        "ipopt.tol": 1e-3,
        "ipopt.acceptable_tol": 1e-2,
    }
    solvers: dict[bool, ca.Function] = {}  # one per set of options (the stages only change the callbacks)
    stages: list[dict] = []
    iterations, status = 0, ""
    ps = criterion_stages(settings)[-1:] if last_only else criterion_stages(settings)
    for k, (stage, p) in enumerate(ps):
        crit.settings = grad.settings = stage
        crit.p = grad.p = p
        crit.prior = grad.prior = stage_prior(settings, prior, k == len(ps) - 1)
        blunt = warm and k < len(ps) - 1
        if blunt not in solvers:
            solvers[blunt] = ca.nlpsol(name, "ipopt", nlp, loose if blunt else opts)
        solver = solvers[blunt]
        with interruptible():
            sol = solver(x0=x, lbg=prob["lbg"], ubg=prob["ubg"], lbx=prob.get("lbx", -np.inf),
                         ubx=prob.get("ubx", np.inf))  # fmt: skip
        st = solver.stats()
        x = np.asarray(sol["x"]).ravel()
        iterations += int(st.get("iter_count", 0))
        status = str(st.get("return_status", ""))
        W = np.asarray(prob["W_fun"](x))
        timing = {k[7:]: round(v, 2) for k, v in st.items() if k.startswith("t_wall_") and v >= 0.05}
        stages.append({"criterion": stage.criterion, "sharpness": p, "status": status,
                       "iterations": int(st.get("iter_count", 0)), "kappa_scaled": kappa(normalised_columns(W)[0]),
                       "kappa": kappa(W), "timing_s": timing} | focus_record(stage) | prior_record(prior, crit.prior))  # fmt: skip
    return x, iterations, status, stages


def prior_record(prior: Prior | None, used: Prior | None) -> dict:
    """A stage record's note of the prior: whether the stage completed it (nothing without one)."""
    return {} if prior is None else {"with_prior": used is not None}


def stage_prior(settings: ExcitationSettings, prior: Prior | None, last: bool) -> Prior | None:
    """The prior a continuation stage completes. A focused design's warm-up (the design for all) ignores it:
    warmed up with it, focused TUlip designs given nine runs stalled where they began (Σ log var of ϑ5, ϑ7, ϑ8,
    ϑ18: −6.78, −6.75, −7.01 from −6.68 for the nine alone; warmed up alone −7.84, −7.97, −7.33, seeds 4, 5, 3).
    Designs for all keep it throughout (alone first, seeds 4–6 ended at Σ log var −135.1, −130.1, −133.9 of
    the pair against −137.9, −137.2, −140.8)."""
    return prior if last or settings.focus is None else None


def solve_lazy_torques(
    build: Callable[[bool], dict],
    settings: ExcitationSettings,
    x0: np.ndarray,
    prior: Prior | None = None,
) -> tuple[dict, np.ndarray, int, str, list[dict]]:
    """Solve the problem `build(torque_rows)` makes. Torque limits are dense rows (samples × joints, every
    coefficient) that rarely bind: left out, the result checked against them on the same grid, and the last
    stage solved again with them only if one is exceeded. Returns (problem, x, iterations, status, stages)."""
    prob = build(False)
    check_prior(prior, prob["W_fun"].size_out(0)[1])
    check_focus(settings, prob["base"].rank)
    x, iterations, status, stages = solve_stages(prob, settings, prior, x0)
    ratio = _torque_ratio(prob, x) if np.all(np.isfinite(prob["limits"][4])) else None
    if ratio is not None and ratio > 1.0:
        prob = build(True)
        x, extra, status, again = solve_stages(prob, settings, prior, x, last_only=True)
        iterations += extra
        stages += [{**st, "torque_rows": True} for st in again]
        ratio = _torque_ratio(prob, x)
    stages[-1]["torque_ratio"] = ratio
    return prob, x, iterations, status, stages


def optimise(
    model: RobotModel,
    settings: ExcitationSettings,
    start: np.ndarray | None = None,
    seed: int = 0,
    prior: Prior | None = None,
) -> ExcitationResult:
    """Design one excitation trajectory from `start` (coefficients) or a random start; `prior`: experiments
    already made, which the new one should complete."""
    if settings.motion == "double-support":
        from trajectories.balance_excitation import optimise_balance

        return optimise_balance(
            model,
            settings,
            seed,
            settings.zmp_margin,
            settings.amplitude,
            prior.chain if prior else None,
            prior,
        )
    if settings.motion == "single-support":
        from trajectories.single_support import optimise_single_support

        return optimise_single_support(model, settings, seed, prior)
    t0 = time.perf_counter()
    x0 = start if start is not None else random_start(model, settings, np.random.default_rng(seed))
    prob, x, iterations, status, stages = solve_free(model, settings, np.asarray(x0, float), prior)
    x = onto_equalities(*prob["linear"], x)
    traj = design_trajectory(settings, x.reshape(-1, model.nq, order="F"))
    W = np.asarray(prob["W_fun"](x))
    result = design_result(traj, W, prob["symbols"], iterations, status, stages, prob["base_link"],
                           prob["params"], settings, prior, t0)  # fmt: skip
    dt = min(0.001, settings.period / (settings.samples * 10))
    check = check_trajectory(
        model,
        traj,
        prob["base_link"],
        prob["params"],
        dt,
        settings.acceleration_default,
        settings.simplified,
        collision_margin=settings.collision_margin if settings.self_collision else None,
        rest_posture=rest_posture(model, settings),
    )
    result.verification = check.to_dict()
    still_short(model, settings, x, result.verification)
    return result


# A joint whose angle SD stays below this share of its excursion floor barely moves: a plan fails verification (the
# designer's, `plan check`'s, the run's). The design aims at the floor itself; one stopped at --max-iter may fall
# somewhat short of it, which is no failure.
BARELY = 0.25


def barely_moving(joint_names: Sequence[str], q: np.ndarray, floor: np.ndarray) -> str | None:
    """One problem line naming the joints whose angle SD over the samples q (K, n) stays below BARELY × their
    excursion floor (rad, `excursion_floor`): such a motion cannot identify what those joints carry; None."""
    sd, floor = np.asarray(q, float).std(axis=0), np.asarray(floor, float)
    short = np.flatnonzero(sd < BARELY * floor)
    if not len(short):
        return None
    named = ", ".join(f"{joint_names[j]} (SD {sd[j]:.3g} < {BARELY * floor[j]:.3g} rad)" for j in short)
    return (f"joint(s) {named} barely move: below {BARELY:g} of the excursion floor (`min_excursion` of the largest "
            "sinusoid their limits allow)")  # fmt: skip


def still_short(model: RobotModel, settings: ExcitationSettings, x: np.ndarray, verification: dict) -> None:
    """Adds a verification problem naming the joints the design leaves barely moving (`barely_moving`, on the
    criterion grid)."""
    if settings.min_excursion <= 0:
        return
    problem = barely_moving(
        model.joint_names, grid_angles(model, settings, x), excursion_floor(model, settings)
    )
    if problem:
        verification["problems"] = [*verification.get("problems", []), problem]
        verification["ok"] = False
