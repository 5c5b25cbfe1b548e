"""A single-support plan's weight shifts as `plan check` reports them and `poise run` plays them — one function
for both (`drivers.single_support_stream.plan_transitions`): the start's, played backwards at the end of a plan
that ends where it starts; one of its own, from the end posture, for a plan that ends elsewhere; a plan check that
fails and a run refused before anything is sent where there is none; no weight shift planned for other plans.
Small hand-made plans around the planner's nominal posture (no design)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import ramp_motion, tulip_with_stance
from shapely.geometry import Polygon

from drivers.config import load_config
from formats.trajectory_plan import TrajectoryPlan, load_trajectory_plan, save_trajectory_plan
from poise.cli import main
from poise.cmd_run_trajectory import prepare
from robots.stance import other_pose, placed_corners, sole_rects
from trajectories.excitation import ExcitationSettings
from trajectories.fourier import FourierTrajectory
from trajectories.multistart import settings_dict
from trajectories.plan import plan_trajectory
from trajectories.single_support import SingleSupportTrajectory, nominal_posture

MARGIN, LIFT = 0.02, 0.02
HIP_YAW, HIP_ROLL = 6, 7  # the free (left) leg's first two joints
CONFIG = Path(__file__).resolve().parents[1] / "drivers" / "tulip_robot.toml"
DOUBLE_SUPPORT = Path(__file__).parent / "data" / "tulip_double_support_10s.json"


@pytest.fixture(scope="module")
def start(tulip):
    """The planner's nominal single-support posture: at rest on the right sole, the left one lifted (tilted at
    most 20°: with the default 30° the left ankle's lift passes 0.6° beyond its limit, so the run refuses)."""
    s = ExcitationSettings(base="right", zmp_margin=MARGIN, lift=LIFT, max_sole_tilt=math.radians(20.0))
    return nominal_posture(tulip, "right", "sim", s)


def _plan(tulip, motion: FourierTrajectory, path: Path, max_tilt_deg: float = 30.0) -> Path:
    """A single-support plan file of `motion` on the right sole."""
    s = ExcitationSettings(base="right", motion="single-support", zmp_margin=MARGIN, lift=LIFT,
                           max_sole_tilt=math.radians(max_tilt_deg), simplified=True)  # fmt: skip
    traj = SingleSupportTrajectory(motion, "right", "sole_l", LIFT, s.max_lift, s.max_sole_tilt)
    plan = TrajectoryPlan(tulip.name, "right", list(tulip.joint_names), traj.to_json(), params="sim",
                          settings=settings_dict(s), seed=0)  # fmt: skip
    save_trajectory_plan(plan, path)
    return path


def _yawing(tulip, start: np.ndarray, path: Path) -> Path:
    """A plan of the free hip yawing 0.05 rad and back in 4 s from `start` (two harmonics, at rest at t = 0 and
    every period: it ends where it starts)."""
    w, c = 2 * math.pi / 4.0, 0.02
    b = np.zeros((tulip.nq, 2))
    b[HIP_YAW] = [-2 * c, c]
    q0 = start + np.eye(tulip.nq)[HIP_YAW] * 1.5 * c / w
    return _plan(tulip, FourierTrajectory(4.0, 4.0, q0, np.zeros_like(b), b), path)


@pytest.fixture(scope="module")
def periodic(tulip, start, tmp_path_factory):
    return _yawing(tulip, start, tmp_path_factory.mktemp("p") / "p.json")


@pytest.fixture(scope="module")
def elsewhere(tulip, start, tmp_path_factory):
    """The free hip yawed by 0.05 rad in 3 s, rest to rest: the plan ends where it does not start."""
    end = start + np.eye(tulip.nq)[HIP_YAW] * 0.05
    return _plan(tulip, ramp_motion(start, end, 3.0), tmp_path_factory.mktemp("e") / "e.json")


