"""Plan figure: per placement a top view (feet, support polygon, margin, CoPs) and side/front stick figures."""

from __future__ import annotations

import numpy as np

from design.geometry import foot_rects, placed_corners, support_polygon
from design.verify import base_kappa, posture_balance
from formats.atomic import save_figure
from formats.plan import Plan, check_compatible, plan_required_margin
from robots.kinematics import link_frames
from robots.tree import RobotModel

MM = 1000.0  # the figure draws millimetres, as the dynamic plots do


def _draw_poly(ax, poly, **kw):
    if poly.is_empty:
        return
    x, y = poly.exterior.xy
    ax.plot(np.asarray(x) * MM, np.asarray(y) * MM, **kw)


def plot_plan(model: RobotModel, plan: Plan, out: str) -> None:
    """Write the plan figure to `out` (format from the extension)."""
    save_figure(plan_figure(model, plan), out, dpi=DPI)


DPI = 90


def plan_figure(model: RobotModel, plan: Plan):
    """The plan figure: per placement a top view with each posture's CoP labelled by its index (labels kept apart)
    and side/front stick figures in the same colours, named in a legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from shapely.geometry import Polygon

    check_compatible(plan, model)
    margin = plan_required_margin(plan)
    n = len(plan.placements)
    fig, axes = plt.subplots(n, 3, figsize=(13, 3.2 * n), squeeze=False, dpi=DPI)
    rb, ro = foot_rects(model, plan.base)
    labels = []
    for row, pl in enumerate(plan.placements):
        ax_top, ax_side, ax_front = axes[row]
        poly = support_polygon(model, pl.other_foot, plan.base)
        # feet grey, the support polygon and its margin black: colours no posture uses
        _draw_poly(ax_top, Polygon(rb), color="0.6", lw=2, label="feet")
        _draw_poly(ax_top, Polygon(placed_corners(ro, pl.other_foot)), color="0.6", lw=2)
        _draw_poly(ax_top, poly, color="k", lw=1, label="support polygon")
        if margin > 0:
            _draw_poly(ax_top, poly.buffer(-margin), color="k", ls="--", lw=1,
                       label=f"required margin ({margin * MM:g} mm)")  # fmt: skip
        posts = [p for p in plan.postures if p.placement == pl.index]
        colors = _colors(len(posts))
        cops = []
        for p, color in zip(posts, colors, strict=True):
            cop = posture_balance(model, plan, p.q)[0]  # recomputed: the file's predicted_cop is unchecked
            cop = np.asarray(cop) * MM
            ax_top.plot(*cop, "o", ms=COP_MS, color=color)
            cops.append((tuple(cop), str(p.index), color))
            fr = link_frames(model, p.q, plan.params, plan.base)
            for k, chain in enumerate(_skeleton(model, fr.p, p.q, plan)):
                name = f"posture {p.index}" if k == 0 else None
                chain = chain * MM
                ax_side.plot(chain[:, 0], chain[:, 2], lw=1, color=color, label=name)
                ax_front.plot(chain[:, 1], chain[:, 2], lw=1, color=color)
        labels.append((ax_top, cops))
        ax_top.set_aspect("equal")
        ax_top.set_title(f"placement {pl.index}: top view, CoP of each posture", fontsize=9)
        ax_top.set_xlabel("x [mm]", fontsize=8)
        ax_top.set_ylabel("y [mm]", fontsize=8)
        ax_top.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)
        ax_side.set_title("side view", fontsize=9)
        ax_front.set_title("front view", fontsize=9)
        for ax, h in ((ax_side, "x [mm]"), (ax_front, "y [mm]")):
            ax.set_aspect("equal")
            ax.axhline(0, color="k", lw=0.5)
            ax.set_xlabel(h, fontsize=8)
            ax.set_ylabel("z [mm]", fontsize=8)
        if posts:
            ax_front.legend(*ax_side.get_legend_handles_labels(), fontsize=7, loc="center left",
                            bbox_to_anchor=(1.02, 0.5), frameon=False, title="stick figures", title_fontsize=7)  # fmt: skip
    k = base_kappa(model, plan.q, plan.base)[0]  # recomputed, as `plan check` reports it
    shown = "not identifiable" if k is None else f"{k:.1f}"
    fig.suptitle(f"{plan.robot}: {len(plan.postures)} postures, κ {shown}", fontsize=11)
    fig.tight_layout()
    for ax, cops in labels:  # after the layout: labels are placed in screen space, where overlaps show
        _label_apart(ax, cops)
    return fig


def _colors(n: int) -> list:
    """n distinct colours (the tab10 cycle up to 10, tab20 beyond), so no two postures of a placement share one."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(k % cmap.N) for k in range(n)]


LABEL_PT = 7  # font size of the CoP labels (points)
COP_MS = 4  # size of the CoP dots (points)


def _label_apart(ax, cops: list[tuple[tuple[float, float], str, object]]) -> None:
    """Label each CoP with its posture index next to it, at the nearest of rings of offsets whose box overlaps no
    label placed before it and no CoP's dot (in display space, so the check holds in the written figure); rings
    widen until one fits, so many equal CoPs fan out around it (in the stick figure's colour)."""
    fig = ax.figure
    px = fig.dpi / 72
    pts = ax.transData.transform([c for c, _, _ in cops]) if cops else []
    r = (COP_MS / 2 + 1) * px  # a dot's half-size and a point of clearance
    dots = [(x - r, y - r, x + r, y + r) for x, y in pts]
    boxes: list[tuple[float, float, float, float]] = []
    for (xy, text, color), (x, y) in zip(cops, pts, strict=True):
        w, h = (0.62 * LABEL_PT * len(text) + 2) * px, (LABEL_PT + 2) * px
        box = _free_box(x, y, w, h, px, boxes + dots)
        boxes.append(box)
        off = (((box[0] + box[2]) / 2 - x) / px, ((box[1] + box[3]) / 2 - y) / px)
        ax.annotate(text, xy, xytext=off, textcoords="offset points", fontsize=LABEL_PT, color=color,
                    ha="center", va="center")  # fmt: skip


def _free_box(x: float, y: float, w: float, h: float, px: float, boxes: list) -> tuple:
    """The box (display units) nearest (x, y) on rings 6 pt apart, each with offsets about a label height apart,
    that overlaps none of `boxes`."""
    # 400 rings reach 2400 pt: beyond any figure, so the fallback is never met in practice
    for k in range(400):
        r = 7 + 6 * k
        n = max(8, int(2 * np.pi * r * px / h))
        for a in 2 * np.pi * (np.arange(n) + 0.5 * (k % 2)) / n:
            cx, cy = x + r * px * np.cos(a), y + r * px * np.sin(a)
            cand = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
            if not any(_overlap(cand, b) for b in boxes):
                return cand
    return (x - w / 2, y - h / 2, x + w / 2, y + h / 2)


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


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
