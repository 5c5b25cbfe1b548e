"""Model-layer mends: continuous joints sample within ±π, a parameter-set file without lengths keeps the model's,
a `.urdf.xacro` is told to be expanded, and an export counts only the mesh paths whose text it changed."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
from test_urdf_review import L2_MASS, _arm, _write

from poise.cli import main
from robots.params_io import load_model_parameter_set, save_parameter_set
from robots.registry import get_model
from robots.urdf import URDF_SET, load_urdf
from robots.urdf_export import export_urdf


def test_continuous_joints_sample_within_pi(tmp_path, capsys):
    """Random postures (the base-parameter grouping's samples) on a continuous joint are finite, within ±π, and
    use that whole turn; a limited joint keeps its range; `model show` groups the torque base from them."""
    from robots.base_params import random_states

    text = _arm(L2_MASS).replace('type="revolute"', 'type="continuous"', 1)
    text = text.replace(
        '<limit lower="-2" upper="2" effort="10" velocity="2"/>', '<limit effort="10" velocity="2"/>', 1
    )
    path = _write(tmp_path / "c.urdf", text)
    model = load_urdf(path)
    assert model.joints[model.coordinates[0]].type == "continuous"
    q = random_states(model, 2000, np.random.default_rng(0))[0]
    assert np.all(np.isfinite(q))
    assert (
        np.all(np.abs(q[:, 0]) <= np.pi) and np.abs(q[:, 0]).max() > 2.5
    )  # the whole turn, not the ±2 of j2
    assert np.all(np.abs(q[:, 1]) <= 2.0)
    assert main(["model", "show", str(path), "--regressor", "torque", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["base_parameters"], out


def test_a_parameter_set_without_lengths_keeps_the_model_s(tmp_path):
    model = get_model("tulip")
    own = next(iter(model.params.values()))
    assert own.lengths, "TUlip names lengths: the test needs them"
    path = tmp_path / "lab.json"
    save_parameter_set(replace(own, name="lab", lengths={}), path)
    doc = json.loads(path.read_text())
    doc.pop("lengths", None)
    path.write_text(json.dumps(doc))
    ps = load_model_parameter_set(path, model)
    assert ps.lengths == own.lengths
    doc["lengths"] = {next(iter(own.lengths)): 0.5}
    path.write_text(json.dumps(doc))
    mixed = load_model_parameter_set(path, model).lengths
    assert mixed[next(iter(own.lengths))] == 0.5 and set(mixed) == set(own.lengths)


def test_a_xacro_file_is_told_to_be_expanded(tmp_path, capsys):
    path = _write(tmp_path / "arm.urdf.xacro", _arm(L2_MASS).replace("${", "").replace(
        '<robot name="arm2">', '<robot name="arm2" xmlns:xacro="http://ros.org/wiki/xacro"><xacro:property name="l" value="1"/>'))  # fmt: skip
    assert main(["model", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "xacro" in err and "expand" in err and "unknown robot" not in err


def test_export_counts_only_paths_whose_text_changed(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "l1.stl").write_text("solid x\nendsolid x\n")
    mesh = '<visual><geometry><mesh filename="../shared/l1.stl"/></geometry></visual>'
    (tmp_path / "a").mkdir()
    src = _write(tmp_path / "a" / "arm.urdf", _arm(L2_MASS, mesh=mesh))
    model = load_urdf(src)
    ps = model.parameter_set(URDF_SET)
    ps.mass["l1"] = 1.5
    (tmp_path / "b").mkdir()
    sibling = export_urdf(src, model, ps, out=tmp_path / "b" / "arm_id.urdf")
    assert sibling.paths_rewritten == 0 and 'filename="../shared/l1.stl"' in sibling.text
    (tmp_path / "c" / "d").mkdir(parents=True)
    deeper = export_urdf(src, model, ps, out=tmp_path / "c" / "d" / "arm_id.urdf")
    assert deeper.paths_rewritten == 1 and 'filename="../../shared/l1.stl"' in deeper.text
