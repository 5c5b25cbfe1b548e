"""Review of `plan sample` and `plan forecast` (fixD): rates that carry the motion, a memory guard, plans that fail
`plan check`, placeholder limits, what --json carries, and plan files refused field by field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from formats.setpoints import read_setpoints
from formats.trajectory_plan import MAX_RATE_HZ
from poise.cli import main
from poise.workflows import plan_forecast
from robots.description import placeholder_limits
from robots.registry import get_model

DATA = Path(__file__).parent / "data"
UR5 = DATA / "ur5_6s.json"


def _error(capsys, argv: list[str]) -> str:
    """The one-line error of a refused command (exit 2)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 or "usage" in err, err
    return err


def _tampered(tmp_path: Path, name: str, edit) -> str:
    """The UR5 plan with `edit(doc)` applied, written as `name`."""
    doc = json.loads(UR5.read_text())
    edit(doc)
    out = tmp_path / name
    out.write_text(json.dumps(doc))
    return str(out)


def _short_icub(tmp_path: Path) -> str:
    """The iCub arm's plan cut to one period (its URDF's velocity and effort limits are placeholders)."""
    doc = json.loads((DATA / "icub_estimation_60s.json").read_text())
    doc["trajectory"]["duration_s"] = doc["trajectory"]["period_s"]
    out = tmp_path / "icub_short.json"
    out.write_text(json.dumps(doc))
    return str(out)


def test_sample_refuses_a_rate_below_what_carries_the_band_as_forecast_does(tmp_path, capsys):
    err = _error(capsys, ["plan", "sample", str(UR5), "--out", str(tmp_path / "a.csv"), "--rate-hz", "2"])
    need = int(re.search(r"--rate-hz (\d+) or more", err).group(1))
    assert need > 2 and not (tmp_path / "a.csv").exists()
    # one check: forecast names the same minimum
    ferr = _error(capsys, ["plan", "forecast", str(UR5), "--noise", "0.1", "--rate-hz", str(need - 1)])
    assert f"--rate-hz {need} or more" in ferr
    _error(capsys, ["plan", "sample", str(UR5), "--out", str(tmp_path / "b.csv"), "--rate-hz", str(need - 1)])
    assert main(["plan", "sample", str(UR5), "--out", str(tmp_path / "c.csv"), "--rate-hz", str(need)]) == 0


def test_sample_rate_is_capped_at_the_plan_formats_servo_rate(tmp_path, capsys):
    err = _error(capsys, ["plan", "sample", str(UR5), "--out", str(tmp_path / "a.csv"), "--rate-hz",
                          f"{MAX_RATE_HZ * 10:g}"])  # fmt: skip
    assert f"{MAX_RATE_HZ:g}" in err


def test_sample_whose_file_would_not_fit_is_refused_with_a_rate_that_does(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plan_forecast, "STATE_BYTES", 2 * 2**20)
    err = _error(capsys, ["plan", "sample", str(UR5), "--out", str(tmp_path / "a.csv"), "--rate-hz", "5000"])
    rate = int(re.search(r"--rate-hz (\d+) or less", err).group(1))
    assert 10 < rate < 5000 and not (tmp_path / "a.csv").exists()
    assert main(["plan", "sample", str(UR5), "--out", str(tmp_path / "b.csv"), "--rate-hz", str(rate)]) == 0


def test_torques_of_a_standing_plan_are_refused_before_the_check(tmp_path, capsys, monkeypatch):
    import trajectories.plan

    def never(*_a, **_k):
        raise AssertionError("the fine-grid check ran before the refusal")

    monkeypatch.setattr(trajectories.plan, "check_plan", never)
    err = _error(capsys, ["plan", "sample", str(DATA / "tulip_double_support_10s.json"), "--out",
                          str(tmp_path / "a.csv"), "--torques"])  # fmt: skip
    assert "fixed-base arm" in err


