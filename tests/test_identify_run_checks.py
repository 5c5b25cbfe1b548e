"""`identify dynamic` reads how the run went from its run.json: a run stopped before its plan's end is refused
unless --partial (and says how much of the plan it covers), late ticks are said, and a joint the fit does not
follow (a servo map that is not the robot's) is warned of."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from poise.cli import main

ROOT = Path(__file__).parents[1]
PLAN = ROOT / "tests" / "data" / "ur5_6s.json"
CONFIG = ROOT / "drivers" / "ur5_emulated.toml"


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """A simulated UR5 recording of the 6 s plan (100 Hz, default noise): its rows and header."""
    out = tmp_path_factory.mktemp("sim") / "ur5.csv"
    assert main(["simulate", "trajectory", str(PLAN), "--out", str(out), "--rate-hz", "100"]) == 0
    lines = out.read_text().splitlines(keepends=True)
    head = next(i for i, line in enumerate(lines) if not line.startswith("#")) + 1
    return lines[:head], lines[head:]


def _run_dir(folder: Path, simulated, rows: int, **meta) -> Path:
    """A run folder: the first `rows` of the simulated recording and a run.json saying `meta`."""
    head, body = simulated
    folder.mkdir()
    (folder / "recording.csv").write_text("".join(head + body[:rows]))
    doc = {"plan": str(PLAN), "plan_sha256": "0" * 64, "status": "completed", "rate_hz": 100.0,
           "ticks_streamed": rows, "ticks_planned": len(body), "duration_s": 6.0} | meta  # fmt: skip
    (folder / "run.json").write_text(json.dumps(doc))
    return folder / "recording.csv"


def test_a_stopped_run_is_refused_unless_partial_and_says_its_coverage(simulated, tmp_path, capsys):
    rec = _run_dir(tmp_path / "r", simulated, 328, status="stopped: DeviceError: robot link timed out")
    assert main(["identify", "dynamic", str(rec)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "its run stopped before the plan's end" in err and "after 328 of 601 ticks" in err
    assert "it covers 3.27 s of the plan's 6 s (55 %)" in err and "--partial" in err
    assert main(["identify", "dynamic", str(rec), "--partial", "--json"]) == 0
    out = capsys.readouterr()
    (p,) = json.loads(out.out)["partial_runs"]
    assert p["covered_s"] == pytest.approx(3.27) and p["covered_share"] == pytest.approx(3.27 / 6)
    assert "is a partial run" in out.err


def test_late_ticks_are_counted_from_raw_joints_stream(simulated, tmp_path, capsys):
    rec = _run_dir(tmp_path / "r", simulated, 601, jitter={"late_max_ms": 51.0, "late_p99_ms": 1.0})
    t = np.arange(601) * 0.01
    for k, late in ((100, 0.033), (300, 0.05), (400, 0.015)):  # two later than 2 periods, one not
        t[k:] += late
    lines = ["t,phase,t_traj"] + [f"{x:.5f},stream,{k / 100:.2f}" for k, x in enumerate(t)]
    (rec.parent / "raw_joints.csv").write_text("\n".join(lines) + "\n")
    assert main(["identify", "dynamic", str(rec), "--json"]) == 0
    out = capsys.readouterr()
    (late,) = json.loads(out.out)["late_ticks"]
    # the stream's own lateness (its longest step less a period), not run.json's (every phase)
    assert (
        late["late_max_ms"] == pytest.approx(50)
        and late["ticks_late"] == 2
        and late["period_ms"] == pytest.approx(10)
    )
    assert "2 of its run's 601 streamed ticks came more than 2 periods late, the latest 50 ms" in " ".join(
        out.err.split()
    )
    # on time to within a tick: nothing said
    meta = json.loads((rec.parent / "run.json").read_text())
    meta["jitter"]["late_max_ms"] = 1.0
    (rec.parent / "run.json").write_text(json.dumps(meta))
    assert main(["identify", "dynamic", str(rec), "--json"]) == 0
    out = capsys.readouterr()
    assert "late_ticks" not in json.loads(out.out) and "late (run.json" not in out.err


def _emulated_run(monkeypatch, out: Path, flip: bool) -> Path:
    """The UR5 plan run on the emulated Dynamixel bench; with `flip`, the emulated robot's shoulder_lift servo turns
    the other way than the configuration says (its map wrong)."""
    import drivers.emulators.dxl_bus as bus

    if flip:
        orig = bus.DxlBusEmulator.__init__

        def init(self, servos, *a, **k):
            s = list(servos)
            s[1] = dataclasses.replace(s[1], direction=-s[1].direction)
            orig(self, s, *a, **k)

        monkeypatch.setattr(bus.DxlBusEmulator, "__init__", init)
    argv = ["run", str(PLAN), "--robot", "sim", "--config", str(CONFIG), "--yes", "--out", str(out)]
    assert main(argv) == 0
    monkeypatch.undo()
    return out / "recording.csv"


@pytest.mark.slow
def test_a_flipped_joint_is_warned_and_an_honest_run_is_not(monkeypatch, simulated, tmp_path, capsys):
    honest = _emulated_run(monkeypatch, tmp_path / "ok", flip=False)
    flipped = _emulated_run(monkeypatch, tmp_path / "flip", flip=True)
    capsys.readouterr()
    for rec in (honest, tmp_path / "sim.csv"):
        if rec.name == "sim.csv":
            rec.write_text("".join(simulated[0] + simulated[1]))
        assert main(["identify", "dynamic", str(rec), "--json"]) == 0
        out = capsys.readouterr()
        assert "joint_misfit" not in json.loads(out.out) and "unexplained beyond its noise" not in out.err
    assert main(["identify", "dynamic", str(flipped), "--json"]) == 0
    out = capsys.readouterr()
    named = {m["joint"] for m in json.loads(out.out)["joint_misfit"]}
    assert "shoulder_lift_joint" in named
    err = " ".join(out.err.split())
    assert "shoulder_lift_joint" in err and "direction, zero and servo id" in err
