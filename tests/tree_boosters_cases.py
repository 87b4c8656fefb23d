"""The exact tree engine on XGBoost, LightGBM and CatBoost (issue 42,
``compute.trees.boosters`` and ``.xgboost_read``): the same numbers as each library's own
predict, for regressors, binary and 3-class classifiers, on data with missing values and
values exactly on (and one float32 step beside) the thresholds; unsupported options fall
back under ``engine="auto"`` naming why.

LightGBM and CatBoost sum in float64 as the walk does: equal within 1e-9 of the prediction
range. XGBoost sums in float32: equal within the bound its :class:`Ensemble` states
(``rounding``, :func:`compute.trees.xgboost_read.xgboost_rounding`), which is tested too.
Every model runs on one thread (the test process forks model processes elsewhere).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from compute import ModelError, feature_profile, permutation_importance
from compute.trees import lookup_sums, read_model
from compute.trees.boosters import LGB_ZERO

N = 300
WALK = "exact tree walk"


def _data(seed: int = 0, missing: bool = True) -> tuple[pd.DataFrame, np.ndarray]:
    """Integer-valued features (ties), one rounded to 0.1, a target far from 0 (a forgotten
    base score shows), missing values in two columns."""
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


def _xgb(kind: str, **kw):
    xgb = pytest.importorskip("xgboost")
    cls = xgb.XGBRegressor if kind == "regressor" else xgb.XGBClassifier
    return cls(**{"n_estimators": 30, "max_depth": 4, "learning_rate": 0.3, "n_jobs": 1, "random_state": 0, **kw})


def _xgb_rf():
    xgb = pytest.importorskip("xgboost")
    return xgb.XGBRFClassifier(n_estimators=10, max_depth=4, n_jobs=1, random_state=0)


def _lgb(kind: str, **kw):
    lgb = pytest.importorskip("lightgbm")
    cls = lgb.LGBMRegressor if kind == "regressor" else lgb.LGBMClassifier
    base = {"n_estimators": 30, "num_leaves": 12, "min_child_samples": 5, "n_jobs": 1, "verbose": -1, "random_state": 0}
    return cls(**{**base, **kw})


def _cb(kind: str, **kw):
    cb = pytest.importorskip("catboost")
    cls = cb.CatBoostRegressor if kind == "regressor" else cb.CatBoostClassifier
    base = {
        "iterations": 30,
        "depth": 4,
        "thread_count": 1,
        "verbose": 0,
        "random_seed": 0,
        "allow_writing_files": False,
    }
    return cls(**{**base, **kw})


CASES = {
    "xgboost regressor": (lambda: _xgb("regressor"), 0),
    "xgboost binary": (lambda: _xgb("classifier"), 2),
    "xgboost 3-class": (lambda: _xgb("classifier", n_estimators=15), 3),
    "xgboost poisson": (lambda: _xgb("regressor", objective="count:poisson"), -1),
    "xgboost random forest 3-class": (lambda: _xgb_rf(), 3),
    "lightgbm regressor": (lambda: _lgb("regressor"), 0),
    "lightgbm binary": (lambda: _lgb("classifier"), 2),
    "lightgbm 3-class": (lambda: _lgb("classifier", n_estimators=15), 3),
    "lightgbm regressor, missing_type None": (lambda: _lgb("regressor", use_missing=False), 0),
    "lightgbm binary, missing_type None": (lambda: _lgb("classifier", use_missing=False), 2),
    "catboost regressor": (lambda: _cb("regressor"), 0),
    "catboost binary": (lambda: _cb("classifier"), 2),
    "catboost 3-class": (lambda: _cb("classifier", iterations=15), 3),
}


def _target(y: np.ndarray, classes: int) -> np.ndarray:
    if classes == -1:  # counts
        return np.round(np.clip(y - 95, 0, None) / 3)
    return _labels(y, classes) if classes else y


@pytest.fixture(scope="module", params=sorted(CASES))
def fitted(request):
    make, classes = CASES[request.param]
    X, y = _data(1)
    target = _target(y, classes)
    return make().fit(X, target), X, target


def _bounds(model, ref) -> tuple[float, float]:
    """The allowed gaps of curve values and of losses: 1e-9 of the prediction range (float64
    libraries) plus XGBoost's stated rounding bound r, carried through the loss (squared
    error: 2 sqrt(L) r + r^2; log loss -log p: r e^L, with L the largest loss)."""
    scale = max(float(np.ptp(ref.pred)), float(np.abs(ref.pred).max()), 1e-12)
    r = read_model(model).rounding
    top = float(np.nanmax(ref.loss_grid))
    through = r * 1.01 * np.exp(top) if ref.params["loss"] == "log_loss" else 2 * np.sqrt(top) * r + r * r
    return 1e-9 * scale + r, 1e-9 * max(top, 1e-12) + through


def test_profile_equals_the_batched_predict(fitted):
    """ICE and the pointwise losses of ``engine="trees"`` equal those of ``engine="predict"``
    on every feature (those with missing values too), the base predictions (the walk's own)
    likewise."""
    model, X, y = fitted
    for feature in X.columns:
        walked = feature_profile(model, X, y, feature, engine="trees")
        ref = feature_profile(model, X, y, feature, engine="predict")
        assert walked.params["engine"] == WALK and ref.params["engine"] == "batched predict"
        values, losses = _bounds(model, ref)
        assert_allclose(walked.pred, ref.pred, rtol=0, atol=values, err_msg=feature)
        assert_allclose(walked.loss_grid, ref.loss_grid, rtol=0, atol=losses, err_msg=feature)
        assert_allclose(walked.base_pred, ref.base_pred, rtol=0, atol=values, err_msg=feature)


def test_pfi_equals_the_batched_predict(fitted):
    """PFI's repeats agree within the loss bound (every permuted row is a cell of the
    observed-grid profiles, whose largest loss bounds the loss's slope)."""
    model, X, y = fitted
    walked = permutation_importance(model, X, y, n_repeats=3, random_state=4, engine="trees")
    ref = permutation_importance(model, X, y, n_repeats=3, random_state=4, engine="predict")
    assert walked.engine == WALK and walked.engine_reason is None and ref.engine == "batched predict"
    assert walked.model_error == ref.model_error
    slack = max(_bounds(model, feature_profile(model, X, y, f, engine="predict"))[1] for f in X.columns)
    assert_allclose(walked.repeats, ref.repeats, rtol=0, atol=slack + 1e-9 * max(ref.model_error, 1e-12))


def test_the_default_takes_the_walk(fitted):
    model, X, y = fitted
    assert feature_profile(model, X, y, "b", grid=5).params["engine"] == WALK
    assert permutation_importance(model, X, y, n_repeats=1).engine == WALK


def _brute(model, X: pd.DataFrame, j: int, values: np.ndarray) -> np.ndarray:
    """The model's own output on every row with feature j set to every value."""
    block = X.loc[X.index.repeat(values.size)].reset_index(drop=True)
    block.iloc[:, j] = np.tile(values, len(X))
    out = model.predict_proba(block) if hasattr(model, "predict_proba") else model.predict(block)
    return np.asarray(out, dtype=np.float64).reshape(len(X), values.size, -1)


def _walked(model, X: pd.DataFrame, j: int, values: np.ndarray) -> np.ndarray:
    ens = read_model(model)
    queries = np.broadcast_to(values, (len(X), values.size))
    sums = lookup_sums(ens, ens.compared(X.to_numpy(dtype=float)), j, queries)
    return np.asarray(ens.finish(sums.reshape(-1, sums.shape[2]))).reshape(len(X), values.size, -1)


def _xgb_thresholds(model, j: int) -> np.ndarray:
    """The float32 split conditions on feature j as the JSON model stores them (x < t)."""
    doc = json.loads(bytes(model.get_booster().save_raw("json")))
    found = [
        c
        for tree in doc["learner"]["gradient_booster"]["model"]["trees"]
        for c, f, left in zip(tree["split_conditions"], tree["split_indices"], tree["left_children"])
        if left >= 0 and f == j
    ]
    return np.unique(np.asarray(found, dtype=np.float32))


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_xgboost_values_on_its_thresholds_go_right(kind):
    """XGBoost goes left when x < t: a value exactly on a threshold goes right, one float32
    step below goes left. The walk takes the same side at every threshold (a plain ``<=``
    on t would send the value on it left: off by a leaf, far beyond the bound), as ICE over
    a grid of the thresholds and rows holding them."""
    X, y = _data(2)
    X["c"] = np.round(X["c"] * 3, 1) / 3  # values between the 0.1 steps
    model = _xgb(kind).fit(X, _labels(y, 2) if kind == "classifier" else y)
    ens = read_model(model)
    moved = 0
    for j, name in enumerate(X.columns):
        t = _xgb_thresholds(model, j)
        below = np.nextafter(t, np.float32(-np.inf))
        values = np.unique(np.concatenate([t, below, np.nextafter(t, np.float32(np.inf))]).astype(np.float64))
        expected = _brute(model, X.iloc[::10], j, values)
        assert_allclose(_walked(model, X.iloc[::10], j, values), expected, rtol=0, atol=ens.rounding)
        on, under = _brute(model, X.iloc[::10], j, t.astype(float)), _brute(model, X.iloc[::10], j, below.astype(float))
        moved += int(np.sum(np.abs(on - under) > 10 * ens.rounding))
        rows = X.copy()
        rows[name] = t[np.arange(len(X)) % t.size].astype(np.float64)  # the data's own values on thresholds
        walked = feature_profile(model, rows, None, name, grid=values, engine="trees")
        ref = feature_profile(model, rows, None, name, grid=values, engine="predict")
        assert_allclose(walked.pred, ref.pred, rtol=0, atol=ens.rounding)
    assert moved > 0  # the thresholds matter: on and one step below differ somewhere


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_lightgbm_and_catboost_on_their_thresholds(kind):
    """LightGBM (``x <= t`` in float64) and CatBoost (right when ``x > border`` in float32)
    on every threshold and one step beside it, against the model's own predict."""
    X, y = _data(3)
    target = _labels(y, 3) if kind == "classifier" else y
    for make in (_lgb, _cb):
        model = make(kind).fit(X, target)
        ens = read_model(model)
        for j in range(X.shape[1]):
            t = np.unique(ens.threshold[ens.feature == j])
            t32 = t.astype(np.float32)
            with np.errstate(over="ignore"):
                near = [t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf), np.nextafter(t32, np.float32(-np.inf))]
            near += [np.array([0.0, -LGB_ZERO, LGB_ZERO, 1e-36, -1e-36, np.nan])]  # LightGBM reads |x| <= 1e-35 as 0
            values = np.unique(np.concatenate([v.astype(np.float64) for v in near]))
            values = values[~np.isinf(values)]
            expected = _brute(model, X.iloc[::12], j, values)
            scale = float(np.abs(expected).max())
            assert_allclose(_walked(model, X.iloc[::12], j, values), expected, rtol=0, atol=1e-9 * scale)


