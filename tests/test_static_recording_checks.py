"""Static recordings a user's hands or a logger's bug spoil, refused or named by `identify static`: rows copied
under a new id, force_n in kg or negative, fractional sample counts, cop_sd in the other length unit, boards
without per-cell gains; errors and warnings one line each in a log."""

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import one_line_error

from formats.static_recording import write_recording
from formats.units import GRAVITY
from identify.synthetic import simulate_static
from poise.cli import main


@pytest.fixture(scope="module")
def rec(model):
    """A 30-posture recording with ids 500, 501, … and the boards' load in N."""
    r = simulate_static(model, 30, "mc", cop_noise=0.002, seed=7)
    weight = model.parameter_set("mc").total_mass * GRAVITY
    force = weight + np.random.default_rng(1).normal(0.0, 0.5, len(r))
    return dataclasses.replace(r, posture=r.posture + 500, force=force)


def _write(tmp_path: Path, rec, name: str = "r.csv") -> Path:
    path = tmp_path / name
    write_recording(path, rec)
    return path


def _identify(capsys, path: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["identify", "static", str(path), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def _with_copy(rec, row: int, new_id: int):
    """`rec` with row `row` appended again under the posture id `new_id`."""
    grow = lambda a: None if a is None else np.concatenate([a, a[row : row + 1]])  # noqa: E731
    return dataclasses.replace(
        rec, posture=np.r_[rec.posture, new_id], placement=np.r_[rec.placement, rec.placement[row]],
        q=grow(rec.q), cop=grow(rec.cop), cop_sd=grow(rec.cop_sd), force=grow(rec.force), samples=grow(rec.samples),
    )  # fmt: skip


def _in_mm(path: Path, columns: tuple[str, ...]) -> None:
    """Rewrite a recording as length_unit mm, only `columns` scaled to mm (the others left as written, in m)."""
    lines = path.read_text().splitlines()
    meta = [line.replace("# length_unit: m", "# length_unit: mm") for line in lines if line.startswith("#")]
    rows = list(csv.reader(line for line in lines if not line.startswith("#")))
    head = rows[0]
    for r in rows[1:]:
        for c in columns:
            r[head.index(c)] = repr(float(r[head.index(c)]) * 1000)
    path.write_text("\n".join(meta + [",".join(r) for r in rows]) + "\n")


def test_a_row_copied_under_a_new_id_is_refused_naming_both(tmp_path, capsys, rec):
    path = _write(tmp_path, _with_copy(rec, 3, 99))
    err = one_line_error(capsys, ["identify", "static", str(path), "--weighted"])
    assert "posture 99 repeats posture 503" in err and "remove it" in err


def test_a_copy_without_spreads_is_named_on_one_line(tmp_path, capsys, rec):
    base = dataclasses.replace(rec, cop_sd=None, samples=None)
    code, _, err = _identify(capsys, _write(tmp_path, _with_copy(base, 3, 99)))
    said = [line for line in err.splitlines() if "posture 99 repeats posture 503" in line]
    assert code == 0 and len(said) == 1 and "warning:" in said[0] and said[0].endswith("noiseless")
    doc = json.loads(_identify(capsys, _write(tmp_path, _with_copy(base, 3, 99)), "--json")[1])
    assert any("posture 99 repeats posture 503" in w for w in doc["warnings"])
    clean = json.loads(_identify(capsys, _write(tmp_path, base, "c.csv"), "--json")[1])
    assert doc["dof"] == clean["dof"] + 2 and clean["warnings"] == []


def test_force_in_newtons_is_accepted_in_kg_or_negative_refused(tmp_path, capsys, model, rec):
    assert _identify(capsys, _write(tmp_path, rec))[0] == 0
    kg = _write(tmp_path, dataclasses.replace(rec, force=rec.force / GRAVITY), "kg.csv")
    err = one_line_error(capsys, ["identify", "static", str(kg)])
    assert "force_n" in err and "look like kg" in err and "in N" in err
    neg = rec.force.copy()
    neg[4] = -neg[4]
    err = one_line_error(
        capsys, ["identify", "static", str(_write(tmp_path, dataclasses.replace(rec, force=neg)))]
    )
    assert "posture 504" in err and "force_n" in err and "not positive" in err


@pytest.mark.parametrize(("value", "said"), [(2.5, "not a whole number"), (0.0, "not positive")])
def test_samples_must_be_a_positive_whole_count(tmp_path, capsys, rec, value, said):
    samples = np.full(len(rec), 20.0)
    samples[2] = value
    path = _write(tmp_path, dataclasses.replace(rec, samples=samples))
    lines = path.read_text().splitlines()  # the writer writes counts whole: put the value in by hand
    body = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    cells = lines[body + 3].split(",")
    cells[-1] = repr(value)
    lines[body + 3] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    err = one_line_error(capsys, ["identify", "static", str(path)])  # without --weighted too
    assert "column samples" in err and said in err and "(posture 502)" in err  # one wording for both


def test_cop_sd_in_m_under_mm_is_refused_naming_the_unit(tmp_path, capsys, rec):
    path = _write(tmp_path, rec)
    _in_mm(path, ("cop_x", "cop_y"))
    err = one_line_error(capsys, ["identify", "static", str(path), "--weighted"])
    assert "cop_sd" in err and "(mm)" in err and "look like m" in err
    code, _, err = _identify(capsys, path)  # unweighted, cop_sd is not used: a warning, not a refusal
    assert code == 0 and any("warning:" in line and "look like m" in line and "not used" in line
                             for line in err.splitlines())  # fmt: skip
    _in_mm(ok := _write(tmp_path, rec, "ok.csv"), ("cop_x", "cop_y", "cop_sd_x", "cop_sd_y"))
    assert _identify(capsys, ok, "--weighted")[0] == 0


def test_a_spread_no_force_plate_has_is_judged_alike_in_m_and_mm(tmp_path, capsys, rec):
    """cop_sd below 10 µm in an m file is as implausible as in an mm file: refused with --weighted, else noted."""
    tiny = dataclasses.replace(rec, cop_sd=rec.cop_sd * 1e-3)  # µm-sized spreads, written in m
    path = _write(tmp_path, tiny)
    err = one_line_error(capsys, ["identify", "static", str(path), "--weighted"])
    assert "cop_sd" in err and "m — no force plate" in err
    _in_mm(mm := _write(tmp_path, tiny, "mm.csv"), ("cop_x", "cop_y", "cop_sd_x", "cop_sd_y"))
    err_mm = one_line_error(capsys, ["identify", "static", str(mm), "--weighted"])
    assert "mm — no force plate" in err_mm
    doc = json.loads(_identify(capsys, path, "--json")[1])
    assert any("no force plate" in w and "not used" in w for w in doc["warnings"])


def test_cop_sd_in_mm_under_m_exceeds_what_the_soles_allow(tmp_path, capsys, rec):
    path = _write(tmp_path, dataclasses.replace(rec, cop_sd=np.full_like(rec.cop_sd, 0.3)))  # 0.3 mm, in "m"
    err = one_line_error(capsys, ["identify", "static", str(path), "--weighted"])
    assert "0.3 m at posture 500 (30 postures in all)" in err and "half the soles' extent" in err
    assert "look like mm" in err


def _run_json(folder: Path, **meta) -> None:
    (folder / "run.json").write_text(json.dumps({"plan": "p.json", "plan_sha256": "0" * 64, **meta}))


def test_boards_without_gains_are_noted_as_identify_dynamic_does(tmp_path, capsys, rec):
    path = _write(tmp_path, rec)
    _run_json(tmp_path, boards="sim", noise_seed=0, status="completed")
    code, _, err = _identify(capsys, path)
    assert code == 0 and "note:" in err and "without per-cell gains" in err
    assert json.loads(_identify(capsys, path, "--json")[1])["uncalibrated_boards"] is True
    _run_json(tmp_path, boards="sim", noise_seed=0, status="completed", board_gains={"source": "x"})
    code, out, err = _identify(capsys, path, "--json")
    assert code == 0 and "per-cell gains" not in err and "uncalibrated_boards" not in json.loads(out)


def test_a_config_naming_an_unknown_robot_names_the_file(tmp_path):
    from drivers.config import DEFAULT_CONFIG, load_config
    from formats.errors import DataError

    cfg = tmp_path / "mine.toml"
    cfg.write_text(DEFAULT_CONFIG.read_text().replace('robot = "tulip"', 'robot = "tulp"', 1))
    with pytest.raises(DataError, match=r"mine\.toml: robot = 'tulp': unknown robot 'tulp'"):
        load_config(cfg)


def test_a_duplicate_posture_index_in_a_plan_is_named(plan):
    from formats.errors import DataError
    from formats.plan import plan_from_dict, plan_to_dict

    doc = plan_to_dict(plan)
    doc["postures"][1]["index"] = doc["postures"][0]["index"]
    with pytest.raises(DataError, match=rf"duplicate posture indices \[{doc['postures'][0]['index']}\]"):
        plan_from_dict(doc)
