"""Review of `plan check|augment|postures` and `model show`: unidentifiable plans fail, augment mends them and
refuses infeasible ones, `--params` keeps the plan's geometry, options that would be ignored are refused."""

import json
import re

import numpy as np
import pytest
from conftest import one_line_error

from design.criteria import min_postures, n_identifiable
from drivers.emulators.testplan import random_plan
from formats.plan import load_plan, save_plan
from poise.cli import main


def _check(capsys, path, *extra) -> tuple[int, dict]:
    rc = main(["plan", "check", str(path), "--json", *extra])
    return rc, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def short(model):
    """One posture fewer than the CoP equations need."""
    return random_plan(model, min_postures(model) - 1, seed=5, margin=0.03)


def test_check_fails_a_plan_with_too_few_postures_naming_the_parameters(model, short, tmp_path, capsys):
    save_plan(short, tmp_path / "p.json")
    rc, report = _check(capsys, tmp_path / "p.json")
    assert rc == 1 and not report["ok"]
    (msg,) = [m for m in report["problems"] if "cannot identify" in m]
    n = len(short.postures)
    assert f"rank {2 * n} of {n_identifiable(model)}" in msg
    assert len(re.findall(r"ϑ\d+ \([^)]*\)", msg)) == n_identifiable(model) - 2 * n
    assert main(["plan", "check", str(tmp_path / "p.json")]) == 1
    out = capsys.readouterr().out
    assert "plan OK" not in out and "not identifiable" in out


def test_check_fails_repeated_postures_and_passes_distinct_ones(model, tmp_path, capsys):
    plan = random_plan(model, min_postures(model) + 1, seed=6, margin=0.03)
    save_plan(plan, tmp_path / "ok.json")
    assert _check(capsys, tmp_path / "ok.json")[0] == 0
    for p in plan.postures[-3:]:  # three postures become repeats of the first on its placement
        p.q, p.placement = plan.postures[0].q.copy(), plan.postures[0].placement
    plan.transitions = []
    save_plan(plan, tmp_path / "dup.json")
    rc, report = _check(capsys, tmp_path / "dup.json")
    assert rc == 1
    distinct = report["distinct_postures"]
    assert distinct == len(plan.postures) - 3
    (msg,) = [m for m in report["problems"] if f"({distinct} distinct) cannot identify" in m]
    named = re.findall(r"(ϑ\d+) \(([^)]*)\)", msg)
    assert len(named) == n_identifiable(model) - 2 * distinct
    assert main(["model", "show", "tulip", "--json"]) == 0  # each named as `model show` lists it
    listed = {(r["symbol"], r["column"]) for r in json.loads(capsys.readouterr().out)["base_parameters"]}
    assert set(named) <= listed


