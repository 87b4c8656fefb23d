"""Read uploaded model and data files without running code from them.

Uploads come from users of a shared server, so a file is data, never code:

- ``.skops``: skops rebuilds objects from a JSON schema. This server accepts automatically
  only an allow-list of exact types, each with the skops loader that may build it (scikit-learn
  estimators and the fitted-attribute types typical models hold, NumPy arrays, dtypes and
  scalar types, a few SciPy sparse types; see :mod:`dashboard.model_trust`). Every node of the
  schema is checked, whichever package defines its type: a NumPy, SciPy or scikit-learn class
  off the list is refused like any other. Functions, methods and classes used as values are
  refused (except NumPy scalar types as values and scikit-learn's ``check_array``). Anything
  refused needs ``Policy.allow_user_types`` (an operator option) *and* the user's explicit
  acceptance. The archive may unpack to at most ``Policy.max_bytes`` (the upload limit).
  After loading, tree, boosting, SVM and neighbour structures are validated before any
  prediction (:func:`dashboard.model_trust.check_model`).
- ``.onnx``: run by ONNX Runtime (CPU) from a private temporary copy, so tensors stored as
  "external data" cannot be read from other files next to the upload.
- ``.pkl`` / ``.pickle`` / ``.joblib``: refused unopened unless ``Policy.allow_pickle``.
- ``.csv`` / ``.parquet``: parsed by pandas / pyarrow after size, encoding and header checks.

Every error is a :class:`LoadError` whose ``field`` says which input of the page it concerns
("model", "data", "target", "output" or "loss") and whose message names the user's file name
(the ``name`` argument), never a server path.

Load warnings (a model saved with another scikit-learn version) are kept in a
``WeakKeyDictionary`` keyed by the loaded model object (falling back to an attribute for
unhashable models) and read with :func:`load_warnings`; they disappear with the model.
"""

from __future__ import annotations

import codecs
import csv
import difflib
import functools
import json
import os
import re
import shutil
import tempfile
import warnings
import weakref
from dataclasses import dataclass

import numpy as np
import pandas as pd

from compute.errors import InputError, ModelError
from compute.intervention import Design

from .model_trust import Inspection, ModelFileError, check_model, inspect_skops

FIELDS = ("model", "data", "target", "output", "loss")
MODEL_SUFFIXES = (".skops", ".onnx", ".pkl", ".pickle", ".joblib")
DATA_SUFFIXES = (".csv", ".parquet", ".pq")
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
PARQUET_EXPANSION = 4  # a Parquet file may expand to at most 4 x the upload limit in memory
_ONNX_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
    "tensor(string)": object,
}


class LoadError(InputError):
    """An uploaded file (or the choice of target, output or loss) cannot be used.

    ``field`` is the page input the message belongs next to: one of :data:`FIELDS`.
    """

    def __init__(self, message: str, *, field: str) -> None:
        if field not in FIELDS:
            raise ValueError(f"LoadError field must be one of {FIELDS} (got {field!r}).")
        super().__init__(message)
        self.field = field

    def __reduce__(self):  # picklable (background jobs), although ``field`` is keyword-only
        return functools.partial(type(self), field=self.field), (str(self),)


@dataclass(frozen=True)
class Policy:
    """What the operator lets users upload (command-line options of the server).

    ``max_bytes`` is the upload limit; a .skops archive may also unpack to at most that many
    bytes. skops writes uncompressed archives by default, so every such file within the
    upload limit passes; a compressed one may not unpack to more than an uncompressed one
    could hold.
    """

    allow_pickle: bool = False
    allow_user_types: bool = False
    max_bytes: int = 200 * 2**20
    max_rows: int = 1_000_000
    max_columns: int = 2_000


