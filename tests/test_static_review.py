"""The static identification journey as a user meets it (simulate static → identify static): impossible CoPs,
posture ids, custom bipeds, repeats, extra columns, CoP spreads, robots without soles, reader gaps."""

import dataclasses
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from formats.static_recording import read_recording, write_recording
from identify.plots import bar_baseline, forecast_figure, save_figure
from identify.static import StaticCoMEstimator, mean_spread
from identify.synthetic import simulate_static
from poise.cli import main
from robots.com_variants import variant
from robots.stance import check_posture

TULIP = Path(__file__).resolve().parents[1] / "robots" / "data" / "tulip"


@pytest.fixture(scope="module")
def rec(model):
    """A 40-posture recording whose posture ids are not row numbers (500, 501, …)."""
    r = simulate_static(model, 40, "mc", cop_noise=0.003, seed=4)
    return dataclasses.replace(r, posture=r.posture + 500)


def _identify(path, capsys, *extra) -> tuple[int, str, str]:
    code = main(["identify", "static", str(path), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def _write(tmp_path, rec, name="r.csv") -> Path:
    path = tmp_path / name
    write_recording(path, rec)
    return path


def _need(model, name="full") -> int:
    return -(-len(variant(model, "right", name).estimated) // 2)


def test_cop_far_outside_the_soles_is_named(tmp_path, capsys, model, rec):
    cop = rec.cop.copy()
    cop[3, 0] += 1.5
    path = _write(tmp_path, dataclasses.replace(rec, cop=cop))
    code, out, err = _identify(path, capsys)
    assert code == 0 and "warning" in err and "1 of 40 CoPs lie outside the support polygon" in err
    assert "posture 503" in err and "(posture 503)" in out  # also the worst residual
    doc = json.loads(_identify(path, capsys, "--json")[1])
    assert any("posture 503" in w for w in doc["warnings"]) and doc["cop_residual_norm_max_posture"] == 503
    assert check_posture(model, rec.q[3], "sim", "right", cop=cop[3]).margin < -1.0  # the shared check agrees


def test_cop_y_flipped_or_wrong_base_is_named(tmp_path, capsys, rec):
    flipped = dataclasses.replace(rec, cop=rec.cop * [1.0, -1.0])
    code, _, err = _identify(_write(tmp_path, flipped), capsys)
    assert "outside the support polygon" in err
    code, _, err = _identify(_write(tmp_path, dataclasses.replace(rec, base="left"), "l.csv"), capsys)
    assert "outside the support polygon" in err or "not in double support" in err
    named = [int(n) for n in re.findall(r"(?:posture |#)(\d+)", err)]
    assert named and all(500 <= n < 500 + len(rec.posture) for n in named)  # the file's ids (500…), not rows


def test_posture_ids_in_table_json_and_refusals(tmp_path, capsys, rec):
    path = _write(tmp_path, rec)
    code, out, _ = _identify(path, capsys, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["residual_postures"] == rec.posture.tolist()
    norms = np.linalg.norm(np.array(doc["residuals_m"]), axis=1)
    assert doc["cop_residual_norm_max_posture"] == rec.posture[np.argmax(norms)]
    code, out, _ = _identify(path, capsys)
    assert f"(posture {doc['cop_residual_norm_max_posture']})" in out
    q = rec.q.copy()
    q[7, 9] += 0.6  # the left knee: the other foot leaves the ground
    code, _, err = _identify(_write(tmp_path, dataclasses.replace(rec, q=q), "o.csv"), capsys)
    assert code == 2 and "#507" in err and "#7 " not in err


def test_a_custom_biped_completes_the_journey(tmp_path, capsys):
    desc = tmp_path / "bot" / "mine.poise.toml"
    desc.parent.mkdir()
    shutil.copy(TULIP / "tulip.urdf", desc.parent / "tulip.urdf")
    for f in ("mc.json", "thesis_table_4_6.toml", "zmp_app_c.toml"):
        shutil.copy(TULIP / f, desc.parent / f)
    desc.write_text((TULIP / "tulip.poise.toml").read_text().replace('name = "tulip"', 'name = "mybiped"', 1))
    out = tmp_path / "r.csv"
    assert main(["simulate", "static", str(desc), "--out", str(out), "--postures", "30"]) == 0
    capsys.readouterr()
    assert read_recording(out).meta["robot_source"] == str(desc.resolve())
    code, text, err = _identify(out, capsys)
    assert code == 0, err
    assert "mybiped" in text
    # a recording naming a built-in robot but describing another is refused
    lied = tmp_path / "lied.csv"
    lied.write_text(out.read_text().replace("# robot: mybiped", "# robot: tulip"))
    code, _, err = _identify(lied, capsys)
    assert code == 2 and "'tulip'" in err and "mybiped" in err


def test_a_repeated_posture_is_named(tmp_path, capsys, model, rec):
    need = _need(model)
    part = dataclasses.replace(
        rec,
        posture=np.r_[rec.posture[: need - 1], 99],
        placement=np.r_[rec.placement[: need - 1], rec.placement[0]],
        q=np.r_[rec.q[: need - 1], rec.q[:1]],
        cop=np.r_[rec.cop[: need - 1], rec.cop[:1]],
        cop_sd=None,
        samples=None,
    )
    code, _, err = _identify(_write(tmp_path, part), capsys)
    assert code == 2 and "cannot identify" in err
    assert f"posture 99 repeats posture {rec.posture[0]}: {need - 1} distinct postures, {need} needed" in err


def test_a_column_that_is_no_joint_is_named_not_taken_for_degrees(tmp_path, capsys, rec):
    path = _write(tmp_path, rec)
    lines = path.read_text().splitlines()
    body = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    lines[body] += ",temp_c"
    lines[body + 1 :] = [line + ",25.0" for line in lines[body + 1 :]]
    path.write_text("\n".join(lines) + "\n")
    code, _, err = _identify(path, capsys)
    assert code == 2 and "temp_c" in err and "not joints" in err and "degrees" not in err


def test_weights_are_the_averaged_cops_sd(tmp_path, capsys, model, rec):
    """cop_sd is the per-sample spread: with `samples` n the same fit as the spread √n smaller and one sample."""
    n = np.random.default_rng(1).integers(1, 400, len(rec)).astype(float)
    spread = np.random.default_rng(2).uniform(0.002, 0.01, (len(rec), 2))
    a = dataclasses.replace(rec, cop_sd=spread, samples=n)
    b = dataclasses.replace(rec, cop_sd=spread / np.sqrt(n)[:, None], samples=None)
    fa = StaticCoMEstimator(model, "right", weighted=True).fit(a).result_
    fb = StaticCoMEstimator(model, "right", weighted=True).fit(b).result_
    fu = StaticCoMEstimator(model, "right", weighted=False).fit(a).result_
    assert np.allclose(fa.theta, fb.theta, atol=1e-12) and not np.allclose(fa.theta, fu.theta, atol=1e-6)
    assert np.allclose(mean_spread(a.cop_sd, a.samples, a.posture), b.cop_sd)


def test_simulated_spreads_match_the_noise(model):
    r = simulate_static(model, 20, "mc", cop_noise=0.004, seed=1)
    assert np.allclose(mean_spread(r.cop_sd, r.samples, r.posture), 0.004)
    assert len(np.unique(r.placement)) == len(r)  # each posture lands the other foot anew


def test_spread_problems_name_file_line_and_posture(tmp_path, capsys, rec):
    path = _write(tmp_path, rec)
    text = path.read_text()
    lines = text.splitlines()
    body = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    header = lines[body].split(",")
    k = header.index("cop_sd_x")

    def with_cell(row: int, value: str, name: str) -> Path:
        new = list(lines)
        cells = new[body + 1 + row].split(",")
        cells[k] = value
        new[body + 1 + row] = ",".join(cells)
        p = tmp_path / name
        p.write_text("\n".join(new) + "\n")
        return p

    code, _, err = _identify(with_cell(2, "-0.001", "neg.csv"), capsys)
    assert code == 2 and "neg.csv" in err and f"line {body + 4}" in err and f"posture {rec.posture[2]}" in err
    code, _, err = _identify(with_cell(4, "", "blank.csv"), capsys, "--weighted")
    assert code == 2 and f"posture(s) {rec.posture[4]}" in err and "no cop_sd" not in err
    assert _identify(with_cell(4, "", "blank.csv"), capsys)[0] == 0  # unweighted: spreads unused
    code, _, err = _identify(with_cell(1, "4.0", "mm.csv"), capsys)
    assert code == 2 and "look like mm" in err


def test_robots_without_soles_are_told_so(tmp_path, capsys, rec):
    code = main(["simulate", "static", "ur5", "--out", str(tmp_path / "u.csv")])
    err = capsys.readouterr().err
    assert code == 2 and "no bases (soles)" in err and "[]" not in err
    path = _write(tmp_path, rec)
    path.write_text(path.read_text().replace("# robot: tulip", "# robot: ur5"))
    code, _, err = _identify(path, capsys)
    assert code == 2 and "no bases (soles)" in err and "allowed: )" not in err


def test_reader_gaps(tmp_path, capsys, rec):
    path = _write(tmp_path, rec)
    text = path.read_text()
    bom = tmp_path / "bom.csv"
    bom.write_text("\ufeff" + text)
    assert len(read_recording(bom)) == len(rec)
    dup = tmp_path / "dup.csv"
    dup.write_text(text.replace("cop_sd_y", "cop_x", 1))
    code, _, err = _identify(dup, capsys)
    assert code == 2 and "cop_x appear more than once" in err
    frac = tmp_path / "frac.csv"
    lines = text.splitlines()
    body = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    lines[body + 1] = "0.5" + lines[body + 1][len(str(rec.posture[0])) :]
    frac.write_text("\n".join(lines) + "\n")
    code, _, err = _identify(frac, capsys)
    assert code == 2 and "0.5 is not a whole number" in err and f"line {body + 2}" in err


def test_fixed_values_guess_and_spare_equations_are_reported(tmp_path, capsys, model, rec):
    path = _write(tmp_path, rec)
    code, out, _ = _identify(path, capsys)
    assert code == 0 and variant(model, "right", "full").reason and "mm (guess 'sim')" in out
    doc = json.loads(_identify(path, capsys, "--json", "--guess", "mc")[1])
    assert doc["guess"] == "mc" and doc["warnings"] == []
    assert set(doc["fixed"]) == {p["symbol"] for p in doc["parameters"] if not p["estimated"]}
    need = _need(model)
    few = dataclasses.replace(
        rec, **{f: getattr(rec, f)[:need] for f in ("posture", "placement", "q", "cop", "cop_sd", "samples")}
    )
    code, out, err = _identify(_write(tmp_path, few, "few.csv"), capsys, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["dof"] <= 1 and doc["warnings"] and "spare equation" in err


def test_simulate_warns_below_the_minimum(tmp_path, capsys, model):
    assert main(["simulate", "static", "tulip", "--postures", "5", "--out", str(tmp_path / "f.csv")]) == 0
    err = capsys.readouterr().err
    assert f"needs at least {_need(model)}" in err and str(_need(model, "simplified")) in err


def test_forecast_plot_marks_zero_guesses_and_states_its_baseline(tmp_path):
    rel = np.array([3.0, np.inf, 40.0, 700.0])
    base = bar_baseline(rel, 15.0)
    assert 0 < base < 3.0 and np.log10(base) == np.round(np.log10(base))
    fig = forecast_figure(["a", "b", "c", "d"], rel, np.array([1, np.inf, 100, 9e3]), 10, 15, 600)
    out = save_figure(fig, tmp_path / "f.png", dpi=120)
    assert Path(out).stat().st_size > 0
