"""Friedman's H statistics (Friedman & Popescu 2008, Sec. 8.1) against closed forms, a
brute-force implementation of the equations and a peer (pyartemis)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import compute


class Formula:
    """A model given by a formula of the columns (exact closed forms)."""

    def __init__(self, f):
        self.f = f

    def predict(self, X):
        X = np.asarray(X, float)
        return self.f(X[:, 0], X[:, 1], X[:, 2])


def centred(n=150, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["x1", "x2", "x3"])
    return X - X.mean()


def test_an_additive_model_has_no_interaction():
    model = Formula(lambda a, b, c: np.sin(a) + b**2 - 3 * c)
    result = compute.interaction_strength(model, centred(), n_obs=None)
    assert result.pairs["h2"].abs().max() < 1e-10 and result.pairs["h"].abs().max() < 1e-10
    assert result.features.abs().max() < 1e-10
    assert len(result.pairs) == 3


def test_a_product_is_pure_interaction():
    """f = x1 x2 + x3 on centred independent columns: PD_1 = x1 mean(x2) = 0 and PD_2 = 0, so
    the joint effect of (x1, x2) is all interaction (H^2 = 1); x3 enters additively (0)."""
    X = centred()
    result = compute.interaction_strength(Formula(lambda a, b, c: a * b + c), X, n_obs=None)
    pairs = result.pairs.set_index(["feature_1", "feature_2"])
    assert pairs.loc[("x1", "x2"), "h2"] == pytest.approx(1.0, abs=1e-9)
    assert pairs.loc[("x1", "x3"), "h2"] == pytest.approx(0.0, abs=1e-9)
    assert pairs.loc[("x2", "x3"), "h2"] == pytest.approx(0.0, abs=1e-9)
    # h is the interaction's root mean square: the spread of the centred x1 x2 on these rows
    assert pairs.loc[("x1", "x2"), "h"] == pytest.approx((X.x1 * X.x2).std(ddof=0), rel=1e-9)
    assert result.features["x3"] == pytest.approx(0.0, abs=1e-9)
    assert result.pairs.iloc[0][["feature_1", "feature_2"]].tolist() == ["x1", "x2"]
    # the 2-D partial dependence on its grid: x1 * x2 * mean of nothing + mean(x3) = a * b
    surface = result.pd2("x1", "x2")
    assert_allclose(surface.to_numpy(), np.outer(surface.index, surface.columns), atol=1e-12)
    assert_allclose(result.pd2("x2", "x1").to_numpy(), surface.to_numpy().T)


def brute_force(predict, X: pd.DataFrame, pairs):
    """Eq. 44 and the one-against-all statistic, written as loops over the rows."""
    n = len(X)

    def pd_at(columns, row):
        Z = X.copy()
        for c in columns:
            Z[c] = X[c].iloc[row]
        return predict(Z).mean()

    def pd_rest(column, row):
        Z = pd.DataFrame([X.iloc[row]] * n).reset_index(drop=True)
        Z[column] = X[column].to_numpy()
        return predict(Z).mean()

    def c(v):
        v = np.asarray(v, float)
        return v - v.mean()

    F = c(predict(X))
    pd1 = {f: c([pd_at([f], i) for i in range(n)]) for f in X.columns}
    overall = {}
    for f in X.columns:
        rest = c([pd_rest(f, i) for i in range(n)])
        gap = ((F - pd1[f] - rest) ** 2).sum()
        overall[f] = (gap / (F**2).sum(), np.sqrt(gap / n))
    pair = {}
    for a, b in pairs:
        joint = c([pd_at([a, b], i) for i in range(n)])
        gap = ((joint - pd1[a] - pd1[b]) ** 2).sum()
        pair[(a, b)] = (gap / (joint**2).sum(), np.sqrt(gap / n))
    return overall, pair


@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(4)
    X = pd.DataFrame(rng.uniform(-1, 1, size=(300, 4)), columns=["a", "b", "c", "d"])
    X["d"] = np.round(X["d"] * 2)  # few distinct values: the pass uses them, not every row
    y = X["a"] * X["b"] + X["c"] + 0.5 * X["d"] * X["a"] + rng.normal(scale=0.1, size=300)
    return RandomForestRegressor(n_estimators=15, max_depth=6, random_state=0).fit(X, y), X


def test_equals_a_brute_force_implementation_on_a_forest(forest):
    model, X = forest
    result = compute.interaction_strength(model, X, n_obs=40, pairs="all", random_state=3)
    assert result.n_rows == 40 and result.n_total == 300 and result.sampled
    rows = X.loc[result.rows]
    pairs = [tuple(p) for p in result.pairs[["feature_1", "feature_2"]].to_numpy()]
    overall, pair = brute_force(model.predict, rows.reset_index(drop=True), pairs)
    for f, (h2, h) in overall.items():
        assert result.overall.loc[f, "h2"] == pytest.approx(h2, abs=1e-10)
        assert result.overall.loc[f, "h"] == pytest.approx(h, abs=1e-10)
    frame = result.pairs.set_index(["feature_1", "feature_2"])
    for key, (h2, h) in pair.items():
        assert frame.loc[key, "h2"] == pytest.approx(h2, abs=1e-10)
        assert frame.loc[key, "h"] == pytest.approx(h, abs=1e-10)
    # the heatmap: the 2-D PD at each grid point, averaged over the explained rows
    surface = result.pd2("a", "d")
    for va in surface.index[[0, 7, -1]]:
        for vd in surface.columns:
            Z = rows.copy()
            Z["a"], Z["d"] = va, vd
            assert surface.loc[va, vd] == pytest.approx(model.predict(Z).mean(), abs=1e-12)
    assert set(surface.columns) == {-2.0, -1.0, 0.0, 1.0, 2.0}  # a feature with 5 values: its values
    # rows of the model: a feature with u distinct values costs u x n rows, a pair its value pairs x n plus the grid;
    # the exact tree walk (the default on this forest) calls the model on the n rows only
    n = 40
    per_feature = sum(rows[f].nunique() * n for f in X.columns)
    per_pair = sum((rows[list(p)].drop_duplicates().shape[0] + surface_size(result, p)) * n for p in pairs)
    predicted = compute.interaction_strength(model, X, n_obs=40, pairs="all", random_state=3, engine="predict")
    assert predicted.model_rows == per_feature + per_pair
    assert (result.engine, result.model_rows) == ("exact tree walk", n)
    assert predicted.overall.to_numpy() == pytest.approx(result.overall.to_numpy(), abs=1e-12)


def surface_size(result, pair):
    grid = result.pd2(*pair)
    return grid.shape[0] * grid.shape[1]


def test_a_classifier_explains_its_output_class(forest):
    _, X = forest
    y = np.where(X["a"] * X["b"] > 0, "same", "other")
    model = RandomForestClassifier(n_estimators=10, max_depth=5, random_state=0).fit(X, y)
    result = compute.interaction_strength(model, X, n_obs=30, pairs=[("a", "b")], output="same", random_state=1)
    rows = X.loc[result.rows].reset_index(drop=True)
    k = list(model.classes_).index("same")
    overall, pair = brute_force(lambda Z: model.predict_proba(Z)[:, k], rows, [("a", "b")])
    assert result.pairs.loc[0, "h2"] == pytest.approx(pair[("a", "b")][0], abs=1e-10)
    assert result.overall.loc["c", "h2"] == pytest.approx(overall["c"][0], abs=1e-10)
    assert result.output == "same"


def test_default_pairs_are_those_of_the_features_that_interact_most():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(60, 10)), columns=[f"x{j}" for j in range(10)])

    class Wide:
        def predict(self, Z):
            Z = np.asarray(Z, float)
            return Z[:, 0] * Z[:, 9] + Z[:, 1] * Z[:, 2] + 0.01 * Z[:, 3] * Z[:, 4] + Z[:, 5:9].sum(axis=1)

    result = compute.interaction_strength(Wide(), X, n_obs=None)
    features = set(result.pairs["feature_1"]) | set(result.pairs["feature_2"])
    assert len(features) == 8 and len(result.pairs) == 28
    assert {"x0", "x9", "x1", "x2", "x3", "x4"} <= features
    assert result.pairs.iloc[0][["feature_1", "feature_2"]].tolist() in (["x0", "x9"], ["x1", "x2"])
    # x3 x4 is pure interaction (H^2 = 1) but a hundredth the size: listed after the strong ones
    weak = result.pairs.set_index(["feature_1", "feature_2"]).loc[("x3", "x4")]
    assert weak["h2"] == pytest.approx(1, abs=0.05) and weak.name not in [
        tuple(p) for p in result.pairs.iloc[:2, :2].to_numpy()
    ]
    assert weak["h"] < 0.02 * result.pairs["h"].iloc[0]


def test_categorical_and_missing_values(forest):
    _, X = forest
    X = X.iloc[:80].copy()
    X["d"] = X["d"].map({-2.0: "low", -1.0: "low", 0.0: "mid", 1.0: "high", 2.0: "high"})
    X.loc[X.index[::9], "c"] = np.nan
    from sklearn.compose import make_column_transformer
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OrdinalEncoder

    y = X["a"] * (X["d"] == "high") + X["b"]
    model = make_pipeline(
        make_column_transformer((OrdinalEncoder(), ["d"]), remainder="passthrough"),
        HistGradientBoostingRegressor(max_iter=30, random_state=0),
    ).fit(X, y)
    result = compute.interaction_strength(model, X, n_obs=None, pairs=[("a", "d"), ("b", "c")])
    overall, pair = brute_force(model.predict, X.reset_index(drop=True), [("a", "d"), ("b", "c")])
    frame = result.pairs.set_index(["feature_1", "feature_2"])
    for key, (h2, _) in pair.items():
        assert frame.loc[key, "h2"] == pytest.approx(h2, abs=1e-10)
    assert frame.loc[("a", "d"), "h2"] > 10 * frame.loc[("b", "c"), "h2"]
    assert list(result.pd2("a", "d").columns) == ["high", "low", "mid"]


def test_equals_pyartemis_on_the_same_rows(forest):
    """pyartemis's FriedmanHStatisticMethod (its 'H statistic' is H^2; ``normalized=False``
    gives our h) on the rows we explain, with no resampling of its own."""
    if os.environ.get("WIP_REQUIRE_PEERS") != "1":
        pytest.importorskip("artemis")
    from artemis.interactions_methods.model_agnostic import FriedmanHStatisticMethod

    model, X = forest
    result = compute.interaction_strength(model, X, n_obs=50, pairs="all", random_state=5)
    rows = X.loc[result.rows].reset_index(drop=True)
    for normalized, column in ((True, "h2"), (False, "h")):
        peer = FriedmanHStatisticMethod(normalized=normalized)
        peer.fit(model, rows, n=None, show_progress=False)
        for a, b, value in result.pairs[["feature_1", "feature_2", column]].itertuples(index=False):
            assert value == pytest.approx(peer.interaction_value(a, b), abs=1e-10)
        ova = dict(zip(peer.ova["Feature"], peer.ova[peer.method], strict=True))
        for f in X.columns:
            assert result.overall.loc[f, column] == pytest.approx(ova[f], abs=1e-10)
