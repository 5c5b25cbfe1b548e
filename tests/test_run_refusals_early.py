"""`poise run` refuses options that do not fit the plan, the robot or the bench before anything is written or
opened: exit 2, one `poise: error:` line naming the problem, and no run directory (README: "Any problem → exit 2,
nothing sent, no run files"). Every case is refused before a session opens: no physics runs here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from drivers.emulators.sim_robot import twin_truth
from formats.errors import DataError
from formats.plan import save_plan
from poise import cmd_run_trajectory
from poise.cli import main
from robots.registry import get_model

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
ARM = [str(DATA / "ur5_6s.json"), "--robot", "sim", "--config", str(ROOT / "drivers" / "ur5_emulated.toml")]
TULIP = [str(DATA / "tulip_double_support_10s.json")]
BT = "bt:00:11:22:33:44:55,00:11:22:33:44:66"


@pytest.fixture(autouse=True)
def _no_session(monkeypatch, request):
    """A refusal must come before the bench: opening a session (a device, the emulated bench) fails the test
    (except in the test of a bench that fails to open)."""
    if request.node.name == "test_a_robot_that_does_not_open_leaves_no_run_files":
        return

    def opened(*a, **k):
        raise AssertionError("a session was opened for a refused run")

    monkeypatch.setattr("drivers.session.Session", opened)
    # the module's own name, imported before the patch (importing it under the patch would keep the fake)
    monkeypatch.setattr(cmd_run_trajectory, "Session", opened)


def _refused(argv: list[str], out: Path, capsys, *words: str) -> None:
    capsys.readouterr()
    assert main(["run", *argv, "--out", str(out), "--yes"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("poise: error: "), err
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--physics", "kinematic"], ["--physics kinematic", "physics twin"]),
        (["--truth", "nope"], ["'nope'", "['urdf']"]),
        (["--clamp-soles"], ["--clamp-soles", "fixed-base"]),
        (["--twin-trace"], ["--twin-trace", "fixed-base"]),
        (["--gravity-comp"], ["gravity compensation", "standing on the boards", "fixed-base arm"]),
    ],
    ids=["kinematic", "truth", "clamp-soles", "twin-trace", "gravity-comp"],
)
def test_an_arm_trajectory_refuses_before_its_run_directory(extra, words, tmp_path, capsys):
    _refused([*ARM, *extra], tmp_path / "run", capsys, *words)


def test_a_trajectory_on_real_servos_refuses_a_time_scale(tmp_path, capsys):
    arm = [*ARM[:2], "dxl:/dev/nonexistent", *ARM[3:], "--time-scale", "3"]
    _refused(arm, tmp_path / "run", capsys, "--time-scale", "real servos keep real time")


def test_an_arm_refuses_gravity_compensation_from_its_configuration(tmp_path, capsys):
    """`[executor] gravity_compensation = true` in an arm's file is refused alike (the executor crashed on it)."""
    text = (ROOT / "drivers" / "ur5_emulated.toml").read_text()
    cfg = tmp_path / "arm.toml"
    cfg.write_text(text.replace("[executor]\n", "[executor]\ngravity_compensation = true\n", 1))
    argv = [str(DATA / "ur5_6s.json"), "--robot", "sim", "--config", str(cfg)]
    _refused(argv, tmp_path / "run", capsys, "gravity compensation", "fixed-base arm")


@pytest.mark.parametrize(
    "extra, words",
    [
        (
            ["--robot", "sim", "--boards", "sim", "--truth", "nope"],
            ["'nope'", "'mc'", "'sim'", "'thesis'", "nor an existing file"],
        ),
        (["--robot", "sim", "--boards", BT], ["--robot sim and --boards sim go together"]),
        (["--robot", "dxl:/dev/null", "--boards", "sim"], ["--robot sim and --boards sim go together"]),
    ],
    ids=["truth", "sim-robot-real-boards", "real-robot-sim-boards"],
)
def test_a_standing_trajectory_refuses_before_its_run_directory(extra, words, tmp_path, capsys):
    _refused([*TULIP, *extra], tmp_path / "run", capsys, *words)


@pytest.mark.parametrize(
    "extra, words",
    [
        (
            ["--robot", "sim", "--boards", "sim", "--truth", "nope"],
            ["'nope'", "'mc'", "'sim'", "'thesis'", "nor an existing file"],
        ),
        (["--robot", "sim", "--boards", BT], ["--robot sim and --boards sim go together"]),
        # real servos would move K × faster than the velocity limits the plan and the servos' registers allow
        (
            ["--robot", "dxl:/dev/nonexistent", "--boards", BT, "--time-scale", "4"],
            ["--time-scale", "emulated bench", "real servos keep real time"],
        ),
    ],
    ids=["truth", "sim-robot-real-boards", "time-scale-on-real-servos"],
)
def test_a_posture_plan_refuses_before_its_run_directory(extra, words, plan, tmp_path, capsys):
    save_plan(plan, tmp_path / "plan.json")
    _refused([str(tmp_path / "plan.json"), *extra], tmp_path / "run", capsys, *words)


