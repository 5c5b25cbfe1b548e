"""Hotelling T² contact detection on the F/T prediction error (spec icub-pls.md §3, paper eqs. 17–18).

T²(t) = eᵀ Λ⁻¹ e, e = y − ŷ, Λ = diag(σ₁² … σₙ²) of the residuals of contact-free data; in control while
T² ≤ T²_α = n(N−1)/(N−n) F_{n, N−n; α}, n the dimension of e (6 for a wrench; the spec's ν there is the
paper's n), N the samples Λ was estimated from, α = 0.99.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import f as f_dist

from formats.errors import DataError


def t2_threshold(alpha: float, n: int, N: int) -> float:
    """T²_α for an n-dimensional error and a covariance estimated from N samples."""
    if not 0 < alpha < 1:
        raise DataError(f"α must lie in (0, 1), got {alpha}")
    if N <= n:
        raise DataError(f"the covariance needs more than {n} contact-free samples, got {N}")
    return float(n * (N - 1) / (N - n) * f_dist.ppf(alpha, n, N - n))


class T2Detector:
    """Configure (α, `covariance` 'diag' as the paper or 'full'), `fit(E)` on contact-free prediction errors
    (N × n); then `statistic(E)`, `predict(E)` (True = contact). Results: `scale_`, `threshold_`, `samples_`."""

    def __init__(self, alpha: float = 0.99, covariance: str = "diag"):
        if covariance not in ("diag", "full"):
            raise DataError(f"covariance must be 'diag' or 'full', got {covariance!r}")
        t2_threshold(alpha, 1, 2)  # validates α
        self.alpha, self.covariance = alpha, covariance

    def fit(self, E: np.ndarray) -> T2Detector:
        E = np.atleast_2d(np.asarray(E, dtype=float))
        if not np.all(np.isfinite(E)):
            raise DataError("prediction errors contain NaN or infinite values")
        N, n = E.shape
        self.samples_, self.dim_ = N, n
        if self.covariance == "diag":
            var = E.var(axis=0, ddof=1)
            if np.any(var <= 0):
                raise DataError("a prediction-error component has zero variance")
            self.scale_ = np.diag(var)
        else:
            self.scale_ = np.cov(E, rowvar=False).reshape(n, n)
            if np.linalg.matrix_rank(self.scale_) < n:
                raise DataError("the prediction-error covariance is singular (dependent components)")
        self._inv = np.linalg.inv(self.scale_)
        self.threshold_ = t2_threshold(self.alpha, n, N)
        return self

    def threshold(self, alpha: float) -> float:
        """T²_α of this detector's dimension and sample count at another confidence level."""
        return t2_threshold(alpha, self.dim_, self.samples_)

    def statistic(self, E: np.ndarray) -> np.ndarray:
        """T² of each row of E (K × n)."""
        E = np.atleast_2d(np.asarray(E, dtype=float))
        if E.shape[1] != self.dim_:
            raise DataError(f"prediction errors have {E.shape[1]} components, the detector {self.dim_}")
        return np.einsum("ki,ij,kj->k", E, self._inv, E)

    def predict(self, E: np.ndarray, alpha: float | None = None) -> np.ndarray:
        lim = self.threshold_ if alpha is None else self.threshold(alpha)
        return self.statistic(E) > lim


class StreamingT2:
    """Online detector: `update(e)` per sample → (T², alarm); an alarm needs `persistence` consecutive samples
    above the threshold (1: the paper's rule)."""

    def __init__(self, detector: T2Detector, persistence: int = 1):
        if persistence < 1:
            raise DataError(f"persistence must be ≥ 1, got {persistence}")
        self.detector, self.persistence = detector, persistence
        self._run = 0
        self.samples = 0

    def update(self, e: np.ndarray) -> tuple[float, bool]:
        e = np.asarray(e, dtype=float).reshape(-1)
        t2 = float(e @ self.detector._inv @ e)
        self._run = self._run + 1 if t2 > self.detector.threshold_ else 0
        self.samples += 1
        return t2, self._run >= self.persistence


@dataclass
class ROC:
    """True/false positive rates per confidence level α (and the T² thresholds), area under the curve."""

    alpha: np.ndarray
    threshold: np.ndarray
    tpr: np.ndarray
    fpr: np.ndarray
    auc: float

    def to_dict(self) -> dict:
        return {
            "alpha": self.alpha.tolist(),
            "threshold": self.threshold.tolist(),
            "tpr": self.tpr.tolist(),
            "fpr": self.fpr.tolist(),
            "auc": self.auc,
        }


def rates(t2: np.ndarray, contact: np.ndarray, threshold: float) -> tuple[float, float]:
    """(TPR, FPR) of the rule T² > threshold against the true contact flags."""
    contact = np.asarray(contact, dtype=bool)
    alarm = t2 > threshold
    tpr = float(alarm[contact].mean()) if contact.any() else float("nan")
    fpr = float(alarm[~contact].mean()) if (~contact).any() else float("nan")
    return tpr, fpr


def roc(detector: T2Detector, t2: np.ndarray, contact: np.ndarray, alphas: np.ndarray | None = None) -> ROC:
    """ROC over confidence levels α (default 0.5 … 1 − 1e-6), AUC over all thresholds."""
    if alphas is None:
        alphas = 1.0 - np.logspace(np.log10(0.5), -6, 40)
    thr = np.array([detector.threshold(a) for a in alphas])
    tf = np.array([rates(t2, contact, t) for t in thr])
    contact = np.asarray(contact, dtype=bool)
    order = np.argsort(-t2)  # AUC over every threshold: P(T²_contact > T²_free)
    hits = contact[order]
    tp = np.concatenate([[0], np.cumsum(hits)]) / max(hits.sum(), 1)
    fp = np.concatenate([[0], np.cumsum(~hits)]) / max((~hits).sum(), 1)
    auc = float(np.trapezoid(tp, fp))
    return ROC(np.asarray(alphas), thr, tf[:, 0], tf[:, 1], auc)
