"""Spline excitation of a standing robot (`plan trajectory --double-support|--single-support --waypoints N`): the
same balance designs over spline waypoints instead of Fourier coefficients, at rest at both ends and ending where
they start, checked on the fine grid, saved, checked, forecast and run like a Fourier plan."""

from __future__ import annotations

import json

import numpy as np
import pytest

from formats.dynamic_recording import read_dynamic_recording
from formats.trajectory_plan import load_trajectory_plan, save_trajectory_plan
from poise.cli import main
from trajectories.balance_excitation import balance_start, optimise_balance
from trajectories.closed_chain import ClosedChainTrajectory, make_chain
from trajectories.excitation import ExcitationSettings
from trajectories.plan import make_plan, plan_trajectory
from trajectories.spline import SplineTrajectory
from trajectories.verify import check_trajectory, stacked_base_regressor

MARGIN = 0.02
SPLINE = ExcitationSettings(
    period=6.0, duration=6.0, parametrisation="spline", waypoints=6, samples=32, max_iter=60, sharpness=(8.0,),
    simplified=True, motion="double-support", zmp_margin=MARGIN,
    velocity_fraction=0.27,  # the bench's executor streams at ≤ 1 rad/s (velocity_limit); the model allows 3.3
)  # fmt: skip


@pytest.fixture(scope="module")
def chain(tulip):
    return make_chain(tulip, "right", "sim", np.random.default_rng(3), candidates=20)


@pytest.fixture(scope="module")
def design(tulip, chain):
    return optimise_balance(tulip, SPLINE, seed=4, zmp_margin=MARGIN, chain=chain)


@pytest.fixture(scope="module")
def plan_file(tulip, design, tmp_path_factory):
    path = tmp_path_factory.mktemp("spline") / "ds_spline.json"
    save_trajectory_plan(make_plan("tulip", tulip, design, SPLINE, 4, 100.0), path)
    return path


def test_the_design_stands_rests_at_both_ends_and_ends_where_it_starts(tulip, chain, design):
    traj = design.trajectory
    assert isinstance(traj, ClosedChainTrajectory) and isinstance(traj.independent, SplineTrajectory)
    check = check_trajectory(tulip, traj, "right", "sim", 0.002, simplified=True, zmp_margin=MARGIN)
    assert check.ok, check.problems
    assert check.min_zmp_margin_m >= MARGIN - 1e-4 and check.max_foot_drift_m < 1e-8
    q, qd, qdd = traj.sample(np.array([0.0, SPLINE.duration]))
    assert np.abs(q[1] - q[0]).max() < 1e-6  # the dependent coordinates too: the chain closes the same way
    assert np.abs(qd).max() < 1e-9 and np.abs(qdd).max() < 1e-5


def test_the_design_lowers_kappa_from_its_start(tulip, chain, design):
    _, start = balance_start(tulip, SPLINE, chain, np.random.default_rng(4), 0.1)
    t = np.linspace(0, SPLINE.duration, 96)
    k0 = np.linalg.cond(
        stacked_base_regressor(tulip, ClosedChainTrajectory(tulip, chain, start), "right", True, t)
    )
    k1 = np.linalg.cond(stacked_base_regressor(tulip, design.trajectory, "right", True, t))
    assert k1 < k0 / 3, (k0, k1)


