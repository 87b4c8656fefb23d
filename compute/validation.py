"""Checks run once, where data enters a public compute function.

Every check raises :class:`~compute.errors.InputError` with a message that names the
parameter or column, says what is allowed and shows what came. Private helpers after
these checks trust their inputs.
"""

from __future__ import annotations

import difflib
import inspect
import numbers
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .checks import (  # noqa: F401 (re-exported: modules import every check from here)
    check_choice,
    check_int,
    check_n_jobs,
    check_real,
    check_rng,
    close_matches,
    is_label,
    is_real,
)
from .errors import InputError
from .intervention import Design
from .losses import CLASSIFICATION_LOSSES, REGRESSION_LOSSES, Loss, builtin_loss
from .prediction import Predictor
from .results import FeatureProfile
from .sampling import MAX_GRID, is_categorical

#: where frames of other libraries come from: converted to pandas once, at the door
FOREIGN_FRAMES = ("polars", "pyarrow")


def as_pandas(value, name: str = "X"):
    """A Polars ``DataFrame``/``Series`` or a PyArrow ``Table``/``Array``/``ChunkedArray`` as
    pandas (its own ``to_pandas``: categoricals and dictionaries become pandas categories,
    nulls missing values, an integer column with nulls floats, as pandas holds them);
    anything else as it is. Done once where a function takes ``X`` or ``y``, so every
    formula sees the same pandas frame whichever library the caller's data lives in."""
    if type(value).__module__.split(".")[0] not in FOREIGN_FRAMES:
        return value
    convert = getattr(value, "to_pandas", None)
    if convert is None:
        raise InputError(f"{name!r} is a {type(value).__name__}, which has no to_pandas(): pass a DataFrame.")
    try:
        converted = convert()
    except ImportError as exc:  # Polars converts through pyarrow
        raise InputError(f"{name!r} is a {type(value).__name__}: converting it needs {exc.name or 'pyarrow'}.") from exc
    if isinstance(converted, pd.DataFrame):
        for column in converted.columns:
            converted[column] = _levels_sorted(converted[column])
        return converted
    return _levels_sorted(converted) if isinstance(converted, pd.Series) else converted


def _levels_sorted(column: pd.Series) -> pd.Series:
    """An unordered categorical with its levels sorted, as pandas makes one from values
    (``astype("category")``): Polars' Categorical and Arrow's dictionary list levels in the
    order they first appear, and a level's position decides a direction (ICE impact's sign)
    and a grid's order. An ordered one (a Polars Enum) keeps its order."""
    if not isinstance(column.dtype, pd.CategoricalDtype) or column.cat.ordered:
        return column
    try:
        return column.cat.reorder_categories(sorted(column.cat.categories))
    except TypeError:  # levels of mixed types have no order: as they are
        return column


def check_frame(X, name: str = "X") -> pd.DataFrame:
    """X as a DataFrame with unique column labels and at least one row (a Polars or PyArrow
    frame converted: :func:`as_pandas`)."""
    X = as_pandas(X, name)
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise InputError(f"{name!r} must be 2-dimensional (got an array of shape {X.shape}).")
        X = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    if not isinstance(X, pd.DataFrame):
        raise InputError(f"{name!r} must be a pandas DataFrame (got {type(X).__name__}).")
    if X.shape[0] == 0:
        raise InputError(f"{name!r} has no rows; at least one observation is needed.")
    if X.shape[1] == 0:
        raise InputError(f"{name!r} has no columns.")
    duplicated = X.columns[X.columns.duplicated()].unique().tolist()
    if duplicated:
        raise InputError(f"{name!r} has duplicated column names: {duplicated!r}; rename them.")
    return X


