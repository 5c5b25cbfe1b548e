"""Figures for identification: CoP residuals per posture (as the thesis's Fig. 4.13); a plan's forecast relative SEs."""

from __future__ import annotations

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


def plot_forecast(
    symbols: list[str],
    rel_se_pct: np.ndarray,
    needed_s: np.ndarray,
    duration_s: float,
    well_pct: float,
    practical_s: float,
    out: str | Path,
    title: str = "",
    also: tuple[str, np.ndarray] | None = None,
) -> Path:
    """Forecast relative SE per base parameter (log scale) against the `well_pct` line, coloured by verdict:
    determined as planned, determined if the motion is repeated up to `practical_s`, beyond. `also`: (label,
    relative SEs) of another design, drawn as markers over the bars."""
    rel = np.asarray(rel_se_pct, dtype=float)
    need = np.asarray(needed_s, dtype=float)
    colour = np.where(rel < well_pct, "tab:green", np.where(need <= practical_s, "tab:orange", "tab:red"))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.28 * len(symbols) + 2), 4.2))
    x = np.arange(len(symbols))
    base = bar_baseline(rel, well_pct)
    finite = np.isfinite(rel)
    ax.bar(x, np.where(finite, rel - base, np.nan), bottom=base, color=colour)
    top = max(float(np.nanmax(np.where(finite, rel, np.nan))) if finite.any() else well_pct, well_pct) * 3
    if not finite.all():  # a zero guess: a relative SE of a parameter guessed 0 is undefined
        ax.bar(x[~finite], top - base, bottom=base, color="none", edgecolor="gray", hatch="//", lw=0.5)
    ax.axhline(well_pct, color="k", lw=1.0, ls="--")
    if also is not None:
        ax.plot(x, np.asarray(also[1], dtype=float), "k_", ms=9, mew=2, label=also[0])
    ax.set_yscale("log")
    ax.set_ylim(base, top)
    ax.set_xticks(x, symbols, rotation=90, fontsize=7)
    ax.set_ylabel(f"forecast relative SE [%] (bars from {base:g} %)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in ("tab:green", "tab:orange", "tab:red")]
    labels = [f"< {well_pct:g} % in {duration_s:.0f} s", f"< {well_pct:g} % if repeated ≤ {practical_s:g} s",
              f"beyond {practical_s:g} s"]  # fmt: skip
    if not finite.all():
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="none", edgecolor="gray", hatch="//"))
        labels.append("guess 0: relative SE undefined")
    if also is not None:
        handles.append(plt.Line2D([], [], color="k", marker="_", ls="", ms=9, mew=2))
        labels.append(also[0])
    ax.legend(handles, labels, fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, axis="y")
    ax.set_title(title or "What the plan will determine (noise alone)", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, out, dpi=120)


def bar_baseline(rel: np.ndarray, well_pct: float) -> float:
    """The log axis's floor the bars start from: a power of ten below every finite relative SE and the line."""
    finite = rel[np.isfinite(rel) & (rel > 0)]
    low = min(float(finite.min()) if finite.size else well_pct, well_pct)
    return float(10.0 ** np.floor(np.log10(low) - 0.5))
