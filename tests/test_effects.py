"""compute.effects: ICE feature impact, ALE, marginal effects and FIRM.

Known answers on linear / additive / interaction formulas, brute-force loops on tiny data
as references for the vectorised aggregations, and a table of bad inputs.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.linear_model import LinearRegression

from compute import InputError, feature_profile
from compute.effects import (
    IMPACT_COLUMNS,
    ale_curve,
    ale_from_profile,
    ale_values,
    ice_feature_impact,
    ice_impact,
    marginal_effects,
    pd_importance,
    pd_variance_importance,
)


class Formula:
    """A 'fitted' regressor whose prediction is a formula of the DataFrame's columns."""

    def __init__(self, fn, columns):
        self.fn = fn
        self.feature_names_in_ = np.asarray(columns, dtype=object)

    def predict(self, X):
        return np.asarray(self.fn(X), dtype=float)


COLS = ["x1", "x2", "x3"]
ADDITIVE = Formula(lambda X: np.sin(2 * X.x1) + X.x2**2 + 0.5 * X.x3, COLS)
INTERACTION = Formula(lambda X: X.x1 * X.x2 + X.x3, COLS)


@pytest.fixture(scope="session")
def tiny(reg_data):
    """Eight tie-free rows for the brute-force loops."""
    X, y = reg_data
    return X.iloc[:8], y[:8]


@pytest.fixture(scope="session")
def mixed():
    """Numeric, string, boolean and constant columns, with a formula model."""
    rng = np.random.default_rng(3)
    n = 80
    X = pd.DataFrame(
        {
            "num": rng.normal(size=n),
            "other": rng.integers(0, 5, size=n),
            "city": pd.array(rng.choice(["paris", "rome", "oslo"], size=n), dtype="str"),
            "flag": rng.random(n) < 0.5,
            "const": np.full(n, 2.0),
        }
    )
    model = Formula(
        lambda X: X.num * (1 + X.flag) + 0.3 * X.other + 2.0 * (X.city == "rome") + 0 * X.const,
        list(X.columns),
    )
    return X, model


def slope_tensor(model, X, feature, grid):
    """ICE slopes by a literal loop: one predict call per row and grid point."""
    pred = np.empty((len(X), grid.size))
    for i in range(len(X)):
        for k, value in enumerate(grid):
            row = X.iloc[[i]].copy()
            row[feature] = value
            pred[i, k] = model.predict(row)[0]
    return pred, np.diff(pred, axis=1) / np.diff(grid)


# --- ICE feature impact ----------------------------------------------------------------------
def test_linear_impact_is_abs_coef_times_sd(ols, reg_data):
    """Linear model: impact = |b| sd, signed = b sd, heterogeneity = non-linearity = 0."""
    X, _ = reg_data
    res = ice_feature_impact(ols, X, alpha=1.5)
    sd = X.std(ddof=0).to_numpy()
    assert_allclose(res.impact, np.abs(ols.coef_) * sd, rtol=1e-9)
    assert_allclose(res.signed_impact, ols.coef_ * sd, rtol=1e-9)
    assert_allclose(res.in_distribution_impact, np.abs(ols.coef_) * sd, rtol=1e-9)
    assert_allclose(res[["heterogeneity", "non_linearity"]], 0.0, atol=1e-9)


def test_additive_model_is_homogeneous_but_non_linear(reg_data):
    """Additive model: heterogeneity 0 everywhere, non-linearity > 0 exactly where curved."""
    X, _ = reg_data
    res = ice_feature_impact(ADDITIVE, X)
    assert_allclose(res.heterogeneity, 0.0, atol=1e-9)
    assert (res.loc[["x1", "x2"], "non_linearity"] > 0.1).all()
    assert res.loc["x3", "non_linearity"] == pytest.approx(0.0, abs=1e-9)


