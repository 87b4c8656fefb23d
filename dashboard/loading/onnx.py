"""ONNX models: run by ONNX Runtime (CPU) from a private copy, behind the estimator interface."""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import pandas as pd

from compute.errors import ModelError

from .errors import LoadError, short

ONNX_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
    "tensor(string)": object,
}


def _onnx_session(path: str, label: str):
    """An ONNX Runtime session on a private copy of the file (no neighbouring files)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="onnx-load-") as folder:
        local = os.path.join(folder, "model.onnx")
        shutil.copyfile(path, local)
        try:
            session = ort.InferenceSession(local, providers=["CPUExecutionProvider"])
        except Exception as exc:
            message = short(exc).replace(local, label).replace(folder, ".").replace(path, label)
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


def onnx_versions(path: str) -> dict[str, str]:
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


def load_onnx(path: str, label: str) -> OnnxModel:
    session, proto = _onnx_session(path, label)
    model = OnnxModel(session, name=label, classes=_proto_classes(proto, session), columns=_proto_columns(proto))
    if model._estimator_type == "classifier":
        try:
            _ = model.classes_  # fail at load time, not at the first prediction
        except ModelError as exc:
            raise LoadError(str(exc), field="model") from exc
    return model


#: metadata keys an exporter may store the input column names under (a JSON list or commas)
COLUMN_KEYS = ("feature_names", "feature_names_in", "feature_names_in_", "columns", "input_columns")


def _proto_columns(proto) -> list[str] | None:
    """The input column names an exporter stored in the model's metadata, if any (e.g.
    ``onx.metadata_props`` key ``feature_names`` = ``'["CRIM", "ZN", ...]'``)."""
    if proto is None:
        return None
    import json

    props = {p.key: p.value for p in getattr(proto, "metadata_props", [])}
    for key in COLUMN_KEYS:
        text = props.get(key)
        if not text:
            continue
        try:
            names = json.loads(text)
        except ValueError:
            names = [part.strip() for part in text.split(",")]
        if isinstance(names, list) and names and all(isinstance(n, str) and n for n in names):
            return names
    return None


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
    only ``n_features_in_`` = p, when the graph fixes it, and ``feature_names_in_`` when the
    exporter stored the names in the metadata, :data:`COLUMN_KEYS`). A classifier is recognised by an
    output named like ``probabilities`` / ``output_probability`` (a tensor or ZipMap's list
    of dicts); ``classes_`` comes from the graph, else from ZipMap's keys on a dummy row.
    Runtime errors become :class:`compute.ModelError` naming the file.
    """

    def __init__(self, session, *, name: str = "model.onnx", classes=None, columns=None) -> None:
        self._session = session
        self.name = name
        self._columns = list(columns) if columns else None  # a single tensor's column names (metadata)
        self._inputs = []
        for inp in session.get_inputs():
            if inp.type not in ONNX_DTYPES:
                raise LoadError(
                    f"{name}: input {inp.name!r} has type {inp.type}, which this server "
                    f"cannot feed (supported: {', '.join(ONNX_DTYPES)}).",
                    field="model",
                )
            self._inputs.append((inp.name, ONNX_DTYPES[inp.type], list(inp.shape)))
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
            width = self._inputs[0][2][1] if len(self._inputs[0][2]) == 2 else None
            if self._columns and (not isinstance(width, int) or width == len(self._columns)):
                return np.asarray(self._columns, dtype=object)  # named in the model's metadata
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
        dummy: dict[str, np.ndarray] = {}
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
            raise ModelError(f"{self.name} could not predict: {type(exc).__name__}: {short(exc)}") from exc
