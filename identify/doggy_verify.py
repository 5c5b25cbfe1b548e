"""Verification as in §5.2: simulate open loop from the first estimated state with the identified parameters and
compare θ, θ̇ and both gyros with the recording (RMSE per signal, optional figures). Positions are expected to
drift (integrated velocity error); velocities should track."""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass, field

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
    # signal → per axis, the RMSE the noise and the fit explain (`explained_rmse`; θ̇ only, with the fit's states)
    explained: dict[str, list[float]] = field(default_factory=dict)


def _window(n: int, half_window: int) -> tuple[np.ndarray, np.ndarray]:
    return np.clip(np.arange(n) - half_window, 0, n - 1), np.clip(np.arange(n) + half_window, 0, n - 1)


def motor_velocity(rec: DoggyRecording, half_window: int = 5) -> np.ndarray:
    """Measured θ̇ by a central difference over ±half_window samples (encoder noise would swamp 1-step ones)."""
    th, t = rec.theta, rec.t
    i0, i1 = _window(len(t), half_window)
    return (th[i1] - th[i0]) / (t[i1] - t[i0])[:, None]


def explained_rmse(
    rec: DoggyRecording, states: np.ndarray, half_window: int = 5, measured: np.ndarray | None = None
) -> list[float]:
    """Per axis, the θ̇ RMSE (rad/s) that noise and the fit explain: the larger of the batch fit's own θ̇ residual
    (its estimated states against the measured θ̇ — what the fit, with every state free, could not explain) and
    the encoder noise of the measured θ̇ (σ_enc √2 over each difference window; a constant channel has no
    noise). A correct model's open-loop θ̇ stays near it (simulated 10 s and 60 s runs: 1.1×). `measured`: the
    recording's `motor_velocity` at this window, if the caller has it."""
    i0, i1 = _window(rec.n, half_window)
    span = rec.t[i1] - rec.t[i0]
    ok = span > 0
    noise = float(np.sqrt(np.mean((np.sqrt(2.0) * doggy.robot().sigma_encoder / span[ok]) ** 2)))
    measured = motor_velocity(rec, half_window) if measured is None else measured
    fit = np.sqrt(np.mean((states[:, 9:12] - measured) ** 2, axis=0))
    return [float(max(noise, f)) for f in fit]


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
    states: np.ndarray | None = None,
) -> Verification:
    """Open-loop RMSE per signal; with the fit's `states` (N, 12) also the θ̇ RMSE noise and fit explain."""
    pred = predict(rec, params, x0, friction_on, debias_gyro1)
    meas = {"theta": rec.theta, "theta_dot": motor_velocity(rec), "gyro1": rec.gyro1, "gyro2": rec.gyro2}
    rmse = {k: [float(v) for v in np.sqrt(np.mean((pred[k] - meas[k]) ** 2, axis=0))] for k in SIGNALS}
    explained = (
        {} if states is None else {"theta_dot": explained_rmse(rec, states, measured=meas["theta_dot"])}
    )
    return Verification(rec.t, meas, pred, rmse, explained)


def figure_windows(t: np.ndarray) -> int:
    """How many figures `plot` draws for a recording's time stamps: one per 10 s, 1 to 5."""
    return max(1, min(5, int((t[-1] - t[0]) // 10)))


FIGURE_NAME = re.compile(r"doggy_verification_[0-9]+\.png")


def figure_paths(out_dir: str | pathlib.Path, windows: int) -> list[pathlib.Path]:
    """The files `plot` writes into out_dir for `windows` time windows (checked for overwriting before the work)."""
    return [pathlib.Path(out_dir) / f"doggy_verification_{w + 1}.png" for w in range(windows)]


def stale_figures(out_dir: str | pathlib.Path, windows: int) -> list[pathlib.Path]:
    """Figures `plot` writes (doggy_verification_N.png) already in out_dir that this run would not overwrite (an
    earlier, longer run's): `plot` removes them, so the directory holds one run's set."""
    out = pathlib.Path(out_dir)
    if not out.is_dir():
        return []
    keep = set(figure_paths(out, windows))
    found = (p for p in out.iterdir() if FIGURE_NAME.fullmatch(p.name) and p.is_file())
    return sorted((p for p in found if p not in keep), key=lambda p: int(p.stem.rsplit("_", 1)[1]))


def plot(ver: Verification, out_dir: str | pathlib.Path, windows: int = 1) -> list[pathlib.Path]:
    """Figures like Figs 5–8: one PNG per time window with four panels θ, θ̇, ω2, ω1, measured (solid) vs
    predicted (dashed); figures of this name the run does not write (`stale_figures`) are removed."""
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
    for p in stale_figures(out, windows):
        p.unlink()
    return paths
