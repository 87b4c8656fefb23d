"""Shapley contributions of one prediction (issue 14, item 3): closed form, brute force,
efficiency, a pipeline's raw columns as players, sampled mode."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.compose import make_column_transformer
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

import compute


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X = pd.DataFrame(rng.normal(size=(150, 4)), columns=["a", "b", "c", "d"])
    X.index = [f"r{i}" for i in range(len(X))]
    y = 3 * X["a"] - 2 * X["b"] + X["c"] * X["d"] + rng.normal(scale=0.1, size=150)
    return X, y


def test_linear_model_closed_form(data):
    """phi_j = b_j (x_j - mean of x_j over the background), exactly."""
    X, y = data
    model = LinearRegression().fit(X, y)
    res = compute.shapley_contributions(model, X, "r7", n_background=60)
    background = X.iloc[np.sort(np.random.default_rng(0).choice(len(X), 60, replace=False))]
    expected = model.coef_ * (X.loc["r7"].to_numpy() - background.mean().to_numpy())
    assert_allclose(res.values.to_numpy(), expected, rtol=1e-9, atol=1e-12)
    assert res.exact and res.n_background == 60
    assert_allclose(res.base_value, model.predict(background).mean(), rtol=1e-12)
    assert_allclose(res.prediction, model.predict(X.loc[["r7"]])[0], rtol=1e-12)
    # the background sampling error: per background row phi_j(b) = b_j (x_j - b_j), so the
    # standard error of their mean is |b_j| sd(x_j over the background) / sqrt(m)
    spread = np.abs(model.coef_) * background.std(ddof=1).to_numpy() / np.sqrt(60)
    assert_allclose(res.std_error.to_numpy(), spread, rtol=1e-9)


def _brute_force(model, x: pd.Series, background: pd.DataFrame) -> np.ndarray:
    """Average over all p! orderings of the marginal contributions, v(S) by explicit loops."""
    cols = list(background.columns)

    def v(S):
        rows = background.copy()
        for c in S:
            rows[c] = x[c]
        return model.predict(rows).mean()

    p = len(cols)
    phi = np.zeros(p)
    for order in itertools.permutations(range(p)):
        S: list = []
        for j in order:
            phi[j] += v([cols[k] for k in S] + [cols[j]]) - v([cols[k] for k in S])
            S.append(j)
    return phi / math.factorial(p)


def test_brute_force_over_all_orderings_p4(data):
    X, y = data
    model = RandomForestRegressor(n_estimators=20, max_depth=5, random_state=0).fit(X, y)
    res = compute.shapley_contributions(model, X, "r3", n_background=40, random_state=3)
    rng = np.random.default_rng(3)
    background = X.iloc[np.sort(rng.choice(len(X), 40, replace=False))]
    assert_allclose(res.values.to_numpy(), _brute_force(model, X.loc["r3"], background), rtol=1e-10)
    assert_allclose(res.base_value + res.values.sum(), res.prediction, rtol=1e-12)


def test_sampled_mode_keeps_efficiency_and_approaches_exact(data):
    X, y = data
    model = RandomForestRegressor(n_estimators=20, max_depth=5, random_state=0).fit(X, y)
    exact = compute.shapley_contributions(model, X, "r3", n_background=40)
    sampled = compute.shapley_contributions(model, X, "r3", n_background=40, n_permutations=400)
    assert not sampled.exact and sampled.n_orderings == 400
    assert_allclose(sampled.base_value + sampled.values.sum(), sampled.prediction, rtol=1e-12)
    err = np.abs(sampled.values - exact.values)
    assert (err <= 4 * sampled.std_error + 1e-9).all(), (err, sampled.std_error)


def test_an_edited_row_and_a_one_hot_block_as_one_player():
    """What-if: a one-row DataFrame not in X; a pipeline's categorical column is one player."""
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"age": rng.uniform(1, 80, 300), "sex": rng.choice(["f", "m"], 300)})
    y = ((X["sex"] == "f") ^ (X["age"] < 12)).astype(int)
    pre = make_column_transformer((OneHotEncoder(), ["sex"]), remainder="passthrough")
    model = make_pipeline(pre, LogisticRegression()).fit(X, y)
    edited = pd.DataFrame({"age": [30.0], "sex": ["f"]})
    res = compute.shapley_contributions(model, X, edited, n_background=100)
    assert list(res.values.index) == ["age", "sex"]
    assert_allclose(res.prediction, model.predict_proba(edited)[0, 1], rtol=1e-12)
    assert_allclose(res.base_value + res.values.sum(), res.prediction, rtol=1e-12)
    assert res.values["sex"] > 0  # being female raises the probability of class 1 here
    frame = res.to_frame()
    assert list(frame.columns) == ["contribution", "std_error"] and frame.index[0] in ("age", "sex")


def test_bad_instance_is_named(data):
    X, y = data
    model = LinearRegression().fit(X, y)
    with pytest.raises(compute.InputError, match="'instance' 'zz' is neither a row label"):
        compute.shapley_contributions(model, X, "zz")
    with pytest.raises(compute.InputError, match="'n_background'"):
        compute.shapley_contributions(model, X, "r1", n_background=0)


def test_classifier_output_is_named(data):
    X, y = data
    labels = np.where(y > 0, "up", "down")
    model = LogisticRegression().fit(X, labels)
    res = compute.shapley_contributions(model, X, "r2", n_background=30, output="down")
    assert res.output == "down"
    assert_allclose(res.prediction, model.predict_proba(X.loc[["r2"]])[0, 0], rtol=1e-12)
