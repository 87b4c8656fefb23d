"""Issue 39: is the model any good? Skill against the best constant prediction, with its
interval, and which model is best (compute.skill), against closed forms, scikit-learn and a
bootstrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn import metrics
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression

import compute
from compute.caveats import constant_model_error


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=2000), "b": rng.normal(size=2000)})
    y = pd.Series(X["a"] + 0.5 * rng.normal(size=2000), name="y")
    model = LinearRegression().fit(X.iloc[:1000], y.iloc[:1000])
    return X, y, model, compute.predict_rows(model, X)


@pytest.fixture(scope="module")
def classes():
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.normal(size=1500), "b": rng.normal(size=1500)})
    score = X["a"] + rng.normal(size=1500)
    y = pd.Series(np.where(score > 1.2, "churned", np.where(score > -0.3, "stayed", "left")), name="y")
    model = LogisticRegression(max_iter=500).fit(X, y)
    return X, y, model, compute.predict_rows(model, X)


def test_skill_under_squared_error_is_r2_and_the_baseline_the_variance(regression):
    X, y, model, pred = regression
    mask = (X["b"] > 0).to_numpy()
    for rows in (None, mask):
        chosen = slice(None) if rows is None else rows
        found = compute.model_skill(pred, y, mask=rows, loss="squared_error")
        truth, guess = y.to_numpy()[chosen], model.predict(X)[chosen]
        assert_allclose(found.skill, metrics.r2_score(truth, guess), rtol=1e-12)
        assert_allclose(found.baseline_error, constant_model_error(truth, "squared_error"), rtol=1e-12)
        assert_allclose(found.model_error, metrics.mean_squared_error(truth, guess), rtol=1e-12)
        assert found.constant == pytest.approx(truth.mean()) and found.n_rows == len(truth)
        assert found.low < found.skill < found.high


def test_absolute_error_reads_against_the_median(regression):
    X, y, model, pred = regression
    found = compute.model_skill(pred, y, loss="absolute_error")
    assert found.constant == pytest.approx(float(np.median(y)))
    assert_allclose(found.baseline_error, constant_model_error(y, "absolute_error"), rtol=1e-12)
    assert_allclose(found.model_error, metrics.mean_absolute_error(y, model.predict(X)), rtol=1e-12)


def test_classifier_skill_is_mcfadden_under_log_loss_and_names_the_constant(classes):
    X, y, model, pred = classes
    found = compute.model_skill(pred, y, loss="log_loss")
    proba = model.predict_proba(X)
    assert_allclose(found.model_error, metrics.log_loss(y, proba, labels=model.classes_), rtol=1e-9)
    entropy = constant_model_error(y, "log_loss")
    assert_allclose(found.baseline_error, entropy, rtol=1e-12)
    assert_allclose(found.skill, 1 - metrics.log_loss(y, proba, labels=model.classes_) / entropy, rtol=1e-9)
    shares = y.value_counts(normalize=True)
    assert found.constant == pytest.approx(shares.to_dict())  # each class its share, named by label
    assert_allclose(found.accuracy, metrics.accuracy_score(y, model.predict(X)), rtol=1e-12)
    assert_allclose(found.baseline_accuracy, shares.max(), rtol=1e-12)


@pytest.mark.parametrize("loss", ["brier", "zero_one"])
def test_brier_and_zero_one_baselines_are_the_caveats_yardstick(classes, loss):
    X, y, model, pred = classes
    found = compute.model_skill(pred, y, loss=loss)
    assert_allclose(found.baseline_error, constant_model_error(y, loss, n_classes=3), rtol=1e-12)
    if loss == "zero_one":
        assert found.constant == found.majority == y.value_counts().idxmax()  # "always answering 'stayed'"
        assert_allclose(1 - found.model_error, found.accuracy, rtol=1e-12)
        assert_allclose(1 - found.baseline_error, found.baseline_accuracy, rtol=1e-12)


def test_binary_brier_baseline_and_a_weak_model_barely_beats_the_majority():
    """The issue's case: accuracy 0.686 where always answering 'no' gives 0.656."""
    rng = np.random.default_rng(3)
    n = 3000
    X = pd.DataFrame({"x": rng.normal(size=n)})
    y = pd.Series(np.where(0.35 * X["x"] + rng.normal(size=n) > 0.55, "yes", "no"))
    model = LogisticRegression().fit(X, y)
    pred = compute.predict_rows(model, X)
    brier = compute.model_skill(pred, y, loss="brier")
    assert_allclose(brier.baseline_error, constant_model_error(y, "brier"), rtol=1e-12)
    zero_one = compute.model_skill(pred, y, loss="zero_one")
    assert zero_one.constant == "no" and zero_one.baseline_accuracy > 0.6
    assert 0 <= zero_one.accuracy - zero_one.baseline_accuracy < 0.05 and zero_one.skill < 0.15


