"""Review "a lab brings its own URDF": broken files are refused, not half-loaded; results of another robot are not
exported into this one; massless moving links, meshes beside the URDF, encodings and float noise survive an
export; `--nearest` reports what it wrote; `--force` only overwrites; MuJoCo refusals name the joint or link."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import ERD, UR5

from formats.dynamic_recording import DynamicRecording, write_dynamic_recording
from formats.errors import DataError
from poise.cli import main
from robots import dynamics as dyn
from robots.full_set import parameter_set_from_standard
from robots.registry import get_model
from robots.urdf import URDF_SET, load_urdf
from robots.urdf_export import export_urdf, read_inertials

L2_MASS = '<inertial><origin xyz="0.02 0.01 0.15"/><mass value="0.7"/><inertia ixx="0.004" ixy="0" ixz="0" iyy="0.004" iyz="0" izz="0.001"/></inertial>'  # fmt: skip


def _arm(l2: str = "", reach: str = "0.05", mesh: str = "") -> str:
    """A two-joint arm; `l2` is the second link's body, `reach` the second joint's offset from the first's axis."""
    return f"""<?xml version="1.0"?>
<robot name="arm2">
  <link name="base"/>
  <link name="l1">
    <inertial><origin xyz="0 0.01 0.1"/><mass value="1.0"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.005"/></inertial>
    {mesh}
  </link>
  <link name="l2">{l2}</link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/><limit lower="-2" upper="2" effort="10" velocity="2"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="{reach} 0 0.2"/><axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="10" velocity="2"/></joint>
</robot>
"""


def _err(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    return err


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def arm_result(tmp_path_factory) -> tuple[Path, Path]:
    """(the massive arm's URDF, `identify dynamic --json` of a MuJoCo recording of it named by robot_source)."""
    from drivers.emulators.mujoco_arm import arm_efforts

    d = tmp_path_factory.mktemp("arm")
    truth = _write(d / "truth.urdf", _arm(L2_MASS))
    model = load_urdf(truth)
    t = np.arange(3000) / 200.0
    w = 2 * np.pi * np.array([[0.13, 0.31, 0.47], [0.17, 0.29, 0.53]])
    A = np.array([[0.9, 0.5, 0.3], [0.8, 0.4, 0.3]])
    arg = w[None] * t[:, None, None]
    q, qd = (A * np.sin(arg)).sum(-1), (A * w * np.cos(arg)).sum(-1)
    qdd = -(A * w**2 * np.sin(arg)).sum(-1)
    _, tau = arm_efforts(model, URDF_SET, q, qd, qdd)
    rec = DynamicRecording(model.name, model.root, list(model.joint_names), t, q, tau,
                           meta={"robot_source": str(truth)})  # fmt: skip
    write_dynamic_recording(rec, d / "rec.csv")
    out = d / "res.json"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["identify", "dynamic", str(d / "rec.csv"), "--json"]) == 0
    out.write_text(buf.getvalue())
    return truth, out


# 1. a truncated or unclosed URDF is refused, with the line


def test_truncated_urdf_is_refused_with_its_line(tmp_path, capsys):
    text = UR5.read_text()
    cut = _write(tmp_path / "t.urdf", text[:5200])
    err = _err(capsys, ["model", "show", str(cut)])
    assert "not well-formed XML (line" in err
    unclosed = _write(tmp_path / "u.urdf", text.replace("</robot>", ""))
    assert "not well-formed XML" in _err(capsys, ["model", "show", str(unclosed)])
    assert main(["model", "show", str(UR5)]) == 0  # the whole file still loads


# 2. a result names its robot; another robot's or other kinematics' is refused


def test_result_names_its_robot_and_other_kinematics_are_refused(arm_result, tmp_path, capsys):
    truth, res = arm_result
    d = json.loads(res.read_text())
    assert d["robot"] == "arm2" and Path(d["robot_source"]) == truth
    longer = _write(tmp_path / "longer.urdf", _arm(L2_MASS, reach="0.08"))
    err = _err(
        capsys, ["model", "export", str(longer), "--params", str(res), "--out", str(tmp_path / "x.urdf")]
    )
    assert "kinematics differ" in err and not (tmp_path / "x.urdf").exists()
    other = _write(tmp_path / "other.urdf", _arm(L2_MASS).replace('name="arm2"', 'name="arm3"'))
    err = _err(
        capsys, ["model", "export", str(other), "--params", str(res), "--out", str(tmp_path / "y.urdf")]
    )
    assert "'arm2', not 'arm3'" in err
    # its own kinematics (a copy elsewhere) export fine
    copy = _write(tmp_path / "copy.urdf", truth.read_text())
    out = tmp_path / "ok.urdf"
    assert main(["model", "export", str(copy), "--params", str(res), "--out", str(out), "--nearest"]) == 0


