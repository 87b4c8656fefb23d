"""XGBoost, LightGBM and CatBoost model files behind the estimator interface ``compute`` uses.

The files are the libraries' own data formats (no pickle): XGBoost ``.json`` / ``.ubj``
(``Booster.save_model``, also what ``XGBClassifier.save_model`` writes), LightGBM text
``.txt`` (``Booster.save_model``) and CatBoost ``.cbm`` / ``.json``. Each is checked in plain
Python first (:mod:`dashboard.loading.booster_files`) and only then given to the library's
loader, inside the isolated process every model load runs in.

:class:`BoosterModel` is then equal to the model itself:

- **columns** by the names the file stores (XGBoost ``feature_names``, LightGBM
  ``feature_names``, CatBoost's feature names); a file without names (trained on an array)
  takes the data's columns in order once the user confirms it, as for an ONNX tensor;
- **categorical columns** encoded as in training: the level's position in the training levels
  the file stores (XGBoost >= 3.1 ``cats``; LightGBM ``pandas_categorical``), a missing value
  as missing; a level the model never saw is handled as its library does (see
  :meth:`BoosterModel.unseen_levels`: LightGBM reads it as missing, XGBoost refuses it);
  files trained on integer codes take the codes as they are; CatBoost gets the text of the
  level, its own input;
- **task and output** from the objective: regression and counts give ``predict`` (the mean
  response, as the scikit-learn wrappers), binary and multiclass objectives
  ``predict_proba``; ranking, survival, multi-output and custom objectives are refused by name;
- **one native call per block**: :meth:`BoosterModel.predict` builds one float matrix and calls
  the booster's batched predict once (XGBoost ``inplace_predict``, LightGBM ``predict``).

Class labels: CatBoost stores them; XGBoost and LightGBM files store only the number of
classes, so :meth:`BoosterModel.set_classes` gives them (see :func:`booster_classes`).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import tempfile

import numpy as np
import pandas as pd

from compute.errors import InputError, ModelError

from ..model_trust import ModelFileError
from . import objectives
from .booster_files import (
    catboost_version,
    check_catboost_json,
    check_cbm,
    check_lightgbm,
    check_xgboost,
)
from .errors import LoadError, short
from .ubjson import read_ubjson

BOOSTER_SUFFIXES = (".json", ".ubj", ".txt", ".cbm")
LIBRARIES = {"xgboost": "XGBoost", "lightgbm": "LightGBM", "catboost": "CatBoost"}
PIP_HINT = "pip install 'why-it-performs[boosters]'"


def library_of(data: bytes, suffix: str) -> str:
    """Which library a booster file is for, from its suffix (and, for .json, its top keys)."""
    if suffix == ".ubj":
        return "xgboost"
    if suffix == ".txt":
        return "lightgbm"
    if suffix == ".cbm":
        return "catboost"
    head = data[:4096]
    if b'"learner"' in head or b'"version"' in head[:64]:
        return "xgboost"
    if b'"features_info"' in data or b'"oblivious_trees"' in data:
        return "catboost"
    return "xgboost"  # check_xgboost then says what is missing


def _import(library: str, label: str):
    try:
        return importlib.import_module(library)
    except ImportError as exc:
        raise LoadError(
            f"{label} is a {LIBRARIES[library]} model, but {library} is not installed on this server; ask the "
            f"operator to install it ({PIP_HINT}).",
            field="model",
        ) from exc


def _refused_objective(label: str, library: str, objective: str) -> LoadError:
    what = objective or "none recorded (a custom objective?)"
    return LoadError(
        f"{label} is a {LIBRARIES[library]} model with the objective {what}, which this server does not explain: "
        "it takes regression and count objectives and binary or multiclass classifiers (ranking, survival, "
        "multi-output and custom objectives are refused).",
        field="model",
    )


def _unnamed(names: list[str], pattern: str) -> bool:
    return all(re.fullmatch(pattern.format(j), n) for j, n in enumerate(names))


class BoosterModel:
    """A gradient-boosting model loaded from its own file format, with the attributes and
    methods of a scikit-learn estimator (``feature_names_in_`` or ``n_features_in_``,
    ``classes_``, ``predict``, ``predict_proba``). Built by :func:`load_booster`."""

    def __init__(
        self,
        *,
        library: str,
        name: str,
        columns: list[str] | None,
        width: int,
        categories: dict[int, list | None],
        task: str,
        n_classes: int,
        objective: str,
        version: str,
        predict_raw,
        classes=None,
        has_proba: bool = True,
        native: dict | None = None,
    ) -> None:
        self.library = library
        self.name = name
        self._columns = columns
        self._width = width
        self._categories = categories  # position -> training levels (None: integer codes as given)
        self._estimator_type = "classifier" if task == "classification" else "regressor"
        self.n_classes = n_classes
        self.objective = objective
        self.version = version
        self._predict_raw = predict_raw  # float matrix (or frame, CatBoost) -> values / probabilities
        self._classes = None if classes is None else np.asarray(classes)
        self._has_proba = has_proba
        self._native = native or {}  # the booster and what compute.trees reads with it (tree_source)

    def __repr__(self) -> str:
        return f"BoosterModel({LIBRARIES[self.library]}, {self.name!r}, {self.objective})"

    def __getstate__(self):
        raise TypeError("a loaded booster stays in its process (load the file again)")

    def tree_source(self) -> tuple[str, dict]:
        """``(library, {"model": the native booster, ...})``: what compute.trees' reader reads."""
        return self.library, {**self._native, "categorical": bool(self._categories)}

    @property
    def needs_classes(self) -> bool:
        """A classifier whose file does not name its classes (XGBoost, LightGBM)."""
        return self._estimator_type == "classifier" and self._classes is None

    def set_classes(self, labels) -> None:
        labels = list(labels)
        if len(labels) != self.n_classes or len(set(map(str, labels))) != len(labels):
            raise LoadError(
                f"{self.name} has {self.n_classes} classes; {len(labels)} distinct labels were given "
                f"({', '.join(map(str, labels[:10]))}).",
                field="output",
            )
        self._classes = np.asarray(labels)

    # attributes compute reads (AttributeError where scikit-learn would not have them)
    @property
    def feature_names_in_(self) -> np.ndarray:
        if self._columns is None:
            raise AttributeError("trained on an array: no column names")
        return np.asarray(self._columns, dtype=object)

    @property
    def n_features_in_(self) -> int:
        return self._width

    @property
    def classes_(self) -> np.ndarray:
        if self._estimator_type != "classifier":
            raise AttributeError("regressor: no classes_")
        if self._classes is None:
            raise ModelError(f"{self.name} does not store its class labels; give them when loading it.")
        return self._classes

    @property
    def predict_proba(self):
        if self._estimator_type != "classifier" or not self._has_proba:
            raise AttributeError("no predict_proba")
        return self._proba

    @property
    def refuses_unseen_levels(self) -> bool:
        """Whether the library itself refuses a categorical level outside the training levels
        (XGBoost: "Found a category not in the training set"); LightGBM reads one as missing."""
        return self.library == "xgboost"

    @property
    def input_dtype(self):
        """numpy.float32 for XGBoost, which casts every input to float32 before its trees read
        it: compute then builds float32 blocks (the same predictions, half the bytes)."""
        return np.float32 if self.library == "xgboost" else None

    @property
    def input_read_only(self) -> bool:
        """XGBoost and LightGBM read the rows they are given and keep nothing (their predict
        takes a const view): compute may reuse one buffer for successive blocks, in chunks of
        16 MiB. CatBoost keeps nothing either (it copies into its own pool), but converts a
        frame column by column per call, so it gets larger, fresh blocks: measured 1.12x / 1.08x
        its raw predict for PFI / curves that way, 1.31x / 1.21x in reused 16 MiB chunks."""
        return self.library != "catboost"

    @property
    def takes_float_arrays(self) -> bool:
        """XGBoost and LightGBM read a float array of the model's columns, in its order, as
        that frame (``_matrix`` passes an all-float array on as it is): compute feeds them
        all-numeric blocks as arrays. CatBoost's rows go through a frame of its own."""
        return self.library != "catboost"

    def categorical_columns(self) -> dict[str, list | None]:
        """Column name (or position) -> the training levels (None: integer codes)."""
        names = self._columns or [str(j) for j in range(self._width)]
        return {names[j]: levels for j, levels in self._categories.items()}

    def check_columns(self, X: pd.DataFrame) -> None:
        """Refuse text in a column the model reads as numbers (or as integer category codes),
        naming the column (:class:`InputError`)."""
        for j in range(min(self._width, X.shape[1])):
            column = X.iloc[:, j]
            if self._categories.get(j) is not None:  # levels known: text or numbers both match
                continue
            if pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype):
                continue
            example = column.dropna().iloc[0] if column.notna().any() else None
            what = "category codes (whole numbers)" if j in self._categories else "numbers"
            raise InputError(
                f"The column {X.columns[j]!r} holds text (e.g. {example!r}), but {self.name} was trained on "
                f"{what} there."
            )

    def unseen_levels(self, X: pd.DataFrame) -> list[tuple[str, list, int, list]]:
        """(column, levels the file's training levels lack by count, rows holding them, the
        training levels) for each categorical column whose levels the file stores (XGBoost,
        LightGBM). LightGBM predicts such a level as a missing value (as :func:`_codes` codes
        it); XGBoost refuses it ("Found a category not in the training set"), so the load
        refuses those rows. CatBoost takes any text, so nothing is reported for it."""
        found = []
        for j, levels in sorted(self._categories.items()):
            if not levels or j >= X.shape[1]:
                continue
            column = X.iloc[:, j]
            outside = np.isnan(_codes(column, levels)) & column.notna().to_numpy()
            if outside.any():
                counts = column[outside].value_counts()
                found.append((str(X.columns[j]), list(counts.index), int(outside.sum()), list(levels)))
        return found

    # predictions
    def _matrix(self, X) -> np.ndarray:
        """The block as the float matrix the booster takes: categorical levels as their
        training codes. An all-float block (compute's fast path wraps one float array) is
        passed on without a copy."""
        if isinstance(X, np.ndarray) and X.dtype.kind == "f" and not self._categories:
            return X
        if not isinstance(X, pd.DataFrame):
            X = pd.DataFrame(np.asarray(X))
        if not self._categories and all(isinstance(dt, np.dtype) and dt.kind == "f" for dt in X.dtypes):
            one = len(set(X.dtypes)) == 1  # one float dtype (float32 blocks for XGBoost): no copy
            return X.to_numpy(copy=False) if one else X.to_numpy(dtype=np.float64, copy=False)
        out = np.empty((len(X), self._width), dtype=np.float64)
        for j in range(self._width):
            column = X.iloc[:, j]
            levels = self._categories.get(j)
            if levels is None:
                try:
                    out[:, j] = column.to_numpy(dtype=np.float64, na_value=np.nan)
                except (TypeError, ValueError) as exc:
                    raise ModelError(f"{self.name} needs numbers in {X.columns[j]!r}: {short(exc)}") from exc
            else:
                out[:, j] = _codes(column, levels)
        return out

    def _raw(self, X) -> np.ndarray:
        try:
            return np.asarray(self._predict_raw(self, X))
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"{self.name} could not predict: {type(exc).__name__}: {short(exc)}") from exc

    def _proba(self, X) -> np.ndarray:
        out = np.asarray(self._raw(X), dtype=np.float64)
        if out.ndim == 1:  # binary: P(second class)
            out = np.column_stack([1.0 - out, out])
        return out

    def predict(self, X) -> np.ndarray:
        out = self._raw(X)
        if self._estimator_type == "regressor":
            return np.asarray(out, dtype=np.float64).ravel()
        if not self._has_proba:  # binary:hinge predicts 0/1
            return self.classes_[np.asarray(out).astype(np.int64).ravel()]
        proba = np.asarray(out, dtype=np.float64)
        index = (proba > 0.5).astype(np.int64) if proba.ndim == 1 else np.argmax(proba, axis=1)
        return self.classes_[index]


