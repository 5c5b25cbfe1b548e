"""Rotor inertia reflected at the joints ("armature"): MuJoCo's `dof_armature` in the twin's efforts, estimated by
`identify dynamic --armature` where the base parameters do not already hold it, grouped into them where they do.

The arm is the UR5 of example-robot-data on hand-written 10 s Fourier motions (as tests/test_dynamic_outputs.py),
its efforts from MuJoCo's inverse dynamics with rotor inertia 0.05–0.2 kg·m² per joint, viscous and Coulomb
friction and white effort noise. Its first two axes are perpendicular (shoulder pan vertical, shoulder lift
horizontal), so a link inertia about each acts on that joint's own row alone, as its rotor inertia does: those two
are grouped; the other four are estimated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import UR5

from drivers.emulators.mujoco_arm import ArmImperfections, arm_efforts
from formats.dynamic_recording import DynamicRecording, write_dynamic_recording
from formats.errors import DataError
from formats.trajectory_plan import TrajectoryPlan, save_trajectory_plan
from identify.dynamic import DynamicEstimator, armature_columns, armature_grouping
from identify.forecast import forecast_dynamic
from poise.cli import main
from robots.base_params import RegressorSpec, cached_dynamic_base, evaluate, random_states
from robots.params_io import perturbed
from robots.registry import get_model
from trajectories.fourier import FourierTrajectory
from trajectories.plan import plan_recording
from trajectories.verify import sample_grid

Q0 = np.array([0.0, -1.2, 1.2, -1.5, -1.5, 0.0])  # rad: the arm bent, clear of the joint limits
RATE_HZ = 200.0
IA = np.array([0.2, 0.15, 0.1, 0.05, 0.08, 0.12])  # kg·m², the true rotor inertia per joint
NOISE = 0.05  # N·m effort noise on every joint
TWIN = ArmImperfections(viscous=0.3, coulomb=0.8, effort_noise=NOISE, armature=IA)
GROUPED = {"shoulder_pan_joint", "shoulder_lift_joint"}


def _motion(seed: int) -> FourierTrajectory:
    """Period 5 s, twice, three harmonics of random coefficients."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0.0, 0.5, (6, 3)), rng.normal(0.0, 0.5, (6, 3))
    return FourierTrajectory(5.0, 10.0, Q0, a, b)


def _recording(model, truth, traj, seed: int) -> DynamicRecording:
    t = sample_grid(traj, 1.0 / RATE_HZ)
    q, qd, qdd = traj.sample(t)
    qm, tau = arm_efforts(model, truth, q, qd, qdd, TWIN, np.random.default_rng(seed))
    return DynamicRecording(
        model.name, model.root, list(model.joint_names), t, qm, tau, meta={"robot_source": str(UR5)}
    )


@pytest.fixture(scope="module")
def arm():
    """The model, its true parameters, the fit and validation recordings, and the fits with and without
    rotor inertia."""
    model = get_model(str(UR5))
    truth = perturbed(model.parameter_set("urdf"), np.random.default_rng(7), 0.1, 0.01, inertia_rel=0.2)
    rec = _recording(model, truth, _motion(3), seed=1)
    val = _recording(model, truth, _motion(4), seed=2)
    on = DynamicEstimator(model, armature=True).fit(rec)
    off = DynamicEstimator(model).fit(rec)
    return model, truth, rec, val, on, off


def test_the_twin_adds_rotor_inertia_times_acceleration_on_each_joint(arm):
    """MuJoCo's armature, not poise's model, makes the term: the efforts with it minus those without are Ia·q̈."""
    model, truth = arm[:2]
    rng = np.random.default_rng(0)
    q, qd, qdd = (rng.uniform(-1, 1, (5, model.nq)) for _ in range(3))
    _, plain = arm_efforts(model, truth, q, qd, qdd)
    _, with_rotor = arm_efforts(model, truth, q, qd, qdd, ArmImperfections(armature=IA))
    assert np.abs(with_rotor - plain - IA * qdd).max() < 1e-9
    with pytest.raises(DataError, match="armature"):
        arm_efforts(model, truth, q, qd, qdd, ArmImperfections(armature=np.ones(3)))


