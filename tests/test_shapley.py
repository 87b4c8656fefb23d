"""shapley_importance (SFIMP): Shapley axioms, brute force, and the seed's Fig. 5 finding."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression

from compute import (
    InputError,
    compare_shapley_importance,
    feature_profile,
    permutation_importance,
    shapley_importance,
)
from compute.datasets import x1x2_interaction


class FormulaModel:
    """A black box computing a fixed formula of named columns."""

    def __init__(self, fn):
        self.fn = fn

    def predict(self, X):
        return np.asarray(self.fn(X), dtype=float)


@pytest.fixture(scope="module")
def data4():
    rng = np.random.default_rng(5)
    X = pd.DataFrame(rng.normal(size=(40, 4)), columns=["a", "b", "c", "d"])
    model = FormulaModel(lambda X: X.a * X.b + np.sin(2 * X.c) + 0.5 * X.a)
    y = model.predict(X) + 0.3 * rng.normal(size=40)
    return model, X, y


def brute_force_sfimp(model, X, y, n_perm, seed):
    """Eq. (11) as the average over all p! orderings, coalition errors by explicit loops.

    The observation permutations are drawn as shapley_importance documents it:
    ``rng.permutation(n)`` for each of ``n_perm`` from ``default_rng(seed)``.
    """
    rng = np.random.default_rng(seed)
    donors = [rng.permutation(len(X)) for _ in range(n_perm)]
    cols = list(X.columns)

    def error(S):
        if set(S) == set(cols):
            return np.mean((model.predict(X) - y) ** 2)
        total = 0.0
        for tau in donors:
            Xp = X.iloc[tau].reset_index(drop=True)
            for c in S:
                Xp[c] = X[c].to_numpy()
            total += np.mean((model.predict(Xp) - y) ** 2)
        return total / len(donors)

    cache = {}
    v = lambda S: cache.setdefault(frozenset(S), error(()) - error(S))  # noqa: E731
    phi = dict.fromkeys(cols, 0.0)
    orders = list(itertools.permutations(cols))
    for order in orders:
        for k, c in enumerate(order):
            phi[c] += v(order[: k + 1]) - v(order[:k])
    return pd.Series(phi) / len(orders)


def test_exact_equals_brute_force_over_all_orderings(data4):
    """Exact mode equals the permutation form of the Shapley value on a p = 4 case."""
    model, X, y = data4
    res = shapley_importance(model, X, y, n_obs_permutations=3, random_state=9)
    assert res.exact
    ref = brute_force_sfimp(model, X, y, n_perm=3, seed=9)
    assert_allclose(res.values[ref.index], ref, rtol=0, atol=1e-10)


def test_efficiency_exact(data4):
    """Exact mode: values add up to total = GE_empty - GE_P."""
    model, X, y = data4
    res = shapley_importance(model, X, y)
    assert_allclose(res.values.sum(), res.total, rtol=1e-12)
    assert_allclose(res.total, res.baseline_error - res.model_error, rtol=1e-12)
    assert_allclose(res.proportions.sum(), 1.0)
    assert (res.std_error.drop("d") > 0).all() and res.std_error["d"] == 0  # the dummy never varies


def test_efficiency_sampled_is_exact(data4):
    """Sampled mode: values sum to total exactly, as every ordering telescopes to the same
    cached v(P) - v(empty) (a 36 % error passed the old 3-standard-error bound)."""
    model, X, y = data4
    res = shapley_importance(model, X, y, n_permutations=20, random_state=1)
    assert not res.exact and res.n_orderings == 20
    assert_allclose(res.values.sum(), res.total, rtol=1e-12)


def test_sampled_estimate_close_to_exact(data4):
    """The sampled estimate is within 4 standard errors of the exact value."""
    model, X, y = data4
    exact = shapley_importance(model, X, y, random_state=2).values
    sampled = shapley_importance(model, X, y, n_permutations=16, random_state=2)
    assert np.all(np.abs(sampled.values - exact) <= 4 * sampled.std_error + 1e-12)


def test_standard_error_covers_permutation_noise(data4):
    """The reported standard error matches the spread of the values over seeds (which
    redraw the observation permutations), within a factor of two, in both modes."""
    model, X, y = data4
    for kwargs in ({}, {"n_permutations": 24}):
        runs = [shapley_importance(model, X, y, random_state=s, **kwargs) for s in range(30)]
        spread = np.std([r.values[["a", "b", "c"]] for r in runs], axis=0, ddof=1)
        reported = np.mean([r.std_error[["a", "b", "c"]] for r in runs], axis=0)
        assert np.all((reported > spread / 2) & (reported < spread * 2)), (kwargs, spread, reported)


def test_symmetry_of_interchangeable_features():
    """Two features with interchangeable roles (identical columns, symmetric model) get equal values."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=50)
    X = pd.DataFrame({"a": a, "b": a.copy(), "c": rng.normal(size=50)})
    model = FormulaModel(lambda X: X.a * X.b + X.a + X.b + X.c)
    y = model.predict(X) + rng.normal(size=50)
    res = shapley_importance(model, X, y)
    assert_allclose(res.values["a"], res.values["b"], rtol=1e-12)


