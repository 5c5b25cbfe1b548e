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
    name: str = "",
    design: dict | None = None,
    settings: dict | None = None,
    zmp_min: float | None = None,
):
    """Stacked panels over time, each joint's curve over its limit (dashed lines at ±1; the legend gives the limits
    in their units); an arm's position, velocity, acceleration (the description's limit, else the plan's
    `acceleration_default`) and torque (velocity and torque in their units where a limit is the URDF's placeholder,
    `_limit_panel`). A standing robot's ZMP panel draws the line the plan's `zmp_margin` (m) inside the
    support polygon that the ZMP must keep to; on both soles, the other sole's lever-rule share of the load with
    the bounds `load_share` and 1 − `load_share` each sole must carry. `name` (the plan file), `design` (its
    design record: κ, status) and `zmp_min` (`plan check`'s least ZMP margin, m) head the figure. `settings`: the
    plan's settings, read as `plan check` reads them (`trajectories.plan.check_plan`: the ZMP margin of a standing
    motion, the load share, the default acceleration limit); the design's own caps among them (velocity and torque
    fractions, position margin) are drawn as lighter dashed lines. None: no margin, no bounds, no caps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from robots.one_sole import sole_polygon
    from trajectories.balance_excitation import support_halfplanes
    from trajectories.closed_chain import ClosedChainTrajectory
    from trajectories.plan import STANDING
    from trajectories.single_support import SingleSupportTrajectory

    settings = settings or {}
    zmp_margin = float(settings.get("zmp_margin", 0.0)) if settings.get("motion") in STANDING else 0.0
    load_share = float(settings.get("load_share", 0.0))
    acceleration_default = float(settings.get("acceleration_default", DEFAULT_ACCELERATION))
    # 10 ms, or coarser where a long plan would draw more points than the figure has pixels (its checks are `plan
    # check`'s, on the fine grid: the figure warns with them)
    t = sample_grid(traj, max(0.01, traj.duration / FIGURE_SAMPLES))
    q, qd, qdd = traj.sample(t)
    if isinstance(traj, ClosedChainTrajectory):
        from robots.stance import foot_corners

        feet = foot_corners(model, traj.chain.nominal, params, traj.chain.base)
        hull = support_halfplanes(model, traj.chain)[2]
        fig = _plot_standing(model, traj, traj.chain.base, hull, feet, "double", params, t, q, qd, qdd, zmp_margin,
                             load_share, settings)  # fmt: skip
        return _headed(fig, model, traj, "double-support excitation", name, design, zmp_min)
    if isinstance(traj, SingleSupportTrajectory):
        poly = sole_polygon(model, traj.base)
        fig = _plot_standing(
            model, traj, traj.base, poly, {}, "single", params, t, q, qd, qdd, zmp_margin, 0.0, settings
        )
        return _headed(fig, model, traj, "single-support excitation", name, design, zmp_min)
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
    kinds = ("position", "velocity", "acceleration", "effort")
    for ax, (label, y, limited), kind in zip(axes, panels, kinds, strict=True):
        for j in range(model.nq):
            ax.plot(t, y[:, j], lw=0.8, label=_limits_label(model, j, amax), **joint_style(j, model.nq))
        if limited:  # ±1: the limits
            _limit_lines(ax)
            _cap_lines(ax, model, kind, settings)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    for ax in axes:
        ax.tick_params(labelbottom=True)
    axes[-1].set_xlabel("time [s]")
    # under the panels, across the figure's width: beside them it left a wide empty column
    handles, labels = _legend_entries(axes)
    ncol = min(3, len(handles))
    fig.legend(
        handles,
        labels,
        fontsize=7,
        loc="lower center",
        ncol=ncol,
        title=_legend_title(model, acceleration_default),
        title_fontsize=7,
    )
    rows = -(-len(handles) // ncol) + 1
    return _headed(
        fig, model, traj, "excitation trajectory", name, design, None, bottom=min(0.4, 0.018 * rows + 0.01)
    )


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
    prismatic = [_prismatic(model, j) for j in range(model.nq)]
    units = {"velocity": ("rad/s", "m/s"), "effort": ("N·m", "N")}[kind]
    found = sorted({units[p] for p in prismatic}, key=units.index)
    return " or ".join(found)


def _position_unit(model: RobotModel) -> str:
    """The unit of the limited joints' positions (the position margin's): rad, m, or rad with the prismatic joints
    named in m."""
    limited = _limited(model)
    prismatic = [model.joint_names[j] for j in range(model.nq) if limited[j] and _prismatic(model, j)]
    if not prismatic:
        return "rad"
    if len(prismatic) == int(np.count_nonzero(limited)):
        return "m"
    return f"rad (m on {', '.join(prismatic)})"


def _legend_title(model: RobotModel, default: float) -> str:
    """The arm legend's title: which joints' acceleration limit is the plan's default, the description giving
    none (their entries show it beside the description's own limits)."""
    lacking = [j for j in range(model.nq) if not np.isfinite(model.acceleration_limit[j])]
    if not lacking:
        return "joint: limits"
    prismatic = {_prismatic(model, j) for j in lacking}
    unit = " or ".join(u for u, p in (("rad/s²", False), ("m/s²", True)) if p in prismatic)
    where = "" if len(lacking) == model.nq else f" on {', '.join(model.joint_names[j] for j in lacking)}"
    return f"joint: limits (acceleration{where}: the plan's default {default:g} {unit}, the description gives none)"


def _limits_label(model: RobotModel, j: int, amax: np.ndarray | None = None) -> str:
    """A joint's legend entry with the limits its curves are divided by, in their units."""
    prismatic = _prismatic(model, j)
    u, f = ("m", "N") if prismatic else ("rad", "N·m")
    lo, hi = model.lower[j], model.upper[j]
    pos = f"{lo:.3g}…{hi:.3g} {u}" if np.isfinite(lo) and np.isfinite(hi) else "unlimited (drawn in rad / π)"
    from robots.description import placeholder_limits

    found, name = placeholder_limits(model), model.joint_names[j]
    tag = {kind: " (placeholder)" if name in found.get(kind, {}) else "" for kind in ("velocity", "effort")}
    parts = [pos, f"{model.velocity_limit[j]:.3g} {u}/s{tag['velocity']}"]
    if amax is not None:
        parts.append(f"{amax[j]:.3g} {u}/s²")
    return f"{name}: " + ", ".join(parts + [f"{model.effort_limit[j]:.3g} {f}{tag['effort']}"])


def joint_style(j: int, n: int = 10) -> dict:
    """Joint j's line among n: the ten colours of matplotlib's cycle, tab20's twenty for more joints, then again
    dotted and dash-dotted (dashed lines are the limits), so no two curves are alike."""
    if n <= 10:
        return {"color": f"C{j % 10}", "linestyle": "-"}
    import matplotlib

    return {"color": matplotlib.colormaps["tab20"](j % 20), "linestyle": ("-", ":", "-.")[(j // 20) % 3]}


HARDWARE = "hardware limit (±1)"


def _limit_lines(ax) -> None:
    """The ±1 lines of a panel normalised by its limits (labelled once, in the legend)."""
    for s in (-1, 1):
        ax.axhline(s, color="k", ls="--", lw=0.7, label=HARDWARE)


def _cap_lines(ax, model: RobotModel, kind: str, settings: dict | None) -> None:
    """The design's own caps on a normalised panel, lighter dashed lines: the velocity and torque fractions of the
    limits, the position margin (rad kept from each limit, so its line per joint range; the distinct ones drawn),
    the acceleration fraction, as the plan's `settings` record them; nothing when they record none."""
    if not settings:
        return
    if kind == "position":
        m = settings.get("position_margin")
        if not m:
            return
        half = _range_scale(model)[1][_limited(model)]  # an unlimited joint has no limit to keep away from
        levels = sorted({round(1 - float(m) / h, 3) for h in half if h > m})
        if not levels:
            return
        label = f"design cap: {float(m):g} {_position_unit(model)} from the limits"
        if len(levels) > 1:  # per joint range: the narrowest's and the widest's, the others between
            levels, label = [levels[0], levels[-1]], label + " (narrowest, widest range)"
    else:
        key = {
            "velocity": "velocity_fraction",
            "effort": "torque_fraction",
            "acceleration": "acceleration_fraction",
        }
        f = settings.get(key[kind])
        if not f or float(f) >= 1:
            return
        what = {"velocity": "velocity", "effort": "torque", "acceleration": "acceleration"}[kind]
        levels, label = [float(f)], f"design cap: {float(f):g} × the {what} limit"
    for v in levels:
        for s in (-1, 1):
            ax.axhline(s * v, color="0.55", ls=(0, (4, 3)), lw=0.7, alpha=0.8, label=label)


def _legend_entries(axes) -> tuple[list, list]:
    """The joints' entries (the first panel's) and each limit or cap line's once, from all panels."""
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    return handles, labels


def plan_heading(model: RobotModel, what: str, duration: float, name: str = "", design: dict | None = None,
                 zmp_min: float | None = None) -> str:  # fmt: skip
    """The figure's title: the plan file, the robot and motion, then the figures a user looks for first: κ raw and
    column-scaled as the design recorded them, the least ZMP margin (mm), the design's stop status."""
    import os

    head = f"{os.path.basename(name)}: " if name else ""
    first = f"{head}{model.name}, {what} ({duration:.3g} s)"
    facts = []
    design = design or {}
    if design.get("kappa") is not None:
        facts.append(f"κ {float(design['kappa']):.4g}")
    if design.get("kappa_scaled") is not None:
        facts.append(f"κ column-scaled {float(design['kappa_scaled']):.4g}")
    if zmp_min is not None:
        facts.append(f"min ZMP margin {zmp_min * 1000:.1f} mm")
    status = design.get("status")
    if status:
        stop = {"Maximum_Iterations_Exceeded": "stopped at its iteration cap",
                "Solve_Succeeded": "converged"}.get(str(status), str(status).replace("_", " "))  # fmt: skip
        its = f" ({design['iterations']} iterations)" if design.get("iterations") is not None else ""
        facts.append(f"design: {stop}{its}")
    return first + ("\n" + "; ".join(facts) if facts else "")


def _headed(fig, model, traj, what, name, design, zmp_min, bottom: float = 0.0):
    """The figure with `plan_heading` as its suptitle (above every panel, apart from any one's title), laid out."""
    title = plan_heading(model, what, traj.duration, name, design, zmp_min)
    fig.suptitle(title, fontsize=11, y=0.995, va="top")
    fig.tight_layout(rect=(0, bottom, 1, 1))  # tight_layout keeps the suptitle clear
    return fig


def _range_scale(model) -> tuple[np.ndarray, np.ndarray]:
    """Mid-range and half-range per joint, so (q − mid) / half is ±1 at the limits; an unlimited joint gets 0
    and π (its curve drawn in radians / π, not NaN)."""
    limited = _limited(model)
    mid, half = np.zeros(model.nq), np.full(model.nq, np.pi)
    mid[limited] = (model.lower[limited] + model.upper[limited]) / 2  # nothing computed on infinite limits
    half[limited] = (model.upper[limited] - model.lower[limited]) / 2
    return mid, half


def _prismatic(model: RobotModel, j: int) -> bool:
    """Coordinate j's joint is prismatic (positions in m, velocities in m/s, efforts in N)."""
    return model.joints[model.coordinates[j]].type == "prismatic"


def _limited(model) -> np.ndarray:
    """Which joints have both position limits (a continuous joint has none)."""
    return np.isfinite(np.asarray(model.lower, dtype=float)) & np.isfinite(
        np.asarray(model.upper, dtype=float)
    )


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


def _plot_standing(model, traj, base, hull, feet, support, params, t, q, qd, qdd, margin=0.0, load_share=0.0,
                   settings=None):  # fmt: skip
    """Joint positions, velocities and torques against their limits (and the design's caps), the ZMP path inside
    the support polygon (and its margin line, the feet named L/R) and, on both soles, the other sole's share of
    the load against its bounds."""
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
        style = joint_style(j, model.nq)
        ax1.plot(t, (q[:, j] - mid[j]) / half[j], lw=0.8, label=_limits_label(model, j), **style)
        ax2.plot(t, v[:, j], lw=0.8, **style)
        ax4.plot(t, tau[:, j], lw=0.8, **style)
    for ax, label, limited, kind in ((ax1, "position (±1 = limits)", True, "position"),
                                     (ax2, v_label, v_limited, "velocity"),
                                     (ax4, tau_label, tau_limited, "effort")):  # fmt: skip
        if limited:  # ±1: the limits
            _limit_lines(ax)
            _cap_lines(ax, model, kind, settings)
        ax.set_ylabel(label)
        ax.set_xlabel("time [s]")
        ax.grid(alpha=0.3)
    handles, labels = _legend_entries((ax1, ax2, ax4))
    ax1.legend(handles, labels, ncol=2, fontsize=6, loc="lower left", bbox_to_anchor=(0.0, 1.02),
               title="joint: limits", title_fontsize=6)  # fmt: skip
    hx, hy = hull.exterior.xy
    ax3.fill(np.asarray(hx) * 1000, np.asarray(hy) * 1000, color="0.9", label="support polygon")
    named = []  # each sole's name (L / R) at its middle
    for k, (site, c) in enumerate(feet.items()):
        c = np.asarray(c) * 1000
        ring = np.vstack([c, c[:1]])
        ax3.plot(ring[:, 0], ring[:, 1], "k-", lw=1, label="feet" if k == 0 else None)
        named.append((c.mean(axis=0), _side(model, site)))
    if not feet:  # on one sole: the polygon is the stance sole's
        named.append((np.asarray(hull.centroid.coords[0]) * 1000, _side(model, model.bases[base])))
    for xy, foot in named:
        ax3.text(*xy, foot, ha="center", va="center", fontsize=12, fontweight="bold", color="0.3")
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
    return fig


def _side(model, site: str) -> str:
    """A sole's short name: "L" / "R" for a base named left… / right… (or its site sole_l / sole_r), else the
    base's (the site's) name."""
    name = next((b for b, st in model.bases.items() if st == site), site).lower()
    if name.startswith("l") or name.endswith("_l"):
        return "L"
    if name.startswith("r") or name.endswith("_r"):
        return "R"
    return name


def _plot_share(ax, model, chain, t, zmp, load_share: float) -> None:
    """The other sole's lever-rule share of the load over time (`balance_excitation.other_share`, as the
    design and `plan check` bound it), with the bounds each sole must carry."""
    from trajectories.balance_excitation import other_share

    share = other_share(model, chain, zmp)  # beyond [0, 1]: a sole off the ground
    ax.plot(t, share, lw=0.9, color="C3", label=f"{chain.other}'s share")
    if load_share > 0:
        for k, bound in enumerate((load_share, 1.0 - load_share)):
            label = f"bounds: each sole carries ≥ {load_share:g}" if k == 0 else None
            ax.axhline(bound, color="k", ls="--", lw=0.7, label=label)
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
    for bound, what, ls in ((traj.lift, "lift", "--"), (traj.max_lift, "ceiling", ":")):
        if bound is not None:
            ax.axhline(1000 * bound, color="k", ls=ls, lw=0.7, label=f"{what} ({1000 * bound:g} mm)")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("above the ground [mm]")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)
