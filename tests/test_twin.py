"""The MuJoCo physics twin behind the emulated bench: its boards weigh what MuJoCo's contacts carry, the thesis's
failure modes (soft P-only servos, joint torque limits) show up as falls, and the real drivers run a plan on it."""

import argparse
import json

import numpy as np
import pytest

from drivers.config import load_config
from drivers.emulators.mujoco_twin import ServoModel, Twin, TwinOptions
from drivers.emulators.sim_robot import true_parameters
from drivers.emulators.testplan import random_plan
from drivers.emulators.world import WorldOptions
from drivers.wbb.geometry import board_poses_for, cells_in_base, cop
from formats.static_recording import read_recording
from poise import cmd_run


@pytest.fixture(scope="module")
def plan(model):
    return random_plan(model, 3, seed=4, move_s=1.0, hold_s=4.0)


def _stand(model, plan, index, servo, seconds=4.0, **options):
    """Posture `index` reached in the air, set on the boards, `seconds` of simulated time; `options`: TwinOptions."""
    cfg = load_config()
    tw = Twin(model, true_parameters(model), TwinOptions(servo=servo, **options))
    p = plan.postures[index]
    for k in range(model.nq):
        tw.set_torque(k, True)
        tw.set_goal(k, p.q[k])
    tw.settle_sim(1.0)
    poses = board_poses_for(np.array(plan.placement(p.placement).other_foot), cfg.right_board, cfg.left_board)
    tw.place(poses)
    tw.settle_sim(seconds)
    return tw, poses


@pytest.mark.parametrize("index", [0, 1])
def test_boards_at_rest_show_the_twins_own_com(model, plan, index):
    tw, poses = _stand(model, plan, index, ServoModel(p_gain=6000))
    c = cop(tw.cell_loads(), cells_in_base(poses))
    assert np.linalg.norm(c.cop - tw.com_xy()) < 0.5e-3  # static equilibrium: CoP = CoM projection
    assert c.total_kg == pytest.approx(true_parameters(model).total_mass, rel=1e-3)
    assert c.per_board_kg.min() > 1.0  # both feet carry load
    assert tw.events == []


def test_soft_p_only_servos_let_the_robot_collapse(model, plan):
    """X-series default position gain (P = 800), no gravity compensation: the knees give way (thesis §4)."""
    tw, _ = _stand(model, plan, 0, ServoModel(p_gain=800))
    assert "fall" in {e.kind for e in tw.events}


def test_joint_torque_limit_makes_a_deep_posture_fall(model, plan):
    tw, _ = _stand(model, plan, 2, ServoModel(p_gain=6000))
    assert "fall" in {e.kind for e in tw.events}
    assert np.abs(tw.d.actuator_force).max() == pytest.approx(model.effort_limit.max(), rel=1e-6)


@pytest.mark.parametrize("deadband", [True, False])
def test_servo_p_action_has_the_firmwares_half_tick_deadband(model, deadband):
    """X-series firmware: PWM = P · (goal ticks − present ticks) / 128 — no force while the encoder reads the
    goal tick (within ½ tick), kp·error from one tick off; without the deadband, kp·error at any error."""
    tw = Twin(model, true_parameters(model), TwinOptions(servo=ServoModel(p_gain=800, deadband=deadband)))
    j = 0
    tw.set_torque(j, True)
    tick = 1.0 / tw.ticks_per_rad
    goal = 300 * tick  # a whole tick: the goal the firmware holds
    tw.set_goal(j, goal)
    kp = tw._kp[j]
    for frac in (0.3, -0.4, 0.7, 1.6):
        tw.d.qpos[tw.qadr[j]] = goal + frac * tick
        tw.d.qvel[:] = 0.0
        tw.run_steps(1)
        force = tw.d.actuator_force[j]
        ticks_off = np.sign(frac) * min(max(2 * abs(frac) - 1, 0.0), abs(frac)) if deadband else frac
        assert force == pytest.approx(-kp * ticks_off * tick, abs=1e-3 * kp * tick), frac
    tw.close()


