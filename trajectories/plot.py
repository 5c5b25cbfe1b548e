"""Figure of a trajectory (`trajectory_figure`; `formats.atomic.save_figure` writes it): positions, velocities,
accelerations and torques per joint, normalised by their limits; a standing robot's ZMP path in its support
polygon."""

from __future__ import annotations

import numpy as np

from robots import dynamics as dyn
from robots.tree import RobotModel
from trajectories.parametrisation import Trajectory
from trajectories.verify import DEFAULT_ACCELERATION, acceleration_limits, sample_grid


def trajectory_figure(
    model: RobotModel,
    traj: Trajectory,
    base: str,
    params: str,
    zmp_margin: float = 0.0,
    acceleration_default: float = DEFAULT_ACCELERATION,
):
    """Stacked panels over time, each joint's curve over its limit (dashed lines at ±1; the legend gives the limits
    in their units); an arm's position, velocity, acceleration (the description's limit, else
    `acceleration_default`) and torque. A standing robot's ZMP panel draws the line `zmp_margin` (m) inside the
    support polygon that the ZMP must keep to."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from robots.one_sole import sole_polygon
    from trajectories.balance_excitation import support_halfplanes
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.single_support import SingleSupportTrajectory

    t = sample_grid(traj, 0.01)
    q, qd, qdd = traj.sample(t)
    if isinstance(traj, ClosedChainTrajectory):
        from robots.stance import foot_corners

        feet = list(foot_corners(model, traj.chain.nominal, params, traj.chain.base).values())
        hull = support_halfplanes(model, traj.chain)[2]
        return _plot_standing(
            model, traj, traj.chain.base, hull, feet, "double", params, t, q, qd, qdd, zmp_margin
        )
    if isinstance(traj, SingleSupportTrajectory):
        poly = sole_polygon(model, traj.base)
        return _plot_standing(model, traj, traj.base, poly, [], "single", params, t, q, qd, qdd, zmp_margin)
    tau = dyn.rnea(model, q, qd, qdd, params, base)
    mid, half = _range_scale(model)
    amax = acceleration_limits(model, acceleration_default)
    panels = [
        ("position (0 = mid-range, ±1 = limits)", (q - mid) / half),
        ("velocity / limit", qd / model.velocity_limit),
        ("acceleration / limit", qdd / amax),
        ("torque / effort limit", tau / model.effort_limit),
    ]
    fig, axes = plt.subplots(4, 1, figsize=(12, 10), sharex=True)
    for ax, (label, y) in zip(axes, panels, strict=True):
        for j in range(model.nq):
            ax.plot(t, y[:, j], lw=0.8, label=_limits_label(model, j, amax), **joint_style(j))
        for s in (-1, 1):
            ax.axhline(s, color="k", ls="--", lw=0.7)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    # beside the panels, not over the curves that cross a limit
    axes[0].legend(
        fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="joint: limits", title_fontsize=7
    )
    axes[-1].set_xlabel("time [s]")
    fig.suptitle(f"{model.name}: excitation trajectory ({traj.duration:.3g} s)")
    fig.tight_layout()
    return fig


def _limits_label(model: RobotModel, j: int, amax: np.ndarray | None = None) -> str:
    """A joint's legend entry with the limits its curves are divided by, in their units."""
    prismatic = model.joints[model.coordinates[j]].type == "prismatic"
    u, f = ("m", "N") if prismatic else ("rad", "N·m")
    lo, hi = model.lower[j], model.upper[j]
    pos = f"{lo:.3g}…{hi:.3g} {u}" if np.isfinite(lo) and np.isfinite(hi) else "unlimited"
    parts = [pos, f"{model.velocity_limit[j]:.3g} {u}/s"]
    if amax is not None:
        parts.append(f"{amax[j]:.3g} {u}/s²")
    return f"{model.joint_names[j]}: " + ", ".join(parts + [f"{model.effort_limit[j]:.3g} {f}"])


def joint_style(j: int) -> dict:
    """Joint j's line: the ten colours of matplotlib's cycle, then again dotted and dash-dotted (dashed lines are
    the limits), so a robot with more than ten joints has no two curves alike."""
    return {"color": f"C{j % 10}", "linestyle": ("-", ":", "-.")[(j // 10) % 3]}


def _range_scale(model) -> tuple[np.ndarray, np.ndarray]:
    """Mid-range and half-range per joint, so (q − mid) / half is ±1 at the limits; an unlimited joint gets 0
    and π (its curve drawn in radians / π, not NaN)."""
    mid = np.where(np.isfinite(model.lower + model.upper), (model.lower + model.upper) / 2, 0.0)
    half = np.where(np.isfinite(model.upper - model.lower), (model.upper - model.lower) / 2, np.pi)
    return mid, half


def _plot_standing(model, traj, base, hull, feet, support, params, t, q, qd, qdd, margin=0.0):
    """Joint positions and velocities against their limits, and the ZMP path inside the support polygon (and its
    margin line)."""
    import matplotlib.pyplot as plt

    w = dyn.base_wrench_regressor(model, q, qd, qdd, base, params) @ dyn.standard_parameters(model, params)
    zmp = np.stack([-w[:, 4] / w[:, 2], w[:, 3] / w[:, 2]], axis=1)
    mid, half = _range_scale(model)
    fig = plt.figure(figsize=(13, 7))
    ax1 = fig.add_subplot(2, 2, 1)
    ax2 = fig.add_subplot(2, 2, 3, sharex=ax1)
    ax3 = fig.add_subplot(1, 2, 2)
    for j in range(model.nq):
        ax1.plot(t, (q[:, j] - mid[j]) / half[j], lw=0.8, label=_limits_label(model, j), **joint_style(j))
        ax2.plot(t, qd[:, j] / model.velocity_limit[j], lw=0.8, **joint_style(j))
    for ax, label in ((ax1, "position (±1 = limits)"), (ax2, "velocity / limit")):
        for sgn in (-1, 1):
            ax.axhline(sgn, color="k", ls="--", lw=0.7)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    ax1.legend(ncol=2, fontsize=6, loc="lower left", bbox_to_anchor=(0.0, 1.02), title="joint: limits",
               title_fontsize=6)  # fmt: skip
    ax2.set_xlabel("time [s]")
    hx, hy = hull.exterior.xy
    ax3.fill(np.asarray(hx) * 1000, np.asarray(hy) * 1000, color="0.9", label="support polygon")
    for c in feet:
        c = np.vstack([c, c[:1]]) * 1000
        ax3.plot(c[:, 0], c[:, 1], "k-", lw=1)
    inner = hull.buffer(-margin) if margin > 0 else None
    if inner is not None and not inner.is_empty and inner.geom_type == "Polygon":
        mx, my = inner.exterior.xy
        ax3.plot(np.asarray(mx) * 1000, np.asarray(my) * 1000, "--", color="0.4", lw=0.8,
                 label=f"ZMP margin ({margin * 1000:.0f} mm)")  # fmt: skip
    ax3.plot(zmp[:, 0] * 1000, zmp[:, 1] * 1000, lw=0.8, color="C3", label="ZMP (guessed parameters)")
    ax3.plot(zmp[0, 0] * 1000, zmp[0, 1] * 1000, "o", color="C3", ms=5, label="ZMP at the start")
    ax3.set_aspect("equal")
    ax3.set_xlabel("x [mm] (base sole frame)")
    ax3.set_ylabel("y [mm]")
    ax3.legend(fontsize=7)
    ax3.grid(alpha=0.3)
    fig.suptitle(f"{model.name}: {support}-support excitation ({traj.duration:.3g} s)")
    fig.tight_layout()
    return fig
