"""The exact tree engine on XGBoost's categorical splits (``compute.trees.xgboost_read``): the
same numbers as XGBoost's own predict, within its stated float32 bound (``Ensemble.rounding``,
:func:`compute.trees.xgboost_read.xgboost_rounding`), for a regressor, a binary and a 3-class
classifier; fitted on integer codes (``feature_types`` "c") and on pandas category columns;
with partition splits (``max_cat_to_onehot=1``) and one-hot splits (a set of one category).
The rows hold missing values and, for the codes, categories never seen in training and
invalid values (negative, fractional, past 2^24). Run by tests/test_tree_xgboost_categorical.py
in a process of its own (this file imports xgboost).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from compute import feature_profile, permutation_importance
from compute.trees import Unsupported, lookup_sums, read_model, walk
from compute.trees.xgboost_read import xgboost_codes

xgb = pytest.importorskip("xgboost")
pytestmark = pytest.mark.skipif(not walk.COMPILED, reason="categorical splits are walked by the compiled walk only")

N = 300
WALK = "exact tree walk"
LEVELS = ["red", "green", "blue", "cyan", "grey", "pink", "teal", "gold"]
#: Codes XGBoost reads as no category of any set (left at every split) or as a category
#: after truncation; a missing value goes the default direction.
ODD = np.array(
    [0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 100, 1e6, 2.0**24, 2.0**24 + 2, -1, -0.5, -0.0, 0.5, 2.7, 6.999, 7.9999999]
    + [np.nextafter(3.0, 0.0), -3, np.nan]
)


def _data(seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """k: 8 levels, m: 3 levels, a and c numeric; missing values in a and k."""
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 8, N)
    m = rng.integers(0, 3, N)
    X = pd.DataFrame({"a": rng.normal(size=N), "k": k.astype(float), "c": rng.normal(size=N), "m": m.astype(float)})
    y = 50 + np.array([0, 3, -2, 4, 1, -3, 2, 0.5])[k] + 1.5 * X.a - np.array([0, 1, 2])[m] * X.c
    y = y + rng.normal(scale=0.3, size=N)
    X.loc[rng.random(N) < 0.1, "a"] = np.nan
    X.loc[rng.random(N) < 0.1, "k"] = np.nan
    return X, y.to_numpy()


def _labels(y: np.ndarray, classes: int) -> np.ndarray:
    if not classes:
        return y
    return np.digitize(y, np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1]))


def _as_pandas(X: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """k and m as pandas category columns of text levels (categories in ``order``)."""

    def cat(codes: pd.Series, names: list[str]) -> pd.Categorical:
        text = np.array(names, dtype=object)[codes.fillna(0).astype(int)]
        return pd.Categorical(np.where(codes.isna(), None, text), categories=[n for n in order if n in names])

    return X.assign(k=cat(X.k, LEVELS), m=cat(X.m, LEVELS[:3]))


def _fit(classes: int, inputs: str, onehot: bool):
    X, y = _data(1)
    target = _labels(y, classes)
    cls = xgb.XGBRegressor if classes == 0 else xgb.XGBClassifier
    options = {"n_estimators": 20 if classes != 3 else 10, "max_depth": 4, "n_jobs": 1, "random_state": 0}
    options.update(enable_categorical=True, max_cat_to_onehot=64 if onehot else 1)
    if inputs == "codes":
        model = cls(**options, feature_types=["q", "c", "q", "c"]).fit(X, target)
        rows = X.copy()
        odd = np.random.default_rng(3).random(N) < 0.3  # unseen and invalid codes among the rows
        rows.loc[odd, "k"] = np.resize(ODD, odd.sum())
        return model, rows, target
    # training levels in one order (with one never present in the rows); the rows' own
    # categories in another, a level absent: XGBoost codes by the training levels
    train = _as_pandas(X, LEVELS)
    train["k"] = train.k.cat.add_categories(["unused"])
    model = cls(**options).fit(train, target)
    rows = _as_pandas(X, LEVELS[::-1])
    rows["k"] = rows.k.cat.remove_categories(["teal"]).cat.add_categories(["unused"])
    rows.loc[rows.index[::17], "k"] = "unused"
    return model, rows, target


CASES = [(c, i, o) for c in (0, 2, 3) for i in ("codes", "pandas") for o in (False, True)]


@pytest.fixture(scope="module", params=CASES, ids=lambda p: f"classes{p[0]}-{p[1]}-{'onehot' if p[2] else 'sets'}")
def fitted(request):
    classes, inputs, onehot = request.param
    model, rows, target = _fit(classes, inputs, onehot)
    return model, rows, target, onehot


def _bounds(model, ref) -> tuple[float, float]:
    """The allowed gaps of curve values and of losses: XGBoost's stated rounding bound r, and
    r carried through the loss (squared error: 2 sqrt(L) r + r^2; log loss: r e^L, L the
    largest loss), plus 1e-9 of the range."""
    scale = max(float(np.ptp(ref.pred)), float(np.abs(ref.pred).max()), 1e-12)
    r = read_model(model).rounding
    top = float(np.nanmax(ref.loss_grid))
    through = r * 1.01 * np.exp(top) if ref.params["loss"] == "log_loss" else 2 * np.sqrt(top) * r + r * r
    return 1e-9 * scale + r, 1e-9 * max(top, 1e-12) + through


def test_the_splits_are_read(fitted):
    model, _, _, onehot = fitted
    ens = read_model(model)
    assert ens.categorical and ens.is_categorical(1) and ens.is_categorical(3)
    assert not ens.is_categorical(0) and not ens.is_categorical(2)
    sets = np.array([bin(int(w) & (2**64 - 1)).count("1") for w in ens.bitsets[:, 0]])
    left_sets = 64 * ens.bitsets.shape[1] - sets  # the categories sent right (XGBoost's own set)
    if onehot:
        assert np.all(left_sets == 1)
    else:
        assert left_sets.max() > 1


def test_profiles_equal_the_batched_predict(fitted):
    """ICE and pointwise losses of every feature (categorical and numeric) equal the batched
    predict's, on rows with missing, unseen and invalid categories."""
    model, rows, target, _ = fitted
    for feature in rows.columns:
        walked = feature_profile(model, rows, target, feature, engine="trees")
        ref = feature_profile(model, rows, target, feature, engine="predict")
        assert walked.params["engine"] == WALK and ref.params["engine"] == "batched predict"
        values, losses = _bounds(model, ref)
        assert_allclose(walked.pred, ref.pred, rtol=0, atol=values, err_msg=feature)
        assert_allclose(walked.loss_grid, ref.loss_grid, rtol=0, atol=losses, err_msg=feature)
    assert feature_profile(model, rows, target, "k", grid=5).params["engine"] == WALK  # the default


