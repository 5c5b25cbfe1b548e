"""`poise model show` and `poise identify static` from the command line."""

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import UR5
from test_tulip_model import TABLE_4_1, TABLE_4_6_MC

from poise.cli import main


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_model_show_json_reproduces_table_4_1(capsys):
    out = run_json(capsys, "model", "show", "tulip", "--params", "sim", "--json")
    values_mm = np.array([r["value_m"] for r in out["base_parameters"]]) * 1000
    assert np.abs(values_mm[:25] - TABLE_4_1).max() < 0.001
    assert out["total_mass_kg"] == pytest.approx(22.64)
    assert sum(r["identifiable"] for r in out["base_parameters"]) == 25
    assert sum(r["simplified"] for r in out["base_parameters"]) == 13


def test_model_show_mc_and_left(capsys):
    out = run_json(capsys, "model", "show", "tulip", "--params", "mc", "--json")
    for k, v in TABLE_4_6_MC.items():
        assert out["base_parameters"][k - 1]["value_m"] * 1000 == pytest.approx(v, abs=0.005)
    left = run_json(capsys, "model", "show", "tulip", "--base", "left", "--json")
    assert left["base_parameters"][11]["value_m"] * 1000 == pytest.approx(9.289, abs=0.001)


def test_model_show_of_a_fixed_base_arm_shows_its_joint_torque_base_parameters(capsys):
    """An arm stands on nothing: its default regressor is the joint torques', not the CoM model's."""
    out = run_json(capsys, "model", "show", str(UR5), "--json")
    assert out["regressor"] == "torque" and len(out["base_parameters"]) == 36


def test_model_show_table_has_units(capsys):
    assert main(["model", "show", "tulip"]) == 0
    text = capsys.readouterr().out
    assert "value [mm]" in text and "ϑ27" in text


def test_simulate_then_identify_with_result_file(tmp_path, capsys):
    rec, res, fig = tmp_path / "r.csv", tmp_path / "res.json", tmp_path / "fit.png"
    assert main(["simulate", "static", "tulip", "--postures", "30", "--truth", "mc", "--noise-mm", "2",
                 "--seed", "4", "--out", str(rec)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["identify", "static", str(rec), "--model", "simplified", "--reference", "sim",
                 "--out", str(res), "--plot", str(fig)]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "estimate [mm]" in text and "σ̂" in text
    result = json.loads(res.read_text())
    assert result["format"] == "poise static result" and result["n_postures"] == 30
    assert fig.stat().st_size > 10_000
    # the true (mc) model explains the data better than the reference (sim)
    assert result["reference"]["cop_error_mean_m"] > result["cop_residual_norm_mean_m"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["model", "show", "atlas"], "unknown robot 'atlas'"),
        (["model", "show", "tulip", "--base", "middle"], "no base 'middle'"),
        (["model", "show", "tulip", "--params", "nope"], "unknown parameter set 'nope'"),
        (["identify", "static", "/nonexistent/rec.csv"], "No such file"),
    ],
)
def test_user_errors_are_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_malformed_recording_from_cli(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text(
        "# poise static recording v1\n# robot: tulip\n# base: right\nposture,theta1,cop_x,cop_y\n0,0,0,0\n"
    )
    assert main(["identify", "static", str(path)]) == 2
    assert "1 joint columns, the model has 12" in capsys.readouterr().err


# What building the parser must not load: the commands import the libraries they run lazily (a fast CLI start).
HEAVY = ("scipy", "scipy.optimize", "scipy.stats", "scipy.signal", "casadi", "mujoco", "trimesh", "yourdfpy",
         "pyomo", "matplotlib", "shapely", "serial", "dynamixel_sdk")  # fmt: skip


def test_building_the_parser_loads_no_heavy_library():
    code = (
        "import sys; from poise.cli import build_parser; build_parser(); "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
