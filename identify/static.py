"""Static CoM identification from centre-of-pressure data (spec tulip-com.md §5).

y = H ϑ_b with y the measured CoPs and H the x/y rows of R_b(q) over all postures. Ordinary or weighted
least squares with the textbook statistics: σ̂, standard errors, relative standard errors (15 % rule),
correlations, per-posture CoP residual norms, and comparison against a reference parameter set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from design.replicates import find_replicates
from formats.errors import DataError, IdentifiabilityError
from formats.plan import Posture
from formats.static_recording import StaticRecording
from formats.static_result import result_document
from formats.units import GRAVITY, LENGTH_UNITS
from identify.recording_checks import limits_problem, support_corners, support_margins
from robots.com_base import BaseModel, rank_report
from robots.com_variants import CoMVariant, base_model, variant
from robots.stance import flat_residual
from robots.tree import ParameterSet, RobotModel

WELL_IDENTIFIED_PCT = 15.0


@dataclass
class StaticFit:
    """Estimates and statistics of one static identification (lengths in m)."""

    model_variant: str
    base: str
    symbols: list[str]  # all base parameters, in order
    estimated: list[int]  # indices estimated
    theta: np.ndarray  # all base parameters: estimates where estimated, fixed values elsewhere
    se: np.ndarray  # standard errors (nan for fixed)
    rel_se_pct: np.ndarray
    well_identified: np.ndarray
    sigma: float  # residual standard deviation σ̂ (m), of the CoP residuals as they are (unweighted)
    dof: int
    cov: np.ndarray  # covariance of the estimated parameters (m²)
    corr: np.ndarray
    top_correlations: list[tuple[str, str, float]]
    residuals: np.ndarray  # (m, 2) measured − predicted CoP (m)
    residual_norm_mean: float
    residual_norm_max: float
    kappa: float  # condition number of the regressor of the estimated columns
    n_postures: int
    weighted: bool
    fixed_reason: dict[int, str] = field(default_factory=dict)
    reference: dict = field(default_factory=dict)
    # weighted: the residuals' scale in units of the recording's cop_sd (1: the spreads explain them); nan otherwise
    sigma_scale: float = float("nan")
    posture_ids: np.ndarray | None = None  # the recording's posture ids, row by row (default: row numbers)
    guess_name: str = ""  # the parameter set the unidentifiable parameters are fixed at
    warnings: list[str] = field(default_factory=list)

    @property
    def ids(self) -> np.ndarray:
        return np.arange(self.n_postures) if self.posture_ids is None else np.asarray(self.posture_ids)

    @property
    def worst_posture(self) -> int:
        """The posture id with the largest CoP residual norm."""
        return int(self.ids[int(np.argmax(np.linalg.norm(self.residuals, axis=1)))])


def require_soles(model: RobotModel, where: str = "") -> None:
    """Static CoM identification needs a robot standing on two soles (its description's [bases])."""
    if len(model.bases) < 2:
        raise DataError(
            f"{where}{model.name!r} names no bases (soles): static identification from CoPs needs a robot "
            "standing on two soles (a biped description)"
        )


def check_double_support(
    model: RobotModel,
    q: np.ndarray,
    base: str,
    z_tol: float = 0.005,
    tilt_tol_deg: float = 2.0,
    ids: np.ndarray | None = None,
):
    """Refuse postures whose other foot is not flat on the ground: the CoP model assumes double support."""
    ids = np.arange(len(q)) if ids is None else np.asarray(ids)
    res = flat_residual(model, q, "sim", base)
    tilt = np.degrees(np.arcsin(np.clip(np.linalg.norm(res[:, 1:], axis=1), 0, 1)))
    bad = np.flatnonzero((np.abs(res[:, 0]) > z_tol) | (tilt > tilt_tol_deg))
    if bad.size:
        shown = ", ".join(f"#{ids[i]} (z {res[i, 0] * 1000:+.1f} mm, tilt {tilt[i]:.1f}°)" for i in bad[:5])
        more = f" and {bad.size - 5} more" if bad.size > 5 else ""
        raise DataError(
            f"{bad.size} posture(s) are not in double support (other foot off the ground or tilted): {shown}{more}; "
            f"check the base foot ('{base}') and the joint order"
        )


def cops_outside(
    model: RobotModel,
    q: np.ndarray,
    cop: np.ndarray,
    base: str,
    geometry: str | ParameterSet,
    ids: np.ndarray,
    tol: np.ndarray,
) -> str:
    """CoPs outside the support polygon by more than `tol` (m, per posture), named (empty if none): no standing
    robot presses there, so the base foot, the CoP's axes or units, or the row is wrong (the polygon and margins
    dynamic recordings are checked with too: `support_margins`)."""
    margins = support_margins(model, q, cop, base, geometry)
    bad = np.flatnonzero(margins < -tol)
    if not bad.size:
        return ""
    order = bad[np.argsort(margins[bad])]
    shown = ", ".join(f"posture {ids[i]} ({-margins[i] * 1000:.1f} mm outside)" for i in order[:5])
    more = f" and {bad.size - 5} more" if bad.size > 5 else ""
    return (
        f"{bad.size} of {len(q)} CoPs lie outside the support polygon of both soles, where no standing robot "
        f"presses: {shown}{more}; check the base foot ('{base}'), the CoP's axes (x forward, y left) and units, "
        "or remove those rows"
    )


def describe_repeats(q: np.ndarray, ids: np.ndarray, need: int) -> str:
    """Postures that repeat an earlier one (joint angles within REPEAT_TOL), named with the distinct count when
    fewer than `need` remain (empty if none): said when the postures cannot identify the parameters."""
    reps = find_replicates(
        [Posture(int(i), 0, qi, 0.0, 0.0, (0.0, 0.0), 0.0) for i, qi in zip(ids, q, strict=True)]
    )
    said = [f"posture {i} repeats posture {j}" for i, (j, _) in reps.repeats.items()]
    if not said:
        return ""
    text = f"{', '.join(said[:5])}{' …' if len(said) > 5 else ''}"
    if reps.distinct < need:
        return f"{text}: {reps.distinct} distinct postures, {need} needed"
    return f"{text}: they add no equations"


def copied_rows(q: np.ndarray, cop: np.ndarray, ids: np.ndarray) -> list[tuple[int, int, int]]:
    """Rows whose joint angles and CoP equal an earlier row's to the last digit: (row, earlier row's id, row's id)."""
    first: dict[bytes, int] = {}
    copies = []
    for i, row in enumerate(np.hstack([q, cop]) + 0.0):  # + 0.0: -0.0 and 0.0 alike
        j = first.setdefault(row.tobytes(), i)
        if j != i:
            copies.append((i, int(ids[j]), int(ids[i])))
    return copies


def check_copies(
    q: np.ndarray, cop: np.ndarray, sd_mean: np.ndarray | None, ids: np.ndarray, source: str
) -> str:
    """A row copied under a new id adds no measurement but counts in the dof, so σ̂ and the SEs shrink: refused
    where its CoP spread says the samples were noisy (noisy averages never agree to the last digit), otherwise a
    warning (a noiseless twin does repeat exactly); empty without copies."""
    copies = copied_rows(q, cop, ids)
    if not copies:
        return ""
    said = ", ".join(f"posture {c} repeats posture {o}" for _, o, c in copies[:5]) + (
        " …" if len(copies) > 5 else ""
    )
    if sd_mean is not None and any(np.nanmax(np.r_[sd_mean[i], 0.0]) > 0 for i, _, _ in copies):
        raise DataError(
            f"{source}: {said} to the last digit (joint angles and CoP), though their CoP samples spread: a row "
            "copied under a new id, which adds no measurement but would shrink σ̂ and the standard errors; remove it"
        )
    return (
        f"{said} to the last digit (joint angles and CoP): a copied row adds no measurement but counts in the dof "
        "(σ̂ and the SEs shrink) — remove it unless the CoPs are noiseless"
    )


# force_n within this fraction of the robot's mass (kg) is kilograms, not newtons
FORCE_KG_TOL = 0.3


def check_force(force: np.ndarray | None, mass_kg: float, source: str) -> None:
    """force_n is informational (the fit uses the CoPs), but a column of kilograms says the file's units are
    not what it declares: refused, naming the unit."""
    if force is None or not np.any(np.isfinite(force)):
        return
    mean = float(np.nanmean(force))
    if abs(mean / mass_kg - 1.0) < FORCE_KG_TOL:
        raise DataError(
            f"{source}: force_n averages {mean:.3g}, the robot's mass in kg ({mass_kg:.3g} kg in its description, "
            f"a weight of {mass_kg * GRAVITY:.0f} N): these look like kg; write force_n in N"
        )


def check_spread_extent(
    model: RobotModel, q: np.ndarray, cop_sd: np.ndarray | None, base: str, geometry, ids: np.ndarray, unit: str,
    source: str,
) -> None:  # fmt: skip
    """No CoP spreads (SD) more than half the support polygon's extent along its axis (the most any distribution on
    that interval can): a larger cop_sd is in another unit than the file declares (`unit`), refused naming it."""
    if cop_sd is None:
        return
    half = np.ptp(support_corners(model, q, base, geometry), axis=1) / 2  # (K, 2) m
    bad = np.flatnonzero(np.any(cop_sd > half, axis=1))
    if bad.size:
        k = bad[0]
        a = int(np.nanargmax(cop_sd[k] - half[k]))
        hint = "these look like mm" if unit == "m" else "check their unit"
        raise DataError(
            f"{source}: cop_sd_{'xy'[a]} {cop_sd[k, a] / LENGTH_UNITS[unit]:g} {unit} at posture {ids[k]} "
            f"({bad.size} postures in all) exceeds half the soles' extent along {'xy'[a]} ({half[k, a] * 1000:.0f} "
            f"mm), the most a CoP can spread: {hint}; write cop_sd in the file's length unit ({unit}), as cop_x/cop_y"
        )


def regressor_xy(bm: BaseModel, q: np.ndarray) -> np.ndarray:
    """Stacked x/y rows of R_b over postures: (2m, n), row 2i = x of posture i, 2i+1 = y."""
    return bm.regressor(np.atleast_2d(q))[:, :2, :].reshape(-1, bm.n)


def condition_number(H: np.ndarray) -> float:
    """True 2-norm condition number σ_max/σ_min."""
    s = np.linalg.svd(H, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


# a measured CoP this far outside the support polygon (m), or this many SDs of its averaged samples, is no noise
OUTSIDE_TOL_M = 0.005
OUTSIDE_SDS = 4.0


def mean_spread(cop_sd: np.ndarray | None, samples: np.ndarray | None, ids: np.ndarray) -> np.ndarray | None:
    """The SD (m) of each posture's averaged CoP: the recording's per-sample spread `cop_sd` over √samples (one
    sample where `samples` is absent or blank); NaN where a spread is blank."""
    if cop_sd is None:
        return None
    n = np.ones(len(ids)) if samples is None else np.where(np.isfinite(samples), samples, 1.0)
    n = np.where(n >= 1, n, np.nan)  # fewer than one sample: no spread known
    return np.asarray(cop_sd, dtype=float) / np.sqrt(n)[:, None]


def weights(sd_mean: np.ndarray | None, ids: np.ndarray) -> np.ndarray:
    """Row weights 1/SD of the averaged CoP, x and y of each posture; blank or zero spreads are named."""
    if sd_mean is None:
        raise DataError(
            "weighted least squares needs per-posture CoP spreads: the recording has no cop_sd_x, cop_sd_y values"
        )
    bad = np.flatnonzero(np.any(~np.isfinite(sd_mean) | (sd_mean <= 0), axis=1))
    if bad.size:
        shown = ", ".join(str(ids[i]) for i in bad[:5]) + (
            f" and {bad.size - 5} more" if bad.size > 5 else ""
        )
        raise DataError(
            f"weighted least squares: cop_sd blank or zero (or samples < 1) at posture(s) {shown}"
        )
    return 1.0 / sd_mean.reshape(-1)


def _spread_issue(issue: str | None, weighted: bool) -> str | None:
    """A recording's implausible cop_sd (`StaticRecording.spread_issue`): refused when it would weight the fit,
    else the warning that it is not used."""
    if issue and weighted:
        raise DataError(issue)
    return f"{issue} (not used: the fit is unweighted)" if issue else None


def dof_warning(dof: int, p: int) -> str:
    """A fit with at most one spare equation has a σ̂ (and so standard errors) that means little."""
    if dof <= 1:
        return f"only {dof} spare equation(s) for {p} parameters: σ̂ and the standard errors rest on almost nothing"
    return ""


class StaticCoMEstimator:
    """Estimate CoM base parameters from static postures and CoPs (configure, `fit`, results in `result_`)."""

    def __init__(
        self,
        model: RobotModel,
        base: str = "right",
        variant_name: str = "full",
        guess: str | ParameterSet = "sim",
        reference: str | ParameterSet | None = None,
        weighted: bool = False,
    ):
        self.model = model
        self.base = base
        self.variant_name = variant_name
        self.guess = guess
        self.reference = reference
        self.weighted = weighted
        self.result_: StaticFit | None = None

    @property
    def base_model_(self) -> BaseModel:
        return base_model(self.model, self.base)

    @property
    def variant_(self) -> CoMVariant:
        return variant(self.model, self.base, self.variant_name)

    def fit(
        self,
        q: np.ndarray | StaticRecording,
        cop: np.ndarray | None = None,
        cop_sd: np.ndarray | None = None,
        source: str = "postures",
    ):
        """Fit to postures q (m, nq) and CoPs (m, 2), or to a `StaticRecording`; `source` (its file) begins the
        errors that name a posture's fault, as a dynamic recording's begin with its path."""
        if isinstance(q, StaticRecording):
            rec = q
            if rec.base != self.base:
                raise DataError(
                    f"recording uses the {rec.base!r} foot as base, the estimator the {self.base!r} foot"
                )
            if rec.joint_names != self.model.joint_names:
                raise DataError(f"recording joints {rec.joint_names} do not match model {self.model.name!r}")
            q, cop, cop_sd, samples, ids = rec.q, rec.cop, rec.cop_sd, rec.samples, rec.posture
            spread_issue = _spread_issue(rec.spread_issue, self.weighted)
            degrees = rec.meta.get("angle_unit") == "deg"
            force, unit = rec.force, rec.meta.get("length_unit", "m")
        else:
            samples, ids, degrees, force, unit, spread_issue = None, None, False, None, "m", None
        q = self.model.check_q(np.atleast_2d(q))
        if problem := limits_problem(self.model, q, "", degrees):  # the slack dynamic recordings are allowed
            raise DataError(f"{source}: {problem}")
        ids = np.arange(q.shape[0]) if ids is None else np.asarray(ids)
        cop = np.asarray(cop, dtype=float)
        if cop.shape != (q.shape[0], 2):
            raise DataError(f"expected CoP of shape ({q.shape[0]}, 2), got {cop.shape}")
        if not np.all(np.isfinite(cop)):
            raise DataError("CoP data contain NaN or infinite values")
        check_double_support(self.model, q, self.base, ids=ids)
        check_force(force, self.model.parameter_set(self.guess).total_mass, source)
        if cop_sd is not None:
            cop_sd = np.asarray(cop_sd, dtype=float)
            check_spread_extent(self.model, q, cop_sd, self.base, self.guess, ids, unit, source)
        bm, var = self.base_model_, self.variant_
        est = list(var.estimated)
        p, m = len(est), q.shape[0]
        need = -(-p // 2)
        if m < need:
            raise IdentifiabilityError(
                f"{m} postures give {2 * m} equations for {p} parameters: need at least {need} postures"
            )
        sd_mean = mean_spread(cop_sd, samples, ids)
        copies = check_copies(q, cop, sd_mean, ids, source)
        tol = np.maximum(
            OUTSIDE_TOL_M,
            OUTSIDE_SDS * np.nan_to_num(np.max(sd_mean, axis=1) if sd_mean is not None else 0.0),
        )
        outside = cops_outside(self.model, q, cop, self.base, self.guess, ids, np.broadcast_to(tol, (m,)))
        H_all = regressor_xy(bm, q)
        guess_theta = bm.values(self.guess)
        fixed = [g for g in range(bm.n) if g not in est]
        theta_fixed = np.zeros(bm.n)
        for g in fixed:  # unidentifiable: guessed values; simplified: zero by assumption
            theta_fixed[g] = guess_theta[g] if "not identifiable" in var.reason[g] else 0.0
        y = cop.reshape(-1) - H_all @ theta_fixed
        H = H_all[:, est]
        w = np.ones(2 * m)
        if self.weighted:
            w = weights(sd_mean, ids)
        Hw, yw = H * w[:, None], y * w
        rank, dep = rank_report(Hw, [bm.symbols[g] for g in est])
        if rank < p:
            repeats = describe_repeats(q, ids, need)  # only this message needs it
            names = ", ".join(f"{bm.symbols[est[j]]} ({bm.params[est[j]].column})" for j in dep)
            raise IdentifiabilityError(
                (f"{repeats}; " if repeats else "")
                + f"the postures cannot identify {len(dep)} parameter(s): "
                f"{names} — rank {rank} of {p}; add postures that move these columns or use --model simplified"
            )
        Q, R = sla.qr(Hw, mode="economic")
        theta_est = sla.solve_triangular(R, Q.T @ yw)
        e_w = yw - Hw @ theta_est
        dof = 2 * m - p
        sigma2 = float(e_w @ e_w / dof) if dof > 0 else float("nan")
        Rinv = sla.solve_triangular(R, np.eye(p))
        C = Rinv @ Rinv.T
        cov = sigma2 * C
        se = np.sqrt(np.diag(cov))
        d = np.sqrt(np.diag(C))
        corr = C / np.outer(d, d)
        theta = theta_fixed.copy()
        theta[est] = theta_est
        resid = (cop.reshape(-1) - H_all @ theta).reshape(m, 2)
        norms = np.linalg.norm(resid, axis=1)
        se_all = np.full(bm.n, np.nan)
        se_all[est] = se
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = 100.0 * se_all / np.abs(theta)
        pairs = []
        for i in range(p):
            for j in range(i + 1, p):
                pairs.append((bm.symbols[est[i]], bm.symbols[est[j]], float(corr[i, j])))
        pairs.sort(key=lambda t: -abs(t[2]))
        self.result_ = StaticFit(
            model_variant=self.variant_name,
            base=self.base,
            symbols=bm.symbols,
            estimated=est,
            theta=theta,
            se=se_all,
            rel_se_pct=rel,
            well_identified=np.where(np.isfinite(rel), rel < WELL_IDENTIFIED_PCT, False),
            sigma=float(np.sqrt(np.sum(resid**2) / dof)) if dof > 0 else float("nan"),
            dof=dof,
            cov=cov,
            corr=corr,
            top_correlations=pairs[:5],
            residuals=resid,
            residual_norm_mean=float(norms.mean()),
            residual_norm_max=float(norms.max()),
            kappa=condition_number(H),
            n_postures=m,
            weighted=self.weighted,
            fixed_reason=dict(var.reason),
            sigma_scale=float(np.sqrt(sigma2)) if self.weighted and np.isfinite(sigma2) else float("nan"),
            posture_ids=ids,
            guess_name=self.model.parameter_set(self.guess).name,
            warnings=[w for w in (spread_issue, copies, outside, dof_warning(dof, p)) if w],
        )
        if self.reference is not None:
            self.result_.reference = self.compare(self.reference, q, cop)
        return self

    def predict_cop(self, q: np.ndarray, theta: np.ndarray | None = None) -> np.ndarray:
        """Predicted CoP (…, 2) for postures q with the fitted (or given) base parameters."""
        if theta is None:
            if self.result_ is None:
                raise DataError("the estimator has not been fitted")
            theta = self.result_.theta
        R = self.base_model_.regressor(self.model.check_q(q))
        return (R @ theta)[..., :2]

    def compare(self, reference: str | ParameterSet, q: np.ndarray, cop: np.ndarray) -> dict:
        """CoP error norms (mean/max, m) of a reference parameter set on the same data, and its base values."""
        ps = self.model.parameter_set(reference)
        theta_ref = self.base_model_.values(ps)
        err = np.linalg.norm(cop - self.predict_cop(q, theta_ref), axis=1)
        return {
            "name": ps.name,
            "theta": theta_ref,
            "cop_error_mean": float(err.mean()),
            "cop_error_max": float(err.max()),
        }


def fit_to_json(fit: StaticFit, bm: BaseModel, recording: str | None = None) -> dict:
    """The result file content (JSON-serialisable; lengths in m)."""
    params = []
    for g, bp in enumerate(bm.params):
        entry = {
            "symbol": bp.symbol,
            "column": bp.column,
            "formula": bm.formula(g),
            "estimated": g in fit.estimated,
            "value_m": float(fit.theta[g]),
        }
        if g in fit.estimated:
            entry.update(
                se_m=float(fit.se[g]),
                rel_se_pct=float(fit.rel_se_pct[g]) if np.isfinite(fit.rel_se_pct[g]) else None,
                well_identified=bool(fit.well_identified[g]),
            )
        else:
            entry["fixed_because"] = fit.fixed_reason.get(g, "")
        if fit.reference:
            entry["reference_m"] = float(fit.reference["theta"][g])
        params.append(entry)
    est_syms = [fit.symbols[g] for g in fit.estimated]
    body = {
        "model": fit.model_variant,
        "recording": recording,
        "n_postures": fit.n_postures,
        "weighted": fit.weighted,
        "guess": fit.guess_name,
        "fixed": {
            bm.params[g].symbol: {"value_m": float(fit.theta[g]), "because": fit.fixed_reason.get(g, "")}
            for g in range(bm.n)
            if g not in fit.estimated
        },  # fmt: skip
        "warnings": fit.warnings,
        "units": {"length": "m"},
        "parameters": params,
        "sigma_m": fit.sigma,
        **({"sigma_scale": fit.sigma_scale} if fit.weighted else {}),
        "dof": fit.dof,
        "kappa": fit.kappa,
        "cop_residual_norm_mean_m": fit.residual_norm_mean,
        "cop_residual_norm_max_m": fit.residual_norm_max,
        "cop_residual_norm_max_posture": fit.worst_posture,
        "residuals_m": fit.residuals.tolist(),
        "residual_postures": [int(i) for i in fit.ids],
        "correlation": {"symbols": est_syms, "matrix": fit.corr.tolist()},
        "top_correlations": [{"a": a, "b": b, "rho": r} for a, b, r in fit.top_correlations],
    }
    out = result_document(bm.model.name, fit.base, body)
    if fit.reference:
        out["reference"] = {
            "name": fit.reference["name"],
            "cop_error_mean_m": fit.reference["cop_error_mean"],
            "cop_error_max_m": fit.reference["cop_error_max"],
        }
    return out
