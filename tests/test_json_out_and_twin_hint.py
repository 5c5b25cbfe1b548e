"""`identify dynamic --json-out FILE` (the JSON --json prints, written beside the text; its folder checked before
the fit; nothing written when the fit is refused), the dynamic demo's identify.json as one of its outputs (moved
aside, restored, replaced like the others), and `simulate trajectory`'s warning when the twin's default friction
and noise would swamp a small robot's torques (an SO-100), silent on the UR5."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import simulated_recording

import poise.cli
from poise.cli import main
from poise.cmd_dynamic import SIMULATED_ARM, TWIN_DEFAULT_SHARE, TWIN_DEFAULT_SUGGESTED, _twin_defaults_hint
from poise.workflows.dynamic_demo import ASIDE, IDENTIFY_JSON, OUTPUTS, arm_steps, standing_steps
from tests.test_demo_review_folder import _earlier, _tree

DATA = Path(__file__).parent / "data"
EXAMPLES = Path(poise.cli.__file__).parents[1] / ".venv/lib/python3.11/site-packages/cmeel.prefix/share"
SO100 = EXAMPLES / "example-robot-data/robots/so_arm_description/urdf/so100.urdf"


@pytest.fixture(scope="module")
def ur5_recording(tmp_path_factory) -> Path:
    return simulated_recording(tmp_path_factory.mktemp("ur5"), DATA / "ur5_6s.json", 100.0)


# -- identify dynamic --json-out


def test_json_out_in_a_folder_that_does_not_exist_is_refused_before_the_fit(ur5_recording, tmp_path, capsys):
    target = tmp_path / "nosuch" / "fit.json"
    assert main(["identify", "dynamic", str(ur5_recording), "--json-out", str(target)]) == 2
    io = capsys.readouterr()
    assert io.err.count("\n") == 1 and "--json-out" in io.err and "does not exist" in io.err
    assert io.out == "" and not target.parent.exists()  # no table: refused before the fit


def test_a_refused_fit_leaves_an_existing_json_out_untouched(ur5_recording, tmp_path, capsys):
    target = tmp_path / "fit.json"
    target.write_text("an earlier result\n")
    argv = ["identify", "dynamic", str(ur5_recording), "--json-out", str(target)]
    assert main(argv) == 2  # there already: refused without --force
    assert "file exists" in capsys.readouterr().err
    # a fit refused after it started: torque constants for a recording of torques
    assert main([*argv, "--force", "--torque-constant", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "motor currents" in err
    assert target.read_text() == "an earlier result\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "fit.json"
    ]
    # the fit that runs replaces it with its result
    assert main([*argv, "--force"]) == 0
    assert json.loads(target.read_text())["rows"] and "within" not in capsys.readouterr().err


def test_json_out_is_in_the_help(capsys):
    assert main(["identify", "dynamic", "--help"]) == 0
    assert "--json-out FILE" in " ".join(capsys.readouterr().out.split())


# -- the demo's identify.json


@pytest.mark.parametrize("pipeline", ["arm", "standing"])
def test_the_demos_identification_writes_its_json_into_the_demo_folder(pipeline, tmp_path):
    steps = (arm_steps if pipeline == "arm" else standing_steps)(tmp_path, 1)
    last = steps[-1].argv
    assert last[:2] == ("identify", "dynamic") and last[-2:] == ("--json-out", str(tmp_path / IDENTIFY_JSON))
    assert IDENTIFY_JSON in OUTPUTS[pipeline] and "--json" not in last
    args = poise.cli.build_parser().parse_args(list(last))  # an option the command accepts
    assert args.json_out == str(tmp_path / IDENTIFY_JSON)


def _steps(monkeypatch, identify: str = "ok") -> list[list[str]]:
    """poise.cli.main as the arm demo calls it: each step writes its outputs; the identification its figure and
    `--json-out` file (`identify`: "ok"), nothing and fails ("fail"), or returns 0 without the file ("silent")."""
    ran: list[list[str]] = []

    def fake(argv: list[str]) -> int:
        ran.append(argv)
        if "--out" in argv:
            out = Path(argv[argv.index("--out") + 1])
            out.write_text("new") if out.suffix else out.mkdir()
        if argv[:2] == ["identify", "dynamic"]:
            if identify == "fail":
                return 2
            Path(argv[argv.index("--plot") + 1]).write_text("new")
            if identify == "ok":
                fit = {"well_pct": 15.0, "determined": ["ϑ3"], "not_determined": ["ϑ1"],
                       "reference": {"estimated": 2, "within_3se": 2, "max_abs_z": 0.5},
                       "validation": {"total_relative_pct": 6.25, "rows": ["a N·m"], "relative_pct": [6.25]}}  # fmt: skip
                Path(argv[argv.index("--json-out") + 1]).write_text(json.dumps(fit))
        return 0

    monkeypatch.setattr(poise.cli, "main", fake)
    return ran


def test_an_earlier_identify_json_is_restored_on_failure_and_replaced_on_success(
    tmp_path, monkeypatch, capsys
):
    d = tmp_path / "arm"
    _earlier(d, "arm")
    before = _tree(d)
    assert before[IDENTIFY_JSON] == "old"
    _steps(monkeypatch, "fail")
    assert main(["demo", "arm", "--out", str(d)]) == 2
    assert _tree(d) == before and not (d / ASIDE).exists()
    _steps(monkeypatch, "silent")  # exit 0 but no result: the demo fails, the earlier run's outputs come back
    assert main(["demo", "arm", "--out", str(d)]) == 2
    err = capsys.readouterr().err
    assert f"{d / IDENTIFY_JSON}: the identification's result cannot be read" in err
    assert _tree(d) == before and not (d / ASIDE).exists()
    _steps(monkeypatch)
    assert main(["demo", "arm", "--out", str(d)]) == 0
    fit = json.loads((d / IDENTIFY_JSON).read_text())
    out = capsys.readouterr().out
    assert fit["validation"]["total_relative_pct"] == 6.25 and not (d / ASIDE).exists()
    assert "validation torque RMS 6.25 % of the measured RMS (target ≤ 5 %): missed" in out  # from the file
    _steps(monkeypatch)
    assert main(["demo", "arm", "--out", str(d), "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["identification"] == fit and str(d / IDENTIFY_JSON) in verdict["written"]


def test_a_users_identify_json_is_never_replaced_by_the_demo(tmp_path, monkeypatch, capsys):
    (tmp_path / IDENTIFY_JSON).write_text("mine")
    ran = _steps(monkeypatch)
    assert main(["demo", "arm", "--out", str(tmp_path), "--force"]) == 2
    assert "would be replaced by its outputs" in capsys.readouterr().err
    assert (tmp_path / IDENTIFY_JSON).read_text() == "mine" and ran == []


# -- simulate trajectory: the twin's defaults against a small robot's torques


def _args(**given) -> argparse.Namespace:
    return argparse.Namespace(**(SIMULATED_ARM | given))


def test_the_hint_compares_the_defaults_with_the_most_loaded_joints_torque():
    t = np.linspace(0, 2 * np.pi, 2000, endpoint=False)  # whole periods: RMS amplitude/√2
    qd = np.column_stack([np.sin(t), np.sin(t)])  # RMS 1/√2 rad/s: viscous 0.3 → 0.21 N·m RMS
    light = 0.5 * np.column_stack([np.sin(t), 0.01 * np.sin(t)])  # most loaded joint 0.35 N·m RMS
    heavy = 40 * np.column_stack([np.sin(t), 0.001 * np.sin(t)])  # its wrist far below the defaults
    names = ["coulomb", "viscous", "effort_noise"]
    assert _twin_defaults_hint(names, heavy, qd, _args(), ["a", "b"]) is None
    line = _twin_defaults_hint(names, light, qd, _args(), ["a", "b"])
    rms = 0.5 / np.sqrt(2)
    assert line.startswith(f"warning: a, the plan's most loaded joint, needs {rms:.3g} N·m RMS")
    assert "Coulomb friction 0.8 N·m" in line and "effort noise σ 0.2 N·m" in line
    assert f"over the plan) and effort noise σ 0.2 N·m exceed {100 * TWIN_DEFAULT_SHARE:.0f} % of it" in line
    assert "0.21 N·m RMS over the plan" in line  # viscous 0.3 N·m·s/rad × 1/√2 rad/s
    # the example: the largest (Coulomb, 0.8 N·m) brought to 5 % of that torque, the others scaled alike
    k = TWIN_DEFAULT_SUGGESTED * rms / 0.8
    assert f"(e.g. --coulomb {0.8 * k:.2g} --viscous {0.3 * k:.2g} --effort-noise {0.2 * k:.2g}:" in line
    # what the user gave is theirs: only the defaults left are named
    only = _twin_defaults_hint(["effort_noise"], light, qd, _args(coulomb=0.01), ["a", "b"])
    assert (
        "--coulomb" not in only and "Coulomb" not in only and "exceeds" in only and "--effort-noise" in only
    )
    # a default under the share of that torque is not named
    assert _twin_defaults_hint(["effort_noise"], light, qd, _args(effort_noise=0.05), ["a", "b"]) is None


@pytest.fixture(scope="module")
def so100_plan(tmp_path_factory) -> Path:
    """A quick SO-100 excitation plan (the reviewer's, fewer harmonics and iterations)."""
    if not SO100.is_file():
        pytest.skip("example-robot-data's SO-100 is not installed")
    out = tmp_path_factory.mktemp("so100") / "so.json"
    argv = ["plan", "trajectory", str(SO100), "--out", str(out), "--duration", "6", "--period", "6",
            "--harmonics", "2", "--max-iter", "3", "--seed", "1"]  # fmt: skip
    assert main(argv) in (0, 1) and out.is_file()  # 1: written, not converged
    return out


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "the twin's default" in line]