def check_feature(columns, feature, name: str = "feature", *, param: str | None = None) -> None:
    """Raise if ``feature`` is not one of ``columns``, suggesting close matches.

    ``param`` names the list parameter the label came from (``"features"``), if any.
    """
    columns = list(columns)
    if not is_label(feature):
        if param:
            raise InputError(
                f"The {param!r} parameter must hold column labels (got {type(feature).__name__} "
                f"{feature!r} among them)."
            )
        raise InputError(f"The {name!r} parameter must be one column label (got {type(feature).__name__} {feature!r}).")
    if feature in columns:
        return
    if feature is None and param is None and name == "feature":
        raise InputError(f"The 'feature' parameter is required: name one of the columns {_shown(columns)!r}.")
    hint = difflib.get_close_matches(str(feature), [str(c) for c in columns], n=3)
    suggestion = f" Did you mean {', '.join(repr(h) for h in hint)}?" if hint else ""
    source = f" in {param!r}" if param else ""
    raise InputError(
        f"Unknown {name} {feature!r}{source}: it is not a column the model uses.{suggestion} "
        f"Columns: {_shown(columns)!r}."
    )


def check_features(features, columns, name: str = "features") -> list:
    """A list of distinct known columns: None is every column, one label is a list of one."""
    columns = list(columns)
    if features is None:
        return columns
    if isinstance(features, (list, tuple, pd.Index, np.ndarray, pd.Series)):
        features = list(features)
    elif is_label(features):
        features = [features]
    else:
        raise InputError(
            f"The {name!r} parameter must be a column label or a list of them (got {type(features).__name__})."
        )
    if not features:
        raise InputError(f"The {name!r} list is empty; name at least one column.")
    for feature in features:
        check_feature(columns, feature, param=name)
    seen = set()
    for feature in features:
        if feature in seen:
            raise InputError(f"The {name!r} parameter names {feature!r} twice; name each column once.")
        seen.add(feature)
    return features


def check_kwargs(kwargs: Mapping, target, function: str, *, taken=("model", "X", "y")) -> None:
    """Raise for keywords that ``function`` forwards to ``target`` but ``target`` does not take.

    ``taken`` are the parameters of ``target`` that ``function`` fills itself.
    """
    allowed = [
        p.name
        for p in inspect.signature(target).parameters.values()
        if p.name not in taken and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    for key in kwargs:
        if key not in allowed:
            raise InputError(
                f"The {key!r} keyword is not a parameter of {function}; it passes on {', '.join(allowed)}."
            )


def check_profile(prof, name: str = "prof") -> FeatureProfile:
    if not isinstance(prof, FeatureProfile):
        raise InputError(
            f"The {name!r} parameter must be a FeatureProfile, as feature_profile returns (got {type(prof).__name__})."
        )
    return prof


def check_grid(grid, column: pd.Series | None = None):
    """Accept "observed", an int in [2, MAX_GRID] or an array with at least two points.

    Given the feature's ``column``, an array grid of a numeric feature must hold numbers.
    """
    if isinstance(grid, str):
        if grid != "observed":
            raise InputError(
                f"The 'grid' parameter must be \"observed\", an int in [2, {MAX_GRID}] or an array (got {grid!r})."
            )
        return grid
    if isinstance(grid, numbers.Integral) and not isinstance(grid, (bool, np.bool_)):
        check_int(grid, "grid", low=2, high=MAX_GRID)
        return int(grid)
    if isinstance(grid, (bool, np.bool_)):
        raise InputError(
            f"The 'grid' parameter must be \"observed\", an int in [2, {MAX_GRID}] or an array (got {grid!r})."
        )
    try:
        points = np.asarray(grid)
    except Exception as exc:
        raise InputError(f"The 'grid' parameter could not be read as an array: {exc}") from exc
    if points.ndim != 1 or points.size < 2:
        raise InputError(
            f"The 'grid' parameter must be \"observed\", an int in [2, {MAX_GRID}] or a 1-d array "
            f"of at least two points (got {points.size} point(s), shape {points.shape})."
        )
    if column is not None and not is_categorical(column):
        try:
            numbers_ = points.astype(float)
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"The 'grid' of numeric feature {column.name!r} must hold numbers (got dtype "
                f"{points.dtype}, e.g. {points[0]!r})."
            ) from exc
        if not np.all(np.isfinite(numbers_)):
            raise InputError("The 'grid' array contains NaN or infinite values.")
        return numbers_
    if points.dtype.kind in "fiu" and not np.all(np.isfinite(points.astype(float))):
        raise InputError("The 'grid' array contains NaN or infinite values.")
    return points


