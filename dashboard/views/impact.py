"""ICE feature impact (seed 004) and PD importance (FIRM, seed 002) per feature."""

from __future__ import annotations

from .. import components, figures, ids
from .base import PROFILES, View

# the measures in words, and (the header's tooltip) the method behind each
WORDS = {
    "impact": ("impact", "ICE feature impact: how far the predictions move, on average, over the feature's range"),
    "signed_impact": ("direction", "signed ICE impact: positive when the predictions rise with the feature"),
    "in_distribution_impact": (
        "impact within the data",
        "in-distribution ICE impact: only over the values each row's neighbours really take",
    ),
    "heterogeneity": ("differs across rows", "ICE heterogeneity: how much the curves differ from row to row"),
    "non_linearity": ("bend", "ICE non-linearity: how far the curves are from straight lines"),
    "pd_importance": ("PD spread", "PD importance (FIRM, SIPA Sec. 5): the spread of the partial dependence"),
}


def render(ctx, inp) -> dict:
    summary = inp.summary
    if summary is None:
        return {"data": [], "columns": [], "tooltips": {}}
    impact = summary.impact.copy()
    impact["pd_importance"] = summary.pd_importance
    impact = impact.sort_values("impact", ascending=False, kind="stable")  # most impact first, on every page
    impact = impact.rename(columns={k: words for k, (words, _) in WORDS.items()}, index=inp.label)
    rows, cols = figures.table_data(impact, index_name="feature")
    tooltips = {words: method for words, method in WORDS.values()}
    return {"data": rows, "columns": cols, "tooltips": tooltips}


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
    outputs={
        "data": (ids.IMPACT_TABLE, "data"),
        "columns": (ids.IMPACT_TABLE, "columns"),
        "tooltips": (ids.IMPACT_TABLE, "tooltip_header"),
    },
    render=render,
    placeholder=lambda message: {"data": [], "columns": [], "tooltips": {}},
    body=lambda: [components.table(ids.IMPACT_TABLE)],
    needs=frozenset({PROFILES}),
    wide=True,  # six measures per feature: a half-width panel cut them off
    reads=frozenset({"ws", "model"}),
    library=library,
)
