"""The rows as the walked model receives them (:class:`Space`).

A tree model alone receives the data's own numbers: feature j is column j. A ``Pipeline``
whose steps before the model are column-wise transforms (scaling, imputing, ordinal or
quantile encoding, inside a ``ColumnTransformer`` or not) gives the model rows in which
each feature is one column, transformed by itself alone: the walk then runs on those rows
(transformed once per pass), with the feature's intervened values transformed the same way.
Which column holds a feature, and its transformed values, are read off the pipeline's own
``transform`` of probe rows (the feature set to the values, every other column as in a real
row); a feature spread over several columns (one-hot) or none is not walked. Only
transformers known to be column-wise are accepted (:data:`COLUMN_WISE`): a transform that
reads other columns (a KNN or iterative imputer) could not be expressed as one column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .ensemble import Unsupported

#: scikit-learn transformers whose output column depends on one input column only (each of
#: ``ColumnTransformer``'s and ``Pipeline``'s parts checked in turn).
COLUMN_WISE = frozenset(
    {
        "StandardScaler",
        "MinMaxScaler",
        "MaxAbsScaler",
        "RobustScaler",
        "SimpleImputer",
        "OrdinalEncoder",
        "OneHotEncoder",
        "TargetEncoder",
        "QuantileTransformer",
        "PowerTransformer",
        "KBinsDiscretizer",
        "MissingIndicator",
    }
)
#: Distinct values of a feature probed to find its column.
PROBES = 16


def check_column_wise(step) -> None:
    """Unsupported unless ``step`` (a fitted transformer) maps each input column alone."""
    if step is None or (isinstance(step, str) and step in ("passthrough", "drop")):
        return
    cls = type(step)
    name = cls.__name__
    if not cls.__module__.startswith("sklearn."):
        raise Unsupported(
            f"a Pipeline step {name} from {cls.__module__}: the engine walks scikit-learn's own transforms"
        )
    if name == "Pipeline":
        for _, inner in step.steps:
            check_column_wise(inner)
    elif name == "ColumnTransformer":
        for _, inner, _ in step.transformers_:
            check_column_wise(inner)
    elif name == "FunctionTransformer" and step.func is None:
        return  # the identity (a ColumnTransformer's remainder="passthrough")
    elif name not in COLUMN_WISE:
        allowed = ", ".join(sorted(COLUMN_WISE))
        raise Unsupported(f"a Pipeline step {name}: the engine walks after column-wise transforms only ({allowed})")


@dataclass(eq=False)
class Space:
    """The data (``design``) as the walked model receives it: through ``pre`` (the fitted
    steps before it, in order; empty: the data's own numbers)."""

    design: Any
    pre: tuple = ()
    _columns: dict = field(default_factory=dict)
    _last: tuple = (None, None)  # the last rows asked for (the same array object) and their numbers

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """The model's input rows at positions ``rows`` (float64, either memory order; the
        check and the walk of one call ask for the same rows: read once). Read, never written
        to: every row in order is the data's own array (:meth:`.Design.read_numbers`)."""
        if self._last[0] is rows:
            return self._last[1]
        found = self.design.read_numbers(rows) if not self.pre else self._transform(self.design.frame.iloc[rows])
        self._last = (rows, found)
        return found

    def column(self, feature) -> int:
        """The model input column that holds ``feature``."""
        if not self.pre:
            return int(self.design.position(feature))
        if feature not in self._columns:
            column = self.design.frame[feature]
            values = column.drop_duplicates().to_numpy()[:PROBES]
            if isinstance(column.dtype, pd.CategoricalDtype) and len(column.dtype.categories) > len(values):
                values = column.dtype.categories.to_numpy()[:PROBES]  # every level moves, not only these rows'
            if pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype):
                finite = values[np.isfinite(values.astype(float))]
                values = np.append(values, finite[0] + 1.0 if finite.size else 0.0)  # a constant column moves too
            probed = self._probe(feature, values, 0)
            same = (probed == probed[:1]) | (np.isnan(probed) & np.isnan(probed[:1]))  # a missing value moves too
            moved = np.flatnonzero(~same.all(axis=0))
            if moved.size != 1:
                where = "no column" if moved.size == 0 else f"{moved.size} columns"
                raise Unsupported(f"the pipeline turns {feature!r} into {where}: the walk needs one")
            self._columns[feature] = int(moved[0])
        return self._columns[feature]

    def values(self, feature, values) -> np.ndarray:
        """``feature``'s values ``values`` as the model receives them (float64)."""
        if not self.pre:
            return np.asarray(values, dtype=np.float64)
        a = self.column(feature)
        first, other = self._probe(feature, values, 0), self._probe(feature, values, -1)
        mapped = first[:, a]
        if not np.array_equal(mapped, other[:, a], equal_nan=True):
            raise Unsupported(f"the pipeline's value of {feature!r} depends on other columns")
        return mapped

    def _probe(self, feature, values, at: int) -> np.ndarray:
        """The transformed rows of data row ``at`` with ``feature`` set to each value."""
        frame = self.design.frame
        probe = frame.iloc[np.full(len(values), at)].copy()
        probe[feature] = pd.array(values, dtype=frame[feature].dtype) if len(values) else frame[feature].iloc[:0]
        return self._transform(probe)

    def _transform(self, rows: pd.DataFrame) -> np.ndarray:
        out: Any = rows
        for step in self.pre:
            if isinstance(out, pd.DataFrame) and not hasattr(step, "feature_names_in_"):
                out = out.to_numpy()  # a step fitted on an array is given one (as the model's own predict does)
            out = step.transform(out)
        try:
            return np.asarray(out.toarray() if hasattr(out, "toarray") else out, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise Unsupported(f"the pipeline's steps do not give the model numbers ({exc})") from exc
