""" "Doggy": 3-joint flexible-joint robot (yaw, pitch, roll) with two gyroscopes (ICINCO 2016 model).

State x = (q, q̇, θ, θ̇) ∈ R¹² (link angles, motor angles on the link side). Dynamics (eqs 5–12): elastic joints,
link inertia M(q) from CAD, shared motor constants k_pwm, k_mi, b, per-joint spring k_s, damper d_s and sigmoid
Coulomb friction µ_fm. The robot's facts come from its description (`robots/data/doggy`, loaded by
`robots.registry.get_model("doggy")`): the URDF gives the joint chain and the gyroscope and head (EOF) frames,
the TOML the drive constants, the CAD polynomial M(q) (eq 10), the parameter names and units, the sensors and
Table 1. Everything here is CasADi-symbolic so the simulator and the estimator share one source of truth;
`numeric(...)` wraps the functions for numpy use. The printed eq. 29 is not a rotation: the chain gives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache

import casadi as ca
import numpy as np

from formats.errors import DataError
from robots.expr import evaluate
from robots.registry import get_model
from robots.tree import RobotModel, rpy_matrix

_DEG = np.pi / 180.0
_MASS_ENTRIES = ("m11", "m12", "m13", "m22", "m23", "m33")


def _orthonormalize(R: np.ndarray) -> np.ndarray:
    U, _, Vt = np.linalg.svd(R)
    return U @ np.diag([1.0, 1.0, np.linalg.det(U @ Vt)]) @ Vt


def _snap(R: np.ndarray) -> np.ndarray:
    """A constant rotation with entries that are integers up to rounding (rpy of multiples of π/2) made exact."""
    R = np.array(R, dtype=float)
    near = np.abs(R - np.round(R)) < 1e-12
    R[near] = np.round(R[near])
    return R


@dataclass(frozen=True)
class DoggyParams:
    """Calibration parameters ϑ_calib (SI units; biases in rad/s; rotations as 3×3 matrices)."""

    k_pwm: float
    k_mi: float
    b: float
    mu_fm: tuple[float, float, float]
    k_s: tuple[float, float, float]
    d_s: tuple[float, float, float]
    bias1: tuple[float, float, float]  # ω_1,0 in the IMU1 frame
    bias2: tuple[float, float, float]  # ω_2,0 in the IMU2 frame
    R_imu1: np.ndarray = field(default_factory=lambda: robot().R_imu1_nominal.copy())  # IMU1_1 R
    R_imu2: np.ndarray = field(default_factory=lambda: robot().R_imu2_nominal.copy())  # IMU2_EOF R

    def phys(self) -> np.ndarray:
        """The 12 dynamic parameters in `PHYS_NAMES` order."""
        return np.array([self.k_pwm, self.k_mi, self.b, *self.mu_fm, *self.k_s, *self.d_s], dtype=float)

    @staticmethod
    def from_vectors(phys, bias1, bias2, R_imu1, R_imu2) -> DoggyParams:
        p = [float(v) for v in phys]
        return DoggyParams(
            p[0],
            p[1],
            p[2],
            tuple(p[3:6]),
            tuple(p[6:9]),
            tuple(p[9:12]),
            tuple(float(v) for v in bias1),
            tuple(float(v) for v in bias2),
            np.asarray(R_imu1, float),
            np.asarray(R_imu2, float),
        )

    def with_(self, **kw) -> DoggyParams:
        return replace(self, **kw)


@dataclass(frozen=True)
class FlexibleJointRobot:
    """Doggy as its description states it: joint chain and sensor frames (URDF), drive model, sensors, Table 1."""

    model: RobotModel
    joints: tuple[str, ...]
    gear_ratio: float
    supply_voltage: float  # V: τ_m = k_pwm U_max u − k_mi θ̇
    pwm_limit: float
    friction_slope: float
    mass_matrix: tuple[str, ...]  # m11 m12 m13 m22 m23 m33 as expressions in ci, si, qi
    mass_matrix_scale: float
    phys_names: tuple[str, ...]
    phys_units: tuple[str, ...]
    dynamics_variance: tuple[float, ...]  # 12
    initial_angle_variance: float
    rate_hz: float
    sigma_encoder: float
    sigma_gyro: float
    gyro1: str
    gyro2: str
    head: str
    yaw_link: str
    R_head_eof: np.ndarray  # the EOF frame in the head link
    R_imu1_nominal: np.ndarray
    R_imu2_nominal: np.ndarray
    setpoint_range: tuple[float, ...]
    sets: dict[str, DoggyParams]


def _section(model: RobotModel, name: str) -> dict:
    sec = model.extra.get(name)
    if not isinstance(sec, dict):
        raise DataError(f"robot {model.name!r}: its description has no [{name}] section")
    return sec


def _get(sec: dict, key: str, where: str):
    if key not in sec:
        raise DataError(f"[{where}] needs {key!r}")
    return sec[key]


def _floats(v, n: int | None, where: str) -> tuple[float, ...]:
    try:
        out = tuple(float(x) for x in v)
    except (TypeError, ValueError):
        raise DataError(f"{where}: expected a list of numbers") from None
    if (n is not None and len(out) != n) or not all(np.isfinite(out)):
        raise DataError(f"{where}: expected {n} finite numbers, got {v!r}")
    return out


def _site_rotation(model: RobotModel, site: str, link: str) -> np.ndarray:
    """Rotation of a site's frame in the frame of the link it is fixed to."""
    s = model.site(site)
    if s.link != link:
        raise DataError(f"robot {model.name!r}: site {site!r} is on link {s.link!r}, expected {link!r}")
    return _snap(rpy_matrix(s.rpy))


