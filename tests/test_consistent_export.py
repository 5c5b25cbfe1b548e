"""`poise model export --consistent`: a dynamic identification written into the URDF as the physically consistent
set closest to the URDF's whose base parameters lie within the stated SEs of the identified ones — where the
minimum-norm full set (which reproduces them exactly) is not consistent. On MuJoCo efforts of the stored UR5
design (`simulate trajectory`, its perturbed truth), the set must also be nearer that truth than the URDF is."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import UR5

from formats.errors import DataError
from poise.cli import main
from robots import dynamics as dyn
from robots.consistent_set import consistent_within_se, pseudo_inertia
from robots.full_set import load_full_set
from robots.params_io import resolve_params
from robots.physical import violations
from robots.registry import get_model
from robots.urdf import load_urdf

PLAN = Path(__file__).parent / "data" / "ur5_6s.json"


@pytest.fixture(scope="module")
def identified(tmp_path_factory):
    d = tmp_path_factory.mktemp("consistent")
    assert main(["simulate", "trajectory", str(PLAN), "--out", str(d / "rec.csv"), "--truth-out",
                 str(d / "truth.json")]) == 0  # fmt: skip
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["identify", "dynamic", str(d / "rec.csv"), "--json"]) == 0
    (d / "result.json").write_text(buf.getvalue())
    return d


def test_the_minimum_norm_set_is_inconsistent_and_the_consistent_one_lies_within_two_se(identified, capsys):
    model = get_model(str(UR5))
    urdf = identified / "c.urdf"
    assert main(["model", "export", str(UR5), "--params", str(identified / "result.json"), "--out",
                 str(identified / "m.urdf")]) == 2  # fmt: skip
    assert "physically inconsistent parameters" in capsys.readouterr().err
    argv = [
        "model",
        "export",
        str(UR5),
        "--params",
        str(identified / "result.json"),
        "--out",
        str(urdf),
        "--json",
    ]
    assert main(argv + ["--consistent"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (
        summary["consistent_fit"]["within_se"] == 2.0 and summary["consistent_fit"]["max_abs_z"] <= 2.0 + 1e-6
    )
    exported = load_urdf(urdf)  # the written URDF itself, re-imported
    ps = exported.parameter_set(next(iter(exported.params)))
    assert not violations(ps, [lk.name for lk in exported.links], ps.mass)
    fs = load_full_set(identified / "result.json", model)
    phi = dyn.standard_parameters(model, ps)
    z = (fs.base_matrix @ phi - fs.base_values) / fs.base_se
    assert np.abs(z).max() <= 2.0 + 1e-6
    truth = dyn.standard_parameters(model, resolve_params(str(identified / "truth.json"), model))
    prior = dyn.standard_parameters(model, model.parameter_set(next(iter(model.params))))
    assert np.linalg.norm(phi - truth) < np.linalg.norm(prior - truth)  # the data moved it toward the truth


def test_no_consistent_set_that_close_is_one_line(identified, capsys):
    argv = ["model", "export", str(UR5), "--params", str(identified / "result.json"), "--out",
            str(identified / "x.urdf"), "--consistent", "0.05"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no physically consistent set" in err and len(err.strip().splitlines()) == 1
    assert not (identified / "x.urdf").exists()
    for extra, message in ((["--nearest"], "give one"),):
        assert main(argv[:-1] + ["2"] + extra) == 2
        assert message in capsys.readouterr().err


def test_every_links_pseudo_inertia_is_positive_semidefinite_in_the_solution(identified):
    model = get_model(str(UR5))
    fs = load_full_set(identified / "result.json", model)
    prior = model.parameter_set(next(iter(model.params)))
    fit = consistent_within_se(model, fs.base_matrix, fs.base_values, fs.base_se, prior, 3.0)
    phi = dyn.standard_parameters(model, fit.params)
    for i, lk in enumerate(model.links):
        assert np.linalg.eigvalsh(pseudo_inertia(phi[10 * i : 10 * i + 10])).min() > -1e-9, lk.name
    assert fit.max_abs_z <= 3.0 + 1e-6
    with pytest.raises(DataError, match="positive, finite SE"):
        consistent_within_se(model, fs.base_matrix, fs.base_values, 0 * fs.base_se, prior, 2.0)


def test_a_result_is_recognised_whatever_order_and_last_digit_its_formulas_were_printed_in(
    identified, tmp_path
):
    """Base formulas print their terms in the order and to the digit the machine's floating point gives (a result
    written with one CPU's BLAS kernels read 0.3923·m@wrist_1_link where another prints 0.3922): the same
    combination is recognised; another (a coefficient 1 % off, a term more) is not."""
    from robots.base_params import same_formula

    d = json.loads((identified / "result.json").read_text())
    for p in d["parameters"]:  # a result written before the exact terms: read by its formulas
        p.pop("terms", None)
    longest = max(d["parameters"], key=lambda p: len(p["formula"]))
    head, *rest = longest["formula"].split(" + ")
    assert rest, longest["formula"]
    reordered = " + ".join([head, *reversed(rest)])
    assert same_formula(longest["formula"], reordered)
    longest["formula"] = reordered
    (tmp_path / "r.json").write_text(json.dumps(d))
    model = get_model(str(UR5))
    assert load_full_set(tmp_path / "r.json", model).base_values is not None  # by the formula path
    longest["formula"] = longest["formula"].replace(" + ", " − ", 1)
    (tmp_path / "r.json").write_text(json.dumps(d))
    with pytest.raises(DataError, match="match none"):
        load_full_set(tmp_path / "r.json", model)
    assert not same_formula("Izz@a + 0.1925·m@b", "Izz@a + 0.1944·m@b")
    assert not same_formula("Izz@a + 0.1925·m@b", "Izz@a + 0.1925·m@b + 0.02·m@c")
    assert same_formula("Izz@a + 0.3923·m@b", "Izz@a + 0.3922·m@b")


def test_a_result_states_its_exact_combinations_and_is_read_in_any_basis(identified, tmp_path):
    """`identify dynamic` writes each base parameter's exact `terms`, and the export takes the base from them, not
    from this machine's pivoting: another CPU's BLAS kernels break the iCub arm's symmetric ties otherwise and its
    formulas match no base here (measured: a result written with Haswell's kernels was refused with SkylakeX's).
    Here a result in another basis (ϑ1 + ϑ2 in place of ϑ1, its formula text unknown here) exports the same set."""
    from robots.base_params import RegressorSpec, cached_dynamic_base

    model = get_model(str(UR5))
    d = json.loads((identified / "result.json").read_text())
    base = [p for p in d["parameters"] if not p["symbol"].startswith(("fv@", "fc@"))]
    assert all("terms" in p for p in base)
    fs = load_full_set(identified / "result.json", model)
    np.testing.assert_array_equal(
        fs.base_matrix, cached_dynamic_base(model, RegressorSpec("torque", model.root)).combination_matrix()
    )
    first, second = base[0], base[1]
    first["terms"] = {
        k: first["terms"].get(k, 0.0) + second["terms"].get(k, 0.0)
        for k in {**first["terms"], **second["terms"]}
    }
    first["value"] += second["value"]
    first["formula"] = "a combination another machine's pivoting chose"
    (tmp_path / "other.json").write_text(json.dumps(d))
    other = load_full_set(tmp_path / "other.json", model)
    np.testing.assert_allclose(
        dyn.standard_parameters(model, other.params),
        dyn.standard_parameters(model, fs.params),
        rtol=1e-9,
        atol=1e-9,
    )
    first["terms"]["Izz@no_such_link"] = 1.0
    (tmp_path / "bad.json").write_text(json.dumps(d))
    with pytest.raises(DataError, match="no standard parameter"):
        load_full_set(tmp_path / "bad.json", model)
