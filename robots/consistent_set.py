"""A physically consistent full parameter set that reproduces identified base parameters within their standard
errors: every link's pseudo-inertia J = [[Σ, m·c], [(m·c)ᵀ, m]] (Σ = ½ tr(I)·1 − I, I about the link origin)
positive semidefinite — a mass distribution can have these moments (Wensing, Kim, Slotine 2017) — written J = U Uᵀ
with U lower-triangular, so that IPOPT (CasADi, exact derivatives) works over U without constraints.

Among those sets whose base parameters K·φ lie within `within` standard errors of the identified ϑ, the one closest
to the prior (the URDF's), each standard parameter relative to its link's size (`full_set.standard_scales`). The
minimum-norm full set (`full_set.min_norm_update`) reproduces ϑ exactly but, from real data, is rarely consistent
(the UR5 twin's 6 s run: four links with negative principal moments); the nearest consistent set
(`physical.nearest_consistent`) moves ϑ by however much it must. Measured on that run (effort noise 0.2 N·m):
within 2 SE the set differs from the twin's truth by 1.6 % (‖Δφ‖/‖φ‖; the URDF's by 2.2 %), masses moved ≤ 0.09 kg,
CoMs ≤ 9 mm; no consistent set lies within 1 SE.
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from formats.errors import DataError
from formats.parameter_set import ParameterSet
from robots import dynamics as dyn
from robots.full_set import parameter_set_from_standard, standard_scales
from robots.interrupt import interruptible
from robots.tree import RobotModel

JITTER = 1e-9  # relative to a link's size: a start strictly inside the cone


@dataclass(frozen=True)
class ConsistentFit:
    """The consistent set, its base parameters' misfit (z = (K·φ − ϑ)/SE), its size-relative distance from the prior
    and what IPOPT said."""

    params: ParameterSet
    z: np.ndarray
    chi2: float
    distance: float
    status: str
    iterations: int

    @property
    def max_abs_z(self) -> float:
        return float(np.max(np.abs(self.z), initial=0.0))


def pseudo_inertia(p: np.ndarray) -> np.ndarray:
    """J (4×4) of one link's standard parameters [m, m·c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] (about the link origin)."""
    m, h = p[0], np.asarray(p[1:4])
    I = np.array([[p[4], p[5], p[7]], [p[5], p[6], p[8]], [p[7], p[8], p[9]]])
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(I) * np.eye(3) - I
    J[:3, 3] = J[3, :3] = h
    J[3, 3] = m
    return J


def _standard(U: ca.SX) -> ca.SX:
    """The standard parameters (10) of J = U Uᵀ."""
    J = U @ U.T
    S = J[:3, :3]
    I = ca.trace(S) * ca.SX.eye(3) - S
    return ca.vertcat(
        J[3, 3], J[0, 3], J[1, 3], J[2, 3], I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]
    )


def _start(J: np.ndarray, size: float) -> np.ndarray:
    """A lower-triangular U with U Uᵀ the PSD part of J (eigenvalues clipped), slightly inside the cone."""
    w, V = np.linalg.eigh(0.5 * (J + J.T))
    P = (V * np.maximum(w, 0.0)) @ V.T + JITTER * size * np.eye(4)
    return np.linalg.cholesky(P)


def consistent_within_se(
    model: RobotModel,
    K: np.ndarray,
    values: np.ndarray,
    se: np.ndarray,
    prior: ParameterSet,
    within: float = 2.0,
) -> ConsistentFit:
    """The consistent set closest to the prior whose base parameters K·φ (K: base × 10·links) lie within `within`
    SEs of ϑ = `values`, started from the prior (its PSD part). Links the prior gives no mass (the world, frames)
    keep the prior's parameters. DataError when IPOPT finds no such set."""
    se = np.asarray(se, dtype=float)
    if se.shape != values.shape or not np.all(np.isfinite(se) & (se > 0)):
        raise DataError("a consistent set within the standard errors needs a positive, finite SE for every base "
                        "parameter")  # fmt: skip
    if not (np.isfinite(within) and within > 0):
        raise DataError(f"within must be a positive number of standard errors, got {within}")
    phi0 = dyn.standard_parameters(model, prior)
    scale = standard_scales(model, prior)
    moving = [i for i, lk in enumerate(model.links) if prior.mass[lk.name] > 0]
    u = ca.SX.sym("u", 10 * len(moving))
    tril = np.tril_indices(4)
    phi = [ca.DM(phi0[10 * i : 10 * i + 10]) for i in range(len(model.links))]
    x0 = []
    for k, i in enumerate(moving):
        U = ca.SX.zeros(4, 4)
        for e, (r, c) in enumerate(zip(*tril, strict=True)):
            U[r, c] = u[10 * k + e]
        phi[i] = _standard(U)
        x0.extend(_start(pseudo_inertia(phi0[10 * i : 10 * i + 10]), scale[10 * i + 4])[tril])
    phi_all = ca.vertcat(*phi)
    r = (ca.DM(K) @ phi_all - ca.DM(values)) / ca.DM(se)
    d = (phi_all - ca.DM(phi0)) / ca.DM(scale)
    opts = {"ipopt.print_level": 0, "print_time": False, "ipopt.sb": "yes", "ipopt.max_iter": 3000}
    solver = ca.nlpsol("consistent", "ipopt", {"x": u, "f": ca.sumsqr(d), "g": r}, opts)
    with interruptible():
        sol = solver(x0=np.array(x0), lbg=-within, ubg=within)
    st = solver.stats()
    if not st.get("success"):
        raise DataError(f"no physically consistent set found whose base parameters lie within {within:g} SE of the "
                        f"identified ones (IPOPT: {st.get('return_status')}); allow more, or take the nearest "
                        "consistent set")  # fmt: skip
    phi_opt = np.asarray(ca.Function("phi", [u], [phi_all])(sol["x"])).ravel()
    z = (K @ phi_opt - values) / se
    ps = parameter_set_from_standard(model, phi_opt, prior, "identified-consistent")
    dist = float(np.linalg.norm((phi_opt - phi0) / scale))
    return ConsistentFit(
        ps, z, float(z @ z), dist, str(st.get("return_status", "")), int(st.get("iter_count", 0))
    )
