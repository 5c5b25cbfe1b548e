"""Parameter sets as JSON files, and resolving `sim|mc|FILE` arguments."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from robots.errors import DataError
from robots.tree import ParameterSet, RobotModel


def parameter_set_to_json(ps: ParameterSet) -> dict:
    return {
        "format": "poise parameter set",
        "version": 1,
        "name": ps.name,
        "description": ps.description,
        "units": {"mass": "kg", "length": "m"},
        "mass": ps.mass,
        "com": {k: list(v) for k, v in ps.com.items()},
        "lengths": ps.lengths,
    }


def save_parameter_set(ps: ParameterSet, path: str | Path) -> None:
    Path(path).write_text(json.dumps(parameter_set_to_json(ps), indent=2))


def load_parameter_set(path: str | Path, model: RobotModel) -> ParameterSet:
    """Read a parameter set file and check it covers every link of the model (kg, m)."""
    try:
        d = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(d, dict) or d.get("format") != "poise parameter set":
        raise DataError(f"{path}: not a poise parameter set file")
    links = [lk.name for lk in model.links]
    for key in ("mass", "com", "lengths"):
        if not isinstance(d.get(key), dict):
            raise DataError(f"{path}: missing '{key}' table")
    missing = [n for n in links if n not in d["mass"] or n not in d["com"]]
    if missing:
        raise DataError(f"{path}: no mass/CoM for link(s) {', '.join(missing)}")
    values = (
        [d["mass"][n] for n in links] + [c for n in links for c in d["com"][n]] + list(d["lengths"].values())
    )
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
        raise DataError(f"{path}: masses, CoMs and lengths must be finite numbers")
    if any(len(d["com"][n]) != 3 for n in links):
        raise DataError(f"{path}: every CoM needs 3 components")
    return ParameterSet(
        name=str(d.get("name", Path(path).stem)),
        mass={n: float(d["mass"][n]) for n in links},
        com={n: tuple(float(c) for c in d["com"][n]) for n in links},
        lengths={k: float(v) for k, v in d["lengths"].items()},
        description=str(d.get("description", "")),
    )


def resolve_params(arg: str | ParameterSet, model: RobotModel) -> ParameterSet:
    """A built-in set name ('sim', 'mc') or a path to a parameter-set JSON file."""
    if isinstance(arg, ParameterSet):
        return arg
    if arg in model.params:
        return model.params[arg]
    if Path(arg).exists():
        return load_parameter_set(arg, model)
    raise DataError(f"unknown parameter set {arg!r}: neither {sorted(model.params)} nor an existing file")


def perturbed(
    ps: ParameterSet,
    rng: np.random.Generator,
    mass_rel: float = 0.1,
    com_abs: float = 0.01,
    name: str = "perturbed",
) -> ParameterSet:
    """A plausible 'true' robot: masses scaled by up to ±mass_rel, CoMs shifted by up to ±com_abs (m)."""
    mass = {k: v * (1 + rng.uniform(-mass_rel, mass_rel)) for k, v in ps.mass.items()}
    com = {k: tuple(c + rng.uniform(-com_abs, com_abs) for c in v) for k, v in ps.com.items()}
    return ParameterSet(
        name,
        mass,
        com,
        dict(ps.lengths),
        dict(ps.inertia),
        f"{ps.name} with masses ±{mass_rel:.0%} and CoMs ±{com_abs * 1000:.0f} mm",
    )