@pytest.mark.parametrize("seed", range(4))
def test_xgboost_rounding_bound_holds_and_is_needed(seed):
    """The stated bound (:func:`compute.trees.xgboost_read.xgboost_rounding`) holds on random
    models, data and objectives, on every row with one feature at every threshold; on large
    margins the float32 sums differ from the float64 walk by more than 1e-9 of the range
    (so the bound is needed), yet the bound stays within 1e-4 of the output range."""
    rng = np.random.default_rng(50 + seed)
    X, y = _data(int(rng.integers(1000)))
    objective = ["reg:squarederror", "binary:logistic", "multi:softprob", "count:poisson"][seed]
    target = {"binary:logistic": _labels(y, 2), "multi:softprob": _labels(y, 3)}.get(objective, y)
    if objective == "count:poisson":
        target = np.round(np.clip(y - 95, 0, None))
    kind = "classifier" if objective.startswith(("binary", "multi")) else "regressor"
    model = _xgb(kind, objective=objective, n_estimators=int(rng.integers(10, 50)), max_depth=int(rng.integers(2, 7)))
    model.fit(X, target)
    ens = read_model(model)
    gaps, spread = [], 0.0
    for j in range(X.shape[1]):
        t = np.unique(ens.threshold[ens.feature == j])
        values = np.unique(np.concatenate([t, np.nextafter(t.astype(np.float32), np.float32(np.inf)), [np.nan]]))
        expected = _brute(model, X.iloc[::6], j, values)
        gaps.append(float(np.nanmax(np.abs(_walked(model, X.iloc[::6], j, values) - expected))))
        spread = max(spread, float(np.ptp(expected)), float(np.abs(expected).max()))
    assert max(gaps) <= ens.rounding
    assert ens.rounding <= 1e-4 * spread
    if objective == "reg:squarederror":  # outputs near 100: float32 steps of 7.6e-6
        assert max(gaps) > 1e-9 * spread


