"""What a user review of `identify dynamic`'s statistics found: times to determine an estimate divided by a noisy
estimate, a near-singular regressor passed the rank test, the residual σ hid a bias, rows were called samples,
physically impossible estimates went unremarked; and, of `plan trajectory`, --motion and the standing base's
error."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from conftest import UR5, simulated_recording

from drivers.emulators.mujoco_arm import ArmImperfections, arm_efforts
from formats.dynamic_recording import DynamicRecording, read_dynamic_recording, write_dynamic_recording
from formats.errors import IdentifiabilityError
from identify.dynamic import (
    CUTOFF_PER_BAND,
    DEFAULT_CUTOFF_HZ,
    EDGE_PERIODS,
    IMPOSSIBLE_SE,
    KAPPA_SCALED_MAX,
    MAX_EDGE_FRACTION,
    SCALE_RESOLVED_SE,
    DynamicEstimator,
)
from identify.recording_model import model_of_recording
from poise.cli import main
from robots.params_io import resolve_params
from robots.registry import get_model
from trajectories.fourier import FourierTrajectory
from trajectories.verify import sample_grid

DOUBLE_SUPPORT_PLAN = "tests/data/tulip_double_support_10s.json"


def _arm_recording(folder, seconds: float, noise: float, reversed_viscous: float = 0.0):
    """A UR5 motion with MuJoCo's efforts (friction 0.3 N·m·s/rad, 0.8 N·m) and white effort noise; with
    `reversed_viscous`, that much viscous friction taken off the second joint's effort (a friction the physics
    cannot have: the effort helping the motion)."""
    model = get_model(str(UR5))
    rng = np.random.default_rng(3)
    traj = FourierTrajectory(5.0, seconds, np.array([0.0, -1.2, 1.2, -1.5, -1.5, 0.0]),
                             rng.normal(0.0, 0.5, (6, 3)), rng.normal(0.0, 0.5, (6, 3)))  # fmt: skip
    t = sample_grid(traj, 1.0 / 200.0)
    q, qd, qdd = traj.sample(t)
    qm, tau = arm_efforts(
        model, resolve_params("urdf", model), q, qd, qdd, ArmImperfections(viscous=0.3, coulomb=0.8)
    )
    tau = tau + np.random.default_rng(0).normal(0.0, noise, tau.shape)
    tau[:, 1] -= reversed_viscous * qd[:, 1]
    path = folder / "recording.csv"
    rec = DynamicRecording(model.name, model.root, list(model.joint_names), t, qm, tau,
                           meta={"robot_source": str(UR5)})  # fmt: skip
    write_dynamic_recording(rec, path)
    return path


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    """A short, noisy arm recording: many estimates within 2 SE of zero, a few beyond."""
    return _arm_recording(tmp_path_factory.mktemp("noisy"), 5.0, 2.0)


def _fit(capsys, *argv: str) -> dict:
    assert main(["identify", "dynamic", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_time_to_determine_is_given_only_where_the_estimate_is_resolved_from_zero(noisy, capsys):
    out = _fit(capsys, str(noisy))
    by = {p["symbol"]: p for p in out["parameters"]}
    resolved = {s for s in out["not_determined"] if abs(by[s]["value"]) > SCALE_RESOLVED_SE * by[s]["se"]}
    assert out["scale_unresolved"] and sorted(out["scale_unresolved"]) == sorted(
        set(out["not_determined"]) - resolved
    )
    assert all(out["needed_s"][s] is None for s in out["scale_unresolved"])
    for s in resolved:  # relative to |θ̂| − 2 SE: longer than dividing by the estimate itself
        p = by[s]
        by_estimate = out["fitted_s"] * (p["rel_se_pct"] / out["well_pct"]) ** 2
        assert out["needed_s"][s] > by_estimate
    assert not set(out["beyond_practical"]) & set(out["scale_unresolved"])
    assert main(["identify", "dynamic", str(noisy)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"scale unresolved (|estimate| ≤ {SCALE_RESOLVED_SE:g} SE" in text
    assert f"{len(out['scale_unresolved'])}: {', '.join(out['scale_unresolved'])}" in text


def test_residuals_report_their_rms_sd_and_mean_per_row_with_units(noisy, capsys):
    out = _fit(capsys, str(noisy))
    rmse, sd, mean = (np.array(out[k]) for k in ("rmse_nm", "sigma_nm", "residual_mean_nm"))
    assert np.allclose(rmse**2, sd**2 + mean**2, rtol=1e-6)
    assert out["row_units"] == [r.rsplit(" ", 1)[1] for r in out["rows"]] and len(out["row_units"]) == len(
        rmse
    )
    # rows, not samples: every recorded sample, the decimated ones fitted, and their rows (one per joint)
    recorded = len(read_dynamic_recording(noisy).t)
    assert out["recording_samples"] == recorded > out["fitted_samples"]
    assert out["regressor_rows"] == out["samples"] <= len(rmse) * out["fitted_samples"]
    assert main(["identify", "dynamic", str(noisy)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    dropped = out["reversal_rows_dropped"]  # friction: rows around velocity reversals, said with their share
    assert dropped > 0 and out["reversal_rows_share"] == dropped / (dropped + out["regressor_rows"])
    assert (f"({out['regressor_rows']} regressor rows from {out['fitted_samples']} decimated samples of "
            f"{recorded} recorded; {dropped} rows ({100 * out['reversal_rows_share']:.0f} %) dropped around velocity "
            "reversals)") in text  # fmt: skip
    first = out["rows"][0].rsplit(" ", 1)
    assert "residual RMS" in text and f"{first[0]} {rmse[0]:.3g} {first[1]} (σ {sd[0]:.3g}, mean" in text


def test_a_small_relative_se_keeps_significant_digits_in_the_table(noisy, capsys):
    out = _fit(capsys, str(noisy))
    assert main(["identify", "dynamic", str(noisy)]) == 0
    text = capsys.readouterr().out
    for p in out["parameters"]:
        row = next(line for line in text.splitlines() if re.match(rf"│ {re.escape(p['symbol'])}\s+│", line))
        shown = float(row.rstrip(" │").rsplit("│", 1)[1])
        assert shown == pytest.approx(p["rel_se_pct"], rel=0.06, abs=0.5 if p["rel_se_pct"] >= 10 else 0)


def test_negative_friction_beyond_three_se_is_named_impossible(tmp_path, capsys):
    path = _arm_recording(tmp_path, 10.0, 0.05, reversed_viscous=1.0)
    assert main(["identify", "dynamic", str(path), "--json"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    by = {p["symbol"]: p for p in out["parameters"]}
    below = sorted(
        s for s, p in by.items() if s.startswith(("fv@", "fc@")) and p["value"] < -IMPOSSIBLE_SE * p["se"]
    )
    assert "fv@shoulder_lift_joint" in below and sorted(d["symbol"] for d in out["impossible"]) == below
    d = next(d for d in out["impossible"] if d["symbol"] == "fv@shoulder_lift_joint")
    assert d["value"] == by[d["symbol"]]["value"] and d["unit"] == "N·m·s/rad"
    err = " ".join(cap.err.split())
    assert (
        "physically impossible" in err
        and f"fv@shoulder_lift_joint = {d['value']:.3g} ± {d['se']:.2g} N·m·s/rad" in err
    )


def test_an_honest_fit_reports_nothing_impossible(tmp_path, capsys):
    out = _fit(capsys, str(_arm_recording(tmp_path, 10.0, 0.05)))
    assert out["impossible"] == []
    assert "physically impossible" not in capsys.readouterr().err


@pytest.fixture(scope="module")
def double_support(tmp_path_factory):
    """The stored double-support design on the twin (quantised encoders), as recorded."""
    return simulated_recording(tmp_path_factory.mktemp("ds"), DOUBLE_SUPPORT_PLAN, 500.0)


def test_a_double_support_recording_fitted_as_single_support_is_refused_as_near_singular(double_support):
    """With quantised encoders the single-support regressor of a double-support motion has full rank by
    np.linalg.matrix_rank's tolerance, but its column-scaled κ is ~1e8 (|ρ| = 1.0000 pairs): refused, naming
    what it cannot separate — and the same recording as recorded is fitted."""
    rec = read_dynamic_recording(double_support)
    model = model_of_recording(rec, str(double_support))
    fit = DynamicEstimator(model, rec.base, simplified=True, quantity="wrench").fit(rec).fit_
    assert np.all(np.isfinite(fit.se))
    # the total mass is among the estimates physics keeps positive, and it is positive here
    total = [k for k in fit.positive if fit.formulas[k].count("m@") == len(model.links)]
    assert len(total) == 1 and fit.impossible() == []
    single = replace(rec, meta=rec.meta | {"motion": "single-support"})
    with pytest.raises(
        IdentifiabilityError, match=r"does not excite \d+ parameter\(s\): ϑ\d+.*column-scaled κ"
    ):
        DynamicEstimator(model, rec.base, simplified=True, quantity="wrench").fit(single)


def test_cutoff_help_states_the_default_rule_of_the_fit(capsys):
    assert main(["identify", "dynamic", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    rise = EDGE_PERIODS / MAX_EDGE_FRACTION
    for part in (f"{CUTOFF_PER_BAND:g}× the recording's motion_band_hz", f"{rise:g} Hz·s / its duration",
                 f"not past {DEFAULT_CUTOFF_HZ:g} Hz", f"{EDGE_PERIODS:g} cut-off periods",
                 f"within {100 * MAX_EDGE_FRACTION:g} % of it"):  # fmt: skip
        assert part in text


def test_a_too_short_recording_is_told_in_a_sentence(noisy, tmp_path, capsys):
    rec = read_dynamic_recording(noisy)
    n = int(1.2 * rec.rate_hz)
    short = tmp_path / "short.csv"
    write_dynamic_recording(replace(rec, t=rec.t[:n], q=rec.q[:n], tau=rec.tau[:n]), short)
    assert main(["identify", "dynamic", str(short), "--cutoff-hz", "5"]) == 2
    assert re.search(r"the recording \([\d.]+ s\) is too short for a 5 Hz cut-off", capsys.readouterr().err)


def test_plan_trajectory_takes_motion_as_model_show_names_it_and_names_the_bases(tmp_path, capsys):
    out = tmp_path / "p.json"
    argv = ["plan", "trajectory", "tulip", "--out", str(out)]
    assert main([*argv, "--motion", "double-support", "--single-support"]) == 2
    assert "choose one motion class" in capsys.readouterr().err
    model = get_model("tulip")
    assert main([*argv, "--motion", "double-support", "--base", model.root]) == 2
    err = capsys.readouterr().err
    assert all(b in err for b in model.bases) and not out.exists()


def test_motion_double_support_parses_to_the_settings_of_double_support():
    """`--motion double-support` alone and its alias flag give the same design settings, as do single support's."""
    from poise.cli import build_parser
    from poise.cmd_plan_trajectory import _settings

    parser = build_parser()
    argv = ["plan", "trajectory", "tulip", "--out", "p.json"]
    for motion in ("double-support", "single-support"):
        by_motion = _settings(parser.parse_args([*argv, "--motion", motion]))
        by_flag = _settings(parser.parse_args([*argv, f"--{motion}"]))
        assert by_motion.motion == motion and by_motion == by_flag


