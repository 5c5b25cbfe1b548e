"""Partial least squares as the iCub paper writes it (spec icub-pls.md §2): NIPALS, *uncentred*, one response.

A = T Pᵀ + E, b = T c + e; Φ̂ = W (PᵀW)⁻¹ c with ν latent variables. The weights span the Krylov space of AᵀA
started at Aᵀb, so at ν = rank(A) (distinct singular values) Φ̂ = pinv(A) b. sklearn's PLSRegression centres
and scales the data, which the paper's equations do not. ν is chosen by K-fold cross-validation over
contiguous blocks (PRESS, Q² = 1 − PRESS / Σb²); ridge regression is the usual comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from formats.errors import DataError


def nipals(
    A: np.ndarray, b: np.ndarray, n_components: int, tol: float = 1e-13
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Uncentred PLS1 by NIPALS: weights W, loadings P, response loadings c (may stop early when Aᵀb is spent).

    The weights are orthogonal in exact arithmetic; they are re-orthogonalised against the previous ones (a no-op
    mathematically) so that ill-conditioned regressors keep the full-ν identity with least squares."""
    X, y = np.array(A, dtype=float), np.array(b, dtype=float)
    W, P, c = [], [], []
    start = np.linalg.norm(X.T @ y)
    for _ in range(n_components):
        w = X.T @ y
        if W:
            Wm = np.array(W).T
            w -= Wm @ (Wm.T @ w)
        nw = np.linalg.norm(w)
        if nw <= tol * start or nw == 0.0:
            break
        w /= nw
        t = X @ w
        tt = t @ t
        p = X.T @ t / tt
        ck = (y @ t) / tt
        X -= np.outer(t, p)
        y -= ck * t
        W.append(w)
        P.append(p)
        c.append(ck)
    return np.array(W).T, np.array(P).T, np.array(c)