def test_ur10_refuses_a_ur5_result_without_robot_key(tmp_path, capsys):
    """Terms stated, no robot named (an older result): the row-space check alone refuses other kinematics."""
    ur5 = get_model(str(UR5))
    res = _result(ur5, ur5.parameter_set(URDF_SET), tmp_path / "r.json")
    d = json.loads(res.read_text())
    res.write_text(json.dumps({"parameters": d["parameters"]}))
    ur10 = ERD / "ur_description/urdf/ur10_robot.urdf"
    err = _err(
        capsys, ["model", "export", str(ur10), "--params", str(res), "--out", str(tmp_path / "u.urdf")]
    )
    assert "not those of 'ur10'" in err and "kinematics differ" in err


# 3. + 6. + 7. a massless moving link gets a body; --nearest reports what it wrote; --force only overwrites


def _result(model, ps, path: Path, se: float = 0.01, shift: float = 0.0) -> Path:
    """A joint-torque result as `identify dynamic --json` states it: the base values of `ps` (+ `shift`·a fixed
    pattern scaled by the largest value), each with its exact terms and an SE."""
    from robots.base_params import RegressorSpec, cached_dynamic_base

    db = cached_dynamic_base(model, RegressorSpec("torque", model.root))
    K, v = db.combination_matrix(), db.values(dyn.standard_parameters(model, ps))
    v = v + shift * np.abs(v).max() * np.sin(np.arange(len(v)))
    params = [{"symbol": f"ϑ{a + 1}", "formula": db.formula(a), "value": float(v[a]), "se": se,
               "terms": {db.names[i]: float(K[a, i]) for i in np.flatnonzero(K[a])}} for a in range(len(v))]  # fmt: skip
    return _write(path, json.dumps({"parameters": params, "robot": model.name}))


