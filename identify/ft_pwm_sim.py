"""Synthetic F/T + PWM experiments on the MuJoCo twin (spec icub-pls.md §4): a multi-sine joint motion inside
the joint limits and the description's coupled limits, true parameters (perturbed CAD, friction, PWM gains,
F/T offset), sensor noise and optional contacts (random 1–5 N pushes at a distal link)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drivers.emulators.mujoco_arm import physical_truth
from drivers.emulators.mujoco_ft_arm import FtPwmNoise, simulate_ft_pwm
from formats.errors import DataError
from formats.ft_pwm_recording import FtPwmRecording
from robots.actuation import FtPwmTruth, Transmission
from robots.params_io import perturbed
from robots.tree import ParameterSet, RobotModel


def multisine(
    model: RobotModel, duration: float, rate_hz: float, rng: np.random.Generator, harmonics: int = 4,
    fmin: float = 0.05, fmax: float = 0.35, margin: float = 0.1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """t and exact q, q̇, q̈ of random multi-sines about the middle of the joint range, scaled to stay a margin
    (fraction of the range) inside the joint limits and inside the coupled limits A q ≤ b."""
    if duration <= 0 or rate_hz <= 0:
        raise DataError("duration and rate must be positive")
    t = np.arange(int(round(duration * rate_hz))) / rate_hz
    lo, hi = model.sampling_bounds()
    q0, half = (lo + hi) / 2, (hi - lo) / 2 * (1 - 2 * margin)
    n = model.nq
    f = rng.uniform(fmin, fmax, (harmonics, n))
    ph = rng.uniform(0, 2 * np.pi, (harmonics, n))
    a = rng.uniform(0.5, 1.0, (harmonics, n)) / harmonics
    w = 2 * np.pi * f
    arg = w[None] * t[:, None, None] + ph[None]
    u, ud, udd = (a * np.sin(arg)).sum(1), (a * w * np.cos(arg)).sum(1), (-a * w**2 * np.sin(arg)).sum(1)
    s = half / np.max(np.abs(u), axis=0)
    A, b = model.coupled_A, model.coupled_b
    scale = 1.0
    if A.size:
        slack = b - A @ q0
        if np.any(slack <= 0):
            raise DataError("the middle of the joint range violates the robot's coupled limits")
        au = (u * s) @ A.T  # (K, constraints)
        with np.errstate(divide="ignore"):
            lim = np.where(au > 0, slack / au, np.inf)
        scale = min(1.0, 0.95 * float(lim.min()))
    s = s * scale
    return t, q0 + u * s, ud * s, udd * s


def default_truth(
    model: RobotModel, groups: list[Transmission], rng: np.random.Generator, base: str | ParameterSet = "urdf"
) -> tuple[ParameterSet, FtPwmTruth]:
    """A plausible true arm: CAD masses ±10 %, CoMs ±1 cm, inertias ±20 % (made physical for MuJoCo);
    friction of a few 0.1 N·m, PWM gains ≈ 0.1 N·m per PWM unit, an F/T offset of a few N and 0.1 N·m."""
    ps = physical_truth(perturbed(model.parameter_set(base), rng, inertia_rel=0.2))

    def fr(n: int, c: float, v: float) -> np.ndarray:
        return np.column_stack([c * rng.uniform(0.7, 1.3, (n, 2)), v * rng.uniform(0.7, 1.3, (n, 2))])

    jf = tuple(fr(len(g.joints), 0.3, 0.2) for g in groups)
    mf = tuple(fr(len(g.motors), 0.15, 0.08) if g.coupled else None for g in groups)
    gains = tuple(rng.uniform(0.07, 0.12, len(g.motors)) for g in groups)
    offset = np.concatenate([rng.uniform(-3, 3, 3), rng.uniform(-0.2, 0.2, 3)])
    return ps, FtPwmTruth(jf, mf, gains, offset)


def contact_schedule(
    t: np.ndarray, rng: np.random.Generator, force_range: tuple[float, float] = (1.0, 5.0),
    duration_range: tuple[float, float] = (0.5, 1.5), gap_range: tuple[float, float] = (1.0, 3.0),
) -> np.ndarray:  # fmt: skip
    """External forces (K, 3) in the world frame: pushes of random direction and magnitude, with gaps."""
    F = np.zeros((len(t), 3))
    s = t[0] + rng.uniform(*gap_range)
    while s < t[-1]:
        e = s + rng.uniform(*duration_range)
        d = rng.standard_normal(3)
        F[(t >= s) & (t < e)] = rng.uniform(*force_range) * d / np.linalg.norm(d)
        s = e + rng.uniform(*gap_range)
    return F


@dataclass
class Experiment:
    """A synthetic recording with its truth."""

    recording: FtPwmRecording
    truth: ParameterSet
    extra: FtPwmTruth
    contact_force: np.ndarray | None = None  # (K, 3) N, world frame, at `contact_link` (evaluation only)


def simulate_experiment(
    model: RobotModel,
    groups: list[Transmission],
    sensor: str,
    duration: float = 300.0,
    rate_hz: float = 100.0,
    seed: int = 0,
    noise: FtPwmNoise | None = None,
    truth: tuple[ParameterSet, FtPwmTruth] | None = None,
    contacts: tuple[float, float] | None = None,
    contact_link: str | None = None,
) -> Experiment:
    """One run of the twin: motion from `seed`, truth from `seed` unless given; contacts of (min, max) N."""
    rng = np.random.default_rng(seed)
    noise = noise or FtPwmNoise()
    ps, extra = (
        truth if truth is not None else default_truth(model, groups, np.random.default_rng(1000 + seed))
    )
    t, q, qd, qdd = multisine(model, duration, rate_hz, rng)
    F = contact_schedule(t, rng, contacts) if contacts is not None else None
    link = contact_link or model.links[-1].name
    out = simulate_ft_pwm(
        model, ps, groups, extra, q, qd, qdd, sensor, noise, link if F is not None else None, F, rng
    )
    rec = FtPwmRecording(
        robot=model.name,
        sensor=sensor,
        joint_names=list(model.joint_names),
        motor_names=[m for g in groups for m in g.motors],
        t=t,
        q=out.q,
        pwm=out.pwm,
        wrench=out.wrench,
        contact=out.contact if F is not None else None,
        meta={
            "source": f"MuJoCo twin: seed={seed}, {duration:g} s at {rate_hz:g} Hz, noise F {noise.force} N, "
            f"M {noise.moment} N·m, PWM {noise.pwm}"
            + (f", contacts {contacts[0]:g}–{contacts[1]:g} N at {link}" if contacts else ""),
        },
    )
    return Experiment(rec, ps, extra, out.contact_force if F is not None else None)


def synthetic_runs(
    model: RobotModel,
    groups: list[Transmission],
    sensor: str,
    duration: float = 300.0,
    seed: int = 0,
    contacts: tuple[float, float] = (1.0, 5.0),
    noise: FtPwmNoise | None = None,
) -> tuple[Experiment, Experiment, Experiment]:
    """The paper's experiment on the twin: identification and validation runs of `duration` (different motions,
    the same arm) and a third run with injected contacts of `contacts` N for the detector."""
    truth = default_truth(model, groups, np.random.default_rng(seed))
    runs = [
        simulate_experiment(model, groups, sensor, duration, seed=seed + 1 + k, noise=noise, truth=truth, contacts=c)
        for k, c in enumerate((None, None, contacts))
    ]  # fmt: skip
    return runs[0], runs[1], runs[2]
