"""Synthetic joint-drive experiments for friction and PWM-gain calibration (spec actuation.md §1–2).

Friction follows poise's one convention (identify/friction.py): f(ω) is the torque the drive must add to
overcome it (sign of ω, parameters ≥ 0); the drive body obeys I ω̇ = K PWM − f(ω) − τ_j. Coupled joints use
robots/actuation.py's ω_m = T ω_j, τ_j = Tᵀ τ_m.
Physics, not the estimator run backwards: a rigid drive + link integrated at 1 kHz (semi-implicit Euler) with
Karnopp stick–slip (the drive sticks until the applied torque exceeds the static level σs±), a gravity load on
the link and, for the friction experiment, an external agent (PD on a reference) moving the link with the
motor off. Logging at 100 Hz; each row describes one instant, its stamp: the encoder angle at the stamp
(quantised) and the transmitted torque averaged over the 10 ms period centred on it, plus offset and noise; the
PWM column is the duty applied over that same window (what `poise run`'s recorder logs). Centred mean, not the
value at the stamp: a joint torque sensor's strain-gauge bridge is sampled far faster than the log and
low-passed (anti-aliasing) before it is logged, which a zero-phase box average models without the 1 kHz
stick–slip chatter aliasing into the log; centring it on the encoder read keeps the two in step (the earlier
simulator averaged the period *after* the read, a 5 ms lead that `--fit-inertia` turned into ΔI ≈ 8 SE). A
recorder whose average ends at the stamp lags by half a period: that is the recorder's to correct (or describe).
With the link held in a fixture (procedure B) the drive's flex-spline winds up quasi-statically: the
transmitted torque tracks K PWM inside a static-friction band (play operator), which gives the hysteresis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from formats.calibration_recording import DriveRecording
from formats.pwm_plan import PwmPlan, samples


@dataclass(frozen=True)
class DriveTruth:
    """True drive parameters (SI, joint side). Friction is the self-consistent Stribeck form."""

    inertia: float = 0.06  # drive inertia reflected to the joint ρ² I_m [kg·m²]
    kc: float = 0.85
    kv: float = 1.2  # N·m·s/rad
    sigma_pos: float = 1.27
    sigma_neg: float = 1.95
    v_s: float = 0.35  # rad/s; with these values σs⁺ − Kc = Kv v_s (flat at 0⁺)
    k_pwm: float = 3.5e-3  # N·m per PWM unit
    pwm_full_scale: float = 32000.0
    tau_offset: float = 0.15  # joint torque sensor offset [N·m]
    link_inertia: float = 0.3  # kg·m²
    link_mgl: float = 15.0  # gravity moment of the link [N·m], θ = 0 hanging down

    def friction(self, w: float) -> float:
        """f(ω): the torque the drive must add to keep moving at ω (sign of ω)."""
        if w > 0:
            return self.kc + self.kv * w + (self.sigma_pos - self.kc) * math.exp(-w / self.v_s)
        if w < 0:
            return -(self.kc - self.kv * w + (self.sigma_neg - self.kc) * math.exp(w / self.v_s))
        return 0.0

    def params(self) -> dict[str, float]:
        return {"Kc": self.kc, "Kv": self.kv, "sigma+": self.sigma_pos, "sigma-": self.sigma_neg}


@dataclass(frozen=True)
class Noise:
    tau_std: float = 0.02  # N·m
    encoder_bits: int = 16  # absolute encoder resolution per turn
    seed: int = 0


def _record(t, pwm_pct, q, tau, truth: DriveTruth, noise: Noise, joint: str) -> DriveRecording:
    rng = np.random.default_rng(noise.seed)
    lsb = 2 * np.pi / 2**noise.encoder_bits
    qm = np.round(q / lsb) * lsb
    taum = tau + truth.tau_offset + rng.normal(0.0, noise.tau_std, len(tau))
    return DriveRecording(t, pwm_pct, qm, taum, truth.inertia, joint)


def _integrate(truth: DriveTruth, u_torque, ext, n_log: int, sub: int, dt: float):
    """Semi-implicit Euler with Karnopp stick–slip; returns q, the mean τ_j and the mean drive torque, all at the
    log stamps (q at the stamp, means over the logging period centred on it: `_centred_means`)."""
    J = truth.inertia + truth.link_inertia
    th, w = 0.0, 0.0
    n_sub = n_log * sub + sub // 2 + 1  # half a period past the last stamp, so its window is whole
    q_log = np.empty(n_log)
    tau_sub, drive_sub = np.empty(n_sub), np.empty(n_sub)
    eps = 1e-6
    for i in range(n_sub):
        if i % sub == 0 and i // sub < n_log:
            q_log[i // sub] = th
        drive = u_torque[min(i // sub, n_log - 1)]  # setpoint k holds from stamp k to stamp k + 1
        load = -truth.link_mgl * math.sin(th) + ext(i * dt, th, w)
        applied = drive + load
        if abs(w) < eps:
            if -truth.sigma_neg <= applied <= truth.sigma_pos:
                f, wd = applied, 0.0  # stick: friction takes all the applied torque
            else:
                f = truth.sigma_pos if applied > 0 else -truth.sigma_neg
                wd = (applied - f) / J
        else:
            f = truth.friction(w)
            wd = (applied - f) / J
        w_new = w + dt * wd
        if w_new * w < 0.0:
            w_new = 0.0  # a reversal passes through zero velocity: let the stick test decide
        # torque the drive transmits to the link: drive body I ω̇ = K PWM − f − τ_j (K PWM added below)
        tau_sub[i], drive_sub[i] = -f - truth.inertia * wd, drive
        w = w_new
        th += dt * w
    # each term averaged over the sub-steps whose times centre on the stamp c: the drive of sub-step i acts over
    # [i, i + 1) dt (sub-steps c − sub/2 … c + sub/2 − 1); its friction is at ω_i, the velocity over sub-step i − 1
    # (semi-implicit Euler), time (i − ½) dt (sub-steps c − sub/2 + 1 … c + sub/2; ω̇ within half a sub-step)
    drive = _centred_means(drive_sub, n_log, sub, -(sub // 2))
    return q_log, drive + _centred_means(tau_sub, n_log, sub, 1 - sub // 2), drive


def _centred_means(x: np.ndarray, n_log: int, sub: int, first: int) -> np.ndarray:
    """Means of the sub-step values x (along axis 0) over sub-steps c + first … c + first + sub − 1 for each stamp
    c = k·sub: the logging period around the stamp, `first` chosen by the caller so that the values' times centre
    on it; the first window starts at t = 0."""
    cs = np.concatenate([np.zeros((1, *x.shape[1:])), np.cumsum(x, axis=0)])
    centre = np.arange(n_log) * sub
    lo, hi = np.maximum(centre + first, 0), centre + first + sub
    return (cs[hi] - cs[lo]) / (hi - lo).reshape(-1, *([1] * (x.ndim - 1)))


def simulate_free(
    plan: PwmPlan, truth: DriveTruth = DriveTruth(), noise: Noise = Noise(), joint: str = "joint"
) -> DriveRecording:
    """The PWM plan drives the drive and its hanging link (free to move under gravity)."""
    t, pct = samples(plan)
    u_scale = truth.k_pwm / 100.0 * truth.pwm_full_scale  # N·m per %
    u = u_scale * pct
    sub = 10
    dt = 1.0 / (plan.rate_hz * sub)
    q, tau, drive = _integrate(truth, u, lambda *_: 0.0, len(t), sub, dt)
    # the PWM column is the applied duty over the same window as the torque (as `poise run`'s recorder logs it)
    return _record(t, drive / u_scale, q, tau, truth, noise, joint)


def simulate_external(
    duration_s: float = 60.0,
    rate_hz: float = 100.0,
    truth: DriveTruth = DriveTruth(),
    noise: Noise = Noise(),
    amplitude: float = 0.6,
    frequencies: tuple[float, ...] = (0.1, 0.2, 0.35, 0.5),
    joint: str = "joint",
) -> DriveRecording:
    """Motor off (PWM 0); an external agent moves the link through sines of rising frequency (friction test)."""
    n = int(round(duration_s * rate_hz)) + 1
    t = np.arange(n) / rate_hz
    # whole periods per frequency so the reference velocity stays continuous at the switches
    cycles = [max(1, round(duration_s / len(frequencies) * f)) for f in frequencies]
    ends = np.cumsum([c / f for c, f in zip(cycles, frequencies, strict=True)])
    starts = np.concatenate([[0.0], ends[:-1]])
    kp, kd = 400.0, 40.0

    def ext(tt: float, th: float, w: float) -> float:
        k = min(int(np.searchsorted(ends, tt, side="right")), len(frequencies) - 1)
        f = frequencies[k]
        ph = 2 * np.pi * f * (tt - starts[k]) if tt < ends[-1] else 0.0
        amp = amplitude if tt < ends[-1] else 0.0
        ref, dref = amp * math.sin(ph), amp * 2 * np.pi * f * math.cos(ph)
        return truth.link_mgl * math.sin(th) + kp * (ref - th) + kd * (dref - w)

    sub = 10
    q, tau, _ = _integrate(truth, np.zeros(n), ext, n, sub, 1.0 / (rate_hz * sub))
    return _record(t, np.zeros(n), q, tau, truth, noise, joint)


def simulate_fixture(
    plan: PwmPlan, truth: DriveTruth = DriveTruth(), noise: Noise = Noise(), joint: str = "joint"
) -> DriveRecording:
    """Procedure B: the link is held; transmitted torque = K PWM inside the static band [−σs⁺, σs⁻]."""
    t, pct = samples(plan)
    drive = truth.k_pwm * pct / 100.0 * truth.pwm_full_scale
    tau = np.empty_like(drive)
    prev = 0.0
    for k, d in enumerate(drive):  # play operator: the flex-spline slips only at the band's edges
        prev = min(max(prev, d - truth.sigma_pos), d + truth.sigma_neg)
        tau[k] = prev
    return _record(t, pct, np.zeros_like(t), tau, truth, noise, joint)


def simulate_coupled(
    T: np.ndarray,
    kc: np.ndarray,
    kv: np.ndarray,
    motor_inertia: np.ndarray,
    link_inertia: np.ndarray,
    duration_s: float = 30.0,
    rate_hz: float = 100.0,
    tau_std: float = 0.02,
    encoder_bits: int = 16,
    eps: float = 0.01,
    seed: int = 0,
):
    """Coupled joints moved by an external agent (PD on multi-sine references per joint), motors off.

    Integrated in motor coordinates (ω_m = T ω_j, τ_j = Tᵀ τ_m) with a linearly implicit Euler step at 1 kHz;
    motor friction f = Kc tanh(ω_m/ε) + Kv ω_m (the torque a motor must add). Returns t, q_j (N, n) quantised
    at the stamps, τ_j (N, n) = Tᵀ (−f − I_m ω̇_m) averaged over the logging period centred on each stamp (the
    drive simulation's convention, module docstring) plus noise."""
    rng = np.random.default_rng(seed)
    n = T.shape[0]
    Tinv = np.linalg.inv(T)  # ω_j = T⁻¹ ω_m
    Im = np.diag(motor_inertia)
    M = Im + Tinv.T @ link_inertia @ Tinv
    kp, kd = 60.0 * np.eye(n), 8.0 * np.eye(n)
    freqs = rng.uniform(0.15, 0.6, (n, 3))
    amps = rng.uniform(0.1, 0.25, (n, 3))
    phases = rng.uniform(0, 2 * np.pi, (n, 3))
    sub, dt = 10, 1.0 / (rate_hz * 10)
    N = int(round(duration_s * rate_hz)) + 1
    th_m, w_m = np.zeros(n), np.zeros(n)
    n_sub = N * sub + sub // 2  # half a period past the last stamp, so its window is whole
    q_log, tau_sub = np.empty((N, n)), np.empty((n_sub, n))
    for i in range(n_sub):
        if i % sub == 0 and i // sub < N:
            q_log[i // sub] = Tinv @ th_m
        tt = i * dt
        arg = 2 * np.pi * freqs * tt + phases
        ref = np.sum(amps * np.sin(arg), axis=1)
        dref = np.sum(amps * 2 * np.pi * freqs * np.cos(arg), axis=1)
        q_j, w_j = Tinv @ th_m, Tinv @ w_m
        tau_ext = kp @ (ref - q_j) + kd @ (dref - w_j)
        th_ = np.tanh(w_m / eps)
        f = kc * th_ + kv * w_m
        D = np.diag(kc * (1 - th_**2) / eps + kv) + Tinv.T @ kd @ Tinv
        F = -f + Tinv.T @ tau_ext  # joint torques act on the motors as τ_m = T⁻ᵀ τ_j
        dw = np.linalg.solve(M + dt * D, dt * F)
        wd = dw / dt
        f_end = f + (D - Tinv.T @ kd @ Tinv) @ dw  # friction at the end of the step (linearised)
        tau_sub[i] = T.T @ (-f_end - motor_inertia * wd)
        w_m = w_m + dw
        th_m = th_m + dt * w_m
    # friction at the step's end velocity, the velocity over sub-step i, time (i + ½) dt: sub-steps
    # c − sub/2 … c + sub/2 − 1 centre on the stamp c (the acceleration term within half a sub-step)
    tau_log = _centred_means(tau_sub, N, sub, -(sub // 2))
    lsb = 2 * np.pi / 2**encoder_bits
    t = np.arange(N) / rate_hz
    return t, np.round(q_log / lsb) * lsb, tau_log + rng.normal(0.0, tau_std, tau_log.shape)
