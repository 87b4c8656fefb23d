"""Categorical splits in the tree engine (``compute/trees/categories.py``): a
HistGradientBoosting model with categorical features (given as column positions on numeric
codes, or pandas categories of text through the model's own encoder) is walked, with the
categorical feature free (its values grouped into the levels the trees tell apart) or fixed
(a set membership test at each node). ICE, PFI, H and cs-PFI equal the batched predict;
unseen categories, negative and fractional codes and missing values go where the model sends
them; brute force over random small models; and the fall-backs, naming why."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

from compute import (
    ModelError,
    conditional_importance,
    feature_profile,
    interaction_strength,
    permutation_importance,
)
from compute.trees import Unsupported, compiled, curve_sums, lookup_sums, read_model, same_walk, walk
from compute.trees.categories import MAX_LEVELS, levels

pytestmark = pytest.mark.skipif(not walk.COMPILED, reason="categorical splits are walked by the compiled walk only")

N = 500


def _codes(seed: int = 0, n: int = N) -> tuple[pd.DataFrame, np.ndarray]:
    """Two categorical code columns (7 and 30 levels, one with missing codes) beside numbers."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "shop": rng.integers(0, 7, n).astype(float),
            "x": rng.normal(size=n),
            "region": rng.integers(0, 30, n).astype(float),
            "z": rng.normal(size=n).round(1),
        }
    )
    y = (
        np.where(X.shop.isin([1, 3, 5]), 2.0, 0.0)
        + X.x * (X.region % 3 == 0)
        + np.sin(X.region)
        + 0.3 * X.z
        + rng.normal(size=n) * 0.2
    )
    X.loc[rng.random(n) < 0.1, "shop"] = np.nan
    X.loc[rng.random(n) < 0.05, "z"] = np.nan
    return X, y.to_numpy()


def _labels(y: np.ndarray, k: int) -> np.ndarray:
    return np.digitize(y, np.quantile(y, np.linspace(0, 1, k + 1)[1:-1]))


KINDS = {
    "regressor": lambda X, y: HistGradientBoostingRegressor(
        max_iter=25, categorical_features=[0, 2], random_state=0
    ).fit(X, y),
    "binary": lambda X, y: HistGradientBoostingClassifier(max_iter=20, categorical_features=[0, 2], random_state=0).fit(
        X, _labels(y, 2)
    ),
    "3-class": lambda X, y: HistGradientBoostingClassifier(
        max_iter=10, categorical_features=[0, 2], random_state=0
    ).fit(X, _labels(y, 3)),
}


@pytest.fixture(scope="module", params=sorted(KINDS))
def fitted(request):
    X, y = _codes()
    model = KINDS[request.param](X, y)
    target = y if request.param == "regressor" else model.classes_[_labels(y, 2 if request.param == "binary" else 3)]
    return model, X, target


@pytest.mark.parametrize("feature", ["shop", "region", "x", "z"])
def test_profiles_equal_the_batched_predict(fitted, feature):
    """The curves of a categorical feature (its codes the grid) and of a number in a model
    with categorical splits elsewhere: the walk's cells are the model's own predictions."""
    model, X, y = fitted
    walked = feature_profile(model, X, y, feature, grid=12, engine="trees")
    predicted = feature_profile(model, X, y, feature, grid=12, engine="predict")
    assert walked.params["engine"] == "exact tree walk"
    assert_allclose(walked.pred, predicted.pred, rtol=0, atol=1e-9)
    assert_allclose(walked.loss_grid, predicted.loss_grid, rtol=0, atol=1e-9)


def test_pfi_conditional_pfi_and_h_equal_the_batched_predict(fitted):
    model, X, y = fitted
    walked = permutation_importance(model, X, y, n_repeats=3, engine="trees")
    predicted = permutation_importance(model, X, y, n_repeats=3, engine="predict")
    assert walked.engine == "exact tree walk"
    assert_allclose(walked.importance.to_numpy(), predicted.importance.to_numpy(), rtol=1e-9, atol=1e-12)
    assert walked.importance["shop"] > 0.05  # a feature the target depends on: a test that could fail
    pairs = [("shop", "region"), ("region", "x"), ("x", "z")]
    h = {e: interaction_strength(model, X, n_obs=80, grid_size=5, pairs=pairs, engine=e) for e in ("trees", "predict")}
    assert h["trees"].engine == "exact tree walk"
    assert_allclose(h["trees"].overall.to_numpy(), h["predict"].overall.to_numpy(), rtol=1e-9, atol=1e-12)
    assert_allclose(h["trees"].pairs[["h2", "h"]].to_numpy(), h["predict"].pairs[["h2", "h"]].to_numpy(), atol=1e-9)
    cs = {
        e: conditional_importance(model, X, y, features=["shop", "x"], n_repeats=2, engine=e, random_state=1)
        for e in ("trees", "predict")
    }
    assert_allclose(cs["trees"].importance.to_numpy(), cs["predict"].importance.to_numpy(), rtol=1e-9, atol=1e-12)


