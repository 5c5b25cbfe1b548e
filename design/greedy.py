"""Greedy augmentation: from a pool of feasible postures, add one at a time the posture that lowers κ most.

This is how the thesis rescued its experiment (13 postures of run 3 added to the 26 that worked); here it
also serves to top up a plan after postures fail on hardware. Candidates must already be verified.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from design.criteria import design_matrix, kappa, n_identifiable
from robots.com_base import rank_report
from robots.conditioning import singular_spread
from robots.tree import RobotModel


@dataclass
class GreedyResult:
    chosen: list[int]  # pool indices, in the order added
    kappas: list[float | None]  # κ after each addition (None while the rows cannot identify every parameter)


def identified_kappa(H: np.ndarray) -> float | None:
    """κ of H, or None when its rank is short (κ then infinite or a meaningless ~1e16–1e35; the rank decision of
    `design.verify.unidentified`)."""
    return float(kappa(H)) if rank_report(H, [])[0] == H.shape[1] else None


def greedy_augment(
    model: RobotModel, base_q: np.ndarray, pool_q: np.ndarray, count: int, base: str | None = None
) -> GreedyResult:
    """Add `count` postures from `pool_q` to `base_q`, each time the one giving the lowest true κ."""
    rows = design_matrix(model, base_q, base) if len(base_q) else np.zeros((0, n_identifiable(model, base)))
    pool_rows = design_matrix(model, pool_q, base).reshape(len(pool_q), 2, -1)
    chosen: list[int] = []
    kappas: list[float | None] = []
    remaining = list(range(len(pool_q)))
    for _ in range(min(count, len(remaining))):
        # κ; while rows are fewer than columns (κ infinite for every candidate), the rows' own spread, so the first
        # postures added are the most independent (the same number once the stack is tall)
        scores = [singular_spread(np.vstack([rows, pool_rows[i]])) for i in remaining]
        k = int(np.argmin(scores))
        i = remaining.pop(k)
        chosen.append(i)
        rows = np.vstack([rows, pool_rows[i]])
        kappas.append(identified_kappa(rows))
    return GreedyResult(chosen, kappas)
