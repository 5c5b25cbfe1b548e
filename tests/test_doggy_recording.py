"""Doggy recording CSV: round trip, and clear DataErrors (CLI exit 2) for malformed files."""

import numpy as np
import pytest

from formats.doggy_recording import COLUMNS, read_csv, write_csv
from formats.errors import DataError
from identify.doggy_sim import SimConfig, simulate
from poise.cli import main
from trajectories.doggy_excitation import make_plan


@pytest.fixture(scope="module")
def rec():
    r = simulate(SimConfig(duration=0.5, seed=1, theta0=(0.1, -0.2, 0.3)), make_plan(0.5, 1)).recording
    return r


def test_round_trip(rec, tmp_path):
    path = tmp_path / "rec.csv"
    write_csv(rec, path)
    back = read_csv(path)
    for name in ("t", "u", "theta", "gyro1", "gyro2", "theta0"):
        np.testing.assert_allclose(getattr(back, name), getattr(rec, name), rtol=1e-8, atol=1e-12)
    assert back.zero_command_samples() == rec.zero_command_samples()


def _write(tmp_path, rec, mutate):
    path = tmp_path / "bad.csv"
    write_csv(rec, path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(mutate(lines)) + "\n")
    return path


def _header_index(lines):
    return next(i for i, line in enumerate(lines) if line.startswith("t,"))


def test_missing_column(rec, tmp_path):
    def drop_w2z(lines):
        h = _header_index(lines)
        j = COLUMNS.index("w2z")
        return lines[:h] + [",".join(c for k, c in enumerate(row.split(",")) if k != j) for row in lines[h:]]

    with pytest.raises(DataError, match="missing column.*w2z"):
        read_csv(_write(tmp_path, rec, drop_w2z))


def test_non_monotonic_time(rec, tmp_path):
    def swap(lines):
        h = _header_index(lines)
        lines[h + 10], lines[h + 11] = lines[h + 11], lines[h + 10]
        return lines

    with pytest.raises(DataError, match="not strictly increasing"):
        read_csv(_write(tmp_path, rec, swap))


def test_nan_value(rec, tmp_path):
    def nan(lines):
        h = _header_index(lines)
        parts = lines[h + 20].split(",")
        parts[COLUMNS.index("w1y")] = "nan"
        lines[h + 20] = ",".join(parts)
        return lines

    with pytest.raises(DataError, match="NaN.*gyro1 at sample 19"):
        read_csv(_write(tmp_path, rec, nan))


def test_garbage_number(rec, tmp_path):
    def junk(lines):
        h = _header_index(lines)
        lines[h + 5] = lines[h + 5].replace(",", ",abc", 1)
        return lines

    with pytest.raises(DataError):
        read_csv(_write(tmp_path, rec, junk))


def test_cli_reports_malformed_recording_without_traceback(rec, tmp_path, capsys):
    def swap(lines):
        h = _header_index(lines)
        lines[h + 3], lines[h + 4] = lines[h + 4], lines[h + 3]
        return lines

    path = _write(tmp_path, rec, swap)
    code = main(["solve", "doggy", "--data", str(path), "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert "not strictly increasing" in err and "Traceback" not in err


def test_cli_solves_a_recording(rec, tmp_path):
    sim = simulate(SimConfig(duration=2.0, seed=4), make_plan(2.0, 4))
    path = tmp_path / "rec.csv"
    write_csv(sim.recording, path)
    out = tmp_path / "r.json"
    assert main(["solve", "doggy", "--data", str(path), "--out", str(out), "--max-iter", "30", "--json"]) == 0
    import json

    rep = json.loads(out.read_text())
    assert rep["samples"] == sim.recording.n and rep["unknowns"] == 12 * sim.recording.n + 24
    assert {r["name"] for r in rep["parameters"]} >= {"k_pwm", "k_s3", "R1 angle from nominal"}
    assert rep["cost"] < rep["initial_cost"]
