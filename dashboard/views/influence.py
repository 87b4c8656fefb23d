"""Contextual influence of the selected observation (Främling 2022, Eq. 10)."""

from __future__ import annotations

from dash import html

from .. import components, figures, ids
from .base import PROFILES, View, csv_download, empty
from .selection import selected_row, sentence


def render(ctx, inp) -> dict:
    summary = inp.summary
    if summary is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…")}
    row, how = selected_row(summary, inp.state, inp.mask)
    return {"figure": figures.influence_figure(summary.ciu(row), subtitle=sentence(how))}


def export_csv(ctx, inp):
    summary = inp.summary
    if summary is None:
        return None
    row, _ = selected_row(summary, inp.state, inp.mask)
    return csv_download(summary.ciu(row), f"ciu-row-{row}.csv")


def library(inp) -> dict:
    """The selected row's contextual influence (``ProfileSummary.ciu``)."""
    if inp.summary is None:
        return {}
    row, _ = selected_row(inp.summary, inp.state, inp.mask)
    return {"influence": inp.summary.ciu(row)["influence"]}


VIEW = View(
    name="influence",
    section="observation",
    order=90,
    title="Contextual influence",
    question="Which features push this row's output up, and which down?",
    method="Contextual influence, Främling (2022), Eq. 10: CI x (CU - 0.5).",
    outputs={"figure": (ids.INFLUENCE_GRAPH, "figure")},
    render=render,
    body=lambda: [
        components.graph(ids.INFLUENCE_GRAPH, height=None, filename="influence"),
        html.Div(html.Button("Export CSV", id=ids.EXPORT_CIU, className="button small"), className="panel-foot"),
    ],
    needs=frozenset({PROFILES}),
    exports={ids.EXPORT_CIU: export_csv},
    reads=frozenset({"ws", "model", "feature", "subgroup", "obs"}),
    library=library,
)
