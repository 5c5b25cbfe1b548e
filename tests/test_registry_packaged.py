"""Robots named from another package's files (`robots.registry.PACKAGED`): `ur5` is example-robot-data's UR5 —
the same model as its URDF given by path — and a plan designed for the name keeps the name (which any machine
resolves), not this machine's path; without the package, the error names what to install."""

from __future__ import annotations

import json
import sysconfig

import numpy as np
import pytest
from conftest import UR5

from formats.errors import DataError
from poise.cli import main
from robots import registry
from robots.registry import get_model, is_named, packaged_file


def test_ur5_is_example_robot_datas_urdf():
    named, by_path = get_model("UR5"), get_model(str(UR5))
    assert packaged_file("ur5").samefile(UR5)
    assert named.joint_names == by_path.joint_names and named.name == "ur5"
    np.testing.assert_array_equal(named.lower, by_path.lower)
    assert is_named("ur5") and is_named("tulip") and not is_named(str(UR5))


def test_a_plan_for_the_name_keeps_the_name(tmp_path, capsys):
    out = tmp_path / "u.json"
    assert main(["plan", "trajectory", "ur5", "--out", str(out), "--duration", "4", "--period", "4",
                 "--harmonics", "2", "--samples", "20", "--max-iter", "5", "--no-self-collision"]) in (0, 1)  # fmt: skip
    doc = json.loads(out.read_text())
    assert doc["robot"] == "ur5" and doc.get("robot_source") is None
    capsys.readouterr()
    assert main(["plan", "check", str(out), "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["grid_points"] > 0  # read back by the name


def test_a_missing_package_is_named(monkeypatch, capsys):
    paths = dict(sysconfig.get_paths())
    monkeypatch.setattr(registry.sysconfig, "get_paths", lambda: {**paths, "purelib": "/nonexistent"})
    with pytest.raises(
        DataError, match=r"robot 'ur5' comes from example-robot-data: `pip install example-robot"
    ):
        get_model("ur5")
    assert main(["model", "show", "tulip-x"]) == 2
    assert "from other packages: ur5" in capsys.readouterr().err
