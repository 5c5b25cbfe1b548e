"""A design focused on some base parameters (`ExcitationSettings.focus`, `plan trajectory --focus`): the logvar
criterion sums only their log variances, so the next experiment serves the parameters still undetermined."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from formats.errors import DataError
from poise.cli import main
from robots.conditioning import log_variances
from robots.registry import get_model
from tests.test_trajectories import UR5
from trajectories.excitation import ExcitationSettings, criterion_value, optimise
from trajectories.verify import stacked_base_regressor

SMALL = ExcitationSettings(period=5.0, duration=5.0, harmonics=3, samples=24, max_iter=40, sharpness=(8.0,),
                           criterion="logvar", scaling="none")  # fmt: skip


@pytest.fixture(scope="module")
def ur5():
    return get_model(str(UR5))


@pytest.fixture(scope="module")
def small_design(ur5):
    """`optimise(ur5, SMALL, seed=2)`, the design for all: two tests below read the same one."""
    return optimise(ur5, SMALL, seed=2)


def test_focused_log_variances_and_their_gradient():
    rng = np.random.default_rng(3)
    W = rng.normal(size=(50, 6)) * np.array([1.0, 10.0, 0.1, 3.0, 1.0, 0.5])
    W[:, 5] += 0.8 * W[:, 0] / 1.0
    w = np.array([0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    var = np.diag(np.linalg.inv(W.T @ W))
    assert log_variances(W, w)[0] == pytest.approx(np.log(var[1]) + np.log(var[5]), rel=1e-12)
    for scaling in ("none", "columns"):
        s = ExcitationSettings(criterion="logvar", scaling=scaling, focus=(1, 5))
        f, G = criterion_value(W, s, 1.0)
        D = rng.normal(size=W.shape)
        h = 1e-6
        fd = (criterion_value(W + h * D, s, 1.0)[0] - criterion_value(W - h * D, s, 1.0)[0]) / (2 * h)
        assert fd == pytest.approx(np.sum(G * D), rel=1e-6, abs=1e-9)
    # a parameter outside the focus does not move the criterion: only the focused variances count
    s = ExcitationSettings(criterion="logvar", focus=(1, 5))
    W2 = W.copy()
    W2[:, 2] *= 7.0  # rescales ϑ3's variance alone
    assert criterion_value(W2, replace(s, scaling="none"), 1.0)[0] == pytest.approx(
        criterion_value(W, replace(s, scaling="none"), 1.0)[0], rel=1e-12
    )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"criterion": "kappa"}, "needs the logvar criterion"),
        ({"focus": ()}, "distinct base parameters"),
        ({"focus": (2, 2)}, "distinct base parameters"),
        ({"focus": (-1,)}, "distinct base parameters"),
    ],
)
def test_bad_focus_is_refused(change, message):
    s = replace(ExcitationSettings(criterion="logvar", focus=(0,)), **change)
    with pytest.raises(DataError, match=message):
        s.validate()


def test_focused_design_lowers_the_focused_variance(ur5, small_design):
    """From the same start, focusing on one base parameter lowers its variance and raises the others'; the focused
    stage starts from the design for all. Measured (UR5, 5 s, 3 harmonics, 40 iterations, seed 2): ϑ1 ×0.48,
    ϑ6 ×0.41, ϑ8 ×0.58, the others ×1.6–3.3 (median)."""
    t = np.arange(SMALL.samples) * SMALL.period / SMALL.samples  # the design grid

    def variances(res):
        W = stacked_base_regressor(ur5, res.trajectory, res.base, False, t)
        return np.diag(np.linalg.inv(W.T @ W))

    plain = variances(small_design)  # optimise(ur5, SMALL, seed=2)
    k = 5
    res = optimise(ur5, replace(SMALL, focus=(k,)), seed=2)
    assert res.verification["ok"], res.verification["problems"]
    assert [(st["criterion"], st.get("focus")) for st in res.stages] == [
        ("logdet", None),
        ("logvar", None),
        ("logvar", ["ϑ6"]),
    ]
    focused = variances(res)
    assert focused[k] < 0.75 * plain[k]
    assert np.median(np.delete(focused / plain, k)) > 1.0  # the information went to ϑ6


def test_focus_beyond_the_base_is_refused(ur5, tmp_path, capsys):
    out = tmp_path / "t.json"
    args = ["plan", "trajectory", str(UR5), "--out", str(out), "--duration", "5", "--period", "5",
            "--harmonics", "3", "--samples", "24", "--max-iter", "5", "--criterion", "logvar"]  # fmt: skip
    assert main([*args, "--focus", "ϑ2", "ϑ99"]) == 2
    err = capsys.readouterr().err
    assert "focus names ϑ99" in err and "36 parameters" in err and "Traceback" not in err
    assert not out.exists()
    assert main([*args, "--focus", "q5"]) == 2
    assert "expected a base parameter such as ϑ5" in capsys.readouterr().err
    assert main([*args[:-2], "--focus", "5"]) == 2  # the κ criterion has no per-parameter variances
    assert "needs the logvar criterion" in capsys.readouterr().err


def test_a_standing_designs_focus_is_the_forecasts_parameter(tulip):
    """TUlip in double support: `--focus ϑ10` names the forecast's (and the fit's) ϑ10, Izz of the torso with the
    left leg's masses, and the focused run's forecast SE of it falls. Before the designs used identification's
    base parameters, the focus aimed at the design's own pivoted ϑ10, another combination. Measured (8 s, 3
    harmonics on 24 samples, 40 iterations, seed 2): ϑ10 ×0.16, the others ×2.8 (median); with 4 harmonics on 32
    samples ϑ10 ×0.38, the others ×3.0, ϑ5 ×0.55, ϑ32 ×0.71 alike."""
    from poise.workflows.plan_forecast import forecast_plans
    from trajectories.plan import make_plan

    s = ExcitationSettings(
        period=8.0, duration=8.0, harmonics=3, samples=24, max_iter=40, criterion="logvar", scaling="none",
        simplified=True, motion="double-support", zmp_margin=0.02, velocity_fraction=0.3,
    )  # fmt: skip

    def forecast(settings):
        res = optimise(tulip, settings, seed=2)
        assert res.verification["ok"], res.verification["problems"]
        plan = make_plan("tulip", tulip, res, settings, 2, 100.0)
        return forecast_plans([plan], ["plan"], [0.49, 1.42, 1.29]).forecast

    k = 9
    plain, focused = forecast(s), forecast(replace(s, focus=(k,)))
    assert plain.symbols[k] == "ϑ10" and plain.formulas[k].startswith("Izz@torso")
    ratio = focused.se[: plain.inertial] / plain.se[: plain.inertial]
    assert ratio[k] < 0.6, ratio[k]
    assert np.median(np.delete(ratio, k)) > 1.0


def test_a_focused_next_design_completes_the_runs_made(ur5, small_design, monkeypatch):
    """Given runs already made (`prior`), a focused design warms up on the design for all without them and
    completes them only in its focused stage (`trajectories.excitation.stage_prior`): warmed up with a strong
    prior, focused TUlip designs stalled where they began. Here the prior is six runs of a design for all and the
    focus the parameter they leave worst determined relative to its guess. Measured (UR5, seeds 2 and 3), the
    variance of ϑ17 with the prior: × 0.535 of a seventh run of the same design, × 0.666 warmed up with the
    prior (packages of 2026-11-27); × 0.907 of the latter with numpy 2.4.6, scipy 1.17.1, casadi 3.8.2."""
    import trajectories.excitation as ex

    t = np.arange(SMALL.samples) * SMALL.period / SMALL.samples
    first = small_design  # optimise(ur5, SMALL, seed=2)
    W1 = stacked_base_regressor(ur5, first.trajectory, first.base, False, t)
    prior = ex.Prior(np.vstack([W1] * 6))
    guess = first_guess(ur5)
    rel = np.where(guess != 0, np.diag(np.linalg.inv(W1.T @ W1)) / np.where(guess != 0, guess, 1.0) ** 2, 0.0)
    k = int(np.argmax(rel))  # the worst relative variance of a parameter the model does not guess at zero
    s = replace(SMALL, focus=(k,))

    def var(res) -> float:
        W = W1 if res is None else stacked_base_regressor(ur5, res.trajectory, res.base, False, t)
        both = ex.with_prior(W, s, prior)
        return float(np.linalg.inv(both.T @ both)[k, k])

    res = optimise(ur5, s, seed=3, prior=prior)
    assert [st.get("with_prior") for st in res.stages] == [False, False, True]
    monkeypatch.setattr(ex, "stage_prior", lambda settings, prior, last: prior)
    warmed_with_prior = optimise(ur5, s, seed=3, prior=prior)
    assert [st.get("with_prior") for st in warmed_with_prior.stages] == [True, True, True]
    assert var(res) < 0.8 * var(None), (var(res), var(None))
    assert var(res) < var(warmed_with_prior), (var(res), var(warmed_with_prior))


def first_guess(model) -> np.ndarray:
    """The model's guessed base parameters (torque regressor)."""
    from robots import dynamics as dyn
    from robots.base_params import RegressorSpec, cached_dynamic_base

    db = cached_dynamic_base(model, RegressorSpec("torque", model.root), False)
    return db.values(dyn.standard_parameters(model, next(iter(model.params))))