def test_twin_servos_hold_with_the_gain_written_to_their_register(model, plan):
    """The bus emulator passes each write of Position P Gain (register 84) to the twin: the same loaded posture,
    the register written to 800 (factory) or 6000 by the real driver, sags ~7.5 times more at 800."""
    from drivers.config import servo_order
    from drivers.dynamixel import DynamixelLink
    from drivers.emulators.dxl_bus import DxlBusEmulator
    from drivers.emulators.standing import FROZEN_CLOCK

    cfg = load_config()
    servos = servo_order(cfg, model.joint_names)
    p = plan.postures[1]
    poses = board_poses_for(np.array(plan.placement(p.placement).other_foot), cfg.right_board, cfg.left_board)
    err = {}
    for gain in (800, 6000):
        opts = TwinOptions(servo=ServoModel(p_gain=3000), time_scale=FROZEN_CLOCK)  # time runs by settle_sim
        tw = Twin(model, true_parameters(model), opts)
        bus = DxlBusEmulator(servos, tw)
        try:
            np.testing.assert_array_equal(tw.p_gain, 800)  # the servos power on at the factory gain
            link = DynamixelLink(bus.path, servos, model.joint_names, baud=cfg.baud, position_p_gain=gain)
            link.connect()
            try:
                link.command(p.q)
                tw.settle_sim(1.0)
                tw.place(poses)
                tw.settle_sim(2.0)
                q = link.read()
            finally:
                link.close()
        finally:
            bus.close()
            tw.close()
        np.testing.assert_array_equal(tw.p_gain, gain)
        assert "fall" not in {e.kind for e in tw.events}
        err[gain] = float(np.degrees(np.abs(q - p.q).max()))
    assert err[6000] < 1.0
    assert err[800] > 4 * err[6000], err


def test_bench_servos_power_on_at_the_factory_gain_unless_the_controller_has_no_gain_register(model):
    """Emulated Dynamixel servos start at P = 800 until the link writes register 84; the framed protocol has no
    gain register, so its emulated controller runs the configured gain as its own."""
    from drivers.emulators.world import SimWorld

    cfg = load_config()
    for bus, expect in (("dxl", 800), ("framed", cfg.executor.position_p_gain)):
        world = SimWorld(model, cfg, WorldOptions(noise=False, physics="mujoco", bus=bus))
        try:
            np.testing.assert_array_equal(world.twin.p_gain, expect)
        finally:
            world.close()
    assert cfg.executor.position_p_gain == 6000


def test_plan_runs_through_the_real_drivers_on_the_twin(model, plan, tmp_path):
    two = random_plan(model, 2, seed=4, move_s=1.0, hold_s=4.0)
    sessions, seen = [], {}

    def progress(p):
        if p.phase == "hold" and sessions:
            seen[p.posture] = sessions[0].world.twin.com_xy()  # the twin's own CoM, at the end of the hold

    args = argparse.Namespace(plan="p.json", robot="sim", boards="sim", out=str(tmp_path / "run"), resume=False,
                              time_scale=4.0, yes=True)  # fmt: skip
    opts = WorldOptions(noise=False, physics="mujoco", time_scale=4.0)
    result, run_dir = cmd_run.execute(args, model, two, load_config(), world_opts=opts, progress=progress,
                                      prepare=sessions.append)  # fmt: skip
    rec = read_recording(run_dir / "recording.csv")
    assert list(rec.posture) == [0, 1]
    for i, k in enumerate(rec.posture):
        assert np.linalg.norm(rec.cop[i] - seen[k]) < 3e-3
    np.testing.assert_allclose(
        rec.q, two.q, atol=np.radians(1.0)
    )  # stiff servos: within a degree of the plan
    assert sessions[0].world.twin.events == []
    np.testing.assert_array_equal(sessions[0].world.twin.p_gain, 6000)  # the configured gain, over the bus
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["position_p_gain"] == 6000 and meta["position_p_gain_configured"] == 6000


