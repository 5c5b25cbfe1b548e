"""`poise demo arm` and `poise demo standing`: the dynamic pipeline (excitation design → run on the emulated
bench's MuJoCo twin → identification, validated on a second design) as the very commands a user types, each
printed before it runs, so the demo doubles as a recipe."""

from __future__ import annotations

import json
import os
import re
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
# the identification step's result (`identify dynamic --json-out`): the JSON its --json prints, the verdict's source
IDENTIFY_JSON = "identify.json"


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
                       "--validate", f"{d}/validation/recording.csv", "--plot", f"{d}/wrench.png", "--json-out",
                       f"{d}/{IDENTIFY_JSON}")))  # fmt: skip
    return steps


def arm_steps(out: Path, seed: int) -> list[Step]:
    """A UR5 bolted to its stand on the emulated Dynamixel bus: two designs, both run on the twin, the first's
    motor currents identified, the second's torques predicted."""
    d = str(out)
    packaged_file("ur5")  # its package there, before any step
    steps = [Step(f"design the {name} motion: exciting, within the joints' limits (quick: --max-iter 30 per stage "
                  "of the criterion's continuation, 15 + 30 = 45 IPOPT iterations, stops short of convergence)",
                  ("plan", "trajectory", "ur5", *ARM_DESIGN, "--seed", str(s), "--out", f"{d}/{name}.json"))
             for name, s in (("estimation", seed), ("validation", seed + 1))]  # fmt: skip
    for name in ("estimation", "validation"):
        steps.append(Step(f"run the {name} motion on the twin's Dynamixel bus, reading encoders and currents",
                          ("run", f"{d}/{name}.json", "--robot", "sim", "--config", str(_ur5_config()),
                           "--time-scale", "3", "--yes", "--out", f"{d}/{name}")))  # fmt: skip
    steps.append(Step("identify the base parameters and friction from the motor currents",
                      ("identify", "dynamic", f"{d}/estimation/recording.csv", "--validate",
                       f"{d}/validation/recording.csv", "--reference", f"{d}/estimation/truth.json", "--plot",
                       f"{d}/efforts.png", "--json-out", f"{d}/{IDENTIFY_JSON}")))  # fmt: skip
    return steps


OUTPUTS = {
    "postures": ("plan.json", "run", "cop_fit.png"),
    "arm": ("estimation.json", "validation.json", "estimation", "validation", IDENTIFY_JSON, "efforts.png"),
    "standing": ("gains.json", "estimation.json", "validation.json", "estimation.png", "estimation", "validation",
                 IDENTIFY_JSON, "wrench.png"),
}  # fmt: skip
"""What each demo writes in its --out: all it ever replaces there."""

MARKER = ".poise-demo"  # in a folder a demo wrote: which demo (JSON {"pipeline": ...})
ASIDE = ".poise-demo-previous"  # an earlier run's outputs while a new run makes its own
MOVED = ".moved"  # in ASIDE, written before the first move: the earlier run's output names (JSON list)
STOPPED = ".poise-demo-stopped"  # a run stopped short (safety stop), its outputs kept for a look
DISCARD = ".poise-demo-discard"  # what a finished run replaced, renamed here in one step, then removed


def marker_pipeline(out: Path) -> str | None:
    """Which demo wrote `out` (its marker; an unreadable marker: "unknown"), else None. A posture demo's folder from
    before the marker (its plan.json designed by the demo) is the posture demo's."""
    path = out / MARKER
    if not path.is_file():
        return "postures" if _legacy_posture_demo(out) else None
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        pipeline = json.loads(text)["pipeline"]
    except (ValueError, KeyError, TypeError):  # the first markers' text: "written by poise demo standing"
        m = re.search(r"poise demo (\w+)", text)
        pipeline = m.group(1) if m else None
    return pipeline if pipeline in OUTPUTS else "unknown"


