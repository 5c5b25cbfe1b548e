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


def test_spectral_hessian_with_repeated_eigenvalues(rng):
    """Divided differences must take their limit when eigenvalues coincide (no 0/0)."""
    U, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    Ht = U @ np.diag(np.sqrt([1.0, 1.0, 2.0, 2.0, 5.0]))
    sp = spectrum(Ht, 8.0)
    A, B = rng.normal(size=(2, 5, 5))
    A, B = A + A.T, B + B.T
    fd = _second_difference(lambda X: _f_of_m(X, 8.0), Ht @ Ht.T, A, B)
    assert np.all(np.isfinite(sp.gamma))
    assert A.ravel(order="F") @ sp.hessian() @ B.ravel(order="F") == pytest.approx(fd, rel=1e-4)


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


def test_low_rank_form_equals_the_full_spectral_hessian(model, rng):
    """`form_rows` exploits E = Jᵀh + hᵀJ (rank ≤ 4); it must give exactly vec(Eₐ)ᵀ ∇²f vec(E_b)."""
    q = random_double_support(model, 6, rng)
    qq, h, J, sp, _, _ = evaluate(model, "right", q, 8.0)._parts
    dM = np.einsum("nrka,nrl->nakl", J, h)
    dM = (dM + dM.transpose(0, 1, 3, 2)).reshape(-1, h.shape[2], h.shape[2])
    V = dM.reshape(len(dM), -1)  # symmetric directions: row-major vec = column-major vec
    ref = V @ sp.hessian() @ V.T
    np.testing.assert_allclose(sp.form_rows(h, J), ref, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize(
    "settings",
    [{"problem": "free-com"}, {"problem": "centred-com"}, {"problem": "free-com", "uncertainty": 0.003}],
    ids=["free-com", "centred-com", "robust"],
)
def test_lagrangian_hessian_equals_casadi_ad(model, rng, settings):
    """The hand-assembled Hessian of the Lagrangian = CasADi's AD Hessian of the same NLP (+ λ_f ∇²f)."""
    import casadi as ca

    from design import geometry as geo
    from design.problems import Settings, _build, _pack, _structures
    from design.sampler import sample_posture_set

    s = Settings(**settings)
    start = sample_posture_set(model, 6, 2, rng, margin=s.margin, centred=s.centred)
    nlp, _ = _build(model, s, start.placement, _structures(model, start.poses, s.base))
    obj, hess_lag = nlp["_keep"]
    X, g = nlp["x"], nlp["g"]
    lam = ca.MX.sym("lam", g.shape[0])
    ad = ca.Function("ad", [X, lam], [ca.hessian(ca.dot(lam, g), X)[0]])
    seps = np.array([geo.separating_line(pose, model, s.base)[:2] for pose in start.poses])
    x = _pack(start, seps) + 1e-3 * rng.normal(size=X.shape[0])  # off the feasible set: all terms alive
    lam_g = rng.normal(size=g.shape[0])
    ours = np.triu(np.asarray(ca.densify(hess_lag(x, 8.0, 0.0, lam_g))))
    ref = np.asarray(ad(x, lam_g))
    np.testing.assert_allclose(ours, np.triu(ref), atol=1e-10 * np.abs(ref).max())
    nq = 6 * model.nq
    with_f = np.asarray(ca.densify(hess_lag(x, 8.0, 0.7, lam_g)))
    f_hess = evaluate(model, "right", x[:nq].reshape(6, -1), 8.0).hess
    np.testing.assert_allclose(with_f[:nq, :nq] - ours[:nq, :nq], 0.7 * np.triu(f_hess), atol=1e-9)
