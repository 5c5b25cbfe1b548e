"""Several random starts of the excitation design, in worker processes or on a Dask cluster (`scheduler`: the
workers rebuild the model from its name or file — models are not pickled — so a file must be readable there at
the same path), best first."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import asdict

from robots.parallel import in_processes
from robots.registry import get_model
from trajectories.excitation import ExcitationResult, ExcitationSettings, Prior, optimise


def design_one(
    robot: str, settings: ExcitationSettings, seed: int, prior: Prior | None = None
) -> ExcitationResult:
    """One start's design of the robot named by `robot` (a worker process rebuilds the model from it)."""
    result = optimise(get_model(robot), settings, seed=seed, prior=prior)
    result.seed = seed  # the starts come back sorted: which one each is
    return result


def design_starts(
    robot: str,
    settings: ExcitationSettings,
    seed: int = 1,
    starts: int = 1,
    workers: int | None = None,
    on_result: Callable[[int, ExcitationResult], None] | None = None,
    prior: Prior | None = None,
    scheduler: str | None = None,
) -> list[ExcitationResult]:
    """Optimise `starts` random starts (seeds seed, seed+1, …; each result's `seed`): every start's result, the
    verified ones first, each group sorted by the criterion's true value (the best first).
    With `scheduler` (a Dask scheduler address) the starts run on that cluster, as `plan postures` does."""
    settings.validate()
    workers = max(1, min(starts, workers or os.cpu_count() or 1))
    results: list[ExcitationResult] = []
    for k, r in _finished(robot, settings, seed, starts, workers, prior, scheduler):
        results.append(r)
        if on_result:
            on_result(k, r)
    return ranked(results, settings, prior is not None)


def ranked(
    results: list[ExcitationResult], settings: ExcitationSettings, with_prior: bool
) -> list[ExcitationResult]:
    """Starts' results best first: the verified ones first, each group by the criterion's true value (κ scaled
    as the design scales, κ with the prior's rows, or the D-/variance objective)."""
    key = (lambda r: r.kappa_scaled) if settings.scaling == "columns" else (lambda r: r.kappa)
    if with_prior:
        key = lambda r: r.kappa_with_prior_scaled  # noqa: E731
    if settings.criterion in ("logdet", "logvar"):
        key = lambda r: r.objective  # noqa: E731
    feasible = [r for r in results if r.verification.get("ok")]
    infeasible = [r for r in results if not r.verification.get("ok")]  # (results hold arrays: no `in`)
    return sorted(feasible, key=key) + sorted(infeasible, key=key)


def _finished(
    robot: str,
    settings: ExcitationSettings,
    seed: int,
    starts: int,
    workers: int,
    prior: Prior | None,
    scheduler: str | None,
) -> Iterator[tuple[int, ExcitationResult]]:
    """(start index, result) of each start as it finishes: on the Dask cluster, here (one worker) or in fresh
    interpreters."""
    if scheduler:
        from distributed import as_completed as dask_completed

        from design.multistart import connect_scheduler

        if os.path.exists(robot):  # a file: the workers open it by its absolute path
            robot = os.path.abspath(robot)
        with connect_scheduler(scheduler) as client:
            futures = {
                client.submit(design_one, robot, settings, seed + k, prior, pure=False): k
                for k in range(starts)
            }
            for fut in dask_completed(list(futures)):
                yield futures[fut], fut.result()
    elif workers == 1:
        for k in range(starts):
            yield k, design_one(robot, settings, seed + k, prior)
    else:
        yield from in_processes(
            design_one, {k: (robot, settings, seed + k, prior) for k in range(starts)}, workers
        )


def settings_dict(settings: ExcitationSettings) -> dict:
    """The settings as plain JSON values (for the plan file)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()}
