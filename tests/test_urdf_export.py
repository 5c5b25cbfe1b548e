"""URDF export of identified parameters: byte-preserving round trip, only <inertial> changes, base → full set,
physical consistency (refusal, force, nearest set) and the `poise model export` command."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import UR5
from lxml import etree
from scipy.optimize import minimize

from formats.dynamic_recording import DynamicRecording
from formats.errors import DataError
from formats.parameter_set import ParameterSet, save_parameter_set
from poise.cli import main
from robots import dynamics as dyn
from robots.base_params import RegressorSpec, cached_dynamic_base
from robots.full_set import load_full_set
from robots.params_io import perturbed
from robots.physical import nearest_consistent, principal_moments, project_inertia, violations
from robots.registry import get_model
from robots.urdf import URDF_SET, load_urdf
from robots.urdf_export import export_urdf, read_inertials

ROBOTS = ["tulip", "icub-right-arm", "doggy", str(UR5)]


def _main_set(model) -> ParameterSet:
    return model.parameter_set(next(iter(model.params)))


def _inertial_lines(text: str, links: set[str] | None = None) -> set[int]:
    """0-based line numbers covered by <inertial> elements (of the named links), found by lxml."""
    root = etree.fromstring(text.encode())
    lines: set[int] = set()
    for link in root.findall("link"):
        ine = link.find("inertial")
        if ine is None or (links is not None and link.get("name") not in links):
            continue
        last = max(el.sourceline for el in ine.iter())
        lines.update(range(ine.sourceline - 1, last + 1))  # + the line of </inertial>
    return lines


def _changed_lines(old: str, new: str) -> set[int]:
    """Lines of `old` that differ in `new` (after a line diff)."""
    sm = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    out: set[int] = set()
    for op, i1, i2, _, _ in sm.get_opcodes():
        if op != "equal":
            out.update(range(i1, max(i2, i1 + 1)))
    return out


def _link_frame(model, ps: ParameterSet) -> dict[str, np.ndarray]:
    out = {}
    for lk in model.links:
        I6 = ps.inertia[lk.name]
        com = np.multiply(ps.com[lk.name], lk.com_sign) if ps.mass[lk.name] else np.zeros(3)
        out[lk.name] = np.array([ps.mass[lk.name], *com, *I6])
    return out


def _reimport_error(model, ps: ParameterSet, path: Path) -> float:
    got = load_urdf(path).params[URDF_SET]
    want = _link_frame(model, ps)
    err = 0.0
    for n, w in want.items():
        g = np.array([got.mass[n], *(got.com[n] if got.mass[n] else (0, 0, 0)), *got.inertia[n]])
        err = max(err, float(np.max(np.abs(g - w) / np.maximum(1.0, np.abs(w)))))
    return err


@pytest.mark.parametrize("robot", ROBOTS, ids=["tulip", "icub-right-arm", "doggy", "ur5"])
def test_round_trip_unchanged_is_byte_identical(robot, tmp_path):
    model = get_model(robot)
    src = Path(model.source)
    text = src.read_text(encoding="utf-8")
    res = export_urdf(src, model, _main_set(model))
    assert res.text == text and not res.changed and not res.edits
    # Rewriting every inertial (the input's rpy convention kept) gives the same model, edits inside inertials.
    forced = export_urdf(src, model, _main_set(model), force=True, rewrite_all=True)
    out = tmp_path / src.name
    out.write_text(forced.text, encoding="utf-8")
    assert _reimport_error(model, _main_set(model), out) <= 1e-12
    assert _changed_lines(text, forced.text) <= _inertial_lines(text)


@pytest.mark.parametrize("robot", ROBOTS, ids=["tulip", "icub-right-arm", "doggy", "ur5"])
def test_perturbed_export_changes_only_inertials(robot, tmp_path):
    model = get_model(robot)
    src = Path(model.source)
    text = src.read_text(encoding="utf-8")
    truth = perturbed(_main_set(model), np.random.default_rng(5), inertia_rel=0.2)
    res = export_urdf(src, model, truth, force=bool(robot == "tulip"))  # Table D.3 inertias are inconsistent
    massive = {lk.name for lk in model.links if _main_set(model).mass[lk.name] > 0}
    assert set(res.changed) == massive
    changed = _changed_lines(text, res.text)
    assert changed and changed <= _inertial_lines(text, set(res.changed))
    out = tmp_path / src.name
    out.write_text(res.text, encoding="utf-8")
    assert _reimport_error(model, truth, out) <= 1e-12
    # Everything outside the edited spans is the input's, byte for byte.
    pos, kept = 0, []
    for s, e in res.edits:
        kept.append(text[pos:s])
        pos = e
    kept.append(text[pos:])
    assert all(piece in res.text for piece in kept if len(piece) > 40)
    assert sum(e - s for s, e in res.edits) < 0.1 * len(text)


def test_inserted_inertial_rotated_origin_and_comments(tmp_path):
    """A link without <inertial> (also self-closing), a rotated inertial frame, a commented-out <inertial>."""
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(
        """<?xml version="1.0"?>
