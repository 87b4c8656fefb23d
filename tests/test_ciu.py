"""CIU: the seed's known linear function, classifiers, groups, reading off profiles, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from compute import (
    InputError,
    ciu_from_profiles,
    contextual_importance,
    feature_profile,
    global_contextual_importance,
)

WEIGHTS = np.array([0.4, 0.3, 0.2, 0.1])


class KnownLinear:
    """f(x) = 0.4 x1 + 0.3 x2 + 0.2 x3 + 0.1 x4 (Främling 2022, Sec. 4.1)."""

    def predict(self, X):
        return X[["x1", "x2", "x3", "x4"]].to_numpy() @ WEIGHTS


@pytest.fixture(scope="module")
def unit_cube():
    """All combinations of 0, 0.1, ..., 1 for four features: output range exactly [0, 1]."""
    g = np.round(np.linspace(0, 1, 11), 10)
    grid = np.array(np.meshgrid(g, g, g, g, indexing="ij")).reshape(4, -1).T
    return pd.DataFrame(grid, columns=["x1", "x2", "x3", "x4"])


def test_linear_ci_equals_weights_for_every_instance(unit_cube):
    """CI equals the weights for every instance, whatever the seed (zero variance)."""
    rows = unit_cube.sample(30, random_state=0).index
    for seed in (0, 1, 2):
        table = global_contextual_importance(KnownLinear(), unit_cube, instances=rows, random_state=seed)
        assert_allclose(table.CI, WEIGHTS, atol=1e-12)
        assert_allclose(table.CI_std, 0, atol=1e-12)


def test_linear_cu_equals_instance_value(unit_cube):
    """CU of each feature equals the instance's value of it (utility linear in x on [0, 1])."""
    label = unit_cube.index[1234]
    table = contextual_importance(KnownLinear(), unit_cube, label)
    assert_allclose(table.CU, unit_cube.loc[label].to_numpy(), atol=1e-12)
    assert_allclose(table.CI, WEIGHTS, atol=1e-12)


def test_linear_influence_zero_at_centre(unit_cube):
    """At x = (0.5, 0.5, 0.5, 0.5) the contextual influence is 0 (Table 2 of the seed)."""
    centre = pd.DataFrame([[0.5] * 4], columns=unit_cube.columns)
    table = contextual_importance(KnownLinear(), unit_cube, centre)
    assert_allclose(table.influence, 0, atol=1e-12)
    assert_allclose(table.CU, 0.5, atol=1e-12)
    assert_allclose(table.y, 0.5)


def test_decreasing_utility_flips_cu(unit_cube):
    """With a decreasing utility, CU = 1 - (increasing CU)."""
    label = unit_cube.index[77]
    up = contextual_importance(KnownLinear(), unit_cube, label)
    down = contextual_importance(KnownLinear(), unit_cube, label, utility="decreasing")
    assert_allclose(down.CU, 1 - up.CU, atol=1e-12)


def test_group_is_swept_jointly(unit_cube):
    """A group of features gets the CI of the sum of its weights (corners of the box)."""
    table = contextual_importance(
        KnownLinear(), unit_cube, unit_cube.index[5], features={"x12": ["x1", "x2"], "x34": ["x3", "x4"]}
    )
    assert_allclose(table.loc["x12", "CI"], 0.7, atol=1e-12)
    assert_allclose(table.loc["x34", "CI"], 0.3, atol=1e-12)


def test_regression_default_range_is_prediction_range(unit_cube):
    """Without out_range, a regressor's range is that of its predictions over X; an
    instance beyond the data makes the model overshoot it: CI > 1 is kept and flagged."""
    sub = unit_cube[unit_cube.x1 <= 0.5]  # predictions over X lie in [0, 0.8]
    inside = contextual_importance(KnownLinear(), sub, sub.index[10])
    assert_allclose(inside.CI, WEIGHTS * [0.5, 1, 1, 1] / 0.8, atol=1e-12)
    assert not inside.out_of_range.any()
    far = pd.DataFrame([[3.0, 0.5, 0.5, 0.5]], columns=unit_cube.columns)  # y = 1.5 > 0.8
    table = contextual_importance(KnownLinear(), sub, far)
    assert table.loc["x1", "CI"] == pytest.approx(1.2 / 0.8)
    assert table.out_of_range.all()  # y itself lies above MAX for every feature