def test_values_the_model_never_saw_go_where_it_sends_them():
    """Unseen, negative, fractional and huge codes and a missing value, on the grid of a
    categorical feature free and as the fixed value of another: the walk's sums are the
    model's own raw predictions."""
    X, y = _codes(1)
    model = KINDS["regressor"](X, y)
    ens = read_model(model)
    Z = model._preprocessor.transform(X)  # the rows the trees receive: categorical columns first
    odd = np.array([0.0, 3.0, 6.0, 7.0, 29.0, 31.0, -1.0, -0.5, 2.7, 1e6, np.nan])
    base = float(np.ravel(model._baseline_prediction)[0])
    for column, at in (("shop", 0), ("region", 1)):
        moved = model._preprocessor.transform(pd.DataFrame({**{c: X[c].iloc[0] for c in X}, column: odd}))[:, at]
        sums = curve_sums(ens, Z, at, moved)[..., 0] + base
        brute = np.column_stack([model.predict(X.assign(**{column: v})) for v in odd])
        assert_allclose(sums, brute, rtol=0, atol=1e-12)
    raw = X.iloc[np.tile(np.arange(40), odd.size)].assign(shop=np.repeat(odd, 40))
    fixed = model._preprocessor.transform(raw)  # shop fixed at each odd value, z left free
    own = lookup_sums(ens, fixed, 3, fixed[:, 3:4])[:, 0, 0] + base
    assert_allclose(own, model.predict(raw), rtol=0, atol=1e-12)


def test_levels_group_the_values_the_trees_cannot_tell_apart():
    """Two codes in the same level go the same way at every node on the feature, so the
    model gives them equal predictions; codes in different levels differ at some node."""
    X, y = _codes(2)
    model = KINDS["regressor"](X, y)
    ens = read_model(model)
    found = levels(ens, 1)
    assert 1 < found.n <= MAX_LEVELS
    codes = np.arange(30.0)
    level = found.of(codes)
    Z = model._preprocessor.transform(X.iloc[:50])
    preds = np.stack([curve_sums(ens, Z, 1, np.array([c]))[:, 0, 0] for c in codes])
    for a in range(30):
        for b in range(a + 1, 30):
            if level[a] == level[b]:
                assert_allclose(preds[a], preds[b], rtol=0, atol=0)
    assert same_walk(ens, 1, codes[:, None], codes[None, :]).sum() == sum(int(np.sum(level == v)) for v in level)