def test_interaction_is_heterogeneous(reg_data):
    """f = x1 x2: the slopes in x1 differ across rows (heterogeneity > 0) but not along x1."""
    X, _ = reg_data
    res = ice_feature_impact(INTERACTION, X, features=["x1"])
    assert res.loc["x1", "heterogeneity"] > 0.5
    assert res.loc["x1", "non_linearity"] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("alpha", [0.0, 0.7])
def test_impact_matches_brute_force(gbm, tiny, alpha):
    """All five measures equal a literal loop over rows and intervals (run-weighted means)."""
    X, _ = tiny
    for feature in COLS:
        grid, x, sd = np.unique(X[feature]), X[feature].to_numpy(), X[feature].std(ddof=0)
        pred, slopes = slope_tensor(gbm, X, feature, grid)
        span, n, m = grid[-1] - grid[0], len(X), grid.size - 1
        total = signed = num = den = hetero = nonlin = 0.0
        for k in range(m):
            run = grid[k + 1] - grid[k]
            hetero += run / span * np.std(slopes[:, k])
        for i in range(n):
            chord = (pred[i, -1] - pred[i, 0]) / span
            for k in range(m):
                run = grid[k + 1] - grid[k]
                like = [np.exp(-alpha * abs(g - x[i]) / sd) for g in (grid[k], grid[k + 1])]
                w = (like[0] + like[1]) / 2 * run
                total += run / span * abs(slopes[i, k]) / n
                signed += run / span * slopes[i, k] / n
                num, den = num + w * abs(slopes[i, k]), den + w
                nonlin += run / span * abs(slopes[i, k] - chord) / n
        expected = [sd * total, sd * signed, sd * num / den, sd * hetero, sd * nonlin]
        res = ice_feature_impact(gbm, X, features=[feature], alpha=alpha)
        assert_allclose(res.loc[feature].to_numpy(), expected, rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="session")
def fare_data():
    """A Titanic-like skewed 'fare' with near-duplicates (values 1e-4 apart) and a target
    that is not monotone in it, and a depth-5 regression tree (leaves of >= 20 rows)."""
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(0)
    n = 891
    fare = np.round(np.exp(rng.normal(2.6, 0.9, n)), 4)
    near = rng.random(n) < 0.35
    fare[near] = np.round(
        rng.choice([7.225, 7.75, 7.8958, 8.05, 13.0, 26.0], size=near.sum())
        + rng.integers(0, 5, size=near.sum()) * 1e-4,
        4,
    )
    X = pd.DataFrame(
        {"fare": fare, "sex": (rng.random(n) < 0.35).astype(float), "age": np.round(rng.uniform(1, 70, n))}
    )
    y = np.sin(1.5 * np.log1p(X.fare)) + 0.5 * X.sex * (X.fare > 20) + 0.02 * X.age + rng.normal(0, 0.3, n)
    tree = DecisionTreeRegressor(max_depth=5, min_samples_leaf=20, random_state=0).fit(X, y)
    return X, tree


def test_tree_impact_is_stable_under_grid_refinement(fare_data):
    """A tree (step function) on near-duplicate fares: the impact on the observed grid and on
    20, 50 and 200 quantile points agrees to 1e-9 relative (each grid separates the tree's
    thresholds; an ICE curve's total variation is then the sum of its jumps). Heterogeneity
    and non-linearity do not explode: the quantile grids give 0.5 to 1.05 times the
    observed-grid value (coarse grids merge neighbouring jumps), the 200-point grid within 5 %."""
    X, tree = fare_data
    assert np.diff(np.unique(X.fare)).min() < 2e-4
    observed = ice_feature_impact(tree, X, features=["fare"]).loc["fare"]
    for grid in (20, 50, 200):
        res = ice_feature_impact(tree, X, features=["fare"], grid=grid).loc["fare"]
        assert res.impact == pytest.approx(observed.impact, rel=1e-9)
        for measure in ("heterogeneity", "non_linearity"):
            ratio = res[measure] / observed[measure]
            assert 0.5 <= ratio <= 1.05 and (grid < 200 or abs(ratio - 1) < 0.05), (grid, measure, ratio)
    assert observed.non_linearity <= 2 * observed.impact