def test_the_plan_round_trips_and_passes_plan_check_and_forecast(tulip, design, plan_file, capsys):
    traj = plan_trajectory(load_trajectory_plan(plan_file), tulip)
    assert json.loads(plan_file.read_text())["trajectory"]["independent"]["kind"] == "spline"
    t = np.linspace(0, SPLINE.duration, 41)
    for a, b in zip(traj.sample(t), design.trajectory.sample(t), strict=True):
        assert np.abs(a - b).max() < 1e-9
    assert main(["plan", "check", str(plan_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main(["plan", "forecast", str(plan_file), "--noise", "0.49", "1.42", "1.29", "--json"]) == 0
    fc = json.loads(capsys.readouterr().out)
    assert len(fc["parameters"]) == len(design.base_symbols) and fc["determined"]


def test_the_plan_runs_on_the_bench_and_declares_its_equivalent_band(tulip, plan_file, tmp_path):
    """A standing spline's recording declares the band of the Fourier series with as many free values (W / 2T:
    6 waypoints over 6 s, 0.5 Hz), so `identify dynamic`'s default cut-off is 4× that, not the 5 Hz default."""
    out = tmp_path / "run"
    args = ["run", str(plan_file), "--robot", "sim", "--boards", "sim", "--out", str(out), "--yes", "--json",
            "--physics", "kinematic"]  # fmt: skip
    assert main(args) == 0
    assert json.loads((out / "run.json").read_text())["status"] == "completed"
    rec = read_dynamic_recording(out / "recording.csv")
    assert rec.base == "right" and rec.t[-1] > 0.9 * SPLINE.duration
    assert float(rec.meta["motion_band_hz"]) == pytest.approx(SPLINE.waypoints / (2 * SPLINE.duration))


SINGLE = ExcitationSettings(
    period=8.0, duration=8.0, parametrisation="spline", waypoints=6, samples=32, max_iter=60, sharpness=(8.0,),
    simplified=True, motion="single-support", zmp_margin=MARGIN, lift=0.02, velocity_fraction=0.3,
)  # fmt: skip


def test_a_single_support_spline_stands_on_one_sole_and_ends_where_it_starts(tulip, tmp_path, capsys):
    from trajectories.single_support import SingleSupportTrajectory, optimise_single_support

    res = optimise_single_support(tulip, SINGLE, seed=1)
    traj = res.trajectory
    assert isinstance(traj, SingleSupportTrajectory) and isinstance(traj.motion, SplineTrajectory)
    assert res.verification["ok"], res.verification["problems"]
    assert res.verification["min_zmp_margin_m"] >= MARGIN - 1e-4
    assert res.verification["min_sole_lift_m"] >= SINGLE.lift - 1e-4
    q, qd, qdd = traj.sample(np.array([0.0, SINGLE.duration]))
    assert np.abs(q[1] - q[0]).max() < 1e-6 and np.abs(qd).max() < 1e-9 and np.abs(qdd).max() < 1e-5
    path = tmp_path / "ss_spline.json"
    save_trajectory_plan(make_plan("tulip", tulip, res, SINGLE, 1, 100.0), path)
    assert json.loads(path.read_text())["trajectory"]["motion"]["kind"] == "spline"
    t = np.linspace(0, SINGLE.duration, 41)
    assert (
        np.abs(plan_trajectory(load_trajectory_plan(path), tulip).sample(t)[0] - traj.sample(t)[0]).max()
        < 1e-9
    )
    assert main(["plan", "check", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_bands_fourier_its_top_harmonic_a_standing_spline_w_over_2t_an_arm_spline_none(tulip, design):
    from trajectories.fourier import FourierTrajectory
    from trajectories.parametrisation import motion_band_hz
    from trajectories.single_support import SingleSupportTrajectory

    spline = design.trajectory.independent
    assert motion_band_hz(design.trajectory) == pytest.approx(6 / 12)  # 6 interior waypoints over 6 s
    assert motion_band_hz(spline) is None  # the same spline as an arm's motion
    z = np.zeros((12, 3))
    fourier = FourierTrajectory(10.0, 10.0, np.zeros(12), z, z)
    assert motion_band_hz(fourier) == pytest.approx(0.3)
    assert motion_band_hz(SingleSupportTrajectory(fourier, "right", "sole_l", 0.02)) == pytest.approx(0.3)
    moved = SplineTrajectory(np.linspace(0, 8.0, 10), np.zeros((10, 12)))
    assert motion_band_hz(SingleSupportTrajectory(moved, "right", "sole_l", 0.02)) == pytest.approx(8 / 16)
