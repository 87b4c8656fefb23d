"""The model's error on any rows (issue 14, item 1) against scikit-learn's metrics and PFI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn import metrics
from sklearn.calibration import calibration_curve as sk_calibration
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.svm import LinearSVC

import compute


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    y = 2 * X["a"] - X["b"] + rng.normal(scale=0.5, size=300)
    return LinearRegression().fit(X.iloc[:150], y.iloc[:150]), X, y


@pytest.fixture(scope="module")
def multiclass():
    rng = np.random.default_rng(2)
    X = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
    y = pd.Series(np.select([X["a"] > 0.5, X["b"] > 0], ["hi", "mid"], "lo"), name="y")
    y[rng.random(400) < 0.15] = "mid"  # noise: the model is not perfect
    return RandomForestClassifier(n_estimators=20, max_depth=4, random_state=0).fit(X, y), X, y


def test_regression_metrics_equal_sklearns_on_any_rows(regression):
    model, X, y = regression
    pred = compute.predict_rows(model, X)
    assert_allclose(pred.raw, model.predict(X), rtol=1e-12)
    mask = (X["c"] > 0).to_numpy()
    for rows in (None, mask, ~mask):
        sel = np.ones(len(X), bool) if rows is None else rows
        perf = compute.model_performance(pred, y, mask=rows)
        truth, guess = y[sel], model.predict(X[sel])
        assert perf.n_rows == int(sel.sum())
        assert_allclose(perf.model_error, metrics.mean_squared_error(truth, guess), rtol=1e-12)
        assert_allclose(perf.metrics["RMSE"], np.sqrt(metrics.mean_squared_error(truth, guess)), rtol=1e-12)
        assert_allclose(perf.metrics["MAE"], metrics.mean_absolute_error(truth, guess), rtol=1e-12)
        assert_allclose(perf.metrics["R²"], metrics.r2_score(truth, guess), rtol=1e-12)
    assert_allclose(pred.residuals(y), y - model.predict(X), rtol=1e-12)


def test_classification_metrics_equal_sklearns(multiclass):
    model, X, y = multiclass
    pred = compute.predict_rows(model, X, output="mid")
    mask = (X["c"] > 0).to_numpy()
    for rows in (None, mask, ~mask):
        sel = np.ones(len(X), bool) if rows is None else rows
        perf = compute.model_performance(pred, y, mask=rows)
        proba = model.predict_proba(X[sel])
        assert perf.loss == "log_loss"
        assert_allclose(perf.model_error, metrics.log_loss(y[sel], proba, labels=model.classes_), rtol=1e-10)
        assert_allclose(perf.metrics["accuracy"], metrics.accuracy_score(y[sel], model.predict(X[sel])))
        positive = list(model.classes_).index("mid")
        assert_allclose(perf.metrics["AUC"], metrics.roc_auc_score(y[sel] == "mid", proba[:, positive]), rtol=1e-12)
        onehot = (y[sel].to_numpy()[:, None] == model.classes_[None, :]).astype(float)
        assert_allclose(perf.metrics["Brier score"], np.mean(np.sum((proba - onehot) ** 2, axis=1)), rtol=1e-12)


def test_binary_brier_and_loss_choice():
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(200, 2)), columns=["a", "b"])
    y = pd.Series((X["a"] + rng.normal(size=200) > 0).astype(int))
    model = LogisticRegression().fit(X, y)
    pred = compute.predict_rows(model, X)
    perf = compute.model_performance(pred, y, loss="brier")
    p1 = model.predict_proba(X)[:, 1]
    assert_allclose(perf.model_error, metrics.brier_score_loss(y, p1), rtol=1e-12)
    assert_allclose(perf.metrics["Brier score"], metrics.brier_score_loss(y, p1), rtol=1e-12)
    assert_allclose(perf.metrics["log loss"], metrics.log_loss(y, model.predict_proba(X)), rtol=1e-10)


@pytest.mark.parametrize("loss", [None, "zero_one", "brier"])
def test_model_error_is_pfis_reference_error(multiclass, loss):
    """PFI is a change in this error: on the same rows the two agree to rounding."""
    model, X, y = multiclass
    pred = compute.predict_rows(model, X)
    mask = (X["a"] < 1).to_numpy()
    pfi = compute.permutation_importance(model, X[mask], y[mask], loss=loss, n_repeats=1)
    assert_allclose(compute.model_performance(pred, y, mask=mask, loss=loss).model_error, pfi.model_error, rtol=1e-12)


def test_confusion_matrix_at_a_threshold(multiclass):
    model, X, y = multiclass
    pred = compute.predict_rows(model, X, output="hi")
    p = model.predict_proba(X)[:, list(model.classes_).index("hi")]
    for threshold in (0.2, 0.5, 0.8):
        table = compute.confusion_matrix(pred, y, threshold=threshold)
        expected = metrics.confusion_matrix(y == "hi", p >= threshold)
        assert table.to_numpy().tolist() == expected.tolist()
        assert list(table.index) == ["not hi", "hi"] and list(table.columns) == ["not hi", "hi"]
        accuracy = metrics.accuracy_score(y == "hi", p >= threshold)
        assert_allclose(compute.confusion_accuracy(table), accuracy, rtol=1e-15)
    mask = (X["b"] > 0).to_numpy()
    assert compute.confusion_matrix(pred, y, mask=mask).to_numpy().sum() == mask.sum()
    with pytest.raises(compute.InputError, match="threshold"):
        compute.confusion_matrix(pred, y, threshold=1.5)


def test_labels_only_classifier(multiclass):
    """Without predict_proba: accuracy and the 0-1 loss; no AUC, log loss or calibration."""
    _, X, y = multiclass
    model = LinearSVC().fit(X, y)
    pred = compute.predict_rows(model, X, output="lo")
    perf = compute.model_performance(pred, y)
    assert perf.loss == "zero_one" and set(perf.metrics) == {"accuracy"}
    assert_allclose(perf.metrics["accuracy"], metrics.accuracy_score(y, model.predict(X)))
    expected = metrics.confusion_matrix(y == "lo", model.predict(X) == "lo")
    assert compute.confusion_matrix(pred, y).to_numpy().tolist() == expected.tolist()
    with pytest.raises(compute.InputError, match="probabilities"):
        compute.calibration_curve(pred, y)


def test_calibration_curve_equals_sklearns(multiclass):
    model, X, y = multiclass
    pred = compute.predict_rows(model, X, output="mid")
    curve = compute.calibration_curve(pred, y, n_bins=8)
    p = model.predict_proba(X)[:, list(model.classes_).index("mid")]
    observed, predicted = sk_calibration(y == "mid", p, n_bins=8, strategy="uniform")
    assert_allclose(curve["observed"], observed, rtol=1e-12)
    assert_allclose(curve["predicted"], predicted, rtol=1e-12)
    assert curve["n"].sum() == len(X)


@pytest.mark.parametrize("n_bins", [5, 10, 20])
def test_calibration_bins_equal_sklearns_when_probabilities_fall_on_edges(n_bins):
    """A 10-nearest-neighbour classifier's probabilities are tenths: with 5, 10 or 20 bins
    most of them sit on an inner edge, where scikit-learn counts them in the lower bin (the
    upper-bin rule gave 7 bins against scikit-learn's 8 for 10 bins)."""
    rng = np.random.default_rng(5)
    X = pd.DataFrame(rng.normal(size=(500, 2)), columns=["a", "b"])
    y = pd.Series(np.where(X["a"] + rng.normal(scale=0.8, size=500) > 0, "yes", "no"))
    model = KNeighborsClassifier(n_neighbors=10).fit(X, y)
    pred = compute.predict_rows(model, X, output="yes")
    p = model.predict_proba(X)[:, 1]
    on_edge = np.isclose((p * n_bins) % 1, 0) & (p > 0) & (p < 1)
    assert on_edge.mean() > 0.25  # the case this test is about
    curve = compute.calibration_curve(pred, y, n_bins=n_bins)
    observed, predicted = sk_calibration(y == "yes", p, n_bins=n_bins, strategy="uniform")
    assert len(curve) == len(observed)
    assert_allclose(curve["observed"], observed, rtol=1e-12)
    assert_allclose(curve["predicted"], predicted, rtol=1e-12)
    assert curve["n"].sum() == len(X)


def test_auc_is_nan_on_one_class_and_residuals_need_a_regressor(multiclass, regression):
    model, X, y = multiclass
    pred = compute.predict_rows(model, X, output="hi")
    only = (y != "hi").to_numpy()
    assert np.isnan(compute.model_performance(pred, y, mask=only).metrics["AUC"])
    with pytest.raises(compute.InputError, match="regressor"):
        pred.residuals(y)
    with pytest.raises(compute.InputError, match="No rows"):
        compute.model_performance(pred, y, mask=np.zeros(len(X), bool))


def test_chunks_and_threads_give_the_same_predictions(multiclass):
    """Small chunks over two threads: every row predicted once, in order."""
    model, X, y = multiclass
    whole = compute.predict_rows(model, X)
    parts = compute.predict_rows(model, X, chunk_rows=7, n_jobs=2)
    assert_allclose(parts.raw, whole.raw, rtol=0, atol=0)
    assert_allclose(parts.raw, model.predict_proba(X), rtol=1e-12)
    assert parts.rows.equals(X.index)
