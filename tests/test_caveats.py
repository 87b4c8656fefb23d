"""Seed 001's caveats: convergence of PFI, dependent features and grouped PFI, leakage."""

from __future__ import annotations

import statistics

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from scipy.stats import chi2_contingency, contingency, spearmanr
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import brier_score_loss, log_loss, r2_score

import compute
from compute.datasets import x3_interaction


@pytest.fixture(scope="module")
def x3_pfi():
    X, y = x3_interaction(700, random_state=0)
    model = RandomForestRegressor(40, min_samples_leaf=5, random_state=0).fit(X[:300], y[:300])
    Xt, yt = X[300:].reset_index(drop=True), y[300:]
    return model, Xt, yt, compute.permutation_importance(model, Xt, yt, n_repeats=12, random_state=4)


# --- (2) convergence ----------------------------------------------------------------------
def test_convergence_last_point_is_the_pfi_and_each_point_the_running_mean(x3_pfi):
    *_, pfi = x3_pfi
    conv = compute.pfi_convergence(pfi)
    assert conv.n_repeats == 12
    assert_allclose(conv.importance[12], pfi.importance, rtol=1e-12)
    for feature in pfi.features:
        reps = pfi.repeats.loc[feature].to_numpy()
        for r in (1, 2, 5, 12):
            assert conv.importance.loc[feature, r] == pytest.approx(reps[:r].mean(), rel=1e-12)
            if r == 1:
                assert np.isnan(conv.lower.loc[feature, r])
                continue
            half = 1.959963984540054 * statistics.stdev(reps[:r]) / np.sqrt(r)
            assert conv.upper.loc[feature, r] == pytest.approx(reps[:r].mean() + half, rel=1e-9)
            assert conv.lower.loc[feature, r] == pytest.approx(reps[:r].mean() - half, rel=1e-9)
    # the band at R is the standard error the PFI view states, times z
    assert_allclose(conv.upper[12] - conv.importance[12], 1.959963984540054 * pfi.std_error, rtol=1e-9)


def brute_stable_from(repeats: pd.DataFrame, top: int) -> int:
    """Recompute the order of the features after r permutations by sorting, r = 1..R."""
    R = repeats.shape[1]
    orders = []
    for r in range(1, R + 1):
        means = repeats.iloc[:, :r].mean(axis=1)
        orders.append(sorted(range(len(means)), key=lambda i: (-means.iloc[i], i)))
    final = orders[-1][:top]
    last_change = max((r for r in range(1, R + 1) if orders[r - 1][:top] != final), default=0)
    return last_change + 1


def test_ranking_stability_matches_a_brute_force_sort():
    """A made-up table where the ranking settles at permutation 4 (top 2) and 6 (all 3)."""
    repeats = pd.DataFrame(
        [[5, 5, 5, 5, 5, 5, 5], [9, 1, 1, 6, 6, 6, 6], [1, 9, 9, 0, 0, 0, 0]],
        index=["a", "b", "c"],
        columns=[f"repeat_{r}" for r in range(1, 8)],
        dtype=float,
    )
    pfi = compute.PermutationImportance(repeats=repeats, model_error=1.0, loss="squared_error")
    for top in (1, 2, 3):
        conv = compute.pfi_convergence(pfi, top=top)
        assert conv.stable_from == brute_stable_from(repeats, top), top
    conv = compute.pfi_convergence(pfi, top=3)
    assert conv.top == ["a", "b", "c"] and conv.ranks[7].tolist() == [1, 2, 3]
    assert conv.ranks[1].tolist() == [2, 1, 3]
    assert conv.top_stable_from == brute_stable_from(repeats, 1)
    assert not compute.pfi_convergence(pfi, top=3).settled  # moved after half of the 7


def test_convergence_on_a_real_model_agrees_with_brute_force(x3_pfi):
    *_, pfi = x3_pfi
    for top in (1, 3):
        assert compute.pfi_convergence(pfi, top=top).stable_from == brute_stable_from(pfi.repeats, top)


