"""Curves of small trees from bit masks (``compute/trees/masks.py``) against a predict of
every materialised row, and against the depth-first walk of ``compute/trees/kernels.py``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.random_trees import brute_force, random_tree
from numpy.testing import assert_allclose
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor

from compute import feature_profile
from compute.prediction import Predictor
from compute.trees import compiled, masks
from compute.trees.engine import CHECK_ROWS
from compute.trees.ensemble import join_trees

pytest.importorskip("numba")

LEVELS = np.arange(-2.0, 2.5, 0.5)


def _tree(rng, depth: int, p: int, full: bool) -> dict:
    """A random tree down to ``depth`` (``full``: every branch that deep, 2**depth leaves;
    else some stop early, below the root)."""
    return random_tree(rng, depth, p, LEVELS, stop=(0.0, 1) if full else (0.25, 1))


def _ensemble(trees: list[dict]):
    return join_trees(trees, name="random", n_outputs=1, float32=False, finish=lambda s: s)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("missing", [False, True])
def test_mask_curves_and_lookups_equal_brute_force_on_random_small_trees(seed, missing, monkeypatch):
    """Random ensembles of trees of 1 to 64 leaves (two full trees of depth 6: a row in the
    rightmost leaf is bit 63, the int64's sign), on a grid with a missing value, values on
    and off the thresholds and outside them, in several blocks of rows: every curve point
    and every lookup of a donor's value (PFI; missing donors too) equals a predict of the
    materialised row, and the depth-first walk's sums."""
    rng = np.random.default_rng(seed)
    p, n = 3, 90
    trees = [_tree(rng, 6, p, full=True) for _ in range(2)]
    trees += [_tree(rng, int(rng.integers(0, 7)), p, full=False) for _ in range(10)]
    ens = _ensemble(trees)
    assert masks.takes(ens)
    X = rng.choice(np.append(LEVELS, [-0.3, 0.7, 3.0]), size=(n, p))
    if missing:
        X[rng.random(X.shape) < 0.15] = np.nan
    grid = np.concatenate([LEVELS[::2], [np.nan, -9.0, 0.2, 9.0, 2.0]])
    monkeypatch.setattr(masks, "ROWS", 32)  # three blocks of rows
    monkeypatch.setattr(masks, "LOOKUP_LEAVES", 64)  # lookups take the masks up to 64 leaves too
    for j in range(p):
        curves = compiled.curve_sums(ens, X, j, grid)[:, :, 0]
        for g, value in enumerate(grid):
            rows = X.copy()
            rows[:, j] = value
            assert_allclose(curves[:, g], brute_force(ens, rows), rtol=0, atol=1e-12, err_msg=f"curve {j} {g}")
        donors = rng.integers(0, n, (n, 7))
        looked = compiled.lookup_sums(ens, X, j, X[donors, j])[:, :, 0]
        for r in range(donors.shape[1]):
            rows = X.copy()
            rows[:, j] = X[donors[:, r], j]
            assert_allclose(looked[:, r], brute_force(ens, rows), rtol=0, atol=1e-12, err_msg=f"lookup {j} {r}")
        monkeypatch.setattr(masks, "ENABLED", False)
        walked = compiled.curve_sums(ens, X, j, grid)[:, :, 0]
        walked_lookups = compiled.lookup_sums(ens, X, j, X[donors, j])[:, :, 0]
        monkeypatch.setattr(masks, "ENABLED", True)
        assert_allclose(curves, walked, rtol=0, atol=1e-12)
        assert_allclose(looked, walked_lookups, rtol=0, atol=1e-12)


def test_a_tree_of_65_leaves_takes_the_walk(monkeypatch):
    """One tree above 64 leaves sends the whole ensemble to the depth-first walk (its
    leaves would not fit the int64's bits), whose curves are right."""
    rng = np.random.default_rng(7)
    big = _tree(rng, 7, 2, full=True)  # 128 leaves
    ens = _ensemble([big, _tree(rng, 3, 2, full=True)])
    assert not masks.takes(ens)
    assert masks.takes(_ensemble([_tree(rng, 6, 2, full=True)]))
    called = []
    monkeypatch.setattr(masks, "curve_sums", lambda *args: called.append(args))
    X = rng.choice(LEVELS, size=(20, 2))
    grid = np.array([-1.0, 0.3, 2.0])
    curves = compiled.curve_sums(ens, X, 0, grid)[:, :, 0]
    assert called == []
    for g, value in enumerate(grid):
        rows = X.copy()
        rows[:, 0] = value
        assert_allclose(curves[:, g], brute_force(ens, rows), rtol=0, atol=1e-12)


def test_the_lowest_bit_table():
    """``LOWEST`` names the lowest set bit of every int64 mask, bit 63 (negative) too."""
    rng = np.random.default_rng(0)
    for bit in range(64):
        for _ in range(5):
            high = int(rng.integers(0, 2**63 - 1)) << (bit + 1) if bit < 63 else 0
            m = np.int64(np.uint64(((1 << bit) | high) % (1 << 64)).view(np.int64))
            low = int(m) & -int(m)
            assert masks.LOWEST[(((low * masks.DE_BRUIJN) % (1 << 64)) >> 58) & 63] == bit


@pytest.mark.parametrize("seed", range(4))
def test_own_sums_from_the_same_pass_equalbrute_force(seed, monkeypatch):
    """``curve_and_own_sums``: each row's sums at its own values (missing ones too), from the
    masks' pass, equal a predict of the row; and the curves equal ``curve_sums``'. Without the
    masks (a tree above 64 leaves) the own sums come from a lookup, equally right."""
    rng = np.random.default_rng(seed)
    p, n = 3, 70
    trees = [_tree(rng, 6, p, full=True)] + [_tree(rng, int(rng.integers(0, 7)), p, full=False) for _ in range(8)]
    X = rng.choice(np.append(LEVELS, [-0.3, 0.7, 3.0]), size=(n, p))
    X[rng.random(X.shape) < 0.15] = np.nan
    grid = np.concatenate([LEVELS[::3], [np.nan, 0.2]])
    monkeypatch.setattr(masks, "ROWS", 32)
    for ens in (_ensemble(trees), _ensemble([*trees, _tree(rng, 7, p, full=True)])):
        for j in range(p):
            curves, own = compiled.curve_and_own_sums(ens, X, j, grid)
            assert_allclose(own[:, 0], brute_force(ens, X), rtol=0, atol=1e-12)
            assert_allclose(curves, compiled.curve_sums(ens, X, j, grid), rtol=0, atol=1e-12)


def test_rows_not_yet_rounded_are_rounded_to_float32_in_the_pass(monkeypatch):
    """``raw=True`` (the model's input, not yet compared): a float32 ensemble's rows are
    rounded as each block is copied, so the sums equal those of the rounded rows and a predict
    of them; values a hair above a threshold that round onto it (float64 sends them right,
    float32 left) make the difference, and the rows may come in either memory order. An
    ensemble above 64 leaves rounds them before its walk."""
    rng = np.random.default_rng(11)
    p, n = 3, 80
    trees = [_tree(rng, 6, p, full=True) for _ in range(3)]
    X = rng.choice(LEVELS, size=(n, p)) + 2.0**-40  # each a hair above a level: float32 rounds it back
    X[rng.random(X.shape) < 0.1] = np.nan
    grid = np.concatenate([LEVELS[::2] + 2.0**-40, [np.nan]])
    monkeypatch.setattr(masks, "ROWS", 32)
    for more in ([], [_tree(rng, 7, p, full=True)]):
        ens = join_trees(trees + more, name="random", n_outputs=1, float32=True, finish=lambda s: s)
        assert masks.takes(ens) == (not more)
        rounded = ens.compared(X)
        for j in range(p):
            want_curves, want_own = compiled.curve_and_own_sums(ens, rounded, j, grid)
            assert_allclose(want_own[:, 0], brute_force(ens, rounded), rtol=0, atol=1e-12)
            for rows in (X, np.asfortranarray(X)):
                curves, own = compiled.curve_and_own_sums(ens, rows, j, grid, raw=True)
                assert_allclose(curves, want_curves, rtol=0, atol=1e-12)
                assert_allclose(own, want_own, rtol=0, atol=1e-12)
            unrounded = compiled.curve_and_own_sums(ens, X, j, grid)[1]
            assert np.abs(unrounded - want_own).max() > 1e-6  # the case tells rounding from none


def test_a_profile_asks_the_model_for_its_check_rows_only(monkeypatch):
    """Where the masks take the model, a profile's own values come from the walk: the model
    predicts its 32 check rows, not every row, and the base predictions are within 1e-12 of
    its predict. A forest (trees above 64 leaves) still has the model predict every row,
    its base predictions bit for bit."""
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
    X.loc[::9, "b"] = np.nan
    y = X["a"].fillna(0) * 2 + np.sin(3 * X["b"].fillna(1)) + rng.normal(size=400)
    seen: list[int] = []
    raw = Predictor.raw
    monkeypatch.setattr(Predictor, "raw", lambda self, block: seen.append(len(block)) or raw(self, block))
    boosted = HistGradientBoostingRegressor(max_iter=15, random_state=0).fit(X, y)
    for feature in ("a", "b"):
        seen.clear()
        prof = feature_profile(boosted, X, y, feature, grid=9, engine="trees")
        assert 0 < sum(seen) <= CHECK_ROWS
        assert_allclose(prof.base_pred, boosted.predict(X), rtol=1e-12, atol=1e-12)
        assert_allclose(prof.base_loss, (boosted.predict(X) - y) ** 2, rtol=1e-9, atol=1e-12)
    forest = RandomForestRegressor(8, random_state=0).fit(X.fillna(0), y)
    seen.clear()
    prof = feature_profile(forest, X.fillna(0), y, "a", grid=9, engine="trees")
    assert sum(seen) == len(X) and prof.params["engine"] == "exact tree walk"
    np.testing.assert_array_equal(prof.base_pred, forest.predict(X.fillna(0)))
