"""The posture-plan file: round trip and clear errors for malformed or incompatible files."""

import json

import numpy as np
import pytest

from formats.errors import DataError
from formats.plan import FORMAT, VERSION, Placement, Plan, Posture, Transition, load_plan, save_plan
from robots.tulip import tulip

JOINT_NAMES = [f"theta{i}" for i in range(1, 13)]


def _plan() -> Plan:
    rng = np.random.default_rng(0)
    postures = [
        Posture(i, i // 2, rng.uniform(-0.3, 0.3, 12), 30.0, 60.0, (0.05, 0.1), 0.09, None) for i in range(4)
    ]
    return Plan(
        robot="tulip",
        base="right",
        joint_names=list(JOINT_NAMES),
        placements=[Placement(0, (0.0, 0.2, 0.1)), Placement(1, (0.1, 0.25, -0.2))],
        postures=postures,
        transitions=[Transition(0, 1, np.vstack([postures[0].q, postures[1].q]), 0.01, 0.085)],
        kappa={"right": 250.0, "left": 250.0},
        solver={"backend": "casadi"},
        seed=3,
        settings={"margin": 0.08, "required_margin": 0.08},
    )


def _doc(tmp_path):
    path = tmp_path / "p.json"
    save_plan(_plan(), path)
    return path, json.loads(path.read_text())


def test_round_trip(tmp_path):
    plan = _plan()
    path = tmp_path / "p.json"
    save_plan(plan, path)
    back = load_plan(path, tulip())
    assert back.joint_names == JOINT_NAMES
    np.testing.assert_array_equal(back.q, plan.q)
    assert back.placement(1).left_foot == (0.1, 0.25, -0.2)
    assert back.transition(0, 1).q.shape == (2, 12) and not back.transition(0, 1).lifted
    assert "lifted" not in json.loads(path.read_text())["transitions"][0]  # absent = on the ground
    plan.transitions[0].lifted = True
    save_plan(plan, path)
    assert load_plan(path, tulip()).transition(0, 1).lifted
    assert back.kappa == {"right": 250.0, "left": 250.0} and back.seed == 3
    doc = json.loads(path.read_text())
    assert doc["format"] == FORMAT and doc["version"] == VERSION


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(format="something-else"), "not a posture plan"),
        (lambda d: d.update(version=99), "version 99 is not supported"),
        (lambda d: d["postures"][1]["q"].pop(), "postures[1].q"),
        (lambda d: d["postures"][2].pop("hold_s"), "missing field 'hold_s'"),
        (lambda d: d.pop("joint_names"), "missing field 'joint_names'"),
        (lambda d: d["postures"][0].update(placement=7), "placement 7 is not defined"),
        (lambda d: d["postures"][0]["q"].__setitem__(3, "x"), "expected a number"),
        (lambda d: d["transitions"][0].update(to=42), "unknown posture 42"),
        (lambda d: d["transitions"][0].update(lifted="yes"), "transitions[0].lifted: expected true or false"),
    ],
)
def test_malformed(tmp_path, edit, message):
    path, doc = _doc(tmp_path)
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        load_plan(path)


def test_nan_and_not_json(tmp_path):
    path, doc = _doc(tmp_path)
    text = path.read_text().replace(str(doc["postures"][0]["q"][0]), "NaN", 1)
    path.write_text(text)
    with pytest.raises(DataError, match="finite"):
        load_plan(path)
    path.write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        load_plan(path)
    path.write_text("[1, 2]")
    with pytest.raises(DataError, match="not a posture plan"):
        load_plan(path)


def test_incompatible_robot(tmp_path):
    path, doc = _doc(tmp_path)
    doc["joint_names"] = [f"j{i}" for i in range(12)]
    path.write_text(json.dumps(doc))
    load_plan(path)  # structurally fine
    with pytest.raises(DataError, match="joint names"):
        load_plan(path, tulip())
    doc["robot"] = "atlas"
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError, match="robot 'atlas'"):
        load_plan(path, tulip())


def test_refuses_to_write_nan(tmp_path):
    plan = _plan()
    plan.postures[0].q[0] = np.nan
    with pytest.raises(DataError):
        save_plan(plan, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()


def test_cli_errors_and_show(tmp_path, capsys):
    from poise.cli import main

    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "poise.posture-plan", "version": 1, "robot": "tulip"}')
    assert main(["plan", "check", str(bad)]) == 2
    assert "missing field 'base'" in capsys.readouterr().err
    assert main(["plan", "check", str(tmp_path / "missing.json")]) == 2
    good = tmp_path / "p.json"
    save_plan(_plan(), good)
    fig = tmp_path / "p.png"
    assert main(["plan", "show", str(good), "--out", str(fig)]) == 0
    assert fig.stat().st_size > 10_000
    # The synthetic plan's random postures are not feasible: check must say so with exit 1.
    assert main(["plan", "check", str(good), "--json"]) == 1
