"""Accelerometer calibration (spec actuation.md §4): a = C (r − o), raw readings r of a static sensor lie on an
ellipsoid ‖C (r − o)‖ = g.

`fit_ellipsoid`: algebraic quadric fit for a start, then geometric least squares (trust-region reflective) on
(o, C symmetric: gains gxx gyy gzz and cross-axis gyx gzx gzy, the columns of Tables 3.1–3.4) with the SLOM
manifold solver on o, eR ∈ SO(3), s (C = eRᵀ g diag(s)⁻¹ eR, the thesis's form). With readings
from a limited cap of gravity directions the unconstrained fit is sloppy; `tumble_offset` measures o from pairs
of orientations rotated by π about a horizontal axis (r₁ + r₂ = 2 o whatever C is), and `calibrate_two_step`
bounds the ellipsoid's centre to that offset ± 0.01 m/s². SLOM has no bounds, so scipy's bounded solver is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from formats.errors import DataError, IdentifiabilityError
from formats.units import GRAVITY as G

PARAM_NAMES = ("ox", "oy", "oz", "gxx", "gyy", "gzz", "gyx", "gzx", "gzy")


@dataclass
class AccelCalibration:
    """Offset o [m/s²] and symmetric gain matrix C [-]; `a = C (r − o)` maps raw readings to m/s²."""

    offset: np.ndarray
    C: np.ndarray
    rms: float  # m/s², ‖a‖ − g over the poses
    method: str
    se: np.ndarray | None = None  # standard errors of `vector()` (NaN: held at a bound), from this one fit

    def apply(self, r: np.ndarray) -> np.ndarray:
        return (np.asarray(r) - self.offset) @ self.C.T

    def vector(self) -> np.ndarray:
        """(ox, oy, oz, gxx, gyy, gzz, gyx, gzx, gzy)."""
        C = self.C
        return np.array([*self.offset, C[0, 0], C[1, 1], C[2, 2], C[1, 0], C[2, 0], C[2, 1]])

    def as_dict(self) -> dict:
        return {
            "method": self.method,
            "rms_m_s2": self.rms,
            **dict(zip(PARAM_NAMES, map(float, self.vector()), strict=True)),
            "se": None if self.se is None else [None if not np.isfinite(v) else float(v) for v in self.se],
        }


def _C(p: np.ndarray) -> np.ndarray:
    return np.array([[p[3], p[6], p[7]], [p[6], p[4], p[8]], [p[7], p[8], p[5]]])


def _check(r: np.ndarray, need: int = 9) -> np.ndarray:
    r = np.asarray(r, dtype=float)
    if r.ndim != 2 or r.shape[1] != 3:
        raise DataError(f"accelerometer readings must be an (N, 3) array, got shape {r.shape}")
    if not np.all(np.isfinite(r)):
        raise DataError("accelerometer readings contain non-finite values")
    if len(r) < need:
        raise DataError(f"{len(r)} poses are too few for an ellipsoid fit (need ≥ {need})")
    return r


def algebraic_ellipsoid(r: np.ndarray, g: float = G) -> tuple[np.ndarray, np.ndarray]:
    """Centre and symmetric C of the quadric through the points (least squares on its 10 coefficients)."""
    x, y, z = r.T
    D = np.column_stack(
        [x * x, y * y, z * z, 2 * x * y, 2 * x * z, 2 * y * z, 2 * x, 2 * y, 2 * z, np.ones(len(r))]
    )
    _, s, Vt = np.linalg.svd(D, full_matrices=False)
    v = Vt[-1]
    A = np.array([[v[0], v[3], v[4]], [v[3], v[1], v[5]], [v[4], v[5], v[2]]])
    b = v[6:9]
    if np.linalg.det(A) < 0:
        A, b, v = -A, -b, -v
    try:
        o = -np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        raise IdentifiabilityError(
            "the readings do not determine an ellipsoid (degenerate quadric)"
        ) from None
    k = o @ A @ o - v[9]
    M = A / k
    w, U = np.linalg.eigh(M)
    if np.any(w <= 0) or not np.isfinite(k):
        raise IdentifiabilityError("the readings do not determine an ellipsoid (not positive definite)")
    return o, g * (U * np.sqrt(w)) @ U.T


def _residuals(r: np.ndarray, p: np.ndarray, g: float) -> np.ndarray:
    """‖C (r − o)‖ − g per pose for p = (o, the six entries of C)."""
    return np.linalg.norm((r - p[:3]) @ _C(p).T, axis=1) - g


def parameter_se(r: np.ndarray, o: np.ndarray, C: np.ndarray, g: float = G, held=()) -> np.ndarray:
    """Standard errors of (o, C entries) of a geometric fit, s²(JᵀJ)⁻¹ with J the residuals' Jacobian (central
    differences) — the same estimate the manifold solver's tangent covariance maps to; parameters `held` (at
    a bound) are fixed and get NaN. Pose means are independent, so plain least squares is right here."""
    p = np.array([*o, C[0, 0], C[1, 1], C[2, 2], C[1, 0], C[2, 0], C[2, 1]])
    free = [k for k in range(9) if k not in held]
    J = np.empty((len(r), len(free)))
    for j, k in enumerate(free):
        h = 1e-6 * max(1.0, abs(p[k]))
        d = np.zeros(9)
        d[k] = h
        J[:, j] = (_residuals(r, p + d, g) - _residuals(r, p - d, g)) / (2 * h)
    dof = len(r) - len(free)
    se = np.full(9, np.nan)
    if dof <= 0:
        return se
    res = _residuals(r, p, g)
    cov = float(res @ res) / dof * np.linalg.pinv(J.T @ J)
    se[free] = np.sqrt(np.maximum(np.diag(cov), 0.0))
    return se


def _refine(r, o0, C0, g, lower=None, upper=None) -> tuple[np.ndarray, np.ndarray, float, list[int]]:
    """Geometric fit on C's 6 entries (scipy trf), the offset optionally bounded; (o, C, rms, parameters held at a
    bound — least_squares' active_mask)."""
    p0 = np.array([*o0, C0[0, 0], C0[1, 1], C0[2, 2], C0[1, 0], C0[2, 0], C0[2, 1]])
    lb = np.full(9, -np.inf)
    ub = np.full(9, np.inf)
    if lower is not None:
        lb[:3], ub[:3] = lower, upper
        p0[:3] = np.clip(p0[:3], lower + 1e-12, upper - 1e-12)
    sol = least_squares(lambda p: _residuals(r, p, g), p0, bounds=(lb, ub), method="trf", x_scale="jac")
    held = [int(k) for k in np.flatnonzero(sol.active_mask)]
    return sol.x[:3], _C(sol.x), float(np.sqrt(np.mean(sol.fun**2))), held


