"""feature_profile: known answers, brute-force references and invariances."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.inspection import partial_dependence
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import brier_score_loss, log_loss, zero_one_loss

from compute import InputError, feature_profile, parse_subgroup
from compute.sampling import distinct_up_to, sample_rows


def brute_force_pfi(model, X, y, feature):
    """Eq. (7) of Casalicchio et al. (2018) as a literal double loop."""
    n = len(X)
    base = (model.predict(X) - y) ** 2
    total = 0.0
    for i in range(n):
        for k in range(n):
            row = X.iloc[[i]].copy()
            row[feature] = X[feature].iloc[k]
            total += (model.predict(row)[0] - y[i]) ** 2 - base[i]
    return total / n**2


def test_importance_equals_brute_force_eq7(gbm, reg_data):
    """On tie-free data with the observed grid, importance is Eq. (7) to 1e-10."""
    X, y = reg_data
    Xs, ys = X.iloc[:25], y[:25]
    prof = feature_profile(gbm, Xs, ys, "x2", grid="observed")
    assert_allclose(prof.importance, brute_force_pfi(gbm, Xs, ys, "x2"), rtol=0, atol=1e-10)


def test_pi_integrates_to_importance(gbm, reg_data):
    """Eq. (9): the PI curve integrated with the grid weights is the global PFI."""
    X, y = reg_data
    prof = feature_profile(gbm, X, y, "x2")
    assert_allclose(prof.pi @ prof.grid_weights, prof.importance, rtol=0, atol=1e-10)
    assert_allclose(prof.local_importance.mean(), prof.importance, rtol=0, atol=1e-12)


def test_ols_closed_form(reg_data):
    """OLS fitted on the evaluation data, squared error: PFI_j = 2 b_j^2 Var_n(x_j).

    Derivation: with residuals e_i = y_i - f(x_i), the intervened error is
    (b_j (x_kj - x_ij) - e_i)^2. Averaging over i and k, the cross term is
    -2 b_j mean_i(e_i (x_bar_j - x_ij)) = 0 because OLS residuals are orthogonal to the
    centred columns, and mean_{i,k} (x_kj - x_ij)^2 = 2 Var_n(x_j).
    """
    X, y = reg_data
    ols = LinearRegression().fit(X, y)
    for j, col in enumerate(X.columns):
        prof = feature_profile(ols, X, y, col)
        expected = 2 * ols.coef_[j] ** 2 * X[col].var(ddof=0)
        assert_allclose(prof.importance, expected, rtol=1e-10)


def test_ice_matches_sklearn_partial_dependence(gbm, reg_data):
    """ICE equals sklearn's brute-force individual partial dependence on the same grid."""
    X, y = reg_data
    prof = feature_profile(gbm, X, y, "x1", grid=15)
    ref = partial_dependence(gbm, X, ["x1"], kind="individual", method="brute", custom_values={"x1": prof.grid})
    assert_allclose(prof.ice, ref["individual"][0], rtol=0, atol=1e-12)
    assert_allclose(prof.pd, ref["individual"][0].mean(axis=0), rtol=0, atol=1e-12)


def test_linear_model_ice_are_parallel_lines(ols, reg_data):
    """A linear model's ICE curves all have slope w_j, and the centred curves coincide."""
    X, y = reg_data
    prof = feature_profile(ols, X, y, "x1", grid=10)
    slopes = np.diff(prof.ice, axis=1) / np.diff(prof.grid)
    assert_allclose(slopes, ols.coef_[0], rtol=1e-9)
    assert_allclose(prof.centered_ice, np.broadcast_to(prof.centered_ice[0], prof.ice.shape), atol=1e-12)


def test_ici_closed_form_for_exact_linear_model():
    """y = f(x) exactly: ICI_i(x_k) = w_j^2 (x_kj - x_ij)^2."""
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(30, 2)), columns=["a", "b"])
    y = 1.5 * X.a - 0.5 * X.b + 2.0
    model = LinearRegression().fit(X, y)
    prof = feature_profile(model, X, y, "a")
    expected = 1.5**2 * (prof.grid[None, :] - X.a.to_numpy()[:, None]) ** 2
    assert_allclose(prof.ici, expected, atol=1e-9)


