"""Review of `identify dynamic`'s run checks: a run that streamed its whole plan and stopped after it is fitted
(a note, no refusal); late ticks are said only when the recorded stream had them; the per-joint misfit check
counts what the encoders' steps make of an honest fit at higher cut-offs, names the recordings it is in, and its
JSON numbers carry their unit."""

import json
from pathlib import Path

import numpy as np
import pytest

from drivers.run_files import partial_status, stopped_after_stream
from identify.recording_checks import MISFIT_WARN, encoder_steps
from poise.cli import main

ROOT = Path(__file__).parents[1]
PLAN = ROOT / "tests" / "data" / "ur5_6s.json"


def _simulate(out: Path, *extra: str) -> Path:
    assert main(["simulate", "trajectory", str(PLAN), "--out", str(out), *extra]) == 0
    return out


def _split(path: Path) -> tuple[list[str], list[str]]:
    lines = path.read_text().splitlines(keepends=True)
    head = next(i for i, line in enumerate(lines) if not line.startswith("#")) + 1
    return lines[:head], lines[head:]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """A simulated UR5 recording of the 6 s plan at 100 Hz (default noise, 16384-tick encoders)."""
    return _simulate(tmp_path_factory.mktemp("sim") / "ur5.csv", "--rate-hz", "100")


def _run_dir(folder: Path, recording: Path, rows: int | None = None, **meta) -> Path:
    """A run folder: the recording's first `rows` (all) and a run.json saying `meta`."""
    head, body = _split(recording)
    rows = len(body) if rows is None else rows
    folder.mkdir()
    (folder / "recording.csv").write_text("".join(head + body[:rows]))
    doc = {"plan": str(PLAN), "plan_sha256": "0" * 64, "status": "completed", "rate_hz": 100.0,
           "ticks_streamed": rows, "ticks_planned": len(body), "duration_s": 6.0} | meta  # fmt: skip
    (folder / "run.json").write_text(json.dumps({k: v for k, v in doc.items() if v is not None}))
    return folder / "recording.csv"


def _negated(recording: Path, out: Path, joint: str) -> Path:
    """The recording with one joint's effort column negated (its direction wrong in the servo map's efforts)."""
    head, body = _split(recording)
    cols = head[-1].strip().split(",")
    i = cols.index(f"tau:{joint}")
    rows = [line.strip().split(",") for line in body]
    for r in rows:
        r[i] = repr(-float(r[i]))
    out.write_text("".join(head) + "".join(",".join(r) + "\n" for r in rows))
    return out


