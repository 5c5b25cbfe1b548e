"""Figures for `poise calibrate`: friction curves with fits, PWM-to-torque fit, accelerometer norms, offsets."""

from __future__ import annotations

from pathlib import Path

import matplotlib

from formats.units import GRAVITY

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from formats.atomic import save_figure  # noqa: E402


def plot_friction(omega, ys, kept, fits, out: str | Path, title: str = "") -> Path:
    """Measured friction f against ω (kept and rejected samples) with the fitted curves. `ys`: per fit, the data
    net of that fit's own PWM, offset and inertia terms (one panel per fit when these differ, else one panel)."""
    shared = all(np.array_equal(ys[0], y) for y in ys[1:])
    panels = [(ys[0], list(range(len(fits))))] if shared else [(y, [k]) for k, y in enumerate(ys)]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.5 + 2.5 * len(panels)), sharex=True, squeeze=False)
    w = np.linspace(np.min(omega), np.max(omega), 600)
    w = w[w != 0]
    for ax, (y, which) in zip(axes[:, 0], panels, strict=True):
        ax.plot(omega[~kept], y[~kept], ".", ms=2, color="0.75", label="rejected (sticking, |ω̇| outliers)")
        ax.plot(omega[kept], y[kept], ".", ms=2, color="C0", alpha=0.5, label="used")
        for k in which:
            f = fits[k]
            lab = (
                f.model
                + (f" (v_s = {f.v_s:.3g} rad/s)" if f.v_s else "")
                + (", zero slope" if f.zero_slope else "")
            )
            for side in (w < 0, w > 0):
                ax.plot(w[side], f.torque(w[side]), color=f"C{k + 1}", lw=2, label=lab if side[0] else None)
        ax.axhline(0, color="k", lw=0.5)
        ax.axvline(0, color="k", lw=0.5)
        ax.set_ylabel("friction f [N·m]")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)  # f has the sign of ω: the upper-left quadrant is empty
    axes[-1, 0].set_xlabel("joint velocity ω [rad/s]")
    axes[0, 0].set_title(title or "Friction (torque the drive must add): measured and fitted")
    fig.tight_layout()
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


def plot_accelerometer(
    r, cals, out: str | Path, g: float = GRAVITY, tumble: np.ndarray | None = None, title: str = ""
) -> Path:
    """‖a‖ − g per pose, raw (offset-free sphere assumption) and for each calibration: the grid poses, then the
    tumble poses (not fitted by the ellipsoid: a check of the calibration off its cap of directions)."""
    n = len(r)
    allr = r if tumble is None or not len(tumble) else np.vstack([r, tumble])
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(np.linalg.norm(allr, axis=1) - g, "o", ms=3, color="0.6", label="raw ‖r‖ − g")
    for k, c in enumerate(cals):
        ax.plot(np.linalg.norm(c.apply(allr), axis=1) - g, "o-", ms=3, color=f"C{k}", label=c.method)
    if len(allr) > n:
        ax.axvspan(n - 0.5, len(allr) - 0.5, color="0.9", label="tumble poses")
    ax.set_title(title or "Accelerometer: ‖a‖ − g per pose")
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
