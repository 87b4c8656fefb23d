"""Contextual influence of the selected observation (Främling 2022, Eq. 10)."""

from __future__ import annotations

from dash import html

import compute

from .. import components, figures, ids, planning
from . import contributions
from .base import PROFILES, View, csv_download, empty
from .selection import selected_row, sentence

INFO = "influence-info"
BASELINE = (
    "Each bar compares this row's output with the middle of the range it can take as that feature alone "
    "varies over its values, the others held at this row's: + puts the output in the upper half of that "
    "range, − in the lower half (CI × (CU − 0.5)). The contributions compare with the mean prediction over "
    "the rows instead."
)


def render(ctx, inp) -> dict:
    summary = inp.summary
    if summary is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…"), "info": ""}
    row, how = selected_row(summary, inp.state, inp.mask)
    ciu = summary.ciu(row)
    info = " ".join(filter(None, [BASELINE, disagreement(inp, row, ciu["influence"])]))
    return {"figure": figures.influence_figure(ciu, subtitle=sentence(how), names=inp.names), "info": info}


def disagreement(inp, row, influence) -> str:
    """One sentence on the feature whose contribution and influence point different ways
    for this row (the largest such contribution), saying why they can: they read against
    different baselines. Empty when they agree or the contributions are not computed."""
    model = inp.state["model"]
    try:
        found = inp.results(contributions.KIND).get(model)
    except compute.ExplainError:
        return ""
    obs = inp.state.get("obs")
    if found is None or obs is None or planning.row_label(obs, inp.data.index) != row or inp.state.get("edit"):
        return ""
    values = found.values
    scale, unit = (100.0, " pp") if found.output is not None else (1.0, "")
    size = float(values.abs().max()) or 1.0
    apart = [
        f
        for f in values.abs().sort_values(ascending=False).index
        if f in influence.index
        and abs(values[f]) >= 0.05 * size
        and abs(influence[f]) >= 0.01
        and (values[f] > 0) != (influence[f] > 0)
    ]
    if not apart:
        return ""
    f = apart[0]
    pushes = "lowers" if values[f] < 0 else "raises"
    half = "upper" if influence[f] > 0 else "lower"
    return (
        f"For {f} they point different ways (contribution {values[f] * scale:+.3g}{unit}, influence "
        f"{influence[f]:+.2g}): its value {pushes} this prediction against the average row's, yet among the "
        f"values {f} can take it puts this row's output in the {half} half of the range {f} alone can move it."
    )


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
    outputs={"figure": (ids.INFLUENCE_GRAPH, "figure"), "info": (INFO, "children")},
    placeholder=lambda message: {"figure": empty(message), "info": ""},
    render=render,
    body=lambda: [
        components.graph(ids.INFLUENCE_GRAPH, height=None, filename="influence"),
        html.Div(id=INFO, className="help"),
        html.Div(html.Button("Export CSV", id=ids.EXPORT_CIU, className="button small"), className="panel-foot"),
    ],
    needs=frozenset({PROFILES}),
    exports={ids.EXPORT_CIU: export_csv},
    reads=frozenset({"ws", "model", "feature", "subgroup", "obs", "edit"}),
    library=library,
)
