"""ProfileSummary: the per-row aggregations the dashboard shows equal the library's own.

Global CI and its out-of-range share against ``compute.global_contextual_importance``,
one row's CIU against ``compute.contextual_importance`` (phi0 != 0.5 included), conditional
PFI against ``FeatureProfile.subset``, and one tie rule for the influential rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.linear_model import LinearRegression

import compute
from compute import ProfileSummary, rank_extremes


@pytest.fixture(scope="module")
def linear():
    """A linear model on correlated features: no single row reaches the box's corner, so
    sweeps leave the prediction range over X (rows flagged out of range)."""
    rng = np.random.default_rng(3)
    n = 200
    a = rng.normal(size=n)
    X = pd.DataFrame({"a": a, "b": -0.8 * a + 0.3 * rng.normal(size=n), "c": rng.uniform(-1, 1, n)})
    y = 2.0 * X["a"] + 1.5 * X["b"] - 0.5 * X["c"] + rng.normal(0, 0.1, n)
    model = LinearRegression().fit(X, y)
    profiles = compute.feature_profiles(model, X, y, grid="observed")
    out_range = compute.output_range(model, X)
    summary = ProfileSummary.from_profiles(profiles, out_range=out_range)
    return model, X, y, profiles, summary


def test_impact_and_pd_importance_are_the_librarys_per_profile(linear):
    """The summary carries each feature's ICE feature impact and PD importance, computed from
    its profile by the library's own functions (the dashboard's impact and FIRM views read
    them there); a linear model's impact is |b| x sd(x) on the observed grid."""
    model, X, _, profiles, summary = linear
    assert list(summary.impact.index) == list(profiles) == list(summary.pd_importance.index)
    for name, prof in profiles.items():
        pd.testing.assert_series_equal(summary.impact.loc[name], compute.ice_impact(prof), check_names=False)
        assert summary.pd_importance[name] == compute.pd_importance(prof)
    coef = dict(zip(X.columns, model.coef_))
    assert_allclose(summary.impact["impact"], [abs(coef[c]) * X[c].std(ddof=0) for c in X.columns], rtol=1e-9)


def test_a_feature_with_one_value_has_no_impact():
    """One numeric value (and missing): no slope, so no impact; PD importance is still given."""
    X = pd.DataFrame({"a": np.linspace(-1, 1, 30), "k": [1.0] * 29 + [np.nan]})
    y = 2.0 * X["a"]
    model = LinearRegression().fit(X.fillna(0.0), y)
    profiles = {"a": compute.feature_profile(model, X.fillna(0.0), y, "a")}
    profiles["k"] = compute.feature_profile(_Fills(model), X, y, "k")
    summary = ProfileSummary.from_profiles(profiles, out_range=(-3.0, 3.0))
    assert summary.impact.loc["k"].isna().all() and summary.impact.loc["a"].notna().all()
    assert summary.pd_importance["k"] == compute.pd_importance(profiles["k"])


class _Fills:
    """A model that reads a missing value as 0 (so a column with NaN can be profiled)."""

    def __init__(self, model):
        self.model = model

    def predict(self, X):
        return self.model.predict(X.fillna(0.0))


def test_output_range_is_the_librarys_default(linear):
    model, X, _, _, summary = linear
    pred = model.predict(X)
    # to 1e-12, not bit for bit: OpenBLAS picks its kernels by CPU and block size (DYNAMIC_ARCH), so a
    # linear model's last bit may differ between predicting all rows and predicting them in chunks
    assert_allclose(summary.out_range, (pred.min(), pred.max()), rtol=1e-12, atol=0)


def test_global_ci_and_out_of_range_share_equal_the_library(linear):
    """A monotone model's ICE extremes sit at the feature's min and max, which both the
    observed grid and the library's sweep contain: the numbers must agree exactly, the
    out-of-range share included (the dashboard's old rule, CI > 1 only, flagged none)."""
    model, X, _, _, summary = linear
    ours = summary.global_ci()
    ref = compute.global_contextual_importance(model, X, n_samples=5)
    assert_allclose(ours["CI"], ref["CI"].reindex(ours.index), rtol=1e-10)
    assert_allclose(ours["out_of_range_share"], ref["out_of_range_share"].reindex(ours.index), atol=1e-12)
    assert ours["out_of_range_share"].max() > 0.1
    old_rule = ((summary.ice_max - summary.ice_min) / np.subtract(*summary.out_range[::-1]) > 1).mean()
    assert (ours["out_of_range_share"] > old_rule.reindex(ours.index)).any()


