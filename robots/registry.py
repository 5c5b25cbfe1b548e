"""Built-in robot models by name."""

from __future__ import annotations

from collections.abc import Callable

from formats.errors import DataError
from robots.tree import RobotModel


def _tulip() -> RobotModel:
    from robots.tulip import tulip

    return tulip()


MODELS: dict[str, Callable[[], RobotModel]] = {"tulip": _tulip}


def get_model(name: str) -> RobotModel:
    """The built-in model called `name` (e.g. 'tulip')."""
    try:
        return MODELS[name.lower()]()
    except KeyError:
        raise DataError(f"unknown robot {name!r} (built in: {', '.join(sorted(MODELS))})") from None
