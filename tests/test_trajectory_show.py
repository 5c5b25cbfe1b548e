"""`poise plan show` for trajectory plans: what the figure draws, read back from its matplotlib objects (captured as
the plot closes them), against values computed here — the Fourier series from the plan's coefficients, MuJoCo's
inverse dynamics for torques and the ground wrench, the held sole's pose, the soles' rectangles."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import UR5, kept_figures
from scipy.spatial import ConvexHull
from shapely.geometry import Point, Polygon

from drivers.emulators.mujoco_arm import arm_efforts, physical_truth, standing_wrench
from formats.trajectory_plan import TrajectoryPlan, load_trajectory_plan, save_trajectory_plan
from poise.cli import main
from robots.kinematics import site_pose
from robots.registry import get_model
from trajectories.plan import plan_trajectory

DATA = Path(__file__).parent / "data"
STANDING = DATA / "tulip_double_support_10s.json"


def _fourier(doc: dict, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, q̇, q̈ (len(t), n) of a plan's Fourier trajectory, written out from its coefficients:
    q_i = q0_i + Σ_l a_il/(ωl)·sin(ωlt) − b_il/(ωl)·cos(ωlt)."""
    w = 2 * np.pi / doc["period_s"]
    a, b = np.asarray(doc["a"]), np.asarray(doc["b"])
    q = np.tile(np.asarray(doc["q0"], dtype=float), (len(t), 1))
    qd, qdd = np.zeros_like(q), np.zeros_like(q)
    for l in range(1, a.shape[1] + 1):
        s, c = np.sin(w * l * t)[:, None], np.cos(w * l * t)[:, None]
        q += (a[:, l - 1] * s - b[:, l - 1] * c) / (w * l)
        qd += a[:, l - 1] * c + b[:, l - 1] * s
        qdd += w * l * (b[:, l - 1] * c - a[:, l - 1] * s)
    return q, qd, qdd


def _show(plan: Path, out: Path, monkeypatch, capsys):
    """`poise plan show PLAN --out OUT`, returning the figure it drew (kept from `plt.close`)."""
    figures = kept_figures(monkeypatch)
    capsys.readouterr()
    assert main(["plan", "show", str(plan), "--out", str(out)]) == 0
    assert f"wrote {out}" in " ".join(capsys.readouterr().out.split())
    assert out.stat().st_size > 10_000
    assert len(figures) == 1
    return figures[0]