def test_the_interval_matches_a_paired_bootstrap(regression, classes):
    """The delta method's standard error against 2,000 bootstrap resamples of the rows (the
    constant refitted on each resample, as the skill fits it)."""
    rng = np.random.default_rng(7)
    for (_, y, _, pred), loss in ((regression, "squared_error"), (classes, "log_loss")):
        found = compute.model_skill(pred, y, loss=loss)
        skills = []
        for _ in range(2000):
            pick = rng.integers(0, len(y), len(y))
            resampled = compute.Predictions(
                pred.raw[pick], pd.RangeIndex(len(y)), pred.classes, pred.has_proba, pred.output_index
            )
            skills.append(compute.model_skill(resampled, y.iloc[pick].reset_index(drop=True), loss=loss).skill)
        delta_se = (found.high - found.low) / (2 * 1.959964)
        assert_allclose(delta_se, np.std(skills), rtol=0.12)


def test_compare_models_pairs_the_rows_and_says_when_they_cannot_tell(classes):
    X, y, model, pred = classes
    forest = RandomForestClassifier(n_estimators=30, max_depth=2, random_state=0).fit(X, y)
    rng = np.random.default_rng(5)
    noisy = compute.Predictions(  # the same model, its probabilities nudged a little
        np.clip(pred.raw + rng.normal(scale=1e-3, size=pred.raw.shape), 1e-6, None), pred.rows, pred.classes, True, 0
    )
    noisy = compute.Predictions(noisy.raw / noisy.raw.sum(axis=1, keepdims=True), pred.rows, pred.classes, True, 0)
    preds = {"forest": compute.predict_rows(forest, X), "logistic": pred, "nudged": noisy}
    found = compute.compare_models(preds, y, loss="log_loss")
    errors = {name: compute.model_skill(p, y, loss="log_loss").model_error for name, p in preds.items()}
    assert list(found.errors) == sorted(errors, key=errors.get) and found.errors == pytest.approx(errors)
    assert found.best == min(errors, key=errors.get) and found.best in ("logistic", "nudged")
    assert found.runner_up in ("logistic", "nudged")
    assert not found.clear and found.low < 0 < found.high  # a nudge: these rows cannot tell them apart
    two = compute.compare_models({"forest": preds["forest"], "logistic": pred}, y, loss="log_loss")
    diff = compute.model_skill(preds["forest"], y, loss="log_loss").model_error - errors["logistic"]
    assert two.best == "logistic" and two.difference == pytest.approx(diff) and two.clear
    per_row = []  # the paired standard error, by hand
    for p in (preds["forest"], pred):
        proba = p.raw[np.arange(len(y)), [list(p.classes).index(v) for v in y]]
        per_row.append(-np.log(proba))
    d = per_row[0] - per_row[1]
    assert_allclose(two.std_error, d.std(ddof=1) / np.sqrt(d.size), rtol=1e-9)


def test_bad_input_is_named():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=50)})
    y = pd.Series(np.ones(50))
    pred = compute.predict_rows(LinearRegression().fit(X, y), X)
    with pytest.raises(compute.InputError, match="one value"):
        compute.model_skill(pred, y)
    with pytest.raises(compute.InputError, match="at least two"):
        compute.compare_models({"one": pred}, y)
    with pytest.raises(compute.InputError, match="'level'"):
        compute.model_skill(pred, y + rng.normal(size=50), level=1.5)
