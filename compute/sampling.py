"""Sampling stage (SIPA, Scholbeck et al. 2019, Sec. 4): which observations, which grid.

A grid is a set of values for the feature of interest together with weights that sum to one
and describe the feature's empirical distribution on that grid. Integrating a curve (ICE,
ICI, PI) over the grid with these weights estimates its integral with respect to the
marginal distribution of the feature, which is what PFI (Casalicchio et al. 2018, Eq. 7
and 9) and PD (Eq. 2) need.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import InputError

MAX_GRID = 10_000


@dataclass(frozen=True)
class Grid:
    """Grid values of one feature and their weights.

    ``values`` keeps the feature's own kind: float for numeric features, an object array
    of levels (``None`` standing for a missing value) for categorical ones.
    """

    values: np.ndarray  # (n_grid,)
    weights: np.ndarray  # (n_grid,), non-negative, sums to 1
    categorical: bool


def is_categorical(column: pd.Series) -> bool:
    """True for string, categorical, object and boolean columns (a grid of levels)."""
    return not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)


HEAD_ROWS = 10_000  # rows :func:`distinct_up_to` reads first


def distinct_up_to(column: pd.Series, cap: int) -> int:
    """The number of distinct values of a column (a missing value counts as one) when it is at
    most ``cap``, else ``cap + 1``: what a rule "at most ``cap`` values" needs, read off the
    first :data:`HEAD_ROWS` rows when they already hold more (a continuous column of millions
    of rows: one hash of ten thousand values rather than of all of them, 0.14 s a column at
    two million rows), else counted over every row."""
    cap = max(int(cap), 0)
    if len(column) > HEAD_ROWS and column.iloc[:HEAD_ROWS].nunique(dropna=False) > cap:
        return cap + 1
    return min(int(column.nunique(dropna=False)), cap + 1)


def sample_rows(n_rows: int, n_obs: int | None, rng: np.random.Generator) -> np.ndarray:
    """Positions of the observations to explain: all of them, or a sorted sample of ``n_obs``."""
    if n_obs is None or n_obs >= n_rows:
        return np.arange(n_rows)
    return np.sort(rng.choice(n_rows, size=n_obs, replace=False))


def make_grid(column: pd.Series, grid, grid_weights=None) -> Grid:
    """Build the grid of one feature from its values in the whole data set.

    Parameters
    ----------
    column : Series
        The feature's values in the full data (not only the explained sample), so that
        the grid and its weights describe the feature's marginal distribution.
    grid : "observed", int or array-like
        ``"observed"``: the distinct observed values, each weighted by its relative
        frequency; integrating over this grid is exactly the empirical integral of Eq. 7.
        ``int m``: ``m`` points at evenly spaced quantiles (the minimum and maximum
        included); each point weighs the share of observed values nearest to it (bins
        with edges half-way between neighbouring points), so the weighted sum is the
        midpoint-rule estimate of the empirical integral. When ``m`` reaches the number
        of distinct values (``m >= n_unique``) the observed grid is used instead, so no
        point is interpolated between two clusters of a feature with few values. This is
        scikit-learn's rule (``_grid_from_X`` uses the unique values when
        ``n_unique < grid_resolution``) except at ``m == n_unique``, where scikit-learn
        spaces m points evenly and we take the m observed values. Below that our m points
        are quantiles (ties may merge some), scikit-learn's are evenly spaced.
        Array: those values (sorted, duplicates removed), weighted like the quantile grid
        unless ``grid_weights`` is given.
        Categorical features (string, category, object, bool) always use every level found
        in ``column``, missing values as a level of their own, weighted by frequency. A
        numeric feature with missing values gets "missing" as a point of its own too: NaN,
        after the numbers, weighing the share of missing values (the other weights shrink
        by that share), so the ICE/ICI curves and the integrals cover the rows as they are.
        An empty numeric column (every value missing) gets the missing point alone (NaN,
        weight 1), as a constant column gets its one value: the model is asked about the
        rows as they are, and a curve over it is refused where one is drawn
        (:func:`compute.feature_profile`). An array grid then needs ``grid_weights``.
    grid_weights : array-like, optional
        Explicit weights for an array grid (normalised to sum to one).
    """
    if is_categorical(column):
        return _level_grid(column, grid)
    values = column.to_numpy(dtype=float, na_value=np.nan)
    missing_share = float(np.isnan(values).mean()) if values.size else 0.0
    values = values[~np.isnan(values)]
    if values.size == 0:
        if not column.size:
            raise InputError(f"Feature {column.name!r} has no rows to build a grid from.")
        if isinstance(grid, (str, int, np.integer)):  # "missing", the one value it holds
            return Grid(np.array([np.nan]), np.ones(1), categorical=False)
        if grid_weights is None:
            raise InputError(
                f"Feature {column.name!r} holds no values in these rows (all missing): an array 'grid' needs "
                "'grid_weights' (there are no values to weigh its points by)."
            )
    if isinstance(grid, str):
        return _with_missing(_observed_grid(values), missing_share)
    if isinstance(grid, (int, np.integer)):
        ordered = np.sort(values)  # one sort: the distinct count, the quantiles and the weights read off it
        if int(grid) >= 1 + np.count_nonzero(ordered[1:] != ordered[:-1]):  # the requested m, not the quantiles
            return _with_missing(_observed_grid(values), missing_share)
        points = np.unique(np.quantile(ordered, np.linspace(0.0, 1.0, int(grid))))
        return _with_missing(Grid(points, _sorted_nearest_weights(ordered, points), categorical=False), missing_share)
    points = np.asarray(grid, dtype=float)
    if grid_weights is not None:
        weights = np.asarray(grid_weights, dtype=float)
        order = np.argsort(points, kind="stable")
        return Grid(points[order], weights[order] / weights.sum(), categorical=False)
    points = np.unique(points)
    return Grid(points, _nearest_point_weights(values, points), categorical=False)


def _with_missing(grid: Grid, share: float) -> Grid:
    """A numeric grid with "missing" as a point of its own (NaN, last) weighing the share of
    missing values, as a categorical grid has a missing level: the model is asked about the
    rows as they are, missing values included (a model that cannot take NaN fails on them)."""
    if share <= 0:
        return grid
    return Grid(np.r_[grid.values, np.nan], np.r_[grid.weights * (1.0 - share), share], categorical=False)


def has_missing_point(grid_values: np.ndarray, categorical: bool) -> bool:
    """True when a numeric grid ends with the missing point (NaN)."""
    return (not categorical) and grid_values.size > 0 and bool(np.isnan(grid_values[-1]))


def quantile_bounds(values: np.ndarray, n_intervals: int) -> np.ndarray:
    """Interval bounds on observed values: the minimum and the type-1 quantiles at k/K.

    ``z_0 = min(x)`` and ``z_k = x_(ceil(n k / K))``, k = 1..K, the k/K quantile of the
    inverse empirical distribution function (Hyndman & Fan's type 1, R's
    ``quantile(type=1)``), duplicates removed. This is ALEPlot's choice of ALE intervals
    (Apley & Zhu 2020, ``c(min(x), quantile(x, seq(1/K, 1, length.out=K), type=1))``):
    every bound is an observed value, so each interval ``(z_{k-1}, z_k]`` holds at least
    the rows equal to ``z_k`` and none is empty. The ranks are computed in integers:
    ``np.quantile(method="inverted_cdf")`` forms ``n * p`` in floating point and is one
    rank too high when it rounds up (n = 200, K = 5: ``0.6 * 200 = 120.00000000000001``).

    Parameters
    ----------
    values : ndarray of shape (n,)
        Non-missing values of the feature.
    n_intervals : int
        The number K of intervals asked for; ties may merge some (fewer bounds).

    Returns
    -------
    bounds : ndarray of shape (n_bounds,), sorted, distinct, ``n_bounds <= K + 1``.
    """
    x = np.sort(np.asarray(values, dtype=float))
    k = np.arange(1, int(n_intervals) + 1, dtype=np.int64)
    ranks = -(-x.size * k // int(n_intervals))  # ceil(n k / K), exact
    return np.unique(np.r_[x[0], x[ranks - 1]])


def _observed_grid(values: np.ndarray) -> Grid:
    points, counts = np.unique(values, return_counts=True)
    return Grid(points, counts / counts.sum(), categorical=False)


def _sorted_nearest_weights(ordered: np.ndarray, points: np.ndarray) -> np.ndarray:
    """:func:`_nearest_point_weights` of sorted values: the same counts (a value goes to the
    first point whose upper edge it does not exceed), read off by a search per edge."""
    if points.size == 1:
        return np.ones(1)
    edges = (points[1:] + points[:-1]) / 2.0
    counts = np.diff(np.r_[0, np.searchsorted(ordered, edges, side="right"), ordered.size])
    return counts / counts.sum()


def _nearest_point_weights(values: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Share of ``values`` whose nearest grid point is each of ``points`` (sorted)."""
    if points.size == 1:
        return np.ones(1)
    edges = (points[1:] + points[:-1]) / 2.0
    counts = np.bincount(np.searchsorted(edges, values, side="left"), minlength=points.size)
    return counts / counts.sum()


