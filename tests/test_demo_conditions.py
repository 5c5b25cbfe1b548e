"""Issue 12 §2: under the thesis's bench conditions the twin reproduces its failures; poise's robust design with
gravity feed-forward stands every posture on the same robot and boards."""

import json
import math

import pytest

from drivers.config import load_config
from poise.cli import main
from poise.workflows.demo import THESIS, Conditions, demo_conditions, design_plan, stand_alone
from robots.tulip import tulip

FAILURES = {"fall", "edge", "lift", "slip", "feet-contact"}


def test_poise_stands_with_the_feedforward_on_the_twin_only_unless_told():
    none = (None, None, None, None)
    assert demo_conditions(False, *none, None, twin=True).gravity_comp  # P-only servos sag: poise compensates
    assert not demo_conditions(False, *none, None, twin=False).gravity_comp  # a kinematic robot does not sag
    assert not demo_conditions(True, *none, None, twin=True).gravity_comp  # the thesis's bench had none
    assert demo_conditions(True, *none, True, twin=True).gravity_comp
    assert not demo_conditions(False, *none, False, twin=True).gravity_comp
    assert demo_conditions(True, 0.1, *none[1:], None).load_share == 0.1


@pytest.mark.slow
def test_thesis_conditions_reproduce_the_thesis_failures(tmp_path, capsys):
    """Problem 1 designed with TUlipMC and no load share, the robot as Table 4.6, boards off by σ 5 mm / 2°, no
    feed-forward: postures fail standing alone (the thesis lost 24 of 50), and a run on the drivers stops like a
    safety trip at a failure with every completed posture kept."""
    argv = ["demo", "--out", str(tmp_path), "--postures", "15", "--placements", "3", "--time-scale", "6",
            "--hold-s", "4", "--thesis-conditions", "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    cond = out["conditions"]
    assert cond["truth"] == "thesis" and cond["params"] == "mc" and cond["load_share"] == 0
    assert not cond["gravity_comp"] and cond["placement_error"][0] == pytest.approx(0.005)
    standing = out["standing"]
    assert len(standing) == 15 and out["standing_count"] == sum(r["stands"] for r in standing)
    failed = [r for r in standing if not r["stands"]]
    assert len(failed) >= 3, standing  # measured 5 of 15 stand, 7 in this session's runs
    assert all({e.split(":")[0] for e in r["events"]} & FAILURES for r in failed)
    # the twin's events attributed to postures and phases by the executor's timeline (drivers on the twin's
    # clock); the first placement's set-down is where the thesis robot first rocks
    timeline = json.loads((tmp_path / "run" / "run.json").read_text())["timeline"]
    assert timeline[0]["phase"] == "tare" and all(
        a["t_s"] <= b["t_s"] for a, b in zip(timeline, timeline[1:], strict=False)
    )
    for e in out["twin_events"]:
        span = [x for x in timeline if x["t_s"] <= e["t_sim_s"]][-1]
        assert (e["posture"], e["phase"]) == (span["posture"], span["phase"])
    assert all(set(r["twin_events"]) == {"transition", "posture"} for r in out["execution"])
    if out["stopped"] is not None:  # the run met a failure: stopped, completed postures on disk
        assert out["executed"] < out["planned"]
        # a fall, edge, lift, slip or the feet meeting — or the thesis's PD tracking error: a posture the P-only
        # servos cannot settle (measured: posture 3, θ10 0.97° off and still moving after 2 × 10 s; before the
        # twin's 1 ms lockstep the run fell at posture 10)
        tracking = "did not settle" in out["stopped"] or "tracking error" in out["stopped"]
        assert tracking or {e["kind"] for e in out["twin_events"]} & FAILURES, out["stopped"]
        lines = (tmp_path / "run" / "recording.csv").read_text().splitlines()
        assert (
            sum(not x.startswith("#") for x in lines) - 1 == out["executed"]
        )  # header + one row per posture
    else:  # it may also get through: the failures standing alone are counted regardless
        assert out["executed"] == out["planned"]


@pytest.mark.slow
def test_poise_robust_design_with_feedforward_stands_every_posture_on_the_thesis_robot():
    """Same robot and board errors as the thesis conditions; poise's design (load share 0.25, margin held for ϑ_b
    within 5 mm of the guess) with the gravity feed-forward: every posture stands alone on the twin."""
    model = tulip()
    cond = Conditions(uncertainty=0.005, truth=THESIS.truth, placement_error=THESIS.placement_error,
                      gravity_comp=True)  # fmt: skip
    plan = design_plan(model, 10, 2, 1, 2.0, 4.0, cond)
    lines: list[str] = []
    standing = stand_alone(model, plan, load_config(), cond, seed=1, log=lines.append)
    assert len(standing) == 10
    assert all(r["stands"] for r in standing), [r for r in standing if not r["stands"]]
    assert "10 of 10" in lines[0]
    assert max(r["slide_mm"] for r in standing) < 5.0
    assert max(r["base_tilt_deg"] for r in standing) < 1.0 and math.isfinite(standing[0]["cop_vs_com_mm"])
