"""Excitation designed as C² cubic splines through waypoints (the FIGAROH parametrisation, with poise's exact
derivatives): the basis is the spline, the design starts and ends at rest (q̇ = q̈ = 0, in the rest posture when
one is named), passes the same fine-grid check, and the plan runs through `plan check` like a Fourier one."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import UR5

from formats.errors import DataError
from poise.cli import main
from robots.registry import get_model
from trajectories.design_grid import design_bases, waypoint_times
from trajectories.excitation import ExcitationSettings, linear_limit_rows, optimise, random_start
from trajectories.spline import SplineTrajectory, spline_basis
from trajectories.verify import check_trajectory

SPLINE = ExcitationSettings(period=6.0, duration=6.0, samples=48, waypoints=5, max_iter=40, sharpness=(8.0,),
                            self_collision=False, parametrisation="spline", velocity_fraction=0.5)  # fmt: skip


@pytest.fixture(scope="module")
def ur5():
    return get_model(str(UR5))


@pytest.fixture(scope="module")
def plain_designs(ur5):
    """The spline designs of seeds 0–5, each from its seed's random start (what `optimise(..., seed=k)` starts
    from): two tests hold the seed-1 design to their figures, so it is designed once."""
    return {
        k: optimise(ur5, SPLINE, start=random_start(ur5, SPLINE, np.random.default_rng(k))) for k in range(6)
    }


def test_the_spline_basis_is_the_spline_through_the_waypoints():
    rng = np.random.default_rng(0)
    times = np.array([0.0, 0.7, 2.0, 2.4, 4.0])
    Q = rng.normal(size=(5, 3))
    t = rng.uniform(0, 4, 50)
    P, V, A = spline_basis(times, t)
    for mine, theirs in zip((P @ Q, V @ Q, A @ Q), SplineTrajectory(times, Q).sample(t), strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-12)


def test_a_spline_design_lowers_kappa_starts_and_ends_at_rest_and_passes_the_check(ur5, plain_designs):
    start = random_start(ur5, SPLINE, np.random.default_rng(1))
    X0 = start.reshape(-1, ur5.nq, order="F")
    assert X0.shape == (SPLINE.waypoints + 2, ur5.nq)
    r = plain_designs[1]  # optimise(ur5, SPLINE, start=start)
    assert isinstance(r.trajectory, SplineTrajectory) and r.trajectory.duration == SPLINE.duration
    check = check_trajectory(ur5, r.trajectory, r.base, r.params, dt=0.002)
    assert check.ok, check.problems
    before = check_trajectory(ur5, SplineTrajectory(waypoint_times(SPLINE), X0), r.base, r.params, dt=0.002)
    assert check.kappa_scaled < before.kappa_scaled / 2
    _, qd, qdd = r.trajectory.sample([0.0, SPLINE.duration])
    assert np.abs(qd).max() < 1e-9 and np.abs(qdd).max() < 1e-6  # no step of acceleration opens or closes it


def test_the_linear_rows_hold_a_rest_posture_at_both_ends_and_have_no_empty_row(ur5):
    lo, hi = ur5.lower + 0.05, ur5.upper - 0.05
    rest = lo + (hi - lo) * np.linspace(0.3, 0.7, ur5.nq)
    s = replace(SPLINE, rest_posture=tuple(rest))
    x0 = random_start(ur5, s, np.random.default_rng(2))
    G, lbg, ubg = linear_limit_rows(ur5, s)
    lb, ub = np.concatenate(lbg), np.concatenate(ubg)
    assert np.all(np.diff(G.tocsr().indptr) > 0)  # the clamped ends' velocity rows (always 0) are left out
    fixed = np.flatnonzero(lb == ub)
    assert len(fixed) == 4 * ur5.nq  # q̈ = 0 at both ends, q = rest at both ends, per joint
    np.testing.assert_allclose((G @ x0)[fixed][lb[fixed] != 0], lb[fixed][lb[fixed] != 0], atol=1e-12)
    q = design_bases(s, np.array([0.0, s.duration]))[0] @ x0.reshape(-1, ur5.nq, order="F")
    np.testing.assert_allclose(q, np.vstack([rest, rest]), atol=1e-12)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(period=3.0), "not periodic"),
        (dict(waypoints=0), "waypoints must be"),
        (dict(samples=6), "samples ≥ waypoints"),
    ],
)
def test_spline_settings_are_validated(change, message):
    with pytest.raises(DataError, match=message):
        replace(SPLINE, **change).validate()


def test_cli_designs_a_spline_plan_that_plan_check_passes(tmp_path, capsys):
    out = tmp_path / "spline.json"
    argv = ["plan", "trajectory", str(UR5), "--duration", "6", "--waypoints", "5", "--samples", "48",
            "--max-iter", "20", "--velocity-fraction", "0.5", "--no-self-collision", "--out", str(out), "--json"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    plan = json.loads(out.read_text())
    assert plan["trajectory"]["kind"] == "spline" and len(plan["trajectory"]["times_s"]) == 7
    assert plan["settings"]["parametrisation"] == "spline"
    assert main(["plan", "check", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]
    assert main(argv[:-3] + ["--period", "2", "--out", str(tmp_path / "x.json")]) == 2
    assert "not periodic" in capsys.readouterr().err


def _kappa_with_friction(model, traj) -> float:
    """κ (column-scaled) of the base torque regressor with identify dynamic's friction columns (q̇, sign q̇), 2 ms."""
    from robots import dynamics as dyn
    from robots.base_params import RegressorSpec, cached_dynamic_base
    from robots.conditioning import kappa, normalised_columns

    db = cached_dynamic_base(model, RegressorSpec("torque", model.root))
    q, qd, qdd = traj.sample(np.arange(0.0, traj.duration, 0.002))
    eye = np.eye(model.nq)[None]
    Y = dyn.torque_regressor(model, q, qd, qdd, model.root)[..., db.independent]
    A = np.concatenate([Y, qd[:, :, None] * eye, np.sign(qd)[:, :, None] * eye], axis=2)
    return kappa(normalised_columns(A.reshape(-1, A.shape[2]))[0])


