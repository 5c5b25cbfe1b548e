"""Which CoM base parameters CoP data can identify, and the simplified model — derived, not listed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robots.com_base import BaseModel, derive_base, rank_report
from robots.memo import per_model
from robots.stance import random_double_support
from robots.tree import RobotModel


@dataclass(frozen=True)
class CoMVariant:
    """A subset of base parameters to estimate; the others are fixed (zero or guessed)."""

    name: str
    base: str
    estimated: tuple[int, ...]  # column indices into the base model
    fixed: tuple[int, ...]
    reason: dict[int, str]  # why each fixed parameter is fixed


@per_model
def base_model(model: RobotModel, base: str) -> BaseModel:
    """Cached `derive_base`."""
    return derive_base(model, base)


@per_model
def double_support_unidentifiable(model: RobotModel, base: str, postures: int = 24) -> tuple[int, ...]:
    """Columns whose x/y CoP rows vanish or depend on others over random double-support postures."""
    bm = base_model(model, base)
    q = random_double_support(model, postures, np.random.default_rng(12345), base=base, margin=-1.0)
    H = bm.regressor(q)[:, :2, :].reshape(-1, bm.n)
    _, dep = rank_report(H, bm.symbols)
    return tuple(dep)


def simplified_vanishing(model: RobotModel, base: str) -> tuple[int, ...]:
    """Columns that are identically zero when the model's `simplified_zero` standard parameters are zero."""
    bm = base_model(model, base)
    comp = {"cx": 1, "cy": 2, "cz": 3}
    zero = {4 * model.link_index(link) + comp[c] for link, c in model.simplified_zero}
    return tuple(g for g, bp in enumerate(bm.params) if set(bp.coeff) <= zero)


def variant(model: RobotModel, base: str, name: str) -> CoMVariant:
    """'full': all identifiable parameters; 'simplified': also drop those vanishing under the simplification."""
    bm = base_model(model, base)
    unident = set(double_support_unidentifiable(model, base))
    reason = {g: "not identifiable from x/y CoP in double support" for g in unident}
    if name == "simplified":
        for g in simplified_vanishing(model, base):
            reason.setdefault(g, "zero in the simplified model")
    elif name != "full":
        from formats.errors import DataError

        raise DataError(f"unknown CoM model {name!r} (choose full or simplified)")
    est = tuple(g for g in range(bm.n) if g not in reason)
    return CoMVariant(name, base, est, tuple(sorted(reason)), reason)
