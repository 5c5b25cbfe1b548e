"""C² cubic splines through joint-space waypoints, at rest (q̇ = 0) at the first and last waypoint."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicSpline

from formats.errors import DataError
from formats.json_format import check_numbers


@dataclass(frozen=True)
class SplineTrajectory:
    """Waypoints q (K × n) at strictly increasing times (s) from 0; clamped cubic spline per joint."""

    times: np.ndarray
    q: np.ndarray

    def __post_init__(self) -> None:
        t = np.asarray(self.times, dtype=float)
        q = np.asarray(self.q, dtype=float)
        if t.ndim != 1 or q.ndim != 2 or q.shape[0] != t.size or t.size < 2:
            raise DataError(
                f"spline: {t.size} times for waypoints of shape {q.shape}; need ≥ 2 rows, one per time"
            )
        if not (np.all(np.isfinite(t)) and np.all(np.isfinite(q))):
            raise DataError("spline waypoints or times contain NaN or infinite values")
        if t[0] != 0 or np.any(np.diff(t) <= 0):
            raise DataError("spline times must start at 0 s and strictly increase")
        object.__setattr__(self, "times", t)
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "_cs", CubicSpline(t, q, axis=0, bc_type="clamped"))

    @property
    def n(self) -> int:
        return self.q.shape[1]

    @property
    def duration(self) -> float:
        return float(self.times[-1])

    def sample(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, q̇, q̈ at times t (s, clipped to [0, duration]): each (len(t), n)."""
        t = np.clip(np.atleast_1d(np.asarray(t, dtype=float)), 0.0, self.duration)
        cs = self._cs
        return cs(t), cs(t, 1), cs(t, 2)

    def to_json(self) -> dict:
        return {"kind": "spline", "times_s": self.times.tolist(), "q": self.q.tolist()}

    @classmethod
    def from_json(cls, d: dict) -> SplineTrajectory:
        try:
            for key in ("times_s", "q"):
                check_numbers(d[key], key, "spline trajectory")
            return cls(np.asarray(d["times_s"], dtype=float), np.asarray(d["q"], dtype=float))
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"malformed spline trajectory ({exc})") from None


def spline_basis(times: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P, V, A (len(t) × len(times)): q = P Q, q̇ = V Q, q̈ = A Q for waypoints Q (one row per time) — the clamped
    spline is linear in its waypoints, so each column is the spline through one unit waypoint."""
    cs = CubicSpline(np.asarray(times, dtype=float), np.eye(len(times)), axis=0, bc_type="clamped")
    t = np.clip(np.asarray(t, dtype=float), 0.0, float(times[-1]))
    return cs(t), cs(t, 1), cs(t, 2)
