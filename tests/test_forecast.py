"""`identify.forecast` / `poise plan forecast`: standard errors forecast from a plan's own regressor and a stated
white sensor noise, before anything is run — checked against the spread of estimates over many noisy recordings
of the TUlip double-support design (tests/data/tulip_double_support_10s.json)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import TEST_DESIGN, sampled_test_design

from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError
from identify.dynamic import DynamicEstimator
from identify.forecast import filtered_autocorrelation, forecast_dynamic
from poise.cli import main

RATE = 100.0  # Hz
SIGMA = np.array([2.0, 0.3, 0.3])  # N, N·m, N·m per recorded sample
META = {"motion_band_hz": "0.3", "moment_z_m": "-0.053"}
DRAWS = 150


@pytest.fixture(scope="module")
def recording():
    return sampled_test_design(RATE)


def _estimator(tulip):
    return DynamicEstimator(tulip, "right", True, False, quantity="wrench")


def test_filtered_autocorrelation_is_that_of_filtered_white_noise():
    rng = np.random.default_rng(0)
    from identify.differentiation import lowpass

    e = lowpass(rng.normal(size=(400_000, 1)), RATE, 2.0)[2000:-2000, 0]
    r = filtered_autocorrelation(RATE, 2.0, 12, 3)
    emp = [np.mean(e[: len(e) - 12 * k] * e[12 * k :]) for k in range(4)]
    assert r[0] == pytest.approx(emp[0], rel=0.03)
    assert np.allclose(r[1:], emp[1:], atol=0.03 * r[0])
    assert abs(r[1]) > 0.05 * r[0]  # neighbouring fitted rows are correlated: independence would be wrong


def test_forecast_matches_the_spread_of_estimates(recording):
    """White noise of SIGMA on every sample, fitted by the estimator's own WLS: the estimates' spread over
    DRAWS recordings equals the forecast SE (sampling error of a standard deviation over 150 draws: ~6 %)."""
    tulip, t, q = recording
    fc = forecast_dynamic(_estimator(tulip), t, q, SIGMA, meta=META)
    est = _estimator(tulip)
    rec = DynamicRecording(
        "tulip", "right", list(tulip.joint_names), t, q, wrench=np.zeros((t.size, 6)), meta=META
    )
    A, row, sample = est.prepare(rec)
    theta = fc.guess[: A.shape[1]]
    rng = np.random.default_rng(1)
    xs = []
    for _ in range(DRAWS):
        noise = rng.normal(size=(t.size, 3)) * SIGMA
        b = A @ theta + est.filtered_rows(noise, RATE).ravel()
        xs.append(est._ls(A, b, row, sample, RATE)[0])
    ratio = np.std(xs, axis=0) / fc.se
    assert 0.9 < np.median(ratio) < 1.1, np.median(ratio)
    assert ratio.min() > 0.75 and ratio.max() < 1.3, (ratio.min(), ratio.max())


def test_forecast_scales_with_noise_and_names_what_it_cannot_determine(recording):
    tulip, t, q = recording
    a = forecast_dynamic(_estimator(tulip), t, q, SIGMA, meta=META)
    b = forecast_dynamic(_estimator(tulip), t, q, 2 * SIGMA, meta=META)
    assert np.allclose(b.se, 2 * a.se)
    assert np.all(a.isolated_se <= a.se * (1 + 1e-9))  # correlation between parameters only costs
    now, longer, beyond = a.determined(15.0, 600.0)
    assert sorted(now + longer + beyond) == sorted(a.symbols[: a.inertial])
    total = next(k for k, f in enumerate(a.formulas) if f.count("m@") == len(tulip.links))
    assert a.symbols[total] in now
    need = a.needed_s(15.0)
    assert all(need[a.symbols.index(s)] <= 600.0 for s in longer)
    assert all(need[a.symbols.index(s)] > 600.0 for s in beyond)
    # needed_s: where the relative SE, shrinking as 1/√(fitted time), reaches 15 %
    k = a.symbols.index(longer[0]) if longer else total
    assert a.rel_se_pct[k] * np.sqrt(a.fitted_s / (need[k] - a.edges_s)) == pytest.approx(15.0)


def test_plan_forecast_command(capsys):
    assert main(["plan", "forecast", str(TEST_DESIGN), "--noise", "2", "0.3", "0.3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["noise"] == {"fz": 2.0, "mx": 0.3, "my": 0.3}
    assert out["cutoff_hz"] == pytest.approx(2.0, rel=0.01)
    params = out["parameters"]
    assert len(params) == 37
    named = out["determined"] + out["determined_if_repeated"] + out["beyond_practical"]
    assert sorted(named) == sorted(p["symbol"] for p in params)
    assert all((p["rel_se_pct"] < 15) == (p["symbol"] in out["determined"]) for p in params)
    assert main(["plan", "forecast", str(TEST_DESIGN), "--noise", "2", "0.3"]) == 2
    assert "noise must be 3 positive σ (fz, mx, my) or one" in capsys.readouterr().err
    assert main(["plan", "forecast", str(TEST_DESIGN), "--noise", "2", "0.3", "0.3"]) == 0
    text = capsys.readouterr().out
    assert "determined to 15 %" in text and "rel. SE [%]" in text


def test_plan_forecast_plot(tmp_path, capsys):
    png = tmp_path / "forecast.png"
    argv = ["plan", "forecast", str(TEST_DESIGN), "--noise", "2", "0.3", "0.3", "--plot", str(png)]
    assert main(argv) == 0 and png.stat().st_size > 10_000
    assert main(argv) == 2  # an existing figure is kept without --force
    assert "--force" in capsys.readouterr().err
    assert main(argv + ["--force"]) == 0


def test_board_recordings_fitted_together_share_one_foot_placement(recording):
    """Two recordings on the boards at one placement are fitted together (base parameters of the first); at
    another placement — here the joints moved 0.05 rad, the other sole with them — they are refused by name."""
    tulip, t, q = recording
    rng = np.random.default_rng(2)

    def rec(angles):
        wrench = np.zeros((t.size, 6))
        wrench[:, 2:5] = rng.normal(size=(t.size, 3)) * SIGMA
        return DynamicRecording(
            "tulip", "right", list(tulip.joint_names), t, angles, wrench=wrench, meta=META
        )

    single = _estimator(tulip).fit(rec(q)).fit_
    both = _estimator(tulip).fit([rec(q), rec(q)]).fit_
    assert both.symbols == single.symbols and both.fitted_s == pytest.approx(2 * single.fitted_s)
    with pytest.raises(DataError, match="another foot placement"):
        _estimator(tulip).fit([rec(q), rec(q + 0.05)])
