"""A non-finite reading (angle, current, velocity) from the robot stops the run at once, as a link fault does: one
line naming the joint and the link, run.json `stopped: DeviceError: …`, the completed postures kept. Unchecked,
a NaN angle compared False with the tracking trip and the robot kept moving until a 2 × 10 s settle timeout."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import one_line_error

import drivers.framed as F
from drivers.dynamixel import DynamixelLink
from drivers.emulators.framed_controller import FramedControllerEmulator
from drivers.recorder import RunRecorder
from formats.plan import save_plan


@pytest.fixture
def after_first_posture(monkeypatch):
    """A list that gets an entry once the run has recorded its first completed posture."""
    done: list[int] = []
    original = RunRecorder.posture_done

    def posture_done(self, posture, *a, **k):
        original(self, posture, *a, **k)
        done.append(posture)

    monkeypatch.setattr(RunRecorder, "posture_done", posture_done)
    return done


def _run(capsys, plan, tmp_path, robot: str) -> tuple[str, dict, str]:
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    out = tmp_path / "run"
    argv = ["run", str(path), "--robot", robot, "--boards", "sim", "--physics", "kinematic",
            "--time-scale", "5", "--yes", "--out", str(out)]  # fmt: skip
    err = one_line_error(capsys, argv)
    meta = json.loads((out / "run.json").read_text())
    return err, meta, (out / "raw_joints.csv").read_text()


def test_framed_controller_sending_nan_stops_the_run_within_a_tick(capsys, plan, tmp_path, monkeypatch,
                                                                   after_first_posture):  # fmt: skip
    sent_nan = []

    def state(self, seq):  # a well-formed STATE frame whose theta2 is NaN, once a posture is completed
        q = self.plant.measured().copy()
        if after_first_posture:
            q[1] = np.nan
            sent_nan.append(seq)
        return F.encode(seq, F.STATE, F.pack_q(q) + bytes([self._flags()]))

    monkeypatch.setattr(FramedControllerEmulator, "_state", state)
    err, meta, raw = _run(capsys, plan, tmp_path, "sim:framed")
    assert "serial:" in err and "theta2" in err and "controller fault" in err
    assert meta["status"].startswith("stopped: DeviceError") and "theta2" in meta["status"]
    assert [r["posture"] for r in meta["report"]] == after_first_posture[:1]  # the completed posture kept
    # the first NaN reply stops the run: nothing further is asked, and no NaN row is recorded
    assert 1 <= len(sent_nan) <= 2, len(sent_nan)
    assert "nan" not in raw.lower() and len(raw.splitlines()) > 10


def test_dynamixel_reading_a_nan_current_stops_the_run_within_a_tick(capsys, plan, tmp_path, monkeypatch,
                                                                      after_first_posture):  # fmt: skip
    # the Dynamixel wire carries integers: a NaN can only come from the link's decoding, patched here
    original, bad = DynamixelLink.read, []

    def read(self):
        q = original(self)
        if after_first_posture:
            self.currents = self.currents.copy()
            self.currents[4] = np.nan
            bad.append(1)
        return q

    monkeypatch.setattr(DynamixelLink, "read", read)
    err, meta, raw = _run(capsys, plan, tmp_path, "sim")
    names = plan.joint_names
    assert "dxl:" in err and f"{names[4]} read a non-finite current" in err
    assert meta["status"].startswith("stopped: DeviceError") and names[4] in meta["status"]
    assert [r["posture"] for r in meta["report"]] == after_first_posture[:1]
    assert 1 <= len(bad) <= 2, len(bad)
    assert "nan" not in raw.lower()


def test_a_servo_without_a_current_sensor_reads_nan_by_design():
    """The link reads NaN currents for a servo whose model has no Present Current (its unit NaN): not a fault; a
    NaN from a servo that has one still is, named."""
    from types import SimpleNamespace

    from drivers.executor import check_readings
    from formats.errors import DeviceError

    link = SimpleNamespace(current_units_a=np.array([2.69e-3, np.nan]), port="loop")
    check_readings(link, ["a", "b"], angle=np.zeros(2), current=np.array([0.1, np.nan]))
    with pytest.raises(DeviceError, match="a read a non-finite current"):
        check_readings(link, ["a", "b"], angle=np.zeros(2), current=np.array([np.nan, np.nan]))
