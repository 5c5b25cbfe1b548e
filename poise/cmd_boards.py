"""`poise boards list`: the boards (and candidate endpoints) found on this host; `poise boards read`: live per-cell
load, total and CoP of the balance boards; `poise boards calibrate`: each cell's gain from a known weight, saved for
the runs (`poise run --board-gains`)."""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager

import numpy as np
from rich.live import Live
from rich.table import Table

from drivers.wbb.geometry import MIN_COP_KG, cell_positions, cop
from formats.errors import DataError, DeviceError
from formats.plan import Placement
from poise import argtypes as at
from poise.output import console, draws_progress, err_console, print_json

# After a tare, how long `boards read` waits for the load to arrive and stand still before its window.
LOAD_WAIT_S = 20.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("boards", help="balance-board utilities")
    s = p.add_subparsers(dest="boards_cmd", metavar="SUBCOMMAND")
    s.required = True
    ls = s.add_parser("list", help="find the boards on this host: the endpoints to pass to --boards")
    ls.add_argument("--json", action="store_true", help="print what was found as a JSON list")
    ls.set_defaults(func=cmd_list)
    r = s.add_parser("read", help="live per-cell kg, total and CoP of each board")
    r.add_argument(
        "--boards",
        type=at.boards_endpoint,
        required=True,
        help="sim | bt:MAC,MAC | evdev:PATH,PATH | serial:PORT,PORT",
    )
    r.add_argument("--seconds", type=at.positive, default=5.0, help="how long to read [s] (default 5)")
    r.add_argument("--tare", type=at.nonnegative, default=0.0, metavar="S",
                   help="tare over S s first, the boards empty (default 0: no tare)")  # fmt: skip
    r.add_argument("--wait-s", type=at.nonnegative, default=LOAD_WAIT_S, metavar="S",
                   help="after --tare: wait up to S s for the load to arrive and stand still before reading "
                        f"(0: read at once; default {LOAD_WAIT_S:g})")  # fmt: skip
    r.add_argument("--board-gains", type=at.text_file, metavar="FILE",
                   help="per-cell gains measured on these boards (`poise boards calibrate`)")  # fmt: skip
    r.add_argument("--json", action="store_true",
                   help="print the means (and SDs) over the whole read as JSON at the end")  # fmt: skip
    r.set_defaults(func=cmd_read)
    c = s.add_parser(
        "calibrate", help="each cell's gain from a known weight placed over it in turn (file for runs)"
    )
    c.add_argument("--boards", type=at.boards_endpoint, required=True,
                   help="sim | bt:MAC,MAC | evdev:PATH,PATH | serial:PORT,PORT (sim: the emulated boards of "
                        "`poise run --boards sim`)")  # fmt: skip
    c.add_argument("--weight", type=at.number(0.5, 150.0), required=True, metavar="KG",
                   help="the known weight [kg], placed over each cell in turn (one per board, all boards at once)")  # fmt: skip
    c.add_argument("--weight-sd", type=at.nonnegative, default=None, metavar="KG",
                   help="the known weight's own uncertainty [kg] (its class or certificate), a scale error on every "
                        "gain that `identify dynamic` adds to the SEs; without it, none is assumed and it says so")  # fmt: skip
    c.add_argument("--seconds", type=at.positive, default=2.0, help="reading time per cell [s] (default 2)")
    c.add_argument("--tare-s", type=at.positive, default=4.0, help="tare time, boards empty [s] (default 4)")
    c.add_argument("--out", type=at.out_file, required=True, help="board-gains file to write (JSON)")
    at.add_force(c)
    c.add_argument("--json", action="store_true", help="print the gains as JSON")
    c.set_defaults(func=cmd_calibrate)


NOTHING_FOUND = (
    "no balance board found. Check: the board is paired and connected (bluetoothctl; press its red sync button), "
    "the hid-wiimote kernel module is loaded (lsmod | grep hid_wiimote), and you may read /dev/input/event* (the "
    "input group); a serial bridge shows up as a serial port"
)


def cmd_list(args: argparse.Namespace) -> int:
    """The evdev boards, kernel-connected Wii HID devices and serial ports found, as endpoints for --boards."""
    from drivers.wbb import discover

    found = discover.find_boards()
    if args.json:
        print_json([f.as_dict() for f in found])
    elif found:
        t = Table(
            title="balance-board endpoints on this host (pass one to --boards; several: comma-separated)"
        )
        t.add_column("endpoint", overflow="fold")  # every character shown, folded on a narrow terminal
        for c in ("kind", "name", "address"):
            t.add_column(c, no_wrap=True)
        t.add_column("note")
        for f in found:
            t.add_row(f.endpoint, f.kind, f.name, f.address or "—", f.note)
        console.print(t)
    if not discover.boards_found(found):
        err_console.print(NOTHING_FOUND)
    return 0


