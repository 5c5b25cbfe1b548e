"""`plan trajectory` writes the first ranked start whose plan `plan check` passes (`poise.cmd_plan_trajectory.
plan_checked_start`, the rule the weight shifts of a single-support design follow): the designer's own check ranks
the starts, and under --no-self-collision it skips the links that meet, which `plan check` holds apart at 0 mm.
The better start refused and the next written (the table and the JSON say which and why); none passing, the best
written and refused by `poise run` (exit 1); the best passing, no other start checked. No design: the starts are
two-harmonic motions of a two-joint arm beside a table, the multi-start replaced by them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import poise.cmd_plan_trajectory as cmd
import trajectories.multistart
from formats.trajectory_plan import load_trajectory_plan
from poise.cli import main
from robots.registry import get_model
from trajectories.excitation import ExcitationResult
from trajectories.fourier import FourierTrajectory

PERIOD = 6.0
DESIGN = ["--duration", "6", "--period", "6", "--harmonics", "2", "--no-self-collision"]
# what the designer's own check said of every start: verified (it skipped self-collision)
VERIFIED = {"ok": True, "problems": [], "min_position_margin_rad": 0.1, "velocity_ratio": 0.1,
            "acceleration_ratio": 0.1, "torque_ratio": 0.1, "dt": 0.002}  # fmt: skip
INERTIAL = ('<inertial><origin xyz="0.15 0 0"/><mass value="{m}"/><inertia ixx="0.01" iyy="0.01" izz="0.01" '
            'ixy="0" ixz="0" iyz="0"/></inertial>')  # fmt: skip
# j2 turns l2 down (about y): level it clears the table top 0.18 m below, at 1.5 rad it sweeps through it
CLEAR, THROUGH, THROUGH_TOO = (0.0, 0.0), (0.0, 1.5), (0.3, 1.4)


def _table_arm(path: Path) -> Path:
    """A two-joint arm (base → l1 → l2, 0.3 m links) standing on a table (a disc on its base link)."""
    box = '<collision><origin xyz="0.15 0 0"/><geometry><box size="0.3 0.03 0.03"/></geometry></collision>'
    path.write_text(f"""<robot name="table_arm">
 <link name="base"><collision><origin xyz="0 0 -0.2"/><geometry><cylinder radius="0.45" length="0.04"/></geometry>
  </collision></link>
 <link name="l1">{INERTIAL.format(m=1.0)}{box}</link>
 <link name="l2">{INERTIAL.format(m=0.5)}{box}</link>
 <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
  <limit lower="-2.5" upper="2.5" effort="20" velocity="3"/></joint>
 <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0"/><axis xyz="0 1 0"/>
  <limit lower="-2" upper="2" effort="10" velocity="3"/></joint>
