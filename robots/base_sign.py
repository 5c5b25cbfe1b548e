"""Which base parameters have a sign no physical robot can change.

A base parameter ϑ = k·φ is a linear functional of the standard parameters φ (per link: m, m·c, inertia about the
link origin; `robots.dynamics.STANDARD_NAMES`). Per link, φ is linear in the pseudo-inertia J = [[Σ, h], [hᵀ, m]]
(Σ = ½ tr(I)·1 − I, h = m·c; `consistent_set.pseudo_inertia`), and a mass distribution has these moments iff every
J ⪰ 0 (Wensing, Kim, Slotine 2017). With C the symmetric 4×4 matrix of a link's coefficients (`link_matrix`:
Σ_xx's is k_Iyy + k_Izz …, an off-diagonal's half its product of inertia's with the sign flipped, h's half, m's as
is) k·φ = Σ_l tr(C_l J_l), and since the PSD cone is self-dual, ϑ ≥ 0 for every consistent robot iff every C_l ⪰ 0
(and every coefficient of a nonnegative extra — a grouped rotor inertia — is ≥ 0); ϑ ≤ 0 likewise with −C_l. Any
other base parameter takes either sign on some consistent robot.

A simplified model's assumed-zero products of inertia and first moments are off-diagonal entries of J held at
zero: ϑ ≥ 0 on those J ⪰ 0 iff C_l's remaining entries can be completed to a PSD matrix, which for a chordal pattern
(every one but the 4-cycle) holds iff each maximal clique's block is PSD (Grone, Johnson, Sá, Wolkowicz 1984). A
4-cycle pattern, or an assumed-zero mass or moment of inertia, is tested without that freedom: a sign found is then
still certain, only not every definite one is found.

Many base parameters are sums of moments of inertia and masses but for a first moment with a small lever arm (TUlip
standing: Iyy@upper_leg_l + 0.1024·m@foot_l + 0.2057·mcx@foot_l): a mass far enough along −x makes them negative,
so no sign holds for every distribution. `signs_within` gives the radius R within which it holds when every link's
mass lies within R of its origin (J ⪰ 0 and tr(Q·J) ≥ 0, Q = diag(−1, −1, −1, R²): exact for a ball), R = 0.4975 m
there. Radii of the order of the tolerance (≲ 1e-4 m) mean none.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from robots.dynamics import STANDARD_NAMES

# an eigenvalue counts as ≥ 0 down to this share of the coefficients' size (the numerical base's β carries ~1e-13)
REL_TOL = 1e-8
# each off-diagonal standard parameter's entry of J (Σ's or h's), by its index in STANDARD_NAMES
_OFF_DIAGONAL = {1: (0, 3), 2: (1, 3), 3: (2, 3), 5: (0, 1), 7: (0, 2), 8: (1, 2)}


def link_matrix(k: np.ndarray) -> np.ndarray:
    """C (4×4, symmetric) with tr(C·J(φ)) = k·φ for one link's 10 coefficients k (order of STANDARD_NAMES)."""
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = np.asarray(k, dtype=float)
    return np.array(
        [
            [iyy + izz, -ixy / 2, -ixz / 2, hx / 2],
            [-ixy / 2, ixx + izz, -iyz / 2, hy / 2],
            [-ixz / 2, -iyz / 2, ixx + iyy, hz / 2],
            [hx / 2, hy / 2, hz / 2, m],
        ]
    )


def _cliques(free: set[tuple[int, int]]) -> list[tuple[int, ...]] | None:
    """The maximal cliques of the graph on J's 4 rows whose edges are the entries not held at zero; None when it
    is a 4-cycle (the one non-chordal graph on 4 vertices: every vertex of degree 2)."""
    edges = {(r, c) for r, c in combinations(range(4), 2) if (r, c) not in free}
    if len(edges) == 4 and all(sum(v in e for e in edges) == 2 for v in range(4)):
        return None
    cliques = [
        s
        for n in range(4, 0, -1)
        for s in combinations(range(4), n)
        if all(p in edges for p in combinations(s, 2))
    ]
    return [s for s in cliques if not any(set(s) < set(t) for t in cliques)]


def _blocks(C: np.ndarray, free: set[tuple[int, int]]) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """C and the index blocks whose PSD-ness decides whether tr(C·J) ≥ 0 for every J ⪰ 0 with the `free`
    off-diagonal entries (r < c) zero: the maximal cliques of the entries not held at zero; for a 4-cycle, the
    whole C with those entries set to zero (a completion: sufficient only)."""
    blocks = _cliques(set(free)) if free else [tuple(range(4))]
    if blocks is None:
        C = C.copy()
        for r, c in free:
            C[r, c] = C[c, r] = 0.0
        blocks = [tuple(range(4))]
    return C, blocks


def nonnegative(C: np.ndarray, free: set[tuple[int, int]] = frozenset(), tol: float = 0.0) -> bool:
    """Whether tr(C·J) ≥ 0 (to `tol`) for every J ⪰ 0 whose `free` off-diagonal entries (r < c) are zero."""
    C, blocks = _blocks(C, free)
    return all(np.linalg.eigvalsh(C[np.ix_(b, b)])[0] >= -tol for b in blocks)


