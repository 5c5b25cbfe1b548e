"""`plan forecast --plot` / `plan reach --plot` bar chart (`identify.plots.forecast_figure`), read from its artists."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from identify.plots import bar_baseline, forecast_figure, save_figure  # noqa: E402

SYMS = ["ϑ1", "ϑ2", "ϑ3", "ϑ4", "ϑ5"]
REL = np.array([3.0, np.inf, 40.0, 700.0, 20.0])  # determined, guess 0, repeated, beyond, repeated
NEED = np.array([6.0, np.nan, 48.0, 1.3e4, 12.0])


@pytest.fixture
def fig():
    f = forecast_figure(SYMS, REL, NEED, 6.0, 15.0, 600.0, "t")
    yield f
    plt.close(f)


def _bars(ax, gid):
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_gid() == gid]


def test_the_well_line_has_a_legend_entry(fig):
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "well determined: 15 %" in texts


def test_guess_zero_is_a_stub_at_the_floor_not_a_bar(fig):
    ax = fig.axes[0]
    base = bar_baseline(REL, 15.0)
    stubs = _bars(ax, "guess0")
    assert len(stubs) == 1 and stubs[0].get_y() == pytest.approx(base)
    assert stubs[0].get_y() + stubs[0].get_height() < 1.5 * base
    assert any(t.get_text().startswith("guess 0") for t in fig.legends[0].get_texts())


def test_each_verdict_has_its_own_hatch_beside_its_colour(fig):
    ax = fig.axes[0]
    cues = {k: {(p.get_facecolor(), p.get_hatch() or "") for p in _bars(ax, f"verdict{k}")} for k in range(3)}
    assert all(len(c) == 1 for c in cues.values())
    hatches = [next(iter(c))[1] for c in cues.values()]
    colours = [next(iter(c))[0] for c in cues.values()]
    assert len(set(hatches)) == 3 and len(set(colours)) == 3
    legend = {
        (h.get_facecolor(), h.get_hatch() or "")
        for h in fig.legends[0].legend_handles
        if isinstance(h, Rectangle)
    }
    assert all(next(iter(c)) in legend for c in cues.values())


def test_repeat_bars_carry_their_seconds(fig):
    notes = [t.get_text() for t in fig.axes[0].texts if t.get_text().endswith(" s")]
    want = [f"{NEED[k]:.0f} s" for k in np.flatnonzero((REL >= 15) & (NEED <= 600))]
    assert sorted(notes) == sorted(want) and len(want) == 2


def test_no_seconds_over_too_many_bars():
    n = 45
    f = forecast_figure([f"ϑ{k}" for k in range(n)], np.full(n, 30.0), np.full(n, 24.0), 6.0, 15.0, 600.0)
    assert not [t for t in f.axes[0].texts if t.get_text().endswith(" s")]
    plt.close(f)


def test_few_bars_upright_ticks_many_turned(fig):
    assert all(t.get_rotation() == 0 for t in fig.axes[0].get_xticklabels())
    n = 60
    f = forecast_figure(
        [f"parameter{k}" for k in range(n)], np.full(n, 3.0), np.full(n, 6.0), 6.0, 15.0, 600.0
    )
    assert all(t.get_rotation() == 90 for t in f.axes[0].get_xticklabels())
    plt.close(f)


def test_the_floor_is_below_the_other_designs_markers_too(tmp_path):
    also = np.array([3.0, np.inf, 0.002, 700.0, 20.0])  # `plan reach`'s "designed for it alone" markers
    f = forecast_figure(SYMS, REL, NEED, 6.0, 15.0, 600.0, "t", ("alone", also))
    low = f.axes[0].get_ylim()[0]
    assert low == bar_baseline(np.concatenate([REL, also]), 15.0) and low < 0.002
    assert f"bars from {low:g} %" in f.axes[0].get_ylabel()
    plt.close(f)
    fig = forecast_figure(SYMS, REL, NEED, 6.0, 15.0, 600.0)
    assert save_figure(fig, tmp_path / "f.png", dpi=120).stat().st_size > 0
