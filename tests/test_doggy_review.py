"""The user review of `poise plan doggy` / `poise solve doggy`: failed fits flagged, plans the reader refuses
never written, targets range-checked, ignored options refused, figures not overwritten, SI JSON, clear messages."""

import contextlib
import io
import json
import math

import numpy as np
import pytest
from conftest import one_line_error

from formats.doggy_plan import ExcitationPlan, Segment, load_doggy_plan, plan_from_dict, save_doggy_plan
from formats.doggy_recording import DoggyRecording, read_csv, write_csv
from formats.errors import DataError
from poise.cli import main
from poise.cmd_solve import CHI2_WARN, fit_warnings
from robots import doggy
from trajectories.doggy_excitation import make_plan

RANGE = doggy.robot().setpoint_range  # the description's, which every plan is held to


@pytest.fixture(scope="module")
def unconverged(tmp_path_factory):
    """`solve doggy --simulate 2 --max-iter 1 --plot figs --force` over a stale figure: exit code, stdout,
    stderr, the result JSON and the figure path."""
    d = tmp_path_factory.mktemp("unconverged")
    fig = d / "figs" / "doggy_verification_1.png"
    fig.parent.mkdir()
    fig.write_text("stale")
    out, err = io.StringIO(), io.StringIO()
    argv = ["solve", "doggy", "--simulate", "2", "--max-iter", "1", "--plot", str(fig.parent), "--force",
            "--out", str(d / "r.json")]  # fmt: skip
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue(), json.loads((d / "r.json").read_text()), fig


@pytest.fixture
def recording(tmp_path):
    """A small valid recording (at rest, 0.2 s at 1 kHz) for option checks that must refuse before reading it."""
    z = np.zeros((200, 3))
    path = tmp_path / "rec.csv"
    write_csv(DoggyRecording(np.arange(200) * 1e-3, z, z + 0.1, z, z, np.zeros(3)), path)
    return path


def _plan_doc(tmp_path, edit=None):
    """A plan file written by `save_doggy_plan`, optionally edited by hand; its path."""
    path = tmp_path / "p.json"
    save_doggy_plan(make_plan(10.0, seed=1), path, setpoint_range=RANGE)
    doc = json.loads(path.read_text())
    if edit:
        edit(doc)
    path.write_text(json.dumps(doc))
    return path


# 1. a failed fit is not reported as normal


def test_unconverged_solve_warns_and_exits_1_with_the_result_written(unconverged):
    code, _, err, rep, _ = unconverged
    assert code == 1
    assert "warning:" in err and "without converging (maximum iterations reached)" in err
    assert "is written, but holds no converged fit" in err
    assert rep["converged"] is False and any("without converging" in w for w in rep["warnings"])


def test_chi2_far_above_one_warns_with_the_unit_hint():
    def report(chi2: float) -> dict:
        blocks = [{"name": "measurement", "chi2_per_dof": chi2}, {"name": "bias", "chi2_per_dof": 0.99}]
        return {"converged": True, "reason": "gradient below gtol", "iterations": 9, "residuals": blocks}

    assert fit_warnings(report(0.65)) == []  # the good simulated 20 s case
    assert fit_warnings(report(CHI2_WARN / 2)) == []
    (note,) = fit_warnings(report(5.06e4))  # encoder angles in degrees
    assert "measurement 5.06e+04" in note and "far beyond its noise" in note
    assert "angles in rad, gyros in rad/s" in note and "bias" not in note.split("(")[1].split(";")[0]


# 2. the writer never writes what the reader refuses


def test_plan_doggy_refuses_a_zero_bias_window(tmp_path, capsys):
    out = tmp_path / "z0.json"
    err = one_line_error(capsys, ["plan", "doggy", "--zero-s", "0", "--out", str(out)])
    assert "--zero-s" in err and "> 0" in err and not out.exists()


def test_save_doggy_plan_validates_as_the_reader_does(tmp_path):
    plan = ExcitationPlan([Segment("zero", 0.0), Segment("goto", 2.0, 0.15, (0.1, 0.0, 0.0))])
    out = tmp_path / "bad.json"
    with pytest.raises(DataError, match=r"segments\[0\]\.duration"):
        save_doggy_plan(plan, out, setpoint_range=RANGE)
    assert not out.exists()


