"""Synthetic inertial-sensor experiments (spec actuation.md §4–5): a miscalibrated accelerometer on a link posed
by two orthogonal joints (the thesis's hip roll/yaw grid) plus tumble pairs.

Readings are r = C⁻¹ a + o with a the proper acceleration (gravity plus the small centripetal/tangential terms
of the link swinging slowly between poses, sampled while it settles), per-sample noise and the quantisation of a
12-bit ±2 g device; the estimators only see pose-averaged raw readings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from formats.calibration_recording import AccelRecording
from formats.units import GRAVITY as G


def rot(axis: str, angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return {
        "x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
        "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
        "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]),
    }[axis]


@dataclass(frozen=True)
class AccelTruth:
    offset: tuple[float, float, float] = (0.25, -0.8, -0.12)
    C: tuple[tuple[float, ...], ...] = ((1.01, 0.015, -0.007), (0.015, 0.985, 0.006), (-0.007, 0.006, 0.98))
    mount_rpy: tuple[float, float, float] = (0.3, -0.2, 0.5)  # sensor frame on the link
    lever: float = 0.15  # m, sensor distance from the joint axes


@dataclass(frozen=True)
class AccelExperiment:
    roll_deg: tuple[float, ...] = tuple(np.arange(20.0, 80.1, 15.0))
    yaw_deg: tuple[float, ...] = tuple(np.arange(-60.0, 60.1, 20.0))
    samples_per_pose: int = 100
    rate_hz: float = 100.0
    noise: float = 0.2  # m/s² per sample
    tumble_pairs: int = 3
    seed: int = 0
    lsb: float = 4 * G / 2**12
    settle_swing_deg: float = field(default=0.5)  # residual oscillation while a pose is held


def _link_rotation(roll: float, yaw: float) -> np.ndarray:
    """Hip roll about the horizontal x axis, then hip yaw about the (rolled) leg axis z."""
    return rot("x", roll) @ rot("z", yaw)


def simulate_accelerometer(truth: AccelTruth = AccelTruth(), exp: AccelExperiment = AccelExperiment()):
    """AccelRecording of the grid poses and tumble pairs; also the true (offset, C)."""
    rng = np.random.default_rng(exp.seed)
    Cinv = np.linalg.inv(np.array(truth.C))
    o = np.array(truth.offset)
    Rm = rot("z", truth.mount_rpy[2]) @ rot("y", truth.mount_rpy[1]) @ rot("x", truth.mount_rpy[0])
    g_w = np.array([0.0, 0.0, -G])
    t = np.arange(exp.samples_per_pose) / exp.rate_hz
    rows_pose, rows_a, rows_t = [], [], []

    def hold(R_link: np.ndarray, pose: int, tumble: int) -> None:
        # the link keeps swinging a little about its roll axis while held: proper acceleration includes the
        # tangential and centripetal terms of that motion (ω = A ν cos, ω̇ = −A ν² sin)
        amp, nu = np.radians(exp.settle_swing_deg), 2 * np.pi * 1.3
        phase = rng.uniform(0, 2 * np.pi)
        ang = amp * np.sin(nu * t + phase)
        wdot = -amp * nu**2 * np.sin(nu * t + phase)
        w = amp * nu * np.cos(nu * t + phase)
        n = len(t)
        R = np.einsum("ij,njk->nik", R_link, np.stack([rot("x", a) for a in ang]))
        ax = R[:, :, 0]
        r_arm = R @ np.array([0.0, 0.0, -truth.lever])  # sensor below the joint
        lin = np.cross(wdot[:, None] * ax, r_arm) + np.cross(
            w[:, None] * ax, np.cross(w[:, None] * ax, r_arm)
        )
        a = np.einsum("nji,nj->ni", R @ Rm, lin - g_w)  # proper acceleration in the sensor frame
        r = a @ Cinv.T + o + rng.normal(0.0, exp.noise, (n, 3))
        rows_a.extend(np.round(r / exp.lsb) * exp.lsb)
        rows_pose.extend([pose] * n)
        rows_t.extend([tumble] * n)

    pose = 0
    for roll in exp.roll_deg:
        for yaw in exp.yaw_deg:
            hold(_link_rotation(np.radians(roll), np.radians(yaw)), pose, 0)
            pose += 1
    for k in range(1, exp.tumble_pairs + 1):
        R1 = _link_rotation(np.radians(rng.uniform(20, 80)), np.radians(rng.uniform(-60, 60)))
        h = rot("z", rng.uniform(0, 2 * np.pi)) @ np.array([1.0, 0.0, 0.0])  # a horizontal axis
        K = np.array([[0, -h[2], h[1]], [h[2], 0, -h[0]], [-h[1], h[0], 0]])
        R_flip = np.eye(3) + 2 * K @ K  # rotation by π about h
        hold(R1, pose, k)
        hold(R_flip @ R1, pose + 1, -k)
        pose += 2
    rec = AccelRecording(np.array(rows_pose), np.array(rows_a), np.array(rows_t))
    return rec, (o, np.array(truth.C))


def slow_trajectory(
    lower: np.ndarray, upper: np.ndarray, n: int, rate_hz: float, speed_deg_s: float, seed: int, margin: float
) -> np.ndarray:
    """(n, nq) joint angles through random waypoints inside the limits (shrunk by `margin` of the range),
    smoothly interpolated (cosine blends) with every joint below `speed_deg_s`."""
    rng = np.random.default_rng(seed)
    lo, hi = lower + margin * (upper - lower), upper - margin * (upper - lower)
    out, cur = [], rng.uniform(lo, hi)
    vmax = np.radians(speed_deg_s)
    while sum(len(o) for o in out) < n:
        nxt = rng.uniform(lo, hi)
        dur = max(np.max(np.abs(nxt - cur)) * np.pi / 2 / vmax, 0.5)  # cosine blend peak speed = π/2·Δ/T
        s = (1 - np.cos(np.pi * np.arange(int(dur * rate_hz)) / (dur * rate_hz))) / 2
        out.append(cur + s[:, None] * (nxt - cur))
        cur = nxt
    return np.concatenate(out)[:n]


def simulate_offsets(
    model,
    sensors: list[str],
    offsets: np.ndarray,
    n: int = 1200,
    rate_hz: float = 100.0,
    speed_deg_s: float = 8.0,
    noise: float = 0.2,
    encoder_bits: int = 16,
    seed: int = 0,
    params: str = "urdf",
    margin: float = 0.2,
):
    """Encoder readings q = θ − δ (quantised) and noisy proper accelerations of the sensors along a slow motion:
    gravity plus the sites' own accelerations (second differences of their positions)."""
    from robots.dynamics import GRAVITY
    from robots.kinematics import site_pose

    lower, upper = np.asarray(model.lower, float), np.asarray(model.upper, float)
    theta = slow_trajectory(lower, upper, n, rate_hz, speed_deg_s, seed, margin)
    base = model.links[0].name
    g = np.asarray(GRAVITY, float)
    rng = np.random.default_rng(seed + 1)
    acc = []
    for s in sensors:
        R, p = site_pose(model, theta, params, s, base)
        pdd = np.gradient(np.gradient(p, 1 / rate_hz, axis=0), 1 / rate_hz, axis=0)
        acc.append(np.einsum("nji,nj->ni", R, pdd - g))
    acc = np.stack(acc, axis=1) + rng.normal(0.0, noise, (n, len(sensors), 3))
    lsb = 2 * np.pi / 2**encoder_bits
    q = np.round((theta - offsets) / lsb) * lsb
    return q, acc, theta


