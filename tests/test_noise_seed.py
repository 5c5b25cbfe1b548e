"""The emulated bench's two seeds: `seed` is its hardware (the boards' cell errors and offsets, which a board
calibration measures once), `noise_seed` a run's randomness (sensor noise, placement error). Repeats of a plan
with their own noise seeds are independent realisations on the same boards; `poise run --noise-seed` records it."""

from __future__ import annotations

import numpy as np

from drivers.config import load_config
from drivers.emulators.world import SimWorld, WorldOptions
from robots.tulip import tulip


def _bench(**kw):
    world = SimWorld(tulip(), load_config(), WorldOptions(**kw))
    try:
        imp = [(b.imp.gain_error.copy(), b.imp.offset_kg.copy()) for b in world.boards]
        noise = [b.rng.normal(size=3) for b in world.boards] + [world.plant.rng.normal(size=3)]
    finally:
        world.close()
    return imp, noise


def test_a_runs_noise_seed_leaves_the_boards_alone():
    base, noise0 = _bench()
    same, noise0b = _bench(noise_seed=0)
    other, noise1 = _bench(noise_seed=1)
    for (g, o), (g1, o1), (g2, o2) in zip(base, same, other, strict=True):
        assert (
            np.array_equal(g, g1)
            and np.array_equal(g, g2)
            and np.array_equal(o, o1)
            and np.array_equal(o, o2)
        )
    assert all(np.array_equal(a, b) for a, b in zip(noise0, noise0b, strict=True))  # the default is seed 0
    assert not any(np.allclose(a, b) for a, b in zip(noise0, noise1, strict=True))
    hardware, _ = _bench(seed=5, noise_seed=1)
    assert not np.allclose(hardware[0][0], other[0][0])  # other boards
