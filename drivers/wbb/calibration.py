"""Raw cell value -> kg: factory calibration (0/17/34 kg), piecewise or linear fit, tare and recalibration."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

REF_KG = np.array([0.0, 17.0, 34.0])
# Loads whose readings are this ill-conditioned (one near each cell gives about 1, 10 % of it on a neighbour 1.2)
# do not tell the cells apart: a few grams of noise would move the gains by percent.
MAX_COND = 10.0
# counts per 17 kg a real cell spans (~1700–1800): outside these, the block is no factory calibration
MIN_SPAN, MAX_SPAN = 200.0, 20000.0
CELL_NAMES = ("TR", "BR", "TL", "BL")


@dataclass
class Calibration:
    """Per cell (TR, BR, TL, BL) raw readings at 0, 17, 34 kg, plus tare and gain corrections.

    `method` is "piecewise" (0-17 and 17-34 kg segments, extrapolated outside) or "linear" (least-squares
    line through the three points, as the thesis describes). `offset_kg` is subtracted after conversion
    (tare); `gain` multiplies the tared value (per-cell recalibration from known weights).
    """

    raw: np.ndarray  # (3, 4)
    method: str = "piecewise"
    offset_kg: np.ndarray = field(default_factory=lambda: np.zeros(4))
    gain: np.ndarray = field(default_factory=lambda: np.ones(4))
    gain_se: np.ndarray | None = None  # the gains' standard errors from the recalibration's readings
    offset_se: np.ndarray | None = None  # the tare's standard errors (kg) from the scatter of its readings
    noise_sd: np.ndarray | None = None  # kg: each cell's reading-to-reading SD in the tare (its noise)
    # relative: the scale the recalibration's tare error puts on every gain
    tare_scale_se: float | None = None

    def __post_init__(self) -> None:
        self.raw = np.asarray(self.raw, dtype=float).reshape(3, 4)
        steps = np.diff(self.raw, axis=0)  # (2, 4): counts from 0 to 17 kg and from 17 to 34 kg
        for i, c in enumerate(CELL_NAMES):
            vals = "/".join(f"{v:g}" for v in self.raw[:, i])
            if np.any(steps[:, i] <= 0):
                raise ValueError(f"cell {c}: raw values {vals} at 0/17/34 kg do not increase with load")
            if np.any(steps[:, i] < MIN_SPAN) or np.any(steps[:, i] > MAX_SPAN):
                raise ValueError(f"cell {c}: raw values {vals} at 0/17/34 kg span {steps[0, i]:g}/{steps[1, i]:g} "
                                 f"counts per 17 kg, outside [{MIN_SPAN:g}, {MAX_SPAN:g}] (real cells: ~1700)")  # fmt: skip
        if self.method not in ("piecewise", "linear"):
            raise ValueError(f"unknown calibration method {self.method!r}")
        r = self.raw
        self._lo_slope = 17.0 / (r[1] - r[0])
        self._hi_slope = 17.0 / (r[2] - r[1])
        a = np.stack([r, np.ones_like(r)], axis=1)  # (3, 2, 4)
        self._lin = np.array([np.linalg.lstsq(a[:, :, i], REF_KG, rcond=None)[0] for i in range(4)])  # (4, 2)

    def untared_kg(self, raw: np.ndarray) -> np.ndarray:
        """Factory conversion only; raw shape (..., 4)."""
        raw = np.asarray(raw, dtype=float)
        if self.method == "linear":
            return raw * self._lin[:, 0] + self._lin[:, 1]
        r = self.raw
        lo = (raw - r[0]) * self._lo_slope
        hi = 17.0 + (raw - r[1]) * self._hi_slope
        return np.where(raw < r[1], lo, hi)

    def kg(self, raw: np.ndarray) -> np.ndarray:
        """Calibrated, tared per-cell load in kg; raw shape (..., 4)."""
        return (self.untared_kg(raw) - self.offset_kg) * self.gain

    def raw_for(self, kg: np.ndarray) -> np.ndarray:
        """Inverse of the factory conversion (the emulator uses it to produce raw values)."""
        kg = np.asarray(kg, dtype=float)
        r = self.raw
        if self.method == "linear":
            return (kg - self._lin[:, 1]) / self._lin[:, 0]
        lo = r[0] + kg / self._lo_slope
        hi = r[1] + (kg - 17.0) / self._hi_slope
        return np.where(kg < 17.0, lo, hi)

    def tare(self, raw_samples: np.ndarray) -> None:
        """Zero-load offset: mean factory reading over samples taken with nothing on the board."""
        raw_samples = np.asarray(raw_samples, dtype=float).reshape(-1, 4)
        if len(raw_samples) == 0:
            raise ValueError("tare needs at least one sample")
        kg = self.untared_kg(raw_samples)
        self.offset_kg = kg.mean(axis=0)
        self.noise_sd = kg.std(axis=0, ddof=1) if len(kg) > 1 else None
        self.offset_se = self.noise_sd / np.sqrt(len(kg)) if len(kg) > 1 else None

    def recalibrate(self, loads: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """Per-cell gains from known loads: pairs (the load per cell, kg (4,): only its total counts, not where it
        stands; raw samples (n, 4)), one load near each cell at least.

        Wherever a load stands on the board, the cells carry all of it between them: Σ_c gain_c · tared_c = the
        load's total, one equation per load, solved by least squares. A weight a little off its cell's centre,
        its neighbour carrying part of it, thus gives the gains a weight right above the cell would. Returns and
        applies the gains. `gain_se`: each gain's SE from the scatter of its readings (independent reports; each
        gain's own, nearly independent of the others'); `tare_scale_se`: the relative SD of the scale the tare's
        error puts on all four gains alike (every equation shares it)."""
        rows, totals, tared_all = [], [], []
        carried = np.zeros(4, bool)
        for true_kg, raw in loads:
            true_kg = np.asarray(true_kg, float)
            tared = self.untared_kg(np.asarray(raw, float).reshape(-1, 4)) - self.offset_kg
            carried |= true_kg > 0
            rows.append(tared.mean(axis=0))
            totals.append(true_kg.sum())
            tared_all.append(tared)
        if not carried.all():
            raise ValueError("recalibration needs a known load on every cell")
        R, w = np.array(rows), np.array(totals)
        if len(R) < 4 or np.linalg.cond(R) > MAX_COND:
            raise ValueError(
                "the loads' readings do not tell the cells apart: place the weight near each cell in turn"
            )
        pinv = np.linalg.pinv(R)
        self.gain = pinv @ w
        # each equation's error: the scatter of its gain-weighted total over its reports (cells' correlations in)
        eq_var = np.array([(t @ self.gain).var(ddof=1) / len(t) if len(t) > 1 else 0.0 for t in tared_all])
        self.gain_se = np.sqrt((pinv**2) @ eq_var)
        # the tare's error −Σ g_c ε_c is one offset on every equation: it moves the gains by −pinv·1·Σ g ε, close to
        # a common relative scale Σ g ε / the load
        self.tare_scale_se = (
            None if self.offset_se is None else float(np.linalg.norm(self.gain * self.offset_se) / np.mean(w))
        )
        return self.gain