class _Window:
    """Running mean and SD of every report over the whole reading window (the four cells and their total)."""

    def __init__(self) -> None:
        self.n = 0
        self.mean = np.zeros(5)
        self.m2 = np.zeros(5)
        self.last_total = 0.0  # kg: the latest report's total

    def add(self, samples) -> None:
        if not samples:
            return
        kg = np.array([s.kg for s in samples], float)
        x = np.column_stack([kg, kg.sum(axis=1)])
        self.last_total = float(x[-1, 4])
        k, m = len(x), x.mean(axis=0)
        d = m - self.mean
        n = self.n + k
        self.m2 = self.m2 + ((x - m) ** 2).sum(axis=0) + d**2 * self.n * k / n  # Chan et al.'s merge
        self.mean = self.mean + d * k / n
        self.n = n

    @property
    def sd(self) -> np.ndarray:
        return np.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else np.full(5, np.nan)

    def cop_m(self) -> np.ndarray | None:
        """CoP [m, board frame] of the mean load (`drivers.wbb.geometry.cop`); None when the board carries too
        little to locate one (or no reports)."""
        if not self.n:
            return None
        try:
            return cop(self.mean[:4], cell_positions()).cop
        except DataError:  # below the shared minimum load
            return None


def _battery(b) -> str:
    pct = b.stats.battery_percent
    return "—" if pct is None else str(pct)


# the battery figure is the status report's level byte × 100 / 255, as hid-wiimote reports it: a balance board's
# byte is no calibrated charge level (it reads high whatever the batteries hold)
BATTERY_NOTE = (
    "hid-wiimote battery: the status byte * 100 / 255 as hid-wiimote reports it, not a charge level"
)

# a board whose read got fewer than this share of its nominal rate × the read time is warned of
SHORT_SHARE = 0.8


def _expected(b, span: float) -> int | None:
    """The reports board `b` sends over `span` s at its nominal rate (None: no nominal rate)."""
    return None if b.nominal_hz is None else round(b.nominal_hz * span)


def _few_reports(boards, windows, spans) -> list[dict]:
    """The boards whose read got fewer than SHORT_SHARE of the reports their nominal rate gives over the time
    read (`spans`: s on each board's clock; a board stopped sending, was lost, or reports were lost): board,
    reports, the expected count and the rate. A shortfall within a quarter second of reports is no warning."""
    out = []
    for b, w, span in zip(boards, windows, spans, strict=True):
        if (expected := _expected(b, span)) is None:
            continue
        if w.n < SHORT_SHARE * expected and expected - w.n > 0.25 * b.nominal_hz:
            out.append({"board": b.name, "reports": w.n, "expected": expected, "nominal_hz": b.nominal_hz})
    return out


def _table(boards, windows, window_s: float, tared: bool) -> Table:
    t = Table(title=f"balance boards: means over the whole {window_s:.1f} s read, every report (CoP in each "
                    "board's frame)")  # fmt: skip
    for c in ("board", "TR \\[kg]", "BR \\[kg]", "TL \\[kg]", "BL \\[kg]", "total \\[kg]", "total SD \\[kg]",
              "CoP x \\[mm]", "CoP y \\[mm]", "reports", "bad", "hid-wiimote battery \\[%]"):  # fmt: skip
        t.add_column(c, justify="right")
    no_cop = False
    for b, w in zip(boards, windows, strict=True):
        if not w.n:
            t.add_row(b.name, *["—"] * 8, "0", str(b.stats.bad), _battery(b))
            continue
        cop = w.cop_m()
        no_cop |= cop is None
        xy = ("—", "—") if cop is None else (f"{cop[0] * 1000:.1f}", f"{cop[1] * 1000:.1f}")
        sd = w.sd[4]
        t.add_row(b.name, *(f"{v:.3f}" for v in w.mean[:4]), f"{w.mean[4]:.3f}",
                  "—" if not np.isfinite(sd) else f"{sd:.3f}", *xy, str(w.n), str(b.stats.bad),
                  _battery(b))  # fmt: skip
    notes = ["reports: in this window; bad: since connecting", BATTERY_NOTE]
    if not tared:
        notes.append("untared: each cell includes its zero-load offset (--tare S with the boards empty)")
    if no_cop:
        notes.append(f"CoP —: under {MIN_COP_KG:g} kg on the board, no load to locate")
    t.caption = "; ".join(notes)
    return t


