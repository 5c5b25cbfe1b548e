"""Validation at the boundaries: argument types, unit plausibility, unit round trips, full disks, bounded loops."""

from __future__ import annotations

import argparse
import errno
import math
import os

import numpy as np
import pytest

from formats.doggy_recording import DoggyRecording, read_csv, write_csv
from formats.dynamic_recording import DynamicRecording, read_dynamic_recording, write_dynamic_recording
from formats.errors import DataError, DeviceError, PoiseError
from formats.parameter_set import save_parameter_set
from formats.plan import Placement, Plan, Posture, save_plan
from formats.static_recording import StaticRecording, read_recording, write_recording
from formats.trajectory_plan import TrajectoryPlan, save_trajectory_plan
from poise import argtypes as at
from poise.cli import main


def _recording(model) -> StaticRecording:
    rng = np.random.default_rng(3)
    m = 12
    return StaticRecording(
        "tulip", "right", list(model.joint_names), np.arange(m), np.arange(m) // 3,
        rng.uniform(-0.6, 0.6, (m, model.nq)), rng.uniform(-0.08, 0.08, (m, 2)),
        cop_sd=rng.uniform(1e-4, 1e-3, (m, 2)), meta={"operator": "ann"},
    )  # fmt: skip


def _in_units(path, rec: StaticRecording, aunit: str, lunit: str) -> None:
    """Write `rec` the way an external logger would, in the given units."""
    ka = 180 / math.pi if aunit == "deg" else 1.0
    kl = 1000.0 if lunit == "mm" else 1.0
    head = ["# poise static recording v1", "# robot: tulip", "# base: right",
            f"# angle_unit: {aunit}", f"# length_unit: {lunit}", "# operator: ann",
            ",".join(["posture", "placement", *rec.joint_names, "cop_x", "cop_y", "cop_sd_x", "cop_sd_y"])]  # fmt: skip
    rows = [
        ",".join([str(rec.posture[i]), str(rec.placement[i])]
                 + [repr(float(v) * ka) for v in rec.q[i]]
                 + [repr(float(v) * kl) for v in (*rec.cop[i], *rec.cop_sd[i])])
        for i in range(len(rec))
    ]  # fmt: skip
    path.write_text("\n".join(head + rows) + "\n")


@pytest.mark.parametrize("aunit", ["rad", "deg"])
@pytest.mark.parametrize("lunit", ["m", "mm"])
def test_static_recording_round_trip_in_every_unit(model, tmp_path, aunit, lunit):
    rec = _recording(model)
    src, out = tmp_path / "src.csv", tmp_path / "out.csv"
    _in_units(src, rec, aunit, lunit)
    first = read_recording(src)
    np.testing.assert_allclose(first.q, rec.q, rtol=1e-12)
    np.testing.assert_allclose(first.cop, rec.cop, rtol=1e-12)
    write_recording(out, first)  # the stored meta says deg/mm; the written numbers are rad/m
    text = out.read_text()
    assert text.count("# angle_unit:") == 1 and "# angle_unit: rad" in text
    assert text.count("# length_unit:") == 1 and "# length_unit: m" in text
    assert "# operator: ann" in text  # other metadata survives
    back = read_recording(out)
    np.testing.assert_allclose(back.q, rec.q, rtol=1e-12)
    np.testing.assert_allclose(back.cop, rec.cop, rtol=1e-12)
    np.testing.assert_allclose(back.cop_sd, rec.cop_sd, rtol=1e-12)


def test_conflicting_unit_lines_are_refused(model, tmp_path):
    path = tmp_path / "r.csv"
    write_recording(path, _recording(model))
    path.write_text(path.read_text().replace("# length_unit: m\n", "# length_unit: m\n# angle_unit: deg\n"))
    with pytest.raises(DataError, match="conflicting '# angle_unit:' lines"):
        read_recording(path)


def test_units_contradicted_by_the_numbers(model, tmp_path):
    rec = _recording(model)
    path = tmp_path / "r.csv"
    _in_units(path, rec, "rad", "m")
    text = path.read_text()
    path.write_text(text.replace("# angle_unit: rad", "# angle_unit: deg"))
    with pytest.raises(DataError, match="look like radians"):
        read_recording(path)
    path.write_text(text.replace("# length_unit: m", "# length_unit: mm"))
    with pytest.raises(DataError, match="look like metres"):
        read_recording(path)
    _in_units(path, rec, "deg", "mm")
    text = path.read_text()
    path.write_text(text.replace("# angle_unit: deg", "# angle_unit: rad"))
    with pytest.raises(DataError, match="look like degrees"):
        read_recording(path)
    path.write_text(text.replace("# length_unit: mm", "# length_unit: m"))
    with pytest.raises(DataError, match="look like mm"):
        read_recording(path)


