"""Dash front end: layout, callbacks, pure figure builders and server-side state.

``dashboard.report(models, data, target, path)`` writes a review from Python objects
(:mod:`dashboard.api`, which imports nothing else of the package)."""

from .api import ReportError, report

__all__ = ["ReportError", "report"]
