"""`poise demo`'s --out (all three pipelines), checked before any work: a folder holding what the demo did not write
is refused unless --force, which keeps those files; another demo's folder is refused; an earlier run's outputs
are replaced only once the new run has made its own, and restored when it fails or is interrupted. No pipeline
runs here: the steps and the posture demo's work are stand-ins."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import poise.cli
import poise.output
import poise.workflows.demo
from formats.errors import DataError
from poise.cli import main
from poise.workflows.dynamic_demo import ASIDE, MARKER, OUTPUTS, DemoFolder, arm_steps, marker_pipeline


def _tree(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): p.read_text() for p in sorted(d.rglob("*")) if p.is_file()}


def _earlier(d: Path, pipeline: str, text: str = "old") -> None:
    """A folder an earlier run of `pipeline` wrote: its marker and every output."""
    d.mkdir(exist_ok=True)
    (d / MARKER).write_text(json.dumps({"pipeline": pipeline, "outputs": list(OUTPUTS[pipeline])}) + "\n")
    for name in OUTPUTS[pipeline]:
        if "." in name:
            (d / name).write_text(text)
        else:
            (d / name).mkdir()
            (d / name / "recording.csv").write_text(text)


def test_the_posture_demo_refuses_a_folder_of_the_users_before_any_work(tmp_path, capsys):
    u = tmp_path / "U"
    (u / "run").mkdir(parents=True)
    (u / "run" / "notes.txt").write_text("notes")
    (u / "plan.json").write_text("x")
    before = _tree(u)
    t0 = time.monotonic()
    assert main(["demo", "--out", str(u), "--physics", "kinematic"]) == 2
    err = capsys.readouterr().err
    assert "holds plan.json, run, which `poise demo` did not write" in err and "--force" in err
    assert err.count("\n") == 1  # one line
    # --force writes beside the user's files, never over them: plan.json and run/ are still refused
    assert main(["demo", "--out", str(u), "--physics", "kinematic", "--force"]) == 2
    assert "would be replaced by its outputs" in capsys.readouterr().err
    assert _tree(u) == before and not (u / MARKER).exists()
    assert time.monotonic() - t0 < 30  # refused, not designed


def test_an_unknown_truth_is_refused_before_the_design(tmp_path, capsys):
    x = tmp_path / "X"
    t0 = time.monotonic()
    assert main(["demo", "--truth", "nosuch", "--out", str(x), "--physics", "kinematic"]) == 2
    assert "unknown parameter set 'nosuch'" in capsys.readouterr().err
    assert not x.exists() and time.monotonic() - t0 < 30


def test_another_demos_folder_is_refused_even_with_force(tmp_path, capsys):
    s = tmp_path / "S"
    _earlier(s, "standing")
    before = _tree(s)
    for extra in ([], ["--force"]):
        assert main(["demo", "arm", "--out", str(s), *extra]) == 2
        assert "holds the outputs of `poise demo standing`" in capsys.readouterr().err
    assert main(["demo", "--out", str(s), "--physics", "kinematic"]) == 2
    assert "`poise demo standing`" in capsys.readouterr().err
    assert _tree(s) == before  # gains.json and wrench.png untouched


def test_the_first_markers_text_names_its_demo(tmp_path):
    (tmp_path / MARKER).write_text("written by poise demo standing\n")
    assert marker_pipeline(tmp_path) == "standing"
    (tmp_path / MARKER).write_text("garbage")
    assert marker_pipeline(tmp_path) == "unknown"
    with pytest.raises(DataError, match="another demo"):
        DemoFolder(tmp_path, "arm").check()


def test_a_posture_demo_folder_from_before_the_marker_is_the_posture_demos(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps({"settings": {"design": "demo (quick)"}}))
    (tmp_path / "run").mkdir()
    assert marker_pipeline(tmp_path) == "postures"
    assert DemoFolder(tmp_path, "postures").check() == []
    (tmp_path / "plan.json").write_text(json.dumps({"settings": {"design": "mine"}}))
    with pytest.raises(DataError, match="did not write"):
        DemoFolder(tmp_path, "postures").check()


def test_force_keeps_what_the_demo_did_not_write(tmp_path):
    _earlier(tmp_path, "arm")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match="holds notes.txt"):
        DemoFolder(tmp_path, "arm").check()
    folder = DemoFolder(tmp_path, "arm", force=True)
    assert folder.check() == ["notes.txt"]
    folder.begin()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([MARKER, ASIDE, "notes.txt"])
    (tmp_path / "efforts.png").write_text("new")
    folder.commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([MARKER, "efforts.png", "notes.txt"])
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert json.loads((tmp_path / MARKER).read_text())["pipeline"] == "arm"


def test_a_failed_run_puts_the_earlier_outputs_back(tmp_path):
    _earlier(tmp_path, "standing")
    before = _tree(tmp_path)
    folder = DemoFolder(tmp_path, "standing")
    folder.check()
    folder.begin()
    (tmp_path / "gains.json").write_text("partial")  # the new run got this far
    assert folder.rollback()
    assert _tree(tmp_path) == before and not (tmp_path / ASIDE).exists()
    fresh = DemoFolder(tmp_path / "new", "standing")  # nothing earlier: what the failed run wrote stays
    fresh.begin()
    (tmp_path / "new" / "gains.json").write_text("partial")
    assert not fresh.rollback() and (tmp_path / "new" / "gains.json").read_text() == "partial"


def test_a_killed_runs_earlier_outputs_come_back_at_the_next_run(tmp_path):
    _earlier(tmp_path, "arm")
    before = _tree(tmp_path)
    DemoFolder(tmp_path, "arm").begin()  # then killed (SIGKILL: no rollback)
    (tmp_path / "estimation.json").write_text("partial")
    folder = DemoFolder(tmp_path, "arm")
    folder.check()
    assert "interrupted run" in folder.begin()
    assert folder.rollback()
    assert _tree(tmp_path) == before


def _fake_steps(monkeypatch, fail_at: str | None = None, code: int = 130):
    """poise.cli.main as the dynamic demo calls it for each step: each writes its outputs (the identification its
    JSON with --json); the step whose argv[0:2] is `fail_at` writes a partial output and fails with `code`."""
    ran = []

    def fake(argv: list[str]) -> int:
        ran.append(argv)
        out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
        if fail_at is not None and " ".join(argv[:2]).startswith(fail_at):
            if out is not None:
                out.write_text("partial") if out.suffix else out.mkdir()
            return code
        if out is not None:
            out.write_text("new") if out.suffix else out.mkdir()
        if argv[:2] == ["identify", "dynamic"]:
            Path(argv[argv.index("--plot") + 1]).write_text("new")
            print("the table a user reads")
            fit = {
                "well_pct": 15.0, "determined": ["ϑ3", "ϑ10"], "not_determined": ["ϑ1"] * 34,
                "reference": {"estimated": 36, "within_3se": 36, "max_abs_z": 1.15,
                              "joints": {"estimated": 12, "within_3se": 6}},
                "validation": {"total_relative_pct": 4.99, "rows": ["a N·m"], "relative_pct": [2.0]},
            }  # fmt: skip
            if "--json-out" in argv:
                Path(argv[argv.index("--json-out") + 1]).write_text(json.dumps(fit))
            if "--json" in argv:
                poise.output.print_json(fit)
        return 0

    monkeypatch.setattr(poise.cli, "main", fake)
    return ran


def test_an_interrupted_dynamic_demo_keeps_the_earlier_results(tmp_path, monkeypatch, capsys):
    d = tmp_path / "arm"
    _earlier(d, "arm")
    before = _tree(d)
    ran = _fake_steps(monkeypatch, fail_at="run", code=130)  # Ctrl-C in the first run: main returns 130
    assert main(["demo", "arm", "--out", str(d)]) == 130
    assert [a[0] for a in ran] == ["plan", "plan", "run"]
    assert _tree(d) == before and not (d / ASIDE).exists()  # efforts.png and the earlier runs are back
    assert "earlier run's outputs" in capsys.readouterr().err


def test_a_dynamic_demo_replaces_its_earlier_outputs_once_done(tmp_path, monkeypatch, capsys):
    d = tmp_path / "arm"
    _earlier(d, "arm")
    _fake_steps(monkeypatch)
    assert main(["demo", "arm", "--out", str(d)]) == 0
    assert (d / "efforts.png").read_text() == "new" and not (d / "estimation" / "recording.csv").exists()
    assert not (d / ASIDE).exists()


def test_the_dynamic_demos_json_is_their_verdict(tmp_path, monkeypatch, capsys):
    d = tmp_path / "arm"
    ran = _fake_steps(monkeypatch)
    assert main(["demo", "arm", "--out", str(d), "--json"]) == 0
    io = capsys.readouterr()
    out = json.loads(io.out)  # stdout: the verdict alone
    assert "the table a user reads" in io.err and "$ poise plan trajectory" in io.err
    assert "--json" not in ran[-1] and ran[-1][-2:] == ["--json-out", str(d / "identify.json")]
    assert out["ok"] and out["pipeline"] == "arm"
    assert (out["determined"], out["estimated"], out["within_3se"], out["within_3se_of"]) == (2, 36, 36, 36)
    assert (out["joints_within_3se"], out["joints_within_3se_of"], out["validation_rms_pct"]) == (6, 12, 4.99)
    assert str(d / "efforts.png") in out["written"]


def test_a_failing_dynamic_demos_json_says_so(tmp_path, monkeypatch, capsys):
    _fake_steps(monkeypatch, fail_at="identify", code=2)
    assert main(["demo", "arm", "--out", str(tmp_path / "a"), "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and "exit 2" in out["error"]


def test_an_interrupted_posture_demo_keeps_the_earlier_results(tmp_path, monkeypatch, capsys):
    d = tmp_path / "demo"
    _earlier(d, "postures")
    before = _tree(d)
    seen = {}

    def fake_run_demo(args, progress=None, log=print, live=None):
        seen.update(progress=progress, live=live)
        (Path(args.out) / "plan.json").write_text("partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(poise.workflows.demo, "run_demo", fake_run_demo)
    monkeypatch.setattr(poise.output, "draws_progress", lambda: True)  # stderr a terminal
    assert main(["demo", "--out", str(d), "--physics", "kinematic"]) == 130
    assert _tree(d) == before and not (d / ASIDE).exists()
    # the run's progress drawn as `poise run` draws it
    from rich.live import Live

    from poise.cmd_run import ProgressView

    assert isinstance(seen["progress"], ProgressView) and isinstance(seen["live"], Live)
    assert seen["progress"].live is seen["live"]


def test_the_arm_design_step_says_max_iter_is_per_stage(tmp_path):
    design = arm_steps(tmp_path, 1)[0]
    assert "--max-iter" in design.argv and "per stage" in design.what and "45" in design.what