@pytest.mark.parametrize("grid", ["observed", 7, 20, 200])
def test_linear_impact_is_exact_on_any_grid(mass_data, grid):
    """Ties, mass points, quantile grids: a linear model keeps impact = |b| sd and zero spreads."""
    X, y = mass_data
    model = LinearRegression().fit(X, y)
    res = ice_feature_impact(model, X, grid=grid, alpha=1.5)
    assert_allclose(res.impact, np.abs(model.coef_) * X.std(ddof=0).to_numpy(), rtol=1e-12)
    assert_allclose(res.in_distribution_impact, res.impact, rtol=1e-12)
    assert_allclose(res[["heterogeneity", "non_linearity"]], 0.0, atol=1e-12)


def test_alpha_zero_gives_plain_impact(gbm, reg_data):
    """With alpha = 0 every phantom point weighs the same: in-distribution = impact."""
    X, _ = reg_data
    res = ice_feature_impact(gbm, X, alpha=0.0)
    assert_allclose(res.in_distribution_impact, res.impact, rtol=1e-12)


def test_huge_alpha_stays_finite(gbm, reg_data):
    """A huge alpha does not underflow every weight to zero."""
    X, _ = reg_data
    res = ice_feature_impact(gbm, X, features=["x2"], grid=7, alpha=1e4)
    assert np.isfinite(res.loc["x2", "in_distribution_impact"])


def test_profile_aggregation_equals_entry_point(gbm, reg_data):
    """ice_impact on a cached observed-grid profile equals ice_feature_impact (sd from the grid)."""
    X, _ = reg_data
    prof = feature_profile(gbm, X, None, "x1")
    entry = ice_feature_impact(gbm, X, features="x1", alpha=0.5).loc["x1"]
    assert_allclose(ice_impact(prof, alpha=0.5).to_numpy(), entry.to_numpy(), rtol=1e-10)
    assert list(entry.index) == list(IMPACT_COLUMNS)


def test_categorical_impact_matches_pairwise_loop(clf_pipeline, clf_data):
    """Levels at unit distance: impact, signed, in-distribution and heterogeneity over all pairs."""
    X, _ = clf_data
    prof = feature_profile(clf_pipeline, X, None, "city")
    pred, own, alpha = prof.pred, pd.Index(prof.grid).get_indexer(prof.x), 0.8
    diffs, weights = [], []
    for a, b in itertools.combinations(range(prof.grid.size), 2):
        diffs.append(pred[:, b] - pred[:, a])
        weights.append((np.exp(-alpha * (own != a)) + np.exp(-alpha * (own != b))) / 2)
    diffs, weights = np.array(diffs), np.array(weights)
    res = ice_impact(prof, alpha=alpha)
    assert_allclose(res.impact, np.abs(diffs).mean(), rtol=1e-12)
    assert_allclose(res.signed_impact, diffs.mean(), rtol=1e-12)
    assert_allclose(res.in_distribution_impact, (weights * np.abs(diffs)).sum() / weights.sum(), rtol=1e-12)
    assert_allclose(res.heterogeneity, diffs.std(axis=1).mean(), rtol=1e-9)
    assert np.isnan(res.non_linearity)


def test_ignored_feature_has_zero_effects(reg_data):
    """A feature the formula ignores: zero impact, ALE, AME and FIRM."""
    X, _ = reg_data
    model = Formula(lambda X: np.sin(X.x1) + X.x2, COLS)
    assert_allclose(ice_feature_impact(model, X, features=["x3"]).loc["x3"].to_numpy(), 0.0, atol=1e-15)
    assert_allclose(ale_curve(model, X, "x3").ale, 0.0, atol=1e-15)
    assert marginal_effects(model, X, features=["x3"]).loc["x3", "effect"] == 0.0
    assert pd_importance(feature_profile(model, X, None, "x3")) == pytest.approx(0.0, abs=1e-15)