# --- models --------------------------------------------------------------------------------
def model_untrusted_types(path, *, policy: Policy = Policy(), name: str | None = None) -> list[str]:
    """Types in a ``.skops`` file that the user would have to accept; [] for other formats.

    Every type named in the schema that is not on the allow-list with the loader it uses
    (see :mod:`dashboard.model_trust`); read without building any object or calling skops.
    Raises :class:`LoadError` for a file that is not a valid .skops file, whatever is wrong.
    """
    path = os.fspath(path)
    label = name or os.path.basename(path)
    if _suffix(path, name, MODEL_SUFFIXES) != ".skops":
        return []
    _check_size(path, label, policy, "model")
    return list(_inspect_skops(path, label, policy).refused)


def load_model(path, *, name: str | None = None, policy: Policy = Policy(), accepted_types=()) -> object:
    """Load an uploaded model file; see the module docstring for what each format may do.

    ``name`` is the user's file name, shown in messages. The format comes from the suffix of
    ``path`` (or of ``name`` when ``path`` has none of :data:`MODEL_SUFFIXES`).
    ``accepted_types`` are skops type names the user accepted (honoured only with
    ``policy.allow_user_types``).
    """
    path = os.fspath(path)
    label = name or os.path.basename(path)
    suffix = _suffix(path, name, MODEL_SUFFIXES)
    if suffix not in MODEL_SUFFIXES:
        raise LoadError(
            f"{label}: a model file must end in {', '.join(MODEL_SUFFIXES)} (got "
            f"{suffix or 'no suffix'}). Save it with skops.io.dump(model, 'model.skops') or export "
            f"it to ONNX.",
            field="model",
        )
    if suffix in PICKLE_SUFFIXES and not policy.allow_pickle:
        raise LoadError(
            f"{label} is a pickle/joblib file. Loading such a file executes any code it contains, "
            f"so this server refuses them. Save the model with skops instead "
            f'(import skops.io; skops.io.dump(model, "model.skops")) or convert it to ONNX '
            f"(skl2onnx.to_onnx), and upload that file. For trusted users only, the operator can "
            f"start the server with --allow-pickle.",
            field="model",
        )
    _check_size(path, label, policy, "model")
    versions: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if suffix == ".skops":
            model, versions = _load_skops(path, label, policy, tuple(accepted_types))
        elif suffix == ".onnx":
            model = _load_onnx(path, label)
        else:
            model = _load_pickle(path, label)
        if suffix != ".onnx":
            try:
                check_model(model, label)  # before anything calls the model
            except ModelFileError as exc:
                raise LoadError(str(exc), field="model") from exc
    versions += [
        str(w.message.original_sklearn_version) for w in caught if hasattr(w.message, "original_sklearn_version")
    ]
    if not hasattr(model, "predict") and not hasattr(model, "predict_proba"):
        raise LoadError(
            f"{label} holds a {type(model).__name__}, which has neither predict nor predict_proba; "
            f"upload a fitted model (an estimator or a Pipeline).",
            field="model",
        )
    _remember_warnings(model, _version_warnings(model, label, versions))
    return model


def load_warnings(model) -> list[str]:
    """Warnings recorded when ``model`` was loaded (e.g. another scikit-learn version)."""
    try:
        found = _WARNINGS.get(model)
    except TypeError:
        found = None
    if found is None:
        found = getattr(model, "_loader_warnings", ())
    return list(found)


def model_versions(path) -> dict[str, str]:
    """Library -> version as recorded in the file, read without loading the model.

    .skops: ``skops``, ``skops protocol`` and ``scikit-learn`` (the ``_sklearn_version``
    values in the schema, comma-joined if several). .onnx: the producer (e.g. ``skl2onnx``)
    with its version, ``onnx ir_version`` and ``opset <domain>`` entries. Other formats, or
    an unreadable file: {}.
    """
    path = os.fspath(path)
    suffix = _suffix(path, None, MODEL_SUFFIXES)
    try:
        if suffix == ".skops":
            schema = _skops_schema(path, "model.skops")
            found = {"skops": str(schema.get("_skops_version", "")), "skops protocol": str(schema.get("protocol", ""))}
            sk = sorted(set(_values_of(schema, "_sklearn_version")))
            if sk:
                found["scikit-learn"] = ", ".join(sk)
            return {k: v for k, v in found.items() if v}
        if suffix == ".onnx":
            return _onnx_versions(path)
    except Exception:  # unreadable: load_model says why
        return {}
    return {}


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


