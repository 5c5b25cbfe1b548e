"""`plan trajectory --scheduler`: the excitation design's starts on a Dask cluster give the same trajectories as
the same seeds run here."""

from __future__ import annotations

import pytest

from trajectories.excitation import ExcitationSettings
from trajectories.multistart import design_starts

S = ExcitationSettings(period=5.0, duration=5.0, harmonics=2, samples=16, max_iter=15, sharpness=(8.0,),
                       self_collision=False)  # fmt: skip


def test_starts_on_a_dask_cluster_match_local_ones():
    distributed = pytest.importorskip("distributed")
    local = design_starts("icub-right-arm", S, seed=3, starts=1)
    seen = []
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cl:
        remote = design_starts("icub-right-arm", S, seed=3, starts=2, scheduler=cl.scheduler_address,
                               on_result=lambda k, r: seen.append(k))  # fmt: skip
    assert sorted(seen) == [0, 1]
    same = [r for r in remote if r.kappa == pytest.approx(local[0].kappa, rel=1e-9)]
    assert len(same) == 1  # seed 3 ran on the cluster and gave the local result; seed 4 another one
    assert same[0].trajectory.coefficients() == pytest.approx(
        local[0].trajectory.coefficients(), rel=1e-9, abs=1e-12
    )


def test_a_scheduler_without_workers_is_refused_not_waited_on(monkeypatch, capsys):
    """A live scheduler with no worker would hold the starts forever: after WORKERS_TIMEOUT_S, one line naming
    the scheduler and how to start a worker. --workers (local processes) and --scheduler are one or the other."""
    distributed = pytest.importorskip("distributed")
    from conftest import one_line_error

    import design.multistart

    monkeypatch.setattr(design.multistart, "WORKERS_TIMEOUT_S", 1)
    argv = ["plan", "trajectory", "icub-right-arm", "--period", "5", "--duration", "5", "--harmonics", "2",
            "--samples", "16", "--max-iter", "15", "--no-self-collision", "--out", "never.json"]  # fmt: skip
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cl:
        err = one_line_error(capsys, [*argv, "--scheduler", cl.scheduler_address])
    assert (
        f"the Dask scheduler {cl.scheduler_address!r} has no worker (waited 1 s)" in err
        and "dask worker" in err
    )
    err = one_line_error(capsys, [*argv, "--scheduler", "tcp://127.0.0.1:8786", "--workers", "2"])
    assert "not allowed with argument" in err