def test_classifier_with_categorical_feature(forest_clf, clf_data):
    """A classifier: range [0, 1], categorical features swept over all levels (brute force)."""
    X, _ = clf_data
    label = X.index[3]
    table = contextual_importance(forest_clf, X, label, output="high")
    col = list(forest_clf.classes_).index("high")
    probs = []
    for level in ["oslo", "paris", "rome", None]:
        row = X.loc[[label]].assign(city=pd.array([level], dtype="str"))
        probs.append(forest_clf.predict_proba(row)[0, col])
    y = forest_clf.predict_proba(X.loc[[label]])[0, col]
    assert table.loc["city", "ymin"] == pytest.approx(min(probs + [y]))
    assert table.loc["city", "ymax"] == pytest.approx(max(probs + [y]))
    assert table.loc["city", "CI"] == pytest.approx(max(probs + [y]) - min(probs + [y]))
    assert table.loc["city", "y"] == pytest.approx(y)


def test_read_off_profiles_matches_direct_ciu(unit_cube):
    """CIU read off ICE rows of observed-grid profiles equals the direct computation
    for a monotone model (both include each feature's min and max)."""
    X = unit_cube.sample(200, random_state=1)
    model = KnownLinear()
    profiles = {f: feature_profile(model, X, None, f) for f in X.columns}
    pred = model.predict(X)
    row = X.index[17]
    read = ciu_from_profiles(profiles, row, out_range=(pred.min(), pred.max()))
    direct = contextual_importance(model, X, row)
    pd.testing.assert_frame_equal(read, direct, atol=1e-12)


def test_constant_feature_has_zero_ci_and_undefined_cu(unit_cube):
    """A constant feature: CI 0, CU NaN, influence 0 (documented, not an error)."""
    X = unit_cube.assign(x4=0.3)
    table = contextual_importance(KnownLinear(), X, X.index[0], out_range=(0, 1))
    assert table.loc["x4", "CI"] == 0 and np.isnan(table.loc["x4", "CU"])
    assert table.loc["x4", "influence"] == 0


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(instance="nope"), "'instance' 'nope' is neither a row label"),
        (dict(phi0=1.5), "'phi0' parameter must be a number in \\[0, 1\\]"),
        (dict(out_range=(1, 1)), "MIN < MAX"),
        (dict(out_range="wide"), "'out_range' parameter must be a pair"),
        (dict(utility="sideways"), "'utility' parameter must be one of"),
        (dict(n_samples=-1), "'n_samples' parameter must be an int"),
        (dict(features=["x9"]), "Unknown feature 'x9'"),
        (dict(output="yes"), "only for classifiers"),
    ],
)
def test_bad_arguments(unit_cube, params, match):
    """Bad arguments raise InputError naming the parameter."""
    args = dict(instance=unit_cube.index[0]) | params
    with pytest.raises(InputError, match=match):
        contextual_importance(KnownLinear(), unit_cube, args.pop("instance"), **args)


def test_unknown_output_class(forest_clf, clf_data):
    """An output class the classifier does not have is named."""
    X, _ = clf_data
    with pytest.raises(InputError, match="'output' class 'huge'"):
        contextual_importance(forest_clf, X, X.index[0], output="huge")


def test_chunks_across_features_do_not_change_results(forest_clf, clf_data):
    """Chunks that straddle several features' sweeps (and threads) give identical CIU."""
    X, _ = clf_data
    labels = list(X.index[:3])
    ref = global_contextual_importance(forest_clf, X, instances=labels, random_state=4)
    small = global_contextual_importance(forest_clf, X, instances=labels, random_state=4, chunk_rows=7, n_jobs=2)
    pd.testing.assert_frame_equal(ref, small)
