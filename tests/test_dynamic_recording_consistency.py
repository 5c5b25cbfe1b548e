"""What a user review of the arm's dynamic journey found `identify dynamic` accepting: the same recording fitted
twice (or validated on itself), a moving joint whose effort reads 0, a recording that disagrees with its run.json,
efforts a unit off on a robot whose effort limits are placeholders; and what it did not say: the rows dropped at
velocity reversals, a validation recording whose declared physics differs from the fit's."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pytest
from conftest import UR5, one_line_error

from drivers.emulators.mujoco_arm import ArmImperfections, arm_efforts
from formats.dynamic_recording import DynamicRecording, read_dynamic_recording, write_dynamic_recording
from formats.errors import DataError
from identify.dynamic import validation_error
from identify.recording_checks import EFFORT_REFUSE, EFFORT_WARN
from identify.recording_model import (
    MOVING_SPAN,
    SHARED_SAMPLES,
    STUCK_SHARE,
    effort_scale,
    repeated_recordings,
    run_problem,
    stuck_efforts,
)
from poise.cli import main
from robots.params_io import resolve_params
from robots.registry import get_model
from trajectories.fourier import FourierTrajectory
from trajectories.verify import sample_grid

RATE_HZ = 200.0


def _recording(path, seed: int = 3, viscous: float = 0.3, scale: float = 1.0, stuck: int | None = None):
    """A UR5 motion (8 s at RATE_HZ) with MuJoCo's efforts (`viscous` N·m·s/rad, 0.8 N·m dry friction) and
    0.2 N·m noise, declared as `simulate trajectory` declares its joints' truth; efforts × `scale`; joint `stuck`'s
    effort 0 throughout."""
    model = get_model(str(UR5))
    rng = np.random.default_rng(seed)
    traj = FourierTrajectory(4.0, 8.0, np.array([0.0, -1.2, 1.2, -1.5, -1.5, 0.0]),
                             rng.normal(0.0, 0.4, (6, 3)), rng.normal(0.0, 0.4, (6, 3)))  # fmt: skip
    t = sample_grid(traj, 1.0 / RATE_HZ)
    q, qd, qdd = traj.sample(t)
    qm, tau = arm_efforts(model, resolve_params("urdf", model), q, qd, qdd,
                          ArmImperfections(viscous=viscous, coulomb=0.8, effort_noise=0.2), rng)  # fmt: skip
    tau = scale * tau
    if stuck is not None:
        tau[:, stuck] = 0.0
    meta = {"robot_source": str(UR5), "true_viscous_nm_s_rad": f"{viscous:g}", "true_coulomb_nm": "0.8",
            "true_armature_kg_m2": "0"}  # fmt: skip
    write_dynamic_recording(DynamicRecording(model.name, model.root, list(model.joint_names), t, qm, tau, meta=meta),
                            path)  # fmt: skip
    return path


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return _recording(tmp_path_factory.mktemp("consistency") / "a.csv")


def test_a_recording_fitted_twice_or_cut_from_another_is_refused_naming_both(rec, tmp_path, capsys):
    copy = tmp_path / "copy.csv"
    copy.write_bytes(rec.read_bytes())
    err = one_line_error(capsys, ["identify", "dynamic", str(rec), str(copy)])
    assert str(rec) in err and str(copy) in err and "100 %" in err
    r = read_dynamic_recording(rec)  # its second half, its times from 0: the same samples
    half = len(r.t) // 2
    cut = tmp_path / "cut.csv"
    write_dynamic_recording(replace(r, t=r.t[half:] - r.t[half], q=r.q[half:], tau=r.tau[half:]), cut)
    err = one_line_error(capsys, ["identify", "dynamic", str(rec), str(cut)])
    assert str(rec) in err and str(cut) in err


def test_validating_on_a_fitted_recording_is_refused(rec, tmp_path, capsys):
    copy = tmp_path / "copy.csv"
    copy.write_bytes(rec.read_bytes())
    err = one_line_error(capsys, ["identify", "dynamic", str(rec), "--validate", str(copy)])
    assert f"--validate {copy}" in err and str(rec) in err and "in-sample" in err


def test_a_still_joint_whose_encoder_flickers_is_not_moving(rec):
    """An encoder flickering a tick on a still joint (effort 0: nothing to hold) is no motion: below MOVING_SPAN."""
    r = read_dynamic_recording(rec)
    q, tau = r.q.copy(), r.tau.copy()
    q[:, 5] = 0.1
    q[[100, 900], 5] += MOVING_SPAN["revolute"] / 20  # one tick, twice
    tau[:, 5] = 0.0
    assert stuck_efforts(replace(r, q=q, tau=tau), "still.csv", get_model(str(UR5))) == []


def test_a_moving_joint_whose_effort_never_changes_is_refused(tmp_path, capsys):
    path = _recording(tmp_path / "stuck.csv", stuck=5)
    err = one_line_error(capsys, ["identify", "dynamic", str(path)])
    assert "wrist_3_joint moves" in err and "every sample" in err


def test_a_moving_joint_reading_zero_most_of_its_motion_is_warned_with_its_share(rec):
    r = read_dynamic_recording(rec)
    ur5 = get_model(str(UR5))
    assert stuck_efforts(r, "a.csv", ur5) == []
    tau = r.tau.copy()
    zeros = np.random.default_rng(0).random(len(tau)) < STUCK_SHARE + 0.1  # ~60 % of the samples read 0
    tau[zeros, 4] = 0.0
    step = np.diff(r.q[:, 4]) != 0  # a sample next to an encoder change
    moving = np.zeros(len(tau), dtype=bool)
    moving[1:] |= step
    moving[:-1] |= step
    share = np.mean(zeros[moving])
    (msg,) = stuck_efforts(replace(r, tau=tau), "a.csv", ur5)
    assert "wrist_2_joint" in msg and f"{100 * share:.0f} % of its {moving.sum()} moving samples" in msg


def test_a_row_that_measured_nothing_has_no_relative_validation_error():
    meas = np.column_stack([np.sin(np.linspace(0, 6, 50)), np.zeros(50)])
    pred = meas + 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy divide-by-zero warning leaks
        v = validation_error(pred, meas)
    assert v["relative_pct"][1] is None and v["zero_rms_rows"] == [1]
    assert v["relative_pct"][0] == pytest.approx(100 * 0.1 / np.sqrt(np.mean(meas[:, 0] ** 2)))
    assert validation_error(pred, 0 * meas)["total_relative_pct"] is None


def _run_json(rec, folder, **fields) -> None:
    """A copy of `rec` as folder/recording.csv with a run.json beside it saying `fields`."""
    folder.mkdir()
    (folder / "recording.csv").write_bytes(rec.read_bytes())
    meta = {"status": "completed", "plan": "plan.json", "plan_sha256": "0" * 64} | fields
    (folder / "run.json").write_text(json.dumps(meta))


def test_a_recording_that_disagrees_with_its_run_json_is_refused_with_the_numbers(rec, tmp_path, capsys):
    samples = len(read_dynamic_recording(rec).t)
    _run_json(rec, tmp_path / "rate", rate_hz=2 * RATE_HZ, ticks_streamed=samples)
    err = one_line_error(capsys, ["identify", "dynamic", str(tmp_path / "rate" / "recording.csv")])
    assert f"rate_hz {2 * RATE_HZ:g} Hz" in err and f"({RATE_HZ:g} Hz)" in err
    _run_json(rec, tmp_path / "cut", rate_hz=RATE_HZ, ticks_streamed=2 * samples)
    err = one_line_error(capsys, ["identify", "dynamic", str(tmp_path / "cut" / "recording.csv")])
    assert f"{samples} samples" in err and f"streamed {2 * samples} ticks at {RATE_HZ:g} Hz" in err


def test_a_run_with_a_stall_agrees_with_its_run_json(rec):
    """A stall delays the rows after it (the recorder keeps its times, the executor does not catch up): the rows
    stay one per tick streamed; a cut or a decimation loses rows."""
    r = read_dynamic_recording(rec)
    t = r.t.copy()
    t[len(t) // 2 :] += 0.5  # s, a stall half-way
    run_problem(replace(r, t=t), "stall.csv", len(t), RATE_HZ)  # no error
    with pytest.raises(DataError, match="rows missing"):
        run_problem(replace(r, t=t[::2], q=r.q[::2], tau=r.tau[::2]), "half.csv", len(t), RATE_HZ / 2)


def test_separate_runs_sharing_quantised_samples_are_not_copies(rec):
    """Separate runs of one plan share samples (quantised encoders and currents; measured up to 71 %): fitted
    together or validated on each other they are independent; one sharing SHARED_SAMPLES is a copy."""
    r = read_dynamic_recording(rec)
    other = np.random.default_rng(1).random(len(r.t)) > 0.75  # a quarter of its samples its own
    tau = r.tau + np.where(other[:, None], 0.01, 0.0)
    b = replace(r, tau=tau)
    repeated_recordings([r, b], ["a.csv", "b.csv"], [None, None])  # no error
    repeated_recordings([r], ["a.csv"], [None], (b, "b.csv"))
    tau = r.tau.copy()
    tau[: int((1 - SHARED_SAMPLES) * len(tau)) - 1] += 0.01  # all but a few of its samples the other's
    c = replace(r, tau=tau)
    with pytest.raises(DataError, match="a copy, or cut"):
        repeated_recordings([r, c], ["a.csv", "c.csv"], [None, None])


@pytest.mark.parametrize(("scale", "hint"), [(1000.0, "mN·m"), (1 / 50, "torque constant")])
def test_efforts_a_unit_off_the_descriptions_dynamics_are_refused(tmp_path, capsys, scale, hint):
    path = _recording(tmp_path / "unit.csv", scale=scale)
    err = one_line_error(capsys, ["identify", "dynamic", str(path)])
    assert hint in err and f"beyond 1/{EFFORT_REFUSE:g}–{EFFORT_REFUSE:g}×" in err
    assert ("its effort limit" in err) == (scale > 1)  # the limits' warning is not hidden by the refusal


@pytest.mark.parametrize("scale", [(EFFORT_WARN + EFFORT_REFUSE) / 2, 2 / (EFFORT_WARN + EFFORT_REFUSE)])
def test_efforts_far_but_not_a_unit_off_the_description_are_warned_and_fitted(rec, scale):
    """Between EFFORT_WARN and EFFORT_REFUSE either way (large friction, a description whose masses are far off:
    measured 11× and 0.039×) a warning naming --prior; with --prior's parameters as far off, none."""
    r = read_dynamic_recording(rec)
    ur5 = get_model(str(UR5))
    (msg,) = effort_scale(replace(r, tau=scale * r.tau), "far.csv", ur5)
    assert msg.startswith("far.csv: ") and "--prior" in msg and "the fit goes on" in msg
    near = resolve_params("urdf", ur5)
    near = replace(near, mass={k: scale * m for k, m in near.mass.items()},
                   inertia={k: tuple(scale * np.asarray(i)) for k, i in near.inertia.items()})  # fmt: skip
    assert effort_scale(replace(r, tau=scale * r.tau), "far.csv", ur5, near) == []


def test_validation_says_when_the_two_recordings_declare_other_physics(rec, tmp_path, capsys):
    other = _recording(tmp_path / "other.csv", seed=4, viscous=0.6)
    assert main(["identify", "dynamic", str(rec), "--validate", str(other), "--json"]) == 0
    v = json.loads(capsys.readouterr().out)["validation"]
    (d,) = v["declared_physics_differ"]
    assert (d["kind"], d["fit"], d["validation"]) == ("viscous", 0.3, 0.6)
    assert d["fit_field"] == d["validation_field"] == "true_viscous_nm_s_rad"
    same = _recording(tmp_path / "same.csv", seed=4)
    assert main(["identify", "dynamic", str(rec), "--validate", str(same)]) == 0
    assert "declared physics differ" not in capsys.readouterr().out
