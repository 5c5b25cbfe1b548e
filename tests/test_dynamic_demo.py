"""`poise demo arm|standing` (and `make demo`): the dynamic pipelines as the commands a user types. Every command
they run is one the command line accepts, in pipeline order; the pipelines themselves (plan → run → identify on
the emulated arm and on the standing twin) are tested in test_arm_currents and test_board_gains."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from formats.errors import DataError
from poise.cli import build_parser, main
from poise.workflows.dynamic_demo import (
    MARKER,
    OUTPUTS,
    Step,
    arm_steps,
    prepare_out,
    run_steps,
    standing_steps,
)

ROOT = Path(__file__).resolve().parents[1]


def _kinds(steps: list[Step]) -> list[str]:
    kinds = []
    for step in steps:
        args = build_parser().parse_args(list(step.argv))  # SystemExit (a failed test) on an unknown option
        assert callable(args.func)
        kinds.append(" ".join(step.argv[:2]))
    return kinds


def test_every_command_of_the_arm_demo_parses(tmp_path):
    kinds = _kinds(arm_steps(tmp_path, 1))
    assert kinds == ["plan trajectory"] * 2 + [f"run {tmp_path}/estimation.json", f"run {tmp_path}/validation.json",
                                               "identify dynamic"]  # fmt: skip


def test_the_standing_demo_calibrates_the_boards_before_it_runs_on_them(tmp_path):
    steps = standing_steps(tmp_path, 3)
    (tmp_path / "gains.json").write_text("{}")  # the runs' --board-gains must exist to parse
    kinds = _kinds(steps)
    assert kinds[0] == "boards calibrate" and kinds[-1] == "identify dynamic"
    runs = [s.argv for s in steps if s.argv[0] == "run"]
    assert len(runs) == 2 and all(r[r.index("--board-gains") + 1] == f"{tmp_path}/gains.json" for r in runs)
    assert [r[r.index("--noise-seed") + 1] for r in runs] == ["1", "2"]  # each run its own noise
    seeds = [s.argv[s.argv.index("--seed") + 1] for s in steps if s.argv[:2] == ("plan", "trajectory")]
    assert seeds == ["3", "4"]  # the validation motion is another design


def test_a_failing_step_ends_the_demo_with_its_code():
    ran, said = [], []
    steps = [Step("a", ("model", "show", "tulip")), Step("b", ("x",)), Step("c", ("y",))]
    assert run_steps(steps, lambda argv: ran.append(argv) or (2 if argv == ["x"] else 0), said.append) == 2
    assert ran == [["model", "show", "tulip"], ["x"]]
    assert "$ poise model show tulip" in said[0] and "step 2 failed (exit 2)" in said[-1]


def test_a_demo_replaces_only_an_earlier_demos_outputs(tmp_path, capsys):
    (tmp_path / "estimation").mkdir()
    (tmp_path / "estimation" / "recording.csv").write_text("yours")
    # a folder of the user's: untouched
    with pytest.raises(DataError, match="which `poise demo standing` did not write"):
        prepare_out(tmp_path, "standing")
    assert (tmp_path / "estimation" / "recording.csv").read_text() == "yours"
    # an earlier demo's folder: its outputs go, the rest stays (with --force)
    (tmp_path / MARKER).write_text("written by poise demo standing\n")
    for name in OUTPUTS["standing"][:3]:
        (tmp_path / name).write_text("old")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match="holds notes.txt"):
        prepare_out(tmp_path, "standing")
    prepare_out(tmp_path, "standing", force=True).commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER, "notes.txt"]
    fresh = tmp_path / "new" / "demo"
    fresh.parent.mkdir()
    prepare_out(fresh, "arm")
    assert (fresh / MARKER).is_file()


@pytest.mark.parametrize("option", [["--postures", "18"], ["--no-noise"], ["--physics", "kinematic"]])
def test_the_posture_demos_options_are_refused_by_the_dynamic_ones(option, tmp_path, capsys):
    assert main(["demo", "standing", "--out", str(tmp_path / "d"), *option]) == 2
    err = capsys.readouterr().err
    assert f"{option[0]}: the posture demo's options" in err and not (tmp_path / "d").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_runs_the_three_pipelines():
    dry = subprocess.run(["make", "-n", "--no-print-directory", "demo"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    demos = [line.split("bin/poise ", 1)[1] for line in dry.splitlines() if "bin/poise demo" in line]
    assert demos == ["demo", "demo arm", "demo standing"]