def _identify(capsys, *argv: str) -> tuple[int, dict, str]:
    capsys.readouterr()
    code = main(["identify", "dynamic", *argv, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out) if code == 0 else {}, " ".join(out.err.split())


# 1. a whole stream then a stop -------------------------------------------------------------------------------------


def test_partial_status_counts_the_streamed_ticks_not_the_status():
    stopped = {"status": "stopped: KeyboardInterrupt", "ticks_streamed": 601, "ticks_planned": 601}
    assert partial_status(stopped) is None
    assert stopped_after_stream(stopped) == "stopped: KeyboardInterrupt, 601 of 601 ticks streamed"
    short = stopped | {"ticks_streamed": 600}
    assert partial_status(short) == "stopped: KeyboardInterrupt after 600 of 601 ticks"
    assert stopped_after_stream(short) is None
    assert stopped_after_stream({"status": "completed", "ticks_streamed": 601, "ticks_planned": 601}) is None
    assert partial_status({"status": "running"}) == "running"  # killed: nothing counted, still partial


def test_a_run_stopped_after_its_whole_stream_is_fitted_with_a_note(simulated, tmp_path, capsys):
    rec = _run_dir(tmp_path / "r", simulated, status="stopped: KeyboardInterrupt")
    code, out, err = _identify(capsys, str(rec))
    assert code == 0 and "partial_runs" not in out
    (after,) = out["stopped_after_stream"]
    assert after["file"] == str(rec) and "601 of 601 ticks" in after["status"]
    assert "its run stopped after streaming its whole plan" in err and "partial run" not in err


def test_without_its_ticks_counted_the_recording_coverage_decides(simulated, tmp_path, capsys):
    whole = _run_dir(tmp_path / "whole", simulated, status="stopped: KeyboardInterrupt", ticks_streamed=None)
    code, out, _ = _identify(capsys, str(whole))
    assert code == 0 and "stopped_after_stream" in out
    half = _run_dir(
        tmp_path / "half", simulated, 300, status="stopped: KeyboardInterrupt", ticks_streamed=None
    )
    code, _, err = _identify(capsys, str(half))
    assert code == 2 and "stopped before the plan's end" in err


# 2. late ticks only from the recorded stream -------------------------------------------------------------------


def _raw_joints(folder: Path, move_late_s: float = 0.0, stream_late_s: float = 0.0) -> None:
    """raw_joints.csv: 100 move ticks (the 51st late by move_late_s) then 601 streamed ones (the 301st late by
    stream_late_s), 100 Hz."""
    rows = ["t,phase,t_traj"]
    rows += [f"{-1 + k * 0.01 + (move_late_s if k == 50 else 0):.5f},move," for k in range(100)]
    t = np.arange(601) * 0.01
    t[300:] += stream_late_s
    rows += [f"{x:.5f},stream,{k / 100:.2f}" for k, x in enumerate(t)]
    (folder / "raw_joints.csv").write_text("\n".join(rows) + "\n")


def test_late_ticks_outside_the_stream_are_not_said(simulated, tmp_path, capsys):
    rec = _run_dir(tmp_path / "move", simulated, jitter={"late_max_ms": 51.0, "late_p99_ms": 1.0})
    _raw_joints(rec.parent, move_late_s=0.05)
    code, out, err = _identify(capsys, str(rec))
    assert code == 0 and "late_ticks" not in out and "late" not in err
    # 15 ms late (under 2 periods) in run.json: nothing read, nothing said
    rec = _run_dir(tmp_path / "l15", simulated, jitter={"late_max_ms": 15.0, "late_p99_ms": 1.0})
    _raw_joints(rec.parent)
    code, out, err = _identify(capsys, str(rec))
    assert code == 0 and "late_ticks" not in out and "late" not in err
    # without raw_joints.csv, run.json's lateness cannot be placed in the stream: nothing said
    rec = _run_dir(tmp_path / "noraw", simulated, jitter={"late_max_ms": 51.0, "late_p99_ms": 1.0})
    code, out, err = _identify(capsys, str(rec))
    assert code == 0 and "late_ticks" not in out and "late" not in err


def test_a_late_streamed_tick_is_said_with_the_streams_own_lateness(simulated, tmp_path, capsys):
    rec = _run_dir(tmp_path / "r", simulated, jitter={"late_max_ms": 51.0, "late_p99_ms": 1.0})
    _raw_joints(rec.parent, move_late_s=0.05, stream_late_s=0.04)
    code, out, err = _identify(capsys, str(rec))
    (late,) = out["late_ticks"]
    assert late["ticks_late"] == 1 and late["ticks_streamed"] == 601
    assert late["late_max_ms"] == pytest.approx(40, abs=0.1)
    assert "1 of its run's 601 streamed ticks came more than 2 periods late, the latest 40 ms" in err


# 3. the encoders' steps at higher cut-offs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "ticks", "cutoff"), [("500", "16384", "20"), ("500", "4096", "10"), ("100", "4096", "20")]
)
def test_honest_recordings_at_higher_cut_offs_are_not_warned(tmp_path, capsys, rate, ticks, cutoff):
    rec = _simulate(tmp_path / "s.csv", "--rate-hz", rate, "--encoder-ticks", ticks)
    code, out, err = _identify(capsys, str(rec), "--cutoff-hz", cutoff)
    assert code == 0
    assert "joint_misfit" not in out and "unexplained beyond its noise" not in err


def test_a_wrong_joint_is_still_warned_at_a_higher_cut_off(simulated, tmp_path, capsys):
    bad = _negated(simulated, tmp_path / "neg.csv", "elbow_joint")
    code, out, err = _identify(capsys, str(bad), "--cutoff-hz", "20")
    misfit = {m["joint"]: m for m in out["joint_misfit"]}
    assert "shoulder_lift_joint" in misfit and misfit["shoulder_lift_joint"]["share"] > 3 * MISFIT_WARN
    assert all(m["files"] == [str(bad)] for m in misfit.values())
    # 4. the message says what the check cannot see
    # judged at the recording's own cut-off (below 20 Hz), said so
    at = misfit["shoulder_lift_joint"]["cutoff_hz"]
    assert at < 20 and f"{bad}: judged at the recordings' own cut-off, {at:.3g} Hz, the fit leaves" in err
    assert "a flip the fitted parameters absorb leaves no trace" in err
    # 9. the numbers with their unit
    m = misfit["shoulder_lift_joint"]
    assert {"rmse_nm", "noise_nm", "measured_sd_nm"} <= set(m) and not {"rmse", "noise", "measured_sd"} & set(
        m
    )
    assert m["rmse_nm"] > m["noise_nm"] > 0 and m["measured_sd_nm"] > 0


def test_encoder_steps_are_read_from_the_angles_lattice():
    rng = np.random.default_rng(1)
    step = 2 * np.pi / 4096
    q = np.cumsum(rng.integers(-3, 4, size=(500, 2)), axis=0) * step
    q[:, 1] += rng.normal(0, 1e-5, 500)  # off the lattice: no step
    got = encoder_steps(q)
    assert got[0] == pytest.approx(step, rel=1e-6) and got[1] == 0


# 5. several recordings: the misfit names its file ----------------------------------------------------------------


def test_the_misfit_warning_names_the_recording_it_is_in(simulated, tmp_path, capsys):
    good = tmp_path / "good.csv"
    good.write_text(simulated.read_text())
    bad = _negated(simulated, tmp_path / "bad.csv", "elbow_joint")
    code, out, err = _identify(capsys, str(good), str(bad), "--no-average")
    assert code == 0 and out["joint_misfit"]
    assert all(m["files"] == [str(bad)] for m in out["joint_misfit"])
    assert f"(in {bad})" in err and str(good) not in err.split("unexplained")[0]