@pytest.mark.filterwarnings("ignore:The argument 'eval_set' is deprecated")
def test_early_stopping_uses_the_best_iteration():
    """XGBoost's and LightGBM's predict use the best iteration after early stopping; so does
    the walk (fewer trees than were grown)."""
    lgb = pytest.importorskip("lightgbm")
    X, y = _data(4)
    fit, valid = slice(0, 200), slice(200, None)
    xgb_model = _xgb("regressor", n_estimators=50, learning_rate=0.9, early_stopping_rounds=2)
    xgb_model.fit(X[fit], y[fit], eval_set=[(X[valid], y[valid])], verbose=False)
    lgb_model = _lgb("regressor", n_estimators=50, learning_rate=0.9)
    lgb_model.fit(X[fit], y[fit], eval_set=[(X[valid], y[valid])], callbacks=[lgb.early_stopping(2, verbose=False)])
    for model, grown in ((xgb_model, xgb_model.get_booster().num_boosted_rounds()), (lgb_model, 50)):
        ens = read_model(model)
        assert ens.roots.size < grown
        walked = feature_profile(model, X, y, "a", engine="trees")
        ref = feature_profile(model, X, y, "a", engine="predict")
        scale = float(np.abs(ref.pred).max())
        assert_allclose(walked.pred, ref.pred, rtol=0, atol=1e-9 * scale + ens.rounding)


