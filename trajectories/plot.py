"""Figure of a trajectory (`trajectory_figure`; `formats.atomic.save_figure` writes it): positions, velocities,
accelerations and torques per joint, normalised by their limits; a standing robot's torques (on both soles: of the
split of the load that needs least), ZMP path in its support polygon and, on both soles, the other sole's share of
the load; on one, the lifted sole's height."""

from __future__ import annotations

import numpy as np

from robots import dynamics as dyn
from robots.tree import RobotModel
from trajectories.parametrisation import Trajectory
from trajectories.verify import DEFAULT_ACCELERATION, acceleration_limits, sample_grid

FIGURE_SAMPLES = 20_000  # samples drawn at most per curve


def trajectory_figure(
    model: RobotModel,
    traj: Trajectory,
    base: str,
    params: str,
    zmp_margin: float = 0.0,
    acceleration_default: float = DEFAULT_ACCELERATION,
    load_share: float = 0.0,
):
    """Stacked panels over time, each joint's curve over its limit (dashed lines at ±1; the legend gives the limits
    in their units); an arm's position, velocity, acceleration (the description's limit, else
    `acceleration_default`) and torque (velocity and torque in their units where a limit is the URDF's placeholder,
    `_limit_panel`). A standing robot's ZMP panel draws the line `zmp_margin` (m) inside the
    support polygon that the ZMP must keep to; on both soles, the other sole's lever-rule share of the load with
    the bounds `load_share` and 1 − `load_share` each sole must carry."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from robots.one_sole import sole_polygon
    from trajectories.balance_excitation import support_halfplanes
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.single_support import SingleSupportTrajectory

    # 10 ms, or coarser where a long plan would draw more points than the figure has pixels (its checks are `plan
    # check`'s, on the fine grid: the figure warns with them)
    t = sample_grid(traj, max(0.01, traj.duration / FIGURE_SAMPLES))
    q, qd, qdd = traj.sample(t)
    if isinstance(traj, ClosedChainTrajectory):
        from robots.stance import foot_corners

        feet = list(foot_corners(model, traj.chain.nominal, params, traj.chain.base).values())
        hull = support_halfplanes(model, traj.chain)[2]
        return _plot_standing(
            model, traj, traj.chain.base, hull, feet, "double", params, t, q, qd, qdd, zmp_margin, load_share
        )
    if isinstance(traj, SingleSupportTrajectory):
        poly = sole_polygon(model, traj.base)
        return _plot_standing(model, traj, traj.base, poly, [], "single", params, t, q, qd, qdd, zmp_margin)
    tau = dyn.rnea(model, q, qd, qdd, params, base)
    mid, half = _range_scale(model)
    amax = acceleration_limits(model, acceleration_default)
    panels = [
        ("position (0 = mid-range, ±1 = limits)", (q - mid) / half, True),
        _limit_panel(model, "velocity", qd, "velocity / limit"),
        ("acceleration / limit", qdd / amax, True),
        _limit_panel(model, "effort", tau, "torque / effort limit"),
    ]
    fig, axes = plt.subplots(4, 1, figsize=(12, 10), sharex=True)
    for ax, (label, y, limited) in zip(axes, panels, strict=True):
        for j in range(model.nq):
            ax.plot(t, y[:, j], lw=0.8, label=_limits_label(model, j, amax), **joint_style(j))
        if limited:  # ±1: the limits
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


def _limit_panel(model: RobotModel, kind: str, y: np.ndarray, label: str) -> tuple[str, np.ndarray, bool]:
    """(label, curves, limited) of a velocity or torque panel: each joint's curve over its limit, or — where
    any joint's limit is the URDF's placeholder (`robots.description.placeholder_limits`: a ratio to it draws a
    flat line at 0) — the curves in their units, no limit lines, the label saying why."""
    from robots.description import placeholder_limits

    found = placeholder_limits(model).get(kind)
    if not found:
        return label, y / (model.velocity_limit if kind == "velocity" else model.effort_limit), True
    unit = _unit(model, kind)
    where = "" if set(found) >= set(model.joint_names) else f" on {len(found)} joints"
    what = "velocity" if kind == "velocity" else "torque"
    # e.g. a standing robot's "(least-demanding split)"
    qualifier = "".join(f"\n{x}" for x in label.split("\n")[1:])
    return f"{what} [{unit}]{qualifier}\n(limit is a placeholder{where}:\nnot drawn)", y, False


def _unit(model: RobotModel, kind: str) -> str:
    """The unit of the joints' velocities or efforts: rad/s and N·m, m/s and N for prismatic joints."""
    prismatic = [model.joints[model.coordinates[j]].type == "prismatic" for j in range(model.nq)]
    units = {"velocity": ("rad/s", "m/s"), "effort": ("N·m", "N")}[kind]
    found = sorted({units[p] for p in prismatic}, key=units.index)
    return " or ".join(found)


def _limits_label(model: RobotModel, j: int, amax: np.ndarray | None = None) -> str:
    """A joint's legend entry with the limits its curves are divided by, in their units."""
    prismatic = model.joints[model.coordinates[j]].type == "prismatic"
    u, f = ("m", "N") if prismatic else ("rad", "N·m")
    lo, hi = model.lower[j], model.upper[j]
    pos = f"{lo:.3g}…{hi:.3g} {u}" if np.isfinite(lo) and np.isfinite(hi) else "unlimited"
    from robots.description import placeholder_limits

    found, name = placeholder_limits(model), model.joint_names[j]
    tag = {kind: " (placeholder)" if name in found.get(kind, {}) else "" for kind in ("velocity", "effort")}
    parts = [pos, f"{model.velocity_limit[j]:.3g} {u}/s{tag['velocity']}"]
    if amax is not None:
        parts.append(f"{amax[j]:.3g} {u}/s²")
    return f"{name}: " + ", ".join(parts + [f"{model.effort_limit[j]:.3g} {f}{tag['effort']}"])


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