def _level_grid(column: pd.Series, grid) -> Grid:
    counts = column.value_counts(dropna=False, sort=False)
    if isinstance(column.dtype, pd.CategoricalDtype):
        counts = counts[counts > 0]  # declared but unobserved categories carry no weight
    levels = [None if _is_missing(level) else level for level in counts.index]
    order = sorted(range(len(levels)), key=lambda i: _level_sort_key(levels[i], column))
    values = np.empty(len(levels), dtype=object)
    values[:] = [levels[i] for i in order]
    weights = counts.to_numpy(dtype=float)[order]
    if not isinstance(grid, str) and not isinstance(grid, (int, np.integer)):
        wanted = list(np.asarray(grid, dtype=object))
        keep = [i for i, level in enumerate(values) if level in wanted]
        unknown = [w for w in wanted if w not in list(values)]
        if unknown:
            raise InputError(
                f"The 'grid' values {unknown!r} are not levels of feature {column.name!r}; "
                f"its levels are {list(values)!r}."
            )
        values, weights = values[keep], weights[keep]
    return Grid(values, weights / weights.sum(), categorical=True)


def _is_missing(level) -> bool:
    return level is None or (not isinstance(level, str) and bool(pd.isna(level)))


def _level_sort_key(level, column: pd.Series) -> tuple[int, tuple[int, str]]:
    """Category order for categoricals, natural order otherwise, missing last: (missing,
    (position, text))."""
    if level is None:
        return (1, (0, ""))
    if isinstance(column.dtype, pd.CategoricalDtype):
        return (0, (list(column.cat.categories).index(level), ""))
    return (0, (0, str(level))) if not isinstance(level, (bool, np.bool_)) else (0, (int(level), ""))
