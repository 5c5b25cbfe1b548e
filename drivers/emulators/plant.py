"""Joint-space plant shared by the servo emulators: first-order tracking of the goal when torque is on."""

from __future__ import annotations

import threading
import time

import numpy as np


class JointPlant:
    """q(t) relaxes toward the goal with time constant `tau` (s), speed-capped at `max_speed` (rad/s), in robot
    time: the wall clock × `time_scale`, as the executor sees it at `--time-scale` (at 1× wall time, a 16× run's
    moves outran the servos 16-fold and tripped on tracking as soon as they settled)."""

    def __init__(
        self,
        q0: np.ndarray,
        tau: float = 0.05,
        max_speed: float = 6.0,
        noise_rad: float = 0.0,
        seed=0,
        time_scale: float = 1.0,
    ):
        self.q = np.array(q0, dtype=float)
        self.goal = self.q.copy()
        self.torque = np.zeros(len(self.q), dtype=bool)
        self.p_gain = np.full(len(self.q), 800.0)  # Position P Gain the bus received: noted, not modelled
        self.tau = tau
        self.max_speed = max_speed
        self.time_scale = time_scale
        self.noise_rad = noise_rad
        self.rng = np.random.default_rng(seed)
        self._t = time.monotonic()
        self.lock = threading.RLock()

    def step(self) -> np.ndarray:
        """Advance to now; returns the true joint positions."""
        with self.lock:
            now = time.monotonic()
            dt = max(0.0, now - self._t) * self.time_scale
            self._t = now
            if dt > 0:
                d = (self.goal - self.q) * (1.0 - np.exp(-dt / self.tau))
                d = np.clip(d, -self.max_speed * dt, self.max_speed * dt)
                self.q = np.where(self.torque, self.q + d, self.q)
            return self.q.copy()

    def measured(self) -> np.ndarray:
        q = self.step()
        if self.noise_rad > 0:
            q = q + self.rng.normal(0.0, self.noise_rad, q.shape)
        return q

    def set_goal(self, idx: int, value: float) -> None:
        with self.lock:
            self.step()
            self.goal[idx] = value

    def set_torque(self, idx: int, on: bool) -> None:
        with self.lock:
            self.step()
            self.torque[idx] = on
            if on:
                self.goal[idx] = self.q[idx]

    def set_profile(self, idx: int, seconds: float) -> None:
        """A servo's time-based goal profile (s): the first-order lag already smooths the goals; ignored."""

    def set_p_gain(self, idx: int, gain: float) -> None:
        """A servo's Position P Gain (Dynamixel units): kept for inspection; the first-order lag ignores it."""
        with self.lock:
            self.p_gain[idx] = gain
