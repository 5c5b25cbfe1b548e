"""Doggy's excitation plan: designed in trajectories/, a documented file a driver can stream, validated on read,
and the simulated calibration runs the very plan file `poise plan doggy` writes."""

import json

import numpy as np
import pytest

from formats.doggy_plan import FORMAT, load_doggy_plan, pwm_program, save_doggy_plan
from formats.errors import DataError
from poise.cli import main
from robots import doggy
from trajectories.doggy_excitation import make_plan

RANGE = doggy.robot().setpoint_range  # the description's, which every plan is held to


def test_plan_stays_in_the_descriptions_set_point_range_and_round_trips(tmp_path):
    plan = make_plan(20.0, seed=3)
    lim = np.array(doggy.robot().setpoint_range)
    assert all(np.all(np.abs(s.target) <= lim) for s in plan.segments)
    assert plan.rate == doggy.robot().rate_hz
    path = tmp_path / "p.json"
    save_doggy_plan(plan, path, setpoint_range=RANGE)
    assert json.loads(path.read_text())["format"] == FORMAT
    back = load_doggy_plan(path, setpoint_range=RANGE)
    assert back == plan
    t = np.arange(int(plan.duration * plan.rate)) / plan.rate
    target, ff, umax = pwm_program(back, t)
    assert umax.max() == 0.9 and np.abs(ff).max() <= 0.5 + 1e-12 and np.all(umax[t < 1.0 - 1e-9] == 0)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(format="poise pwm plan"), "not a Doggy excitation plan"),
        (lambda d: d.update(kp=-1.0), "kp"),
        (lambda d: d.update(segments=[]), "non-empty"),
        (lambda d: d["segments"][0].update(kind="spin"), "segments[0].kind"),
        (lambda d: d["segments"][1].update(u_max=1.5), "segments[1].u_max"),
        (lambda d: d["segments"][1].update(target=[0.1, 0.2]), "segments[1].target"),
        (lambda d: d["segments"][1].update(duration=float("nan")), "segments[1].duration"),
    ],
)
def test_malformed_plans_are_refused_with_the_field_named(tmp_path, edit, message):
    path = tmp_path / "p.json"
    save_doggy_plan(make_plan(10.0, seed=1), path, setpoint_range=RANGE)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_doggy_plan(path, setpoint_range=RANGE)


def test_cli_plan_doggy_then_simulated_calibration_runs_that_plan(tmp_path, capsys):
    plan = tmp_path / "doggy.json"
    assert main(["plan", "doggy", "--duration", "2", "--seed", "4", "--out", str(plan), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["duration_s"] == pytest.approx(2.0) and summary["segments"]["zero"] == 1
    rec = tmp_path / "rec.csv"
    argv = ["solve", "doggy", "--simulate", "2", "--plan", str(plan), "--save-recording", str(rec),
            "--out", str(tmp_path / "r.json"), "--max-iter", "2", "--json"]  # fmt: skip
    assert main(argv) in (0, 1)
    from formats.doggy_recording import read_csv

    r = read_csv(rec)
    assert np.abs(r.u[r.t < 0.4 - 1e-3]).max() == 0.0  # the plan's zero window (0.2 × 2 s)
    capsys.readouterr()
    short = ["solve", "doggy", "--simulate", "1.5", "--plan", str(plan), "--out", str(tmp_path / "r1.json")]
    assert main(short) == 2  # the plan lasts 2 s, not 1.5
    assert "--plan lasts 2 s" in capsys.readouterr().err
