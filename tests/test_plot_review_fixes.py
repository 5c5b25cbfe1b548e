"""Review of the planning figures, read back from their matplotlib objects: trajectory `plan show` heads its figure
with the plan file, κ, the least ZMP margin and the design's stop status, draws the design's own caps, labels its
time axes, feet and bounds and gives twelve joints twelve colours; the arm figure's legend leaves no empty column;
posture `plan show` keeps its labels off every CoP dot, draws the polygon in black with a legend, in mm, and warns
as `plan check` fails the plan."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import kept_figures

from drivers.emulators.testplan import random_plan
from formats.plan import save_plan
from poise.cli import main
from robots.stance import signed_margin

DATA = Path(__file__).parent / "data"


def _show(plan: Path, out: Path, monkeypatch, capsys):
    """`poise plan show PLAN --out OUT`: the figure it drew (kept from `plt.close`) and its stderr."""
    figures = kept_figures(monkeypatch)
    capsys.readouterr()
    assert main(["plan", "show", str(plan), "--out", str(out)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert len(figures) == 1
    return figures[0], err


def _renderer(fig):
    """The renderer of a figure `plan show` closed (its canvas reset): an Agg canvas again, drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _legend_texts(legend) -> list[str]:
    return [t.get_text() for t in legend.get_texts()]


def test_arm_figure_heading_caps_and_legend_under_the_panels(tmp_path, monkeypatch, capsys):
    doc = json.loads((DATA / "ur5_6s.json").read_text())
    fig, _ = _show(DATA / "ur5_6s.json", tmp_path / "arm.png", monkeypatch, capsys)
    title = fig._suptitle.get_text()
    design, settings = doc["design"], doc["settings"]
    assert "ur5_6s.json" in title and str(DATA) not in title  # the file's name, not its folder
    assert f"κ {design['kappa']:.4g}" in title and f"κ column-scaled {design['kappa_scaled']:.4g}" in title
    assert design["status"] == "Maximum_Iterations_Exceeded" and "iteration cap" in title
    assert fig._suptitle.get_position()[1] > max(ax.get_position().y1 for ax in fig.axes)  # above every panel
    pos, vel, acc, tau = fig.axes[:4]
    for ax, frac in ((vel, settings["velocity_fraction"]), (tau, settings["torque_fraction"]),
                     (acc, settings["acceleration_fraction"])):  # fmt: skip
        caps = [ln for ln in ax.lines if ln.get_label().startswith("design cap")]
        assert sorted(float(ln.get_ydata()[0]) for ln in caps) == pytest.approx([-frac, frac])
        assert len([ln for ln in ax.lines if ln.get_label() == "hardware limit (±1)"]) == 2
    half = (np.asarray(doc_limits := _limits(doc))[:, 1] - doc_limits[:, 0]) / 2
    pos_caps = sorted(
        {float(ln.get_ydata()[0]) for ln in pos.lines if ln.get_label().startswith("design cap")}
    )
    m = settings["position_margin"]  # rad: per joint range, the narrowest's line and the widest's
    assert [c for c in pos_caps if c > 0] == pytest.approx([1 - m / half.min(), 1 - m / half.max()], abs=1e-3)
    for ax in fig.axes[:4]:
        assert ax.get_xlabel() == "time [s]" or ax.xaxis.get_ticklabels()[0].get_visible()
    legend = fig.legends[0]
    texts = _legend_texts(legend)
    assert len(texts) == len(set(texts))  # each cap and limit line named once
    assert sum(t.startswith("design cap") for t in texts) == 4 and "hardware limit (±1)" in texts
    r = _renderer(fig)
    width = fig.bbox.width
    # the panels span the width: no empty column beside them for a legend
    assert all(ax.get_window_extent(r).x1 > 0.9 * width for ax in fig.axes[:4])
    assert legend.get_window_extent(r).x1 <= width and legend.get_window_extent(r).y1 < min(
        ax.get_tightbbox(r).y0 for ax in fig.axes[:4]
    )


def _limits(doc: dict) -> np.ndarray:
    from formats.trajectory_plan import load_trajectory_plan
    from trajectories.plan import plan_model

    model = plan_model(load_trajectory_plan(DATA / "ur5_6s.json"))
    assert model.joint_names == doc["joint_names"]
    return np.column_stack([model.lower, model.upper])