def _toward_edge(model, plan, index: int, inside: float) -> tuple[np.ndarray, float]:
    """Posture `index` moved along its closed chain until its true CoP is `inside` m from the nearest edge of
    the support polygon; returns the posture and the achieved true margin (m)."""
    from shapely.geometry import MultiPoint, Point
    from shapely.ops import nearest_points

    from robots.chain_path import project_to_chain
    from robots.kinematics import com_position
    from robots.stance import foot_corners

    truth = true_parameters(model)
    p = plan.postures[index]
    pose = plan.placement(p.placement).other_foot
    poly = MultiPoint(np.concatenate(list(foot_corners(model, p.q, "sim", "right").values()))).convex_hull
    q = p.q.copy()
    for _ in range(4):
        c = com_position(model, q, truth, "right")[:2]
        e = np.array(nearest_points(poly.exterior, Point(c))[0].coords[0])
        inward = (c - e) / np.linalg.norm(c - e) * (1 if poly.contains(Point(c)) else -1)
        shift = e + inside * inward - c
        target = com_position(model, q, "sim", "right")[:2] + shift
        q = project_to_chain(model, q[None], pose, target[None], "sim", "right")[0]
    c = Point(com_position(model, q, truth, "right")[:2])
    return q, poly.exterior.distance(c) * (1 if poly.contains(c) else -1)


def test_posture_near_the_polygon_edge_falls_where_poise_margin_stands(model, plan):
    """Thesis failure modes: P-only servos sag under load (no gravity compensation), so a posture whose true CoP
    is 40 mm inside the support polygon tips over on the twin, and one 50 mm inside rocks onto a sole's edge (and
    back); the same posture at poise's 80 mm design margin stands."""
    pose = plan.placement(plan.postures[0].placement).other_foot
    cfg = load_config()
    falls = {}
    for inside in (0.04, 0.05, 0.08):
        q, m = _toward_edge(model, plan, 0, inside)
        assert m == pytest.approx(inside, abs=1e-3)
        tw = Twin(model, true_parameters(model), TwinOptions(servo=ServoModel(p_gain=6000)))
        for k in range(model.nq):
            tw.set_torque(k, True)
            tw.set_goal(k, q[k])
        tw.settle_sim(1.0)
        tw.place(board_poses_for(np.array(pose), cfg.right_board, cfg.left_board))
        tw.settle_sim(4.0)
        falls[inside] = {e.kind for e in tw.events}
    assert "fall" in falls[0.04]
    assert falls[0.05] == {"edge"}
    assert falls[0.08] == set()


