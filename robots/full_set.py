"""A full parameter set for export from an identification result.

Identification gives base parameters ϑ = K·φ (combinations of the standard parameters φ), not φ itself. The
full set exported is the one closest to the model's own (URDF) parameters φ₀ that reproduces the identified
values exactly: φ = φ₀ + δ with δ the minimum-norm solution of K·δ = ϑ − K·φ₀.

- Dynamic results (`poise identify dynamic --json`): φ is the 10-per-link standard vector (inertia about the
  link origin); K is the joint-torque base the result was estimated with, recognised by its formulas.
- Static results (`poise static result`): ϑ = K_b·[m, m·c]/M over the CoM parameters; the total mass M (which
  CoP data cannot identify) is kept, only the estimated parameters are imposed, and each link keeps its
  inertia about its CoM (inertia never enters a CoM model).
- A parameter-set file is already full and is used as it is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from formats.errors import DataError
from formats.json_format import read_json
from formats.parameter_set import FORMAT as PARAMETER_SET_FORMAT
from formats.parameter_set import ParameterSet, parameter_set_from_json
from formats.static_result import FORMAT as STATIC_FORMAT
from formats.static_result import load_static_result
from robots import dynamics as dyn
from robots.base_params import RegressorSpec, cached_dynamic_base, same_formula
from robots.params_io import keep_lengths, model_lengths
from robots.physical import inertia_matrix
from robots.registry import same_robot
from robots.tree import RobotModel

CHECK_TOL = 1e-9  # |K·φ − ϑ| allowed, relative to max(1, |ϑ|)
ROW_SPACE_TOL = 1e-6  # a stated combination's distance from the model's base row space, relative to its norm
_LINK_REF = re.compile(r"@([^\s]+)")


@dataclass
class FullSet:
    """The parameter set to export and how it was obtained."""

    params: ParameterSet
    kind: str  # "parameter set", "dynamic result" or "static result"
    imposed: int = 0  # base parameters imposed
    residual: float = 0.0  # max |K·φ − ϑ| (relative to max(1, |ϑ|)) of the returned set
    correction_norm: float = 0.0  # ‖δ‖ in the standard (or CoM) parameters
    base_error: Callable[[ParameterSet], float] | None = None  # max relative |K·φ − ϑ| of another set
    # a dynamic result's base: K (base × standard), the identified ϑ and their SEs (None where the result has none)
    base_matrix: np.ndarray | None = None
    base_values: np.ndarray | None = None
    base_se: np.ndarray | None = None
    placeholders: list[str] = field(default_factory=list)  # massless links given a placeholder body first

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "base_parameters_imposed": self.imposed,
            "base_residual": self.residual,
            "correction_norm": self.correction_norm,
            "placeholder_bodies": self.placeholders,
        }


def parameter_set_from_standard(
    model: RobotModel, phi: np.ndarray, prior: ParameterSet, name: str
) -> ParameterSet:
    """Inverse of `dynamics.standard_parameters`: mass, CoM (stored convention) and inertia about the CoM per
    link; a massless link keeps the prior's CoM."""
    mass, com, inertia = {}, {}, {}
    for i, lk in enumerate(model.links):
        p = phi[10 * i : 10 * i + 10]
        m = float(p[0])
        c = p[1:4] / m if m != 0 else np.asarray(prior.com[lk.name], float) * lk.com_sign
        Io = np.zeros((3, 3))
        for (r, k), v in zip(((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2)), p[4:], strict=True):
            Io[r, k] = Io[k, r] = v
        Ic = Io - m * (c @ c * np.eye(3) - np.outer(c, c))
        mass[lk.name] = m
        com[lk.name] = tuple(float(v * s) for v, s in zip(c, lk.com_sign, strict=True))
        inertia[lk.name] = (Ic[0, 0], Ic[0, 1], Ic[0, 2], Ic[1, 1], Ic[1, 2], Ic[2, 2])
    return ParameterSet(name, mass, com, dict(prior.lengths), inertia, f"full set closest to {prior.name}")


