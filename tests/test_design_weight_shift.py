"""`plan trajectory --single-support` hands out only a start whose run's weight shifts from both soles pass, checked
as `plan check` and `poise run` plan them (`drivers.single_support_stream.plan_transitions`, via
`poise.cmd_plan_trajectory.weight_shift_start`): the best start refused for its weight shift and the next one
handed out, an error naming the best start's problem (exit 2, `--json` too) when none passes, and "not checked"
for a robot without a run configuration. No design: the starts are motionless plans at two nominal postures
(`trajectories.single_support.nominal_posture`), the multi-start replaced by them."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import drivers.config
import trajectories.multistart
from formats.trajectory_plan import load_trajectory_plan
from poise.cli import main
from trajectories.excitation import ExcitationResult, ExcitationSettings
from trajectories.fourier import FourierTrajectory
from trajectories.single_support import SingleSupportTrajectory, nominal_posture

MARGIN, LIFT = 0.02, 0.02
ARGS = ["plan", "trajectory", "tulip", "--single-support", "--simplified", "--zmp-margin", str(MARGIN),
        "--lift", str(LIFT), "--params", "sim"]  # fmt: skip
# what the design's table prints of a verification (the starts are motionless: nothing near a limit)
VERIFIED = {"ok": True, "problems": [], "min_position_margin_rad": 0.1, "velocity_ratio": 0.0,
            "acceleration_ratio": 0.0, "torque_ratio": None, "dt": 0.002}  # fmt: skip


def _posture(tulip, tilt_deg: float) -> np.ndarray:
    s = ExcitationSettings(base="right", zmp_margin=MARGIN, lift=LIFT, max_sole_tilt=math.radians(tilt_deg))
    return nominal_posture(tulip, "right", "sim", s)


HIP_ROLL = 7  # the free (left) leg's hip roll
SHIFT_FAILS = (
    "no weight shift onto the right sole: no posture with the sole_l sole on the ground puts the CoM"
)


@pytest.fixture(scope="module")
def postures(tulip):
    """(refused, passing) start postures: the nominal posture with the lifted sole tilted up to 20° (passing), and
    it with the free leg swung 0.25 rad outward: standing on both soles that wide, nothing puts the CoM over the
    right sole (`test_weight_shift_plans`)."""
    passing = _posture(tulip, 20.0)
    return passing + np.eye(tulip.nq)[HIP_ROLL] * 0.25, passing


def _start(q0: np.ndarray, seed: int, kappa: float) -> ExcitationResult:
    """A verified start standing still at q0 (what `design_starts` returns, criterion κ)."""
    z = np.zeros((q0.size, 1))
    traj = SingleSupportTrajectory(FourierTrajectory(2.0, 2.0, q0, z, z), "right", "sole_l", LIFT, 0.25,
                                   math.radians(30.0))  # fmt: skip
    return ExcitationResult(traj, 10 * kappa, kappa, 0.0, 1, 0.1, "Solve_Succeeded", ["m"], base="right",
                            params="sim", verification=dict(VERIFIED), seed=seed)  # fmt: skip


@pytest.fixture
def starts(monkeypatch):
    """Replace the multi-start by the given results (best first), as the CLI calls it."""

    def use(*results: ExcitationResult) -> None:
        def design_starts(robot, settings, seed=1, starts=1, workers=None, on_result=None, *rest):
            for k, r in enumerate(results):
                if on_result:
                    on_result(k, r)
            return list(results)

        monkeypatch.setattr(trajectories.multistart, "design_starts", design_starts)

    return use


def test_the_best_start_refused_for_its_weight_shift_the_next_handed_out(postures, starts, tmp_path, capsys):
    refused, passing = postures
    starts(_start(refused, 5, 10.0), _start(passing, 6, 20.0))
    out = tmp_path / "ss.json"
    assert main([*ARGS, "--starts", "2", "--out", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    ws = s["weight_shift"]
    assert s["ok"] and ws["checked"] and ws["seed"] == 6 and s["kappa_scaled"] == 20.0
    assert ws["config"].endswith("tulip_robot.toml") and ws["transitions"]["feasible"]
    assert [r["seed"] for r in ws["refused"]] == [5]
    assert ws["refused"][0]["problems"][0].startswith(SHIFT_FAILS)
    plan = load_trajectory_plan(out)  # the passing start written, and `plan check` agrees on it
    assert np.allclose(plan.trajectory["motion"]["q0"], passing)
    assert main(["plan", "check", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["weight_shift"]["feasible"]
    # the table says so too
    assert main([*ARGS, "--starts", "2", "--out", str(out), "--force"]) == 0
    assert "pass (start seed 6; 1 better start(s) refused)" in capsys.readouterr().out


def test_no_start_passes_exit_2_naming_the_best_starts_problem(postures, starts, tmp_path, capsys):
    starts(_start(postures[0], 5, 10.0))
    out = tmp_path / "ss.json"
    assert main([*ARGS, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("poise: error: no start's weight shift from both soles passes `plan check`")
    assert "seed 5" in lines[0] and SHIFT_FAILS in lines[0] and "not written" in lines[0]
    assert not out.exists()
    assert main([*ARGS, "--out", str(out), "--json"]) == 2
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert not s["ok"] and s["out"] is None and s["error"] in cap.err
    assert s["weight_shift"]["checked"] and s["weight_shift"]["seed"] is None
    assert s["weight_shift"]["refused"][0]["seed"] == 5 and s["weight_shift"]["refused"][0]["problems"]
    assert not out.exists()


def test_a_robot_without_run_configuration_is_not_checked(postures, starts, tmp_path, monkeypatch, capsys):
    other = tmp_path / "ur5.toml"
    other.write_text('robot = "ur5"\n')
    monkeypatch.setattr(drivers.config, "DEFAULT_CONFIG", other)  # the bundled configuration: another robot's
    # a posture `plan check` passes (the wide one tilts the lifted sole 30.1°)
    starts(_start(postures[1], 5, 10.0))
    out = tmp_path / "ss.json"
    assert main([*ARGS, "--out", str(out), "--json"]) == 0
    ws = json.loads(capsys.readouterr().out)["weight_shift"]
    assert not ws["checked"] and "no run configuration for 'tulip'" in ws["why"]
    assert main([*ARGS, "--out", str(out), "--force"]) == 0
    assert "not checked: no run configuration" in capsys.readouterr().out
