"""Review of `plan postures` and `plan show`: how IPOPT ended is shown per start, a stage that raises κ does not
replace a feasible point, κ reads "not identifiable" as `plan check` decides it, the "more --starts" hint is
checked against what the placements can identify, and `plan show` keeps its posture labels apart."""

import json
from dataclasses import replace
from itertools import combinations

import numpy as np
import pytest

from design import geometry as geo
from design.criteria import design_matrix, kappa
from design.planner import placements_can_identify
from design.plot import plan_figure
from design.problems import Settings, _pack, _structures, continuation, violation
from design.sampler import sample_posture_set
from drivers.emulators.testplan import random_plan
from formats.plan import load_plan
from poise.cli import main
from robots.stance_spec import other_base


@pytest.fixture(scope="module")
def start(tulip):
    """15 sampled postures on 3 placements (what a start optimises)."""
    s = Settings().resolved(tulip)
    return sample_posture_set(tulip, 15, 3, np.random.default_rng([3, 0]), margin=s.margin, params=s.params,
                              base=s.base)  # fmt: skip


def _collapsing_stage(status: str):
    """A stage that reports success in meeting the constraints but ends with every posture equal to the first."""

    def stage(structs, x, p):
        x = x.copy()
        nq = (len(x) - 5 * len(structs)) // 15
        q = x[: 15 * nq].reshape(15, nq)
        q[:] = q[0]
        return x, status, 3, 0.0

    return stage


def _x(tulip, s, ps):
    seps = np.array([geo.separating_line(pose, tulip, s.base)[:2] for pose in ps.poses])
    return _pack(ps, seps)


def test_a_stage_that_raises_kappa_does_not_replace_a_feasible_start(tulip, start):
    s = Settings().resolved(tulip)
    assert (
        violation(tulip, s, start.placement, _structures(tulip, start.poses, s.base), _x(tulip, s, start))
        < 1e-6
    )
    res = continuation(tulip, start, s, _collapsing_stage("Error_In_Step_Computation"))
    assert np.array_equal(res.postures.q, start.q) and res.kappa == res.kappa_initial
    out = res.stats["outcome"]
    assert out == {
        "ipopt_status": ["Error_In_Step_Computation"],
        "stages": len(s.sharpness),
        "stages_kept": 0,
    }
    assert all("κ worse" in st["rejected"] for st in res.stats["stages"])


def test_a_feasible_stage_replaces_a_start_that_breaks_the_constraints(tulip, start):
    s = Settings(load_share=0.45).resolved(tulip)  # the sampler does not draw for the load share
    assert (
        violation(tulip, s, start.placement, _structures(tulip, start.poses, s.base), _x(tulip, s, start))
        > 1e-6
    )
    res = continuation(tulip, start, s, _collapsing_stage("Solve_Succeeded"))
    assert res.stats["outcome"]["stages_kept"] >= 1  # feasibility first: the collapsed κ is far worse
    assert np.allclose(res.postures.q, res.postures.q[0]) and res.kappa > res.kappa_initial
    broken = res.stats["start_broken"]  # and the run says why it kept a worse κ
    assert "load share" in broken["constraint"] and broken["violation"] > 1e-6


def test_a_stage_within_round_off_of_the_current_kappa_is_kept(tulip, start):
    """Equal solutions differ in κ by ~1e-9 relative: the later stage (re-detected structures) must win the tie."""
    s = Settings().resolved(tulip)
    x0 = _x(tulip, s, start)
    k0 = kappa(design_matrix(tulip, start.q, s.base))
    nq = tulip.nq
    moved = [x0.copy(), x0.copy()]
    moved[0][:nq] += 1e-9
    moved[1][:nq] -= 1e-9
    ks = [kappa(design_matrix(tulip, m[: 15 * nq].reshape(15, nq), s.base)) for m in moved]
    x_up, k_up = max(zip(moved, ks, strict=True), key=lambda mk: mk[1])
    assert 0 < k_up / k0 - 1 < 1e-6  # a round-off rise

    res = continuation(tulip, start, s, lambda structs, x, p: (x_up, "Solve_Succeeded", 1, 0.0))
    assert all(st["accepted"] for st in res.stats["stages"]) and res.kappa == k_up


def test_per_start_status_and_kappa_agree_with_the_plan_and_plan_check(tmp_path, capsys):
    """14 postures on 2 placements: TUlip's postures on two placements never identify every parameter."""
    out = tmp_path / "p.json"
    argv = ["plan", "postures", "tulip", "--postures", "14", "--placements", "2", "--starts", "1", "--seed", "1",
            "--load-share", "0.25", "--out", str(out)]  # fmt: skip
    assert main(argv) == 1
    cap = capsys.readouterr()
    solver = load_plan(out).solver
    (row,) = solver["starts"]  # what --json prints as "starts"
    assert row["ipopt_status"] == list(dict.fromkeys(st["status"] for st in solver["stages"]))
    assert row["stages"] == len(solver["stages"]) and row["stages_kept"] == sum(
        st["accepted"] for st in solver["stages"]
    )
    assert row["kappa"] is None  # rank short
    assert main(["plan", "check", str(out), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["kappa"]["right"] is None  # the same rank decision
    table = cap.out.split("best κ")[0]
    assert "not identifiable" in table and all(st in table for st in row["ipopt_status"])
    assert f"{row['stages_kept']} of {row['stages']}" in table
    assert "more --starts cannot help, use more --placements" in cap.err and "may avoid it" not in cap.err


def test_the_identifiability_probe_finds_what_postures_on_more_placements_fix(tulip):
    s = Settings()
    gap1, n1 = placements_can_identify(tulip, s, 1, seed=1, per_placement=16)
    assert n1 == 16 and gap1 is not None and gap1.rank < gap1.n
    gap3, _ = placements_can_identify(tulip, s, 3, seed=1, per_placement=16)
    assert gap3 is None or gap3.rank > gap1.rank


def test_the_probe_checks_the_bases_the_design_fell_short_on(tulip):
    other = other_base(tulip, Settings().resolved(tulip).base)
    gap, _ = placements_can_identify(tulip, Settings(), 1, seed=1, per_placement=16, bases=[other])
    assert gap is not None and gap.base == other


def test_plan_show_keeps_labels_apart_and_names_each_stick_figure(model):
    plan = random_plan(model, 2, seed=4)
    p0 = plan.postures[0]
    # 24 on one CoP: more than the nearest rings of offsets hold, their labels would sit on one another
    twins = [replace(p0, index=100 + k) for k in range(24)]
    plan = replace(plan, postures=[*plan.postures, *twins])
    fig = plan_figure(model, plan)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for row, pl in enumerate(plan.placements):
        top, _, front = fig.axes[3 * row : 3 * row + 3]
        boxes = [t.get_window_extent(renderer) for t in top.texts]
        assert sorted(t.get_text() for t in top.texts) == sorted(str(p.index) for p in plan.postures
                                                                 if p.placement == pl.index)  # fmt: skip
        assert not any(a.overlaps(b) for a, b in combinations(boxes, 2))
        names = [t.get_text() for t in front.get_legend().get_texts()]
        assert names == [f"posture {p.index}" for p in plan.postures if p.placement == pl.index]
