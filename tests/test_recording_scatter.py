"""Recordings fitted together, each refitted alone (`identify.scatter`, `identify dynamic --scatter`): their
estimates scatter about the joint fit by ~1 of their own SEs when noise alone separates them, by more when each
carries its own model error."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from formats.errors import DataError
from identify.dynamic import DynamicEstimator
from identify.scatter import recording_scatter
from tests.test_dynamic_identify import _record, setup  # noqa: F401 (setup: the module fixture)


@pytest.fixture(scope="module")
def recs(setup):  # noqa: F811
    model, res, truth = setup
    return [_record(model, res.trajectory, truth, seed=s) for s in (1, 2, 3, 4, 5)]


@pytest.fixture(scope="module")
def noise_scatter(setup, recs):  # noqa: F811
    """The five recordings fitted together and each alone (noise alone separates them): (estimator, scatter). Two
    tests read the same one."""
    est = DynamicEstimator(setup[0]).fit(recs)
    return est, recording_scatter(est, recs)


def test_noise_alone_scatters_by_about_one_se(noise_scatter):
    est, sc = noise_scatter
    assert sc.groups == 5 and sc.ratio.shape == est.fit_.values.shape
    assert 0.6 < np.median(sc.ratio) < 1.5, np.median(sc.ratio)


def test_a_model_error_of_each_recording_shows_as_scatter(setup, recs, noise_scatter):  # noqa: F811
    """Each recording's joint 2 carries its own constant torque error (±0.3 N·m, a misfit noise cannot make):
    fitted together the SEs stay those of the noise, and the recordings alone disagree by many of them."""
    model = setup[0]
    off = [replace(r, tau=r.tau + np.eye(model.nq)[1] * 0.3 * (-1) ** k) for k, r in enumerate(recs)]
    clean = noise_scatter[1]  # recording_scatter(DynamicEstimator(model).fit(recs), recs)
    sc = recording_scatter(DynamicEstimator(model).fit(off), off)
    assert sc.ratio.max() > 5 and sc.ratio.max() > 3 * clean.ratio.max(), (sc.ratio.max(), clean.ratio.max())


def test_groups_are_fitted_together(setup, recs):  # noqa: F811
    est = DynamicEstimator(setup[0]).fit(recs[:4])
    sc = recording_scatter(est, recs[:4], groups=["a", "a", "b", "c"])
    assert sc.groups == 3
    with pytest.raises(DataError, match="at least 3 groups"):
        recording_scatter(est, recs[:4], groups=["a", "a", "b", "b"])
    with pytest.raises(DataError, match="2 group labels for 4 recordings"):
        recording_scatter(est, recs[:4], groups=["a", "b"])


def test_a_recording_that_cannot_be_fitted_alone_is_named(setup, recs):  # noqa: F811
    model = setup[0]
    still = replace(recs[2], q=np.repeat(recs[2].q[:1], len(recs[2].t), axis=0))  # no motion: nothing excited
    est = DynamicEstimator(model).fit(recs[:2] + [still])
    with pytest.raises(DataError, match="recording 3 alone cannot be fitted"):
        recording_scatter(est, recs[:2] + [still])
    ess = DynamicEstimator(model, essential_pct=15).fit(recs[:3])
    with pytest.raises(DataError, match="leave --essential out"):
        recording_scatter(ess, recs[:3])


def test_a_recording_without_friction_excitation_alone_is_named(setup, recs):  # noqa: F811
    """Without friction, a still recording fits (rows kept) but excites nothing: IdentifiabilityError, named."""
    model = setup[0]
    still = replace(recs[2], q=np.repeat(recs[2].q[:1], len(recs[2].t), axis=0))
    est = DynamicEstimator(model, friction=False).fit(recs[:2] + [still])
    with pytest.raises(DataError, match="recording 3 alone cannot be fitted.*does not excite"):
        recording_scatter(est, recs[:2] + [still])


def runs_of_plans(recs, plans: list[str], folder) -> list[str]:
    """UR5 recordings written as `poise run` leaves them: each in its folder beside a run.json naming its plan's
    sha256 (here the label in `plans`); their paths."""
    import json

    from formats.dynamic_recording import write_dynamic_recording
    from tests.test_dynamic_identify import UR5

    paths = []
    for k, (r, plan) in enumerate(zip(recs, plans, strict=True)):
        run = folder / f"run{k}"
        run.mkdir()
        write_dynamic_recording(replace(r, meta={**r.meta, "robot_source": str(UR5)}), run / "recording.csv")
        (run / "run.json").write_text(json.dumps({"plan": "x.json", "plan_sha256": plan}), encoding="utf-8")
        paths.append(str(run / "recording.csv"))
    return paths


def test_identify_dynamic_scatter_groups_runs_of_one_plan(setup, recs, tmp_path, capsys):  # noqa: F811
    import json

    from poise.cli import main

    paths = runs_of_plans(recs, ["p1", "p1", "p2", "p3", "p3"], tmp_path)
    capsys.readouterr()
    assert main(["identify", "dynamic", *paths, "--scatter", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scatter"]["groups"] == 3 and len(out["scatter"]["ratio"]) == len(out["parameters"])
    assert main(["identify", "dynamic", *paths[:2], "--scatter"]) == 2
    assert "at least 3 groups" in capsys.readouterr().err
