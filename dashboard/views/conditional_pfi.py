"""Conditional PFI of all rows, the subgroup and its complement (Eq. 9, Sec. 6.1)."""

from __future__ import annotations

from dash import html

from .. import components, figures, ids
from .base import PROFILES, View, csv_download

INFO = "conditional-pfi-info"


def table(inp):
    """The conditional PFI table, or None before the ICE/ICI pass."""
    summary = inp.summary
    return None if summary is None else summary.conditional_pfi(inp.mask, inp.state.get("exclude"))


def render(ctx, inp) -> dict:
    frame = table(inp)
    if frame is None:
        return {"data": [], "columns": [], "info": ""}
    counts = frame.attrs["counts"]
    frame.columns = [f"{c} (n={counts[c]})" for c in frame.columns]
    rows, cols = figures.table_data(frame, index_name="feature")
    return {"data": rows, "columns": cols, "info": WHY_THEY_DIFFER if inp.mask is not None else ""}


# One line on why these numbers and the permutation bars (Overview) can disagree on a subgroup.
WHY_THEY_DIFFER = (
    "Why this can differ from the permutation PFI bars: here each row of a group takes the feature's values "
    "of all rows, so a feature that defines the subgroup (constant inside it) can still matter a lot; the "
    "bars shuffle the feature among the subgroup's own rows only, so such a feature gets 0 there."
)


def export_csv(ctx, inp):
    frame = table(inp)
    if frame is None:
        return None
    for name, pfi in inp.pfi.items():
        frame[f"permutation PFI {name}"] = pfi.importance
        frame[f"permutation std_error {name}"] = pfi.uncertainty
    return csv_download(frame, "pfi.csv", index_label="feature")


def library(inp) -> dict:
    """Conditional PFI of each group (``ProfileSummary.conditional_pfi``, Eq. 9)."""
    frame = table(inp)
    return {} if frame is None else {str(c): frame[c] for c in frame.columns}


VIEW = View(
    name="conditional_pfi",
    section="subgroups",
    order=30,
    title="Conditional PFI: all data, subgroup, complement",
    question="Do the features matter as much in the subgroup as in the rest?",
    method=(
        "Conditional PFI, Casalicchio et al. (2018), Eq. 9 and Sec. 6.1: the mean ICI integral over the rows "
        "of each group; no new model calls."
    ),
    outputs={
        "data": (ids.PFI_TABLE, "data"),
        "columns": (ids.PFI_TABLE, "columns"),
        "info": (INFO, "children"),
    },
    render=render,
    body=lambda: [
        components.table(ids.PFI_TABLE),
        html.Div(id=INFO, className="help"),
        html.Div([html.Button("Export CSV", id=ids.EXPORT_PFI, className="button small")], className="panel-foot"),
    ],
    needs=frozenset({PROFILES}),
    exports={ids.EXPORT_PFI: export_csv},
    reads=frozenset({"ws", "model", "subgroup", "exclude"}),
    library=library,
)
