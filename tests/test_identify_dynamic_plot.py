"""`identify dynamic --plot`: the figure names the drawn recording and the reported numbers, draws each row's
residual, marks the worst row, says which ends are not drawn and follows the filtered motion at a finer step than
the fit's decimation."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.colors as mcolors
import numpy as np
import pytest
from conftest import simulated_recording

import identify.plots as plots
from identify.dynamic import EDGE_PERIODS
from identify.plots import MAX_DRAWN_POINTS, drawing_step
from poise.cli import main

STANDING = Path(__file__).parent / "data" / "tulip_double_support_10s.json"
RATE_HZ = 200


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> tuple[Path, Path]:
    """The stored double-support plan simulated, and run again on the same twin under another noise seed."""
    folder = tmp_path_factory.mktemp("plot")
    first = simulated_recording(folder, STANDING, RATE_HZ, "--truth-out", str(folder / "truth.json"))
    other = simulated_recording(
        folder, STANDING, RATE_HZ, "--truth", str(folder / "truth.json"), "--seed", "1", name="held_out.csv"
    )
    return first, other


def _figure(monkeypatch, capsys, argv: list[str]):
    """`poise ARGV --json --plot`: (its JSON, the figure it drew, unsaved)."""
    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, out: drawn.append(fig) or Path(out))
    assert main([*argv, "--json", "--plot", "unused.png"]) == 0
    assert len(drawn) == 1
    return json.loads(capsys.readouterr().out), drawn[0]


def _panels(fig):
    """(curve axes, residual axes): the residual panels are labelled `resid.`."""
    axes = fig.get_axes()
    res = [a for a in axes if a.get_ylabel() == "resid."]
    return [a for a in axes if a not in res], res


def test_the_validation_figure_names_its_file_numbers_residuals_and_dropped_ends(
    recordings, monkeypatch, capsys
):
    first, other = recordings
    argv = ["identify", "dynamic", str(first), "--simplified", "--no-friction", "--validate", str(other)]
    out, fig = _figure(monkeypatch, capsys, argv)
    v = out["validation"]
    title = fig._suptitle.get_text()
    assert title.startswith("tulip: validation on held_out.csv: ")
    assert f"RMS error {v['total_relative_pct']:.2f} % of the measured RMS" in title
    main_axes, res_axes = _panels(fig)
    assert len(main_axes) == len(res_axes) == len(out["rows"]) == 3
    worst = int(np.argmax(v["relative_pct"]))
    tick = max(t.get_fontsize() for t in main_axes[0].get_yticklabels())
    for j, (ax, res) in enumerate(zip(main_axes, res_axes, strict=True)):
        name, unit = out["rows"][j].rsplit(" ", 1)
        label = ax.yaxis.label
        assert label.get_text() == f"{name}\n[{unit}]" and label.get_fontsize() >= tick
        red = mcolors.same_color(label.get_color(), "C3") and label.get_fontweight() == "bold"
        assert red == (j == worst)
        box = " ".join(t.get_text() for t in ax.texts)
        assert f"RMS error {v['rmse_nm'][j]:.3g} {unit} ({v['relative_pct'][j]:.1f} % of its RMS)" in box
        measured, predicted = ax.get_lines()[:2]
        residual = res.get_lines()[0]
        assert np.allclose(residual.get_ydata(), measured.get_ydata() - predicted.get_ydata(), equal_nan=True)
    assert (
        f"worst row {out['rows'][worst].rsplit(' ', 1)[0]}: {v['relative_pct'][worst]:.1f} % of its RMS"
        in title
    )
    t = main_axes[0].get_lines()[0].get_xdata()
    edge = EDGE_PERIODS / out["cutoff_hz"]
    assert f"the first and last {edge:.3g} s" in res_axes[-1].get_xlabel()
    assert t[0] == pytest.approx(edge, abs=2.0 / RATE_HZ) and np.all(np.diff(t) > 0)
    # finer than the fit's decimation (4 samples per cut-off period), within the drawing's budget
    fit_dt = 1.0 / (4 * out["cutoff_hz"])
    assert np.median(np.diff(t)) <= fit_dt / 4 and len(t) <= MAX_DRAWN_POINTS


def test_a_fit_figure_says_which_recording_it_draws_and_how_many_more_were_fitted(
    recordings, monkeypatch, capsys
):
    first, other = recordings
    _, fig = _figure(monkeypatch, capsys, ["identify", "dynamic", str(first), str(other), "--simplified",
                                           "--no-friction"])  # fmt: skip
    title = fig._suptitle.get_text()
    assert title.startswith(f"tulip: fit of {first.name} (+1 more fitted, not drawn): RMS error ")
    assert "validation" not in title
    _, fig = _figure(
        monkeypatch, capsys, ["identify", "dynamic", str(first), "--simplified", "--no-friction"]
    )
    assert "more fitted" not in fig._suptitle.get_text()


def test_the_drawing_step_keeps_at_most_the_budget_and_never_coarsens_past_the_fit():
    assert drawing_step(5001, 62) == 2  # 500 Hz for 10 s: every other sample
    assert drawing_step(3000, 62) == 1
    assert -(-5001 // drawing_step(5001, 62)) <= MAX_DRAWN_POINTS
    assert drawing_step(10**7, 25) == 25  # the fit's step already keeps the filtered band
