"""What `plan forecast`'s verdicts are against and what its SEs hold: the boards' tare in a standing forecast (as
`identify dynamic` puts a run's recorded tare in its SEs), the values the relative SEs are against (the guessed set,
or a previous identify result through --params), the motion class `plan sample` declares, and `plan reach`'s
refusals in its options' own names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from formats.errors import DataError
from formats.trajectory_plan import load_trajectory_plan
from poise.cli import main
from poise.workflows.plan_forecast import forecast_plans

DATA = Path(__file__).parent / "data"
PLAN = DATA / "tulip_double_support_10s.json"
QUIET = [1e-6, 1e-6, 1e-6]  # N, N·m, N·m: noise far below the tare's effect


@pytest.fixture(scope="module")
def plan():
    return load_trajectory_plan(PLAN)


def test_a_tare_offset_is_read_as_mass(plan):
    """A constant Fz offset of δ N is a load of δ/g kg on the boards: with the noise negligible, the total mass
    (ϑ1 of a standing robot) carries each run's tare SD in full, and two runs with their own tares halve its
    variance."""
    sd = 0.01  # kg
    one = forecast_plans([plan], ["a"], QUIET, tare_kg=sd).forecast
    assert one.units[0] == "kg" and one.formulas[0].startswith("m@")
    assert one.se[0] == pytest.approx(sd, rel=0.02)
    assert one.offset_se[0] == pytest.approx(sd, rel=0.02)
    two = forecast_plans([plan, plan], ["a", "b"], QUIET, tare_kg=sd).forecast
    assert two.se[0] == pytest.approx(sd / np.sqrt(2), rel=0.02)
    none = forecast_plans([plan], ["a"], QUIET, tare_kg=0.0).forecast
    assert none.se[0] < sd / 100


def test_the_default_forecast_includes_the_boards_tare(plan):
    fc = forecast_plans([plan], ["a"], [0.49, 1.42, 1.29]).forecast
    bare = forecast_plans([plan], ["a"], [0.49, 1.42, 1.29], tare_kg=0.0).forecast
    assert fc.tare_mass_sd > 0 and bare.tare_mass_sd == 0
    assert fc.se[0] > 2 * bare.se[0]  # the tare dominates the mass's SE at this noise
    assert np.all(fc.se >= bare.se * (1 - 1e-9))  # an extra error source never shrinks an SE


def test_params_takes_an_identify_result_and_judges_against_its_values(plan, tmp_path):
    fc = forecast_plans([plan], ["a"], [0.49, 1.42, 1.29]).forecast
    nb = fc.inertial
    result = {"robot": "tulip", "sigma_nm": [0.3, 0.5, 0.4],
              "parameters": [{"symbol": s, "formula": f, "value": 3.0 * g}
                             for s, f, g in zip(fc.symbols[:nb], fc.formulas[:nb], fc.guess[:nb], strict=True)]}  # fmt: skip
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(result))
    got = forecast_plans([plan], ["a"], [0.49, 1.42, 1.29], params=str(path)).forecast
    assert np.allclose(got.se, fc.se)  # the SEs do not depend on the values
    with np.errstate(divide="ignore", invalid="ignore"):
        assert np.allclose(got.rel_se_pct[:nb], fc.rel_se_pct[:nb] / 3.0, equal_nan=True)
    assert str(path) in got.params_name
    result["parameters"] = result["parameters"][:-1]
    path.write_text(json.dumps(result))
    with pytest.raises(DataError, match=r"--params .*lacks 1 of the"):
        forecast_plans([plan], ["a"], [0.49, 1.42, 1.29], params=str(path))


def test_the_forecast_says_what_its_verdicts_are_against(capsys):
    assert main(["plan", "forecast", str(PLAN), "--noise", "0.49", "1.42", "1.29"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "relative SEs against 'sim'" in out and "The verdicts are against 'sim'" in out
    assert "whole runs" in out and "|estimate| − 2 SE" in out  # both rules of the needed time
    assert "tare" in out
    assert main(["plan", "forecast", str(PLAN), "--noise", "0.49", "1.42", "1.29", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["params"] == "sim" and "against" not in doc and doc["tare_mass_sd_kg"] > 0
    assert set(doc["rules"]) == {"forecast", "identify"}
    assert all(p["tare_se"] <= p["se"] for p in doc["parameters"])


def test_a_double_support_plans_setpoints_say_so(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["plan", "sample", str(PLAN), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["motion"] == "double-support"
    assert "# motion: double-support" in out.read_text().splitlines()[:20]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--noise", "1"], "--motion free"),  # a biped without a motion class
        (["--double-support", "--noise", "1", "2"], "plan reach --noise: noise must be 3"),
        (["--single-support", "--noise", "1", "--lift", "0.3", "--max-lift", "0.25"], "--max-lift 0.25 m"),
        (
            ["--single-support", "--noise", "1", "--max-sole-tilt", "95"],
            "argument --max-sole-tilt: must be > 0 and < 90, got '95'",
        ),
    ],
)
def test_reach_refuses_in_its_options_names(extra, message, capsys):
    assert main(["plan", "reach", "tulip", "--simplified", "--max-iter", "2", *extra]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert message in err and "Traceback" not in err


def test_reach_names_an_unknown_base_parameter_as_its_option(capsys):
    from tests.test_plan_reach import SMALL
    from tests.test_trajectories import UR5

    brief = [a if a != "40" or SMALL[k - 1] != "--max-iter" else "2" for k, a in enumerate(SMALL)]
    args = ["plan", "reach", str(UR5), *brief, "--workers", "1", "--noise", "0.2", "--only", "ϑ2", "ϑ99"]
    assert main(args) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "plan reach --only ϑ99: not a base inertial parameter" in err and "(ϑ1–ϑ36;" in err


def test_a_result_at_another_posture_matches_up_to_its_coefficients():
    """A standing fit takes its base parameters at the recording's middle posture, the plan's forecast at its own:
    the same parameter's coefficients differ a little (d1: 0.3015·mcx@foot_l − 0.0001021·mcz@foot_l against
    0.2999·mcx@foot_l), another parameter's do not match."""
    from poise.workflows.plan_forecast import _same_parameter

    plan_form = "mcy@torso + 0.15·m@foot_l + 0.2999·mcx@foot_l"
    fitted = {"ϑ3": ("mcy@torso + 0.15·m@foot_l + 0.3015·mcx@foot_l − 0.0001021·mcz@foot_l", 1.8)}
    assert _same_parameter(fitted, "ϑ3", plan_form) == 1.8
    assert _same_parameter(fitted, "ϑ3", "mcy@torso − 0.15·m@foot_l + 0.2999·mcx@foot_l") is None
    assert _same_parameter(fitted, "ϑ4", plan_form) is None


