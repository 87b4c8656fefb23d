"""suggest_subgroups: tree splits on ICI curves against a brute-force scan and the seed's X3 simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression

import compute
from compute.datasets import x3_interaction
from compute.splits import between as _between


@pytest.fixture(scope="module")
def x3():
    """Seed 000, Sec. 6.1: the forest of the demo on 600 explained test rows."""
    X, y = x3_interaction(1100, random_state=0)
    model = RandomForestRegressor(60, min_samples_leaf=5, random_state=0, n_jobs=1).fit(X[:500], y[:500])
    Xt, yt = X[500:].reset_index(drop=True), y[500:]
    profiles = {f: compute.feature_profile(model, Xt, yt, f, grid=40) for f in ("X1", "X2")}
    return Xt, profiles


def weighted_ss(curves: np.ndarray, w: np.ndarray) -> float:
    """sum_i sum_k w_k (c_ik - mean_k)^2, written out."""
    centred = curves - curves.mean(axis=0)
    return float((centred**2 * w).sum())


def brute_force_best(prof, X, columns, min_leaf):
    """Every single split on the given columns: numeric at each gap between sorted values,
    categorical one level against the rest; the best (gain, column, left mask)."""
    curves, w = prof.ici, prof.grid_weights
    root = weighted_ss(curves, w)
    best = (-np.inf, None, None)
    for col in columns:
        values = X[col].to_numpy()
        if pd.api.types.is_numeric_dtype(X[col]) and not pd.api.types.is_bool_dtype(X[col]):
            candidates = [values <= t for t in np.unique(values)[:-1]]
        else:
            candidates = [values == level for level in pd.unique(values)]
        for left in candidates:
            if min(left.sum(), (~left).sum()) < min_leaf:
                continue
            gain = root - weighted_ss(curves[left], w) - weighted_ss(curves[~left], w)
            if gain > best[0] + 1e-9 * root:
                best = (gain, col, left)
    return best[0] / root, best[1], best[2]


def test_top_split_equals_a_brute_force_scan_of_all_single_splits(x3):
    """The tree's first split is the best of all single splits on X2 and X3 (for X1) and
    on X1 and X3 (for X2), with the same share of the ICI sum of squares and the same rows."""
    Xt, profiles = x3
    for feature, prof in profiles.items():
        others = [c for c in Xt.columns if c != feature]
        found = compute.suggest_subgroups(prof, Xt, min_leaf_share=0.05)
        root = next(s for s in found.splits if s.depth == 0)
        share, column, left = brute_force_best(prof, Xt, others, min_leaf=int(np.ceil(0.05 * len(Xt))))
        assert root.column == column == "X3"
        assert root.share == pytest.approx(share, rel=1e-9)
        parsed = compute.parse_subgroup(root.left, Xt).to_numpy()
        assert (parsed == left).all() or (parsed == ~left).all()


def test_x3_simulation_top_suggestion_is_x3_with_the_importances_of_table_1(x3):
    """Seed 000, Table 1: X1 matters on X3 == 0 only, X2 on X3 == 1 only. The top suggestion
    for each is the split on X3, and its two sides carry those importances."""
    Xt, profiles = x3
    for feature, prof in profiles.items():
        found = compute.suggest_subgroups(prof, Xt)
        top = found.splits[0]
        assert top.column == "X3" and {top.left, top.right} == {"X3 == 0", "X3 == 1"}
        assert top.share > 0.2 and found.best_share == top.share
        important = "X3 == 0" if feature == "X1" else "X3 == 1"
        pfi = {top.left: top.importance_left, top.right: top.importance_right}
        other = top.right if top.left == important else top.left
        assert pfi[important] > 20 * abs(pfi[other])
        # each side's PFI is the PFI within that subgroup (the mean ICI integral, Eq. 9)
        mask = compute.parse_subgroup(important, Xt).to_numpy()
        assert pfi[important] == pytest.approx(prof.local_importance[mask].mean(), rel=1e-12)


def test_additive_model_has_no_split_explaining_much():
    """No interaction (a linear model of a linear truth): no split explains more than a few
    per cent of the ICI variation of any feature."""
    rng = np.random.default_rng(1)
    n = 1200
    X = pd.DataFrame(
        {"X1": rng.normal(size=n), "X2": rng.normal(size=n), "X3": rng.binomial(1, 0.5, n), "X4": rng.uniform(size=n)}
    )
    y = 3 * X.X1 + 2 * X.X2 + 5 * X.X3 + X.X4 + rng.normal(scale=0.7, size=n)
    model = LinearRegression().fit(X[:400], y[:400])
    Xt, yt = X[400:].reset_index(drop=True), y[400:].to_numpy()
    for feature in X.columns:
        found = compute.suggest_subgroups(compute.feature_profile(model, Xt, yt, feature, grid=30), Xt)
        assert found.best_share < 0.05, (feature, found.best_share)


def test_every_condition_parses_to_the_rows_the_tree_counted(x3):
    """Each child's condition, parsed by the subgroup language, selects exactly n rows, and
    its PFI is the mean ICI integral over them; children partition their node."""
    Xt, profiles = x3
    prof = profiles["X1"]
    found = compute.suggest_subgroups(prof, Xt, max_depth=3, min_leaf_share=0.05)
    assert len(found.splits) >= 3
    for split in found.splits:
        left = compute.parse_subgroup(split.left, Xt).to_numpy()
        right = compute.parse_subgroup(split.right, Xt).to_numpy()
        node = compute.parse_subgroup(split.node, Xt).to_numpy() if split.node else np.ones(len(Xt), bool)
        assert left.sum() == split.n_left and right.sum() == split.n_right
        assert not (left & right).any() and ((left | right) == node).all()
        assert min(split.n_left, split.n_right) >= np.ceil(0.05 * len(Xt))
        assert split.importance_left == pytest.approx(prof.local_importance[left].mean(), rel=1e-12)
    assert found.total_share == pytest.approx(sum(s.share for s in found.splits))
    assert found.total_share <= 1 + 1e-12


def test_categorical_levels_and_missing_values_make_parseable_conditions():
    """A text column defines the interaction (one level against the rest), a numeric column
    with missing values sends them to the upper side: both parse back to the same rows."""
    rng = np.random.default_rng(3)
    n = 900
    X = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "city": rng.choice(["Bern", "Basel", "Chur"], size=n),
            "age": np.where(rng.uniform(size=n) < 0.1, np.nan, rng.uniform(20, 60, size=n)),
        }
    )
    y = X.x * np.where(X.city == "Chur", 8.0, 0.5) + rng.normal(scale=0.3, size=n)

    class Model:  # a closed-form model of the truth, using the text column
        def predict(self, frame):
            return frame.x.to_numpy() * np.where(frame.city.to_numpy() == "Chur", 8.0, 0.5)

    prof = compute.feature_profile(Model(), X, y, "x", grid=25)
    found = compute.suggest_subgroups(prof, X, max_depth=2)
    top = found.splits[0]
    assert top.column == "city" and top.left == "city == 'Chur'"
    assert top.right == "city != 'Chur'"
    for split in found.splits:
        for cond, count in ((split.left, split.n_left), (split.right, split.n_right)):
            assert compute.parse_subgroup(cond, X).sum() == count, cond
    _, column, left = brute_force_best(prof, X, ["city", "age"], min_leaf=int(np.ceil(0.05 * n)))
    assert column == "city" and (compute.parse_subgroup(top.left, X).to_numpy() == left).all()

    # a numeric split with missing values: the missing rows are on the '>' side
    age_only = compute.suggest_subgroups(prof, X, features=["age"], max_depth=1)
    (split,) = age_only.splits
    assert split.right.endswith("or age is missing)") and split.left.startswith("age <= ")
    assert compute.parse_subgroup(split.right, X).sum() == split.n_right


def test_suggestions_inside_a_subgroup_carry_its_condition(x3):
    """Within the rows of a subgroup, every suggestion starts with that subgroup."""
    Xt, profiles = x3
    prof = profiles["X1"]
    mask = compute.parse_subgroup("X2 > 0 or X2 < -1", Xt)
    found = compute.suggest_subgroups(prof, Xt, mask=mask, condition="X2 > 0 or X2 < -1")
    assert found.n_rows == int(mask.sum())
    top = found.splits[0]
    assert top.column == "X3" and top.left.startswith("(X2 > 0 or X2 < -1) and X3 ==")
    assert compute.parse_subgroup(top.left, Xt).sum() == top.n_left


def test_flat_curves_give_no_suggestion():
    """A feature the model ignores has flat (zero) ICI curves: nothing to split."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200)})
    y = 2 * X.a.to_numpy()
    model = LinearRegression().fit(X[["a"]], y)

    class OnlyA:
        def predict(self, frame):
            return model.predict(frame[["a"]])

    found = compute.suggest_subgroups(compute.feature_profile(OnlyA(), X, y, "b", grid=10), X)
    assert found.splits == () and found.best_share == 0.0