def coefficient_path(W: np.ndarray, P: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Φ̂ for ν = 1 … len(c): column ν−1 is W_ν (P_νᵀ W_ν)⁻¹ c_ν."""
    out = np.zeros((W.shape[0], len(c)))
    PW = P.T @ W
    for v in range(1, len(c) + 1):
        out[:, v - 1] = W[:, :v] @ np.linalg.solve(PW[:v, :v], c[:v])
    return out


def compress(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, Qᵀb) of A = QR: every quantity of uncentred PLS1, LS and ridge depends on A and b only through AᵀA,
    Aᵀb (and bᵀb), which R and Qᵀb preserve — the same estimates from a square system. One triangular
    factorisation of [A b] gives both (its last column is Qᵀb) without forming Q."""
    if A.shape[0] <= A.shape[1]:
        return A, b
    p = A.shape[1]
    Rab = sla.qr(np.column_stack([A, b]), mode="r", overwrite_a=True, check_finite=False)[0]
    return Rab[:p, :p], Rab[:p, p]


def folds(n: int, k: int) -> list[np.ndarray]:
    """K contiguous blocks of row indices (time series: neighbouring samples are correlated)."""
    if not 2 <= k <= n:
        raise DataError(f"cross-validation needs 2 ≤ K ≤ {n} folds, got {k}")
    return np.array_split(np.arange(n), k)


def _groups(n_rows: int, groups: np.ndarray | None) -> np.ndarray:
    return np.arange(n_rows) if groups is None else np.asarray(groups)


def _split(groups: np.ndarray, k: int) -> list[np.ndarray]:
    """Row masks of K folds over contiguous blocks of the group labels (e.g. samples)."""
    labels = np.unique(groups)
    return [np.isin(groups, labels[f]) for f in folds(len(labels), k)]


Folds = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


def fold_factors(A: np.ndarray, b: np.ndarray, k: int = 5, groups: np.ndarray | None = None) -> Folds:
    """(test-row mask, R, Qᵀb of the training rows) per fold, from one factorisation per block: the training
    set's R is that of the other blocks' stacked R (same AᵀA, Aᵀb). Shared by the PLS, OLS and ridge CV."""
    tests = _split(_groups(len(b), groups), k)
    blocks = [compress(A[t], b[t]) for t in tests]
    out = []
    for i, t in enumerate(tests):
        R = np.vstack([blocks[j][0] for j in range(len(tests)) if j != i])
        Qb = np.concatenate([blocks[j][1] for j in range(len(tests)) if j != i])
        out.append((t, *compress(R, Qb)))
    return out


@dataclass
class CrossValidation:
    """PRESS and Q² per number of latent variables (index ν−1), the chosen ν."""

    press: np.ndarray
    q2: np.ndarray
    best: int


def cv_pls(
    A: np.ndarray,
    b: np.ndarray,
    max_components: int,
    k: int = 5,
    groups: np.ndarray | None = None,
    factors: Folds | None = None,
) -> CrossValidation:
    """K-fold PRESS(ν) for ν = 1 … max_components (contiguous folds of `groups`, default rows)."""
    press = np.zeros(max_components)
    for test, R, Qb in factors or fold_factors(A, b, k, groups):
        W, P, c = nipals(R, Qb, max_components)
        B = np.zeros((A.shape[1], max_components))
        if len(c):  # NIPALS may stop early: the last estimate stands for the larger ν
            path = coefficient_path(W, P, c)
            B[:, : len(c)] = path
            B[:, len(c) :] = path[:, -1:]
        r = b[test][:, None] - A[test] @ B
        press += np.sum(r**2, axis=0)
    q2 = 1.0 - press / float(b @ b)
    return CrossValidation(press, q2, int(np.argmin(press)) + 1)


def ridge(A: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """argmin ‖Ax − b‖² + λ‖x‖², by SVD."""
    R, Qb = compress(A, b)
    U, s, Vt = np.linalg.svd(R, full_matrices=False)
    return Vt.T @ ((s / (s**2 + lam)) * (U.T @ Qb))


def cv_ols(
    A: np.ndarray, b: np.ndarray, k: int = 5, groups: np.ndarray | None = None, factors: Folds | None = None
) -> float:
    """K-fold PRESS of least squares."""
    press = 0.0
    for test, R, Qb in factors or fold_factors(A, b, k, groups):
        x = np.linalg.lstsq(R, Qb, rcond=None)[0]
        r = b[test] - A[test] @ x
        press += float(r @ r)
    return press


def cv_ridge(
    A: np.ndarray,
    b: np.ndarray,
    lams: np.ndarray,
    k: int = 5,
    groups: np.ndarray | None = None,
    factors: Folds | None = None,
) -> tuple[np.ndarray, float]:
    """K-fold PRESS over a λ grid; (PRESS per λ, best λ)."""
    press = np.zeros(len(lams))
    for test, R, Qb in factors or fold_factors(A, b, k, groups):
        U, s, Vt = np.linalg.svd(R, full_matrices=False)
        Ub = U.T @ Qb
        for i, lam in enumerate(lams):
            x = Vt.T @ ((s / (s**2 + lam)) * Ub)
            r = b[test] - A[test] @ x
            press[i] += r @ r
    return press, float(lams[int(np.argmin(press))])


class PLSRegression:
    """Uncentred NIPALS PLS1. Configure (`n_components` fixed, or None: chosen by `cv`-fold cross-validation
    up to `max_components`), `fit(A, b[, groups])`; results in `coef_`, `n_components_`, `cv_`."""

    def __init__(self, n_components: int | None = None, cv: int = 5, max_components: int | None = None):
        if n_components is not None and n_components < 1:
            raise DataError(f"the number of latent variables must be ≥ 1, got {n_components}")
        self.n_components, self.cv, self.max_components = n_components, cv, max_components

    def fit(
        self, A: np.ndarray, b: np.ndarray, groups: np.ndarray | None = None, factors: Folds | None = None
    ) -> PLSRegression:
        """Fit on A (rows × columns), b (rows,); `groups` label rows kept together in CV (`factors`: precomputed
        fold factorisations of the same A, b)."""
        A, b = np.asarray(A, dtype=float), np.asarray(b, dtype=float)
        if A.ndim != 2 or b.shape != (A.shape[0],):
            raise DataError(f"PLS needs A (rows × columns) and b (rows,), got {A.shape} and {b.shape}")
        Rc, bc = compress(A, b)
        rank = np.linalg.matrix_rank(Rc)
        self.rank_ = int(rank)
        self.cv_: CrossValidation | None = None
        nu = self.n_components
        if nu is None:
            top = min(self.max_components or rank, rank)
            self.cv_ = cv_pls(A, b, top, self.cv, groups, factors)
            nu = self.cv_.best
        if nu > rank:
            raise DataError(f"{nu} latent variables requested; the data have rank {rank} (ν ≤ rank)")
        W, P, c = nipals(Rc, bc, nu)
        self.n_components_ = len(c)
        self.weights_, self.loadings_, self.y_loadings_ = W, P, c
        self.coef_ = W @ np.linalg.solve(P.T @ W, c) if len(c) else np.zeros(A.shape[1])
        return self

    def predict(self, A: np.ndarray) -> np.ndarray:
        return np.asarray(A) @ self.coef_
