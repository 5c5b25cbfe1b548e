"""Figure of a trajectory: positions, velocities and torques per joint, normalised by their limits."""

from __future__ import annotations

import numpy as np

from formats.errors import DataError
from robots import dynamics as dyn
from robots.tree import RobotModel
from trajectories.parametrisation import Trajectory
from trajectories.verify import sample_grid


def plot_trajectory(model: RobotModel, traj: Trajectory, base: str, params: str, out: str) -> None:
    """Three stacked panels over time; dashed lines at ±1 (the limits)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = sample_grid(traj, 0.01)
    q, qd, qdd = traj.sample(t)
    tau = dyn.rnea(model, q, qd, qdd, params, base)
    mid = np.where(np.isfinite(model.lower + model.upper), (model.lower + model.upper) / 2, 0.0)
    half = np.where(np.isfinite(model.upper - model.lower), (model.upper - model.lower) / 2, np.pi)
    panels = [
        ("position (0 = mid-range, ±1 = limits)", (q - mid) / half),
        ("velocity / limit", qd / model.velocity_limit),
        ("torque / effort limit", tau / model.effort_limit),
    ]
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    for ax, (label, y) in zip(axes, panels, strict=True):
        for j, name in enumerate(model.joint_names):
            ax.plot(t, y[:, j], lw=0.8, label=name)
        for s in (-1, 1):
            ax.axhline(s, color="k", ls="--", lw=0.7)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(ncol=min(6, model.nq), fontsize=7, loc="upper right")
    axes[-1].set_xlabel("time [s]")
    fig.suptitle(f"{model.name}: excitation trajectory ({traj.duration:.0f} s)")
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=110)
    except (ValueError, OSError) as exc:
        raise DataError(f"cannot write figure {out}: {exc}") from None
    finally:
        plt.close(fig)
