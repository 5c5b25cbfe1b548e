"""`poise demo arm` and `poise demo standing`: the dynamic pipeline (excitation design → run on the emulated
bench's MuJoCo twin → identification, validated on a second design) as the very commands a user types, each
printed before it runs, so the demo doubles as a recipe."""

from __future__ import annotations

import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from formats.errors import DataError
from robots.registry import packaged_file

# the standing design: the twin acceptance test's balance settings over 20 spline waypoints (a 4 Hz band), which
# determined 7 parameters per 10 s run on the twin where 7 Fourier harmonics determined 4-7 (README)
STANDING_DESIGN = ("--double-support", "--simplified", "--duration", "10", "--samples", "64", "--max-iter", "200",
                   "--velocity-fraction", "0.3", "--zmp-margin", "0.06", "--load-share", "0.25", "--criterion",
                   "logvar", "--scaling", "none", "--waypoints", "20")  # fmt: skip
ARM_DESIGN = ("--duration", "6", "--period", "6", "--harmonics", "3", "--velocity-fraction", "0.3", "--max-iter",
              "30", "--no-self-collision")  # fmt: skip
DEFAULT_SEED = {"arm": 1, "standing": 3}  # standing: seeds 3 and 4 measured in the README


@dataclass(frozen=True)
class Step:
    """One command of the demo: what it does, in a line, and its argv (after `poise`)."""

    what: str
    argv: tuple[str, ...]


def _ur5_config() -> Path:
    import drivers

    return Path(drivers.__file__).parent / "ur5_emulated.toml"


def standing_steps(out: Path, seed: int) -> list[Step]:
    """TUlip in double support on two emulated balance boards: boards calibrated, two designs, both run on the
    twin with noisy boards and encoders, the first identified from the boards' wrench, the second predicted."""
    d = str(out)
    steps = [Step("calibrate the boards: a 10 kg weight over each cell in turn",
                  ("boards", "calibrate", "--boards", "sim", "--weight", "10", "--out", f"{d}/gains.json"))]  # fmt: skip
    for name, s in (("estimation", seed), ("validation", seed + 1)):
        steps.append(Step(f"design the {name} motion: balance-constrained, both soles on the boards",
                          ("plan", "trajectory", "tulip", *STANDING_DESIGN, "--seed", str(s), "--out",
                           f"{d}/{name}.json")))  # fmt: skip
    steps.append(Step("plot the estimation motion: joint curves, ZMP path inside the support polygon",
                      ("plan", "show", f"{d}/estimation.json", "--out", f"{d}/estimation.png")))  # fmt: skip
    for k, name in enumerate(("estimation", "validation"), 1):  # each run its own noise, as on a real bench
        steps.append(Step(f"run the {name} motion on the twin through the servo and board drivers",
                          ("run", f"{d}/{name}.json", "--robot", "sim", "--boards", "sim", "--physics", "mujoco",
                           "--gravity-comp", "--time-scale", "1", "--board-gains", f"{d}/gains.json",
                           "--noise-seed", str(k), "--yes", "--out", f"{d}/{name}")))  # fmt: skip
    steps.append(Step("identify the simplified ZMP model's base parameters from the boards' wrench",
                      ("identify", "dynamic", f"{d}/estimation/recording.csv", "--simplified", "--no-friction",
                       "--instruments", f"{d}/estimation.json", "--reference", f"{d}/estimation/truth.json",
                       "--validate", f"{d}/validation/recording.csv", "--plot", f"{d}/wrench.png")))  # fmt: skip
    return steps


def arm_steps(out: Path, seed: int) -> list[Step]:
    """A UR5 bolted to its stand on the emulated Dynamixel bus: two designs, both run on the twin, the first's
    motor currents identified, the second's torques predicted."""
    d = str(out)
    packaged_file("ur5")  # its package there, before any step
    steps = [Step(f"design the {name} motion: exciting, within the joints' limits",
                  ("plan", "trajectory", "ur5", *ARM_DESIGN, "--seed", str(s), "--out", f"{d}/{name}.json"))
             for name, s in (("estimation", seed), ("validation", seed + 1))]  # fmt: skip
    for name in ("estimation", "validation"):
        steps.append(Step(f"run the {name} motion on the twin's Dynamixel bus, reading encoders and currents",
                          ("run", f"{d}/{name}.json", "--robot", "sim", "--config", str(_ur5_config()),
                           "--time-scale", "3", "--yes", "--out", f"{d}/{name}")))  # fmt: skip
    steps.append(Step("identify the base parameters and friction from the motor currents",
                      ("identify", "dynamic", f"{d}/estimation/recording.csv", "--validate",
                       f"{d}/validation/recording.csv", "--reference", f"{d}/estimation/truth.json", "--plot",
                       f"{d}/efforts.png")))  # fmt: skip
    return steps


OUTPUTS = ("gains.json", "estimation.json", "validation.json", "estimation.png", "estimation", "validation",
           "wrench.png", "efforts.png")  # fmt: skip


MARKER = ".poise-demo"  # in a folder a dynamic demo wrote: its outputs may be replaced


def prepare_out(out: Path, pipeline: str) -> None:
    """`out` made ready: created, or an earlier demo's folder (its marker) with that demo's outputs removed. A
    folder holding anything else is refused: its files would be lost or mixed with the demo's."""
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise DataError(
            f"{out} is not empty and no demo wrote it: give `poise demo {pipeline}` an empty or new --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    clear_outputs(out)
    (out / MARKER).write_text(f"written by poise demo {pipeline}\n", encoding="utf-8")


def clear_outputs(out: Path) -> None:
    """The demo's own files from an earlier run of it are removed (nothing else in `out`)."""
    for name in OUTPUTS:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def run_steps(steps: list[Step], run: Callable[[list[str]], int], log: Callable[[str], None]) -> int:
    """Each step announced (its command line too) and run; the first that fails ends the demo with its code."""
    for k, step in enumerate(steps, 1):
        log(f"\n[bold]{k}/{len(steps)} {step.what}[/bold]\n$ poise {shlex.join(step.argv)}")
        t0 = time.monotonic()
        rc = run(list(step.argv))
        if rc:
            log(f"[red]step {k} failed (exit {rc}); the demo stops[/red]")
            return rc
        log(f"[dim]{time.monotonic() - t0:.0f} s[/dim]")
    return 0
