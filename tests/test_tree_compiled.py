"""The compiled walk (numba, ``compute.trees.compiled``) against the NumPy walk it replaces
(``compute.trees.walk.*_numpy``, the reference kept for machines without numba): the same
sums for every model kind, on missing values, values on and beside the thresholds, several
outputs and blocks of rows; and ``engine="auto"`` choosing by what is compiled."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeRegressor

from compute import permutation_importance
from compute.trees import blocks, read_model, walk

if walk.COMPILED:
    from compute.trees import compiled

pytestmark = pytest.mark.skipif(not walk.COMPILED, reason="numba is not installed")

N = 300


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [rng.integers(0, 8, N), rng.normal(size=N).round(1), rng.integers(0, 3, N), rng.normal(size=N)]
    ).astype(float)
    y = 10 + 2 * X[:, 0] - 3 * X[:, 1] * (X[:, 2] == 1) + np.sin(3 * X[:, 3]) + rng.normal(size=N)
    X[rng.random(N) < 0.12, 1] = np.nan
    X[rng.random(N) < 0.08, 0] = np.nan
    return X, y


def _classes(y: np.ndarray, k: int) -> np.ndarray:
    return np.digitize(y, np.quantile(y, np.linspace(0, 1, k + 1)[1:-1]))


MODELS = {
    "tree": lambda X, y: DecisionTreeRegressor(max_depth=7, random_state=0).fit(X, y),
    "forest": lambda X, y: RandomForestRegressor(12, max_depth=8, random_state=0).fit(X, y),
    "extra trees 3-class": lambda X, y: ExtraTreesClassifier(10, max_depth=6, random_state=0).fit(X, _classes(y, 3)),
    "gradient boosting 3-class": lambda X, y: GradientBoostingClassifier(n_estimators=8, random_state=0).fit(
        X, _classes(y, 3)
    ),
    "hist gradient boosting": lambda X, y: HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(X, y),
    "hist gradient boosting binary": lambda X, y: HistGradientBoostingClassifier(max_iter=15, random_state=0).fit(
        X, _classes(y, 2)
    ),
}


def _model_without_missing(name: str, X: np.ndarray, y: np.ndarray):
    if name.startswith(("tree", "forest", "extra", "gradient boosting")):
        X = np.nan_to_num(X, nan=-1.0)  # scikit-learn's older trees: missing values learned as a value
    return MODELS[name](X, y), X


def _probe_values(ens, X: np.ndarray, j: int) -> np.ndarray:
    """Every threshold on j, one float32 step either side, the data's values, a missing one."""
    thresholds, _ = ens.bins(j)
    t32 = thresholds.astype(np.float32)
    near = np.concatenate([thresholds, np.nextafter(t32, -np.inf), np.nextafter(t32, np.inf)]).astype(float)
    return np.concatenate([near[:60], X[:20, j], [np.nan, thresholds.min() - 1, thresholds.max() + 1]])


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("j", [0, 1, 3])
def test_compiled_curves_and_lookups_equal_the_numpy_walk(name, j):
    X, y = _data(1)
    model, X = _model_without_missing(name, X, y)
    ens = read_model(model)
    Xc = ens.compared(X)
    values = _probe_values(ens, X, j)
    numpy_sums = walk.curve_sums_numpy(ens, Xc, j, values)
    fast = compiled.curve_sums(ens, Xc, j, values)
    scale = max(1.0, float(np.abs(numpy_sums).max()))
    assert fast.shape == numpy_sums.shape == (N, values.size, ens.n_outputs)
    assert_allclose(fast, numpy_sums, rtol=0, atol=1e-12 * scale)
    # each row's own queries (PFI's donors): other rows' values, missing ones included
    donors = np.random.default_rng(2).integers(0, N, (N, 7))
    queries = X[donors, j]
    assert_allclose(
        compiled.lookup_sums(ens, Xc, j, queries),
        walk.lookup_sums_numpy(ens, Xc, j, queries),
        rtol=0,
        atol=1e-12 * scale,
    )


def test_the_rows_own_values_give_the_models_own_prediction():
    """A lookup at each row's own value of j is the model's own prediction (the sum of
    leaves its plain predict reaches): a kernel that sent a missing value or a tie the wrong
    way, or dropped a side of a cut, would differ."""
    X, y = _data(3)
    model = HistGradientBoostingRegressor(max_iter=30, random_state=0).fit(X, y)
    ens = read_model(model)
    for j in range(X.shape[1]):
        sums = compiled.lookup_sums(ens, ens.compared(X), j, X[:, j : j + 1])
        assert_allclose(ens.finish(sums[:, 0, :]), model.predict(X), rtol=0, atol=1e-9)