</robot>
""")
    return path


@pytest.fixture(scope="module")
def arm(tmp_path_factory) -> Path:
    return _table_arm(tmp_path_factory.mktemp("promotion") / "table_arm.urdf")


def _start(arm: Path, q0, seed: int, kappa: float) -> ExcitationResult:
    """A start verified by the designer's own check, swinging both joints about q0 from rest (a − a: q̇ = q̈ = 0
    at t = 0), criterion κ."""
    model = get_model(str(arm))
    amplitude = np.array([[0.5, -0.5], [0.3, -0.3]])
    traj = FourierTrajectory(PERIOD, PERIOD, np.asarray(q0, float), amplitude, np.zeros((2, 2)))
    return ExcitationResult(traj, 10 * kappa, kappa, 0.0, 1, 0.1, "Solve_Succeeded", ["m"], base=model.root,
                            params=next(iter(model.params)), verification=dict(VERIFIED), seed=seed)  # fmt: skip


@pytest.fixture
def starts(monkeypatch):
    """Replace the multi-start by the given results (best first), as the CLI calls it: fresh ones each design (it
    sets the written start's verification)."""

    def use(*given: ExcitationResult) -> None:
        def design_starts(robot, settings, seed=1, starts=1, workers=None, on_result=None, *rest):
            results = [replace(r, verification=dict(r.verification)) for r in given]
            for k, r in enumerate(results):
                if on_result:
                    on_result(k, r)
            return results

        monkeypatch.setattr(trajectories.multistart, "design_starts", design_starts)

    return use


@pytest.fixture
def plan_checks(monkeypatch) -> list[int]:
    """The seeds of the plans `plan check`'s verdict was run on, in order."""
    seeds, check = [], cmd.plan_check_verification

    def spy(path, plan):
        seeds.append(plan.seed)
        return check(path, plan)

    monkeypatch.setattr(cmd, "plan_check_verification", spy)
    return seeds


def test_the_best_start_failing_plan_check_the_next_written(arm, starts, plan_checks, tmp_path, capsys):
    starts(_start(arm, THROUGH, 5, 10.0), _start(arm, CLEAR, 6, 20.0))
    out = tmp_path / "p.json"
    assert main(["plan", "trajectory", str(arm), *DESIGN, "--starts", "2", "--out", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert plan_checks == [5, 6]
    assert s["ok"] and s["seed"] == 6 and s["kappa_scaled"] == 20.0 and not s["verification"]["problems"]
    pc = s["plan_check"]
    assert pc["seed"] == 6 and [r["seed"] for r in pc["refused"]] == [5]
    assert any("base–l2 come" in p for p in pc["refused"][0]["problems"])
    plan = load_trajectory_plan(out)  # the passing start written, and `plan check` agrees on it
    assert plan.seed == 6 and np.allclose(plan.trajectory["q0"], CLEAR)
    assert plan.design["kappa_scaled"] == 20.0 and plan.design["verification"]["ok"]
    assert main(["plan", "check", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]
    # the table says so too, and stderr why
    argv = ["plan", "trajectory", str(arm), *DESIGN, "--starts", "2", "--out", str(out), "--force"]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert "pass (start seed 6; 1 better start(s) refused)" in cap.out
    note = " ".join(cap.err.split())
    assert "`plan check` refused 1 better start(s) (seed 5 (κ scaled 10): " in note and "base–l2 come" in note
    assert "start seed 6 written" in note


def test_no_start_passes_the_best_written_and_refused(arm, starts, plan_checks, tmp_path, capsys):
    starts(_start(arm, THROUGH, 5, 10.0), _start(arm, THROUGH_TOO, 7, 20.0))
    out = tmp_path / "p.json"
    argv = ["plan", "trajectory", str(arm), *DESIGN, "--starts", "2", "--out", str(out)]
    assert main([*argv, "--json"]) == 1
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert plan_checks == [5, 7]
    assert not s["ok"] and s["seed"] == 5 and s["plan_check"]["seed"] is None
    assert [r["seed"] for r in s["plan_check"]["refused"]] == [5, 7]
    assert s["verification"]["problems"] == s["plan_check"]["refused"][0]["problems"]
    assert "2 refused" in cap.err and "poise run` refuses it" in cap.err
    plan = load_trajectory_plan(out)  # the best start written, failing
    assert (
        plan.seed == 5
        and np.allclose(plan.trajectory["q0"], THROUGH)
        and not plan.design["verification"]["ok"]
    )
    assert main(["plan", "check", str(out)]) == 1
    capsys.readouterr()
    assert main([*argv, "--force"]) == 1
    cap = capsys.readouterr()
    assert "fail (2 verified start(s) refused)" in cap.out, cap.out
    assert "better start(s)" not in cap.err


def test_the_best_passing_no_other_start_is_checked(arm, starts, plan_checks, tmp_path, capsys):
    starts(_start(arm, CLEAR, 6, 10.0), _start(arm, THROUGH, 5, 20.0))
    out = tmp_path / "p.json"
    assert main(["plan", "trajectory", str(arm), *DESIGN, "--starts", "2", "--out", str(out), "--json"]) == 0
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert plan_checks == [6] and "better start(s)" not in cap.err
    assert s["ok"] and s["seed"] == 6 and s["plan_check"] == {"seed": 6, "refused": []}
    assert load_trajectory_plan(out).seed == 6