def standard_scales(model: RobotModel, prior: ParameterSet) -> np.ndarray:
    """The natural size of each standard parameter of a link: m₀, m₀ℓ (m·c), m₀ℓ² (inertia), with ℓ the larger
    of the link's radius of gyration and CoM distance (≥ 1 cm); massless links get 1 ‰ of the lightest body's."""
    masses = [m for m in prior.mass.values() if m > 0]
    light = 1e-3 * min(masses) if masses else 1.0
    out = []
    for lk in model.links:
        m = prior.mass[lk.name]
        inertia = prior.inertia.get(lk.name, (0.0,) * 6)
        trace = float(np.trace(inertia_matrix(inertia)))
        gyration = np.sqrt(max(trace, 0.0) / (2 * m)) if m > 0 else 0.0
        ell = max(gyration, float(np.linalg.norm(prior.com[lk.name])), 0.01)
        m = m if m > 0 else light
        out.append([m, m * ell, m * ell, m * ell] + [m * ell**2] * 6)
    return np.concatenate(out)


def min_norm_update(
    K: np.ndarray, target: np.ndarray, phi0: np.ndarray, scale: np.ndarray | None = None
) -> np.ndarray:
    """φ₀ + δ with δ the minimum-norm solution of K·δ = target − K·φ₀ (norm of δ / scale if given)."""
    s = np.ones_like(phi0) if scale is None else scale
    delta = s * np.linalg.lstsq(K * s[None, :], target - K @ phi0, rcond=None)[0]
    delta[~np.any(K, axis=0)] = 0.0  # parameters no combination holds stay exactly as they were
    return phi0 + delta


def _residual(K: np.ndarray, phi: np.ndarray, target: np.ndarray) -> float:
    return float(np.max(np.abs(K @ phi - target) / np.maximum(1.0, np.abs(target)), initial=0.0))


def with_placeholder_bodies(
    model: RobotModel, K: np.ndarray, prior: ParameterSet
) -> tuple[ParameterSet, list[str]]:
    """The prior with a placeholder body on each massless link whose parameters enter K: the lightest body's
    mass at the link origin, inertia of a 1 cm sphere. A massless link cannot carry the first moments m·c a
    result gives it; with a mass it can (c = m·c / m)."""
    masses = [m for m in prior.mass.values() if m > 0]
    light = min(masses) if masses else 1.0
    given = []
    mass, com, inertia = dict(prior.mass), dict(prior.com), dict(prior.inertia)
    for i, lk in enumerate(model.links):
        if prior.mass[lk.name] == 0 and np.any(K[:, 10 * i : 10 * i + 10]):
            j = 0.4 * light * 0.01**2
            mass[lk.name], com[lk.name], inertia[lk.name] = light, (0.0, 0.0, 0.0), (j, 0.0, 0.0, j, 0.0, j)
            given.append(lk.name)
    ps = ParameterSet(prior.name, mass, com, dict(prior.lengths), inertia, prior.description)
    return ps, given


def full_from_dynamic(
    model: RobotModel, K: np.ndarray, values: np.ndarray, prior: ParameterSet, scaled: bool = True
) -> FullSet:
    """The full set nearest the prior whose base parameters K·φ equal `values`; `scaled` measures the
    correction relative to each link's size (`standard_scales`), else in raw SI units. Massless links the
    result gives first moments to start from a placeholder body (`with_placeholder_bodies`)."""
    fs = _nearest_dynamic(model, K, values, prior, scaled)
    if fs.residual > CHECK_TOL:
        seeded, given = with_placeholder_bodies(model, K, prior)
        fs = replace(_nearest_dynamic(model, K, values, seeded, scaled), placeholders=given)
    return _checked(fs)


def _nearest_dynamic(
    model: RobotModel, K: np.ndarray, values: np.ndarray, prior: ParameterSet, scaled: bool
) -> FullSet:
    phi0 = dyn.standard_parameters(model, prior)
    scale = standard_scales(model, prior) if scaled else None
    ps = parameter_set_from_standard(model, min_norm_update(K, values, phi0, scale), prior, "identified")

    def error(p: ParameterSet) -> float:
        return _residual(K, dyn.standard_parameters(model, p), values)

    dphi = float(np.linalg.norm(dyn.standard_parameters(model, ps) - phi0))
    return FullSet(ps, "dynamic result", len(values), error(ps), dphi, error)


