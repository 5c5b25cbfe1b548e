"""Derived data cached on the model it was derived from (Pinocchio's model/data split, without global caches).

`per_model` memoises a function whose first argument is a `RobotModel` in a dict owned by that model, keyed on
the remaining (hashable) arguments: the cache lives and dies with the model, never keyed on object identity.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def per_model(fn: F) -> F:
    """Memoise fn(model, *args, **kwargs) on `model.memo`."""

    @functools.wraps(fn)
    def wrapper(model, *args, **kwargs):
        key = (fn.__module__, fn.__qualname__, args, tuple(sorted(kwargs.items())))
        memo = model.memo
        try:
            return memo[key]
        except KeyError:
            memo[key] = value = fn(model, *args, **kwargs)
            return value
        except TypeError:  # an argument by value (a parameter set read from a file): computed, not cached
            return fn(model, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
