"""`poise calibrate friction`, second review: the Stribeck "v_s at an end of its search range" note only when the
search grid's least rms is at its first or last v_s, not for an interior minimum that the golden-section
refinement (between the grid minimum's neighbours) lands near an end."""

from __future__ import annotations

import numpy as np
import pytest

from identify.friction import MIN_BELOW_VS, FrictionFit, _search_vs, stribeck_notes

STRIBECK = {"Kc": 0.85, "Kv": 1.2, "sigma+": 1.27, "sigma-": 1.95}
W = np.linspace(-1.5, 1.5, 301)


def _grid() -> np.ndarray:  # as _search_vs makes it
    hi = float(np.percentile(np.abs(W), 95))
    return np.geomspace(hi / 300, hi / 2, 40)


def _one_with_least_rms_at(target: float):
    def one(vs: float) -> FrictionFit:
        return FrictionFit("stribeck", STRIBECK, {}, vs, False, 1, 0, 0.01 + np.log(vs / target) ** 2, 1.0)

    return one


def _notes(target: float) -> tuple[FrictionFit, bool, list[str]]:
    best, at_end = _search_vs(_one_with_least_rms_at(target), W)
    searched = (best.vs_scan[0][0], best.vs_scan[-1][0])
    return (
        best,
        at_end,
        [n for n in stribeck_notes(best, np.array([1e-4, 1.0]), searched, at_end) if "end" in n],
    )


@pytest.mark.parametrize("k, end", [(1, 0), (38, 39)])
def test_an_interior_minimum_near_an_end_of_the_range_is_no_note(k, end):
    g = _grid()
    target = g[k] * (0.97 if k == 1 else 1.03)  # grid minimum at k, refined to within 1.2× of the end
    best, at_end, notes = _notes(target)
    assert best.v_s == pytest.approx(target, rel=1e-3)
    assert max(best.v_s, g[end]) / min(best.v_s, g[end]) < 1.2  # where the old 1.2× margin warned
    assert not at_end and notes == []


@pytest.mark.parametrize("k", [0, 39])
def test_a_grid_minimum_at_an_end_is_noted(k):
    g = _grid()
    target = g[k] * (0.8 if k == 0 else 1.25)  # beyond the range searched
    _, at_end, notes = _notes(target)
    assert at_end and len(notes) == 1 and "no clear Stribeck knee" in notes[0]


def test_the_note_needs_a_search():
    fit = FrictionFit("stribeck", STRIBECK, {}, 0.0152, False, 1, 0, 0.0, 1.0)
    w = np.append(np.full(MIN_BELOW_VS, 0.01), 1.0)  # enough samples below v_s for the dip
    assert stribeck_notes(fit, w, None, at_end=True) == []  # v_s given: nothing searched
    assert stribeck_notes(fit, w, (0.014, 0.75)) == []  # interior grid minimum


def test_the_asymmetric_model_with_pwm_holds_the_offset_in_its_coulomb_terms():
    """With PWM applied the fit adds a constant τ_s, which the asymmetric Coulomb terms already hold
    (1 = [ω>0] + [ω<0] on the samples used): `--model all` failed as rank deficient on any PWM recording. The
    asymmetric fit now leaves τ_s out, says so, and returns c⁺ − τ_s and c⁻ + τ_s."""
    from identify.friction import fit_friction

    rng = np.random.default_rng(1)
    w = rng.uniform(-2.0, 2.0, 2000)
    w = w[np.abs(w) > 0.05]
    pwm = rng.uniform(-20.0, 20.0, len(w))
    c_pos, c_neg, v_pos, v_neg, k, tau_s = 0.9, 1.3, 0.8, 1.1, 1.12, 0.2
    f = np.where(w > 0, c_pos + v_pos * w, -c_neg + v_neg * w)
    y = k * pwm - f + tau_s  # τ_j with ω̇ = 0
    fit = fit_friction(w, np.zeros_like(w), y, 0.0, "asymmetric", offset=True, pwm=pwm)
    assert fit.tau_s is None and any("not separable" in n for n in fit.warnings)
    assert fit.params["Kc+"] == pytest.approx(c_pos - tau_s)
    assert fit.params["Kc-"] == pytest.approx(c_neg + tau_s)
    assert fit.extra["k_pwm"] == pytest.approx(k)
    # an offset larger than c⁺ makes Kc+ negative: the offset's doing, not "physically impossible" friction
    shifted = fit_friction(w, np.zeros_like(w), y + 0.95, 0.0, "asymmetric", offset=True, pwm=pwm)
    assert shifted.params["Kc+"] < 0 and not any("impossible" in n for n in shifted.warnings)
    sym = fit_friction(w, np.zeros_like(w), y + np.where(w > 0, c_pos - 1.1, -(c_neg - 1.1)), 0.0,
                       "coulomb-viscous", offset=True, pwm=pwm)  # fmt: skip
    assert sym.tau_s is not None  # the other models still fit it apart
