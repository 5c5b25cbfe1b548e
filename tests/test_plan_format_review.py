"""Review of the posture-plan format as a hand-writer meets it: stored CoP/margins are checked (and optional),
`plan show` draws recomputed values, κ of a rank-deficient set is "not identifiable", the sole-placement error
names what is off, and a plan without settings says what margin it is held to."""

import json

import numpy as np
import pytest

from design.criteria import design_matrix, kappa, min_postures
from drivers.emulators.testplan import random_plan
from formats.plan import load_plan, save_plan
from poise.cli import main
from robots.chain_path import path_issues
from robots.stance import STATED_TOL


@pytest.fixture(scope="module")
def plan(model):
    """A plan with enough postures to identify every parameter, no settings (as if written by hand)."""
    return random_plan(model, min_postures(model) + 1, seed=11, margin=0.03)


def _write(tmp_path, plan, edit=None, name="p.json"):
    """The plan's JSON with `edit(doc)` applied, written to tmp_path/name."""
    path = tmp_path / name
    save_plan(plan, path)
    if edit:
        doc = json.loads(path.read_text())
        edit(doc)
        path.write_text(json.dumps(doc))
    return path


def _check(capsys, path, *extra) -> tuple[int, dict]:
    rc = main(["plan", "check", str(path), "--json", *extra])
    return rc, json.loads(capsys.readouterr().out)


def test_untouched_plan_passes(plan, tmp_path, capsys):
    rc, report = _check(capsys, _write(tmp_path, plan))
    assert rc == 0 and report["ok"], report["problems"]


@pytest.mark.parametrize(
    ("field", "shift", "words"),
    [
        ("predicted_cop", lambda v: [v[0], v[1] + 0.01], "stored predicted_cop"),
        ("margin", lambda v: v - 0.01, "stored margin"),
    ],
)
def test_check_fails_stored_values_it_cannot_reproduce(plan, tmp_path, capsys, field, shift, words):
    def edit(doc):
        doc["postures"][2][field] = shift(doc["postures"][2][field])

    rc, report = _check(capsys, _write(tmp_path, plan, edit))
    assert rc == 1 and not report["ok"]
    (msg,) = [m for m in report["problems"] if words in m]
    assert msg.startswith(f"posture {plan.postures[2].index}:") and "recomputed" in msg and "mm" in msg
    stored = np.atleast_1d(shift(np.array(getattr(plan.postures[2], field)))) * 1000
    assert all(f"{v:.1f}" in msg for v in stored)


def test_rounding_within_tolerance_passes(plan, tmp_path, capsys):
    def edit(doc):
        for p in doc["postures"]:
            p["predicted_cop"] = [round(v, 4) for v in p["predicted_cop"]]  # 0.1 mm
            p["margin"] = round(p["margin"], 4)

    assert 0.5e-4 < STATED_TOL
    rc, report = _check(capsys, _write(tmp_path, plan, edit))
    assert rc == 0, report["problems"]


def test_robust_margin_without_uncertainty_fails(plan, tmp_path, capsys):
    def edit(doc):
        doc["postures"][0]["robust_margin"] = 0.05

    rc, report = _check(capsys, _write(tmp_path, plan, edit))
    assert rc == 1 and any("robust_margin 50.0 mm cannot be recomputed" in m for m in report["problems"])


def _strip(doc):
    for p in doc["postures"]:
        for key in ("predicted_cop", "margin", "robust_margin"):
            p.pop(key, None)


def test_hand_written_plan_without_predictions_is_read_checked_and_drawn(plan, tmp_path, capsys):
    bare = _write(tmp_path, plan, _strip, "bare.json")
    loaded = load_plan(bare)
    assert all(p.predicted_cop is None and p.margin is None for p in loaded.postures)
    rc, report = _check(capsys, bare)
    assert rc == 0 and report["ok"]
    full = _check(capsys, _write(tmp_path, plan))[1]
    assert [p["margin_m"] for p in report["postures"]] == [p["margin_m"] for p in full["postures"]]
    save_plan(loaded, tmp_path / "again.json")  # written back with nulls, read again
    assert load_plan(tmp_path / "again.json").postures[0].margin is None


def test_show_draws_recomputed_cop_not_the_file_s(plan, tmp_path, capsys):
    def far(doc):
        for p in doc["postures"]:
            p["predicted_cop"] = [5.0, 5.0]

    figures = []
    for name, edit in (("far", far), ("bare", _strip)):
        out = tmp_path / f"{name}.png"
        assert (
            main(["plan", "show", str(_write(tmp_path, plan, edit, f"{name}.json")), "--out", str(out)]) == 0
        )
        figures.append(out.read_bytes())
    assert figures[0] == figures[1]  # the CoPs drawn do not depend on what the file stores


