"""Joint actuation and sensor calibration (spec actuation.md): friction, PWM gain, plans, sensors, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from formats.errors import DataError, IdentifiabilityError
from formats.pwm_plan import load_pwm_plan, recommended, samples, save_pwm_plan, sweeps
from identify.actuation_sim import DriveTruth, simulate_external, simulate_fixture, simulate_free
from identify.drive_signals import drive_signals
from identify.friction import fit_friction, friction_torque, regressor
from identify.pwm_gain import fit_pwm_gain, fit_pwm_gain_fixture

TRUTH = DriveTruth()
K_PCT = TRUTH.k_pwm * TRUTH.pwm_full_scale / 100  # N·m per % PWM


@pytest.fixture(scope="module")
def friction_data():
    rec = simulate_external(truth=TRUTH)
    return drive_signals(rec)


def _fit(sig, **kw):
    opts = dict(accel_max=5.0, speed_min=0.02, margin=5)
    opts.update(kw)
    return fit_friction(sig.omega, sig.omega_dot, sig.tau - TRUTH.tau_offset, TRUTH.inertia, **opts)


def test_stribeck_form_is_continuous_in_magnitude_and_flat_at_zero_plus_with_the_constraint():
    p = TRUTH.params()
    w = np.array([1e-9, -1e-9])
    tf = friction_torque("stribeck", p, w, TRUTH.v_s)
    assert tf[0] == pytest.approx(-p["sigma+"], rel=1e-6) and tf[1] == pytest.approx(p["sigma-"], rel=1e-6)
    h = 1e-6
    slope = (friction_torque("stribeck", p, np.array([2 * h]), TRUTH.v_s) - tf[0]) / (2 * h)
    assert abs(slope[0]) < 1e-3  # TRUTH satisfies σs⁺ − Kc = Kv v_s
    assert np.allclose(regressor("asymmetric", np.array([0.5, -0.5])), [[0, 0, -1, -0.5], [1, 0.5, 0, 0]])


def test_stribeck_coulomb_viscous_recovered_within_2_percent(friction_data):
    for kw in ({"v_s": TRUTH.v_s}, {"v_s": TRUTH.v_s, "zero_slope": True}):
        fit = _fit(friction_data, model="stribeck", **kw)
        for k, v in TRUTH.params().items():
            assert fit.params[k] == pytest.approx(v, rel=0.02), (kw, k, fit.params)
        assert fit.n_rejected > 0
    searched = _fit(friction_data, model="stribeck")
    assert searched.v_s == pytest.approx(TRUTH.v_s, rel=0.25)
    assert searched.params["Kv"] == pytest.approx(TRUTH.kv, rel=0.02)


def test_outlier_rejection_at_reversals_matters(friction_data):
    kept = _fit(friction_data, model="stribeck", v_s=TRUTH.v_s)
    raw = _fit(friction_data, model="stribeck", v_s=TRUTH.v_s, accel_max=None, speed_min=0.0, margin=0)
    err = lambda f: max(abs(f.params[k] / v - 1) for k, v in TRUTH.params().items())  # noqa: E731
    assert err(raw) > 3 * err(kept)


def test_coulomb_viscous_and_asymmetric_fits_on_the_fast_part(friction_data):
    # far from zero velocity the Stribeck term has decayed: a Coulomb + viscous line fits Kc, Kv there
    sym = _fit(friction_data, model="coulomb-viscous", speed_min=3 * TRUTH.v_s)
    assert sym.params["Kv"] == pytest.approx(TRUTH.kv, rel=0.05)
    asym = _fit(friction_data, model="asymmetric", speed_min=3 * TRUTH.v_s)
    assert asym.params["Kc+"] == pytest.approx(TRUTH.kc, rel=0.1)
    assert asym.params["Kc-"] == pytest.approx(TRUTH.kc, rel=0.1)
    with pytest.raises(IdentifiabilityError, match="rank deficient"):
        w = np.abs(friction_data.omega)  # only positive velocities: Kc⁻, Kv⁻ have no data
        fit_friction(w, friction_data.omega_dot, friction_data.tau, 0.06, model="asymmetric", speed_min=0.01)


def test_pwm_gain_recovered_within_2_percent_moving_and_fixture(friction_data):
    fric = _fit(friction_data, model="stribeck", v_s=TRUTH.v_s)
    sig = drive_signals(simulate_free(recommended(link="free"), TRUTH))
    g = fit_pwm_gain(sig.pwm, sig.omega, sig.omega_dot, sig.tau, TRUTH.inertia, fric)
    assert g.k_pwm == pytest.approx(K_PCT, rel=0.02)
    assert g.tau0 == pytest.approx(TRUTH.tau_offset, abs=0.05)
    rec = simulate_fixture(recommended(), TRUTH)
    fx = fit_pwm_gain_fixture(rec.t, rec.pwm, rec.tau)
    assert fx.k_pwm == pytest.approx(K_PCT, rel=0.02)
    assert fx.hysteresis == pytest.approx((TRUTH.sigma_pos + TRUTH.sigma_neg) / 2, rel=0.05)
    naive = np.polyfit(rec.pwm, rec.tau, 1)[0]  # ignoring the hysteresis biases the slope
    assert abs(naive / K_PCT - 1) > 0.03


def test_pwm_plan_recommended_sweeps_round_trip_and_validation(tmp_path):
    t, u = samples(recommended())
    assert len(t) == 6001 and u[-1] == 0.0 and np.max(u) == pytest.approx(8.0)
    assert np.allclose(np.diff(t), 0.01)
    f = np.fft.rfftfreq(len(u) - 1, 0.01)[np.argmax(np.abs(np.fft.rfft(u[:-1])))]
    assert f == pytest.approx(0.3, abs=0.02)
    sw = sweeps()
    assert sorted({s.amplitude_pct for s in sw.segments}) == [4, 8, 12, 16]
    assert sorted({s.frequency_hz for s in sw.segments}) == [0.1, 0.3, 0.6, 0.9]
    save_pwm_plan(sw, tmp_path / "p.json")
    assert load_pwm_plan(tmp_path / "p.json") == sw
    doc = json.loads((tmp_path / "p.json").read_text())
    for edit, msg in [
        (lambda d: d["segments"][0].update(amplitude_pct=120), "amplitude_pct"),
        (lambda d: d["segments"][0].update(frequency_hz=float("nan")), "frequency_hz"),
        (lambda d: d.update(link="hand"), "link"),
        (lambda d: d["segments"][0].pop("shape"), "malformed"),
        (lambda d: d.update(format="other"), "not a"),
    ]:
        bad = json.loads(json.dumps(doc))
        edit(bad)
        (tmp_path / "b.json").write_text(json.dumps(bad))
        with pytest.raises(DataError, match=msg):
            load_pwm_plan(tmp_path / "b.json")
