"""Model, data and target together."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from compute.errors import ModelError
from compute.intervention import Design

from .errors import LoadError, close_matches, short
from .onnx import OnnxModel


def infer_task(model, y: pd.Series) -> str:
    """Return "classification" for a model with ``classes_`` or ``predict_proba``, else "regression".

    ``y`` is not needed to decide today; it is accepted so callers need not change if a
    model ever leaves the task open.
    """
    if isinstance(model, OnnxModel):
        return "classification" if model._estimator_type == "classifier" else "regression"
    if hasattr(model, "predict_proba") or hasattr(model, "classes_"):
        return "classification"
    return "regression"


def check_model_data(model, data: pd.DataFrame, target, *, name: str = "model") -> tuple[pd.DataFrame, pd.Series]:
    """The model's inputs X and the target y from ``data``, checked to fit ``model``.

    Raises :class:`LoadError` naming the column and the file. When the model records no
    column names, the non-target columns are used in file order and ``X.attrs["notes"]``
    says so (a list of strings to show the user).
    """
    where = data.attrs.get("name", "the data")
    columns = list(data.columns)
    try:
        present = target in data.columns
    except TypeError:
        present = False
    if not present:
        hint = close_matches(target, columns, n=3)
        maybe = f" Did you mean {', '.join(repr(h) for h in hint)}?" if hint else ""
        shown = columns[:20] + (["..."] if len(columns) > 20 else [])
        raise LoadError(f"The target column {target!r} is not in {where}.{maybe} Columns: {shown}.", field="target")
    if len(data) < 2:
        raise LoadError(f"{where} has {len(data)} row; at least 2 are needed.", field="data")
    notes: list[str] = []
    names = getattr(model, "feature_names_in_", None)
    as_frame = True
    if names is not None:
        names = list(names)
        if target in names:
            raise LoadError(
                f"{target!r} is an input column of {name}, so it cannot be the target; "
                f"choose the column {name} predicts.",
                field="target",
            )
        missing = [c for c in names if c not in data.columns]
        if missing:
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            hints = []
            for col in missing[:3]:
                close = close_matches(col, columns, n=1)
                if close:
                    hints.append(f"{close[0]!r} for {col!r}")
            maybe = f" (did you mean {', '.join(hints)}?)" if hints else ""
            raise LoadError(
                f"{where} lacks {len(missing)} column(s) that {name} was trained on: "
                f"{missing[:10]}{more}{maybe}. Column names must match exactly.",
                field="data",
            )
        X = data[names]
    else:
        cols = [c for c in columns if c != target]
        n_in = getattr(model, "n_features_in_", None)
        if n_in is not None:
            as_frame = False
            if len(cols) != n_in:
                raise LoadError(
                    f"{name} expects {n_in} input columns but {where} has {len(cols)} "
                    f"besides the target {target!r}. {name} does not record column names, "
                    f"so the data must hold exactly its inputs, in training order.",
                    field="data",
                )
            shown = [str(c) for c in cols[:10]] + (["..."] if len(cols) > 10 else [])
            notes.append(
                f"{name} does not record its input column names; the {n_in} columns of "
                f"{where} other than {target!r} are used in file order: {shown}."
            )
        X = data[cols]
    counts = X.isna().sum()
    counts = counts[counts > 0]
    if len(counts):
        listed = ", ".join(f"{c!r} ({n} row{'s' if n > 1 else ''})" for c, n in counts.head(10).items())
        raise LoadError(
            f"{where} has missing values in {len(counts)} input column(s): {listed}. Fill them or drop those rows.",
            field="data",
        )
    y = data[target]
    if y.isna().any():
        first = y.index[y.isna().to_numpy()][0]
        raise LoadError(
            f"The target column {target!r} has {int(y.isna().sum())} missing value(s) "
            f"(first in row {first!r}); drop those rows.",
            field="target",
        )
    y = _check_target(model, y, target, name, where)
    _check_prediction(model, X, as_frame, y, name, where)
    X.attrs["notes"] = notes  # X is a new frame (copy-on-write): data.attrs is untouched
    return X, y


def _check_target(model, y: pd.Series, target, name: str, where: str) -> pd.Series:
    if infer_task(model, y) == "regression":
        if not pd.api.types.is_numeric_dtype(y.dtype) or pd.api.types.is_bool_dtype(y.dtype):
            raise LoadError(
                f"{name} is a regressor, so the target must be numeric, but {target!r} in "
                f"{where} holds text (e.g. {y.iloc[0]!r}): it looks like a class label. "
                f"Choose a numeric target, or upload a classifier.",
                field="target",
            )
        values = y.astype(float)
        if not np.isfinite(values.to_numpy()).all():
            raise LoadError(f"The target column {target!r} has infinite values; fix those rows.", field="target")
        return values
    try:
        classes = getattr(model, "classes_", None)
    except ModelError as exc:
        raise LoadError(str(exc), field="model") from exc
    if classes is None:
        raise LoadError(
            f"{name} has predict_proba but no classes_, so its probability columns cannot be matched to labels.",
            field="model",
        )
    classes = np.asarray(classes)
    codes = _label_codes(y, classes)
    if (codes < 0).any():
        unknown = pd.unique(y.to_numpy()[codes < 0])[:5].tolist()
        raise LoadError(
            f"The target column {target!r} holds labels that {name} does not know: "
            f"{unknown}; its classes are {classes.tolist()[:20]}. Choose the column the "
            f"model was trained to predict, or check the labels' spelling.",
            field="target",
        )
    if len(np.unique(codes)) < 2:
        raise LoadError(
            f"The target column {target!r} has a single class ({y.iloc[0]!r}) in {where}; "
            f"importance for a classifier needs at least two classes in the data.",
            field="target",
        )
    return pd.Series(classes[codes], index=y.index, name=y.name)


def _label_codes(y: pd.Series, classes: np.ndarray) -> np.ndarray:
    """Position of each label in ``classes``; -1 if unknown. Tolerates int/float/str mixes."""
    values = y.to_numpy()
    try:
        codes = pd.Index(classes).get_indexer(values)
    except (TypeError, ValueError):
        codes = np.full(len(values), -1)
    if (codes < 0).any():
        as_text = pd.Index([str(c) for c in classes])
        if as_text.is_unique:
            text = y.astype(str)
            if pd.api.types.is_float_dtype(y.dtype) and np.all(values == np.round(values)):
                text = pd.Series(values.astype(np.int64)).astype(str)
            codes = np.where(codes < 0, as_text.get_indexer(text.to_numpy(dtype=object)), codes)
    return codes


def _check_prediction(model, X: pd.DataFrame, as_frame: bool, y: pd.Series, name: str, where: str) -> None:
    k = min(5, len(X))
    block = Design(X.iloc[:k], as_frame=as_frame).block(np.arange(k), {})
    proba = infer_task(model, y) == "classification" and hasattr(model, "predict_proba")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = np.asarray(model.predict_proba(block) if proba else model.predict(block))
    except Exception as exc:
        detail = str(exc) if isinstance(exc, ModelError) else f"{type(exc).__name__}: {short(exc)}"
        raise LoadError(f"{name} failed to predict on {k} rows of {where}: {detail}", field="model") from exc
    expected = (k, len(model.classes_)) if proba else (k,)
    if out.ndim == 2 and out.shape[1] == 1 and expected == (k,):
        out = out[:, 0]
    if out.shape != expected:
        raise LoadError(
            f"{name} returned an array of shape {out.shape} for {k} rows of {where}; expected {expected}.",
            field="model",
        )
    if infer_task(model, y) == "regression" and not pd.api.types.is_numeric_dtype(out.dtype):
        raise LoadError(
            f"{name} predicts {out.dtype} values (e.g. {out[0]!r}) but has no classes_; "
            f"a regressor must predict numbers.",
            field="model",
        )
