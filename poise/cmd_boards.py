"""`poise boards read`: live per-cell load, total and CoP of the balance boards; `poise boards calibrate`: each
cell's gain from a known weight, saved for the runs (`poise run --board-gains`)."""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager

import numpy as np
from rich.live import Live
from rich.table import Table

from drivers.wbb.geometry import cell_positions
from formats.plan import Placement
from poise import argtypes as at
from poise.output import console, err_console, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("boards", help="balance-board utilities")
    s = p.add_subparsers(dest="boards_cmd", metavar="SUBCOMMAND")
    s.required = True
    r = s.add_parser("read", help="live per-cell kg, total and CoP of each board")
    r.add_argument(
        "--boards",
        type=at.boards_endpoint,
        required=True,
        help="sim | bt:ADDR,ADDR | evdev:PATH,PATH | serial:PORT,PORT",
    )
    r.add_argument("--seconds", type=at.positive, default=5.0, help="how long to read (s)")
    r.add_argument(
        "--tare", type=at.nonnegative, default=0.0, help="tare over this many seconds first (boards empty)"
    )
    r.add_argument("--board-gains", type=at.text_file, metavar="FILE",
                   help="per-cell gains measured on these boards (`poise boards calibrate`)")  # fmt: skip
    r.add_argument("--json", action="store_true", help="print mean values as JSON at the end")
    r.set_defaults(func=cmd_read)
    c = s.add_parser(
        "calibrate", help="each cell's gain from a known weight placed over it in turn (file for runs)"
    )
    c.add_argument("--boards", type=at.boards_endpoint, required=True,
                   help="sim | bt:ADDR,ADDR | evdev:PATH,PATH | serial:PORT,PORT (sim: the emulated boards of "
                        "`poise run --boards sim`)")  # fmt: skip
    c.add_argument("--weight", type=at.number(0.5, 150.0), required=True, metavar="KG",
                   help="the known weight [kg], placed over each cell in turn (one per board, all boards at once)")  # fmt: skip
    c.add_argument("--weight-sd", type=at.nonnegative, default=None, metavar="KG",
                   help="the known weight's own uncertainty [kg] (its class or certificate), a scale error on every "
                        "gain that `identify dynamic` adds to the SEs; without it, none is assumed and it says so")  # fmt: skip
    c.add_argument("--seconds", type=at.positive, default=2.0, help="reading time per cell [s]")
    c.add_argument("--tare-s", type=at.positive, default=4.0, help="tare time, boards empty [s]")
    c.add_argument("--out", type=at.out_file, required=True, help="board-gains file to write (JSON)")
    at.add_force(c)
    c.add_argument("--json", action="store_true", help="print the gains as JSON")
    c.set_defaults(func=cmd_calibrate)


def _table(boards, samples) -> Table:
    t = Table(title="balance boards (CoP in each board's frame)")
    for c in ("board", "TR \\[kg]", "BR \\[kg]", "TL \\[kg]", "BL \\[kg]", "total \\[kg]", "CoP x \\[mm]", "CoP y \\[mm]",
              "reports", "bad", "battery"):  # fmt: skip
        t.add_column(c, justify="right")
    cells = cell_positions()
    for b, ss in zip(boards, samples, strict=True):
        if not ss:
            t.add_row(b.name, *["—"] * 7, str(b.stats.reports), str(b.stats.bad), str(b.stats.battery))
            continue
        kg = np.mean([s.kg for s in ss[-20:]], axis=0)
        tot = kg.sum()
        cop = kg @ cells / tot * 1000 if tot > 0.5 else (np.nan, np.nan)
        t.add_row(b.name, *(f"{v:.3f}" for v in kg), f"{tot:.3f}", f"{cop[0]:.1f}", f"{cop[1]:.1f}",
                  str(b.stats.reports), str(b.stats.bad), str(b.stats.battery))  # fmt: skip
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


def cmd_read(args: argparse.Namespace) -> int:
    from drivers.wbb.board import tare_all
    from drivers.wbb.recalibrate import apply_cell_gains
    from formats.board_gains import load_board_gains

    gains = None if args.board_gains is None else load_board_gains(args.board_gains)
    with opened_boards(args.boards) as (boards, world):
        if gains is not None:
            apply_cell_gains(boards, gains)
        if args.tare > 0:
            tare_all(boards, args.tare)
        if world is not None:  # the simulated robot stands on the boards at its zero posture
            world.plant.torque[:] = True
            cfg = world.config
            world.robot.place(Placement(0, (0.0, 0.13, 0.0)).left_foot, cfg.right_board, cfg.left_board)
        samples = [[] for _ in boards]
        end = time.monotonic() + args.seconds
        live = (
            None if args.json or not console.is_terminal else Live(console=err_console, refresh_per_second=8)
        )
        if live:
            live.start()
        try:
            while time.monotonic() < end:
                time.sleep(0.05)
                for i, b in enumerate(boards):
                    b.check()
                    samples[i].extend(b.drain())
                if live:
                    live.update(_table(boards, samples))
        finally:
            if live:
                live.stop()
        if args.json:
            out = []
            for b, ss in zip(boards, samples, strict=True):
                kg = np.mean([s.kg for s in ss], axis=0) if ss else np.full(4, np.nan)
                tot = float(kg.sum())
                cop = (kg @ cell_positions() / tot).tolist() if tot > 0.5 else None
                out.append({"board": b.name, "cells": ["TR", "BR", "TL", "BL"], "kg": kg.tolist(),
                            "total_kg": tot, "cop_m": cop, "reports": b.stats.reports, "bad": b.stats.bad,
                            "reconnects": b.stats.reconnects, "battery": b.stats.battery})  # fmt: skip
            print_json({"seconds": args.seconds, "boards": out})
        else:
            console.print(_table(boards, samples))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Tare the empty boards, then read them with the known weight over each cell in turn; the gains (known /
    tared reading per cell) are saved. Emulated boards (`sim`) place the weight themselves; real ones ask."""
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
        put = ask if world is None else (lambda cell: world.place_weight(cell, args.weight))
        gains = tare_and_recalibrate(boards, put, args.weight, args.seconds, args.tare_s)
        names = tuple(b.name for b in boards)
        se = np.array([b.calibration.gain_se for b in boards])
    bg = BoardGains(names, np.array(gains), args.weight, args.boards, se, args.weight_sd)
    save_board_gains(bg, args.out)
    if args.json:
        print_json({"out": str(args.out), "weight_kg": args.weight, "cells": list(CELLS),
                    "boards": [{"board": n, "gain": g.tolist(), "gain_se": e.tolist()}
                               for n, g, e in zip(names, bg.gains, se, strict=True)]})  # fmt: skip
        return 0
    t = Table(title=f"cell gains → {args.out}: gain − 1 ± its SE (load = tared reading × gain)")
    t.add_column("board")
    for c in CELLS:
        t.add_column(f"{c} \\[%]", justify="right")
    for n, g, e in zip(names, bg.gains, se, strict=True):
        t.add_row(n, *(f"{(v - 1) * 100:+.2f} ± {x * 100:.2f}" for v, x in zip(g, e, strict=True)))
    console.print(t)
    return 0