def _curves(ax, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first n lines of an axes (the joints' curves): their common times and their values (K, n)."""
    lines = ax.get_lines()[:n]
    t = np.asarray(lines[0].get_xdata(), dtype=float)
    assert all(np.array_equal(line.get_xdata(), t) for line in lines)
    return t, np.stack([np.asarray(line.get_ydata(), dtype=float) for line in lines], axis=1)


def _joint_legend(fig, ax, n: int) -> list[str]:
    """The legend's first n entries (one per joint; after them the limit and design-cap lines), from the panel's
    legend or, on an arm's figure, the legend under the panels."""
    legend = ax.get_legend() or fig.legends[0]
    return [text.get_text() for text in legend.get_texts()][:n]


def _limit_lines(ax, n: int) -> list[float]:
    """The hardware limits' horizontal lines after the joints' curves: their heights (each spans the whole axes;
    the design's own caps, lighter lines labelled "design cap …", left out)."""
    out = []
    for line in ax.get_lines()[n:]:
        if line.get_label().startswith("design cap"):
            continue
        y = np.asarray(line.get_ydata(), dtype=float)
        assert np.allclose(line.get_xdata(), [0, 1]) and y[0] == y[1]
        out.append(float(y[0]))
    return sorted(out)


@pytest.fixture(scope="module")
def arm_plan(tmp_path_factory) -> Path:
    """A hand-written UR5 plan: a 10 s Fourier motion, three harmonics, no design record."""
    model = get_model(str(UR5))
    rng = np.random.default_rng(3)
    traj = {
        "kind": "fourier",
        "period_s": 5.0,
        "duration_s": 10.0,
        "q0": [0.0, -1.2, 1.2, -1.5, -1.5, 0.0],
        "a": rng.normal(0.0, 0.5, (6, 3)).tolist(),
        "b": rng.normal(0.0, 0.5, (6, 3)).tolist(),
    }
    path = tmp_path_factory.mktemp("show") / "ur5.json"
    plan = TrajectoryPlan(
        robot=model.name,
        robot_source=str(UR5),
        base=model.root,
        params="urdf",
        joint_names=list(model.joint_names),
        trajectory=traj,
    )
    save_trajectory_plan(plan, path)
    return path


def test_arm_plan_figure_draws_the_plans_positions_velocities_and_torques(
    arm_plan, tmp_path, monkeypatch, capsys
):
    """Four panels over the plan's 10 s: positions as (q − mid-range)/half-range, velocities and accelerations
    over their limits, torques (MuJoCo's inverse dynamics with the plan's parameters) over the effort limits; dashed
    lines at ±1 are the limits; one legend entry per joint, giving those limits in their units."""
    model = get_model(str(UR5))
    doc = json.loads(arm_plan.read_text())
    fig = _show(arm_plan, tmp_path / "arm.png", monkeypatch, capsys)
    assert fig._suptitle.get_text().startswith(f"{arm_plan.name}: ur5, excitation trajectory (10 s)")
    pos, vel, acc, torque = fig.axes
    n = model.nq
    t, yq = _curves(pos, n)
    assert t[0] == 0.0 and t[-1] == 10.0 and np.allclose(np.diff(t), 0.01)  # the whole plan, every 10 ms
    q, qd, qdd = _fourier(doc["trajectory"], t)
    mid = (model.lower + model.upper) / 2
    half = (model.upper - model.lower) / 2
    assert np.all(np.isfinite(half))
    assert np.allclose(yq, (q - mid) / half, atol=1e-12)
    assert np.allclose(_curves(vel, n)[0], t) and np.allclose(_curves(torque, n)[0], t)
    assert np.allclose(_curves(vel, n)[1], qd / model.velocity_limit, atol=1e-12)
    assert np.allclose(_curves(acc, n)[1], qdd / 20.0, atol=1e-12)  # the UR5 gives none: the design's default
    tau = arm_efforts(model, "urdf", q, qd, qdd)[1]
    assert np.allclose(_curves(torque, n)[1], tau / model.effort_limit, atol=1e-9)
    for ax in (pos, vel, acc, torque):
        assert _limit_lines(ax, n) == [-1.0, 1.0]
    # the ±1 lines are the limits: mid-range ± half-range
    assert np.allclose(mid - half, model.lower) and np.allclose(mid + half, model.upper)
    assert np.abs(yq).max() < 1 and np.abs(_curves(vel, n)[1]).max() < 1  # the motion stays inside them
    legend = _joint_legend(fig, pos, n)
    assert [entry.split(":")[0] for entry in legend] == list(model.joint_names)
    assert legend[2] == (
        f"elbow_joint: {model.lower[2]:.3g}…{model.upper[2]:.3g} rad, {model.velocity_limit[2]:.3g} rad/s, "
        f"20 rad/s², {model.effort_limit[2]:.3g} N·m"
    )
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "position (0 = mid-range, ±1 = limits)",
        "velocity / limit",
        "acceleration / limit",
        "torque / effort limit",
    ]


def test_double_support_plan_figure_draws_joints_zmp_and_support_polygon(tmp_path, monkeypatch, capsys):
    """The stored TUlip double-support plan: its joints' positions and velocities against their limits (the
    independent joints the plan's Fourier series, the dependent ones keeping the held sole at its target pose),
    the soles' outlines, their convex hull filled as the support polygon and the ZMP path — the ground wrench's
    (−My/Fz, Mx/Fz) by MuJoCo's inverse dynamics — inside it by at least the plan's verified margin."""
    model = get_model("tulip")
    doc = json.loads(STANDING.read_text())
    chain = doc["trajectory"]["chain"]
    fig = _show(STANDING, tmp_path / "standing.png", monkeypatch, capsys)
    pos, vel, torque, ground, share = fig.axes
    assert fig._suptitle.get_text().startswith(f"{STANDING.name}: tulip, double-support excitation (10 s)")
    n = model.nq
    mid = (model.lower + model.upper) / 2
    half = (model.upper - model.lower) / 2
    t, yq = _curves(pos, n)
    assert t[0] == 0.0 and t[-1] == 10.0 and np.allclose(np.diff(t), 0.01)
    q = mid + yq * half
    qd = _curves(vel, n)[1] * model.velocity_limit
    free, bound = chain["independent"], chain["dependent"]
    assert sorted(free + bound) == list(range(n))
    q_free, qd_free, _ = _fourier(doc["trajectory"]["independent"], t)
    assert np.allclose(q[:, free], q_free, atol=1e-12) and np.allclose(qd[:, free], qd_free, atol=1e-12)
    R, p = site_pose(model, q, "sim", chain["other_site"], chain["base"])
    assert np.abs(p - chain["target_p"]).max() < 1e-8 and np.abs(R - chain["target_R"]).max() < 1e-8
    fd = np.gradient(q[:, bound], t, axis=0)[1:-1]  # the dependent joints' velocities: their angles' rate
    assert np.abs(fd - qd[1:-1, bound]).max() < 1e-3
    for ax in (pos, vel):
        assert _limit_lines(ax, n) == [-1.0, 1.0]
    assert np.abs(yq).max() < 1 and np.abs(_curves(vel, n)[1]).max() < 1
    assert [entry.split(":")[0] for entry in _joint_legend(fig, pos, n)] == list(model.joint_names)
    # twelve joints, no two curves alike (the colour cycle has ten)
    assert len({(line.get_color(), line.get_linestyle()) for line in pos.get_lines()[:n]}) == n == 12

    # the soles: the base sole's rectangle where it is, the other's at the chain's target pose (mm)
    base_site = model.base_site(chain["base"])
    other_site = model.site(chain["other_site"])
    Rt, pt = np.asarray(chain["target_R"]), np.asarray(chain["target_p"])

    def rect(site, R: np.ndarray, p: np.ndarray) -> np.ndarray:
        x0, x1, y0, y1 = site.rect
        c = np.array([[x0, y0, 0], [x1, y0, 0], [x1, y1, 0], [x0, y1, 0]], dtype=float) @ R.T + p
        return 1000 * c[:, :2]

    feet = [rect(base_site, np.eye(3), np.zeros(3)), rect(other_site, Rt, pt)]
    *outlines, margin_line, zmp_line, start = ground.get_lines()
    assert np.allclose(start.get_xydata(), zmp_line.get_xydata()[:1])  # the path's start marked
    assert len(outlines) == 2 and zmp_line.get_label() == "ZMP (guessed parameters)"
    for line, corners in zip(outlines, feet, strict=True):
        assert np.allclose(line.get_xydata(), np.vstack([corners, corners[:1]]), atol=1e-6)
    (patch,) = ground.patches
    assert patch.get_label() == "support polygon"
    drawn = Polygon(patch.get_xy())
    corners = np.vstack(feet)
    hull = Polygon(corners[ConvexHull(corners).vertices])
    assert drawn.symmetric_difference(hull).area < 1e-6 * hull.area
    # the ZMP from MuJoCo's ground wrench on the plan's parameters (made realisable for MuJoCo: ~0.01 mm apart)
    qdd = plan_trajectory(load_trajectory_plan(STANDING), model).sample(t)[2]
    w = standing_wrench(model, physical_truth(model.parameter_set("sim")), chain["base"], q, qd, qdd)
    zmp = 1000 * np.stack([-w[:, 4] / w[:, 2], w[:, 3] / w[:, 2]], axis=1)
    assert np.allclose(zmp_line.get_xydata(), zmp, atol=0.05)
    margin = min(drawn.exterior.distance(Point(z)) for z in zmp_line.get_xydata())
    assert all(drawn.contains(Point(z)) for z in zmp_line.get_xydata())
    verified = (
        1000 * doc["design"]["verification"]["min_zmp_margin_m"]
    )  # on a 2 ms grid, which holds these times
    assert verified - 1e-6 <= margin < verified + 2.0
    # the margin line: the support polygon moved in by the plan's ZMP margin, every ZMP sample inside it
    required = 1000 * doc["settings"]["zmp_margin"]
    assert margin_line.get_label() == f"ZMP margin ({required:.0f} mm)"
    inner = Polygon(margin_line.get_xydata())
    assert inner.symmetric_difference(hull.buffer(-required)).area < 1e-3 * inner.area
    assert all(inner.buffer(1e-6).contains(Point(z)) for z in zmp_line.get_xydata())


def test_standing_figures_draw_torques_the_load_share_and_the_lifted_sole(tmp_path, monkeypatch, capsys):
    """Both soles: the joint torques drawn are a split of the load between the soles (τ_b − τ, τ_b the torques with
    the base sole fixed and the other free, lies in the span of the other sole's Jacobian transposed: a contact
    wrench there), within the efforts and not the one-sole torques; the other sole's share of the load keeps the
    plan's bounds, its extremes those the plan's 2 ms verification found. One sole: the lifted sole's corners
    drawn at their heights (MuJoCo-free kinematics of the plan's angles), between the plan's lift and ceiling."""
    from robots import dynamics as dyn

    model = get_model("tulip")
    doc = json.loads(STANDING.read_text())
    chain = doc["trajectory"]["chain"]
    fig = _show(STANDING, tmp_path / "standing.png", monkeypatch, capsys)
    pos, vel, torque, ground, share = fig.axes
    n, mid, half = model.nq, (model.lower + model.upper) / 2, (model.upper - model.lower) / 2
    t, yq = _curves(pos, n)
    q = mid + yq * half
    traj = plan_trajectory(load_trajectory_plan(STANDING), model)
    _, qd, qdd = traj.sample(t)
    assert np.allclose(traj.sample(t)[0], q, atol=1e-9)
    tau = _curves(torque, n)[1] * model.effort_limit
    assert _limit_lines(torque, n) == [-1.0, 1.0] and np.abs(tau / model.effort_limit).max() < 1
    tau_b = dyn.rnea(model, q, qd, qdd, "sim", chain["base"])
    J = dyn.frame_jacobian(model, q, chain["other_site"], chain["base"], "sim")  # (K, 6, nq)
    d = tau_b - tau
    coef = np.stack([np.linalg.lstsq(J[k].T, d[k], rcond=None)[0] for k in range(len(t))])
    assert np.abs(np.einsum("kji,kj->ki", J, coef) - d).max() < 1e-9 * np.abs(tau_b).max()
    assert np.abs(d).max() > 0.1 * np.abs(tau_b).max()  # the other sole carries part of the load
    (line,) = share.get_lines()[:1]
    s = np.asarray(line.get_ydata(), dtype=float)
    lo, hi = doc["design"]["verification"]["load_share_range"]
    bound = doc["settings"]["load_share"]
    assert sorted(float(ln.get_ydata()[0]) for ln in share.get_lines()[1:]) == [bound, 1 - bound]
    assert lo - 1e-9 <= s.min() < lo + 0.01 and hi - 0.01 < s.max() <= hi + 1e-9

    single = DATA / "tulip_single_support_6s.json"
    sdoc = json.loads(single.read_text())
    fig = _show(single, tmp_path / "single.png", monkeypatch, capsys)
    pos, vel, torque, ground, lifted = fig.axes
    assert fig._suptitle.get_text().startswith(f"{single.name}: tulip, single-support excitation (6 s)")
    t, yq = _curves(pos, n)
    q = mid + yq * half
    other = next(
        s.name for s in model.sites if s.rect is not None and s.name != model.base_site(sdoc["base"]).name
    )
    R, p = site_pose(model, q, "sim", other, sdoc["base"])
    x0, x1, y0, y1 = model.site(other).rect
    corners = np.array([[x, y, 0.0] for x in (x0, x1) for y in (y0, y1)])
    heights = np.einsum("kij,cj->kci", R, corners)[..., 2] + p[:, None, 2]
    low, high = (np.asarray(ln.get_ydata(), dtype=float) for ln in lifted.get_lines()[:2])
    assert np.allclose(low, 1000 * heights.min(axis=1), atol=1e-6)
    assert np.allclose(high, 1000 * heights.max(axis=1), atol=1e-6)
    settings = sdoc["settings"]
    assert sorted(float(ln.get_ydata()[0]) for ln in lifted.get_lines()[2:]) == [
        1000 * settings["lift"], 1000 * settings["max_lift"]]  # fmt: skip
    assert low.min() >= 1000 * settings["lift"] and high.max() <= 1000 * settings["max_lift"]