def test_rotor_inertia_and_base_parameters_within_three_se_of_the_truth(arm):
    """Each estimated Ia within 3 SE of the twin's; the base parameters within 3 SE of the truth's, the grouped
    joints' rotor inertia added to the base parameters that hold it (without it those miss by many SE)."""
    model, truth, _, _, on, _ = arm
    fit = on.fit_
    estimated = [model.joint_names[j] for j in on.armature_.estimated]
    assert estimated == ["elbow_joint", "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"]
    idx = [fit.symbols.index(f"Ia@{j}") for j in estimated]
    assert idx == list(range(fit.inertial + 2 * model.nq, len(fit.symbols)))  # after the friction columns
    z_ia = (fit.values[idx] - IA[on.armature_.estimated]) / fit.se[idx]
    assert np.all(np.abs(z_ia) < 3), z_ia  # measured: 0.12, −1.36, −0.25, 0.06
    assert np.all(fit.rel_se_pct[idx] < 10)  # determined, not just consistent
    nb = fit.inertial
    z = (fit.values[:nb] - on.reference_values(truth, IA)) / fit.se[:nb]
    assert np.abs(z).max() < 3, z  # measured: max |z| 2.27 over 36
    holding = [fit.symbols.index(s) for into in fit.armature_grouped.values() for s in into]
    z_bare = (fit.values[:nb] - on.reference_values(truth)) / fit.se[:nb]
    assert np.abs(z_bare[holding]).min() > 10, z_bare[holding]  # measured: 31.6, 29.9


def test_rotor_inertia_cuts_the_validation_error(arm):
    """On another motion the torques predicted with rotor inertia miss by far less than without: the rigid-body
    model cannot absorb Ia·q̈ of the joints whose rotor inertia is not grouped."""
    *_, val, on, off = arm
    rmse = []
    for est in (on, off):
        pred, meas = est.predict(val)
        rmse.append(float(np.sqrt(np.mean((pred - meas) ** 2))))
    assert rmse[0] / rmse[1] < 0.15, rmse  # measured: 0.0146 / 0.339 N·m = 0.043
    assert rmse[0] < 0.5 * NOISE  # the filtered white noise's share, nothing systematic left


def test_the_first_joints_rotor_inertia_is_grouped_and_named(arm):
    """No `Ia@` estimate for the joints whose column lies in the base parameters' span; the fit names them with
    the base parameter that holds each (ϑ with the link inertia about that axis), the JSON too; grouping is found
    numerically for any robot (the iCub arm: its first joint)."""
    model, _, _, _, on, off = arm
    fit = on.fit_
    assert set(fit.armature_grouped) == GROUPED
    assert not any(f"Ia@{j}" in fit.symbols for j in GROUPED)
    assert all(
        len(into) == 1 and into[0] in fit.symbols[: fit.inertial] for into in fit.armature_grouped.values()
    )
    assert fit.to_dict()["armature_grouped"] == fit.armature_grouped
    assert off.fit_.armature_grouped is None and "armature_grouped" not in off.fit_.to_dict()
    assert not any(s.startswith("Ia@") for s in off.fit_.symbols)
    icub = get_model("icub-right-arm")
    spec = RegressorSpec("torque", icub.root)
    g = armature_grouping(icub, spec)
    assert (
        0 in g.grouped and len(g.estimated) >= 3 and sorted(g.grouped + g.estimated) == list(range(icub.nq))
    )
    # the grouping is an identity, not a property of the states it was found on: at other states the grouped
    # joints' columns are the stated combinations of the base parameters' and the estimated rotor inertias'
    q, qd, qdd = random_states(icub, 30, np.random.default_rng(5))
    Yb = evaluate(icub, spec, q, qd, qdd)[..., cached_dynamic_base(icub, spec).independent]
    basis = np.concatenate([Yb, armature_columns(qdd, g.estimated)], axis=2)
    assert np.abs(basis @ g.combination - armature_columns(qdd, g.grouped)).max() < 1e-6  # measured 2.6e-8