def test_plain_joint_interpolation_drags_a_foot_and_is_detected(model, tmp_path):
    """Thesis failure mode: plain joint-space interpolation between two double-support postures moves the
    other sole (a closed chain). On the twin it drags or lifts that sole; the shared per-tick path check that
    plan check and the executor run flags those setpoints, and passes the planned closed-chain transition."""
    from formats.plan import load_plan
    from poise.cli import main
    from robots.chain_path import ground_path, path_issues

    out = tmp_path / "p.json"
    argv = ["plan", "postures", "tulip", "--postures", "15", "--placements", "3", "--load-share", "0.25",
            "--seed", "1", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    plan = load_plan(out, model)
    tr = max((t for t in plan.transitions if not t.lifted), key=lambda t: t.foot_error_interp)
    assert tr.foot_error_interp > 0.01  # plain interpolation would move the other sole > 10 mm
    by = {p.index: p for p in plan.postures}
    a, b = by[tr.from_index], by[tr.to_index]
    pose = plan.placement(a.placement).other_foot
    n = 200
    plain = np.array([a.q + (b.q - a.q) * (0.5 - 0.5 * np.cos(np.pi * i / n)) for i in range(1, n + 1)])
    issues = path_issues(model, plain, 1, pose, plan.params, plan.base, 0.0, "plain")
    assert issues and ("other sole" in issues[0])
    planned = ground_path(model, tr.q, 20 * (len(tr.q) - 1), False, pose, plan.params, plan.base)
    assert path_issues(model, planned, len(tr.q) - 1, pose, plan.params, plan.base, 0.0, "planned") == []
    cfg = load_config()
    tw = Twin(model, true_parameters(model), TwinOptions(servo=ServoModel(p_gain=6000)))
    for k in range(model.nq):
        tw.set_torque(k, True)
        tw.set_goal(k, a.q[k])
    tw.settle_sim(1.0)
    tw.place(board_poses_for(np.array(pose), cfg.right_board, cfg.left_board))
    tw.settle_sim(2.0)
    from robots.stance import other_site

    other = other_site(model, plan.base)
    start = tw.d.site_xpos[tw.site_ids[other]].copy()
    for q in plain:  # 4 s of plain interpolation, a setpoint every 20 ms
        for k in range(model.nq):
            tw.set_goal(k, q[k])
        tw.settle_sim(0.02)
    tw.settle_sim(1.0)
    moved = float(np.linalg.norm(tw.d.site_xpos[tw.site_ids[other]] - start))
    kinds = {e.kind for e in tw.events}
    print(
        f"plain interpolation: foot error {tr.foot_error_interp * 1000:.1f} mm, sole moved {moved * 1000:.1f} mm, {kinds}"
    )
    assert moved > 0.005 or kinds & {"lift", "slip", "edge", "fall"}  # dragged, lifted or tipped


def _sway(model, plan, clamp: bool) -> tuple[Twin, list, np.ndarray]:
    """Posture 0 standing, then 2 s of hip/knee sway at 0.5 Hz; returns the twin, the boards' poses and where
    the soles stood before the sway (base frame, m)."""
    cfg = load_config()
    tw = Twin(model, true_parameters(model), TwinOptions(servo=ServoModel(p_gain=6000), clamp_soles=clamp))
    q0 = plan.postures[0].q
    for k in range(model.nq):
        tw.set_torque(k, True)
        tw.set_goal(k, q0[k])
    tw.settle_sim(1.0)
    poses = board_poses_for(np.array(plan.placement(plan.postures[0].placement).other_foot), cfg.right_board,
                            cfg.left_board)  # fmt: skip
    tw.place(poses)
    tw.settle_sim(2.0)
    before = np.array([tw.d.site_xpos[tw.site_ids[s]][:2] for s in tw.soles])
    for i in range(200):
        for k in range(0, model.nq, 3):
            tw.set_goal(k, q0[k] + 0.05 * np.sin(np.pi * i * 0.01))
        tw.settle_sim(0.01)
    for k in range(model.nq):
        tw.set_goal(k, q0[k])
    tw.settle_sim(2.0)  # at rest again
    return tw, poses, before


def _sole_state(tw: Twin) -> tuple[float, float]:
    """Largest sole tilt (deg) and slide from where it was set down (mm)."""
    tilt = max(np.degrees(np.arccos(min(1.0, tw.d.site_xmat[tw.site_ids[s]][8]))) for s in tw.soles)
    slide = max(np.linalg.norm(tw.d.site_xpos[tw.site_ids[s]][:2] - tw._placed_at[s][:2]) for s in tw.soles)
    return float(tilt), 1000 * float(slide)


def test_clamped_soles_stay_flat_and_fixed_while_free_ones_rock(model, plan):
    """--clamp-soles: the straps of a double-support dynamic experiment hold both soles flat where they stand, so
    the model's fixed-feet assumption holds; the boards still weigh everything (the straps' pull included); the
    free-standing soles creep under the same sway (measured 2.1 mm; strapped 0.004 mm); lifting the robot
    releases the straps."""
    free, _, free_before = _sway(model, plan, clamp=False)
    clamped, poses, before = _sway(model, plan, clamp=True)

    def creep(tw, at):
        return 1000 * max(
            np.linalg.norm(tw.d.site_xpos[tw.site_ids[s]][:2] - at[k]) for k, s in enumerate(tw.soles)
        )

    tilt, slide = _sole_state(clamped)
    print(f"sway creep free {creep(free, free_before):.3f} mm, clamped {creep(clamped, before):.3f} mm")
    assert tilt < 0.05 and slide < 0.5  # the landing's settling (before the straps) included
    assert creep(clamped, before) < 0.05 and creep(free, free_before) > 10 * creep(clamped, before)
    assert clamped.events == []
    c = cop(clamped.cell_loads(), cells_in_base(poses))
    assert np.linalg.norm(c.cop - clamped.com_xy()) < 0.5e-3
    assert c.total_kg == pytest.approx(true_parameters(model).total_mass, rel=1e-3)
    straps = list(clamped.straps.values())
    assert clamped.d.eq_active[straps].sum() == len(clamped.soles)  # each sole to the board under it
    clamped.lift()
    assert clamped.d.eq_active[straps].sum() == 0


def test_averaging_boards_repeat_their_last_mean_when_no_physics_step_ran(model, plan):
    """A board report with no physics step since the board's previous one carries that report's mean again (the
    converter's latest conversion), never the instant's load: the physics thread steps in chunks ending with the
    servos' goal writes, where the tick-rate force steps peak, and those instants biased the dynamic recording's
    Fz by ~4 N rms at low frequency (issue 13)."""
    from drivers.emulators.standing import FROZEN_CLOCK

    # simulated time runs only by settle_sim
    tw, _ = _stand(
        model, plan, 0, ServoModel(p_gain=6000), 0.5, time_scale=FROZEN_CLOCK, board_averaging=True
    )
    tw.board_load(0)(), tw.board_load(1)()  # reports before the step
    for k in range(model.nq):
        tw.set_goal(k, plan.postures[0].q[k] + 0.01)  # a goal step: a force transient on the plates
    tw.settle_sim(0.005)
    means = [tw.board_load(i)() for i in range(2)]
    instant = tw.cell_loads()
    again = [tw.board_load(i)() for i in range(2)]  # no step since
    np.testing.assert_array_equal(np.concatenate(again), np.concatenate(means))
    # the instant's load differs: it is not what is reported
    assert np.abs(np.concatenate(means) - instant).max() > 1e-3


def test_trace_records_the_plates_wrench_that_newton_asks_for(model, plan):
    """The per-step trace (`TwinOptions.trace`, what `poise run --twin-trace` saves for bench/twin_misfit.py): the
    plates' vertical force is the robot's weight plus M z̈ of its own CoM through a goal step's transient, and at
    rest their moments about the floor origin are those of the weight at the CoM."""
    from scipy.signal import butter, sosfiltfilt

    tw, _ = _stand(model, plan, 0, ServoModel(p_gain=6000), 0.5, trace=True)
    for k in range(model.nq):
        tw.set_goal(k, plan.postures[0].q[k] + 0.02)  # a goal step: the CoM moves, the plates' load swings
    tw.settle_sim(4.0)  # the P-only servos let the robot sway for a few seconds
    tr = tw.trace_arrays()
    assert tr["q"].shape == (len(tr["t"]), model.nq) and np.all(np.diff(tr["t"]) > 0)
    M, g = true_parameters(model).total_mass, 9.80665
    sos = butter(4, 20.0, fs=1000.0, output="sos")
    cz = sosfiltfilt(sos, tr["com"][:, 2])
    zdd = np.gradient(np.gradient(cz, tr["t"]), tr["t"])
    fz = sosfiltfilt(sos, tr["force"][:, 2])
    inner = slice(100, -100)
    swing = np.ptp(fz[inner])
    assert swing > 1.0  # the step did move the load
    assert np.abs(fz - M * (g + zdd))[inner].max() < 0.02 * swing
    c = tr["com"][-1]
    np.testing.assert_allclose(tr["moment"][-1, :2], [M * g * c[1], -M * g * c[0]], rtol=2e-3)  # 0.1 N·m


def test_trace_rows_pair_each_steps_forces_with_the_state_they_act_at(model, plan):
    """A trace row's time, angles and whole state are those the step's forward pass computed its CoM and contact
    forces at (mj_step integrates after them): MuJoCo's CoM from the row's qpos is the row's CoM. Rows used to take
    the angles after the step, a step ahead of the forces, and the boards' windows the same way: the plates then
    seemed to lag the angles by 1.4 ms where their contacts' compliance makes 0.4 ms (issue 13)."""
    import mujoco

    tw, _ = _stand(model, plan, 0, ServoModel(p_gain=6000), 0.5, trace=True)
    for k in range(model.nq):
        tw.set_goal(k, plan.postures[0].q[k] + 0.02)
    tw.settle_sim(0.3)
    tr = tw.trace_arrays()
    assert tr["qpos"].shape == (len(tr["t"]), tw.m.nq) and tr["qacc"].shape == (len(tr["t"]), tw.m.nv)
    np.testing.assert_array_equal(tr["q"], tr["qpos"][:, tw.qadr])
    # each plate's share of the wrench: they add up to the whole
    assert tr["board_force"].shape == tr["board_moment"].shape == (len(tr["t"]), 2, 3)
    assert tr["board_force"][:, :, 2].max() > 100  # N: the robot's weight on them
    np.testing.assert_allclose(tr["board_force"].sum(axis=1), tr["force"], atol=1e-9)
    np.testing.assert_allclose(tr["board_moment"].sum(axis=1), tr["moment"], atol=1e-9)
    d = mujoco.MjData(tw.m)
    rows = range(len(tr["t"]) - 300, len(tr["t"]))  # through the goal step's transient
    com = []
    for k in rows:
        d.qpos[:] = tr["qpos"][k]
        mujoco.mj_kinematics(tw.m, d)
        mujoco.mj_comPos(tw.m, d)
        com.append(d.subtree_com[tw.root].copy())
    step = np.abs(np.diff(tr["com"][list(rows)], axis=0)).max()
    assert step > 1e-6  # the CoM moves between steps: a row a step off would show
    np.testing.assert_allclose(com, tr["com"][list(rows)], atol=1e-9)


def test_board_conversions_are_the_plates_load_over_fixed_windows_of_simulated_time(model, plan):
    """`board_conversion_s` (what `poise run` uses for trajectories): each board reports once per window of its
    own clock, the simulated time, with the plates' mean load over that window — through a goal step's force
    transient, where the load changes within a window — whenever the emulator asks."""
    conv_s = 0.0125
    tw, _ = _stand(model, plan, 0, ServoModel(p_gain=6000), 0.3, trace=True, board_averaging=True,
                   board_conversion_s=conv_s)  # fmt: skip
    for k in range(model.nq):
        tw.set_goal(k, plan.postures[0].q[k] + 0.02)
    tw.settle_sim(0.2)
    conv = [np.array(tw.board_conversions(i)()) for i in range(2)]
    assert len(conv[0]) == len(conv[1]) >= 35 and tw.board_conversions(0)() == []  # each reported once
    tr = tw.trace_arrays()
    window = np.floor(tr["t"] / conv_s + 1e-9)
    means = [tr["force"][window == w, 2].mean() for w in np.unique(window)[: len(conv[0])]]
    reported = (conv[0].sum(axis=1) + conv[1].sum(axis=1)) * 9.80665
    np.testing.assert_allclose(reported, means, atol=1e-6)
    assert np.ptp(means) > 1.0  # the step did change the load between windows