@pytest.fixture(scope="module")
def exact_single_support(tmp_path_factory):
    """The stored single-support plan simulated with exact encoders: every check of the recording passes, but
    only quantisation noise would have filled in the full model's near-null directions."""
    path = tmp_path_factory.mktemp("exact") / "ss.csv"
    assert main(["simulate", "trajectory", "tests/data/tulip_single_support_6s.json", "--out", str(path),
                 "--encoder-ticks", "0"]) == 0  # fmt: skip
    return path


def test_a_near_singular_full_model_is_refused_through_the_cli_with_its_remedies(
    exact_single_support, capsys
):
    capsys.readouterr()
    assert main(["identify", "dynamic", str(exact_single_support)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    kappa = float(re.search(r"column-scaled κ ([\d.e+]+) >", err).group(1))
    assert kappa > KAPPA_SCALED_MAX
    for remedy in ("--simplified", "record a motion that excites them", "--essential PCT"):
        assert remedy in err, err
    missing = int(re.search(r"does not excite (\d+) parameter", err).group(1))
    # the remedy --essential: the near-null parameters held at the prior, named, and the rest fitted
    out = _fit(capsys, str(exact_single_support), "--essential", "50")
    held = [s for s, why in out["fixed"].items() if why.startswith("not excited by this motion")]
    assert len(held) == missing and out["kappa_scaled"] <= KAPPA_SCALED_MAX
    # and --simplified, the other remedy, is fitted
    assert _fit(capsys, str(exact_single_support), "--simplified")["kappa_scaled"] <= KAPPA_SCALED_MAX