@pytest.mark.parametrize(
    "extra",
    [["--truth", "sim"], ["--clamp-soles"], ["--gravity-comp"], ["--physics", "kinematic"]],
    ids=["truth", "clamp-soles", "gravity-comp", "kinematic"],
)
def test_a_pwm_plan_refuses_the_standing_robots_options(extra, tmp_path, capsys):
    pwm = {"format": "poise pwm plan", "version": 1, "rate_hz": 100.0, "link": "free", "joint": "theta1",
           "segments": [{"shape": "triangle", "amplitude_pct": 8.0, "frequency_hz": 0.3, "duration_s": 2.0}]}  # fmt: skip
    (tmp_path / "pwm.json").write_text(json.dumps(pwm))
    _refused(
        [str(tmp_path / "pwm.json"), "--robot", "sim", *extra], tmp_path / "run", capsys, extra[0], "PWM plan"
    )


def test_truth_accepts_what_the_emulated_bench_accepts(tmp_path):
    """Every name the refusal lists is accepted, published estimates included; a parameter-set file too."""
    from formats.parameter_set import save_parameter_set

    tulip = get_model("tulip")
    for name in ("sim", "mc", "thesis"):
        twin_truth(tulip, name)
    save_parameter_set(tulip.params["mc"], tmp_path / "p.json")
    twin_truth(tulip, str(tmp_path / "p.json"))
    # it lists what it accepts: the sets this process's model holds (tests add some) and the published estimates
    names = sorted({*tulip.params, *tulip.published_estimates})
    assert {"mc", "sim", "thesis"} <= set(names)
    with pytest.raises(DataError, match=re.escape(f"neither {names} nor an existing file")):
        twin_truth(tulip, "nope")
    for name in names:
        twin_truth(tulip, name)


@pytest.mark.parametrize("kind", ["trajectory", "postures"])
def test_gains_of_other_boards_are_refused_before_the_run_directory(kind, plan, tmp_path, capsys):
    import numpy as np

    from formats.board_gains import BoardGains, save_board_gains

    gains = tmp_path / "gains.json"
    save_board_gains(
        BoardGains(("bt:00:11:22:33:44:55", "bt:00:11:22:33:44:77"), np.ones((2, 4)), 10.0), gains
    )
    if kind == "postures":
        save_plan(plan, tmp_path / "plan.json")
    what = TULIP if kind == "trajectory" else [str(tmp_path / "plan.json")]
    _refused([*what, "--robot", "dxl:/dev/nonexistent", "--boards", BT, "--board-gains", str(gains)],
             tmp_path / "run", capsys, "measured on", "these boards are")  # fmt: skip


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--robot", "dxl:/dev/nonexistent", "--physics", "mujoco"], ["--physics", "real robot"]),
        (["--robot", "dxl:/dev/nonexistent", "--no-noise"], ["--no-noise", "real robot"]),
        (["--robot", "sim", "--joint", "theta2"], ["--joint", "PWM plan only"]),
        (["--robot", "sim", "--drive-inertia", "0.1"], ["--drive-inertia", "PWM plan only"]),
        (["--robot", "sim", "--limit-margin-deg", "4"], ["--limit-margin-deg", "PWM plan only"]),
    ],
    ids=["physics-real", "no-noise-real", "joint", "drive-inertia", "limit-margin"],
)
def test_options_of_another_kind_of_run_are_refused(extra, words, tmp_path, capsys):
    _refused([*TULIP, "--boards", "sim" if "sim" in extra else BT, *extra], tmp_path / "run", capsys, *words)


def test_a_robot_that_does_not_open_leaves_no_run_files(tmp_path, capsys):
    """The bench fails to open (a serial port that is not there): nothing was sent or measured, and the run's
    --out holds nothing that would block the next attempt."""
    out = tmp_path / "run"
    arm = [*ARM[:2], "dxl:/dev/nonexistent", *ARM[3:]]
    assert main(["run", *arm, "--out", str(out), "--yes"]) == 2
    err = capsys.readouterr().err
    assert "/dev/nonexistent" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    out.mkdir()  # a folder of the user's own stays, emptied of nothing but what the run wrote
    (out / "notes.txt").write_text("mine")
    assert main(["run", *arm, "--out", str(out), "--yes"]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