# --- ALE -------------------------------------------------------------------------------------
def brute_force_ale(model, X, feature, bounds):
    """ALE by loops: per interval, per row, one predict call at each boundary."""
    x = X[feature].to_numpy()
    effects, members = [0.0], [np.array([], dtype=int)]
    for k in range(1, bounds.size):
        inside = np.flatnonzero(((x > bounds[k - 1]) | (k == 1)) & (x >= bounds[k - 1]) & (x <= bounds[k]))
        fds = []
        for i in inside:
            lo, hi = X.iloc[[i]].copy(), X.iloc[[i]].copy()
            lo[feature], hi[feature] = bounds[k - 1], bounds[k]
            fds.append(model.predict(hi)[0] - model.predict(lo)[0])
        effects.append(np.mean(fds) if fds else 0.0)
        members.append(inside)
    uncentred = np.cumsum(effects)
    per_row = [(uncentred[k - 1] + uncentred[k]) / 2 for k in range(1, bounds.size) for _ in members[k]]
    centre = np.mean(per_row)
    return uncentred - centre


def test_ale_matches_brute_force(gbm, tiny):
    """ale_curve equals the literal interval/row loop, with per-row trapezoid centring."""
    X, _ = tiny
    res = ale_curve(gbm, X, "x2", n_intervals=4)
    assert_allclose(res.ale, brute_force_ale(gbm, X, "x2", res.grid.to_numpy()), rtol=1e-10, atol=1e-12)
    assert res.n_obs.sum() == len(X)


def test_ale_recovers_additive_main_effects(reg_data):
    """Additive model: ALE minus the true main effect is constant across the boundaries."""
    X, _ = reg_data
    truths = {"x1": lambda z: np.sin(2 * z), "x2": lambda z: z**2, "x3": lambda z: 0.5 * z}
    for feature, g in truths.items():
        res = ale_curve(ADDITIVE, X, feature, n_intervals=12)
        gap = res.ale - g(res.grid)
        assert_allclose(gap, gap.iloc[0], atol=1e-12)


def test_ale_is_centred(gbm, reg_data):
    """The weights sum to one and the weighted mean of the ALE over the data is zero."""
    X, _ = reg_data
    res = ale_curve(gbm, X, "x1", n_intervals=9)
    assert res.weight.sum() == pytest.approx(1.0)
    assert res.weight @ res.ale == pytest.approx(0.0, abs=1e-12)


def test_linear_ale_has_slope_coef(ols, reg_data):
    """Linear model: the ALE is a line with the coefficient as slope."""
    X, _ = reg_data
    res = ale_curve(ols, X, "x2", n_intervals=6)
    assert_allclose(np.diff(res.ale) / np.diff(res.grid), ols.coef_[1], rtol=1e-9)


def test_ale_from_profile_equals_own_intervention(gbm, reg_data):
    """The ICE tensor on the quantile boundaries gives the same ALE without predicting."""
    X, _ = reg_data
    direct = ale_curve(gbm, X, "x3", n_intervals=8)
    cached = ale_from_profile(feature_profile(gbm, X, None, "x3", grid=direct.grid.to_numpy()))
    pd.testing.assert_frame_equal(direct, cached)


@pytest.mark.parametrize("n_intervals", [4, 20, 60])
def test_ale_from_observed_profile_with_k_equals_ale_curve(mass_gbm, mass_data, n_intervals):
    """Observed grid, K intervals: the type-1 bounds of ale_curve, read off the tensor."""
    X, _ = mass_data
    for feature in X.columns:
        prof = feature_profile(mass_gbm, X, None, feature)
        pd.testing.assert_frame_equal(
            ale_from_profile(prof, n_intervals=n_intervals), ale_curve(mass_gbm, X, feature, n_intervals=n_intervals)
        )
        sample = feature_profile(mass_gbm, X, None, feature, n_obs=120, random_state=0)
        pd.testing.assert_frame_equal(
            ale_from_profile(sample, n_intervals=n_intervals),
            ale_curve(mass_gbm, X.loc[sample.rows], feature, n_intervals=n_intervals),
        )