def test_standing_figure_heading_feet_bounds_and_colours(tmp_path, monkeypatch, capsys):
    doc = json.loads((DATA / "tulip_double_support_10s.json").read_text())
    fig, _ = _show(DATA / "tulip_double_support_10s.json", tmp_path / "ds.png", monkeypatch, capsys)
    title = fig._suptitle.get_text()
    assert "tulip_double_support_10s.json" in title and f"κ {doc['design']['kappa']:.4g}" in title
    assert "iteration cap" in title
    shown = float(re.search(r"min ZMP margin (-?[\d.]+) mm", title).group(1))
    ax1, ax2, ax4, zmp_ax, share_ax = fig.axes
    # plan check's least margin on its fine grid: at most the figure's 10 ms samples' own, and close to it
    zmp = next(ln for ln in zmp_ax.lines if ln.get_label().startswith("ZMP (")).get_xydata() / 1000
    from shapely.geometry import Polygon

    poly = Polygon(zmp_ax.patches[0].get_xy() / 1000)
    drawn = 1000 * signed_margin(poly, zmp).min()
    assert shown <= drawn + 0.05 and drawn - shown < 3.0
    assert all(ax.get_xlabel() == "time [s]" for ax in (ax1, ax2, ax4, share_ax))
    assert sorted(t.get_text() for t in zmp_ax.texts) == ["L", "R"]
    assert "feet" in _legend_texts(zmp_ax.get_legend())
    share = _legend_texts(share_ax.get_legend())
    assert any(t.startswith("bounds") and f"{doc['settings']['load_share']:g}" in t for t in share)
    colours = [tuple(np.round(ln.get_color(), 3)) for ln in ax1.lines[:12]]
    assert len(set(colours)) == 12  # twelve joints, twelve colours
    assert any(ln.get_label().startswith("design cap") for ln in ax2.lines)


def test_single_support_lift_and_ceiling_named(tmp_path, monkeypatch, capsys):
    doc = json.loads((DATA / "tulip_single_support_6s.json").read_text())
    fig, _ = _show(DATA / "tulip_single_support_6s.json", tmp_path / "ss.png", monkeypatch, capsys)
    lifted = fig.axes[-1]
    texts = _legend_texts(lifted.get_legend())
    tr = doc["trajectory"]
    assert (
        f"lift ({1000 * tr['lift_m']:g} mm)" in texts and f"ceiling ({1000 * tr['max_lift_m']:g} mm)" in texts
    )
    assert [t.get_text() for t in fig.axes[3].texts] == ["R"]  # the stance sole (base "right")
    assert "min ZMP margin" in fig._suptitle.get_text()


def test_posture_figure_labels_off_dots_polygon_legend_mm_and_warning(tulip, tmp_path, monkeypatch, capsys):
    from dataclasses import replace

    plan = random_plan(tulip, 3, seed=4)
    p0 = plan.postures[0]
    plan = replace(plan, postures=[*plan.postures, *[replace(p0, index=100 + k) for k in range(6)]])
    path = tmp_path / "post.json"
    save_plan(plan, path)
    assert main(["plan", "check", str(path), "--json"]) in (0, 1)
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert problems  # six equal postures: `plan check` fails it
    fig, err = _show(path, tmp_path / "post.png", monkeypatch, capsys)
    assert f"`plan check {path}` fails it ({len(problems)} problem(s)" in err and "drawn as it is" in err
    r = _renderer(fig)
    for row in range(len(plan.placements)):
        top, side, front = fig.axes[3 * row : 3 * row + 3]
        dots = [ln for ln in top.lines if ln.get_marker() == "o"]
        assert dots and len(top.texts) == len(dots)
        labels = [t.get_window_extent(r) for t in top.texts]
        marks = [d.get_window_extent(r) for d in dots]
        assert not any(a.overlaps(b) for a in labels for b in marks)
        names = _legend_texts(top.get_legend())
        assert names[:2] == ["feet", "support polygon"]
        poly = next(ln for ln in top.lines if ln.get_label() == "support polygon")
        assert poly.get_color() in ("k", "black", (0, 0, 0, 1)) and all(
            d.get_color() != poly.get_color() for d in dots
        )
        assert top.get_xlabel() == "x [mm]" and top.get_ylabel() == "y [mm]"
        assert side.get_ylabel() == front.get_ylabel() == "z [mm]"


def test_forecast_bar_chart_title_names_robot_files_and_channels_inside_the_figure(
    tmp_path, monkeypatch, capsys
):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig)))
    plans = [DATA / "tulip_double_support_10s.json", DATA / "tulip_double_support_10s_next.json"]
    out = tmp_path / "fc.png"
    argv = [
        "plan",
        "forecast",
        *map(str, plans),
        "--noise",
        "0.3",
        "0.48",
        "0.39",
        "--plot",
        str(out),
        "--json",
    ]
    assert main(argv) == 0
    capsys.readouterr()
    (fig,) = figures
    title = fig.axes[0].title
    text = " ".join(title.get_text().split())
    assert text.startswith("tulip: ") and all(p.name in text for p in plans) and str(DATA) not in text
    assert "(Fz)" in text and "(Mx)" in text and "(My)" in text
    r = _renderer(fig)
    box = title.get_window_extent(r)
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width  # wrapped, not cut at the figure's edge


def test_a_long_title_over_few_bars_is_wrapped_inside_the_figure(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from identify.plots import forecast_figure, save_figure

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig)))
    long = ("ur5: the better of a 6 s run for each parameter and one for all, noise 0.2 (N·m) per sample, "
            "a title as long as `plan reach` writes it")  # fmt: skip
    fig = forecast_figure(
        ["ϑ7", "ϑ17"], np.array([16.0, 500.0]), np.array([700.0, 1e5]), 6.0, 15.0, 600.0, long
    )
    save_figure(fig, tmp_path / "r.png", dpi=120)
    (fig,) = figures
    title = fig.axes[0].get_title()
    assert " ".join(title.split()) == long and "\n" in title
    box = fig.axes[0].title.get_window_extent(_renderer(fig))
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width
