"""ICI curves of the feature (Casalicchio et al. 2018, Sec. 5), extremes highlighted."""

from __future__ import annotations

from dash import html

from .. import components, figures, ids
from .base import PROFILES, View, empty
from .engine_note import engine_note, joined
from .selection import eligible_mask, selected_label


def render(ctx, inp) -> dict:
    prof = inp.profile
    if prof is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…"), "info": ""}
    eligible = eligible_mask(inp)
    fig = figures.ici_figure(
        prof, selected=selected_label(inp, prof.rows), mask=eligible, label=inp.label(prof.feature)
    )
    local = prof.local_importance if eligible is None else prof.local_importance[eligible]
    negative = int((local < 0).sum())
    info = f"{negative} of {local.size} observations have a negative ICI integral for {inp.label(inp.feature)}."
    return {"figure": fig, "info": joined(info, engine_note(prof))}


def library(inp) -> dict:
    """The PI line (of the subgroup's rows on a subgroup) and the selected row's ICI curve."""
    prof = inp.profile
    if prof is None or not prof.has_target:
        return {}
    found = {"PI": prof.mean_curve("ICI", mask=eligible_mask(inp))}
    row = selected_label(inp, prof.rows)
    if row is not None:
        found["selected row"] = prof.curves("ICI")[prof.rows.get_loc(row)]
    return found


VIEW = View(
    name="ici",
    section="feature",
    order=50,
    title="ICI curves",
    question="For which rows does the feature matter? Click a curve to select that row everywhere.",
    method=(
        "Individual conditional importance (ICI), Casalicchio et al. (2018), Sec. 3-4: one curve per row, the"
        " change in its error when the feature is set to x; solid with upward triangles: the largest integral"
        " (local PFI), dashed with downward triangles: the smallest, dotted with diamonds: the selected row."
    ),
    outputs={"figure": (ids.ICI_GRAPH, "figure"), "info": (ids.ICI_INFO, "children")},
    render=render,
    body=lambda: [
        components.graph(ids.ICI_GRAPH, filename="ici"),
        html.Div(id=ids.HOVER_INFO, className="hover-info"),
        html.Div(id=ids.ICI_INFO, className="help"),
    ],
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", "obs"}),
    library=library,
)