def test_subset_equals_profile_on_subgroup_data(gbm, reg_data):
    """subset(mask) gives the local importances of a profile computed on X[mask]."""
    X, y = reg_data
    prof = feature_profile(gbm, X, y, "x2")
    mask = parse_subgroup("x3 > 0", X)
    sub = prof.subset(mask)
    direct = feature_profile(gbm, X[mask], y[mask.to_numpy()], "x2", grid=prof.grid, grid_weights=prof.grid_weights)
    assert list(sub.rows) == list(X.index[mask.to_numpy()])
    assert_allclose(sub.local_importance, direct.local_importance, rtol=0, atol=1e-12)
    assert_allclose(sub.importance, prof.local_importance[mask.to_numpy()].mean())


def test_mean_curves_are_the_subgroups_pd_and_pi(gbm, reg_data):
    """The line drawn over the ICE/ICI curves: on a subgroup it is the subgroup's own PD / PI
    (the profile of the subgroup's rows); centred, the PD minus its first point (centring is
    linear); on all rows the profile's PD and PI."""
    X, y = reg_data
    prof = feature_profile(gbm, X, y, "x2")
    mask = pd.Series(X.x3 > 0, index=X.index)
    sub = prof.subset(mask)
    assert_allclose(prof.mean_curve("ICE", mask=mask), sub.pd, rtol=1e-15)
    assert_allclose(prof.mean_curve("ICI", mask=mask), sub.pi, rtol=1e-15)
    assert_allclose(prof.mean_curve("ICE", mask=mask, centered=True), sub.pd - sub.pd[0], atol=1e-12)
    assert_allclose(prof.curves("ICI", centered=True), prof.ici - prof.ici[:, :1], rtol=0, atol=0)
    assert_allclose(prof.mean_curve("ICE"), prof.pd, rtol=1e-15)
    assert_allclose(prof.mean_curve("ICI"), prof.pi, rtol=1e-15)
    with pytest.raises(InputError, match="'kind' parameter must be one of"):
        prof.curves("PD")
    with pytest.raises(InputError, match="selects 0 of the 60"):
        prof.mean_curve("ICE", mask=np.zeros(60, bool))


def test_empty_subset_is_an_error(gbm, reg_data):
    """A subgroup with no rows raises InputError saying so."""
    X, y = reg_data
    prof = feature_profile(gbm, X, y, "x2")
    with pytest.raises(InputError, match="selects 0 of the 60"):
        prof.subset(parse_subgroup("x3 > 100", X))


def test_extremes_are_largest_and_smallest_integrals(gbm, reg_data):
    """extremes(k) returns the labels of the k largest and k smallest ICI integrals."""
    X, y = reg_data
    prof = feature_profile(gbm, X, y, "x2")
    top, bottom = prof.extremes(k=3)
    local = pd.Series(prof.local_importance, index=prof.rows)
    assert list(top) == list(local.nlargest(3).index)
    assert list(bottom) == list(local.nsmallest(3).index)


def test_extremes_break_ties_to_the_earlier_row(reg_data):
    """A model that ignores the feature: every ICI integral ties at 0, and both lists name the
    first rows in their order (the tables' rule, rank_extremes), not an arbitrary tie order."""
    X, y = reg_data

    class IgnoresX2:
        def predict(self, frame):
            return frame.x1.to_numpy()

    prof = feature_profile(IgnoresX2(), X, y, "x2")
    assert (prof.local_importance == 0).all()
    top, bottom = prof.extremes(k=4)
    assert list(top) == list(bottom) == list(X.index[:4])


def test_base_prediction_read_off_the_tensor(gbm, reg_data):
    """base_pred equals the model's prediction of the unmodified rows, whatever the grid:
    bit for bit from the batched predict, within 1e-12 from the tree walk (its own sums)."""
    X, y = reg_data
    for grid in ("observed", 7):
        for engine, tol in (("predict", 0.0), ("auto", 1e-12)):
            prof = feature_profile(gbm, X, y, "x3", grid=grid, engine=engine)
            assert_allclose(prof.base_pred, gbm.predict(X), rtol=tol, atol=tol)
            assert_allclose(prof.base_loss, (gbm.predict(X) - y) ** 2, rtol=tol, atol=tol)


def test_observed_grid_ici_is_zero_at_own_value(gbm, reg_data):
    """On the observed grid each ICI curve is exactly 0 at the observation's own value."""
    X, y = reg_data
    prof = feature_profile(gbm, X, y, "x1")
    own = np.searchsorted(prof.grid, prof.x)
    assert np.all(prof.ici[np.arange(len(own)), own] == 0.0)


