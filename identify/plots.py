"""Figures for identification: CoP residuals per posture (as the thesis's Fig. 4.13); a plan's forecast relative SEs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from formats.atomic import save_figure  # noqa: E402


def plot_cop_fit(
    residuals: np.ndarray,
    placement: np.ndarray,
    out: str | Path,
    reference: np.ndarray | None = None,
    reference_name: str = "reference",
    title: str = "",
    posture_ids: np.ndarray | None = None,
) -> Path:
    """x/y CoP error per posture (mm) of the estimate (and a reference model), placements separated; the x axis
    names the recording's posture ids (default: row numbers)."""
    fig, axes = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True)
    idx = np.arange(len(residuals))
    ids = idx if posture_ids is None else np.asarray(posture_ids)
    shared = len(np.unique(placement)) < len(placement)  # lines only where placements hold several postures
    for k, ax in enumerate(axes):
        ax.plot(idx, residuals[:, k] * 1000, "o-", ms=3, label="estimated model")
        if reference is not None:
            ax.plot(idx, reference[:, k] * 1000, "s--", ms=3, alpha=0.7, label=reference_name)
        for b in (np.flatnonzero(np.diff(placement)) + 0.5) if shared else ():
            ax.axvline(b, color="k", lw=0.8)
        ax.axhline(0, color="gray", lw=0.5)
        ax.set_ylabel(f"{'xy'[k]} error [mm]")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right")
    step = max(1, -(-len(idx) // 25))  # at most 25 labels
    axes[1].set_xticks(idx[::step], [str(i) for i in ids[::step]], fontsize=7)
    axes[1].set_xlabel(
        "posture id in the recording" + (" (vertical lines: new foot placement)" if shared else "")
    )
    fig.suptitle(title or "Measured − predicted CoP")
    fig.tight_layout()
    return save_figure(fig, out, dpi=120)


# verdicts' second cue beside their colour (a colour-blind reader tells them apart by the hatch)
FORECAST_VERDICTS = (("tab:green", ""), ("tab:orange", "///"), ("tab:red", "xxx"))
# `forecast_figure`: the seconds of motion are written above the "if repeated" bars up to this many bars
MAX_ANNOTATED_BARS = 40


def forecast_figure(
    symbols: list[str],
    rel_se_pct: np.ndarray,
    needed_s: np.ndarray,
    duration_s: float,
    well_pct: float,
    practical_s: float,
    title: str = "",
    also: tuple[str, np.ndarray] | None = None,
):
    """Forecast relative SE per base parameter (log scale) against the `well_pct` line, told by colour and hatch:
    determined as planned, determined if the motion is repeated up to `practical_s` (the seconds written above the
    bar, up to MAX_ANNOTATED_BARS bars), beyond. A parameter guessed 0 (no relative SE) is a short stub at the floor,
    not a bar. `also`: (label, relative SEs) of another design, drawn as markers over the bars. Not saved:
    `save_figure(forecast_figure(…), out, dpi=120)` writes it."""
    rel = np.asarray(rel_se_pct, dtype=float)
    need = np.asarray(needed_s, dtype=float)
    n = len(symbols)
    verdict = np.where(rel < well_pct, 0, np.where(need <= practical_s, 1, 2))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.28 * n + 2), 4.2))
    x = np.arange(n)
    finite = np.isfinite(rel)
    drawn = rel if also is None else np.concatenate([rel, np.asarray(also[1], dtype=float)])
    base = bar_baseline(drawn, well_pct)  # the same rule for `plan forecast` and `plan reach`
    high = drawn[np.isfinite(drawn)]
    top = max(float(high.max()) if high.size else well_pct, well_pct) * 3
    for k, (colour, hatch) in enumerate(FORECAST_VERDICTS):
        on = finite & (verdict == k)
        if on.any():
            ax.bar(x[on], rel[on] - base, bottom=base, color=colour, hatch=hatch, edgecolor="0.15", lw=0.6,
                   gid=f"verdict{k}")  # fmt: skip
    stub = base * GUESS0_STUB
    if (
        not finite.all()
    ):  # a zero guess: a relative SE of a parameter guessed 0 is undefined: a stub, not a bar
        ax.bar(x[~finite], stub - base, bottom=base, color="none", edgecolor="gray", hatch="....", lw=0.8,
               gid="guess0")  # fmt: skip
        for xi in x[~finite]:
            ax.text(
                xi, stub * 1.1, "guess 0", rotation=90, ha="center", va="bottom", fontsize=6, color="0.35"
            )
    ax.axhline(well_pct, color="k", lw=1.0, ls="--")
    if also is not None:
        ax.plot(x, np.asarray(also[1], dtype=float), "k_", ms=9, mew=2, label=also[0])
    ax.set_yscale("log")
    ax.set_ylim(base, top)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_xticks(x, symbols, rotation=0, fontsize=8)
    ax.set_ylabel(
        f"forecast relative SE [%]\n(log; bars from {base:g} %, a power of ten below all)", fontsize=9
    )
    repeat = np.flatnonzero(finite & (verdict == 1) & np.isfinite(need))
    notes = []
    if n <= MAX_ANNOTATED_BARS:
        for k in repeat:
            notes.append(ax.annotate(f"{need[k]:.0f} s", (x[k], rel[k]), xytext=(0, 2), textcoords="offset points",
                                     ha="center", va="bottom", fontsize=7, color="0.2"))  # fmt: skip
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=c, hatch=h, edgecolor="0.15", lw=0.6)
               for c, h in FORECAST_VERDICTS]  # fmt: skip
    labels = [f"< {well_pct:g} % in {duration_s:.0f} s", f"< {well_pct:g} % if repeated ≤ {practical_s:g} s"
              + (" (s of motion above)" if notes else ""), f"beyond {practical_s:g} s"]  # fmt: skip
    handles.append(plt.Line2D([], [], color="k", lw=1.0, ls="--"))
    labels.append(f"well determined: {well_pct:g} %")
    if not finite.all():
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="none", edgecolor="gray", hatch="...."))
        labels.append("guess 0: relative SE undefined (stub at the floor)")
    if also is not None:
        handles.append(plt.Line2D([], [], color="k", marker="_", ls="", ms=9, mew=2))
        labels.append(also[0])
    ax.grid(alpha=0.3, axis="y")
    # wrapped to the figure's width (about 12 characters an inch at 9 pt), so no line is cut at its edge
    width = max(40, int(12 * fig.get_figwidth()))
    heading = title or "What the plan will determine (noise alone)"
    ax.set_title(textwrap.fill(heading, width, break_long_words=False, break_on_hyphens=False), fontsize=9)
    _forecast_layout(fig, ax, handles, labels, notes)
    return fig


