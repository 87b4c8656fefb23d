"""Dash front end: layout, callbacks, pure figure builders and server-side state.

``dashboard.show(models, data, target)`` opens Python objects in the dashboard and
``dashboard.report(models, data, target, path)`` writes a review of them
(:mod:`dashboard.api`, which imports nothing else of the package)."""

from .api import ReportError, ShowError, Shown, report, show

__all__ = ["ReportError", "ShowError", "Shown", "report", "show"]
