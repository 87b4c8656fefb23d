"""``compute.pfi_engine``: the engine PFI takes for a model, forecast where the model is loaded
(the dashboard sizes the model's PFI sample by it, ``budgets.WALKED_PFI_FACTOR``). The forecast
must be what ``permutation_importance(engine="auto")`` then records, for models the walk
reads and models it does not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestRegressor
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import compute


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    X["k"] = rng.integers(0, 3, n).astype(float)
    y = X["a"] + X["b"] * X["k"] + rng.normal(scale=0.1, size=n)
    return X, y


def _one_hot():
    encode = ColumnTransformer([("k", OneHotEncoder(), ["k"])], remainder="passthrough")
    return make_pipeline(encode, RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0))


CASES = {
    "forest": (lambda: RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0), compute.TREE_WALK),
    "boosting (classifier)": (lambda: HistGradientBoostingClassifier(max_iter=5), compute.TREE_WALK),
    "scaled forest": (
        lambda: make_pipeline(StandardScaler(), RandomForestRegressor(n_estimators=5, random_state=0)),
        compute.TREE_WALK,
    ),
    "linear": (LinearRegression, compute.BATCHED_PREDICT),
    "one-hot forest": (_one_hot, compute.BATCHED_PREDICT),  # k is several columns of the forest
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_forecast_is_the_engine_pfi_takes(case):
    make, expected = CASES[case]
    X, y = _data()
    target = (y > y.median()).astype(int) if "classifier" in case else y
    model = make().fit(X, target)
    assert compute.pfi_engine(model, X) == expected
    pfi = compute.permutation_importance(model, X, target, n_repeats=2, random_state=0)
    assert pfi.engine == expected


def test_a_model_without_predict_is_refused():
    with pytest.raises(compute.InputError, match="predict"):
        compute.pfi_engine(object(), _data()[0])