# `forecast_figure`: a parameter guessed 0 is a stub from the floor to this multiple of it (a bar would be a length)
GUESS0_STUB = 1.35


def _forecast_layout(fig, ax, handles, labels, notes) -> None:
    """The legend below the axes in as many columns as fit; tick labels and the seconds above the bars upright
    where they fit their bar's pitch, turned 90° where not; the axis raised so no note is cut at its top."""
    r = fig.canvas.get_renderer()
    width = fig.get_figwidth() * fig.dpi
    for ncol in range(len(handles), 0, -1):
        legend = fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=ncol, frameon=False)
        if legend.get_window_extent(r).width <= 0.98 * width or ncol == 1:
            break
        legend.remove()
    grow = legend.get_window_extent(r).height / fig.dpi + 0.1
    fig.set_figheight(fig.get_figheight() + grow)
    rect = (0, (grow + 0.05) / fig.get_figheight(), 1, 1)
    fig.tight_layout(rect=rect)
    n = len(ax.get_xticks())
    pitch = ax.get_window_extent(r).width / max(n, 1)
    ticks = ax.get_xticklabels()
    if max((t.get_window_extent(r).width for t in ticks), default=0) > 0.9 * pitch:
        ax.tick_params(axis="x", labelrotation=90)
    if max((t.get_window_extent(r).width for t in notes), default=0) > 0.95 * pitch:
        for t in notes:
            t.set_rotation(90)
    fig.tight_layout(rect=rect)
    for _ in range(3):  # a note cut at the top: raise the axis by the part cut off
        box = ax.get_window_extent(r)
        over = max((t.get_window_extent(r).y1 for t in notes), default=0) - box.y1
        if over <= 0:
            break
        low, high = ax.get_ylim()
        ax.set_ylim(low, high * (high / low) ** ((over + 4) / box.height))


def bar_baseline(rel: np.ndarray, well_pct: float) -> float:
    """The log axis's floor the bars start from: a power of ten below every finite relative SE and the line."""
    finite = rel[np.isfinite(rel) & (rel > 0)]
    low = min(float(finite.min()) if finite.size else well_pct, well_pct)
    return float(10.0 ** np.floor(np.log10(low) - 0.5))


# `plot_dynamic_fit`: at most this many points per drawn curve (the recording's own rate when it has fewer)
MAX_DRAWN_POINTS = 4000


