"""The common interface of joint trajectories: `sample(t) -> (q, q̇, q̈)`, `duration`, `n`, `to_json()`."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from formats.errors import DataError
from trajectories.fourier import FourierTrajectory
from trajectories.spline import SplineTrajectory


class Trajectory(Protocol):
    duration: float

    @property
    def n(self) -> int: ...

    def sample(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def to_json(self) -> dict: ...


KINDS = {"fourier": FourierTrajectory, "spline": SplineTrajectory}


def joint_trajectory_from_json(d) -> FourierTrajectory | SplineTrajectory:
    """A standing plan's joint trajectory (a closed chain's independent coordinates, a single support's joints): a
    Fourier series (also when `kind` is absent, as in older plans) or a spline."""
    if isinstance(d, dict) and d.get("kind") == "spline":
        return SplineTrajectory.from_json(d)
    return FourierTrajectory.from_json(d)


def trajectory_from_json(d: dict, model=None) -> Trajectory:
    """Build a trajectory from its JSON object (`kind`: fourier | spline | single-support | closed-chain, which needs the model)."""
    if isinstance(d, dict) and d.get("kind") == "closed-chain":
        from trajectories.closed_chain import ClosedChainTrajectory

        if model is None:
            raise DataError("a closed-chain trajectory needs its robot model")
        return ClosedChainTrajectory.from_json(d, model)
    if isinstance(d, dict) and d.get("kind") == "single-support":
        from trajectories.single_support import SingleSupportTrajectory

        return SingleSupportTrajectory.from_json(d)
    if not isinstance(d, dict) or d.get("kind") not in KINDS:
        kind = d.get("kind") if isinstance(d, dict) else type(d).__name__
        known = sorted(KINDS) + ["closed-chain", "single-support"]
        raise DataError(f"trajectory kind {kind!r} unknown (choose from {known})")
    return KINDS[d["kind"]].from_json(d)


def motion_band_hz(traj: Trajectory) -> float | None:
    """Highest frequency (Hz) of a Fourier-parametrised motion — a closed chain's independent coordinates, a
    single support's moving joints — or None: recordings declare it so that the identification's default cut-off
    follows the motion. A standing robot's spline declares the band of the Fourier series with as many free
    values per coordinate (W interior waypoints over T: W / 2T), because its boards' noise wants a cut-off
    below the 5 Hz default (README, Standing splines); an arm's spline declares none (its efforts validated
    better at 5 Hz than at 3)."""
    standing = next((getattr(traj, a) for a in ("independent", "motion") if hasattr(traj, a)), None)
    if isinstance(standing, SplineTrajectory):
        return (len(standing.times) - 2) / (2.0 * standing.duration)
    traj = standing if standing is not None else traj
    return traj.highest_frequency if isinstance(traj, FourierTrajectory) else None
