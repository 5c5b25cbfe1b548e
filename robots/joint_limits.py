"""Every limited joint's position and velocity as a linear map of the coordinates: q_j = A q + b.

A coordinate joint is its own row; a mimic joint (q_m = multiplier · q + offset) carries its own URDF limits,
which a design, `plan check`, the executor's stream check and posture checks must respect as well as the
coordinate's. `JointLimits.violations` is the one "inside the joint limits" test (`RobotModel.limit_violations`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats.errors import DataError
from robots.memo import per_model
from robots.tree import RobotModel


@dataclass(frozen=True)
class JointLimits:
    """Rows of q_joint = A q + b (one per limited joint) with the joints' own limits (rad or m, per second)."""

    names: list[str]
    A: np.ndarray  # (k, nq)
    b: np.ndarray  # (k,)
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    linear: np.ndarray  # (k,) bool: a prismatic joint (m, m/s), else rad, rad/s

    def positions(self, q: np.ndarray) -> np.ndarray:
        """Joint positions (…, k) of coordinates q (…, nq)."""
        return np.asarray(q, dtype=float) @ self.A.T + self.b

    def velocities(self, qd: np.ndarray) -> np.ndarray:
        """Joint velocities (…, k) of coordinate velocities qd (…, nq)."""
        return np.asarray(qd, dtype=float) @ self.A.T

    def unit(self, i: int) -> str:
        """Row i's position unit: 'm' for a prismatic joint, 'rad' otherwise."""
        return "m" if self.linear[i] else "rad"

    def velocity_ratios(self, qd: np.ndarray) -> np.ndarray:
        """|q̇_j| / velocity limit (…, k): 0 where the joint is still, inf where it moves against a zero limit
        (never NaN, so a zero limit cannot hide a violation)."""
        v = np.abs(self.velocities(qd))
        with np.errstate(divide="ignore", invalid="ignore"):
            r = v / self.velocity
        return np.where(v == 0, 0.0, np.where(self.velocity > 0, r, np.inf))

    def outside(self, x: np.ndarray, tol: float = 1e-9) -> np.ndarray:
        """Which joint positions x (…, k) (`positions`) leave their range by > tol (bool, …, k)."""
        return (x < self.lower - tol) | (x > self.upper + tol)

    def violations(self, q: np.ndarray, tol: float = 1e-9) -> list[str]:
        """One line per joint (coordinate or mimic) whose position in posture q (nq,) leaves its range by > tol:
        degrees for rotary joints, metres for prismatic ones."""
        x = self.positions(q)
        out = []
        for i in np.flatnonzero(self.outside(x, tol)):
            if self.linear[i]:
                out.append(
                    f"{self.names[i]} = {x[i]:.4f} m outside [{self.lower[i]:.4f}, {self.upper[i]:.4f}] m"
                )
            else:
                lo, hi = np.degrees(self.lower[i]), np.degrees(self.upper[i])
                out.append(f"{self.names[i]} = {np.degrees(x[i]):.2f} deg outside [{lo:.1f}, {hi:.1f}] deg")
        return out


def _has_limit(lo: float, hi: float, vel: float) -> bool:
    return bool(np.isfinite(lo) or np.isfinite(hi) or np.isfinite(vel))


def mimic_limits(model: RobotModel) -> JointLimits:
    """The mimic joints that have limits of their own (position or velocity), as rows over the coordinates."""
    names, rows, offs, lo, hi, vel, lin = [], [], [], [], [], [], []
    for j, jt in enumerate(model.joints):
        if jt.mimic is None or not jt.moves or not _has_limit(jt.lower, jt.upper, jt.velocity):
            continue
        k, mult, off = model.coordinate_map(j)
        row = np.zeros(model.nq)
        row[k] = mult
        names.append(jt.name)
        rows.append(row)
        offs.append(off)
        lo.append(jt.lower)
        hi.append(jt.upper)
        vel.append(jt.velocity)
        lin.append(jt.type == "prismatic")
    A = np.array(rows, dtype=float).reshape(len(names), model.nq)
    floats = (np.array(v, dtype=float) for v in (offs, lo, hi, vel))
    return JointLimits(names, A, *floats, np.array(lin, dtype=bool))


