"""The free-motion design's parametrisation on its grids: Swevers' Fourier series (periodic: the grid covers one
period without its end, which is its start) or C² cubic splines through waypoints (the grid covers the whole
motion, both ends). Either is linear in its design matrix X (rows: coefficients or waypoints; one column per
joint), so the designer, its limits and its start work on the bases these functions give."""

from __future__ import annotations

import numpy as np

from trajectories.fourier import FourierTrajectory, basis, rest_constraints
from trajectories.spline import SplineTrajectory, spline_basis


def is_spline(settings) -> bool:
    return settings.parametrisation == "spline"


def waypoint_times(settings) -> np.ndarray:
    """A spline design's waypoint times (s): both ends and `waypoints` between, evenly spaced."""
    return np.linspace(0.0, settings.duration, settings.waypoints + 2)


def design_rows(settings) -> int:
    """Rows of the design matrix X: the Fourier coefficients (1 + 2L) or the waypoints (both ends and those between)."""
    return settings.waypoints + 2 if is_spline(settings) else 1 + 2 * settings.harmonics


def design_times(settings, samples: int) -> np.ndarray:
    """`samples` grid times (s): over one period (Fourier) or the whole motion (spline)."""
    if is_spline(settings):
        return np.linspace(0.0, settings.duration, samples)
    return np.arange(samples) * settings.period / samples


def design_bases(settings, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P, V, A at times t: q = P X, q̇ = V X, q̈ = A X."""
    if is_spline(settings):
        return spline_basis(waypoint_times(settings), t)
    return basis(t, settings.harmonics, 2 * np.pi / settings.period)


def rest_rows(settings) -> np.ndarray:
    """E with E X = 0 ⇔ at rest (q̇ = q̈ = 0) where the motion starts and ends. A clamped spline has q̇ = 0 there
    already: its rows ask q̈ = 0 at both ends, so no step of acceleration (of torque) opens or closes the run. A
    standing robot's spline also ends where it started, where the executor sets it down (a Fourier series does
    by its period)."""
    if not is_spline(settings):
        return rest_constraints(settings.harmonics)
    E = design_bases(settings, np.array([0.0, settings.duration]))[2]
    if settings.motion == "free":
        return E
    S = start_rows(settings)
    return np.vstack([E, S[1] - S[0]])


def start_rows(settings) -> np.ndarray:
    """S with S X = the posture where the motion starts and ends (one row per such instant)."""
    ends = [0.0, settings.duration] if is_spline(settings) else [0.0]
    return design_bases(settings, np.array(ends))[0]


def design_trajectory(settings, X: np.ndarray):
    """The trajectory of design matrix X (rows × joints)."""
    if is_spline(settings):
        return SplineTrajectory(waypoint_times(settings), X)
    return FourierTrajectory.from_coefficients(X, settings.period, settings.duration)


def random_rows(settings, lo, hi, vmax, amax, rng: np.random.Generator) -> np.ndarray:
    """A feasible-looking random X, centred in the ranges [lo, hi]: small harmonics at rest at t = 0 (Fourier),
    or waypoints within reach of each other at the velocity limit (spline)."""
    n = len(lo)
    if is_spline(settings):
        step = settings.duration / (settings.waypoints + 1)
        amp = np.minimum((hi - lo) / 4, vmax * step / 3)
        return (lo + hi)[None, :] / 2 + rng.uniform(-1, 1, (settings.waypoints + 2, n)) * amp
    L, omega = settings.harmonics, 2 * np.pi / settings.period
    amp = np.minimum((hi - lo) / 4, np.minimum(vmax, amax / (omega * L)) / 2)
    a = rng.uniform(-1, 1, (L, n)) * amp / L
    b = rng.uniform(-1, 1, (L, n)) * amp / L
    a -= a.mean(axis=0)  # Σ a = 0
    ls = np.arange(1, L + 1)[:, None]
    b -= ls * (ls * b).sum(axis=0) / (ls**2).sum()  # Σ l·b = 0
    X = np.vstack([(lo + hi)[None, :] / 2, a, b])
    # the offset q0 is chosen so that the sampled positions are centred in the range
    P, _, _ = basis(np.linspace(0, settings.period, 50), L, omega)
    q = P @ X
    X[0] += (lo + hi) / 2 - (q.max(axis=0) + q.min(axis=0)) / 2
    return X


def waypoints_around(settings, q0: np.ndarray, amplitude: float, rng: np.random.Generator) -> np.ndarray:
    """A standing design's spline start: waypoints within ± amplitude / 2 of the posture q0, both ends on it."""
    X = q0 + rng.uniform(-1, 1, (settings.waypoints + 2, len(q0))) * amplitude / 2
    X[0] = X[-1] = q0
    return X


def shift_to_rest(settings, X: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """X moved so that the motion starts (and ends) in the rest posture."""
    X = X.copy()
    if is_spline(settings):
        X[0] = X[-1] = rest
    else:
        X[0] += rest - basis(np.zeros(1), settings.harmonics, 2 * np.pi / settings.period)[0][0] @ X
    return X
