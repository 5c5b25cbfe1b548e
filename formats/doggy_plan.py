"""Doggy's PWM excitation plan (spec doggy-slom.md §5), JSON: what `poise plan doggy` writes, what a driver
streams and what the simulated calibration experiment runs.

Segments run in order under the controller a driver runs each sample, u = clip(kp (target − θ) + sweep,
±u_max) (θ the encoder angle without its zero offset θ₀, u a PWM duty in [−1, 1]). Kinds: "zero" (u = 0, the
bias window), "goto" (P-control to `target`, |u| ≤ u_max) and "chirp" (goto plus a linear 0.5→4 Hz sweep of
`amplitude` per joint, joints 2 and 3 in anti-phase). Example::

    {"format": "poise.doggy-excitation", "version": 1, "kp": 3.0, "rate": 1000.0,
     "segments": [{"kind": "zero", "duration": 1.0},
                  {"kind": "goto", "duration": 2.1, "u_max": 0.15, "target": [0.3, -0.1, 0.2]},
                  {"kind": "chirp", "duration": 3.0, "u_max": 0.9, "target": [0, 0, 0], "f0": 0.5, "f1": 4.0,
                   "amplitude": [0.5, 0.5, 0.5]}, ...]}

Angles in rad, times in s, frequencies in Hz, `kp` in 1/rad, `rate` in Hz.
"""

from __future__ import annotations

import json
import math
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from formats.atomic import write_text_atomic
from formats.errors import DataError

FORMAT = "poise.doggy-excitation"
VERSION = 1
KINDS = ("zero", "goto", "chirp")
# Experiment length (s) `poise plan doggy --duration` and `poise solve doggy --simulate` accept: at least a second
# (the zero window and a few set-points), at most an hour (3.6 million samples at 1 kHz, 12 states each).
DURATION_S = (1.0, 3600.0)


@dataclass(frozen=True)
class Segment:
    """One plan step: "zero" (u = 0), "goto" (P-control to `target`, |u| ≤ u_max) or "chirp" (goto + sweep)."""

    kind: str
    duration: float  # s
    u_max: float = 0.0
    target: tuple[float, float, float] = (0.0, 0.0, 0.0)  # rad, motor angles
    f0: float = 0.0  # Hz, chirp start frequency
    f1: float = 0.0  # Hz, chirp end frequency
    amplitude: tuple[float, float, float] = (0.0, 0.0, 0.0)  # PWM duty of the sweep per joint


@dataclass
class ExcitationPlan:
    """A PWM programme: segments run in order under a P-controller u = clip(kp (target − θ) + sweep)."""

    segments: list[Segment]
    kp: float = 3.0  # 1/rad
    rate: float = 1000.0  # Hz

    @property
    def duration(self) -> float:
        return sum(s.duration for s in self.segments)

    def to_dict(self) -> dict:
        segs = []
        for s in self.segments:
            d: dict[str, Any] = {"kind": s.kind, "duration": s.duration}
            if s.kind != "zero":
                d.update(u_max=s.u_max, target=list(s.target))
            if s.kind == "chirp":
                d.update(f0=s.f0, f1=s.f1, amplitude=list(s.amplitude))
            segs.append(d)
        return {"format": FORMAT, "version": VERSION, "kp": self.kp, "rate": self.rate, "segments": segs}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @staticmethod
    def from_json(
        text: str, source: str = "Doggy plan", *, setpoint_range: Sequence[float]
    ) -> ExcitationPlan:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{source}: not JSON ({exc.msg}, line {exc.lineno})") from None
        return plan_from_dict(doc, source, setpoint_range=setpoint_range)


