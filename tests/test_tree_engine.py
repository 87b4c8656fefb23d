"""The exact tree engine (issue 42, ``compute.trees``): the same numbers as the model's own
predict, for every scikit-learn tree model kind, on data with ties, missing values and
values exactly on (and one rounding step beside) the thresholds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.decomposition import PCA
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import Pipeline
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from compute import ModelError, feature_profile, permutation_importance
from compute.importance import permutation_block
from compute.trees import curve_sums, lookup_sums, read_model, walk
from compute.trees import engine as tree_engine

N = 160


def _data(seed: int = 0, missing: bool = False) -> tuple[pd.DataFrame, np.ndarray]:
    """Integer-valued features (many ties; thresholds at x.5), one rounded to 0.1, a
    target far from 0 (a forgotten base score shows)."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.integers(0, 6, N).astype(float),
            "b": rng.integers(0, 12, N).astype(float),
            "c": np.round(rng.normal(size=N), 1),
            "d": rng.integers(0, 3, N).astype(float),
        }
    )
    y = 100 + 3 * X.a - 2 * X.b * (X.d == 1) + 5 * np.sin(X.c * 3) + rng.normal(size=N)
    if missing:
        X.loc[rng.random(N) < 0.15, "b"] = np.nan
        X.loc[rng.random(N) < 0.1, "c"] = np.nan
    return X, y.to_numpy()


def _labels(y: np.ndarray, classes: int) -> np.ndarray:
    return np.digitize(y, np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1]))


