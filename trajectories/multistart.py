"""Several random starts of the excitation design, in worker processes that rebuild the model from its name or
file (models are not pickled), best first."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict

from robots.registry import get_model
from trajectories.excitation import ExcitationResult, ExcitationSettings, optimise


def _one(robot: str, settings: ExcitationSettings, seed: int, prior=None) -> ExcitationResult:
    return optimise(get_model(robot), settings, seed=seed, prior=prior)


def design_starts(
    robot: str,
    settings: ExcitationSettings,
    seed: int = 1,
    starts: int = 1,
    workers: int | None = None,
    on_result: Callable[[int, ExcitationResult], None] | None = None,
    prior=None,
) -> list[ExcitationResult]:
    """Optimise `starts` random starts (seeds seed, seed+1, …); results sorted by the criterion's true value."""
    settings.validate()
    workers = max(1, min(starts, workers or os.cpu_count() or 1))
    results: list[ExcitationResult] = []
    if workers == 1:
        for k in range(starts):
            r = _one(robot, settings, seed + k, prior)
            results.append(r)
            if on_result:
                on_result(k, r)
    else:
        with ProcessPoolExecutor(workers) as pool:
            futures = {pool.submit(_one, robot, settings, seed + k, prior): k for k in range(starts)}
            for fut in as_completed(futures):
                r = fut.result()
                results.append(r)
                if on_result:
                    on_result(futures[fut], r)
    key = (lambda r: r.kappa_scaled) if settings.scaling == "columns" else (lambda r: r.kappa)
    if prior is not None:
        key = lambda r: r.kappa_with_prior_scaled  # noqa: E731
    if settings.criterion == "logdet":
        key = lambda r: -r.logdet  # noqa: E731
    feasible = [r for r in results if r.verification.get("ok")]
    return sorted(feasible, key=key) + sorted([r for r in results if r not in feasible], key=key)


def settings_dict(settings: ExcitationSettings) -> dict:
    """The settings as plain JSON values (for the plan file)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()}