def test_ale_from_quantile_profile_snaps_bounds_to_grid(mass_data):
    """Quantile grid: bounds are grid points, no interval is empty, a linear ALE stays exact."""
    X, y = mass_data
    model = LinearRegression().fit(X, y)
    for j, feature in enumerate(X.columns):
        prof = feature_profile(model, X, None, feature, grid=30)
        for k in (5, 20, 100):
            res = ale_from_profile(prof, n_intervals=k)
            assert np.isin(res.grid, prof.grid).all() and len(res) - 1 <= min(k, prof.grid.size - 1)
            assert (res.n_obs.iloc[1:] > 0).all() and res.n_obs.sum() == len(X)
            assert_allclose(np.diff(res.ale) / np.diff(res.grid), model.coef_[j], rtol=1e-9)


def test_ale_chunked_parallel_equals_single_pass(gbm, reg_data):
    """chunk_rows and n_jobs do not change the ALE."""
    X, _ = reg_data
    pd.testing.assert_frame_equal(ale_curve(gbm, X, "x1"), ale_curve(gbm, X, "x1", chunk_rows=7, n_jobs=2))


@pytest.mark.parametrize("n_intervals", [5, 20, 50, 100])
def test_linear_ale_exact_with_mass_points(mass_data, n_intervals):
    """Ties and mass points: bounds on observed values, no empty interval, slope = coefficient."""
    X, y = mass_data
    model = LinearRegression().fit(X, y)
    for j, feature in enumerate(X.columns):
        res = ale_curve(model, X, feature, n_intervals=n_intervals)
        assert (res.n_obs.iloc[1:] > 0).all()
        assert np.isin(res.grid, X[feature]).all()
        assert_allclose(np.diff(res.ale) / np.diff(res.grid), model.coef_[j], rtol=1e-9)


def test_ale_bounds_are_type1_quantiles_with_integer_ranks():
    """n = 200, K = 5: z_k is the (40 k)-th smallest value; in floats 0.6 * 200 > 120."""
    x = np.random.default_rng(0).permutation(np.arange(200.0) ** 1.5)
    X = pd.DataFrame({"a": x, "b": np.zeros(200)})
    res = ale_curve(Formula(lambda d: d.a, ["a", "b"]), X, "a", n_intervals=5)
    assert_allclose(res.grid, np.sort(x)[[0, 39, 79, 119, 159, 199]], rtol=0, atol=0)
    assert res.n_obs.tolist() == [0, 40, 40, 40, 40, 40]
    p = np.linspace(0, 1, 6)[3]  # why integers: numpy's type 1 is one rank too high here
    assert np.quantile(x, p, method="inverted_cdf") == np.sort(x)[120]


def test_ale_values_empty_interval_is_flat():
    """An interval with no rows adds nothing to the accumulated effect."""
    ale, counts = ale_values(np.array([1.0, 3.0, 2.0]), np.array([1, 1, 3]), 3)
    assert counts.tolist() == [0, 2, 0, 1]
    assert_allclose(np.diff(ale), [2.0, 0.0, 2.0])


def test_ale_on_mixed_pipeline(clf_pipeline, clf_data):
    """A numeric column of mixed data through a ColumnTransformer pipeline works."""
    X, _ = clf_data
    res = ale_curve(clf_pipeline, X, "num", n_intervals=5)
    assert res.shape == (6, 4) and np.all(np.isfinite(res.ale))


# --- Marginal effects ------------------------------------------------------------------------
def test_linear_ame_equals_coef(ols, reg_data):
    """Linear model: every marginal effect is the coefficient, with no spread."""
    X, _ = reg_data
    res = marginal_effects(ols, X)
    assert_allclose(res.effect, ols.coef_, rtol=1e-7)
    assert_allclose(res.effect_sd, 0.0, atol=1e-7)
    assert res.attrs["kind"] == "AME"


