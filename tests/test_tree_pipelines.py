"""The tree engine after a pipeline's column-wise steps (``compute/trees/space.py``): the
walk runs on the rows the model receives (scaled, imputed, ordinal-encoded text), each
feature one column transformed by itself; equal to the batched predict. A feature the
pipeline spreads over several columns (one-hot), or a step that mixes columns (PCA), takes
the batched predict and says why."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.compose import ColumnTransformer
from sklearn.decomposition import PCA
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

from compute import ModelError, feature_profile, interaction_strength, permutation_importance

N = 400


def _frame(seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Passengers-like rows: a text port and class, numbers with missing values."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "age": np.round(rng.normal(35, 12, N), 0),
            "fare": np.round(rng.lognormal(3, 1, N), 2),
            "port": rng.choice(["C", "Q", "S"], N),
            "deck": rng.choice(["A", "B", "C", "D"], N),
            "sibs": rng.integers(0, 4, N).astype(float),
        }
    )
    X.loc[rng.random(N) < 0.15, "age"] = np.nan
    y = (
        0.05 * X.fare.clip(0, 80)
        - 0.03 * X.age.fillna(30)
        + 1.5 * (X.port == "C")
        + (X.deck == "B")
        + rng.normal(size=N)
    )
    return X, y.to_numpy()


def _ordinal_pipeline(model):
    text, numbers = ["port", "deck"], ["age", "fare", "sibs"]
    return make_pipeline(
        ColumnTransformer(
            [
                ("text", OrdinalEncoder(), text),
                ("numbers", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numbers),
            ]
        ),
        model,
    )


@pytest.fixture(scope="module", params=["regressor", "classifier"])
def fitted(request):
    X, y = _frame()
    if request.param == "regressor":
        return _ordinal_pipeline(HistGradientBoostingRegressor(max_iter=30, random_state=0)).fit(X, y), X, y
    labels = (y > np.median(y)).astype(int)
    return _ordinal_pipeline(HistGradientBoostingClassifier(max_iter=30, random_state=0)).fit(X, labels), X, labels


@pytest.mark.parametrize("feature", ["age", "fare", "port", "deck"])
def test_profiles_equal_the_batched_predict(fitted, feature):
    """ICE on a text feature (its levels, ordinal-encoded by the pipeline) and on numbers with
    missing values (imputed, scaled): the walk's curves are the model's own predictions."""
    model, X, y = fitted
    walked = feature_profile(model, X, y, feature, grid=12, engine="trees")
    predicted = feature_profile(model, X, y, feature, grid=12, engine="predict")
    assert walked.params["engine"] == "exact tree walk"
    assert_allclose(walked.pred, predicted.pred, rtol=0, atol=1e-9)
    assert_allclose(walked.loss_grid, predicted.loss_grid, rtol=0, atol=1e-9)
    assert_allclose(walked.base_pred, predicted.base_pred, rtol=0, atol=1e-9)


def test_pfi_and_h_equal_the_batched_predict(fitted):
    model, X, y = fitted
    walked = permutation_importance(model, X, y, n_repeats=3, engine="trees")
    predicted = permutation_importance(model, X, y, n_repeats=3, engine="predict")
    assert walked.engine == "exact tree walk"
    assert_allclose(walked.importance.to_numpy(), predicted.importance.to_numpy(), rtol=1e-9, atol=1e-12)
    h_walked = interaction_strength(model, X, n_obs=60, grid_size=4, pairs=[("port", "fare")], engine="trees")
    h_predicted = interaction_strength(model, X, n_obs=60, grid_size=4, pairs=[("port", "fare")], engine="predict")
    assert h_walked.engine == "exact tree walk"
    assert_allclose(h_walked.overall.to_numpy(), h_predicted.overall.to_numpy(), rtol=1e-9, atol=1e-12)
    assert_allclose(
        h_walked.pairs[["h2", "h"]].to_numpy(), h_predicted.pairs[["h2", "h"]].to_numpy(), rtol=1e-9, atol=1e-12
    )


def test_a_one_hot_feature_takes_the_batched_predict():
    """One-hot puts a feature in several columns: its passes take the batched predict, naming
    why; a feature of the same pipeline in one column is still walked."""
    X, y = _frame(1)
    model = make_pipeline(
        ColumnTransformer([("text", OneHotEncoder(), ["port", "deck"])], remainder="passthrough"),
        RandomForestRegressor(20, max_depth=6, random_state=0),
    ).fit(X.fillna(0), y)
    X = X.fillna(0)
    prof = feature_profile(model, X, y, "port", grid=5)
    assert prof.params["engine"] == "batched predict" and "'port' into 3 columns" in prof.params["engine_reason"]
    assert feature_profile(model, X, y, "fare", grid=5).params["engine"] == "exact tree walk"
    with pytest.raises(ModelError, match="'port' into 3 columns"):
        permutation_importance(model, X, y, n_repeats=1, engine="trees")
    walked = feature_profile(model, X, y, "fare", grid=7, engine="trees")
    predicted = feature_profile(model, X, y, "fare", grid=7, engine="predict")
    assert_allclose(walked.pred, predicted.pred, rtol=0, atol=1e-9)


def test_a_step_mixing_columns_takes_the_batched_predict():
    X, y = _frame(2)
    numbers = X[["age", "fare", "sibs"]].fillna(0)
    model = make_pipeline(PCA(2), HistGradientBoostingRegressor(max_iter=10)).fit(numbers, y)
    prof = feature_profile(model, numbers, y, "fare", grid=4)
    assert prof.params["engine"] == "batched predict" and "PCA" in prof.params["engine_reason"]


def test_a_constant_numeric_feature_is_still_walked():
    """A column holding one value in the rows still maps to its one model column (probed
    with a value beside it), so the call walks instead of falling back for all features."""
    X, y = _frame(3)
    X["sibs"] = 2.0
    model = _ordinal_pipeline(HistGradientBoostingRegressor(max_iter=15, random_state=0)).fit(X, y)
    walked = permutation_importance(model, X, y, n_repeats=2, engine="trees")
    assert walked.engine == "exact tree walk" and walked.importance["sibs"] == 0.0
    predicted = permutation_importance(model, X, y, n_repeats=2, engine="predict")
    assert_allclose(walked.importance.to_numpy(), predicted.importance.to_numpy(), rtol=1e-9, atol=1e-12)