# --- skops ---------------------------------------------------------------------------------
def _inspect_skops(path: str, label: str, policy: Policy) -> Inspection:
    try:
        return inspect_skops(path, label, limit=policy.max_bytes)
    except ModelFileError as exc:
        raise LoadError(str(exc), field="model") from exc


def _skops_schema(path: str, label: str | None, policy: Policy = Policy()) -> dict:
    return _inspect_skops(path, label or "model.skops", policy).schema


def _nodes(schema):
    """Every dict in the schema (iteratively: a crafted file may nest deeply)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _values_of(schema, key: str) -> list[str]:
    found = []
    for node in _nodes(schema):
        value = node.get(key)
        if isinstance(value, dict) and isinstance(value.get("content"), str):
            try:
                found.append(str(json.loads(value["content"])))
            except ValueError:
                continue
    return found


def _skops_hint(schema: dict) -> str:
    import skops

    saved = schema.get("_skops_version")
    if saved and str(saved) != skops.__version__:
        return f" It was saved with skops {saved}; this server runs skops {skops.__version__}."
    return ""


def _load_skops(path: str, label: str, policy: Policy, accepted: tuple) -> tuple[object, list[str]]:
    """The model and the scikit-learn versions its schema records."""
    found = _inspect_skops(path, label, policy)
    rest = list(found.refused)
    if rest:
        listed = ", ".join(rest)
        why = (
            f"{label} contains types this server does not load by itself: {listed}. Building "
            f"them could run code (even classes of NumPy, SciPy or scikit-learn can delete files "
            f"when they are built or freed). This server accepts automatically only a list of "
            f"scikit-learn estimators and the array and attribute types fitted models need "
            f"(functions and classes used as callables, e.g. FunctionTransformer(func=...), "
            f"always need acceptance)."
        )
        if not policy.allow_user_types:
            raise LoadError(
                f"{why} Ask the operator to start the server with --allow-user-types to "
                f"accept such types per upload, or export the model to ONNX.",
                field="model",
            )
        missing = [t for t in rest if t not in accepted]
        if missing:
            raise LoadError(
                f"{why} Tick the types you trust ({', '.join(missing)}) and load again, or export the model to ONNX.",
                field="model",
            )
    import skops.io as sio

    # skops audits the file again and refuses anything outside this exact list
    trusted = found.allowed + [t for t in rest if t in accepted]
    try:
        return sio.load(path, trusted=trusted), _values_of(found.schema, "_sklearn_version")
    except ImportError as exc:
        raise LoadError(
            f"{label} needs a module this server does not have ({_short(exc)}); ask the "
            f"operator to install it, or export the model to ONNX.",
            field="model",
        ) from exc
    except Exception as exc:  # a crafted schema can make skops fail in any way (even RecursionError)
        raise LoadError(
            f"{label} is not a valid .skops file ({type(exc).__name__}: {_short(exc)}).{_skops_hint(found.schema)}",
            field="model",
        ) from exc


# --- pickle / joblib (operator opt-in only) ------------------------------------------------
def _load_pickle(path: str, label: str) -> object:
    import joblib

    try:
        return joblib.load(path)
    except Exception as exc:
        raise LoadError(
            f"{label} could not be loaded as a pickle/joblib file ({type(exc).__name__}: {_short(exc)}).", field="model"
        ) from exc


# --- version warnings ----------------------------------------------------------------------
_WARNINGS: weakref.WeakKeyDictionary[object, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _remember_warnings(model, messages: list[str]) -> None:
    try:
        _WARNINGS[model] = tuple(messages)
    except TypeError:  # unhashable or not weak-referenceable
        try:
            model._loader_warnings = tuple(messages)
        except Exception:
            pass


def _version_warnings(model, label: str, versions: list[str]) -> list[str]:
    import sklearn

    for est in _estimators(model):
        saved = vars(est).get("_sklearn_version") if hasattr(est, "__dict__") else None
        if isinstance(saved, str):
            versions.append(saved)
    other = sorted(set(versions) - {sklearn.__version__})
    if not other:
        return []
    return [
        f"{label} was saved with scikit-learn {', '.join(other)}; this server runs "
        f"{sklearn.__version__}: predictions may differ or fail."
    ]


def _estimators(model, depth: int = 0):
    """The model, the steps of Pipelines and the transformers of ColumnTransformers."""
    yield model
    if depth > 20:
        return
    children = []
    for attr in ("steps", "transformers_", "transformer_list"):
        items = getattr(model, "__dict__", {}).get(attr)
        if isinstance(items, list):
            children += [item[1] for item in items if isinstance(item, tuple) and len(item) >= 2]
    for child in children:
        if not isinstance(child, str):
            yield from _estimators(child, depth + 1)


# --- ONNX ----------------------------------------------------------------------------------
def _onnx_session(path: str, label: str):
    """An ONNX Runtime session on a private copy of the file (no neighbouring files)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="onnx-load-") as folder:
        local = os.path.join(folder, "model.onnx")
        shutil.copyfile(path, local)
        try:
            session = ort.InferenceSession(local, providers=["CPUExecutionProvider"])
        except Exception as exc:
            message = _short(exc).replace(local, label).replace(folder, ".").replace(path, label)
            if "external data" in message.lower():
                raise LoadError(
                    f"{label} keeps tensors in separate external-data files, which this "
                    f"server does not read; save the model as one file "
                    f"(onnx.save_model(model, path, save_as_external_data=False)).",
                    field="model",
                ) from exc
            raise LoadError(
                f"{label} is not a valid ONNX model that ONNX Runtime can run ({message}).", field="model"
            ) from exc
        proto = _onnx_proto(local)
    return session, proto