CASES = {
    "tree regressor": (lambda: DecisionTreeRegressor(max_depth=6, random_state=0), 0, False),
    "tree 3-class": (lambda: DecisionTreeClassifier(max_depth=5, random_state=0), 3, False),
    "forest regressor": (lambda: RandomForestRegressor(15, max_depth=8, random_state=0), 0, False),
    "forest binary, missing": (lambda: RandomForestClassifier(12, random_state=0), 2, True),
    "extra trees regressor": (lambda: ExtraTreesRegressor(10, random_state=0), 0, False),
    "extra trees 3-class": (lambda: ExtraTreesClassifier(10, max_depth=6, random_state=0), 3, False),
    "boosting regressor": (
        lambda: GradientBoostingRegressor(n_estimators=25, learning_rate=0.3, random_state=0),
        0,
        False,
    ),
    "boosting binary": (
        lambda: GradientBoostingClassifier(n_estimators=20, learning_rate=0.3, random_state=0),
        2,
        False,
    ),
    "boosting 3-class": (lambda: GradientBoostingClassifier(n_estimators=15, random_state=0), 3, False),
    "hist regressor, missing": (lambda: HistGradientBoostingRegressor(max_iter=30, random_state=0), 0, True),
    "hist binary, missing": (lambda: HistGradientBoostingClassifier(max_iter=25, random_state=0), 2, True),
    "hist 3-class, missing": (lambda: HistGradientBoostingClassifier(max_iter=15, random_state=0), 3, True),
    "hist poisson": (lambda: HistGradientBoostingRegressor(loss="poisson", max_iter=20, random_state=0), 0, False),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def fitted(request):
    make, classes, missing = CASES[request.param]
    X, y = _data(1, missing)
    target = _labels(y, classes) if classes else y
    return make().fit(X, target), X, target


def test_profile_equals_the_batched_predict(fitted):
    """ICE, the pointwise losses and the base predictions (the walk's own, checked against
    the model's predict on 32 rows) of ``engine="trees"`` equal those of ``engine="predict"``
    within 1e-9 of the predictions' range, on every feature (the one with missing values
    too: its grid ends with the missing point)."""
    model, X, y = fitted
    for feature in X.columns:
        walked = feature_profile(model, X, y, feature, engine="trees")
        ref = feature_profile(model, X, y, feature, engine="predict")
        scale = max(float(np.ptp(ref.pred)), float(np.abs(ref.pred).max()), 1e-12)
        assert walked.params["engine"] == "exact tree walk" and ref.params["engine"] == "batched predict"
        assert_allclose(walked.pred, ref.pred, rtol=0, atol=1e-9 * scale)
        assert_allclose(walked.loss_grid, ref.loss_grid, rtol=1e-9, atol=1e-9 * scale)
        assert_allclose(walked.base_pred, ref.base_pred, rtol=0, atol=1e-9 * scale)
        assert_allclose(walked.base_loss, ref.base_loss, rtol=1e-9, atol=1e-9 * scale)


def test_pfi_equals_the_batched_predict(fitted):
    """The PFI repeats (the same permutations) of both engines agree within 1e-9 of the
    model's error; the unmodified rows' error is the model's own, bit for bit."""
    model, X, y = fitted
    walked = permutation_importance(model, X, y, n_repeats=3, random_state=4, engine="trees")
    ref = permutation_importance(model, X, y, n_repeats=3, random_state=4, engine="predict")
    assert walked.engine == "exact tree walk" and walked.engine_reason is None
    assert ref.engine == "batched predict"
    assert walked.model_error == ref.model_error
    assert_allclose(walked.repeats, ref.repeats, rtol=1e-9, atol=1e-9 * max(ref.model_error, 1e-12))


def test_the_default_takes_the_walk(fitted):
    """ICE/PD and PFI under "auto" walk every model (the walk compiled); without numba, PFI
    leaves single trees and forests to the batched predict (faster there than the NumPy
    walk), saying so (tests/test_tree_compiled.py)."""
    model, X, y = fitted
    assert feature_profile(model, X, y, "a", grid=5).params["engine"] == "exact tree walk"
    pfi = permutation_importance(model, X, y, n_repeats=1)
    if "Boosting" in type(model).__name__ or walk.COMPILED:
        assert pfi.engine == "exact tree walk" and pfi.engine_reason is None
    else:
        assert pfi.engine == "batched predict" and "slower than the batched predict" in pfi.engine_reason


def _edges(model, X: pd.DataFrame, j: int) -> np.ndarray:
    """Every threshold on feature j, and its neighbours one float64 and one float32 step
    away on both sides: where ``<`` against ``<=`` and float32 rounding differ."""
    ens = read_model(model)
    t = np.unique(ens.threshold[ens.feature == j])
    t32 = t.astype(np.float32)
    near = [
        t,
        np.nextafter(t, np.inf),
        np.nextafter(t, -np.inf),
        np.nextafter(t32, np.float32(np.inf)).astype(float),
        np.nextafter(t32, np.float32(-np.inf)).astype(float),
        X.iloc[:, j].to_numpy(),
    ]
    values = np.unique(np.concatenate(near))
    return values[np.isfinite(values)]


def _brute(model, X: pd.DataFrame, j: int, values: np.ndarray) -> np.ndarray:
    """The model's own output on every row with feature j set to every value (rows x values)."""
    block = X.loc[X.index.repeat(values.size)].reset_index(drop=True)
    block.iloc[:, j] = np.tile(values, len(X))
    out = model.predict_proba(block) if hasattr(model, "predict_proba") else model.predict(block)
    return np.asarray(out).reshape(len(X), values.size, -1)


def _walked(model, X: pd.DataFrame, j: int, values: np.ndarray) -> np.ndarray:
    ens = read_model(model)
    Xc = ens.compared(X.to_numpy(dtype=float))
    sums = curve_sums(ens, Xc, j, values)
    return np.asarray(ens.finish(sums.reshape(-1, sums.shape[2]))).reshape(len(X), values.size, -1)


RANDOM_KINDS = (
    lambda d, k, s: DecisionTreeRegressor(max_depth=d, random_state=s),
    lambda d, k, s: RandomForestRegressor(k, max_depth=d, random_state=s),
    lambda d, k, s: ExtraTreesClassifier(k, max_depth=d, random_state=s),
    lambda d, k, s: GradientBoostingRegressor(n_estimators=k, max_depth=d, learning_rate=0.7, random_state=s),
    lambda d, k, s: GradientBoostingClassifier(n_estimators=k, max_depth=d, random_state=s),
    lambda d, k, s: HistGradientBoostingRegressor(max_iter=k, max_depth=d, random_state=s),
    lambda d, k, s: HistGradientBoostingClassifier(max_iter=k, max_depth=d, random_state=s),
)


@pytest.mark.parametrize("seed", range(6))
def test_random_small_ensembles_equal_brute_force(seed):
    """Hypothesis-style: random model kinds, depths, sizes and data (ties, missing values
    for the models that take them), every row evaluated with each feature at every
    threshold and one float64 / float32 step beside it, against the model's own predict
    on the materialised block; both lookups (a common grid, per-row values)."""
    rng = np.random.default_rng(100 + seed)
    for _ in range(3):
        kind = RANDOM_KINDS[int(rng.integers(len(RANDOM_KINDS)))]
        model = kind(int(rng.integers(1, 7)), int(rng.integers(1, 12)), int(rng.integers(1000)))
        missing = "Hist" in type(model).__name__ and bool(rng.integers(2))
        X, y = _data(int(rng.integers(1000)), missing)
        target = _labels(y, int(rng.integers(2, 4))) if hasattr(model, "predict_proba") else y
        model.fit(X, target)
        Xs = X.iloc[:: max(1, N // 25)]
        for j in range(X.shape[1]):
            values = _edges(model, X, j)
            expected = _brute(model, Xs, j, values)
            got = _walked(model, Xs, j, values)
            scale = max(float(np.abs(expected).max()), 1e-12)
            assert_allclose(got, expected, rtol=0, atol=1e-12 * scale, err_msg=f"{model!r} feature {j}")
            ens = read_model(model)
            pick = rng.integers(values.size, size=(len(Xs), 3))
            looked = lookup_sums(ens, ens.compared(Xs.to_numpy(dtype=float)), j, values[pick])
            per_row = np.asarray(ens.finish(looked.reshape(-1, looked.shape[2]))).reshape(len(Xs), 3, -1)
            want = np.take_along_axis(expected, pick[:, :, None], axis=1)
            assert_allclose(per_row, want, rtol=0, atol=1e-12 * scale, err_msg=f"{model!r} feature {j}")


def test_missing_values_follow_each_nodes_direction():
    """A missing value goes where each node sends it (``missing_go_to_left``), for the free
    feature (the grid's missing point) and for the others (rows with missing values)."""
    X, y = _data(3, missing=True)
    X, y = X.iloc[:60], y[:60]
    for model in (HistGradientBoostingRegressor(max_iter=20), DecisionTreeRegressor(max_depth=5)):
        model.fit(X, y)
        values = np.array([np.nan, 0.0, 3.0, 5.5, 11.0])
        for j in (1, 2):
            assert_allclose(_walked(model, X, j, values), _brute(model, X, j, values), rtol=0, atol=1e-9)


def test_own_cells_are_the_rows_own_prediction():
    """Where the grid value walks as the row's own (its own value, or one in the same bin)
    the cell is the row's own prediction bit for bit (from the same walk, within 1e-12 of the
    model's predict): ICI is exactly 0 at the own value."""
    X, y = _data(2)
    model = GradientBoostingRegressor(n_estimators=30, random_state=0).fit(X, y)
    prof = feature_profile(model, X, y, "c", engine="trees")
    assert_allclose(prof.base_pred, model.predict(X), rtol=1e-12, atol=1e-12)
    own = np.searchsorted(prof.grid, prof.x)
    assert_array_equal(prof.pred[np.arange(N), own], prof.base_pred)
    assert np.all(prof.ici[np.arange(N), own] == 0.0)


def test_unsupported_models_fall_back_or_raise_naming_why():
    X, y = _data(0)
    for model, why in (
        (SVC().fit(X, y > 110), "SVC is not a tree model"),
        (KNeighborsRegressor().fit(X, y), "KNeighborsRegressor is not a tree model"),
        (Pipeline([("pca", PCA(3)), ("tree", DecisionTreeRegressor())]).fit(X, y), "PCA"),
    ):
        target = y > 110 if hasattr(model, "classes_") else y
        with pytest.raises(ModelError, match=why):
            feature_profile(model, X, target, "a", engine="trees")
        with pytest.raises(ModelError, match=why):
            permutation_importance(model, X, target, n_repeats=1, engine="trees")
        prof = feature_profile(model, X, target, "a", grid=4)
        assert prof.params["engine"] == "batched predict" and why in prof.params["engine_reason"]
        res = permutation_importance(model, X, target, n_repeats=1)
        assert res.engine == "batched predict" and why in res.engine_reason


def test_categorical_hist_gradient_boosting_is_walked():
    """Categorical splits are walked (tests/test_tree_categorical.py has the cases)."""
    X, y = _data(0)
    model = HistGradientBoostingRegressor(max_iter=5, categorical_features=["b"]).fit(X, y)
    walked = feature_profile(model, X, y, "b", grid=4)
    assert walked.params["engine"] == "exact tree walk"
    assert_allclose(walked.pred, feature_profile(model, X, y, "b", grid=4, engine="predict").pred, rtol=0, atol=1e-9)


def test_pipeline_of_passthrough_steps_is_walked():
    X, y = _data(0)
    model = Pipeline([("keep", "passthrough"), ("forest", RandomForestRegressor(5, random_state=0))]).fit(X, y)
    walked = feature_profile(model, X, y, "b", engine="trees")
    ref = feature_profile(model, X, y, "b", engine="predict")
    assert_allclose(walked.pred, ref.pred, rtol=1e-12)


def test_groups_take_the_batched_predict():
    X, y = _data(0)
    model = GradientBoostingRegressor(n_estimators=5, max_depth=2).fit(X, y)
    res = permutation_importance(model, X, y, n_repeats=1, groups={"ab": ["a", "b"]})
    assert res.engine == "batched predict" and "groups" in res.engine_reason
    one = permutation_importance(model, X, y, n_repeats=2, features=["a"], groups={"g": ["b"]}, engine="trees")
    plain = permutation_importance(model, X, y, n_repeats=2, features=["a", "b"], engine="trees")
    assert_array_equal(one.repeats.to_numpy(), plain.repeats.to_numpy())  # a one-column group is walked
    with pytest.raises(ModelError, match="grouped"):
        permutation_importance(model, X, y, n_repeats=1, groups={"ab": ["a", "b"]}, engine="trees")


def test_a_walk_that_disagrees_with_predict_falls_back(monkeypatch):
    """The walk is checked against the model's own predict before it is used: a reading
    that is off (here: a shifted base score) falls back, never a wrong number."""
    X, y = _data(0)
    model = GradientBoostingRegressor(n_estimators=5).fit(X, y)
    right = read_model(model)

    def shifted(_model):  # as if read before (a disagreement then reads it again: still off)
        return dataclasses.replace(right, finish=lambda total: right.finish(total) + 1e-6), True

    monkeypatch.setattr(tree_engine, "read_model_cached", shifted)
    prof = feature_profile(model, X, y, "a", grid=3)
    assert prof.params["engine"] == "batched predict" and "disagrees" in prof.params["engine_reason"]


def test_engine_must_be_named():
    X, y = _data(0)
    model = DecisionTreeRegressor(max_depth=2).fit(X, y)
    with pytest.raises(ValueError, match="'engine' parameter"):
        feature_profile(model, X, y, "a", engine="fast")


def test_a_subgroups_share_of_the_pairs_keeps_the_engine():
    """A subgroup's PFI restricted from the all-rows pairs was computed by the same engine:
    the result still says so (the page's note reads it)."""
    X, y = _data(4)
    model = HistGradientBoostingRegressor(max_iter=10, random_state=0).fit(X, y)
    found = permutation_block(model, X, y, n_repeats=2, keep_pairs=True)
    part = found.restrict(X["d"] == 1)
    assert (found.engine, part.engine, part.engine_reason) == ("exact tree walk", "exact tree walk", None)
    predicted = permutation_block(model, X, y, n_repeats=2, keep_pairs=True, engine="predict")
    assert predicted.restrict(X["d"] == 1).engine == "batched predict"


def test_a_model_is_read_once_and_again_when_fitted_again_in_place():
    """The ensemble read from a model is kept while the model lives (a job's every feature
    reads it once); a model fitted again in place (same object) disagrees with what was read
    on the check rows, so it is read again: the walk's numbers are the new model's."""
    from compute.trees import read as tree_read

    X, y = _data(5)
    model = HistGradientBoostingRegressor(max_iter=10, random_state=0).fit(X, y)
    first = feature_profile(model, X, y, "a", grid=5, engine="trees")
    assert tree_read.read_model_cached(model)[1]  # kept
    kept = tree_read._READ[id(model)]
    model.fit(X, -3 * y)  # the same object, other trees
    second = feature_profile(model, X, -3 * y, "a", grid=5, engine="trees")
    predicted = feature_profile(model, X, -3 * y, "a", grid=5, engine="predict")
    assert second.params["engine"] == "exact tree walk"
    assert_allclose(second.pred, predicted.pred, rtol=0, atol=1e-9)
    assert tree_read._READ[id(model)] is not kept
    assert not np.allclose(first.pred, second.pred)
    key = id(model)
    del model, first, second, predicted
    import gc

    gc.collect()
    assert key not in tree_read._READ  # gone with its model
