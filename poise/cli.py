"""The `poise` command line: git-style subcommands, one module per command group."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Our matrices are small (≤ 650×650) and parallelism comes from multi-start processes: one BLAS thread
# each avoids oversubscription (measured: half the CPU time of a 50-posture design). Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from formats.errors import PoiseError  # noqa: E402
from poise.argtypes import OneLineParser, UsageError, check_outputs  # noqa: E402
from robots.interrupt import interrupts, unwatch, watch, watching  # noqa: E402

# Each module defines `register(subparsers)`; the parser it adds sets `func(args) -> int`.
COMMAND_MODULES = [
    "poise.cmd_model",
    "poise.cmd_identify",
    "poise.cmd_simulate",
    "poise.cmd_run",
    "poise.cmd_boards",
    "poise.cmd_demo",
    "poise.cmd_solve",
    "poise.cmd_plan",
    "poise.cmd_calibrate",
]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="poise",
        description="Plan experiments, execute them on hardware, identify robot parameters.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; Ctrl-C at any point (the commands' imports included) ends it with exit 130."""
    installed = watch()  # False inside a command that runs others (demo): its caller's counter stays
    argv = sys.argv[1:] if argv is None else argv
    try:
        return _command(argv, interrupts() if watching() else None)
    except KeyboardInterrupt:
        print("poise: interrupted", file=sys.stderr)
        _interrupted_json(argv)
        return 130
    finally:
        if installed:
            unwatch()


def _interrupted_json(argv: list[str]) -> None:
    """With --json, Ctrl-C's error object on stdout as every error's (`_failed`): {"ok": false, "error":
    "interrupted"} — unless the command wrote its own (a run's `"interrupted": true` with what it kept)."""
    if "--json" not in argv:  # as a usage error tells it, before or without the parsed options
        return
    try:
        from poise.output import json_written, print_json

        if not json_written():
            print_json({"ok": False, "error": "interrupted"})
    except KeyboardInterrupt:  # a second Ctrl-C while it prints: the exit code and the stderr line stand
        pass


def _command(argv: list[str], mark: int | None) -> int:
    from poise.output import json_written

    json_written(reset=True)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:  # reported in one line; with --json also as JSON for a script
        if "--json" in argv:
            from poise.output import print_json

            print_json({"ok": False, "error": exc.said})
        return 2
    except SystemExit as exc:  # --help (0)
        return int(exc.code or 0)
    try:
        try:
            check_outputs(args)
            return int(args.func(args) or 0)
        except BaseException:
            # Ctrl-C that a library turned into another error (an import half done, a failed solve): interrupted
            if mark is not None and interrupts() > mark:
                raise KeyboardInterrupt from None
            raise
    except PoiseError as exc:
        return _failed(args, str(exc), getattr(exc, "details", None))
    except MemoryError:  # sizes from the input (durations, sample counts) too large for this machine
        return _failed(args, "not enough memory for this input (check durations, rates and sizes)")
    except EOFError:  # a prompt for the operator (place the robot, a weight) with stdin closed or at its end
        return _failed(args, "the operator's input ended (stdin closed) at a prompt; run it at a terminal, or with "
                       "--yes where the command has it")  # fmt: skip
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        return _failed(args, f"{exc.strerror}: {exc.filename}")
    except OSError as exc:  # the environment, not a bug: a full disk, a vanished device, ...
        where = f": {exc.filename}" if exc.filename else ""
        return _failed(args, f"{exc.strerror or exc}{where}")


def _failed(args: argparse.Namespace, said: str, details: dict | None = None) -> int:
    """A user's or the environment's error: one `poise: error:` line on stderr (exit 2); with --json also
    {"ok": false, "error": …, and the error's details} on stdout, unless the command already wrote its JSON."""
    from poise.output import json_written, print_json

    print(f"poise: error: {said}", file=sys.stderr)
    if getattr(args, "json", False) and not json_written():
        print_json((details or {}) | {"ok": False, "error": said})
    return 2


if __name__ == "__main__":
    sys.exit(main())