@pytest.fixture(scope="module")
def wide(tulip, start, tmp_path_factory):
    """The free leg swung 0.25 rad outward in 3 s (its sole further out, more tilted): on one sole it balances,
    but standing on both soles that wide nothing puts the CoM over the right sole."""
    end = start + np.eye(tulip.nq)[HIP_ROLL] * 0.25
    return _plan(tulip, ramp_motion(start, end, 3.0), tmp_path_factory.mktemp("w") / "w.json", 45.0)


def _check(path, capsys, *extra: str) -> tuple[int, dict]:
    """`plan check PATH --json`: its exit code and output."""
    capsys.readouterr()
    code = main(["plan", "check", str(path), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_plan_check_reports_the_weight_shift_poise_run_plays(periodic, capsys):
    """A plan ending where it starts: the start's weight shift, as `prepare` plans it, played backwards at the end."""
    code, out = _check(periodic, capsys)
    ws = out["weight_shift"]
    assert code == 0 and out["ok"] and ws["feasible"] and ws["ends_where_it_starts"] and ws["end"] is None
    assert ws["start"]["shift_s"] >= 1.0 and ws["start"]["lift_s"] >= 1.0
    assert ws["start"]["min_single_support_margin_mm"] >= 1000 * MARGIN
    _, sp, problems, _ = prepare(load_trajectory_plan(periodic), load_config(CONFIG))
    assert problems == [] and sp.lead_out is sp.lead_in  # played backwards at the end
    assert ws["start"] == json.loads(json.dumps(sp.lead_in.summary()))
    assert main(["plan", "check", str(periodic)]) == 0
    text = capsys.readouterr().out
    assert "weight shift at the start: shift / lift" in text and "the start's, backwards" in text
    assert f"{ws['start']['shift_s']:.2f} / {ws['start']['lift_s']:.2f}" in text


def test_a_plan_ending_elsewhere_gets_a_weight_shift_of_its_own(tulip, elsewhere, capsys):
    """Planned from the end posture (run backwards after the plan: lower, put down, shift back)."""
    plan = load_trajectory_plan(elsewhere)
    _, sp, problems, _ = prepare(plan, load_config(CONFIG))
    assert problems == []
    start, end = sp.lead_in, sp.lead_out
    assert (
        end is not start and np.allclose(end.lift.q[-1], sp.q[-1]) and np.allclose(start.lift.q[-1], sp.q[0])
    )
    assert np.allclose(end.pose, other_pose(tulip, sp.q[-1], "sim", "right"))
    assert abs(end.pose[2] - start.pose[2]) > 0.02  # the free sole goes down elsewhere (turned with the hip)
    assert end.single_margin_m >= MARGIN and end.double_margin_m >= MARGIN - 1e-4
    code, out = _check(elsewhere, capsys)
    ws = out["weight_shift"]
    assert code == 0 and ws["feasible"] and not ws["ends_where_it_starts"]
    assert ws["end"] == json.loads(json.dumps(end.summary()))
    assert main(["plan", "check", str(elsewhere)]) == 0
    text = capsys.readouterr().out
    assert (
        "weight shift at the end: shift / lift" in text
        and f"{end.shift.t[-1]:.2f} / {end.lift.t[-1]:.2f}" in text
    )


def test_plan_check_fails_where_the_configuration_leaves_no_weight_shift(periodic, tmp_path, capsys):
    """The executor's min_margin above what any posture with both soles down keeps inside the right sole."""
    config = tmp_path / "robot.toml"
    config.write_text(CONFIG.read_text().replace("min_margin = 0.0 ", "min_margin = 0.08 "))
    code, out = _check(periodic, capsys, "--config", str(config))
    ws = out["weight_shift"]
    assert code == 1 and not out["ok"] and not ws["feasible"] and ws["start"] is None
    why = "no weight shift onto the right sole: no posture with the sole_l sole on the ground puts the CoM 85 mm"
    own = [
        p for p in out["problems"] if not p.startswith("run (")
    ]  # the setpoints' ZMP: `poise run`'s own refusal
    assert len(ws["problems"]) == 1 and ws["problems"][0].startswith(why) and own == ws["problems"]
    assert main(["plan", "check", str(periodic), "--config", str(config)]) == 1
    text = capsys.readouterr().out
    assert "weight shift at the start" in text and "none" in text and f"FAIL {why}" in text


def test_a_plan_ending_where_no_weight_shift_exists_is_refused(wide, tmp_path, capsys):
    """plan check fails on it; `poise run` refuses it in one line before anything is sent (exit 2, no run
    directory)."""
    code, out = _check(wide, capsys)
    ws = out["weight_shift"]
    assert code == 1 and out["problems"] == ws["problems"] and ws["start"] is not None and ws["end"] is None
    why = "at the plan's end, no weight shift onto the right sole: no posture with the sole_l sole on the ground"
    assert len(ws["problems"]) == 1 and ws["problems"][0].startswith(why), ws["problems"]
    run = tmp_path / "run"
    args = ["run", str(wide), "--robot", "sim", "--boards", "sim", "--out", str(run), "--yes"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "refused before moving (1 problem(s)): " + why in err and len(err.strip().splitlines()) == 1, err
    assert not run.exists()


def test_no_weight_shift_is_planned_for_other_plans(monkeypatch, capsys):
    """A double-support plan starts as it is placed: plan check plans nothing for it (5.2–5.4 s for this 10 s
    plan, as before)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a weight shift planned for a double-support plan")

    monkeypatch.setattr("drivers.single_support_stream.plan_weight_shift", refuse)
    code, out = _check(DOUBLE_SUPPORT, capsys)
    assert code == 0 and "weight_shift" not in out


def test_plan_check_and_run_agree_on_a_weight_shift_past_a_joint_limit(tulip, tmp_path, capsys, monkeypatch):
    """The planner keeps no joint limits along its closed chain: it stands POSTURE_ROOM inside them, so the lift
    straight up has room. Without it, from the nominal posture with a 30° tilt the shift ended with the left ankle's
    roll on its limit and the lift passed 0.6° below it. The run's per-tick limit check refuses that, and plan check
    (the same `plan_transitions`) fails on it with the same words."""
    s = ExcitationSettings(base="right", zmp_margin=MARGIN, lift=LIFT)
    plan = _yawing(tulip, nominal_posture(tulip, "right", "sim", s), tmp_path / "limit.json")
    code, out = _check(plan, capsys)
    assert code == 0 and out["weight_shift"]["feasible"]  # with the room
    monkeypatch.setattr("trajectories.weight_shift.POSTURE_ROOM", 0.0)
    code, out = _check(plan, capsys)
    # the lift's first tick past the limit (its start, the shifted posture, stands on it: t = 0 is within)
    why = "lifting, setpoint at t = 0.010 s: theta12 = -17.00 deg outside [-17.0, 20.0] deg"
    assert code == 1 and any(p.startswith(why) for p in out["weight_shift"]["problems"]), out["problems"]
    assert (
        main(["run", str(plan), "--robot", "sim", "--boards", "sim", "--out", str(tmp_path / "r"), "--yes"])
        == 2
    )
    assert why in capsys.readouterr().err and not (tmp_path / "r").exists()


def _described(plan_path: Path, tmp_path: Path, key: str, box: str) -> Path:
    """The plan made for a copy of the TUlip description whose [stance] `key` (a placement box, or the feet gap)
    is `box`."""
    plan = load_trajectory_plan(plan_path)
    plan.robot_source = str(tulip_with_stance(tmp_path, **{key: box}))
    save_trajectory_plan(plan, tmp_path / "boxed.json")
    return tmp_path / "boxed.json"


def test_a_free_sole_put_down_outside_the_placement_box_is_refused(periodic, elsewhere, tmp_path, capsys):
    """The designer bounds the free sole's ground pose at t = 0 to the description's placement box; the weight
    shifts (`plan_transitions`, shared by plan check and `poise run`) refuse a start or end pose outside it,
    naming the pose and the box. The free sole's ground pose at the start of `periodic`: x 85.5 mm, y 252.2 mm, yaw
    7.1°; of `elsewhere`: yaw 5.0° at its start, 7.7° at its end."""
    # y ≤ 200 mm: the start's pose (and, ending where it starts, the end's) outside
    boxed = _described(periodic, tmp_path, "placement_y", "[-0.1, 0.2]")
    code, out = _check(boxed, capsys)
    why = (
        "standing on both soles before the weight shift: the sole_l sole's ground pose (x 85.5 mm, y 252.2 mm, "
        "yaw 7.1 deg) is outside the placement box of the tulip description ([stance] placement_x [-750, 750] mm, "
        "placement_y [-100, 200] mm, placement_yaw_deg [-90, 90] deg): y out of range"
    )
    assert code == 1 and not out["ok"] and out["problems"] == [why] == out["weight_shift"]["problems"]
    assert out["weight_shift"]["start"]["free_sole_pose"][1] == pytest.approx(0.2522, abs=1e-4)
    assert main(["plan", "check", str(boxed)]) == 1
    text = capsys.readouterr().out
    assert "free sole on the ground at the start: x / y / yaw" in text and "85.5 / 252.2 / 7.1" in text
    assert f"FAIL {why}" in " ".join(text.split())  # "[stance]" printed, not taken for markup
    _, _, problems, _ = prepare(load_trajectory_plan(boxed), load_config(CONFIG))
    assert problems == [why]  # `poise run` refuses it with the same words
    # yaw ≤ 6.5°: the start inside, the end (the hip yawed 0.05 rad) outside
    (tmp_path / "end").mkdir()
    boxed = _described(elsewhere, tmp_path / "end", "placement_yaw_deg", "[-90.0, 6.5]")
    code, out = _check(boxed, capsys)
    why = "at the plan's end, standing on both soles before the weight shift: the sole_l sole's ground pose "
    assert code == 1 and len(out["problems"]) == 1 and out["problems"][0].startswith(why), out["problems"]
    assert "yaw 7.7 deg) is outside" in out["problems"][0] and out["problems"][0].endswith("yaw out of range")
    assert prepare(load_trajectory_plan(boxed), load_config(CONFIG))[2] == out["problems"]


def test_a_free_sole_put_down_closer_than_the_feet_gap_is_refused(tulip, periodic, tmp_path, capsys):
    """The designer keeps both soles, flat with the free one at its ground pose at t = 0, the description's
    [stance] feet_gap apart; the weight shifts (`plan_transitions`, shared by plan check and `poise run`) refuse a
    start or end pose closer than that, naming the pose, the soles' gap and the description's. `periodic`'s soles
    stand 120.3 mm apart (FEET_GAP, 2 mm, passes above) and, lifted, its sole keeps 122.2 mm beside the standing
    one seen from above: a feet_gap of 121 mm refuses its start, and the lift straight up from there (the same
    footprint), not the motion."""
    gapped = _described(periodic, tmp_path, "feet_gap", "0.121")
    code, out = _check(gapped, capsys)
    rb, ro = sole_rects(tulip, "right")
    q0 = plan_trajectory(load_trajectory_plan(gapped), tulip).sample(np.array([0.0]))[0][0]
    gap = Polygon(rb).distance(Polygon(placed_corners(ro, other_pose(tulip, q0, "sim", "right"))))
    why = (
        "standing on both soles before the weight shift: the sole_l sole's ground pose (x 85.5 mm, y 252.2 mm, "
        f"yaw 7.1 deg) is {gap * 1000:.1f} mm from the sole_r sole, closer than the tulip description's [stance] "
        "feet_gap 121 mm"
    )
    lifting = (
        f"no weight shift onto the right sole: lifting, the sole_l sole comes {gap * 1000:.1f} mm from the right "
        "sole, seen from above (< the stance's feet gap 121.0 mm: the feet could meet)"
    )
    assert 0.12 < gap < 0.121 < out["min_sole_apart_m"]
    assert (
        code == 1 and not out["ok"] and out["problems"] == [why, lifting] == out["weight_shift"]["problems"]
    )
    _, _, problems, _ = prepare(load_trajectory_plan(gapped), load_config(CONFIG))
    assert problems == [why, lifting]  # `poise run` refuses it with the same words
