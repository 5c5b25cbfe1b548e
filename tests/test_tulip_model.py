"""TUlip model oracles from the thesis (spec tulip-com.md §7)."""

import casadi as ca
import numpy as np
import pytest

from robots.com_base import derive_base, numeric_base, rank_report, standard_names, standard_regressor
from robots.com_variants import base_model, variant
from robots.kinematics import com_position, com_position_sym, site_pose
from robots.stance import balance, random_double_support

# Table 4.1 "Value" column (mm), from Table D.1.
TABLE_4_1 = [-10.601, -0.720, 0, 0, 3.101, -0.720, 0, 0, 3.101, 75.000, 0, -9.289, 0, 0, -0.711, 0, 193.004, 0,
             -276.749, -261.249, -12.538, 0, 43.251, 14.751, 0.462]  # fmt: skip
# Table 4.6 "TUlipMC" column (mm), from Table D.4: the rest are 0.
TABLE_4_6_MC = {10: 75.00, 17: 202.30, 19: -278.52, 20: -260.67, 21: -12.52, 23: 41.48, 24: 15.33, 25: 0.48}
# Table E.1 "Sim." column (mm), left-foot base; ϑ17 printed with the opposite sign [DISC] -> +193.00.
TABLE_E_1_SIM = [-10.60, -0.72, 0, 0, 3.10, -0.72, 0, 0, 3.10, 75.00, 0, 9.29, 0, 0, 0.71, 0, 193.00, 0,
                 -276.75, -261.25, -12.54, 0, 43.25, 14.75, 0.46]  # fmt: skip


def test_total_mass(model):
    assert model.params["sim"].total_mass == pytest.approx(22.64)
    assert model.params["mc"].total_mass == pytest.approx(27.0)


def test_base_values_match_table_4_1(model):
    v = derive_base(model, "right").values("sim") * 1000
    assert np.abs(v[:25] - TABLE_4_1).max() < 0.0005 + 1e-9
    assert v[25] == pytest.approx(0.707, abs=5e-4) and v[26] == pytest.approx(-39.293, abs=5e-4)


def test_base_values_match_table_4_6_mc(model):
    v = derive_base(model, "right").values("mc") * 1000
    expected = np.zeros(25)
    for k, val in TABLE_4_6_MC.items():
        expected[k - 1] = val
    assert np.abs(v[:25] - expected).max() < 0.005 + 1e-9


def test_left_base_matches_appendix_b2_values(model):
    bm = derive_base(model, "left")
    v = bm.values("sim") * 1000
    assert np.abs(v[:25] - TABLE_E_1_SIM).max() < 0.005 + 1e-9
    assert "l0y" in bm.formula(9) and bm.params[9].column == "−y of 0"


def test_grouping_formulas_follow_appendix_b1(model):
    bm = derive_base(model, "right")
    assert bm.params[1].column == "x of 1=2"
    assert bm.params[11].column == "y of 2=3=4=5"
    assert bm.params[16].column == "z of 0=1=7"
    assert bm.params[26].column == "−z of 6"
    assert bm.formula(9) == "(c0y·m0 + l0y·(m7 + m8 + m9 + m10 + m11 + m12))/M"
    assert bm.formula(24) == "(c11z·m11 + l11z·m12)/M"


@pytest.mark.parametrize("base", ["right", "left"])
@pytest.mark.parametrize("params", ["sim", "mc"])
def test_regressor_times_base_params_is_com(model, rng, base, params):
    bm = derive_base(model, base)
    q = rng.uniform(-np.pi, np.pi, size=(50, 12))
    direct = com_position(model, q, params, base)
    via_base = np.einsum("bij,j->bi", bm.regressor(q), bm.values(params))
    assert np.abs(direct - via_base).max() <= 1e-12


def test_regressor_entries_are_trigonometric(model, rng):
    R = derive_base(model, "right").regressor(rng.uniform(-np.pi, np.pi, size=(200, 12)))
    assert np.abs(R).max() <= 1.0 + 1e-12


def test_symbolic_and_numeric_kinematics_agree(model, rng):
    q = ca.SX.sym("q", 12)
    bm = derive_base(model, "right")
    f = ca.Function("f", [q], [com_position_sym(model, q, "sim"), bm.regressor_sym(q)])
    for qi in rng.uniform(-1, 1, size=(5, 12)):
        com, R = f(qi)
        assert np.allclose(np.asarray(com).ravel(), com_position(model, qi, "sim"), atol=1e-13)
        assert np.allclose(np.asarray(R), bm.regressor(qi), atol=1e-13)


def test_rank_27_for_random_configurations(model, rng):
    bm = derive_base(model, "right")
    H = bm.regressor(rng.uniform(-np.pi, np.pi, size=(40, 12))).reshape(-1, 27)
    assert np.linalg.matrix_rank(H) == 27


def test_numeric_qr_base_has_rank_27_and_spans_the_same_space(model, rng):
    q = rng.uniform(-np.pi, np.pi, size=(40, 12))
    Y = standard_regressor(model, q, "right", "sim")
    nb = numeric_base(Y, standard_names(model))
    assert nb.rank == 27
    A = derive_base(model, "right").regressor(q).reshape(-1, 27)
    Yb = Y.reshape(-1, Y.shape[-1])[:, nb.independent]
    assert np.linalg.matrix_rank(np.hstack([A, Yb]), tol=1e-8) == 27


def test_rank_25_in_double_support_names_26_and_27(model, rng):
    bm = derive_base(model, "right")
    q = random_double_support(model, 20, rng, margin=-1.0)
    H = bm.regressor(q)[:, :2, :].reshape(-1, 27)
    rank, dep = rank_report(H, bm.symbols)
    assert rank == 25 and [bm.symbols[j] for j in dep] == ["ϑ26", "ϑ27"]


def test_identifiable_and_simplified_subsets_are_derived(model):
    full = variant(model, "right", "full")
    simp = variant(model, "right", "simplified")
    assert len(full.estimated) == 25
    assert [g + 1 for g in simp.estimated] == [1, 5, 9, 10, 12, 15, 17, 19, 20, 21, 23, 24, 25]
    assert len(variant(model, "left", "simplified").estimated) == 13


def test_zero_posture_feet_gap_and_flat_feet(model):
    b = balance(model, np.zeros(12))
    assert b.feet_gap == pytest.approx(0.005, abs=1e-12)
    R, p = site_pose(model, np.zeros(12), "sim", "sole_l", "right")
    assert np.allclose(R, np.eye(3)) and p == pytest.approx([0, 0.13, 0])


def test_limits_and_coupled_limit(model):
    q = np.zeros(12)
    assert model.limit_violations(q) == []
    q[6], q[0] = np.radians(35), np.radians(-30)
    msgs = model.limit_violations(q)
    assert len(msgs) == 1 and "theta7 - theta1" in msgs[0]
    q = np.zeros(12)
    q[3] = np.radians(-5)
    assert "theta4" in model.limit_violations(q)[0]


def test_cached_base_model_is_reused(model):
    assert base_model(model, "right") is base_model(model, "right")
