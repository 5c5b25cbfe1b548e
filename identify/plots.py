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
) -> Path:
    """x/y CoP error per posture (mm) of the estimate (and a reference model), placements separated."""
    fig, axes = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True)
    idx = np.arange(len(residuals))
    for k, ax in enumerate(axes):
        ax.plot(idx, residuals[:, k] * 1000, "o-", ms=3, label="estimated model")
        if reference is not None:
            ax.plot(idx, reference[:, k] * 1000, "s--", ms=3, alpha=0.7, label=reference_name)
        for b in np.flatnonzero(np.diff(placement)) + 0.5:
            ax.axvline(b, color="k", lw=0.8)
        ax.axhline(0, color="gray", lw=0.5)
        ax.set_ylabel(f"{'xy'[k]} error [mm]")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right")
    axes[1].set_xlabel("posture (vertical lines: new foot placement)")
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
    ax.bar(x, np.where(np.isfinite(rel), rel, np.nan), color=colour)
    ax.axhline(well_pct, color="k", lw=1.0, ls="--")
    if also is not None:
        ax.plot(x, np.asarray(also[1], dtype=float), "k_", ms=9, mew=2, label=also[0])
    ax.set_yscale("log")
    ax.set_xticks(x, symbols, rotation=90, fontsize=7)
    ax.set_ylabel("forecast relative SE [%]")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in ("tab:green", "tab:orange", "tab:red")]
    labels = [f"< {well_pct:g} % in {duration_s:.0f} s", f"< {well_pct:g} % if repeated ≤ {practical_s:g} s",
              f"beyond {practical_s:g} s"]  # fmt: skip
    if also is not None:
        handles.append(plt.Line2D([], [], color="k", marker="_", ls="", ms=9, mew=2))
        labels.append(also[0])
    ax.legend(handles, labels, fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, axis="y")
    ax.set_title(title or "What the plan will determine (noise alone)", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, out, dpi=120)