def _codes(column: pd.Series, levels: list) -> np.ndarray:
    """Each value's position among the training ``levels`` (NaN: missing or never seen)."""
    index = pd.Index(levels)
    found = index.get_indexer(column)
    values_text = not (pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype))
    levels_text = index.dtype == object or pd.api.types.is_string_dtype(index.dtype)
    if values_text != levels_text:  # "1" against 1: match by the text of the level
        found = pd.Index([_text(v) for v in levels]).get_indexer(column.map(_text))
    out = found.astype(np.float64)
    out[found < 0] = np.nan
    return out


def _text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- XGBoost --------------------------------------------------------------------------------
def _load_xgboost(data: bytes, label: str, suffix: str, classes) -> BoosterModel:
    try:
        doc = read_ubjson(data, label) if suffix == ".ubj" else json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise LoadError(f"{label} is not a valid XGBoost JSON model ({short(exc)}).", field="model") from exc
    try:
        info = check_xgboost(doc, label)
    except ModelFileError as exc:
        raise LoadError(str(exc), field="model") from exc
    del doc
    objective = info.objective
    if objective in objectives.XGB_REGRESSION and info.num_target == 1:
        task, n_classes = "regression", 0
    elif objective in objectives.XGB_CLASSIFICATION and info.num_target == 1:
        task, n_classes = "classification", max(info.num_class, 2)
    else:
        raise _refused_objective(
            label, "xgboost", objective + (f" with {info.num_target} targets" if info.num_target > 1 else "")
        )
    xgb = _import("xgboost", label)
    try:
        booster = xgb.Booster()
        booster.load_model(bytearray(data))
    except Exception as exc:
        raise LoadError(f"XGBoost could not load {label} ({short(exc)}).", field="model") from exc
    names = info.feature_names
    columns = names if names and not _unnamed(names, r"f{}") else None
    categories: dict[int, list | None] = {
        j: info.categories.get(j) for j, kind in enumerate(info.feature_types) if kind == "c"
    }
    best = info.best_iteration
    window = (0, best + 1) if best is not None else (0, 0)  # what XGBModel.predict uses
    margin = objective in ("binary:logitraw", "multi:softmax")

    def predict_raw(model: BoosterModel, X):
        out = booster.inplace_predict(
            model._matrix(X), iteration_range=window, predict_type="margin" if margin else "value"
        )
        if objective == "binary:logitraw":
            return 1.0 / (1.0 + np.exp(-out))
        if objective == "multi:softmax":
            shifted = np.exp(out - out.max(axis=1, keepdims=True))
            return shifted / shifted.sum(axis=1, keepdims=True)
        return out

    stored = info.sklearn.get("classes_") if task == "classification" else None
    return BoosterModel(
        library="xgboost",
        name=label,
        columns=columns,
        width=len(info.feature_types),
        categories=categories,
        task=task,
        n_classes=n_classes,
        objective=objective,
        version=info.version,
        predict_raw=predict_raw,
        classes=stored if isinstance(stored, list) and len(stored) == n_classes else classes,
        has_proba=objective != "binary:hinge",
        native={"model": booster, "window": window, "task": task, "objective": objective},
    )


