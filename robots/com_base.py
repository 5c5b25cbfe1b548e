"""CoM regressors and base parameters, derived from the kinematic tree.

M·p_CoM = Σ_i m_i (p_i + R_i c_i). Every link origin p_i is a sum of link axes times link lengths, so
M·p_CoM = A(q)·K·φ, where the columns of A(q) are (signed) axes of link frames — pure trigonometric
entries in [−1, 1] — and K holds the lengths (thesis App. A: lengths go *into* the base parameters).
Axis columns that are identical functions of q (joints about the same axis) are merged; any remaining
linear dependency is removed by QR with column pivoting. ϑ_b = K_b φ / M.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import casadi as ca
import numpy as np

from formats.errors import DataError
from robots.kinematics import link_frames, link_frames_sym
from robots.tree import LinForm, ParameterSet, RobotModel, eval_form

AXIS_NAMES = "xyz"


def _add(form: LinForm, other: LinForm, scale: float = 1.0) -> None:
    for k, v in other.items():
        form[k] = form.get(k, 0.0) + scale * v
        if abs(form[k]) < 1e-15:
            del form[k]


def standard_names(model: RobotModel) -> list[str]:
    """Names of the standard CoM parameters [m, m·cx, m·cy, m·cz] per link."""
    out = []
    for lk in model.links:
        out += [
            f"m{lk.label}",
            f"c{lk.label}x·m{lk.label}",
            f"c{lk.label}y·m{lk.label}",
            f"c{lk.label}z·m{lk.label}",
        ]
    return out


def axis_coefficients(model: RobotModel, base: str) -> list[dict[int, LinForm]]:
    """K as sparse rows: row 3i+k (signed axis k of link i) → {standard index: linear form in lengths}."""
    site = model.base_site(base)
    rows: list[dict[int, LinForm]] = [dict() for _ in range(3 * len(model.links))]

    def add_offset(link_name: str, offset, std_col: int, scale: float) -> None:
        li = model.link_index(link_name)
        sign = model.links[li].com_sign
        for k in range(3):
            if offset[k]:
                _add(rows[3 * li + k].setdefault(std_col, {}), offset[k], scale * sign[k])

    for i, link in enumerate(model.links):
        for k in range(3):  # m_i c_ik multiplies its own signed axis with coefficient 1
            rows[3 * i + k][4 * i + 1 + k] = {"": 1.0}
        for j in model.joint_path(link.name):
            add_offset(model.joints[j].parent, model.joints[j].offset, 4 * i, +1.0)
        for j in model.joint_path(site.link):
            add_offset(model.joints[j].parent, model.joints[j].offset, 4 * i, -1.0)
        add_offset(site.link, site.offset, 4 * i, -1.0)
    for r in rows:
        for key in [k for k, v in r.items() if not v]:
            del r[key]
    return rows


def axis_columns(model: RobotModel, q: np.ndarray, base: str) -> np.ndarray:
    """Signed link axes in the base frame, (B, 3, 3L) for q (B, nq): column 3i+k = s_ik · R_i[:, k]."""
    params = next(iter(model.params.values()))
    fr = link_frames(model, np.atleast_2d(q), params, base)
    signs = np.array([lk.com_sign for lk in model.links], dtype=float)  # (L, 3)
    cols = fr.R * signs[None, :, None, :]  # (B, L, 3 rows, 3 axes)
    return np.transpose(cols, (0, 2, 1, 3)).reshape(fr.R.shape[0], 3, -1)


@dataclass
class BaseParameter:
    """One base parameter: which merged axis column it multiplies and how it groups standard parameters."""

    index: int
    key: str  # e.g. "z:0" = (signed) z axis of link labelled 0 and the links merged with it
    column: str  # human description, e.g. "−z of 0=1=7"
    members: list[tuple[int, int, float]]  # (link index, axis, sign relative to the column)
    coeff: dict[int, LinForm]  # standard-parameter index → linear form in lengths
    sign: float = 1.0

    @property
    def symbol(self) -> str:
        return f"ϑ{self.index}"


@dataclass
class BaseModel:
    """Base parameters of the CoM model of a robot for one base (stance) site."""

    model: RobotModel
    base: str
    params: list[BaseParameter]
    std_names: list[str]
    fallback: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.params)

    @property
    def symbols(self) -> list[str]:
        return [p.symbol for p in self.params]

    def coefficient_matrix(self, lengths: dict[str, float]) -> np.ndarray:
        """K_b (n × 4L): ϑ_b = K_b φ / M for the given link lengths."""
        K = np.zeros((self.n, len(self.std_names)))
        for g, bp in enumerate(self.params):
            for j, form in bp.coeff.items():
                K[g, j] = eval_form(form, lengths)
        return K

    def values(self, params: str | ParameterSet) -> np.ndarray:
        """Base parameter values (m) of a parameter set."""
        ps = self.model.parameter_set(params)
        phi = ps.standard_vector(self.model.links)
        return self.coefficient_matrix(ps.lengths) @ phi / ps.total_mass

    def selector(self) -> np.ndarray:
        """S (3L × n): A_b(q) = A(q) S maps the signed axis columns to the base-parameter columns."""
        S = np.zeros((3 * len(self.model.links), self.n))
        for g, bp in enumerate(self.params):
            li, k, rel = bp.members[0]
            S[3 * li + k, g] = bp.sign * rel
        return S

    def regressor(self, q: np.ndarray) -> np.ndarray:
        """R_b(q): p_CoM = R_b(q) ϑ_b; shape (B, 3, n) or (3, n) for one posture."""
        q = self.model.check_q(q)
        A = axis_columns(self.model, np.atleast_2d(q), self.base) @ self.selector()
        return A[0] if q.ndim == 1 else A

    def regressor_sym(self, q: ca.SX) -> ca.SX:
        """Symbolic R_b(q) (3 × n)."""
        params = next(iter(self.model.params.values()))
        fr = link_frames_sym(self.model, q, params, self.base)
        cols = []
        for bp in self.params:
            li, k, rel = bp.members[0]
            s = self.model.links[li].com_sign[k] * bp.sign * rel
            cols.append(s * fr.R[li][:, k])
        return ca.horzcat(*cols)

    def formula(self, g: int) -> str:
        """Grouping formula of base parameter g as text, e.g. '(c0y·m0 + l0y·(m7 + … + m12))/M'."""
        bp = self.params[g]
        terms: list[str] = []
        by_form: dict[tuple, list[str]] = {}
        for j in sorted(bp.coeff):
            form = bp.coeff[j]
            name = self.std_names[j]
            if j % 4:  # m·c term, coefficient ±1
                coef = form.get("", 0.0)
                terms.append(
                    ("− " if coef < 0 else "+ ")
                    + (name if abs(abs(coef) - 1) < 1e-12 else f"{abs(coef):g}·{name}")
                )
            else:
                by_form.setdefault(tuple(sorted(form.items())), []).append(name)
        for form, masses in by_form.items():
            lin = _render_form(dict(form))
            mass = masses[0] if len(masses) == 1 else "(" + " + ".join(masses) + ")"
            if lin.startswith("−") and " " not in lin.strip("−"):
                terms.append(f"− {lin[1:]}·{mass}")
            else:
                terms.append(f"+ {lin}·{mass}" if " " not in lin else f"+ ({lin})·{mass}")
        body = " ".join(terms).lstrip("+ ").strip()
        if body.startswith("− "):
            body = "−" + body[2:]
        return f"({body})/M"


def _render_form(form: LinForm) -> str:
    parts = []
    for name, c in sorted(form.items()):
        mag = abs(c)
        text = (name or "1") if abs(mag - 1) < 1e-12 else f"{mag:g}{('·' + name) if name else ''}"
        parts.append(("− " if c < 0 else "+ ") + text)
    out = " ".join(parts)
    return out[2:] if out.startswith("+ ") else "−" + out[2:]


def _sample_q(model: RobotModel, n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(-np.pi, np.pi, size=(n, model.nq))


def derive_base(model: RobotModel, base: str, samples: int = 24, seed: int = 0) -> BaseModel:
    """Derive the base parameters: merge identical axis columns, then remove remaining dependencies by QR."""
    rng = np.random.default_rng(seed)
    A = axis_columns(model, _sample_q(model, samples, rng), base)  # (B, 3, 3L)
    cols = A.transpose(2, 0, 1).reshape(A.shape[2], -1)  # one row per signed axis, flattened over samples
    K = axis_coefficients(model, base)
    groups: list[list[tuple[int, float]]] = []
    for r in range(cols.shape[0]):
        for g in groups:
            ref = cols[g[0][0]]
            if np.allclose(cols[r], ref, atol=1e-10):
                g.append((r, 1.0))
                break
            if np.allclose(cols[r], -ref, atol=1e-10):
                g.append((r, -1.0))
                break
        else:
            groups.append([(r, 1.0)])
    gcols = np.array([cols[g[0][0]] for g in groups])
    coeffs: list[dict[int, LinForm]] = []
    for g in groups:
        c: dict[int, LinForm] = {}
        for r, rel in g:
            for j, form in K[r].items():
                _add(c.setdefault(j, {}), form, rel)
        coeffs.append({j: f for j, f in c.items() if f})
    # Remaining linear dependencies (not present for TUlip): fold dependent columns into pivots.
    fallback = {}
    rank = np.linalg.matrix_rank(gcols.T, tol=1e-9 * max(1.0, np.abs(gcols).max()))
    keep = list(range(len(groups)))
    if rank < len(groups):
        R, piv = pivoted_qr(gcols.T)
        ind, dep = list(piv[:rank]), list(piv[rank:])
        beta = np.linalg.solve(R[:rank, :rank], R[:rank, rank:])
        for a, i in enumerate(ind):
            for b, d in enumerate(dep):
                for j, form in coeffs[d].items():
                    _add(coeffs[i].setdefault(j, {}), form, beta[a, b])
        keep = sorted(ind)
        fallback = {"dependent_groups": dep, "beta": beta.tolist()}
    conv = model.base_conventions.get(base, {})
    signs = conv.get("signs", {})
    params = []
    for gi in keep:
        g = groups[gi]
        members = [(r // 3, r % 3, rel) for r, rel in g]
        li, k, _ = members[0]
        key = f"{AXIS_NAMES[k]}:{model.links[li].label}"
        sgn = float(signs.get(key, 1.0))
        s0 = model.links[li].com_sign[k] * sgn
        labels = "=".join(model.links[m[0]].label for m in members)
        coeff = {j: {n: sgn * v for n, v in f.items()} for j, f in coeffs[gi].items()}
        column = f"{'−' if s0 < 0 else ''}{AXIS_NAMES[k]} of {labels}"
        params.append(BaseParameter(0, key, column, members, coeff, sgn))
    order = conv.get("order")
    if order:
        by_key = {p.key: p for p in params}
        if sorted(order) != sorted(by_key):
            raise DataError(
                f"base convention order for {base!r} does not match the derived groups {sorted(by_key)}"
            )
        params = [by_key[k] for k in order]
    else:
        xy = np.abs(gcols.reshape(len(groups), -1, 3)[..., :2]).max(axis=(1, 2))

        def sort_key(p: BaseParameter):
            gi = next(i for i, g in enumerate(groups) if g[0][0] == 3 * p.members[0][0] + p.members[0][1])
            return (xy[gi] < 1e-12, p.members[0][1], p.members[0][0])

        params.sort(key=sort_key)
    for i, p in enumerate(params, start=1):
        p.index = i
    return BaseModel(model, base, params, standard_names(model), fallback)


def standard_regressor(model: RobotModel, q: np.ndarray, base: str, params: str | ParameterSet) -> np.ndarray:
    """Y(q) with M·p_CoM = Y(q) φ for the standard parameters φ, (B, 3, 4L)."""
    ps = model.parameter_set(params)
    fr = link_frames(model, np.atleast_2d(q), ps, base)
    B, L = fr.p.shape[:2]
    Y = np.zeros((B, 3, 4 * L))
    for i, lk in enumerate(model.links):
        Y[:, :, 4 * i] = fr.p[:, i, :]
        Y[:, :, 4 * i + 1 : 4 * i + 4] = fr.R[:, i, :, :] * np.asarray(lk.com_sign, dtype=float)
    return Y


@dataclass
class NumericBase:
    """Base parameters found numerically: ϑ = φ_I + β φ_D (spec §2, QR with column pivoting)."""

    independent: list[int]
    dependent: list[int]
    beta: np.ndarray
    rank: int
    names: list[str]


# a normalised column whose part orthogonal to the columns before it is smaller than this depends on them (on
# TUlip independent columns kept ≥ 3e-2 of their norm; dependent ones left 1e-15, once 2e-7 — rounding in a small column)
ORDERED_TOL = 1e-4


# columns whose remaining norms differ by less than this (relative) tie: a symmetric robot's left and right
# columns, equal but for rounding
PIVOT_TIE = 1e-9


def pivoted_qr(Y: np.ndarray, tie: float = PIVOT_TIE) -> tuple[np.ndarray, np.ndarray]:
    """Householder QR with column pivoting by largest remaining norm, ties going to the lowest column index.
    LAPACK's pivoting breaks ties by its BLAS kernels' rounding, so the same robot got other base parameters on
    another CPU; these are the same on every machine. Returns (R, permutation)."""
    A = np.array(Y, dtype=float)
    if not np.all(np.isfinite(A)):
        raise DataError("a regressor with NaN or infinite entries has no base parameters")
    # a tall regressor: the same columns' geometry in n rows, the R of an unpivoted QR (LAPACK, blocked)
    if A.shape[0] > A.shape[1]:
        A = np.linalg.qr(A, mode="r")
    m, n = A.shape
    piv = np.arange(n)
    for k in range(min(m, n)):
        norms = np.linalg.norm(A[k:, k:], axis=0)
        best = norms.max(initial=0.0)
        if best == 0.0:
            break
        tied = np.flatnonzero(norms >= best * (1.0 - tie))
        j = k + int(tied[np.argmin(piv[k + tied])])
        A[:, [k, j]] = A[:, [j, k]]
        piv[[k, j]] = piv[[j, k]]
        v = A[k:, k].copy()
        v[0] += np.copysign(np.linalg.norm(v), v[0])
        A[k:, k:] -= np.outer(v, (2.0 / (v @ v)) * (v @ A[k:, k:]))
    return np.triu(A[: min(m, n)]), piv


def numeric_base(Y: np.ndarray, names: list[str], tol: float = 1e-9) -> NumericBase:
    """Numeric base parameters from a regressor stacked over random configurations (rows × standard params)."""
    Y = np.asarray(Y).reshape(-1, Y.shape[-1])
    R, piv = pivoted_qr(Y)
    d = np.abs(np.diag(R))
    rank = int(np.sum(d > tol * d[0])) if d.size else 0
    ind, dep = piv[:rank], piv[rank:]
    beta = np.linalg.solve(R[:rank, :rank], R[:rank, rank:])
    beta[np.abs(beta) < 1e-12] = 0.0
    return NumericBase([int(i) for i in ind], [int(i) for i in dep], beta, rank, [names[i] for i in ind])


def ordered_base(Y: np.ndarray, names: list[str], tol: float = 1e-9) -> NumericBase:
    """Numeric base parameters whose independent columns are the first ones, in the given column order, that are
    independent of those before them (rank as `numeric_base` finds it). Pivoting by column norm breaks the ties of
    a symmetric robot's left and right columns by the samples' noise, so two nearby sample sets number the base
    parameters apart; this order does not."""
    Y = np.asarray(Y).reshape(-1, Y.shape[-1])
    rank = numeric_base(Y, names, tol).rank
    norms = np.linalg.norm(Y, axis=0)
    Q = np.zeros((Y.shape[0], 0))
    ind: list[int] = []
    for j in np.flatnonzero(norms > tol * max(norms.max(initial=0.0), 1e-300)):
        v = Y[:, j] / norms[j]
        for _ in range(2):  # Gram–Schmidt twice: orthogonal to working precision
            v = v - Q @ (Q.T @ v)
        if np.linalg.norm(v) > ORDERED_TOL:
            Q = np.hstack([Q, (v / np.linalg.norm(v))[:, None]])
            ind.append(int(j))
    if len(ind) != rank:  # the two rank decisions disagree on a borderline column: pivoting decides
        return numeric_base(Y, names, tol)
    dep = [j for j in range(Y.shape[1]) if j not in set(ind)]
    beta = np.linalg.lstsq(Y[:, ind], Y[:, dep], rcond=None)[0]
    beta[np.abs(beta) < 1e-12] = 0.0
    return NumericBase(ind, dep, beta, rank, [names[i] for i in ind])


def rank_report(H: np.ndarray, symbols: list[str], tol: float = 1e-8) -> tuple[int, list[int]]:
    """Numerical rank of H and the columns that cannot be identified (dependent after pivoted QR)."""
    H = np.asarray(H, dtype=float)
    scale = np.linalg.norm(H, axis=0)
    zero = scale <= tol * max(scale.max(initial=0.0), 1e-300)
    Hn = np.where(zero, 0.0, H / np.where(zero, 1.0, scale))
    R, piv = pivoted_qr(Hn)
    d = np.abs(np.diag(R))
    rank = int(np.sum(d > tol * max(d[0], 1e-300))) if d.size else 0
    dep = sorted(set(piv[rank:].tolist()) | set(np.flatnonzero(zero).tolist()))
    return rank, dep
