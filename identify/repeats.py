"""Repeated runs of one plan, averaged sample by sample before the fit (synchronous averaging).

Fitted side by side, N runs of one plan count as N independent experiments: the SEs shrink as 1/√N. What the runs
share does not average out that way — the encoders' quantisation of the same motion, the bench's timing, the
contacts' compliance, a model error — and on a repeatable bench it is most of the residual: on the physics twin
the moment residuals of two runs of one plan correlate at 0.97–1.00. Their mean is one recording with all the
information the repeats hold; its residuals then show the shared error, and the SEs with it. Independent noise
averages down by √N, so nothing is lost when the repeats do differ.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from formats.dynamic_recording import DynamicRecording


@dataclass(frozen=True)
class Repeats:
    """`recordings`: one per group, in the order of each group's first input; `groups`: the input indices (from 0)
    each of them averages."""

    recordings: list[DynamicRecording]
    groups: list[list[int]]

    @property
    def averaged(self) -> bool:
        return any(len(g) > 1 for g in self.groups)


def _same_samples(a: DynamicRecording, b: DynamicRecording) -> bool:
    """Recordings that can be averaged: one robot, base, joints and kind of effort, on the same sample times
    (and, where recorded, the same plan times: a stalled tick is not a repeat)."""
    if (a.robot, a.base, list(a.joint_names)) != (b.robot, b.base, list(b.joint_names)):
        return False
    if (a.tau is None) != (b.tau is None) or (a.wrench is None) != (b.wrench is None):
        return False
    if a.cells is not None and b.cells is not None and a.cells.shape[1] != b.cells.shape[1]:
        return False
    if a.t.shape != b.t.shape or not np.allclose(a.t, b.t, rtol=0.0, atol=1e-9):
        return False
    if (a.t_plan is None) != (b.t_plan is None):
        return False
    return a.t_plan is None or np.allclose(a.t_plan, b.t_plan, rtol=0.0, atol=1e-9)


def average_repeats(recs: Sequence[DynamicRecording], plans: Sequence[Hashable | None]) -> Repeats:
    """Average the recordings of one plan (`plans[k]`: what recording k ran; None: unknown, never averaged) that
    share their sample times; any other recording stays as it is."""
    if len(plans) != len(recs):
        raise ValueError(f"{len(plans)} plan labels for {len(recs)} recordings")
    groups: list[list[int]] = []
    for k, (rec, plan) in enumerate(zip(recs, plans, strict=True)):
        home = None
        if plan is not None:
            home = next((g for g in groups if plans[g[0]] == plan and _same_samples(recs[g[0]], rec)), None)
        if home is None:
            groups.append([k])
        else:
            home.append(k)
    out = [recs[g[0]] if len(g) == 1 else _mean([recs[k] for k in g]) for g in groups]
    return Repeats(out, groups)


def _mean(runs: list[DynamicRecording]) -> DynamicRecording:
    """The sample-wise mean of recordings on the same sample times (the first's times and metadata)."""

    def mean(attr: str) -> np.ndarray | None:
        return None if getattr(runs[0], attr) is None else np.mean([getattr(r, attr) for r in runs], axis=0)

    cells = None if any(r.cells is None for r in runs) else np.mean([r.cells for r in runs], axis=0)
    return replace(runs[0], q=mean("q"), tau=mean("tau"), wrench=mean("wrench"), cells=cells,
                   meta={**runs[0].meta, "repeats_averaged": str(len(runs))})  # fmt: skip