def full_from_static(model: RobotModel, base: str, values: dict[str, float], prior: ParameterSet) -> FullSet:
    """The set nearest the prior (in [m, m·c]) reproducing the estimated CoM base parameters, total mass kept."""
    from robots.com_variants import base_model  # noqa: PLC0415 (CoM models are only needed here)

    bm = base_model(model, base)
    unknown = sorted(set(values) - set(bm.symbols))
    if unknown:
        raise DataError(f"result symbols {unknown} are not CoM base parameters of {model.name!r} ({base})")
    rows = [bm.symbols.index(s) for s in values]
    M = prior.total_mass
    nl = len(model.links)
    mass_row = np.zeros(4 * nl)
    mass_row[0::4] = 1.0
    K = np.vstack([bm.coefficient_matrix(prior.lengths)[rows], mass_row])
    target = np.array([M * values[s] for s in values] + [M])
    phi0 = prior.standard_vector(model.links)
    phi = min_norm_update(K, target, phi0)
    mass, com = {}, {}
    for i, lk in enumerate(model.links):
        m = float(phi[4 * i])
        mass[lk.name] = m
        com[lk.name] = (
            tuple(float(v / m) for v in phi[4 * i + 1 : 4 * i + 4]) if m != 0 else prior.com[lk.name]
        )
    ps = ParameterSet("identified", mass, com, dict(prior.lengths), dict(prior.inertia), f"from {prior.name}")

    def error(p: ParameterSet) -> float:
        return _residual(K, p.standard_vector(model.links), target)

    dphi = float(np.linalg.norm(ps.standard_vector(model.links) - phi0))
    return _checked(FullSet(ps, "static result", len(values), error(ps), dphi, error))


def _checked(fs: FullSet) -> FullSet:
    if not fs.residual <= CHECK_TOL:
        raise DataError(f"the full set does not reproduce the identified base parameters ({fs.residual:.3g})")
    return fs


def _dynamic(path: Path, d: dict, model: RobotModel, prior: ParameterSet) -> FullSet:
    if "robot" in d and not same_robot(str(d["robot"]), model.name):
        raise DataError(f"{path}: a result for robot {d['robot']!r}, not {model.name!r}")
    try:  # friction: not in a URDF
        inertial = [p for p in d["parameters"] if not str(p["symbol"]).startswith(("fv@", "fc@"))]
        entries = [(str(p["symbol"]), str(p["formula"]), p["value"]) for p in inertial]
    except (KeyError, TypeError) as exc:
        raise DataError(f"{path}: malformed identification result (missing {exc})") from None
    bad = [
        s
        for s, _, v in entries
        if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v)
    ]
    if bad:
        raise DataError(f"{path}: parameter values must be finite numbers ({', '.join(bad[:5])})")
    links = {lk.name for lk in model.links}
    foreign = sorted({n for _, f, _ in entries for n in _LINK_REF.findall(f)} - links)
    if foreign:
        raise DataError(
            f"{path}: a result for another robot (links {', '.join(foreign[:5])} are not in {model.name!r})"
        )
    values = np.array([float(v) for _, _, v in entries])
    se = _standard_errors(inertial)
    K = _stated_combinations(path, inertial, model)
    if K is None:
        K = _matching_base(path, [f for _, f, _ in entries], model)
    else:
        _check_identifiable(path, d, K, model)
    return replace(full_from_dynamic(model, K, values, prior), base_matrix=K, base_values=values, base_se=se)


def _matching_base(path: Path, formulas: list[str], model: RobotModel) -> np.ndarray:
    """K of the joint-torque base (full or simplified) whose formulas are the result's: older results state no
    terms."""
    candidates = [False] + ([True] if model.simplified_dynamic_zero else [])
    for simplified in candidates:
        db = cached_dynamic_base(model, RegressorSpec("torque", model.root), simplified)
        if db.rank == len(formulas) and all(same_formula(db.formula(a), f) for a, f in enumerate(formulas)):
            return db.combination_matrix()
    raise DataError(
        f"{path}: its base parameters match none of {model.name!r}'s joint-torque bases (full or simplified); "
        "a board-wrench result depends on its foot placement and cannot be exported"
    )


