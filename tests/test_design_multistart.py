"""Multi-start in worker processes and on a (local) Dask cluster give the same, reproducible results."""

import pytest

from design.planner import design
from design.problems import Settings

S = Settings(problem="free-com", sharpness=(8.0,), max_iter=300)


@pytest.fixture(scope="module")
def serial(model):
    return design(model, S, 15, 3, starts=2, seed=11, workers=1)


def test_processes_match_serial(model, serial):
    best, summary = design(model, S, 15, 3, starts=2, seed=11, workers=2)
    assert [r["kappa"] for r in summary] == pytest.approx([r["kappa"] for r in serial[1]], rel=1e-9)
    assert best.kappa == min(r["kappa"] for r in summary)
    assert all(r["kappa"] < r["kappa_initial"] for r in summary)


def test_dask_local_cluster(model, serial):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cl:
        seen = []
        best, summary = design(
            model,
            S,
            15,
            3,
            starts=2,
            seed=11,
            scheduler=cl.scheduler_address,
            on_result=lambda k, r, b: seen.append(k),
        )
    assert sorted(seen) == [0, 1]
    assert [r["kappa"] for r in summary] == pytest.approx([r["kappa"] for r in serial[1]], rel=1e-9)
