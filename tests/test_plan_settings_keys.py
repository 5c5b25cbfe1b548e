"""A plan's settings keys: what poise writes and stores loads without a warning; a key no code reads (a misspelt
margin, a newer version's knob) loads with one line naming it and the closest key poise knows."""

import json
from dataclasses import fields
from pathlib import Path

import numpy as np

from design.augment import augment_plan
from design.planner import build_plan
from design.problems import Settings
from design.sampler import sample_posture_set
from formats import plan as posture_format
from formats import trajectory_plan as trajectory_format
from formats.plan import (
    Placement,
    Plan,
    Posture,
    is_posture_plan,
    load_plan,
    plan_required_margin,
    save_plan,
)
from formats.trajectory_plan import is_trajectory_plan, load_trajectory_plan
from poise.cli import main
from trajectories.excitation import ExcitationSettings

DATA = Path(__file__).parent / "data"


def _hand_plan(model, settings: dict) -> Plan:
    q = np.zeros(len(model.joint_names))
    return Plan(model.name, "right", list(model.joint_names), [Placement(0, (0.0, 0.2, 0.0))],
                [Posture(0, 0, q, 1.0, 2.0)], settings=settings)  # fmt: skip


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "settings key" in line]


def test_the_key_lists_hold_every_design_setting_written_whole():
    """`plan postures` writes `Settings` and `plan trajectory` `ExcitationSettings` whole: a field added to either
    without its key in the format's list would warn on every plan written from then on."""
    assert {f.name for f in fields(Settings)} | {"required_margin"} <= posture_format.SETTINGS_KEYS
    assert {f.name for f in fields(ExcitationSettings)} <= trajectory_format.SETTINGS_KEYS


def test_a_misspelt_margin_warns_naming_the_margin_and_still_loads(model, tmp_path, capsys):
    path = tmp_path / "hand.json"
    save_plan(_hand_plan(model, {"min_margin": 0.08, "load_share": 0.2}), path)
    plan = load_plan(path)
    assert plan_required_margin(plan) == 0.0  # what the warning is about: the 0.08 is read by nothing
    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 1, lines
    assert str(path) in lines[0] and "'min_margin'" in lines[0]
    assert "did you mean 'margin'" in lines[0] and "safety bound" in lines[0]


def test_plan_check_prints_the_warning_once(model, tmp_path, capsys):
    path = tmp_path / "check.json"
    save_plan(_hand_plan(model, {"required_margins": 0.05}), path)
    main(["plan", "check", str(path), "--json"])
    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 1 and "did you mean 'required_margin'" in lines[0], lines


def test_a_newer_versions_key_warns_without_a_guess_and_loads(tmp_path, capsys):
    doc = json.loads((DATA / "ur5_6s.json").read_text(encoding="utf-8"))
    doc["settings"] |= {"quantum_flux": 3, "zmp_marign": 0.05}
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    plan = load_trajectory_plan(path)
    assert plan.settings["quantum_flux"] == 3
    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 2, lines
    flux, zmp = lines
    assert "'quantum_flux'" in flux and "did you mean" not in flux
    assert "'zmp_marign'" in zmp and "did you mean 'zmp_margin', a safety bound" in zmp


def test_every_stored_plan_loads_without_a_warning(capsys):
    plans = [p for p in sorted(DATA.rglob("*.json")) if is_posture_plan(p) or is_trajectory_plan(p)]
    assert len(plans) >= 20
    for p in plans:
        (load_plan if is_posture_plan(p) else load_trajectory_plan)(p)
    assert not _warnings(capsys.readouterr().err)


def test_plans_the_code_writes_load_without_a_warning(tulip, tmp_path, capsys):
    """A posture plan as `plan postures` builds it (`build_plan`, here from sampled postures: no optimiser),
    augmented by `plan augment`'s `augment_plan`, and a trajectory plan `plan trajectory` writes, each read back."""
    s = Settings(problem="free-com", margin=0.06, uncertainty=0.003)
    start = sample_posture_set(tulip, 15, 3, np.random.default_rng(4), margin=0.09)
    plan = build_plan(tulip, start, s, seed=4, move_s=30, hold_s=60, solver={}, transitions=False)
    augmented = augment_plan(tulip, plan, 1, 2, 5).plan
    assert "augmented" in augmented.settings and "ellipsoid" in plan.settings
    arm = tmp_path / "t.json"
    argv = ["plan", "trajectory", "icub-right-arm", "--duration", "2", "--period", "2", "--harmonics", "2",
            "--samples", "40", "--max-iter", "2", "--starts", "1", "--no-self-collision", "--out", str(arm)]  # fmt: skip
    assert main(argv) in (0, 1)  # a 2-iteration design may fail its own checks: its file is what is read here
    for k, p in enumerate((plan, augmented)):
        save_plan(p, tmp_path / f"{k}.json")
        load_plan(tmp_path / f"{k}.json")
    load_trajectory_plan(arm)
    assert not _warnings(capsys.readouterr().err)
