"""Conditioning of identification matrices: the true 2-norm condition number and a smooth surrogate of log κ.

The surrogate works on log singular values (soft-max minus soft-min, log-sum-exp form), so it and its gradient
stay finite and accurate however ill-conditioned H is — no powers of HᵀH, no inverses:
    f_p(H) = [LSE(2p·log σ) + LSE(−2p·log σ)] / (2p),   log κ ≤ f_p ≤ log κ + log(n)/p
Shared by static posture design and excitation-trajectory design.
"""

from __future__ import annotations

import numpy as np


def kappa(H: np.ndarray) -> float:
    """True 2-norm condition number σ_max/σ_min of a column space (inf when rank-deficient, and so with fewer rows
    than columns: the SVD's smallest singular value is then the rows' own, not the columns')."""
    H = np.asarray(H, dtype=float)
    if H.ndim == 2 and H.shape[0] < H.shape[1]:
        return float("inf")
    return singular_spread(H)


def singular_spread(H: np.ndarray) -> float:
    """σ_max/σ_min over the smaller of H's dimensions (inf when the smallest is 0): κ for a tall H; for a wide one
    how independent its rows are."""
    s = np.linalg.svd(np.asarray(H, dtype=float), compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


def lse(x: np.ndarray) -> tuple[float, np.ndarray]:
    """log Σ exp(x) and its gradient (the soft-max weights), overflow-safe."""
    m = x.max()
    e = np.exp(x - m)
    s = e.sum()
    return float(m + np.log(s)), e / s


def surrogate(H: np.ndarray, p: float) -> tuple[float, np.ndarray]:
    """f_p(H) and its gradient ∂f/∂H (same shape as H); smooth even with repeated singular values."""
    U, s, Vt = np.linalg.svd(H, full_matrices=False)
    s = np.maximum(s, 1e-300)
    ls = np.log(s)
    a, wp = lse(2 * p * ls)
    b, wm = lse(-2 * p * ls)
    f = (a + b) / (2 * p)
    dfds = (wp - wm) / s
    return f, (U * dfds) @ Vt


def log_det_information(H: np.ndarray) -> tuple[float, np.ndarray]:
    """−log det(HᵀH) (D-optimality, to minimise) and its gradient ∂/∂H = −2 H (HᵀH)⁻¹, via the SVD."""
    U, s, Vt = np.linalg.svd(H, full_matrices=False)
    s = np.maximum(s, 1e-300)
    return float(-2 * np.sum(np.log(s))), -2 * (U / s) @ Vt


def log_variances(H: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Σᵢ wᵢ log [(HᵀH)⁻¹]ᵢᵢ (to minimise: the parameters' log variances, each scale-free; w = 1 by default, or 1
    on the parameters a design focuses on) and ∂/∂H = −2 H M⁻¹ diag(w/c) M⁻¹, c = diag M⁻¹, via the SVD. Unlike
    log det it penalises correlation."""
    U, s, Vt = np.linalg.svd(H, full_matrices=False)
    s = np.maximum(s, 1e-300)
    c = np.sum((Vt / s[:, None]) ** 2, axis=0)
    w = np.ones_like(c) if weights is None else np.asarray(weights, dtype=float)
    # diag(w/c) Vᵀ; unweighted as Vᵀ / c, its arithmetic before focus weights existed (designs are chaotic in the
    # last bit, and the measured designs were made with each form)
    scaled = Vt / c if weights is None else Vt * (w / c)
    G = -2 * (U / s) @ ((scaled @ Vt.T) / s**2) @ Vt
    return float(np.sum(w * np.log(c))), G


def normalised_columns(H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """H with unit-norm columns (the scaling that minimises κ within a factor √n) and the column norms."""
    d = np.linalg.norm(H, axis=0)
    d = np.where(d > 0, d, 1.0)
    return H / d, d


def normalised_gradient(Hn: np.ndarray, d: np.ndarray, G: np.ndarray) -> np.ndarray:
    """∂f/∂H from ∂f/∂Hn for Hn = H diag(1/d), d = column norms: (Gⱼ − Hnⱼ (Hnⱼᵀ Gⱼ)) / dⱼ."""
    return (G - Hn * np.sum(Hn * G, axis=0)) / d
