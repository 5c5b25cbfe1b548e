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
from robots.base_params import DynamicBase, RegressorSpec, cached_dynamic_base, random_states
from robots.motion_names import MOTION_CLASSES
from robots.stance import other_site, random_double_support
from robots.tree import RobotModel


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


def held_sole_states(
    model: RobotModel,
    base: str,
    q_ref: np.ndarray,
    n: int,
    rng: np.random.Generator,
    spread: float = 0.1,
    params: str | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n random states near q_ref with the other sole held at the pose it has at q_ref (one foot placement:
    what a single experiment on two boards can reach). q by Newton projection onto the 6-D constraint."""
    from robots.kinematics import site_pose

    params = params or next(iter(model.params))
    other = other_site(model, base)
    Rt, pt = site_pose(model, np.asarray(q_ref, dtype=float), params, other, base)
    lo = np.where(np.isfinite(model.lower), model.lower, -np.inf)
    hi = np.where(np.isfinite(model.upper), model.upper, np.inf)
    q = np.clip(q_ref + rng.uniform(-spread, spread, (n, model.nq)), lo, hi)
    for _ in range(60):
        R, p = site_pose(model, q, params, other, base)
        E = np.einsum("ji,bjk->bik", Rt, R)
        rot = 0.5 * np.stack(
            [E[:, 2, 1] - E[:, 1, 2], E[:, 0, 2] - E[:, 2, 0], E[:, 1, 0] - E[:, 0, 1]], axis=1
        )
        c = np.concatenate([p - pt, np.einsum("ij,bj->bi", Rt, rot)], axis=1)
        if np.abs(c).max() < 1e-12:
            break
        J = dyn.frame_jacobian(model, q, other, base, params)
        q = q - np.einsum("bij,bj->bi", np.linalg.pinv(J), c)
    else:
        raise DataError("the other sole cannot be held at the reference placement near these postures")
    J = dyn.frame_jacobian(model, q, other, base, params)
    qd = np.empty_like(q)
    for b in range(n):
        N = sla.null_space(J[b])
        qd[b] = N @ rng.standard_normal(N.shape[1])
    bias = dyn.frame_acceleration(model, q, qd, np.zeros_like(q), other, base, params)
    qdd = np.empty_like(q)
    for b in range(n):
        N = sla.null_space(J[b])
        qdd[b] = -np.linalg.pinv(J[b]) @ bias[b] + N @ rng.standard_normal(N.shape[1])
    return q, qd, qdd


def placement_base(
    model: RobotModel, spec, q_ref: np.ndarray, simplified: bool = False, ordered: bool = False
):
    """Base parameters of a regressor over motions with the other sole held where it is at q_ref: a fixed foot
    only adds constant gravity terms, so one placement identifies fewer parameters than double support at large.
    `ordered`: independent columns in standard-parameter order, so recordings at one placement number them alike
    whatever their postures (`base_params.base_from_samples`). Cached on the model per placement."""
    from robots.base_params import base_from_samples, zero_set
    from robots.kinematics import site_pose

    params = next(iter(model.params))
    R, p = site_pose(model, np.asarray(q_ref, dtype=float), params, other_site(model, spec.base), spec.base)
    key = ("placement_base", spec, tuple(np.round(p, 6)), tuple(np.round(R.ravel(), 6)), simplified, ordered)
    if key not in model.memo:
        n = max(60, 10 * len(model.links) // 2)
        q, qd, qdd = held_sole_states(model, spec.base, q_ref, n, np.random.default_rng(0), params=params)
        zero = tuple(zero_set(model, list(model.simplified_dynamic_zero))) if simplified else ()
        model.memo[key] = base_from_samples(model, spec, q, qd, qdd, zero, ordered)
    return model.memo[key]


def standing_base(
    model: RobotModel, spec: RegressorSpec, simplified: bool = False, q_ref: np.ndarray | None = None
) -> DynamicBase:
    """The base parameters of a standing robot's board wrench, as identification numbers them and designs share:
    with `q_ref`, the other sole held at its placement there (double support), else free (single support).
    Independent columns in standard-parameter order, so a design's criterion, its focus and the fit speak of the
    same ϑN whichever point the moments are taken about (pivoting by column norm picks other columns for the
    boards' cells than for the sole)."""
    if q_ref is not None:
        return placement_base(model, spec, q_ref, simplified, ordered=True)
    return cached_dynamic_base(model, spec, simplified, "free", ordered=True)