def test_dummy_feature_gets_zero(data4):
    """A feature the model ignores (d) has SFIMP 0, in both modes."""
    model, X, y = data4
    assert shapley_importance(model, X, y).values["d"] == pytest.approx(0, abs=1e-12)
    assert shapley_importance(model, X, y, n_permutations=6).values["d"] == pytest.approx(0, abs=1e-12)


def test_additive_model_sfimp_close_to_pfi():
    """Additive model, independent features, squared error: SFIMP of each feature is its PFI
    up to sampling noise (both equal 2 Var(b_j x_j) in expectation)."""
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
    y = 3 * X.a - 2 * X.b + X.c + rng.normal(size=400)
    model = LinearRegression().fit(X, y)
    res = shapley_importance(model, X, y, n_obs_permutations=10)
    for col in X.columns:
        pfi = feature_profile(model, X, y, col).importance
        assert res.values[col] == pytest.approx(pfi, rel=0.1), col


def test_linear_model_sfimp_is_twice_sage():
    """Exact linear model, uncorrelated centred columns, squared error: SFIMP averages the
    losses over permuted rows (Eq. 10-11), so phi_j = 2 b_j^2 Var(x_j); SAGE averages the
    predictions first and reports b_j^2 Var(x_j). Ratio 2 up to permutation noise (< 7 % here)."""
    rng = np.random.default_rng(4)
    data = rng.normal(size=(300, 3))
    q, _ = np.linalg.qr(data - data.mean(axis=0))  # centred, uncorrelated columns
    X = pd.DataFrame(q * np.sqrt(300) * [1.0, 2.0, 0.5], columns=["a", "b", "c"])
    b = np.array([3.0, -1.0, 2.0])
    y = X.to_numpy() @ b + 1.0
    res = shapley_importance(LinearRegression().fit(X, y), X, y, n_obs_permutations=20)
    sage = b**2 * X.var(ddof=0).to_numpy()
    assert_allclose(res.values.to_numpy() / sage, 2.0, rtol=0.1)  # SAGE's definition: 1


def test_groups_of_columns_are_players(data4):
    """A dict of groups: one value per group, summing to the same total."""
    model, X, y = data4
    res = shapley_importance(model, X, y, features={"ab": ["a", "b"], "c": "c", "d": ["d"]})
    assert list(res.values.index) == ["ab", "c", "d"]
    single = shapley_importance(model, X, y)
    assert_allclose(res.total, single.total, rtol=1e-12)
    assert_allclose(res.values.sum(), res.total, rtol=1e-12)
    # c enters the model additively; through the squared loss it interacts with a, b only
    # by sample cross terms, so its share barely moves when a and b are grouped
    assert res.values["c"] == pytest.approx(single.values["c"], rel=0.05)


def test_unlisted_columns_keep_their_values(data4):
    """Columns outside every player stay observed: the game is over the listed players only."""
    model, X, y = data4
    res = shapley_importance(model, X, y, features=["a", "b"])
    assert list(res.values.index) == ["a", "b"]
    assert_allclose(res.values.sum(), res.total)


def test_exact_mode_row_budget():
    """Exact mode needs at most 2^p x n x n_obs_permutations model rows."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(30, 5)), columns=list("abcde"))
    y = X.sum(axis=1).to_numpy()
    res = shapley_importance(LinearRegression().fit(X, y), X, y, n_obs_permutations=2)
    assert res.n_rows <= 2**5 * 30 * 2


def test_auto_sampled_mode_stops_at_tolerance():
    """Above exact_max_players, orderings are sampled until the standard error target;
    ``converged`` tells whether the whole error (permutations included) reached it."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(60, 6)), columns=list("abcdef"))
    y = (X.a * X.b + X.c + X.d).to_numpy()
    model = FormulaModel(lambda X: X.a * X.b + X.c + X.d)
    loose = shapley_importance(model, X, y, exact_max_players=4, tol=0.05, n_obs_permutations=20)
    assert not loose.exact and loose.converged
    assert (loose.std_error <= 0.05 * loose.total).all()
    strict = shapley_importance(model, X, y, exact_max_players=4, tol=0.005, n_obs_permutations=2)
    assert not strict.converged  # two permutations cannot reach 0.5 %: said, not hidden
    assert (strict.std_error > 0.005 * strict.total).any()