def _onnx_proto(path: str):
    """The parsed model (protobuf only, no external data), or None without the onnx package."""
    try:
        import onnx
    except ImportError:
        return None
    try:
        return onnx.load_model(path, load_external_data=False)
    except Exception:
        return None


def _onnx_versions(path: str) -> dict[str, str]:
    session, proto = _onnx_session(path, "model.onnx")
    meta = session.get_modelmeta()
    producer = meta.producer_name or "producer"
    found = {producer: (proto.producer_version if proto is not None else "") or "unknown version"}
    if meta.version:
        found["model version"] = str(meta.version)
    if proto is not None:
        found["onnx ir_version"] = str(proto.ir_version)
        for opset in proto.opset_import:
            found[f"opset {opset.domain or 'ai.onnx'}"] = str(opset.version)
    return found


def _load_onnx(path: str, label: str) -> OnnxModel:
    session, proto = _onnx_session(path, label)
    model = OnnxModel(session, name=label, classes=_proto_classes(proto, session))
    if model._estimator_type == "classifier":
        try:
            _ = model.classes_  # fail at load time, not at the first prediction
        except ModelError as exc:
            raise LoadError(str(exc), field="model") from exc
    return model


def _proto_classes(proto, session):
    """Class labels stored in the graph: the ZipMap's, else the one classifier node's."""
    if proto is None:
        return None
    outputs = {o.name: o for o in session.get_outputs()}
    label_type = next((o.type for name, o in outputs.items() if "probabilit" not in name.lower()), "")

    def labels(node):
        for attr in node.attribute:
            if attr.name == "classlabels_strings" and len(attr.strings):
                return tuple(s.decode("utf-8") for s in attr.strings)
            if attr.name in ("classlabels_int64s", "classlabels_ints") and len(attr.ints):
                return tuple(int(i) for i in attr.ints)
        return None

    zipmaps = [labels(n) for n in proto.graph.node if n.op_type == "ZipMap"]
    if zipmaps and zipmaps[-1]:
        return np.asarray(zipmaps[-1])
    found = {labels(n) for n in proto.graph.node} - {None}
    if len(found) != 1:
        return None
    classes = found.pop()
    if isinstance(classes[0], str) != (label_type == "tensor(string)"):
        return None  # labels are mapped after the classifier node; cannot tell
    return np.asarray(classes)


