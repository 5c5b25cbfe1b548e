"""Published base-parameter sets: a paper's grouping formulas over its own symbols, checked against ours.

A robot description may name files of formulas (e.g. the TUlip thesis's App. C for the simplified ZMP model,
spec tulip-com.md §6). Symbols: m<label>, c<label><x|y|z> (the stored CoM convention), I<label><ij> (about the
link CoM, link frame) and named lengths. `published_values` evaluates the formulas for a parameter set, as the
paper did; `map_to_derived` writes each formula over the derived base parameters (ϑ_pub = A ϑ) and flags the
formulas that are no combination of them (a misprint, or a different model).
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.errors import DataError
from robots import dynamics as dyn
from robots.base_params import WRENCH_ROWS, DynamicBase, RegressorSpec, parse_regressor
from robots.expr import evaluate
from robots.memo import per_model
from robots.tree import ParameterSet, RobotModel, eval_form

FORMAT = "poise published base"
_INERTIA = {"xx": (0, 0), "yy": (1, 1), "zz": (2, 2), "xy": (0, 1), "xz": (0, 2), "yz": (1, 2)}


@dataclass(frozen=True)
class PublishedParameter:
    """One published base parameter: the formula as printed and the one to use (they differ for misprints)."""

    index: int
    printed: str
    formula: str
    correction: str = ""  # why `formula` differs from `printed`

    @property
    def symbol(self) -> str:
        return f"ϑb,{self.index}"


@dataclass(frozen=True)
class PublishedBase:
    """A publication's base parameters of one regressor of one robot (see the module docstring)."""

    name: str
    source: str
    regressor: str
    base: str
    simplified: bool
    parameters: tuple[PublishedParameter, ...]
    lengths: tuple[tuple[str, str | float], ...] = ()
    inertia_diagonal: bool = False  # the publication assumes inertias diagonal about the link CoM


