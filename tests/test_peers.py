"""Equality with peer implementations where the definitions agree.

scikit-learn is already a dependency: its grid rule (``_grid_from_X``) and its ICE
(``partial_dependence(kind="individual")``) are compared directly. For ALE the peer is an
independent type-1-quantile implementation written here, after Apley's ALEPlot
(``quantile(x, seq(1/K, 1, length.out=K), type=1)`` with the minimum prepended, ranks in
exact rationals).
Where we differ from a peer on purpose, README's "Where we differ from peers on purpose"
says so; those cases are tested as such, not as equalities.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from compute.sampling import make_grid


def sklearn_grid(column: pd.Series, m: int) -> np.ndarray:
    """scikit-learn's grid of one numeric feature, percentiles (0, 1), no custom values.

    ``_grid_from_X`` is private: if its signature changes, fall back to its rule (unique
    values when there are fewer than ``grid_resolution``, else evenly spaced points
    between the 0 and 1 percentiles), as it reads in scikit-learn 1.3-1.9.
    """
    values = column.to_numpy(dtype=float)[:, None]
    try:
        from sklearn.inspection._partial_dependence import _grid_from_X

        _, axes = _grid_from_X(
            values, percentiles=(0.0, 1.0), is_categorical=[False], grid_resolution=m, custom_values={}
        )
        return np.asarray(axes[0], dtype=float)
    except (ImportError, TypeError):
        uniques = np.unique(values)
        return uniques if uniques.size < m else np.linspace(uniques[0], uniques[-1], m)


@pytest.fixture(scope="module")
def grid_columns():
    """An integer column with few values, one with a mass point, a continuous one."""
    rng = np.random.default_rng(0)
    return {
        "count": pd.Series(rng.poisson(3, size=200).astype(float), name="count"),
        "mass": pd.Series(np.r_[np.full(9, 2.0), [0.0, 1, 3, 4, 5, 6, 7, 8, 9, 20, 40]], name="mass"),
        "fare": pd.Series(np.round(np.exp(rng.normal(2.5, 1.0, size=300)), 2), name="fare"),
    }


@pytest.mark.parametrize("name", ["count", "mass", "fare"])
@pytest.mark.parametrize("m", [2, 5, 11, 15, 20, 60, 1000])
def test_grid_follows_sklearn_rule(grid_columns, name, m):
    """Fewer distinct values than m: the same unique values as sklearn; else a grid of at most
    m points spanning the same [min, max], not the unique values (sklearn's evenly spaced)."""
    column = grid_columns[name]
    ours, theirs = make_grid(column, m).values, sklearn_grid(column, m)
    uniques = np.unique(column)
    if uniques.size == m:  # the one case where we differ (see the next test)
        assert_allclose(ours, uniques, rtol=0, atol=0)
    elif uniques.size < m:
        assert_allclose(ours, theirs, rtol=0, atol=0)
    else:
        assert theirs.size == m and ours.size <= m
        assert ours[0] == theirs[0] and ours[-1] == theirs[-1]
        assert not np.array_equal(ours, uniques)


def test_grid_at_distinct_count_takes_observed_values(grid_columns):
    """m == n_unique: we take the observed values where sklearn spaces m points evenly."""
    column = grid_columns["mass"]
    uniques = np.unique(column)
    assert_allclose(make_grid(column, uniques.size).values, uniques)
    assert_allclose(sklearn_grid(column, uniques.size), np.linspace(uniques[0], uniques[-1], uniques.size))


# --- ALE: an independent type-1-quantile reference (ALEPlot's algorithm) ---------------------
def aleplot_reference(model, X: pd.DataFrame, feature, K: int) -> tuple[np.ndarray, np.ndarray]:
    """First-order ALE as Apley's ALEPlot computes it, written from its R code.

    ``z = unique(c(min(x), quantile(x, seq(1/K, 1, length.out=K), type=1)))``; rows binned
    by ``cut(x, z, include.lowest=TRUE)``; mean difference per bin, cumulated, and centred
    by the bin-count weighted mean of the two ends of each bin. The type-1 quantile is the
    ``ceil(n k / K)``-th smallest value, here in exact rationals: R forms ``n * p`` in
    floating point (no fuzz for type 1), so where ``n k / K`` is an integer it can take the
    next value up.
    """
    x = X[feature].to_numpy(dtype=float)
    xs = np.sort(x)
    ranks = [math.ceil(Fraction(x.size * k, K)) for k in range(1, K + 1)]
    z = np.unique(np.r_[xs[0], xs[np.array(ranks) - 1]])
    bins = pd.cut(x, z, include_lowest=True, labels=False)
    lo, hi = X.copy(), X.copy()
    lo[feature], hi[feature] = z[bins], z[bins + 1]
    delta = pd.Series(model.predict(hi) - model.predict(lo)).groupby(bins).mean()
    counts = np.bincount(bins, minlength=z.size - 1)
    fj = np.r_[0.0, np.cumsum(delta.reindex(range(z.size - 1), fill_value=0.0).to_numpy())]
    fj = fj - ((fj[:-1] + fj[1:]) / 2 * counts).sum() / counts.sum()
    return z, fj


@pytest.mark.parametrize("K", [3, 5, 10, 20, 22, 40, 46, 100])  # 506 k / 22, 46: integer ranks
def test_ale_equals_type1_reference(mass_gbm, mass_data, K):
    """ale_curve equals ALEPlot's algorithm (bounds and values) on data with mass points."""
    from compute import ale_curve

    X, _ = mass_data
    for feature in X.columns:
        z, fj = aleplot_reference(mass_gbm, X, feature, K)
        res = ale_curve(mass_gbm, X, feature, n_intervals=K)
        assert_allclose(res.grid, z, rtol=0, atol=0)
        assert_allclose(res.ale, fj, rtol=1e-10, atol=1e-10)


# --- ICE: scikit-learn's partial_dependence(kind="individual") --------------------------------
@pytest.mark.parametrize(
    "feature, grid",
    [
        ("num", "observed"),
        ("num", 15),
        ("size", ["S", "M", "L"]),
        ("city", ["oslo", "paris", "rome"]),
        ("flag", [False, True]),
    ],
)
def test_ice_equals_sklearn_individual_partial_dependence(clf_pipeline, clf_data, feature, grid):
    """Pipeline (ColumnTransformer: scaler + one-hot) on numeric, string, categorical and
    boolean columns: our ICE tensor is sklearn's individual PD of the same class on our grid."""
    from sklearn.inspection import partial_dependence

    from compute import feature_profile

    X, _ = clf_data
    prof = feature_profile(clf_pipeline, X, None, feature, grid=grid)
    values = list(prof.grid) if prof.categorical else prof.grid
    res = partial_dependence(
        clf_pipeline,
        X,
        [feature],
        kind="individual",
        method="brute",
        response_method="predict_proba",
        custom_values={feature: values},
        categorical_features=[feature] if prof.categorical else None,
    )
    k = list(clf_pipeline.classes_).index(prof.output)
    assert list(res["grid_values"][0]) == list(values)
    assert_allclose(prof.pred, res["individual"][k], rtol=1e-12, atol=1e-14)
