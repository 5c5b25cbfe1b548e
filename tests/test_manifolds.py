"""⊞/⊟ round trips and tangent Jacobians (CasADi AD) against finite differences on every manifold."""

import casadi as ca
import numpy as np
import pytest

from identify import slom
from identify.manifolds import S2, SO3, Product, Rn, so3_exp, so3_log
from identify.slom.evaluate import compile_factor, eval_jacobians, eval_residuals

RNG = np.random.default_rng(7)


def random_point(m, k):
    if isinstance(m, Rn):
        return RNG.normal(size=(k, m.n))
    if isinstance(m, SO3):
        return SO3.to_flat(so3_exp(RNG.normal(size=(k, 3)) * 1.5))
    if isinstance(m, S2):
        return S2().normalize(RNG.normal(size=(k, 3)))
    return np.concatenate([random_point(p, k) for p in m.parts], axis=1)


MANIFOLDS = [Rn(4), SO3(), S2(), Product((SO3(), S2(), Rn(2)))]


@pytest.mark.parametrize("m", MANIFOLDS, ids=lambda m: type(m).__name__)
def test_plus_minus_round_trip(m):
    x = random_point(m, 200)
    d = RNG.normal(size=(200, m.tangent_dim))
    d *= (RNG.uniform(0, 3.0, 200) / np.maximum(np.linalg.norm(d, axis=1), 1e-12))[:, None]  # |δ| < π
    y = m.plus(x, d)
    np.testing.assert_allclose(m.minus(y, x), d, atol=1e-9)
    np.testing.assert_allclose(m.plus(x, m.minus(y, x)), y, atol=1e-9)
    np.testing.assert_allclose(m.minus(x, x), 0.0, atol=1e-12)


def test_so3_log_near_pi_and_identity():
    v = np.array([[0.0, 0.0, np.pi - 1e-7], [1e-9, 0, 0], [0.3, -2.9, 0.5]])
    v[2] *= (np.pi - 1e-4) / np.linalg.norm(v[2])
    np.testing.assert_allclose(so3_log(so3_exp(v)), v, atol=1e-6)
    R = so3_exp(RNG.normal(size=(50, 3)))
    np.testing.assert_allclose(R @ np.swapaxes(R, 1, 2), np.broadcast_to(np.eye(3), R.shape), atol=1e-12)


def test_s2_plus_stays_on_sphere():
    x = random_point(S2(), 100)
    y = S2().plus(x, RNG.normal(size=(100, 2)))
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), 1.0, atol=1e-12)


def _nonlinear(m):
    """A nonlinear CasADi function of the ambient vector (touching all components) and one data vector."""
    x = ca.SX.sym("x", m.ambient_dim)
    z = ca.SX.sym("z", 2)
    r = ca.vertcat(
        ca.sin(x) * z[0], ca.sumsqr(x) * z[1], ca.cos(ca.sum1(x * ca.DM(np.arange(m.ambient_dim))))
    )
    return ca.Function("f", [x, z], [r])


@pytest.mark.parametrize("m", MANIFOLDS, ids=lambda m: type(m).__name__)
def test_tangent_jacobian_matches_finite_differences(m):
    K = 5
    p = slom.Problem()
    v = p.add_variable("v", m, random_point(m, K), eliminate=True)
    z = RNG.normal(size=(K, 2))
    f = p.add_factor("f", _nonlinear(m), [v], [z], sigma=0.5)
    cf = compile_factor(p, f, threads=1)
    vals = {"v": v.values}
    r, (J,) = eval_jacobians(p, cf, vals)
    np.testing.assert_allclose(r, eval_residuals(p, cf, vals))
    h = 1e-6
    for i in range(m.tangent_dim):
        d = np.zeros((K, m.tangent_dim))
        d[:, i] = h
        rp = eval_residuals(p, cf, {"v": m.plus(v.values, d)})
        rm = eval_residuals(p, cf, {"v": m.plus(v.values, -d)})
        np.testing.assert_allclose(J[:, :, i], (rp - rm) / (2 * h), atol=1e-6, rtol=1e-5)