def load_published(path: str | Path, name: str) -> PublishedBase:
    """Read a 'poise published base' TOML file (formulas checked for syntax and symbols on use)."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DataError(f"published base {name!r}: cannot read {path} ({exc})") from None
    if doc.get("format") != FORMAT:
        raise DataError(f"{path}: not a {FORMAT!r} file (format = {doc.get('format')!r})")
    formulas = doc.get("formulas")
    if not isinstance(formulas, list) or not formulas or not all(isinstance(f, str) for f in formulas):
        raise DataError(f"{path}: 'formulas' must be a non-empty list of strings")
    corrections = doc.get("corrections", {})
    bad = [k for k in corrections if not (k.isdigit() and 1 <= int(k) <= len(formulas))]
    if bad:
        raise DataError(f"{path}: [corrections] names no formula: {bad}")
    params = []
    for i, text in enumerate(formulas, start=1):
        fix = corrections.get(str(i), {})
        if fix and not isinstance(fix.get("formula"), str):
            raise DataError(f"{path}: [corrections.{i}] needs a 'formula' string")
        params.append(PublishedParameter(i, text, fix.get("formula", text), str(fix.get("reason", ""))))
    try:
        return PublishedBase(
            name,
            str(doc.get("source", "")),
            str(doc["regressor"]),
            str(doc["base"]),
            bool(doc.get("simplified", False)),
            tuple(params),
            tuple(doc.get("lengths", {}).items()),
            bool(doc.get("inertia_diagonal", False)),
        )
    except KeyError as exc:
        raise DataError(f"{path}: missing {exc.args[0]!r}") from None


@per_model
def published_bases(model: RobotModel) -> dict[str, PublishedBase]:
    """The published base sets the robot description names ([published_bases] NAME = FILE)."""
    return {name: load_published(path, name) for name, path in model.published_bases.items()}


def _lengths(pb: PublishedBase, model: RobotModel, ps: ParameterSet) -> dict[str, float]:
    """The parameter set's named lengths plus the published file's own (joint-origin references or numbers)."""
    out = dict(ps.lengths)
    for name, ref in pb.lengths:
        if isinstance(ref, int | float) and not isinstance(ref, bool):
            out[name] = float(ref)
            continue
        sign = -1.0 if str(ref).startswith("-") else 1.0
        jname, _, comp = str(ref).lstrip("+-").rpartition(".")
        if comp not in ("x", "y", "z"):
            raise DataError(f"published base {pb.name!r}: length {name} = {ref!r} is not 'JOINT.x|y|z'")
        form = model.joints[model.joint_index(jname)].offset["xyz".index(comp)]
        out[name] = sign * eval_form(form, ps.lengths)
    return out


def _symbols(model: RobotModel, ps: ParameterSet) -> dict[str, float]:
    """Publication symbols of every link: m, c in the stored CoM convention, inertia about the CoM."""
    env = {}
    for lk in model.links:
        s = lk.com_sign
        env[f"m{lk.label}"] = float(ps.mass[lk.name])
        for k, ax in enumerate("xyz"):
            env[f"c{lk.label}{ax}"] = float(ps.com[lk.name][k])
        inertia = tuple(ps.inertia.get(lk.name, (0.0,) * 6))
        if len(inertia) == 3:
            inertia = (inertia[0], 0.0, 0.0, inertia[1], 0.0, inertia[2])
        ixx, ixy, ixz, iyy, iyz, izz = (float(v) for v in inertia)
        full = {"xx": ixx, "xy": ixy, "xz": ixz, "yy": iyy, "yz": iyz, "zz": izz}
        for key, (r, k) in _INERTIA.items():
            env[f"I{lk.label}{key}"] = s[r] * s[k] * full[key]
    return env


def published_values(pb: PublishedBase, model: RobotModel, params: str | ParameterSet, printed: bool = False):
    """The published formulas evaluated for a parameter set (as the publication's table lists them)."""
    ps = model.parameter_set(params)
    env = {**_symbols(model, ps), **_lengths(pb, model, ps)}
    where = f"published base {pb.name!r}"
    return np.array([float(evaluate(p.printed if printed else p.formula, env, where)) for p in pb.parameters])


def units(pb: PublishedBase, model: RobotModel) -> list[str]:
    """kg, kg·m or kg·m² per formula, from how it scales when every length is doubled."""
    rng = np.random.default_rng(0)
    base = model.parameter_set(next(iter(model.params)))
    lengths = {k: rng.uniform(0.5, 1.0) for k in _lengths(pb, model, base)}
    names = [lk.name for lk in model.links]
    mass = {n: rng.uniform(1.0, 2.0) for n in names}
    com = {n: rng.uniform(0.5, 1.0, 3) for n in names}
    inertia = {n: rng.uniform(1.0, 2.0, 3) for n in names}
    out = []
    for p in pb.parameters:
        vals = []
        for lam in (1.0, 2.0):
            ps = ParameterSet("units", mass, {n: tuple(c * lam) for n, c in com.items()}, {},
                              {n: tuple(i * lam**2) for n, i in inertia.items()})  # fmt: skip
            env = {**_symbols(model, ps), **{k: v * lam for k, v in lengths.items()}}
            vals.append(float(evaluate(p.formula, env, f"published base {pb.name!r}")))
        k = round(math.log2(abs(vals[1] / vals[0]))) if vals[0] else 0
        out.append({0: "kg", 1: "kg·m", 2: "kg·m²"}.get(k, f"kg·m^{k}"))
    return out


class _Poly:
    """A polynomial in named symbols (monomial → coefficient), for reading formulas as sums of terms."""

    def __init__(self, terms: dict[tuple[str, ...], float]) -> None:
        self.terms = {k: v for k, v in terms.items() if v != 0.0}

    @staticmethod
    def of(x) -> _Poly:
        return x if isinstance(x, _Poly) else _Poly({(): float(x)})

    def __add__(self, other):
        out = dict(self.terms)
        for k, v in _Poly.of(other).terms.items():
            out[k] = out.get(k, 0.0) + v
        return _Poly(out)

    __radd__ = __add__

    def __neg__(self):
        return _Poly({k: -v for k, v in self.terms.items()})

    def __sub__(self, other):
        return self + (-_Poly.of(other))

    def __rsub__(self, other):
        return _Poly.of(other) - self

    def __mul__(self, other):
        out: dict[tuple[str, ...], float] = {}
        for k1, v1 in self.terms.items():
            for k2, v2 in _Poly.of(other).terms.items():
                k = tuple(sorted(k1 + k2))
                out[k] = out.get(k, 0.0) + v1 * v2
        return _Poly(out)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, _Poly):
            if set(other.terms) != {()}:
                raise TypeError("division by a symbol")
            other = other.terms[()]
        return _Poly({k: v / other for k, v in self.terms.items()})

    def __pow__(self, n):
        if n != int(n) or n < 0:
            raise TypeError("only non-negative integer powers")
        out = _Poly({(): 1.0})
        for _ in range(int(n)):
            out = out * self
        return out