# --- LightGBM -------------------------------------------------------------------------------
def _load_lightgbm(data: bytes, label: str, classes) -> BoosterModel:
    try:
        info = check_lightgbm(data, label)
    except ModelFileError as exc:
        raise LoadError(str(exc), field="model") from exc
    objective = info.objective.split()[0] if info.objective else ""
    if objective in objectives.LGB_REGRESSION and info.per_iteration == 1:
        task, n_classes = "regression", 0
    elif objective in objectives.LGB_CLASSIFICATION:
        task, n_classes = "classification", max(info.num_class, 2)
    else:
        raise _refused_objective(label, "lightgbm", objective)
    lgb = _import("lightgbm", label)
    try:
        booster = lgb.Booster(model_str=data.decode("utf-8"))
    except Exception as exc:
        raise LoadError(f"LightGBM could not load {label} ({short(exc)}).", field="model") from exc
    names = info.feature_names
    columns = names if not _unnamed(names, r"Column_{}") else None
    levels = info.pandas_categorical or [None] * len(info.categorical)
    categories = {j: (list(lv) if lv is not None else None) for j, lv in zip(info.categorical, levels)}

    def predict_raw(model: BoosterModel, X):
        return booster.predict(model._matrix(X))

    return BoosterModel(
        library="lightgbm",
        name=label,
        columns=columns,
        width=len(names),
        categories=categories,
        task=task,
        n_classes=n_classes,
        objective=objective,
        version=info.version,
        predict_raw=predict_raw,
        classes=classes,
        native={"model": booster, "task": task, "objective": objective},
    )


