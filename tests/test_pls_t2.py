"""Uncentred NIPALS PLS (identify/pls.py) and Hotelling T² contact detection (identify/t2.py)."""

import numpy as np
import pytest
from scipy.stats import binom, chi2

from formats.errors import DataError
from identify.pls import PLSRegression, coefficient_path, cv_ols, cv_ridge, nipals, ridge
from identify.t2 import StreamingT2, T2Detector, rates, roc, t2_threshold


def _problem(seed: int = 0, rows: int = 400, cols: int = 15, cond: float = 1e4, noise: float = 0.01):
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((rows, cols)))
    V, _ = np.linalg.qr(rng.standard_normal((cols, cols)))
    A = U @ np.diag(np.logspace(0, -np.log10(cond), cols)) @ V.T * 10
    x = rng.standard_normal(cols)
    return A, A @ x + noise * rng.standard_normal(rows), x


@pytest.mark.parametrize("cond", [1e2, 1e5])
def test_full_nu_equals_least_squares(cond):
    A, b, _ = _problem(cond=cond)
    pls = PLSRegression(n_components=A.shape[1]).fit(A, b)
    ls = np.linalg.pinv(A) @ b
    assert pls.n_components_ == A.shape[1]
    assert np.max(np.abs(pls.coef_ - ls)) <= 1e-9 * max(1.0, np.max(np.abs(ls)))


def test_rank_deficient_full_nu_is_minimum_norm():
    A, b, _ = _problem(cols=10)
    A = np.hstack([A, A[:, :3] @ np.array([[1.0], [-2.0], [0.5]])])  # one dependent column
    pls = PLSRegression(n_components=10).fit(A, b)
    assert pls.rank_ == 10
    assert np.max(np.abs(pls.coef_ - np.linalg.pinv(A) @ b)) < 1e-9


def test_uncentred_formula_and_shrinkage():
    """Φ̂ = W (PᵀW)⁻¹ c, and fewer latent variables shrink the estimate (‖Φ̂_ν‖ grows with ν)."""
    A, b, _ = _problem(cond=1e3)
    W, P, c = nipals(A, b, 6)
    assert np.allclose(W.T @ W, np.eye(6), atol=1e-10)  # orthonormal weights
    path = coefficient_path(W, P, c)
    assert np.allclose(path[:, -1], W @ np.linalg.solve(P.T @ W, c))
    norms = np.linalg.norm(path, axis=0)
    assert np.all(np.diff(norms) > -1e-12)
    # a centring implementation would differ: add a constant column's worth of offset to b
    assert not np.allclose(PLSRegression(n_components=2).fit(A, b + 5.0).coef_, path[:, 1])


def test_cross_validation_curve_and_comparison():
    A, b, x = _problem(cond=1e6, noise=0.05)
    pls = PLSRegression(cv=5).fit(A, b)
    cvr = pls.cv_
    assert cvr is not None and len(cvr.press) == pls.rank_ == A.shape[1]
    assert cvr.best == pls.n_components_ == int(np.argmin(cvr.press)) + 1
    assert np.allclose(cvr.q2, 1 - cvr.press / (b @ b))
    assert cvr.q2[cvr.best - 1] > cvr.q2[0]  # more than one component needed
    # PRESS of PLS at its best ν is no worse than OLS's (the full-ν member of the family)
    assert cvr.press.min() <= cv_ols(A, b, 5) * (1 + 1e-9)
    lams = np.logspace(-8, 2, 11)
    press, lam = cv_ridge(A, b, lams, 5)
    assert press.shape == (11,) and lam in lams
    A, b, _ = _problem(cond=1e2)
    assert np.allclose(ridge(A, b, 1e-12), np.linalg.lstsq(A, b, rcond=None)[0], rtol=1e-8, atol=1e-10)
    assert np.linalg.norm(ridge(A, b, 10.0)) < np.linalg.norm(ridge(A, b, 0.1))  # shrinks


def test_pls_bad_input():
    with pytest.raises(DataError):
        PLSRegression(n_components=0)
    with pytest.raises(DataError):
        PLSRegression().fit(np.ones((5, 2)), np.ones(4))
    with pytest.raises(DataError, match="rank 3"):
        PLSRegression(n_components=4).fit(*_problem(rows=20, cols=3)[:2])
    with pytest.raises(DataError, match="folds"):
        PLSRegression(cv=50).fit(*_problem(rows=20, cols=3)[:2])


def test_t2_threshold_matches_f_and_chi2_limit():
    assert t2_threshold(0.99, 6, 10**7) == pytest.approx(chi2.ppf(0.99, 6), rel=1e-4)
    assert t2_threshold(0.99, 6, 50) > t2_threshold(0.99, 6, 5000)  # small-sample penalty
    for bad in ((1.0, 6, 100), (0.99, 6, 6)):
        with pytest.raises(DataError):
            t2_threshold(*bad)


@pytest.mark.parametrize("covariance", ["diag", "full"])
def test_t2_false_positive_rate_is_alpha_consistent(covariance):
    rng = np.random.default_rng(3)
    sd = np.array([0.5, 0.5, 0.8, 0.02, 0.03, 0.01])
    det = T2Detector(0.99, covariance).fit(rng.standard_normal((3000, 6)) * sd)
    n = 20000
    fp = int(det.predict(rng.standard_normal((n, 6)) * sd).sum())
    lo, hi = binom.ppf([0.0005, 0.9995], n, 0.01)
    assert lo <= fp <= hi + 0.002 * n  # α = 0.99 → ≈ 1 % (estimated Λ adds a little)


def test_t2_detects_offsets_and_streams_like_batch():
    rng = np.random.default_rng(4)
    sd = np.array([0.3, 0.3, 0.3, 0.02, 0.02, 0.02])
    det = T2Detector().fit(rng.standard_normal((2000, 6)) * sd)
    E = rng.standard_normal((1000, 6)) * sd
    contact = np.zeros(1000, bool)
    contact[500:] = True
    E[500:, 0] += 3.0  # a 3 N push: 10 σ
    t2 = det.statistic(E)
    tpr, fpr = rates(t2, contact, det.threshold_)
    assert tpr > 0.99 and fpr < 0.03
    stream = StreamingT2(det)
    out = [stream.update(e) for e in E]
    assert np.allclose([o[0] for o in out], t2)
    assert [o[1] for o in out] == list(det.predict(E))
    slow = StreamingT2(det, persistence=3)
    alarms = np.array([slow.update(e)[1] for e in E])
    assert alarms.sum() <= det.predict(E).sum() and alarms[510:].all()
    r = roc(det, t2, contact)
    assert np.all(np.diff(r.tpr) <= 1e-12) and np.all(np.diff(r.fpr) <= 1e-12)  # α up → fewer alarms
    assert r.auc > 0.99 and set(r.to_dict()) == {"alpha", "threshold", "tpr", "fpr", "auc"}


def test_t2_bad_input():
    with pytest.raises(DataError):
        T2Detector(covariance="huge")
    with pytest.raises(DataError):
        T2Detector().fit(np.full((100, 6), np.nan))
    with pytest.raises(DataError):
        T2Detector().fit(np.ones((100, 6)))  # zero variance
    with pytest.raises(DataError):
        StreamingT2(T2Detector().fit(np.random.default_rng(0).standard_normal((50, 6))), persistence=0)
