"""A physical robot behind published CoM base-parameter estimates (robots/realise.py): the TUlip thesis's
Table 4.6 (real-robot data) realised by moving link CoMs a bounded distance, and `plan check --twin` standing
a plan's postures on the physics twin with that robot."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drivers.emulators.sim_robot import twin_truth
from drivers.emulators.testplan import random_plan
from formats.errors import DataError
from formats.plan import save_plan
from poise.cli import main
from robots.com_base import derive_base
from robots.realise import load_published, realise


@pytest.fixture(scope="module")
def published(model):
    return load_published(model.published_estimates["thesis"])


def test_table_4_6_is_realised_within_its_standard_errors(model, published):
    prior = model.parameter_set("sim")
    ps, report = realise(model, published, prior, max_shift=0.1)
    assert len(report) == 25 and published.values[17] == pytest.approx(0.13033)
    before = [abs(r.prior - r.estimate) / r.se for r in report]
    assert sum(z > 3 for z in before) >= 4  # the thesis's robot is not its CAD model
    assert all(abs(r.z) <= 3 for r in report), [(r.index, round(r.z, 1)) for r in report]
    got = derive_base(model, "right").values(ps)
    assert np.allclose([got[r.index - 1] for r in report], [r.realised for r in report])
    assert ps.mass == prior.mass and ps.inertia == prior.inertia and ps.lengths == prior.lengths
    shift = max(np.abs(np.subtract(ps.com[k], prior.com[k])).max() for k in ps.com)
    assert shift <= 0.1 + 1e-9
    assert twin_truth(model, "thesis").com == ps.com  # what `--truth thesis` gives the emulated robot


def test_a_tight_bound_leaves_estimates_unreached(model, published):
    _, report = realise(model, published, model.parameter_set("sim"), max_shift=0.01)
    assert any(abs(r.z) > 3 for r in report)  # 1 cm per axis cannot reach ϑ17's 63 mm


def test_bad_published_files_are_clear_errors(tmp_path, model):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[estimates]\nbase = "right"\nunit = "mm"\n[estimates.values]\n1 = 2.0\n[estimates.se]\n1 = 0\n'
    )
    with pytest.raises(DataError, match="positive standard error"):
        load_published(bad)
    bad.write_text("[estimates]\n")
    with pytest.raises(DataError, match="cannot read"):
        load_published(bad)
    bad.write_text('[estimates]\nbase = "right"\n[estimates.values]\n99 = 1.0\n[estimates.se]\n99 = 1.0\n')
    with pytest.raises(DataError, match="indices"):
        realise(model, load_published(bad), model.parameter_set("sim"))


def test_plan_check_twin_stands_each_posture(model, tmp_path, capsys):
    plan = random_plan(model, 2, seed=4, move_s=1.0, hold_s=4.0)
    save_plan(plan, tmp_path / "p.json")
    rc = main(["plan", "check", str(tmp_path / "p.json"), "--twin", "--truth", "thesis", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert [r["posture"] for r in out["twin"]] == [p.index for p in plan.postures]
    for r in out["twin"]:
        kinds = {e.split(":")[0] for e in r["events"]}
        assert r["stands"] == (not {"fall", "edge", "lift", "slip", "feet-contact"} & kinds)
        if r["stands"]:
            assert r["cop_vs_com_mm"] < 1.0  # at rest the boards' CoP is the twin's own CoM
    assert rc == (0 if out["ok"] and all(r["stands"] for r in out["twin"]) else 1)
    assert main(["plan", "check", str(tmp_path / "p.json"), "--twin", "--placement-error", "5"]) == 2
    assert "two numbers" in capsys.readouterr().err
