"""Verification as in §5.2: simulate open loop from the first estimated state with the identified parameters and
compare θ, θ̇ and both gyros with the recording (RMSE per signal, optional figures). Positions are expected to
drift (integrated velocity error); velocities should track."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

import casadi as ca
import numpy as np

from formats.atomic import save_figure
from formats.doggy_recording import DoggyRecording
from robots import doggy
from robots.doggy import DoggyParams

SIGNALS = {"theta": "rad", "theta_dot": "rad/s", "gyro1": "rad/s", "gyro2": "rad/s"}  # the RMSE's units


@dataclass
class Verification:
    t: np.ndarray
    measured: dict[str, np.ndarray]  # signal → (N, 3)
    predicted: dict[str, np.ndarray]
    rmse: dict[str, list[float]]  # signal → per axis, in SIGNALS units


def motor_velocity(rec: DoggyRecording, half_window: int = 5) -> np.ndarray:
    """Measured θ̇ by a central difference over ±half_window samples (encoder noise would swamp 1-step ones)."""
    th, t = rec.theta, rec.t
    n = len(t)
    i0 = np.clip(np.arange(n) - half_window, 0, n - 1)
    i1 = np.clip(np.arange(n) + half_window, 0, n - 1)
    return (th[i1] - th[i0]) / (t[i1] - t[i0])[:, None]


def predict(
    rec: DoggyRecording,
    params: DoggyParams,
    x0: np.ndarray,
    friction_on: str = "link",
    debias_gyro1: bool = True,
) -> dict[str, np.ndarray]:
    """Open-loop Euler simulation from x0 under the recorded PWM and per-step T_s; predicted sensor signals."""
    x = ca.SX.sym("x", 12)
    u = ca.SX.sym("u", 3)
    T = ca.SX.sym("T")
    p = ca.SX.sym("p", 12)
    step = ca.Function("step", [x, ca.vertcat(u, T), p], [doggy.euler_step(x, u, p, T, friction_on)])
    n = rec.n
    data = np.column_stack([rec.u, np.append(rec.dt(), rec.dt()[-1])])
    X = np.asarray(step.mapaccum("ol", n - 1)(x0, data[:-1].T, params.phys())).T
    states = np.vstack([x0, X])
    R1, R2 = params.R_imu1, params.R_imu2
    b1, b2 = np.asarray(params.bias1), np.asarray(params.bias2)
    k, axis = doggy.yaw_joint(doggy.robot())
    nj = len(doggy.robot().joints)
    w1 = (
        R1 @ np.outer(states[:, nj + k], axis).T
    ).T + b1  # eq 23 solved for ω_IMU1: body 1 turns about the yaw axis
    xs, b1s, b2s, R1s, R2s, w1s = (
        ca.SX.sym(s, k) for s, k in (("x", 12), ("b1", 3), ("b2", 3), ("R1", 9), ("R2", 9), ("w1", 3))
    )
    g2 = ca.Function(
        "g2",
        [xs, b1s, b2s, R1s, R2s, w1s],
        [
            doggy.gyro2_prediction(
                xs, b1s, b2s, ca.reshape(R1s, 3, 3), ca.reshape(R2s, 3, 3), w1s, debias_gyro1
            )
        ],
    )
    w2 = np.asarray(g2.map(n)(states.T, b1, b2, R1.T.reshape(-1), R2.T.reshape(-1), w1.T)).T
    return {"theta": states[:, 6:9] + rec.theta0, "theta_dot": states[:, 9:12], "gyro1": w1, "gyro2": w2}


def verify(
    rec: DoggyRecording,
    params: DoggyParams,
    x0: np.ndarray,
    friction_on: str = "link",
    debias_gyro1: bool = True,
) -> Verification:
    pred = predict(rec, params, x0, friction_on, debias_gyro1)
    meas = {"theta": rec.theta, "theta_dot": motor_velocity(rec), "gyro1": rec.gyro1, "gyro2": rec.gyro2}
    rmse = {k: [float(v) for v in np.sqrt(np.mean((pred[k] - meas[k]) ** 2, axis=0))] for k in SIGNALS}
    return Verification(rec.t, meas, pred, rmse)


def figure_windows(t: np.ndarray) -> int:
    """How many figures `plot` draws for a recording's time stamps: one per 10 s, 1 to 5."""
    return max(1, min(5, int((t[-1] - t[0]) // 10)))


def figure_paths(out_dir: str | pathlib.Path, windows: int) -> list[pathlib.Path]:
    """The files `plot` writes into out_dir for `windows` time windows (checked for overwriting before the work)."""
    return [pathlib.Path(out_dir) / f"doggy_verification_{w + 1}.png" for w in range(windows)]


def plot(ver: Verification, out_dir: str | pathlib.Path, windows: int = 1) -> list[pathlib.Path]:
    """Figures like Figs 5–8: θ, θ̇, ω2, ω1 measured (solid) vs predicted (dashed); one PNG per time window."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = figure_paths(out, windows)
    edges = np.linspace(0, len(ver.t), windows + 1).astype(int)
    rows = [
        ("theta", "θ / deg"),
        ("theta_dot", "θ̇ / deg s⁻¹"),
        ("gyro2", "ω₂ / deg s⁻¹"),
        ("gyro1", "ω₁ / deg s⁻¹"),
    ]
    for w in range(windows):
        s = slice(edges[w], edges[w + 1])
        fig, axes = plt.subplots(4, 1, figsize=(10, 9), sharex=True)
        for ax, (key, label) in zip(axes, rows, strict=True):
            for j, c in enumerate(("tab:red", "tab:green", "tab:blue")):
                ax.plot(ver.t[s], np.degrees(ver.measured[key][s, j]), color=c, lw=0.8)
                ax.plot(ver.t[s], np.degrees(ver.predicted[key][s, j]), color=c, lw=0.8, ls="--")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[-1].set_xlabel("t / s")
        axes[0].set_title(
            "measured (solid) vs open-loop prediction (dashed); red/green/blue = axis 1/2/3 or x/y/z"
        )
        fig.tight_layout()
        save_figure(fig, paths[w])
    return paths
