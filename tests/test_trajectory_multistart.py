"""`plan trajectory --starts N --workers W`: the excitation design's starts in worker processes give the
trajectories the same seeds give one after another, each tagged with its seed and sorted the same way."""

from __future__ import annotations

import pytest

from trajectories.excitation import ExcitationSettings
from trajectories.multistart import design_starts

S = ExcitationSettings(period=5.0, duration=5.0, harmonics=2, samples=16, max_iter=15, sharpness=(8.0,),
                       self_collision=False)  # fmt: skip


def test_starts_in_processes_match_the_same_seeds_in_turn():
    seen = []
    parallel = design_starts(
        "icub-right-arm", S, seed=3, starts=2, workers=2, on_result=lambda k, r: seen.append(k)
    )
    in_turn = design_starts("icub-right-arm", S, seed=3, starts=2, workers=1)
    assert sorted(seen) == [0, 1]
    assert [r.seed for r in parallel] == [r.seed for r in in_turn] and {r.seed for r in parallel} == {3, 4}
    for a, b in zip(parallel, in_turn, strict=True):
        assert a.kappa == pytest.approx(b.kappa, rel=1e-9)
        assert a.trajectory.coefficients() == pytest.approx(b.trajectory.coefficients(), rel=1e-9, abs=1e-12)
