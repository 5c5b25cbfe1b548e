"""What a user's review of the standing robot's workflow found, mended: --essential below every parameter and a
ZMP margin wider than the support polygon crashed; straps on a single-support run; a written plan no command could
read; a stopped run identified as if whole; a validation headline that hid the moments' misses; plans without
their design stages; joint names taken for base parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import UR5, simulated_recording
from conftest import one_line_error as _err

from drivers.run_files import stopped_status
from poise.cli import main

DATA = Path(__file__).parent / "data"
STANDING = DATA / "tulip_double_support_10s.json"


@pytest.fixture(scope="module")
def standing(tmp_path_factory) -> Path:
    """The stored double-support plan simulated (`poise simulate trajectory`: MuJoCo's inverse dynamics); the
    twin's truth beside it (truth.json)."""
    folder = tmp_path_factory.mktemp("standing")
    return simulated_recording(folder, STANDING, 100, "--truth-out", str(folder / "truth.json"))


@pytest.fixture(scope="module")
def held_out(standing) -> Path:
    """The plan run again on the same twin (`standing`'s truth) under another noise seed: a recording the fit has
    not seen, to validate on (a fitted one is refused as in-sample)."""
    truth = str(standing.with_name("truth.json"))
    return simulated_recording(
        standing.parent, STANDING, 100, "--truth", truth, "--seed", "1", name="held_out.csv"
    )


def test_essential_below_every_parameter_is_refused_not_a_crash(standing, capsys):
    err = _err(capsys, ["identify", "dynamic", str(standing), "--simplified", "--essential", "0.0001"])
    assert "no base parameter is determined to 0.0001 %: the best, ϑ" in err


def test_a_zmp_margin_wider_than_the_support_polygon_is_refused(tmp_path, capsys):
    out = tmp_path / "wide.json"
    err = _err(capsys, ["plan", "trajectory", "tulip", "--double-support", "--simplified", "--duration", "6",
                        "--period", "6", "--harmonics", "3", "--max-iter", "5", "--zmp-margin", "0.5",
                        "--out", str(out)])  # fmt: skip
    said = " ".join(err.split())
    assert "a ZMP margin of 500.0 mm leaves no room: with the design's 5 mm buffer it needs 505.0 mm" in said
    assert "the support polygon's deepest point lies" in said
    assert not out.exists()


def test_straps_on_a_single_support_run_are_refused_before_the_run(tmp_path, capsys):
    run = tmp_path / "run"
    err = _err(capsys, ["run", str(DATA / "tulip_single_support_6s.json"), "--robot", "sim", "--boards", "sim",
                        "--clamp-soles", "--out", str(run)])  # fmt: skip
    assert "a single-support plan lifts one" in err and not run.exists()


def test_a_plan_whose_chain_does_not_close_is_not_rebuilt(tmp_path):
    """`plan trajectory` checks that a plan failing its check still rebuilds before writing it (an unreadable plan
    is never written, so `--force` never replaces a good file with one that is then removed)."""
    from formats.trajectory_plan import load_trajectory_plan
    from poise.cmd_plan_trajectory import _rebuilds

    assert _rebuilds(load_trajectory_plan(STANDING))
    doc = json.loads(STANDING.read_text())
    doc["trajectory"]["chain"]["target_p"] = [0.0, 2.0, 0.0]  # the other sole 2 m away: no posture reaches it
    far = tmp_path / "far.json"
    far.write_text(json.dumps(doc))
    assert not _rebuilds(load_trajectory_plan(far))


def test_a_stopped_run_is_identified_with_a_warning(standing, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    lines = standing.read_text().splitlines(keepends=True)
    head = next(i for i, line in enumerate(lines) if not line.startswith("#")) + 1
    (run / "recording.csv").write_text("".join(lines[: head + 600]))  # the 600 ticks the stopped run streamed
    status = stopped_status(KeyboardInterrupt())
    assert status == "stopped: KeyboardInterrupt"  # no dangling colon for an exception without a message
    meta = {"plan": str(STANDING), "plan_sha256": "0" * 64, "status": status, "ticks_streamed": 600,
            "ticks_planned": 1001}  # fmt: skip
    (run / "run.json").write_text(json.dumps(meta))
    # the design's excitation was cut there: refused unless --partial says to fit it anyway
    assert main(["identify", "dynamic", str(run / "recording.csv"), "--simplified", "--json"]) == 2
    assert "--partial" in capsys.readouterr().err
    assert (
        main(["identify", "dynamic", str(run / "recording.csv"), "--simplified", "--json", "--partial"]) == 0
    )
    out = capsys.readouterr()
    assert json.loads(out.out)["partial_runs"] == [
        {
            "recording": 1,
            "file": str(run / "recording.csv"),
            "status": "stopped: KeyboardInterrupt after 600 of 1001 ticks",
        }
    ]
    assert f"{run / 'recording.csv'} is a partial run".replace(" ", "") in "".join(out.err.split())
    meta["status"] = "completed"
    (run / "run.json").write_text(json.dumps(meta))
    assert main(["identify", "dynamic", str(run / "recording.csv"), "--simplified", "--json"]) == 0
    assert "partial_runs" not in json.loads(capsys.readouterr().out)


def test_a_standing_validation_names_its_worst_row_and_the_plot_its_file(
    standing, held_out, tmp_path, capsys
):
    plot = tmp_path / "fit.png"
    argv = [
        "identify",
        "dynamic",
        str(standing),
        "--simplified",
        "--validate",
        str(held_out),
        "--plot",
        str(plot),
    ]
    assert main(argv) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "RMS error up to" in said and "% of a row's RMS (" in said and "pooled over Fz, Mx, My" in said
    assert f"wrote {plot}" in said and plot.is_file()


def test_a_plan_records_its_design_stages_and_focus_takes_base_parameters_only(tmp_path, capsys):
    out = tmp_path / "arm.json"
    argv = ["plan", "trajectory", str(UR5), "--duration", "4", "--period", "4", "--harmonics", "2", "--max-iter",
            "10", "--out", str(out)]  # fmt: skip
    assert main(argv) in (0, 1)
    stages = json.loads(out.read_text())["design"]["stages"]
    assert [s["sharpness"] for s in stages[:2]] == [8.0, 32.0] and all("iterations" in s for s in stages)
    # a capped design may leave a joint short of its excursion floor: its last stage again, with the floor's rows
    assert all(s["sharpness"] == 32.0 and s["excursion_rows"] for s in stages[2:])
    capsys.readouterr()
    err = _err(capsys, ["plan", "trajectory", "tulip", "--double-support", "--criterion", "logvar", "--focus",
                        "theta4", "--out", str(tmp_path / "f.json")])  # fmt: skip
    assert "expected a base parameter such as ϑ5 (or 5), got 'theta4'" in err
    err = _err(capsys, ["plan", "trajectory", "tulip", "--double-support", "--criterion", "logvar", "--focus",
                        "ϑ1", "ϑ1", "--out", str(tmp_path / "f.json")])  # fmt: skip
    assert "--focus names ϑ1 twice" in err


def test_a_fit_that_misses_a_row_by_more_than_the_row_itself_is_warned(tmp_path, capsys):
    """A barely moving single-support plan's full model fitted with the planned angles as instruments, encoders
    quantised to 4096 ticks: the IV estimate misses Mx by more than Mx's own RMS (predicting 0 would do better) while
    its SEs still put every parameter 'within 3 SE' — so it is said. Least squares on the same recording is not."""
    plan = DATA / "tulip_single_support_6s.json"
    rec, truth = tmp_path / "ss.csv", tmp_path / "truth.json"
    assert main(["simulate", "trajectory", str(plan), "--out", str(rec), "--rate-hz", "100", "--truth-out",
                 str(truth), "--encoder-ticks", "4096", "--force-noise", "0.3", "--moment-noise", "0.05",
                 "--seed", "1"]) == 0  # fmt: skip
    capsys.readouterr()
    argv = ["identify", "dynamic", str(rec), "--reference", str(truth), "--json"]
    assert main([*argv, "--instruments", str(plan)]) == 0
    out = capsys.readouterr()
    missed = json.loads(out.out)["unexplained_rows"]
    mx = next(
        m for m in missed if m["row"] == "Mx N·m"
    )  # Mx 4.28 N·m against its own 1.71 (My 2.82 against 5.3)
    assert mx["rmse"] > 1.5 * mx["measured_rms"] and "Fz N" not in [m["row"] for m in missed]
    err = " ".join(out.err.split())
    assert (
        "the fit misses Mx" in err
        and "predicting 0 would fit better" in err
        and "fit without --instruments" in err
    )
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "unexplained_rows" not in json.loads(out.out) and "the fit misses" not in out.err


def test_a_validation_recordings_rocking_and_stop_are_reported(standing, held_out, tmp_path, capsys):
    """What the validation recording's run.json says of its run — a sole on three corners for 40 % of the ticks, a
    stop after 500 of 1001 ticks — is said beside its prediction error (JSON `validation`), as for a fitted one."""
    run = tmp_path / "val"
    run.mkdir()
    lines = held_out.read_text().splitlines(keepends=True)
    head = (
        next(i for i, line in enumerate(lines) if not line.startswith("#")) + 1
    )  # comments and the column row
    (run / "recording.csv").write_text("".join(lines[: head + 500]))  # the 500 ticks the stopped run streamed
    meta = {"plan": str(STANDING), "plan_sha256": "0" * 64, "status": "stopped: KeyboardInterrupt", "rate_hz": 100,
            "ticks_streamed": 500, "ticks_planned": 1001, "soles": {"sole_l": {"rocked_share": 0.4}}}  # fmt: skip
    (run / "run.json").write_text(json.dumps(meta))
    argv = ["identify", "dynamic", str(standing), "--simplified", "--validate", str(run / "recording.csv")]
    assert main([*argv, "--json"]) == 0
    v = json.loads(capsys.readouterr().out)["validation"]
    assert v["soles_rocked"] == [{"sole": "sole_l", "rocked_share": 0.4}]
    assert v["partial_run"] == "stopped: KeyboardInterrupt after 500 of 1001 ticks"
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "validation recording: sole_l on three corners for 40 % of its ticks" in text
    assert "validation recording: a partial run (stopped: KeyboardInterrupt after 500 of 1001 ticks)" in text
