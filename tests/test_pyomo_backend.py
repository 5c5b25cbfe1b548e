"""The Pyomo + cyipopt front end solves the same problem as the CasADi one (needs `make pynumero`)."""

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
def test_same_kappa_as_casadi_from_the_same_start(model, problem, seed):
    rough = Settings(problem=problem, sharpness=(4.0,))
    init = sample_posture_set(model, 15, 3, np.random.default_rng(seed), centred=rough.centred)
    start = solve(model, init, rough).postures  # a shared start inside one basin
    s = Settings(problem=problem, sharpness=(16.0,))
    a = solve(model, start, s)
    b = solve_pyomo(model, start, s)
    assert b.kappa == pytest.approx(a.kappa, rel=0.01)
    assert b.kappa <= b.kappa_initial * (1 + 1e-9)
    for q in b.postures.q:
        assert posture_problems(model, q, margin=s.required_margin) == []
