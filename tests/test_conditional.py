"""Conditional importance (cs-PFI, Molnar et al. 2023) against closed forms and its own parts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.compose import make_column_transformer
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

import compute
from compute.importance import permutation_within


class Linear:
    """f(x) = x @ b exactly: the closed forms hold for the model itself."""

    def __init__(self, b):
        self.b = np.asarray(b, float)

    def predict(self, X):
        return np.asarray(X, float) @ self.b


def select(condition, rows):
    """The rows a subgroup's condition holds ("" for all rows)."""
    return compute.parse_subgroup(condition, rows).to_numpy() if condition else np.ones(len(rows), bool)


def gaussian(n, rho, seed=0):
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=n)
    x2 = rho * x1 + np.sqrt(1 - rho**2) * rng.normal(size=n)
    x3 = rng.normal(size=n)
    return pd.DataFrame({"x1": x1, "x2": x2, "x3": x3}), rng


@pytest.mark.parametrize("seed", [0, 1])
def test_closed_form_on_a_gaussian_linear_model(seed):
    """f = b1 x1 + b2 x2 + b3 x3, corr(x1, x2) = 0.9, x3 independent; squared error, PFI as a
    difference: the permuted value x' is an independent draw of x_j given x_-j, so the
    loss grows by E[b_j^2 (x_j - x')^2] = 2 b_j^2 Var(x_j | x_-j) = 2 b_j^2 (1 - rho^2) for
    x1, x2 and 2 b3^2 for x3; the marginal PFI by 2 b_j^2 Var(x_j) = 2 b_j^2."""
    rho, b = 0.9, np.array([1.0, 2.0, -1.5])
    X, rng = gaussian(5_000, rho, seed)
    y = X.to_numpy() @ b + rng.normal(scale=0.5, size=len(X))
    result = compute.conditional_importance(Linear(b), X, y, random_state=seed)
    frame = result.to_frame()
    conditional = 2 * b**2 * np.array([1 - rho**2, 1 - rho**2, 1.0])
    assert_allclose(frame["importance"], conditional, rtol=0.15)
    assert_allclose(frame["marginal"], 2 * b**2, rtol=0.15)
    # the marginal estimate of x1, x2 is 1 / (1 - rho^2) = 5.3 times the conditional one: not within 15 %
    assert (frame["marginal"] / frame["importance"]).loc[["x1", "x2"]].min() > 3
    assert list(frame.columns[:3]) == ["importance", "std_error", "marginal"]
    assert result.conditioned_on["x2"][0] == "x1" and result.conditioned_on["x1"][0] == "x2"


def test_on_independent_features_it_is_the_marginal_importance():
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(3_000, 4)), columns=list("abcd"))
    b = np.array([1.0, -2.0, 0.5, 0.0])
    y = X.to_numpy() @ b + rng.normal(scale=0.3, size=len(X))
    result = compute.conditional_importance(Linear(b), X, y, n_repeats=10, random_state=4)
    frame = result.to_frame()
    gap = (frame["importance"] - frame["marginal"]).abs()
    assert (gap <= 4 * np.hypot(frame["std_error"], frame["marginal_std_error"]) + 1e-9).all(), frame
    assert_allclose(frame["importance"].iloc[:3], frame["marginal"].iloc[:3], rtol=0.1)


def test_marginal_is_permutation_importance_and_the_subgroups_add_up():
    X, rng = gaussian(1_200, 0.7, seed=5)
    y = X["x1"] - X["x2"] + X["x1"] * X["x3"] + rng.normal(scale=0.2, size=len(X))
    model = LinearRegression().fit(X, y)
    args = dict(n_repeats=4, random_state=7, n_obs=900)
    result = compute.conditional_importance(model, X, y, **args)
    pfi = compute.permutation_importance(model, X, y, **args)
    pd.testing.assert_frame_equal(result.marginal.repeats, pfi.repeats)
    alone = compute.conditional_importance(model, X, y, marginal=False, **args)
    assert alone.marginal is None and "marginal" not in alone.to_frame()
    pd.testing.assert_frame_equal(alone.conditional.repeats, result.conditional.repeats)
    assert result.conditional.rows.equals(pfi.rows) and result.conditional.model_error == pfi.model_error
    for feature in result.features:
        leaves = result.subgroups[feature]
        assert leaves["n"].sum() == 900 and (leaves["n"] >= 30).all()
        weighted = float((leaves["importance"] * leaves["n"]).sum() / leaves["n"].sum())
        assert weighted == pytest.approx(result.importance[feature], rel=1e-10)
        # every subgroup's condition selects exactly its rows among the rows used
        rows = X.loc[result.conditional.rows]
        chosen = sum(select(c, rows).astype(int) for c in leaves["condition"])
        assert (chosen == 1).all()
        for condition, n in zip(leaves["condition"], leaves["n"], strict=True):
            assert int(select(condition, rows).sum()) == n
    assert len(result.subgroups["x3"]) == 1  # nothing predicts x3: one subgroup, no condition
    assert len(result.subgroups["x1"]) > 4