def check_model(model, what: str = "The 'model'") -> None:
    if not hasattr(model, "predict") and not hasattr(model, "predict_proba"):
        raise InputError(f"{what} must have a predict method (got {type(model).__name__}).")


def make_predictor(
    model, X: pd.DataFrame, output=None, *, data_name: str = "'X'", model_name: str = "the model"
) -> tuple[Predictor, pd.DataFrame]:
    """Wrap ``model`` and return it with X restricted to the model's input columns.

    The rules for a model's input columns, its classes and the ``output`` class, written once:
    the dashboard's Load check calls this too, naming the file (``data_name``, ``model_name``)
    where a library user sees the parameter names.
    """
    check_model(model)
    names = getattr(model, "feature_names_in_", None)
    as_frame = True
    if names is not None:
        names = list(names)
        missing = [c for c in names if c not in X.columns]
        if missing:
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            hints = []
            for col in missing[:3]:
                close = close_matches(col, X.columns, n=1)
                if close:
                    hints.append(f"{close[0]!r} for {col!r}")
            maybe = f" (did you mean {', '.join(hints)}?)" if hints else ""
            raise InputError(
                f"{_capital(data_name)} lacks {len(missing)} column(s) that {model_name} was fitted on: "
                f"{_shown(missing, 10)}{more}{maybe}. Column names must match exactly; the data's columns: "
                f"{_shown(list(X.columns), 20)}."
            )
        if list(X.columns) != names:
            X = X[names]
    elif getattr(model, "n_features_in_", None) is not None:
        as_frame = False  # fitted on arrays: feed arrays, in X's column order
        if X.shape[1] != model.n_features_in_:
            raise InputError(
                f"{_capital(data_name)} has {X.shape[1]} input column(s) but {model_name} expects "
                f"{model.n_features_in_}. "
                f"It does not record column names, so the data must hold exactly its inputs, in training order."
            )
    classes = getattr(model, "classes_", None)
    has_proba = hasattr(model, "predict_proba")
    if classes is not None and not has_proba and np.size(classes) == 0:
        classes = None  # a regressor exposing an empty classes_ (CatBoostRegressor)
    if classes is None and has_proba:
        raise InputError(
            f"{_capital(model_name)} has predict_proba but no classes_, so its probability "
            f"columns cannot be matched to class labels."
        )
    output_index = None
    if classes is not None:
        classes = np.asarray(classes)
        if output is None:
            output_index = len(classes) - 1
        else:
            if not is_label(output) or np.ndim(output) != 0:
                raise InputError(
                    f"The 'output' class must be one of the model's classes {classes.tolist()!r} "
                    f"(got {type(output).__name__} {output!r})."
                )
            matches = np.flatnonzero(classes == output)
            if matches.size == 0:
                raise InputError(
                    f"The 'output' class {output!r} is not one of the model's classes {classes.tolist()!r}."
                )
            output_index = int(matches[0])
    elif output is not None:
        raise InputError("The 'output' parameter is only for classifiers; this model is a regressor.")
    # a model computing in float32 whatever it is fed (XGBoost) gets float32 blocks: the same values it uses
    block_dtype = np.float32 if getattr(model, "input_dtype", None) is np.float32 else np.float64
    # a model that never writes to nor keeps its input (it says so: ``input_read_only = True``)
    # may be fed successive blocks in one reused buffer
    reuse = getattr(model, "input_read_only", False) is True
    arrays = getattr(model, "takes_float_arrays", False) is True  # all-numeric blocks as float arrays
    typed = _categorical_codes(model)
    if typed:  # fed frames of the data's own dtypes, in the model's column order
        X, as_frame = _in_model_order(X, model, data_name=data_name, model_name=model_name), True
    design = Design(X, as_frame=as_frame, block_dtype=block_dtype, numeric_frames=not arrays, typed=typed)
    return Predictor(model, design, classes, has_proba, output_index, reuse_blocks=reuse), X


