"""Balance-constrained excitation of TUlip standing on one sole: exact Jacobians of the wrench, lifted-sole and
start rows, the ZMP kept inside the stance sole and the other sole off the ground (checked independently with
MuJoCo's inverse dynamics and shapely), κ far below the thesis's, a start `poise run`'s weight shift from both
boards can reach (the soles apart, the description's placement box), the plan through plan check / show /
simulate / identify, and exact identification of the base parameters every single-support motion can excite."""

from __future__ import annotations

import contextlib
import io
import json

import casadi as ca
import numpy as np
import pytest
from conftest import poise_in_fresh_process
from shapely.geometry import Point, Polygon

from drivers.emulators.mujoco_arm import physical_truth, standing_wrench
from formats.trajectory_plan import load_trajectory_plan
from poise.cli import main
from robots import dynamics as dyn
from robots.base_params import cached_dynamic_base, random_states
from robots.kinematics import site_pose
from robots.params_io import resolve_params
from robots.stance import other_pose, placed_corners, placement_row_bounds, sole_rects
from robots.stance_spec import stance_spec
from trajectories.balance_excitation import zmp_spec
from trajectories.excitation import ExcitationSettings, random_start
from trajectories.plan import plan_trajectory
from trajectories.retighten import RATE_SLACK
from trajectories.single_support import (
    START_LINE,
    TIGHTEN_SLACK,
    SingleSupportTrajectory,
    design_single_support_problem,
    optimise_single_support,
    start_line,
    start_stance_function,
    tightened,
)
from trajectories.verify import sample_grid

pytestmark = pytest.mark.slow

THESIS_KAPPA = 74_131.0  # the thesis's gait data, 44 simplified ZMP base parameters
MARGIN, LIFT = 0.02, 0.02
# seed 14 (κ 327, 17 s): since the design numbers its base parameters as identification does, seed 12's weight
# shift onto the right sole kept the ZMP 19.7 mm inside (< 20: refused), seed 13 lifted its sole 251 mm (> 250;
# now solved again with the ceiling moved in, `test_a_bound_exceeded_between_samples_is_moved_in`);
# seeds 3 and 5 pass (κ 373, 381). With the start rows seed 3 once ended at κ 22 396 in 54 s
ARGS = ["--single-support", "--simplified", "--duration", "10", "--period", "10", "--harmonics", "3",
        "--samples", "24", "--max-iter", "200", "--velocity-fraction", "0.3", "--seed", "14"]  # fmt: skip


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("ss") / "ss.json"
    poise_in_fresh_process("plan", "trajectory", "tulip", *ARGS, "--zmp-margin", str(MARGIN), "--lift", str(LIFT),
                           "--out", str(out), "--json")  # fmt: skip
    return out


