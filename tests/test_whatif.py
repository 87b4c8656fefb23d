"""What-if for one observation (issue 14, item 2): the edited prediction is the model's on the
edited row, the ICE curves are the model's on the intervened rows, CIU agrees with the
library's other two CIU paths, and bad edits are named."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.compose import make_column_transformer
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

import compute


@pytest.fixture(scope="module")
def mixed():
    """Numeric, integer and categorical columns; a forest regressor and a pipeline classifier."""
    rng = np.random.default_rng(3)
    n = 240
    X = pd.DataFrame(
        {
            "age": rng.uniform(1, 80, n).round(1),
            "siblings": rng.integers(0, 6, n),
            "fare": rng.gamma(2.0, 15.0, n),
            "klass": rng.choice(["1st", "2nd", "3rd"], n),
        }
    )
    X.index = [f"p{i}" for i in range(n)]
    y_reg = 0.05 * X["age"] - 0.4 * X["siblings"] + 0.02 * X["fare"] + (X["klass"] == "1st") + rng.normal(0, 0.2, n)
    y_cls = (y_reg > y_reg.median()).map({True: "yes", False: "no"})
    encode = make_column_transformer((OneHotEncoder(), ["klass"]), remainder="passthrough")
    forest = make_pipeline(encode, RandomForestRegressor(n_estimators=20, random_state=0)).fit(X, y_reg)
    logit = make_pipeline(
        make_column_transformer((OneHotEncoder(), ["klass"]), remainder="passthrough"), LogisticRegression(max_iter=500)
    ).fit(X, y_cls)
    return X, forest, logit


def _brute_curve(model, row: pd.DataFrame, feature, grid, proba_class=None) -> np.ndarray:
    rows = pd.concat([row] * len(grid), ignore_index=True)
    rows[feature] = list(grid)
    if proba_class is None:
        return model.predict(rows)
    return model.predict_proba(rows)[:, list(model.classes_).index(proba_class)]


def test_edited_prediction_is_the_models_on_the_edited_row(mixed):
    X, forest, _ = mixed
    res = compute.what_if(forest, X, "p7", {"age": 33.5, "klass": "1st", "siblings": 4})
    by_hand = X.loc[["p7"]].copy()
    by_hand["age"], by_hand["klass"], by_hand["siblings"] = 33.5, "1st", 4
    assert res.prediction == pytest.approx(forest.predict(by_hand)[0], rel=1e-12)
    assert res.original_prediction == pytest.approx(forest.predict(X.loc[["p7"]])[0], rel=1e-12)
    assert res.change == pytest.approx(res.prediction - res.original_prediction)
    # only the values that change count as edits
    asked = {"age": 33.5, "klass": "1st", "siblings": 4}
    assert set(res.edits) == {c for c, v in asked.items() if X.loc["p7", c] != v} and "age" in res.edits
    assert res.values.loc["age", "original"] == X.loc["p7", "age"] and res.values.loc["age", "edited"] == 33.5


def test_curves_are_the_models_predictions_over_each_grid(mixed):
    X, forest, logit = mixed
    edits = {"fare": 120.0, "klass": "3rd"}
    for model, cls in ((forest, None), (logit, "yes")):
        res = compute.what_if(model, X, "p11", edits, output=cls, grid=25)
        assert res.output == cls
        for feature, grid in res.grids.items():
            assert_allclose(res.curves[feature][0], _brute_curve(model, X.loc[["p11"]], feature, grid, cls), rtol=1e-10)
            assert_allclose(res.curves[feature][1], _brute_curve(model, res.edited, feature, grid, cls), rtol=1e-10)
        assert res.categorical["klass"] and list(res.grids["klass"]) == ["1st", "2nd", "3rd"]
        assert res.grids["age"][0] == X["age"].min() and res.grids["age"][-1] == X["age"].max()
        assert len(res.grids["fare"]) == 25


def test_ciu_of_the_original_row_equals_the_profile_path(mixed):
    """The unedited row's CIU is what ``ciu_from_profiles`` reads off feature profiles on the
    same grids: the same numbers by two code paths."""
    X, forest, _ = mixed
    res = compute.what_if(forest, X, "p3", {"age": 70.0}, grid=30)
    profiles = compute.feature_profiles(forest, X, features=list(X.columns), grid=30)
    expected = compute.ciu_from_profiles(profiles, "p3", out_range=res.out_range)
    pd.testing.assert_frame_equal(res.original_ciu, expected, rtol=1e-10)
    # the default output range is the library's (the predictions' range over X)
    assert res.out_range == pytest.approx(compute.output_range(forest, X))


def test_ciu_of_the_edited_row_matches_contextual_importance_on_a_linear_model():
    """For a linear model a feature's extremes sit at its min and max, which both CIU
    sweeps include, so the edited row's CI and CU equal ``contextual_importance`` on the
    edited row; and CI has the closed form |b_j| (max_j - min_j) / (MAX - MIN)."""
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    model = LinearRegression().fit(X, 2 * X["a"] - X["b"] + 0.5 * X["c"])
    res = compute.what_if(model, X, 4, {"a": 1.25, "c": -0.5})
    direct = compute.contextual_importance(model, X, res.edited, out_range=res.out_range)
    assert_allclose(res.ciu[["CI", "CU"]].to_numpy(), direct[["CI", "CU"]].to_numpy(), rtol=1e-9)
    low, high = res.out_range
    closed = np.abs(model.coef_) * (X.max() - X.min()).to_numpy() / (high - low)
    assert_allclose(res.ciu["CI"].to_numpy(), closed, rtol=1e-9)
    # CU of a: where the edited value sits between the extremes (b_a > 0: increasing)
    assert res.ciu.loc["a", "CU"] == pytest.approx((1.25 - X["a"].min()) / (X["a"].max() - X["a"].min()))


def test_no_edit_and_edits_equal_to_the_row_change_nothing(mixed):
    X, forest, _ = mixed
    row = X.loc["p5"]
    res = compute.what_if(forest, X, "p5", {"age": float(row["age"]), "klass": row["klass"]})
    assert res.edits == {} and res.prediction == res.original_prediction
    pd.testing.assert_frame_equal(res.ciu, res.original_ciu)
    assert compute.what_if(forest, X, "p5").edits == {}


def test_values_keep_the_columns_types(mixed):
    X, forest, _ = mixed
    whole = compute.what_if(forest, X, "p1", {"siblings": 3.0})
    assert whole.edited["siblings"].dtype == X["siblings"].dtype and whole.edits["siblings"] == 3
    half = compute.what_if(forest, X, "p1", {"siblings": 2.5})
    assert half.edited.iloc[0]["siblings"] == 2.5  # the model is asked about 2.5, not 2
    cat = X.assign(klass=X["klass"].astype("category"))
    res = compute.what_if(forest, cat, "p1", {"klass": "2nd" if cat.loc["p1", "klass"] != "2nd" else "1st"})
    assert res.edited["klass"].dtype == cat["klass"].dtype
    flags = pd.DataFrame({"x": np.arange(50.0), "flag": [True, False] * 25})
    model = LinearRegression().fit(flags.assign(flag=flags["flag"].astype(float)), np.arange(50.0))
    # a level given as its text (as a form sends it) is the level itself
    assert compute.apply_edits(flags, flags.iloc[[0]], {"flag": "False"})[0] == {"flag": False}
    del model


@pytest.mark.parametrize(
    "edits, words",
    [
        ({"agee": 3.0}, ["agee", "Did you mean 'age'"]),
        ({"klass": "4th"}, ["'4th'", "klass", "1st", "2nd", "3rd"]),
        ({"fare": "cheap"}, ["fare", "finite number", "cheap"]),
        ({"fare": float("nan")}, ["fare", "finite number"]),
        (["age", 3], ["'edits'", "dict"]),
    ],
)
def test_bad_edits_are_named(mixed, edits, words):
    X, forest, _ = mixed
    with pytest.raises(compute.InputError) as info:
        compute.what_if(forest, X, "p2", edits)
    for word in words:
        assert word in str(info.value)


def test_bad_instance_and_grid_are_named(mixed):
    X, forest, _ = mixed
    with pytest.raises(compute.InputError, match="'instance'.*'nobody'"):
        compute.what_if(forest, X, "nobody", {})
    with pytest.raises(compute.InputError, match="'grid'"):
        compute.what_if(forest, X, "p2", {}, grid=[1, 2, 3])
    with pytest.raises(compute.InputError, match="features"):
        compute.what_if(forest, X, "p2", {}, features=["age", "nope"])


def test_kept_grids_give_the_call_that_builds_them(mixed):
    """what_if(grids=what_if_grids(X)) on another row is the call that builds its grids,
    number for number; grids missing a feature are refused, naming it."""
    X, forest, _ = mixed
    grids = compute.what_if_grids(X)
    assert list(grids) == list(X.columns) and list(grids["klass"].values) == ["1st", "2nd", "3rd"]
    for row, edits in (("p3", {"age": 30.0}), ("p17", {"klass": "1st"})):
        built = compute.what_if(forest, X, row, edits)
        kept = compute.what_if(forest, X, row, edits, grids=grids)
        for f in X.columns:
            np.testing.assert_array_equal(kept.curves[f], built.curves[f])
            np.testing.assert_array_equal(kept.grids[f], built.grids[f])
        pd.testing.assert_frame_equal(kept.ciu, built.ciu)
        assert kept.prediction == built.prediction
    with pytest.raises(compute.InputError, match=r"missing: \['fare'\]"):
        compute.what_if(forest, X, "p3", grids={f: g for f, g in grids.items() if f != "fare"})


def test_with_its_grids_and_output_range_the_call_reads_the_row_alone(mixed, monkeypatch):
    """Given the grids and CIU's output range, the edited row joins the row's own design,
    not a copy of every row (5.7 s at 10,000,000 x 100): the same curves, CIU and
    predictions as the call that reads all of X, categorical columns and levels included."""
    import compute.whatif as whatif_module

    X, forest, _ = mixed
    grids = compute.what_if_grids(X)
    seen = []
    real = whatif_module.with_instances
    monkeypatch.setattr(whatif_module, "with_instances", lambda p, Xm, *a: seen.append(len(Xm)) or real(p, Xm, *a))
    for row, edits in (("p3", {"age": 30.0}), ("p17", {"klass": "1st", "fare": 80.0}), ("p5", {})):
        built = compute.what_if(forest, X, row, edits)
        alone = compute.what_if(forest, X, row, edits, grids=grids, out_range=built.out_range)
        assert seen[-2:] == [len(X), 1]
        for f in X.columns:
            np.testing.assert_array_equal(alone.curves[f], built.curves[f])
        pd.testing.assert_frame_equal(alone.ciu, built.ciu)
        pd.testing.assert_frame_equal(alone.original_ciu, built.original_ciu)
        pd.testing.assert_frame_equal(alone.edited, built.edited)
        assert (alone.prediction, alone.original_prediction) == (built.prediction, built.original_prediction)
        assert alone.edits == built.edits
