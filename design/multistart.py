"""Multi-start posture design: each start samples its own initial set (seeded) and optimises it.

Starts run in worker processes (concurrent.futures) or, with a scheduler address, on a Dask distributed
cluster. Results stream back as they finish so the caller can show progress.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import numpy as np

from design.problems import Settings, SolveResult
from formats.errors import DeviceError
from robots.parallel import in_processes
from robots.tree import RobotModel


@dataclass
class StartSpec:
    """Everything one start needs (picklable): robot, sizes, seed, start index, settings, backend.

    `robot` is a built-in name or the path of a robot description / URDF file: a worker process rebuilds the
    model from it with `robots.registry.get_model` (models are never pickled)."""

    robot: str
    n_postures: int
    n_placements: int
    seed: int
    start: int
    settings: Settings
    backend: str = "casadi"


def start_rng(seed: int, start: int) -> np.random.Generator:
    """Independent, reproducible random stream of one start."""
    return np.random.default_rng([seed, start])


def run_start(spec: StartSpec, model: RobotModel | None = None) -> tuple[int, SolveResult]:
    """Sample a feasible initial set by thesis §3.5.1 and optimise it with the chosen backend (`model`: the
    caller's model when it runs in this process, else rebuilt from `spec.robot`)."""
    import time

    from design.sampler import sample_posture_set
    from robots.registry import get_model

    model = model if model is not None else get_model(spec.robot)
    s = spec.settings.resolved(model)
    t0, c0 = time.perf_counter(), time.process_time()
    init = sample_posture_set(
        model,
        spec.n_postures,
        spec.n_placements,
        start_rng(spec.seed, spec.start),
        margin=s.margin,
        centred=s.centred,
        params=s.params,
        base=s.base,
        feet_gap=s.feet_gap,
    )
    t_sample = time.perf_counter() - t0
    if spec.backend == "pyomo":
        from design.pyomo_backend import solve_pyomo

        res = solve_pyomo(model, init, s)
    else:
        from design.problems import solve

        res = solve(model, init, s)
    res.stats["sample_s"] = t_sample
    res.stats["cpu_s"] = time.process_time() - c0  # this process only (excludes the C compiler of the JIT)
    res.stats["start"] = spec.start
    res.stats["initial"] = {"q": init.q.tolist(), "poses": init.poses.tolist()}
    return spec.start, res


SCHEDULER_TIMEOUT_S = 10  # connecting to --scheduler; an unreachable one fails after this long
WORKERS_TIMEOUT_S = 30  # a scheduler without a worker: waited for this long (workers may be starting)


def connect_scheduler(address: str):
    """A Dask client of the scheduler at `address` with a worker; DeviceError (one line) if it cannot be reached
    in time, or has no worker after WORKERS_TIMEOUT_S (its starts would wait forever)."""
    from distributed import Client

    try:
        client = Client(address, timeout=SCHEDULER_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise DeviceError(f"cannot reach the Dask scheduler {address!r}: {exc}") from None
    try:
        client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
    except (OSError, TimeoutError):
        client.close()
        raise DeviceError(f"the Dask scheduler {address!r} has no worker (waited {WORKERS_TIMEOUT_S} s): start "
                          f"one with `dask worker {address}`") from None  # fmt: skip
    return client


def run_starts(
    specs: list[StartSpec],
    workers: int | None = None,
    scheduler: str | None = None,
    model: RobotModel | None = None,
) -> Iterator:
    """Yield (start index, SolveResult) as starts finish; processes by default, Dask with `scheduler`.

    Starts that run in this process use `model` if given; other processes rebuild it from the spec."""
    if scheduler:
        from distributed import as_completed as dask_completed

        with connect_scheduler(scheduler) as client:
            futures = [client.submit(run_start, sp, pure=False) for sp in specs]
            for fut in dask_completed(futures):
                yield fut.result()
        return
    workers = workers or min(len(specs), os.cpu_count() or 1)
    if workers <= 1 or len(specs) == 1:
        for sp in specs:
            yield run_start(sp, model)
        return
    for _, result in in_processes(run_start, {k: (sp,) for k, sp in enumerate(specs)}, workers):
        yield result


def settings_dict(s: Settings) -> dict:
    d = asdict(s)
    d["sharpness"] = list(s.sharpness)
    return d


ProgressFn = Callable[[int, SolveResult], None]
