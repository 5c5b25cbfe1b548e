"""`poise plan sample`: a trajectory plan's setpoints on a uniform grid for a controller poise does not drive —
exactly the plan's motion (q, q̇, q̈ at every step, feed-forward torques from RNEA), ending at its end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from drivers.trajectory_run import tick_times
from formats.errors import DataError
from formats.setpoints import read_setpoints
from formats.trajectory_plan import load_trajectory_plan, plan_digest
from poise.cli import main
from robots import dynamics as dyn
from trajectories.plan import plan_model, plan_trajectory

DATA = Path(__file__).parent / "data"


def test_an_arms_setpoints_are_its_plan_sampled_with_feed_forward_torques(tmp_path, capsys):
    out = tmp_path / "sp.csv"
    assert main(["plan", "sample", str(DATA / "ur5_6s.json"), "--out", str(out), "--rate-hz", "200",
                 "--torques", "--json"]) == 0  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    sp = read_setpoints(out)
    plan = load_trajectory_plan(DATA / "ur5_6s.json")
    model = plan_model(plan)
    traj = plan_trajectory(plan, model)
    assert summary["samples"] == len(sp.t) == 1201 and sp.meta["plan_sha256"] == plan_digest(plan)
    np.testing.assert_allclose(np.diff(sp.t), 1 / 200, atol=1e-12)
    assert sp.t[-1] == traj.duration and sp.joint_names == list(model.joint_names)
    for mine, theirs in zip((sp.q, sp.qd, sp.qdd), traj.sample(sp.t), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-10)
    tau = dyn.rnea(model, sp.q, sp.qd, sp.qdd, plan.params, plan.base)
    np.testing.assert_allclose(sp.tau, tau, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(summary["start_rad"], traj.sample([0.0])[0][0], atol=1e-12)
    assert np.abs(sp.qd[[0, -1]]).max() < 1e-9  # at rest where the stream starts and ends
    # the file says its columns' units itself, once (the metadata written back does not repeat them)
    head = [line for line in out.read_text().splitlines() if line.startswith("#")]
    assert [line for line in head if line.startswith("# units:")] == [
        "# units: t_s s; q rad (m prismatic); qd rad/s (m/s); qdd rad/s² (m/s²); tau N·m (N)"]  # fmt: skip


def test_a_rate_that_does_not_divide_the_duration_ends_on_a_shorter_step():
    np.testing.assert_allclose(tick_times(1.0, 2.5), [0.0, 0.4, 0.8, 1.0], atol=1e-15)
    assert tick_times(1.0, 2.5)[-1] == 1.0
    assert len(tick_times(6.0, 100.0)) == 601


def test_a_standing_plans_setpoints_have_no_torques(tmp_path, capsys):
    plan = str(DATA / "tulip_double_support_10s.json")
    assert main(["plan", "sample", plan, "--out", str(tmp_path / "a.csv"), "--torques"]) == 2
    assert "fixed-base arm" in capsys.readouterr().err and not (tmp_path / "a.csv").exists()
    assert main(["plan", "sample", plan, "--out", str(tmp_path / "b.csv")]) == 0
    sp = read_setpoints(tmp_path / "b.csv")
    assert sp.tau is None and sp.q.shape == (1001, len(sp.joint_names))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda lines: ["# something else"] + lines[1:], "not poise setpoints"),
        (lambda lines: lines[:-1] + ["1,2,3"], "malformed number"),
        (lambda lines: lines[:-1] + [",".join(["nan"] * 19)], "finite numbers"),
        (
            lambda lines: [x.replace("qd:", "qv:") if x.startswith("t_s") else x for x in lines],
            "columns must be",
        ),
        (lambda lines: lines[:-2] + [lines[-1], lines[-2]], "strictly increasing"),
    ],
)
def test_bad_setpoint_files_are_one_line_errors(tmp_path, capsys, edit, message):
    assert main(["plan", "sample", str(DATA / "ur5_6s.json"), "--out", str(tmp_path / "sp.csv")]) == 0
    lines = (tmp_path / "sp.csv").read_text().splitlines()
    (tmp_path / "bad.csv").write_text("\n".join(edit(lines)) + "\n")
    with pytest.raises(DataError, match=message):
        read_setpoints(tmp_path / "bad.csv")