def test_a_design_with_friction_columns_excites_friction_apart_from_the_rest(ur5, plain_designs):
    """Each start ends in its own local optimum, so the designs are compared over six starts. Measured (κ on a 2 ms
    grid, sign(q̇) columns as the fit has them; seeds 0–5): without the columns 14.8 12.6 14.8 18.4 14.1 19.6
    (median 14.8), with them 12.2 16.0 12.1 11.0 13.5 12.2 (median 12.2)."""
    n, plain, fr = ur5.nq, [], []
    for seed in range(6):
        a, b = plain_designs[seed], optimise(ur5, replace(SPLINE, friction=True), seed=seed)
        assert b.verification["ok"], b.verification["problems"]
        assert b.base_symbols[-2 * n :] == [f"{k}@{j}" for k in ("fv", "fc") for j in ur5.joint_names]
        assert len(b.base_symbols) == len(a.base_symbols) + 2 * n
        plain.append(_kappa_with_friction(ur5, a.trajectory))
        fr.append(_kappa_with_friction(ur5, b.trajectory))
        assert b.kappa_scaled == pytest.approx(
            fr[-1], rel=0.15
        )  # its smooth Coulomb column stands in for sign
    assert np.median(fr) < np.median(plain)


def test_friction_columns_are_refused_for_a_standing_motion():
    with pytest.raises(DataError, match="boards' wrench"):
        ExcitationSettings(motion="double-support", friction=True).validate()


def test_a_friction_design_completes_a_prior_plan_with_its_friction_columns(ur5, tmp_path, capsys):
    """The prior's rows carry the friction columns too (q̇, tanh(q̇/ε) of the plan's own samples): a next design
    given the first lowers κ of the pair with them below the first run twice."""
    from formats.trajectory_plan import load_trajectory_plan
    from trajectories.excitation import friction_rows
    from trajectories.plan import prior_experiments
    from trajectories.verify import stacked_base_regressor

    first = tmp_path / "first.json"
    argv = ["plan", "trajectory", str(UR5), "--duration", "6", "--waypoints", "5", "--samples", "48",
            "--max-iter", "20", "--velocity-fraction", "0.5", "--no-self-collision", "--friction", "--json"]  # fmt: skip
    assert main(argv + ["--out", str(first)]) == 0
    capsys.readouterr()
    plan = load_trajectory_plan(first)
    s = replace(SPLINE, friction=True)
    prior = prior_experiments(ur5, s, [plan])
    traj = SplineTrajectory.from_json(plan.trajectory)
    t = np.arange(48) * s.period / s.samples
    expected = np.hstack(
        [stacked_base_regressor(ur5, traj, ur5.root, False, t), friction_rows(traj.sample(t)[1])]
    )
    np.testing.assert_allclose(prior.rows, expected, atol=1e-12)
    assert main(argv + ["--prior", str(first), "--out", str(tmp_path / "next.json")]) == 0
    out = json.loads(capsys.readouterr().out)
    both = out["kappa_with_prior_scaled"]
    from robots.conditioning import kappa, normalised_columns

    twice = kappa(normalised_columns(np.vstack([prior.rows, prior.rows]))[0])
    assert both < twice


@pytest.mark.parametrize("spline", [True, False])
def test_a_design_is_moved_exactly_onto_its_equalities(ur5, spline):
    """IPOPT keeps the rest rows and the rest posture to its constraint tolerance only (a spline once ended 1.4e-5 rad
    off, beyond the check's 1e-5): the design is moved the least distance onto them before it becomes a plan."""
    from trajectories.excitation import onto_equalities

    lo, hi = ur5.lower + 0.05, ur5.upper - 0.05
    rest = tuple(lo + (hi - lo) * np.linspace(0.3, 0.7, ur5.nq))
    s = replace(SPLINE if spline else replace(SPLINE, parametrisation="fourier", period=3.0, harmonics=3),
                rest_posture=rest)  # fmt: skip
    G, lbg, ubg = linear_limit_rows(ur5, s)
    lb, ub = np.concatenate(lbg), np.concatenate(ubg)
    x0 = onto_equalities(G, lb, ub, random_start(ur5, s, np.random.default_rng(5)))  # a point that keeps them
    x = x0 + np.random.default_rng(6).normal(scale=1e-4, size=x0.size)
    y = onto_equalities(G, lb, ub, x)
    eq = lb == ub
    assert np.abs((G @ x)[eq] - lb[eq]).max() > 1e-5  # off before
    np.testing.assert_allclose((G @ y)[eq], lb[eq], atol=1e-12)
    assert np.linalg.norm(y - x) <= np.linalg.norm(
        x0 - x
    )  # the least move: no farther than the start it came from
