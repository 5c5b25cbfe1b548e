"""`poise solve doggy` review fixes: stalls, weakly determined parameters, calibrated σ, the start's source, the
non-converged output and the recording's error lines."""

import contextlib
import io
import json

import casadi as ca
import numpy as np
import pytest

from formats.doggy_recording import write_csv
from formats.errors import DataError
from identify import doggy as dg
from identify import slom
from identify.doggy_sim import SimConfig, simulate
from identify.manifolds import Rn
from poise.cli import main
from trajectories.doggy_excitation import make_plan


def _line_fit(x, y, sigma, columns):
    """y ≈ Σ_j p_j columns_j(x): one border variable p, one residual per sample."""
    n = len(columns)
    p, xs, ys = ca.SX.sym("p", n), ca.SX.sym("x"), ca.SX.sym("y")
    model = sum(p[j] * c(xs) for j, c in enumerate(columns))
    fn = ca.Function("r", [p, xs, ys], [model - ys])
    pr = slom.Problem()
    pr.add_variable("p", Rn(n), np.zeros(n), labels=[f"p{j}" for j in range(n)], eliminate=False)
    pr.add_factor("obs", fn, ["p"], [x[:, None], y[:, None]], sigma=sigma)
    return pr


def test_covariance_rescaled_by_the_block_s_fitted_chi2_matches_least_squares_se():
    """σ declared 10× the true noise: the rescaled covariance is the textbook s²(XᵀX)⁻¹ with s² from the fit."""
    rng = np.random.default_rng(3)
    x = np.linspace(0, 1, 400)
    y = 2.0 + 3.0 * x + rng.normal(0, 0.05, x.size)
    pr = _line_fit(x, y, 0.5, [lambda v: 1.0, lambda v: v])
    plain = slom.solve(pr, slom.Options())
    scaled = slom.solve(pr, slom.Options(rescale_blocks=("obs",)))
    X = np.column_stack([np.ones_like(x), x])
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    s2 = np.sum((y - X @ beta) ** 2) / (x.size - 2)  # χ² over the redundancy: residuals less unknowns
    se = np.sqrt(np.diag(s2 * np.linalg.inv(X.T @ X)))
    assert np.allclose([scaled.sigmas()[k] for k in ("p0", "p1")], se, rtol=1e-6)
    assert plain.sigmas()["p0"] > 5 * scaled.sigmas()["p0"]  # the declared σ overstated the noise 10×
    assert scaled.variance_factors["obs"] == pytest.approx(s2 / 0.5**2, rel=1e-6)


def test_nearly_collinear_parameters_are_reported_weak_and_a_well_posed_fit_is_not():
    rng = np.random.default_rng(0)
    x = np.linspace(0, 1, 300)
    y = 1.0 + x + rng.normal(0, 0.01, x.size)
    cols = [lambda v: 1.0, lambda v: v, lambda v: v * (1 + 3e-3 * v)]  # p1 and p2 barely differ
    res = slom.solve(_line_fit(x, y, 0.01, cols), slom.Options(weak_rtol=1e-5))
    assert res.rank.rank == 3 and len(res.rank.weak_directions) == 1
    assert set(res.rank.weak_directions[0]) == {"p1", "p2"}
    ok = slom.solve(_line_fit(x, y, 0.01, cols[:2]), slom.Options(weak_rtol=1e-5))
    assert ok.rank.weak_directions == [] and ok.rank.condition < 1e3


def test_weak_directions_come_from_the_solve_s_weights_not_the_rescaled_ones():
    """σ declared 10× the noise: the rescale shrinks σ, but the rank analysis stays that of the plain solve."""
    rng = np.random.default_rng(1)
    x = np.linspace(0, 1, 300)
    y = 1.0 + x + rng.normal(0, 0.01, x.size)
    cols = [lambda v: 1.0, lambda v: v, lambda v: v * (1 + 3e-3 * v)]
    plain = slom.solve(_line_fit(x, y, 0.1, cols), slom.Options())
    scaled = slom.solve(_line_fit(x, y, 0.1, cols), slom.Options(rescale_blocks=("obs",)))
    assert scaled.sigmas()["p0"] < 0.2 * plain.sigmas()["p0"]
    assert scaled.rank.weak_directions == plain.rank.weak_directions and len(plain.rank.weak_directions) == 1
    assert scaled.rank.condition == pytest.approx(plain.rank.condition, rel=1e-9)
    assert scaled.rank.sigmas["p0"] == pytest.approx(plain.sigmas()["p0"], rel=1e-9)