def test_identify_compares_with_a_forecast_holding_the_tare_its_ses_hold():
    """`identify dynamic` gives the plans' forecast the tare σ its own SEs hold: the largest of the fitted
    recordings' whose tare is in the fit, averaged runs' √(Σ σ²) / N as their offsets are averaged; none when no
    fitted recording's SEs hold one (torque fits, runs without a recorded tare)."""
    from poise.cmd_dynamic import RunOf, _fitted_tare_sd

    def run(sd):
        return RunOf(
            "p.json", "0" * 64, {}, None, tare_mass_sd=sd, tare_cov=None if sd is None else np.eye(3)
        )

    runs = [run(0.01), run(0.03), run(0.02), OSError("no run.json")]
    cov = np.eye(3)
    assert _fitted_tare_sd([[0], [1], [2]], runs, [cov, cov, cov]) == pytest.approx(0.03)
    # recording 2's tare not in its SE (no tare_wrench_cov): not counted
    assert _fitted_tare_sd([[0], [1], [2]], runs, [cov, None, cov]) == pytest.approx(0.02)
    assert _fitted_tare_sd([[0, 1], [2]], runs, [cov, cov]) == pytest.approx(
        max(np.hypot(0.01, 0.03) / 2, 0.02)
    )
    assert _fitted_tare_sd([[0], [3]], runs, [cov, None]) == pytest.approx(0.01)
    assert _fitted_tare_sd([[0], [1]], runs, None) is None