def test_blocks_of_rows_give_the_same_sums(monkeypatch):
    """Rows go through the trees in blocks: a block border must not lose or repeat a row."""
    X, y = _data(4)
    ens = read_model(MODELS["forest"](np.nan_to_num(X, nan=-1.0), y))
    Xc = ens.compared(np.nan_to_num(X, nan=-1.0))
    grid = np.linspace(-2, 9, 13)
    whole = compiled.curve_sums(ens, Xc, 0, grid)
    monkeypatch.setattr(blocks, "BLOCK_FLOATS", 13 * 17)  # 17 rows per block: many blocks, a ragged last
    assert_allclose(compiled.curve_sums(ens, Xc, 0, grid), whole, rtol=0, atol=1e-12)
    queries = Xc[np.random.default_rng(0).integers(0, N, (N, 3)), 0]
    monkeypatch.setattr(blocks, "BLOCK_FLOATS", 3 * 17)
    blocked = compiled.lookup_sums(ens, Xc, 0, queries)
    monkeypatch.setattr(blocks, "BLOCK_FLOATS", 10**9)
    assert_allclose(blocked, compiled.lookup_sums(ens, Xc, 0, queries), rtol=0, atol=1e-12)


def test_forest_pfi_takes_the_walk_only_when_compiled(monkeypatch):
    """Compiled, a forest's PFI walks (0.2-0.4x the raw predict, benchmarks/speed_trees.py);
    without numba the NumPy walk is slower than the batched predict there, so ``auto`` takes
    the predict and says why. Both give the same importances."""
    X, y = _data(5)
    frame = pd.DataFrame(np.nan_to_num(X, nan=-1.0), columns=list("abcd"))
    model = RandomForestRegressor(10, max_depth=6, random_state=0).fit(frame, y)
    walked = permutation_importance(model, frame, y, n_repeats=4, random_state=0)
    assert walked.engine == "exact tree walk"
    monkeypatch.setattr(walk, "COMPILED", False)
    predicted = permutation_importance(model, frame, y, n_repeats=4, random_state=0)
    assert predicted.engine == "batched predict"
    assert "slower" in (predicted.engine_reason or "")
    assert_allclose(walked.importance.to_numpy(), predicted.importance.to_numpy(), rtol=1e-9, atol=1e-12)


def test_without_numba_the_numpy_walk_computes(monkeypatch):
    X, y = _data(6)
    ens = read_model(MODELS["hist gradient boosting"](X, y))
    grid = np.array([0.0, 2.5, np.nan])
    monkeypatch.setattr(walk, "COMPILED", False)
    called = []
    monkeypatch.setattr(compiled, "curve_sums", lambda *a: called.append(a))
    out = walk.curve_sums(ens, ens.compared(X), 0, grid)
    assert not called and out.shape == (N, 3, 1)


def test_import_compute_does_not_import_numba():
    """numba (0.3 s) is imported by the walk's first use, not by ``import compute``."""
    import subprocess
    import sys

    code = "import sys, compute; print('numba' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )


def _pair_brute(model, X: np.ndarray, j: int, k: int, values: np.ndarray) -> np.ndarray:
    """Each row with j and k set to each query pair, predicted by the model (rows x queries)."""
    n, q = X.shape[0], values.shape[1]
    block = np.repeat(X, q, axis=0)
    block[:, j] = np.tile(values[0], n)
    block[:, k] = np.tile(values[1], n)
    out = model.predict_proba(block) if hasattr(model, "predict_proba") else model.predict(block)
    return np.asarray(out, dtype=float).reshape(n, q, -1)


