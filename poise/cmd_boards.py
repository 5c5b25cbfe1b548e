"""`poise boards read`: live per-cell load, total and CoP of the balance boards."""

from __future__ import annotations

import argparse
import time

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
    r.add_argument("--json", action="store_true", help="print mean values as JSON at the end")
    r.set_defaults(func=cmd_read)


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


def cmd_read(args: argparse.Namespace) -> int:
    from drivers.wbb.board import tare_all
    from drivers.wbb.open import board_drivers, start_all

    world = None
    try:
        if args.boards == "sim":
            from drivers.config import load_config
            from drivers.emulators.world import SimWorld, WorldOptions
            from robots.registry import get_model

            model = get_model("tulip")

            cfg = load_config()
            world = SimWorld(model, cfg, WorldOptions())
            drivers = board_drivers("sim", world.board_openers())
        else:
            drivers = board_drivers(args.boards)
        boards = start_all(drivers)
        try:
            if args.tare > 0:
                tare_all(boards, args.tare)
            if world is not None:  # the simulated robot stands on the boards at its zero posture
                world.plant.torque[:] = True
                world.robot.place(Placement(0, (0.0, 0.13, 0.0)).left_foot, cfg.right_board, cfg.left_board)
            samples = [[] for _ in boards]
            end = time.monotonic() + args.seconds
            live = (
                None
                if args.json or not console.is_terminal
                else Live(console=err_console, refresh_per_second=8)
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
        finally:
            for b in boards:
                b.close()
    finally:
        if world is not None:
            world.close()
    return 0
