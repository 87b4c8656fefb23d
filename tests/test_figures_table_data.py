"""figures.table_data reads the frame's columns directly (no ``reset_index``, no ``itertuples``):
its records and columns equal those of resetting the index, for every kind of index and column
it can meet; where ``reset_index`` decides more (object levels, missing level values, clashing
names) the table is made by resetting the index, errors included."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dashboard import figures as F
from dashboard.figures.common import _cell


def by_reset_index(df: pd.DataFrame, *, index_name=None, digits: int = 4):
    """The table as resetting the index makes it (the reference)."""
    frame = df.copy()
    names = [index_name] if index_name is not None and frame.index.nlevels == 1 else list(frame.index.names)
    frame.index.names = [
        str(n) if n is not None else ("index" if frame.index.nlevels == 1 else f"level_{i}")
        for i, n in enumerate(names)
    ]
    frame = frame.reset_index()
    frame.columns = [str(c) for c in frame.columns]
    records = [{c: _cell(v) for c, v in zip(frame.columns, row)} for row in frame.itertuples(index=False)]
    columns = []
    for c in frame.columns:
        numeric = pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
        column: dict = {"name": c, "id": c, "type": "numeric" if numeric else "text"}
        if numeric and pd.api.types.is_float_dtype(frame[c]):
            column["format"] = {"specifier": f",.{digits}~r"}
        columns.append(column)
    return records, columns


FRAMES = [
    (pd.DataFrame({"a": [1, 2, None, 4], "b": list("abcd")}), {}),
    (
        pd.DataFrame(
            {"a": [1.0, np.nan, np.inf, -np.inf], "b": [True, False, True, False]},
            index=pd.Index([3, 1, 2, 5], name="idx"),
        ),
        {"index_name": "row"},
    ),
    (
        pd.DataFrame(
            {"a": pd.Categorical(list("xyzx")), "b": pd.array([1, None, 3, 4], dtype="Int64")}, index=list("vwxy")
        ),
        {},
    ),
    (pd.DataFrame({"a": [1, 2, 3]}, index=pd.Index([1, "a", 2.5], dtype=object)), {"index_name": "f"}),
    (pd.DataFrame({"a": [1, 2, 3]}, index=pd.Index([1, 2, 3], dtype=object)), {"index_name": "f"}),
    (
        pd.DataFrame(
            {"a": [1, 2, 3]}, index=pd.MultiIndex.from_tuples([("x", 1), ("y", 2), ("x", 3)], names=["m", None])
        ),
        {"digits": 3},
    ),
    (
        pd.DataFrame(
            {"a": [1, 2, 3]}, index=pd.MultiIndex.from_arrays([["x", None, "z"], [1, 2, np.nan]], names=["m", "n"])
        ),
        {},
    ),
    (
        pd.DataFrame({"a": pd.to_datetime(["2020-01-01", None, "2021-05-05"])}, index=pd.date_range("2020", periods=3)),
        {},
    ),
    (pd.DataFrame({"a": np.array([1.5, np.nan, 2], dtype="float32")}), {"digits": 2}),
    (pd.DataFrame({"a": [], "b": []}), {}),
    (pd.DataFrame({"a": [1, 2]}, index=pd.CategoricalIndex(["p", "q"])), {"index_name": "c"}),
    (pd.DataFrame({"x": [1, 2]}), {"index_name": "x"}),  # the index's name is a column's: refused alike
    (pd.DataFrame({1: [1, 2], "1": [3, 4]}), {}),  # two columns written alike
]


@pytest.mark.parametrize(("frame", "kw"), FRAMES)
def test_table_data_equals_resetting_the_index(frame, kw):
    try:
        expected = by_reset_index(frame, **kw)
    except ValueError as exc:
        with pytest.raises(type(exc)):
            F.table_data(frame, **kw)
        return
    records, columns = F.table_data(frame, **kw)
    assert columns == expected[1]
    assert records == expected[0]
    # the same Python types (an int stays an int, a missing value None)
    assert [[type(v) for v in r.values()] for r in records] == [[type(v) for v in r.values()] for r in expected[0]]
