"""A run folder copied (recording.csv and its run.json naming the same plan) is not a repeat of the run: fitted
beside its original its noise counts twice (`--no-average` shrank the SEs to a third), so `identify dynamic` refuses
it as it refuses any copy, averaged or not; another run of the plan, with its own noise, is averaged."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import one_line_error

from formats.dynamic_recording import read_dynamic_recording
from poise.cli import main

PLAN = Path(__file__).parent / "data" / "ur5_6s.json"
RATE_HZ = 100.0


def _run(folder: Path, seed: int) -> Path:
    """`poise simulate trajectory` of the UR5's stored plan (noise seed `seed`, one truth) written as `poise run`
    leaves a run: folder/recording.csv beside a run.json naming the plan, its rate and the ticks streamed."""
    folder.mkdir()
    out = folder / "recording.csv"
    argv = [
        "simulate",
        "trajectory",
        str(PLAN),
        "--out",
        str(out),
        "--rate-hz",
        f"{RATE_HZ:g}",
        "--seed",
        str(seed),
    ]
    assert main([*argv, "--truth", "urdf"]) == 0
    run = {"plan": str(PLAN), "plan_sha256": hashlib.sha256(PLAN.read_bytes()).hexdigest(), "status": "completed",
           "rate_hz": RATE_HZ, "ticks_streamed": len(read_dynamic_recording(out).t)}  # fmt: skip
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A run, a byte copy of its folder, and another run of the plan with its own noise: their recordings."""
    root = tmp_path_factory.mktemp("repeats")
    first = _run(root / "RUN", 0)
    shutil.copytree(first.parent, root / "RUNCOPY")
    return first, root / "RUNCOPY" / "recording.csv", _run(root / "RUN2", 1)


@pytest.mark.parametrize("extra", [[], ["--no-average"]])
def test_a_copied_run_folder_is_refused_averaged_or_not(runs, capsys, extra):
    first, copy, _ = runs
    err = one_line_error(capsys, ["identify", "dynamic", str(first), str(copy), *extra])
    assert f"{copy} repeats 100 % of the samples of {first}" in err and "fit it once" in err


def test_a_run_cut_from_another_of_its_plan_is_refused(runs, tmp_path, capsys):
    """The first half of a run's rows in a run folder of the same plan (ticks as cut): another length is not
    averaged, so it would be fitted beside the whole run."""
    first, _, _ = runs
    cut = tmp_path / "CUT"
    shutil.copytree(first.parent, cut)
    lines = first.read_text().splitlines(keepends=True)
    head = (
        next(i for i, line in enumerate(lines) if not line.startswith("#")) + 1
    )  # comments and the column row
    rows = (len(lines) - head) // 2
    (cut / "recording.csv").write_text("".join(lines[: head + rows]))
    run = json.loads((cut / "run.json").read_text()) | {"ticks_streamed": rows}
    (cut / "run.json").write_text(json.dumps(run))
    err = one_line_error(capsys, ["identify", "dynamic", str(first), str(cut / "recording.csv")])
    assert f"{cut / 'recording.csv'} repeats 100 % of the samples of {first}" in err


def test_another_run_of_the_plan_is_averaged_with_it(runs, capsys):
    first, _, second = runs
    assert main(["identify", "dynamic", str(first), str(second), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["repeats_averaged"] == [[1, 2]]
    # the rows recorded are both runs', not the one averaged recording's
    assert out["recording_samples"] == sum(len(read_dynamic_recording(p).t) for p in (first, second))