# --- (3) dependence and grouped PFI --------------------------------------------------------
def mixed_frame(n=800, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = a + rng.normal(scale=0.2, size=n)  # strongly dependent on a
    c = rng.normal(size=n)  # independent
    colour = np.where(a > 0.5, "red", np.where(a < -0.5, "blue", "green"))  # determined by a
    shape = rng.choice(["round", "square"], size=n)  # independent
    size = np.where(colour == "red", "L", rng.choice(["S", "M"], size=n))
    return pd.DataFrame({"a": a, "b": b, "c": c, "colour": colour, "shape": shape, "size": size})


def test_dependence_measures_equal_their_peers_and_formulas():
    """|Spearman rho| equals scipy's; Cramér's V is Bergsma's bias-corrected form of scipy's
    chi-square statistic; the correlation ratio is epsilon-squared written with loops."""
    X = mixed_frame()
    dep = compute.feature_dependence(X)
    n = len(X)
    for p, q in [("a", "b"), ("a", "c"), ("b", "c")]:
        assert dep.strength.loc[p, q] == pytest.approx(abs(spearmanr(X[p], X[q]).statistic), rel=1e-10)
        assert dep.measure.loc[p, q] == "rank correlation"
    for p, q in [("colour", "shape"), ("colour", "size"), ("shape", "size")]:
        table = pd.crosstab(X[p], X[q]).to_numpy()
        chi2 = chi2_contingency(table, correction=False).statistic
        r, c = table.shape
        phi2 = max(0.0, chi2 / n - (r - 1) * (c - 1) / (n - 1))
        r_adj, c_adj = r - (r - 1) ** 2 / (n - 1), c - (c - 1) ** 2 / (n - 1)
        assert dep.strength.loc[p, q] == pytest.approx(np.sqrt(phi2 / min(r_adj - 1, c_adj - 1)), abs=1e-12)
        assert dep.measure.loc[q, p] == "Cramér's V"
        # the correction only ever lowers scipy's plain V
        assert dep.strength.loc[p, q] <= contingency.association(table, method="cramer") + 1e-12
    ranks = X["a"].rank().to_numpy()
    groups = {level: ranks[X.colour.to_numpy() == level] for level in X.colour.unique()}
    between = sum(len(g) * (g.mean() - ranks.mean()) ** 2 for g in groups.values())
    total = sum((v - ranks.mean()) ** 2 for v in ranks)
    k = len(groups)
    epsilon2 = (between - (k - 1) * (total - between) / (n - k)) / total
    assert dep.strength.loc["colour", "a"] == pytest.approx(np.sqrt(epsilon2), rel=1e-10)
    assert dep.measure.loc["a", "colour"] == "correlation ratio"
    assert (np.diag(dep.strength) == 1).all() and np.allclose(dep.strength, dep.strength.T)


def test_a_column_of_many_levels_is_not_dependent_by_chance():
    """Review finding: 715 random 'zip codes' on 1,000 rows gave plain V and eta of 0.84
    against independent columns; the corrected measures stay near 0 and flag nothing."""
    rng = np.random.default_rng(0)
    n = 1000
    X = pd.DataFrame(
        {
            "zip": rng.integers(0, 715, n).astype(str),
            "colour": rng.choice(["red", "green", "blue"], n),
            "x": rng.normal(size=n),
        }
    )
    dep = compute.feature_dependence(X)
    assert dep.strength.loc["zip", "colour"] < 0.3 and dep.strength.loc["zip", "x"] < 0.3
    assert dep.flagged(0.7) == {} and dep.groups(0.7) == {}


def test_dependent_pairs_are_flagged_and_independent_ones_not():
    X = mixed_frame()
    dep = compute.feature_dependence(X)
    partners = dep.partners("a", 0.7)
    assert list(partners.index) == ["b", "colour", "size"] and partners.is_monotonic_decreasing
    assert dep.partners("c", 0.7).empty and dep.partners("shape", 0.7).empty
    assert dep.strength.loc["a", "c"] < 0.1 and dep.strength.loc["colour", "shape"] < 0.1
    # size is "L" exactly where colour is red (a > 0.5): dependent on colour and a, not on shape
    assert set(dep.flagged(0.7)["size"]) == {"a", "b", "colour"} and "shape" not in dep.flagged(0.7)


def test_groups_to_shuffle_together_are_each_flagged_feature_with_its_partners():
    X = mixed_frame()
    dep = compute.feature_dependence(X)
    assert dep.groups(0.7) == {"a + b + colour + size": ["a", "b", "colour", "size"]}  # one group, deduplicated
    # pairs: each flagged feature with its strongest partner, strongest link first
    assert dep.groups(0.7, max_size=2) == {
        "a + b": ["a", "b"],
        "a + colour": ["a", "colour"],
        "a + size": ["a", "size"],
    }
    assert list(dep.groups(0.7, max_size=2, max_groups=1)) == ["a + b"]
    assert compute.feature_dependence(X[["c", "shape"]]).groups(0.7) == {}


def test_dependence_leaves_out_missing_values_pairwise_and_samples_large_data():
    X = mixed_frame(3000)
    X.loc[::7, "b"] = np.nan
    dep = compute.feature_dependence(X, ["a", "b", "c"])
    keep = X.b.notna()
    assert dep.strength.loc["a", "b"] == pytest.approx(abs(spearmanr(X.a[keep], X.b[keep]).statistic), rel=1e-10)
    sampled = compute.feature_dependence(X, ["a", "c"], max_rows=500)
    assert sampled.n_rows == 500 and sampled.strength.loc["a", "c"] < 0.2


def test_one_column_group_is_ordinary_pfi_with_the_same_permutations(x3_pfi):
    """Grouped PFI of a one-column group placed where a feature was equals that feature's PFI."""
    model, Xt, yt, _ = x3_pfi
    plain = compute.permutation_importance(model, Xt, yt, features=["X1", "X2", "X3"], n_repeats=6)
    grouped = compute.permutation_importance(model, Xt, yt, features=["X1", "X2"], groups={"g": ["X3"]}, n_repeats=6)
    assert list(grouped.repeats.index) == ["X1", "X2", "g"]
    assert_allclose(grouped.repeats.loc["g"], plain.repeats.loc["X3"], rtol=0, atol=0)
    assert_allclose(grouped.repeats.loc[["X1", "X2"]], plain.repeats.loc[["X1", "X2"]], rtol=0, atol=0)


def test_a_group_is_permuted_jointly():
    """Two columns that are copies of each other: moved together, the copy stays a copy,
    so a model of their difference loses nothing (0 PFI), while moving one alone breaks it.
    A model that sums two dependent columns: the group's PFI exceeds the sum of the parts
    (seed 001, caveat 3: dependent features share their importance)."""
    rng = np.random.default_rng(0)
    n = 600
    a = rng.normal(size=n)
    X = pd.DataFrame({"a": a, "a2": a.copy(), "c": rng.normal(size=n)})

    class Difference:
        def predict(self, frame):
            return (frame.a - frame.a2).to_numpy() + frame.c.to_numpy()

    y = X.c.to_numpy()
    both = compute.permutation_importance(Difference(), X, y, features=["a"], groups={"pair": ["a", "a2"]})
    assert both.importance["pair"] == pytest.approx(0.0, abs=1e-12)
    assert both.importance["a"] > 1.0

    b = a + rng.normal(scale=0.3, size=n)
    Z = pd.DataFrame({"a": a, "b": b, "c": X.c})
    yz = a + b + X.c.to_numpy()
    model = LinearRegression().fit(Z, yz)
    res = compute.permutation_importance(model, Z, yz, features=["a", "b"], groups={"a+b": ["a", "b"]}, n_repeats=20)
    assert res.importance["a+b"] > 1.5 * (res.importance["a"] + res.importance["b"])
    # the comparison the caveats view shows: together, the members' bars summed, the gap
    compared = compute.grouped_against_alone(res, res, {"a+b": ["a", "b"]})
    alone = res.importance["a"] + res.importance["b"]
    assert list(compared.columns) == ["together", "alone_sum", "gap"] and list(compared.index) == ["a+b"]
    assert compared.loc["a+b"].tolist() == [res.importance["a+b"], alone, res.importance["a+b"] - alone]
    with pytest.raises(compute.InputError, match="Group 'a\\+c' is not in the grouped result"):
        compute.grouped_against_alone(res, res, {"a+c": ["a", "c"]})
    with pytest.raises(compute.InputError, match="members \\['c'\\] of group 'a\\+b'"):
        compute.grouped_against_alone(res, both, {"a+b": ["a", "c"]})


def test_bad_groups_are_named(x3_pfi):
    model, Xt, yt, _ = x3_pfi
    with pytest.raises(compute.InputError, match="must map a name"):
        compute.permutation_importance(model, Xt, yt, groups=["X1"])
    with pytest.raises(compute.InputError, match="groups\\['g'\\]"):
        compute.permutation_importance(model, Xt, yt, groups={"g": ["X9"]})
    with pytest.raises(compute.InputError, match="also in 'features'"):
        compute.permutation_importance(model, Xt, yt, features=["X1"], groups={"X1": ["X1", "X2"]})


# --- leakage --------------------------------------------------------------------------------
def test_constant_model_error_is_the_peers_score_of_a_constant_prediction():
    rng = np.random.default_rng(0)
    y = rng.normal(size=300)
    pred = y + rng.normal(scale=0.5, size=300)
    skill = 1 - np.mean((pred - y) ** 2) / compute.constant_model_error(y, "squared_error")
    assert skill == pytest.approx(r2_score(y, pred), rel=1e-12)
    assert compute.constant_model_error(y, "absolute_error") == pytest.approx(np.mean(np.abs(y - np.median(y))))
    labels = rng.choice(["no", "yes"], p=[0.7, 0.3], size=400)
    q = np.mean(labels == "yes")
    assert compute.constant_model_error(labels, "log_loss") == pytest.approx(
        log_loss(labels, np.tile([1 - q, q], (400, 1)), labels=["no", "yes"])
    )
    assert compute.constant_model_error(labels, "brier") == pytest.approx(
        brier_score_loss(labels == "yes", np.full(400, q))
    )
    assert compute.constant_model_error(labels, "zero_one") == pytest.approx(q)
    # a three-class model's Brier score sums over all three, even on rows holding two
    assert compute.constant_model_error(labels, "brier", n_classes=3) == pytest.approx(2 * q * (1 - q))
    three = rng.choice(["a", "b", "c"], size=500)
    shares = pd.Series(three).value_counts(normalize=True)
    assert compute.constant_model_error(three, "brier") == pytest.approx(float((shares * (1 - shares)).sum()))


def bike_like(n=800, seed=0):
    """Seed 001's bike-sharing mistake: the target is the sum of two columns in the data."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "registered": rng.poisson(300, n).astype(float),
            "casual": rng.poisson(80, n).astype(float),
            "temp": rng.normal(20, 5, n),
            "weekday": rng.integers(0, 7, n).astype(float),
            "humidity": rng.uniform(0, 1, n),
        }
    )
    y = X.registered + X.casual + rng.normal(scale=1.0, size=n) + 0.5 * X.temp
    return X, y.to_numpy()


def test_leak_is_flagged_on_the_bike_sharing_pattern():
    X, y = bike_like()
    model = RandomForestRegressor(60, random_state=0).fit(X[:400], y[:400])
    pfi = compute.permutation_importance(model, X[400:], y[400:], n_repeats=5)
    check = compute.leakage_check(pfi, y[400:])
    assert check.flagged and set(check.carriers) <= {"registered", "casual"} and check.skill > 0.95


def test_no_flag_when_the_model_is_not_near_perfect_or_importance_is_spread(x3_pfi):
    *_, pfi = x3_pfi
    _, Xt, yt, _ = x3_pfi
    check = compute.leakage_check(pfi, yt)
    assert check.skill < 0.95 and not check.flagged
    # near-perfect, but four features share the importance equally
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(600, 4)), columns=list("abcd"))
    y = X.sum(axis=1).to_numpy()
    model = LinearRegression().fit(X, y)
    spread = compute.leakage_check(compute.permutation_importance(model, X, y, n_repeats=3), y)
    assert spread.skill > 0.99 and len(spread.carriers) >= 3 and not spread.flagged


def test_leakage_check_reads_classifier_skill():
    """A classifier with a leaked copy of the label: log-loss skill near 1, one carrier."""
    rng = np.random.default_rng(2)
    n = 600
    y = rng.choice([0, 1], size=n)
    X = pd.DataFrame({"leak": y + rng.normal(scale=0.05, size=n), "u": rng.normal(size=n), "v": rng.normal(size=n)})
    model = LogisticRegression(C=100).fit(X, y)
    check = compute.leakage_check(compute.permutation_importance(model, X, y, n_repeats=3), y)
    assert check.flagged and check.carriers == ["leak"]
