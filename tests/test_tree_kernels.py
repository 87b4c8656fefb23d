"""The numeric kernels of the tree engine (``compute/trees/kernels.py``): the same sums as
the general compiled walk (``compiled.NUMERIC`` off) and the NumPy walk, on scikit-learn
models here, on XGBoost in a process of its own (``tests/tree_kernels_cases.py``: this
process never imports a booster library)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
from helpers.cases import run_cases
from helpers.random_trees import brute_force, random_tree
from numpy.testing import assert_allclose
from sklearn.ensemble import (
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestRegressor,
)

from compute.trees import blocks, compiled, kernels, read_model, walk
from compute.trees.ensemble import join_trees

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
    if importlib.util.find_spec("xgboost") is None:  # looked up, never imported here
        pytest.skip("xgboost is not installed")
    run_cases(CASES, at_least=10)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("missing", [False, True])
def test_the_kernels_equal_brute_force_on_random_ensembles(seed, missing):
    """Random ensembles (trees of depth 1 up to the kernels' lookup limit, uneven, missing
    directions either way) against a predict of every materialised row: curves on a grid
    with a missing value and values on and off the thresholds, lookups of donors (missing
    ones among them); rows with missing values (their descent tests them) and without
    (the descent that skips the test)."""
    rng = np.random.default_rng(seed)
    p, n, levels = 3, 40, np.arange(-2.0, 2.5, 0.5)
    depth = kernels.MAX_DEPTH["lookups"]
    trees = [random_tree(rng, int(rng.integers(1, depth + 1)), p, levels) for _ in range(12)]
    ens = join_trees(trees, name="random", n_outputs=1, float32=False, finish=lambda s: s)
    assert kernels.takes(ens, "lookups") and compiled.NUMERIC
    X = rng.choice(np.append(levels, [-0.3, 0.7, 3.0]), size=(n, p))
    if missing:
        X[rng.random(X.shape) < 0.15] = np.nan
    grid = np.concatenate([levels[::2], [np.nan, -9.0, 0.2, 9.0]])
    donors = rng.integers(0, n, (n, 7))
    for j in range(p):
        curves = compiled.curve_sums(ens, X, j, grid)[:, :, 0]
        looked = compiled.lookup_sums(ens, X, j, X[donors, j])[:, :, 0]
        for g, value in enumerate(grid):
            rows = X.copy()
            rows[:, j] = value
            assert_allclose(curves[:, g], brute_force(ens, rows), rtol=0, atol=1e-12, err_msg=f"curve {j} {g}")
        for r in range(donors.shape[1]):
            rows = X.copy()
            rows[:, j] = X[donors[:, r], j]
            assert_allclose(looked[:, r], brute_force(ens, rows), rtol=0, atol=1e-12, err_msg=f"lookup {j} {r}")


@pytest.mark.parametrize("numeric", [True, False])
def test_blocks_on_threads_give_the_numbers_of_one_thread(numeric, monkeypatch):
    """The walk's blocks of rows run on threads (:func:`blocks.each_block`): small blocks
    so the 300 rows make many, on three threads, give every kernel's sums (curves, lookups,
    pairs; the numeric kernels and the general ones) bit for bit as on one thread."""
    X, y = _data(4)
    X[np.random.default_rng(5).random(X.shape) < 0.05] = np.nan
    ens = read_model(MODELS["hgb 3-class"](X, y))
    Xc = ens.compared(X)
    grid = np.concatenate([np.linspace(-3, 7, 9), [np.nan]])
    queries = X[np.random.default_rng(6).integers(0, N, (N, 4)), 1]
    pairs = np.array([[0.0, 2.0, np.nan, 5.0], [-1.0, np.nan, 0.5, 2.0]])
    monkeypatch.setattr(compiled, "NUMERIC", numeric)
    monkeypatch.setattr(compiled, "KERNEL_ROWS", 32)
    monkeypatch.setattr(blocks, "BLOCK_FLOATS", 700)
    pools = []

    class Recorded(blocks.ThreadPoolExecutor):
        def __init__(self, workers, **options):
            pools.append(workers)
            super().__init__(workers, **options)

    monkeypatch.setattr(blocks, "ThreadPoolExecutor", Recorded)
    monkeypatch.setattr(blocks, "_POOLS", {})

    def every_sum():
        return [
            compiled.curve_sums(ens, Xc, 1, grid),
            compiled.lookup_sums(ens, Xc, 1, queries),
            compiled.pair_sums(ens, Xc, 1, 3, pairs),
        ]

    monkeypatch.setattr(blocks, "THREADS", 1)
    one = every_sum()
    assert pools == []
    monkeypatch.setattr(blocks, "THREADS", 3)
    threaded = every_sum()
    assert pools == [3]  # one pool of three threads, kept for the three walks
    for got, want in zip(threaded, one):
        np.testing.assert_array_equal(got, want)
    blocks._POOLS[3].shutdown()


def _child_sums(ens, Xc, queries, out) -> None:
    out.put(compiled.lookup_sums(ens, Xc, 1, queries))


def test_a_forked_child_walks_on_threads_of_its_own(monkeypatch):
    """The walk keeps its pool of threads between calls; a process forked after a walk (a
    dashboard job) has none of its parent's threads, so it starts its own: the same sums,
    no hang."""
    import multiprocessing

    X, y = _data(4)
    ens = read_model(MODELS["hgb 3-class"](X, y))
    Xc = ens.compared(X)
    queries = X[np.random.default_rng(6).integers(0, N, (N, 4)), 1]
    monkeypatch.setattr(blocks, "THREADS", 2)
    monkeypatch.setattr(compiled, "KERNEL_ROWS", 32)
    monkeypatch.setattr(blocks, "BLOCK_FLOATS", 700)
    here = compiled.lookup_sums(ens, Xc, 1, queries)
    assert 2 in blocks._POOLS  # the parent's pool, alive when it forks
    fork = multiprocessing.get_context("fork")
    out = fork.Queue()
    child = fork.Process(target=_child_sums, args=(ens, Xc, queries, out))
    child.start()
    try:
        np.testing.assert_array_equal(out.get(timeout=60), here)
    finally:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


def test_the_walk_takes_as_many_threads_as_openmp(monkeypatch):
    monkeypatch.setattr(blocks, "THREADS", None)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert blocks.threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert blocks.threads() == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert blocks.threads() == min(cores, blocks.MAX_THREADS)