def test_massless_link_export_nearest_report_and_flags(tmp_path, capsys):
    """The review's case: l2 moves on its own axis, so its mass is not identifiable but its first moments are."""
    truth = _write(tmp_path / "truth.urdf", _arm(L2_MASS, reach="0"))
    model = load_urdf(truth)
    res = _result(model, model.parameter_set(URDF_SET), tmp_path / "res.json")
    bare = _write(tmp_path / "bare.urdf", _arm("", reach="0"))
    out = tmp_path / "n.urdf"
    argv = ["model", "export", str(bare), "--params", str(res), "--out", str(out)]
    assert main([*argv, "--inconsistent", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["params"]["placeholder_bodies"] == ["l2"] and "l2" in d["inertials_inserted"]
    written = read_inertials(out)
    assert written["l2"].mass > 0
    # the base parameters as written are the identified ones
    assert d["written_fit"]["base_residual"] < 1e-9
    assert d["violations"]  # the min-norm set breaks l2's consistency here
    # --force only overwrites: the inconsistent set still needs --inconsistent, and poise loads what it writes
    err = _err(capsys, [*argv, "--force"])
    assert "--inconsistent writes them anyway" in err and "l2" in err
    assert "exists" in _err(capsys, [*argv, "--inconsistent"])  # not overwritten without --force
    assert main([*argv, "--force", "--nearest", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["used_nearest"] and d["consistent"]
    # --nearest: the summary's residual is that of the set written, not of the min-norm set
    assert d["written_fit"]["base_residual"] == pytest.approx(d["nearest"]["base_error"])
    assert d["written_fit"]["base_residual"] > d["params"]["base_residual"]
    back = load_urdf(out)  # what --nearest writes, poise loads
    assert back.params[URDF_SET].mass["l2"] > 0 and model.nq == back.nq


def test_nearest_text_reports_the_written_residual(tmp_path, capsys):
    """UR5, a result the min-norm set breaks consistency for: the line printed is the written set's error."""
    ur5 = get_model(str(UR5))
    res = _result(ur5, ur5.parameter_set(URDF_SET), tmp_path / "r.json", shift=0.3)  # far from consistent
    out = tmp_path / "n.urdf"
    argv = ["model", "export", str(UR5), "--params", str(res), "--out", str(out), "--nearest"]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["used_nearest"] and d["written_fit"]["base_residual"] > 1e-6
    assert d["written_fit"]["max_abs_z"] > 1
    assert main([*argv, "--force"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"reproduced to {d['written_fit']['base_residual']:.2g}" in text
    assert f"{d['written_fit']['max_abs_z']:.3g} SE off" in text


# 4. relative mesh paths follow the export to another folder


def test_relative_mesh_paths_are_rewritten_for_the_output_folder(tmp_path, capsys):
    lab = tmp_path / "lab"
    (lab / "meshes").mkdir(parents=True)
    (lab / "meshes" / "l1.stl").write_text("solid x\nendsolid x\n")
    mesh = ('<visual><geometry><mesh filename="meshes/l1.stl"/></geometry></visual>'
            '<visual><geometry><mesh filename="package://nopkg/m.stl"/></geometry></visual>')  # fmt: skip
    src = _write(lab / "arm.urdf", _arm(L2_MASS, mesh=mesh))
    model = load_urdf(src)
    ps = model.parameter_set(URDF_SET)
    ps.mass["l1"] = 1.5
    out = tmp_path / "elsewhere" / "arm_id.urdf"
    out.parent.mkdir()
    res = export_urdf(src, model, ps, out=out)
    out.write_text(res.text)
    assert res.paths_rewritten == 1 and 'filename="package://nopkg/m.stl"' in res.text
    import re

    rel = re.search(r'filename="([^"]*l1\.stl)"', res.text).group(1)
    assert (out.parent / rel).resolve() == (lab / "meshes" / "l1.stl").resolve()
    same = export_urdf(src, model, ps, out=lab / "x.urdf")
    assert same.paths_rewritten == 0 and 'filename="meshes/l1.stl"' in same.text


# 5. + 11. refusals in one line, naming the file and the element


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        (_arm(L2_MASS).replace('type="revolute"', 'type="fixed"'), "no moving joint"),
        ('<sdf version="1.6"><model name="x"/></sdf>', "the root element is <sdf>, not <robot>"),
        (_arm(L2_MASS).replace('<robot name="arm2">', "<robot>"), "<robot> has no name attribute"),
        (
            _arm(L2_MASS).replace('<axis xyz="0 1 0"/>', '<axis xyz="0 1 0"/><mimic joint="jx"/>'),
            "mimics 'jx', which does not exist",
        ),
        (_arm(L2_MASS).replace('name="j2"', 'name="j1"'), "duplicate joint names ('j1')"),
    ],
)
def test_refusals_name_the_file(tmp_path, capsys, text, expect):
    f = _write(tmp_path / "r.urdf", text)
    err = _err(capsys, ["model", "show", str(f)])
    assert expect in err and str(f) in err


def test_limit_without_range_warns(tmp_path):
    f = _write(tmp_path / "z.urdf", _arm(L2_MASS).replace('lower="-2" upper="2" effort', "effort", 1))
    model = load_urdf(f)
    assert any("'j1'" in w and "[0, 0]" in w for w in model.warnings)
    assert not any("'j2'" in w for w in model.warnings)


# 8. encodings


def test_utf8_across_byte_4096_and_latin1_load_and_export(tmp_path):
    text = _arm(L2_MASS)
    head = text.index("<robot")
    pad = 4095 - len(text[:head].encode()) - len("<!-- ")
    straddling = text[:head] + "<!-- " + "x" * pad + "é -->\n" + text[head:]
    assert straddling.encode()[4095:4097] == "é".encode()
    assert load_urdf(_write(tmp_path / "u.urdf", straddling)).nq == 2
    latin = text.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="ISO-8859-1"?>')
    latin = latin.replace("<robot", "<!-- café -->\n<robot", 1)
    f = tmp_path / "l.urdf"
    f.write_bytes(latin.encode("latin-1"))
    model = load_urdf(f)
    ps = model.parameter_set(URDF_SET)
    ps.mass["l2"] = 0.8
    res = export_urdf(f, model, ps)
    assert res.data.decode("latin-1") == res.text and "café" in res.text
    out = tmp_path / "l_id.urdf"
    out.write_bytes(res.data)
    assert load_urdf(out).params[URDF_SET].mass["l2"] == 0.8


# 9. float noise is no change


def test_float_noise_leaves_links_byte_for_byte():
    model = get_model(str(ERD / "panda_description/urdf/panda.urdf"))
    prior = model.parameter_set(URDF_SET)
    noisy = parameter_set_from_standard(model, dyn.standard_parameters(model, prior), prior, "round trip")
    assert any(noisy.inertia[n] != prior.inertia[n] for n in prior.mass)  # the conversion does add noise
    res = export_urdf(model.source, model, noisy)
    assert res.changed == [] and res.text == Path(model.source).read_text()


# 10. MuJoCo refusals name the joint or link


def test_mujoco_twin_names_massless_link_and_simulates_mimic_joint(tmp_path):
    from drivers.emulators.mujoco_arm import arm_efforts

    q = np.zeros((2, 2))
    bare = load_urdf(_write(tmp_path / "b.urdf", _arm("")))
    with pytest.raises(DataError, match=r"link 'l2'.*no mass or no inertia") as exc:
        arm_efforts(bare, URDF_SET, q, q, q)
    assert "\n" not in str(exc.value)
    three = _arm(L2_MASS).replace(
        "</robot>",
        '<link name="l3">' + L2_MASS + '</link><joint name="j3" type="revolute"><parent link="l2"/>'
        '<child link="l3"/><axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="1" velocity="1"/>'
        '<mimic joint="j2"/></joint></robot>',
    )
    mimic = load_urdf(_write(tmp_path / "m.urdf", three))
    # a mimic joint is a MuJoCo joint equality: its load lands on the leader's effort, as poise's model has it
    rng = np.random.default_rng(3)
    state = [rng.uniform(-1.0, 1.0, (4, 2)) for _ in range(3)]
    expected = dyn.rnea(mimic, *state, URDF_SET)
    assert np.allclose(arm_efforts(mimic, URDF_SET, *state)[1], expected, atol=1e-9)


def test_unchanged_copy_is_identical(tmp_path):
    """An export of the file's own set is the file (no noise, no path rewrite in the same folder)."""
    src = tmp_path / "ur5.urdf"
    shutil.copy(UR5, src)
    model = load_urdf(src)
    res = export_urdf(src, model, model.parameter_set(URDF_SET), out=tmp_path / "same.urdf")
    assert res.text == src.read_text() and res.changed == []