<robot name="arm">
  <!-- <link name="b"><inertial><mass value="9"/></inertial></link> -->
  <link name="a">
    <inertial>
      <origin xyz="0 0 0.1" rpy="0.3 -0.2 1.1"/>
      <mass value="2"/>
      <inertia ixx="0.03" ixy="0.001" ixz="0" iyy="0.02" iyz="0" izz="0.025"/>
    </inertial>
  </link>
  <link name="b"/>
  <link name="c">
    <visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual>
  </link>
  <joint name="j1" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="j2" type="revolute"><parent link="b"/><child link="c"/><origin xyz="0.2 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>
"""
    )
    model = load_urdf(urdf)
    ps = _main_set(model)
    new = ParameterSet(
        "x",
        {**ps.mass, "a": 2.5, "b": 0.7, "c": 1.2},
        {**ps.com, "a": (0.01, 0.0, 0.12), "b": (0.0, 0.05, 0.0), "c": (0.1, 0.0, 0.0)},
        {},
        {**ps.inertia, "a": (0.04, 0.001, 0.0, 0.03, 0.0, 0.035), "b": (1e-3, 0, 0, 1e-3, 0, 1e-3),
         "c": (2e-3, 0, 0, 2e-3, 0, 1e-3)},
    )  # fmt: skip
    res = export_urdf(urdf, model, new)
    assert sorted(res.inserted) == ["b", "c"] and sorted(res.changed) == ["a", "b", "c"]
    assert '<origin xyz="0.01 0.0 0.12" rpy="0.3 -0.2 1.1"/>' in res.text  # rpy kept, xyz rewritten
    assert '<!-- <link name="b"><inertial><mass value="9"/></inertial></link> -->' in res.text
    out = tmp_path / "out.urdf"
    out.write_text(res.text)
    assert _reimport_error(model, new, out) <= 1e-12
    etree.fromstring(res.text.encode())  # well-formed


def test_dynamic_result_exports_a_full_set_with_its_base_values(tmp_path):
    """A real estimator result (MuJoCo twin → DynamicEstimator) → full set → URDF → same base values."""
    from drivers.emulators.mujoco_arm import arm_efforts
    from identify.dynamic import DynamicEstimator

    model = get_model(str(UR5))
    truth = perturbed(model.parameter_set("urdf"), np.random.default_rng(7), 0.1, 0.01, inertia_rel=0.2)
    t = np.arange(4000) / 200.0
    rng = np.random.default_rng(3)
    w = 2 * np.pi * np.array([0.1, 0.2, 0.3, 0.5])
    A, ph = rng.uniform(-0.4, 0.4, (model.nq, 4)), rng.uniform(0, 2 * np.pi, (model.nq, 4))
    arg = w * t[:, None, None] + ph
    q, qd, qdd = (A * np.sin(arg)).sum(-1), (A * w * np.cos(arg)).sum(-1), -(A * w**2 * np.sin(arg)).sum(-1)
    qm, tau = arm_efforts(model, truth, q, qd, qdd)
    fit = (
        DynamicEstimator(model)
        .fit(DynamicRecording(model.name, model.root, model.joint_names, t, qm, tau))
        .fit_
    )
    result = tmp_path / "result.json"
    result.write_text(json.dumps(fit.to_dict()))
    fs = load_full_set(result, model)
    db = cached_dynamic_base(model, RegressorSpec("torque", model.root))
    identified = fit.values[: db.rank]
    assert fs.kind == "dynamic result" and fs.imposed == db.rank
    assert np.allclose(db.values(dyn.standard_parameters(model, fs.params)), identified, rtol=0, atol=1e-9)
    out = tmp_path / "ur5_identified.urdf"
    assert (
        main(["model", "export", str(UR5), "--params", str(result), "--out", str(out), "--inconsistent"]) == 0
    )
    # Written inconsistent as asked (the min-norm set breaks consistency here), so read without the importer's checks.
    back = read_inertials(out)
    phi = np.concatenate([dyn.link_standard(*_or_zero(back, n)) for n in [lk.name for lk in model.links]])
    assert np.max(np.abs(db.values(phi) - identified)) < 1e-9
    text, new = UR5.read_text(), out.read_text()
    assert _changed_lines(text, new) <= _inertial_lines(text)


def _or_zero(inertials, name):
    ine = inertials.get(name)
    return (ine.mass, ine.com, ine.inertia) if ine is not None else (0.0, (0.0,) * 3, (0.0,) * 6)


def test_static_result_keeps_total_mass_and_com_inertias(tmp_path):
    from robots.com_variants import base_model

    model = get_model("tulip")
    prior = _main_set(model)
    truth = perturbed(prior, np.random.default_rng(4))
    bm = base_model(model, "right")
    values = bm.values(truth)
    est = list(range(0, bm.n, 2))
    doc = {
        "format": "poise static result", "version": 1, "robot": model.name, "base": "right",
        "parameters": [{"symbol": s, "value_m": float(values[g]), "se_m": 1e-4} for g, s in enumerate(bm.symbols)],
        "correlation": {"symbols": [bm.symbols[g] for g in est], "matrix": np.eye(len(est)).tolist()},
    }  # fmt: skip
    path = tmp_path / "static.json"
    path.write_text(json.dumps(doc))
    fs = load_full_set(path, model)
    got = bm.values(fs.params)
    assert np.max(np.abs(got[est] - values[est])) < 1e-12
    assert fs.params.total_mass == pytest.approx(prior.total_mass, rel=1e-12)
    assert fs.params.inertia == prior.inertia


def test_inconsistent_set_refused_forced_and_nearest(tmp_path):
    model = get_model(str(UR5))
    ps = _main_set(model)
    bad = ParameterSet(
        "bad",
        {**ps.mass, "forearm_link": -0.5},
        dict(ps.com),
        {},
        {**ps.inertia, "wrist_1_link": (1e-4, 0.0, 0.0, 1e-4, 0.0, 1e-2),
         "wrist_2_link": (-1e-3, 0.0, 0.0, 2e-3, 0.0, 2e-3)},
    )  # fmt: skip
    with pytest.raises(DataError) as exc:
        export_urdf(UR5, model, bad)
    msg = str(exc.value)
    assert "forearm_link: mass" in msg and "wrist_1_link" in msg and "triangle" in msg
    assert "wrist_2_link: inertia is not positive semidefinite" in msg
    forced = export_urdf(UR5, model, bad, force=True)
    assert {v.link for v in forced.violations} == {"forearm_link", "wrist_1_link", "wrist_2_link"}
    assert '<mass value="-0.5"/>' in forced.text
    links = [lk.name for lk in model.links]
    near, changes = nearest_consistent(bad, links, ps.mass)
    assert not violations(near, links, ps.mass)
    assert {c.link for c in changes} == {"forearm_link", "wrist_1_link", "wrist_2_link"}
    assert near.mass["forearm_link"] > 0 and near.com == bad.com
    assert all(near.inertia[n] == bad.inertia[n] for n in links if n not in {c.link for c in changes})
    export_urdf(UR5, model, near)  # accepted


def test_projection_is_the_nearest_consistent_tensor():
    rng = np.random.default_rng(0)
    for _ in range(8):
        Q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        lam = rng.uniform(-0.2, 1.0, 3) * [1, 1, 3]
        I = Q @ np.diag(lam) @ Q.T
        P = project_inertia(I)
        ev, tol = principal_moments(P)
        assert ev[0] >= -tol and ev[0] + ev[1] >= ev[2] - tol
        np.testing.assert_allclose(project_inertia(P), P, atol=1e-14)
        # an independent solver: the consistent tensors are exactly tr(Σ)·1 − Σ over second moments Σ = L·Lᵀ ⪰ 0
        # (a convex set, so with a full 3×3 factor L every local minimum is the global one), searched by BFGS
        # from a few starts. Not SLSQP on the eigenvalues: those constraints are not smooth where two coincide,
        # and with an AVX-512 machine's BLAS kernels SLSQP stopped at its iteration limit 1.4e-4 from the answer
        best = min((minimize(_distance_from, x0, args=(I,), method="BFGS", options={"gtol": 1e-12})
                    for x0 in rng.standard_normal((4, 6))), key=lambda r: r.fun)  # fmt: skip
        assert np.linalg.norm(P - I) <= np.sqrt(best.fun) + 1e-9
        np.testing.assert_allclose(_tensor_of(best.x), P, atol=1e-6)  # and it is the same tensor


def _tensor_of(x):
    L = np.zeros((3, 3))
    L[np.tril_indices(3)] = x
    S = L @ L.T
    return np.trace(S) * np.eye(3) - S


def _distance_from(x, I):
    return np.sum((_tensor_of(x) - I) ** 2)


def test_importer_shares_the_triangle_check(tmp_path):
    text = Path(get_model("tulip").source).read_text()
    bad = text.replace('ixx="0.455591"', 'ixx="-0.455591"', 1)
    assert bad != text
    p = tmp_path / "bad.urdf"
    p.write_text(bad)
    with pytest.raises(DataError, match="torso.*not positive definite"):
        load_urdf(p)
    assert any("triangle inequality" in w for w in load_urdf(Path(get_model("tulip").source)).warnings)


def _run(argv, capsys):
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_cli_export_json_and_errors(tmp_path, capsys):
    model = get_model(str(UR5))
    local = tmp_path / "ur5.urdf"
    shutil.copy(UR5, local)
    truth = perturbed(_main_set(model), np.random.default_rng(1), inertia_rel=0.1)
    good = tmp_path / "truth.json"
    save_parameter_set(truth, good)
    out = tmp_path / "new.urdf"
    rc, stdout, _ = _run(
        ["model", "export", str(local), "--params", str(good), "--out", str(out), "--json"], capsys
    )
    assert rc == 0
    d = json.loads(stdout)
    massive = [lk.name for lk in model.links if truth.mass[lk.name] > 0]
    assert d["written"] and d["consistent"] and d["links_changed"] == massive
    assert 0 < d["max_change"]["mass_kg"] <= 0.1 * max(truth.mass.values())
    assert d["reimport_max_error"] <= 1e-12
    before = local.read_bytes()
    doc = json.loads(good.read_text())
    nan = dict(doc, mass={**doc["mass"], "forearm_link": float("nan")})
    unknown = dict(doc, mass={**doc["mass"], "tail_link": 1.0})
    dyn_nan = {"parameters": [{"symbol": "ϑ1", "formula": "Izz@shoulder_link", "value": float("nan")}]}
    tulip_res = {"parameters": [{"symbol": "ϑ1", "formula": "Izz@hip_r_z", "value": 1.0}]}
    cases = {"nan.json": nan, "unknown.json": unknown, "dyn_nan.json": dyn_nan, "tulip.json": tulip_res}
    for name, content in cases.items():
        (tmp_path / name).write_text(json.dumps(content))
    expect = {
        "nan.json": "finite",
        "unknown.json": "tail_link",
        "dyn_nan.json": "finite",
        "tulip.json": "another robot",
        "missing.json": "no such file",
    }
    for name, words in expect.items():
        argv = [
            "model",
            "export",
            str(local),
            "--params",
            str(tmp_path / name),
            "--out",
            str(tmp_path / "x.urdf"),
        ]
        rc, _, err = _run(argv, capsys)
        assert rc == 2 and err.count("\n") == 1 and words in err and "Traceback" not in err, err
    rc, _, err = _run(
        ["model", "export", str(local), "--params", str(good), "--out", str(local), "--force"], capsys
    )
    assert rc == 2 and "the same file as robot" in err  # the input URDF, even with --force
    assert local.read_bytes() == before and not (tmp_path / "x.urdf").exists()


def test_cli_refuses_inconsistent_and_writes_nearest(tmp_path, capsys):
    model = get_model(str(UR5))
    ps = _main_set(model)
    bad = ParameterSet("bad", dict(ps.mass), dict(ps.com), {},
                       {**ps.inertia, "wrist_3_link": (1e-5, 0.0, 0.0, 1e-5, 0.0, 1e-3)})  # fmt: skip
    f = tmp_path / "bad.json"
    save_parameter_set(bad, f)
    out = tmp_path / "n.urdf"
    rc, stdout, err = _run(["model", "export", str(UR5), "--params", str(f), "--out", str(out)], capsys)
    assert rc == 2 and "wrist_3_link" in err and "triangle" in err and not out.exists()
    assert "nearest physically consistent set" in stdout and "wrist_3_link" in stdout
    rc, stdout, err = _run(
        ["model", "export", str(UR5), "--params", str(f), "--out", str(out), "--json"], capsys
    )
    summary = json.loads(stdout)  # one object: what was found, and the error as every --json error says it
    assert rc == 2 and summary["ok"] is False and summary["written"] is False
    assert err.strip() == f"poise: error: {summary['error']}" and "nearest" in summary
    rc, stdout, _ = _run(["model", "export", str(UR5), "--params", str(f), "--out", str(out), "--nearest", "--json"],
                         capsys)  # fmt: skip
    d = json.loads(stdout)
    assert rc == 0 and d["used_nearest"] and d["consistent"] and d["links_changed"] == ["wrist_3_link"]
    back = load_urdf(out).params[URDF_SET]
    ev, tol = principal_moments(back.inertia["wrist_3_link"])
    assert ev[0] + ev[1] >= ev[2] - tol
