"""Design criteria of static posture design: the design matrix and the spectral calculus of the κ surrogate.

κ and the surrogate f_p itself live in `robots.conditioning` (shared with excitation-trajectory design); here
f_p is treated as a spectral function of M = HᵀH for its exact Hessian.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robots.com_base import BaseModel, derive_base
from robots.conditioning import kappa, lse, surrogate
from robots.memo import per_model
from robots.stance_spec import resolve_base
from robots.tree import RobotModel

PROBE_POSTURES = 12  # random double-support postures that reveal the identically-zero columns

__all__ = [
    "Spectrum",
    "base_model",
    "design_columns",
    "design_matrix",
    "kappa",
    "kappa_of",
    "min_postures",
    "n_identifiable",
    "spectrum",
    "surrogate",
]


def base_model(model: RobotModel, base: str | None = None) -> BaseModel:
    """The CoM base-parameter model of a base (default: the robot's stance base)."""
    return _base_model(model, resolve_base(model, base))


@per_model
def _base_model(model: RobotModel, base: str) -> BaseModel:
    return derive_base(model, base)


def design_columns(model: RobotModel, base: str | None = None) -> tuple[int, ...]:
    """The identifiable columns of static design: columns of R_b whose x/y (CoP) rows are not identically
    zero in double support. The one place that decides them; every count of parameters derives from it."""
    return _design_columns(model, resolve_base(model, base))


@per_model
def _design_columns(model: RobotModel, base: str) -> tuple[int, ...]:
    from robots.stance import random_double_support

    bm = base_model(model, base)
    q = random_double_support(model, PROBE_POSTURES, np.random.default_rng(0), base=base)
    H = bm.regressor(q)[:, :2, :].reshape(-1, bm.n)
    norms = np.linalg.norm(H, axis=0)
    return tuple(int(i) for i in np.flatnonzero(norms > 1e-9 * norms.max()))


def n_identifiable(model: RobotModel, base: str | None = None) -> int:
    """Number of identifiable CoM parameters of static double-support design (`design_columns`)."""
    return len(design_columns(model, base))


def min_postures(model: RobotModel, base: str | None = None) -> int:
    """Fewest postures whose CoP equations (2 a posture) can determine every identifiable parameter."""
    return -(-n_identifiable(model, base) // 2)


def design_matrix(model: RobotModel, q: np.ndarray, base: str | None = None) -> np.ndarray:
    """H: x/y rows of R_b(q_i) stacked over postures, identifiable columns only (2N × n_identifiable)."""
    base = resolve_base(model, base)
    bm = base_model(model, base)
    cols = list(design_columns(model, base))
    R = bm.regressor(np.atleast_2d(q))[:, :2, :]
    return R[:, :, cols].reshape(-1, len(cols))


def kappa_of(model: RobotModel, q: np.ndarray, base: str | None = None) -> float:
    return kappa(design_matrix(model, q, base))


@dataclass
class Spectrum:
    """f_p as a spectral function of M = HᵀH: eigenvectors U, eigenvalues λ = σ² (from the SVD of H, so
    accurate however ill-conditioned), first derivatives Φ'(λ), Hessian Φ''(λ) and divided differences Γ."""

    f: float
    U: np.ndarray
    lam: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    gamma: np.ndarray

    @property
    def grad(self) -> np.ndarray:
        """∂f/∂M (symmetric n×n)."""
        return (self.U * self.d1) @ self.U.T

    def hessian(self) -> np.ndarray:
        """∂²f/∂vec(M)² (n²×n², column-major vec, symmetric in the two orderings of off-diagonal pairs)."""
        Qt = _eigen_hessian(self.d2, self.gamma)
        W = np.kron(self.U.T, self.U.T)
        return W.T @ Qt @ W

    def form_rows(self, h: np.ndarray, J: np.ndarray) -> np.ndarray:
        """D²f[Eₐ, E_b] for the directions Eₐ = ∂M/∂xₐ of M = Σᵢ hᵢᵀhᵢ along each variable of each block i:
        h (N, r, n) are the rows of block i, J (N, r, n, m) their derivatives w.r.t. its m variables, so
        E = Jᵀh + hᵀJ has rank ≤ 2r. Returns the (N·m)×(N·m) Hessian without forming the directions."""
        N, r, _, m = J.shape
        K, n = N * m, self.U.shape[1]  # n: eigenpairs kept (fewer than columns when 2N < columns)
        hu = h @ self.U  # rows in the eigenbasis
        Ju = np.einsum("irka,kl->iarl", J, self.U, optimize=True)  # (N, m, r, n)
        Et = np.einsum("iark,irl->iakl", Ju, hu, optimize=True).reshape(K, n, n)
        Et += Et.transpose(0, 2, 1)
        dg = np.einsum("akk->ak", Et)
        Y = Et * self.gamma  # Γ∘Ẽₐ, symmetric
        # Z[a, j, (s, k)] = Σₗ ĥⱼ[s, l] Yₐ[l, k]; then D²f[Eₐ, E_b] = 2 Σ Ĵ_b ∘ Zₐⱼ over the block j of b,
        # as a loop of GEMMs (numpy's batched matmul is 7× slower here)
        Z = np.matmul(hu.reshape(1, N * r, n), Y).reshape(K, N, r * n)
        Jb = np.ascontiguousarray(Ju.reshape(N, m, r * n).transpose(0, 2, 1))
        out = dg @ self.d2 @ dg.T
        for j in range(N):
            out[:, j * m : (j + 1) * m] += 2 * (Z[:, j, :] @ Jb[j])
        return out


def _eigen_hessian(d2: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    n = len(d2)
    idx = np.arange(n * n)
    i, j = idx % n, idx // n
    Qt = np.zeros((n * n, n * n))
    off = i != j
    Qt[idx[off], idx[off]] = gamma[i[off], j[off]] / 2
    Qt[idx[off], (j + n * i)[off]] = gamma[i[off], j[off]] / 2
    d = np.arange(n) * (n + 1)
    Qt[np.ix_(d, d)] = d2
    return Qt


def _power_dd(lam: np.ndarray, w: np.ndarray, m: float) -> np.ndarray:
    """(λᵢᵐ − λⱼᵐ)/(λᵢ − λⱼ)/S for all pairs, with w = λᵐ⁺¹/S: stable for close and far-apart λ."""
    big = lam[:, None] >= lam[None, :]
    pick = big if m > 0 else ~big  # the factor λₖ^(m−1)/S is taken at the end that keeps exp(m·L) ≤ 1
    ref_l = np.where(pick, lam[:, None], lam[None, :])
    ref_w = np.where(pick, w[:, None], w[None, :])
    other = np.where(pick, lam[None, :], lam[:, None])
    L = np.log(other / ref_l)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(np.abs(L) < 1e-12, m, np.expm1(m * L) / np.expm1(L))
    return ref_w / ref_l**2 * ratio


def spectrum(Ht: np.ndarray, p: float) -> Spectrum:
    """f_p and its derivatives w.r.t. M = Ht Htᵀ (Ht = Hᵀ, n×2N), from the SVD of Ht."""
    U, s, _ = np.linalg.svd(np.asarray(Ht, dtype=float), full_matrices=False)
    s = np.maximum(s, 1e-300)
    lam = s**2
    ll = np.log(lam)
    A, a = lse(p * ll)
    B, b = lse(-p * ll)
    f = (A + B) / (2 * p)
    d1 = (a - b) / (2 * lam)
    ll2 = np.outer(lam, lam)
    d2 = p / 2 * ((np.diag(a) - np.outer(a, a)) + (np.diag(b) - np.outer(b, b))) / ll2
    d2 += np.diag((b - a) / (2 * lam**2))
    gamma = (_power_dd(lam, a, p - 1) - _power_dd(lam, b, -p - 1)) / 2
    np.fill_diagonal(gamma, 0.0)  # the diagonal belongs to d2
    return Spectrum(float(f), U, lam, d1, d2, gamma)