def test_a_stall_is_converged_at_the_minimum_and_not_far_from_it():
    rng = np.random.default_rng(2)
    x = np.linspace(0, 1, 200)
    y = 2.0 - x + rng.normal(0, 0.01, x.size)
    cols = [lambda v: 1.0, lambda v: v]
    stall = {"stall_rtol": 1.0, "stall_window": 1}  # any decrease is "too small": a stall after one iteration
    near = slom.solve(_line_fit(x, y, 0.01, cols), slom.Options(**stall))  # one undamped step solves it
    assert near.iterations == 1 and near.converged and "stalled at the minimum" in near.reason
    far = slom.solve(_line_fit(x, y, 0.01, cols), slom.Options(lam0=1e3, **stall))  # a tiny damped step
    assert far.iterations == 1 and not far.converged and "not at the minimum" in far.reason
    assert far.cost > 10 * near.cost


def test_weak_hint_names_the_joint():
    hint = dg.weak_hint(["mu_fm3", "k_s3", "d_s3"])
    assert "joint 3" in hint and "joint 1" not in hint


@pytest.fixture(scope="module")
def sim2():
    return simulate(SimConfig(duration=2.0, seed=5), make_plan(2.0, 5))


def test_a_stall_stops_unconverged_and_iterations_match_the_log(sim2):
    res = dg.calibrate(
        sim2.recording, solver=slom.Options(max_iter=30, stall_rtol=1.0, stall_window=2)
    ).result
    assert res.reason.startswith(
        "stalled"
    )  # two iterations in: far from the minimum, whatever the weak directions
    assert not res.converged and "not at the minimum" in res.reason
    assert res.iterations == max(e.iteration for e in res.log) == 2
    done = dg.calibrate(sim2.recording, solver=slom.Options(max_iter=40)).result
    assert done.converged and done.iterations == max(e.iteration for e in done.log)


def test_no_rest_window_starts_biases_at_zero_not_at_table_1(sim2):
    rec = sim2.recording
    cut = rec.slice(rec.zero_command_samples() + 100, rec.n)
    start = dg.start_guess(cut)
    assert start.bias1 == (0.0, 0.0, 0.0) and start.bias2 == (0.0, 0.0, 0.0)
    assert "no zero-command window" in dg.start_source(cut)
    assert "zero-command window" in dg.start_source(rec) and "no zero" not in dg.start_source(rec)


def test_nan_names_the_column_and_the_file_line(sim2, tmp_path):
    path = tmp_path / "r.csv"
    write_csv(sim2.recording, path)
    lines = path.read_text().splitlines()
    h = next(i for i, s in enumerate(lines) if s.startswith("t,"))
    parts = lines[h + 8].split(",")
    parts[5] = "nan"  # theta2
    lines[h + 8] = ",".join(parts)
    path.write_text("\n".join(lines) + "\n")
    from formats.doggy_recording import read_csv

    with pytest.raises(DataError, match=rf"column theta2 of theta at sample 7 \(file line {h + 9}\)"):
        read_csv(path)


def _cli(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def test_unconverged_text_output_blanks_sigma_and_prints_the_iterations(tmp_path):
    path = tmp_path / "r.json"
    code, out, err = _cli(["solve", "doggy", "--simulate", "2", "--max-iter", "2", "--out", str(path)])
    rep = json.loads(path.read_text())
    assert code == 1 and not rep["converged"]
    assert all(r["sigma"] is None and r["sigma_at_stop"] > 0 for r in rep["parameters"])
    k_pwm = next(s for s in out.splitlines() if s.startswith("│ k_pwm"))
    assert k_pwm.rstrip("│ ").split("│")[-1].strip() == "—"
    assert "iterations (step: Jacobi-scaled" in out
    assert f"after {rep['iterations']} iterations" in out
    assert rep["iterations"] == max(e["iteration"] for e in rep["iteration_log"])
    assert "start: k_pwm" in out


def test_calibrate_names_its_stages_and_caps_the_held_one(sim2, monkeypatch):
    monkeypatch.setattr(dg, "HELD_MAX_ITER", 2)
    seen, iters = [], []
    cal = dg.calibrate(
        sim2.recording,
        solver=slom.Options(max_iter=40),
        callback=lambda e: iters.append((seen[-1], e.iteration)),
        on_stage=seen.append,
    )
    assert seen[:2] == list(dg.CALIBRATION_STAGES[:2])
    assert len(seen) == (
        2 if cal.result.converged else 3
    )  # the fallback only when the free stage stops short
    held = [i for s, i in iters if s == dg.CALIBRATION_STAGES[0]]
    assert held and max(held) <= 2
    assert cal.result.iterations == max(i for s, i in iters if s == seen[-1])
