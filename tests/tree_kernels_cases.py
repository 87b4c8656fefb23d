"""The numeric kernels (``compute/trees/kernels.py``) on XGBoost, run in a pytest process
of their own by ``tests/test_tree_kernels.py`` (this process imports xgboost, which the
main test process must never do). The feature intervened on is split on by some trees and
not by others: the trees that never split on it are descended plainly, the others walked
from the first node on it; both must give ``engine="predict"``'s numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from compute import feature_profile, permutation_importance
from compute.trees import compiled, read_model

N = 400


def _data() -> tuple[pd.DataFrame, np.ndarray]:
    """``w`` matters a little (some trees split on it, not all); missing values in ``b``
    and ``w``; integer features (ties on the thresholds)."""
    rng = np.random.default_rng(5)
    X = pd.DataFrame(
        {
            "a": rng.integers(0, 8, N).astype(float),
            "b": np.round(rng.normal(size=N), 1),
            "w": rng.integers(0, 4, N).astype(float),
        }
    )
    y = 50 + 4 * X.a + 6 * np.sin(2 * X.b) + 0.3 * X.w + rng.normal(size=N)
    X.loc[rng.random(N) < 0.1, "b"] = np.nan
    X.loc[rng.random(N) < 0.1, "w"] = np.nan
    return X, y.to_numpy()


def _model(kind: str):
    xgb = pytest.importorskip("xgboost")
    X, y = _data()
    options = {"n_estimators": 40, "max_depth": 3, "learning_rate": 0.3, "n_jobs": 1, "random_state": 0}
    if kind == "regressor":
        return xgb.XGBRegressor(**options).fit(X, y), X, y
    labels = (y > np.median(y)).astype(int)
    return xgb.XGBClassifier(**options).fit(X, labels), X, labels


def _trees_on(ens, j: int) -> int:
    return np.unique(np.searchsorted(ens.roots, np.flatnonzero(ens.feature == j), side="right")).size


@pytest.fixture(scope="module", params=["regressor", "binary"])
def fitted(request):
    return _model(request.param)


def test_some_trees_split_on_the_feature_and_some_do_not(fitted):
    model, X, _ = fitted
    ens = read_model(model)
    assert 0 < _trees_on(ens, X.columns.get_loc("w")) < ens.roots.size


def _slack(model, ref) -> tuple[float, float]:
    """As ``tree_boosters_cases._bounds``: 1e-9 of the range plus XGBoost's float32 rounding
    bound, carried through the loss."""
    scale = max(float(np.ptp(ref.pred)), float(np.abs(ref.pred).max()), 1e-12)
    r = read_model(model).rounding
    top = float(np.nanmax(ref.loss_grid))
    through = r * 1.01 * np.exp(top) if ref.params["loss"] == "log_loss" else 2 * np.sqrt(top) * r + r * r
    return 1e-9 * scale + r, 1e-9 * max(top, 1e-12) + through


@pytest.mark.parametrize("feature", ["w", "b", "a"])
def test_profiles_equal_the_batched_predict(fitted, feature):
    model, X, y = fitted
    grid = np.concatenate([np.unique(X[feature].dropna()), [-1.0, 99.0]])
    walked = feature_profile(model, X, y, feature, grid=grid, engine="trees")
    ref = feature_profile(model, X, y, feature, grid=grid, engine="predict")
    assert walked.params["engine"] == "exact tree walk"
    values, losses = _slack(model, ref)
    assert_allclose(walked.pred, ref.pred, rtol=0, atol=values)
    assert_allclose(walked.loss_grid, ref.loss_grid, rtol=0, atol=losses)
    assert_allclose(walked.base_pred, ref.base_pred, rtol=0, atol=values)


def test_pfi_equals_the_batched_predict(fitted):
    model, X, y = fitted
    walked = permutation_importance(model, X, y, n_repeats=4, random_state=3, engine="trees")
    ref = permutation_importance(model, X, y, n_repeats=4, random_state=3, engine="predict")
    assert walked.engine == "exact tree walk"
    slack = max(_slack(model, feature_profile(model, X, y, f, engine="predict"))[1] for f in X.columns)
    assert_allclose(walked.repeats, ref.repeats, rtol=0, atol=slack + 1e-9 * max(ref.model_error, 1e-12))


def test_the_kernels_equal_the_general_walk(fitted, monkeypatch):
    """The numeric kernels against the general compiled walk (``compiled.NUMERIC`` off)."""
    model, X, _ = fitted
    ens = read_model(model)
    Xc = ens.compared(X.to_numpy())
    donors = np.random.default_rng(0).integers(0, N, (N, 6))
    for j in range(X.shape[1]):
        grid = np.concatenate([np.unique(Xc[:, j][~np.isnan(Xc[:, j])]), [np.nan]])
        queries = X.to_numpy()[donors, j]
        fast = compiled.curve_sums(ens, Xc, j, grid), compiled.lookup_sums(ens, Xc, j, queries)
        monkeypatch.setattr(compiled, "NUMERIC", False)
        general = compiled.curve_sums(ens, Xc, j, grid), compiled.lookup_sums(ens, Xc, j, queries)
        monkeypatch.setattr(compiled, "NUMERIC", True)
        for got, want in zip(fast, general):
            assert_allclose(got, want, rtol=0, atol=1e-12 * max(1.0, float(np.abs(want).max())))