def sphere_fit(r: np.ndarray, g: float = G) -> tuple[np.ndarray, np.ndarray]:
    """Centre and C = (g/R) I of the least-squares sphere (linear in o and R² − ‖o‖²)."""
    A = np.column_stack([2 * r, np.ones(len(r))])
    sol = np.linalg.lstsq(A, np.sum(r * r, axis=1), rcond=None)[0]
    o = sol[:3]
    R = np.sqrt(max(sol[3] + o @ o, 1e-12))
    return o, (g / R) * np.eye(3)


def fit_ellipsoid(r: np.ndarray, g: float = G, solver: str = "slom") -> AccelCalibration:
    """Unconstrained ellipsoid fit: geometric refinement from the algebraic quadric (when it is an ellipsoid)
    and from the best sphere; the better of the two. `solver` "slom" refines on the manifold parameterisation
    C = eRᵀ g diag(s)⁻¹ eR (o ∈ R³, eR ∈ SO(3), s ∈ R³) with the SLOM solver; "scipy" on C's 6 entries."""
    r = _check(r)
    check_excitation(r, g)
    starts = [sphere_fit(r, g)]
    try:
        starts.append(algebraic_ellipsoid(r, g))
    except IdentifiabilityError:
        pass  # a cap of directions often fits a hyperboloid better
    if solver not in ("slom", "scipy"):
        raise DataError(f"unknown ellipsoid solver {solver!r} (slom, scipy)")
    refine = _refine_slom if solver == "slom" else _refine
    best = min((refine(r, o, C, g) for o, C in starts), key=lambda x: x[2])
    o, C, rms, held = best
    return AccelCalibration(o, C, rms, "ellipsoid", parameter_se(r, o, C, g, held))