def test_quantile_grid_spans_range_and_weights_sum_to_one(reg_data, gbm):
    """grid=m: m quantile points from min to max, nearest-point weights summing to one."""
    X, y = reg_data
    prof = feature_profile(gbm, X, y, "x1", grid=9)
    assert prof.grid.size == 9
    assert prof.grid[0] == X.x1.min() and prof.grid[-1] == X.x1.max()
    assert_allclose(prof.grid_weights.sum(), 1.0)
    nearest = np.abs(X.x1.to_numpy()[:, None] - prof.grid[None, :]).argmin(axis=1)
    assert_allclose(prof.grid_weights, np.bincount(nearest, minlength=9) / len(X))


def test_grid_size_reaching_distinct_count_gives_observed_values():
    """grid=15 on 12 distinct values (9 of 20 rows tied): the 12 observed values, by frequency."""
    from compute.sampling import make_grid

    values = np.r_[np.full(9, 2.0), [0.0, 1, 3, 4, 5, 6, 7, 8, 9, 20, 40]]
    grid = make_grid(pd.Series(values, name="a"), 15)
    assert_allclose(grid.values, np.unique(values))
    assert_allclose(grid.weights, np.unique(values, return_counts=True)[1] / values.size)
    for m in (12, 13, 1000):  # m == n_unique already takes the observed values
        assert_allclose(make_grid(pd.Series(values), m).values, np.unique(values))
    assert make_grid(pd.Series(values), 11).values.size <= 11


def test_quantile_grids_read_off_one_sort_are_the_direct_definitions():
    """make_grid(column, m) sorts once for the distinct count, the quantiles and the weights:
    on 200 columns (continuous, few integers, ties, float32 values, missing values) its points
    and weights equal np.quantile's points and each value's nearest point counted directly."""
    from compute.sampling import _nearest_point_weights, make_grid

    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(1, 2_000))
        v = [
            rng.normal(size=n),
            rng.integers(0, int(rng.integers(1, 80)), n).astype(float),
            np.round(rng.exponential(size=n), 1),
            rng.normal(size=n).astype(np.float32).astype(float),
        ][trial % 4]
        if trial % 5 == 0:
            v[rng.random(n) < 0.1] = np.nan
        m = int(rng.integers(2, 120))
        grid = make_grid(pd.Series(v, name="x"), m)
        known = v[~np.isnan(v)]
        if known.size == 0:
            continue
        if m >= np.unique(known).size:
            points, counts = np.unique(known, return_counts=True)
            weights = counts / counts.sum()
        else:
            points = np.unique(np.quantile(known, np.linspace(0, 1, m)))
            weights = _nearest_point_weights(known, points)
        share = float(np.isnan(v).mean())
        if share > 0:
            points, weights = np.r_[points, np.nan], np.r_[weights * (1 - share), share]
        assert np.array_equal(grid.values, points, equal_nan=True), trial
        assert np.array_equal(grid.weights, weights), trial


def test_quantile_grid_estimates_observed_importance(gbm, reg_data):
    """A 40-point quantile grid gives nearly the exact (observed-grid) PFI."""
    X, y = reg_data
    exact = feature_profile(gbm, X, y, "x2").importance
    approx = feature_profile(gbm, X, y, "x2", grid=40).importance
    assert abs(approx - exact) < 0.05 * exact


def test_y_none_gives_prediction_views_only(gbm, reg_data):
    """Without y, ICE and PD work and ICI asks for the target."""
    X, _ = reg_data
    prof = feature_profile(gbm, X, None, "x1", grid=5)
    assert prof.ice.shape == (60, 5) and prof.pd.shape == (5,)
    with pytest.raises(InputError, match="needs the target"):
        _ = prof.ici


def test_n_obs_sample_is_seeded_and_grid_uses_all_rows(gbm, reg_data):
    """n_obs samples rows reproducibly; the grid still covers the whole data set."""
    X, y = reg_data
    a = feature_profile(gbm, X, y, "x1", n_obs=10, random_state=4)
    b = feature_profile(gbm, X, y, "x1", n_obs=10, random_state=4)
    assert list(a.rows) == list(b.rows) and len(a.rows) == 10
    assert a.grid.size == 60
    assert_allclose(a.ici, b.ici)