def test_text_categories_through_the_models_own_encoder():
    """``categorical_features='from_dtype'`` on pandas categories of text: the model encodes
    them itself (its ``_preprocessor``); the walk runs on its codes."""
    rng = np.random.default_rng(3)
    X = pd.DataFrame(
        {
            "port": pd.Categorical(rng.choice(["C", "Q", "S"], N)),
            "deck": pd.Categorical(rng.choice(list("ABCDEFG"), N)),
            "fare": rng.lognormal(3, 1, N),
        }
    )
    y = 1.5 * (X.port == "C") + (X.deck.isin(["B", "E"])) + 0.02 * X.fare + rng.normal(size=N) * 0.1
    model = HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(X, y)
    assert model.is_categorical_.sum() == 2
    for feature in ("port", "deck", "fare"):
        walked = feature_profile(model, X, y, feature, grid=8, engine="trees")
        predicted = feature_profile(model, X, y, feature, grid=8, engine="predict")
        assert walked.params["engine"] == "exact tree walk"
        assert_allclose(walked.pred, predicted.pred, rtol=0, atol=1e-9)
    walked = permutation_importance(model, X, y, n_repeats=2, engine="trees")
    predicted = permutation_importance(model, X, y, n_repeats=2, engine="predict")
    assert_allclose(walked.importance.to_numpy(), predicted.importance.to_numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_random_small_models_equal_brute_force(seed):
    """Random data and settings (levels, depth, missing codes, classes): every cell of the
    curve tensor of every feature equals the model's predict of the intervened rows."""
    rng = np.random.default_rng(100 + seed)
    n, levels_a = 200, int(rng.integers(2, 20))
    X = np.column_stack(
        [rng.integers(0, levels_a, n), rng.normal(size=n), rng.integers(0, 5, n), rng.normal(size=n)]
    ).astype(float)
    X[rng.random(n) < rng.uniform(0, 0.3), 0] = np.nan
    y = np.sin(X[:, 0] * 1.7) + X[:, 1] * (X[:, 2] > 1) + rng.normal(size=n) * 0.3
    y = np.nan_to_num(y)
    common = dict(categorical_features=[0, 2], max_depth=int(rng.integers(2, 6)), random_state=seed)
    if seed % 2:
        model = HistGradientBoostingClassifier(max_iter=8, **common).fit(X, (y > np.median(y)).astype(int))
    else:
        model = HistGradientBoostingRegressor(max_iter=12, **common).fit(X, y)
    for feature in range(4):
        grid = np.append(np.unique(X[:, feature][~np.isnan(X[:, feature])])[:15], [-3.0, 40.0, 0.5])
        walked = feature_profile(model, X, None, f"x{feature}", grid=grid, engine="trees")
        brute = np.column_stack(
            [
                model.predict_proba(np.where(np.arange(4) == feature, g, X))[:, 1]
                if seed % 2
                else model.predict(np.where(np.arange(4) == feature, g, X))
                for g in walked.grid
            ]
        )
        assert_allclose(walked.pred.reshape(n, -1), brute, rtol=0, atol=1e-12)


def test_too_many_levels_take_the_batched_predict_naming_why():
    """A feature whose categories the trees split into more groups than the walk's mask
    holds: its passes take the batched predict with the reason; others are still walked."""
    rng = np.random.default_rng(4)
    n = 4000
    X = np.column_stack([rng.integers(0, 200, n), rng.normal(size=n)]).astype(float)
    y = rng.normal(size=200)[X[:, 0].astype(int)] * 3 + X[:, 1]
    model = HistGradientBoostingRegressor(max_iter=80, max_leaf_nodes=63, categorical_features=[0], random_state=0)
    model.fit(X, y)
    with pytest.raises(Unsupported, match="groups of categories"):
        levels(read_model(model), 0)
    prof = feature_profile(model, X, y, "x0", grid=6)
    assert prof.params["engine"] == "batched predict" and "groups of categories" in prof.params["engine_reason"]
    with pytest.raises(ModelError, match="groups of categories"):
        feature_profile(model, X, y, "x0", grid=6, engine="trees")
    assert feature_profile(model, X, y, "x1", grid=6).params["engine"] == "exact tree walk"


def test_without_the_compiled_walk_categorical_models_take_the_batched_predict(monkeypatch):
    X, y = _codes(5)
    model = KINDS["regressor"](X, y)
    monkeypatch.setattr(walk, "COMPILED", False)
    prof = feature_profile(model, X, y, "x", grid=4)
    assert prof.params["engine"] == "batched predict" and "compiled walk only" in prof.params["engine_reason"]


def test_the_kernels_compile_for_categorical_and_numeric_ensembles_alike():
    """One ensemble with categorical splits and one without go through the same kernels."""
    X, y = _codes(6)
    numeric = HistGradientBoostingRegressor(max_iter=5, random_state=0).fit(X, y)
    categorical = KINDS["regressor"](X, y)
    for model in (numeric, categorical):
        ens = read_model(model)
        Z = model._preprocessor.transform(X) if ens.categorical else X.to_numpy()
        pair = compiled.pair_sums(ens, Z[:30], 0, 1, Z[:5, :2].T.copy())
        assert pair.shape == (30, 5, 1) and np.isfinite(pair).all()


def test_a_category_with_one_level_in_the_rows_is_walked_by_its_other_levels():
    """Rows holding one level of a pandas category (a subgroup ``k == "x"``): the model's
    column for it is found by probing the dtype's other levels, so PFI is walked (the
    feature's own importance 0, as permuting one value changes nothing) and equals the
    batched predict, rather than falling back with "the pipeline turns 'k' into no column"."""
    rng = np.random.default_rng(0)
    n = 3_000
    X = pd.DataFrame({"a": rng.normal(size=n), "k": pd.Categorical(rng.choice(list("xyz"), n), categories=list("xyz"))})
    y = X["a"].to_numpy() + 2.0 * (X["k"] == "y").to_numpy() + 0.1 * rng.normal(size=n)
    model = HistGradientBoostingRegressor(categorical_features="from_dtype", max_iter=20, random_state=0).fit(X, y)
    inside = (X["k"] == "x").to_numpy()
    rows, target = X[inside], y[inside]
    walked = permutation_importance(model, rows, target, n_repeats=3, engine="trees")
    ref = permutation_importance(model, rows, target, n_repeats=3, engine="predict")
    assert walked.engine == "exact tree walk" and walked.engine_reason is None
    assert_allclose(walked.repeats.to_numpy(), ref.repeats.to_numpy(), rtol=0, atol=1e-9)
    assert walked.importance["k"] == 0.0 and walked.importance["a"] > 0.5
