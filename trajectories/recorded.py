"""Motions already recorded, as a design's prior (`plan trajectory --prior rec.csv`): plain arrays of the joint
motion as the identification differentiates it, sampled anywhere in their span by interpolation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicSpline

from formats.dynamic_recording import MOTIONS
from formats.errors import DataError


@dataclass(frozen=True, eq=False)
class RecordedMotion:
    """A recorded joint motion, filtered and differentiated, its filter's edges dropped: times t (K,) in s and q, q̇,
    q̈ (K, n). `motion`: what it identifies — free (joint torques of a fixed base), double-support or single-support
    (the boards' wrench) —; `base`: its fixed base link or stance sole; `source`: where it came from (for messages);
    the robot and joints it is of; `start` and `middle`: the recorded postures at its first and middle sample (a
    posture at rest before the motion, and where a double-support recording's foot placement is read)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    motion: str
    base: str
    source: str
    robot: str
    joint_names: tuple[str, ...]
    start: np.ndarray
    middle: np.ndarray

    def __post_init__(self) -> None:
        if self.motion not in MOTIONS:
            raise DataError(f"recorded motion {self.motion!r} unknown (choose from {MOTIONS})")
        K, n = len(self.t), len(self.joint_names)
        for name in ("q", "qd", "qdd"):
            if np.shape(getattr(self, name)) != (K, n):
                raise DataError(
                    f"{self.source}: {name} is {np.shape(getattr(self, name))}, expected ({K}, {n})"
                )
        if K < 2 or np.any(np.diff(self.t) <= 0):
            raise DataError(f"{self.source}: too short (or its times do not increase) to resample")

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @property
    def duration(self) -> float:
        """The span its samples cover (s)."""
        return float(self.t[-1] - self.t[0])

    def grid(self, dt: float) -> np.ndarray:
        """The times k·dt (s, the recording's clock) inside its span: a design grid's step, the recording's phase."""
        k = np.arange(np.ceil(self.t[0] / dt - 1e-9), np.floor(self.t[-1] / dt + 1e-9) + 1)
        return np.clip(k * dt, self.t[0], self.t[-1])

    def sample(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, q̇, q̈ at times t inside the span, each interpolated by a cubic spline through the filtered samples
        (band-limited well under the sample rate by the filter: the spline's error is far below the filter's)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        if t.size and (t.min() < self.t[0] - 1e-9 or t.max() > self.t[-1] + 1e-9):
            raise DataError(f"{self.source}: times outside the recorded span {self.t[0]:g}…{self.t[-1]:g} s")
        return tuple(CubicSpline(self.t, a, axis=0)(t) for a in (self.q, self.qd, self.qdd))