def test_plan_forecast_takes_the_tare_it_counts(capsys):
    argv = ["plan", "forecast", str(PLAN), "--noise", "0.49", "1.42", "1.29", "--json"]
    assert main([*argv, "--tare-kg", "0.05"]) == 0
    big = json.loads(capsys.readouterr().out)
    assert main([*argv, "--tare-kg", "0"]) == 0
    none = json.loads(capsys.readouterr().out)
    assert big["tare_mass_sd_kg"] == 0.05 and none["tare_mass_sd_kg"] == 0
    # the total mass (ϑ1 standing) carries the tare in full: two runs' worth of noise are far below 0.05 kg
    assert big["parameters"][0]["se"] > 0.045 > none["parameters"][0]["se"]
    assert main([*argv, "--tare-kg", "-1"]) == 2
    assert "--tare-kg" in capsys.readouterr().err


@pytest.mark.parametrize("tilt", ["90", "0", "nan"])
def test_plan_trajectory_refuses_a_sole_tilt_outside_0_to_90_degrees(tilt, tmp_path, capsys):
    out = tmp_path / "t.json"
    argv = ["plan", "trajectory", "tulip", "--single-support", "--simplified", "--max-sole-tilt", tilt, "--out",
            str(out), "--max-iter", "2"]  # fmt: skip
    assert main(argv) == 2
    assert "argument --max-sole-tilt: must" in capsys.readouterr().err and not out.exists()


def test_a_max_lift_below_twice_the_lift_is_refused_in_the_options_names():
    from trajectories.excitation import ExcitationSettings

    with pytest.raises(
        DataError, match=r"--max-lift \(max_lift\) must be .* above twice --lift \(lift 0.05 m\)"
    ):
        ExcitationSettings(motion="single-support", lift=0.05, max_lift=0.08).validate()


@pytest.mark.parametrize(
    "motion, has", [("--single-support", "which has 44"), ("--double-support", "which has at most 38")]
)
def test_reach_refuses_an_unknown_base_parameter_before_any_design(motion, has, monkeypatch, capsys):
    import poise.workflows.reach as reach

    def no_design(*a, **k):
        raise AssertionError("designed before refusing --only")

    monkeypatch.setattr(reach, "_design", no_design)
    args = ["plan", "reach", "tulip", "--simplified", motion, "--noise", "1", "--max-iter", "2", "--only", "ϑ2",
            "ϑ99"]  # fmt: skip
    assert main(args) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"plan reach --only ϑ99: not a base inertial parameter of this motion, {has}" in err
    assert "poise model show tulip --regressor base-wrench:fz,mx,my" in err and "Traceback" not in err


def test_inside_the_demo_a_capped_design_that_passes_is_not_told_to_change_the_demos_settings():
    from poise.cmd_plan_trajectory import DESIGN_FOR, design_notes
    from trajectories.excitation import ExcitationResult

    def result(ok: bool) -> ExcitationResult:
        return ExcitationResult(None, 10.0, 5.0, 0.0, 7, 1.0, "Maximum_Iterations_Exceeded", ["ϑ1"],
                                verification={"ok": ok, "unexcited": []})  # fmt: skip

    (own,) = design_notes(result(True), False)
    assert "IPOPT stopped without converging" in own and "more --max-iter" in own
    token = DESIGN_FOR.set("poise demo standing")
    try:
        (demo,) = design_notes(result(True), False)
        (failed,) = design_notes(result(False), False)
    finally:
        DESIGN_FOR.reset(token)
    assert demo.startswith("poise demo standing: ") and "iteration cap" in demo and "checks passed" in demo
    assert "another --seed" not in demo and "Maximum_Iterations_Exceeded" in demo
    assert "more --max-iter, another --seed" in failed  # a design that fails its checks keeps the advice
    assert DESIGN_FOR.get() is None