def test_simulating_a_small_robot_with_the_defaults_warns_in_one_line(so100_plan, tmp_path, capsys):
    capsys.readouterr()
    rec = tmp_path / "so.csv"
    assert main(["simulate", "trajectory", str(so100_plan), "--out", str(rec), "--seed", "1"]) == 0
    said = _warnings(capsys.readouterr().err)
    assert len(said) == 1 and said[0].startswith("warning: ")
    joints = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
    assert any(said[0].startswith(f"warning: {j}, the plan's most loaded joint") for j in joints)
    assert all(
        o in said[0]
        for o in ("Coulomb friction 0.8 N·m", "effort noise σ 0.2 N·m", "--coulomb", "--effort-noise")
    )
    assert rec.is_file()  # a warning: the recording is written all the same
    # scaled by the user: no warning
    small = ["--coulomb", "0.02", "--viscous", "0.01", "--effort-noise", "0.005"]
    assert main(["simulate", "trajectory", str(so100_plan), "--out", str(rec), "--force", *small]) == 0
    assert _warnings(capsys.readouterr().err) == []


def test_simulating_the_ur5_with_the_defaults_does_not_warn(tmp_path, capsys):
    assert main(["simulate", "trajectory", str(DATA / "ur5_6s.json"), "--out", str(tmp_path / "u.csv")]) == 0
    assert _warnings(capsys.readouterr().err) == []
