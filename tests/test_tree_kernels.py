"""The numeric kernels of the tree engine (``compute/trees/kernels.py``): the same sums as
the general compiled walk (``compiled.NUMERIC`` off) and the NumPy walk, on scikit-learn
models here, on XGBoost in a process of its own (``tests/tree_kernels_cases.py``: this
process never imports a booster library)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.ensemble import (
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestRegressor,
)

from compute.trees import compiled, read_model, walk

pytest.importorskip("numba")

CASES = Path(__file__).with_name("tree_kernels_cases.py")
N = 300


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, 6, N), rng.normal(size=N), rng.integers(0, 3, N), rng.normal(size=N)])
    y = 3 * X[:, 0] + np.sin(3 * X[:, 1]) + 0.2 * X[:, 2] * X[:, 3] + rng.normal(size=N)
    return X.astype(float), y


MODELS = {
    "hgb regressor": lambda X, y: HistGradientBoostingRegressor(max_iter=25, max_leaf_nodes=6).fit(X, y),
    "hgb 3-class": lambda X, y: HistGradientBoostingClassifier(max_iter=8).fit(X, np.digitize(y, [5, 10])),
    "forest": lambda X, y: RandomForestRegressor(15, max_depth=6, random_state=0).fit(np.nan_to_num(X, nan=-1), y),
    "gradient boosting binary": lambda X, y: GradientBoostingClassifier(n_estimators=12, max_depth=2).fit(
        np.nan_to_num(X, nan=-1), y > np.median(y)
    ),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_the_kernels_equal_the_general_walk_and_the_numpy_walk(name, monkeypatch):
    """Curves (a grid with a missing value and values off every threshold) and per-row
    lookups (missing donors too), on features some trees split on and others not."""
    X, y = _data(1)
    X[np.random.default_rng(2).random(X.shape) < 0.08] = np.nan
    model = MODELS[name](X, y)
    if name in ("forest", "gradient boosting binary"):
        X = np.nan_to_num(X, nan=-1)
    ens = read_model(model)
    Xc = ens.compared(X)
    donors = np.random.default_rng(3).integers(0, N, (N, 5))
    for j in range(X.shape[1]):
        grid = np.concatenate([np.linspace(-3, 7, 17), [np.nan]])
        queries = X[donors, j]
        fast = compiled.curve_sums(ens, Xc, j, grid), compiled.lookup_sums(ens, Xc, j, queries)
        reference = walk.curve_sums_numpy(ens, Xc, j, grid), walk.lookup_sums_numpy(ens, Xc, j, queries)
        monkeypatch.setattr(compiled, "NUMERIC", False)
        general = compiled.curve_sums(ens, Xc, j, grid), compiled.lookup_sums(ens, Xc, j, queries)
        monkeypatch.setattr(compiled, "NUMERIC", True)
        for got, want, numpy_sums in zip(fast, general, reference):
            scale = max(1.0, float(np.abs(want).max()))
            assert_allclose(got, want, rtol=0, atol=1e-12 * scale, err_msg=f"{name} feature {j}")
            assert_allclose(got, numpy_sums, rtol=0, atol=1e-12 * scale, err_msg=f"{name} feature {j}")


def test_the_xgboost_cases_in_their_own_process():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(CASES)],
        cwd=CASES.parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = done.stdout[-6000:] + done.stderr[-2000:]
    if "xgboost" in done.stdout and " skipped" in done.stdout and "passed" not in done.stdout:
        pytest.skip("xgboost is not installed")
    assert done.returncode == 0, tail
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed is not None and int(passed.group(1)) >= 10, tail
