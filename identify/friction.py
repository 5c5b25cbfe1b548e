"""Joint friction identification (spec actuation.md §1): Coulomb + viscous (symmetric, asymmetric) and Stribeck.

Sign convention (poise's one, shared with robots/actuation.py and the F/T + PWM regression): f(ω) is the torque
the drive must *add* to overcome friction, so f has the sign of ω (f > 0 for ω > 0) and every parameter
(Kc, Kv, σs±, the asymmetric c±, v±) is ≥ 0. The drive's model (thesis 2.32) is τ_j = K_pwm PWM − I ω̇ − f(ω)
+ τ_s, measured as y = τ_j + I ω̇ = K_pwm PWM − f(ω) + τ_s; with the motor off, f = −(τ_j + I ω̇). Units N·m,
N·m·s/rad, rad/s. The asymmetric model is robots.actuation.friction_rows: f = c⁺[ω>0] − c⁻[ω<0] + v⁺ω⁺ + v⁻ω⁻.

Stribeck, self-consistent form with a user-chosen velocity scale v_s (the printed eqs. 2.39–2.49 lack one):
  ω > 0: f = Kc + Kv ω + (σs⁺ − Kc) e^{−ω/v_s},   ω < 0: f = −[Kc − Kv ω + (σs⁻ − Kc) e^{ω/v_s}],
linear in (Kc, Kv, σs⁺, σs⁻) once v_s is fixed. The optional zero-slope equality σs⁺ − Kc = Kv v_s makes the
curve flat at 0⁺ (boundary-lubrication plateau); it is imposed exactly (KKT system).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from formats.errors import DataError, IdentifiabilityError
from identify.differentiation import lowpass
from identify.drive_signals import Unfiltered
from identify.robust_se import corr_samples, fit_se, misfit_note, null_space
from robots.actuation import friction_rows

MODELS = ("coulomb-viscous", "asymmetric", "stribeck")
PARAMS = {
    "coulomb-viscous": ("Kc", "Kv"),
    "asymmetric": ("Kc+", "Kc-", "Kv+", "Kv-"),  # c⁺, c⁻, v⁺, v⁻ of robots.actuation.friction_rows
    "stribeck": ("Kc", "Kv", "sigma+", "sigma-"),
}
UNITS = {"Kc": "N·m", "Kv": "N·m·s/rad", "sigma": "N·m"}


def unit_of(name: str) -> str:
    """Unit of a friction parameter name."""
    return UNITS["Kv"] if name.startswith("Kv") else "N·m"


def friction_torque(model: str, params: dict[str, float], omega: np.ndarray, v_s: float | None = None):
    """f(ω), the torque the drive must add, of a fitted model (sign of ω, zero at ω = 0)."""
    X = regressor(model, np.asarray(omega, dtype=float), v_s)
    return X @ _signed(model, params)


def _signed(model: str, params: dict[str, float]) -> np.ndarray:
    return np.array([params[k] for k in PARAMS[model]])


def regressor(model: str, omega: np.ndarray, v_s: float | None = None) -> np.ndarray:
    """Columns X with f(ω) = X θ for θ = the parameters (all ≥ 0) of PARAMS[model]."""
    w = np.asarray(omega, dtype=float)
    pos, neg = (w > 0).astype(float), (w < 0).astype(float)
    if model == "coulomb-viscous":
        return np.column_stack([np.sign(w), w])  # eq. 2.35's Θ = [−Kc, −Kv] with the signs moved into y
    if model == "asymmetric":
        return friction_rows(w[:, None])[:, 0, :]  # [1⁺, −1⁻, ω⁺, ω⁻]: eqs. 2.37–2.38's u±, r± columns
    if model == "stribeck":
        if v_s is None or not v_s > 0:
            raise DataError("the Stribeck model needs a Stribeck velocity v_s > 0")
        e = np.exp(-np.abs(w) / v_s)
        return np.column_stack([np.sign(w) * (1 - e), w, pos * e, -neg * e])
    raise DataError(f"unknown friction model {model!r} (choose from {', '.join(MODELS)})")


@dataclass
class FrictionFit:
    """A fitted friction model: magnitudes, standard errors, conditioning and what was discarded."""

    model: str
    params: dict[str, float]
    se: dict[str, float]
    v_s: float | None
    zero_slope: bool
    n_used: int
    n_rejected: int
    rms: float  # N·m, residual
    cond: float  # of XᵀX
    vs_scan: list[tuple[float, float]] = field(default_factory=list)  # (v_s, rms) when v_s was searched
    extra: dict[str, float] = field(default_factory=dict)  # τ_s [N·m], k_pwm [N·m/%], inertia_extra [kg·m²]
    warnings: list[str] = field(default_factory=list)  # physically doubtful results, for the user
    se_method: str = "white residuals"  # how the SEs were found (identify.robust_se.fit_se)
    misfit: str | None = None  # note when the residuals show a systematic misfit
    n_below_vs: int | None = None  # used samples with |ω| < v_s: the data behind the Stribeck dip

    @property
    def tau_s(self) -> float | None:
        """Fitted constant torque (not part of f), if requested."""
        return self.extra.get("tau_s")

    def torque(self, omega: np.ndarray) -> np.ndarray:
        return friction_torque(self.model, self.params, omega, self.v_s)

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "params": self.params,
            "se": self.se,
            "units": {k: unit_of(k) for k in self.params},
            "v_s_rad_s": self.v_s,
            "zero_slope": self.zero_slope,
            "n_used": self.n_used,
            "n_rejected": self.n_rejected,
            "n_below_vs": self.n_below_vs,
            "rms_Nm": self.rms,
            "cond_XtX": self.cond,
            "se_method": self.se_method,
            "model_misfit": self.misfit is not None,
            "tau_s_Nm": self.tau_s,
            "k_pwm_Nm_per_pct": self.extra.get("k_pwm"),
            "inertia_extra_kg_m2": self.extra.get("inertia_extra"),
        }


def select_samples(
    omega: np.ndarray,
    omega_dot: np.ndarray,
    accel_max: float | None,
    speed_min: float = 0.0,
    margin: int = 0,
    exclude: np.ndarray | None = None,
) -> np.ndarray:
    """Mask of samples kept: |ω̇| ≤ accel_max (outliers at velocity reversals, where stick–slip and the
    differentiating filter disagree most) and |ω| > speed_min (sticking: friction undetermined), not in
    `exclude` (e.g. rows a recorder interpolated across a gap), each rejected stretch widened by `margin`
    samples on both sides (the filter smears a transition over its neighbours)."""
    bad = ~(np.isfinite(omega) & np.isfinite(omega_dot))
    if exclude is not None:
        bad |= np.asarray(exclude, dtype=bool)
    if accel_max is not None:
        bad |= np.abs(omega_dot) > accel_max
    bad |= np.abs(omega) <= speed_min
    if margin > 0:
        bad = np.convolve(bad.astype(float), np.ones(2 * margin + 1), mode="same") > 0
    return ~bad


def gated_lowpass(a: np.ndarray, moving: np.ndarray, filtered: tuple[float, float]) -> np.ndarray:
    """`a` (samples along axis 0) zeroed where the joint sticks (not `moving`: friction is whatever the applied
    torque is there, no model's) and then low-passed by `filtered` = (cut-off, rate) [Hz]: the measured torque
    and the model's columns both go through this, so that the two ring alike at reversals and stops."""
    cutoff, rate = filtered
    a = np.asarray(a, dtype=float)
    gate = moving.astype(float).reshape(-1, *([1] * (a.ndim - 1)))
    return lowpass((a * gate).reshape(len(a), -1), rate, cutoff).reshape(a.shape)


def filtered_friction(
    fit: FrictionFit, raw: Unfiltered, filtered: tuple[float, float], moving: np.ndarray
) -> np.ndarray:
    """f(ω) of `fit` on the nearly unfiltered ω of `raw` (identify.drive_signals.Unfiltered), gated and
    low-passed as the torque (`gated_lowpass`): what to subtract from that torque."""
    return gated_lowpass(fit.torque(raw.omega), moving, filtered)


def _check(*arrays: np.ndarray) -> int:
    n = len(arrays[0])
    for a in arrays:
        if a.ndim != 1 or len(a) != n:
            raise DataError("friction data: ω, ω̇, τ_j (and PWM) must be 1-D arrays of equal length")
        if not np.all(np.isfinite(a)):
            raise DataError("friction data: non-finite values")
    return n


def _solve(X: np.ndarray, y: np.ndarray, names: tuple[str, ...], C: np.ndarray | None = None):
    """Least squares, optionally with equality rows C θ = 0; (θ, se, rms, cond), se assuming white residuals
    (cheap: for the Stribeck v_s search; `identify.robust_se.fit_se` gives the reported ones)."""
    n, p = X.shape
    XtX = X.T @ X
    cond = float(np.linalg.cond(XtX))
    if not np.isfinite(cond) or cond > 1e12:
        dead = [names[k] for k in range(p) if np.allclose(X[:, k], 0)]
        hint = f" (no data for {', '.join(dead)})" if dead else " (the data do not excite every term)"
        raise IdentifiabilityError(f"friction regressor is rank deficient, cond(XᵀX) = {cond:.3g}{hint}")
    N = null_space(C, p)
    Xn = X @ N
    G = Xn.T @ Xn
    theta = N @ np.linalg.solve(G, Xn.T @ y)
    res = y - X @ theta
    s2 = float(res @ res) / max(n - N.shape[1], 1)
    cov = s2 * N @ np.linalg.inv(G) @ N.T
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    return theta, se, float(np.sqrt(np.mean(res**2))), cond


def fit_friction(
    omega: np.ndarray,
    omega_dot: np.ndarray,
    tau_j: np.ndarray,
    inertia: float,
    model: str = "stribeck",
    v_s: float | None = None,
    zero_slope: bool = False,
    accel_max: float | None = None,
    speed_min: float = 0.0,
    margin: int = 0,
    offset: bool = False,
    pwm: np.ndarray | None = None,
    fit_inertia: bool = False,
    exclude: np.ndarray | None = None,
    filtered: tuple[float, float] | None = None,
    q_span: float | None = None,
    raw: Unfiltered | None = None,
) -> FrictionFit:
    """Fit f from y = τ_j + I ω̇ = −f(ω) (motor off); v_s=None for the Stribeck model searches it (profile RSS).
    `offset` adds a constant τ_s (eq. 2.32's static term, e.g. an unzeroed torque sensor); `pwm` [%] adds the
    PWM column, fitting the whole identification model 2.32, y = K*_pwm PWM − f(ω) + τ_s, in one regression;
    `fit_inertia` adds a column −ω̇ for the inertia the given one lacks (ΔI, e.g. a servo's unknown rotor).
    `filtered`: (cut-off, sample rate) [Hz] of the zero-phase low-pass the signals went through — the SEs then
    model its correlated residuals and a runs test flags a misfit; without it, Newey–West SEs and no runs test.
    `raw` (identify.drive_signals.Unfiltered) with `filtered`: parallel filtering — the model's columns, evaluated
    on the nearly unfiltered ω, and the recorded τ_j and PWM are gated where the joint sticks and low-passed alike
    (`gated_lowpass`), so the friction's jump at a reversal rings on both sides and no sample near one is dropped.
    `q_span`: the joint angle's span [rad], if known, for the degrees check (`check_accelerations`)."""
    omega, omega_dot, tau_j = (np.asarray(a, dtype=float) for a in (omega, omega_dot, tau_j))
    _check(omega, omega_dot, tau_j, *(() if pwm is None else (np.asarray(pwm, dtype=float),)))
    if model not in MODELS:
        raise DataError(f"unknown friction model {model!r} (choose from {', '.join(MODELS)})")
    if not np.isfinite(inertia) or inertia < 0:
        raise DataError(f"drive inertia must be finite and ≥ 0, got {inertia}")
    if zero_slope and model != "stribeck":
        raise DataError("the zero-slope constraint applies to the Stribeck model only")
    parallel = raw is not None and filtered is not None
    moving = np.abs(raw.omega) > speed_min if parallel else np.ones(len(omega), bool)
    if parallel:  # ω̇ ≈ 0 where the joint sticks: I ω̇ needs no gate
        tau_j = gated_lowpass(raw.tau, moving, filtered)
        pwm = None if pwm is None else gated_lowpass(raw.pwm, moving, filtered)
    y = tau_j + inertia * omega_dot
    check_accelerations(omega_dot, accel_max, q_span)
    keep = select_samples(omega, omega_dot, accel_max, speed_min, margin, exclude)
    note = rejection_note(omega, omega_dot, keep, accel_max, speed_min)
    if keep.sum() < 10:
        why = f" — {note}" if note else ""
        raise DataError(f"only {int(keep.sum())} samples left after outlier rejection; need ≥ 10{why}")
    w, yk = omega[keep], y[keep]
    names = PARAMS[model]
    # the asymmetric Coulomb terms hold a constant offset (1 = [ω>0] + [ω<0] on the kept samples): c⁺ − τ_s and
    # c⁻ + τ_s are what the data determine, so no τ_s column (it made the model rank deficient with PWM)
    absorbed = offset and model == "asymmetric"
    offset = offset and not absorbed
    extra = (
        ([("k_pwm", np.asarray(pwm, dtype=float)[keep])] if pwm is not None else [])
        + (
            [("tau_s", gated_lowpass(moving, moving, filtered)[keep] if parallel else np.ones(len(w)))]
            if offset
            else []
        )
        + ([("inertia_extra", -omega_dot[keep])] if fit_inertia else [])
    )
    cols = names + tuple(n for n, _ in extra)

    def system(vs: float | None) -> tuple[np.ndarray, np.ndarray | None]:
        if parallel:  # the columns filtered as the torque was
            X = -gated_lowpass(regressor(model, raw.omega, vs), moving, filtered)[keep]
        else:
            X = -regressor(model, w, vs)  # y = −f(ω) + …
        C = np.array([[1.0, vs, -1.0, 0.0]]) if zero_slope else None  # Kc + Kv v_s − σs⁺ = 0
        if extra:
            X = np.column_stack([X, *(c for _, c in extra)])
            C = None if C is None else np.column_stack([C, np.zeros((1, len(extra)))])
        return X, C

    def one(vs: float | None) -> FrictionFit:
        X, C = system(vs)
        theta, se, rms, cond = _solve(X, yk, cols, C)
        p = {k: float(v) for k, v in zip(cols, theta, strict=True)}
        return FrictionFit(
            model,
            {k: p[k] for k in names},
            {k: float(v) for k, v in zip(cols, se, strict=True)},
            vs,
            zero_slope,
            int(keep.sum()),
            int((~keep).sum()),
            rms,
            cond,
            extra={n: p[n] for n, _ in extra},
        )

    at_end = False
    if model != "stribeck" or v_s is not None:
        best = one(v_s)
    else:
        best, at_end = _search_vs(one, w)
    X, C = system(best.v_s)
    if best.vs_scan:  # v_s searched: its column ∂(Xθ)/∂v_s, so that the SEs carry its uncertainty
        theta = np.array([{**best.params, **best.extra}[k] for k in cols])
        h = 1e-4 * best.v_s
        dv = (system(best.v_s + h)[0] - system(best.v_s - h)[0]) @ theta / (2 * h)
        X = np.column_stack([X, dv])
        C = None if C is None else np.column_stack([C, [best.params["Kv"]]])
    _robust_se(best, X, C, yk, np.flatnonzero(keep), filtered)
    best.warnings = [
        *([note] if note else []),
        *check_signs(best, ("Kc+", "Kc-") if absorbed else ()),
        *([best.misfit] if best.misfit else []),
    ]
    if absorbed:
        best.warnings.append("asymmetric model: a constant torque offset τ_s is not separable from its Coulomb "
                             "terms, which hold it (Kc+ − τ_s, Kc- + τ_s); the other models fit it apart")  # fmt: skip
    if model == "stribeck":
        searched = None if v_s is not None else (best.vs_scan[0][0], best.vs_scan[-1][0])
        best.n_below_vs = int(np.sum(np.abs(w) < best.v_s))
        best.warnings += stribeck_notes(best, w, searched, at_end)
    return best


def _robust_se(
    fit: FrictionFit,
    X: np.ndarray,
    C: np.ndarray | None,
    y: np.ndarray,
    sample: np.ndarray,
    filtered: tuple[float, float] | None,
) -> None:
    """Replace `fit`'s white-residual SEs by ones honest for correlated residuals; note a model misfit, if any."""
    cols = list(fit.params) + list(fit.extra)
    theta = np.array([{**fit.params, **fit.extra}[k] for k in cols])
    if X.shape[1] > len(cols):  # the searched v_s's column: at the optimum its step is 0
        cols, theta = [*cols, "v_s"], np.append(theta, 0.0)
    se, fit.se_method = fit_se(X, y, theta, sample, C, filtered)
    fit.se = {k: float(v) for k, v in zip(cols, se, strict=True)}
    fit.misfit = misfit_note(y - X @ theta, sample, corr_samples(filtered), fit.model)


def _search_vs(one: Callable[[float], FrictionFit], w: np.ndarray) -> tuple[FrictionFit, bool]:
    """The Stribeck fit at the v_s of least rms: a log grid over the data's speeds, then golden section; and
    whether the grid's least rms was at its first or last v_s (the minimum may lie beyond the range searched)."""
    hi = max(float(np.percentile(np.abs(w), 95)), 1e-6)
    grid = np.geomspace(hi / 300, hi / 2, 40)
    fits = []
    for vs in grid:
        try:
            fits.append(one(float(vs)))
        except IdentifiabilityError:
            continue
    if not fits:
        raise IdentifiabilityError("Stribeck velocity search: no v_s gives a well-conditioned fit")
    k = int(np.argmin([f.rms for f in fits]))
    # refine by golden-section on log v_s between the neighbours of the grid minimum
    lo = np.log(fits[max(k - 1, 0)].v_s)
    up = np.log(fits[min(k + 1, len(fits) - 1)].v_s)
    g = (np.sqrt(5) - 1) / 2
    a, b = up - g * (up - lo), lo + g * (up - lo)
    fa, fb = one(float(np.exp(a))), one(float(np.exp(b)))
    for _ in range(30):
        if fa.rms < fb.rms:
            up, b, fb = b, a, fa
            a = up - g * (up - lo)
            fa = one(float(np.exp(a)))
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (up - lo)
            fb = one(float(np.exp(b)))
    best = fa if fa.rms < fb.rms else fb
    best.vs_scan = [(f.v_s, f.rms) for f in fits]
    return best, k in (0, len(fits) - 1)


COULOMB = ("Kc", "Kc+", "Kc-")
VISCOUS = ("Kv", "Kv+", "Kv-")


def check_signs(fit: FrictionFit, shifted: tuple[str, ...] = ()) -> list[str]:
    """Notes on negative parameters (friction opposes motion: all are ≥ 0); DataError when every Coulomb and
    viscous term is significantly negative (< −2 SE), the mark of a torque recorded with the opposite sign.
    `shifted`: parameters that hold an offset as well (the asymmetric Coulomb terms with PWM), not judged."""
    p, se = {k: v for k, v in fit.params.items() if k not in shifted}, fit.se
    core = [k for k in p if k in COULOMB + VISCOUS]
    if core and all(p[k] < -2 * se.get(k, 0.0) for k in core):
        shown = ", ".join(f"{k} {p[k]:.3g} {unit_of(k)}" for k in core)
        raise DataError(
            f"{fit.model} friction fit gives {shown}: negative friction, so tau likely has the opposite sign; "
            "poise's tau is the joint torque applied to the child link (motor off: tau = −f − I ω̇), negate "
            "the column"
        )
    notes = [
        f"{fit.model}: {k} = {v:.3g} {unit_of(k)} < 0 is physically impossible (friction parameters are ≥ 0)"
        + (
            "; the data show no Stribeck effect on that side: try --model coulomb-viscous or asymmetric"
            if k.startswith("sigma")
            else ""
        )
        for k, v in p.items()
        if v < 0
    ]
    if fit.extra.get("k_pwm", 0.0) < 0:
        notes.append(
            f"{fit.model}: K*_pwm = {fit.extra['k_pwm']:.3g} N·m/% < 0: PWM and tau have opposite signs"
        )
    return notes


# share of samples within --accel-max once divided by 57.3, for a run to look like degrees
DEGREES_WITHIN = 0.9
# share over --accel-max that marks degrees when the angle's span is unknown (a 1 rad 0.5 Hz sinusoid has 67 % over
# the default 5 rad/s², the simulated friction run in degrees 89 %)
DEGREES_OVER = 0.85


def check_accelerations(omega_dot: np.ndarray, accel_max: float | None, q_span: float | None = None) -> None:
    """DataError when ω̇ looks like degrees: most samples over the acceleration limit, ≥ 90 % within it once divided
    by 57.3, and the joint angle spanning over a turn (`q_span` [rad]; unknown: over 85 % of the samples over the
    limit). A fast motion in radians only loses samples (rejection_note warns); t in ms makes ω̇ smaller."""
    if accel_max is None or not len(omega_dot):
        return
    a = np.abs(omega_dot)
    fast = float(np.mean(a > accel_max))
    as_radians = float(np.mean(np.degrees(1.0) * accel_max >= a))
    turns = fast > DEGREES_OVER if q_span is None else q_span > 2 * np.pi
    if fast > 0.5 and as_radians >= DEGREES_WITHIN and turns:
        span = "" if q_span is None else f", q spans {q_span:.3g} rad"
        raise DataError(
            f"{100 * fast:.0f} % of the samples have |ω̇| > {accel_max:g} rad/s², {100 * as_radians:.0f} % within it "
            f"once divided by 57.3{span}: is q in degrees? It must be radians. If the motion is truly that fast, "
            "raise --accel-max"
        )


def rejection_note(
    omega: np.ndarray, omega_dot: np.ndarray, keep: np.ndarray, accel_max: float | None, speed_min: float
) -> str | None:
    """A note when the rejection looks like a units mistake: most samples over the acceleration limit (q in
    degrees makes ω̇ 57× larger), or nearly all rejected. A joint that sticks much of the time (a servo driven
    by small PWM) loses most samples to the speed limit legitimately: that alone is no note."""
    frac = 1.0 - float(np.mean(keep))
    fast = float(np.mean(np.abs(omega_dot) > accel_max)) if accel_max is not None else 0.0
    slow = float(np.mean(np.abs(omega) <= speed_min))
    if fast <= 0.5 and frac <= 0.9:
        return None
    cause = (
        "is q in radians (degrees make ω̇ 57× larger) and t in seconds? or raise --accel-max"
        if fast >= slow
        else "is q in radians and t in seconds? does the joint move? or lower --speed-min"
    )
    fast_text = f"{100 * fast:.0f} % with |ω̇| > {accel_max:g} rad/s², " if accel_max is not None else ""
    return (
        f"{100 * frac:.0f} % of the samples rejected ({fast_text}{100 * slow:.0f} % with |ω| ≤ {speed_min:g} "
        f"rad/s, before widening by --margin): {cause}"
    )


# used samples below v_s under which the Stribeck dip counts as unsupported: a couple of reversals' worth at
# 100 Hz (the simulated motor-off run keeps ~240 below v_s = 0.35 rad/s)
MIN_BELOW_VS = 20


def stribeck_notes(
    fit: FrictionFit, w_used: np.ndarray, searched: tuple[float, float] | None, at_end: bool = False
) -> list[str]:
    """Notes on a Stribeck velocity the data do not support: at an end of its search range `searched` (no
    clear knee: `at_end`, the search grid's least rms at its first or last v_s — the golden-section refinement
    between a grid minimum's neighbours may end near an end of the range from an interior minimum, which is
    no note) or with fewer than MIN_BELOW_VS used samples below it (the dip is extrapolated where there are hardly
    any: a few stray slow samples would not support it)."""
    notes = []
    vs = fit.v_s
    if searched is not None and at_end:
        notes.append(
            f"stribeck: v_s {vs:.3g} rad/s is at an end of its search range {searched[0]:.3g}–{searched[1]:.3g} "
            "rad/s: the data show no clear Stribeck knee; give --vs or use --model coulomb-viscous"
        )
    fastest = float(np.max(np.abs(w_used)))
    if vs > fastest:
        notes.append(
            f"stribeck: v_s {vs:.3g} rad/s is above the fastest speed used, {fastest:.3g} rad/s: the Stribeck dip "
            "then spans all the data and trades off against Kc and Kv (give a smaller --vs or let it be searched)"
        )
    below = int(np.sum(np.abs(w_used) < vs))
    if below < MIN_BELOW_VS:
        slowest = float(np.min(np.abs(w_used)))
        notes.append(
            f"stribeck: only {below} used samples lie below v_s {vs:.3g} rad/s (slowest {slowest:.3g} rad/s, "
            f"fewer than {MIN_BELOW_VS}): the Stribeck dip lies where there are hardly any data (lower "
            "--speed-min, record slower reversals, or use --model coulomb-viscous)"
        )
    return notes


def friction_from_dict(doc: dict, source: str = "friction result") -> FrictionFit:
    """A FrictionFit back from `as_dict` output (e.g. `poise calibrate friction --out`); DataError if malformed."""
    try:
        model = str(doc["model"])
        params = {k: float(v) for k, v in doc["params"].items()}
        vs = doc.get("v_s_rad_s")
        vs = None if vs is None else float(vs)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"{source}: not a friction fit ({exc!r})") from None
    if model not in MODELS or set(params) != set(PARAMS[model]):
        raise DataError(
            f"{source}: model {model!r} with parameters {sorted(params)} is not a known friction model"
        )
    if not all(np.isfinite(v) for v in params.values()) or (model == "stribeck" and not (vs and vs > 0)):
        raise DataError(f"{source}: non-finite parameters or missing Stribeck velocity")
    return FrictionFit(
        model, params, {}, vs, bool(doc.get("zero_slope", False)), 0, 0, float("nan"), float("nan")
    )