@contextmanager
def opened_boards(spec: str):
    """(started board drivers, the emulated bench serving them or None) for a boards endpoint; `sim`: the
    emulated boards of `poise run --boards sim`, nothing on them. Everything is closed on exit."""
    from drivers.wbb.open import board_drivers, start_all

    world = None
    try:
        if spec == "sim":
            from drivers.config import load_config
            from drivers.emulators.world import SimWorld, WorldOptions
            from robots.registry import get_model

            world = SimWorld(get_model("tulip"), load_config(), WorldOptions())
            drivers = board_drivers("sim", world.board_openers())
        else:
            drivers = board_drivers(spec)
        boards = start_all(drivers)
        try:
            yield boards, world
        finally:
            for b in boards:
                b.close()
    finally:
        if world is not None:
            world.close()


def _report_link(text: str) -> None:
    err_console.print(text)


def cmd_read(args: argparse.Namespace) -> int:
    from drivers.wbb.board import tare_all
    from drivers.wbb.recalibrate import apply_cell_gains
    from drivers.wbb.settle import drifted, wait_for_load
    from formats.board_gains import load_board_gains

    gains = None if args.board_gains is None else load_board_gains(args.board_gains)
    interrupted = False
    lost: DeviceError | None = None
    with opened_boards(args.boards) as (boards, world):
        if gains is not None:
            apply_cell_gains(boards, gains)
        if draws_progress():  # a lost board's reconnect attempts, as they happen
            for b in boards:
                b.on_link = _report_link
        windows = [_Window() for _ in boards]
        began = settled = None
        totals: list[float] = []  # the boards' total at each poll of the window
        live = None
        try:
            if args.tare > 0:
                err_console.print(f"taring over {args.tare:g} s: keep the boards empty …")
                tare_all(boards, args.tare)
                if world is None:
                    then = (f"the {args.seconds:g} s read starts once it stands still; up to {args.wait_s:g} s"
                            if args.wait_s > 0 else f"reading for {args.seconds:g} s")  # fmt: skip
                    err_console.print(f"tared: step on / put the load on now ({then})")
                else:
                    err_console.print("tared: the emulated robot stands on the boards now")
            if world is not None:  # the simulated robot stands on the boards at its zero posture
                world.plant.torque[:] = True
                cfg = world.config
                world.robot.place(Placement(0, (0.0, 0.13, 0.0)).left_foot, cfg.right_board, cfg.left_board)
            if args.tare > 0 and args.wait_s > 0:  # the read holds the load standing, not the stepping on
                settled = wait_for_load(boards, args.wait_s)
                err_console.print(
                    f"no load held still within {args.wait_s:g} s: reading the boards as they are"
                    if settled is None
                    else f"the load stands still ({settled:.1f} s after the tare): reading for {args.seconds:g} s"
                )
            for b in boards:
                b.drain()  # the window starts now (the tare's reports are not in it)
            began = time.monotonic()
            starts = [b.clock.now() for b in boards]  # each board's count is over its own clock's time
            spans = [0.0] * len(boards)
            end = began + args.seconds
            if draws_progress():  # the live table on stderr, a terminal (stdout keeps the table or the JSON)
                live = Live(console=err_console, refresh_per_second=8, transient=True)
                live.start()
            while time.monotonic() < end:
                time.sleep(0.05)
                for k, (b, w) in enumerate(zip(boards, windows, strict=True)):
                    b.check()
                    w.add(b.drain())
                    spans[k] = b.clock.now() - starts[k]
                if all(w.n for w in windows):  # a board not yet heard from would read as 0 kg
                    totals.append(sum(w.last_total for w in windows))
                if live:
                    live.update(_table(boards, windows, time.monotonic() - began, args.tare > 0))
        except KeyboardInterrupt:  # what was read so far is reported, then exit 130
            interrupted = True
        except DeviceError as exc:  # a board lost for good: what was read so far is reported with the error
            if began is None:
                raise
            lost = exc
        finally:
            if live:
                live.stop()
        window_s = 0.0 if began is None else min(time.monotonic() - began, args.seconds)
        moved = drifted(totals)
        few = [] if began is None else _few_reports(boards, windows, spans)
        if args.json:
            out = []
            for k, (b, w) in enumerate(zip(boards, windows, strict=True)):
                kg = w.mean[:4] if w.n else np.full(4, np.nan)
                cop = w.cop_m()
                out.append({"board": b.name, "cells": ["TR", "BR", "TL", "BL"], "kg": kg.tolist(),
                            "kg_sd": w.sd[:4].tolist(), "total_kg": float(w.mean[4]) if w.n else None,
                            "total_sd_kg": float(w.sd[4]), "cop_m": None if cop is None else cop.tolist(),
                            "reports": w.n, "reports_expected": None if began is None else _expected(b, spans[k]),
                            "bad": b.stats.bad, "reconnects": b.stats.reconnects,
                            "hid_wiimote_battery_percent": b.stats.battery_percent})  # fmt: skip
            doc = {"seconds": args.seconds, "window_s": window_s, "tared": args.tare > 0,
                   "settled_after_s": settled, "drift_kg": moved, "few_reports": few, "interrupted": interrupted,
                   "battery_note": BATTERY_NOTE, "boards": out}  # fmt: skip
            if lost is None:
                print_json(doc)
        else:
            console.print(_table(boards, windows, window_s, args.tare > 0))
        if moved is not None:
            err_console.print(
                f"warning: the load moved by {moved:+.2f} kg during the reading (its last quarter against its "
                "first): stepping on or off, or leaning? the means are over both"
            )
        for f in few:
            err_console.print(
                f"warning: board {f['board']}: {f['reports']} reports in the read, {f['expected']} expected at its "
                f"nominal {f['nominal_hz']:g} Hz ({f['reports'] / f['expected']:.0%}): it stopped sending, was lost, "
                "or reports were lost; the means are over those read"
            )  # fmt: skip
    # a board lost: the JSON with ok: false and the partial result (poise.cli), or the table above, and the line
    if lost is not None:
        said = (f"{lost}; {window_s:.1f} s into the read: the means {'in the JSON' if args.json else 'above'} are "
                "over what was read before")  # fmt: skip
        raise DeviceError(said, **(doc if args.json else {}))
    if interrupted:
        err_console.print(
            f"poise: interrupted after {window_s:.1f} s of reading (the means above are over it)"
        )
        return 130
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Tare the empty boards, then read them with the known weight over each cell in turn; the gains (the cells'
    tared readings times them sum to the weight, at each placement) are saved. Emulated boards (`sim`) place the
    weight themselves; real ones ask."""
    import drivers.session as person
    from drivers.wbb.protocol import CELLS
    from drivers.wbb.recalibrate import tare_and_recalibrate
    from formats.board_gains import BoardGains, check_weight_sd, save_board_gains

    check_weight_sd(args.weight, args.weight_sd)  # before the weight goes round the cells

    def ask(cell: int | None) -> None:  # the person at the boards
        if cell is None:
            person.ask_on_stderr("Take the weights off the boards, then press Enter ")
        else:
            person.ask_on_stderr(f"Place a {args.weight:g} kg weight over cell {CELLS[cell]} of every board (right "
                                 "above its foot), then press Enter ")  # fmt: skip

    with opened_boards(args.boards) as (boards, world):
        if world is None:
            person.ask_on_stderr("Empty the boards (robot on its stand), then press Enter ")
        err_console.print(
            f"taring {len(boards)} board(s) over {args.tare_s:g} s, then a weight over each cell ..."
        )
        if draws_progress():  # a lost board's reconnect attempts, as they happen
            for b in boards:
                b.on_link = _report_link
        place = ask if world is None else (lambda cell: world.place_weight(cell, args.weight))

        def put(cell: int | None) -> None:  # each stage announced as it starts (a log shows no progress)
            place(cell)
            if cell is not None:
                err_console.print(
                    f"cell {CELLS[cell]} ({cell + 1} of 4): the weight over it, reading {args.seconds:g} s once it "
                    "settles …"
                )

        # no load change with the weight asked for (Enter pressed before placing it): the person is asked again
        retry = None if world is not None else (lambda msg: person.ask_on_stderr(msg))
        gains = tare_and_recalibrate(boards, put, args.weight, args.seconds, args.tare_s, retry)
        names = tuple(b.name for b in boards)
        se = np.array([b.calibration.gain_se for b in boards])
        scales = [b.calibration.tare_scale_se for b in boards]
    tare_scale = None if any(x is None for x in scales) else np.array(scales)
    bg = BoardGains(names, np.array(gains), args.weight, args.boards, se, args.weight_sd, tare_scale)
    save_board_gains(bg, args.out)
    if args.json:
        print_json({"out": str(args.out), "weight_kg": args.weight, "cells": list(CELLS),
                    "boards": [{"board": n, "gain": g.tolist(), "gain_se": e.tolist(),
                                "tare_scale_se": None if tare_scale is None else float(tare_scale[k])}
                               for k, (n, g, e) in enumerate(zip(names, bg.gains, se, strict=True))]})  # fmt: skip
        return 0
    t = Table(title=f"cell gains → {args.out}: gain − 1 ± its SE (load = tared reading × gain)")
    t.add_column("board")
    for c in CELLS:
        t.add_column(f"{c} \\[%]", justify="right")
    t.add_column("tare's scale on all four \\[%]", justify="right")
    for k, (n, g, e) in enumerate(zip(names, bg.gains, se, strict=True)):
        t.add_row(n, *(f"{(v - 1) * 100:+.2f} ± {x * 100:.2f}" for v, x in zip(g, e, strict=True)),
                  "—" if tare_scale is None else f"± {tare_scale[k] * 100:.2f}")  # fmt: skip
    console.print(t)
    return 0
