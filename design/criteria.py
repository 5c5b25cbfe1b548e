"""Design criteria: the true 2-norm condition number and a smooth, numerically safe surrogate of log κ.

The surrogate works on log singular values (soft-max minus soft-min, log-sum-exp form), so it and its
gradient stay finite and accurate however ill-conditioned H is — no powers of HᵀH, no inverses.
    f_p(H) = [LSE(2p·log σ) + LSE(−2p·log σ)] / (2p),   log κ ≤ f_p ≤ log κ + log(n)/p
"""

from __future__ import annotations

from functools import lru_cache

import casadi as ca
import numpy as np

from robots.com_base import BaseModel, derive_base
from robots.tree import RobotModel


@lru_cache(maxsize=8)
def base_model(model: RobotModel, base: str) -> BaseModel:
    return derive_base(model, base)


@lru_cache(maxsize=8)
def design_columns(model: RobotModel, base: str) -> tuple[int, ...]:
    """Columns of R_b whose x/y rows are not identically zero in double support (25 of 27 for TUlip)."""
    from robots.stance import random_double_support

    bm = base_model(model, base)
    q = random_double_support(model, 12, np.random.default_rng(0), base=base)
    H = bm.regressor(q)[:, :2, :].reshape(-1, bm.n)
    norms = np.linalg.norm(H, axis=0)
    return tuple(int(i) for i in np.flatnonzero(norms > 1e-9 * norms.max()))


def design_matrix(model: RobotModel, q: np.ndarray, base: str = "right") -> np.ndarray:
    """H: x/y rows of R_b(q_i) stacked over postures, identifiable columns only (2N × 25)."""
    bm = base_model(model, base)
    R = bm.regressor(np.atleast_2d(q))[:, :2, :]
    return R[:, :, list(design_columns(model, base))].reshape(-1, len(design_columns(model, base)))


def kappa(H: np.ndarray) -> float:
    """True 2-norm condition number σ_max/σ_min (inf when rank-deficient)."""
    s = np.linalg.svd(np.asarray(H, dtype=float), compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


def kappa_of(model: RobotModel, q: np.ndarray, base: str = "right") -> float:
    return kappa(design_matrix(model, q, base))


def _lse(x: np.ndarray) -> tuple[float, np.ndarray]:
    m = x.max()
    e = np.exp(x - m)
    s = e.sum()
    return float(m + np.log(s)), e / s


def surrogate(H: np.ndarray, p: float) -> tuple[float, np.ndarray]:
    """f_p(H) and its gradient ∂f/∂H (same shape as H); smooth even with repeated singular values."""
    U, s, Vt = np.linalg.svd(H, full_matrices=False)
    s = np.maximum(s, 1e-300)
    ls = np.log(s)
    a, wp = _lse(2 * p * ls)
    b, wm = _lse(-2 * p * ls)
    f = (a + b) / (2 * p)
    dfds = (wp - wm) / s
    return f, (U * dfds) @ Vt


class _SurrogateGrad(ca.Callback):
    """Jacobian of the surrogate w.r.t. H (row vector) and p (not needed by the NLP: zero), numeric."""

    def __init__(self, shape: tuple[int, int]):
        ca.Callback.__init__(self)
        self.shape = shape
        self.construct("surrogate_grad", {"enable_fd": False})

    def get_n_in(self):
        return 3

    def get_n_out(self):
        return 2

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(*self.shape) if i == 0 else ca.Sparsity.dense(1, 1)

    def get_sparsity_out(self, i):
        return ca.Sparsity.dense(1, self.shape[0] * self.shape[1]) if i == 0 else ca.Sparsity.dense(1, 1)

    def eval(self, arg):
        _, g = surrogate(np.asarray(arg[0]), float(arg[1]))
        return [ca.DM(g.reshape(1, -1, order="F")), ca.DM(0.0)]


class SurrogateKappa(ca.Callback):
    """CasADi node f_p(H) (inputs H and the sharpness p) with an exact spectral Jacobian, for an MX NLP."""

    def __init__(self, shape: tuple[int, int]):
        ca.Callback.__init__(self)
        self.shape = shape
        self._grad = _SurrogateGrad(shape)
        self.construct("surrogate_kappa", {"enable_fd": False})

    def get_n_in(self):
        return 2

    def get_n_out(self):
        return 1

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(*self.shape) if i == 0 else ca.Sparsity.dense(1, 1)

    def get_sparsity_out(self, i):
        return ca.Sparsity.dense(1, 1)

    def eval(self, arg):
        f, _ = surrogate(np.asarray(arg[0]), float(arg[1]))
        return [ca.DM(f)]

    def has_jacobian(self):
        return True

    def get_jacobian(self, name, inames, onames, opts):
        H = ca.MX.sym("H", *self.shape)
        p = ca.MX.sym("p", 1, 1)
        out = ca.MX.sym("f", 1, 1)
        jh, jp = self._grad(H, p, out)
        return ca.Function(name, [H, p, out], [jh, jp], inames, onames, opts)