def _categorical_codes(model) -> bool:
    """Whether ``model`` reads some columns as categories it refuses as floats: a CatBoost
    model with categorical features (``get_cat_feature_indices``), which takes a category as
    its integer or its text, never as the float an all-numeric block would give it."""
    if type(model).__module__.split(".")[0] != "catboost":
        return False
    found = getattr(model, "get_cat_feature_indices", None)
    try:
        return callable(found) and len(found()) > 0
    except Exception:  # noqa: BLE001 - not fitted, or no such facts: fed as any model
        return False


def _in_model_order(X: pd.DataFrame, model, *, data_name: str, model_name: str) -> pd.DataFrame:
    """X's columns in the order of the names ``model`` was fitted with (``feature_names_``,
    CatBoost's), or X as it is when it has none (then the data holds its inputs in order)."""
    names = [str(n) for n in (getattr(model, "feature_names_", None) or [])]
    if not names or list(map(str, X.columns)) == names:
        return X
    by_text = {str(c): c for c in X.columns}  # CatBoost names columns as text ("0", "1" for an array)
    missing = [n for n in names if n not in by_text]
    if missing:
        raise InputError(
            f"{_capital(data_name)} lacks {len(missing)} column(s) that {model_name} was fitted on: "
            f"{_shown(missing, 10)}. The data's columns: {_shown(list(X.columns), 20)}."
        )
    return X[[by_text[n] for n in names]]


def resolve_loss(loss, predictor: Predictor) -> Loss:
    """The loss object for ``loss`` (a name, a callable, or None for the task's default)."""
    clf = predictor.is_classifier
    if loss is None:
        loss = ("log_loss" if predictor.has_proba else "zero_one") if clf else "squared_error"
    if callable(loss):
        name = getattr(loss, "__name__", "custom")
        return Loss(name, loss, needs_proba=clf and predictor.has_proba, builtin=False)
    known = CLASSIFICATION_LOSSES if clf else REGRESSION_LOSSES
    if not isinstance(loss, str) or loss not in REGRESSION_LOSSES + CLASSIFICATION_LOSSES:
        raise InputError(f"The 'loss' parameter must be one of {list(known)!r} or a callable (got {loss!r}).")
    if loss not in known:
        kind, other = ("classifier", "regressor") if clf else ("regressor", "classifier")
        raise InputError(f"The loss {loss!r} is for a {other}, but this model is a {kind}; use one of {list(known)!r}.")
    if loss in ("log_loss", "brier") and not predictor.has_proba:
        raise InputError(
            f"The loss {loss!r} needs class probabilities but the model has no predict_proba; use 'zero_one'."
        )
    return builtin_loss(loss, classification=clf, has_proba=predictor.has_proba)


def check_target(y, n_rows: int, predictor: Predictor, loss, function: str) -> tuple[Loss, np.ndarray]:
    """The loss object and the encoded target of a function that needs ``y``."""
    if y is None:
        raise InputError(f"{function} needs the target 'y'.")
    loss_obj = resolve_loss(loss, predictor)
    return loss_obj, encode_target(y, n_rows, predictor, loss_obj)