def test_forecast_of_a_plan_check_fails_names_its_failures(tmp_path, capsys):
    def shift_elbow(doc):
        doc["trajectory"]["q0"][2] += 7.0  # far outside the elbow's range

    bad = _tampered(tmp_path, "q0_out.json", shift_elbow)
    assert main(["plan", "forecast", bad, "--noise", "0.1", "--json"]) == 0
    captured = capsys.readouterr()
    problems = json.loads(captured.out)["plan_problems"]
    assert problems and any("elbow_joint" in p and "position range" in p for p in problems)
    assert "warning" in captured.err and "elbow_joint" in captured.err
    # `plan show`'s warning: the plan `plan check` fails, how many problems, and that `poise run` refuses it
    assert f"`plan check {bad}` fails it ({len(problems)} problem(s): {problems[0]}" in captured.err
    assert "`poise run` refuses it; forecast as it is" in captured.err
    assert main(["plan", "forecast", str(UR5), "--noise", "0.1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plan_problems"] == []
    # of two plans forecast together, the one `plan check` fails is named, not the other
    assert main(["plan", "forecast", str(UR5), bad, "--noise", "0.1", "--json"]) == 0
    captured = capsys.readouterr()
    both = json.loads(captured.out)["plan_problems"]
    assert both and all(p.startswith(f"{bad}: ") for p in both)
    assert (
        f"`plan check {bad}` fails it ({len(both)} problem(s): " in captured.err
        and str(UR5) not in captured.err
    )


def test_a_standing_forecast_gives_fz_in_newtons_and_the_moments_in_newton_metres(tmp_path, capsys):
    plan = Path(__file__).parent / "data" / "tulip_double_support_10s_next.json"
    args = ["plan", "forecast", str(plan), "--noise", "0.49", "1.42", "1.29"]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["noise_units"] == {"fz": "N", "mx": "N·m", "my": "N·m"}


def test_forecast_json_carries_what_its_table_shows(capsys):
    assert main(["plan", "forecast", str(UR5), "--noise", "0.1"]) == 0
    text = capsys.readouterr().out
    assert main(["plan", "forecast", str(UR5), "--noise", "0.1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["robot"] == "ur5" and out["plans"] == [str(UR5)] and out["params"] in text
    assert f"at {out['rate_hz']:g} Hz" in text
    assert set(out["noise_units"]) == set(out["noise"]) and set(out["noise_units"].values()) == {"N·m"}
    k = (
        len(out["determined"])
        + len(out["determined_if_repeated"])
        + len(out["beyond_practical"])
        + len(out["zero_guess"])
    )
    ratio = [p["se"] / p["isolated_se"] for p in out["parameters"][:k]]
    assert out["correlation_factor_median"] == pytest.approx(float(np.median(ratio)))
    assert f"multiplies the SEs by {out['correlation_factor_median']:.3g}" in " ".join(text.split())


@pytest.mark.parametrize("pct, code", [("500", 2), ("0", 2), ("100", 0)])
def test_forecast_well_is_a_percentage(capsys, pct, code):
    assert main(["plan", "forecast", str(UR5), "--noise", "0.1", "--well", pct, "--json"]) == code
    capsys.readouterr()


def test_placeholder_limits_are_flagged_and_not_checked(tmp_path, capsys):
    icub = placeholder_limits(get_model("icub-right-arm"))
    model = get_model("icub-right-arm")
    assert set(icub["velocity"]) == set(icub["effort"]) == set(model.joint_names)
    assert placeholder_limits(get_model("ur5")) == {}
    plan = _short_icub(tmp_path)
    assert main(["plan", "check", plan]) == 0
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())
    assert (
        "not checked: the URDF's placeholders" in text
        and "velocity/torque limits are the URDF's placeholders" in text
    )
    assert "peak velocity / limit" in text and not re.search(r"peak velocity / limit\W+0\.000", text)
    assert main(["plan", "check", plan, "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["placeholder_limits"]) == {"velocity", "effort"}
    assert main(["plan", "sample", plan, "--out", str(tmp_path / "s.csv"), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("placeholders" in n for n in notes)
    assert main(["plan", "check", str(UR5)]) == 0
    assert "placeholders" not in capsys.readouterr().err


def test_sample_json_names_joints_motion_and_caveats(tmp_path, capsys):
    assert main(["plan", "sample", str(UR5), "--out", str(tmp_path / "s.csv"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    sp = read_setpoints(tmp_path / "s.csv")
    assert out["joint_names"] == sp.joint_names and out["motion"] == "free"
    np.testing.assert_allclose(out["start_rad"], sp.q[0], atol=1e-9)
    np.testing.assert_allclose(out["peak_velocity_rad_s"], np.abs(sp.qd).max(axis=0), rtol=1e-6)
    assert out["notes"] and not any("weight shift" in n for n in out["notes"])


def test_single_support_sample_json_says_the_weight_shift_is_the_users(tmp_path, capsys):
    plan = str(DATA / "tulip_single_support_6s.json")
    assert main(["plan", "sample", plan, "--out", str(tmp_path / "s.csv"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["motion"] == "single-support" and any("weight shift" in n for n in out["notes"])


def test_a_rate_that_does_not_divide_the_duration_is_said_in_the_file(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["plan", "sample", str(UR5), "--out", str(out), "--rate-hz", "70.3", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    sp = read_setpoints(out)
    steps = np.diff(sp.t)
    assert steps[-1] < steps[0] and summary["last_step_s"] == pytest.approx(steps[-1])
    assert "shorter" in sp.meta["grid"]


@pytest.mark.parametrize(
    "field, edit",
    [
        ("a[0][0]", lambda d: d["trajectory"]["a"][0].__setitem__(0, str(d["trajectory"]["a"][0][0]))),
        ("q0[1]", lambda d: d["trajectory"]["q0"].__setitem__(1, str(d["trajectory"]["q0"][1]))),
        ("period_s", lambda d: d["trajectory"].__setitem__("period_s", "6")),
    ],
)
def test_quoted_numbers_in_a_plan_are_refused_naming_the_field(tmp_path, capsys, field, edit):
    bad = _tampered(tmp_path, "quoted.json", edit)
    for argv in (["plan", "check", bad], ["plan", "sample", bad, "--out", str(tmp_path / "s.csv")]):
        err = _error(capsys, argv)
        assert field in err and "expected a number" in err


def test_a_json_that_is_no_plan_is_named_so_by_every_command(tmp_path, capsys):
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')
    for argv in (["plan", "sample", str(other), "--out", str(tmp_path / "s.csv")],
                 ["plan", "forecast", str(other), "--noise", "0.1"], ["plan", "check", str(other)]):  # fmt: skip
        err = _error(capsys, argv)
        assert "not a" in err and "poise.trajectory-plan" in err and "missing field" not in err


def test_quoted_numbers_in_a_spline_trajectory_are_refused_naming_the_field():
    from formats.errors import DataError
    from trajectories.spline import SplineTrajectory

    good = {"times_s": [0.0, 1.0, 2.0], "q": [[0.0, 0.1], [0.2, 0.3], [0.0, 0.1]]}
    assert SplineTrajectory.from_json(good).q.shape == (3, 2)
    with pytest.raises(DataError, match=r"spline trajectory q\[1\]\[0\]: expected a number, got '0.2'"):
        SplineTrajectory.from_json(good | {"q": [[0.0, 0.1], ["0.2", 0.3], [0.0, 0.1]]})
