"""Base parameters of the dynamic regressors (joint torque, base wrench, sub-tree wrench at a sensor frame).

Numerical, for any robot (spec tulip-com.md §2, §6): stack the regressor over random states, QR with column
pivoting, ϑ = φ_I + β φ_D (β = R₁⁻¹R₂). Every base parameter is shown as its grouping formula over the standard
parameters with numeric coefficients (link lengths are numbers in a URDF). Standard parameters whose columns
vanish are named: no data of this kind can identify them. An optional set of standard parameters assumed zero
(a simplified model, from the robot description) is removed first.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

import numpy as np

from formats.errors import DataError
from robots import dynamics as dyn
from robots.com_base import numeric_base, ordered_base
from robots.memo import per_model
from robots.tree import RobotModel

KINDS = ("torque", "base-wrench", "ft")
WRENCH_ROWS = ("fx", "fy", "fz", "mx", "my", "mz")


@dataclass(frozen=True)
class RegressorSpec:
    """Which regressor: `torque`, `base-wrench` (base = a site/base name) or `ft` at a sensor frame."""

    kind: str
    base: str
    frame: str | None = None
    rows: tuple[str, ...] | None = None  # wrench rows to keep, e.g. ("fz", "mx", "my") for the ZMP model
    # base-wrench: moments about the point this far along the base frame's z axis (m), e.g. the load cells'
    # plane a plate height below the sole: n' = n − (0, 0, z) × f, so Mx' = Mx + z·Fy, My' = My − z·Fx
    moment_z: float = 0.0


def parse_regressor(text: str, model: RobotModel, base: str | None = None) -> RegressorSpec:
    """'torque', 'base-wrench[:fz,mx,my]' or 'ft:FRAME' → RegressorSpec (clear error otherwise)."""
    kind, _, arg = text.partition(":")
    if kind == "torque":
        if arg:
            raise DataError(f"--regressor torque takes no argument, got {text!r}")
        return RegressorSpec("torque", base or model.root)
    if kind == "base-wrench":
        stance = (model.stance or {}).get("base") if isinstance(model.stance, dict) else None
        b = base or stance or (next(iter(model.bases)) if model.bases else model.root)
        rows = tuple(r.strip().lower() for r in arg.split(",")) if arg else None
        bad = [r for r in rows or () if r not in WRENCH_ROWS]
        if bad:
            raise DataError(f"unknown wrench row(s) {bad}: choose from {', '.join(WRENCH_ROWS)}")
        model.base_site(b)
        return RegressorSpec("base-wrench", b, None, rows)
    if kind == "ft":
        if not arg:
            raise DataError("--regressor ft:FRAME needs a frame (a fixed sensor joint, site or link)")
        return RegressorSpec("ft", base or model.root, arg)
    raise DataError(f"unknown regressor {text!r} (com, torque, base-wrench[:rows] or ft:FRAME)")


def random_states(model: RobotModel, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """q uniform in the joint limits (±π where unlimited), q̇ and q̈ standard normal."""
    lo, hi = model.sampling_bounds()
    q = rng.uniform(lo, hi, (n, model.nq))
    return q, rng.standard_normal((n, model.nq)), rng.standard_normal((n, model.nq))


def evaluate(model: RobotModel, spec: RegressorSpec, q, qd, qdd) -> np.ndarray:
    """The regressor rows for a batch of states: (B, rows, 10L)."""
    if spec.kind == "torque":
        return dyn.torque_regressor(model, np.atleast_2d(q), np.atleast_2d(qd), np.atleast_2d(qdd), spec.base)
    if spec.kind == "base-wrench":
        W = dyn.base_wrench_regressor(
            model, np.atleast_2d(q), np.atleast_2d(qd), np.atleast_2d(qdd), spec.base
        )
        if spec.moment_z:
            W = moments_about(W, spec.moment_z)
        if spec.rows:
            W = W[:, [WRENCH_ROWS.index(r) for r in spec.rows], :]
        return W
    return dyn.subtree_wrench_regressor(
        model, np.atleast_2d(q), np.atleast_2d(qd), np.atleast_2d(qdd), spec.frame, spec.base
    )


def moments_about(W: np.ndarray, z: float) -> np.ndarray:
    """Wrench rows (…, 6, p) about the base origin → the same wrench about the point (0, 0, z) of the base frame."""
    out = np.array(W, dtype=float, copy=True)
    out[..., 3, :] += z * W[..., 1, :]
    out[..., 4, :] -= z * W[..., 0, :]
    return out


def zero_set(model: RobotModel, patterns: list[str]) -> list[int]:
    """Indices of the standard parameters matching glob patterns like 'Ixy@hip_*' or 'mcz@hip_?_x'."""
    names = dyn.standard_names(model)
    out = set()
    for pat in patterns:
        hits = [i for i, n in enumerate(names) if fnmatch.fnmatchcase(n, pat)]
        if not hits:
            raise DataError(f"simplified-model pattern {pat!r} matches no standard parameter")
        out.update(hits)
    return sorted(out)


@dataclass
class DynamicBase:
    """Base parameters ϑ = K φ of one regressor; the regressor in base form is Y[:, independent] (up to β)."""

    spec: RegressorSpec
    names: list[str]  # standard parameter names (10 per link)
    independent: list[int]
    beta: np.ndarray  # rank × len(dependent)
    dependent: list[int]
    vanishing: list[int]  # standard parameters that never enter this regressor
    assumed_zero: list[int] = field(default_factory=list)

    @property
    def rank(self) -> int:
        return len(self.independent)

    @property
    def symbols(self) -> list[str]:
        return [f"ϑ{i + 1}" for i in range(self.rank)]

    def combination_matrix(self) -> np.ndarray:
        """K (rank × 10L) with ϑ = K φ."""
        K = np.zeros((self.rank, len(self.names)))
        for a, i in enumerate(self.independent):
            K[a, i] = 1.0
            for b, d in enumerate(self.dependent):
                K[a, d] += self.beta[a, b]
        return K

    def values(self, phi: np.ndarray) -> np.ndarray:
        return self.combination_matrix() @ phi

    def reduce(self, Y: np.ndarray) -> np.ndarray:
        """Base regressor Y_b with Y φ = Y_b ϑ (for φ with the assumed-zero parameters at zero)."""
        return Y[..., self.independent]

    def formula(self, a: int, digits: int = 4) -> str:
        """ϑ_a as text, e.g. 'Izz@foot_r + 0.0169·m@ankle_r − 0.13·mcz@ankle_r'."""
        parts = [self.names[self.independent[a]]]
        for b, d in enumerate(self.dependent):
            c = self.beta[a, b]
            if abs(c) < 10 ** (-digits - 2):
                continue
            mag = f"{abs(c):.{digits}g}"
            parts.append(
                ("− " if c < 0 else "+ ") + (self.names[d] if mag == "1" else f"{mag}·{self.names[d]}")
            )
        return " ".join(parts)


def formula_terms(formula: str) -> dict[str, float]:
    """{standard parameter: coefficient} of a `DynamicBase.formula` text ('Izz@a + 0.0169·m@b − mcz@c')."""
    terms: dict[str, float] = {}
    sign, text = 1.0, formula.strip()
    for part in re.split(r"\s+([+−])\s+", text):
        if part in ("+", "−"):
            sign = 1.0 if part == "+" else -1.0
            continue
        mag, dot, name = part.partition("·")
        coef, name = (float(mag), name) if dot else (1.0, mag)
        terms[name] = terms.get(name, 0.0) + sign * coef
    return terms


def same_formula(a: str, b: str, rel: float = 1e-3, floor: float = 1e-5) -> bool:
    """Whether two formula texts name the same combination: the same terms, coefficients within `rel` (their
    printed digits and order follow the machine's floating point: a result written with one CPU's BLAS kernels
    printed 0.3923·m@wrist_1_link where another prints 0.3922, and listed the terms in another order)."""
    try:
        ta, tb = formula_terms(a), formula_terms(b)
    except ValueError:
        return False
    return all(
        abs(ta.get(k, 0.0) - tb.get(k, 0.0)) <= rel * max(abs(ta.get(k, 0.0)), abs(tb.get(k, 0.0))) + floor
        for k in set(ta) | set(tb)
    )


def derive_dynamic_base(
    model: RobotModel,
    spec: RegressorSpec,
    samples: int = 0,
    seed: int = 0,
    assumed_zero: tuple[int, ...] = (),
    motion: str = "free",
    ordered: bool = False,
) -> DynamicBase:
    """Numerical base parameters of a regressor over random states of a motion class (see robots.motion_class);
    `ordered` as `base_from_samples`."""
    from robots.motion_class import sample_states  # noqa: PLC0415 (motion classes build on this module)

    names = dyn.standard_names(model)
    n = samples or max(40, 3 * len(names) // max(1, model.nq))
    base = spec.base if spec.kind == "base-wrench" else None
    q, qd, qdd = sample_states(model, motion, n, np.random.default_rng(seed), base)
    return base_from_samples(model, spec, q, qd, qdd, assumed_zero, ordered)


def base_from_samples(
    model: RobotModel,
    spec: RegressorSpec,
    q,
    qd,
    qdd,
    assumed_zero: tuple[int, ...] = (),
    ordered: bool = False,
) -> DynamicBase:
    """Base parameters of a regressor over given states (e.g. those one experiment design can reach).
    `ordered`: independent columns chosen in standard-parameter order (`com_base.ordered_base`), so that nearby
    state sets give the same base parameters; else by pivoted QR."""
    names = dyn.standard_names(model)
    Y = evaluate(model, spec, q, qd, qdd).reshape(-1, len(names))
    keep = [i for i in range(len(names)) if i not in set(assumed_zero)]
    colnorm = np.linalg.norm(Y, axis=0)
    vanish = [i for i in keep if colnorm[i] <= 1e-10 * max(colnorm.max(), 1e-300)]
    live = [i for i in keep if i not in vanish]
    nb = (ordered_base if ordered else numeric_base)(Y[:, live], [names[i] for i in live])
    ind = [live[i] for i in nb.independent]
    dep = [live[i] for i in nb.dependent] + vanish
    beta = np.hstack([nb.beta, np.zeros((nb.rank, len(vanish)))])
    order = np.argsort(ind)  # present the base parameters in standard-parameter order
    return DynamicBase(spec, names, [ind[i] for i in order], beta[order], dep, vanish, list(assumed_zero))


@per_model
def cached_dynamic_base(
    model: RobotModel,
    spec: RegressorSpec,
    simplified: bool = False,
    motion: str = "free",
    ordered: bool = False,
) -> DynamicBase:
    """`derive_dynamic_base` with the robot description's simplified model (if asked), cached on the model."""
    zero: tuple[int, ...] = ()
    if simplified:
        pats = model.simplified_dynamic_zero
        if not pats:
            raise DataError(
                f"robot {model.name!r} describes no simplified dynamic model ([simplified] dynamic_zero)"
            )
        zero = tuple(zero_set(model, list(pats)))
    return derive_dynamic_base(model, spec, assumed_zero=zero, motion=motion, ordered=ordered)