def _standing_torques(model, traj, base, params, q, qd, qdd) -> tuple[np.ndarray, str]:
    """Joint torques of a standing motion and the panel's label: on both soles those of the split of the load
    between them that needs least (`verify.double_support_split`, as `plan check` checks them), on one the inverse
    dynamics with the stance sole fixed."""
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.verify import double_support_split

    if isinstance(traj, ClosedChainTrajectory):
        split = double_support_split(model, traj.chain, q, qd, qdd, params, model.effort_limit)
        return split.tau, "torque / effort limit\n(least-demanding split)"
    return dyn.rnea(model, q, qd, qdd, params, base), "torque / effort limit"


def _plot_standing(model, traj, base, hull, feet, support, params, t, q, qd, qdd, margin=0.0, load_share=0.0):
    """Joint positions, velocities and torques against their limits, the ZMP path inside the support polygon (and
    its margin line) and, on both soles, the other sole's share of the load against its bounds."""
    import matplotlib.pyplot as plt

    from robots.dynamics import zmp_of

    w = dyn.base_wrench_regressor(model, q, qd, qdd, base, params) @ dyn.standard_parameters(model, params)
    zmp = zmp_of(w)
    tau, tau_label = _standing_torques(model, traj, base, params, q, qd, qdd)
    mid, half = _range_scale(model)
    double = support == "double"
    fig = plt.figure(figsize=(13, 9))
    grid = fig.add_gridspec(3, 2)
    ax1 = fig.add_subplot(grid[0, 0])
    ax2 = fig.add_subplot(grid[1, 0], sharex=ax1)
    ax4 = fig.add_subplot(grid[2, 0], sharex=ax1)
    ax3 = fig.add_subplot(grid[:2, 1])
    v_label, v, v_limited = _limit_panel(model, "velocity", qd, "velocity / limit")
    tau_label, tau, tau_limited = _limit_panel(model, "effort", tau, tau_label)
    for j in range(model.nq):
        ax1.plot(t, (q[:, j] - mid[j]) / half[j], lw=0.8, label=_limits_label(model, j), **joint_style(j))
        ax2.plot(t, v[:, j], lw=0.8, **joint_style(j))
        ax4.plot(t, tau[:, j], lw=0.8, **joint_style(j))
    for ax, label, limited in ((ax1, "position (±1 = limits)", True), (ax2, v_label, v_limited),
                               (ax4, tau_label, tau_limited)):  # fmt: skip
        if limited:  # ±1: the limits
            for sgn in (-1, 1):
                ax.axhline(sgn, color="k", ls="--", lw=0.7)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    ax1.legend(ncol=2, fontsize=6, loc="lower left", bbox_to_anchor=(0.0, 1.02), title="joint: limits",
               title_fontsize=6)  # fmt: skip
    ax4.set_xlabel("time [s]")
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
    ax3.set_xlabel(f"x [mm] (frame of the base sole: {base}, {model.base_site(base).name})")
    ax3.set_ylabel("y [mm]")
    # beside the panel, never over the polygon or the ZMP path it is about
    ax3.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax3.grid(alpha=0.3)
    if double:
        _plot_share(fig.add_subplot(grid[2, 1]), model, traj.chain, t, zmp, load_share)
    else:
        _plot_lifted(fig.add_subplot(grid[2, 1], sharex=ax1), model, traj, params, t, q, qd, qdd)
    # over the ZMP panel: above the joints' panels sits their legend
    ax3.set_title(f"{model.name}: {support}-support excitation ({traj.duration:.3g} s)")
    fig.tight_layout()
    return fig


def _plot_share(ax, model, chain, t, zmp, load_share: float) -> None:
    """The other sole's lever-rule share of the load over time (`balance_excitation.other_share`, as the
    design and `plan check` bound it), with the bounds each sole must carry."""
    from trajectories.balance_excitation import other_share

    share = other_share(model, chain, zmp)  # beyond [0, 1]: a sole off the ground
    ax.plot(t, share, lw=0.9, color="C3", label=f"{chain.other}'s share")
    if load_share > 0:
        for bound in (load_share, 1.0 - load_share):
            ax.axhline(bound, color="k", ls="--", lw=0.7)
    ax.set_ylim(min(0.0, share.min()) - 0.02, max(1.0, share.max()) + 0.02)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("share of the load")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)


def _plot_lifted(ax, model, traj, params, t, q, qd, qdd) -> None:
    """On one sole: the lifted sole's lowest and highest corner above the ground over time (`robots.one_sole`, as
    `plan check` bounds them), with the plan's lift and ceiling."""
    from robots.one_sole import one_sole

    s = one_sole(model, q, qd, qdd, traj.base, traj.other, params)
    ax.plot(t, 1000 * s.lowest, lw=0.9, color="C0", label=f"{traj.other}: lowest corner")
    ax.plot(t, 1000 * s.highest, lw=0.9, color="C1", label="highest corner")
    for bound in (traj.lift, traj.max_lift):
        if bound is not None:
            ax.axhline(1000 * bound, color="k", ls="--", lw=0.7)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("above the ground [mm]")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)