def _legacy_posture_demo(out: Path) -> bool:
    try:
        plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
        return plan["settings"]["design"] == "demo (quick)"
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _named(names: list[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return shown


class DemoFolder:
    """A demo's --out: checked before any work (`check`), its earlier outputs moved aside while the new run makes
    its own (`begin`), then dropped (`commit`) or, when the run fails, is interrupted or stops short, restored
    (`rollback`, `keep_stopped`). Only the demo's own outputs (`OUTPUTS`, in a folder its marker says it wrote)
    are ever moved or removed: anything else is refused unless --force, and with --force kept untouched.
    `parents`: the demo's default --out (out/demo…, in a fresh clone without out/) is made with its folders; a
    given --out is made only in a folder that exists (as `poise.argtypes.out_dir` checks)."""

    def __init__(self, out: Path, pipeline: str, force: bool = False, parents: bool = False) -> None:
        self.out, self.pipeline, self.force, self.parents = Path(out), pipeline, force, parents
        self.outputs = OUTPUTS[pipeline]
        self.previous: list[str] = []

    def check(self) -> list[str]:
        """DataError for a folder another demo wrote, or holding anything this demo did not write (without
        --force; with it, such a thing at one of the demo's output names all the same). Returns what is kept."""
        out, demo = self.out, f"`poise demo{'' if self.pipeline == 'postures' else ' ' + self.pipeline}`"
        if not out.is_dir():
            return []
        owner = marker_pipeline(out)
        if owner is not None and owner != self.pipeline:
            who = "another demo (its marker unreadable)" if owner == "unknown" else f"`poise demo {owner}`"
            raise DataError(f"{out} holds the outputs of {who}: give {demo} another --out")
        ours = {*self.outputs, MARKER, ASIDE, STOPPED, DISCARD} if owner else set()
        foreign = sorted(p.name for p in out.iterdir() if p.name not in ours)
        if foreign and not self.force:
            raise DataError(f"{out} holds {_named(foreign)}, which {demo} did not write: give an empty or new --out, "
                            "or --force to write beside them (they are kept)")  # fmt: skip
        clash = [n for n in foreign if n in self.outputs]
        if clash:
            raise DataError(f"{out}: {_named(clash)}, which {demo} did not write, would be replaced by its outputs: "
                            "move them or give another --out (even --force replaces only the demo's own)")  # fmt: skip
        return foreign

    def begin(self) -> str | None:
        """The folder made or marked, the earlier run's outputs moved aside (a run killed before it ended left
        them aside: they are put back first). Returns a note for the log, if any. The names to move are written
        aside before the first move: a run killed part-way through the moves loses none of them."""
        out = self.out
        out.mkdir(parents=self.parents, exist_ok=True)
        note = None
        if _exists(out / DISCARD):  # a finished run killed while removing what it replaced
            _remove(out / DISCARD)
        if (out / ASIDE).is_dir():
            self._restore()
            note = f"{out}: an interrupted run's outputs replaced by the earlier run's, kept aside in {ASIDE}"
        (out / MARKER).write_text(json.dumps({"pipeline": self.pipeline, "outputs": list(self.outputs)}) + "\n",
                                  encoding="utf-8")  # fmt: skip
        self.previous = [n for n in self.outputs if _exists(out / n)]
        if self.previous:
            aside = out / ASIDE
            aside.mkdir()
            (aside / f"{MOVED}.tmp").write_text(json.dumps(self.previous), encoding="utf-8")
            os.replace(aside / f"{MOVED}.tmp", aside / MOVED)  # whole or absent
            for name in self.previous:
                os.replace(out / name, aside / name)
        return note

    def commit(self) -> None:
        """The new run succeeded: the earlier outputs go, and a stopped run's kept ones (`keep_stopped`). Each is
        renamed to DISCARD first (one step) and removed from there: a kill while removing leaves no half-removed
        ASIDE for the next run to take for an interrupted run's."""
        for name in (ASIDE, STOPPED):
            if _exists(self.out / name):
                if _exists(self.out / DISCARD):
                    _remove(self.out / DISCARD)
                os.replace(self.out / name, self.out / DISCARD)
                _remove(self.out / DISCARD)

    def rollback(self) -> bool:
        """The new run failed or was interrupted: the earlier outputs, if there were any, replace what it wrote
        (True); without earlier ones, what it wrote stays for a look (False)."""
        if not (self.out / ASIDE).is_dir():
            return False
        self._restore()
        return True

    def keep_stopped(self) -> Path | None:
        """The new run stopped short (a safety stop): a failure too. With earlier outputs, what it wrote moves
        to `<out>/.poise-demo-stopped` (replacing a stopped run's kept there) and the earlier outputs come back:
        returns that folder. Without earlier ones, what it wrote stays where it is (None)."""
        if not (self.out / ASIDE).is_dir():
            return None
        stopped = self.out / STOPPED
        if _exists(stopped):
            _remove(stopped)
        stopped.mkdir()
        for name in self.outputs:
            if _exists(self.out / name):
                os.replace(self.out / name, stopped / name)
        self._restore()
        return stopped

    def _restore(self) -> None:
        """The earlier run's outputs back from ASIDE. A name in `out` goes only when it is the new run's: a copy
        of it is aside, or the list of moved names (`MOVED`) does not hold it; an earlier output the kill left
        unmoved stays. Without that list (killed before it was written) only names with a copy aside go."""
        aside = self.out / ASIDE
        try:
            moved = set(json.loads((aside / MOVED).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            moved = None
        for name in self.outputs:
            here = self.out / name
            if _exists(here) and (_exists(aside / name) or (moved is not None and name not in moved)):
                _remove(here)
        for name in self.outputs:
            if _exists(aside / name):
                os.replace(aside / name, self.out / name)
        shutil.rmtree(aside)  # the list of moved names, all that is left


def _exists(p: Path) -> bool:
    return p.exists() or p.is_symlink()


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink()


def prepare_out(out: Path, pipeline: str, force: bool = False, parents: bool = False) -> DemoFolder:
    """`out` checked (`DemoFolder.check`), then made ready (`begin`): the folder to commit or roll back."""
    folder = DemoFolder(out, pipeline, force, parents)
    folder.check()
    folder.begin()
    return folder


def dynamic_verdict(pipeline: str, out: Path, fit: dict) -> dict:
    """`poise demo arm|standing`'s verdict (its --json; its closing lines, `verdict_lines`): the figures the demo's
    identification prints, from its result (`fit`: the JSON its `identify dynamic --json-out` wrote,
    `identification_result`), and the paths written. `fit` in full under "identification"."""
    ref, val = fit.get("reference") or {}, fit.get("validation") or {}
    joints = ref.get("joints")
    written = [str(out / n) for n in OUTPUTS[pipeline] if (out / n).exists()]
    return {
        "ok": True,
        "pipeline": pipeline,
        "out": str(out),
        "well_pct": fit.get("well_pct"),
        "determined": len(fit.get("determined", [])),
        "estimated": len(fit.get("determined", [])) + len(fit.get("not_determined", [])),
        "determined_parameters": fit.get("determined", []),
        "within_3se": ref.get("within_3se"),
        "within_3se_of": ref.get("estimated"),
        "max_abs_z": ref.get("max_abs_z"),
        "joints_within_3se": None if joints is None else joints["within_3se"],
        "joints_within_3se_of": None if joints is None else joints["estimated"],
        "validation_rms_pct": val.get("total_relative_pct"),
        "validation_rows": dict(zip(val.get("rows", []), val.get("relative_pct", []), strict=False)),
        "written": written,
        "identification": fit,
    }


# what each dynamic demo identifies, its target, and its figures (`verdict_lines`)
IDENTIFIED = {
    "arm": "identified the UR5's base inertial parameters and joint friction from its motor currents",
    "standing": "identified TUlip's simplified-model base parameters from the two boards' wrench",
}
# the arm's target: its validation torque RMS error, % of the measured RMS (README: 4.72 % and 4.99 % measured)
ARM_VALIDATION_TARGET_PCT = 5.0
FIGURES = {
    "arm": {"efforts.png": "predicted vs measured joint torques of the validation run"},
    "standing": {"estimation.png": "the estimation motion and its ZMP path",
                 "wrench.png": "predicted vs measured wrench of the validation run"},
}  # fmt: skip


def identification_result(out: Path) -> dict:
    """The demo's identification result: the JSON its `identify dynamic --json-out` wrote (`IDENTIFY_JSON` in
    `out`), the very object its --json prints. DataError when it is not there or not a JSON object."""
    path = out / IDENTIFY_JSON
    try:
        fit = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not JSON"
        raise DataError(f"{path}: the identification's result cannot be read ({why})") from None
    if not isinstance(fit, dict):
        raise DataError(f"{path}: the identification's result is not a JSON object")
    return fit


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f} %"


def verdict_lines(v: dict) -> list[str]:
    """A dynamic demo's verdict (`dynamic_verdict`) for a person: what was identified, whether
    it met its target (the arm: validation torque RMS ≤ 5 % of the measured; standing: every base parameter
    within 3 SE of the twin's truth), the other figures with their units, and where the figures are."""
    pipeline, out = v["pipeline"], Path(v["out"])
    lines = [f"poise demo {pipeline}: {IDENTIFIED[pipeline]}"]
    n, of, z = v.get("within_3se"), v.get("within_3se_of"), v.get("max_abs_z")
    if n is None or of is None:
        se = "within 3 SE of the twin's truth: not in the identification's output"
    else:
        se = f"{n}/{of} base parameters within 3 SE of the twin's truth, max |z| " + (
            "—" if z is None else f"{z:.2f}"
        )
    if v.get("joints_within_3se") is not None:
        se += f"; the joints' friction and rotor inertia {v['joints_within_3se']}/{v['joints_within_3se_of']}"
    rows = {k.rsplit(" ", 1)[0]: r for k, r in (v.get("validation_rows") or {}).items()}
    known = [r for r in rows.values() if r is not None]
    total = v.get("validation_rms_pct")
    if pipeline == "arm":
        # judged as shown (2 decimals): the figure the person reads, and the identification's own text prints
        target = (
            "not known"
            if total is None
            else "met"
            if round(total, 2) <= ARM_VALIDATION_TARGET_PCT
            else "missed"
        )
        val = ("validation torque RMS " + ("—" if total is None else f"{total:.2f} %") + " of the measured RMS "
               f"(target ≤ {ARM_VALIDATION_TARGET_PCT:g} %): {target}")  # fmt: skip
        if known:
            val += f"; per joint {min(known):.1f}–{max(known):.1f} %"
        lines += [val, se]
    else:
        target = "not known" if n is None or of is None else "met" if n == of else "missed"
        val = "validation wrench RMS " + ("—" if total is None else f"{total:.2f} %") + " of the measured RMS"
        val += ", pooled over Fz, Mx, My (mostly Fz's weight)"
        if rows:
            val += "; per row " + ", ".join(f"{k} {_pct(r)}" for k, r in rows.items())
        lines += [f"{se} (target: all): {target}", val]
    if v.get("determined") is not None:
        named = ", ".join(v.get("determined_parameters") or []) or "none"
        lines.append(f"{v['determined']} of {v['estimated']} base parameters determined to < {v['well_pct']:g} % "
                     f"relative SE by the estimation run: {named}")  # fmt: skip
    written = set(v.get("written") or [])
    figs = [f"{out / f} ({what})" for f, what in FIGURES[pipeline].items() if str(out / f) in written]
    lines.append(("figures: " + "; ".join(figs) + "; " if figs else "") + f"plans and runs in {out}/")
    return lines


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
