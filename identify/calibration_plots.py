"""Figures for `poise calibrate`: friction curves with fits, PWM-to-torque fit, accelerometer norms, offsets."""

from __future__ import annotations

from pathlib import Path

import matplotlib

from formats.units import GRAVITY

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from formats.atomic import save_figure  # noqa: E402


def plot_friction(omega, y, kept, fits, out: str | Path, title: str = "") -> Path:
    """Measured friction f (the torque the drive must add, −(τ_j + I ω̇) with the motor off) against ω (kept and
    rejected samples) with each fitted curve."""
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(omega[~kept], y[~kept], ".", ms=2, color="0.75", label="rejected (reversals, sticking)")
    ax.plot(omega[kept], y[kept], ".", ms=2, color="C0", alpha=0.5, label="used")
    w = np.linspace(np.min(omega), np.max(omega), 600)
    w = w[w != 0]
    for k, f in enumerate(fits):
        lab = (
            f.model
            + (f" (v_s = {f.v_s:.3g} rad/s)" if f.v_s else "")
            + (", zero slope" if f.zero_slope else "")
        )
        for side in (w < 0, w > 0):
            ax.plot(w[side], f.torque(w[side]), color=f"C{k + 1}", lw=2, label=lab if side[0] else None)
    ax.axhline(0, color="k", lw=0.5)
    ax.axvline(0, color="k", lw=0.5)
    ax.set_xlabel("joint velocity ω [rad/s]")
    ax.set_ylabel("friction f (torque the drive must add) [N·m]")
    ax.set_title(title or "Friction: measured and fitted")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    return save_figure(fig, out, dpi=120)


def plot_pwm_gain(pwm, y, fit, out: str | Path, title: str = "") -> Path:
    """Torque (friction-compensated for a moving link) against PWM with the fitted line(s)."""
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.plot(pwm, y, ".", ms=2, alpha=0.5, label="measured")
    p = np.linspace(np.min(pwm), np.max(pwm), 50)
    if fit.hysteresis is None:
        ax.plot(p, fit.tau0 + fit.k_pwm * p, "C1", lw=2, label=f"K = {fit.k_pwm:.4g} N·m/%")
    else:
        for s, ls in ((1, "-"), (-1, "--")):
            lab = f"K = {fit.k_pwm:.4g} N·m/%, h = {fit.hysteresis:.3g} N·m" if s == 1 else None
            ax.plot(p, fit.tau0 + fit.k_pwm * p - s * fit.hysteresis, "C1", ls=ls, lw=2, label=lab)
    ax.set_xlabel("PWM [% of full scale]")
    ax.set_ylabel("torque [N·m]")
    ax.set_title(title or f"PWM gain ({fit.method})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, out, dpi=120)


def plot_accelerometer(r, cals, out: str | Path, g: float = GRAVITY) -> Path:
    """‖a‖ − g per pose, raw (offset-free sphere assumption) and for each calibration."""
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(np.linalg.norm(r, axis=1) - g, "o", ms=3, color="0.6", label="raw ‖r‖ − g")
    for k, c in enumerate(cals):
        ax.plot(np.linalg.norm(c.apply(r), axis=1) - g, "o-", ms=3, color=f"C{k}", label=c.method)
    ax.set_xlabel("pose")
    ax.set_ylabel("‖a‖ − g [m/s²]")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, out, dpi=120)


def plot_offsets(joints, est_deg, std_deg, true_deg, out: str | Path) -> Path:
    """Estimated encoder offsets with the bucket spread (and the truth when simulated)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(joints))
    ax.bar(x, est_deg, yerr=std_deg, capsize=3, label="estimated ± bucket std")
    if true_deg is not None:
        ax.plot(x, true_deg, "kx", ms=8, label="true")
    ax.set_xticks(x, joints, rotation=30, ha="right")
    ax.set_ylabel("offset [deg]")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out, dpi=120)