def _unsupported():
    """(model, data (None: read_model only), target, why) for options the engine does not read."""
    X, y = _data(0)
    xgb = pytest.importorskip("xgboost")
    pytest.importorskip("lightgbm")
    yield _xgb("regressor", booster="dart").fit(X, y), X, y, "dart"
    # categorical splits on a category past what the walk holds a bit for (2^14)
    wide = X.assign(d=X.d * 20000)
    cat = _xgb("regressor", enable_categorical=True, max_cat_to_onehot=1, feature_types=["q", "q", "q", "c"])
    yield cat.fit(wide, y), wide, y, "beyond 16,384"
    yield _lgb("regressor", linear_tree=True).fit(X.fillna(0), y), X.fillna(0), y, "linear trees"
    yield _lgb("regressor", zero_as_missing=True).fit(X, y), X, y, "zero as missing"

    def squared(y_true, raw):
        return raw - y_true, np.ones_like(raw)

    yield _lgb("regressor", objective=squared).fit(X, y), X, y, "custom objective"
    yield _xgb("regressor", objective=squared, n_estimators=3).fit(X, y), X, y, "custom objective"
    yield xgb.XGBRegressor(n_estimators=3, missing=-1.0, n_jobs=1).fit(X, y), X, y, "missing=-1.0"
    pytest.importorskip("catboost")
    coded = X.assign(d=X.d.astype(int))
    # read_model only: compute feeds CatBoost floats, which its categorical features refuse
    yield (
        _cb("regressor", cat_features=[3], iterations=5).fit(coded, y),
        None,
        y,
        r"categorical features \(d\) are computed",
    )
    yield _cb("regressor", grow_policy="Depthwise", iterations=5).fit(X, y), X, y, "non-symmetric trees"