def from_model(model: RobotModel) -> FlexibleJointRobot:
    """Read and check the flexible-joint sections of a loaded description."""
    fj, sen, exp = (
        _section(model, "flexible_joints"),
        _section(model, "sensors"),
        model.extra.get("experiment", {}),
    )
    joints = tuple(str(j) for j in _get(fj, "joints", "flexible_joints"))
    if list(joints) != model.joint_names:
        raise DataError(
            f"[flexible_joints] joints {list(joints)} must be the model's coordinates {model.joint_names}"
        )
    n = len(joints)
    mm = _get(fj, "mass_matrix", "flexible_joints")
    missing = [k for k in _MASS_ENTRIES if k not in mm]
    if n != 3 or missing:
        raise DataError(f"[flexible_joints.mass_matrix] needs {', '.join(missing) or 'three joints'}")
    par = _get(fj, "parameters", "flexible_joints")
    names = tuple(str(x) for x in _get(par, "names", "flexible_joints.parameters"))
    units = tuple(str(x) for x in _get(par, "units", "flexible_joints.parameters"))
    if len(names) != 3 + 3 * n or len(units) != len(names):
        raise DataError(f"[flexible_joints.parameters] needs {3 + 3 * n} names and units")
    noise = _get(fj, "noise", "flexible_joints")
    head = str(_get(sen, "head", "sensors"))
    head_link = model.site(head).link
    R_head_eof = _site_rotation(model, head, head_link)
    R_head_imu2 = _site_rotation(model, str(_get(sen, "gyro2", "sensors")), head_link)
    yaw_link = str(_get(sen, "yaw_link", "sensors"))
    R_imu1_nominal = _site_rotation(model, str(_get(sen, "gyro1", "sensors")), yaw_link).T
    R_imu2_nominal = (R_head_eof.T @ R_head_imu2).T
    sets = {}
    for key, d in fj.get("parameter_sets", {}).items():
        where = f"flexible_joints.parameter_sets.{key}"
        vals = _floats(_get(d, "values", where), len(names), f"[{where}] values")
        b1 = _DEG * np.array(_floats(_get(d, "bias1_deg_s", where), 3, f"[{where}] bias1_deg_s"))
        b2 = _DEG * np.array(_floats(_get(d, "bias2_deg_s", where), 3, f"[{where}] bias2_deg_s"))
        rots = []
        for tag, nominal in (("R_imu1", R_imu1_nominal), ("R_imu2", R_imu2_nominal)):
            printed = d.get(f"{tag}_printed_transposed")
            rots.append(nominal.copy() if printed is None else _orthonormalize(np.array(printed, float).T))
        sets[str(key)] = DoggyParams.from_vectors(vals, b1, b2, *rots)
    return FlexibleJointRobot(
        model=model,
        joints=joints,
        gear_ratio=float(_get(fj, "gear_ratio", "flexible_joints")),
        supply_voltage=float(_get(fj, "supply_voltage", "flexible_joints")),
        pwm_limit=float(fj.get("pwm_limit", 1.0)),
        friction_slope=float(_get(fj, "friction_slope", "flexible_joints")),
        mass_matrix=tuple(str(mm[k]) for k in _MASS_ENTRIES),
        mass_matrix_scale=float(fj.get("mass_matrix_scale", 1.0)),
        phys_names=names,
        phys_units=units,
        dynamics_variance=_floats(_get(noise, "dynamics_variance", "noise"), 4 * n, "dynamics_variance"),
        initial_angle_variance=float(_get(noise, "initial_angle_variance", "noise")),
        rate_hz=float(_get(sen, "rate_hz", "sensors")),
        sigma_encoder=float(_get(sen, "encoder_sigma", "sensors")),
        sigma_gyro=float(_get(sen, "gyro_sigma", "sensors")),
        gyro1=str(sen["gyro1"]),
        gyro2=str(sen["gyro2"]),
        head=head,
        yaw_link=yaw_link,
        R_head_eof=R_head_eof,
        R_imu1_nominal=R_imu1_nominal,
        R_imu2_nominal=R_imu2_nominal,
        setpoint_range=_floats(exp.get("setpoint_range", [np.pi] * n), n, "[experiment] setpoint_range"),
        sets=sets,
    )