def test_focus_auto_aims_at_what_the_runs_made_leave_to_repeating(tmp_path, capsys):
    """`--focus auto --noise σ --prior PLAN…`: the focus is the forecast's determined_if_repeated of the runs made
    (as `plan forecast PLAN… --noise σ` names it). Measured (UR5, 5 s, 20 iterations, noise 1 N·m): the first run
    leaves ϑ7, ϑ15, ϑ24, ϑ33 to repeating; with the focused second the pair determines 15, with a repeat 12."""
    import json

    first, second = tmp_path / "first.json", tmp_path / "second.json"
    args = ["plan", "trajectory", str(UR5), "--duration", "5", "--period", "5", "--harmonics", "3", "--samples",
            "24", "--criterion", "logvar", "--scaling", "none", "--max-iter", "20"]  # fmt: skip

    def forecast(*plans) -> dict:
        capsys.readouterr()
        assert main(["plan", "forecast", *map(str, plans), "--noise", "1", "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    assert main([*args, "--out", str(first), "--json"]) == 0
    left = forecast(first)["determined_if_repeated"]
    assert left
    capsys.readouterr()
    assert (
        main(
            [*args, "--out", str(second), "--prior", str(first), "--focus", "auto", "--noise", "1", "--json"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["auto_focus"]["focus"] == left and out["auto_focus"]["noise"] == [1.0]
    plan = json.loads(second.read_text(encoding="utf-8"))
    assert plan["settings"]["focus"] == [int(s[1:]) - 1 for s in left]
    pair, repeat = forecast(first, second), forecast(first, first)
    assert len(pair["determined"]) > len(repeat["determined"]), (pair["determined"], repeat["determined"])


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--focus", "auto", "--noise", "1"], "give the plans run as --prior"),
        (["--focus", "auto", "--prior", "FIRST"], "give the plans run as --prior and their sensor noise"),
        (["--noise", "1"], "--noise is the forecast noise of --focus auto"),
        (["--focus", "auto", "ϑ2", "--noise", "1", "--prior", "FIRST"], "--focus auto stands alone"),
        (["--focus", "auto", "--noise", "1e-6", "--prior", "FIRST"], "leave nothing that more runs"),
    ],
)
def test_focus_auto_needs_runs_and_a_noise_level(tmp_path, capsys, extra, message):
    first = tmp_path / "first.json"
    args = ["plan", "trajectory", str(UR5), "--duration", "5", "--period", "5", "--harmonics", "3", "--samples",
            "24", "--criterion", "logvar", "--scaling", "none", "--max-iter", "5"]  # fmt: skip
    assert main([*args, "--out", str(first), "--json"]) == 0
    out = tmp_path / "next.json"
    capsys.readouterr()
    assert main([*args, "--out", str(out), *[str(first) if a == "FIRST" else a for a in extra]]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not out.exists()
