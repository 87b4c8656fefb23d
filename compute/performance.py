"""How good the model is, and where: its error on any rows, from one prediction pass.

Permutation importance (Casalicchio et al. 2018, Eq. 8) is a *change* in the model's error;
this module gives the error itself. :func:`predict_rows` calls the model once on every row
(batched like every other pass); :func:`model_performance`, :func:`confusion_matrix` and
:func:`calibration_curve` then summarise any subset of those rows (a subgroup, its
complement) without calling the model again.

The error under the loss PFI uses (``model_error``) is the mean of the same pointwise loss
:func:`~compute.permutation_importance` averages, so on the same rows it equals
``permutation_importance(...).model_error``. The other metrics are the usual ones and agree
with scikit-learn's: RMSE, MAE and R² for a regressor; accuracy, the AUC of the output class
against the rest, log loss and the Brier score for a classifier.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from .errors import InputError
from .losses import LOSS_LABELS, builtin_loss
from .prediction import Predictor, default_chunk_rows
from .validation import (
    check_frame,
    check_int,
    check_n_jobs,
    check_real,
    encode_target,
    make_predictor,
    resolve_loss,
)


@dataclass(frozen=True)
class Predictions:
    """The model's output on every row of X, with what is needed to score it.

    ``raw``: predictions (regressor), class probabilities of shape ``(rows, classes)``
    (classifier with ``predict_proba``) or class positions of the predicted labels
    (classifier without). ``rows``: X's index; ``output_index``: the class whose
    probability the curves show (the positive class of the AUC and confusion matrix).
    """

    raw: np.ndarray
    rows: pd.Index
    classes: np.ndarray | None
    has_proba: bool
    output_index: int | None

    @property
    def is_classifier(self) -> bool:
        return self.classes is not None

    @classmethod
    def concat(cls, parts: list[Predictions], *, rows: pd.Index | None = None) -> Predictions:
        """The predictions of consecutive blocks of rows as one pass over them all (a pass
        split over workers, joined in row order); ``rows``: the whole pass's index (default:
        the parts' indexes one after another)."""
        if not parts:
            raise InputError("Predictions.concat needs at least one part.")
        first = parts[0]
        for part in parts[1:]:
            same = part.has_proba == first.has_proba and part.output_index == first.output_index
            if not same or not np.array_equal(np.asarray(part.classes), np.asarray(first.classes)):
                raise InputError("Predictions.concat: the parts come from different models or outputs.")
        raw = np.concatenate([p.raw for p in parts], axis=0)
        index = first.rows.append([p.rows for p in parts[1:]]) if rows is None else pd.Index(rows)
        if len(index) != len(raw):
            raise InputError(f"Predictions.concat: {len(raw)} predictions for {len(index)} rows.")
        return cls(raw, index, first.classes, first.has_proba, first.output_index)

    @property
    def output(self):
        return None if self.classes is None else self.classes[self.output_index]

    @property
    def value(self) -> np.ndarray:
        """Per row: the prediction, or the probability of the output class (0/1 without
        probabilities)."""
        return self._predictor().value(self.raw)

    def positives(self, y) -> np.ndarray:
        """Whether each row's label is the output class (labels matched as the losses match
        them: ``"1"`` and ``1.0`` are the class ``1``)."""
        if not self.is_classifier:
            raise InputError("Positives are for a classifier; this model is a regressor.")
        return self._target(y, "zero_one") == self.output_index

    def residuals(self, y) -> np.ndarray:
        """Observed minus predicted, per row (regression)."""
        if self.is_classifier:
            raise InputError("Residuals are for a regressor; a classifier has calibration and a confusion matrix.")
        return self._target(y, "squared_error") - self.raw

    def _predictor(self) -> Predictor:
        return Predictor(None, None, self.classes, self.has_proba, self.output_index)  # type: ignore[arg-type]

    def _target(self, y, loss: str | None) -> np.ndarray:
        predictor = self._predictor()
        return encode_target(y, len(self.rows), predictor, resolve_loss(loss, predictor))


@dataclass(frozen=True)
class Performance:
    """The model's error on some rows.

    ``model_error``: the mean pointwise ``loss`` (the reference error of PFI on those rows).
    ``metrics``: name -> value, for people, in display order (NaN where undefined, such as
    the AUC of rows holding one class).
    """

    n_rows: int
    loss: str
    model_error: float
    metrics: dict[str, float]


