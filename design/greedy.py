"""Greedy augmentation: from a pool of feasible postures, add one at a time the posture that lowers κ most.

This is how the thesis rescued its experiment (13 postures of run 3 added to the 26 that worked); here it
also serves to top up a plan after postures fail on hardware. Candidates must already be verified.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from design.criteria import design_matrix, kappa, n_identifiable
from robots.conditioning import singular_spread
from robots.tree import RobotModel


@dataclass
class GreedyResult:
    chosen: list[int]  # pool indices, in the order added
    kappas: list[float]  # κ after each addition


def greedy_augment(
    model: RobotModel, base_q: np.ndarray, pool_q: np.ndarray, count: int, base: str | None = None
) -> GreedyResult:
    """Add `count` postures from `pool_q` to `base_q`, each time the one giving the lowest true κ."""
    rows = design_matrix(model, base_q, base) if len(base_q) else np.zeros((0, n_identifiable(model, base)))
    pool_rows = design_matrix(model, pool_q, base).reshape(len(pool_q), 2, -1)
    chosen: list[int] = []
    kappas: list[float] = []
    remaining = list(range(len(pool_q)))
    for _ in range(min(count, len(remaining))):
        # κ; while rows are fewer than columns (κ infinite for every candidate), the rows' own spread, so the first
        # postures added are the most independent (the same number once the stack is tall)
        scores = [singular_spread(np.vstack([rows, pool_rows[i]])) for i in remaining]
        k = int(np.argmin(scores))
        i = remaining.pop(k)
        chosen.append(i)
        rows = np.vstack([rows, pool_rows[i]])
        kappas.append(float(kappa(rows)))  # the true κ (infinite while rows are fewer than columns)
    return GreedyResult(chosen, kappas)
