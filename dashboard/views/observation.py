"""The selected observation's values, prediction and ICI integral."""

from __future__ import annotations

import numpy as np
from dash import html

from .. import components, figures, ids, planning
from .base import PROFILES, View
from .selection import selected_row

ROW_INFO = "observation-row-info"  # which row the table shows, and why


def render(ctx, inp) -> dict:
    summary = inp.summary
    if summary is None:
        return {"data": [], "columns": [], "info": ""}
    row, how = selected_row(summary, inp.state, inp.mask)
    values = inp.data.loc[planning.row_label(row, inp.data.index)].to_frame("value")
    values.loc["prediction"] = float(summary.base_pred.loc[row])
    if inp.feature in summary.local.columns:  # a feature with no curve (no values or one) has no ICI integral
        values.loc[f"ICI integral ({inp.label(inp.feature)})"] = float(summary.local[inp.feature].loc[row])
    values["value"] = [_shown(v) for v in values["value"]]  # 4 significant digits; levels as text
    values.index = [inp.label(c) for c in values.index]  # the features as people read them
    rows, cols = figures.table_data(values, index_name="column")
    return {"data": rows, "columns": cols, "info": f"The values of {how}."}


def _shown(value) -> str:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        number = int(value)
        return f"{number:,}" if abs(number) >= 10_000 else str(number)
    return figures.value_text(value)


def library(inp) -> dict:
    """The row's prediction and ICI integral (``ProfileSummary``), as the table writes them."""
    if inp.summary is None:
        return {}
    row, _ = selected_row(inp.summary, inp.state, inp.mask)
    found = {"prediction": float(inp.summary.base_pred.loc[row])}
    if inp.feature in inp.summary.local.columns:
        found["ICI integral"] = float(inp.summary.local[inp.feature].loc[row])
    return found


VIEW = View(
    name="observation",
    section="observation",
    order=100,
    title="Selected observation",
    question="What are this row's values, prediction and target?",
    method="",
    outputs={"data": (ids.OBS_TABLE, "data"), "columns": (ids.OBS_TABLE, "columns"), "info": (ROW_INFO, "children")},
    render=render,
    body=lambda: [html.Div(id=ROW_INFO, className="help"), components.table(ids.OBS_TABLE, page_size=15)],
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "obs"}),
    library=library,
)
