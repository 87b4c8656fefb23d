"""Is the model any good? Its error against a constant prediction's, and which model is best.

Permutation importance (Casalicchio et al. 2018, Eq. 8) says which features a model's
performance relies on; whether that performance is worth explaining is read against the
best *constant* prediction under the same loss (the yardstick of :func:`compute.caveats.
constant_model_error`: the mean for squared error, the median for absolute error, the class
shares for log loss and the Brier score, the most frequent class for the 0-1 loss), fitted
on the same rows. The skill is

    skill = 1 - E_model / E_constant

(R² for squared error, McFadden's pseudo-R² for log loss; 1 is perfect, 0 no better than
the constant). Its interval is the delta method for a ratio of two means paired on the same
rows: with R = E_model / E_constant and z_i = L_model,i - R L_constant,i, the standard error
of R is sd(z) / (sqrt(n) E_constant) (Stuart & Ord, Kendall's Advanced Theory of
Statistics, Vol. 1, §10.5). Two models are compared paired on the same rows: the mean of the
per-row loss differences with its standard error sd(d) / sqrt(n).

Both read the predictions of :func:`compute.predict_rows`: no model is called here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .errors import InputError
from .performance import Predictions, _rows
from .validation import encode_target, resolve_loss

__all__ = ["ModelComparison", "Skill", "compare_models", "model_skill"]


@dataclass(frozen=True)
class Skill:
    """How much better than the best constant prediction a model is on ``n_rows`` rows
    under ``loss``: the two mean losses, ``skill`` = 1 - model_error / baseline_error and
    its ``level`` interval [low, high]. ``constant``: what the constant predicts (a number
    for a regressor; for a classifier the label it answers with the 0-1 loss, else the
    {label: share} it gives every row); ``accuracy``, ``baseline_accuracy`` (the largest
    class share) and ``majority`` (that class) for a classifier."""

    loss: str
    model_error: float
    baseline_error: float
    skill: float
    low: float
    high: float
    n_rows: int
    level: float
    constant: object
    accuracy: float | None = None
    baseline_accuracy: float | None = None
    majority: object = None  # a classifier's most frequent class on the rows (what the constant answers)


@dataclass(frozen=True)
class ModelComparison:
    """Several models' mean losses on the same rows (``errors``, lowest first), the ``best``
    and the ``runner_up``, and how far the runner-up is behind: ``difference`` (its mean
    loss minus the best's, paired on the same rows) with its standard error and ``level``
    interval. ``clear``: the interval excludes 0, so the rows tell the two apart."""

    loss: str
    errors: dict
    best: str
    runner_up: str
    difference: float
    std_error: float
    low: float
    high: float
    n_rows: int
    level: float

    @property
    def clear(self) -> bool:
        return self.low > 0


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise InputError(f"'level' must be between 0 and 1 (got {level!r}).")
    return NormalDist().inv_cdf(0.5 + level / 2)


@dataclass(frozen=True)
class _RowLosses:
    """The model's and the best constant's loss on each row of a mask, under one loss."""

    loss: str
    model: np.ndarray
    constant: np.ndarray
    value: object  # what the constant predicts
    target: np.ndarray  # encoded


def _losses(pred: Predictions, y, mask, loss) -> _RowLosses:
    """The per-row losses of the model and of the best constant on the rows of ``mask``."""
    rows = _rows(pred, mask)
    if rows.sum() < 2:
        raise InputError("Judging a model needs at least 2 rows; choose a larger subgroup.")
    predictor = pred._predictor()
    loss_obj = resolve_loss(loss, predictor)
    if not loss_obj.builtin:
        raise InputError(f"No constant-prediction yardstick for the custom loss {loss_obj.name!r}.")
    target = encode_target(y, len(pred.rows), predictor, loss_obj)[rows]
    raw = pred.raw[rows]
    n = target.size
    if not pred.is_classifier:
        value = float(target.mean() if loss_obj.name == "squared_error" else np.median(target))
        constant_raw: np.ndarray = np.full(n, value)
        constant: object = value
    else:
        classes = list(pred.classes) if pred.classes is not None else []
        shares = np.bincount(target.astype(np.intp), minlength=max(len(classes), int(target.max()) + 1)) / n
        if loss_obj.needs_proba:  # every row gets the class shares (the 0-1 loss: their argmax)
            constant_raw = np.broadcast_to(shares, (n, shares.size)).astype(raw.dtype, copy=False)
        else:
            constant_raw = np.full(n, int(np.argmax(shares)))
        if loss_obj.name == "zero_one":
            constant = classes[int(np.argmax(shares))] if classes else int(np.argmax(shares))
        else:
            constant = {(classes[k] if classes else k): float(s) for k, s in enumerate(shares) if s > 0}
    return _RowLosses(loss_obj.name, loss_obj.fn(target, raw), loss_obj.fn(target, constant_raw), constant, target)


def model_skill(pred: Predictions, y, *, mask=None, loss=None, level: float = 0.95) -> Skill:
    """The model's skill against the best constant prediction under ``loss`` (PFI's loss;
    default as :func:`compute.model_performance`) on the rows of ``mask``, with its
    ``level`` interval (the module docstring gives the formula)."""
    z = _z(level)
    found = _losses(pred, y, mask, loss)
    name, model, constant, value, target = found.loss, found.model, found.constant, found.value, found.target
    e_model, e_constant = float(model.mean()), float(constant.mean())
    if e_constant <= 0:
        raise InputError(
            "The target takes one value on these rows, so a constant predicts it perfectly and no skill can be read."
        )
    ratio = e_model / e_constant
    se = float(np.std(model - ratio * constant, ddof=1) / (np.sqrt(model.size) * e_constant))
    skill = 1.0 - ratio
    accuracy = baseline_accuracy = majority = None
    if pred.is_classifier:
        raw = pred.raw[_rows(pred, mask)]
        accuracy = float(np.mean((np.argmax(raw, axis=1) if pred.has_proba else raw) == target))
        counts = np.bincount(target.astype(np.intp))
        baseline_accuracy = float(counts.max() / target.size)
        position = int(np.argmax(counts))
        majority = pred.classes[position] if pred.classes is not None else position
    return Skill(
        loss=name,
        model_error=e_model,
        baseline_error=e_constant,
        skill=skill,
        low=skill - z * se,
        high=skill + z * se,
        n_rows=int(model.size),
        level=level,
        constant=value,
        accuracy=accuracy,
        baseline_accuracy=baseline_accuracy,
        majority=majority,
    )


def compare_models(
    preds: Mapping[str, Predictions], y, *, mask=None, loss=None, level: float = 0.95
) -> ModelComparison:
    """Which of several models has the lowest mean loss on the same rows, and whether the
    runner-up's lead is beyond its uncertainty (the per-row differences, paired)."""
    if not isinstance(preds, Mapping):
        raise InputError(f"'preds' must map model names to Predictions (got {type(preds).__name__}).")
    if len(preds) < 2:
        raise InputError("Comparing models needs at least two.")
    z = _z(level)
    losses = {}
    for name, pred in preds.items():
        found = _losses(pred, y, mask, loss)
        loss_name, losses[str(name)] = found.loss, found.model
    sizes = {v.size for v in losses.values()}
    if len(sizes) != 1:
        raise InputError("The models' predictions cover different rows; compare them on the same rows.")
    order = sorted(losses, key=lambda m: (float(losses[m].mean()), list(losses).index(m)))
    best, runner = order[0], order[1]
    diff = losses[runner] - losses[best]
    se = float(diff.std(ddof=1) / np.sqrt(diff.size))
    mean = float(diff.mean())
    return ModelComparison(
        loss_name,
        {m: float(losses[m].mean()) for m in order},
        best,
        runner,
        mean,
        se,
        mean - z * se,
        mean + z * se,
        int(diff.size),
        level,
    )
