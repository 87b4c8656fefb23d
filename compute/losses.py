"""Pointwise losses L(f(x), y), one value per observation.

Each loss takes the encoded target (floats for regression, class positions for
classification) and the model's raw output for the same rows (predictions; or class
probabilities of shape ``(rows, n_classes)``; or, for a classifier without
``predict_proba``, class positions of the predicted labels) and returns a float array.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

REGRESSION_LOSSES = ("squared_error", "absolute_error")
CLASSIFICATION_LOSSES = ("log_loss", "brier", "zero_one")
LOSS_LABELS = {
    "squared_error": "squared error",
    "absolute_error": "absolute error",
    "log_loss": "log loss",
    "brier": "Brier score",
    "zero_one": "0-1 loss",
}  # for people, in that order
DEFAULT_LOSS = {"regression": "squared_error", "classification": "log_loss"}


@dataclass(frozen=True)
class Loss:
    """A pointwise loss and what it needs from the model."""

    name: str
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    needs_proba: bool = False
    builtin: bool = True  # built-in losses take encoded class positions; callables take y as given


def _squared_error(y, pred):
    return (pred - y) ** 2


def _absolute_error(y, pred):
    return np.abs(pred - y)


def _log_loss(y, proba):
    """-log p(y_i), clipped like :func:`sklearn.metrics.log_loss` (at machine epsilon)."""
    eps = np.finfo(proba.dtype).eps
    p_true = np.take_along_axis(proba, y[:, None].astype(np.intp), axis=1)[:, 0]
    return -np.log(np.clip(p_true, eps, 1.0 - eps))


def _brier(y, proba):
    """Brier score as :func:`sklearn.metrics.brier_score_loss` defines it.

    Binary: (p_positive - 1[y = positive])^2; multiclass: sum over classes of
    (p_k - 1[y = k])^2.
    """
    if proba.shape[1] == 2:
        return (proba[:, 1] - (y == 1)) ** 2
    onehot = y[:, None] == np.arange(proba.shape[1])[None, :]
    return ((proba - onehot) ** 2).sum(axis=1)


def _zero_one_from_proba(y, proba):
    return (np.argmax(proba, axis=1) != y).astype(float)


def _zero_one_from_labels(y, label_pos):
    return (label_pos != y).astype(float)


def builtin_loss(name: str, *, classification: bool, has_proba: bool) -> Loss:
    """The named loss for this kind of model (names are checked by the caller)."""
    if name == "squared_error":
        return Loss(name, _squared_error)
    if name == "absolute_error":
        return Loss(name, _absolute_error)
    if name == "log_loss":
        return Loss(name, _log_loss, needs_proba=True)
    if name == "brier":
        return Loss(name, _brier, needs_proba=True)
    if name == "zero_one":
        fn = _zero_one_from_proba if has_proba else _zero_one_from_labels
        return Loss(name, fn, needs_proba=has_proba)
    raise KeyError(name)