class OnnxModel:
    """An ONNX Runtime session with the estimator interface ``compute`` uses.

    Inputs: one ``[None, 1]`` input per column (skl2onnx's default for DataFrames; then
    ``feature_names_in_`` holds the input names) or a single ``[None, p]`` tensor (then
    only ``n_features_in_`` = p, when the graph fixes it). A classifier is recognised by an
    output named like ``probabilities`` / ``output_probability`` (a tensor or ZipMap's list
    of dicts); ``classes_`` comes from the graph, else from ZipMap's keys on a dummy row.
    Runtime errors become :class:`compute.ModelError` naming the file.
    """

    def __init__(self, session, *, name: str = "model.onnx", classes=None) -> None:
        self._session = session
        self.name = name
        self._inputs = []
        for inp in session.get_inputs():
            if inp.type not in _ONNX_DTYPES:
                raise LoadError(
                    f"{name}: input {inp.name!r} has type {inp.type}, which this server "
                    f"cannot feed (supported: {', '.join(_ONNX_DTYPES)}).",
                    field="model",
                )
            self._inputs.append((inp.name, _ONNX_DTYPES[inp.type], list(inp.shape)))
        self._per_column = len(self._inputs) > 1
        if self._per_column:
            wide = [
                n
                for n, _, shape in self._inputs
                if len(shape) > 2 or (len(shape) == 2 and isinstance(shape[1], int) and shape[1] != 1)
            ]
            if wide:
                raise LoadError(
                    f"{name} has several inputs and some take more than one column "
                    f"({wide[:5]}); this server supports one input per column or a "
                    f"single tensor input.",
                    field="model",
                )
        outputs = session.get_outputs()
        proba = [o for o in outputs if "probabilit" in o.name.lower()]
        if proba:
            self._estimator_type = "classifier"
            self._proba_name = proba[0].name
            self._proba_is_map = proba[0].type.startswith("seq(map(")
            others = [o.name for o in outputs if o.name != self._proba_name]
            self._label_name = others[0] if others else None
        else:
            self._estimator_type = "regressor"
            self._output_name = outputs[0].name
        self._classes = None if classes is None else np.asarray(classes)

    def __repr__(self) -> str:
        return f"OnnxModel({self.name!r}, {self._estimator_type})"

    # attributes compute reads (AttributeError where sklearn would not have them)
    @property
    def feature_names_in_(self) -> np.ndarray:
        if not self._per_column:
            raise AttributeError("single tensor input: no column names")
        return np.asarray([n for n, _, _ in self._inputs], dtype=object)

    @property
    def n_features_in_(self) -> int:
        if self._per_column:
            return len(self._inputs)
        shape = self._inputs[0][2]
        if len(shape) == 2 and isinstance(shape[1], int):
            return shape[1]
        raise AttributeError("the input's number of columns is not fixed")

    @property
    def classes_(self) -> np.ndarray:
        if self._estimator_type != "classifier":
            raise AttributeError("regressor: no classes_")
        if self._classes is None:
            self._classes = self._discover_classes()
        return self._classes

    @property
    def predict_proba(self):
        if self._estimator_type != "classifier":
            raise AttributeError("regressor: no predict_proba")
        return self._predict_proba

    def predict(self, X) -> np.ndarray:
        if self._estimator_type == "regressor":
            out = np.asarray(self._run(self._output_name, X), dtype=np.float64)
            return out.ravel() if out.ndim == 2 and out.shape[1] == 1 else out
        if self._label_name is None:
            return self.classes_[np.argmax(self._predict_proba(X), axis=1)]
        return np.asarray(self._run(self._label_name, X)).ravel()

    def _predict_proba(self, X) -> np.ndarray:
        out = self._run(self._proba_name, X)
        if not self._proba_is_map:
            return np.asarray(out, dtype=np.float64)
        classes = self.classes_
        if not out:
            return np.empty((0, len(classes)))
        if list(out[0]) == list(classes):
            return np.array([list(row.values()) for row in out], dtype=np.float64)
        return np.array([[row[c] for c in classes] for row in out], dtype=np.float64)

    def _discover_classes(self) -> np.ndarray:
        error = ModelError(
            f"{self.name} does not say which class each probability column belongs "
            f"to; export it with skl2onnx's default ZipMap output (without "
            f"options={{'zipmap': False}})."
        )
        if not self._proba_is_map:
            raise error
        dummy = {}
        for name, dtype, shape in self._inputs:
            width = shape[1] if len(shape) == 2 and isinstance(shape[1], int) else 1
            dummy[name] = np.full((1, width) if len(shape) == 2 else (1,), "" if dtype is object else 0, dtype=dtype)
        try:
            out = self._session.run([self._proba_name], dummy)[0]
        except Exception as exc:
            raise error from exc
        return np.asarray(list(out[0]))

    def _feeds(self, X) -> dict:
        if not self._per_column:
            name, dtype, shape = self._inputs[0]
            arr = X.to_numpy(dtype=dtype) if isinstance(X, pd.DataFrame) else np.asarray(X, dtype=dtype)
            return {name: arr}
        feeds = {}
        for j, (name, dtype, shape) in enumerate(self._inputs):
            col = X[name] if isinstance(X, pd.DataFrame) else pd.Series(np.asarray(X)[:, j])
            if dtype is object:
                if not (pd.api.types.is_string_dtype(col.dtype) or col.dtype == object):
                    col = col.astype(str)
                arr = col.to_numpy(dtype=object)
            else:
                arr = col.to_numpy(dtype=dtype)
            feeds[name] = arr.reshape(-1, 1) if len(shape) == 2 else arr
        return feeds

    def _run(self, output: str, X):
        try:
            return self._session.run([output], self._feeds(X))[0]
        except Exception as exc:
            raise ModelError(f"{self.name} could not predict: {type(exc).__name__}: {_short(exc)}") from exc


