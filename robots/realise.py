"""A physical robot behind published CoM base-parameter estimates: the link CoMs nearest a prior set (masses,
lengths and inertias kept) whose base parameters match the estimates within their standard errors, each CoM
moving at most a bound per axis.

Estimates from real data absorb more than the links' mass distribution (board placement, a tilted sole): some
cannot be reached by any plausible CoM (the TUlip thesis's ϑ25 needs the 10 g ankle's CoM 25 m away). So the
match is a bounded least squares weighted by the published SEs, and the report says how far each one stays."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import lsq_linear

from formats.errors import DataError
from robots.tree import ParameterSet, RobotModel

REGULARISE = 1.0  # weight of a full `max_shift` CoM move of a link against one SE² of misfit


@dataclass(frozen=True)
class RealisedEstimate:
    """One published base parameter: the estimate, its SE and what the realised set gives (m)."""

    index: int  # 1-based, the publication's numbering (= the CoM base model's order)
    estimate: float
    se: float
    realised: float
    prior: float

    @property
    def z(self) -> float:
        return (self.realised - self.estimate) / self.se


@dataclass(frozen=True)
class Published:
    """CoM base-parameter estimates of a robot (file: [estimates] base, unit, values/se by 1-based index)."""

    base: str
    values: dict[int, float]  # m
    se: dict[int, float]  # m
    source: str


def load_published(path: str | Path) -> Published:
    """Read a published-estimates TOML; lengths in `unit` (mm or m)."""
    try:
        d = tomllib.loads(Path(path).read_text())
        est = d["estimates"]
        scale = {"mm": 1e-3, "m": 1.0}[est.get("unit", "m")]
        values = {int(k): float(v) * scale for k, v in est["values"].items()}
        se = {int(k): float(v) * scale for k, v in est["se"].items()}
        base = str(est["base"])
    except (OSError, tomllib.TOMLDecodeError, KeyError, ValueError, TypeError) as exc:
        raise DataError(f"cannot read published estimates {path}: {exc}") from None
    if set(values) != set(se) or any(not s > 0 for s in se.values()):
        raise DataError(f"{path}: every estimate needs a positive standard error")
    return Published(base, values, se, str(d.get("source", path)))


def realise(
    model: RobotModel,
    published: Published,
    prior: ParameterSet,
    max_shift: float = 0.05,
    name: str = "realised",
) -> tuple[ParameterSet, list[RealisedEstimate]]:
    """The prior with its link CoMs moved (≤ `max_shift` m per axis) so the CoM base parameters come as close
    to the published estimates as their SEs weigh; the estimates' indices follow `derive_base(model, base)`."""
    from robots.com_base import derive_base

    bm = derive_base(model, published.base)
    if not published.values or max(published.values) > bm.n or min(published.values) < 1:
        raise DataError(f"published indices must lie in 1…{bm.n} for base {published.base!r}")
    K = bm.coefficient_matrix(prior.lengths)
    phi0 = prior.standard_vector(model.links)  # per link: m, m·c (stored convention)
    M = prior.total_mass
    links = model.links
    mc = np.array([4 * i + 1 + a for i in range(len(links)) for a in range(3)])
    masses = np.repeat([prior.mass[lk.name] for lk in links], 3)
    rows = sorted(published.values)
    w = np.array([1.0 / published.se[k] for k in rows])
    A = K[np.array(rows) - 1][:, mc] / M * w[:, None]
    b = (np.array([published.values[k] for k in rows]) - K[np.array(rows) - 1] @ phi0 / M) * w
    heavy = masses > 0
    if not heavy.any():
        raise DataError("the prior has no mass to move")
    # unknowns: δ(m·c) of links with mass; a light regulariser (1/max_shift per kg) keeps the rest at the prior
    reg = np.diag(1.0 / (max_shift * np.maximum(masses[heavy], 1e-9))) * REGULARISE
    A_all = np.vstack([A[:, heavy], reg])
    b_all = np.concatenate([b, np.zeros(int(heavy.sum()))])
    bound = max_shift * masses[heavy]
    sol = lsq_linear(A_all, b_all, bounds=(-bound, bound), method="bvls")
    phi = phi0.copy()
    phi[mc[heavy]] += sol.x
    com = dict(prior.com)
    for i, lk in enumerate(links):
        m = prior.mass[lk.name]
        if m > 0:
            com[lk.name] = tuple(float(v / m) for v in phi[4 * i + 1 : 4 * i + 4])
    ps = replace(
        prior, name=name, com=com, description=f"{prior.name} with CoMs matched to {published.source}"
    )
    got = K @ ps.standard_vector(links) / M
    before = K @ phi0 / M
    report = [RealisedEstimate(k, published.values[k], published.se[k], float(got[k - 1]), float(before[k - 1]))
              for k in rows]  # fmt: skip
    return ps, report
