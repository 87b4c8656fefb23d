"""What we found (issue 28): each sentence says what its numbers say, and nothing when they
say nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import compute
from compute import findings
from compute.caveats import LeakageCheck
from compute.regional import RegionalSplit, SubgroupSuggestions


def pfi(means: dict, row_se: dict, repeats: int = 10, seed: int = 0) -> compute.PermutationImportance:
    """A PFI result with the given means (the repeats spread tightly around them)."""
    rng = np.random.default_rng(seed)
    values = np.array([m + rng.normal(scale=1e-3, size=repeats) for m in means.values()])
    values -= values.mean(axis=1, keepdims=True) - np.array(list(means.values()))[:, None]
    index = pd.Index(list(means), name="feature")
    return compute.PermutationImportance(
        repeats=pd.DataFrame(values, index=index, columns=[f"repeat_{r + 1}" for r in range(repeats)]),
        model_error=1.0,
        loss="squared_error",
        n_rows=500,
        row_std_error=pd.Series(row_se, name="row_std_error").reindex(index),
    )


def test_reliance_names_the_top_feature_and_its_share():
    found = findings.reliance(
        pfi({"a": 30.0, "b": 10.0, "c": 0.0}, {"a": 1.0, "b": 1.0, "c": 0.1}), model="rf", loss="MSE"
    )
    assert found.topic == "importance" and found.numbers["features"] == ["a"]
    assert found.numbers["share"] == pytest.approx(0.75)
    assert found.text.startswith("rf's performance relies most on a: shuffling it raises the MSE by 30.0 ± 1.00, 75%")
    assert "next is b (10.0 ± 1.00)" in found.text


def test_reliance_names_together_the_features_the_data_cannot_tell_apart():
    # 30 vs 27: a gap of 3 within two standard errors of the difference (2 * hypot(1.5, 1.5) = 4.2)
    found = findings.reliance(
        pfi({"a": 30.0, "b": 27.0, "c": 1.0}, {"a": 1.5, "b": 1.5, "c": 0.1}), model="rf", loss="MSE"
    )
    assert found.numbers["features"] == ["a", "b"] and "cannot tell apart" in found.text
    assert found.numbers["share"] == pytest.approx(57 / 58)
    # with half the standard errors they are told apart
    apart = findings.reliance(
        pfi({"a": 30.0, "b": 27.0, "c": 1.0}, {"a": 0.7, "b": 0.7, "c": 0.1}), model="rf", loss="MSE"
    )
    assert apart.numbers["features"] == ["a"] and "cannot" not in apart.text


def test_reliance_says_nothing_when_no_shuffle_raises_the_error():
    assert findings.reliance(pfi({"a": 0.0, "b": -0.2}, {"a": 0.1, "b": 0.1}), model="rf", loss="MSE") is None


def split(share: float, left: float, right: float) -> SubgroupSuggestions:
    one = RegionalSplit(
        column="X3",
        depth=0,
        node="",
        left="X3 == 0",
        right="X3 == 1",
        left_rule="X3 == 0",
        right_rule="X3 == 1",
        share=share,
        n_left=250,
        n_right=250,
        importance_left=left,
        importance_right=right,
    )
    return SubgroupSuggestions("X1", (one,), 500, (left + right) / 2, share)


def test_where_importance_comes_from_reads_the_strongest_split():
    found = findings.where_importance_comes_from(split(0.35, 2.5, 218.0))
    assert found.text.startswith("X1's importance comes from rows where X3 == 1: its PFI there is 218, against 2.50")
    assert "35%" in found.text
    assert findings.where_importance_comes_from(split(0.05, 2.5, 218.0)) is None  # explains too little
    assert findings.where_importance_comes_from(SubgroupSuggestions("X1", (), 500, 1.0, 0.0)) is None


def interactions(rows) -> compute.InteractionStrength:
    pairs = pd.DataFrame(rows, columns=["feature_1", "feature_2", "h2", "h"])
    return compute.InteractionStrength(
        overall=pd.DataFrame(), pairs=pairs, grids={}, n_rows=200, n_total=500, rows=pd.RangeIndex(200), model_rows=0
    )


def test_acting_together_names_the_strongest_pair_only_when_it_interacts():
    found = findings.acting_together(
        interactions([("X1", "X3", 0.45, 4.6), ("X2", "X3", 0.40, 5.2), ("X1", "X2", 0.001, 0.2)])
    )
    assert found.text.startswith("X1 and X3 act together: 45% of their joint effect")
    assert "also X2 and X3 (40%)" in found.text and found.numbers["pair"] == ["X1", "X3"]
    assert findings.acting_together(interactions([("a", "b", 0.02, 0.1)])) is None
    assert findings.acting_together(interactions([])) is None


def test_inflated_by_dependence_on_correlated_and_independent_features():
    rng = np.random.default_rng(0)
    n, rho = 3_000, 0.9
    x1 = rng.normal(size=n)
    X = pd.DataFrame({"x1": x1, "x2": rho * x1 + np.sqrt(1 - rho**2) * rng.normal(size=n), "x3": rng.normal(size=n)})

    class Linear:
        def predict(self, Z):
            return np.asarray(Z, float) @ np.array([1.0, 2.0, 1.0])

    y = Linear().predict(X) + rng.normal(scale=0.3, size=n)
    cs = compute.conditional_importance(Linear(), X, y, n_repeats=5)
    found = findings.inflated_by_dependence(cs, cs.marginal)
    assert found.numbers["feature"] == "x2"  # the largest fall: 2 b^2 (1 - (1 - rho^2)) = 6.5
    assert "once x1 is known" in found.text and "81%" in found.text
    independent = X.assign(x2=rng.normal(size=n))
    cs = compute.conditional_importance(Linear(), independent, y, n_repeats=5)
    assert findings.inflated_by_dependence(cs, cs.marginal) is None  # nothing predicts anything


def test_leak_warning_only_when_flagged():
    flagged = findings.leak_warning(LeakageCheck(skill=0.994, carriers=["X1"], carried=0.99, flagged=True))
    assert "near-perfect (skill 0.994" in flagged.text and "X1 carries 99%" in flagged.text
    assert findings.leak_warning(LeakageCheck(skill=0.5, carriers=["a", "b"], carried=0.6, flagged=False)) is None


@pytest.mark.parametrize(
    ("value", "text"),
    [(1093.77, "1,094"), (125.28, "125"), (7.864, "7.86"), (0.04567, "0.0457"), (0.0, "0"), (2.5e-6, "2.5e-06")],
)
def test_numbers_are_written_for_people(value, text):
    assert findings.number(value) == text


def test_performance_gap_is_welchs_difference_and_its_sentence_needs_a_clear_interval():
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(3)
    n = 600
    X = pd.DataFrame({"a": rng.normal(size=n), "g": rng.integers(0, 2, size=n)})
    noise = np.where(X["g"] == 1, 2.0, 0.5) * rng.normal(size=n)  # the model is worse where g == 1
    y = 2 * X["a"] + noise
    model = LinearRegression().fit(X, y)
    pred = compute.predict_rows(model, X)
    inside = (X["g"] == 1).to_numpy()
    gap = compute.performance_gap(pred, y, inside)
    losses = (y - model.predict(X)) ** 2
    a, b = losses[inside], losses[~inside]
    assert gap.inside == pytest.approx(a.mean(), rel=1e-12) and gap.outside == pytest.approx(b.mean(), rel=1e-12)
    assert gap.std_error == pytest.approx(np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size), rel=1e-12)
    found = findings.worse_where(gap, subgroup="g == 1", loss="squared error")
    assert found.text.startswith("The model does worse where g == 1: its squared error there is")
    assert "95 % interval" in found.text and gap.clear
    # the same noise everywhere and a subgroup drawn at random: no clear difference, no sentence
    even = 2 * X["a"] + rng.normal(size=n)
    flat = compute.performance_gap(compute.predict_rows(LinearRegression().fit(X, even), X), even, rng.random(n) < 0.5)
    assert not flat.clear and findings.worse_where(flat, subgroup="random", loss="squared error") is None
    with pytest.raises(compute.InputError, match="at least 2 rows"):
        compute.performance_gap(pred, y, np.arange(n) < 1)
