"""Parallel filtering in the friction and PWM-gain fits: the friction model's columns are evaluated on the nearly
unfiltered velocity and go through the torque's own low-pass (stuck samples gated out of both first), so the
friction's jump at a velocity reversal rings alike on both sides of the regression. No sample near a reversal is
dropped, the Stribeck range keeps its samples, and the fit stays unbiased at a low --cutoff-hz (the reversal guard
it replaces left 29 samples at 2 Hz and a fit 16 SE off at 3 Hz)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from identify.actuation_sim import DriveTruth, Noise, simulate_external
from identify.drive_signals import drive_signals
from identify.friction import MIN_BELOW_VS, FrictionFit, fit_friction, stribeck_notes
from poise.cli import main

SE_LIMIT = 4.0  # error in SEs an unbiased fit exceeds rarely (measured over seeds 1–6: at most 3.5)
TRUTH = DriveTruth()


def _run(capsys, *args: str) -> dict:
    assert main(["calibrate", *args, "--simulate", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _errors_in_se(doc: dict) -> dict[str, float]:
    """(fitted − true) / SE of the Stribeck parameters and v_s."""
    fit = doc["fits"][0]
    values = {**fit["params"], "v_s": fit["v_s_rad_s"]}
    return {k: (values[k] - doc["truth"][k]) / fit["se"][k] for k in values}


@pytest.mark.parametrize("cutoff", ["2", "3", "6"])
def test_stribeck_fit_is_unbiased_at_a_low_cutoff(capsys, cutoff):
    doc = _run(capsys, "friction", "--plan", "recommended", "--model", "stribeck", "--cutoff-hz", cutoff)
    errors = _errors_in_se(doc)
    assert max(map(abs, errors.values())) < SE_LIMIT, errors
    assert not doc["fits"][0]["model_misfit"]


def test_samples_near_reversals_are_kept_for_the_stribeck_range(capsys):
    doc = _run(capsys, "friction", "--model", "stribeck")
    fit = doc["fits"][0]
    rec = simulate_external(truth=TRUTH, noise=Noise(seed=0))
    w = drive_signals(rec).omega
    moving_below = int(np.sum((np.abs(w) > 0.02) & (np.abs(w) < fit["v_s_rad_s"])))  # 0.02: --speed-min
    assert fit["n_below_vs"] > 0.5 * moving_below, (fit["n_below_vs"], moving_below)
    assert not any("below v_s" in n for n in doc["warnings"]), doc["warnings"]
    assert max(map(abs, _errors_in_se(doc).values())) < SE_LIMIT


def test_table_shows_the_samples_used_below_v_s(capsys):
    assert main(["calibrate", "friction", "--simulate", "--model", "stribeck"]) == 0
    assert "used below v_s" in capsys.readouterr().out


def test_pwm_gain_at_a_low_cutoff_is_unbiased(capsys):
    doc = _run(capsys, "pwm-gain", "--link", "free", "--cutoff-hz", "3")
    z = (doc["k_pwm_Nm_per_pct"] - doc["true_k_pwm_Nm_per_pct"]) / doc["se"]["k_pwm"]
    assert abs(z) < SE_LIMIT, z


def test_library_fit_with_unfiltered_signals_is_unbiased_and_without_them_misfits():
    rec = simulate_external(truth=TRUTH, noise=Noise(seed=2))
    rec.tau = rec.tau - TRUTH.tau_offset
    sig = drive_signals(rec, 3.0)
    opts = dict(accel_max=5.0, speed_min=0.02, margin=5, filtered=sig.filtered)
    args = (sig.omega, sig.omega_dot, sig.tau, rec.inertia, "stribeck")
    parallel = fit_friction(*args, raw=sig.raw, **opts)
    z = {k: (parallel.params[k] - v) / parallel.se[k] for k, v in TRUTH.params().items()}
    assert max(map(abs, z.values())) < SE_LIMIT and parallel.misfit is None, z
    plain = fit_friction(*args, **opts)  # the model on the low-passed ω against the low-passed torque
    assert plain.misfit is not None


def test_stribeck_note_counts_the_samples_below_v_s():
    fit = FrictionFit("stribeck", TRUTH.params(), {}, TRUTH.v_s, False, 1, 0, 0.0, 1.0)
    fast = np.linspace(0.5, 2.0, 500)
    stray = np.concatenate(
        [fast, np.full(MIN_BELOW_VS // 4, 0.1)]
    )  # a few slow samples do not support the dip
    assert any("below v_s" in n for n in stribeck_notes(fit, stray, None))
    enough = np.concatenate([fast, np.linspace(0.03, 0.34, 5 * MIN_BELOW_VS)])
    assert stribeck_notes(fit, enough, None) == []
