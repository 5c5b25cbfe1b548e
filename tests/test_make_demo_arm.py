"""`make demo`'s arm part is the README's commands: every `poise` command its recipe runs is one the command line
accepts (the pipeline itself, plan → run → identify on the emulated arm, is tested in test_arm_currents)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from poise.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_every_poise_command_of_the_arm_demo_parses():
    dry = subprocess.run(["make", "-n", "--no-print-directory", "demo-arm"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    lines = dry.replace("\\\n", " ").splitlines()
    commands = []
    for line in lines:
        if line.startswith("for p in "):
            names, body = line.removeprefix("for p in ").split(";", 1)
            body = body.strip().removeprefix("do ").split("||")[0]
            commands += [body.replace("$p", n) for n in names.split()]
        elif "bin/poise " in line:
            commands.append(line)
    kinds = []
    for cmd in commands:
        argv = shlex.split(cmd)[1:]
        args = build_parser().parse_args(argv)  # SystemExit (a failed test) on an unknown option
        kinds.append(" ".join(argv[:2]))
        assert callable(args.func)
    assert kinds == ["plan trajectory"] * 2 + ["run " + str(Path("out/demo_arm") / "estimation.json"),
                     "run " + str(Path("out/demo_arm") / "validation.json"), "identify dynamic"]  # fmt: skip
