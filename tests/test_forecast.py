"""`identify.forecast` / `poise plan forecast`: standard errors forecast from a plan's own regressor and a stated
white sensor noise, before anything is run — checked against the spread of estimates over many noisy recordings
of the TUlip double-support design (tests/data/tulip_double_support_10s.json)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import TEST_DESIGN, UR5, arm_motion, sampled_test_design

from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError
from identify.dynamic import DynamicEstimator
from identify.forecast import filtered_autocorrelation, forecast_dynamic, forecast_motions
from identify.residual_covariance import toeplitz_gram
from poise.cli import main
from robots.registry import get_model

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
    # needed_s: the fewest whole runs of the motion, recorded apart and fitted together, at which the relative SE
    # (shrinking as 1/√runs) reaches 15 % — one run fewer does not
    k = a.symbols.index(longer[0]) if longer else total
    runs = need[k] / a.duration_s
    assert runs == pytest.approx(round(runs), abs=1e-9) and runs >= 1
    assert a.rel_se_pct[k] / np.sqrt(runs) <= 15.0
    if runs > 1:
        assert a.rel_se_pct[k] / np.sqrt(runs - 1) > 15.0


def test_plan_forecast_command(capsys):
    assert main(["plan", "forecast", str(TEST_DESIGN), "--noise", "2", "0.3", "0.3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["noise"] == {"fz": 2.0, "mx": 0.3, "my": 0.3}
    assert out["cutoff_hz"] == pytest.approx(2.0, rel=0.01)
    params = out["parameters"]
    assert len(params) == 37
    named = out["determined"] + out["determined_if_repeated"] + out["beyond_practical"] + out["zero_guess"]
    assert sorted(named) == sorted(p["symbol"] for p in params)
    # a zero guess has no relative SE: told apart from what noise puts beyond any length
    assert out["zero_guess"] == [p["symbol"] for p in params if p["value"] == 0 and p["symbol"] not in
                                 out["determined"] + out["determined_if_repeated"]]  # fmt: skip
    assert all((p["rel_se_pct"] < 15) == (p["symbol"] in out["determined"]) for p in params)
    # the unit of each: its leading standard parameter's (TUlip's ZMP model: the total mass is a base parameter)
    lead = {"m": "kg", "mcx": "kg·m", "mcy": "kg·m", "mcz": "kg·m"}
    assert all(p["unit"] == lead.get(p["formula"].split("@")[0], "kg·m²") for p in params)
    assert {p["unit"] for p in params} == {"kg", "kg·m", "kg·m²"}
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


def _dense_forecast(est, motions, sig):
    """The oracle: SEs and isolated SEs as `forecast_motions` computed them with the fitted rows' dense N × N noise
    covariance (`est` after that forecast, whose base parameters it keeps)."""
    model = est.model
    recs = [DynamicRecording(
        model.name, est.base, list(model.joint_names), t, q, meta=meta,
        tau=np.zeros((len(t), model.nq)) if est.quantity == "torque" else None,
        wrench=np.zeros((len(t), 6)) if est.quantity == "wrench" else None,
    ) for t, q, meta in motions]  # fmt: skip
    A, kind, sample = est.prepare_many(recs, reuse_base=True)
    rate = recs[0].rate_hz
    lag = np.abs(sample[:, None] - sample[None, :])
    R = filtered_autocorrelation(rate, est.cutoff_, est._step(rate), int(lag.max()))[lag]
    noise_cov = R * np.where(kind[:, None] == kind[None, :], sig[kind][:, None] * sig[kind][None, :], 0.0)
    w = 1.0 / sig[kind]
    Aw = A * w[:, None]
    S = Aw.T @ (noise_cov * np.outer(w, w)) @ Aw
    G = Aw.T @ Aw
    H = np.linalg.inv(G)
    return np.sqrt(np.diag(H @ S @ H)), np.sqrt(np.diag(S)) / np.diag(G)


@pytest.mark.parametrize("case", ["boards", "arm"])
def test_forecast_equals_that_of_the_dense_noise_covariance(recording, case):
    """The noise covariance applied as per-kind Toeplitz products gives the numbers the dense N × N one gave, for
    two recordings fitted together: on the boards (decimated to every 4th sample: the filter's autocorrelation
    reaches across the gap between the recordings' samples) and an arm's joint torques with friction (each joint's
    rows around its velocity reversals dropped) and a σ per joint. The SEs agree to the dense formula's own
    rounding: (AwᵀAw)⁻¹, of condition ~4e9 on the boards, amplifies it — the same formula reassociated,
    AwᵀΣ(Aw) instead of (AwᵀΣ)Aw, moves them by 5e-11; the isolated SEs (no inverse) agree to 1e-15."""
    if case == "boards":
        tulip, t, q = recording
        est = DynamicEstimator(tulip, "right", True, False, quantity="wrench", decimate=4)
        motions, sig = [(t, q, META), (t, q[::-1], META)], SIGMA
    else:
        est = DynamicEstimator(get_model(str(UR5)))
        motions, sig = [arm_motion(1), arm_motion(2)], np.linspace(0.1, 0.3, 6)
    fc = forecast_motions(est, motions, sig)
    se, isolated = _dense_forecast(est, motions, sig)
    assert np.allclose(fc.se, se, rtol=1e-9, atol=0.0)
    assert np.allclose(fc.isolated_se, isolated, rtol=1e-13, atol=0.0)


def test_toeplitz_gram_is_the_dense_product():
    """Σ_k X_kᵀ T X_k against XᵀΣX formed densely, with an autocovariance reaching every lag, dropped rows and
    unordered rows."""
    rng = np.random.default_rng(3)
    sample, row = np.divmod(np.arange(3 * 40), 3)
    keep = rng.random(len(sample)) > 0.2
    sample, row = sample[keep] + 5, row[keep]
    order = rng.permutation(len(sample))
    sample, row = sample[order], row[order]
    X = rng.normal(size=(len(sample), 4))
    c = np.exp(-np.arange(50) / 8.0) * np.cos(np.arange(50) / 3.0)
    dense = c[np.abs(sample[:, None] - sample[None, :])] * (row[:, None] == row[None, :])
    assert np.allclose(toeplitz_gram(c, X, sample, row), X.T @ dense @ X, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="lags"):
        toeplitz_gram(c[:44], X, sample, row)


def test_a_ten_minute_forecast_forms_no_dense_covariance(recording):
    """600 s of the 10 s periodic design: ~9000 fitted rows, whose dense covariance took 2.6 GB (peak of the
    former forecast; bench/forecast.py). The forecast completes, its SEs shrink as 1/√(fitted time) from those of
    60 s of the same motion (each parameter within 5 %) and, in the median, from those of the design's 10 s."""
    tulip, t, q = recording
    period = len(t) - 1  # samples: the design's last sample is its first

    def repeated(times: int):
        k = np.arange(times * period + 1)
        return k / RATE, q[k % period]

    est = _estimator(tulip)
    medium = forecast_dynamic(est, *repeated(6), SIGMA, meta=META)
    # one numbering of the base parameters (a standing robot's are chosen at the recording's middle posture)
    short = forecast_dynamic(est, t, q, SIGMA, meta=META, reuse_base=True)
    long = forecast_dynamic(est, *repeated(60), SIGMA, meta=META, reuse_base=True)
    assert long.symbols == medium.symbols and np.all(np.isfinite(long.se)) and np.all(long.se > 0)
    assert long.duration_s == pytest.approx(600.0)
    for other, tol in ((medium, 0.05), (short, 0.10)):
        ratio = other.se / long.se / np.sqrt(long.fitted_s / other.fitted_s)
        if other is medium:
            assert np.all(np.abs(ratio - 1) < tol), ratio
        assert abs(np.median(ratio) - 1) < tol, np.median(ratio)