def _refine_slom(r, o0, C0, g) -> tuple[np.ndarray, np.ndarray, float, list[int]]:
    """Geometric ellipsoid fit with identify.slom: variables o (R³), eR (SO(3)), s (R³); one factor per pose
    (unbounded: nothing held)."""
    import casadi as ca

    from identify import slom
    from identify.manifolds import SO3, Rn

    lam, U = np.linalg.eigh(0.5 * (C0 + C0.T))
    if np.linalg.det(U) < 0:
        U[:, 0] = -U[:, 0]
    o, R, sv, x = ca.SX.sym("o", 3), ca.SX.sym("R", 9), ca.SX.sym("s", 3), ca.SX.sym("r", 3)
    eR = ca.reshape(R, 3, 3)  # column-major, as SO3 stores it
    a = eR.T @ (g * (eR @ (x - o)) / sv)
    fn = ca.Function("ellipsoid", [o, R, sv, x], [ca.norm_2(a) - g])
    pr = slom.Problem()
    pr.add_variable("o", Rn(3), o0, eliminate=False)
    pr.add_variable("eR", SO3(), SO3.to_flat(U.T), eliminate=False)
    pr.add_variable("s", Rn(3), g / np.maximum(lam, 1e-6), eliminate=False)
    pr.add_factor("reading", fn, [pr.variables["o"], pr.variables["eR"], pr.variables["s"]], [r])
    res = slom.solve(pr, slom.Options(max_iter=200, covariance=False))
    eRv = SO3.to_matrix(res.values["eR"][0])
    C = eRv.T @ np.diag(g / res.values["s"][0]) @ eRv
    o_hat = res.values["o"][0]
    rms = float(np.sqrt(np.mean((np.linalg.norm((r - o_hat) @ C.T, axis=1) - g) ** 2)))
    return o_hat, C, rms, []


def tumble_offset(r_first: np.ndarray, r_second: np.ndarray) -> np.ndarray:
    """Offset from tumble pairs (rotated by π about a horizontal axis): mean of (r₁ + r₂)/2 over the pairs."""
    a, b = np.atleast_2d(np.asarray(r_first, float)), np.atleast_2d(np.asarray(r_second, float))
    if a.shape != b.shape or a.shape[1] != 3 or len(a) == 0:
        raise DataError("tumble pairs: need matching (K, 3) readings for both orientations")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise DataError("tumble pairs contain non-finite values")
    return np.mean((a + b) / 2, axis=0)


def calibrate_two_step(
    r: np.ndarray, offset: np.ndarray, bound: float = 0.01, g: float = G
) -> AccelCalibration:
    """Ellipsoid fit with the centre bounded to the tumble offset ± bound [m/s²]."""
    r = _check(r, need=6)
    check_excitation(r, g)
    offset = np.asarray(offset, float)
    _, C0 = sphere_fit(r - offset, g)
    o, C, rms, held = _refine(r, offset, C0, g, offset - bound, offset + bound)
    return AccelCalibration(o, C, rms, "tumble + bounded ellipsoid", parameter_se(r, o, C, g, held))


AXES = ("x", "y", "z")


def _direction(v: np.ndarray) -> str:
    """A unit vector in the sensor frame as text, naming the sensor axis it is closest to."""
    k = int(np.argmax(np.abs(v)))
    axis = f" (sensor {AXES[k]} axis)" if abs(v[k]) > 0.9 else ""
    return "(" + ", ".join(f"{x:+.2f}" for x in v) + ")" + axis


