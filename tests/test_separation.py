"""Issue 39: one uncertainty, one rule. Every "±" is a result's ``uncertainty``; whether two
features can be told apart is ``compute.compare_features`` (paired on the rows), and the
findings and the ranking's verdict both ask it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.linear_model import LinearRegression

import compute
from compute.importance import permutation_block


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 600
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "c": rng.normal(size=n)})
    X["d"] = X["a"] + 0.05 * rng.normal(size=n)  # matters on the same rows as a
    y = 2.0 * X["a"] + 1.9 * X["b"] + 0.5 * X["c"] + 0.3 * rng.normal(size=n)
    model = LinearRegression().fit(X, y)
    return X, y, model


def test_the_row_covariance_is_the_brute_force_covariance_of_each_rows_mean_change(data):
    X, y, model = data
    pfi = permutation_block(model, X, y, n_repeats=6, random_state=3, keep_pairs=True)
    assert pfi.pairs is not None and pfi.row_covariance is not None
    change = pfi.pairs.changes.mean(axis=1)  # (features, rows): each row's loss change over the permutations
    n = change.shape[1]
    assert_allclose(pfi.row_covariance.to_numpy(), np.cov(change, ddof=1) / n, rtol=1e-5, atol=1e-12)
    assert_allclose(np.diag(pfi.row_covariance), pfi.row_std_error.to_numpy() ** 2, rtol=1e-5)
    for a, b in (("a", "b"), ("a", "d"), ("c", "b")):
        found = compute.compare_features(pfi, a, b)
        i, j = pfi.features.index(a), pfi.features.index(b)
        diff = change[i] - change[j]
        assert found.paired and found.difference == pytest.approx(pfi.importance[a] - pfi.importance[b])
        assert_allclose(found.std_error, diff.std(ddof=1) / np.sqrt(n), rtol=1e-5)
        assert found.clear == (abs(found.difference) > 1.96 * found.std_error)


def test_pairing_on_the_rows_is_tighter_than_the_row_errors_alone(data):
    """a and b matter about as much (2.0 against 1.9) on different rows; a and c clearly not."""
    X, y, model = data
    pfi = compute.permutation_importance(model, X, y, n_repeats=10, random_state=0)
    close = compute.compare_features(pfi, "a", "b")
    unpaired = float(np.hypot(pfi.row_std_error["a"], pfi.row_std_error["b"]))
    assert close.std_error != pytest.approx(unpaired, rel=1e-3)  # the covariance is used
    assert compute.compare_features(pfi, "a", "c").clear
    no_covariance = compute.PermutationImportance(  # as a result kept without it: unpaired fallback
        repeats=pfi.repeats,
        model_error=pfi.model_error,
        loss=pfi.loss,
        n_rows=pfi.n_rows,
        row_std_error=pfi.row_std_error,
    )
    fallback = compute.compare_features(no_covariance, "a", "b")
    assert not fallback.paired and fallback.std_error == pytest.approx(unpaired)


def test_blocks_of_a_split_job_join_to_the_covariance_of_one_call(data):
    X, y, model = data
    whole = permutation_block(model, X, y, n_repeats=5, random_state=2, n_obs=400)
    parts = [
        permutation_block(model, X, y, n_repeats=5, random_state=2, n_obs=400, features=f, streams=s)
        for f, s in ((["a", "b"], [0, 1]), (["c", "d"], [2, 3]))
    ]
    assert all(p.row_changes is not None for p in parts) and whole.row_changes is None
    joined = compute.PermutationImportance.concat(parts)
    assert joined.row_changes is None and joined.row_covariance is not None
    assert_allclose(joined.row_covariance.to_numpy(), whole.row_covariance.to_numpy(), rtol=1e-6, atol=1e-12)
    for a, b in (("a", "c"), ("b", "d")):
        assert compute.compare_features(joined, a, b) == compute.compare_features(whole, a, b)


def test_a_result_without_row_errors_is_compared_over_its_permutations():
    repeats = pd.DataFrame(
        {"repeat_1": [1.0, 0.9, 0.1], "repeat_2": [1.2, 1.0, 0.2], "repeat_3": [1.1, 1.15, 0.15]},
        index=pd.Index(["x", "y", "z"], name="feature"),
    )
    pfi = compute.PermutationImportance(repeats=repeats, model_error=1.0, loss="squared_error", n_rows=100)
    d = repeats.loc["x"] - repeats.loc["y"]
    found = compute.compare_features(pfi, "x", "y")
    assert found.paired and found.std_error == pytest.approx(d.std(ddof=1) / np.sqrt(3))
    assert compute.tied_with(pfi, "x") == ["y"]
    assert compute.ranking_ties(pfi, 3) == [("x", "y")]
    assert pfi.uncertainty.equals(pfi.std_error) and pfi.uncertainty_words == "standard error over 3 permutations"


def test_the_uncertainty_is_the_row_standard_error_when_there_is_one(data):
    X, y, model = data
    pfi = compute.permutation_importance(model, X, y, n_repeats=4, random_state=0, n_obs=300)
    assert_allclose(pfi.uncertainty, pfi.row_std_error)
    assert pfi.uncertainty_words == "standard error over the 300 rows used and 4 permutations"
    matter = pfi.importance >= 0.05 * pfi.importance.max()  # "known to ±x %" reads the same error
    assert pfi.relative_error() == pytest.approx(float((pfi.uncertainty / pfi.importance)[matter].max()))