# --- CatBoost -------------------------------------------------------------------------------
def _check_catboost_file(data: bytes, label: str, suffix: str) -> None:
    """A CatBoost file checked before CatBoost reads it: a ``.cbm``'s magic and size, a JSON
    model's whole structure."""
    try:
        if suffix == ".cbm":
            check_cbm(data, label)
        else:
            try:
                doc = json.loads(data)
            except (ValueError, RecursionError) as exc:
                raise LoadError(f"{label} is not a valid CatBoost JSON model ({short(exc)}).", field="model") from exc
            check_catboost_json(doc, label)
            del doc
    except ModelFileError as exc:
        raise LoadError(str(exc), field="model") from exc


def _catboost_native(cb, data: bytes, label: str, suffix: str):
    """CatBoost's model of the file; a ``.cbm``'s structure checked on its JSON export before
    any prediction."""
    try:
        model = cb.CatBoost()
        if suffix == ".cbm":
            model.load_model(blob=data)
        else:
            with tempfile.TemporaryDirectory(prefix="catboost-load-") as folder:
                local = os.path.join(folder, "model.json")
                with open(local, "wb") as handle:
                    handle.write(data)
                model.load_model(local, format="json")
    except Exception as exc:
        raise LoadError(f"CatBoost could not load {label} ({short(exc)}).", field="model") from exc
    if suffix == ".cbm":  # the binary's structure, checked on its JSON export before any prediction
        with tempfile.TemporaryDirectory(prefix="catboost-check-") as folder:
            local = os.path.join(folder, "model.json")
            try:
                model.save_model(local, format="json")
                with open(local, "rb") as exported:
                    doc = json.load(exported)
            except Exception as exc:
                raise LoadError(f"{label} could not be checked ({short(exc)}).", field="model") from exc
        try:
            check_catboost_json(doc, label)
        except ModelFileError as exc:
            raise LoadError(str(exc), field="model") from exc
        del doc
    return model