def _num(x: Any, where: str, lo: float = -math.inf, hi: float = math.inf, open_lo: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise DataError(f"{where}: expected a finite number, got {x!r}")
    if x < lo or x > hi or (open_lo and x == lo):
        rng = f"{'(' if open_lo else '['}{lo:g}, {hi:g}]"
        raise DataError(f"{where}: {x!r} outside {rng}")
    return float(x)


def _vec3(x: Any, where: str) -> tuple[float, float, float]:
    if not isinstance(x, list) or len(x) != 3:
        raise DataError(f"{where}: expected a list of 3 numbers")
    return tuple(_num(v, f"{where}[{i}]") for i, v in enumerate(x))  # type: ignore[return-value]


def _target(x: Any, where: str, limits: tuple[float, ...]) -> tuple[float, float, float]:
    """A set-point (rad) within ±limits per joint: a target in degrees or a typo would drive Doggy into its stops."""
    target = _vec3(x, where)
    for j, (v, lim) in enumerate(zip(target, limits, strict=True)):
        if abs(v) > lim + 1e-12:
            shown = ", ".join(f"{r:g}" for r in limits)
            raise DataError(
                f"{where}[{j}]: {v:g} rad outside joint {j + 1}'s set-point range ±{lim:g} rad (Doggy's "
                f"description: [experiment] setpoint_range = [{shown}] rad; targets are in rad)"
            )
    return target


def plan_from_dict(
    doc: Any, source: str = "Doggy plan", *, setpoint_range: Sequence[float]
) -> ExcitationPlan:
    """Validate and read a plan document (files written before the format tag are read too); targets must lie
    within `setpoint_range` (rad per joint: the robot description's, `robots.doggy.robot().setpoint_range`)."""
    limits = tuple(float(v) for v in setpoint_range)
    if not isinstance(doc, dict):
        raise DataError(f"{source}: expected a JSON object")
    if "format" in doc and doc["format"] != FORMAT:
        raise DataError(f"{source}: not a Doggy excitation plan (format {doc['format']!r})")
    if doc.get("version", VERSION) != VERSION:
        raise DataError(f"{source}: version {doc.get('version')!r} is not supported (expected {VERSION})")
    kp = _num(doc.get("kp", 3.0), f"{source}: kp", 0.0, math.inf, open_lo=True)
    rate = _num(doc.get("rate", 1000.0), f"{source}: rate", 0.0, 1e6, open_lo=True)
    raw = doc.get("segments")
    if not isinstance(raw, list) or not raw:
        raise DataError(f"{source}: segments must be a non-empty list")
    segs = []
    for i, s in enumerate(raw):
        w = f"{source}: segments[{i}]"
        if not isinstance(s, dict):
            raise DataError(f"{w}: expected an object")
        kind = s.get("kind")
        if kind not in KINDS:
            raise DataError(f"{w}.kind: {kind!r} is not one of {', '.join(KINDS)}")
        dur = _num(s.get("duration"), f"{w}.duration", 0.0, 1e6, open_lo=True)
        if kind == "zero":
            segs.append(Segment("zero", dur))
            continue
        u_max = _num(s.get("u_max"), f"{w}.u_max", 0.0, 1.0)
        target = _target(s.get("target"), f"{w}.target", limits)
        if kind == "goto":
            segs.append(Segment("goto", dur, u_max, target))
            continue
        f0 = _num(s.get("f0"), f"{w}.f0", 0.0, rate / 2)
        f1 = _num(s.get("f1"), f"{w}.f1", 0.0, rate / 2)
        amp = _vec3(s.get("amplitude"), f"{w}.amplitude")
        if max(abs(a) for a in amp) > 1.0:
            raise DataError(f"{w}.amplitude: a PWM duty is within [-1, 1]")
        segs.append(Segment("chirp", dur, u_max, target, f0, f1, amp))
    return ExcitationPlan(segs, kp, rate)


def save_doggy_plan(
    plan: ExcitationPlan, path: str | pathlib.Path, *, setpoint_range: Sequence[float]
) -> None:
    """Write the plan after reading it back as `load_doggy_plan` would: what this writes, the reader accepts."""
    plan_from_dict(plan.to_dict(), "the plan to write", setpoint_range=setpoint_range)
    write_text_atomic(pathlib.Path(path), plan.to_json() + "\n")


def load_doggy_plan(path: str | pathlib.Path, *, setpoint_range: Sequence[float]) -> ExcitationPlan:
    """Read and validate a plan file, its targets within `setpoint_range` (rad per joint); DataError (one line,
    naming the field) for anything a driver must not run."""
    p = pathlib.Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: cannot read the Doggy plan ({exc})") from None
    return ExcitationPlan.from_json(text, str(p), setpoint_range=setpoint_range)


def is_doggy_plan(doc: Any) -> bool:
    """Whether a parsed JSON document is a Doggy excitation plan (its format tag; files older than the tag: an
    object of `segments` without another format)."""
    return isinstance(doc, dict) and (
        doc.get("format") == FORMAT or ("segments" in doc and "format" not in doc)
    )


def pwm_program(plan: ExcitationPlan, t: np.ndarray):
    """Per-sample controller set-points: target (N,3), feed-forward sweep (N,3), saturation u_max (N,)."""
    n = len(t)
    target = np.zeros((n, 3))
    ff = np.zeros((n, 3))
    umax = np.zeros(n)
    t0 = 0.0
    rel = t - t[0]
    for s in plan.segments:
        m = (rel >= t0 - 1e-12) & (rel < t0 + s.duration - 1e-12)
        tau = rel[m] - t0
        if s.kind != "zero":
            target[m] = s.target
            umax[m] = s.u_max
        if s.kind == "chirp":
            phase = 2 * np.pi * (s.f0 * tau + 0.5 * (s.f1 - s.f0) * tau**2 / s.duration)
            ff[m] = np.outer(np.sin(phase), s.amplitude)
            ff[m] *= np.array([1.0, -1.0, 1.0])  # joints 2 and 3 in anti-phase: excites the head coupling
        t0 += s.duration
    tail = rel >= t0 - 1e-12
    if np.any(tail) and plan.segments and plan.segments[-1].kind != "zero":
        target[tail], umax[tail] = plan.segments[-1].target, plan.segments[-1].u_max
    return target, ff, umax


def pwm_command(target: np.ndarray, ff: np.ndarray, u_max, theta: np.ndarray, kp: float) -> np.ndarray:
    """The controller a driver runs each sample: u = clip(kp (target − θ) + sweep, ±u_max) (θ without θ₀)."""
    u_max = np.asarray(u_max, float)[..., None] if np.ndim(u_max) else u_max
    return np.clip(kp * (np.asarray(target) - theta) + ff, -u_max, u_max)
