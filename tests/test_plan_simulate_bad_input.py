"""Bad input to `simulate trajectory`, `plan trajectory` and `plan check` (a review's nine items): a plan in degrees
refused by simulate (one failing plan check otherwise warned, as `plan show` warns); a truncated --prior in the JSON
reader's words; a trajectory whose format says posture plan; a recording named as a plan recognised as one; a UTF-8
BOM in JSON accepted; a rest posture in degrees hinted; `simulate trajectory --json`'s "ok"; Ctrl-C with --json; the
design options' help with their defaults."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import one_line_error

from poise.cli import main

DATA = Path(__file__).parent / "data"
UR5_PLAN = DATA / "ur5_6s.json"
ROOT = Path(__file__).resolve().parents[1]


def _scaled(tmp_path: Path, name: str, factor: float, q0: bool) -> Path:
    """The UR5 plan with its Fourier coefficients (and with `q0` its offsets) times `factor`: 180/π writes its
    angles in degrees."""
    doc = json.loads(UR5_PLAN.read_text())
    traj = doc["trajectory"]
    for key in ("a", "b") + (("q0",) if q0 else ()):
        traj[key] = (np.asarray(traj[key]) * factor).tolist()
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> tuple[Path, dict]:
    """A dynamic recording of the UR5 plan (50 Hz) and what `simulate trajectory --json` said of it."""
    out = tmp_path_factory.mktemp("rec") / "rec.csv"
    import contextlib
    import io

    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        code = main(["simulate", "trajectory", str(UR5_PLAN), "--out", str(out), "--rate-hz", "50", "--json"])
    assert code == 0
    return out, json.loads(said.getvalue())


# 1 ------------------------------------------------------------------------------------------------------------


def test_simulate_refuses_a_plan_in_degrees(tmp_path, capsys):
    plan = _scaled(tmp_path, "deg.json", 180 / np.pi, q0=True)
    out = tmp_path / "deg.csv"
    err = one_line_error(capsys, ["simulate", "trajectory", str(plan), "--out", str(out)])
    assert f"{plan}: joint " in err and "leaves its position range by" in err, err
    assert "more than a turn" in err and "degrees?" in err and "radians" in err, err
    assert not out.exists()


def test_simulate_records_a_plan_failing_check_with_plan_shows_warning(tmp_path, capsys):
    """Beyond a limit but a motion a robot could make: recorded, warned in one line as `plan show` warns (checked
    at the recording's samples: at 1000 Hz, `plan check`'s 1 ms grid, the same problems)."""
    plan = _scaled(tmp_path, "wide.json", 5.0, q0=False)
    out = tmp_path / "wide.csv"
    capsys.readouterr()
    assert main(["simulate", "trajectory", str(plan), "--out", str(out), "--rate-hz", "1000", "--json"]) == 0
    captured = capsys.readouterr()
    said = json.loads(captured.out)
    warning = [line for line in captured.err.splitlines() if line.strip()]
    assert len(warning) == 1, captured.err
    assert (
        warning[0].startswith(f"warning: `plan check {plan}` fails it (")
        and "recorded as it is" in warning[0]
    )
    assert said["ok"] is True and said["plan_problems"], said
    assert any("position range" in p for p in said["plan_problems"]), said
    assert out.exists()
    show = tmp_path / "wide.png"
    assert main(["plan", "show", str(plan), "--out", str(show)]) == 0
    drawn = [line for line in capsys.readouterr().err.splitlines() if "fails it" in line]
    # the same check, the same warning, but for what the command did with the plan
    assert [line.replace("drawn as it is", "recorded as it is") for line in drawn] == warning


def test_impossible_motion_thresholds():
    from poise.cmd_simulate import IMPOSSIBLE_EFFORT_RATIO, IMPOSSIBLE_RANGE_RAD, impossible_motion

    def check(margin: float, ratio: float | None) -> SimpleNamespace:
        problems = [f"joint j needs {ratio}× its effort limit"] if ratio and ratio > 1 else []
        return SimpleNamespace(min_position_margin_rad=margin, torque_ratio=ratio, problems=problems)

    assert impossible_motion(check(-0.9 * IMPOSSIBLE_RANGE_RAD, 0.9 * IMPOSSIBLE_EFFORT_RATIO)) is None
    assert impossible_motion(check(float("inf"), None)) is None
    said = impossible_motion(check(0.1, 1.5 * IMPOSSIBLE_EFFORT_RATIO))
    assert said is not None and said.startswith("joint j needs") and "effort limit" in said
    assert "more than a turn" in impossible_motion(check(-1.1 * IMPOSSIBLE_RANGE_RAD, None))


# 2 ------------------------------------------------------------------------------------------------------------


def test_prior_truncated_json_says_why(tmp_path, capsys):
    text = UR5_PLAN.read_text()
    trunc = tmp_path / "trunc.json"
    trunc.write_text(text[: len(text) // 2])
    with pytest.raises(json.JSONDecodeError) as parsed:
        json.loads(trunc.read_text())
    err = one_line_error(capsys, ["plan", "trajectory", "ur5", "--out", str(tmp_path / "next.json"), "--prior",
                                  str(trunc)])  # fmt: skip
    assert f"--prior {trunc}: not valid JSON ({parsed.value.msg}, line {parsed.value.lineno})" in err, err
    assert not (tmp_path / "next.json").exists()
    # `plan check` says the same of it
    assert f"{trunc}: not valid JSON ({parsed.value.msg}, line {parsed.value.lineno})" in one_line_error(
        capsys, ["plan", "check", str(trunc)]
    )


# 3 ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["plan", "check"], ["simulate", "trajectory"]])
def test_trajectory_declared_a_posture_plan(command, tmp_path, capsys):
    doc = json.loads(UR5_PLAN.read_text()) | {"format": "poise.posture-plan"}
    path = tmp_path / "fmt.json"
    path.write_text(json.dumps(doc))
    extra = ["--out", str(tmp_path / "x.csv")] if command[0] == "simulate" else []
    err = one_line_error(capsys, [*command, str(path), *extra])
    assert "declares a posture plan" in err and "holds a trajectory" in err, err
    assert "fix its format field to 'poise.trajectory-plan'" in err and "placements" not in err, err


# 4 ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["simulate", "trajectory"], ["plan", "check"], ["plan", "forecast"]])
def test_a_recording_named_as_a_plan(command, recording, tmp_path, capsys):
    rec, _ = recording
    extra = {"simulate": ["--out", str(tmp_path / "x.csv")], "plan": []}[command[0]]
    extra += ["--noise", "0.2"] if command[1] == "forecast" else []
    err = one_line_error(capsys, [*command, str(rec), *extra])
    assert f"{rec}: a dynamic recording; `poise {' '.join(command)}` reads " in err, err
    assert "`poise identify dynamic` reads recordings" in err and "not valid JSON" not in err, err


# 5 ------------------------------------------------------------------------------------------------------------


def test_json_with_a_bom_is_read(tmp_path, capsys):
    from formats.json_format import json_format, read_json

    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + UR5_PLAN.read_bytes())
    assert read_json(bom, "a plan") == json.loads(UR5_PLAN.read_text())
    assert json_format(bom) == "poise.trajectory-plan"
    out = tmp_path / "bom.csv"
    assert main(["simulate", "trajectory", str(bom), "--out", str(out), "--rate-hz", "50"]) == 0
    assert out.exists() and "BOM" not in capsys.readouterr().err


# 6 ------------------------------------------------------------------------------------------------------------


def test_rest_posture_in_degrees_is_hinted(tmp_path, capsys):
    out = str(tmp_path / "p.json")
    err = one_line_error(
        capsys, ["plan", "trajectory", "ur5", "--out", out, "--rest-posture=0,-90,90,0,90,0"]
    )
    assert "-90 rad not in" in err and "degrees? --rest-posture takes radians" in err, err
    assert f"{np.radians(-90):.4g}" in err
    # beyond the ranges in degrees too (-400° = -6.98 rad): no hint
    err = one_line_error(capsys, ["plan", "trajectory", "ur5", "--out", out, "--rest-posture=-400,0,0,0,0,0"])
    assert "rest posture outside the joint ranges" in err and "degrees?" not in err, err
    assert not Path(out).exists()


# 7 ------------------------------------------------------------------------------------------------------------


def test_simulate_json_says_ok(recording):
    _, said = recording
    assert said["ok"] is True and said["plan_problems"] == []


# 8 ------------------------------------------------------------------------------------------------------------


def test_interrupt_with_json_prints_the_error_object(monkeypatch, capsys, tmp_path):
    """Ctrl-C inside a command with --json: exit 130, `poise: interrupted`, and the error object on stdout."""
    from poise import cmd_plan_trajectory

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cmd_plan_trajectory, "cmd_trajectory", interrupted)
    assert main(["plan", "trajectory", "ur5", "--out", str(tmp_path / "never.json"), "--json"]) == 130
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"ok": False, "error": "interrupted"}
    assert captured.err.strip() == "poise: interrupted"
    assert (
        main(["plan", "trajectory", "ur5", "--out", str(tmp_path / "never.json")]) == 130
    )  # without --json: stdout empty
    assert capsys.readouterr().out == ""


def test_sigint_during_a_design_with_json(tmp_path):
    """A real SIGINT 3 s into a design that takes far longer: exit 130, the --out kept, the JSON error object."""
    out = tmp_path / "keep.json"
    out.write_bytes(UR5_PLAN.read_bytes())
    argv = ["plan", "trajectory", "ur5", "--out", str(out), "--force", "--duration", "30", "--max-iter", "400",
            "--json"]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "poise", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    try:
        proc.wait(timeout=3.0)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert json.loads(stdout) == {"ok": False, "error": "interrupted"}
    assert stderr.rstrip().splitlines()[-1] == "poise: interrupted" and "Traceback" not in stderr
    assert out.read_bytes() == UR5_PLAN.read_bytes()


# 9 ------------------------------------------------------------------------------------------------------------


def test_design_options_help_gives_units_and_defaults(capsys):
    assert main(["plan", "trajectory", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse folds the help lines

    def help_of(option: str) -> str:
        start = text.index(f"{option} {option.lstrip('-').replace('-', '_').upper()} ")
        return text[start : start + 160]

    assert "in Hz (default 100 Hz)" in help_of("--rate-hz")
    assert "(default 0.05 rad)" in help_of("--position-margin")
    assert "default 100)" in help_of("--samples")
    assert "(default 1)" in help_of("--starts")
    seed = help_of("--seed")
    assert "seed" in seed[len("--seed SEED") :] and "(default 1)" in seed