# The thesis's 16 standard parameters per link (spec tulip-com.md §6): m, m·c (3), I about the CoM (6) and
# m·cᵢcⱼ (6); inertia-like entries in the order of robots.dynamics (xx, xy, yy, xz, yz, zz).
_PAIRS = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))
N16 = 16


def _term_index(term: tuple[str, ...], labels: dict[str, int]) -> int | None:
    """Column of a monomial among the 16 per link: m, c·m, I, c·c·m; None if it is none of them."""
    ms = [t for t in term if re.fullmatch(r"m.+", t) and t[1:] in labels]
    if len(ms) != 1:
        return None
    lab = ms[0][1:]
    rest = [t for t in term if t != ms[0]]
    cs = [re.fullmatch(rf"c{re.escape(lab)}([xyz])", t) for t in rest]
    if not all(cs):
        return None
    axes = sorted("xyz".index(c.group(1)) for c in cs)  # type: ignore[union-attr]
    base = N16 * labels[lab]
    if not axes:
        return base
    if len(axes) == 1:
        return base + 1 + axes[0]
    if len(axes) == 2:
        return base + 10 + _PAIRS.index((axes[0], axes[1]))
    return None


def _inertia_index(term: tuple[str, ...], labels: dict[str, int]) -> int | None:
    if len(term) != 1:
        return None
    m = re.fullmatch(r"I(.+)(xx|yy|zz|xy|xz|yz)", term[0])
    if not m or m.group(1) not in labels:
        return None
    return N16 * labels[m.group(1)] + 4 + _PAIRS.index(_INERTIA[m.group(2)])


def standard16(pb: PublishedBase, model: RobotModel, printed: bool = False) -> np.ndarray:
    """Each formula as a row over the 16 standard parameters per link (the thesis's linear form)."""
    labels = {lk.label: i for i, lk in enumerate(model.links)}
    env: dict = {}
    for lk in model.links:
        env[f"m{lk.label}"] = _Poly({(f"m{lk.label}",): 1.0})
        for ax in "xyz":
            env[f"c{lk.label}{ax}"] = _Poly({(f"c{lk.label}{ax}",): 1.0})
        for key in _INERTIA:
            env[f"I{lk.label}{key}"] = _Poly({(f"I{lk.label}{key}",): 1.0})
    env.update(_lengths(pb, model, model.parameter_set(next(iter(model.params)))))
    T = np.zeros((len(pb.parameters), N16 * len(model.links)))
    for a, p in enumerate(pb.parameters):
        text = p.printed if printed else p.formula
        where = f"published base {pb.name!r}, {p.symbol}"
        try:
            poly = _Poly.of(evaluate(text, env, where))
        except TypeError as exc:
            raise DataError(f"{where}: {exc} in {text!r}") from None
        for term, coef in poly.terms.items():
            col = _term_index(term, labels)
            col = col if col is not None else _inertia_index(term, labels)
            if col is None:
                raise DataError(f"{where}: term {'·'.join(term) or 'constant'} is no standard parameter")
            T[a, col] += coef
    return T


def to_link_frame(model: RobotModel) -> np.ndarray:
    """G (10L × 16L): φ = G p, from the 16 parameters (stored CoM convention, inertia about the CoM) to
    m, m·c and the inertia about the link origin in the link frame (I_o = I_c + tr(P)·1 − P)."""
    L = len(model.links)
    G = np.zeros((10 * L, N16 * L))
    for i, lk in enumerate(model.links):
        s = np.asarray(lk.com_sign, dtype=float)
        r, c = 10 * i, N16 * i
        G[r, c] = 1.0
        for k in range(3):
            G[r + 1 + k, c + 1 + k] = s[k]
        for e, (a, b) in enumerate(_PAIRS):
            G[r + 4 + e, c + 4 + e] = s[a] * s[b]
            G[r + 4 + e, c + 10 + e] = -s[a] * s[b]
            if a == b:
                for d in range(3):
                    G[r + 4 + e, c + 10 + _PAIRS.index((d, d))] += 1.0
    return G


