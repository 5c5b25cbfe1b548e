"""Resolving `sim|mc|FILE` parameter-set arguments against a model, and plausible perturbed sets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from formats.errors import DataError
from formats.parameter_set import ParameterSet, load_parameter_set, save_parameter_set
from robots.tree import RobotModel

__all__ = [
    "keep_lengths",
    "load_model_parameter_set",
    "model_lengths",
    "perturbed",
    "resolve_params",
    "save_parameter_set",
]


def model_lengths(model: RobotModel) -> dict[str, float]:
    """The model's named lengths (m): its first parameter set's, the URDF's own set, whose lengths the robot
    description's [lengths] name and every set it lists shares."""
    return dict(next(iter(model.params.values())).lengths) if model.params else {}


def keep_lengths(ps: ParameterSet, lengths: dict[str, float]) -> ParameterSet:
    """`ps` with the lengths it leaves out taken from `lengths` (its own win): the one rule for a parameter-set
    file without (all) lengths, wherever it is read."""
    return replace(ps, lengths={**lengths, **ps.lengths})


def load_model_parameter_set(path: str | Path, model: RobotModel) -> ParameterSet:
    """A parameter-set file checked against the model's links; lengths it leaves out keep the model's."""
    return keep_lengths(load_parameter_set(path, [lk.name for lk in model.links]), model_lengths(model))


def resolve_params(arg: str | ParameterSet, model: RobotModel, also: Sequence[str] = ()) -> ParameterSet:
    """A built-in set name ('sim', 'mc') or a path to a parameter-set JSON file. `also`: other names the caller
    took before asking (e.g. the published estimates a twin's truth may name), listed with the sets when `arg` is
    none of them."""
    if isinstance(arg, ParameterSet):
        return arg
    if arg in model.params:
        return model.params[arg]
    if Path(arg).is_file():
        return load_model_parameter_set(arg, model)
    names = sorted({*model.params, *also})
    raise DataError(f"unknown parameter set {arg!r}: neither {names} nor an existing file")


def perturbed(
    ps: ParameterSet,
    rng: np.random.Generator,
    mass_rel: float = 0.1,
    com_abs: float = 0.01,
    name: str = "perturbed",
    inertia_rel: float = 0.0,
) -> ParameterSet:
    """A plausible 'true' robot: masses scaled by up to ±mass_rel, CoMs shifted by up to ±com_abs (m), and
    each link's inertia tensor scaled by up to ±inertia_rel (scaling keeps it physically consistent)."""
    mass = {k: v * (1 + rng.uniform(-mass_rel, mass_rel)) for k, v in ps.mass.items()}
    com = {k: tuple(c + rng.uniform(-com_abs, com_abs) for c in v) for k, v in ps.com.items()}
    inertia = dict(ps.inertia)
    text = f"{ps.name} with masses ±{mass_rel:.0%} and CoMs ±{com_abs * 1000:.0f} mm"
    if inertia_rel > 0:
        inertia = {
            k: tuple(np.multiply(v, 1 + rng.uniform(-inertia_rel, inertia_rel))) for k, v in inertia.items()
        }
        text += f", inertias ±{inertia_rel:.0%}"
    return ParameterSet(name, mass, com, dict(ps.lengths), inertia, text)
