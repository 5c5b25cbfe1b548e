"""Joint-drive simulation and fit timing: each logged row describes one instant (encoder at the stamp, torque and
PWM averaged over the period centred on it), and the fits of the simulated runs are unbiased. The simulator once
logged the torque 5 ms after the encoder (`--fit-inertia` found ΔI ≈ 8 SE), and the low-pass's ringing after the
friction's jump at each velocity reversal left the recommended PWM plan's Stribeck fit 5–9 SE off."""

from __future__ import annotations

import json

import numpy as np
import pytest

from formats.pwm_plan import recommended, samples
from identify.actuation_sim import DriveTruth, Noise, simulate_coupled, simulate_free
from poise.cli import main

SE_LIMIT = 3.0  # a fit's error in standard errors that an unbiased estimate exceeds rarely


def _friction(capsys, *opts: str) -> dict:
    assert main(["calibrate", "friction", "--simulate", "--model", "stribeck", "--json", *opts]) == 0
    return json.loads(capsys.readouterr().out)


def _errors_in_se(fit: dict, truth: dict[str, float]) -> dict[str, float]:
    """(fitted − true) / SE for every parameter with a truth."""
    values = {**fit["params"], "k_pwm": fit["k_pwm_Nm_per_pct"]}
    return {k: (values[k] - v) / fit["se"][k] for k, v in truth.items()}


def test_fit_inertia_finds_no_inertia_missing_from_a_simulated_motor_off_run(capsys):
    doc = _friction(capsys, "--fit-inertia")
    fit = doc["fits"][0]
    delta = fit["inertia_extra_kg_m2"]
    assert abs(delta) < SE_LIMIT * fit["se"]["inertia_extra"], (delta, fit["se"])
    assert not fit["model_misfit"]
    errors = _errors_in_se(fit, {k: v for k, v in doc["truth"].items() if k in fit["params"]})
    assert max(map(abs, errors.values())) < SE_LIMIT, errors


def test_recommended_pwm_plan_recovers_stribeck_friction_and_gain_within_their_se(capsys):
    truth = DriveTruth()
    doc = _friction(capsys, "--plan", "recommended")
    fit = doc["fits"][0]
    expected = {**truth.params(), "k_pwm": truth.k_pwm * truth.pwm_full_scale / 100}
    errors = _errors_in_se(fit, expected)
    assert max(map(abs, errors.values())) < SE_LIMIT, errors
    assert not fit["model_misfit"] and doc["warnings"] == []


def test_simulated_pwm_column_is_the_duty_applied_over_the_period_centred_on_the_stamp():
    plan = recommended(link="free")
    _, pct = samples(plan)
    rec = simulate_free(plan, DriveTruth(), Noise(seed=0))
    # setpoint k − 1 holds over the first half of the window around stamp k, setpoint k over the second
    assert rec.pwm[1:] == pytest.approx((pct[:-1] + pct[1:]) / 2, abs=1e-9)


def test_coupled_simulation_logs_torque_and_encoder_at_the_same_instant():
    """Frictionless motors: τ_j = −Tᵀ I_m T q̈ at every stamp, q̈ from the logged q (a torque logged half a
    period late misses by ~10 % of its size on this motion)."""
    T = np.array([[0.04 / 0.022, -1.0, 0.0], [0.0, 1.0, -1.0], [0.0, 1.0, 1.0]])
    Im = np.array([0.01, 0.012, 0.012])
    t, q, tau = simulate_coupled(
        T, np.zeros(3), np.zeros(3), Im, np.diag([0.3, 0.2, 0.25]), 5.0, tau_std=0.0, encoder_bits=24, seed=1
    )
    h = t[1] - t[0]
    qdd = (q[2:] - 2 * q[1:-1] + q[:-2]) / h**2
    expected = -qdd @ (T.T @ np.diag(Im) @ T).T
    miss = np.sqrt(np.mean((tau[1:-1] - expected) ** 2)) / np.sqrt(np.mean(expected**2))
    assert miss < 0.03, miss
