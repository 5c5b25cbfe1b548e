"""SIGTERM (`kill`) during a streamed trajectory run stops it as Ctrl-C does: what was streamed is kept, run.json
says it stopped, one stderr line says so, exit 143 (Ctrl-C: 130), and the previous SIGTERM handler is back."""

from __future__ import annotations

import json
import signal

from test_run_trajectory_interrupt import ARM, _arm_plan, _one_line

from poise.cli import main


def test_sigterm_while_streaming_an_arm_trajectory_keeps_its_rows(tmp_path, capsys, monkeypatch):
    from drivers.trajectory_run import TrajectoryExecutor

    tick, calls = TrajectoryExecutor._tick, []

    def killed(self, q, posture, ph, *a, **k):
        if ph == "stream":
            calls.append(1)
            if len(calls) == 61:
                signal.raise_signal(signal.SIGTERM)
        return tick(self, q, posture, ph, *a, **k)

    monkeypatch.setattr(TrajectoryExecutor, "_tick", killed)
    previous = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", str(_arm_plan(tmp_path / "arm.json")), *ARM, "--out", str(out)]) == 143
    got = capsys.readouterr()
    doc = json.loads(got.out)
    meta = json.loads((out / "run.json").read_text())
    assert doc["signal"] == "SIGTERM" and meta["status"].startswith("stopped: Terminated")
    assert 0 < doc["ticks_recorded"] == meta["ticks_streamed"] < doc["ticks_planned"]
    assert doc["recording_rows"] > 0 and (out / "recording.csv").is_file()
    assert "terminated (SIGTERM)" in _one_line(got.err)
    assert signal.getsignal(signal.SIGTERM) is previous
