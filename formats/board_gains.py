"""Balance-board cell gains (JSON, format "poise board gains"): each board's per-cell correction, measured once
with a known weight (`poise boards calibrate`) and applied by every run (`poise run --board-gains`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.atomic import write_text_atomic
from formats.errors import DataError
from formats.json_format import read_json

FORMAT = "poise board gains"
VERSION = 1
CELLS = ("TR", "BR", "TL", "BL")
GAIN_RANGE = (0.5, 2.0)  # a cell reading half or twice the load is a broken cell or a misplaced weight


@dataclass(frozen=True)
class BoardGains:
    """Per board (board 0 first, under the base sole): its name as the driver reports it and four gains that
    multiply the tared cell loads (TR, BR, TL, BL); `weight_kg` is the known weight they were measured with."""

    boards: tuple[str, ...]
    gains: np.ndarray  # (boards, 4)
    weight_kg: float
    endpoint: str = ""
    gain_se: np.ndarray | None = None  # (boards, 4): the gains' standard errors from their readings, if known
    # kg: the known weight's own uncertainty, if stated: a scale error common to every gain (`identify dynamic`)
    weight_sd_kg: float | None = None
    # (boards,): relative SD of the scale each board's calibration tare put on its four gains alike, if known
    tare_scale_se: np.ndarray | None = None

    def __post_init__(self) -> None:
        g = np.asarray(self.gains, dtype=float)
        if g.ndim != 2 or g.shape != (len(self.boards), 4):
            raise DataError(f"board gains: {len(self.boards)} board(s) need {len(self.boards)} × 4 gains, "
                            f"got shape {g.shape}")  # fmt: skip
        lo, hi = GAIN_RANGE
        if not np.all(np.isfinite(g)) or np.any((g < lo) | (g > hi)):
            bad = [f"{b} {c} {v:g}" for b, row in zip(self.boards, g, strict=True)
                   for c, v in zip(CELLS, row, strict=True) if not (lo <= v <= hi)]  # fmt: skip
            raise DataError(f"board gains must be finite and within [{lo:g}, {hi:g}] (a cell reading half or twice "
                            f"its load is broken, or the weight was not over it): {', '.join(bad)}")  # fmt: skip
        if not (np.isfinite(self.weight_kg) and self.weight_kg > 0):
            raise DataError(f"board gains: weight_kg must be a positive number, got {self.weight_kg}")
        object.__setattr__(self, "gains", g)
        check_weight_sd(self.weight_kg, self.weight_sd_kg)
        if self.gain_se is not None:
            se = np.asarray(self.gain_se, dtype=float)
            if se.shape != g.shape or not np.all(np.isfinite(se) & (se >= 0)):
                raise DataError(f"board gains: gain_se must be {g.shape[0]} × 4 non-negative numbers")
            object.__setattr__(self, "gain_se", se)
        if self.tare_scale_se is not None:
            ts = np.asarray(self.tare_scale_se, dtype=float)
            if ts.shape != (g.shape[0],) or not np.all(np.isfinite(ts) & (ts >= 0)):
                raise DataError(
                    f"board gains: tare_scale_se must be one non-negative number per board ({g.shape[0]})"
                )
            object.__setattr__(self, "tare_scale_se", ts)


def check_weight_sd(weight_kg: float, sd_kg: float | None) -> None:
    """A known weight's stated uncertainty: none, or a number in [0, 10 % of the weight) kg (DataError)."""
    if sd_kg is not None and not (np.isfinite(sd_kg) and 0 <= sd_kg < 0.1 * weight_kg):
        raise DataError(
            f"the weight's uncertainty must be in [0, 10 % of its {weight_kg:g} kg), got {sd_kg} kg"
        )


def save_board_gains(bg: BoardGains, path: str | Path) -> None:
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "weight_kg": bg.weight_kg,
        **({} if bg.weight_sd_kg is None else {"weight_sd_kg": bg.weight_sd_kg}),
        "endpoint": bg.endpoint,
        "cells": list(CELLS),
        "boards": [
            {"board": b, "gain": [float(v) for v in g]}
            | ({} if bg.gain_se is None else {"gain_se": [float(v) for v in bg.gain_se[k]]})
            | ({} if bg.tare_scale_se is None else {"tare_scale_se": float(bg.tare_scale_se[k])})
            for k, (b, g) in enumerate(zip(bg.boards, bg.gains, strict=True))
        ],
    }
    write_text_atomic(path, json.dumps(doc, indent=2) + "\n", "board gains")


def load_board_gains(path: str | Path) -> BoardGains:
    """Read and validate a board-gains file (one clear DataError naming what is wrong)."""
    d = read_json(path, "poise board gains")
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise DataError(f"{path}: not a board-gains file (format {FORMAT!r})")
    if d.get("version") != VERSION:
        raise DataError(f"{path}: board-gains version {d.get('version')!r}; this poise reads {VERSION}")
    try:
        if list(d.get("cells", CELLS)) != list(CELLS):
            raise ValueError(f"cells {d.get('cells')} (expected {list(CELLS)})")
        boards = tuple(str(b["board"]) for b in d["boards"])
        rows = [b["gain"] for b in d["boards"]]
        if not all(isinstance(r, list) and len(r) == 4 for r in rows):
            raise ValueError("gain: each board's is a list of 4 numbers (TR, BR, TL, BL)")
        gains = np.array([[float(v) for v in r] for r in rows], dtype=float)
        ses = [b.get("gain_se") for b in d["boards"]]
        if any(x is not None for x in ses) and not all(isinstance(x, list) and len(x) == 4 for x in ses):
            raise ValueError("gain_se: each board's is a list of 4 numbers, or none has one")
        gain_se = np.array([[float(v) for v in x] for x in ses]) if ses[0] is not None else None
        scales = [b.get("tare_scale_se") for b in d["boards"]]
        if any(x is not None for x in scales) and not all(isinstance(x, int | float) for x in scales):
            raise ValueError("tare_scale_se: each board's is a number, or none has one")
        tare_scale = None if scales[0] is None else np.array(scales, dtype=float)
        weight = float(d["weight_kg"])
        weight_sd = None if d.get("weight_sd_kg") is None else float(d["weight_sd_kg"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: malformed board gains (missing or invalid {exc})") from None
    if not boards:
        raise DataError(f"{path}: no boards")
    try:
        return BoardGains(boards, gains, weight, str(d.get("endpoint", "")), gain_se, weight_sd, tare_scale)
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from None