@dataclass
class BaseMap:
    """ϑ_pub = A ϑ_derived on the simplified model; `residual` > 0 flags formulas that are no base parameter."""

    A: np.ndarray  # n_pub × rank
    residual: np.ndarray  # per formula: relative distance of its linear form from the derived span
    rank: int  # rank of A over the formulas in span: the published set is a base iff rank == derived rank

    def in_span(self, tol: float = 1e-9) -> np.ndarray:
        return self.residual < tol


def simplified_subspace(pb: PublishedBase, model: RobotModel, zero: list[int]) -> np.ndarray:
    """Basis B (16L × d) of the thesis parameters allowed by the simplified model: CoM components assumed
    zero (mc·@link in `zero`) with their products, the φ entries in `zero`, and off-diagonal inertias about
    the CoM if the publication assumes them diagonal."""
    import scipy.linalg as sla

    names = dyn.standard_names(model)
    G = to_link_frame(model)
    rows = [G[i] for i in zero]
    for i in zero:
        kind, _, link = names[i].partition("@")
        if kind in ("mcx", "mcy", "mcz"):
            li, ax = model.link_index(link), "xyz".index(kind[-1])
            for col in [1 + ax] + [10 + e for e, pr in enumerate(_PAIRS) if ax in pr]:
                e_ = np.zeros(G.shape[1])
                e_[N16 * li + col] = 1.0
                rows.append(e_)
    if pb.inertia_diagonal:
        for li in range(len(model.links)):
            for e, (a, b) in enumerate(_PAIRS):
                if a != b:
                    e_ = np.zeros(G.shape[1])
                    e_[N16 * li + 4 + e] = 1.0
                    rows.append(e_)
    return sla.null_space(np.array(rows)) if rows else np.eye(G.shape[1])


def map_to_derived(pb: PublishedBase, model: RobotModel, db: DynamicBase, printed: bool = False) -> BaseMap:
    """Express the published formulas over the derived base parameters: T B = A K G B."""
    B = simplified_subspace(pb, model, list(db.assumed_zero))
    TB = standard16(pb, model, printed) @ B
    KB = db.combination_matrix() @ to_link_frame(model) @ B
    A = np.linalg.lstsq(KB.T, TB.T, rcond=None)[0].T
    scale = np.maximum(np.linalg.norm(TB, axis=1), 1e-300)
    residual = np.linalg.norm(A @ KB - TB, axis=1) / scale
    ok = residual < 1e-9
    rank = int(np.linalg.matrix_rank(A[ok], tol=1e-9)) if ok.any() else 0
    return BaseMap(A, residual, rank)


def matching(model: RobotModel, spec: RegressorSpec, simplified: bool) -> PublishedBase | None:
    """The robot's published base set for this regressor, if any: same kind and base, its wrench rows among
    the spec's, and the same model (simplified or not); whether its formulas span the derived set is checked
    by `map_to_derived`."""
    for pb in published_bases(model).values():
        pspec = parse_regressor(pb.regressor, model, pb.base)
        if (pspec.kind, pspec.base, pspec.frame) != (
            spec.kind,
            spec.base,
            spec.frame,
        ) or pb.simplified != simplified:
            continue
        if set(pspec.rows or WRENCH_ROWS) <= set(spec.rows or WRENCH_ROWS):
            return pb
    return None


def describe_row(a: np.ndarray, symbols: list[str], digits: int = 4) -> str:
    """'ϑ3 − 0.182·ϑ38' for one row of A."""
    parts = []
    for c, s in zip(a, symbols, strict=True):
        if abs(c) < 10 ** (-digits - 2):
            continue
        mag = f"{abs(c):.{digits}g}"
        term = s if mag == "1" else f"{mag}·{s}"
        parts.append(("− " if c < 0 else "+ ") + term if parts else ("−" if c < 0 else "") + term)
    return " ".join(parts) or "0"