# 3. plan targets within the description's set-point range


@pytest.mark.parametrize("target", [[30, -20, 10], [1e6, 0, 0], [0.0, 0.0, -0.61]])
def test_plan_targets_outside_the_descriptions_range_are_refused(tmp_path, target):
    path = _plan_doc(tmp_path, lambda d: d["segments"][1].update(target=target))
    j = next(
        i for i, (v, lim) in enumerate(zip(target, doggy.robot().setpoint_range, strict=True)) if abs(v) > lim
    )
    lim = doggy.robot().setpoint_range[j]
    with pytest.raises(DataError, match=rf"segments\[1\]\.target\[{j}\]: .* ±{lim:g} rad"):
        load_doggy_plan(path, setpoint_range=RANGE)


def test_plan_target_range_comes_from_the_description(tmp_path, capsys):
    doc = json.loads(_plan_doc(tmp_path).read_text())
    doc["segments"][1]["target"] = [30, -20, 10]
    assert plan_from_dict(doc, setpoint_range=(40.0, 40.0, 40.0)).segments[1].target == (30, -20, 10)
    path = _plan_doc(tmp_path, lambda d: d["segments"][1].update(target=[30, -20, 10]))
    err = one_line_error(capsys, ["solve", "doggy", "--simulate", "10", "--plan", str(path),
                                  "--out", str(tmp_path / "r.json")])  # fmt: skip
    shown = ", ".join(f"{v:g}" for v in doggy.robot().setpoint_range)
    assert "segments[1].target[0]" in err and f"setpoint_range = [{shown}] rad" in err


# 4. options that would be ignored are refused


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--save-recording", "{dir}/x.csv"],
            "--save-recording writes a simulated recording: not with --data",
        ),
        (["--plan", "{plan}"], "--plan is the plan a simulation runs: not with --data"),
        (["--seed", "3"], "--seed seeds the simulation: not with --data"),
    ],
)
def test_simulation_options_are_refused_with_data(tmp_path, capsys, recording, extra, message):
    plan = _plan_doc(tmp_path)
    extra = [e.format(dir=tmp_path, plan=plan) for e in extra]
    err = one_line_error(capsys, ["solve", "doggy", "--data", str(recording), "--out", str(tmp_path / "r.json"),
                                  *extra])  # fmt: skip
    assert message in err
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "r.json").exists()


def test_plan_doggy_refuses_a_bias_window_beyond_its_share(tmp_path, capsys):
    out = tmp_path / "p.json"
    err = one_line_error(capsys, ["plan", "doggy", "--duration", "20", "--zero-s", "10", "--out", str(out)])
    assert (
        "zero-command window 10 s: must be > 0 and at most 0.2 × the duration (4 s)" in err
        and not out.exists()
    )
    assert main(["plan", "doggy", "--duration", "20", "--zero-s", "4", "--out", str(out)]) == 0
    assert load_doggy_plan(out, setpoint_range=RANGE).segments[0] == Segment("zero", 4.0)


@pytest.mark.parametrize("duration", ["0.001", "1", "3600.5", "100000"])
def test_plan_doggy_duration_within_solve_doggys_bounds(tmp_path, capsys, duration):
    out = tmp_path / "p.json"
    err = one_line_error(capsys, ["plan", "doggy", "--duration", duration, "--out", str(out)])
    assert "--duration: must be > 1 and ≤ 3600" in err and not out.exists()
    err = one_line_error(
        capsys, ["solve", "doggy", "--simulate", duration, "--out", str(tmp_path / "r.json")]
    )
    assert "--simulate: must be > 1 and ≤ 3600" in err


# 5. figures are not overwritten without --force