# 0.02 g: tumbled poses spread their means by ~g along every axis, while a static sensor's noise and a
# misaligned mount move a plane of poses out of it by well under 0.01 g
def check_excitation(r: np.ndarray, g: float = G, min_spread: float = 0.02) -> None:
    """IdentifiabilityError unless the pose means spread in all three directions by more than `min_spread`·g
    (rms about their mean): readings in one plane (or one line, or one point) leave the ellipsoid's extent
    along the missing direction(s) undetermined, and the fit returns nonsense gains."""
    r = np.asarray(r, dtype=float)
    _, sv, Vt = np.linalg.svd(r - r.mean(axis=0), full_matrices=False)
    spread = sv / np.sqrt(len(r))
    low = np.flatnonzero(spread < min_spread * g)
    if len(low) == 0:
        return
    if len(low) == 3:
        raise IdentifiabilityError(
            f"the {len(r)} poses give (nearly) the same reading (spread {spread[0]:.2g} m/s²): "
            "tilt the sensor so that gravity points along every axis, both signs"
        )
    shape = "one plane" if len(low) == 1 else "one line"
    missing = " and ".join(_direction(Vt[k]) for k in low)
    raise IdentifiabilityError(
        f"the poses' readings vary in {shape} only: spread {spread[low[0]]:.2g} m/s² (need > "
        f"{min_spread * g:.2g}) along {missing}, which leaves the gain along it undetermined; add poses "
        "that tilt this direction towards and away from gravity"
    )


def plausibility_warnings(cal: AccelCalibration, g: float = G) -> list[str]:
    """Notes on a calibration no real accelerometer has: an offset beyond g/2 or a gain off by more than 2× (MEMS
    data sheets give offsets of a few % of g and sensitivities within ~10 %: these bounds leave room for a badly
    trimmed part and catch unit mistakes, g vs m/s² being 9.81×), or a residual beyond 5 % of g (static poses of
    one sensor fit to well under 1 %)."""
    notes = []
    off = float(np.linalg.norm(cal.offset))
    if off > g / 2:
        notes.append(f"{cal.method}: offset |o| = {off:.3g} m/s² exceeds g/2 — implausible for a real sensor")
    gains = np.diag(cal.C)
    if np.any((gains < 0.5) | (gains > 2)):
        shown = ", ".join(f"{n} {v:.3g}" for n, v in zip(PARAM_NAMES[3:6], gains, strict=True))
        notes.append(f"{cal.method}: gains {shown} are not within 0.5–2 — implausible for a real sensor")
    if cal.rms > 0.05 * g:
        notes.append(
            f"{cal.method}: residual rms {cal.rms:.3g} m/s² exceeds 5 % of g — the poses were not static or "
            "the readings are not of one sensor"
        )
    return notes


def pose_means(pose: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average readings per static pose id: (ids, means (P, 3))."""
    ids = np.unique(pose)
    return ids, np.array([a[pose == i].mean(axis=0) for i in ids])


def split_recording(pose: np.ndarray, a: np.ndarray, tumble: np.ndarray):
    """(grid pose means, tumble first (K,3), tumble second (K,3)) from an accelerometer recording's columns."""
    grid = tumble == 0
    if not grid.any():
        raise DataError(
            "no grid poses (rows with tumble 0): the ellipsoid fit needs them; tumble pairs alone give the offset only"
        )
    _, rg = pose_means(pose[grid], a[grid])
    firsts, seconds = [], []
    for k in sorted(set(np.abs(tumble[~grid]).tolist())):
        one, two = tumble == k, tumble == -k
        if not one.any() or not two.any():
            raise DataError(f"tumble pair {k} lacks its {'second' if one.any() else 'first'} orientation")
        firsts.append(a[one].mean(axis=0))
        seconds.append(a[two].mean(axis=0))
    return rg, np.array(firsts).reshape(-1, 3), np.array(seconds).reshape(-1, 3)
