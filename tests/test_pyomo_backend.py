"""The Pyomo + cyipopt front end solves the same NLP as the CasADi one (needs `make pynumero`)."""

import numpy as np
import pytest

from design.problems import Settings, solve
from design.pyomo_backend import asl_library, ensure_available, solve_pyomo
from design.sampler import sample_posture_set
from robots.stance import posture_problems


def test_asl_library_built_and_found():
    assert asl_library() is not None, "run `make pynumero` (the Makefile's test target does)"
    ensure_available()


@pytest.mark.parametrize("problem, seed", [("free-com", 5), ("centred-com", 2)])
def test_same_ipopt_path_from_a_raw_random_start(model, problem, seed):
    """Same variables, constraints, bounds, options and continuation: from a raw random initial set the
    first IPOPT iterations coincide (they stay together to the end: see the raw-start test below)."""
    s = Settings(problem=problem, sharpness=(4.0,), max_iter=12, max_rounds=1)
    init = sample_posture_set(model, 15, 3, np.random.default_rng(seed), centred=s.centred)
    a = solve(model, init, s)
    b = solve_pyomo(model, init, s)
    assert [st["iterations"] for st in b.stats["stages"]] == [st["iterations"] for st in a.stats["stages"]]
    assert [st["accepted"] for st in b.stats["stages"]] == [st["accepted"] for st in a.stats["stages"]]
    assert b.kappa == pytest.approx(a.kappa, rel=1e-6)
    np.testing.assert_allclose(b.postures.q, a.postures.q, atol=1e-6)
    np.testing.assert_allclose(b.postures.poses, a.postures.poses, atol=1e-6)


@pytest.mark.parametrize("problem, seed", [("free-com", 3), ("centred-com", 3)])
def test_same_kappa_as_casadi_from_a_raw_random_start(model, problem, seed):
    """The whole design (default continuation, structure re-detection) from a raw random initial set:
    both backends use the exact Hessian and the same objective code, so they reach the same κ."""
    s = Settings(problem=problem)
    init = sample_posture_set(model, 15, 3, np.random.default_rng(seed), centred=s.centred)
    a = solve(model, init, s)
    b = solve_pyomo(model, init, s)
    assert b.kappa == pytest.approx(a.kappa, rel=0.01)
    assert b.kappa < 0.5 * b.kappa_initial
    for q in b.postures.q:
        assert posture_problems(model, q, margin=s.required_margin) == []


def test_uncertainty_in_the_pyomo_backend(model):
    """The robust margin term is Pyomo algebra too (it was CasADi-only): same first iterations."""
    s = Settings(problem="free-com", uncertainty=0.002, sharpness=(8.0,), max_iter=8, max_rounds=1)
    init = sample_posture_set(model, 15, 3, np.random.default_rng(7), margin=0.1)
    a, b = solve(model, init, s), solve_pyomo(model, init, s)
    assert b.kappa == pytest.approx(a.kappa, rel=1e-6)


@pytest.mark.slow
def test_load_share_in_the_pyomo_backend(model):
    """The lever-rule load share is a Pyomo constraint too: the same κ as CasADi's, every share held."""
    from robots.kinematics import com_position
    from robots.stance import lever_share

    s = Settings(problem="free-com", load_share=0.3)
    init = sample_posture_set(model, 15, 3, np.random.default_rng(3))
    a, b = solve(model, init, s), solve_pyomo(model, init, s)
    assert b.kappa == pytest.approx(a.kappa, rel=0.03)  # measured 1.3 % apart (242.5 vs 239.4)
    ps = b.postures
    for q, j in zip(ps.q, ps.placement, strict=True):
        share = lever_share(model, com_position(model, q, "sim", "right")[:2], ps.poses[j])
        assert 0.3 - 1e-6 <= share <= 0.7 + 1e-6


def test_a_pyomo_solve_leaves_the_floating_point_environment_as_it_found_it(model):
    """AMPL's library (PyNumero reads every model through it) set the x87 precision to 53 bits for the rest of
    the process: OpenBLAS's x87 dnrm2 (LAPACK's QR and SVD through it) then rounded differently, and later
    designs in the same test process ended elsewhere (single support κ 6 527 instead of 160; a multistart's
    start 0 210.0 instead of 187.2)."""
    from scipy.linalg.blas import dnrm2

    from design import fpenv

    before = fpenv.controls()
    if before is None:
        pytest.skip("the x87 control word is x86-64's")
    assert before[0] & 0x300 == 0x300, "the x87 precision is not extended (64 bits) before the solve"
    x = np.random.default_rng(0).standard_normal(1001)
    norm = dnrm2(x)
    s = Settings(problem="free-com", sharpness=(4.0,), max_iter=2, max_rounds=1)
    solve_pyomo(model, sample_posture_set(model, 15, 3, np.random.default_rng(5)), s)
    assert fpenv.controls() == before
    assert dnrm2(x) == norm  # bit for bit
