"""Inertial parameter sets: the `ParameterSet` value type and its JSON file format (kg, m, kg·m²)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from formats.atomic import write_text_atomic
from formats.errors import DataError
from formats.json_format import format_name, read_json

FORMAT = "poise parameter set"


@dataclass
class ParameterSet:
    """Inertial parameters and named lengths of one robot instance (SI units).

    `com` is in each link's stored CoM convention (see `Link.com_sign`); `inertia` holds, per link, the six
    entries (ixx, ixy, ixz, iyy, iyz, izz) of the inertia tensor about the link CoM in the link frame.
    """

    name: str
    mass: dict[str, float]
    com: dict[str, tuple[float, float, float]]
    lengths: dict[str, float]
    inertia: dict[str, tuple[float, ...]] = field(default_factory=dict)
    description: str = ""

    @property
    def total_mass(self) -> float:
        return float(sum(self.mass.values()))

    def standard_vector(self, links) -> np.ndarray:
        """Standard CoM parameters [m, m·cx, m·cy, m·cz] per link, in the links' own CoM convention."""
        out = []
        for link in links:
            m = self.mass[link.name]
            c = self.com[link.name]
            out += [m, m * c[0], m * c[1], m * c[2]]
        return np.array(out)


def parameter_set_to_json(ps: ParameterSet) -> dict:
    doc = {
        "format": FORMAT,
        "version": 1,
        "name": ps.name,
        "description": ps.description,
        "units": {"mass": "kg", "length": "m", "inertia": "kg m^2"},
        "mass": ps.mass,
        "com": {k: list(v) for k, v in ps.com.items()},
        "lengths": ps.lengths,
    }
    if ps.inertia:
        doc["inertia"] = {k: list(v) for k, v in ps.inertia.items()}
    return doc


def save_parameter_set(ps: ParameterSet, path: str | Path) -> None:
    write_text_atomic(path, json.dumps(parameter_set_to_json(ps), indent=2) + "\n", "parameter set")


def _finite(values) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values)


def check_masses(mass: dict[str, float], source: str) -> None:
    """One rule for every parameter set (files, URDFs): no negative link mass, a positive total mass."""
    negative = [n for n, m in mass.items() if m < 0]
    if negative:
        raise DataError(f"{source}: negative mass for link(s) {', '.join(negative)}")
    if not sum(mass.values()) > 0:
        raise DataError(f"{source}: the total mass must be positive (all link masses are zero)")


def parameter_set_from_json(d, links: list[str], source: str = "parameter set") -> ParameterSet:
    """Validate a parsed parameter-set document against the model's link names."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        other = format_name(d)
        if other is not None:  # another poise file given for one
            raise DataError(f"{source}: {other} (format {d['format']!r}), not a parameter set: give a parameter set's "
                            f"name or a parameter set file (format {FORMAT!r}, e.g. `simulate trajectory --truth-out`'s)")  # fmt: skip
        raise DataError(f"{source}: not a poise parameter set file")
    for key in ("mass", "com"):
        if not isinstance(d.get(key), dict):
            raise DataError(f"{source}: missing '{key}' table")
    lengths = d.get("lengths", {})  # optional: missing lengths keep the model's (callers merge)
    if not isinstance(lengths, dict):
        raise DataError(f"{source}: 'lengths' must be a table of numbers (m)")
    missing = [n for n in links if n not in d["mass"] or n not in d["com"]]
    if missing:
        raise DataError(f"{source}: no mass/CoM for link(s) {', '.join(missing)}")
    if any(not isinstance(d["com"][n], list) or len(d["com"][n]) != 3 for n in links):
        raise DataError(f"{source}: every CoM needs 3 components")
    values = [d["mass"][n] for n in links] + [c for n in links for c in d["com"][n]]
    if not _finite(values + list(lengths.values())):
        raise DataError(f"{source}: masses, CoMs and lengths must be finite numbers")
    check_masses({n: d["mass"][n] for n in links}, source)
    inertia = {}
    raw = d.get("inertia", {})
    if not isinstance(raw, dict):
        raise DataError(f"{source}: 'inertia' must be a table of 6-vectors")
    for n, v in raw.items():
        if n not in links:
            raise DataError(f"{source}: inertia for unknown link {n!r}")
        if not isinstance(v, list) or len(v) != 6 or not _finite(v):
            raise DataError(
                f"{source}: inertia of {n!r} needs 6 finite numbers (ixx, ixy, ixz, iyy, iyz, izz)"
            )
        inertia[n] = tuple(float(x) for x in v)
    return ParameterSet(
        name=str(d.get("name", source)),
        mass={n: float(d["mass"][n]) for n in links},
        com={n: tuple(float(c) for c in d["com"][n]) for n in links},
        lengths={k: float(v) for k, v in lengths.items()},
        inertia=inertia,
        description=str(d.get("description", "")),
    )


def load_parameter_set(path: str | Path, links: list[str]) -> ParameterSet:
    """Read a parameter-set file and check it covers every named link (kg, m)."""
    d = read_json(path, "a poise parameter set")
    ps = parameter_set_from_json(d, links, str(path))
    if "name" not in d:
        ps.name = Path(path).stem
    return ps
