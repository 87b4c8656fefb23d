"""What-if: one observation with some feature values changed, explained as it is and as edited.

For an observation x (a row of X) and edits e (column -> new value), x' is x with the edited
columns replaced. In one prediction pass this computes, for both x and x':

* the prediction f(x), f(x');
* for every feature j, the individual conditional expectation (ICE) curve of the row
  over j's grid, f(x_j = g, x_{-j}) for each grid point g (Goldstein et al. 2015; the ICE
  of Casalicchio, Molnar & Bischl 2018, Sec. 3), so the page can show where the row sits
  on its curve before and after the edit;
* the row's contextual importance and utility (Främling 2022, Eq. 6 and 8) read off those
  curves, as :func:`compute.ciu_from_profiles` does for the profile's rows: ymin and ymax
  are the extremes of the curve and of the row's own prediction.

The grid of a numeric feature holds ``grid`` quantiles of the column in X (its minimum and
maximum included; the observed values when there are fewer distinct ones); a categorical
feature's grid holds every level found in X (:func:`compute.sampling.make_grid`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .ciu import COLUMNS, _default_range, check_out_range, check_utility, ciu_table, with_instances
from .errors import InputError
from .prediction import Predictor, predict_segments, unmodified_segment
from .sampling import Grid, is_categorical, make_grid
from .segments import Segment
from .validation import (
    as_pandas,
    check_feature,
    check_frame,
    check_grid,
    check_int,
    check_n_jobs,
    is_label,
    is_real,
    make_predictor,
)


@dataclass(frozen=True, eq=False)
class WhatIf:
    """An observation as it is and as edited, with the ICE curves and CIU of both.

    Attributes
    ----------
    row : the observation's label in X.
    edits : column -> new value, for the columns whose value the edit changes (as the data's
        type: a level of a categorical column, a number otherwise).
    edited : the edited row as a one-row DataFrame with the model's columns.
    prediction, original_prediction : f(x') and f(x) (a class probability for classifiers).
    grids : feature -> grid values (floats, or an object array of levels).
    categorical : feature -> whether its grid holds levels.
    curves : feature -> array (2, n_grid): the ICE of the original row (0) and of the edited
        row (1) over the feature's grid.
    values : DataFrame indexed by feature with columns ``original`` and ``edited``: the
        row's own value of each feature.
    ciu, original_ciu : CIU tables (columns of :func:`compute.contextual_importance`) of the
        edited and of the original row.
    out_range : (MIN, MAX) of CI.
    output : the class explained (None for regressors).
    """

    row: object
    edits: dict
    edited: pd.DataFrame
    prediction: float
    original_prediction: float
    grids: dict
    categorical: dict
    curves: dict
    values: pd.DataFrame
    ciu: pd.DataFrame
    original_ciu: pd.DataFrame
    out_range: tuple[float, float]
    output: object = None
    params: dict = field(default_factory=dict)

    @property
    def change(self) -> float:
        """f(x') - f(x)."""
        return self.prediction - self.original_prediction

    def to_frame(self) -> pd.DataFrame:
        """One line per feature: its value before and after the edit, and CI / CU of both."""
        frame = self.values.copy()
        for name, table in (("original", self.original_ciu), ("edited", self.ciu)):
            frame[f"CI {name}"] = table["CI"]
            frame[f"CU {name}"] = table["CU"]
        return frame


def what_if_grids(X, grid=50, features=None) -> dict:
    """The grids :func:`what_if` builds for the features of X (default: all its columns):
    ``{feature: make_grid(X[feature], grid)}``, to keep for the calls on other rows."""
    X = check_frame(X)
    grid = _checked_grid(grid)
    features = list(X.columns) if features is None else _checked_features(features, X.columns)
    return {f: make_grid(X[f], grid) for f in features}


def _given_grids(grids, features: list) -> dict:
    """The caller's grids, one :class:`~compute.sampling.Grid` per feature."""
    missing = [f for f in features if not isinstance(grids, Mapping) or not isinstance(grids.get(f), Grid)]
    if missing:
        raise InputError(f"The 'grids' must map every feature to its Grid (make_grid); missing: {missing[:5]!r}.")
    return {f: grids[f] for f in features}


def what_if(
    model,
    X,
    instance,
    edits=None,
    *,
    features=None,
    grid=50,
    output=None,
    out_range=None,
    phi0=0.5,
    utility="increasing",
    n_jobs=1,
    chunk_rows=None,
    grids=None,
) -> WhatIf:
    """Predict and explain one observation as it is and with some values changed.

    Parameters
    ----------
    model, output, n_jobs, chunk_rows : as in :func:`compute.feature_profile`
    X : DataFrame
        The data: it holds the observation and gives each feature's grid (and, for
        regressors, CI's output range when ``out_range`` is not given).
    instance : row label of X
        The observation to edit.
    edits : dict {column: value}, optional
        New values. A categorical column takes one of the levels found in X (a level's
        text, e.g. ``"True"`` for a boolean, is accepted too); a numeric column any finite
        number (a value outside X's range is predicted, though the model extrapolates).
    features : list, optional
        The features whose ICE curves and CIU are computed (default: all model inputs).
    grid : "observed" or int, default 50
        Grid of each numeric feature (see :func:`compute.sampling.make_grid`).
    out_range, phi0, utility : as in :func:`compute.contextual_importance`
    grids : dict {feature: Grid}, optional
        The features' grids as ``make_grid(X[feature], grid)`` builds them (default: built
        here), kept by a caller that explains other rows of the same data: they depend on
        the data alone, and on millions of rows building them costs seconds (the sort of
        every column), the curves of two rows milliseconds.

    Returns
    -------
    WhatIf
    """
    X = check_frame(X)
    predictor, Xm = make_predictor(model, X, output)
    features = list(Xm.columns) if features is None else _checked_features(features, Xm.columns)
    grid = _checked_grid(grid)
    n_jobs = check_n_jobs(n_jobs)
    chunk_rows = check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    phi0, utility = check_utility(phi0, utility)
    original = _instance_row(Xm, instance)
    changed, edited = apply_edits(Xm, original, edits)
    if out_range is not None and grids is not None:  # nothing read off the other rows
        predictor, Xm = _the_row_alone(predictor, Xm, instance), original

    predictor, positions = with_instances(predictor, Xm, [instance, edited], "'instance'")
    out_range = _default_range(predictor, len(Xm), chunk_rows, n_jobs) if out_range is None else out_range
    out_range = check_out_range(out_range)
    design = predictor.design.subset(positions)  # the two rows alone: never a copy of all of X
    two = design.every_row
    grids = what_if_grids(Xm, grid, features) if grids is None else _given_grids(grids, features)
    segments = [unmodified_segment(predictor, positions, design, two)]
    for f in features:
        values = design.cast(f, grids[f].values)
        n_grid = values.size

        def make_block(a, b, f=f, values=values, n_grid=n_grid):
            flat = np.arange(a, b)
            return design.block(two[flat // n_grid], {f: values[flat % n_grid]})

        segments.append(Segment(2 * n_grid, make_block))
    stream = predict_segments(predictor, segments, chunk_rows=chunk_rows, n_jobs=n_jobs)[0]
    y = stream[:2]
    curves, start = {}, 2
    for f in features:
        n_grid = grids[f].values.size
        curves[f] = stream[start : start + 2 * n_grid].reshape(2, n_grid)
        start += 2 * n_grid
    tables = []
    for k in (0, 1):
        ymin = [min(curves[f][k].min(), y[k]) for f in features]
        ymax = [max(curves[f][k].max(), y[k]) for f in features]
        out = ciu_table(ymin, ymax, y[k], out_range, phi0=phi0, utility=utility)
        tables.append(pd.DataFrame(out, index=pd.Index(features, name="feature"))[COLUMNS])
    values = pd.DataFrame(
        {
            "original": [original.iloc[0][f] for f in features],
            "edited": [edited.iloc[0][f] for f in features],
        },
        index=pd.Index(features, name="feature"),
        dtype=object,
    )
    return WhatIf(
        row=instance,
        edits=changed,
        edited=edited,
        prediction=float(y[1]),
        original_prediction=float(y[0]),
        grids={f: grids[f].values for f in features},
        categorical={f: grids[f].categorical for f in features},
        curves=curves,
        values=values,
        ciu=tables[1],
        original_ciu=tables[0],
        out_range=out_range,
        output=predictor.output,
        params={"grid": grid, "phi0": phi0, "utility": utility},
    )


def _checked_grid(grid):
    grid = check_grid(grid)
    if not isinstance(grid, (str, int)):
        raise InputError(f"The 'grid' parameter must be \"observed\" or an int (got an array of {len(grid)} values).")
    return grid


def _the_row_alone(predictor: Predictor, Xm: pd.DataFrame, instance) -> Predictor:
    """The predictor on the design of the row ``instance`` alone: the edited row is added to
    it, not to a copy of every row (5.7 s at 10,000,000 x 100, the what-if's whole cost)."""
    position = np.array([Xm.index.get_loc(instance)], dtype=np.intp)
    return dataclasses.replace(predictor, design=predictor.design.subset(position))


def _instance_row(Xm: pd.DataFrame, instance) -> pd.DataFrame:
    """The one-row frame of the observation labelled ``instance``."""
    if not is_label(instance) or instance not in Xm.index:
        shown = instance if is_label(instance) else type(instance).__name__
        raise InputError(f"The 'instance' must be a row label of X (got {shown!r}).")
    original = Xm.loc[[instance]]
    if len(original) != 1:
        raise InputError(f"The 'instance' label {instance!r} is not unique in X.")
    return original


def apply_edits(X: pd.DataFrame, original: pd.DataFrame, edits) -> tuple[dict, pd.DataFrame]:
    """(the edits that change a value, the edited one-row frame), every value checked
    against its column in X and stored in the column's type."""
    X = check_frame(X)
    original = as_pandas(original, "original")
    if not isinstance(original, pd.DataFrame) or len(original) != 1:
        is_frame = isinstance(original, pd.DataFrame)
        shown = f"a DataFrame of {len(original)} rows" if is_frame else type(original).__name__
        raise InputError(f"The 'original' row must be a one-row DataFrame, e.g. X.loc[[label]] (got {shown}).")
    lacking = [c for c in X.columns if c not in original.columns]
    if lacking:
        raise InputError(f"The 'original' row lacks the columns {lacking[:20]!r} of X.")
    original = original[list(X.columns)]
    if edits is None:
        edits = {}
    if not isinstance(edits, Mapping):
        raise InputError(f"The 'edits' parameter must be a dict {{column: value}} (got {type(edits).__name__}).")
    edited = original.copy()
    changed = {}
    for column, value in edits.items():
        check_feature(X.columns, column, "column in 'edits'")
        new = _typed_value(X[column], column, value)
        old = original.iloc[0][column]
        if _same(old, new):
            continue
        changed[column] = new
        if isinstance(X[column].dtype, pd.CategoricalDtype):
            edited[column] = pd.Categorical([new], dtype=X[column].dtype)
        elif not is_categorical(X[column]) and pd.api.types.is_integer_dtype(X[column]) and float(new) != int(new):
            edited[column] = edited[column].astype(float)
            edited.iloc[0, edited.columns.get_loc(column)] = new
        else:
            edited.iloc[0, edited.columns.get_loc(column)] = new
    return changed, edited


def _typed_value(column: pd.Series, name, value):
    if is_categorical(column):
        levels = [v for v in pd.unique(column.dropna())]
        for level in levels:
            if value is level or (type(value) is type(level) and value == level):
                return level
        for level in levels:  # its text, as a form or a URL sends it
            if isinstance(value, str) and str(level) == value:
                return level
        shown = [str(v) for v in levels[:20]] + (["..."] if len(levels) > 20 else [])
        raise InputError(f"The value {value!r} for column {name!r} is not one of its levels in X: {shown}.")
    if not is_real(value) or not np.isfinite(float(value)):
        raise InputError(f"The value for numeric column {name!r} must be a finite number (got {value!r}).")
    value = float(value)
    if pd.api.types.is_integer_dtype(column) and value == int(value):
        return int(value)
    return value


def _same(old, new) -> bool:
    try:
        return bool(old == new)  # a missing old value equals nothing
    except (TypeError, ValueError):
        return False


def _checked_features(features, columns) -> list:
    if not isinstance(features, (list, tuple, pd.Index)) or not len(features):
        raise InputError(f"The 'features' parameter must be a non-empty list of columns (got {features!r}).")
    for f in features:
        check_feature(columns, f, param="features")
    return list(dict.fromkeys(features))
