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
    """The observation CIU explains and how it was chosen: the state's observation (the
    selected one, or the default one the planner resolved, ``obs_default``) when the curves
    explain it, else the default rule (``planning.default_observation``) on their rows."""
    value = state.get("obs")
    row = None if value is None else planning.row_label(value, summary.rows)
    if row is not None and row in summary.rows:
        return row, observation_text(state, row)
    row = planning.default_observation(summary, mask)
    note = f"row {value}, the one selected, is not among the rows the curves explain; " if value is not None else ""
    return row, f"row {row} ({note}shown by default: {_rule(state)})"


def _rule(state: dict) -> str:
    where = " of the subgroup" if state.get("subgroup") else ""
    return f"the most influential row{where}, its ICI integrals summed over the features"


def observation_text(state: dict, row, *, brief: bool = False) -> str:
    """How every per-row view names its observation: ``row 12``, or, shown by default,
    ``row 429 (shown by default: the most influential row, …)`` (``brief``: without the rule,
    for a chart's title)."""
    if state.get("obs_default"):
        return f"row {row} (shown by default)" if brief else f"row {row} (shown by default: {_rule(state)})"
    return f"row {row}"


def sentence(text: str) -> str:
    """``text`` opening a sentence (its first letter capitalised)."""
    return text[:1].upper() + text[1:]
