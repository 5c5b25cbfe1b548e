"""Uncertainty-aware CoP margin: the CoP is linear in ϑ_b, so its worst case over an ellipsoid is closed form.

For a hull edge with inward unit normal n through vertex a, and ϑ_b ∈ {ϑ₀ + L u : ‖u‖ ≤ 1} (Σ = L Lᵀ),
    min_u n·(R_xy(q)(ϑ₀ + L u) − a) = n·(CoP₀ − a) − ‖Lᵀ R_xyᵀ n‖ = n·(CoP₀ − a) − √(nᵀ R_xy Σ R_xyᵀ n).
Either a ball (L = r·I around the design parameter set) or the covariance of a previous identification
(Σ = K²·cov, centred on its estimate); the optimiser uses the same expression symbolically.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from design.criteria import base_model
from formats.errors import DataError
from formats.static_result import load_static_result
from robots.plan_rules import CopRule, rule_balance, rule_margin, settings_rule
from robots.stance import other_pose
from robots.stance_spec import design_params, resolve_base
from robots.tree import RobotModel


@dataclass(frozen=True)
class Ellipsoid:
    """ϑ_b uncertainty from a static identification result: centre ϑ₀ (m) and covariance (m², n × n)."""

    source: str
    sigma: float  # the ellipsoid is {ϑ : (ϑ − ϑ₀)ᵀ cov⁻¹ (ϑ − ϑ₀) ≤ sigma²}
    symbols: tuple[str, ...]
    theta_m: tuple[float, ...]
    cov_m2: tuple[tuple[float, ...], ...]

    @property
    def sigma_matrix(self) -> np.ndarray:
        """Σ = K²·cov (m²): the shape matrix of the ellipsoid."""
        return self.sigma**2 * np.array(self.cov_m2)

    @classmethod
    def from_dict(cls, d: dict) -> Ellipsoid:
        return cls(
            str(d["source"]),
            float(d["sigma"]),
            tuple(d["symbols"]),
            tuple(float(v) for v in d["theta_m"]),
            tuple(tuple(float(v) for v in row) for row in d["cov_m2"]),
        )


@dataclass(frozen=True)
class CopSpec:
    """What the optimiser's CoP uses (hashable, for cached CasADi functions): centre ϑ₀ (None = the design
    parameter set) and the robust term scale·√(nᵀ R S Rᵀ n) with S = Σ/scale² (None = identity)."""

    theta: tuple[float, ...] | None = None
    scale: float = 0.0
    shape: tuple[tuple[float, ...], ...] | None = None


def load_ellipsoid(path: str, model: RobotModel, base: str, sigma: float) -> Ellipsoid:
    """Read a "poise static result" JSON: ϑ₀ = `value_m`, cov = diag(se)·corr·diag(se), 0 where not estimated."""
    if not sigma > 0 or not np.isfinite(sigma):
        raise DataError(f"--uncertainty-sigma must be a positive number, got {sigma}")
    res = load_static_result(path)
    if res.robot != model.name or res.base != base:
        raise DataError(
            f"{path}: result is for robot {res.robot!r}, base {res.base!r}; "
            f"the plan needs {model.name!r}, base {base!r}"
        )
    symbols = base_model(model, base).symbols
    missing = [s for s in symbols if s not in res.values]
    if missing:
        raise DataError(f"{path}: malformed static result (no value for {', '.join(missing)})")
    theta = np.array([res.values[s] for s in symbols])
    cov = res.covariance(symbols)
    return Ellipsoid(str(path), float(sigma), tuple(symbols), tuple(theta), tuple(tuple(row) for row in cov))


def cop_spec(model: RobotModel, base: str, radius: float, ellipsoid: Ellipsoid | None) -> CopSpec | None:
    """The optimiser's CoP model for a ball of `radius` (m) or an ellipsoid (None: nominal, no robust term)."""
    if ellipsoid is not None:
        S = ellipsoid.sigma_matrix
        scale = float(np.sqrt(np.max(np.diag(S)))) if S.size else 0.0
        shape = tuple(tuple(row) for row in S / scale**2) if scale > 0 else None
        return CopSpec(ellipsoid.theta_m, scale, shape)
    return CopSpec(None, float(radius), None) if radius > 0 else None


def left_pose(
    model: RobotModel, q: np.ndarray, params: str | None = None, base: str | None = None
) -> np.ndarray:
    """Pose (x, y, psi) of the other sole on the ground (m, m, rad): `robots.stance.other_pose` (old name)."""
    return other_pose(model, q, params, base)


def design_rule(model: RobotModel, base: str, radius: float, ellipsoid: Ellipsoid | None) -> CopRule:
    """The CoP rule of a design's uncertainty (ball `radius` m or `ellipsoid`), decided as for the plan it
    writes (`robots.plan_rules.settings_rule`, which `plan check` and the executor read back)."""
    ell = None if ellipsoid is None else asdict(ellipsoid)
    return settings_rule(model, base, {"uncertainty": radius, "ellipsoid": ell})


def robust_margin(
    model: RobotModel,
    q: np.ndarray,
    radius: float,
    params: str | None = None,
    base: str | None = None,
    ellipsoid: Ellipsoid | None = None,
) -> float:
    """Smallest CoP margin (m) over the ball of `radius` (m) around the design values, or the ellipsoid
    (`robots.plan_rules.rule_margin`, the worst case `plan check` recomputes)."""
    params, base = params or design_params(model), resolve_base(model, base)
    return rule_margin(model, base, params, q, design_rule(model, base, radius, ellipsoid))


def nominal_cop(model: RobotModel, q: np.ndarray, params: str, base: str, ellipsoid: Ellipsoid | None):
    """Predicted CoP (m) and its shapely margin (m): the ellipsoid's centre if given, else the parameter set
    (`robots.plan_rules.rule_balance`)."""
    return rule_balance(model, base, params, q, design_rule(model, base, 0.0, ellipsoid))
