"""Callbacks: thin wrappers around plain functions that take a :class:`Context`.

Each module's ``register(app, ctx)`` declares its callbacks; the plain functions next to
them hold the logic and are unit-tested by calling them.
"""

from . import compute, drilldown, export, load, views


def register_all(app, ctx) -> None:
    for module in (drilldown, compute, views, load, export):
        module.register(app, ctx)