def test_kappa_of_a_rank_deficient_set_is_not_identifiable(model, plan, tmp_path, capsys):
    def repeat(doc):  # enough postures, but the last three repeat the first: rank short, κ finite but huge
        for k in (1, 2, 3):
            doc["postures"][-k]["q"] = doc["postures"][0]["q"]
            doc["postures"][-k]["placement"] = doc["postures"][0]["placement"]

    path = _write(tmp_path, plan, repeat)
    q = load_plan(path).q
    assert np.isfinite(kappa(design_matrix(model, q, "right")))  # the review's case: not an infinite κ
    rc, report = _check(capsys, path)
    assert rc == 1 and report["kappa"] == {b: None for b in model.bases}
    main(["plan", "check", str(path)])
    out = capsys.readouterr().out
    assert "right base not identifiable" in out and "e+" not in out.split("κ recomputed")[1].splitlines()[0]


@pytest.mark.parametrize(
    ("move", "off", "within"),
    [((0.0, 0.02, 0.0), "x/y off by 20.000 mm (>", "yaw by 0.000 mrad (≤"),
     ((0.0, 0.0, 0.01), "yaw by 10.000 mrad (>", "x/y off by 0.000 mm (≤")],
)  # fmt: skip
def test_sole_placement_error_says_what_is_off_and_where(plan, tmp_path, capsys, move, off, within):
    def edit(doc):
        doc["placements"][0]["other_foot"] = list(np.add(doc["placements"][0]["other_foot"], move))

    rc, report = _check(capsys, _write(tmp_path, plan, edit))
    (issue,) = [m for m in report["postures"][0]["issues"] if "away from its placement" in m]
    assert off in issue and within in issue
    x, y, _ = plan.placements[0].other_foot
    assert f"stands at (x {x * 1000:.3f} mm, y {y * 1000:.3f} mm" in issue
    assert f"its placement at (x {x * 1000:.3f} mm, y {(y + move[1]) * 1000:.3f} mm" in issue
    assert rc == 1


def test_postures_of_one_placement_must_keep_the_sole_there(plan, tmp_path, capsys):
    def share(doc):  # posture 1 claims posture 0's placement, its sole stands elsewhere
        doc["postures"][1]["placement"] = doc["postures"][0]["placement"]

    rc, report = _check(capsys, _write(tmp_path, plan, share))
    assert rc == 1
    assert any("away from its placement" in m for m in report["postures"][1]["issues"])


def test_path_check_names_the_placement_error(model, plan):
    p = plan.postures[0]
    pose = np.add(plan.placement(p.placement).other_foot, (0.0, 0.0, 0.01))
    (msg,) = path_issues(model, np.array([p.q, p.q, p.q]), 1, pose, "sim", "right", 0.0, "move")
    assert "yaw by 10.000 mrad (>" in msg and "x/y off by 0.000 mm (≤" in msg


def test_plan_without_settings_says_its_margin_and_takes_one(plan, tmp_path, capsys):
    path = _write(tmp_path, plan)
    assert main(["plan", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "no settings in the plan" in out and "--margin" in out
    rc, report = _check(capsys, path)
    assert report["required_margin_m"] == 0.0 and "no settings" in report["required_margin_from"]
    worst = min(p["margin_m"] for p in report["postures"])
    rc, report = _check(capsys, path, "--margin", f"{worst + 0.001}")
    assert rc == 1 and report["required_margin_from"] == "--margin"
    assert any("CoP margin" in m and "< required" in m for m in report["problems"])


def test_margin_below_the_plan_s_own_is_refused_and_above_it_tightens(plan, tmp_path, capsys):
    """`poise run` holds a plan to its settings' margin: `plan check --margin` may ask more, never less."""
    from formats.plan import plan_required_margin

    _, free = _check(capsys, _write(tmp_path, plan))
    worst = min(p["margin_m"] for p in free["postures"])
    own = worst / 2

    def settle(doc):
        doc["settings"] = {"required_margin": own}

    path = _write(tmp_path, plan, settle, "own.json")
    assert plan_required_margin(load_plan(path)) == own  # what the executor requires
    rc, report = _check(capsys, path)
    assert rc == 0 and report["required_margin_m"] == own and report["required_margin_from"] == "settings"
    assert main(["plan", "check", str(path), "--margin", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert f"--margin 0 mm is below the plan's own {own * 1000:g} mm, which `poise run` requires" in err
    rc, report = _check(capsys, path, "--margin", f"{worst + 0.001}")
    assert rc == 1 and report["required_margin_m"] == pytest.approx(worst + 0.001)


def test_augment_reports_kappa_not_identifiable_until_the_postures_identify(model, tmp_path, capsys):
    """Two postures short: κ after the first addition is not identifiable (null, not ~1e16), then finite; the text
    shows the JSON's numbers."""
    short = random_plan(model, min_postures(model) - 2, seed=5, margin=0.03)
    src = _write(tmp_path, short)
    args = ["plan", "augment", str(src), "--add", "3", "--pool", "12", "--seed", "2"]
    assert main([*args, "--out", str(tmp_path / "a.json"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    after = summary["kappa_after_each"]
    assert summary["kappa_before"] is None and after[0] is None and all(np.isfinite(k) for k in after[1:])
    assert summary["kappa"][short.base] == pytest.approx(after[-1])
    assert main([*args, "--out", str(tmp_path / "b.json")]) == 0
    assert f"κ not identifiable → {after[-1]:.1f} with 3 added postures" in capsys.readouterr().out
