"""PWM excitation plan for joint actuation calibration (spec actuation.md §2, procedure B), JSON.

A plan is a list of periodic segments streamed one after another at `rate_hz`; the last sample is always 0 %
PWM. Example (the recommended experiment):
```
{"format": "poise pwm plan", "version": 1, "joint": "r_hip_roll", "rate_hz": 100.0,
 "pwm_full_scale": 32000, "link": "fixture",
 "segments": [{"shape": "triangle", "amplitude_pct": 8.0, "frequency_hz": 0.3, "duration_s": 60.0}]}
```
`shape` is "triangle" (starts at 0 rising, like a sine) or "sine"; `link` says how the child link is held
("fixture": held still, procedure B; "free": moves under its load). `samples(plan)` gives the setpoints a driver
streams: times [s] and PWM [% of full scale] (× pwm_full_scale / 100 = device units).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from formats.atomic import write_text_atomic
from formats.errors import DataError
from formats.json_format import json_format, read_json

FORMAT = "poise pwm plan"
SHAPES = ("triangle", "sine")
LINKS = ("fixture", "free")
MAX_SAMPLES = 10_000_000


@dataclass(frozen=True)
class Segment:
    shape: str
    amplitude_pct: float
    frequency_hz: float
    duration_s: float


@dataclass(frozen=True)
class PwmPlan:
    segments: tuple[Segment, ...]
    rate_hz: float = 100.0
    pwm_full_scale: float = 32000.0
    link: str = "fixture"
    joint: str | None = None
    notes: dict = field(default_factory=dict)


def recommended(joint: str | None = None, link: str = "fixture") -> PwmPlan:
    """Triangle 8 %, 0.3 Hz, 60 s at 100 Hz ending at 0 (thesis §2.5.2)."""
    return PwmPlan((Segment("triangle", 8.0, 0.3, 60.0),), link=link, joint=joint)


def sweeps(joint: str | None = None, link: str = "fixture", periods: int = 6) -> PwmPlan:
    """Amplitude sweep 4, 8, 12, 16 % at 0.3 Hz, then frequency sweep 0.1, 0.3, 0.6, 0.9 Hz at 8 %."""
    segs = [Segment("triangle", a, 0.3, periods / 0.3) for a in (4.0, 8.0, 12.0, 16.0)]
    segs += [Segment("triangle", 8.0, f, periods / f) for f in (0.1, 0.3, 0.6, 0.9)]
    return PwmPlan(tuple(segs), link=link, joint=joint)


def validate(plan: PwmPlan, source: str = "PWM plan") -> PwmPlan:
    """One-line DataError for anything a driver must not stream."""

    def bad(msg: str) -> DataError:
        return DataError(f"{source}: {msg}")

    if not (math.isfinite(plan.rate_hz) and 1.0 <= plan.rate_hz <= 10_000.0):
        raise bad(f"rate_hz must be in [1, 10000], got {plan.rate_hz}")
    if not (math.isfinite(plan.pwm_full_scale) and plan.pwm_full_scale > 0):
        raise bad(f"pwm_full_scale must be > 0, got {plan.pwm_full_scale}")
    if plan.link not in LINKS:
        raise bad(f"link must be one of {', '.join(LINKS)}, got {plan.link!r}")
    if not plan.segments:
        raise bad("no segments")
    total = 0.0
    for k, s in enumerate(plan.segments):
        where = f"segment {k}"
        if s.shape not in SHAPES:
            raise bad(f"{where}: shape must be one of {', '.join(SHAPES)}, got {s.shape!r}")
        if not (math.isfinite(s.amplitude_pct) and 0 < s.amplitude_pct <= 100):
            raise bad(f"{where}: amplitude_pct must be in (0, 100], got {s.amplitude_pct}")
        if not (math.isfinite(s.frequency_hz) and 0 < s.frequency_hz <= plan.rate_hz / 10):
            raise bad(f"{where}: frequency_hz must be in (0, rate_hz/10], got {s.frequency_hz}")
        if not (math.isfinite(s.duration_s) and s.duration_s > 0):
            raise bad(f"{where}: duration_s must be > 0, got {s.duration_s}")
        total += s.duration_s
    if total * plan.rate_hz > MAX_SAMPLES:
        raise bad(f"{total:g} s at {plan.rate_hz:g} Hz exceeds {MAX_SAMPLES} samples")
    return plan


def _wave(shape: str, phase: np.ndarray) -> np.ndarray:
    """Unit wave of the given shape at phase (cycles), starting at 0 and rising."""
    if shape == "sine":
        return np.sin(2 * np.pi * phase)
    x = np.mod(phase + 0.25, 1.0)
    return 1.0 - 4 * np.abs(x - 0.5)  # triangle: 0 at phase 0, +1 at 0.25, −1 at 0.75


def samples(plan: PwmPlan) -> tuple[np.ndarray, np.ndarray]:
    """Setpoint times [s] and PWM [%] at rate_hz; the final sample is 0 %."""
    validate(plan)
    dt = 1.0 / plan.rate_hz
    parts, t0 = [], 0.0
    for s in plan.segments:
        n = int(round(s.duration_s * plan.rate_hz))
        tl = np.arange(n) * dt
        parts.append((t0 + tl, s.amplitude_pct * _wave(s.shape, s.frequency_hz * tl)))
        t0 += n * dt
    t = np.concatenate([p[0] for p in parts] + [[t0]])
    u = np.concatenate([p[1] for p in parts] + [[0.0]])
    return t, u


def plan_to_json(plan: PwmPlan) -> dict:
    d = asdict(plan)
    d["segments"] = [asdict(s) for s in plan.segments]
    return {"format": FORMAT, "version": 1, **d}


def save_pwm_plan(plan: PwmPlan, path: str | Path) -> None:
    validate(plan)
    write_text_atomic(path, json.dumps(plan_to_json(plan), indent=2) + "\n", "PWM plan")


def is_pwm_plan(path: str | Path) -> bool:
    """True when the file is JSON whose format is a PWM plan (`poise run` reads the plan kind from it)."""
    return json_format(path) == FORMAT


def load_pwm_plan(path: str | Path) -> PwmPlan:
    """Read and validate a plan; DataError (one line) for anything malformed."""
    src = str(path)
    doc = read_json(path, "a PWM plan")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f"{src}: not a {FORMAT!r} file")
    try:
        segs = tuple(
            Segment(
                str(s["shape"]),
                float(s["amplitude_pct"]),
                float(s["frequency_hz"]),
                float(s["duration_s"]),
            )
            for s in doc["segments"]
        )
        plan = PwmPlan(
            segs,
            float(doc.get("rate_hz", 100.0)),
            float(doc.get("pwm_full_scale", 32000.0)),
            str(doc.get("link", "fixture")),
            None if doc.get("joint") is None else str(doc["joint"]),
            dict(doc.get("notes", {})),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{src}: malformed segment or field ({exc!r})") from None
    return validate(plan, src)
