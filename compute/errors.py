"""Exceptions raised by :mod:`compute`.

::

    ExplainError                      base of everything the package raises on purpose
    ├── InputError (ValueError)       a bad argument or bad data: names the parameter or column
    │   └── SubgroupError             a subgroup condition that cannot be parsed or applied
    └── ModelError (RuntimeError)     the model raised, or returned the wrong shape

Callers (the dashboard) show an ``ExplainError``'s message to the user as is; anything
else is a bug and is logged with its traceback.
"""

from __future__ import annotations


class ExplainError(Exception):
    """Base class for the errors this package raises on purpose."""


class InputError(ExplainError, ValueError):
    """An argument or the data is not acceptable; the message names which and why."""


class SubgroupError(InputError):
    """A subgroup condition could not be parsed or evaluated.

    ``position`` is the 0-based character offset in the condition text where the
    problem was found (``None`` when it concerns the whole condition).
    """

    def __init__(self, message: str, *, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class ModelError(ExplainError, RuntimeError):
    """The model failed to predict or returned something of the wrong shape."""
