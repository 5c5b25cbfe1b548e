"""Per-cell recalibration from a known weight placed over each cell in turn (after taring).

Wherever the weight stands, the cells' tared readings times their gains sum to it: one placement near each cell
gives the four gains (`Calibration.recalibrate`), a weight a little off its cell's centre included.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drivers.wbb.board import collect_all, tare_all
from drivers.wbb.protocol import CELLS
from formats.board_gains import BoardGains
from formats.errors import DeviceError


class NoLoadChange(DeviceError):
    """With the weight asked over a cell, that cell of a board read no load beyond its noise (nothing placed
    there: not yet placed, or still over the cell before)."""


NOISE_SDS = 5.0  # a cell's load changed if its tared mean is beyond this many of its tare's reading SDs
MIN_CHANGE_KG = 0.05  # … and beyond this (a noise-free or single-reading tare has no SD to go by)


def _tared_over_noise(board, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's mean tared reading (kg) and its noise threshold: NOISE_SDS of the tare's reading SD, at least
    MIN_CHANGE_KG."""
    cal = board.calibration
    tared = (cal.untared_kg(raw) - cal.offset_kg).mean(axis=0)[:4]
    noise = np.zeros(4) if cal.noise_sd is None else np.asarray(cal.noise_sd, float)[:4]
    return tared, np.maximum(NOISE_SDS * noise, MIN_CHANGE_KG)


def _changed(tared: np.ndarray, limit: np.ndarray) -> bool:
    """Whether any cell's mean tared reading (`_tared_over_noise`) moved beyond its noise."""
    return bool(np.any(np.abs(tared) > limit))


# of the weight: the asked cell carries more, and the weight is on it. A weight still over the cell before puts
# well under this on its neighbour (more than OFF_CELL_SHARE is refused anyway), and a cell whose gain is at the
# accepted bound 0.5 still reads half the weight
PLACED_SHARE = 0.3


def _placed(tared: np.ndarray, limit: np.ndarray, cell: int, weight_kg: float) -> bool:
    """Whether the weight is over `cell`: its tared load (`_tared_over_noise`) rose beyond its noise and
    PLACED_SHARE of the weight. A load elsewhere (the weight still over the cell before, Enter pressed too early)
    does not count."""
    return bool(tared[cell] > max(limit[cell], PLACED_SHARE * weight_kg))


def recalibrate_boards(
    boards: list,
    put_weight: Callable[[int | None], None],
    weight_kg: float,
    seconds: float = 1.0,
    retry: Callable[[str], None] | None = None,
    tries: int = 3,
) -> list[np.ndarray]:
    """`put_weight(cell)` places a weight over cell index 0..3 (TR, BR, TL, BL) of every board (one weight per
    board, all read at once), `put_weight(None)` removes them. Returns each board's per-cell gains (already
    applied to its calibration).

    A board whose asked cell's load did not rise beyond its noise (the weight not placed, or still over the cell
    before) is `NoLoadChange`; with `retry`, it is first called with the message (a prompt: place the weight,
    press Enter) and the cell read again, up to `tries` readings in all."""
    loads: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in boards]
    try:
        for c in range(4):
            put_weight(c)
            for attempt in range(1, tries + 1):
                collect_all(boards, 0.2 * seconds)  # let it settle
                raws = []
                for board, samples in zip(boards, collect_all(boards, seconds), strict=True):
                    if not samples:
                        raise DeviceError(f"board {board.name}: no data with the weight on cell {CELLS[c]}")
                    raws.append(np.array([s.raw for s in samples], float))
                read = [(b, *_tared_over_noise(b, raw)) for b, raw in zip(boards, raws, strict=True)]
                idle = [(b, tared, lim) for b, tared, lim in read if not _placed(tared, lim, c, weight_kg)]
                if not idle:
                    off = [m for b, tared, _ in read if (m := _off_cell(b.name, tared, c, weight_kg))]
                    if not off:
                        break
                    # the weight is not where the person was asked to put it
                    if retry is None or attempt == tries:
                        raise DeviceError(off[0])
                    retry(f"{off[0]}, then press Enter ")
                    continue
                on = f"board{'s' if len(idle) > 1 else ''} {', '.join(b.name for b, _, _ in idle)}"
                if any(_changed(tared, lim) for _, tared, lim in idle):  # a load, but not over the asked cell
                    before = f": is the weight still over cell {CELLS[c - 1]}?" if c else ""
                    what = f"no load on cell {CELLS[c]} of {on} (within its noise{before})"
                else:
                    what = f"no load change on {on} (every cell within its noise)"
                place = f"place the {weight_kg:g} kg weight over cell {CELLS[c]}"
                if retry is None or attempt == tries:
                    raise NoLoadChange(f"{what}: {place} when asked (nothing was written)")
                retry(f"{what}: {place}, then press Enter ")
            true = np.zeros(4)
            true[c] = weight_kg
            for got, raw in zip(loads, raws, strict=True):
                got.append((true, raw))
    finally:
        put_weight(None)
    try:
        return [board.calibration.recalibrate(got) for board, got in zip(boards, loads, strict=True)]
    except ValueError as exc:  # a cell that read nothing at all
        raise DeviceError(f"recalibration: {exc}") from None


def tare_and_recalibrate(
    boards: list,
    put_weight: Callable[[int | None], None],
    weight_kg: float,
    seconds: float,
    tare_s: float,
    retry: Callable[[str], None] | None = None,
) -> list[np.ndarray]:
    """The boards tared side by side from `tare_s` of empty readings, then recalibrated (`recalibrate_boards`)."""
    tare_all(boards, tare_s)
    return recalibrate_boards(boards, put_weight, weight_kg, seconds, retry)


OFF_CELL_SHARE = 0.1  # of the weight: more on another cell, and the weight was not right above its own


def _off_cell(name: str, tared: np.ndarray, cell: int, weight_kg: float) -> str | None:
    """A weight right above one cell loads that cell alone: what is wrong when another cell carries more than
    OFF_CELL_SHARE of it too, naming that cell; None when right. The gains' equations hold wherever the weight
    stands, but a weight that far off is not where the person was asked to put it (placed on the wrong cell, or
    while the board was being moved). `tared`: board `name`'s mean tared cell loads (`_tared_over_noise`)."""
    others = [k for k in range(4) if k != cell]
    worst = max(others, key=lambda k: abs(tared[k]))
    if abs(tared[worst]) <= OFF_CELL_SHARE * weight_kg:
        return None
    return (f"board {name}: with the weight over cell {CELLS[cell]}, cell {CELLS[worst]} reads "
            f"{tared[worst]:+.2f} kg: place the weight right above cell {CELLS[cell]}'s foot")  # fmt: skip


def check_gains_for(names: list[str], gains: BoardGains) -> None:
    """Refuse gains measured on other boards than these (driver names, in order; DeviceError): before a run
    opens anything (the names `drivers.wbb.open.board_drivers` gives), and when they are applied."""
    if [g.casefold() for g in gains.boards] != [n.casefold() for n in names]:  # bt:aa:… is bt:AA:…
        raise DeviceError(
            f"the board gains were measured on {', '.join(gains.boards)}, these boards are {', '.join(names)}: "
            "calibrate these (`poise boards calibrate`)"
        )


def apply_cell_gains(boards: list, gains: BoardGains) -> None:
    """Set each board's per-cell gains from a board-gains file measured on the same boards (matched by name, in
    order): a file of other boards is refused, not applied to the wrong cells."""
    check_gains_for([b.name for b in boards], gains)
    for board, g in zip(boards, gains.gains, strict=True):
        board.calibration.gain = np.array(g, dtype=float)