def _same_profile(a, b) -> None:
    """Two profiles number for number: rows, grid and weights, every tensor, params."""
    assert list(a.rows) == list(b.rows) and a.params == b.params and a.categorical == b.categorical
    assert list(a.grid) == list(b.grid)
    for name in ("grid_weights", "pred", "base_pred", "loss_grid", "base_loss"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize(("feature", "grid", "n_obs"), [("x1", "observed", 12), ("x2", 7, 12), ("x3", 7, 59)])
def test_the_sample_with_the_whole_column_is_the_call_on_the_whole_data(gbm, reg_data, feature, grid, n_obs):
    """A split job's part reads its sample and one column: ``X.iloc[rows]`` with ``column=``
    the whole data's values gives the call on the whole data bit for bit (the rows, the grid
    and its weights over all rows, every curve); the sample's own column alone gives another grid."""
    X, y = reg_data
    whole = feature_profile(gbm, X, y, feature, grid=grid, n_obs=n_obs, random_state=3)
    rows = sample_rows(len(X), n_obs, np.random.default_rng(3))
    part = feature_profile(
        gbm, X.iloc[rows], y[rows], feature, grid=grid, n_obs=n_obs, random_state=3, column=X[feature].to_numpy()
    )
    _same_profile(part, whole)
    alone = feature_profile(gbm, X.iloc[rows], y[rows], feature, grid=grid, n_obs=n_obs, random_state=3)
    assert alone.grid.size != whole.grid.size or not np.array_equal(alone.grid_weights, whole.grid_weights)


def test_a_categorical_sample_with_the_whole_column(clf_pipeline, clf_data):
    X, y = clf_data
    whole = feature_profile(clf_pipeline, X, y, "city", loss="log_loss", n_obs=20, random_state=1)
    rows = sample_rows(len(X), 20, np.random.default_rng(1))
    kw = {"loss": "log_loss", "n_obs": 20, "random_state": 1}
    _same_profile(feature_profile(clf_pipeline, X.iloc[rows], y[rows], "city", column=X["city"], **kw), whole)
    with pytest.raises(InputError, match="'column' must be the values of 'city'"):
        feature_profile(clf_pipeline, X.iloc[rows], y[rows], "city", column=X[["city", "num"]], **kw)


def test_n_jobs_and_chunking_do_not_change_results(gbm, reg_data):
    """n_jobs=2 and tiny chunks give the same tensor as one big call."""
    X, y = reg_data
    ref = feature_profile(gbm, X, y, "x2")
    par = feature_profile(gbm, X, y, "x2", n_jobs=2, chunk_rows=37)
    assert_allclose(par.pred, ref.pred, rtol=0, atol=0)
    assert_allclose(par.ici, ref.ici, rtol=0, atol=0)


def test_ignored_feature_has_flat_ice_and_zero_importance(reg_data):
    """A feature the model ignores: flat ICE, zero ICI, zero importance."""
    X, y = reg_data
    model = LinearRegression().fit(X[["x1", "x2"]].assign(x3=0.0), y)
    prof = feature_profile(model, X, y, "x3")
    assert_allclose(np.ptp(prof.ice, axis=1), 0.0, atol=1e-12)
    assert_allclose(prof.ici, 0.0, atol=1e-12)
    assert prof.importance == pytest.approx(0.0, abs=1e-12)


def test_row_order_does_not_change_importance(gbm, reg_data):
    """Shuffling the rows leaves the global PFI unchanged."""
    X, y = reg_data
    order = np.random.default_rng(0).permutation(len(X))
    a = feature_profile(gbm, X, y, "x2").importance
    b = feature_profile(gbm, X.iloc[order], y[order], "x2").importance
    assert_allclose(a, b, rtol=1e-12)


# --- classification --------------------------------------------------------------------
def test_classifier_pipeline_categorical_feature(clf_pipeline, clf_data):
    """A pipeline with string categories: grid = all levels incl. missing, ICE = probabilities."""
    X, y = clf_data
    prof = feature_profile(clf_pipeline, X, y, "city", loss="log_loss", output="high")
    assert list(prof.grid) == ["oslo", "paris", "rome", None]
    counts = X.city.value_counts(dropna=False)
    assert_allclose(prof.grid_weights[:3], counts[["oslo", "paris", "rome"]].to_numpy() / len(X))
    assert_allclose(prof.grid_weights[3], X.city.isna().mean())
    col = list(clf_pipeline.classes_).index("high")
    for k, level in enumerate(prof.grid):
        X_k = X.assign(city=pd.array([level] * len(X), dtype="str"))
        assert_allclose(prof.ice[:, k], clf_pipeline.predict_proba(X_k)[:, col], atol=1e-12)


def test_classifier_losses_agree_with_sklearn(clf_pipeline, clf_data):
    """At the unmodified rows, log_loss, zero_one and brier agree with sklearn.metrics."""
    X, y = clf_data
    proba = clf_pipeline.predict_proba(X)
    for loss, expected in [
        ("log_loss", log_loss(y, proba, labels=clf_pipeline.classes_)),
        ("zero_one", zero_one_loss(y, clf_pipeline.predict(X))),
        ("brier", brier_score_loss(y, proba, labels=clf_pipeline.classes_)),
    ]:
        prof = feature_profile(clf_pipeline, X, y, "num", grid=5, loss=loss)
        assert prof.model_error == pytest.approx(expected, rel=1e-12), loss


def test_binary_brier_matches_sklearn(clf_data):
    """Binary Brier score is (p_positive - y)^2, as sklearn computes it."""
    X, y = clf_data
    yb = (y == "high").astype(int)
    Xn = X[["num"]]
    clf = LogisticRegression().fit(Xn, yb)
    prof = feature_profile(clf, Xn, yb, "num", grid=4, loss="brier")
    assert prof.model_error == pytest.approx(brier_score_loss(yb, clf.predict_proba(Xn)[:, 1]))


def test_categorical_grid_uses_levels_of_whole_data(forest_clf, clf_data):
    """With a small n_obs sample, the grid still holds every level of the full data."""
    X, y = clf_data
    prof = feature_profile(forest_clf, X, y, "size", n_obs=5, random_state=0, loss="zero_one")
    assert list(prof.grid) == ["S", "M", "L"]
    assert prof.ice.shape == (5, 3)


def test_boolean_feature_grid(forest_clf, clf_data):
    """A boolean column is treated as two levels, weighted by frequency."""
    X, y = clf_data
    prof = feature_profile(forest_clf, X, y, "flag", loss="brier")
    assert list(prof.grid) == [False, True]
    assert_allclose(prof.grid_weights[1], X.flag.mean())
    assert_allclose(prof.pi @ prof.grid_weights, prof.importance)


def test_integer_column_takes_fractional_grid(clf_data):
    """An integer column in mixed-type data accepts a quantile grid between integers."""
    X, y = clf_data
    Xi = X.assign(count=np.arange(len(X)) % 7)
    model = FormulaModelInt()
    prof = feature_profile(model, Xi, None, "count", grid=[0.5, 2.0, 6.5])
    assert_allclose(prof.pd, [1.0, 4.0, 13.0])


def test_feature_profiles_accepts_one_label(gbm, reg_data):
    """feature_profiles('x1') profiles the column x1, not the characters 'x' and '1'."""
    from compute import feature_profiles

    X, y = reg_data
    assert list(feature_profiles(gbm, X, y, "x1", grid=4)) == ["x1"]


class FormulaModelInt:
    """predict = 2 * count (a black box reading one column of a mixed frame)."""

    def predict(self, X):
        return 2.0 * X["count"].to_numpy(dtype=float)


def test_off_grid_rows_share_the_stream_with_the_tensor(gbm, reg_data):
    """On a quantile grid the unmodified rows ride at the end of the tensor's stream; chunks
    straddling both give the same base predictions and ICI as one call."""
    X, y = reg_data
    ref = feature_profile(gbm, X, y, "x1", grid=7, engine="predict")
    small = feature_profile(gbm, X, y, "x1", grid=7, chunk_rows=13, n_jobs=2, engine="predict")
    assert_allclose(small.base_pred, gbm.predict(X), rtol=0, atol=0)
    assert_allclose(small.ici, ref.ici, rtol=0, atol=0)


def test_distinct_values_are_counted_up_to_the_cap_a_rule_needs():
    """distinct_up_to(column, cap) is min(nunique(dropna=False), cap + 1) whatever the column:
    from the first rows when they already hold more than cap values, else over every row
    (a column whose first rows repeat a few values and whose last rows hold many)."""
    rng = np.random.default_rng(0)
    n = 30_000
    columns = {
        "continuous": pd.Series(rng.normal(size=n)),
        "few": pd.Series(rng.integers(0, 7, n).astype(float)),
        "few with missing": pd.Series(np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 7, n))),
        "many late": pd.Series(np.r_[np.zeros(20_000), rng.normal(size=10_000)]),
        "categories": pd.Series(rng.choice(["a", "b", "c"], n)).astype("category"),
        "short": pd.Series(rng.normal(size=50)),
    }
    for name, column in columns.items():
        exact = int(column.nunique(dropna=False))
        for cap in (0, 2, 3, 7, 8, 49, 50, 10_000, 40_000):
            assert distinct_up_to(column, cap) == min(exact, cap + 1), (name, cap)