def test_default_step_is_fraction_of_sd(ols, reg_data):
    """The default step is 1e-3 times the population sd."""
    X, _ = reg_data
    assert_allclose(marginal_effects(ols, X).step, 1e-3 * X.std(ddof=0), rtol=1e-12)


def test_ame_uses_the_given_step(reg_data):
    """f = x^3: the symmetric quotient is 3x^2 + h^2, so AME = 3 mean(x^2) + h^2."""
    X, _ = reg_data
    cubic = Formula(lambda X: X.x1**3, COLS)
    res = marginal_effects(cubic, X, features=["x1"], step={"x1": 0.5})
    assert res.loc["x1", "step"] == 0.5
    assert_allclose(res.loc["x1", "effect"], 3 * np.mean(X.x1**2) + 0.25, rtol=1e-10)


def test_mem_and_mer_of_an_interaction(reg_data):
    """f = x1 x2 + x3: MEM of x1 is mean(x2); MER at x2 = 3 is 3 for every row."""
    X, _ = reg_data
    mem = marginal_effects(INTERACTION, X, features=["x1"], at="mean")
    mer = marginal_effects(INTERACTION, X, features=["x1"], at={"x2": 3.0})
    assert mem.attrs["kind"] == "MEM" and mer.attrs["kind"] == "MER"
    assert_allclose(mem.loc["x1", "effect"], X.x2.mean(), rtol=1e-7)
    assert_allclose(mer.loc["x1", ["effect", "effect_sd"]].to_numpy(), [3.0, 0.0], atol=1e-7)


def test_mer_at_categorical_level(mixed):
    """MER may fix a categorical or boolean column: d/dnum of num (1 + flag) at flag=True is 2."""
    X, model = mixed
    res = marginal_effects(model, X, features=["num"], at={"flag": True, "city": "oslo"})
    assert_allclose(res.loc["num", "effect"], 2.0, rtol=1e-7)


def test_default_features_are_numeric(mixed):
    """Without features, only the numeric inputs are differentiated, with their known effects."""
    X, model = mixed
    Xv = X.assign(const=np.linspace(0, 1, len(X)))  # the formula ignores it: effect 0
    res = marginal_effects(model, Xv)
    assert list(res.index) == ["num", "other", "const"]
    assert_allclose(res.effect, [1 + X.flag.mean(), 0.3, 0.0], rtol=1e-7, atol=1e-12)


# --- FIRM / PD-variance importance -----------------------------------------------------------
def test_linear_firm_is_abs_coef_times_weighted_grid_sd(ols, reg_data):
    """Linear model: PD sd = |b| times the frequency-weighted sd of the observed grid."""
    X, _ = reg_data
    for j, feature in enumerate(COLS):
        prof = feature_profile(ols, X, None, feature)
        mean = prof.grid_weights @ prof.grid
        grid_sd = np.sqrt(prof.grid_weights @ (prof.grid - mean) ** 2)
        assert_allclose(pd_importance(prof), abs(ols.coef_[j]) * grid_sd, rtol=1e-9)
        assert_allclose(grid_sd, X[feature].std(ddof=0), rtol=1e-12)


def test_firm_weights_grid_points_by_data_share(mass_data):
    """Ties and mass points: the PD sd weights each distinct value by its frequency, so a linear
    model gives |b| times the data's sd; the unweighted sd over the distinct values (vip's
    FIRM over a grid) is another number."""
    X, y = mass_data
    model = LinearRegression().fit(X, y)
    for j, feature in enumerate(X.columns):
        prof = feature_profile(model, X, None, feature)
        assert_allclose(pd_importance(prof), abs(model.coef_[j]) * X[feature].std(ddof=0), rtol=1e-9)
        if feature != "rm":  # nearly tie-free: weights almost uniform
            assert abs(np.std(prof.pd) / pd_importance(prof) - 1) > 0.05


