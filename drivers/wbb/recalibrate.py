"""Per-cell recalibration from a known weight placed over each cell in turn (after taring).

A weight right above a cell loads only that cell, so each cell's gain follows from one placement:
gain = known kg / tared reading (least squares when several loads are used).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drivers.wbb.protocol import CELLS
from formats.errors import DeviceError


def recalibrate_board(
    board, put_weight: Callable[[int | None], None], weight_kg: float, seconds: float = 1.0
):
    """`put_weight(cell)` places the weight over cell index 0..3 (TR, BR, TL, BL), `put_weight(None)` removes
    it. Returns the per-cell gains (already applied to the board's calibration)."""
    loads = []
    try:
        for c in range(4):
            put_weight(c)
            board.collect(0.2 * seconds)  # let it settle
            samples = board.collect(seconds)
            if not samples:
                raise DeviceError(f"board {board.name}: no data with the weight on cell {CELLS[c]}")
            true = np.zeros(4)
            true[c] = weight_kg
            loads.append((true, np.array([s.raw for s in samples], float)))
    finally:
        put_weight(None)
    return board.calibration.recalibrate(loads)