@cache
def robot() -> FlexibleJointRobot:
    """The built-in Doggy, loaded from its description."""
    return from_model(get_model("doggy"))


def _table(name: str) -> DoggyParams:
    sets = robot().sets
    if name not in sets:
        raise DataError(f"Doggy's description has no parameter set {name!r} (has {sorted(sets)})")
    return sets[name]


# Names kept from the typed model; their values now come from the description.
_LAZY = {
    "N_GEAR": lambda: robot().gear_ratio,
    "U_MAX": lambda: robot().supply_voltage,
    "FRICTION_SLOPE": lambda: robot().friction_slope,
    "R_IMU1_NOMINAL": lambda: robot().R_imu1_nominal,
    "R_IMU2_NOMINAL": lambda: robot().R_imu2_nominal,
    "PHYS_NAMES": lambda: list(robot().phys_names),
    "PHYS_UNITS": lambda: list(robot().phys_units),
    "TABLE1_INITIAL": lambda: _table("initial"),
    "TABLE1_IDENTIFIED": lambda: _table("identified"),
}


def __getattr__(name: str):
    if name in _LAZY:
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------- symbolic model (works on ca.SX / ca.MX)


def mass_matrix(q, rb: FlexibleJointRobot | None = None) -> ca.SX:
    """Link inertia M(q) in kg·m² from the description's CAD polynomial (eq 10, scaled to SI)."""
    rb = rb or robot()
    env = {}
    for k in range(3):
        env[f"q{k + 1}"], env[f"c{k + 1}"], env[f"s{k + 1}"] = q[k], ca.cos(q[k]), ca.sin(q[k])
    fns = {"sin": ca.sin, "cos": ca.cos}
    m11, m12, m13, m22, m23, m33 = (evaluate(e, env, "Doggy mass matrix", fns) for e in rb.mass_matrix)
    return rb.mass_matrix_scale * ca.vertcat(
        ca.horzcat(m11, m12, m13), ca.horzcat(m12, m22, m23), ca.horzcat(m13, m23, m33)
    )


def _solve3_sym(M, v):
    """M⁻¹v for a symmetric 3×3 by the adjugate (compact expression graph)."""
    a, b, c, d, e, f = M[0, 0], M[0, 1], M[0, 2], M[1, 1], M[1, 2], M[2, 2]
    A = d * f - e * e
    B = c * e - b * f
    C = b * e - c * d
    D = a * f - c * c
    E = b * c - a * e
    F = a * d - b * b
    det = a * A + b * B + c * C
    adj = ca.vertcat(ca.horzcat(A, B, C), ca.horzcat(B, D, E), ca.horzcat(C, E, F))
    return (adj @ v) / det


def f_dyn(x, u, phys, friction_on: str = "link"):
    """ẋ = f_dyn(x, u) (eq 9); `friction_on` = "link" (q̇, as printed) or "motor" (θ̇)."""
    q, qd, th, thd = x[0:3], x[3:6], x[6:9], x[9:12]
    k_pwm, k_mi, b = phys[0], phys[1], phys[2]
    mu, ks, ds = phys[3:6], phys[6:9], phys[9:12]
    tau_c = ks * (q - th) + ds * (qd - thd)
    rb = robot()
    tau_m = k_pwm * rb.supply_voltage * u - k_mi * thd
    v = qd if friction_on == "link" else thd
    tau_fm = mu * ca.tanh(rb.friction_slope * v)
    qdd = -_solve3_sym(mass_matrix(q, rb), tau_c)
    thdd = (tau_c + tau_m - tau_fm) / b
    return ca.vertcat(qd, qdd, thd, thdd)


