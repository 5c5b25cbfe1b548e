"""The per-tick path checks (`robots.chain_path`) predict the CoP by the plan's rule (`robots.plan_rules.cop_rule`:
the identification ellipsoid's centre when the settings hold one), as the posture check does, so `plan check`
and the run's pre-flight agree on a plan designed with an ellipsoid; one worst-case margin for design and check."""

from __future__ import annotations

import numpy as np
import pytest
from shapely.geometry import MultiPoint

from design.uncertainty import Ellipsoid, nominal_cop, robust_margin
from design.verify import check_plan
from drivers.config import load_config
from drivers.setpoints import check_run
from formats.plan import Placement, Plan, Posture
from robots.chain_path import project_to_chain
from robots.plan_rules import cop_rule, plan_base_model, worst_case_margin
from robots.stance import (
    balance,
    default_base,
    other_pose,
    placed_corners,
    random_double_support,
    signed_margin,
    sole_rects,
)

SHIFT = 0.012  # m: how far the ellipsoid's centre moves the predicted CoPs inward


@pytest.fixture(scope="module")
def two(tulip):
    """Two postures on one placement (the second a projected neighbour of the first) and that placement."""
    q0 = random_double_support(tulip, 1, np.random.default_rng(11), margin=0.03)[0]
    base = default_base(tulip)
    pose = other_pose(tulip, q0)
    cop1 = balance(tulip, q0).cop + np.array([0.004, -0.003])
    q1 = project_to_chain(tulip, q0 + 0.08, pose, cop1[None, :], "sim", base)[0]
    assert not tulip.limit_violations(q1, 0.0)
    return q0, q1, pose


def _polygon(model, pose):
    rb, ro = sole_rects(model, default_base(model))
    return MultiPoint(np.vstack([rb, placed_corners(ro, pose)])).convex_hull


def _inward_theta(model, qs, pose) -> np.ndarray:
    """A ϑ_b centre moving both postures' predicted CoPs SHIFT towards the support polygon's centroid."""
    bm = plan_base_model(model, default_base(model))
    R = np.vstack([bm.regressor(q)[:2, :] for q in qs])
    centre = np.asarray(_polygon(model, pose).centroid.coords[0])
    cops = np.concatenate([balance(model, q).cop for q in qs])
    d = np.concatenate([SHIFT * (centre - c) / np.linalg.norm(centre - c) for c in cops.reshape(-1, 2)])
    return bm.values("sim") + np.linalg.lstsq(R, d, rcond=None)[0]


def _plan(model, qs, pose, settings) -> Plan:
    """A plan of postures qs on one placement, no stored transition, CoPs and margins stored under its rule."""
    base = default_base(model)
    plan = Plan(model.name, base, model.joint_names, [Placement(0, tuple(float(v) for v in pose))], [],
                settings=settings)  # fmt: skip
    ell = settings.get("ellipsoid")
    ell = None if ell is None else Ellipsoid.from_dict(ell)
    for i, q in enumerate(qs):
        cop, m = nominal_cop(model, q, "sim", base, ell)
        plan.postures.append(Posture(i, 0, q, 1.0, 1.0, (float(cop[0]), float(cop[1])), m))
    return plan


@pytest.fixture(scope="module")
def ell_plan(tulip, two):
    """The two postures with an ellipsoid whose centre moves the CoPs inward, required margin between the
    design parameters' smallest posture margin and the centre's."""
    q0, q1, pose = two
    bm = plan_base_model(tulip, default_base(tulip))
    theta = _inward_theta(tulip, [q0, q1], pose)
    ell = {"source": "test", "sigma": 1.0, "symbols": list(bm.symbols), "theta_m": [float(v) for v in theta],
           "cov_m2": (1e-14 * np.eye(bm.n)).tolist()}  # fmt: skip
    plan = _plan(tulip, [q0, q1], pose, {"ellipsoid": ell})
    by_params = min(balance(tulip, q).margin for q in (q0, q1))
    by_centre = min(p.margin for p in plan.postures)
    assert by_centre > by_params + 0.005  # the centre's CoPs are well inside the design parameters'
    plan.settings["required_margin"] = (by_params + by_centre) / 2
    return plan