def test_xgboost_categorical_splits_are_read_and_non_ascii_levels_fall_back():
    """A raw Booster with categorical splits reads as its predict (the walk's sets); a model
    fitted on pandas category columns of non-ASCII text falls back naming why (XGBoost 3.2
    stores such levels cut at character, not byte, offsets: the walk cannot code a frame as
    XGBoost does). tests/tree_xgboost_categorical_cases.py tests the walked cases."""
    xgb = pytest.importorskip("xgboost")
    X, y = _data(0)
    codes = X.assign(d=X.d.astype(int).astype("category"))
    booster = _xgb("regressor", enable_categorical=True, max_cat_to_onehot=1).fit(codes, y).get_booster()
    ens = read_model(booster)
    assert ens.categorical and ens.is_categorical(3)
    own = booster.predict(xgb.DMatrix(codes, enable_categorical=True))
    numbers = codes.assign(d=codes.d.cat.codes.astype(float)).to_numpy(dtype=float)
    sums = lookup_sums(ens, ens.compared(numbers), 0, numbers[:, :1])[:, 0, :]
    assert_allclose(ens.finish(sums), own, rtol=0, atol=1e-9 * float(np.abs(own).max()) + ens.rounding)
    text = X.assign(d=pd.Categorical(np.array(["été", "hiver", "ôde"])[X.d.astype(int)]))
    model = _xgb("regressor", enable_categorical=True, max_cat_to_onehot=1, n_estimators=5).fit(text, y)
    prof = feature_profile(model, text, y, "a", grid=4)
    assert prof.params["engine"] == "batched predict" and "non-ASCII" in prof.params["engine_reason"]
    with pytest.raises(ModelError, match="non-ASCII"):
        permutation_importance(model, text, y, n_repeats=1, engine="trees")


def test_unsupported_options_fall_back_or_raise_naming_why():
    """A model the engine cannot read takes the batched predict under "auto", the reason
    in the result; ``engine="trees"`` raises naming it."""
    from compute.trees import Unsupported

    for model, X, y, why in _unsupported():
        with pytest.raises(Unsupported, match=why):
            read_model(model)
        if X is None:
            continue
        with pytest.raises(ModelError, match=why):
            feature_profile(model, X, y, "a", engine="trees")
        with pytest.raises(ModelError, match=why):
            permutation_importance(model, X, y, n_repeats=1, engine="trees")
        prof = feature_profile(model, X, y, "a", grid=4)
        assert prof.params["engine"] == "batched predict" and why in prof.params["engine_reason"]
        res = permutation_importance(model, X, y, n_repeats=1)
        assert res.engine == "batched predict" and why in res.engine_reason


@pytest.mark.parametrize("classes", [0, 2, 3])
def test_lightgbm_categorical_splits_equal_its_own_predict(classes):
    """LightGBM's categorical splits (its bitsets; a 12-level feature with missing values and
    a 3-level one): every feature's curves and PFI equal its predict, and so do values it
    never saw: unseen, past its bitsets, fractional, between -1 and 0 (LightGBM casts them
    to category 0), negative and missing."""
    X, y = _data(8)
    target = _target(y, classes)
    model = _lgb("regressor" if classes == 0 else "classifier", min_data_per_group=5, cat_smooth=1)
    model.fit(X, target, categorical_feature=["b", "d"])
    ens = read_model(model)
    assert ens.categorical and ens.is_categorical(1) and not ens.is_categorical(0)
    odd = np.array([0.0, 1.0, 5.0, 11.0, 12.0, 31.0, 32.0, 64.0, 1e6, 2.7, -0.5, -0.99, -1.0, -3.0, np.nan])
    for j in range(4):
        assert_allclose(_walked(model, X.iloc[::7], j, odd), _brute(model, X.iloc[::7], j, odd), rtol=0, atol=1e-12)
    for feature in X.columns:
        walked = feature_profile(model, X, target, feature, grid=8, engine="trees")
        ref = feature_profile(model, X, target, feature, grid=8, engine="predict")
        assert_allclose(walked.pred, ref.pred, rtol=0, atol=1e-9, err_msg=feature)
    walked = permutation_importance(model, X, target, n_repeats=3, random_state=2, engine="trees")
    ref = permutation_importance(model, X, target, n_repeats=3, random_state=2, engine="predict")
    assert walked.engine == WALK
    assert_allclose(walked.repeats, ref.repeats, rtol=0, atol=1e-9 * max(ref.model_error, 1e-12))
    assert walked.importance["b"] > 0  # a feature the target reads: a comparison that could fail