def test_augment_mends_an_unidentifiable_plan(model, short, tmp_path, capsys):
    src, out = tmp_path / "p.json", tmp_path / "p2.json"
    save_plan(short, src)
    assert main(["plan", "augment", str(src), "--add", "2", "--pool", "12", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kappa_before"] is None and np.isfinite(summary["kappa"][short.base])
    assert load_plan(out, model).settings["augmented"]["kappa_before"] is None
    assert _check(capsys, out)[0] == 0
    assert main(["plan", "augment", str(src), "--add", "1", "--out", str(tmp_path / "p3.json")]) == 0
    assert "κ not identifiable →" in capsys.readouterr().out


def test_augment_refuses_too_few_additions(model, short, tmp_path, capsys):
    for p in short.postures[-2:]:
        p.q = short.postures[0].q.copy()
        p.placement = short.postures[0].placement
    save_plan(short, tmp_path / "p.json")
    err = one_line_error(capsys, ["plan", "augment", str(tmp_path / "p.json"), "--add", "1",
                                  "--out", str(tmp_path / "o.json")])  # fmt: skip
    assert "--add 1 is too few" in err and "add at least" in err
    assert not (tmp_path / "o.json").exists()


def test_augment_refuses_a_plan_check_rejects_naming_the_posture(model, tmp_path, capsys):
    plan = random_plan(model, min_postures(model), seed=7, margin=0.03)
    plan.postures[2].q = plan.postures[2].q + 0.2  # the other sole off the ground
    save_plan(plan, tmp_path / "p.json")
    rc, report = _check(capsys, tmp_path / "p.json")
    first = next(m for m in report["problems"] if m.startswith("posture "))
    out = tmp_path / "o.json"
    err = one_line_error(
        capsys, ["plan", "augment", str(tmp_path / "p.json"), "--add", "1", "--out", str(out)]
    )
    assert rc == 1 and first in err and not out.exists()


def test_check_with_other_params_keeps_the_plans_geometry(model, short, tmp_path, capsys):
    """mc's lengths differ from sim's: the soles (feet gap) stay where the plan's geometry puts them."""
    assert model.params["mc"].lengths != model.params["sim"].lengths
    save_plan(short, tmp_path / "p.json")
    own = _check(capsys, tmp_path / "p.json")[1]["postures"]
    mc = _check(capsys, tmp_path / "p.json", "--params", "mc")[1]["postures"]
    assert [p["feet_gap_m"] for p in mc] == pytest.approx([p["feet_gap_m"] for p in own], abs=1e-9)
    assert [p["margin_m"] for p in mc] != pytest.approx([p["margin_m"] for p in own], abs=1e-4)


@pytest.mark.parametrize("flag", [["--simplified"], ["--motion", "double-support"], ["--motion", "free"]])
def test_model_show_refuses_dynamic_options_on_the_com_table(capsys, flag):
    err = one_line_error(capsys, ["model", "show", "tulip", *flag])
    assert flag[0] in err and "--regressor" in err
    assert main(["model", "show", "tulip", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["base_parameters"]


def test_postures_refuses_a_sigma_with_a_radius(tmp_path, capsys):
    argv = ["plan", "postures", "tulip", "--postures", "15", "--placements", "3", "--uncertainty", "0.001",
            "--uncertainty-sigma", "5", "--out", str(tmp_path / "p.json")]  # fmt: skip
    err = one_line_error(capsys, argv)
    assert "--uncertainty-sigma" in err and "RESULT.json" in err and not (tmp_path / "p.json").exists()


def test_postures_names_margin_too_large_and_json_has_min_margin(tmp_path, capsys):
    base = ["plan", "postures", "tulip", "--postures", "15", "--placements", "3", "--sharpness", "8"]
    err = one_line_error(capsys, [*base, "--margin", "0.5", "--out", str(tmp_path / "x.json")])
    widest = float(re.search(r"allows ([\d.]+) mm", err).group(1)) / 1000
    assert "--margin 0.5" in err and 0 < widest < 0.5
    margin = round(widest - 0.01, 3)  # just inside what the feet allow: it designs
    out = tmp_path / "p.json"
    assert main([*base, "--margin", str(margin), "--no-transitions", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    plan = load_plan(out)
    assert summary["min_margin_m"] == pytest.approx(min(p.margin for p in plan.postures))
    assert summary["min_margin_m"] >= margin - 1e-6


def test_a_design_that_cannot_identify_fails_as_plan_check_would(tmp_path, capsys):
    """One start, one placement, 13 postures (seed 1) ends at κ ~1e17: the plan is written (for `plan augment`) but
    the command exits 1 naming the parameters, by `plan check`'s own rank decision."""
    out = tmp_path / "p.json"
    argv = ["plan", "postures", "tulip", "--postures", "13", "--placements", "1", "--starts", "1", "--seed", "1",
            "--out", str(out), "--json"]  # fmt: skip
    assert main(argv) == 1 and out.is_file()
    gaps = json.loads(capsys.readouterr().out)["unidentified"]
    assert len(gaps) == 1 and "cannot identify" in gaps[0] and "rank 22 of 25" in gaps[0]
    assert main(["plan", "check", str(out)]) == 1