# --- data ----------------------------------------------------------------------------------
def read_data(path, *, name: str | None = None, policy: Policy = Policy()) -> pd.DataFrame:
    """Parse an uploaded .csv (UTF-8, comma-separated, header line) or .parquet file.

    The frame's ``attrs["name"]`` is set to the user's file name (used in later messages).
    """
    path = os.fspath(path)
    label = name or os.path.basename(path)
    suffix = _suffix(path, name, DATA_SUFFIXES)
    if suffix not in DATA_SUFFIXES:
        raise LoadError(
            f"{label}: a data file must end in {', '.join(DATA_SUFFIXES)} (got {suffix or 'no suffix'}).", field="data"
        )
    _check_size(path, label, policy, "data")
    frame = _read_csv(path, label, policy) if suffix == ".csv" else _read_parquet(path, label, policy)
    _check_frame(frame, label, policy)
    frame.attrs["name"] = label
    return frame


def _read_csv(path: str, label: str, policy: Policy) -> pd.DataFrame:
    with open(path, "rb") as fh:
        head = fh.read(64 * 1024)
    kind = (
        "an Excel workbook (.xlsx)"
        if head.startswith(b"PK\x03\x04")
        else "an old Excel workbook (.xls)"
        if head.startswith(b"\xd0\xcf\x11\xe0")
        else "a binary file (it contains NUL bytes; UTF-16 text does too)"
        if b"\x00" in head
        else None
    )
    if kind:
        raise LoadError(
            f"{label} looks like {kind}, not a CSV file; export it as CSV (UTF-8), e.g. "
            f"in Excel with File > Save As > 'CSV UTF-8'.",
            field="data",
        )
    _check_utf8(path, label)
    with open(path, encoding="utf-8-sig", newline="") as fh:
        try:
            header = next((row for row in csv.reader(fh) if row), None)
        except csv.Error as exc:
            raise LoadError(f"{label}: the header line cannot be read as CSV ({exc}).", field="data") from exc
    if header is None:
        raise LoadError(f"{label} has no header line; the first line must name the columns.", field="data")
    _check_names(header, label, policy)
    try:
        frame = pd.read_csv(
            path, encoding="utf-8-sig", engine="c", on_bad_lines="error", nrows=policy.max_rows + 1, low_memory=False
        )
    except pd.errors.ParserError as exc:
        found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        if found:
            expected, line, saw = found.groups()
            raise LoadError(
                f"{label}: line {line} has {saw} fields but the header has {expected}. "
                f'Check for an unquoted comma in a value (quote it: "a, b") or a '
                f"missing header name.",
                field="data",
            ) from exc
        raise LoadError(f"{label} cannot be parsed as CSV ({_short(exc)}).", field="data") from exc
    except (pd.errors.EmptyDataError, ValueError) as exc:
        raise LoadError(f"{label} cannot be parsed as CSV ({_short(exc)}).", field="data") from exc
    return frame