def _outside_row_space(K: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Each row of K's distance from the row space of `basis`, relative to the row's norm."""
    u, sv, vt = np.linalg.svd(basis, full_matrices=False)
    V = vt[sv > sv.max(initial=0.0) * 1e-10]
    rest = K - (K @ V.T) @ V
    return np.linalg.norm(rest, axis=1) / np.maximum(np.linalg.norm(K, axis=1), 1e-300)


def _check_identifiable(path: Path, d: dict, K: np.ndarray, model: RobotModel) -> None:
    """DataError unless every stated combination is one of this model's joint-torque base parameters (full or
    simplified): a result of a robot with other kinematics (link lengths, axes) has combinations this URDF's
    dynamics cannot reproduce, and exporting it would write parameters that mean something else."""
    candidates = [False] + ([True] if model.simplified_dynamic_zero else [])
    offs = []
    for simplified in candidates:
        db = cached_dynamic_base(model, RegressorSpec("torque", model.root), simplified)
        offs.append(_outside_row_space(K, db.combination_matrix()))
        if offs[-1].max(initial=0.0) <= ROW_SPACE_TOL:
            return
    off = min(offs, key=lambda o: float(o.max(initial=0.0)))
    worst, rows = float(off.max(initial=0.0)), np.flatnonzero(off > ROW_SPACE_TOL)
    src = f" ({d['robot_source']})" if d.get("robot_source") else ""
    who = f"robot {d['robot']!r}{src}" if d.get("robot") else "the identified robot"
    raise DataError(
        f"{path}: these base parameters are not those of {model.name!r} ({model.source or 'built-in'}): kinematics differ "
        f"from {who}'s (ϑ{', ϑ'.join(str(a + 1) for a in rows[:5])}{', …' if len(rows) > 5 else ''} lie "
        f"{worst:.2g} outside its base); export into the URDF the result was identified with"
    )


def _stated_combinations(path: Path, inertial: list[dict], model: RobotModel) -> np.ndarray | None:
    """K from the exact `terms` a joint-torque result states for each base parameter (`identify dynamic` writes
    them): the combinations the result was estimated in, whichever base this version derives. None when the result
    states none (older results, board-wrench results)."""
    terms = [p.get("terms") for p in inertial]
    n = len(terms)
    if not terms or not all(isinstance(t, dict) and t for t in terms):
        return None
    index = {name: i for i, name in enumerate(dyn.standard_names(model))}
    K = np.zeros((n, len(index)))
    for a, t in enumerate(terms):
        for name, c in t.items():
            if name not in index:
                raise DataError(
                    f"{path}: base parameter {a + 1} names {name!r}, no standard parameter of {model.name!r}"
                )
            if not isinstance(c, int | float) or isinstance(c, bool) or not math.isfinite(c):
                raise DataError(
                    f"{path}: base parameter {a + 1}'s coefficient of {name} must be a finite number"
                )
            K[a, index[name]] = float(c)
    if np.linalg.matrix_rank(K) < n:
        raise DataError(f"{path}: its base parameters' terms are not independent combinations")
    return K


def _standard_errors(inertial: list[dict]) -> np.ndarray | None:
    """The inertial base parameters' SEs of a dynamic result, in its order; None if any is missing or not > 0."""
    try:
        se = np.array([float(p["se"]) for p in inertial])
    except (KeyError, TypeError, ValueError):
        return None
    return se if np.all(np.isfinite(se) & (se > 0)) else None


def _parameter_set(path: Path, d: dict, model: RobotModel) -> FullSet:
    names = [lk.name for lk in model.links]
    for key in ("mass", "com", "inertia"):
        unknown = sorted(set(d.get(key) or {}) - set(names)) if isinstance(d.get(key), dict) else []
        if unknown:
            raise DataError(f"{path}: {key} for link(s) {', '.join(unknown[:5])} unknown to {model.name!r}")
    ps = parameter_set_from_json(d, names, str(path))
    return FullSet(keep_lengths(ps, model_lengths(model)), "parameter set")


def load_full_set(path: str | Path, model: RobotModel) -> FullSet:
    """The full parameter set to export from a parameter-set file or a dynamic/static identification result."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    d = read_json(path, "a parameter set or an identification result")
    prior = model.parameter_set(next(iter(model.params)))
    if isinstance(d, dict) and d.get("format") == PARAMETER_SET_FORMAT:
        return _parameter_set(path, d, model)
    if isinstance(d, dict) and d.get("format") == STATIC_FORMAT:
        res = load_static_result(path)
        if res.robot != model.name:
            raise DataError(f"{path}: a result for robot {res.robot!r}, not {model.name!r}")
        return full_from_static(model, res.base, {s: res.values[s] for s in res.estimated}, prior)
    if isinstance(d, dict) and isinstance(d.get("parameters"), list) and "format" not in d:
        return _dynamic(path, d, model, prior)
    raise DataError(f"{path}: not a poise parameter set, static result or dynamic identification result")
