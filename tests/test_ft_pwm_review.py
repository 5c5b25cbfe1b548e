"""A user review of `poise identify ft-pwm` and the PWM drive: wrong units, signs and damaged files are refused
or warned about naming the cause, unidentifiable parameters name their formula and the still joint, contact
samples stay out of the fit, options are checked before any work, every parameter carries its unit; a PWM plan
runs on the bundled robot's twin although its description violates the triangle inequality."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from formats.ft_pwm_recording import FtPwmRecording, read_ft_pwm_recording, write_ft_pwm_recording
from poise.cli import main

pytest.importorskip("mujoco")
pytest.importorskip("icub_models")

SENSOR = "r_arm_ft_sensor"


@pytest.fixture(scope="module")
def sim():
    """A 40 s identification run and a contact run of the iCub arm twin (one truth)."""
    from identify.ft_pwm_sim import simulate_experiment
    from tests.test_ft_pwm import arm_twin

    kw = arm_twin()
    ident = simulate_experiment(duration=40.0, seed=1, **kw)
    contact = simulate_experiment(duration=40.0, seed=3, contacts=(1.0, 5.0), **kw)
    return ident, contact


def _identify(rec: FtPwmRecording, path: Path, capsys, *extra: str) -> tuple[int, dict | None, str]:
    """Write `rec`, run `identify ft-pwm --json` on it: (exit code, JSON or None, stderr)."""
    write_ft_pwm_recording(rec, path)
    code = main(["identify", "ft-pwm", str(path), "--json", *extra])
    cap = capsys.readouterr()
    return code, (json.loads(cap.out) if code == 0 else None), cap.err


def test_negative_pwm_gains_warned_for_every_method(sim, tmp_path, capsys):
    ident, _ = sim
    flipped = replace(ident.recording, pwm=-ident.recording.pwm)
    for method in ("pls", "ols"):
        code, out, err = _identify(flipped, tmp_path / "neg.csv", capsys, "--method", method)
        assert code == 0
        gains = [p["symbol"] for p in out["parameters"] if p["symbol"].startswith("k@")]
        (warning,) = [w for w in out["warnings"] if "PWM gain" in w]
        assert all(g in warning for g in gains) and "sign" in warning and "warning" in err
    _, out, _ = _identify(ident.recording, tmp_path / "ok.csv", capsys, "--method", "ols")
    assert out["warnings"] == []


def test_unexcited_parameters_named_with_formula_and_still_joint(sim, tmp_path, capsys):
    ident = sim[0].recording
    j = ident.joint_names.index("r_wrist_yaw")
    q = ident.q.copy()
    q[:, j] = q[0, j]
    code, _, err = _identify(replace(ident, q=q), tmp_path / "still.csv", capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "ϑ" in err and "@r_hand" in err and " = " in err
    assert "r_wrist_yaw does not move" in err


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda r: replace(r, q=np.degrees(r.q)), "degrees"),
        (lambda r: replace(r, t=r.t * 1000), "t_s in ms?"),
    ],
)
def test_wrong_units_refused(sim, tmp_path, capsys, damage, match):
    code, _, err = _identify(damage(sim[0].recording), tmp_path / "bad.csv", capsys)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("scale", "match"),
    [((1 / 9.80665, 1.0), "kgf"), ((1.0, 1000.0), "N·mm")],
)
def test_wrench_in_wrong_units_warned(sim, tmp_path, capsys, scale, match):
    rec = sim[0].recording
    wrench = rec.wrench * np.repeat(scale, 3)
    code, out, err = _identify(replace(rec, wrench=wrench), tmp_path / "w.csv", capsys, "--method", "ols")
    assert code == 0 and any(match in w for w in out["warnings"]) and match in err


def test_nan_and_time_stamp_errors_name_file_line_and_column(sim, tmp_path):
    from formats.errors import DataError

    path = tmp_path / "rec.csv"
    write_ft_pwm_recording(sim[0].recording, path)
    lines = path.read_text().splitlines()
    header = next(k for k, ln in enumerate(lines) if ln.startswith("t_s"))
    row = header + 20
    cells = lines[row].split(",")
    cells[3] = "nan"
    bad = lines[:row] + [",".join(cells)] + lines[row + 1 :]
    path.write_text("\n".join(bad) + "\n")
    column = lines[header].split(",")[3]
    with pytest.raises(DataError, match=f"rec.csv:{row + 1}: column {column} is nan"):
        read_ft_pwm_recording(path)
    swapped = lines[:row] + [lines[row + 1], lines[row]] + lines[row + 2 :]
    path.write_text("\n".join(swapped) + "\n")
    with pytest.raises(DataError, match=f"rec.csv:{row + 2}: t_s"):
        read_ft_pwm_recording(path)


def test_contact_samples_left_out_of_the_fit(sim, tmp_path, capsys):
    """The pushes bias a fit that keeps them: with the contact column they are dropped, and said so."""
    from identify.ft_pwm import FtPwmEstimator

    contact = sim[1]
    rec = contact.recording
    assert rec.contact is not None and rec.contact.any()
    code, out, err = _identify(rec, tmp_path / "c.csv", capsys, "--method", "ols")
    assert code == 0 and out["contact_samples_dropped"] > 0
    assert any(str(out["contact_samples_dropped"]) in w and "contact" in w for w in out["warnings"])
    errors = []
    for r in (rec, replace(rec, contact=None)):
        est = FtPwmEstimator(_model(), SENSOR, method="ols").fit(r)
        z = (est.fit_.values - est.true_values(contact.truth, contact.extra)) / est.fit_.se
        errors.append(np.sqrt(np.mean(z**2)))
    assert errors[0] < errors[1]


def _model():
    from robots.registry import get_model

    return get_model("icub-right-arm")


def test_save_dir_checks_every_name_before_simulating(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "contacts.csv").write_text("mine\n")
    argv = ["identify", "ft-pwm", "--simulate", "--duration", "3600", "--save-dir", str(runs)]
    assert main(argv) == 2  # refused at once: a 3600 s simulation would take minutes
    err = capsys.readouterr().err
    assert "contacts.csv" in err and "--force" in err
    assert sorted(p.name for p in runs.iterdir()) == ["contacts.csv"]


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--plot", "PLOT.png"], "--plot needs validation data"),
        (["--components", "3", "--method", "ols"], "--components"),
    ],
)
def test_options_refused_before_reading(tmp_path, capsys, extra, match):
    argv = ["identify", "ft-pwm", str(tmp_path / "NOFILE.csv"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and "NOFILE" not in err
    assert not (Path.cwd() / "PLOT.png").exists()


def test_every_parameter_has_its_unit(sim, tmp_path, capsys):
    code, out, _ = _identify(sim[0].recording, tmp_path / "u.csv", capsys, "--method", "ols")
    units = {p["symbol"]: p["unit"] for p in out["parameters"]}
    assert code == 0 and all(units.values()) and "?" not in units.values()
    assert all(u == "N·m/PWM unit" for s, u in units.items() if s.startswith("k@"))
    assert units["w_O:fx"] == "N" and units["w_O:mx"] == "N·m"
    mass = next(p for p in out["parameters"] if p["formula"].startswith("m@"))
    assert mass["unit"] == "kg"
    assert main(["identify", "ft-pwm", str(tmp_path / "u.csv"), "--method", "ols"]) == 0
    table = capsys.readouterr().out
    assert "unit" in table and "kg·m²" in table and "N·m·s/rad" in table


def test_pwm_plan_runs_on_the_bundled_robot_twin(tmp_path, capsys):
    """The bundled robot's description violates the triangle inequality at one link: the PWM drive simulates
    the repaired inertias as the twin does, so the plan runs."""
    from formats.pwm_plan import PwmPlan, Segment, save_pwm_plan

    plan = tmp_path / "p.json"
    save_pwm_plan(PwmPlan((Segment("triangle", 8.0, 0.3, 1.0),), link="free"), plan)
    out = tmp_path / "run"
    assert main(["run", str(plan), "--robot", "sim", "--joint", "theta1", "--out", str(out)]) == 0
    rows = (out / "recording.csv").read_text().splitlines()
    assert sum(1 for r in rows if r and r[0].isdigit()) > 50


def test_a_recording_of_other_joints_is_one_line_not_a_traceback(sim, tmp_path, capsys):
    """Joints other than the model's (here in another order) are named before any angle is judged against the
    wrong joint's limits."""
    rec = sim[0].recording
    swapped = replace(rec, joint_names=list(reversed(rec.joint_names)), q=rec.q[:, ::-1])
    code, _, err = _identify(swapped, tmp_path / "swapped.csv", capsys)
    assert code == 2 and "are not" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