def _check_utf8(path: str, label: str) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = lines = 0
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            pending = len(decoder.getstate()[0])  # bytes of an unfinished character
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                pos = offset - pending + exc.start
                line = lines + chunk[: max(exc.start - pending, 0)].count(b"\n") + 1
                raise LoadError(
                    f"{label} is not UTF-8 text: byte {pos} (0x{exc.object[exc.start]:02x}, "
                    f"line {line}) is invalid. Re-save the file as CSV UTF-8 (in Excel: "
                    f"'CSV UTF-8'; in pandas: to_csv(..., encoding='utf-8')).",
                    field="data",
                ) from exc
            if not chunk:
                return
            offset += len(chunk)
            lines += chunk.count(b"\n")


def _read_parquet(path: str, label: str, policy: Policy) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:
        raise LoadError(f"{label} is not a valid Parquet file ({_short(exc)}).", field="data") from exc
    try:
        schema = pf.schema_arrow
        if pf.metadata.num_rows > policy.max_rows:
            raise LoadError(
                f"{label} has {pf.metadata.num_rows} rows; this server accepts at most "
                f"{policy.max_rows}. Upload a sample of the rows.",
                field="data",
            )
        _check_names(list(schema.names), label, policy)
        nested = [f.name for f in schema if pa.types.is_nested(f.type)]
        if nested:
            raise LoadError(
                f"{label} has nested (list/struct/map) columns {nested[:10]}; flatten them into plain columns.",
                field="data",
            )
        expanded, allowed = _parquet_in_memory(pf), PARQUET_EXPANSION * policy.max_bytes
        if expanded > allowed:
            raise LoadError(
                f"{label} would take about {expanded / 2**20:,.0f} MiB once decompressed, more "
                f"than this server reads from one file ({allowed / 2**20:,.0f} MiB, "
                f"{PARQUET_EXPANSION} x the upload limit). Upload fewer rows or columns.",
                field="data",
            )
        try:
            return pf.read().to_pandas()
        except Exception as exc:
            if isinstance(exc, MemoryError) or "malloc" in str(exc):
                raise LoadError(
                    f"{label} needs more memory to read than this server allows per file; "
                    f"upload fewer rows or columns.",
                    field="data",
                ) from exc
            raise LoadError(f"{label} could not be read as Parquet ({_short(exc)}).", field="data") from exc
    finally:
        pf.close()


