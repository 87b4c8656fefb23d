"""Scalar checks: the leaf every compute module may import (it imports nothing of compute
but its errors). Each raises :class:`~compute.errors.InputError` naming the parameter, what
is allowed and what came."""

from __future__ import annotations

import difflib
import math
import numbers

import numpy as np
import pandas as pd

from .errors import InputError


def check_choice(value, name: str, choices) -> str:
    """``value`` must be one of the strings ``choices``."""
    if not (isinstance(value, str) and value in choices):
        raise InputError(f"The {name!r} parameter must be one of {list(choices)!r} (got {value!r}).")
    return value


def is_real(value) -> bool:
    """A finite real number that is not a bool."""
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int too large for a float
        return False


def check_real(
    value,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    strict: bool = False,
    allowed: str | None = None,
) -> float:
    """A finite real number (not a bool) within ``[low, high]`` (``(low, ...`` when ``strict``).

    ``allowed`` replaces the generated description of the allowed values in the message.
    """
    ok = is_real(value)
    if ok and low is not None:
        ok = value > low if strict else value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        if allowed is None:
            if low is not None and high is not None:
                allowed = f"a number in [{low:g}, {high:g}]"
            elif low is not None:
                allowed = f"a finite number {'>' if strict else '>='} {low:g}"
            else:
                allowed = "a finite number"
        raise InputError(f"The {name!r} parameter must be {allowed} (got {value!r}).")
    return float(value)


def check_int(value, name: str, *, low: int, high: int | None = None, none_ok: bool = False):
    """An int (not a bool, not a float) within ``[low, high]``; None when ``none_ok``."""
    if value is None and none_ok:
        return None
    is_int = isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
    if not is_int or value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        allowed = f"an int {bound}{' or None' if none_ok else ''}"
        raise InputError(f"The {name!r} parameter must be {allowed} (got {value!r}).")
    return int(value)


def check_n_jobs(n_jobs) -> int:
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
        raise InputError(f"The 'n_jobs' parameter must be a positive int, -1 for all cores, or None (got {n_jobs!r}).")
    return int(n_jobs)


def check_rng(random_state) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.SeedSequence) or random_state is None:
        return np.random.default_rng(random_state)
    if (
        isinstance(random_state, numbers.Integral)
        and not isinstance(random_state, (bool, np.bool_))
        and int(random_state) >= 0
    ):
        return np.random.default_rng(int(random_state))
    shown = repr(random_state) if isinstance(random_state, (numbers.Number, str)) else type(random_state).__name__
    raise InputError(f"The 'random_state' parameter must be an int >= 0, a numpy Generator or None (got {shown}).")


def is_label(value) -> bool:
    """Whether ``value`` can be a column or row label (hashable, not an array)."""
    if isinstance(value, (np.ndarray, pd.Series, pd.Index, pd.DataFrame)):
        return False
    try:
        hash(value)
    except TypeError:
        return False
    return True


def close_matches(word, options, *, n: int) -> list[str]:
    """Close matches of ``word`` among ``options`` ignoring case, returned as spelled in ``options``."""
    spelled = {str(o).lower(): str(o) for o in options}
    return [spelled[m] for m in difflib.get_close_matches(str(word).lower(), list(spelled), n=n)]