def test_readable_thresholds_split_exactly_where_the_data_splits():
    """The threshold is the shortest decimal d with low <= d < high."""
    assert _between(0.312, 0.4) == 0.32 and _between(0.312, 0.312001) == 0.312 and _between(99.2, 101.0) == 100.0
    for low, high in [(0.312, 0.4), (-1.2345, -1.2344), (99.2, 101.0), (3.0, 3.0000001), (-0.5, 0.5)]:
        d = _between(low, high)
        assert low <= d < high
        assert len(repr(d)) <= max(len(repr(low)), len(repr(high)))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_depth": 0}, "max_depth"),
        ({"min_leaf_share": 0.7}, "min_leaf_share"),
        ({"features": ["nope"]}, "nope"),
        ({"mask": np.ones(3, bool)}, "mask"),
    ],
)
def test_bad_parameters_are_named(x3, kwargs, message):
    Xt, profiles = x3
    with pytest.raises(compute.InputError, match=message):
        compute.suggest_subgroups(profiles["X1"], Xt, **kwargs)


def test_rows_missing_from_X_and_profiles_without_target_are_refused(x3):
    Xt, profiles = x3
    with pytest.raises(compute.InputError, match="lacks 100 of the profile's rows"):
        compute.suggest_subgroups(profiles["X1"], Xt.iloc[100:])
    X, y = x3_interaction(200)
    model = LinearRegression().fit(X, y)
    with pytest.raises(compute.InputError, match="needs the target"):
        compute.suggest_subgroups(compute.feature_profile(model, X, None, "X1", grid=5), X)


