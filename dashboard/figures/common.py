"""Small helpers the figure families share: labels and values as text, curve x values and the
missing point, bar axes, tables."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from compute.losses import LOSS_LABELS
from compute.results import FeatureProfile

from .theme import MIN_HEIGHT, MISSING_LABEL, PX_PER_FEATURE, esc


def _is_missing(value) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and np.isnan(value)


def level_label(value) -> str:
    """Axis label of a categorical level; missing values become "(missing)"."""
    return MISSING_LABEL if _is_missing(value) else str(value)


def value_text(value) -> str:
    """A value for people: numbers to 4 significant digits, levels as text, missing values
    as "(missing)"."""
    if isinstance(value, (float, np.floating)) and not _is_missing(value):
        return f"{value:.4g}"
    return level_label(value)


def prediction_text(value: float, unit: str, sign: str = "") -> str:
    """A prediction with 4 significant digits; a probability (``unit`` "pp": ``value`` in
    percent) with one decimal: itself in % ("94.5 %"), a change of it (``sign="+"``) in
    percentage points ("+85.4 pp")."""
    if unit == "pp":
        return f"{value:{sign}.1f} pp" if sign else f"{value:.1f} %"
    return f"{value:{sign}.4g}"


def shown_name(names: Mapping[str, str] | None, name) -> str:
    """A feature as a figure writes it: its label in ``names`` (column name -> label, from
    the workspace's labels), else its column name. Plain text: builders escape it."""
    return (names or {}).get(str(name), str(name))


#: a tick label longer than this (a feature's label, up to 80 characters) is broken onto
#: lines of about TICK_WRAP characters, so the plot keeps its width
TICK_WRAP = 28


def tick_text(text: str, *, bold: bool = False, wrap: bool = True) -> str:
    """A category tick as Plotly draws it: escaped, a long label on lines of about
    :data:`TICK_WRAP` characters (``wrap``), in bold for the selected one."""
    lines = textwrap.wrap(text, TICK_WRAP) if wrap and len(text) > TICK_WRAP + 4 else [text]
    shown = "<br>".join(esc(line) for line in lines) or esc(text)
    return f"<b>{shown}</b>" if bold else shown


def _json_label(value):
    """A row or feature label as clickData returns it: ints stay ints, the rest strings."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return value
    return value if isinstance(value, str) else str(value)


def _labels_array(index: pd.Index) -> np.ndarray:
    """Row labels for customdata: an int array for integer labels, else an object array of str."""
    if pd.api.types.is_integer_dtype(index.dtype):
        return np.asarray(index, dtype=np.int64)
    return np.array([_json_label(v) for v in index], dtype=object)


def _x_values(prof: FeatureProfile) -> np.ndarray:
    """The grid as x values: floats, or level labels (strings) for a categorical feature.
    A numeric grid's missing point (NaN) is placed a little right of the largest value
    (:func:`_missing_x`), drawn as a marker apart from the lines."""
    if prof.categorical:
        return np.array([level_label(v) for v in prof.grid], dtype=object)
    x = np.asarray(prof.grid, dtype=float).copy()
    if prof.has_missing_point:
        x[-1] = _missing_x(x[:-1])
    return x


def _missing_x(finite: np.ndarray) -> float:
    """Where a numeric feature's "missing" point is drawn: 8 % of the range right of the maximum."""
    low, high = float(np.min(finite)), float(np.max(finite))
    return high + 0.08 * ((high - low) or 1.0)


def _line(prof: FeatureProfile, x: np.ndarray, y: np.ndarray, mode: str, marker: dict) -> dict:
    """x, y, mode and marker of a curve over the grid: with a missing point, the line stops at
    the largest value and the missing point is a lone marker after a gap."""
    if not prof.has_missing_point or mode != "lines":
        return dict(x=x, y=y, mode=mode, marker=marker)
    sizes = np.zeros(x.size + 1)
    sizes[-1] = 11
    return dict(
        x=np.r_[x[:-1], np.nan, x[-1]],
        y=np.r_[np.asarray(y, float)[:-1], np.nan, np.asarray(y, float)[-1]],
        mode="lines+markers",
        marker={**marker, "size": sizes},
    )


def _missing_axis(prof: FeatureProfile, axis_ref: str = "x") -> list[dict]:
    """Annotations marking the missing point on the x axis (none without one)."""
    if not prof.has_missing_point:
        return []
    share = float(prof.grid_weights[-1])
    return [
        dict(
            x=_x_values(prof)[-1],
            xref=axis_ref,
            y=0,
            yref="paper",
            yanchor="top",
            yshift=-22,
            text=f"missing ({share:.0%})",
            showarrow=False,
            font=dict(size=11, color="#6b7280"),
        )
    ]


def _category_axis(prof: FeatureProfile) -> dict:
    if not prof.categorical:
        return {}
    return dict(type="category", categoryorder="array", categoryarray=list(_x_values(prof)))


def _mask_array(prof: FeatureProfile, mask) -> np.ndarray:
    """A boolean array over ``prof.rows`` from a boolean array or a Series indexed by row labels."""
    if isinstance(mask, pd.Series):
        return mask.reindex(prof.rows, fill_value=False).to_numpy(dtype=bool)
    return np.asarray(mask, dtype=bool)


def _position(rows: pd.Index, label) -> int | None:
    """Position of a row label among ``rows`` (also matching its string form), or None."""
    if label is None or isinstance(label, (list, tuple, dict)):
        return None
    hits = np.flatnonzero(rows == label)
    if hits.size == 0:
        hits = np.flatnonzero(rows.astype(str) == str(label))
    return int(hits[0]) if hits.size else None


def _loss_name(params: Mapping[str, Any] | None, default: str = "loss") -> str:
    """The loss of a result's parameters in words ("squared error", not "squared_error")."""
    name = (params or {}).get("loss")
    return loss_words(name) if name else default


def loss_words(name) -> str:
    """A loss's name for people (``compute.losses.LOSS_LABELS``)."""
    return LOSS_LABELS.get(str(name), str(name).replace("_", " "))


def _sort_features(values: pd.DataFrame) -> list:
    """Features by mean value across columns (models), largest first; NaN last."""
    mean = values.mean(axis=1, skipna=True)
    return list(mean.sort_values(ascending=False, na_position="last", kind="stable").index)


def _bar_axis(order: list, selected, n_traces: int = 1, names: Mapping[str, str] | None = None) -> tuple[dict, int]:
    """Category y axis with the largest at the top and the selected tick in bold; the height.
    The categories are the column names (clicks and the URL use them); each tick shows its
    label from ``names``."""
    text = [  # a label people gave is broken onto lines; column names stay as they are
        tick_text(shown_name(names, f), bold=selected is not None and f == selected, wrap=str(f) in (names or {}))
        for f in order
    ]
    axis = dict(
        title=dict(text="feature"),
        type="category",
        categoryorder="array",
        categoryarray=[str(f) for f in order[::-1]],
        tickmode="array",
        tickvals=[str(f) for f in order],
        ticktext=text,
        automargin=True,
    )
    lines = sum(t.count("<br>") for t in text)  # room for the labels' extra lines
    height = max(MIN_HEIGHT, 110 + int(PX_PER_FEATURE * len(order) * max(1.0, n_traces**0.5)) + 14 * lines)
    return axis, height


def _outline(order: list, selected) -> dict:
    """Bar outlines: a black frame around the selected feature's bars."""
    return dict(width=[2.5 if f == selected else 0 for f in order], color="black")


def table_data(df: pd.DataFrame, *, index_name: str | None = None, digits: int = 4) -> tuple[list[dict], list[dict]]:
    """``(records, columns)`` for a dash DataTable: the index as first column, missing values
    as None, column ids as strings. Numbers stay unrounded in the records (a sort, a filter
    and a test read the library's values); a numeric column shows them to ``digits``
    significant digits (its d3 ``format``, as :func:`shown_number` writes them in the report)."""
    names = [index_name] if index_name is not None and df.index.nlevels == 1 else list(df.index.names)
    index_names = [
        str(n) if n is not None else ("index" if df.index.nlevels == 1 else f"level_{i}") for i, n in enumerate(names)
    ]
    parts = _table_columns(df, index_names)
    if parts is None:  # what only ``reset_index`` decides (object levels, missing codes, clashing names)
        parts = _reset_columns(df, index_names)
    records = [{c: _cell(v) for c, v in zip(parts[0], row)} for row in zip(*parts[1])]
    columns = []
    for c, dtype in zip(parts[0], parts[2]):
        numeric = pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
        column: dict = {"name": c, "id": c, "type": "numeric" if numeric else "text"}
        if numeric and pd.api.types.is_float_dtype(dtype):
            column["format"] = {"specifier": f",.{digits}~r"}  # 4 significant digits, in decimals
        columns.append(column)
    return records, columns


def _cell(v):
    """A table cell: missing as None, numbers as Python numbers (inf and nan as text), the rest as text."""
    if _is_missing(v):
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else str(float(v))
    return v if isinstance(v, str) else str(v)


class _Columns(NamedTuple):
    names: list[str]
    values: list[list]
    dtypes: list  # a dtype (or the column itself) per name


def _table_columns(df: pd.DataFrame, index_names: list[str]) -> _Columns | None:
    """(names, values, dtypes) of the index levels then the columns, as ``reset_index`` makes
    them, read straight off the frame (``reset_index`` and ``itertuples`` cost about a
    millisecond a table); None where ``reset_index`` would do more than move the index."""
    index = df.index
    levels = [index] if index.nlevels == 1 else [index.get_level_values(i) for i in range(index.nlevels)]
    if isinstance(index, pd.MultiIndex) and any((codes == -1).any() for codes in index.codes):
        return None  # a missing level value: reset_index fills it its own way
    if any(level.dtype == object for level in levels):
        return None  # reset_index infers another dtype for an object level
    names = index_names + [str(c) for c in df.columns]
    if len(set(names)) != len(names) or any(n in df.columns for n in index_names):
        return None  # clashing names: reset_index refuses, or a column would be read twice
    values = [list(level) for level in levels] + [list(column) for _, column in df.items()]
    return _Columns(names, values, [level.dtype for level in levels] + list(df.dtypes))


def _reset_columns(df: pd.DataFrame, index_names: list[str]) -> _Columns:
    """(names, values, columns) of ``df`` with its index reset under ``index_names`` (the
    columns themselves stand for their dtypes)."""
    frame = df.copy()
    frame.index.names = index_names
    frame = frame.reset_index()
    frame.columns = [str(c) for c in frame.columns]
    rows = list(frame.itertuples(index=False))
    values = [[row[k] for row in rows] for k in range(frame.shape[1])]
    return _Columns(list(frame.columns), values, [frame[c] for c in frame.columns])


def shown_number(value, digits: int = 4) -> str:
    """A number as a numeric table column shows it (``digits`` significant digits, in
    decimals, thousands separated); anything else as text."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return "" if value is None else str(value)
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if not np.isfinite(value):
        return str(float(value))
    rounded = float(f"{float(value):.{digits}g}")
    if rounded == 0:
        return "0"
    decimals = max(0, digits - 1 - int(np.floor(np.log10(abs(rounded)))))
    return f"{rounded:,.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{rounded:,.0f}"
