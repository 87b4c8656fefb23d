"""README's worked example ("Adding a view"): a clickable bar chart with a control kept in the
URL, added as this one module (the registry picks it up from ``WIP_EXTRA_VIEWS``).

PD importance (FIRM; Scholbeck et al. 2019, Sec. 5, ``compute.pd_importance``) of each
feature of the selected model, read from the summary the ICE pass already caches: a click on
a bar selects that feature, and "top N" (``firm_top``, in the URL) shows the N largest.
"""

from __future__ import annotations

from dash import dcc, html

from dashboard import components, figures
from dashboard.state import int_field
from dashboard.views.base import PROFILES, Select, View, empty

GRAPH = "firm-graph"
TOP = "firm-top"
FIRM_TOP = int_field("firm_top", 10, low=1, high=50, control=(TOP, "value"))


def render(ctx, inp) -> dict:
    summary = inp.summary
    if summary is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…")}
    values = summary.pd_importance.sort_values(ascending=False, kind="stable").head(inp.state["firm_top"])
    figure = figures.bar_figure(
        values,
        title=f"How much the partial dependence of each feature varies: the top {len(values)}",
        x_title=f"standard deviation of the PD ({'prediction' if inp.ws.output is None else 'probability'})",
        uirevision="firm",
        name="PD importance",
        selected=inp.feature,
        subtitle=str(inp.state["model"]),
    )
    return {"figure": figure}


VIEW = View(
    name="firm",
    section="overview",
    order=95,
    title="Partial-dependence importance",
    question="Whose average effect on the prediction varies most over its range? Click a bar to pick a feature.",
    method="PD importance (FIRM), Scholbeck et al. (2019), Sec. 5: the standard deviation of the PD curve.",
    outputs={"figure": (GRAPH, "figure")},
    render=render,
    body=lambda: [components.graph(GRAPH, height=None, filename="firm")],
    extra=lambda: html.Label(["top ", dcc.Input(id=TOP, type="number", min=1, max=50, step=1, value=10)]),
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature", "firm_top"}),
    selects=(Select(GRAPH, "feature"),),
    state=(FIRM_TOP,),
)