def test_raw_boosters_are_read():
    """A raw ``xgboost.Booster`` / ``lightgbm.Booster`` reads as its own predict (margins
    through the objective's link, all iterations)."""
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    X, y = _data(5)
    label = _labels(y, 2)
    xb = xgb.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 1}, xgb.DMatrix(X, label), 20)
    lb = lgb.train({"objective": "regression", "num_leaves": 8, "verbose": -1, "num_threads": 1}, lgb.Dataset(X, y), 20)
    for booster, own in ((xb, xb.predict(xgb.DMatrix(X))), (lb, lb.predict(X))):
        ens = read_model(booster)
        sums = lookup_sums(ens, ens.compared(X.to_numpy(dtype=float)), 0, X.to_numpy()[:, :1])[:, 0, :]
        scale = float(np.abs(own).max())
        assert_allclose(ens.finish(sums), own, rtol=0, atol=1e-9 * scale + ens.rounding)
    # XGBoost >= 2 stores binary:logistic's base score as a probability: the margin is its logit
    ens = read_model(xb)
    p = ens.finish(lookup_sums(ens, ens.compared(X.to_numpy()), 0, X.to_numpy()[:, :1])[:, 0, :])
    margin = xb.predict(xgb.DMatrix(X), output_margin=True)
    assert_allclose(np.log(p / (1 - p)), margin, rtol=0, atol=1e-5 * float(np.abs(margin).max()))


@pytest.mark.parametrize("library", ["xgboost", "lightgbm", "catboost"])
def test_models_loaded_from_files_take_the_walk(tmp_path, library):
    """The dashboard's loaded booster files (:class:`dashboard.loading.boosters.BoosterModel`)
    offer their booster (``tree_source``): the walk is used and equals their predict; a file
    with categorical columns falls back."""
    from dashboard.loading.boosters import load_booster

    # LightGBM writes "inf" thresholds for some splits on missing values, which the file
    # check (dashboard.loading.booster_files) refuses today: its files here have none
    X, y = _data(6, missing=library != "lightgbm")
    for classes in (0, 3):
        target = _target(y, classes)
        if library == "xgboost":
            model, suffix = _xgb("classifier" if classes else "regressor").fit(X, target), ".json"
            path = tmp_path / f"model{classes}{suffix}"
            model.save_model(path)
        elif library == "lightgbm":
            model, suffix = _lgb("classifier" if classes else "regressor").fit(X, target), ".txt"
            path = tmp_path / f"model{classes}{suffix}"
            model.booster_.save_model(path)
        else:
            model, suffix = _cb("classifier" if classes else "regressor").fit(X, target), ".cbm"
            path = tmp_path / f"model{classes}{suffix}"
            model.save_model(str(path))
        loaded = load_booster(str(path), path.name, suffix, classes=list(range(classes)) if classes else None)
        assert loaded.tree_source()[0] == library
        ens = read_model(loaded)
        for feature in ("b", "c"):
            walked = feature_profile(loaded, X, target, feature, engine="trees")
            ref = feature_profile(loaded, X, target, feature, engine="predict")
            assert walked.params["engine"] == WALK
            scale = max(float(np.ptp(ref.pred)), float(np.abs(ref.pred).max()))
            assert_allclose(walked.pred, ref.pred, rtol=0, atol=1e-9 * scale + ens.rounding)
            own = model.predict_proba(X) if classes else model.predict(X)
            col = own[:, -1] if classes else own
            assert_allclose(ref.base_pred, col, rtol=0, atol=1e-6 * scale)  # the file is the model
        pfi = permutation_importance(loaded, X, target, n_repeats=2)
        assert pfi.engine == WALK