def predict_rows(
    model, X: pd.DataFrame, *, output=None, n_jobs: int | None = 1, chunk_rows: int | None = None
) -> Predictions:
    """Call the model once on every row of ``X``, in chunks bounded in memory.

    Parameters
    ----------
    model : fitted estimator with ``predict`` (and ``predict_proba`` for probabilities)
    X : DataFrame of the model's inputs
    output : class whose probability is the positive class (default: the last class)
    n_jobs : threads over the chunks (as in every pass)
    chunk_rows : rows per model call (default: a memory budget, ``prediction.CHUNK_BYTES``)
    """
    X = check_frame(X)
    chunk_rows = check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    n_jobs = check_n_jobs(n_jobs)
    predictor, Xm = make_predictor(model, X, output)
    design = predictor.design
    n = len(Xm)
    width = len(predictor.classes) if predictor.classes is not None else 1
    chunk = chunk_rows or default_chunk_rows(design, width)
    bounds = [(a, min(a + chunk, n)) for a in range(0, n, chunk)]

    def run(a: int, b: int) -> np.ndarray:
        return predictor.raw(design.block(np.arange(a, b), {}))

    if n_jobs == 1 or len(bounds) == 1:
        parts = [run(a, b) for a, b in bounds]
    else:
        parts = Parallel(n_jobs=n_jobs, prefer="threads")(delayed(run)(a, b) for a, b in bounds)
    return Predictions(
        np.concatenate(parts, axis=0), X.index, predictor.classes, predictor.has_proba, predictor.output_index
    )


def model_performance(pred: Predictions, y, *, mask=None, loss: str | None = None) -> Performance:
    """The error of the model on the rows of ``mask`` (all rows by default).

    ``loss``: the loss PFI uses (default: squared error for a regressor, log loss for a
    classifier with probabilities, else the 0-1 loss).
    """
    rows = _rows(pred, mask)
    if rows.sum() == 0:
        raise InputError("No rows are selected, so the model's error is undefined; choose a larger subgroup.")
    predictor = pred._predictor()
    loss_obj = resolve_loss(loss, predictor)
    target = encode_target(y, len(pred.rows), predictor, loss_obj)[rows]
    raw = pred.raw[rows]
    error = float(loss_obj.fn(target, raw).mean())
    metrics: dict[str, float] = {}
    if not pred.is_classifier:
        residual = target - raw
        metrics["RMSE"] = float(np.sqrt(np.mean(residual**2)))
        metrics["MAE"] = float(np.mean(np.abs(residual)))
        spread = float(np.sum((target - target.mean()) ** 2))
        metrics["R²"] = 1.0 - float(np.sum(residual**2)) / spread if spread > 0 else float("nan")
    else:
        zero_one = builtin_loss("zero_one", classification=True, has_proba=pred.has_proba)
        metrics["accuracy"] = 1.0 - float(zero_one.fn(target, raw).mean())
        if pred.has_proba:
            positive = target == pred.output_index
            metrics["AUC"] = _auc(raw[:, pred.output_index], positive)
            for name in ("log_loss", "brier"):
                fn = builtin_loss(name, classification=True, has_proba=True).fn
                metrics[LOSS_LABELS[name]] = float(fn(target, raw).mean())
    return Performance(int(rows.sum()), loss_obj.name, error, metrics)


@dataclass(frozen=True)
class PerformanceGap:
    """The model's error on some rows against the rest: ``inside`` and ``outside`` (mean
    pointwise loss), ``difference`` (inside minus outside), its standard error (Welch: the
    rows' losses as two independent samples) and the 95 % interval (normal)."""

    loss: str
    inside: float
    outside: float
    n_inside: int
    n_outside: int
    difference: float
    std_error: float

    @property
    def interval(self) -> tuple[float, float]:
        return self.difference - 1.96 * self.std_error, self.difference + 1.96 * self.std_error

    @property
    def clear(self) -> bool:
        """The 95 % interval excludes 0: the model really does better on one side."""
        low, high = self.interval
        return low > 0 or high < 0


