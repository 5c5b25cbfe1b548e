"""Review of the arm's dynamic journey (fixArmPlan): placeholder limits never shown as ~0 ratios (design table,
`plan show`), ft-pwm's κ with its scaling and relative SEs, too-short recordings named with their minimum, the run's
refusal listing what `plan check --config` lists, "[executor]" kept in the run's note, and which κ `plan check`
gives for a plan designed with friction columns."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from drivers.config import DEFAULT_CONFIG
from drivers.trajectory_run import TrajectoryRunResult
from formats.trajectory_plan import TrajectoryPlan, save_trajectory_plan
from poise import cmd_run_trajectory
from poise.cli import main
from robots.description import placeholder_limits
from robots.registry import get_model
from trajectories.fourier import FourierTrajectory

ARM = "icub-right-arm"  # its URDF's velocity and effort limits are placeholders
DATA = Path(__file__).parent / "data"


def _arm_plan(tmp_path: Path, amplitude: float, friction: bool = False) -> Path:
    """A 2 s plan of the iCub arm about mid-range, each joint's first two harmonics ±`amplitude` (at rest at both
    ends)."""
    arm = get_model(ARM)
    mid = (np.asarray(arm.lower) + np.asarray(arm.upper)) / 2
    a = np.zeros((arm.nq, 2))
    a[:, 0], a[:, 1] = amplitude, -amplitude
    traj = FourierTrajectory(2.0, 2.0, mid, a, np.zeros((arm.nq, 2)))
    plan = TrajectoryPlan(arm.name, arm.root, list(arm.joint_names), traj.to_json(), params=next(iter(arm.params)),
                          settings={"friction": friction})  # fmt: skip
    path = tmp_path / f"arm_{amplitude:g}_{friction}.json"
    save_trajectory_plan(plan, path)
    return path


def _arm_config(tmp_path: Path, velocity_limit: float) -> Path:
    """The bundled executor settings for the iCub arm on a Dynamixel bus, at `velocity_limit` rad/s."""
    arm = get_model(ARM)
    head = DEFAULT_CONFIG.read_text().split("[boards]")[0].replace('robot = "tulip"', f'robot = "{ARM}"')
    head = re.sub(r"(?m)^velocity_limit\s*=.*$", f"velocity_limit = {velocity_limit}", head)
    joints = "".join(
        f'\n[[joints]]\nname = "{n}"\nid = {i + 1}\nzero = 2048\ndirection = 1\nticks_per_rad = 651.8986469\n'
        for i, n in enumerate(arm.joint_names)
    )
    path = tmp_path / "arm.toml"
    path.write_text(head + joints)
    return path


def test_design_table_shows_placeholder_limits_as_not_checked(tmp_path, capsys):
    assert set(placeholder_limits(get_model(ARM))) == {"velocity", "effort"}
    argv = ["plan", "trajectory", ARM, "--duration", "2", "--period", "2", "--harmonics", "2", "--samples", "40",
            "--max-iter", "2", "--starts", "1", "--no-self-collision", "--out", str(tmp_path / "d.json")]  # fmt: skip
    # a 2-iteration design may fail its own checks (exit 1): the table is what is looked at; never an error (2)
    assert main(argv) in (0, 1)
    cap = capsys.readouterr()
    table = " ".join(cap.out.split())
    for row in ("peak velocity / limit", "peak torque / limit"):
        assert re.search(re.escape(row) + r" │ not checked: the URDF's placeholders", table), table
    assert not re.search(r"peak (velocity|torque) / limit │ 0\.000", table)
    assert "limits are the URDF's placeholders" in " ".join(cap.err.split())


def test_show_draws_placeholder_limited_signals_in_their_units():
    from trajectories.plot import trajectory_figure

    arm = get_model(ARM)
    mid = (np.asarray(arm.lower) + np.asarray(arm.upper)) / 2
    a = np.zeros((arm.nq, 2))
    a[:, 0], a[:, 1] = 0.15, -0.15
    traj = FourierTrajectory(2.0, 2.0, mid, a, np.zeros((arm.nq, 2)))
    fig = trajectory_figure(arm, traj, arm.root, next(iter(arm.params)))
    _, vel, acc, tau = fig.axes[:4]
    assert "rad/s" in vel.get_ylabel() and "placeholder" in vel.get_ylabel()
    assert "N·m" in tau.get_ylabel() and "placeholder" in tau.get_ylabel()
    # the curves in their units (the peak |q̇| of the motion, not ~0 against a 5e4 limit), no ±1 limit lines
    t = vel.lines[0].get_xdata()
    peak = max(np.abs(ln.get_ydata()).max() for ln in vel.lines)
    assert peak == pytest.approx(np.abs(traj.sample(t)[1]).max(), rel=1e-6)
    assert len(vel.lines) == len(tau.lines) == arm.nq and len(acc.lines) == arm.nq + 2  # its ±1 kept


def test_run_refusal_lists_what_plan_check_with_the_config_lists(tmp_path, capsys):
    plan = _arm_plan(tmp_path, 2.0)  # beyond the position limits and, at 0.5 rad/s, the run's velocity limit
    config = _arm_config(tmp_path, 0.5)
    assert main(["plan", "check", str(plan), "--config", str(config), "--json"]) == 1
    checked = json.loads(capsys.readouterr().out)["problems"]
    run_said = [p for p in checked if p.startswith("run (")]
    assert run_said and len(run_said) < len(checked)  # both kinds: the plan's own checks and the setpoints'
    assert (
        main(["run", str(plan), "--robot", "sim", "--config", str(config), "--out", str(tmp_path / "r")]) == 2
    )
    err = " ".join(capsys.readouterr().err.split())
    assert f"({len(checked)} problem(s))" in err
    shown = [re.sub(r"^run \([^)]*\): ", "", p) for p in checked][: cmd_run_trajectory.SHOWN_PROBLEMS]
    assert all(" ".join(p.split()) in err for p in shown), (shown, err)
    assert not (tmp_path / "r").exists()


def test_penetrating_links_said_to_overlap():
    from robots.collision import clearance, collision_pairs
    from trajectories.verify import check_trajectory

    arm = get_model(ARM)
    cp = collision_pairs(arm)
    q = np.random.default_rng(5).uniform(arm.lower, arm.upper, size=(4000, arm.nq))
    q = q[np.all(q @ arm.coupled_A.T <= arm.coupled_b, axis=1)]
    bad = q[np.argmin(clearance(arm, cp, q).min(axis=1))]
    zeros = np.zeros((arm.nq, 1))
    still = FourierTrajectory(1.0, 1.0, bad, zeros, zeros)  # standing still with two links inside each other
    check = check_trajectory(arm, still, arm.root, "urdf", 0.01, collision_margin=0.01)
    assert check.min_self_clearance_m < 0
    (said,) = [p for p in check.problems if p.startswith("links ")]
    assert f"overlapping by {-check.min_self_clearance_m * 1000:.1f} mm" in said and " -" not in said


def test_rate_note_keeps_the_executor_section_name(tmp_path, monkeypatch, capsys):
    run = cmd_run_trajectory.TrajectoryRun(str(tmp_path / "run"), "completed", TrajectoryRunResult(10, 10), 50.0,
                                           1.0, 0.1, plan_rate_hz=100.0)  # fmt: skip
    monkeypatch.setattr(cmd_run_trajectory, "run_trajectory", lambda *a, **k: run)
    plan = _arm_plan(tmp_path, 0.15)
    assert main(["run", str(plan), "--robot", "sim", "--config", str(_arm_config(tmp_path, 1.0)),
                 "--out", str(tmp_path / "run"), "--yes"]) == 0  # fmt: skip
    out = " ".join(capsys.readouterr().out.split())
    assert "(its [executor] rate_hz)" in out and "100 Hz" in out and "50 Hz" in out


def test_check_names_the_kappa_of_a_friction_plan(tmp_path, capsys):
    plan = _arm_plan(tmp_path, 0.15, friction=True)
    assert main(["plan", "check", str(plan)]) == 0
    table = " ".join(capsys.readouterr().out.split())
    rigid = re.search(
        r"κ raw / column-scaled, rigid body \(without friction columns\) │ ([\d.e+]+) / ([\d.e+]+)", table
    )
    both = re.search(r"κ raw / column-scaled, with friction columns \(the check's grid, thinned: (\d+) samples\) │ "
                     r"([\d.e+]+) / ([\d.e+]+)", table)  # fmt: skip
    assert rigid and both, table  # a plan not designed here: its settings give no design grid
    assert 0 < int(both.group(1)) <= 2 * 2000
    # more columns: κ can only grow (raw and column-scaled alike)
    assert all(float(b) >= float(r) for r, b in zip(rigid.groups(), both.groups()[1:], strict=True))
    plain = _arm_plan(tmp_path, 0.15)
    assert main(["plan", "check", str(plain), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kappa_model"] == "rigid body" and "kappa_with_friction" not in out


def test_check_gives_a_friction_design_its_own_kappa(tmp_path, capsys):
    """A `--friction` design's κ, recomputed by `plan check` on the design's own grid, is the κ the design stored
    (it was 1.4 % off on a thinned copy of the check's grid)."""
    path = tmp_path / "fr.json"
    main(["plan", "trajectory", "ur5", "--friction", "--duration", "2", "--period", "2", "--harmonics", "2",
          "--samples", "30", "--max-iter", "2", "--starts", "1", "--no-self-collision", "--out", str(path)])  # fmt: skip
    stored = json.loads(path.read_text())
    capsys.readouterr()
    main(["plan", "check", str(path), "--json"])  # a 2-iteration design may fail its limits: κ is looked at
    out = json.loads(capsys.readouterr().out)
    assert out["kappa_with_friction_grid"] == "design"
    assert out["kappa_with_friction_samples"] == stored["settings"]["samples"]
    assert out["kappa_with_friction"] == pytest.approx(stored["design"]["kappa"], rel=1e-9)
    assert out["kappa_scaled_with_friction"] == pytest.approx(stored["design"]["kappa_scaled"], rel=1e-9)


@pytest.fixture(scope="module")
def ft_recording(tmp_path_factory):
    """A 20 s identification run of the iCub arm twin, written as a CSV."""
    pytest.importorskip("mujoco")
    from formats.ft_pwm_recording import write_ft_pwm_recording
    from identify.ft_pwm_sim import default_truth, simulate_experiment
    from robots.actuation import transmissions

    model = get_model(ARM)
    groups = transmissions(model)
    truth = default_truth(model, groups, np.random.default_rng(7))
    run = simulate_experiment(
        model=model, groups=groups, sensor="r_arm_ft_sensor", truth=truth, duration=20.0, seed=1
    )
    path = tmp_path_factory.mktemp("ft") / "ident.csv"
    write_ft_pwm_recording(run.recording, path)
    return path


def test_ft_pwm_kappa_states_its_scaling_and_the_table_has_relative_ses(ft_recording, capsys):
    assert main(["identify", "ft-pwm", str(ft_recording), "--method", "ols", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        np.isfinite(out["kappa"]) and np.isfinite(out["kappa_scaled"]) and "column-scaled" in out["kappa_of"]
    )
    for p in out["parameters"]:
        assert p["rel_se_pct"] == pytest.approx(100 * p["se"] / abs(p["value"]))
    assert main(["identify", "ft-pwm", str(ft_recording), "--method", "ols"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "rel. SE %" in text
    assert f"{out['kappa']:.0f} raw, {out['kappa_scaled']:.1f} column-scaled" in text
    assert "the parameters' units count in raw κ only; both move with the row weights" in text


def test_ft_pwm_column_scaled_kappa_ignores_a_parameters_unit(ft_recording, tmp_path, capsys):
    """The PWM logged in other units (× 0.1) rescales the PWM gains' regressor columns, not the fit's residuals
    (so not the automatic row weights): raw κ changes, the column-scaled κ does not."""
    from formats.ft_pwm_recording import read_ft_pwm_recording, write_ft_pwm_recording

    rec = read_ft_pwm_recording(ft_recording)
    path = tmp_path / "pwm_tenth.csv"
    write_ft_pwm_recording(replace(rec, pwm=rec.pwm * 0.1), path)
    said = []
    for p in (ft_recording, path):
        assert main(["identify", "ft-pwm", str(p), "--method", "ols", "--json"]) == 0
        said.append(json.loads(capsys.readouterr().out))
    assert said[1]["row_weights"] == pytest.approx(said[0]["row_weights"], rel=1e-6)
    assert said[1]["kappa_scaled"] == pytest.approx(said[0]["kappa_scaled"], rel=1e-6)
    assert abs(said[1]["kappa"] / said[0]["kappa"] - 1) > 0.05


def test_ft_pwm_too_short_names_the_file_and_the_minimum(ft_recording, tmp_path, capsys):
    from formats.ft_pwm_recording import read_ft_pwm_recording, write_ft_pwm_recording

    rec = read_ft_pwm_recording(ft_recording)
    n = 60
    short = replace(rec, **{f: getattr(rec, f)[:n] for f in ("t", "q", "pwm", "wrench", "contact")
                            if getattr(rec, f, None) is not None})  # fmt: skip
    path = tmp_path / "few.csv"
    write_ft_pwm_recording(short, path)
    for argv in ([str(path)], [str(ft_recording), "--validate", str(path)]):
        assert main(["identify", "ft-pwm", *argv]) == 2
        err = " ".join(capsys.readouterr().err.split())
        need = int(re.search(r"needs at least (\d+)", err).group(1))
        assert str(path) in err and f"{n} samples" in err and need > n


def _slow_tulip_config(tmp_path: Path, velocity_limit: float, min_margin: float) -> Path:
    """The bundled TUlip configuration at `velocity_limit` rad/s and every setpoint's ZMP `min_margin` m."""
    text = re.sub(
        r"(?m)^velocity_limit\s*=.*$", f"velocity_limit = {velocity_limit}", DEFAULT_CONFIG.read_text()
    )
    path = tmp_path / "slow.toml"
    path.write_text(re.sub(r"(?m)^min_margin\s*=.*$", f"min_margin = {min_margin}", text))
    return path


def test_single_support_check_and_run_share_the_pre_flight(tmp_path, capsys):
    """A single-support plan too slow-limited and too close to its sole's edge for the configuration: `plan check
    --config` lists the setpoints' problems the run refuses on (it once checked only the weight shifts)."""
    from formats.trajectory_plan import load_trajectory_plan
    from trajectories.plan import plan_model, plan_trajectory

    path = DATA / "tulip_single_support_6s.json"
    plan = load_trajectory_plan(path)
    traj = plan_trajectory(plan, plan_model(plan))
    t = np.arange(int(traj.duration * 100) + 1) / 100  # the bundled configuration's 100 Hz ticks
    peak = float(np.abs(np.diff(traj.sample(t)[0], axis=0)).max() * 100)  # rad/s between ticks
    margin = float(plan.settings["zmp_margin"]) + 0.025
    config = _slow_tulip_config(tmp_path, round(0.9 * peak, 3), margin)
    assert main(["plan", "check", str(path), "--config", str(config), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    run_said = [re.sub(r"^run \([^)]*\): ", "", p) for p in out["problems"] if p.startswith("run (")]
    assert out["min_zmp_margin_m"] < margin and not out["run"]["ok"]
    assert any("velocity_limit" in p for p in run_said) and any("ZMP" in p for p in run_said), run_said
    assert main(["run", str(path), "--robot", "sim", "--boards", "sim", "--config", str(config),
                 "--out", str(tmp_path / "r"), "--yes"]) == 2  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert f"({len(out['problems'])} problem(s))" in err and not (tmp_path / "r").exists()
    assert all(" ".join(p.split()) in err for p in run_said[: cmd_run_trajectory.SHOWN_PROBLEMS]), err
