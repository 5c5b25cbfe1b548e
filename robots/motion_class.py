"""Motion classes: the states a robot can move through in an experiment, for deriving what data can identify.

`free`: a fixed-base robot, any q inside the limits, any q̇, q̈. `double-support`: a biped with the base sole on
the ground and the other sole held flat and still (closed chain): q on the double-support manifold, q̇ in the
null space of the other sole's Jacobian, q̈ satisfying J q̈ + J̇q̇ = 0. Base parameters derived over a class are
exactly what experiments of that class can identify.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from formats.errors import DataError
from robots import dynamics as dyn
from robots.base_params import random_states
from robots.stance import other_site, random_double_support
from robots.tree import RobotModel

MOTION_CLASSES = ("free", "double-support")


def sample_states(
    model: RobotModel, motion: str, n: int, rng: np.random.Generator, base: str | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n random states (q, q̇, q̈) of a motion class."""
    if motion == "free":
        return random_states(model, n, rng)
    if motion != "double-support":
        raise DataError(f"unknown motion class {motion!r} (one of {', '.join(MOTION_CLASSES)})")
    if not model.bases:
        raise DataError(f"robot {model.name!r} has no named bases: double support needs two soles")
    base = base or next(iter(model.bases))
    other = other_site(model, base)
    params = next(iter(model.params))
    q = random_double_support(model, n, rng, params=params, base=base, margin=-np.inf)
    J = dyn.frame_jacobian(model, q, other, base, params)
    qd = np.empty_like(q)
    qdd = np.empty_like(q)
    for b in range(n):
        N = sla.null_space(J[b])
        qd[b] = N @ rng.standard_normal(N.shape[1])
    bias = dyn.frame_acceleration(model, q, qd, np.zeros_like(q), other, base, params)
    for b in range(n):
        N = sla.null_space(J[b])
        qdd[b] = -np.linalg.pinv(J[b]) @ bias[b] + N @ rng.standard_normal(N.shape[1])
    return q, qd, qdd
