"""ICE feature impact (seed 004) and PD importance (FIRM, seed 002) per feature."""

from __future__ import annotations

from .. import components, figures, ids
from .base import PROFILES, View


def render(ctx, inp) -> dict:
    summary = inp.summary
    if summary is None:
        return {"data": [], "columns": []}
    impact = summary.impact.copy()
    impact["pd_importance"] = summary.pd_importance
    impact = impact.sort_values("impact", ascending=False, kind="stable")  # most impact first, on every page
    rows, cols = figures.table_data(impact, index_name="feature")
    return {"data": rows, "columns": cols}


def library(inp) -> dict:
    """ICE feature impact and PD importance of every feature (``ProfileSummary``)."""
    if inp.summary is None:
        return {}
    found = {name: inp.summary.impact[name] for name in inp.summary.impact.columns}
    return {**found, "pd_importance": inp.summary.pd_importance}


VIEW = View(
    name="impact",
    section="overview",
    order=120,
    title="ICE feature impact",
    question="How strongly, and how unevenly, does each feature move the predictions?",
    method=(
        "ICE feature impact (the ruler paper): impact, in-distribution impact, heterogeneity (interactions) "
        "and non-linearity per feature; PD importance (FIRM) for comparison."
    ),
    outputs={"data": (ids.IMPACT_TABLE, "data"), "columns": (ids.IMPACT_TABLE, "columns")},
    render=render,
    body=lambda: [components.table(ids.IMPACT_TABLE)],
    needs=frozenset({PROFILES}),
    wide=True,  # six measures per feature: a half-width panel cut them off
    reads=frozenset({"ws", "model"}),
    library=library,
)
