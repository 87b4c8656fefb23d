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
    assert found.text.startswith(
        "X1's importance comes from rows where X3 == 1: read from its ICI curves (every row set to each value of "
        "its grid, not the bars' few shuffles), it is 218 there, against 2.50"
    )
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


def _skill(**given) -> compute.Skill:
    base = dict(loss="zero_one", model_error=0.314, baseline_error=0.344, skill=0.0872, low=0.03, high=0.14)
    base.update(n_rows=2000, level=0.95, constant="no", accuracy=0.686, baseline_accuracy=0.656, majority="no")
    base.update(given)
    return compute.Skill(**base)


def test_the_verdict_opens_with_the_constant_it_beats_and_how_clearly():
    """Issue 39: 'barely better than always answering no: accuracy 0.686 against 0.656'."""
    (found,) = findings.verdict({"churn": _skill()}, None, loss="0-1 loss")
    assert found.topic == "performance" and found.numbers["skill"] == pytest.approx(0.0872)
    assert found.text.startswith("churn is barely better than always answering 'no': accuracy 0.686 against 0.656")
    assert "95% interval 0.0300 to 0.140" in found.text and "0 no better than the constant" in found.text
    # the words follow the interval: not clearly better when it holds 0, worse when all of it is below
    words = {
        (0.02, -0.01, 0.05): "not clearly better than",
        (-0.2, -0.3, -0.1): "worse than",
        (0.3, 0.25, 0.35): "is better than",
        (0.9, 0.88, 0.92): "much better than",
    }
    for (skill, low, high), said in words.items():
        text = findings.verdict({"m": _skill(skill=skill, low=low, high=high)}, None, loss="0-1 loss")[0].text
        assert said in text, text
    regression = _skill(loss="squared_error", constant=12.5, accuracy=None, baseline_accuracy=None, majority=None)
    text = findings.verdict({"ridge": regression}, None, loss="squared error")[0].text
    assert text.startswith("ridge is barely better than always predicting the mean (12.5): its squared error is 0.314")
    shares = _skill(loss="log_loss", constant={"no": 0.656, "yes": 0.344})
    text = findings.verdict({"m": shares}, None, loss="log loss", rows_note=", on the rows it trained on")[0].text
    assert (
        "log loss (the loss PFI uses) is 0.314 against 0.344 for giving every row the class shares (65.6% 'no')" in text
    )
    assert text.endswith("constant), on the rows it trained on.")


def test_with_several_models_the_verdict_names_the_best_and_whether_the_rows_tell_it_apart():
    skills = {"a": _skill(), "b": _skill(skill=0.2, low=0.15, high=0.25)}
    for low, said in ((0.01, "its lead over a is more than its uncertainty"), (-0.01, "cannot tell it from a")):
        comparison = compute.ModelComparison(
            "zero_one", {"b": 0.27, "a": 0.314}, "b", "a", 0.044, 0.02, low, 0.08, 2000, 0.95
        )
        first, second = findings.verdict(skills, comparison, loss="0-1 loss")
        assert first.text.startswith("b is better than always answering 'no'")  # the best model's verdict
        assert second.text.startswith("Of the 2 models, b does best (0-1 loss 0.270; a 0.314)")
        assert said in second.text and "paired on the same 2,000 rows" in second.text
        assert second.text.endswith("The sentences below describe b.")