def _parquet_in_memory(pf) -> int:
    """Bytes the table takes once read: 8 per value (numbers, offsets, dictionary codes) plus
    the uncompressed size of text and binary columns, from the file's metadata alone."""
    import pyarrow as pa

    meta = pf.metadata
    total = meta.num_rows * meta.num_columns * 8
    text = {
        j
        for j, f in enumerate(pf.schema_arrow)
        if pa.types.is_string(f.type)
        or pa.types.is_binary(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_large_binary(f.type)
    }
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        total += sum(group.column(j).total_uncompressed_size for j in range(group.num_columns) if j in text)
    return int(total)


def _check_names(names: list, label: str, policy: Policy) -> None:
    if len(names) > policy.max_columns:
        raise LoadError(
            f"{label} has {len(names)} columns; this server accepts at most "
            f"{policy.max_columns}. Keep the model's input columns and the target.",
            field="data",
        )
    blank = [j + 1 for j, n in enumerate(names) if not str(n).strip() or re.fullmatch(r"Unnamed: \d+", str(n))]
    if blank:
        raise LoadError(
            f"{label}: column(s) {blank[:10]} have no name in the header. Name every "
            f"column; a leading unnamed column is usually a row index saved by pandas "
            f"(save with to_csv(..., index=False)).",
            field="data",
        )
    counts = pd.Series([str(n) for n in names]).value_counts()
    duplicated = counts[counts > 1].index.tolist()
    if duplicated:
        raise LoadError(
            f"{label} has duplicated column names {duplicated[:10]}; each column needs its own name.", field="data"
        )


def _check_frame(frame: pd.DataFrame, label: str, policy: Policy) -> None:
    if len(frame) == 0:
        raise LoadError(f"{label} has a header but no data rows.", field="data")
    if len(frame) > policy.max_rows:
        raise LoadError(
            f"{label} has more than {policy.max_rows} rows, the most this server accepts; upload a sample of the rows.",
            field="data",
        )
    _check_names(list(frame.columns), label, policy)
    empty = frame.columns[frame.isna().all().to_numpy()].tolist()
    if empty:
        raise LoadError(
            f"{label}: column(s) {[str(c) for c in empty[:10]]} have no values (all "
            f"missing); delete them or fill them in.",
            field="data",
        )


# --- model and data together ----------------------------------------------------------------
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
        hint = _close_matches(target, columns, n=3)
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
                close = _close_matches(col, columns, n=1)
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
        detail = str(exc) if isinstance(exc, ModelError) else f"{type(exc).__name__}: {_short(exc)}"
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


# --- small helpers -------------------------------------------------------------------------
def _suffix(path: str, name: str | None, known: tuple[str, ...]) -> str:
    """The suffix of ``path`` if it is a known one, else that of ``name``, else of ``path``."""
    from_path = os.path.splitext(path)[1].lower()
    if from_path in known or not name:
        return from_path
    from_name = os.path.splitext(name)[1].lower()
    return from_name if from_name in known else from_path


def _close_matches(word, options, *, n: int) -> list[str]:
    """Close matches ignoring case, returned as spelled in ``options``."""
    spelled = {str(o).lower(): str(o) for o in options}
    return [spelled[m] for m in difflib.get_close_matches(str(word).lower(), list(spelled), n=n)]


def _check_size(path: str, label: str, policy: Policy, field: str) -> int:
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise LoadError(f"{label} could not be read; upload it again.", field=field) from exc
    if size == 0:
        raise LoadError(f"{label} is empty (0 bytes); upload the file again.", field=field)
    if size > policy.max_bytes:
        raise LoadError(
            f"{label} is {size / 2**20:.1f} MB; this server accepts files up to "
            f"{policy.max_bytes / 2**20:.0f} MB. Upload a sample of the rows or a smaller "
            f"file.",
            field=field,
        )
    return size


def _short(exc: BaseException, limit: int = 300) -> str:
    """The first non-empty line of an exception's message, at most ``limit`` characters."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