def euler_step(x, u, phys, Ts, friction_on: str = "link"):
    """Explicit Euler: x_{k+1} = x_k + T_s f_dyn(x_k, u_k) (eq 31)."""
    return x + Ts * f_dyn(x, u, phys, friction_on)


def _elementary(k: int, a):
    c, s = ca.cos(a), ca.sin(a)
    if k == 0:
        return ca.vertcat(ca.horzcat(1, 0, 0), ca.horzcat(0, c, -s), ca.horzcat(0, s, c))
    if k == 1:
        return ca.vertcat(ca.horzcat(c, 0, s), ca.horzcat(0, 1, 0), ca.horzcat(-s, 0, c))
    return ca.vertcat(ca.horzcat(c, -s, 0), ca.horzcat(s, c, 0), ca.horzcat(0, 0, 1))


def _axis_rotation(axis, a):
    """Rotation by a about a joint axis (exact elementary rotations for ±x, ±y, ±z; Rodrigues otherwise)."""
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    nz = np.flatnonzero(np.abs(axis) > 1e-12)
    if len(nz) == 1:
        return _elementary(int(nz[0]), a if axis[nz[0]] > 0 else -a)
    K = ca.DM([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return ca.DM.eye(3) + ca.sin(a) * K + (1 - ca.cos(a)) * (K @ K)


def _chain(model: RobotModel, q, start: str, end: str):
    """(R, joints): orientation of link `end` in link `start` (an ancestor) and the moving joints between."""
    above = set(model.joint_path(start))
    R, moving = None, []
    for j in model.joint_path(end):
        if j in above:
            continue
        jt = model.joints[j]
        step = ca.DM(_snap(rpy_matrix(jt.rpy))) if any(jt.rpy) else None
        if jt.is_coordinate:
            k = model.joint_names.index(jt.name)
            rot = _axis_rotation(jt.axis, q[k])
            step = rot if step is None else step @ rot
            moving.append((j, k, None if R is None else R))
        elif jt.moves:
            raise DataError(f"robot {model.name!r}: joint {jt.name!r} is not a plain coordinate")
        if step is not None:
            R = step if R is None else R @ step
    return (ca.DM.eye(3) if R is None else R), moving


def head_rotation(q, rb: FlexibleJointRobot | None = None):
    """¹R_EOF: orientation of the head (EOF) frame in frame 1, from the description's chain.

    For Doggy Ry(q2)·Rx(−q3)·Pᵀ; EOF_1 R = ¹R_EOFᵀ, and the head's angular velocity relative to body 1 in EOF
    coordinates is (s3 q̇2, −c3 q̇2, −q̇3) — eqs 27–28.
    """
    rb = rb or robot()
    m = rb.model
    R, _ = _chain(m, q, rb.yaw_link, m.site(rb.head).link)
    return R @ ca.DM(rb.R_head_eof)


def joint_rate_eof(q, qd, rb: FlexibleJointRobot | None = None):
    """Angular velocity of the head relative to body 1 in EOF coordinates (eqs 27–28), from the chain."""
    rb = rb or robot()
    m = rb.model
    _, moving = _chain(m, q, rb.yaw_link, m.site(rb.head).link)
    w = ca.SX.zeros(3) if isinstance(q, ca.SX) else ca.MX.zeros(3) if isinstance(q, ca.MX) else ca.DM.zeros(3)
    for j, k, R_before in moving:
        jt = m.joints[j]
        axis = ca.DM(np.asarray(jt.axis, float) / np.linalg.norm(jt.axis))
        if any(jt.rpy):
            axis = ca.DM(_snap(rpy_matrix(jt.rpy))) @ axis
        a = (
            axis if R_before is None else R_before @ axis
        )  # the axis in frame 1 (a joint turns about its own axis)
        w = w + a * qd[k]
    return head_rotation(q, rb).T @ w


def yaw_joint(rb: FlexibleJointRobot) -> tuple[int, np.ndarray]:
    """The yaw joint (the one moving joint from the root to body 1): coordinate index and axis (body-1 frame)."""
    path = [j for j in rb.model.joint_path(rb.yaw_link) if rb.model.joints[j].moves]
    if len(path) != 1:
        raise DataError(
            f"robot {rb.model.name!r}: exactly one joint must move {rb.yaw_link!r} (the yaw axis)"
        )
    jt = rb.model.joints[path[0]]
    return rb.model.joint_names.index(jt.name), np.asarray(jt.axis, float) / np.linalg.norm(jt.axis)


def world_to_frame1(q, rb: FlexibleJointRobot | None = None):
    """1_world R (eq 24), e.g. Rz(q1)ᵀ."""
    rb = rb or robot()
    R, _ = _chain(rb.model, q, rb.model.root, rb.yaw_link)
    return R.T


def _along(axis: np.ndarray, v):
    """axis · v, skipping zero components."""
    terms = [float(a) * v[k] if a != 1.0 else v[k] for k, a in enumerate(axis) if a != 0.0]
    return sum(terms[1:], terms[0])


def gyro1_residual(x, bias1, R1, w1, rb: FlexibleJointRobot | None = None):
    """F_gyro1 = q̇1 − yaw component (z) of the bias-corrected gyro-1 reading rotated into the world (eqs 22–24)."""
    rb = rb or robot()
    k, axis = yaw_joint(rb)
    n = len(rb.joints)
    w_world = world_to_frame1(x[0:n], rb).T @ (R1.T @ (w1 - bias1))
    return x[n + k] - _along(axis, w_world)


def gyro2_prediction(x, bias1, bias2, R1, R2, w1, debias_gyro1: bool = True):
    """ω̂_IMU2 (eq 26) from the gyro-1 reading and the joint rates.

    Eq 26 as printed feeds the *raw* gyro-1 reading (including its bias) into the head prediction; that makes the
    horizontal gyro-1 bias unobservable without F_bias (as the paper says) but leaks the bias into ω̂_IMU2.
    `debias_gyro1=True` (default) subtracts ω_1,0 first, which is what the physics says.
    """
    q, qd = x[0:3], x[3:6]
    w1_body = R1.T @ ((w1 - bias1) if debias_gyro1 else w1)
    return R2 @ (head_rotation(q).T @ w1_body + joint_rate_eof(q, qd)) + bias2


def true_gyros(x, bias1, bias2, R1, R2, w_extra=None):
    """Noise-free gyro readings: body 1 spins about z at q̇1 plus an optional extra body-1 rate `w_extra`
    (frame 1, e.g. flexible-bearing rocking, which the head also feels)."""
    q, qd = x[0:3], x[3:6]
    k, axis = yaw_joint(robot())
    w_body1 = ca.vertcat(*[qd[k] if a == 1.0 else a * qd[k] for a in axis])  # in frame 1: the yaw rate
    if w_extra is not None:
        w_body1 = w_body1 + w_extra
    w1 = R1 @ w_body1 + bias1
    w2 = R2 @ (head_rotation(q).T @ w_body1 + joint_rate_eof(q, qd)) + bias2
    return w1, w2


# ---------------------------------------------------------------- numeric wrappers


@cache
def numeric(friction_on: str = "link") -> dict[str, ca.Function]:
    """CasADi functions for numeric use: M, f_dyn, step, head_rotation, true_gyros, gyro2_prediction."""
    x = ca.SX.sym("x", 12)
    u = ca.SX.sym("u", 3)
    p = ca.SX.sym("p", 12)
    T = ca.SX.sym("T")
    q = ca.SX.sym("q", 3)
    qd = ca.SX.sym("qd", 3)
    b1, b2, w1 = ca.SX.sym("b1", 3), ca.SX.sym("b2", 3), ca.SX.sym("w1", 3)
    R1, R2 = ca.SX.sym("R1", 3, 3), ca.SX.sym("R2", 3, 3)
    wx = ca.SX.sym("w_extra", 3)
    g1, g2 = true_gyros(x, b1, b2, R1, R2, wx)
    return {
        "M": ca.Function("M", [q], [mass_matrix(q)]),
        "f_dyn": ca.Function("f_dyn", [x, u, p], [f_dyn(x, u, p, friction_on)]),
        "step": ca.Function("step", [x, u, p, T], [euler_step(x, u, p, T, friction_on)]),
        "head_rotation": ca.Function("head_rotation", [q], [head_rotation(q)]),
        "joint_rate_eof": ca.Function("joint_rate_eof", [q, qd], [joint_rate_eof(q, qd)]),
        "true_gyros": ca.Function("true_gyros", [x, b1, b2, R1, R2, wx], [g1, g2]),
        "gyro2_prediction": ca.Function(
            "gyro2_prediction", [x, b1, b2, R1, R2, w1], [gyro2_prediction(x, b1, b2, R1, R2, w1)]
        ),
    }


def mass_matrix_np(q) -> np.ndarray:
    return np.asarray(numeric()["M"](np.asarray(q, float)))


def f_dyn_np(x, u, params: DoggyParams, friction_on: str = "link") -> np.ndarray:
    return np.asarray(numeric(friction_on)["f_dyn"](x, u, params.phys())).ravel()