def test_a_loaded_file_with_categorical_columns_falls_back():
    """A BoosterModel whose columns are coded categories is not walked (the walk compares
    numbers only): the reason says so."""
    from dashboard.loading.boosters import BoosterModel

    X, y = _data(7, missing=False)
    lgb = pytest.importorskip("lightgbm")
    model = _lgb("regressor").fit(X, y)
    wrapped = BoosterModel(
        library="lightgbm",
        name="coded.txt",
        columns=list(X.columns),
        width=4,
        categories={3: None},
        task="regression",
        n_classes=0,
        objective="regression",
        version="4",
        predict_raw=lambda m, rows: model.booster_.predict(m._matrix(rows)),
        native={"model": model.booster_, "task": "regression", "objective": "regression"},
    )
    assert isinstance(model.booster_, lgb.Booster)
    prof = feature_profile(wrapped, X, y, "a", grid=4)
    assert prof.params["engine"] == "batched predict" and "categorical columns" in prof.params["engine_reason"]


OBJECTIVES = [
    ("xgboost", {"objective": "binary:logitraw"}, 2),  # the file's loader turns margins into probabilities
    ("xgboost", {"objective": "multi:softmax"}, 3),
    ("xgboost", {"objective": "reg:gamma"}, -1),
    ("xgboost", {"objective": "reg:absoluteerror"}, 0),
    ("lightgbm", {"objective": "multiclassova"}, 3),
    ("lightgbm", {"objective": "tweedie"}, -1),
    ("lightgbm", {"objective": "huber"}, 0),
    ("catboost", {"loss_function": "Poisson"}, -1),
    ("catboost", {"loss_function": "MultiClassOneVsAll"}, 3),
]


@pytest.mark.parametrize(("library", "options", "classes"), OBJECTIVES, ids=lambda v: str(v))
def test_other_objectives_through_files(tmp_path, library, options, classes):
    """More objectives' links (logit margins, softmax of margins, exp, one-vs-all sigmoids),
    through the dashboard's loaded files: the walk is used under "auto" and equals predict."""
    from dashboard.loading.boosters import load_booster

    X, y = _data(8, missing=library != "lightgbm")
    target = _target(y, classes) + (1 if options.get("objective") == "reg:gamma" else 0)
    kind = "classifier" if classes > 0 else "regressor"
    if library == "xgboost":
        model, suffix = _xgb(kind, n_estimators=10, **options).fit(X, target), ".json"
        save = model.save_model
    elif library == "lightgbm":
        model, suffix = _lgb(kind, n_estimators=10, **options).fit(X, target), ".txt"
        save = model.booster_.save_model
    else:
        model, suffix = _cb(kind, iterations=10, **options).fit(X, target), ".cbm"
        save = model.save_model
    path = tmp_path / f"model{suffix}"
    save(str(path))
    loaded = load_booster(str(path), path.name, suffix, classes=list(range(classes)) if classes > 0 else None)
    ens = read_model(loaded)
    walked = feature_profile(loaded, X, None, "b")
    ref = feature_profile(loaded, X, None, "b", engine="predict")
    assert walked.params["engine"] == WALK, walked.params["engine_reason"]
    scale = max(float(np.ptp(ref.pred)), float(np.abs(ref.pred).max()))
    assert_allclose(walked.pred, ref.pred, rtol=0, atol=1e-9 * scale + ens.rounding)


@pytest.mark.parametrize("nan_mode", ["Min", "Max", None])
def test_catboost_missing_values_follow_nan_mode(nan_mode):
    """CatBoost sends a missing value left under nan_mode Min (and when training saw none:
    "AsIs", the comparison with NaN is false), right under Max."""
    X, y = _data(9, missing=nan_mode is not None)
    model = _cb("regressor", iterations=10, **({"nan_mode": nan_mode} if nan_mode else {})).fit(X, y)
    values = np.array([np.nan, -1e30, -1.0, 0.0, 1.0, 1e30])
    for j in range(X.shape[1]):
        expected = _brute(model, X.iloc[::15], j, values)
        assert_allclose(_walked(model, X.iloc[::15], j, values), expected, rtol=0, atol=1e-9 * np.abs(expected).max())