def test_categorical_firm_is_range_over_four(clf_pipeline, clf_data):
    """Categorical feature: (max PD - min PD) / 4."""
    X, _ = clf_data
    prof = feature_profile(clf_pipeline, X, None, "size")
    assert pd_importance(prof) == pytest.approx((prof.pd.max() - prof.pd.min()) / 4)


def test_firm_entry_point_equals_profile_aggregation(gbm, reg_data):
    """pd_variance_importance equals pd_importance of each feature's profile."""
    X, _ = reg_data
    res = pd_variance_importance(gbm, X)
    expected = [pd_importance(feature_profile(gbm, X, None, f)) for f in COLS]
    assert_allclose(res.importance, expected, rtol=1e-12)
    assert list(res.index) == COLS


# --- Bad input -------------------------------------------------------------------------------
CALLS = {
    "impact": lambda model, X, kw: ice_feature_impact(model, X, **kw),
    "ale": lambda model, X, kw: ale_curve(model, X, kw.pop("feature", "num"), **kw),
    "me": lambda model, X, kw: marginal_effects(model, X, **{"features": ["num"], **kw}),
}


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"fn": "impact", "alpha": -1.0}, r"'alpha' parameter must be a finite number >= 0 \(got -1.0\)"),
        ({"fn": "impact", "alpha": float("nan")}, r"'alpha' parameter must be a finite number"),
        ({"fn": "impact", "features": ["const"]}, r"'const' has a single distinct value"),
        ({"fn": "ale", "feature": "city"}, r"ALE needs a numeric feature, but 'city' is categorical"),
        ({"fn": "ale", "feature": "flag"}, r"ALE needs a numeric feature, but 'flag' is categorical"),
        ({"fn": "ale", "feature": "const"}, r"Feature 'const' is constant \(2.0\)"),
        ({"fn": "ale", "n_intervals": 1}, r"'n_intervals' parameter must be an int in \[2"),
        ({"fn": "ale", "feature": "nmu"}, r"Unknown feature 'nmu'.*Did you mean 'num'"),
        ({"fn": "me", "step": 0.0}, r"'step' parameter must be a finite number > 0 \(got 0.0\)"),
        ({"fn": "me", "step": {"num": -0.1}}, r"'step' parameter must be a finite number > 0"),
        ({"fn": "me", "step": {"zz": 0.1}}, r"'step' dict names \['zz'\]"),
        ({"fn": "me", "features": ["city"]}, r"A marginal effect needs a numeric feature, but 'city' is cat"),
        ({"fn": "me", "features": ["const"]}, r"Feature 'const' is constant"),
        ({"fn": "me", "at": "median"}, r"'at' parameter must be None \(AME\), \"mean\""),
        ({"fn": "me", "at": {"nope": 1.0}}, r"Unknown column in 'at' 'nope'"),
        ({"fn": "me", "at": {"other": "high"}}, r"numeric column 'other' must be a finite number"),
        ({"fn": "me", "at": {"city": "tokyo"}}, r"'tokyo' is not a level of 'city'"),
    ],
)
def test_bad_input_raises(mixed, params, match):
    """Each bad argument raises InputError naming the parameter or column."""
    X, model = mixed
    kw = dict(params)
    call = CALLS[kw.pop("fn")]
    with pytest.raises(InputError, match=match):
        call(model, X, kw)


def test_ice_impact_refuses_zero_sd(gbm, reg_data):
    """A numeric profile needs a positive sd for the slopes' scale."""
    X, _ = reg_data
    with pytest.raises(InputError, match=r"'sd' parameter must be a finite number > 0 \(got 0.0\)"):
        ice_impact(feature_profile(gbm, X, None, "x1"), sd=0.0)


def test_ale_from_categorical_profile_raises(clf_pipeline, clf_data):
    """ALE from a categorical profile is refused with the feature's name."""
    X, _ = clf_data
    with pytest.raises(InputError, match="'city' is categorical"):
        ale_from_profile(feature_profile(clf_pipeline, X, None, "city"))
