"""The rows a drill-down state selects, and how it names them: a subgroup condition minus
excluded observations (:func:`select_rows`), its identity in cache keys (:func:`rows_id`), a
row label as the data set spells it (:func:`row_label`), and the what-if edits valid for a row
(:func:`clean_edits`). Below the planner, the state and the views; it knows no task.
"""

from __future__ import annotations

import hashlib
import json

import pandas as pd

import compute
from compute.sampling import is_categorical


def rows_id(condition: str, excluded) -> str:
    """Identifies a selection of rows: a subgroup condition minus excluded observations."""
    spec = json.dumps([(condition or "").strip(), sorted(str(e) for e in (excluded or ()))])
    return hashlib.sha256(spec.encode()).hexdigest()[:24]


def select_rows(data: pd.DataFrame, condition: str, excluded=()) -> pd.Series:
    """Boolean mask over the data: the subgroup condition (all rows if empty) minus the
    excluded row labels. Raises ``SubgroupError`` for a bad condition."""
    mask = compute.parse_subgroup(condition, data) if (condition or "").strip() else pd.Series(True, index=data.index)
    if excluded:
        labels = pd.Index([row_label(e, data.index) for e in excluded])
        mask = mask & ~data.index.isin(labels)
    return mask


def clean_edits(data: pd.DataFrame, features, row, edit: dict) -> dict:
    """What-if edits valid for this row: columns the model uses, a level found in the data
    (as its text) for a categorical column, a number clamped to the observed range (whole
    for an integer column) otherwise; values equal to the row's own are dropped."""
    by_name = {str(f): f for f in features}
    kept: dict = {}
    for key, value in (edit or {}).items():
        column = by_name.get(key)
        if column is None:
            continue
        values = data[column]
        old = data.at[row, column]
        if is_categorical(values):
            levels = {str(level): level for level in values.dropna().unique()}
            if isinstance(value, str) and value in levels and not _equal(levels[value], old):
                kept[key] = value
            continue
        if isinstance(value, str) or isinstance(value, bool):
            continue
        low, high = float(values.min()), float(values.max())
        number: float | int = min(max(float(value), low), high)
        if pd.api.types.is_integer_dtype(values):
            number = int(round(number))
        if not _equal(number, old):
            kept[key] = number
    return dict(sorted(kept.items()))


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def row_label(value, index: pd.Index):
    """A row label as it arrives from the URL or a click (a string or int) in the index's type."""
    if pd.api.types.is_integer_dtype(index.dtype):
        try:
            return int(value)
        except (TypeError, ValueError):
            return value
    return value