@per_model
def joint_limits(model: RobotModel) -> JointLimits:
    """Every limited joint: the coordinates (the model's limit arrays) followed by the limited mimic joints
    (cached on the model: posture and stream checks call it per sample)."""
    m = mimic_limits(model)
    coord_linear = [model.joints[j].type == "prismatic" for j in model.coordinates]
    return JointLimits(
        list(model.joint_names) + m.names,
        np.vstack([np.eye(model.nq), m.A]),
        np.concatenate([np.zeros(model.nq), m.b]),
        np.concatenate([np.asarray(model.lower, dtype=float), m.lower]),
        np.concatenate([np.asarray(model.upper, dtype=float), m.upper]),
        np.concatenate([np.asarray(model.velocity_limit, dtype=float), m.velocity]),
        np.concatenate([np.array(coord_linear, dtype=bool), m.linear]),
    )


def _lead_range(lo: float, hi: float, mult: float, off: float, own_lo: float, own_hi: float):
    """The part [a, b] of the followed joint's range [lo, hi] that keeps mult·q + off in [own_lo, own_hi]."""
    if own_lo > own_hi or (mult == 0 and not own_lo <= off <= own_hi):
        return np.inf, -np.inf
    if mult == 0:
        return lo, hi
    ends = sorted(((own_lo - off) / mult, (own_hi - off) / mult))
    return max(ends[0], lo), min(ends[1], hi)


def mimic_ranges(model: RobotModel, lo: np.ndarray, hi: np.ndarray, margin: float) -> JointLimits:
    """The limited mimic joints after checking that each can stay in its own range less `margin` while the joint
    it follows moves in [lo, hi] (the coordinates' design range); DataError naming both joints otherwise."""
    m = mimic_limits(model)
    full_lo, full_hi = model.sampling_bounds()
    for i, name in enumerate(m.names):
        if not (np.isfinite(m.lower[i]) or np.isfinite(m.upper[i])):
            continue
        u = m.unit(i)
        if m.lower[i] == 0 and m.upper[i] == 0:
            raise DataError(f"mimic joint {name}: its <limit> range is [0, 0] {u} (lower and upper left out of the "
                            f"URDF): it cannot move; give lower and upper, or set them in a robot description "
                            f"(.poise.toml: [joint_limits.{name}] lower = …, upper = …)")  # fmt: skip
        k, mult, off = model.coordinate_map(model.joint_index(name))
        lead = model.joint_names[k]
        lead_u = "m" if model.joints[model.coordinates[k]].type == "prismatic" else "rad"
        a, b = _lead_range(full_lo[k], full_hi[k], mult, off, m.lower[i], m.upper[i])
        if b - a <= 1e-9:
            where = "never" if b < a else f"only at {lead} = {a:.4g} {lead_u}"
            raise DataError(
                f"mimic joint {name} (= {mult:g}·{lead} + {off:g}) has range [{m.lower[i]:g}, {m.upper[i]:g}] {u}, "
                f"which {lead}'s range [{full_lo[k]:g}, {full_hi[k]:g}] {lead_u} meets {where}: fix the URDF's "
                f"<mimic> or <limit>, or lock {lead} in a robot description (.poise.toml: [reduce] lock = {{{lead} = VALUE}})"
            )
        a, b = _lead_range(lo[k], hi[k], mult, off, m.lower[i] + margin, m.upper[i] - margin)
        if b - a <= 1e-9:
            raise DataError(f"position margin {margin:g} leaves no range for mimic joint {name} (range "
                            f"[{m.lower[i]:g}, {m.upper[i]:g}] {u}, following {lead}): lower --position-margin")  # fmt: skip
    return m