def test_the_forecast_carries_the_rotor_inertia_columns(arm):
    """`forecast_dynamic` with the estimator's rotor inertia: the fit's columns, a forecast SE for each Ia near
    the fit's (the same white noise), the grouped joints named."""
    model, _, rec, _, on, _ = arm
    fc = forecast_dynamic(DynamicEstimator(model, armature=True), rec.t, rec.q, NOISE)
    fit = on.fit_
    assert fc.symbols == fit.symbols and fc.units == fit.units and fc.inertial == fit.inertial
    assert set(fc.armature_grouped) == GROUPED and set(fc.to_dict()["armature_grouped"]) == GROUPED
    idx = [k for k, s in enumerate(fit.symbols) if s.startswith("Ia@")]
    ratio = fc.se[idx] / fit.se[idx]
    assert np.all((ratio > 0.5) & (ratio < 2)), ratio


def test_plan_forecast_with_rotor_inertia(arm, tmp_path, capsys):
    """`plan forecast --armature` on an arm plan: the forecast of the same motion recorded alike — each Ia with
    its unit and SE, the grouped joints — in the JSON and in a line of the text; without it, no rotor inertia."""
    model, _, rec, _, on, _ = arm
    plan = TrajectoryPlan(model.name, model.root, list(model.joint_names), _motion(3).to_json(), rate_hz=RATE_HZ,
                          robot_source=str(UR5))  # fmt: skip
    path = tmp_path / "plan.json"
    save_trajectory_plan(plan, path)
    capsys.readouterr()
    assert main(["plan", "forecast", str(path), "--noise", str(NOISE), "--armature", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    meta = plan_recording(plan, _motion(3)).meta  # the plan's motion band sets the cut-off
    fc = forecast_dynamic(DynamicEstimator(model, armature=True), rec.t, rec.q, NOISE, meta=meta)
    rotor = [p for p in doc["parameters"] if p["symbol"].startswith("Ia@")]
    assert [p["symbol"] for p in rotor] == [s for s in fc.symbols if s.startswith("Ia@")]
    assert {p["unit"] for p in rotor} == {"kg·m²"}
    assert [p["se"] for p in rotor] == pytest.approx(
        [fc.se[fc.symbols.index(p["symbol"])] for p in rotor], rel=1e-6
    )
    assert set(doc["armature_grouped"]) == GROUPED
    assert main(["plan", "forecast", str(path), "--noise", str(NOISE), "--armature"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "rotor inertia (armature) SE: Ia@elbow_joint" in flat and "kg·m²" in flat
    assert f"grouped into the base parameters: {', '.join(on.fit_.armature_grouped)}" in flat
    assert main(["plan", "forecast", str(path), "--noise", str(NOISE), "--json"]) == 0
    assert "armature_grouped" not in json.loads(capsys.readouterr().out)  # not modelled unless asked


def test_rotor_inertia_needs_joint_torques():
    model = get_model(str(UR5))
    with pytest.raises(DataError, match="armature.*joint torques"):
        DynamicEstimator(model, quantity="wrench", armature=True)


def test_cli_reports_rotor_inertia_with_units_and_the_grouped_joints(arm, tmp_path, capsys):
    """`identify dynamic --armature`: the table has an `Ia@` row per estimated joint in kg·m² and the line naming
    the grouped joints; `--json` carries each Ia with its unit and SE and the grouped joints."""
    model, _, rec, _, on, _ = arm
    path = tmp_path / "armature.csv"
    write_dynamic_recording(rec, path)
    capsys.readouterr()
    assert main(["identify", "dynamic", str(path), "--armature", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rotor = {p["symbol"]: p for p in doc["parameters"] if p["symbol"].startswith("Ia@")}
    assert set(rotor) == {f"Ia@{model.joint_names[j]}" for j in on.armature_.estimated}
    for p in rotor.values():
        assert p["unit"] == "kg·m²" and 0 < p["se"] < 0.01 and "armature" in p["formula"]
    assert doc["armature_grouped"] == on.fit_.armature_grouped
    assert main(["identify", "dynamic", str(path), "--armature"]) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if "Ia@" in line]
    assert len(rows) == len(rotor) and all("kg·m²" in line for line in rows), rows
    flat = " ".join(text.split())  # the console wraps long lines
    grouped = ", ".join(f"{j} → {into[0]}" for j, into in on.fit_.armature_grouped.items())
    assert f"not estimated apart (its column lies in their span): {grouped}" in flat, flat


def test_simulate_trajectory_takes_a_true_rotor_inertia(arm, tmp_path, capsys):
    """`simulate trajectory --armature IA`: MuJoCo's efforts carry it, `identify dynamic --armature` finds it on
    every joint it estimates apart (within 3 SE), and a standing plan refuses it in one line."""
    model = arm[0]
    plan = TrajectoryPlan(model.name, model.root, list(model.joint_names), _motion(3).to_json(), params="urdf",
                          robot_source=str(UR5))  # fmt: skip
    save_trajectory_plan(plan, tmp_path / "p.json")
    rec = tmp_path / "r.csv"
    assert main(["simulate", "trajectory", str(tmp_path / "p.json"), "--out", str(rec), "--armature", "0.1",
                 "--effort-noise", "0.05", "--truth", "urdf"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["identify", "dynamic", str(rec), "--armature", "--json"]) == 0
    rotor = [p for p in json.loads(capsys.readouterr().out)["parameters"] if p["symbol"].startswith("Ia@")]
    assert len(rotor) == 4 and all(abs(p["value"] - 0.1) < 3 * p["se"] for p in rotor), rotor
    # the recording declares the joints' truth (a parameter set cannot hold it): --reference compares friction and
    # rotor inertia with it, and adds the grouped rotor inertia to the base parameters' reference values
    truth = tmp_path / "t.json"
    assert main(["simulate", "trajectory", str(tmp_path / "p.json"), "--out", str(tmp_path / "r3.csv"), "--armature",
                 "0.1", "--effort-noise", "0.05", "--truth", "urdf", "--truth-out", str(truth)]) == 0  # fmt: skip
    capsys.readouterr()
    refs = {}
    for extra in ([], ["--armature"]):  # without it, the unmodelled rotor inertia biases some of the friction
        argv = ["identify", "dynamic", str(tmp_path / "r3.csv"), "--reference", str(truth), "--json", *extra]
        assert main(argv) == 0
        refs[bool(extra)] = json.loads(capsys.readouterr().out)["reference"]
    for with_rotor, ref in refs.items():
        joints = ref["joints"]
        assert joints["source"] == "the recording's declared joint truth"
        assert joints["estimated"] == (16 if with_rotor else 12), joints
        assert joints["values"]["fv@elbow_joint"] == 0.3 and joints["values"]["fc@elbow_joint"] == 0.8
    ref = refs[True]
    assert ref["joints"]["within_3se"] >= 14, ref["joints"]
    assert ref["within_3se"] == ref["estimated"], ref  # the rotor inertia estimated, or grouped as the twin's
    lines = (tmp_path / "r3.csv").read_text().splitlines(keepends=True)
    (tmp_path / "r4.csv").write_text("".join(x for x in lines if not x.startswith("# true_")))
    assert main(["identify", "dynamic", str(tmp_path / "r4.csv"), "--reference", str(truth), "--json"]) == 0
    reference = json.loads(capsys.readouterr().out)["reference"]
    assert "joints" not in reference  # declared by none: compared with none
    standing = Path(__file__).parent / "data" / "tulip_double_support_10s.json"
    for argv, words in (([str(standing), "--armature", "0.1"], "it records a standing robot's boards"),
                        ([str(tmp_path / "p.json"), "--armature", "-1"], "armature")):  # fmt: skip
        capsys.readouterr()
        assert main(["simulate", "trajectory", *argv, "--out", str(tmp_path / "r2.csv")]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err
    assert not (tmp_path / "r2.csv").exists()
