"""The most and least influential observations (largest / smallest local PFI, Eq. 9) and
exclusions (Sec. 6.2, Table 2 row 3)."""

from __future__ import annotations

import pandas as pd
from dash import html

from compute.findings import possessive

from .. import components, figures, ids
from .base import PROFILES, Select, View, csv_download
from .selection import eligible_mask

ICI_TABLE = "ici-table"  # clicking it selects the observation

N_INFLUENTIAL = 10


def words(feature) -> dict:
    """The table's columns in words, and (the header's tooltip) the method behind each."""
    return {
        "ici_integral": (
            "error increase",
            f"ICI integral (local PFI, Casalicchio et al. 2018, Eq. 9): how much this row's error grows, on "
            f"average, when {feature} takes the other rows' values; its share of {possessive(feature)} PFI",
        ),
        "rank": ("which end", f"the {N_INFLUENTIAL} rows {feature} matters most for, and the {N_INFLUENTIAL} least"),
    }


def render(ctx, inp) -> dict:
    summary, prof = inp.summary, inp.profile
    excluded = inp.state.get("exclude") or []
    info = (
        f"{len(excluded)} observation(s) excluded from the PFI: {', '.join(excluded[:10])}"
        + ("…" if len(excluded) > 10 else "")
        if excluded
        else ""
    )
    if summary is None or prof is None:
        return {"data": [], "columns": [], "tooltips": {}, "negative": [], "excluded": info}
    table = summary.influential(inp.feature, N_INFLUENTIAL, eligible_mask(inp))
    named = words(inp.label(inp.feature))
    rows, cols = figures.table_data(table.rename(columns={k: w for k, (w, _) in named.items()}), index_name="row")
    for record, label in zip(rows, table.index):  # DataTable's active_cell.row_id: sort/page proof
        record["id"] = str(label)
    negative = [str(r) for r in summary.rows[summary.local[inp.feature].to_numpy() < 0]]
    tooltips = {w: method for w, method in named.values()}
    return {"data": rows, "columns": cols, "tooltips": tooltips, "negative": negative, "excluded": info}


def export_csv(ctx, inp):
    prof = inp.profile
    if prof is None:
        return None
    frame = inp.data.loc[prof.rows].copy()
    frame.insert(0, f"ici_integral_{inp.feature}", prof.local_importance)
    if inp.profile_mask is not None:
        frame.insert(1, "in_subgroup", inp.profile_mask)
    return csv_download(frame, f"ici-integrals-{inp.feature}.csv", index_label="row")


def library(inp) -> dict:
    """The most influential rows' ICI integrals (``ProfileSummary.influential``)."""
    if inp.summary is None or inp.profile is None:
        return {}
    table = inp.summary.influential(inp.feature, N_INFLUENTIAL, eligible_mask(inp))
    return {str(c): table[c] for c in table.columns if pd.api.types.is_float_dtype(table[c])}


VIEW = View(
    name="influential",
    section="feature",
    order=70,
    title="Most and least influential observations",
    question="Which rows does the feature matter most and least for? Click a row to select it.",
    method=(
        "Local PFI = the integral of a row's ICI curve; excluding rows recomputes the PFI without them "
        "(Casalicchio et al. 2018, Table 2, row 3)."
    ),
    outputs={
        "data": (ICI_TABLE, "data"),
        "columns": (ICI_TABLE, "columns"),
        "tooltips": (ICI_TABLE, "tooltip_header"),
        "negative": (ids.NEGATIVE, "data"),
        "excluded": (ids.EXCLUDED_INFO, "children"),
    },
    render=render,
    # while its curves are missing (computing, or none: a feature with no values or one) the
    # note under the table says so, as the figures of the section do
    placeholder=lambda message: {"data": [], "columns": [], "tooltips": {}, "negative": [], "excluded": message},
    body=lambda: [
        components.table(ICI_TABLE, page_size=10),
        html.Div(
            [
                html.Button("Exclude negative integrals", id=ids.EXCLUDE_NEGATIVE, className="button small"),
                html.Button("Exclude selected observation", id=ids.EXCLUDE_SELECTED, className="button small"),
                html.Button("Clear exclusions", id=ids.EXCLUDE_CLEAR, className="button small"),
                html.Button("Export CSV", id=ids.EXPORT_ICI, className="button small"),
            ],
            className="panel-foot",
        ),
        html.Div(id=ids.EXCLUDED_INFO, className="help"),
    ],
    needs=frozenset({PROFILES}),
    exports={ids.EXPORT_ICI: export_csv},
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", "obs"}),
    selects=(Select(ICI_TABLE, "obs", prop="active_cell"),),
    library=library,
)
