"""The emulated bench never hangs on a physics twin that blows up: the twin stops, the run ends at once with one
line naming the likely cause (exit 2), run.json says why and keeps what was streamed; a twin whose servo
stiffness would follow a URDF's placeholder effort limit is refused before it runs."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from conftest import UR5

from drivers.emulators.mujoco_twin import Twin, TwinDiverged, TwinOptions
from drivers.emulators.sim_robot import twin_truth
from formats.errors import DataError
from poise.cli import main
from robots.registry import get_model

ROOT = Path(__file__).parent.parent
ARM = ["--robot", "sim", "--config", str(ROOT / "drivers" / "ur5_emulated.toml"), "--time-scale", "3", "--yes",
       "--json"]  # fmt: skip
PROMPT_S = 60.0  # wall s: the 6 s plan at --time-scale 3 takes a few; a hang would wait until killed


def _arm_plan(path: Path) -> Path:
    """The stored 6 s UR5 design on this machine's URDF."""
    doc = json.loads((Path(__file__).parent / "data" / "ur5_6s.json").read_text())
    path.write_text(json.dumps(doc | {"robot_source": str(UR5)}))
    return path


def _blow_up_while_streaming(monkeypatch, after: int) -> None:
    """The physics state turns NaN at the first physics step after the executor's streamed tick `after`."""
    import mujoco

    from drivers.trajectory_run import TrajectoryExecutor

    tick, step, streamed = TrajectoryExecutor._tick, mujoco.mj_step, []

    def counted(self, q, posture, phase, *a, **k):
        streamed.extend([1] if phase == "stream" else [])
        return tick(self, q, posture, phase, *a, **k)

    def stepped(m, d, nstep=1):
        step(m, d, nstep=nstep)
        if len(streamed) > after:
            d.qvel[0] = math.nan

    monkeypatch.setattr(TrajectoryExecutor, "_tick", counted)
    monkeypatch.setattr(mujoco, "mj_step", stepped)


def test_a_diverging_twin_ends_the_run_with_one_line_and_keeps_the_streamed_ticks(
    tmp_path, capsys, monkeypatch
):
    """The arm's physics blows up 50 ticks into streaming: exit 2 promptly, one stderr line saying the twin diverged
    and why, run.json stopped by it with the ticks streamed so far and a `diverged` twin event."""
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warnings to MUJOCO_LOG.TXT in the working directory
    _blow_up_while_streaming(monkeypatch, 50)
    out = tmp_path / "run"
    capsys.readouterr()
    t0 = time.monotonic()
    code = main(["run", str(_arm_plan(tmp_path / "arm.json")), *ARM, "--out", str(out)])
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and took < PROMPT_S, (code, took, err[-2000:])
    assert len(lines) == 1 and "Traceback" not in err and "physics twin diverged" in lines[0], err[-2000:]
    assert "ω·dt" in lines[0]  # the likely cause: the servos' stiffness on the links' inertias at the step
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"].startswith("stopped: TwinDiverged: the physics twin diverged")
    assert 50 <= meta["ticks_streamed"] < meta["ticks_planned"]
    assert [e["kind"] for e in meta["twin_events"]] == ["diverged"]


def test_a_blow_up_stops_the_twin_where_it_happened_instead_of_rewinding(capsys, tmp_path, monkeypatch):
    """A real MuJoCo blow-up (a huge force on the first joint: "huge value in QACC", after which MuJoCo resets the
    state and rewinds time): waiting for a later time raises at once, the twin stays at the time it blew up."""
    monkeypatch.chdir(tmp_path)  # MuJoCo's MUJOCO_LOG.TXT lands here, not in the checkout
    model = get_model("ur5")
    twin = Twin(model, twin_truth(model), TwinOptions(fixed_base=True, time_scale=5.0))
    twin.start()
    t0 = time.monotonic()
    try:
        twin.wait_until(0.2)
        with twin.lock:
            twin.d.qfrc_applied[twin.vadr[0]] = 1e15  # N·m
        with pytest.raises(TwinDiverged, match=rf"diverged after t = .* at joint '{model.joint_names[0]}'"):
            twin.wait_until(2.0)
    finally:
        twin.close()
    assert time.monotonic() - t0 < 5.0
    assert 0.2 <= twin.t_sim < 2.0 and [e["kind"] for e in twin.report()] == ["diverged"]


def test_the_twin_refuses_placeholder_effort_limits():
    """iCub's URDF effort limits are placeholders (50000 N·m): a servo stiffness from them blows the physics up
    at once, so the twin refuses them and names where the real ones go."""
    model = get_model("icub-right-arm")
    with pytest.raises(DataError, match=r"placeholder.*\[joint_limits\.\w+\] effort"):
        Twin(model, twin_truth(model), TwinOptions(fixed_base=True))
