"""Simulated Doggy calibration experiment: the excitation plan (`formats.doggy_plan`, designed by
`trajectories.doggy_excitation`, written by `poise plan doggy`) run on the model.

`pwm_program` turns the plan into per-sample controller set-points. Simulation integrates the model with the same explicit Euler step as the
estimator (one closed-loop `mapaccum`), then samples encoders and gyros at 1 kHz with the paper's noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import casadi as ca
import numpy as np
from scipy import signal

from formats.doggy_plan import ExcitationPlan, pwm_command, pwm_program  # noqa: F401 (pwm_command re-exported)
from formats.doggy_recording import DoggyRecording
from robots import doggy
from robots.doggy import DoggyParams

# Doggy's sensors, sampling rate and set-point range come from its description (robots/data/doggy).
ROBOT = doggy.robot()
SIGMA_ENC = ROBOT.sigma_encoder  # rad
SIGMA_GYRO = ROBOT.sigma_gyro  # rad/s


@dataclass
class SimConfig:
    duration: float = 60.0  # s
    rate: float = ROBOT.rate_hz  # Hz
    seed: int = 0
    params: DoggyParams = field(default_factory=lambda: ROBOT.sets["identified"])
    sigma_enc: float = SIGMA_ENC
    sigma_gyro: float = SIGMA_GYRO
    jitter: float = 2e-5  # s, uniform time-stamp jitter (per-step T_s varies around 1/rate)
    process_noise: tuple[float, float] = (0.0, 0.0)  # std of per-step q̇ and θ̇ disturbances [rad/s]
    theta0: tuple[float, float, float] = (0.0, 0.0, 0.0)  # rad, encoder zero offsets
    zero_time: float = 1.0  # s without command at the start (bias window)
    # Flexible first bearing (not in the estimator's dynamics): body 1 rocks about its x/y axes like a damped
    # oscillator (natural frequency [Hz], damping ratio, gain [rad per rad/s²]) driven by the link accelerations
    # of joints 2 and 3. Both gyros see it, which is what makes the IMU1 yaw about axis 1 observable.
    wobble: tuple[float, float, float] = (3.0, 0.1, 0.02)
    friction_on: str = "link"


@dataclass
class Simulation:
    recording: DoggyRecording
    states: np.ndarray  # (N, 12) true states at the sample times
    params: DoggyParams
    plan: ExcitationPlan


def _closed_loop_step(friction_on: str) -> ca.Function:
    """x_{k+1}, u_k from x_k and per-step data (target, sweep, u_max, encoder noise, T_s, process noise)."""
    x = ca.SX.sym("x", 12)
    p = ca.SX.sym("p", 12)
    th0 = ca.SX.sym("th0", 3)
    kp = ca.SX.sym("kp")
    d = ca.SX.sym("d", 3 + 3 + 1 + 3 + 1 + 12)
    target, ff, umax, n_enc, T, w = d[0:3], d[3:6], d[6], d[7:10], d[10], d[11:23]
    theta_meas = x[6:9] + th0 + n_enc
    u = ca.fmin(ca.fmax(kp * (target - (theta_meas - th0)) + ff, -umax), umax)
    x_next = doggy.euler_step(x, u, p, T, friction_on) + w
    return ca.Function("cl_step", [x, d, p, th0, kp], [x_next, u])


def _bearing_wobble(states: np.ndarray, dt: np.ndarray, wobble) -> np.ndarray:
    """Angular velocity (N, 3) of body 1 about its x/y axes from the flexible bearing (z component 0)."""
    f_n, zeta, gain = wobble
    out = np.zeros((len(states), 3))
    if gain == 0.0:
        return out
    qdd = np.vstack([np.diff(states[:, 3:6], axis=0) / dt[:-1, None], np.zeros((1, 3))])
    drive = -gain * qdd[:, [1, 2]]  # pitch acceleration rocks about x, roll about y (reaction torques)
    wn = 2 * np.pi * f_n
    b, a = signal.bilinear([1.0, 0.0], [1.0, 2 * zeta * wn, wn**2], fs=1.0 / float(np.median(dt)))
    out[:, :2] = signal.lfilter(
        b, a, drive, axis=0
    )  # transfer s/(s² + 2ζω s + ω²): rate of the rocking angle
    return out


def simulate(cfg: SimConfig, plan: ExcitationPlan) -> Simulation:
    """Run the calibration experiment (plan from `trajectories.doggy_excitation.make_plan` or a plan file) in
    simulation and return the recording plus the true states."""
    rng = np.random.default_rng(cfg.seed)
    n = int(round(cfg.duration * cfg.rate))
    T = 1.0 / cfg.rate
    t = np.arange(n) * T + rng.uniform(-cfg.jitter, cfg.jitter, n) * (cfg.jitter > 0)
    t[0] = 0.0
    target, ff, umax = pwm_program(plan, t)
    n_enc = rng.normal(0.0, cfg.sigma_enc, (n, 3))
    dt = np.append(np.diff(t), T)
    w = np.zeros((n, 12))
    w[:, 3:6] = rng.normal(0.0, cfg.process_noise[0], (n, 3)) if cfg.process_noise[0] > 0 else 0.0
    w[:, 9:12] = rng.normal(0.0, cfg.process_noise[1], (n, 3)) if cfg.process_noise[1] > 0 else 0.0
    w[: int(cfg.zero_time * cfg.rate) + 1] = 0.0  # the robot is truly at rest in the bias window
    data = np.column_stack([target, ff, umax, n_enc, dt, w])
    acc = _closed_loop_step(cfg.friction_on).mapaccum("sim", n)
    x0 = np.zeros(12)
    X, U = acc(x0, data.T, cfg.params.phys(), np.asarray(cfg.theta0), plan.kp)
    X = np.asarray(X).T  # states after each step: x_1 … x_n
    states = np.vstack([x0, X[:-1]])
    u = np.asarray(U).T
    p = cfg.params
    w_body1 = _bearing_wobble(states, dt, cfg.wobble)
    gy = doggy.numeric(cfg.friction_on)["true_gyros"].map(n)
    g1, g2 = gy(states.T, np.asarray(p.bias1), np.asarray(p.bias2), p.R_imu1, p.R_imu2, w_body1.T)
    gyro1 = np.asarray(g1).T + rng.normal(0.0, cfg.sigma_gyro, (n, 3))
    gyro2 = np.asarray(g2).T + rng.normal(0.0, cfg.sigma_gyro, (n, 3))
    theta = states[:, 6:9] + np.asarray(cfg.theta0) + n_enc
    rec = DoggyRecording(t, u, theta, gyro1, gyro2, np.asarray(cfg.theta0, float))
    return Simulation(rec, states, cfg.params, plan)