@pytest.mark.parametrize("phi0, utility", [(0.5, "increasing"), (0.2, "increasing"), (0.7, "decreasing")])
def test_one_rows_ciu_equals_the_library(linear, phi0, utility):
    model, X, _, _, summary = linear
    row = X.index[17]
    ours = summary.ciu(row, phi0=phi0, utility=utility)
    ref = compute.contextual_importance(model, X, row, n_samples=5, phi0=phi0, utility=utility)
    for column in ("CI", "CU", "influence", "ymin", "ymax", "y", "out_of_range"):
        assert_allclose(
            ours[column].astype(float),
            ref[column].reindex(ours.index).astype(float),
            rtol=1e-10,
            atol=1e-12,
            err_msg=column,
        )
    # influence = CI (CU - phi0): a phi0 that is ignored would leave these equal for 0.5
    assert_allclose(ours["influence"], ours["CI"] * (ours["CU"] - phi0), rtol=1e-12)


def test_conditional_pfi_equals_the_subset_profiles(linear):
    _, X, _, profiles, summary = linear
    mask = X["c"] > 0.2
    table = summary.conditional_pfi(mask, excluded=[X.index[0], X.index[3]])
    for feature, prof in profiles.items():
        assert_allclose(table.loc[feature, "subgroup"], prof.subset(mask).importance, rtol=1e-12)
        assert_allclose(table.loc[feature, "complement"], prof.subset(~mask).importance, rtol=1e-12)
        keep = ~X.index.isin(X.index[[0, 3]])
        assert_allclose(table.loc[feature, "without excluded"], prof.local_importance[keep].mean(), rtol=1e-12)
    assert table.attrs["counts"] == {
        "all": 200,
        "subgroup": int(mask.sum()),
        "complement": int((~mask).sum()),
        "without excluded": 198,
    }


def test_rank_extremes_one_tie_rule():
    """Ties go to the earlier row in both lists; NaN is never ranked; no row twice."""
    values = np.array([1.0, 3.0, 3.0, np.nan, 0.0, 0.0, 3.0])
    largest, smallest = rank_extremes(values, 2)
    assert largest.tolist() == [1, 2] and smallest.tolist() == [4, 5]
    largest, smallest = rank_extremes(np.array([2.0, 2.0, 2.0]), 2)
    assert largest.tolist() == [0, 1] and smallest.tolist() == []  # both would be rows 0 and 1


def test_influential_uses_the_tie_rule_and_the_mask():
    rows = pd.Index([10, 11, 12, 13, 14])
    local = pd.DataFrame({"f": [5.0, 7.0, 7.0, -1.0, -1.0]}, index=rows)
    summary = ProfileSummary(
        features=("f",),
        local=local,
        ice_min=local,
        ice_max=local,
        base_pred=pd.Series(0.0, index=rows),
        base_loss=pd.Series(0.0, index=rows),
        out_range=(0.0, 1.0),
    )
    table = summary.influential("f", k=1)
    assert table.index.tolist() == [11, 13] and table["rank"].tolist() == ["most influential", "least influential"]
    assert table.attrs == {"n_negative": 2, "n": 5}
    mask = pd.Series([True, False, True, False, True], index=rows)
    assert summary.influential("f", k=1, mask=mask).index.tolist() == [12, 14]
    with pytest.raises(compute.InputError, match="not among"):
        summary.influential("g")


def test_extremes_of_a_profile_follow_the_same_rule(linear):
    _, _, _, profiles, summary = linear
    prof = profiles["a"]
    assert prof.extremes(3).largest.tolist() == summary.influential("a", k=3).index[:3].tolist()