def test_static_recording_base_comes_from_the_model(model, tmp_path):
    rec = _recording(model)
    rec.base = "middle"
    path = tmp_path / "r.csv"
    write_recording(path, rec)
    with pytest.raises(DataError, match=r"base 'middle' .*allowed: left, right"):
        read_recording(path, model.joint_names, bases=model.bases)
    assert read_recording(path).base == "middle"  # without a model there is nothing to check against


def test_dynamic_recording_in_degrees(tmp_path):
    t = np.arange(40) * 0.01
    q = np.column_stack([np.sin(t), 0.5 * np.cos(t)])
    rec = DynamicRecording("r", "base", ["a", "b"], t, q, np.zeros((40, 2)))
    path = tmp_path / "d.csv"
    write_dynamic_recording(rec, path)
    text = path.read_text()
    path.write_text(text.replace("# angle_unit: rad", "# angle_unit: deg"))
    with pytest.raises(DataError, match="look like radians"):
        read_dynamic_recording(path)
    deg = text.splitlines()
    body = [",".join([r.split(",")[0]] + [repr(float(v) * 180 / math.pi) for v in r.split(",")[1:3]] + r.split(",")[3:])
            for r in deg[5:]]  # fmt: skip
    path.write_text("\n".join([*deg[:5], *body]).replace("# angle_unit: rad", "# angle_unit: deg") + "\n")
    np.testing.assert_allclose(read_dynamic_recording(path).q, q, rtol=1e-8)


def test_a_recording_with_a_header_only_says_it_holds_no_samples(tmp_path, capsys):
    t = np.arange(20) * 0.01
    rec = DynamicRecording("r", "base", ["a"], t, np.zeros((20, 1)), np.zeros((20, 1)))
    path = tmp_path / "d.csv"
    write_dynamic_recording(rec, path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[: lines.index(next(x for x in lines if x.startswith("t_s"))) + 1]) + "\n")
    with pytest.raises(DataError, match="no samples"):
        read_dynamic_recording(path)


@pytest.mark.parametrize("dt, ok", [(1e-3, True), (2e-3, True), (1.0, False), (1e-6, False)])
def test_doggy_time_stamps_must_be_seconds(tmp_path, dt, ok):
    n = 100
    z = np.zeros((n, 3))
    path = tmp_path / "d.csv"
    write_csv(DoggyRecording(np.arange(n) * dt, z, z, z, z, np.zeros(3)), path)
    if ok:
        assert read_csv(path).n == n
    else:
        with pytest.raises(DataError, match="implausible"):
            read_csv(path)


def _plan(hold_s: float = 6.0) -> Plan:
    names = [f"theta{i}" for i in range(1, 13)]
    postures = [Posture(i, 0, np.full(12, 0.1 * i), 3.0, hold_s, (0.0, 0.1), 0.09) for i in range(2)]
    return Plan("tulip", "right", names, [Placement(0, (0.0, 0.2, 0.0))], postures)


def test_a_plan_that_cannot_be_read_is_never_written(tmp_path):
    with pytest.raises(DataError, match="hold_s > 0"):
        save_plan(_plan(hold_s=0.0), tmp_path / "p.json")
    assert not list(tmp_path.iterdir())


@pytest.fixture
def full_disk(monkeypatch):
    """os.write fails with ENOSPC for temp files (what a full disk does); everything else writes normally."""
    real = os.write

    def write(fd, data):
        if ".tmp" in os.path.basename(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


def _writers(model):
    t = np.arange(20) * 1e-3
    z = np.zeros((20, 3))
    return {
        "plan": lambda p: save_plan(_plan(), p),
        "static recording": lambda p: write_recording(p, _recording(model)),
        "parameter set": lambda p: save_parameter_set(model.params["sim"], p),
        "doggy recording": lambda p: write_csv(DoggyRecording(t, z, z, z, z, np.zeros(3)), p),
        "dynamic recording": lambda p: write_dynamic_recording(
            DynamicRecording("r", "b", ["a"], t, z[:, :1], z[:, :1]), p
        ),
        "trajectory plan": lambda p: save_trajectory_plan(TrajectoryPlan("r", "b", ["a"], {"kind": "x"}), p),
    }


@pytest.mark.parametrize(
    "kind",
    ["plan", "static recording", "parameter set", "doggy recording", "dynamic recording", "trajectory plan"],
)
def test_full_disk_leaves_the_old_file_and_no_partial_one(model, tmp_path, full_disk, kind):
    path = tmp_path / "out.dat"
    path.write_text("previous complete file\n")
    with pytest.raises(DataError, match="No space left on device"):
        _writers(model)[kind](path)
    assert path.read_text() == "previous complete file\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.dat"]


