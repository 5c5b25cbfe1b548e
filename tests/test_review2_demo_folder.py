"""`poise demo`'s --out, second review: the default folder made in a fresh clone (no out/), an earlier run's
outputs kept when a run is killed part-way through moving them aside, and a posture run stopped short for safety
restoring the earlier outputs (its own kept in <out>/.poise-demo-stopped). No pipeline runs here: the steps and
the posture demo's work are stand-ins."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

import poise.workflows.demo
import poise.workflows.dynamic_demo as dd
from poise.cli import main
from poise.workflows.demo import DemoResult
from poise.workflows.dynamic_demo import ASIDE, MARKER, OUTPUTS, STOPPED, DemoFolder
from tests.test_demo_review_folder import _earlier, _fake_steps, _tree


def _posture_run(monkeypatch, stopped: str | None, text: str = "new"):
    """`run_demo` as the posture demo calls it: writes plan.json and run/ into args.out, then returns a result
    that identified nothing, stopped for safety when `stopped`."""

    def fake(args, progress=None, log=print, live=None):
        out = Path(args.out)
        assert out.is_dir()  # made by DemoFolder.begin
        (out / "plan.json").write_text(text)
        (out / "run").mkdir()
        (out / "run" / "recording.csv").write_text(text)
        return DemoResult(
            out / "plan.json", out / "run", [], {}, False, 0.0, math.nan, {}, None, 2, 18, stopped
        )

    monkeypatch.setattr(poise.workflows.demo, "run_demo", fake)


# -- 1: the default --out in a fresh clone


def test_the_posture_demos_default_folder_is_made_with_its_parents(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a fresh clone: no out/
    _posture_run(monkeypatch, None)
    assert main(["demo", "--physics", "kinematic", "--json"]) == 0
    assert (tmp_path / "out" / "demo" / "plan.json").read_text() == "new"
    assert json.loads(capsys.readouterr().out)["run_dir"] == str(Path("out/demo/run"))


@pytest.mark.parametrize("pipeline", ["arm", "standing"])
def test_the_dynamic_demos_default_folder_is_made_with_its_parents(pipeline, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _fake_steps(monkeypatch)
    assert main(["demo", pipeline]) == 0
    assert (tmp_path / "out" / f"demo_{pipeline}" / MARKER).is_file()


def test_a_given_out_still_needs_its_parent(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "arm", "--out", "nosuch/d"]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "nosuch").exists()
    with pytest.raises(FileNotFoundError):
        DemoFolder(tmp_path / "nosuch" / "d", "arm").begin()  # a given --out: no tree of folders


# -- 2: killed while the earlier outputs are moved aside


def test_a_run_killed_part_way_through_begin_loses_none_of_the_earlier_outputs(tmp_path, monkeypatch):
    _earlier(tmp_path, "arm")
    before = _tree(tmp_path)
    real, moves = os.replace, []

    def killed_after_two(src, dst):
        if Path(dst).parent.name == ASIDE and Path(dst).name in OUTPUTS["arm"]:
            if len(moves) == 2:
                raise KeyboardInterrupt  # SIGKILL: nothing after this line runs
            moves.append(dst)
        real(src, dst)

    monkeypatch.setattr(dd.os, "replace", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        DemoFolder(tmp_path, "arm").begin()
    monkeypatch.setattr(dd.os, "replace", real)
    aside = {p.name for p in (tmp_path / ASIDE).iterdir()}
    assert {"estimation.json", "validation.json"} <= aside and "efforts.png" not in aside  # part-way
    folder = DemoFolder(tmp_path, "arm")
    folder.check()
    assert "interrupted run" in folder.begin()  # the earlier outputs back, then all of them aside
    assert {p.name for p in (tmp_path / ASIDE).iterdir()} >= set(OUTPUTS["arm"])
    assert folder.rollback()
    assert _tree(tmp_path) == before


def test_a_run_killed_before_it_listed_what_it_moves_removes_nothing(tmp_path):
    _earlier(tmp_path, "arm")
    before = _tree(tmp_path)
    (tmp_path / ASIDE).mkdir()  # killed right after making the folder
    folder = DemoFolder(tmp_path, "arm")
    folder.begin()
    assert folder.rollback() and _tree(tmp_path) == before


def test_a_killed_runs_own_outputs_go_even_where_the_earlier_run_had_none(tmp_path):
    _earlier(tmp_path, "arm")
    (tmp_path / "efforts.png").unlink()  # the earlier run stopped before its plot
    before = _tree(tmp_path)
    DemoFolder(tmp_path, "arm").begin()  # then killed, after writing its own plot
    (tmp_path / "efforts.png").write_text("partial")
    folder = DemoFolder(tmp_path, "arm")
    folder.begin()
    assert folder.rollback() and _tree(tmp_path) == before


def test_a_run_killed_while_committing_keeps_its_own_outputs(tmp_path, monkeypatch):
    """A finished run removes what it replaced; killed part-way through that removal, the next run must not take
    the remains for an interrupted run's earlier outputs and put them back over the finished run's."""
    _earlier(tmp_path, "arm", "old")
    folder = DemoFolder(tmp_path, "arm")
    folder.begin()
    for name in OUTPUTS["arm"]:  # the new run's outputs
        if "." in name:
            (tmp_path / name).write_text("new")
        else:
            (tmp_path / name).mkdir()
            (tmp_path / name / "recording.csv").write_text("new")
    finished = _tree(tmp_path)
    removed = []
    real = dd._remove

    def killed(p: Path) -> None:  # the kill lands while removing
        removed.append(p.name)
        raise KeyboardInterrupt

    monkeypatch.setattr(dd, "_remove", killed)
    with pytest.raises(KeyboardInterrupt):
        folder.commit()
    assert removed == [dd.DISCARD] and not (tmp_path / ASIDE).exists()  # renamed in one step first
    monkeypatch.setattr(dd, "_remove", real)
    DemoFolder(tmp_path, "arm").begin()  # the next run: the finished run's outputs are the earlier ones now
    assert not (tmp_path / dd.DISCARD).exists()
    after = {k: v for k, v in _tree(tmp_path).items() if not k.startswith(ASIDE) and k != MARKER}
    aside = {k[len(ASIDE) + 1 :]: v for k, v in _tree(tmp_path).items() if k.startswith(ASIDE + "/")}
    assert after == {} and {k: v for k, v in aside.items() if k != dd.MOVED} == {
        k: v for k, v in finished.items() if k != MARKER and not k.startswith(ASIDE)
    }


# -- 3: a posture run stopped short for safety


def test_a_stopped_posture_run_restores_the_earlier_outputs_and_keeps_its_own_aside(
    tmp_path, monkeypatch, capsys
):
    d = tmp_path / "demo"
    _earlier(d, "postures")
    before = _tree(d)
    _posture_run(monkeypatch, "run stopped: tracking error")
    assert main(["demo", "--out", str(d), "--physics", "kinematic", "--json"]) == 0
    io = capsys.readouterr()
    out = json.loads(io.out)
    assert out["stopped"] and out["earlier_outputs_restored"] is True
    assert out["run_dir"] == str(d / STOPPED / "run") and out["plan"] == str(d / STOPPED / "plan.json")
    assert "earlier run's outputs" in io.err and STOPPED in io.err
    assert {k: v for k, v in _tree(d).items() if not k.startswith(STOPPED)} == before
    assert (d / STOPPED / "run" / "recording.csv").read_text() == "new" and not (d / ASIDE).exists()
    # the next run is not refused for the stopped run's folder; once it succeeds, that folder goes
    _posture_run(monkeypatch, None, "newer")
    assert main(["demo", "--out", str(d), "--physics", "kinematic", "--json"]) == 0
    assert (d / "plan.json").read_text() == "newer" and not (d / STOPPED).exists()


def test_a_stopped_first_run_keeps_its_outputs_in_place(tmp_path, monkeypatch, capsys):
    d = tmp_path / "demo"
    _posture_run(monkeypatch, "run stopped: fall")
    assert main(["demo", "--out", str(d), "--physics", "kinematic"]) == 0
    assert (d / "run" / "recording.csv").read_text() == "new" and not (d / STOPPED).exists()
    assert "stopped" in capsys.readouterr().out