def test_plot_refuses_existing_figures_without_force(tmp_path, capsys):
    fig = tmp_path / "figs" / "doggy_verification_1.png"
    fig.parent.mkdir()
    fig.write_text("keep me")
    rec = tmp_path / "sim.csv"
    argv = ["solve", "doggy", "--simulate", "2", "--plot", str(fig.parent), "--out", str(tmp_path / "r.json"),
            "--save-recording", str(rec)]  # fmt: skip
    err = one_line_error(capsys, argv)
    assert f"{fig} exists (use --force to overwrite it)" in err
    assert fig.read_text() == "keep me" and not (tmp_path / "r.json").exists()
    assert not rec.exists()  # refused before the experiment was simulated: nothing written


def test_a_diverged_block_is_warned_about():
    """A whitened χ²/dof that is not finite is beyond any bound (the result file writes it as null)."""
    from poise.cmd_solve import fit_warnings

    report = {"converged": True, "residuals": [{"name": "measurement", "chi2_per_dof": float("inf")},
                                               {"name": "bias", "chi2_per_dof": 0.9}]}  # fmt: skip
    (note,) = fit_warnings(report)
    assert "measurement inf" in note and "bias" not in note


def test_plot_overwrites_figures_with_force(unconverged):
    *_, rep, fig = unconverged
    assert rep["figures"] == [str(fig)] and fig.read_bytes().startswith(b"\x89PNG")


# 6. the result JSON in SI, with the verification's units


def test_result_json_gives_gyro_biases_in_rad_per_s(unconverged):
    _, out, _, rep, _ = unconverged
    rows = {r["name"]: r for r in rep["parameters"]}
    start = rows["bias1_x"]["initial"]  # the rest window's mean gyro: near the simulated 2.615 deg/s
    assert rows["bias1_x"]["unit"] == "rad/s"
    assert start == pytest.approx(doggy.robot().sets["identified"].bias1[0], abs=1e-3)
    assert rows["bias2_z"]["truth"] == pytest.approx(doggy.robot().sets["identified"].bias2[2], rel=1e-12)
    table_row = next(line for line in out.splitlines() if "bias1_x" in line)
    assert "deg/s" in table_row and f"{math.degrees(start):.5g}" in table_row


def test_result_json_names_the_verification_units(unconverged):
    rep = unconverged[3]
    assert rep["verification_rmse_units"] == {"theta": "rad", "theta_dot": "rad/s", "gyro1": "rad/s",
                                              "gyro2": "rad/s"}  # fmt: skip
    assert set(rep["verification_rmse"]) == set(rep["verification_rmse_units"])


# 7. messages


def test_truncated_recording_names_the_line_and_column_counts(tmp_path, recording):
    lines = recording.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("t,"))
    cut = header + 11
    lines[cut] = ",".join(lines[cut].split(",")[:10])
    recording.write_text("\n".join(lines[: cut + 1]) + "\n")
    with pytest.raises(DataError) as exc:
        read_csv(recording)
    msg = str(exc.value)
    assert f"line {cut + 1} has 10 columns, the header 13" in msg and "usecols" not in msg


def test_plan_given_as_data_says_it_is_a_plan(tmp_path, capsys):
    plan = _plan_doc(tmp_path)
    err = one_line_error(capsys, ["solve", "doggy", "--data", str(plan), "--out", str(tmp_path / "r.json")])
    assert "looks like a Doggy excitation plan (JSON)" in err and "--plan" in err
    assert err.count("theta1") <= 1


def test_foreign_header_lists_the_columns_once(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("time,a,b\n0,1,2\n")
    with pytest.raises(DataError, match="has none of the columns") as exc:
        read_csv(path)
    assert str(exc.value).count("theta1") == 1


def test_solve_doggy_help_points_to_the_readme(capsys):
    assert main(["solve", "doggy", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "docs/doggy.md" not in text and "README, 'Doggy calibration' → 'Recording format (CSV)'" in text


def test_paper_gyro2_without_bias_block_names_the_conflicting_option(tmp_path, capsys):
    argv = [
        "solve",
        "doggy",
        "--simulate",
        "2",
        "--paper-gyro2",
        "--no-bias-block",
        "--out",
        str(tmp_path / "r.json"),
    ]
    err = one_line_error(capsys, argv)
    assert "--no-bias-block conflicts with --paper-gyro2" in err and "drop --no-bias-block" in err
