"""Static identification results (JSON, format "poise static result"): writing and reading, lengths in m."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.errors import DataError
from formats.json_format import read_json

FORMAT = "poise static result"
VERSION = 1


@dataclass(frozen=True)
class StaticResult:
    """What other commands need from a result: estimates with their covariance over the estimated symbols."""

    source: str
    robot: str
    base: str
    values: dict[str, float]  # every base parameter: estimate or fixed value (m)
    estimated: tuple[str, ...]  # symbols that were estimated, in correlation-matrix order
    se: dict[str, float]  # standard errors of the estimated symbols (m)
    corr: np.ndarray  # correlation matrix of the estimated symbols

    def covariance(self, symbols: list[str]) -> np.ndarray:
        """Covariance (m²) over `symbols`; zero rows/columns for parameters that were not estimated."""
        cov = np.zeros((len(symbols), len(symbols)))
        se = np.array([self.se[s] for s in self.estimated])
        idx = [symbols.index(s) for s in self.estimated if s in symbols]
        keep = [i for i, s in enumerate(self.estimated) if s in symbols]
        sub = se[keep, None] * self.corr[np.ix_(keep, keep)] * se[None, keep]
        cov[np.ix_(idx, idx)] = sub
        return cov


def result_document(robot: str, base: str, body: dict) -> dict:
    """A result document: the format header followed by the estimator's fields."""
    return {"format": FORMAT, "version": VERSION, "robot": robot, "base": base, **body}


def load_static_result(path: str | Path) -> StaticResult:
    """Read and validate a static result file (clear `DataError` naming what is wrong)."""
    d = read_json(path, "a poise static result")
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise DataError(f"{path}: not a static identification result (format {FORMAT!r})")
    try:
        params = {str(p["symbol"]): p for p in d["parameters"]}
        values = {s: float(p["value_m"]) for s, p in params.items()}
        est = tuple(str(s) for s in d["correlation"]["symbols"])
        corr = np.array(d["correlation"]["matrix"], dtype=float)
        if corr.shape != (len(est), len(est)):
            raise ValueError(f"correlation matrix of shape {corr.shape} for {len(est)} symbols")
        se = {s: float(params[s]["se_m"]) for s in est}
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: malformed static result (missing or invalid {exc})") from None
    finite = np.isfinite(list(values.values())).all() and np.isfinite(corr).all()
    if not (finite and np.isfinite(list(se.values())).all()):
        raise DataError(f"{path}: parameter values, standard errors or correlations are not finite")
    return StaticResult(str(path), str(d.get("robot")), str(d.get("base")), values, est, se, corr)
