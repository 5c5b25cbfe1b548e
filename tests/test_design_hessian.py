"""Exact second derivatives of the κ surrogate: spectral calculus on M = HᵀH and the chain to joint angles."""

import numpy as np
import pytest
from scipy.special import logsumexp

from design.criteria import spectrum, surrogate
from design.objective import evaluate
from robots.stance import random_double_support


def _f_of_m(M: np.ndarray, p: float) -> float:
    """Reference: f_p from an eigen-decomposition of M (fine for the well-conditioned M used here)."""
    lam = np.linalg.eigvalsh((M + M.T) / 2)
    return (logsumexp(p * np.log(lam)) + logsumexp(-p * np.log(lam))) / (2 * p)


def _second_difference(f, M, A, B, h=1e-5):
    return (f(M + h * A + h * B) - f(M + h * A - h * B) - f(M - h * A + h * B) + f(M - h * A - h * B)) / (
        4 * h * h
    )


@pytest.mark.parametrize("p", [2.0, 8.0, 32.0])
def test_spectral_hessian_matches_finite_differences(rng, p):
    Ht = rng.normal(size=(6, 14)) * np.array([[3.0], [1.0], [1.0], [0.5], [2.0], [1.5]])
    M = Ht @ Ht.T
    sp = spectrum(Ht, p)
    assert sp.f == pytest.approx(surrogate(Ht.T, p)[0], rel=1e-13)
    A, B = rng.normal(size=(2, 6, 6))
    A, B = A + A.T, B + B.T
    fd = _second_difference(lambda X: _f_of_m(X, p), M, A, B)
    assert np.sum(sp.grad * A) == pytest.approx(
        (_f_of_m(M + 1e-6 * A, p) - _f_of_m(M - 1e-6 * A, p)) / 2e-6, rel=1e-6
    )
    full = A.ravel(order="F") @ sp.hessian() @ B.ravel(order="F")
    assert full == pytest.approx(fd, rel=1e-4, abs=1e-6)
    assert sp.form(np.stack([A, B]))[0, 1] == pytest.approx(full, rel=1e-10)


def test_spectral_hessian_with_repeated_eigenvalues(rng):
    """Divided differences must take their limit when eigenvalues coincide (no 0/0)."""
    U, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    Ht = U @ np.diag(np.sqrt([1.0, 1.0, 2.0, 2.0, 5.0]))
    sp = spectrum(Ht, 8.0)
    A, B = rng.normal(size=(2, 5, 5))
    A, B = A + A.T, B + B.T
    fd = _second_difference(lambda X: _f_of_m(X, 8.0), Ht @ Ht.T, A, B)
    assert np.all(np.isfinite(sp.gamma))
    assert sp.form(np.stack([A, B]))[0, 1] == pytest.approx(fd, rel=1e-4)


def test_spectral_terms_survive_ill_conditioning():
    Ht = np.diag([1.0, 1e-13, 1.0, 3.0])  # κ = 3e13: powers of λ would overflow
    sp = spectrum(Ht, 64.0)
    assert np.isfinite(sp.f) and np.all(np.isfinite(sp.hessian()))


def test_objective_gradient_and_hessian_in_joint_angles(model, rng):
    q = random_double_support(model, 15, rng)
    p = 16.0
    v = evaluate(model, "right", q, p)
    n = q.size
    assert v.hess.shape == (n, n) and np.allclose(v.hess, v.hess.T)
    grad = lambda x: evaluate(model, "right", x.reshape(q.shape), p).grad  # noqa: E731
    h = 1e-6
    for _ in range(3):
        d = rng.normal(size=n)
        fd = (grad(q.ravel() + h * d) - grad(q.ravel() - h * d)) / (2 * h)
        np.testing.assert_allclose(v.hess @ d, fd, atol=1e-5 * np.abs(fd).max())
    f = lambda x: evaluate(model, "right", x.reshape(q.shape), p).f  # noqa: E731
    d = rng.normal(size=n)
    assert v.grad @ d == pytest.approx((f(q.ravel() + h * d) - f(q.ravel() - h * d)) / (2 * h), rel=1e-6)
