"""What users' reviews of `plan show`, multi-start designs, Doggy plans and the planning helpers found, mended: a
figure drawn without a word for a plan `plan check` fails; a plan naming one robot and describing another; a plan's
absurd rate; a Doggy plan given to `poise run`; errors without JSON under --json; setpoints for a failing plan; an
output written over an input; simulated imperfections the plan does not record. (Multi-start seeds:
test_trajectory_multistart; a scheduler without workers: test_trajectory_dask.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import one_line_error

from poise.cli import main

DATA = Path(__file__).parent / "data"
UR5_PLAN = DATA / "ur5_6s.json"


def _edited(tmp_path: Path, source: Path, edit) -> Path:
    doc = json.loads(source.read_text())
    edit(doc)
    out = tmp_path / f"edited_{source.name}"
    out.write_text(json.dumps(doc))
    return out


def test_plan_show_warns_when_plan_check_fails_the_plan(tmp_path, capsys):
    def faster(doc):  # 3× the coefficients: a wider, faster motion (its links meet)
        traj = doc["trajectory"]
        traj["a"] = (3 * np.asarray(traj["a"])).tolist()
        traj["b"] = (3 * np.asarray(traj["b"])).tolist()

    bad = _edited(tmp_path, UR5_PLAN, faster)
    assert main(["plan", "check", str(bad)]) == 1
    capsys.readouterr()
    assert main(["plan", "show", str(bad), "--out", str(tmp_path / "bad.png")]) == 0
    out = capsys.readouterr()
    assert (tmp_path / "bad.png").exists() and "wrote" in out.out
    err = "".join(out.err.split())  # a long path wraps anywhere
    assert f"warning:`plancheck{bad}`failsit(" in err and "drawnasitis" in err
    assert main(["plan", "show", str(UR5_PLAN), "--out", str(tmp_path / "good.png")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_plan_naming_one_robot_and_describing_another_is_refused(tmp_path, capsys):
    other = _edited(tmp_path, UR5_PLAN, lambda doc: doc.update(robot="tulip"))
    for argv in (
        ["plan", "show", str(other), "--out", str(tmp_path / "x.png")],
        ["plan", "check", str(other)],
    ):
        err = one_line_error(capsys, argv)
        assert "robot 'tulip', but its robot_source" in err and "describes 'ur5'" in err
    assert not (tmp_path / "x.png").exists()


def test_a_plans_rate_beyond_any_servo_is_refused(tmp_path, capsys):
    fast = _edited(tmp_path, UR5_PLAN, lambda doc: doc.update(rate_hz=1e9))
    err = one_line_error(capsys, ["plan", "check", str(fast)])
    assert "rate_hz must lie in (0, 10000] Hz" in err


def test_a_doggy_plan_given_to_run_is_named_as_such(tmp_path, capsys):
    plan = tmp_path / "doggy.json"
    plan.write_text(json.dumps({"format": "poise.doggy-excitation", "version": 1, "kp": 3.0, "rate": 1000.0,
                                "segments": [{"kind": "zero", "duration": 1.0}]}))  # fmt: skip
    err = one_line_error(capsys, ["run", str(plan), "--robot", "sim", "--out", str(tmp_path / "run")])
    assert "a Doggy PWM excitation plan, which your driver streams" in err and "solve doggy --simulate" in err
    assert not (tmp_path / "run").exists()


def test_json_errors_are_one_json_object_on_stdout(tmp_path, capsys):
    """With --json a script reads the error too: the stderr line's text as {"ok": false, "error": …}, for a usage
    error, a refused input and a missing file; without --json stdout stays empty."""
    cases = [
        ["plan", "check", "--json"],  # the plan missing: a usage error
        ["plan", "check", str(_edited(tmp_path, UR5_PLAN, lambda d: d.update(rate_hz=-1))), "--json"],
        ["plan", "check", str(tmp_path / "none.json"), "--json"],
    ]
    for argv in cases:
        assert main(argv) == 2
        out = capsys.readouterr()
        doc = json.loads(out.out)
        assert doc["ok"] is False and out.err.strip() == f"poise: error: {doc['error']}"
        assert main(argv[:-1]) == 2
        assert capsys.readouterr().out == ""


def test_a_plan_whose_chain_does_not_close_is_named_by_show(tmp_path, capsys):
    far = _edited(tmp_path, DATA / "tulip_double_support_10s.json",
                  lambda d: d["trajectory"]["chain"].update(target_p=[0.0, 2.0, 0.0]))  # fmt: skip
    err = one_line_error(capsys, ["plan", "show", str(far), "--out", str(tmp_path / "far.png")])
    assert err.startswith(f"poise: error: {far}: ") and not (tmp_path / "far.png").exists()
    assert main(["plan", "check", str(far)]) == 1  # there a failed check among the others


def test_a_rigid_body_design_of_a_flexible_joint_robot_says_so(tmp_path, capsys):
    """Doggy's description declares flexible joints: `plan trajectory doggy` still designs (its URDF set's
    rigid-body excitation) but says where its calibration's experiment comes from."""
    argv = ["plan", "trajectory", "doggy", "--duration", "5", "--period", "5", "--harmonics", "2", "--samples", "16",
            "--max-iter", "5", "--out", str(tmp_path / "d.json")]  # fmt: skip
    assert main(argv) in (0, 1)
    err = " ".join(capsys.readouterr().err.split())
    assert "doggy's description declares flexible joints (q1, q2, q3)" in err and "poise plan doggy" in err