def nonnegative_within(C: np.ndarray, free: set[tuple[int, int]] = frozenset(), tol: float = 0.0) -> float:
    """The largest R (m) such that tr(C·J) ≥ 0 (to `tol`) for every mass distribution within R of the link origin
    (J ⪰ 0 and tr(Q·J) = ∫ (R² − |x|²) dm ≥ 0, Q = diag(−1, −1, −1, R²); exact: Wensing, Kim, Slotine 2017), with
    the `free` entries zero: inf when it holds for any distribution, 0 when for none. The cone's dual is C − μQ
    PSD(-completable) for some μ ≥ 0; for a block holding m (index 3) that is, by its Schur complement,
    R² ≤ (d − bᵀ(A + μ1)⁻¹b)/μ. Maximised over μ on a fine grid: a lower bound on the exact R, so a sign
    said to hold within it does."""
    if nonnegative(C, free, tol):
        return float("inf")
    C, blocks = _blocks(C, free)
    scale = max(np.abs(C).max(), 1e-300)
    mus = scale * np.logspace(-9, 6, 600)
    low = np.zeros_like(mus)  # every block's A + μ1 must be PSD
    r2 = np.full_like(mus, np.inf)
    for b in blocks:
        inner = [i for i in b if i != 3]
        a, V = np.linalg.eigh(C[np.ix_(inner, inner)]) if inner else (np.zeros(0), np.zeros((0, 0)))
        if 3 not in b:
            low = np.maximum(low, -a.min(initial=np.inf) - tol)
            continue
        w = V.T @ C[inner, 3] if inner else np.zeros(0)
        d = C[3, 3] + tol
        with np.errstate(divide="ignore", invalid="ignore"):
            shifted = a[None, :] + mus[:, None]
            s = d - np.sum(np.where(w[None, :] ** 2 > 0, w[None, :] ** 2 / shifted, 0.0), axis=1)
            ok = np.all(shifted > 0, axis=1)
            r2 = np.minimum(r2, np.where(ok, s / mus, -np.inf))
    r2 = np.where(mus >= low, r2, -np.inf)
    best = float(r2.max(initial=-np.inf))
    return float(np.sqrt(best)) if best > 0 else 0.0


def _rows(K, assumed_zero, extra):
    """Per base parameter: its links' (C, free entries) with a coefficient above the tolerance, its extras'
    coefficients and the tolerance."""
    K = np.atleast_2d(np.asarray(K, dtype=float))
    if K.shape[1] % len(STANDARD_NAMES):
        raise ValueError(f"K has {K.shape[1]} columns, not {len(STANDARD_NAMES)} per link")
    links = K.shape[1] // len(STANDARD_NAMES)
    E = np.zeros((K.shape[0], 0)) if extra is None else np.atleast_2d(np.asarray(extra, dtype=float))
    zero = set(assumed_zero)
    free = [
        {_OFF_DIAGONAL[i % 10] for i in range(10 * lk, 10 * lk + 10) if i in zero and i % 10 in _OFF_DIAGONAL}
        for lk in range(links)
    ]
    for a, row in enumerate(K):
        mats = [(link_matrix(row[10 * lk : 10 * lk + 10]), free[lk]) for lk in range(links)]
        size = max([np.abs(C).max() for C, _ in mats] + [np.abs(E[a]).max(initial=0.0)])
        tol = REL_TOL * size
        yield [(C, f) for C, f in mats if np.abs(C).max() > tol], E[a], tol, size


def definite_signs(
    K: np.ndarray,
    assumed_zero: list[int] | tuple[int, ...] = (),
    extra: np.ndarray | None = None,
) -> np.ndarray:
    """Per base parameter (row of K, base × 10·links, standard parameters in `dynamics.standard_names` order):
    +1 if no physically consistent robot makes it negative, −1 if none makes it positive, 0 if it can take either
    sign. `assumed_zero`: standard parameters a simplified model holds at zero (indices into K's columns).
    `extra` (base × e): each parameter's coefficients of nonnegative scalars grouped into it (rotor inertias)."""
    out = []
    for live, e, tol, size in _rows(K, assumed_zero, extra):
        sign = 0
        for s in (1, -1) if size > 0 else ():
            if np.all(s * e >= -tol) and all(nonnegative(s * C, f, tol) for C, f in live):
                sign = s
                break
        out.append(sign)
    return np.array(out, dtype=int)


def signs_within(
    K: np.ndarray,
    assumed_zero: list[int] | tuple[int, ...] = (),
    extra: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """`definite_signs` and, per base parameter, the radius R (m) within which it holds: inf for every mass
    distribution, else the largest R such that no robot whose every link has its mass within R of the link's
    origin gives the parameter the other sign (a lower bound; 0 with sign 0: no radius does)."""
    signs, radii = [], []
    for live, e, tol, size in _rows(K, assumed_zero, extra):
        best = (0, 0.0)
        for s in (1, -1) if size > 0 else ():
            if not np.all(s * e >= -tol):
                continue
            r = min((nonnegative_within(s * C, f, tol) for C, f in live), default=float("inf"))
            if r > best[1]:
                best = (s, r)
        signs.append(best[0])
        radii.append(best[1])
    return np.array(signs, dtype=int), np.array(radii)
