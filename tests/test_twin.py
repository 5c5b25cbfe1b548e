"""The MuJoCo physics twin behind the emulated bench: its boards weigh what MuJoCo's contacts carry, the thesis's
failure modes (soft P-only servos, joint torque limits) show up as falls, and the real drivers run a plan on it."""

import argparse

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


def _stand(model, plan, index, servo, seconds=4.0):
    cfg = load_config()
    tw = Twin(model, true_parameters(model), TwinOptions(servo=servo))
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