def test_classifier_losses(forest_clf, clf_data):
    """Classification losses work, efficiency holds."""
    X, y = clf_data
    for loss in ("log_loss", "brier", "zero_one"):
        res = shapley_importance(forest_clf, X, y, loss=loss, n_obs_permutations=2)
        assert_allclose(res.values.sum(), res.total, rtol=1e-10)


def test_compare_models_tidy_table(data4):
    """Several models on the same data: one tidy table, one row per model and feature."""
    model, X, y = data4
    lin = LinearRegression().fit(X, y)
    table = compare_shapley_importance({"formula": model, "linear": lin}, X, y)
    assert list(table.columns) == ["model", "feature", "value", "std_error", "proportion", "model_error"]
    assert len(table) == 8
    for _, group in table.groupby("model"):
        assert_allclose(group.proportion.sum(), 1.0)
    assert table.loc[table.model == "linear", "model_error"].iloc[0] == pytest.approx(
        np.mean((lin.predict(X) - y) ** 2)
    )


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(features={"a": ["a"], "b": ["a", "b"]}), "Column 'a' belongs to two players"),
        (dict(features=["zz"]), "Unknown feature 'zz'"),
        (dict(features=[]), "names no players"),
        (dict(features="a"), "'features' parameter must be None, a list"),
        (dict(n_obs_permutations=0), "'n_obs_permutations' parameter must be an int"),
        (dict(tol=0), "'tol' parameter must be a positive number"),
        (dict(y=None), "needs the target 'y'"),
    ],
)
def test_bad_arguments(data4, params, match):
    """Bad arguments raise InputError naming the parameter."""
    model, X, y = data4
    args = dict(y=y) | params
    with pytest.raises(InputError, match=match):
        shapley_importance(model, X, args.pop("y"), **args)


def test_fig5_finding_quick():
    """Seed 000, Fig. 5b (lenient quick version): with the X1*X2 interaction learned, PFI puts
    X1 at about 2x X3 and SFIMP at about 1.5x; for a linear model without the interaction
    both ratios are about 1."""
    X_train, y_train = x1x2_interaction(3000, random_state=0)
    forest = RandomForestRegressor(n_estimators=40, min_samples_leaf=3, random_state=0).fit(X_train, y_train)
    linear = LinearRegression().fit(X_train, y_train)
    ratios = {"forest": ([], []), "linear": ([], [])}
    for t in range(4):
        X, y = x1x2_interaction(100, random_state=100 + t)
        for name, model in (("forest", forest), ("linear", linear)):
            sf = shapley_importance(model, X, y).values
            pfi = permutation_importance(model, X, y, n_repeats=10).importance
            ratios[name][0].append(sf["X1"] / sf["X3"])
            ratios[name][1].append(pfi["X1"] / pfi["X3"])
    sf_forest, pfi_forest = (np.median(r) for r in ratios["forest"])
    sf_linear, pfi_linear = (np.median(r) for r in ratios["linear"])
    assert 1.5 <= pfi_forest <= 3.0
    assert 1.1 <= sf_forest <= 2.0
    assert sf_forest < pfi_forest
    assert 0.6 <= sf_linear <= 1.6 and 0.6 <= pfi_linear <= 1.6


# --- row sample and coalitions computed apart (issue 12) ------------------------------------
def test_row_standard_error_is_the_spread_of_each_rows_own_shapley_values(data4):
    """Exact mode: each row's Shapley values (its own coalition errors, the same permutations)
    written out over all orderings average to SFIMP, and row_std_error is their sd / sqrt(n)."""
    model, X, y = data4
    res = shapley_importance(model, X, y, n_obs_permutations=3, random_state=4)
    rng = np.random.default_rng(4)
    donors = [rng.permutation(len(X)) for _ in range(3)]
    cols = list(X.columns)

    def row_errors(S):
        if set(S) == set(cols):
            return (model.predict(X) - y) ** 2
        out = np.zeros(len(X))
        for tau in donors:
            Xp = X.iloc[tau].reset_index(drop=True)
            for c in S:
                Xp[c] = X[c].to_numpy()
            out += (model.predict(Xp) - y) ** 2 / len(donors)
        return out

    phi = {c: np.zeros(len(X)) for c in cols}
    orders = list(itertools.permutations(cols))
    for order in orders:
        for k, c in enumerate(order):
            phi[c] += (row_errors(order[:k]) - row_errors(order[: k + 1])) / len(orders)
    for c in cols:
        assert phi[c].mean() == pytest.approx(res.values[c], rel=1e-9, abs=1e-12)
        assert res.row_std_error[c] == pytest.approx(phi[c].std(ddof=1) / np.sqrt(len(X)), rel=1e-9)
    assert not res.sampled and list(res.rows) == list(X.index) and res.n_total == len(X)


