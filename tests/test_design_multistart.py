"""Multi-start in worker processes and on a (local) Dask cluster give the same, reproducible results."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from design.planner import design
from design.problems import Settings

S = Settings(problem="free-com", sharpness=(8.0,), max_iter=300)


SERIAL = """
import json
from design.planner import design
from design.problems import Settings
from robots.tulip import tulip
_, summary = design(tulip(), Settings(problem="free-com", sharpness=(8.0,), max_iter=300), 15, 3, starts=2,
                    seed=11, workers=1)
print(json.dumps([r["kappa"] for r in summary]))
"""


@pytest.fixture(scope="module")
def serial():
    """κ of each start of the serial run, in a fresh interpreter as the workers' are. In a test process that had
    run other files' tests (pytest-xdist), the serial run once gave start 0 κ 210.0 against 187.2 in fresh
    processes: the Pyomo backend's tests had left the x87 precision at 53 bits (now restored, design/fpenv.py)."""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", SERIAL], capture_output=True, text=True, cwd=root, check=True,
                         env={**os.environ, "PYTHONPATH": str(root)})  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_processes_match_serial(model, serial):
    best, summary = design(model, S, 15, 3, starts=2, seed=11, workers=2)
    assert [r["kappa"] for r in summary] == pytest.approx(serial, rel=1e-9)
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
    assert [r["kappa"] for r in summary] == pytest.approx(serial, rel=1e-9)
