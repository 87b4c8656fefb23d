"""The selected observation's values, prediction and ICI integral."""

from __future__ import annotations

from .. import figures, ids, layout, planning
from .base import PROFILES, View
from .selection import selected_row


def render(ctx, inp) -> dict:
    summary = inp.summary
    if summary is None:
        return {"data": [], "columns": []}
    row, _ = selected_row(summary, inp.state, inp.mask)
    values = inp.data.loc[planning.row_label(row, inp.data.index)].to_frame("value")
    values.loc["prediction"] = float(summary.base_pred.loc[row])
    values.loc[f"ICI integral ({inp.feature})"] = float(summary.local[inp.feature].loc[row])
    values["value"] = values["value"].astype(str)
    rows, cols = figures.table_data(values, index_name="column")
    return {"data": rows, "columns": cols}


VIEW = View(
    name="observation",
    order=100,
    title="Selected observation",
    question="Its feature values, prediction and target.",
    outputs={"data": (ids.OBS_TABLE, "data"), "columns": (ids.OBS_TABLE, "columns")},
    render=render,
    body=lambda: [layout.table(ids.OBS_TABLE, page_size=15)],
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "obs"}),
)
