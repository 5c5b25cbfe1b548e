"""Plan figure: per placement a top view (feet, support polygon, margin, CoPs) and side/front stick figures."""

from __future__ import annotations

import numpy as np

from design.geometry import foot_rects, placed_corners, support_polygon
from design.verify import base_kappa, margin_rules, posture_balance
from formats.atomic import save_figure
from formats.plan import Plan, check_compatible
from robots.kinematics import link_frames
from robots.tree import RobotModel


def _draw_poly(ax, poly, **kw):
    if poly.is_empty:
        return
    x, y = poly.exterior.xy
    ax.plot(x, y, **kw)


def plot_plan(model: RobotModel, plan: Plan, out: str) -> None:
    """Write the plan figure to `out` (format from the extension)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from shapely.geometry import Polygon

    check_compatible(plan, model)
    margin = margin_rules(plan)[0]
    n = len(plan.placements)
    fig, axes = plt.subplots(n, 3, figsize=(12, 3.2 * n), squeeze=False)
    rb, ro = foot_rects(model, plan.base)
    for row, pl in enumerate(plan.placements):
        ax_top, ax_side, ax_front = axes[row]
        poly = support_polygon(model, pl.other_foot, plan.base)
        _draw_poly(ax_top, Polygon(rb), color="k")
        _draw_poly(ax_top, Polygon(placed_corners(ro, pl.other_foot)), color="k")
        _draw_poly(ax_top, poly, color="tab:blue", lw=1)
        if margin > 0:
            _draw_poly(ax_top, poly.buffer(-margin), color="tab:blue", ls="--", lw=1)
        posts = [p for p in plan.postures if p.placement == pl.index]
        for k, p in enumerate(posts):
            color = f"C{k % 10}"
            cop = posture_balance(model, plan, p.q)[0]  # recomputed: the file's predicted_cop is unchecked
            ax_top.plot(*cop, "o", ms=4, color=color)
            ax_top.annotate(str(p.index), tuple(cop), fontsize=7)
            fr = link_frames(model, p.q, plan.params, plan.base)
            pts = _skeleton(model, fr.p, p.q, plan)
            for chain in pts:
                ax_side.plot(chain[:, 0], chain[:, 2], lw=1, color=color)
                ax_front.plot(chain[:, 1], chain[:, 2], lw=1, color=color)
        ax_top.set_aspect("equal")
        ax_top.set_title(f"placement {pl.index}: top view (m)", fontsize=9)
        ax_side.set_title("side (x–z, m)", fontsize=9)
        ax_front.set_title("front (y–z, m)", fontsize=9)
        for ax in (ax_side, ax_front):
            ax.set_aspect("equal")
            ax.axhline(0, color="k", lw=0.5)
    k = base_kappa(model, plan.q, plan.base)[0]  # recomputed, as `plan check` reports it
    shown = "not identifiable" if k is None else f"{k:.1f}"
    fig.suptitle(f"{plan.robot}: {len(plan.postures)} postures, κ {shown}", fontsize=11)
    fig.tight_layout()
    save_figure(fig, out, dpi=90)


def _skeleton(model: RobotModel, p: np.ndarray, q: np.ndarray, plan: Plan) -> list[np.ndarray]:
    """One polyline per leg: the link origins on the tree's chain from the root to each sole, then the sole."""
    from robots.kinematics import site_pose

    names = [lk.name for lk in model.links]
    root = names.index(model.root)
    out = []
    for sole in dict.fromkeys(model.bases.values()):
        chain = [names.index(model.joints[j].child) for j in model.joint_path(model.site(sole).link)]
        tip = site_pose(model, q, plan.params, sole, plan.base)[1]
        out.append(np.vstack([p[root], p[chain], tip]))
    return out