def test_the_row_standard_error_covers_a_row_sample_in_both_modes():
    """Over 30 samples of 150 of 3,000 rows, SFIMP lies within 2.5 combined standard errors
    (rows and Monte Carlo) of SFIMP on all rows about 95 % of the time or more."""
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(3000, 4)), columns=["a", "b", "c", "d"])
    model = FormulaModel(lambda X: X.a * X.b + np.sin(2 * X.c) + 0.5 * X.a)
    y = model.predict(X) + 0.3 * rng.normal(size=3000)
    truth = shapley_importance(model, X, y, n_obs_permutations=20).values
    for kwargs in ({}, {"n_permutations": 16}):
        hits = total = 0
        for seed in range(30):
            res = shapley_importance(model, X, y, n_obs=150, random_state=seed, **kwargs)
            assert res.sampled and len(res.rows) == 150
            se = res.total_std_error  # the bars' error: the two combined as independent errors
            assert np.array_equal(se.to_numpy(), np.sqrt(res.row_std_error**2 + res.std_error**2).to_numpy())
            hits += int((((res.values - truth) / se).abs() < 2.5).sum())
            total += 4
        assert hits / total > 0.88, (kwargs, hits / total)
    whole = shapley_importance(model, X.iloc[:200], y[:200], n_permutations=4)
    assert not whole.sampled and whole.total_std_error is whole.std_error  # no sample: Monte Carlo only


def test_coalitions_computed_apart_join_into_the_one_call(data4):
    """The exact game's coalitions in batches (shapley_coalitions, any order), joined by
    shapley_importance(coalitions=...), give the call's own result bit for bit; parts of
    another game are refused."""
    from compute import shapley_coalitions

    model, X, y = data4
    kw = dict(n_obs=30, n_obs_permutations=3, random_state=6)
    whole = shapley_importance(model, X, y, **kw)
    batches = [np.arange(8, 16), np.arange(0, 8)]
    parts = [shapley_coalitions(model, X, y, masks, **kw) for masks in batches]
    joined = shapley_importance(model, X, y, coalitions=parts, **kw)
    assert np.array_equal(joined.values.to_numpy(), whole.values.to_numpy())
    assert np.array_equal(joined.std_error.to_numpy(), whole.std_error.to_numpy())
    assert np.array_equal(joined.row_std_error.to_numpy(), whole.row_std_error.to_numpy())
    assert joined.n_rows == whole.n_rows and joined.rows.equals(whole.rows)
    other = shapley_coalitions(model, X, y, [1, 2], n_obs=20, n_obs_permutations=3, random_state=6)
    with pytest.raises(InputError, match="computed on other rows or permutations"):
        shapley_importance(model, X, y, coalitions=[other], **kw)
    with pytest.raises(InputError, match=r"whole numbers in \[0, 16\)"):
        shapley_coalitions(model, X, y, [16], **kw)


def test_coalition_parts_keep_rows_only_within_the_cap(data4, monkeypatch):
    """Parts follow the whole call's ROW_ERRORS_MAX rule: above it they keep no per-row errors,
    and the join gives the same values without a row standard error."""
    import compute.shapley as shapley
    from compute import shapley_coalitions

    model, X, y = data4
    kw = dict(n_obs=30, n_obs_permutations=3, random_state=6)
    monkeypatch.setattr(shapley, "ROW_ERRORS_MAX", 100)  # 16 coalitions x 30 rows is above it
    parts = [shapley_coalitions(model, X, y, masks, **kw) for masks in (range(0, 8), range(8, 16))]
    assert all(not part.rows for part in parts)
    joined = shapley_importance(model, X, y, coalitions=parts, **kw)
    whole = shapley_importance(model, X, y, **kw)
    assert joined.row_std_error is None and whole.row_std_error is None
    assert np.array_equal(joined.values.to_numpy(), whole.values.to_numpy())