def encode_target(
    y, n_rows: int, predictor: Predictor, loss: Loss, *, name: str = "'y'", model_name: str = "the model"
) -> np.ndarray:
    """The target as the loss wants it: floats, or class positions for built-in classifier losses.

    Labels match the model's classes across int, float and text spellings (a CSV's ``"1"``
    or ``1.0`` is the class ``1``; see :func:`label_positions`). ``name`` names the target
    in messages. A Polars or PyArrow column is converted first (:func:`as_pandas`).
    """
    y = as_pandas(y, name)
    if isinstance(y, (pd.DataFrame,)) or (hasattr(y, "ndim") and np.ndim(y) != 1):
        raise InputError(f"{name} must be one-dimensional (got shape {np.shape(y)}).")
    values = y.to_numpy() if isinstance(y, pd.Series) else np.asarray(y)
    if values.ndim != 1:
        raise InputError(f"{name} must be one-dimensional (got shape {values.shape}).")
    if len(values) != n_rows:
        raise InputError(f"'X' has {n_rows} rows but {name} has {len(values)}; they must match.")
    missing = pd.isna(values)
    if missing.any():
        raise InputError(
            f"{name} has {int(missing.sum())} missing value(s) (first at position "
            f"{int(np.flatnonzero(missing)[0])}); drop those rows or fill them."
        )
    if not predictor.is_classifier:
        if not pd.api.types.is_numeric_dtype(values.dtype) or pd.api.types.is_bool_dtype(values.dtype):
            raise InputError(
                f"{_capital(model_name)} is a regressor, so the regression loss {loss.name!r} needs a numeric "
                f"target, but {name} has dtype {values.dtype} (e.g. {values[0]!r}): it looks like a class label. "
                f"Is the model a classifier?"
            )
        values = values.astype(float)
        if not np.all(np.isfinite(values)):
            raise InputError(f"{name} contains infinite values; drop or fix those rows.")
        return values
    if not loss.builtin:
        return values
    assert predictor.classes is not None  # a classifier (checked above)
    codes = label_positions(values, predictor.classes)
    if (codes < 0).any():
        unknown = pd.unique(values[codes < 0])[:5].tolist()
        raise InputError(
            f"{name} contains labels {model_name} does not know: {unknown!r}; its classes "
            f"are {_shown(predictor.classes.tolist(), 20)}."
        )
    return codes


def label_positions(values, classes) -> np.ndarray:
    """Position of each label in ``classes``; -1 where unknown.

    Exact matches first; then, if the classes' text forms are unique, by text, so integer
    classes match labels read as text (``"1"``) or as whole floats (``1.0``).
    """
    values = np.asarray(values)
    try:
        codes = pd.Index(classes).get_indexer(values)
    except (TypeError, ValueError):
        codes = np.full(len(values), -1)
    if (codes < 0).any():
        as_text = pd.Index([str(c) for c in classes])
        if as_text.is_unique:
            if values.dtype.kind == "f" and np.all(np.isfinite(values)) and np.all(values == np.round(values)):
                text = values.astype(np.int64).astype(str)
            else:
                text = np.asarray([str(v) for v in values], dtype=object)
            codes = np.where(codes < 0, as_text.get_indexer(text), codes)
    return codes


def check_players(features, columns: list) -> dict[str, tuple]:
    """Players (features or groups of columns varied jointly) as {name: tuple of columns}.

    ``None``: every column; a list (an item may be a list: a group named ``"a+b"``); or a
    dict ``{name: column or list of columns}``. A column may belong to one player only.
    """
    if features is None:
        items = [(str(c), (c,)) for c in columns]
    elif isinstance(features, Mapping):
        items = [(str(name), _as_group(cols)) for name, cols in features.items()]
    elif isinstance(features, (list, tuple)):
        items = [("+".join(map(str, _as_group(f))), _as_group(f)) for f in features]
    else:
        raise InputError(
            f"The 'features' parameter must be None, a list of columns or a dict "
            f"{{name: columns}} (got {type(features).__name__})."
        )
    if not items:
        raise InputError("The 'features' parameter names no players.")
    seen: dict = {}
    for name, group in items:
        if not group:
            raise InputError(f"Player {name!r} in 'features' has no columns; give it at least one.")
        for col in group:
            check_feature(columns, col, param="features")
            if col in seen:
                raise InputError(
                    f"Column {col!r} belongs to two players in 'features': {seen[col]!r} and {name!r}; "
                    f"a column may belong to one player only."
                )
            seen[col] = name
    names = [name for name, _ in items]
    if len(set(names)) != len(names):
        raise InputError(f"Player names in 'features' must be unique (got {names!r}).")
    return dict(items)


def _as_group(cols) -> tuple:
    return tuple(cols) if isinstance(cols, (list, tuple)) else (cols,)


def _capital(name: str) -> str:
    """``name`` at the start of a sentence: "the model" -> "The model"; file names stay as spelled."""
    return "The" + name[3:] if name.startswith("the ") else name