def test_plan_sample_writes_setpoints_only_for_a_plan_check_passes(tmp_path, capsys):
    """Setpoints go to a controller poise does not guard: a plan `plan check` fails (angles typed in degrees) or
    too few setpoints for the motion are refused, nothing written."""
    deg = _edited(tmp_path, UR5_PLAN, lambda d: d["trajectory"].update(q0=(57.3 * np.asarray(d["trajectory"]["q0"])).tolist()))  # fmt: skip
    out = tmp_path / "sp.csv"
    err = one_line_error(capsys, ["plan", "sample", str(deg), "--out", str(out)])
    assert (
        f"`plan check {deg}` fails it (" in err
        and "leaves its position range" in err
        and "no setpoints" in err
    )
    err = one_line_error(capsys, ["plan", "sample", str(UR5_PLAN), "--out", str(out), "--rate-hz", "1"])
    assert "6 s at it is 7 setpoints; a controller needs at least 10" in err and not out.exists()
    assert main(["plan", "sample", str(UR5_PLAN), "--out", str(out)]) == 0


def test_an_output_on_an_input_or_another_output_is_refused(tmp_path, capsys):
    plan = tmp_path / "ur5.json"
    plan.write_bytes(UR5_PLAN.read_bytes())
    err = one_line_error(capsys, ["plan", "sample", str(plan), "--out", str(plan), "--force"])
    assert "the same file as plan" in err and plan.read_bytes() == UR5_PLAN.read_bytes()
    rec = tmp_path / "rec.csv"
    err = one_line_error(
        capsys, ["simulate", "trajectory", str(plan), "--out", str(rec), "--truth-out", str(rec)]
    )
    assert "--out" in err and "the same file as --truth-out" in err and not rec.exists()


def test_outputs_named_like_a_command_or_a_default_are_written(tmp_path, monkeypatch, capsys):
    """Only files are compared: an output called `sample` (the subcommand) or `perturbed` (--truth's default)."""
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "sample", str(UR5_PLAN), "--out", "sample"]) == 0
    assert main(["simulate", "trajectory", str(UR5_PLAN), "--out", "perturbed", "--rate-hz", "100"]) == 0
    assert (tmp_path / "sample").is_file() and (tmp_path / "perturbed").is_file()


@pytest.mark.parametrize(
    "plan, option, records",
    [("ur5_6s.json", "--force-noise", "a fixed-base arm's joint efforts"),
     ("tulip_double_support_10s.json", "--viscous", "a standing robot's boards"),
     ("tulip_double_support_10s.json", "--armature", "a standing robot's boards")],
)  # fmt: skip
def test_simulate_refuses_the_other_kinds_imperfections(plan, option, records, tmp_path, capsys):
    err = one_line_error(capsys, ["simulate", "trajectory", str(DATA / plan), "--out", str(tmp_path / "r.csv"),
                                  option, "0.5"])  # fmt: skip
    assert f"{option} simulates what this plan does not record (it records {records})" in err


def test_single_support_setpoints_say_so(tmp_path, capsys):
    """A single-support plan's setpoints declare the motion (a recording of them then does too) and the weight
    shift onto the stance sole `poise run` would plan is named as the user's to make."""
    out = tmp_path / "ss.csv"
    assert main(["plan", "sample", str(DATA / "tulip_single_support_6s.json"), "--out", str(out)]) == 0
    assert "# motion: single-support" in out.read_text().splitlines()[:12]
    assert "the weight shift onto it, which `poise run` plans, is yours" in " ".join(
        capsys.readouterr().out.split()
    )
