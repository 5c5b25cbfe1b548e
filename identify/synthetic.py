"""Synthetic static recordings: random double-support postures of a 'true' robot plus CoP noise."""

from __future__ import annotations

import numpy as np

from formats.static_recording import StaticRecording
from robots.kinematics import com_position
from robots.stance import random_double_support
from robots.tree import ParameterSet, RobotModel


def simulate_static(
    model: RobotModel,
    n_postures: int,
    truth: str | ParameterSet = "sim",
    cop_noise: float = 0.004,
    base: str = "right",
    seed: int = 0,
    margin: float = 0.02,
    postures: np.ndarray | None = None,
) -> StaticRecording:
    """Postures (random, balanced with `margin` under the guess `sim`) and CoPs of the true robot + noise (m).

    Each posture is its own placement (the other foot lands anew); the noise is written as `cop_sd` of 1 sample."""
    rng = np.random.default_rng(seed)
    q = (
        postures
        if postures is not None
        else random_double_support(model, n_postures, rng, base=base, margin=margin)
    )
    cop = com_position(model, q, truth, base)[:, :2] + rng.normal(0.0, cop_noise, size=(len(q), 2))
    name = truth if isinstance(truth, str) else truth.name
    return StaticRecording(
        robot=model.name,
        base=base,
        joint_names=model.joint_names,
        posture=np.arange(len(q)),
        placement=np.arange(len(q)),  # every posture puts the other foot somewhere else: its own placement
        q=q,
        cop=cop,
        # the noise is one sample's: its spread, over √1 sample, is the SD of the posture's CoP
        cop_sd=np.full((len(q), 2), cop_noise) if cop_noise > 0 else None,
        samples=np.ones(len(q)) if cop_noise > 0 else None,
        meta={"source": f"synthetic: truth={name}, cop_noise={cop_noise} m, seed={seed}"},
    )