@pytest.mark.parametrize("name", ["forest", "gradient boosting 3-class", "hist gradient boosting"])
def test_pair_sums_equal_the_models_predict_with_two_features_set(name):
    """The walk with two features free (H of a pair): every query pair, including values on
    the thresholds, missing values and pairs no row holds, is the model's own prediction."""
    X, y = _data(7)
    model, X = _model_without_missing(name, X, y)
    ens = read_model(model)
    j, k = 0, 1
    rng = np.random.default_rng(0)
    tj, tk = ens.bins(j)[0], ens.bins(k)[0]
    a = np.concatenate([np.resize(tj, 15), X[:10, j], [np.nan, np.nan, tj.min() - 1]])
    b = np.concatenate([np.resize(tk[rng.permutation(tk.size)], 15), X[:10, k], [np.nan, 0.3, np.nan]])
    values = np.vstack([a, b])
    if not np.isnan(X).any():  # a model trained without missing values refuses them
        values = np.nan_to_num(values, nan=-1.0)
    Xs = X[:60]
    sums = compiled.pair_sums(ens, ens.compared(Xs), j, k, values)
    walked = ens.finish(sums.reshape(-1, ens.n_outputs))
    brute = _pair_brute(model, Xs, j, k, values).reshape(walked.shape[0], -1)
    assert_allclose(np.asarray(walked, dtype=float).reshape(brute.shape), brute, rtol=0, atol=1e-9)


def test_h_statistics_walk_equals_the_batched_predict():
    """Friedman's H (per feature and per pair, and the pairs' 2-D partial dependence) from
    the walk equals the batched predict's; the result says which engine ran."""
    from compute import interaction_strength

    X, y = _data(8)
    frame = pd.DataFrame(X, columns=list("abcd"))
    model = HistGradientBoostingRegressor(max_iter=25, random_state=0).fit(frame, y)
    walked = interaction_strength(model, frame, n_obs=120, grid_size=6, engine="trees")
    predicted = interaction_strength(model, frame, n_obs=120, grid_size=6, engine="predict")
    assert (walked.engine, predicted.engine) == ("exact tree walk", "batched predict")
    assert walked.model_rows == 120 < predicted.model_rows  # the model is called on the rows themselves only
    assert_allclose(walked.overall.to_numpy(), predicted.overall.to_numpy(), rtol=1e-9, atol=1e-12)
    assert len(walked.pairs) == 6
    assert_allclose(
        walked.pairs[["h2", "h"]].to_numpy(), predicted.pairs[["h2", "h"]].to_numpy(), rtol=1e-9, atol=1e-12
    )
    for a, b in walked.pairs[["feature_1", "feature_2"]].to_numpy():
        assert_allclose(walked.pd2(a, b).to_numpy(), predicted.pd2(a, b).to_numpy(), rtol=0, atol=1e-9)


def test_conditional_importance_takes_the_engine():
    """cs-PFI (its marginal and conditional permutations) from the walk equals the batched
    predict's, subgroup by subgroup; the results say which engine ran."""
    from compute import conditional_importance

    X, y = _data(9)
    frame = pd.DataFrame(np.nan_to_num(X, nan=-1.0), columns=list("abcd"))
    frame["e"] = frame["a"] + np.random.default_rng(1).normal(size=N)  # a feature another predicts
    model = RandomForestRegressor(15, max_depth=7, random_state=0).fit(frame, y)
    walked = conditional_importance(model, frame, y, n_repeats=3, max_depth=2, engine="trees")
    predicted = conditional_importance(model, frame, y, n_repeats=3, max_depth=2, engine="predict")
    assert walked.conditional.engine == "exact tree walk" and predicted.conditional.engine == "batched predict"
    assert_allclose(walked.importance.to_numpy(), predicted.importance.to_numpy(), rtol=1e-9, atol=1e-12)
    assert_allclose(
        walked.marginal.importance.to_numpy(), predicted.marginal.importance.to_numpy(), rtol=1e-9, atol=1e-12
    )
    assert_allclose(
        walked.subgroups["e"].select_dtypes("number").to_numpy(),
        predicted.subgroups["e"].select_dtypes("number").to_numpy(),
        rtol=1e-9,
        atol=1e-12,
    )


def test_a_numba_that_cannot_compile_turns_the_compiled_walk_off(monkeypatch):
    """warm() in a server whose numba fails: the walk goes on in NumPy, saying why."""

    def broken():
        raise RuntimeError("LLVM is missing")

    monkeypatch.setattr(compiled, "warm", broken)
    monkeypatch.setattr(walk, "COMPILED", True)
    said = walk.warm()
    assert not walk.COMPILED and "LLVM is missing" in said and "NumPy walk" in said
    X, y = _data(10)
    ens = read_model(MODELS["hist gradient boosting"](X, y))
    assert walk.curve_sums(ens, ens.compared(X), 0, np.array([0.5])).shape == (N, 1, 1)