def test_blocks_of_features_with_their_streams_join_to_the_one_call():
    """A split job's parts: features [x1, x2] (streams 0, 1) and [x3] (stream 2) on the same
    rows and seed, joined, are the call over all three (both PFIs, leaves and covariance);
    parts with other trees' settings are refused."""
    X, rng = gaussian(1_000, 0.7, seed=3)
    y = X["x1"] - X["x2"] + X["x1"] * X["x3"] + rng.normal(scale=0.2, size=len(X))
    model = LinearRegression().fit(X, y)
    args = dict(n_repeats=3, random_state=11, n_obs=800)
    whole = compute.conditional_importance(model, X, y, **args)
    first = compute.conditional_importance(model, X, y, features=["x1", "x2"], streams=[0, 1], **args)
    second = compute.conditional_importance(model, X, y, features=["x3"], streams=[2], **args)
    joined = compute.ConditionalImportance.concat([first, second])
    pd.testing.assert_frame_equal(joined.conditional.repeats, whole.conditional.repeats)
    pd.testing.assert_frame_equal(joined.marginal.repeats, whole.marginal.repeats)
    assert joined.std_error.equals(whole.std_error)
    assert all(joined.subgroups[f].equals(whole.subgroups[f]) for f in whole.features)
    assert_allclose(joined.conditional.row_covariance, whole.conditional.row_covariance, rtol=1e-9, atol=1e-15)
    # a block without its streams draws other permutations (the streams are what makes the join exact)
    alone = compute.conditional_importance(model, X, y, features=["x3"], **args)
    assert not alone.conditional.repeats.equals(second.conditional.repeats)
    deeper = compute.conditional_importance(model, X, y, features=["x3"], streams=[2], max_depth=2, **args)
    with pytest.raises(compute.InputError, match="trees' settings"):
        compute.ConditionalImportance.concat([first, deeper])


def test_permutations_stay_within_their_label_and_are_uniform_there():
    labels = np.array([2, 0, 2, 1, 0, 2, 2, 1, 0])
    rng = np.random.default_rng(0)
    seen = np.zeros((9, 9))
    for _ in range(4_000):
        donors = permutation_within(labels, rng)
        assert sorted(donors) == list(range(9))
        assert (labels[donors] == labels).all()
        seen[np.arange(9), donors] += 1
    for label in (0, 1, 2):
        members = np.flatnonzero(labels == label)
        share = seen[np.ix_(members, members)] / 4_000
        assert_allclose(share, 1 / members.size, atol=0.03)


def test_a_categorical_feature_gets_a_classification_tree():
    """x_c's level follows x1 (a category learned from a number) and x1's tree splits on x_c;
    the model one-hot encodes x_c. Permuting x_c within x1's subgroups keeps most rows'
    level, so its conditional PFI is far below the marginal one."""
    rng = np.random.default_rng(11)
    n = 3_000
    x1 = rng.normal(size=n)
    level = np.where(x1 < -0.5, "low", np.where(x1 < 0.6, "mid", "high"))
    flip = rng.random(n) < 0.1
    level[flip] = rng.choice(["low", "mid", "high"], size=int(flip.sum()))
    X = pd.DataFrame({"x1": x1, "c": level, "x3": rng.normal(size=n)})
    y = 0.5 * x1 + np.select([level == "low", level == "mid"], [-2.0, 0.0], 2.0) + X["x3"]
    model = make_pipeline(
        make_column_transformer((OneHotEncoder(), ["c"]), remainder="passthrough"), LinearRegression()
    ).fit(X, y)
    result = compute.conditional_importance(model, X, y, n_repeats=3, random_state=0)
    frame = result.to_frame()
    assert result.conditioned_on["c"][0] == "x1"
    assert frame.loc["c", "importance"] < 0.35 * frame.loc["c", "marginal"]
    assert result.conditioned_on["x1"][0] == "c"
    assert any("c ==" in condition for condition in result.subgroups["x1"]["condition"])
    assert frame.loc["x3", "importance"] == pytest.approx(frame.loc["x3", "marginal"], rel=0.1)


def test_rows_missing_the_feature_are_placed_by_the_conditions():
    X, rng = gaussian(2_000, 0.8, seed=2)
    X.loc[X.index[::10], "x2"] = np.nan

    class Filled(Linear):
        def predict(self, X):
            return np.nan_to_num(np.asarray(X, float)) @ self.b

    b = [1.0, 1.0, 1.0]
    y = Filled(b).predict(X)
    result = compute.conditional_importance(Filled(b), X, y, n_repeats=2, random_state=0)
    leaves = result.subgroups["x2"]
    assert leaves["n"].sum() == len(X) and len(leaves) > 4
    chosen = sum(select(c, X).astype(int) for c in leaves["condition"])
    assert (chosen == 1).all()


def test_readable_subgroups():
    X, rng = gaussian(2_000, 0.9, seed=1)
    y = X.sum(axis=1)
    result = compute.conditional_importance(Linear([1, 1, 1]), X, y, n_repeats=2, max_depth=2, random_state=0)
    text = result.describe("x2")
    assert text.startswith("x2 was shuffled within: x1 ≤ ")
    parts = text.split(": ", 1)[1].split("; ")
    assert len(parts) == 4 and parts[-1].startswith(parts[-2].split(" < ")[-1].split(" ≤ ")[-1] + " < x1")
    # each readable interval holds exactly its leaf's rows (thresholds to 4 significant digits)
    for readable, n in zip(result.subgroups["x2"]["readable"], result.subgroups["x2"]["n"], strict=True):
        low = float(readable.split(" < ")[0]) if " < " in readable else -np.inf
        high = float(readable.split(" ≤ ")[1]) if " ≤ " in readable else np.inf
        inside = ((X["x1"] > low) & (X["x1"] <= high)).sum()
        assert abs(inside - n) <= 2
    single = compute.conditional_importance(Linear([1, 1, 1]), X, y, n_repeats=2, max_depth=0)
    assert single.describe("x1") == "x1 was shuffled among all rows (no other feature predicts it)"
    assert single.to_frame()["n_subgroups"].eq(1).all()