def performance_gap(pred: Predictions, y, mask, *, loss: str | None = None) -> PerformanceGap:
    """How much worse (or better) the model is on the rows of ``mask`` than on the others,
    in the loss PFI uses, with the difference's standard error; both sides need 2 rows."""
    rows = _rows(pred, mask)
    if rows.sum() < 2 or (~rows).sum() < 2:
        raise InputError("Comparing the model's error needs at least 2 rows inside the subgroup and 2 outside.")
    predictor = pred._predictor()
    loss_obj = resolve_loss(loss, predictor)
    losses = loss_obj.fn(encode_target(y, len(pred.rows), predictor, loss_obj), pred.raw)
    a, b = losses[rows], losses[~rows]
    se = float(np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size))
    return PerformanceGap(
        loss_obj.name, float(a.mean()), float(b.mean()), int(a.size), int(b.size), float(a.mean() - b.mean()), se
    )


def confusion_matrix(pred: Predictions, y, *, mask=None, threshold: float = 0.5) -> pd.DataFrame:
    """Counts of actual (rows) against predicted (columns) for the output class against
    the rest: predicted positive when its probability is at least ``threshold`` (a
    classifier without probabilities: when it predicts that class)."""
    rows = _rows(pred, mask)
    if not pred.is_classifier:
        raise InputError("A confusion matrix is for a classifier; this model is a regressor.")
    threshold = check_real(threshold, "threshold", low=0.0, high=1.0)
    actual = pred.positives(y)[rows]
    predicted = pred.value[rows] >= threshold if pred.has_proba else pred.raw[rows] == pred.output_index
    label = str(pred.output)
    counts = [
        [int(np.sum(~actual & ~predicted)), int(np.sum(~actual & predicted))],
        [int(np.sum(actual & ~predicted)), int(np.sum(actual & predicted))],
    ]
    return pd.DataFrame(
        counts,
        index=pd.Index([f"not {label}", label], name="actual"),
        columns=pd.Index([f"not {label}", label], name="predicted"),
    )


def confusion_accuracy(matrix: pd.DataFrame) -> float:
    """The share of rows a confusion matrix (:func:`confusion_matrix`) counts on its diagonal:
    the accuracy of the thresholded prediction (NaN for a matrix of no rows)."""
    counts = np.asarray(matrix, dtype=float)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1]:
        raise InputError(f"A confusion matrix is square (got shape {counts.shape}).")
    total = counts.sum()
    return float(np.trace(counts) / total) if total > 0 else float("nan")


def calibration_curve(pred: Predictions, y, *, mask=None, n_bins: int = 10) -> pd.DataFrame:
    """The predicted probability of the output class against how often it occurs, in
    ``n_bins`` equal-width bins of the prediction (empty bins left out), as
    :func:`sklearn.calibration.calibration_curve` with ``strategy="uniform"``: the same
    edges (``linspace(0, 1, n_bins + 1)``) and a probability on an inner edge in the lower
    bin (``searchsorted``'s left side), which matters for models whose probabilities fall on
    edges (a k-nearest-neighbour classifier's are multiples of 1/k).

    Returns columns ``predicted`` (mean predicted probability), ``observed`` (share of the
    output class) and ``n`` (rows), one row per non-empty bin.
    """
    rows = _rows(pred, mask)
    if not (pred.is_classifier and pred.has_proba):
        raise InputError("A calibration curve needs class probabilities (a classifier with predict_proba).")
    n_bins = check_int(n_bins, "n_bins", low=1)
    prob = pred.value[rows]
    actual = pred.positives(y)[rows].astype(float)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.searchsorted(edges[1:-1], prob, side="left")
    n = np.bincount(which, minlength=n_bins)
    sums = np.bincount(which, weights=prob, minlength=n_bins)
    hits = np.bincount(which, weights=actual, minlength=n_bins)
    keep = n > 0
    return pd.DataFrame({"predicted": sums[keep] / n[keep], "observed": hits[keep] / n[keep], "n": n[keep]})


def _rows(pred: Predictions, mask) -> np.ndarray:
    if not isinstance(pred, Predictions):
        raise InputError(f"'pred' must be the Predictions of compute.predict_rows (got {type(pred).__name__}).")
    if mask is None:
        return np.ones(len(pred.rows), dtype=bool)
    rows = np.asarray(mask)
    if rows.dtype != bool or rows.shape != (len(pred.rows),):
        raise InputError(f"'mask' must be a boolean array with one entry per row ({len(pred.rows)}).")
    return rows


def _auc(score: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve: the Mann-Whitney statistic with average ranks for ties."""
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = pd.Series(score).rank(method="average").to_numpy()
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
