"""Which rows the per-row views show and which observation is selected (one rule)."""

from __future__ import annotations

import pandas as pd

from .. import planning


def eligible_mask(inp):
    """The subgroup over the profile's rows, or None (no subgroup, or it explains no row)."""
    mask = inp.profile_mask
    return mask if (mask is not None and mask.any()) else None


def selected_label(inp, rows: pd.Index):
    """The selected observation as a label of ``rows``, or None."""
    value = inp.state.get("obs")
    if value is None:
        return None
    label = planning.row_label(value, rows)
    return label if label in rows else None


def selected_row(summary, state: dict, mask) -> tuple:
    """The observation CIU explains and how it was chosen: the selected one if it is among
    the explained rows, else the most influential row of the feature (in the subgroup), by
    the summary's one ranking rule."""
    value = state.get("obs")
    row = None if value is None else planning.row_label(value, summary.rows)
    if row is not None and row in summary.rows:
        return row, f"row {row}"
    inside = None
    if mask is not None:
        inside = mask.reindex(summary.rows).fillna(False).to_numpy(bool)
        inside = inside if inside.any() else None
    row = summary.influential(state["feature"], 1, inside).index[0]
    where = " in the subgroup" if inside is not None else ""
    note = " (the selected one is not among the explained rows)" if value is not None else ""
    return row, (
        f"no observation selected{note}: showing row {row}, the largest ICI integral{where} for {state['feature']}"
    )