def _load_catboost(data: bytes, label: str, suffix: str) -> BoosterModel:
    _check_catboost_file(data, label, suffix)
    cb = _import("catboost", label)
    model = _catboost_native(cb, data, label, suffix)
    params = model.get_all_params() if hasattr(model, "get_all_params") else {}
    loss = str(params.get("loss_function") or model.get_params().get("loss_function") or "")
    loss = loss.split(":")[0]
    if loss in objectives.CB_REGRESSION:
        task, n_classes, classes = "regression", 0, None
    elif loss in objectives.CB_CLASSIFICATION:
        classes = list(model.classes_) if getattr(model, "classes_", None) is not None else None
        task, n_classes = "classification", len(classes) if classes else 2
    else:
        raise _refused_objective(label, "catboost", loss)
    names = [str(n) for n in model.feature_names_]
    cat_idx = [int(i) for i in model.get_cat_feature_indices()]
    columns = names if not _unnamed(names, r"{}") else None
    kind = (
        "Probability"
        if task == "classification"
        else ("Exponent" if loss in objectives.CB_EXPONENT else "RawFormulaVal")
    )

    def predict_raw(wrapper: BoosterModel, X):
        if not isinstance(X, pd.DataFrame):
            X = pd.DataFrame(np.asarray(X, dtype=object))
        frame = pd.DataFrame(
            {
                j: (
                    X.iloc[:, j].map(_text)
                    if j in cat_idx
                    else X.iloc[:, j].to_numpy(dtype=np.float64, na_value=np.nan)
                )
                for j in range(len(names))
            }
        )
        frame.columns = names
        for j in cat_idx:  # a missing level stays missing (CatBoost refuses it, as the model itself does)
            missing = X.iloc[:, j].isna().to_numpy()
            if missing.any():
                frame.iloc[np.flatnonzero(missing), j] = None
        out = model.predict(cb.Pool(frame, cat_features=cat_idx), prediction_type=kind)
        return out[:, 1] if task == "classification" and n_classes == 2 and out.ndim == 2 else out

    info = model.get_metadata() if hasattr(model, "get_metadata") else {}
    version = catboost_version({k: info[k] for k in ("catboost_version_info", "version") if k in info} if info else {})
    return BoosterModel(
        library="catboost",
        name=label,
        columns=columns,
        width=len(names),
        categories={j: [] for j in cat_idx},  # levels are CatBoost's own input: kept as text
        task=task,
        n_classes=n_classes,
        objective=loss,
        version=version,
        predict_raw=predict_raw,
        classes=classes,
        native={"model": model, "task": task, "objective": loss, "exponent": kind == "Exponent"},
    )