@pytest.fixture(scope="module")
def checked(plan_path) -> dict:
    """`plan check PLAN --json` of the design, once: two tests read it (the design's figures, the lifted sole's
    height a bad copy of the plan is then held below)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", "check", str(plan_path), "--json"]) == 0
    return json.loads(out.getvalue())


def test_wrench_lift_and_start_rows_have_exact_jacobians(tulip):
    s = ExcitationSettings(period=10.0, duration=10.0, harmonics=2, samples=12, simplified=True,
                           motion="single-support", zmp_margin=MARGIN)  # fmt: skip
    prob = design_single_support_problem(tulip, s, LIFT)
    rng = np.random.default_rng(2)
    coeffs = random_start(tulip, s, rng)
    # after the coefficients: the start's line (φ, c), the samples' lines (angles, offsets), the shifted posture
    lines = np.r_[rng.uniform(-np.pi, np.pi, s.samples), rng.uniform(-0.1, 0.1, s.samples)]
    x0 = np.r_[coeffs, 1.2, 0.1, lines, rng.uniform(prob["lbx"][-tulip.nq :], prob["ubx"][-tulip.nq :])]
    assert x0.size == prob["x"].numel() and START_LINE == 2
    G = ca.Function("G", [prob["x"]], [prob["g"], ca.jacobian(prob["g"], prob["x"])])
    _, J = (np.asarray(v) for v in G(x0))
    n = coeffs.size
    picks = np.random.default_rng(4).choice(n, 4, replace=False)
    # four coefficients, the start line's φ and c, a sample's angle and offset, two joints of the shifted posture
    for k in [*picks, n, n + 1, n + 2 + 3, n + 2 + s.samples + 3, x0.size - 1, x0.size - 4]:
        e = np.zeros_like(x0)
        e[k] = 1e-6
        fd = (np.asarray(G(x0 + e)[0]) - np.asarray(G(x0 - e)[0]))[:, 0] / 2e-6
        assert np.abs(fd - J[:, k]).max() <= 1e-5 * max(1.0, np.abs(J[:, k]).max())


def test_design_stands_on_one_sole_and_is_well_conditioned(tulip, plan_path, checked):
    plan = load_trajectory_plan(plan_path)
    traj = plan_trajectory(plan, tulip)
    assert isinstance(traj, SingleSupportTrajectory) and traj.base == "right"
    assert plan.design["kappa_scaled"] <= THESIS_KAPPA / 100
    # independent check: MuJoCo's inverse dynamics of the floating robot, shapely's polygon of the stance sole
    t = sample_grid(traj, 0.005)
    q, qd, qdd = traj.sample(t)
    w = standing_wrench(tulip, physical_truth(tulip.parameter_set(plan.params)), "right", q, qd, qdd)
    x0, x1, y0, y1 = tulip.base_site("right").rect
    sole = Polygon([(x0, y0), (x1, y0), (x1, y1), (x0, y1)])
    zmp = np.stack([-w[:, 4] / w[:, 2], w[:, 3] / w[:, 2]], axis=1)
    assert all(sole.contains(Point(z)) for z in zmp)
    assert min(sole.exterior.distance(Point(z)) for z in zmp) >= MARGIN - 1e-3
    site = tulip.site(traj.other)
    R, p = site_pose(tulip, q, plan.params, traj.other, "right")
    corners = np.array([[x, y, 0.0] for x in site.rect[:2] for y in site.rect[2:]])
    heights = np.einsum("bij,kj->bki", R, corners)[..., 2] + p[:, None, 2]
    assert heights.min() >= LIFT - 1e-4
    # the lifted sole stays low and nearly flat (defaults 0.25 m, 30°): no foot swung over the head
    assert heights.max() <= 0.25 + 1e-4 and R[:, 2, 2].min() >= np.cos(np.radians(30.0)) - 1e-6
    # seen from above, the lifted sole stays beside the standing one by the stance's feet gap (shapely): it does
    # not pass over the standing foot (the former test design did, 24 mm above the ground)
    tops = np.einsum("bij,kj->bki", R, corners)[..., :2] + p[:, None, :2]
    apart = min(sole.distance(Polygon(c).convex_hull) for c in tops)
    assert apart >= stance_spec(tulip).feet_gap - 1e-4
    # plan check passes, the run's weight shift from both boards included (planned as `poise run` plays it)
    check = checked
    assert check["min_sole_apart_m"] == pytest.approx(apart, abs=2e-3)
    assert check["ok"] and not check["problems"] and check["weight_shift"]["feasible"]
    assert check["weight_shift"]["ends_where_it_starts"] and check["weight_shift"]["start"]["shift_ticks"] > 0
    assert check["min_sole_lift_m"] >= LIFT - 1e-4 and check["min_zmp_margin_m"] >= MARGIN - 1e-4
    assert check["max_sole_height_m"] == pytest.approx(heights.max(), abs=2e-3)
    assert check["max_sole_tilt_rad"] == pytest.approx(np.arccos(R[:, 2, 2].min()), abs=2e-3)


def test_the_start_rows_keep_the_start_standable_on_both_boards(tulip, plan_path):
    """What the NLP's start rows ask (`robots.stance.placement_function` at t = 0), the plan's start has: the left
    sole's ground pose within the description's placement box and, both soles flat there, shapely's gap between
    them at least the stance's feet gap — the weight shift's standing posture (`plan check`, above) is then a
    placement `check_posture` accepts. The former design's start, without these rows, overlapped:
    tests/test_feet_separation.py shows the rows refuse it."""
    plan = load_trajectory_plan(plan_path)
    traj = plan_trajectory(plan, tulip)
    q0 = traj.sample(np.array([0.0, traj.duration]))[0]
    assert np.abs(q0[1] - q0[0]).max() < 1e-9  # the Fourier plan ends where it starts: one start to check
    spec = stance_spec(tulip)
    pose = other_pose(tulip, q0[0], plan.params, "right")
    assert all(lo - 1e-6 <= v <= hi + 1e-6 for v, (lo, hi) in zip(pose, spec.placement_bounds, strict=True))
    rb, ro = sole_rects(tulip, "right")
    gap = Polygon(rb).distance(Polygon(placed_corners(ro, pose)))
    assert not Polygon(rb).intersects(Polygon(placed_corners(ro, pose))) and gap >= spec.feet_gap - 1e-4
    rows = np.asarray(start_stance_function(tulip, "right", plan.params)(q0[0], start_line(tulip, "right",
                      plan.params, q0[0]))).ravel()  # fmt: skip
    lo, hi = placement_row_bounds(tulip, "right")
    assert np.all(rows >= lo - 1e-4) and np.all(rows <= hi + 1e-4)
    assert min(-rows[3:7].max(), rows[7:].min()) == pytest.approx(gap / 2, abs=1e-9)


def test_a_sole_above_its_ceiling_is_refused_by_plan_check_and_run(plan_path, checked, tmp_path, capsys):
    """The plan's own ceiling for the lifted sole, lowered below what the motion reaches: `plan check` fails
    and `poise run` refuses before anything moves (the drivers' per-tick check, robots.one_sole)."""
    high = checked["max_sole_height_m"]
    doc = json.loads(plan_path.read_text())
    doc["trajectory"]["max_lift_m"] = high - 0.01
    bad = tmp_path / "low.json"
    bad.write_text(json.dumps(doc))
    assert main(["plan", "check", str(bad)]) == 1
    assert "the lifted sole rises" in capsys.readouterr().out
    code = main(
        ["run", str(bad), "--robot", "sim", "--boards", "sim", "--out", str(tmp_path / "run"), "--yes"]
    )
    assert code == 2 and not (tmp_path / "run").exists()
    assert "rises" in capsys.readouterr().err


def test_plan_show_simulate_and_identify(tulip, plan_path, tmp_path, capsys):
    assert main(["plan", "show", str(plan_path), "--out", str(tmp_path / "ss.png")]) == 0
    assert (tmp_path / "ss.png").stat().st_size > 10_000
    rec, truth = tmp_path / "rec.csv", tmp_path / "truth.json"
    assert main(["simulate", "trajectory", str(plan_path), "--out", str(rec), "--truth", "perturbed",
                 "--truth-out", str(truth), "--seed", "5"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["identify", "dynamic", str(rec), "--simplified", "--reference", str(truth), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the total mass (the parameter summing every link's mass) to 0.1 %; every base parameter of the
    # single-support class estimated (none held at the prior)
    total = next(p for p in out["parameters"] if p["formula"].count("m@") == len(tulip.links))
    assert total["rel_se_pct"] < 0.1
    assert total["value"] == pytest.approx(resolve_params(str(truth), tulip).total_mass, rel=1e-3)
    db = cached_dynamic_base(tulip, zmp_spec("right"), True, "free")
    assert len(out["parameters"]) == db.rank and not out["fixed"]
    assert out["reference"]["estimated"] == db.rank
    # streamed to the physics twin by `poise run`: tests/test_single_support_twin.py


def test_exact_states_identify_the_single_support_parameters_exactly(tulip):
    """MuJoCo's ground wrench of random single-support states (any joint motion, base sole held) is the base
    regressor times the free-motion base parameters: least squares recovers them to rounding."""
    truth = physical_truth(tulip.parameter_set("sim"))
    q, qd, qdd = random_states(tulip, 120, np.random.default_rng(6))
    w = standing_wrench(tulip, truth, "right", q, qd, qdd)[:, [2, 3, 4]]
    db = cached_dynamic_base(tulip, zmp_spec("right"), False, "free")
    Y = dyn.base_wrench_regressor(tulip, q, qd, qdd, "right")[:, [2, 3, 4], :][..., db.independent]
    x = np.linalg.lstsq(Y.reshape(-1, db.rank), w.reshape(-1), rcond=None)[0]
    ref = db.values(dyn.standard_parameters(tulip, truth))
    assert np.abs(x - ref).max() < 1e-6 * max(1.0, np.abs(ref).max())


def _settings(**kw) -> ExcitationSettings:
    return ExcitationSettings(period=10.0, duration=10.0, harmonics=3, samples=24, simplified=True,
                              motion="single-support", zmp_margin=MARGIN, lift=LIFT, velocity_fraction=0.3,
                              max_iter=200, **kw)  # fmt: skip


def test_tightening_moves_only_the_exceeded_bounds_in():
    from types import SimpleNamespace

    plan = _settings()
    fine = SimpleNamespace(
        min_zmp_margin_m=0.03, max_sole_height_m=0.24, max_sole_tilt_rad=0.1, min_sole_lift_m=0.03,
        velocity_ratio=0.5, acceleration_ratio=0.9,
    )  # fmt: skip
    assert tightened(plan, LIFT, plan, LIFT, fine) is None
    over = SimpleNamespace(**{**vars(fine), "max_sole_height_m": plan.max_lift + 0.001})
    design, lift = tightened(plan, LIFT, plan, LIFT, over)
    assert design.max_lift == pytest.approx(plan.max_lift - 0.001 - TIGHTEN_SLACK) and lift == LIFT
    assert (design.zmp_margin, design.max_sole_tilt) == (plan.zmp_margin, plan.max_sole_tilt)
    # a second excess adds to the first move: the design's bound, not the plan's, is moved
    again, _ = tightened(design, lift, plan, LIFT, over)
    assert again.max_lift == pytest.approx(design.max_lift - 0.001 - TIGHTEN_SLACK)
    low = SimpleNamespace(
        **{**vars(fine), "min_sole_lift_m": LIFT - 0.002, "min_zmp_margin_m": MARGIN - 0.0003}
    )
    design, lift = tightened(plan, LIFT, plan, LIFT, low)
    assert lift == pytest.approx(LIFT + 0.002 + TIGHTEN_SLACK)
    assert (
        design.zmp_margin == pytest.approx(MARGIN + 0.0003 + TIGHTEN_SLACK)
        and design.max_lift == plan.max_lift
    )
    fast = SimpleNamespace(**{**vars(fine), "velocity_ratio": 1.05})  # a joint beyond its velocity limit
    design, lift = tightened(plan, LIFT, plan, LIFT, fast)
    assert design.velocity_fraction == pytest.approx(plan.velocity_fraction / 1.05 - RATE_SLACK)
    assert design.acceleration_fraction == plan.acceleration_fraction and lift == LIFT


def test_a_bound_exceeded_between_samples_is_moved_in(tulip, monkeypatch):
    """A sole that rises above its ceiling between the design's samples: the design is solved again with the
    ceiling moved in, and the plan it hands out passes its own check on the 2 ms grid. The first check is told the
    sole rose 1 mm too high (seed 13 of the module's options rose 251 mm with the packages of 2026-11-27, not with
    those of 2026-11-28). The mechanism, not the design, is under test: two harmonics on 16 samples, 60
    iterations per solve (10 s; the module's options took 157 s for the two solves)."""
    from dataclasses import replace

    import trajectories.verify as verify

    real_check, checks = verify.check_trajectory, []

    def check(*args, **kw):
        c = real_check(*args, **kw)
        checks.append(c)
        over = c.max_sole_height_m is not None and c.max_sole_height_m > 0.25
        return c if len(checks) > 1 or over else replace(c, max_sole_height_m=0.251)

    monkeypatch.setattr(verify, "check_trajectory", check)
    r = optimise_single_support(tulip, replace(_settings(), harmonics=2, samples=16, max_iter=60), seed=13)
    assert len(checks) >= 2 and any(st.get("tightened") for st in r.stages)
    v = r.verification
    assert v["ok"], v["problems"]
    assert v["max_sole_height_m"] <= 0.25 and r.trajectory.max_lift == 0.25  # the plan keeps the asked bound
    # (κ is not asserted: the forced re-solve of seed 13 ended at κ 24 382 with the 2026-11-28 packages)
