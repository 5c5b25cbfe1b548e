"""Doggy calibration as one SLOM problem: all N states and ϑ_calib, residual blocks of eq 33 with Σ of eqs 35–37.

Variables: x (N × R¹², eliminated), phys (R¹²: k_pwm, k_mi, b, µ_fm, k_s, d_s), bias1, bias2 (R³, rad/s),
R1 = IMU1_1 R and R2 = IMU2_EOF R (SO(3)) — 12N + 24 tangent unknowns.
Blocks: initial (9), measurement (7, per sample), dynamics (12, per step, explicit Euler with per-step T_s),
bias (6, per sample of the leading zero-command window).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import casadi as ca
import numpy as np

from formats.doggy_plan import DURATION_S
from formats.doggy_recording import COLUMNS, DoggyRecording, validate
from formats.errors import DataError, IdentifiabilityError
from identify import slom
from identify.manifolds import SO3, Rn, so3_log
from robots import doggy
from robots.doggy import DoggyParams, FlexibleJointRobot


@dataclass(frozen=True)
class _Facts:
    """Doggy's facts from its description (robots/data/doggy): joints, parameters, sensor noise (eq 35) and
    model uncertainty (eqs 36–37)."""

    ROBOT: FlexibleJointRobot
    NJ: int  # joints; the state is (q, q̇, θ, θ̇) ∈ R^(4·NJ)
    PHYS_NAMES: list[str]
    SIGMA_ENC: float  # rad
    SIGMA_GYRO: float  # rad/s
    SIGMA_DYN: np.ndarray
    SIGMA_INITIAL: np.ndarray
    SIGMA_MEAS: np.ndarray  # F_k: σ_gyro for the scalar gyro-1 row and gyro 2
    SIGMA_BIAS: np.ndarray  # not given in the paper


@cache
def _facts() -> _Facts:
    """Loaded on first use, not on import (the description's URDF takes a while to parse)."""
    rb = doggy.robot()
    nj = len(rb.joints)
    enc, gyro = rb.sigma_encoder, rb.sigma_gyro
    return _Facts(
        ROBOT=rb,
        NJ=nj,
        PHYS_NAMES=list(rb.phys_names),
        SIGMA_ENC=enc,
        SIGMA_GYRO=gyro,
        SIGMA_DYN=np.sqrt(np.asarray(rb.dynamics_variance)),
        SIGMA_INITIAL=np.sqrt(
            np.concatenate([np.full(nj, rb.initial_angle_variance), np.full(2 * nj, enc**2)])
        ),
        SIGMA_MEAS=np.array([enc] * nj + [gyro] * 4),
        SIGMA_BIAS=np.full(6, gyro),
    )


def __getattr__(name: str):
    """The module's constants ROBOT, NJ, PHYS_NAMES and SIGMA_*, as `_facts` loads them."""
    if name in _Facts.__dataclass_fields__:
        return getattr(_facts(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


BORDER_ORDER = ["phys", "bias1", "bias2", "R1", "R2"]


def must_be_positive() -> list[str]:
    """The parameters whose estimate must be > 0 to be physical, as Doggy's description marks them
    (`[flexible_joints.parameters] positive`, one flag per name): every entry of ϑ_phys, by its role in f_dyn
    (robots/doggy.py, eqs 5–12) — k_pwm the motor torque per volt of PWM (a negative one means the logged command's
    sign is opposite the encoders'), k_mi the back-EMF damping (k_mi θ̇ opposes the motion), b the motor-side
    inertia (θ̈ = τ / b), µ_fm the Coulomb friction level (µ tanh(200 v) opposes the motion), k_s the belt
    stiffness and d_s its damping (the spring and damper of τ_c). Gyro biases and rotations may take any value.
    A description without the flags marks none."""
    f = _facts()
    flags = f.ROBOT.model.extra["flexible_joints"]["parameters"].get("positive", [False] * len(f.PHYS_NAMES))
    if len(flags) != len(f.PHYS_NAMES) or not all(isinstance(x, bool) for x in flags):
        raise DataError(
            f"[flexible_joints.parameters] positive: expected {len(f.PHYS_NAMES)} true/false flags, one per "
            f"name, got {flags!r}"
        )
    return [n for n, positive in zip(f.PHYS_NAMES, flags, strict=True) if positive]


def _joint_reach(rb: FlexibleJointRobot) -> np.ndarray:
    """Per joint, the largest |angle| (rad) the description lets the joint reach, and at least a full turn: the
    paper gives no limits (the description's ±π are placeholders), and angles in degrees pass a turn at once."""
    lo, hi = np.abs(np.asarray(rb.model.lower, float)), np.abs(np.asarray(rb.model.upper, float))
    reach = np.maximum(lo, hi)
    return np.maximum(np.where(np.isfinite(reach), reach, 2 * np.pi), 2 * np.pi)


# The links turn only as fast as their joints: a gyro reads at most Σ|θ̇_j| plus the bearings' rocking (simulated
# runs of 4–60 s: the larger gyro's rms |ω| / rms Σ|θ̇| 0.77–0.88); the same runs in deg/s gave 44–50. 10 leaves
# room for real bearings' rocking.
GYRO_EXCESS = 10.0


MIN_REST_SAMPLES = 10  # fewest leading zero-command samples whose gyro means are taken as the biases


def rest_gyro_bias(rec: DoggyRecording) -> tuple[np.ndarray, np.ndarray] | None:
    """Each gyro's mean (rad/s) over the leading zero-command window, its bias as a lab takes it; None when the
    window is shorter than MIN_REST_SAMPLES (a sample or two would pass their noise off as the bias)."""
    m = rec.zero_command_samples()
    if m < MIN_REST_SAMPLES:
        return None
    return rec.gyro1[:m].mean(axis=0), rec.gyro2[:m].mean(axis=0)


def gyro_excess(rec: DoggyRecording) -> float:
    """How much faster the gyros turn than the encoders allow: the larger gyro's rms |ω| (less its mean over the
    leading zero-command window, its bias) over the rms of the joints' summed rates |θ̇| (finite differences of
    the encoders; their noise only lowers the ratio)."""
    rates = np.abs(np.gradient(rec.theta, rec.t, axis=0)).sum(axis=1)
    allowed = np.sqrt(np.mean(rates**2))
    bias = rest_gyro_bias(rec) or (np.zeros(3), np.zeros(3))  # the gyros' biases are no motion
    gyro = max(
        np.sqrt(np.mean(np.sum((g - b) ** 2, axis=1)))
        for g, b in zip((rec.gyro1, rec.gyro2), bias, strict=True)
    )
    return float(gyro / allowed) if allowed > 0 else float("inf")


def check_recording(rec: DoggyRecording, source: str = "recording") -> None:
    """Refuse, before the solve and with a one-line DataError naming the cause, a (validated) recording the
    calibration cannot use: shorter than `--simulate` accepts, encoder angles beyond the joints' reach (logged in
    degrees, or motor-side), a sensor channel that never changes (stuck), gyros faster than the joints turn (deg/s),
    or no command at all."""
    rb = _facts().ROBOT
    duration, lo = float(rec.t[-1] - rec.t[0]), DURATION_S[0]
    if duration <= lo:
        raise DataError(
            f"{source}: {duration:.3g} s ({rec.n} samples) is too short to calibrate: it needs a zero-command "
            f"window, then excitation — more than {lo:g} s, as --simulate (the paper records 60 s)"
        )
    rel = np.abs(rec.theta - rec.theta0)
    reach = _joint_reach(rb)
    far = [j for j in range(len(reach)) if rel[:, j].max() > reach[j]]
    if far:
        j = far[0]
        raise DataError(
            f"{source}: |theta{j + 1} − theta0| reaches {rel[:, j].max():.4g}, beyond joint {rb.joints[j]}'s reach "
            f"(±{reach[j]:.4g} rad): encoder angles logged in degrees, or motor-side angles not divided by the "
            f"gear ratio {rb.gear_ratio:g}? theta1..3 must be link-side, in rad"
        )
    channels = np.column_stack([rec.theta, rec.gyro1, rec.gyro2])
    names = COLUMNS[4:13]  # theta1..3, w1x..w2z
    stuck = [names[i] for i in range(channels.shape[1]) if np.ptp(channels[:, i]) == 0.0]
    if stuck:
        verb = "never changes" if len(stuck) == 1 else "never change"
        joint = ", or a joint that never moves" if any(c.startswith("theta") for c in stuck) else ""
        raise DataError(
            f"{source}: {', '.join(stuck)} {verb} (every sample {channels[0, names.index(stuck[0])]:.6g}): a "
            f"stuck sensor or dead channel{joint}; the calibration needs every encoder and gyro reading"
        )
    slow = gyro_excess(rec)
    if slow > GYRO_EXCESS:
        raise DataError(
            f"{source}: the gyros turn {slow:.3g}× faster than the encoders let the links turn (rms of |ω| against "
            f"rms of Σ|θ̇|, about 1 for real data): gyros logged in deg/s? w1x..w2z must be in rad/s"
        )
    if rec.zero_command_samples() == rec.n:
        raise DataError(
            f"{source}: the command u1..u3 is 0 in every sample: nothing excites the drive, so k_pwm, k_mi, b and "
            "the friction cannot be identified; log the commands the robot ran (u = 0 only in the leading rest "
            "window)"
        )


@dataclass(frozen=True)
class ModelOptions:
    friction_on: str = "link"  # "link" (eq 12 as printed) or "motor"
    debias_gyro1: bool = True  # subtract ω_1,0 from gyro 1 before predicting gyro 2 (eq 26 printed: False)
    bias_block: bool = True  # include F_bias over the zero-command window


def residual_functions(opts: ModelOptions = ModelOptions()) -> dict[str, ca.Function]:
    """The four residual blocks as CasADi functions of (variables…, data…); dims 9 / 7 / 12 / 6."""
    f = _facts()
    NJ = f.NJ
    x, x1 = ca.SX.sym("x", 4 * NJ), ca.SX.sym("x_next", 4 * NJ)
    p = ca.SX.sym("phys", len(f.PHYS_NAMES))
    b1, b2 = ca.SX.sym("bias1", 3), ca.SX.sym("bias2", 3)
    r1, r2 = ca.SX.sym("R1", 9), ca.SX.sym("R2", 9)
    R1, R2 = ca.reshape(r1, 3, 3), ca.reshape(r2, 3, 3)
    th_m, th0 = (ca.SX.sym(n, NJ) for n in ("theta_meas", "theta0"))
    w1, w2 = ca.SX.sym("w1", 3), ca.SX.sym("w2", 3)
    u, T = ca.SX.sym("u", NJ), ca.SX.sym("Ts")
    th_rel = ca.SX.sym("theta_rel", NJ)
    f_motor = th_m - x[2 * NJ : 3 * NJ] - th0
    f_g1 = doggy.gyro1_residual(x, b1, R1, w1)
    f_g2 = doggy.gyro2_prediction(x, b1, b2, R1, R2, w1, opts.debias_gyro1) - w2
    return {
        "initial": ca.Function(
            "initial", [x, th_rel], [ca.vertcat(x[0:NJ] - th_rel, x[NJ : 2 * NJ], x[3 * NJ :])]
        ),
        "measurement": ca.Function(
            "measurement", [x, b1, b2, r1, r2, th_m, w1, w2, th0], [ca.vertcat(f_motor, f_g1, f_g2)]
        ),
        "dynamics": ca.Function(
            "dynamics", [x, x1, p, u, T], [doggy.euler_step(x, u, p, T, opts.friction_on) - x1]
        ),
        "bias": ca.Function("bias", [b1, b2, w1, w2], [ca.vertcat(b1 - w1, b2 - w2)]),
    }


def initial_sigma(rec: DoggyRecording) -> np.ndarray:
    """σ of the initial block: eq 37 (velocities 0 to encoder precision) when the recording starts at rest (u = 0
    at its first sample); else the robot already moves, and the velocity rows hold only the recording's largest
    encoder rate, so the measurements and dynamics fix them (a zero-velocity prior there bent the states and the
    gyro biases 12–85σ off)."""
    sigma = _facts().SIGMA_INITIAL.copy()
    if rec.zero_command_samples() > 0:
        return sigma
    nj = _facts().NJ
    fastest = np.abs(np.diff(rec.theta, axis=0) / rec.dt()[:, None]).max(axis=0)
    sigma[nj:] = np.tile(np.maximum(fastest, sigma[nj : 2 * nj]), 2)
    return sigma


def start_source(rec: DoggyRecording) -> str:
    """Where `start_guess`'s values come from, for the result's reader."""
    m = rec.zero_command_samples()
    biases = (
        f"each gyro's mean over the {m}-sample zero-command window"
        if rest_gyro_bias(rec) is not None
        else "0 (no zero-command window of at least "
        f"{MIN_REST_SAMPLES} samples; Table 1's initial biases are the paper's rest-window means, not used)"
    )
    return (
        "k_pwm … d_s: Table 1's initial guess (the paper's start, robots/data/doggy); gyro biases: "
        f"{biases}; R1, R2: the URDF's nominal sensor frames"
    )


# A weakly determined parameter: its 1σ beyond this fraction of its estimate (parameters that must be > 0).
WEAK_RELATIVE_SIGMA = 1.0
# A component of a weak direction (`slom.RankReport.weak_directions`: relative eigen-scaling alone, which default
# plans' condition numbers of 1.7e3–1.04e4 reach without any parameter being poorly known) is named only when its
# 1σ is also large against the parameter's own scale: 10 % of the estimate (parameters that must be > 0), 0.1° per
# rotation axis, a tenth of one gyro reading's noise (biases: known worse than a 100-sample rest mean).
WEAK_DIRECTION_RELATIVE_SIGMA = 0.1
WEAK_DIRECTION_ANGLE_SIGMA = float(np.radians(0.1))  # rad
WEAK_DIRECTION_BIAS_SIGMAS = 0.1  # × σ_gyro
# A sensor parameter whose 1σ alone exceeds its kind's bound is weak whatever the weak directions say (the review's
# 4 s seed-2 run with eq 36's Σ as process noise: converged, condition 4.7e3, R1_z in no weak direction, σ 2.2°,
# 39σ off). Measured (the σ this rule uses): default plans, `--simulate 4` seeds 2, 3, 5–26, R1_z 0.18–1.25°
# (seed 8; next 1.07°, 0.78°), `--simulate 20` seeds 0–2 ≤ 0.18°, `--simulate 2` seed 0 0.79°; process-noise
# runs (4 s, seeds 1–6) R1_z 2.07–2.82°. Bound 1.6° per rotation axis, the geometric mean of 1.25° and 2.07°:
# only 1.28× from either side. R2 (≤ 0.07° in all of them), the biases (honest ≤ 0.036 σ_gyro at 4 s, 0.050 at
# 2 s; process noise 0.031–0.034: not separable) and the dynamic parameters (σ/|estimate| ≤ 0.30 honest, ≤ 0.36
# with process noise: not separable; WEAK_RELATIVE_SIGMA) catch none of those runs: 0.1 σ_gyro per bias is 2× the
# largest honest σ, a guard against biases no rest window fixes; R2 shares R1's bound.
WEAK_ANGLE_SIGMA = float(np.radians(1.6))  # rad
WEAK_BIAS_SIGMAS = 0.1  # × σ_gyro
# A zero-command window shorter than this is what a weak bias/rotation hint asks to lengthen (default plans: 0.8 s).
SHORT_REST_S = 0.5
# Blocks whose weight is re-estimated for the covariance (`slom.Options.rescale_blocks`): the dynamics' Σ (eq 36)
# is a modelling allowance, not a sensor's noise; its variance factor (χ² over the block's redundancy, the residual
# count less what the states and parameters absorb: a simulated 4 s run about 0.14) says how much of it the data
# used. The sensor blocks keep their datasheet noise (χ²/dof 0.65–1).
RESCALED_BLOCKS = ("dynamics",)
# `calibrate`'s solves, in order (the third only when the second does not converge), and the first one's iteration
# cap: with R1/R2 held it settles in about 7 iterations (4 s simulated runs, seeds 1, 5, 26)
CALIBRATION_STAGES = ("rotations held", "all free", "all free from the start (fallback)")
HELD_MAX_ITER = 20


def _sigma_bounds(name: str, estimate: dict[str, float]) -> tuple[float, float | None]:
    """The 1σ above which parameter `name` is poorly known: in a weak direction (WEAK_DIRECTION_*) and in any
    direction (WEAK_ANGLE_SIGMA, WEAK_BIAS_SIGMAS; None for the dynamic parameters, see WEAK_RELATIVE_SIGMA)."""
    if name.startswith("bias"):
        return WEAK_DIRECTION_BIAS_SIGMAS * _facts().SIGMA_GYRO, WEAK_BIAS_SIGMAS * _facts().SIGMA_GYRO
    if name.startswith("R"):
        return WEAK_DIRECTION_ANGLE_SIGMA, WEAK_ANGLE_SIGMA
    return WEAK_DIRECTION_RELATIVE_SIGMA * abs(estimate.get(name, float("nan"))), None


def weak_parameters(cal: Calibration) -> list[str]:
    """Parameters the data fix only weakly: components (> 0.1 of the largest) of the Jacobi-scaled border
    information's weak directions (`slom.RankReport.weak_directions`, from the weights the solve used, before any
    rescale) whose 1σ is large against their own scale, sensor parameters whose 1σ exceeds their kind's bound in any
    direction (both `_sigma_bounds`), and parameters that must be > 0 whose 1σ exceeds
    WEAK_RELATIVE_SIGMA × |estimate|; σ the larger of the rescaled one and the one under the solve's weights; in
    BORDER_ORDER."""
    res = cal.result
    phys = dict(zip(_facts().PHYS_NAMES, cal.estimate.phys(), strict=True))

    def sigma(n: str) -> float:
        both = (cal.sigma.get(n, float("nan")), (res.rank.sigmas if res.rank else {}).get(n, float("nan")))
        return max((v for v in both if np.isfinite(v)), default=float("nan"))

    in_weak = {k for d in (res.rank.weak_directions if res.rank else []) for k in d}
    names = {k.split("#")[0] for k in in_weak if not sigma(k) <= _sigma_bounds(k.split("#")[0], phys)[0]}
    for n in res.border_labels:  # σ large for its kind, in a weak direction or not
        bound = _sigma_bounds(n.split("#")[0], phys)[1]
        if bound is not None and sigma(n) > bound:
            names.add(n.split("#")[0])
    for n in must_be_positive():
        sig = sigma(n)
        if np.isfinite(sig) and sig > WEAK_RELATIVE_SIGMA * abs(phys[n]):
            names.add(n)
    return [lab for lab in res.border_labels if lab in names]


def weak_hint(names: list[str], rest_s: float | None = None) -> str:
    """What would fix `names` (weak_parameters): excitation of the joints whose own parameters they are; for
    sensor biases/rotations a zero-command window only when the recording's (`rest_s`, s; None: unknown) is
    shorter than SHORT_REST_S, else motion of every joint."""
    rb = _facts().ROBOT
    joints = sorted({int(n[-1]) for n in names if n[-1].isdigit() and not n.startswith(("bias", "R"))})
    hints = (
        [f"more excitation of joint {', '.join(f'{j} ({rb.joints[j - 1]})' for j in joints)}"]
        if joints
        else []
    )
    if any(n.startswith(("bias", "R")) for n in names):
        if rest_s is None or rest_s < SHORT_REST_S:
            have = "" if rest_s is None else f" (this one: {rest_s:.3g} s)"
            hints.append(
                f"a zero-command window of at least {SHORT_REST_S:g} s at the start{have} and motion of every "
                "joint (sensor biases/rotations)"
            )
        else:
            hints.append(
                f"larger motion of every joint (sensor biases/rotations; the {rest_s:.3g} s zero-command window is "
                "long enough)"
            )
    if any(n in ("k_pwm", "k_mi", "b") for n in names):
        hints.append("larger and faster commands (the shared motor constants)")
    return "; ".join(hints) or "more excitation"


def start_guess(rec: DoggyRecording, base: DoggyParams | None = None) -> DoggyParams:
    """The start of the solve: `base` (default the description's initial guess, Table 1's "initial" column) with
    each gyro bias the mean of its gyro over the leading zero-command window (`rest_gyro_bias`). When that window
    is too short: `base`'s biases if given, else 0 — Table 1's initial biases are the paper's own rest-window means
    (equal to its identified ones, which the simulator takes as the truth), so no start for another recording."""
    rest = rest_gyro_bias(rec)
    if base is None:
        base = _facts().ROBOT.sets["initial"]
        if rest is None:
            return base.with_(bias1=(0.0, 0.0, 0.0), bias2=(0.0, 0.0, 0.0))
    if rest is None:
        return base
    b1, b2 = (tuple(float(v) for v in b) for b in rest)
    return base.with_(bias1=b1, bias2=b2)


def initial_states(rec: DoggyRecording) -> np.ndarray:
    """States from encoders: q = θ = θ_meas − θ0, velocities by forward differences (consistent with Euler)."""
    th = rec.theta - rec.theta0
    v = np.diff(th, axis=0) / rec.dt()[:, None]
    v = np.vstack([v, v[-1:]])
    return np.hstack([th, v, th, v])


def build_problem(
    rec: DoggyRecording,
    start: DoggyParams,
    opts: ModelOptions = ModelOptions(),
    states: np.ndarray | None = None,
) -> slom.Problem:
    """Declare variables and the four residual blocks for one recording."""
    validate(rec)
    f = _facts()
    fns = residual_functions(opts)
    n = rec.n
    pr = slom.Problem()
    X = pr.add_variable("x", Rn(4 * f.NJ), initial_states(rec) if states is None else states, eliminate=True)
    pr.add_variable("phys", Rn(len(f.PHYS_NAMES)), start.phys(), labels=list(f.PHYS_NAMES))
    pr.add_variable("bias1", Rn(3), np.asarray(start.bias1), labels=[f"bias1_{c}" for c in "xyz"])
    pr.add_variable("bias2", Rn(3), np.asarray(start.bias2), labels=[f"bias2_{c}" for c in "xyz"])
    pr.add_variable("R1", SO3(), SO3.to_flat(start.R_imu1), labels=[f"R1_{c}" for c in "xyz"])
    pr.add_variable("R2", SO3(), SO3.to_flat(start.R_imu2), labels=[f"R2_{c}" for c in "xyz"])
    pr.add_factor(
        "initial", fns["initial"], [X[0:1]], [(rec.theta[0] - rec.theta0)[None, :]], sigma=initial_sigma(rec)
    )
    pr.add_factor(
        "measurement",
        fns["measurement"],
        [X, "bias1", "bias2", "R1", "R2"],
        [rec.theta, rec.gyro1, rec.gyro2, rec.theta0],
        sigma=f.SIGMA_MEAS,
    )
    pr.add_factor(
        "dynamics",
        fns["dynamics"],
        [X[0 : n - 1], X[1:n], "phys"],
        [rec.u[:-1], rec.dt()[:, None]],
        sigma=f.SIGMA_DYN,
    )
    m = rec.zero_command_samples()
    if opts.bias_block and m > 0:
        pr.add_factor(
            "bias", fns["bias"], ["bias1", "bias2"], [rec.gyro1[:m], rec.gyro2[:m]], sigma=f.SIGMA_BIAS
        )
    return pr


@dataclass
class Calibration:
    """Estimated parameters with 1σ (tangent coordinates: rotations in rad about the estimate's own axes)."""

    estimate: DoggyParams
    start: DoggyParams
    sigma: dict[str, float]
    states: np.ndarray
    result: slom.SolveResult
    bias_window: int
    weak: list[str] = dataclasses.field(default_factory=list)  # weak_parameters


def calibrate(
    rec: DoggyRecording,
    start: DoggyParams | None = None,
    opts: ModelOptions = ModelOptions(),
    solver: slom.Options | None = None,
    callback: Callable | None = None,
    allow_unobservable: bool = False,
    on_stage: Callable[[str], None] | None = None,
) -> Calibration:
    """Solve the batch problem from `start` (default `start_guess`: Table 1's initial guess, the biases from the
    rest window); raise IdentifiabilityError (naming parameters) if the data cannot fix some.

    Two stages: R1 and R2 held at their starting values first, then everything free from that solution's states
    and parameters. From the encoder-built states the first, nearly undamped step throws R1 about its body z by
    tens of degrees, and can leave it in a wrong minimum (4 s, seed 26: 89° off); the states settled with the
    rotations held start the free solve near the truth. The result (iterations, log, convergence) is the final
    stage's; if that stage does not converge, the direct solve from `start` is run too and the lower cost kept.
    The held stage stops after HELD_MAX_ITER iterations (it settles in about 7); `on_stage` is told each stage's
    name (CALIBRATION_STAGES) as it starts."""
    start = start or start_guess(rec)
    solver = solver or slom.Options()
    if not solver.rescale_blocks:
        solver = dataclasses.replace(solver, rescale_blocks=RESCALED_BLOCKS)
    stage = on_stage or (lambda _: None)
    held = build_problem(rec, start, opts)
    for name in ("R1", "R2"):
        held.variables[name].fixed = True
    stage(CALIBRATION_STAGES[0])
    first = dataclasses.replace(solver, covariance=False, max_iter=min(solver.max_iter, HELD_MAX_ITER))
    v = slom.solve(held, first, callback).values
    settled = DoggyParams.from_vectors(
        v["phys"][0], v["bias1"][0], v["bias2"][0], SO3.to_matrix(v["R1"][0]), SO3.to_matrix(v["R2"][0])
    )
    stage(CALIBRATION_STAGES[1])
    res = slom.solve(build_problem(rec, settled, opts, states=v["x"]), solver, callback)
    if not res.converged:  # weak data (e.g. 0.5 s of commands): the direct solve may end lower
        stage(CALIBRATION_STAGES[2])
        direct = slom.solve(build_problem(rec, start, opts), solver, callback)
        res = direct if direct.cost < res.cost else res
    if res.rank is not None and res.rank.deficient and not allow_unobservable:
        names = sorted({k for d in res.rank.null_directions for k in d})
        m = rec.zero_command_samples()
        if not opts.bias_block:
            fix = "the bias block (it is dropped) or more excitation"
        elif m == 0:
            fix = "a zero-command window at the start (bias block) or more excitation"
        elif m == rec.n:
            fix = "excitation: the command u is 0 in every sample"
        else:  # the bias window is there: what is missing is excitation
            rest, moving = rec.t[m] - rec.t[0], rec.t[-1] - rec.t[m]
            fix = (
                f"more excitation (the recording holds {rest:.3g} s at rest, then {moving:.3g} s of commands: "
                "record longer, and check that each encoder and command column is its joint's)"
            )
        diverged = (
            ""
            if res.converged
            else f" — but the solver did not converge ({res.reason}): check the recording's units (angles in "
            "rad, gyros in rad/s) first"
        )
        raise IdentifiabilityError(
            f"{res.rank.size - res.rank.rank} parameter direction(s) unobservable from this data, involving "
            f"{', '.join(names)}; add {fix}{diverged}"
        )
    v = res.values
    est = DoggyParams.from_vectors(
        v["phys"][0], v["bias1"][0], v["bias2"][0], SO3.to_matrix(v["R1"][0]), SO3.to_matrix(v["R2"][0])
    )
    cal = Calibration(est, start, res.sigmas(), v["x"], res, rec.zero_command_samples())
    cal.weak = weak_parameters(cal)
    return cal


def rotation_error_deg(R_est: np.ndarray, R_true: np.ndarray) -> float:
    """Angle of R_trueᵀ R_est (the same as of R_estᵀ R_true) in degrees: the rotation-to-rotation error, which
    the difference of the two angles from nominal understates when the axes differ."""
    return float(np.degrees(np.linalg.norm(so3_log(R_true.T @ R_est))))


def parameter_rows(cal: Calibration, truth: DoggyParams | None = None, angle_unit: str = "deg") -> list[dict]:
    """Table-1-style rows: name, unit, initial, estimate, 1σ, truth, error in σ; SI (gyro biases in rad/s)
    except the rotations, given as their angle from the nominal in `angle_unit` ("deg" or "rad": result files)."""
    if angle_unit not in ("deg", "rad"):
        raise ValueError(f"angle_unit must be 'deg' or 'rad', got {angle_unit!r}")
    scale = 1.0 if angle_unit == "deg" else np.pi / 180.0
    f = _facts()
    rows = []
    units = dict(zip(f.PHYS_NAMES, f.ROBOT.phys_units, strict=True))
    for i, name in enumerate(f.PHYS_NAMES):
        row = {
            "name": name,
            "unit": units[name],
            "initial": float(cal.start.phys()[i]),
            "estimate": float(cal.estimate.phys()[i]),
            "sigma": cal.sigma.get(name, float("nan")),
        }
        if truth is not None:
            row["truth"] = float(truth.phys()[i])
        rows.append(row)
    for key in ("bias1", "bias2"):
        for j, c in enumerate("xyz"):
            lab = f"{key}_{c}"
            row = {
                "name": lab,
                "unit": "rad/s",
                "initial": float(getattr(cal.start, key)[j]),
                "estimate": float(getattr(cal.estimate, key)[j]),
                "sigma": float(cal.sigma.get(lab, float("nan"))),
            }
            if truth is not None:
                row["truth"] = float(getattr(truth, key)[j])
            rows.append(row)
    for key, attr, nominal in (
        ("R1", "R_imu1", f.ROBOT.R_imu1_nominal),
        ("R2", "R_imu2", f.ROBOT.R_imu2_nominal),
    ):
        R = getattr(cal.estimate, attr)
        sig = np.degrees(np.sqrt(sum(cal.sigma.get(f"{key}_{c}", float("nan")) ** 2 for c in "xyz")))
        row = {
            "name": f"{key} angle from nominal",
            "unit": angle_unit,
            "initial": scale * rotation_error_deg(getattr(cal.start, attr), nominal),
            "estimate": scale * rotation_error_deg(R, nominal),
            "sigma": float(scale * sig),
        }
        if truth is not None:
            row["truth"] = scale * rotation_error_deg(getattr(truth, attr), nominal)
            row["error"] = scale * rotation_error_deg(R, getattr(truth, attr))
        rows.append(row)
    for row in rows:
        if "truth" in row and "error" not in row:
            row["error"] = row["estimate"] - row["truth"]
        if "error" in row and row["sigma"] and np.isfinite(row["sigma"]):
            row["error_sigmas"] = abs(row["error"]) / row["sigma"]
    return rows