def load_booster(path: str, label: str, suffix: str, classes=None) -> BoosterModel:
    """Check and load a booster file (see the module docstring); ``classes`` for an XGBoost or
    LightGBM classifier (its file does not name them)."""
    with open(path, "rb") as handle:
        data = handle.read()
    library = library_of(data, suffix)
    if library == "xgboost":
        return _load_xgboost(data, label, suffix, classes)
    if library == "lightgbm":
        return _load_lightgbm(data, label, classes)
    return _load_catboost(data, label, suffix)


def booster_versions(path: str, suffix: str) -> dict[str, str]:
    """The library and the version that wrote the file, read without loading it."""
    with open(path, "rb") as handle:
        data = handle.read()
    library = library_of(data, suffix)
    if library == "lightgbm":
        found = re.search(rb"\nversion=(\S+)", data[:4096])
        return {"LightGBM format": found.group(1).decode("ascii", "replace")} if found else {}
    if library == "xgboost" and suffix == ".json":
        found = re.search(rb'"version"\s*:\s*\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)', data[-256:] + data[:256])
        return {"XGBoost": ".".join(g.decode() for g in found.groups())} if found else {}
    return {LIBRARIES[library]: "file"}


def booster_classes(model: BoosterModel, target: pd.Series, typed: list[str] | None) -> tuple[list, str | None]:
    """Class labels for a classifier whose file does not store them, and a note for the user.

    ``typed``: the labels the user gave, in the model's order (matched to the target's values
    by their text). Otherwise: 0, 1, ..., k-1 when the target holds only those numbers (what
    XGBoost's and LightGBM's own APIs train on), else the target's k distinct values sorted
    (the order scikit-learn's LabelEncoder gives the LGBMClassifier wrapper) with a note."""
    k = model.n_classes
    values = pd.unique(target.dropna())
    if typed:
        by_text = {_text(v): v for v in values}
        labels = [by_text.get(t, t) for t in typed]
        return [v.item() if hasattr(v, "item") else v for v in labels], None
    numeric = pd.api.types.is_numeric_dtype(target.dtype) and not pd.api.types.is_bool_dtype(target.dtype)
    if numeric and len(values) and set(np.asarray(values, dtype=float)) <= set(range(k)):
        is_int = all(float(v).is_integer() for v in values)
        return [int(i) if is_int else float(i) for i in range(k)], None
    if len(values) != k:
        raise LoadError(
            f"{model.name} is a {k}-class classifier that does not store its class labels, and the target column "
            f"holds {len(values)} distinct values ({', '.join(map(_text, values[:8]))}); type the {k} labels in the "
            "model's order under 'Class labels'.",
            field="output",
        )
    labels = sorted(values, key=lambda v: (str(type(v)), v))
    labels = [v.item() if hasattr(v, "item") else v for v in labels]
    note = (
        f"{model.name} does not store its class labels; its {k} outputs were matched to the target's values in "
        f"sorted order ({', '.join(map(_text, labels))}), as scikit-learn's wrappers order them. If it was trained "
        "with another order, type the labels under 'Class labels' and load again."
    )
    return labels, note