def drawing_step(samples: int, fit_step: int, max_points: int = MAX_DRAWN_POINTS) -> int:
    """The step at which `plot_dynamic_fit`'s curves are sampled: every sample where at most `max_points` are
    left, never coarser than the fit's own decimation `fit_step` (which keeps the filtered band)."""
    return max(1, min(int(fit_step), -(-int(samples) // max_points)))


def _pct_text(pct: float | None) -> str:
    return "its RMS 0" if pct is None else f"{pct:.1f} % of its RMS"  # as `identify dynamic` prints it


def dynamic_fit_figure(
    *,
    robot: str,
    rows: list[str],
    units: list[str],
    t: np.ndarray,
    predicted: np.ndarray,
    measured: np.ndarray,
    rmse: list[float],
    relative_pct: list[float | None],
    total_pct: float | None,
    drawn: str,
    validation: bool,
    more_fitted: int,
    edge_s: float,
    cutoff_hz: float,
    gap_factor: float,
):
    """Predicted and measured (filtered) efforts or board wrench of one recording against its time, one panel per
    row (`rows` names, `units` theirs), each with a thin panel of its residual (measured − predicted) below; a gap
    in the recording (a step over `gap_factor` × the median) stays a gap. The numbers are the ones reported (`rmse`
    per row in its unit, `relative_pct` of its measured RMS, `total_pct` pooled), computed on the fit's rows; the
    worst row's label in red. `drawn`: the recording drawn, the validation one (`validation`) or the first fitted
    (`more_fitted` fitted besides, not drawn); `edge_s` s at each end of each piece are not drawn, as the fit drops
    them (the zero-phase filter's ends at `cutoff_hz`). Returns the figure (not saved)."""
    from matplotlib.gridspec import GridSpec

    from identify.delay import gaps_after

    t = np.asarray(t, float)
    jumps = gaps_after(t, gap_factor) + 1 if len(t) > 2 else []  # a gap stays a gap
    t, pred, meas = (np.insert(np.asarray(a, float), jumps, np.nan, axis=0) for a in (t, predicted, measured))
    n = len(rows)
    rel = [-1.0 if r is None else r for r in relative_pct]
    worst = int(np.argmax(rel)) if max(rel) >= 0 else -1
    tick = plt.rcParams["ytick.labelsize"]
    fig = plt.figure(figsize=(11, 2.4 * n + 1.3))
    grid = GridSpec(2 * n, 1, figure=fig, height_ratios=[3.0, 1.2] * n, hspace=0.12)
    first = None
    for j in range(n):
        ax = fig.add_subplot(grid[2 * j], sharex=first)
        first = first or ax
        res = fig.add_subplot(grid[2 * j + 1], sharex=first)
        ax.plot(t, meas[:, j], lw=1.0, label="measured (filtered)")
        ax.plot(t, pred[:, j], lw=1.0, ls="--", label="predicted")
        res.plot(t, meas[:, j] - pred[:, j], lw=0.8, color="C3", label="measured − predicted")
        res.axhline(0.0, color="gray", lw=0.6)
        ax.margins(y=0.3)  # room for the numbers' box and the legend above the curves
        bad = j == worst and n > 1
        style = {"color": "C3", "fontweight": "bold"} if bad else {}
        ax.set_ylabel(f"{rows[j]}\n[{units[j]}]", fontsize=tick, **style)
        res.set_ylabel("resid.", fontsize=tick)
        ax.text(0.01, 0.95, f"RMS error {rmse[j]:.3g} {units[j]} ({_pct_text(relative_pct[j])})"
                + (": the worst row" if bad else ""), transform=ax.transAxes, va="top", fontsize=tick,
                bbox={"boxstyle": "round", "fc": "white", "alpha": 0.8, "ec": "C3" if bad else "0.7"}, **style)  # fmt: skip
        for a in (ax, res):
            a.grid(alpha=0.3)
            a.tick_params(labelbottom=False)
        if j == 0:
            handles = ax.get_legend_handles_labels()[0] + res.get_legend_handles_labels()[0]
            ax.legend(handles=handles, fontsize=8, loc="upper right", ncol=3)
    res.tick_params(labelbottom=True)
    res.set_xlabel(f"t [s] (the first and last {edge_s:.3g} s of each recording piece are not drawn: the fit drops "
                   f"them too, the zero-phase {cutoff_hz:.3g} Hz filter's ends)")  # fmt: skip
    pooled = "" if total_pct is None else f"RMS error {total_pct:.2f} % of the measured RMS"
    if worst >= 0 and n > 1:
        pooled += f"{'; ' if pooled else ''}worst row {rows[worst]}: {_pct_text(relative_pct[worst])}"
    drawn = Path(drawn).name
    what = (
        f"validation on {drawn}"
        if validation
        else f"fit of {drawn}" + (f" (+{more_fitted} more fitted, not drawn)" if more_fitted else "")
    )
    fig.suptitle(f"{robot}: {what}: {pooled or 'measured all 0'}", fontsize=11)
    fig.subplots_adjust(
        left=0.1, right=0.98, top=1 - 0.55 / fig.get_figheight(), bottom=0.55 / fig.get_figheight()
    )
    return fig


def plot_dynamic_fit(out: str | Path, **figure) -> Path:
    """`dynamic_fit_figure` written to `out` (its suffix picks the format)."""
    return save_figure(dynamic_fit_figure(**figure), out)