def test_full_disk_from_the_command_line(tmp_path, full_disk, capsys):
    out = tmp_path / "r.csv"
    out.write_text("previous\n")
    assert main(["simulate", "static", "tulip", "--postures", "2", "--out", str(out), "--force"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0]
    assert out.read_text() == "previous\n" and len(list(tmp_path.iterdir())) == 1


def test_force_overwrites(tmp_path, capsys):
    out = tmp_path / "r.csv"
    out.write_text("previous\n")
    argv = ["simulate", "static", "tulip", "--postures", "2", "--out", str(out)]
    assert main(argv) == 2 and "use --force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    assert len(read_recording(out)) == 2


@pytest.mark.parametrize(
    "parse, text, value",
    [
        (at.number(0.0, lo_open=True), "0.5", 0.5),
        (at.number(-1.0, 1.0), "-1", -1.0),
        (at.seed, "0", 0),
        (at.count, "3", 3),
        (at.robot_endpoint, "sim", "sim"),
        (at.robot_endpoint, "sim:framed", "sim:framed"),
        (at.robot_endpoint, "dxl:/dev/ttyUSB0?baud=57600", "dxl:/dev/ttyUSB0?baud=57600"),
        (at.robot_endpoint, "serial:socket://localhost:5000", "serial:socket://localhost:5000"),
        (at.boards_endpoint, "bt:00:1E:35:AA:BB:01,00:1E:35:CC:DD:02?mode=34&fit=linear",
         "bt:00:1E:35:AA:BB:01,00:1E:35:CC:DD:02?mode=34&fit=linear"),
        (at.boards_endpoint, "evdev:/dev/input/event3,/dev/input/event4", "evdev:/dev/input/event3,/dev/input/event4"),
        (at.scheduler_address, "tcp://10.0.0.2:8786", "tcp://10.0.0.2:8786"),
        (at.scheduler_address, "localhost:8786", "localhost:8786"),
        (at.image_file, "fig.PDF", "fig.PDF"),
    ],
)  # fmt: skip
def test_argument_types_accept_good_values(parse, text, value):
    assert parse(text) == value


@pytest.mark.parametrize(
    "parse, text",
    [
        (at.number(0.0, lo_open=True), "0"),
        (at.number(0.0, lo_open=True), "nan"),
        (at.number(), "inf"),
        (at.number(), "-inf"),
        (at.number(-1.0, 1.0), "1.5"),
        (at.seed, "-1"),
        (at.seed, "1.0"),
        (at.count, "0"),
        (at.robot_endpoint, "sim:other"),
        (at.robot_endpoint, "dxl:/dev/ttyUSB0?baud=fast"),
        (at.robot_endpoint, "dxl:/dev/ttyUSB0?speed=1"),
        (at.boards_endpoint, "sim:x"),
        (at.boards_endpoint, "serial:a,b?baud=1e6"),
        (at.scheduler_address, "tcp://host"),
        (at.scheduler_address, "http://host:80"),
        (at.image_file, "fig.xyz"),
        (at.out_file, " "),
    ],
)
def test_argument_types_refuse_bad_values(parse, text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse(text)


def test_unreachable_feet_gap_fails_instead_of_hanging(model):
    from design.sampler import sample_placement

    with pytest.raises(PoiseError, match="feet-gap"):
        sample_placement(model, np.random.default_rng(0), feet_gap=5.0)
    assert sample_placement(model, np.random.default_rng(0), feet_gap=0.1).shape == (3,)


def test_unreachable_scheduler_is_a_device_error(monkeypatch):
    pytest.importorskip("distributed")
    import design.multistart as ms

    monkeypatch.setattr(ms, "SCHEDULER_TIMEOUT_S", 1)
    with pytest.raises(DeviceError, match="cannot reach the Dask scheduler 'tcp://127.0.0.1:9'"):
        ms.connect_scheduler("tcp://127.0.0.1:9")


def test_usage_errors_are_one_line(capsys):
    assert main(["plan", "postures", "tulip"]) == 2  # --out missing
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("poise: error: plan postures: the following arguments")
    assert main(["no-such-command"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert main(["--help"]) == 0
    assert "COMMAND" in capsys.readouterr().out


def test_nan_recordings_are_never_written(model, tmp_path):
    rec = _recording(model)
    rec.cop[3, 1] = np.nan
    with pytest.raises(DataError, match="NaN"):
        write_recording(tmp_path / "r.csv", rec)
    assert not list(tmp_path.iterdir())


def test_full_disk_while_drawing_a_figure(tmp_path, monkeypatch, capsys):
    import matplotlib.figure

    def savefig(self, fname, **kw):  # half a PNG reaches the disk, then the disk is full
        with open(fname, "wb") as fh:
            fh.write(b"\x89PNG\r\n\x1a\n partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    plan, fig = tmp_path / "p.json", tmp_path / "p.png"
    save_plan(_plan(), plan)
    fig.write_bytes(b"old figure")
    assert main(["plan", "show", str(plan), "--out", str(fig), "--force"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0]
    assert fig.read_bytes() == b"old figure"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "p.png"]
