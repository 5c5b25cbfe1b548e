"""Optional plan fields of the wrong type are refused in one line, whatever their truthiness (a falsy
`0` or `""` once read as "absent"); `plan check --config` holds a posture plan to what `poise run` with that
configuration would: its robot and its `executor.min_margin`, and says where the required margin comes from."""

import json
import re
from pathlib import Path

import pytest

from formats.errors import DataError
from formats.plan import plan_from_dict, plan_to_dict
from formats.trajectory_plan import trajectory_plan_from_dict


@pytest.mark.parametrize(
    "key, value, words",
    [("kappa", 0, "kappa must be an object"), ("kappa", "", "kappa must be an object"),
     ("solver", 0, "solver must be an object"), ("solver", [], "solver must be an object"),
     ("transitions", 0, "transitions must be a list"), ("settings", "", "settings must be an object"),
     ("params", 3, "params: expected a non-empty string"), ("params", "", "params: expected a non-empty string")],
)  # fmt: skip
def test_posture_plan_field_of_the_wrong_type(plan, key, value, words):
    doc = json.loads(json.dumps(plan_to_dict(plan)))
    doc[key] = value
    with pytest.raises(DataError, match=words):
        plan_from_dict(doc)


def test_posture_plan_with_fields_absent_or_null_is_read(plan):
    doc = json.loads(json.dumps(plan_to_dict(plan)))
    for key in ("kappa", "solver", "transitions", "settings"):
        doc[key] = None
    read = plan_from_dict(doc)
    assert (read.kappa, read.solver, read.transitions, read.settings) == ({}, {}, [], {})
    assert len(read.postures) == len(plan.postures)


@pytest.mark.parametrize(
    "key, value, words",
    [("design", 0, "design must be an object"), ("settings", "x", "settings must be an object"),
     ("seed", "1", "seed must be an integer"), ("seed", True, "seed must be an integer"),
     ("params", 3, "params must be a non-empty string"), ("robot_source", "", "robot_source must be")],
)  # fmt: skip
def test_trajectory_plan_field_of_the_wrong_type(key, value, words):
    doc = json.loads((Path(__file__).parent / "data" / "ur5_6s.json").read_text())
    trajectory_plan_from_dict(doc)
    doc[key] = value
    with pytest.raises(DataError, match=words):
        trajectory_plan_from_dict(doc)


def test_plan_check_holds_a_posture_plan_to_the_config_s_executor_margin(model, tmp_path, capsys):
    """`poise run --config C` requires max(plan margin, C's executor.min_margin): `plan check --config C` too."""
    from design.criteria import min_postures
    from drivers.emulators.testplan import random_plan
    from formats.plan import save_plan
    from poise.cli import main

    path = tmp_path / "p.json"
    save_plan(random_plan(model, min_postures(model) + 1, seed=11, margin=0.03), path)
    assert main(["plan", "check", str(path), "--json"]) == 0
    worst = min(p["margin_m"] for p in json.loads(capsys.readouterr().out)["postures"])
    bundled = (Path(__file__).parents[1] / "drivers" / "tulip_robot.toml").read_text()
    for need, rc in ((worst + 0.001, 1), (worst / 2, 0)):
        config = tmp_path / f"c{rc}.toml"
        config.write_text(re.sub(r"(?m)^min_margin = 0\.0 ", f"min_margin = {need} ", bundled, count=1))
        assert main(["plan", "check", str(path), "--json", "--config", str(config)]) == rc
        report = json.loads(capsys.readouterr().out)
        assert report["required_margin_m"] == pytest.approx(need)
        assert report["required_margin_from"].endswith("executor.min_margin")
        assert any("< required" in m for m in report["problems"]) == bool(rc)


def test_plan_check_refuses_another_robot_s_config_and_names_the_margin_s_source(model, tmp_path, capsys):
    from design.criteria import min_postures
    from drivers.emulators.testplan import random_plan
    from formats.plan import save_plan
    from poise.cli import main

    path = tmp_path / "p.json"
    save_plan(random_plan(model, min_postures(model) + 1, seed=11, margin=0.03), path)
    ur5 = Path(__file__).parents[1] / "drivers" / "ur5_emulated.toml"
    assert main(["plan", "check", str(path), "--config", str(ur5)]) == 2
    err = capsys.readouterr().err
    assert "configuration is for 'ur5'" in err and "\n" not in err.strip()
    assert main(["plan", "check", str(path), "--margin", "0.001"]) == 0
    assert "required margin 1.0 mm (--margin)" in capsys.readouterr().out