def test_conditions_stay_exact_on_awkward_data():
    """Review findings: a subgroup whose 'or' is spelt without spaces is bracketed; integers
    above 2**53 split on their own values; infinities and mixed-type text columns do not
    break the finder. Every condition selects exactly the rows the tree counted."""
    rng = np.random.default_rng(4)
    n = 400
    big = 2**53 + 2 * rng.integers(0, 50, n)
    X = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "w": rng.normal(size=n),
            "big": big.astype(np.int64),
            "edge": np.where(rng.uniform(size=n) < 0.05, -np.inf, rng.normal(size=n)),
            "mixed": pd.Series(rng.choice(["a", 1], n).tolist(), dtype=object),
        }
    )
    y = X.x * np.where(X.big > 2**53 + 50, 6.0, 0.5) + rng.normal(scale=0.2, size=n)

    class Model:
        def predict(self, frame):
            return frame.x.to_numpy() * np.where(frame.big.to_numpy() > 2**53 + 50, 6.0, 0.5)

    prof = compute.feature_profile(Model(), X, y, "x", grid=15)
    condition = "w >= 1 or(w <= -1)"
    mask = compute.parse_subgroup(condition, X)
    for found in (
        compute.suggest_subgroups(prof, X, features=["big", "edge", "mixed", "w"]),
        compute.suggest_subgroups(prof, X, features=["big", "edge", "mixed"], mask=mask, condition=condition),
    ):
        assert found.splits and found.splits[0].column == "big"
        for split in found.splits:
            for cond, count in ((split.left, split.n_left), (split.right, split.n_right)):
                assert compute.parse_subgroup(cond, X).sum() == count, cond
    assert found.splits[0].left.startswith("(w >= 1 or(w <= -1)) and ")
