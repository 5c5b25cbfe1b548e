"""Figures for static identification: CoP residuals per posture (as the thesis's Fig. 4.13)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from formats.atomic import write_atomic  # noqa: E402


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
    out = Path(out)
    try:
        write_atomic(out, lambda tmp: fig.savefig(tmp, dpi=120), "figure")
    finally:
        plt.close(fig)
    return out