def _shown(items: list, limit: int = 20) -> list:
    return items if len(items) <= limit else items[:limit] + ["..."]


# --- categorical levels against the model's fitted encoders --------------------------------
@dataclass(frozen=True)
class UnseenLevels:
    """Levels of one input column that the model's fitted encoder never saw."""

    column: Hashable
    levels: list  # the unseen levels, most frequent first
    rows: int  # rows holding one of them
    first_rows: list  # labels of the first such rows (at most 5)
    known: list  # the levels the encoder knows
    handle_unknown: str  # the encoder's setting: "error", "ignore", "infrequent_if_exist", ...
    encoder: str  # its class name
    unknown_value: Any = None  # OrdinalEncoder's code for unknown levels


def unseen_levels(model, X: pd.DataFrame) -> list[UnseenLevels]:
    """Compare each categorical input column with the fitted ``categories_`` of the
    scikit-learn ``OneHotEncoder``/``OrdinalEncoder`` that reads it, found through
    ``Pipeline`` steps and ``ColumnTransformer`` columns (by name, position, mask or slice;
    through steps that keep their columns, such as an imputer before the encoder). Missing
    values are not levels here (an imputer or the encoder handles them). Other models, and
    encoders whose columns cannot be told, give nothing."""
    found = []
    for encoder, columns in _encoders(model, list(X.columns)):
        for column, known in zip(columns, encoder.categories_):
            if column not in X.columns:
                continue
            values = X[column]
            known_list = [k for k in known if not (isinstance(k, float) and np.isnan(k))]
            outside = values.notna().to_numpy() & ~values.isin(known_list).to_numpy()
            if not outside.any():
                continue
            counts = values[outside].value_counts()
            found.append(
                UnseenLevels(
                    column=column,
                    levels=list(counts.index),
                    rows=int(outside.sum()),
                    first_rows=list(X.index[outside][:5]),
                    known=list(known_list),
                    handle_unknown=str(getattr(encoder, "handle_unknown", "error")),
                    encoder=type(encoder).__name__,
                    unknown_value=getattr(encoder, "unknown_value", None),
                )
            )
    return found


def _encoders(est, columns):
    """(fitted encoder, the data columns it reads, in order) inside ``est``."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder

    if isinstance(est, (OneHotEncoder, OrdinalEncoder)):
        names = getattr(est, "feature_names_in_", None)
        names = list(names) if names is not None else columns
        if names is not None and hasattr(est, "categories_") and len(names) == len(est.categories_):
            yield est, names
    elif isinstance(est, Pipeline):
        for _, step in est.steps:
            if step is None or isinstance(step, str):
                continue
            yield from _encoders(step, columns)
            columns = _kept_columns(step, columns)
    elif isinstance(est, ColumnTransformer):
        names_in = getattr(est, "feature_names_in_", None)
        names_in = list(names_in) if names_in is not None else columns
        for _, trans, spec in getattr(est, "transformers_", []):
            if isinstance(trans, str):  # "drop" or "passthrough"
                continue
            yield from _encoders(trans, _selected(spec, names_in))


def _kept_columns(step, columns):
    """The columns after a step that keeps them (same names out), else None."""
    if columns is None:
        return None
    try:
        out = list(step.get_feature_names_out(columns))
    except Exception:  # a step that renames or cannot say
        return None
    return columns if out == [str(c) for c in columns] else None


def _selected(spec, names):
    """A ColumnTransformer column spec as column names (None when it cannot be told)."""
    if names is None or callable(spec):
        return None
    if isinstance(spec, str):
        return [spec]
    if isinstance(spec, slice):
        return list(names[spec])
    items = list(spec) if isinstance(spec, (list, tuple, np.ndarray, pd.Index)) else None
    if items is None:
        return None
    if items and all(isinstance(i, (bool, np.bool_)) for i in items):
        return [n for n, keep in zip(names, items) if keep]
    if items and all(isinstance(i, (int, np.integer)) for i in items):
        return [names[int(i)] for i in items]
    return items
