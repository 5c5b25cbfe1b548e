"""Replicated postures: κ-optimal designs often repeat a posture of a placement (to ~1e-6 rad).

Replicates are not an error (on hardware they average the CoP noise); they are reported so users know how
many distinct postures a plan really has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from formats.plan import Posture

REPEAT_TOL = 1e-3  # rad, largest joint difference for two postures to count as one


@dataclass
class Replicates:
    """Distinct postures of a plan; `repeats` maps a posture index to the earlier posture it repeats."""

    total: int
    repeats: dict[int, tuple[int, float]]  # index -> (index of the first equal posture, max |Δq| in rad)
    tol: float

    @property
    def distinct(self) -> int:
        return self.total - len(self.repeats)

    def groups(self) -> list[list[int]]:
        """Posture indices that are one posture (first = the original), only groups with repeats."""
        out: dict[int, list[int]] = {}
        for i, (j, _) in self.repeats.items():
            out.setdefault(j, [j]).append(i)
        return list(out.values())

    def to_dict(self) -> dict:
        return {
            "distinct_postures": self.distinct,
            "repeat_tol_rad": self.tol,
            "repeats": [{"index": i, "of": j, "max_diff_rad": d} for i, (j, d) in self.repeats.items()],
        }

    def describe(self) -> str:
        """One line for people: counts, then each group of equal postures as `2 = 3 = 4`."""
        text = f"distinct postures: {self.distinct} of {self.total}"
        if not self.repeats:
            return text
        groups = "; ".join(" = ".join(str(i) for i in g) for g in self.groups())
        return f"{text} (repeats within {self.tol:g} rad, same placement: {groups})"


def find_replicates(postures: Sequence[Posture], tol: float = REPEAT_TOL) -> Replicates:
    """Group postures of one placement whose joint angles agree within `tol` (rad, max-abs) of the group's
    first posture (in list order)."""
    firsts: dict[int, list[Posture]] = {}
    repeats: dict[int, tuple[int, float]] = {}
    for p in postures:
        group = firsts.setdefault(p.placement, [])
        diffs = [float(np.max(np.abs(np.asarray(p.q) - np.asarray(f.q)))) for f in group]
        k = next((k for k, d in enumerate(diffs) if d <= tol), None)
        if k is None:
            group.append(p)
        else:
            repeats[p.index] = (group[k].index, diffs[k])
    return Replicates(len(postures), repeats, tol)
