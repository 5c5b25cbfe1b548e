"""`poise solve doggy` review: a recording that starts moving, the rotations' error column, a start that is not
the simulator's truth."""

import contextlib
import io
import json
import math

import numpy as np
import pytest

from identify import doggy as dg
from identify import slom
from identify.doggy_sim import SimConfig, simulate
from poise.cli import main
from trajectories.doggy_excitation import make_plan

TOL_SIGMAS = 3.5  # seeds 1–4, 4 s runs from zero biases: largest |error|/σ 2.2 (biases), 2.5 (others)


@pytest.fixture(scope="module")
def sim4():
    """A simulated 4 s experiment (0.8 s at rest, then excitation) and its truth."""
    return simulate(SimConfig(duration=4.0, seed=1), make_plan(4.0, 1))


def _bias_rows(cal, truth) -> list[dict]:
    return [r for r in dg.parameter_rows(cal, truth) if r["name"].startswith("bias")]


def test_recording_that_starts_moving_still_recovers_the_biases(sim4):
    rec = sim4.recording
    cut = rec.slice(rec.zero_command_samples() + 300, rec.n)  # no rest window: the robot already moves
    assert cut.zero_command_samples() == 0
    cal = dg.calibrate(cut, solver=slom.Options(max_iter=40))
    assert cal.result.converged and cal.bias_window == 0
    for r in _bias_rows(cal, sim4.params):
        assert r["error_sigmas"] < TOL_SIGMAS, r
    chi2 = {s.name: s.chi2_per_dof for s in cal.result.stats}
    assert chi2["initial"] < 1 and chi2["measurement"] < 2, chi2


def test_biases_are_recovered_from_a_wrong_start(sim4):
    rec = sim4.recording
    start = dg.start_guess(rec).with_(bias1=(0.0, 0.0, 0.0), bias2=(0.0, 0.0, 0.0))
    cal = dg.calibrate(rec, start, solver=slom.Options(max_iter=40))
    rows = _bias_rows(cal, sim4.params)
    assert max(abs(r["initial"] - r["truth"]) / r["sigma"] for r in rows) > 100  # far from the truth
    for r in rows:
        assert r["error_sigmas"] < TOL_SIGMAS, r


def test_start_biases_are_the_rest_window_means(sim4):
    rec = sim4.recording
    m = rec.zero_command_samples()
    start = dg.start_guess(rec)
    assert np.allclose(start.bias1, rec.gyro1[:m].mean(axis=0)) and np.allclose(
        start.bias2, rec.gyro2[:m].mean(axis=0)
    )
    assert not np.allclose(start.bias1, sim4.params.bias1, rtol=0, atol=1e-9)


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """`solve doggy --simulate 2 --out r.json`: stdout and the result JSON."""
    path = tmp_path_factory.mktemp("solved") / "r.json"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["solve", "doggy", "--simulate", "2", "--out", str(path)])
    assert code == 0
    return out.getvalue(), json.loads(path.read_text())


def test_simulated_run_does_not_start_from_the_truth(solved):
    _, rep = solved
    rows = [r for r in rep["parameters"] if r["name"].startswith("bias")]
    assert all(r["initial"] != r["truth"] for r in rows)
    assert all(r["error_sigmas"] < TOL_SIGMAS for r in rows), rows


def test_rotation_rows_show_their_error_in_the_table_and_json(solved):
    out, rep = solved
    row = next(r for r in rep["parameters"] if r["name"] == "R1 angle from nominal")
    assert row["unit"] == "rad" and row["error"] >= 0
    assert row["error_sigmas"] == pytest.approx(row["error"] / row["sigma"])
    line = next(s for s in out.splitlines() if "R1 angle from nominal" in s)
    cells = [c.strip() for c in line.strip("│ ").split("│")]
    assert "error" in next(s for s in out.splitlines() if "|error|/σ" in s)
    assert cells[6] == f"{math.degrees(row['error']):.2g}", cells  # the column before |error|/σ, in deg


@pytest.mark.parametrize("kept", [1, dg.MIN_REST_SAMPLES - 1])
def test_a_rest_window_too_short_for_a_bias_keeps_the_description_s_biases(sim4, kept):
    """A few rest samples are their noise, not a bias: the start keeps the description's biases, and the gyro
    check takes none off (one rest-window rule for both)."""
    rec = sim4.recording
    m = rec.zero_command_samples()
    cut = rec.slice(m - kept, rec.n)
    assert cut.zero_command_samples() == kept
    initial = dg.start_guess(cut, sim4.params.with_(bias1=(0.1, 0.2, 0.3)))
    assert initial.bias1 == (0.1, 0.2, 0.3) and dg.rest_gyro_bias(cut) is None
    raw = np.sqrt(np.mean(np.sum(cut.gyro1**2, axis=1)))  # no bias taken off: the raw rms of the larger gyro
    rates = np.sqrt(np.mean(np.abs(np.gradient(cut.theta, cut.t, axis=0)).sum(axis=1) ** 2))
    raw = max(raw, np.sqrt(np.mean(np.sum(cut.gyro2**2, axis=1))))
    assert dg.gyro_excess(cut) == pytest.approx(raw / rates)


def test_a_rest_window_of_the_minimum_sets_the_start_biases(sim4):
    rec = sim4.recording
    cut = rec.slice(rec.zero_command_samples() - dg.MIN_REST_SAMPLES, rec.n)
    start = dg.start_guess(cut, sim4.params.with_(bias1=(0.1, 0.2, 0.3)))
    assert np.allclose(start.bias1, cut.gyro1[: dg.MIN_REST_SAMPLES].mean(axis=0))
