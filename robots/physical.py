"""Physical consistency of inertial parameters, and the nearest consistent set.

A rigid body's inertia about its CoM has principal moments λ = A·d with second moments d = ∫x²dm ≥ 0 and
A = [[0,1,1],[1,0,1],[1,1,0]]: so λ ≥ 0 and λᵢ + λⱼ ≥ λₖ (the triangle inequality). The URDF importer and the
exporter share `principal_moments` / `triangle_gap`; `nearest_consistent` projects onto that cone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from formats.parameter_set import ParameterSet

# Second moments → principal moments: λ₁ = d₂ + d₃, λ₂ = d₁ + d₃, λ₃ = d₁ + d₂.
_CONE = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
MASS_FLOOR = 1e-3  # nearest set: a link that had mass keeps at least this fraction of its URDF mass


def six(inertia) -> tuple[float, float, float, float, float, float]:
    """(ixx, ixy, ixz, iyy, iyz, izz) from 6 entries or 3 principal moments."""
    v = tuple(float(x) for x in inertia)
    if len(v) == 3:
        return (v[0], 0.0, 0.0, v[1], 0.0, v[2])
    if len(v) != 6:
        raise ValueError("an inertia needs 3 (principal) or 6 (ixx, ixy, ixz, iyy, iyz, izz) entries")
    return v  # type: ignore[return-value]


def inertia_matrix(inertia) -> np.ndarray:
    """The symmetric 3×3 tensor of (ixx, ixy, ixz, iyy, iyz, izz) (a 3×3 array is returned as it is)."""
    if np.shape(inertia) == (3, 3):
        return np.asarray(inertia, dtype=float)
    ixx, ixy, ixz, iyy, iyz, izz = six(inertia)
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def principal_moments(inertia) -> tuple[np.ndarray, float]:
    """Eigenvalues (ascending) of a finite inertia tensor and the tolerance every check uses with them."""
    ev = np.linalg.eigvalsh(inertia_matrix(inertia))
    return ev, 1e-12 * max(1.0, float(np.abs(ev).max()))


def triangle_gap(ev: np.ndarray, tol: float) -> bool:
    """True if ascending principal moments violate the triangle inequality (λ₁ + λ₂ < λ₃) beyond `tol`."""
    return bool(ev[0] + ev[1] < ev[2] - tol)


@dataclass(frozen=True)
class Violation:
    """One link's physical inconsistency: which quantity and why."""

    link: str
    what: str

    def __str__(self) -> str:
        return f"{self.link}: {self.what}"


def link_violations(name: str, mass: float, com, inertia, had_mass: bool) -> list[Violation]:
    """Everything physically wrong with one link's (mass, CoM, inertia about the CoM)."""
    out = []
    if not np.isfinite(mass):
        return [Violation(name, f"mass {mass} is not finite")]
    if mass < 0 or (had_mass and mass == 0):
        out.append(Violation(name, f"mass {mass:.6g} kg must be {'>' if had_mass else '≥'} 0"))
    if not np.all(np.isfinite(com)):
        out.append(Violation(name, "CoM is not finite"))
    I6 = six(inertia)
    if not np.all(np.isfinite(I6)):
        return [*out, Violation(name, "inertia is not finite")]
    ev, tol = principal_moments(I6)
    if ev[0] < -tol:
        out.append(
            Violation(name, "inertia is not positive semidefinite (principal moments "
                            f"{', '.join(f'{e:.4g}' for e in ev)} kg·m²)")
        )  # fmt: skip
    elif triangle_gap(ev, tol):
        out.append(
            Violation(name, f"principal moments {ev[0]:.4g} + {ev[1]:.4g} < {ev[2]:.4g} kg·m² "
                            "(triangle inequality)")
        )  # fmt: skip
    return out


def violations(ps: ParameterSet, links: list[str], prior_mass: dict[str, float]) -> list[Violation]:
    """Per-link inconsistencies of a parameter set (links without an inertia entry: treated as zero)."""
    out = []
    for n in links:
        inertia = ps.inertia.get(n, (0.0,) * 6)
        out += link_violations(n, ps.mass[n], ps.com[n], inertia, prior_mass.get(n, 0.0) > 0)
    return out


def project_inertia(inertia) -> np.ndarray:
    """The Frobenius-nearest tensor whose principal moments satisfy λ ≥ 0 and the triangle inequality.

    Both sets are invariant under rotation and permutation of the moments, so the nearest tensor keeps the
    principal axes and projects λ onto the cone {A·d, d ≥ 0}: a 3-variable non-negative least squares.
    """
    w, V = np.linalg.eigh(inertia_matrix(inertia))
    d, _ = nnls(_CONE, w)
    return V @ np.diag(_CONE @ d) @ V.T


@dataclass(frozen=True)
class LinkCorrection:
    """How the nearest consistent set differs from the given one for one link."""

    link: str
    mass_from: float
    mass_to: float
    inertia_change: float  # Frobenius norm of the inertia change (kg·m²)

    def to_dict(self) -> dict:
        return {
            "link": self.link,
            "mass_kg": [self.mass_from, self.mass_to],
            "inertia_change_frobenius_kgm2": self.inertia_change,
        }


def nearest_consistent(
    ps: ParameterSet, links: list[str], prior_mass: dict[str, float]
) -> tuple[ParameterSet, list[LinkCorrection]]:
    """Per link, the nearest physically consistent (mass, CoM, inertia): mass clamped to ≥ 0 (to ≥ MASS_FLOOR ×
    the URDF mass for links that had mass), CoM kept, inertia projected onto the triangle-inequality cone."""
    mass, inertia, changes = dict(ps.mass), dict(ps.inertia), []
    for n in links:
        m0 = ps.mass[n]
        floor = MASS_FLOOR * prior_mass.get(n, 0.0)
        m = m0 if m0 >= floor else floor
        I_old = inertia_matrix(ps.inertia.get(n, (0.0,) * 6))
        ev, tol = principal_moments(I_old)
        I_new = project_inertia(I_old) if ev[0] < -tol or triangle_gap(ev, tol) else I_old
        if m != m0 or I_new is not I_old:
            mass[n] = float(m)
            inertia[n] = tuple(
                float(I_new[r, c]) for r, c in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))
            )
            changes.append(LinkCorrection(n, float(m0), float(m), float(np.linalg.norm(I_new - I_old))))
    out = ParameterSet(
        ps.name + "-nearest", mass, dict(ps.com), dict(ps.lengths), inertia,
        f"nearest physically consistent set to {ps.name}",
    )  # fmt: skip
    return out, changes