def _rule_margins(model, plan, Q) -> np.ndarray:
    """Margins (m) of the rule's CoP (ellipsoid centre) of postures Q in the plan's one support polygon."""
    R = plan_base_model(model, plan.base).regressor(Q)[:, :2, :]
    return signed_margin(_polygon(model, plan.placements[0].other_foot), R @ cop_rule(model, plan).theta)


def test_plan_check_and_run_agree_on_an_ellipsoid_plans_move(tulip, ell_plan):
    """Both postures pass under the ellipsoid's centre; the move between them is then accepted by `plan check`
    and by the run (on the ground, no lifting), where the design parameters' CoP failed its first ticks."""
    cfg = load_config(None)
    ex = cfg.executor
    report = check_plan(tulip, ell_plan, executor=(ex.velocity_limit, ex.rate_hz))
    assert report.default_paths == 1
    assert report.transitions == [] and all(not pc.issues for pc in report.postures)
    run = check_run(ell_plan, tulip, cfg)
    assert run.problems == [] and run.warnings == [] and run.relift == set()
    assert run.moves[1].on_ground


def test_run_ticks_keep_the_required_margin_under_the_rule(tulip, ell_plan):
    """Every setpoint the run would stream keeps the required margin with the ellipsoid centre's CoP (the path's
    projection follows that CoP), while the design parameters' CoP of its first tick does not."""
    run = check_run(ell_plan, tulip, load_config(None))
    sp = run.moves[1].setpoints
    need = ell_plan.settings["required_margin"]
    assert _rule_margins(tulip, ell_plan, sp).min() >= need - 1e-6
    assert balance(tulip, sp[0]).margin < need


def test_without_ellipsoid_the_design_parameters_decide(tulip, two):
    """The same postures without an ellipsoid and the same required margin: the CoP is the design parameters'
    again, and the posture below it is refused by both checks."""
    q0, q1, pose = two
    by_params = min(balance(tulip, q).margin for q in (q0, q1))
    plan = _plan(tulip, [q0, q1], pose, {"required_margin": by_params + 0.002})
    assert any("CoP margin" in m for pc in check_plan(tulip, plan).postures for m in pc.issues)
    assert any("CoP margin" in m for m in check_run(plan, tulip, load_config(None)).problems)


@pytest.mark.parametrize("ellipsoid", [False, True])
def test_design_worst_case_is_the_checks(tulip, two, ell_plan, ellipsoid):
    """The planner's worst-case margin (`design.uncertainty.robust_margin`) is the one `plan check` recomputes
    (`robots.plan_rules.worst_case_margin`), over a ϑ_b ball and over an ellipsoid."""
    q0, q1, pose = two
    if ellipsoid:
        d = dict(
            ell_plan.settings["ellipsoid"],
            cov_m2=(4e-6 * np.eye(len(ell_plan.settings["ellipsoid"]["symbols"]))).tolist(),
        )
        plan = _plan(tulip, [q0, q1], pose, {"ellipsoid": d})
        designed = [robust_margin(tulip, q, 0.0, "sim", plan.base, Ellipsoid.from_dict(d)) for q in (q0, q1)]
    else:
        plan = _plan(tulip, [q0, q1], pose, {"uncertainty": 0.003})
        designed = [robust_margin(tulip, q, 0.003, "sim", plan.base) for q in (q0, q1)]
    checked = [worst_case_margin(tulip, plan, q) for q in (q0, q1)]
    nominal = [p.margin for p in plan.postures]
    assert designed == pytest.approx(checked, abs=1e-12)
    assert all(c < m for c, m in zip(checked, nominal, strict=True))  # the worst case is below the nominal
