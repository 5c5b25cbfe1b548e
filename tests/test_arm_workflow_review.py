"""What a user's review of the arm workflow found, mended: a κ finite for fewer rows than parameters, a plan
too short to record, a design exciting too little, options a design or check ignored, a validation recording on
another base, efforts in another unit, the plan's rate against the bench's, zero guesses counted as beyond any
length, and messages that named the wrong thing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import UR5, simulated_recording
from conftest import one_line_error as _err

from formats.dynamic_recording import read_dynamic_recording, write_dynamic_recording
from poise.cli import main
from robots.conditioning import kappa

PLAN = Path(__file__).parent / "data" / "ur5_6s.json"


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    return simulated_recording(tmp_path_factory.mktemp("arm"), PLAN, 200.0)


def test_kappa_of_fewer_rows_than_columns_is_infinite():
    rng = np.random.default_rng(0)
    wide = rng.normal(size=(12, 36))  # two samples of six joints against 36 base parameters
    assert np.linalg.svd(wide, compute_uv=False)[-1] > 0  # the SVD's ratio alone is finite
    assert kappa(wide) == float("inf")
    tall = rng.normal(size=(36, 12))
    assert np.isfinite(kappa(tall)) and kappa(tall) == pytest.approx(np.linalg.cond(tall))


def test_a_plan_too_short_to_record_and_a_design_exciting_nothing_are_refused(tmp_path, capsys):
    out = tmp_path / "x.json"
    err = _err(
        capsys,
        ["plan", "trajectory", str(UR5), "--out", str(out), "--duration", "0.001", "--period", "0.001"],
    )
    assert "--duration 0.001 s at --rate-hz 100 is 0.1 samples; a recording needs at least 10" in err
    err = _err(capsys, ["plan", "trajectory", "icub-right-arm", "--duration", "2", "--period", "2", "--harmonics",
                        "1", "--max-iter", "5", "--out", str(out)])  # fmt: skip
    assert (
        "the design does not excite every base parameter (κ infinite; unexcited: ϑ" in err
        and "nothing written" in err
    )
    assert "RuntimeWarning" not in err and not out.exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--zmp-margin", "0.05"], "--zmp-margin applies to --double-support or --single-support only"),
        (["--no-self-collision", "--collision-margin", "0.05"],
         "--collision-margin applies to a design keeping links apart (not --no-self-collision) only"),
    ],
)  # fmt: skip
def test_an_arm_design_refuses_the_options_it_would_ignore(tmp_path, capsys, extra, message):
    argv = [
        "plan",
        "trajectory",
        str(UR5),
        "--out",
        str(tmp_path / "x.json"),
        "--duration",
        "4",
        "--period",
        "4",
    ]
    assert message in _err(capsys, argv + extra)
    assert not (tmp_path / "x.json").exists()


def test_plan_check_refuses_twin_options_for_a_trajectory_and_takes_a_parameter_file(tmp_path, capsys):
    for extra in (["--twin"], ["--gravity-comp"], ["--truth", "urdf"], ["--placement-error", "5,2"]):
        err = _err(capsys, ["plan", "check", str(PLAN), *extra])
        assert f"{extra[0]} stands a posture plan's postures on the twin" in err
    err = _err(capsys, ["plan", "check", str(Path(__file__).parent / "data" / "tulip_double_support_10s.json"),
                        "--truth", "sim"])  # fmt: skip
    assert "is a trajectory plan" in err
    from robots.params_io import perturbed, save_parameter_set
    from robots.registry import get_model

    model = get_model(str(UR5))
    params = tmp_path / "guess.json"
    save_parameter_set(perturbed(model.parameter_set("urdf"), np.random.default_rng(1), 0.1, 0.01), params)
    assert main(["plan", "check", str(PLAN), "--params", str(params), "--json"]) == 0
    by_file = json.loads(capsys.readouterr().out)
    assert main(["plan", "check", str(PLAN), "--json"]) == 0
    by_name = json.loads(capsys.readouterr().out)
    assert by_file["ok"] and by_file["torque_ratio"] != by_name["torque_ratio"]  # the file's masses were used


def test_a_posture_plans_twin_options_need_twin(tmp_path, capsys):
    from formats.plan import Placement, Plan, Posture, save_plan

    names = [f"theta{i}" for i in range(1, 13)]
    postures = [Posture(i, 0, np.full(12, 0.1 * i), 3.0, 6.0, (0.0, 0.1), 0.09) for i in range(2)]
    path = tmp_path / "postures.json"
    save_plan(Plan("tulip", "right", names, [Placement(0, (0.0, 0.2, 0.0))], postures), path)
    for extra in (["--truth", "sim"], ["--gravity-comp"], ["--placement-error", "5,2"]):
        err = _err(capsys, ["plan", "check", str(path), *extra])
        assert f"{extra[0]} applies with --twin only" in err


def test_validation_on_another_base_and_recordings_of_two_robots_are_refused(recording, tmp_path, capsys):
    rec = read_dynamic_recording(recording)
    other = tmp_path / "other.csv"
    text = recording.read_text().replace("# base: world", "# base: base_link", 1)
    other.write_text(text)
    assert read_dynamic_recording(other).base == "base_link"
    err = _err(capsys, ["identify", "dynamic", str(recording), "--validate", str(other)])
    assert f"--validate {other}: a recording on 'base_link', the fit's on '{rec.base}'" in err
    icub = tmp_path / "icub.csv"
    assert main(["simulate", "trajectory", str(Path(__file__).parent / "data" / "icub_validation_30s.json"),
                 "--out", str(icub), "--rate-hz", "200"]) == 0  # fmt: skip
    capsys.readouterr()
    err = _err(capsys, ["identify", "dynamic", str(recording), str(icub)])
    assert (
        f"{icub}: a recording of 'icub-right-arm', {recording} of 'ur5': one robot's recordings only" in err
    )
    err = _err(capsys, ["plan", "check", str(recording)])
    assert "a dynamic recording; `poise plan check` reads plans (JSON)" in err


def test_efforts_in_another_unit_are_refused_and_the_unit_named(recording, tmp_path, capsys):
    """Efforts logged in N·mm (mN·m) as N·m are 1000× what the description's own inverse dynamics predict on the
    recorded motion: refused before the fit in one line naming the file and the likely unit, in the table's run and
    in --json's; the recording as simulated fits, with no effort warning."""
    rec = read_dynamic_recording(recording)
    milli = tmp_path / "nmm.csv"
    rec.tau = rec.tau * 1000.0  # N·mm logged as N·m
    write_dynamic_recording(rec, milli)
    err = _err(capsys, ["identify", "dynamic", str(milli)])
    assert f"{milli}: the joint efforts' RMS is" in err and "efforts in mN·m rather than N·m" in err
    assert main(["identify", "dynamic", str(milli), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and f"poise: error: {doc['error']}" == err
    assert main(["identify", "dynamic", str(recording), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "efforts_beyond_limits" not in doc and doc["rows"] == [f"{j} N·m" for j in rec.joint_names]


def test_forecast_tells_zero_guesses_from_what_noise_puts_beyond_reach(capsys):
    assert main(["plan", "forecast", str(PLAN), "--noise", "0.2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    zero = [p["symbol"] for p in out["parameters"] if p["value"] == 0]
    assert out["zero_guess"] and set(out["zero_guess"]) <= set(zero)
    assert not set(out["zero_guess"]) & set(out["beyond_practical"])


def test_a_run_directory_in_a_missing_folder_is_refused(tmp_path, capsys):
    err = _err(capsys, ["run", str(PLAN), "--robot", "sim", "--out", str(tmp_path / "no" / "RUN"), "--yes"])
    assert f"folder {str(tmp_path / 'no')!r} does not exist" in err
    assert not (tmp_path / "no").exists()


@pytest.mark.slow
def test_a_run_at_another_rate_than_the_plans_says_so(tmp_path, capsys):
    plan = json.loads(PLAN.read_text())
    plan["rate_hz"] = 500.0
    fast = tmp_path / "fast.json"
    fast.write_text(json.dumps(plan))
    config = Path(__file__).parent.parent / "drivers" / "ur5_emulated.toml"
    argv = ["run", str(fast), "--robot", "sim", "--config", str(config), "--time-scale", "3", "--yes"]
    assert main([*argv, "--out", str(tmp_path / "a"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["plan_rate_hz"] == 500.0 and summary["rate_hz"] == pytest.approx(100.0)
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    said = capsys.readouterr().out.replace("\n", " ")
    assert "the plan's rate_hz is 500 Hz; this bench streamed and recorded at 100 Hz" in said
    assert "--noise SIGMA --rate-hz 100" in said


def test_plan_check_with_a_configuration_says_the_runs_preflight_passed(capsys):
    config = str(Path(__file__).parent.parent / "drivers" / "ur5_emulated.toml")
    assert main(["plan", "check", str(PLAN), "--config", config, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"] == {"config": config, "rate_hz": 100.0, "ok": True}
    assert main(["plan", "check", str(PLAN), "--config", config]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "the setpoints at 100 Hz pass the run's pre-flight" in said