def test_pfi_equals_the_batched_predict(fitted):
    model, rows, target, _ = fitted
    walked = permutation_importance(model, rows, target, n_repeats=3, random_state=4, engine="trees")
    ref = permutation_importance(model, rows, target, n_repeats=3, random_state=4, engine="predict")
    assert walked.engine == WALK and walked.engine_reason is None
    slack = max(_bounds(model, feature_profile(model, rows, target, f, engine="predict"))[1] for f in rows.columns)
    assert_allclose(walked.repeats, ref.repeats, rtol=0, atol=slack + 1e-9 * max(ref.model_error, 1e-12))
    assert walked.importance["k"] > 0  # a feature the target reads: a comparison that could fail
    assert permutation_importance(model, rows, target, n_repeats=1).engine == WALK


@pytest.mark.parametrize("classes", [0, 3])
def test_odd_codes_go_where_xgboost_sends_them(classes):
    """Each odd code (unseen, past the sets, negative, fractional, past 2^24, missing) set on
    every row: the walk's outputs equal XGBoost's predict on those rows."""
    model, rows, _ = _fit(classes, "codes", False)
    ens = read_model(model)
    X = rows.iloc[::5].reset_index(drop=True)
    for j in (1, 3):
        queries = np.broadcast_to(ODD, (len(X), ODD.size))
        sums = lookup_sums(ens, ens.compared(X.to_numpy(dtype=float)), j, queries)
        mine = np.asarray(ens.finish(sums.reshape(-1, sums.shape[2]))).reshape(len(X), ODD.size, -1)
        block = X.loc[X.index.repeat(ODD.size)].reset_index(drop=True)
        block.iloc[:, j] = np.tile(ODD, len(X))
        own = model.predict_proba(block) if classes else model.predict(block)
        own = np.asarray(own, dtype=np.float64).reshape(len(X), ODD.size, -1)
        assert_allclose(mine, own, rtol=0, atol=ens.rounding + 1e-9 * float(np.abs(own).max()))


def test_a_level_xgboost_refuses_is_not_walked():
    """XGBoost refuses a frame whose categories hold a level outside its training levels;
    the walk's coding refuses it too, naming it."""
    model, rows, _ = _fit(0, "pandas", False)
    with pytest.raises(Unsupported, match="XGBoost refuses"):
        xgboost_codes(model, rows.assign(k=rows.k.cat.add_categories(["violet"])))
    with pytest.raises(Exception, match="not in the training set"):
        model.predict(rows.assign(k=rows.k.cat.add_categories(["violet"])))
