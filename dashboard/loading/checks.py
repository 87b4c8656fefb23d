"""Model, data and target together."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd

from compute.errors import InputError, ModelError
from compute.validation import close_matches, encode_target, make_predictor, resolve_loss, unseen_levels

from .errors import LoadError


def infer_task(model) -> str:
    """ "classification" for a model with ``classes_`` (compute's rule), else "regression"."""
    try:
        return "classification" if getattr(model, "classes_", None) is not None else "regression"
    except ModelError as exc:  # an ONNX classifier whose labels cannot be read
        raise LoadError(str(exc), field="model") from exc


#: how each door confirms the column order of a model that names no inputs (the message says it)
PAGE_CONFIRM = "tick 'the columns are in the order the model was trained on' and press Load again"
CLI_CONFIRM = "run the command again with --columns-in-order"
PYTHON_CONFIRM = "call again with columns_in_order=True"


def check_model_data(
    model,
    data: pd.DataFrame,
    target,
    *,
    name: str = "model",
    output=None,
    loss: str | None = None,
    order_confirmed: bool | None = None,
    confirm_how: str = PAGE_CONFIRM,
) -> tuple[pd.DataFrame, pd.Series]:
    """The model's inputs X and the target y from ``data``, checked to fit ``model``.

    The rules are compute's own (:func:`compute.validation.make_predictor` for the model's
    columns, classes and ``output`` class, :func:`~compute.validation.resolve_loss` and
    :func:`~compute.validation.encode_target` for the loss and the target, the predictor's
    output check on a few rows); their :class:`InputError` becomes a :class:`LoadError` on
    the input it concerns. What only the page needs is checked here: the target column is
    present and not one of the model's inputs, two rows or more, two classes or more, no
    missing inputs. When the model records no column names, the non-target columns are
    used in file order and ``X.attrs["notes"]`` says so (a list of strings for the user);
    the page asks the user to confirm that order first (``order_confirmed=False`` refuses,
    showing the order and ``confirm_how``: how the door that asked confirms it; None, for
    library callers, only notes it).
    """
    where = str(data.attrs.get("name", "the data"))
    _check_rows(data, target, where)
    recorded = getattr(model, "feature_names_in_", None)
    if recorded is not None and target in list(recorded):
        raise LoadError(
            f"{target!r} is an input column of {name}, so it cannot be the target; choose the column {name} predicts.",
            field="target",
        )
    predictor, X = _predictor(model, data, target, recorded, name=name, where=where)
    notes: list[str] = []
    if recorded is None and _looks_headerless(data.columns):
        notes.append(
            f"The column names of {where} are all numbers: if the file has no header row, its first row was "
            "taken as the names (and left out of the data). Add a header row if so."
        )
    if recorded is None and order_confirmed is False:
        order = ", ".join(str(c) for c in X.columns[:30]) + (", ..." if X.shape[1] > 30 else "")
        raise LoadError(
            f"{name} does not name its {X.shape[1]} inputs (one tensor of numbers), so it will be fed the columns "
            f"of {where} other than {target!r} in this order: {order}. If that is the order it was trained on, "
            f"{confirm_how}; otherwise reorder the file's columns.",
            field="data",
        )
    if recorded is None:
        shown = [str(c) for c in X.columns[:10]] + (["..."] if X.shape[1] > 10 else [])
        notes.append(
            f"{name} does not record its input column names; the {X.shape[1]} columns of "
            f"{where} other than {target!r} are used in file order: {shown}."
        )
    if output is not None:
        try:
            predictor, X = make_predictor(model, X, output, data_name=where, model_name=name)
        except InputError as exc:
            raise LoadError(str(exc), field="output") from exc
    try:
        loss_obj = resolve_loss(loss, predictor)
    except InputError as exc:
        raise LoadError(str(exc), field="loss") from exc
    y = data[target]
    try:
        encoded = encode_target(
            y, len(X), predictor, loss_obj, name=f"The target column {target!r} of {where}", model_name=name
        )
    except InputError as exc:
        raise LoadError(str(exc), field="target") from exc
    if predictor.is_classifier:
        assert predictor.classes is not None
        if len(np.unique(encoded)) < 2:
            raise LoadError(
                f"The target column {target!r} has a single class ({y.iloc[0]!r}) in {where}; "
                f"importance for a classifier needs at least two classes in the data.",
                field="target",
            )
        y = pd.Series(predictor.classes[encoded], index=y.index, name=y.name)
    else:
        y = y.astype(float)
    notes += _unseen_levels(model, X, name, where)
    notes += _missing_values(predictor, X, name, where)  # before the probe below: it would meet them
    # a model that is cheap to call (an ONNX graph: load_probe_rows) predicts many rows, so an output
    # that depends on the batch size, or is NaN for some rows only, is refused here, not in a computation
    _probe(model, predictor, X, name, where)
    X.attrs["notes"] = notes  # X is a new frame (copy-on-write): data.attrs is untouched
    return X, y


def _check_rows(data: pd.DataFrame, target, where: str) -> None:
    """The target column is in the data (else the closest names), and two rows or more."""
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


def _predictor(model, data: pd.DataFrame, target, recorded, *, name: str, where: str):
    """compute's predictor of the model on the data's other columns, and those columns as it
    takes them (``recorded``: the column names the model records, or None)."""
    inputs = data.drop(columns=[target])
    try:
        predictor, X = make_predictor(model, inputs, data_name=where, model_name=name)
        if hasattr(model, "check_columns"):  # a booster: text where it was trained on numbers
            model.check_columns(X)
    except ModelError as exc:
        raise LoadError(str(exc), field="model") from exc
    except InputError as exc:
        field = "model" if "predict_proba" in str(exc) else "data"
        if recorded is not None and _looks_headerless(data.columns):
            expected = ", ".join(repr(str(c)) for c in list(recorded)[:6])
            first = ", ".join(str(c) for c in list(data.columns)[:6])
            raise LoadError(
                f"{where} seems to have no header row: its column names are numbers ({first}, ...), so its first row "
                f"was read as the names, while {name} expects named columns ({expected}, ...). Add a header row "
                "with the model's column names.",
                field="data",
            ) from exc
        raise LoadError(str(exc), field=field) from exc
    return predictor, X


def _probe(model, predictor, X: pd.DataFrame, name: str, where: str) -> None:
    """The model predicts a few rows (many for a model cheap to call: an ONNX graph's
    ``load_probe_rows``), so an output that depends on the batch size, or is NaN for some rows
    only, is refused here, not in a computation."""
    probe = getattr(model, "load_probe_rows", None)
    k = min(probe(X.shape[1]) if callable(probe) else 5, len(X))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predictor.raw(predictor.design.block(np.arange(k), {}))
    except ModelError as exc:
        raise LoadError(_probe_failure(exc, name, where, X), field="model") from exc


def _probe_failure(exc: ModelError, name: str, where: str, X: pd.DataFrame) -> str:
    """The load's message for a model that failed on the first rows: the model's own message
    when it names the file (an ONNX model's), with the labels of the rows concerned."""
    own = exc.__cause__
    if not isinstance(own, ModelError) or not str(own).startswith(name):
        return f"{name} on {where}: {exc}"
    rows = getattr(own, "rows", None)
    if rows is None or not len(rows):
        return f"{own} Seen when predicting {where}."
    labels = ", ".join(str(label) for label in X.index[rows[:5]]) + (", ..." if len(rows) > 5 else "")
    counted = " (data rows counted from 0)" if isinstance(X.index, pd.RangeIndex) else ""
    return f"{own} Rows of {where}{counted}: {labels}."


_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?(\.\d+)?\s*")


def _looks_headerless(columns) -> bool:
    """All column names read like numbers (pandas adds ".1" to repeated ones): the file's first
    data row was probably taken as its header."""
    names = [str(c) for c in columns]
    return len(names) >= 2 and all(_NUMBER.fullmatch(n) for n in names)


MISSING_PROBE = 50  # rows with a missing value the model is asked about, per column


def _missing_values(predictor, X: pd.DataFrame, name: str, where: str) -> list[str]:
    """Missing input values are accepted when the model predicts on the rows that hold them
    (an imputer in the pipeline, or a model that takes NaN): for each column with missing
    values, the model predicts its first MISSING_PROBE such rows. A model that cannot is
    refused with its own message, naming the column and the rows. Columns with no values at
    all (all missing) are named together: refused only where the model cannot predict with
    them, else a note says they have no curve and a PFI of 0."""
    counts = X.isna().sum()
    counts = counts[counts > 0]
    if not len(counts):
        return []
    empty = [c for c, n in counts.items() if n == len(X)]
    notes = _empty_columns(predictor, X, empty, name, where) if empty else []
    counts = counts.drop(empty)
    for column, count in counts.items():
        rows = np.flatnonzero(X[column].isna().to_numpy())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                predictor.raw(predictor.design.block(rows[:MISSING_PROBE], {}))
        except ModelError as exc:
            labels = ", ".join(str(label) for label in X.index[rows[:5]])
            raise LoadError(
                f"{name} cannot predict the rows of {where} where {column!r} is missing ({count} row"
                f"{'s' if count > 1 else ''}, first: {labels}): {exc} Fill or drop them, or load a model that "
                "handles missing values (an imputer in its pipeline, or a histogram gradient boosting model).",
                field="data",
            ) from exc
    if not len(counts):
        return notes
    listed = ", ".join(f"{c!r} ({n} row{'s' if n > 1 else ''})" for c, n in counts.head(10).items())
    return notes + [
        f"{where} has missing values in {len(counts)} input column(s): {listed}. {name} predicts on those rows; "
        "the curves show 'missing' as a point of its own and PFI shuffles missing values like the others."
    ]


def _empty_columns(predictor, X: pd.DataFrame, empty: list, name: str, where: str) -> list[str]:
    """Input columns with no values in these rows: the model is asked about its first rows
    (every row has them missing). Refused, naming them, when it cannot predict; else a note."""
    listed = ", ".join(repr(str(c)) for c in empty[:10]) + (", ..." if len(empty) > 10 else "")
    some = "s" if len(empty) > 1 else ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predictor.raw(predictor.design.block(np.arange(min(MISSING_PROBE, len(X))), {}))
    except ModelError as exc:
        raise LoadError(
            f"The input column{some} {listed} of {where} hold{'' if some else 's'} no values (all missing), and "
            f"{name} cannot predict with {'them' if some else 'it'} missing: {exc} Fill {'them' if some else 'it'} "
            "in, or load a model that reads missing values (XGBoost, LightGBM, CatBoost, a histogram gradient "
            "boosting model, or a pipeline with an imputer).",
            field="data",
        ) from exc
    return [
        f"The input column{some} {listed} of {where} hold{'' if some else 's'} no values (all missing); {name} "
        f"reads {'them' if some else 'it'} as missing values, so {'they have' if some else 'it has'} no curve and "
        "a PFI of 0 (shuffling missing values among themselves changes no prediction)."
    ]


def _unseen_levels(model, X: pd.DataFrame, name: str, where: str) -> list[str]:
    """Categorical levels the model's fitted encoders never saw: refused when the encoder
    fails on them (handle_unknown='error'), a note with their share otherwise."""
    notes = []
    for column, levels, count, known in model.unseen_levels(X) if hasattr(model, "unseen_levels") else []:
        shown = ", ".join(repr(v) for v in levels[:5]) + (" ..." if len(levels) > 5 else "")
        trained = ", ".join(repr(v) for v in known[:8]) + (" ..." if len(known) > 8 else "")
        if model.refuses_unseen_levels:
            first = ", ".join(str(r) for r in X.index[X[column].isin(levels).to_numpy()][:5])
            raise LoadError(
                f"{column!r} in {where} has level(s) {name} never saw: {shown} ({count} row{'s' if count > 1 else ''}, "
                f"first: {first}). XGBoost knows only the levels it was trained on ({trained}) and refuses others. "
                "Recode or drop those rows, or leave the cells empty to predict them as missing values.",
                field="data",
            )
        notes.append(
            f"{column!r}: {count} row{'s' if count > 1 else ''} ({count / len(X):.0%}) of {where} hold level(s) "
            f"{name} never saw ({shown}; it was trained on {trained}); it predicts them as a missing value, as "
            "its library does."
        )
    for found in unseen_levels(model, X):
        levels = ", ".join(repr(v) for v in found.levels[:5]) + (" ..." if len(found.levels) > 5 else "")
        known = ", ".join(repr(v) for v in found.known[:8]) + (" ..." if len(found.known) > 8 else "")
        rows = f"{found.rows} row{'s' if found.rows > 1 else ''}"
        if found.handle_unknown == "error":
            first = ", ".join(str(r) for r in found.first_rows)
            raise LoadError(
                f"{found.column!r} in {where} has level(s) {name} never saw: {levels} ({rows}, first: {first}). "
                f"Its {found.encoder} knows {known} and is set to handle_unknown='error', so it fails on those "
                "rows. Recode or drop them, or refit the model with handle_unknown='ignore'.",
                field="data",
            )
        how = (
            f"encodes them as {found.unknown_value!r}"
            if found.encoder == "OrdinalEncoder"
            else "encodes them as all zeros (no level)"
        )
        notes.append(
            f"{found.column!r}: {rows} ({found.rows / len(X):.0%}) of {where} hold level(s) {name} never saw "
            f"({levels}); its {found.encoder} {how} (handle_unknown={found.handle_unknown!r}), so those rows' "
            f"predictions do not use {found.column!r}."
        )
    return notes
