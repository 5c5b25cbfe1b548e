"""Finite Fourier series excitation trajectories (Swevers et al.): periodic, band-limited, linear in coefficients.

Per joint i, with ω = 2π/period and L harmonics:
    q_i(t)  = q0_i + Σ_l [a_il/(ω l)·sin(ω l t) − b_il/(ω l)·cos(ω l t)]
    q̇_i(t)  = Σ_l [a_il·cos(ω l t) + b_il·sin(ω l t)]
    q̈_i(t)  = Σ_l ω l·[−a_il·sin(ω l t) + b_il·cos(ω l t)]
Rest at t = 0 (and so at every multiple of the period): Σ_l a_il = 0 and Σ_l l·b_il = 0, linear equalities the
optimiser keeps. Samples at any t are `basis(t) @ coefficients`, so limits on q, q̇, q̈ are linear constraints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats.errors import DataError
from formats.json_format import check_numbers


@dataclass(frozen=True)
class FourierTrajectory:
    """Coefficients per joint: q0 (n,), a and b (n, L); `period` s, `duration` s (a multiple of the period)."""

    period: float
    duration: float
    q0: np.ndarray
    a: np.ndarray
    b: np.ndarray

    def __post_init__(self) -> None:
        a, b, q0 = (np.asarray(x, dtype=float) for x in (self.a, self.b, self.q0))
        if a.ndim != 2 or a.shape != b.shape or q0.shape != (a.shape[0],):
            raise DataError(f"Fourier coefficients: q0 {q0.shape}, a {a.shape}, b {b.shape} do not fit")
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b)) and np.all(np.isfinite(q0))):
            raise DataError("Fourier coefficients contain NaN or infinite values")
        if not (
            self.period > 0 and self.duration > 0 and np.isfinite(self.period) and np.isfinite(self.duration)
        ):
            raise DataError(f"period and duration must be positive, got {self.period}, {self.duration}")
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "q0", q0)

    @property
    def n(self) -> int:
        return self.a.shape[0]

    @property
    def harmonics(self) -> int:
        return self.a.shape[1]

    @property
    def omega(self) -> float:
        return 2 * np.pi / self.period

    @property
    def highest_frequency(self) -> float:
        """Hz of the top harmonic: the motion has no content above it (what a differentiating filter must pass)."""
        return self.harmonics / self.period

    def coefficients(self) -> np.ndarray:
        """X ((1 + 2L) × n): rows q0, a_1..a_L, b_1..b_L — what `basis` multiplies."""
        return np.vstack([self.q0[None, :], self.a.T, self.b.T])

    @classmethod
    def from_coefficients(cls, X: np.ndarray, period: float, duration: float) -> FourierTrajectory:
        X = np.asarray(X, dtype=float)
        L = (X.shape[0] - 1) // 2
        return cls(period, duration, X[0], X[1 : 1 + L].T, X[1 + L :].T)

    def sample(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, q̇, q̈ at times t: each (len(t), n)."""
        P, V, A = basis(np.atleast_1d(np.asarray(t, dtype=float)), self.harmonics, self.omega)
        X = self.coefficients()
        return P @ X, V @ X, A @ X

    def to_json(self) -> dict:
        return {
            "kind": "fourier",
            "period_s": self.period,
            "duration_s": self.duration,
            "q0": self.q0.tolist(),
            "a": self.a.tolist(),
            "b": self.b.tolist(),
        }

    @classmethod
    def from_json(cls, d: dict) -> FourierTrajectory:
        """From `to_json`'s object, every value a JSON number (a quoted "0.5" is refused, naming its field, as
        the plan's rate_hz is)."""
        if not isinstance(d, dict):
            raise DataError(f"malformed Fourier trajectory (an object expected, got {type(d).__name__})")
        missing = [k for k in ("period_s", "duration_s", "q0", "a", "b") if k not in d]
        if missing:
            raise DataError(f"malformed Fourier trajectory (missing {', '.join(repr(k) for k in missing)})")
        for key in ("period_s", "duration_s", "q0", "a", "b"):
            check_numbers(d[key], key, "Fourier trajectory")
        try:
            return cls(float(d["period_s"]), float(d["duration_s"]), d["q0"], d["a"], d["b"])
        except (TypeError, ValueError) as exc:
            raise DataError(f"malformed Fourier trajectory ({exc})") from None


def basis(t: np.ndarray, harmonics: int, omega: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P, V, A (len(t) × (1 + 2L)): q = P X, q̇ = V X, q̈ = A X for coefficients X (rows q0, a, b)."""
    t = np.asarray(t, dtype=float)[:, None]
    l = np.arange(1, harmonics + 1)[None, :]
    wl = omega * l
    s, c = np.sin(wl * t), np.cos(wl * t)
    one, zero = np.ones_like(t), np.zeros_like(t)
    P = np.hstack([one, s / wl, -c / wl])
    V = np.hstack([zero, c, s])
    A = np.hstack([zero, -wl * s, wl * c])
    return P, V, A


def rest_constraints(harmonics: int) -> np.ndarray:
    """E (2 × (1 + 2L)) with E X = 0 ⇔ q̇ = q̈ = 0 at t = 0 (and every period) for each joint column of X."""
    L = harmonics
    E = np.zeros((2, 1 + 2 * L))
    E[0, 1 : 1 + L] = 1.0
    E[1, 1 + L :] = np.arange(1, L + 1)
    return E
