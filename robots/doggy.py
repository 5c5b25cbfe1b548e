""" "Doggy": 3-joint flexible-joint robot (yaw, pitch, roll) with two gyroscopes (ICINCO 2016 model).

State x = (q, q̇, θ, θ̇) ∈ R¹² (link angles, motor angles on the link side). Dynamics (eqs 5–12): elastic joints,
link inertia M(q) from CAD (given in g·m², used in SI), shared motor constants k_pwm, k_mi, b, per-joint spring
k_s, damper d_s and sigmoid Coulomb friction µ_fm. Gyro kinematics come from one rotation chain (see
`head_rotation`); the printed eq. 29 is not a rotation. Everything is CasADi-symbolic so the simulator and the
estimator share one source of truth; `numeric(...)` wraps the functions for numpy use.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache

import casadi as ca
import numpy as np

N_GEAR = 42.092  # gear ratio, already applied to motor quantities
U_MAX = 32.0  # V, supply voltage; the command u is the PWM duty in [−1, 1]
FRICTION_SLOPE = 200.0  # τ_fm = µ tanh(200 v) ≡ 2µ(1/(1+exp(−400 v)) − ½)

# Nominal head-IMU rotation IMU2_EOF R (also the fixed EOF rotation in the chain).
P_EOF = np.array([[0.0, 0.0, 1.0], [0.0, -1.0, 0.0], [1.0, 0.0, 0.0]])
R_IMU1_NOMINAL = np.array([[-1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, -1.0, 0.0]]).T
R_IMU2_NOMINAL = P_EOF.T

PHYS_NAMES = [
    "k_pwm",
    "k_mi",
    "b",
    "mu_fm1",
    "mu_fm2",
    "mu_fm3",
    "k_s1",
    "k_s2",
    "k_s3",
    "d_s1",
    "d_s2",
    "d_s3",
]
PHYS_UNITS = ["N·m/V", "N·m·s/rad", "kg·m²"] + ["N·m"] * 3 + ["N·m/rad"] * 3 + ["N·m·s/rad"] * 3


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
    R_imu1: np.ndarray = field(default_factory=lambda: R_IMU1_NOMINAL.copy())  # IMU1_1 R
    R_imu2: np.ndarray = field(default_factory=lambda: R_IMU2_NOMINAL.copy())  # IMU2_EOF R

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


def _orthonormalize(R: np.ndarray) -> np.ndarray:
    U, _, Vt = np.linalg.svd(R)
    return U @ np.diag([1.0, 1.0, np.linalg.det(U @ Vt)]) @ Vt


_DEG = np.pi / 180.0

# Table 1, initial guess column (biases printed in "deg", read as deg/s).
TABLE1_INITIAL = DoggyParams(
    k_pwm=3.487,
    k_mi=15.563,
    b=2.681,
    mu_fm=(2.0, 2.0, 2.0),
    k_s=(400.0, 400.0, 600.0),
    d_s=(1.0, 1.0, 1.0),
    bias1=tuple(_DEG * np.array([2.615, 0.014, -1.273])),
    bias2=tuple(_DEG * np.array([2.723, -0.102, -0.652])),
)
# Table 1, identified column; the printed rotations are transposed and have 3 digits: orthonormalised here.
TABLE1_IDENTIFIED = DoggyParams(
    k_pwm=4.696,
    k_mi=31.328,
    b=2.428,
    mu_fm=(1.599, 2.565, 4.855),
    k_s=(187.555, 120.070, 103.056),
    d_s=(5.335, 4.143, 8.043),
    bias1=tuple(_DEG * np.array([2.615, 0.014, -1.273])),
    bias2=tuple(_DEG * np.array([2.723, -0.103, -0.652])),
    R_imu1=_orthonormalize(
        np.array([[-0.999, -0.0439, -0.0199], [0.0189, 0.0219, -0.999], [0.044, -0.999, -0.020]]).T
    ),
    R_imu2=_orthonormalize(
        np.array([[-0.009, 0.027, 0.999], [0.030, -0.999, 0.027], [0.999, 0.030, 0.008]]).T
    ),
)


# ---------------------------------------------------------------- symbolic model (works on ca.SX / ca.MX)


def mass_matrix(q) -> ca.SX:
    """Link inertia M(q) in kg·m² (eq 10 is in g·m²); independent of q1."""
    c2, s2, c3, s3 = ca.cos(q[1]), ca.sin(q[1]), ca.cos(q[2]), ca.sin(q[2])
    m11 = (
        1.824 * c2 * s2
        - 2.975 * c2**2
        - 503.760 * c2**2 * c3**2
        + 0.106 * c2**2 * c3 * s3
        + 0.183 * c2 * c3 * s2
        - 0.138 * c2 * s2 * s3
        + 1012.973
    )
    m12 = (
        0.8192 * s2
        - 8.5760 * c2
        + 0.0691 * c3 * s2
        + 0.0916 * s2 * s3
        - 0.1062 * c2 * c3**2
        - 503.7604 * c2 * c3 * s3
    )
    m13 = 514.2253 * s2 + 0.0916 * c2 * c3 - 0.0691 * c2 * s3
    m22 = 503.7604 * c3**2 - 0.0531 * ca.sin(2 * q[2]) + 40.0367
    m23 = 0.0691 * c3 + 0.0916 * s3
    m33 = 514.2253
    return 1e-3 * ca.vertcat(ca.horzcat(m11, m12, m13), ca.horzcat(m12, m22, m23), ca.horzcat(m13, m23, m33))


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
    tau_m = k_pwm * U_MAX * u - k_mi * thd
    v = qd if friction_on == "link" else thd
    tau_fm = mu * ca.tanh(FRICTION_SLOPE * v)
    qdd = -_solve3_sym(mass_matrix(q), tau_c)
    thdd = (tau_c + tau_m - tau_fm) / b
    return ca.vertcat(qd, qdd, thd, thdd)


def euler_step(x, u, phys, Ts, friction_on: str = "link"):
    """Explicit Euler: x_{k+1} = x_k + T_s f_dyn(x_k, u_k) (eq 31)."""
    return x + Ts * f_dyn(x, u, phys, friction_on)


def _rx(a):
    c, s = ca.cos(a), ca.sin(a)
    return ca.vertcat(ca.horzcat(1, 0, 0), ca.horzcat(0, c, -s), ca.horzcat(0, s, c))


def _ry(a):
    c, s = ca.cos(a), ca.sin(a)
    return ca.vertcat(ca.horzcat(c, 0, s), ca.horzcat(0, 1, 0), ca.horzcat(-s, 0, c))


def _rz(a):
    c, s = ca.cos(a), ca.sin(a)
    return ca.vertcat(ca.horzcat(c, -s, 0), ca.horzcat(s, c, 0), ca.horzcat(0, 0, 1))


def head_rotation(q):
    """¹R_EOF: orientation of the head (EOF) frame in frame 1 = Ry(q2)·Rx(−q3)·Pᵀ (pitch about y, roll about x).

    Then EOF_1 R = ¹R_EOFᵀ = P·Rx(q3)·Ry(q2)ᵀ, and the head's angular velocity relative to body 1, in EOF
    coordinates, is (s3 q̇2, −c3 q̇2, −q̇3) — eqs 27–28.
    """
    return _ry(q[1]) @ _rx(-q[2]) @ ca.DM(P_EOF).T


def joint_rate_eof(q, qd):
    """Angular velocity of the head relative to body 1 in EOF coordinates (eqs 27–28)."""
    return ca.vertcat(ca.sin(q[2]) * qd[1], -ca.cos(q[2]) * qd[1], -qd[2])


def world_to_frame1(q):
    """1_world R (eq 24) = Rz(q1)ᵀ."""
    return _rz(q[0]).T


def gyro1_residual(x, bias1, R1, w1):
    """F_gyro1 = q̇1 − z-component of the bias-corrected gyro-1 reading rotated into the world (eqs 22–24)."""
    w_world = world_to_frame1(x[0:3]).T @ (R1.T @ (w1 - bias1))
    return x[3] - w_world[2]


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
    w_body1 = ca.vertcat(0, 0, qd[0])  # in frame 1 (equal to the world z-rate)
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