def _expm_so3(v: np.ndarray) -> np.ndarray:
    th = np.linalg.norm(v)
    if th < 1e-12:
        return np.eye(3)
    k = v / th
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(th) * K + (1 - np.cos(th)) * K @ K


def simulate_link(
    positions: np.ndarray,
    duration_s: float = 10.0,
    rate_hz: float = 100.0,
    acc_noise: float = 0.2,
    gyro_noise: float = 0.005,
    seed: int = 0,
):
    """A link swinging in 3-D: body rates ω(t) (sums of sines) integrated into R(t) at 10× the log rate, the
    origin on a smooth path; each accelerometer reads Rᵀ(p̈_i − g) with p̈_i the second difference of its own
    world position. Returns t, acc (N, S, 3), gyro (N, 3) noisy, true ω̇ (N, 3), true α_L (N, 3)."""
    rng = np.random.default_rng(seed)
    up = 10
    h = 1.0 / (rate_hz * up)
    n = int(round(duration_s * rate_hz))
    tt = np.arange(n * up + 2) * h - h
    f = rng.uniform(0.3, 1.5, (3, 3))
    a = rng.uniform(0.5, 2.0, (3, 3))
    ph = rng.uniform(0, 2 * np.pi, (3, 3))
    w = np.sum(a * np.sin(2 * np.pi * f * tt[:, None, None] + ph), axis=2)
    wd = np.sum(a * 2 * np.pi * f * np.cos(2 * np.pi * f * tt[:, None, None] + ph), axis=2)
    R = np.empty((len(tt), 3, 3))
    R[0] = np.eye(3)
    for k in range(1, len(tt)):
        R[k] = R[k - 1] @ _expm_so3(h * (w[k - 1] + w[k]) / 2)
    p = 0.3 * np.column_stack([np.sin(1.1 * tt), np.sin(0.7 * tt + 1), 0.5 * np.sin(1.9 * tt)])
    g = np.array([0.0, 0.0, -G])
    pts = p[:, None, :] + np.einsum("kij,sj->ksi", R, np.asarray(positions, float))
    pdd = (pts[2:] - 2 * pts[1:-1] + pts[:-2]) / h**2
    p0dd = (p[2:] - 2 * p[1:-1] + p[:-2]) / h**2
    Rm = R[1:-1]
    acc = np.einsum("kji,ksj->ksi", Rm, pdd - g)[::up]
    alpha = np.einsum("kji,kj->ki", Rm, p0dd - g)[::up]
    gyro = w[1:-1][::up]
    t = tt[1:-1][::up]
    acc_n = acc + rng.normal(0.0, acc_noise, acc.shape)
    gyro_n = gyro + rng.normal(0.0, gyro_noise, gyro.shape)
    return t, acc_n, gyro_n, wd[1:-1][::up], alpha
