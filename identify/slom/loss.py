"""Robust losses ρ(s) on the squared whitened norm s = ‖r‖² of one residual-block instance (IRLS weights)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Loss:
    """Base: plain least squares, ρ(s) = s."""

    def rho(self, s: np.ndarray) -> np.ndarray:
        return s

    def weight(self, s: np.ndarray) -> np.ndarray:
        """ρ'(s): scales residual and Jacobian rows by √ρ' (first-order IRLS, no curvature correction)."""
        return np.ones_like(s)


@dataclass(frozen=True)
class Huber(Loss):
    """Quadratic inside |r| ≤ delta (in σ units), linear outside."""

    delta: float = 1.345

    def rho(self, s):
        d2 = self.delta**2
        return np.where(s <= d2, s, 2.0 * self.delta * np.sqrt(s) - d2)

    def weight(self, s):
        return np.where(s <= self.delta**2, 1.0, self.delta / np.sqrt(np.maximum(s, 1e-300)))


@dataclass(frozen=True)
class Cauchy(Loss):
    """ρ(s) = c² log(1 + s/c²): heavy-tailed, strongly down-weights outliers."""

    c: float = 2.385

    def rho(self, s):
        c2 = self.c**2
        return c2 * np.log1p(s / c2)

    def weight(self, s):
        return 1.0 / (1.0 + s / self.c**2)
