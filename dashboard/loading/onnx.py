"""ONNX models: run by ONNX Runtime (CPU) from a private copy, behind the estimator interface.

An uploaded ``.onnx`` file is hostile until proven otherwise; it is only ever opened inside the
isolated load or job process (:func:`dashboard.isolation.isolated`). Before ONNX Runtime sees it,
:func:`_outline` reads the file's top level straight from the protobuf wire format (no protobuf
library, no recursion, no ``onnx`` package: the server does not depend on it) and
:func:`_check_outline` refuses what cannot be a usable model: an initializer whose declared
shape does not match the values the file holds (``dims`` [10^6, 10^6] with 4 bytes of data), a
sparse initializer whose dense form would not fit in the process's memory, tensors kept in
external files. ONNX Runtime's own refusals (future IR version or opset, unknown operators,
nesting deeper than its parser reads, ``std::bad_alloc``) become messages naming the file,
the problem and what to do (:func:`_explain`). At prediction time :class:`OnnxModel` checks that
the graph returns one finite number (or probability row) per input row: a graph can compute
anything, including outputs whose length depends on the batch, text, NaN or infinity.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import tempfile

import numpy as np
import pandas as pd

from compute.errors import ModelError

from .errors import LoadError, Policy, short
from .onnx_outline import (
    MAX_SUBGRAPH_LEVELS,
    _check_outline,
    _Malformed,
    _memory_left,
    _Outline,
    _outline,
    _size,
    _subgraph_levels,
)

ONNX_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
    "tensor(string)": object,
}

#: output types a regressor's output or a classifier's probabilities may not have
NOT_NUMBERS = ("tensor(string)", "tensor(complex64)", "tensor(complex128)")

# --- ONNX Runtime's messages -----------------------------------------------------------------
_SOURCE = re.compile(r"(?:/onnxruntime_src/)?[\w./-]*\.(?:cc|h|cpp|hpp):\d+ ")
_SIGNATURE = re.compile(r"[^()'\".]*?::[^()'\".]*?\(")


def _reason(text: str) -> str:
    """ONNX Runtime's message without its error code, source locations and C++ signatures."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    if "status.IsOK() was false." in text:
        text = text.rsplit("status.IsOK() was false.", 1)[1]
    codes = re.findall(r"\[ONNXRuntimeError\] : \d+ : (\w+) : ", text)
    text = re.sub(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"Load model from .*? failed:", "", text)
    parts, pos = [], 0
    for match in _SOURCE.finditer(text):
        if match.start() < pos:
            continue
        parts.append(text[pos : match.start()])
        pos = match.end()
        signature = _SIGNATURE.match(text, pos)
        if signature:  # skip the function's parameters, balanced
            depth, i = 1, signature.end()
            while i < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            pos = i + len(re.match(r"(?: const)?\s*", text[i:]).group())  # type: ignore[union-attr]
        else:
            word = re.match(r"[A-Za-z_]\w*\s+", text[pos:])
            pos += len(word.group()) if word else 0
    parts.append(text[pos:])
    return " ".join(" ".join(parts).split()) or (codes[-1] if codes else "")


def _explain(exc: Exception, buf, outline: _Outline | None, label: str, names: tuple[str, ...]) -> LoadError:
    """A LoadError naming the file, what is wrong and what to do, for ONNX Runtime's refusal."""
    import onnxruntime as ort

    text = str(exc)
    reason = _reason(text)
    for name in names:
        reason = reason.replace(name, label)
    runtime = f"ONNX Runtime {ort.__version__}"
    if isinstance(exc, UnicodeDecodeError):
        return LoadError(
            f"{label} is not a valid ONNX model: it holds names or text that are not valid UTF-8 ({reason}). "
            f"The file is damaged or crafted; export the model again.",
            field="model",
        )
    if "bad_alloc" in text:
        left = _memory_left()
        room = "" if left is None else f" (about {_size(left)} were left)"
        return LoadError(
            f"{label} needs more memory than this server allows a model process{room}: ONNX Runtime ran out "
            f"while preparing it. A file this demanding may be crafted; if it is a genuine large model, ask the "
            f"operator to raise --job-memory-mb.",
            field="model",
        )
    if "INVALID_PROTOBUF" in text or "protobuf parsing failed" in text.lower():
        return _protobuf_refusal(buf, outline, label, runtime)
    match = re.search(r"IR version: (\d+), max supported IR version: (\d+)", reason)
    if match:
        return LoadError(
            f"{label} is stamped with ONNX IR version {match.group(1)}; {runtime} on this server reads IR "
            f"versions up to {match.group(2)}. Export the model with an older onnx package or set "
            f"model.ir_version to {match.group(2)} or lower, or ask the operator to upgrade ONNX Runtime.",
            field="model",
        )
    match = re.search(r"[Oo]pset (\d+) is under development|opset.*?(\d+).*?not supported", reason)
    if match:
        version = int(match.group(1) or match.group(2))
        domains = [d for d, v in (outline.opsets.items() if outline else ()) if v == version] or ["ai.onnx"]
        return LoadError(
            f"{label} uses opset {version} of the {', '.join(domains)} operators, which {runtime} on this "
            f"server does not know (a future or unreleased version). Export the model with an older opset "
            f"(skl2onnx: target_opset=...; torch.onnx.export: opset_version=...).",
            field="model",
        )
    registered = re.search(r"([\w.]+):(\S+?)\(-?\d+\) is not a registered function/op", reason)
    standard = re.search(r"No Op registered for (\S+) with domain_version of (\d+)", reason)
    unimported = re.search(r"No opset import for domain '([^']*)'", reason)
    what = None
    if registered:
        operator, domain = registered.group(2), registered.group(1)
        what = f"the operator {operator!r} of the domain {domain!r}, which {runtime} does not have"
    elif standard:
        operator, opset = standard.group(1), standard.group(2)
        what = f"the operator {operator!r}, which opset {opset} of the standard ONNX operators does not define"
    elif unimported:
        what = f"operators of the domain {unimported.group(1)!r} without importing an opset for it"
    if what:
        return LoadError(
            f"{label} uses {what}. This server runs standard ONNX (and ONNX-ML) operators only and loads no "
            f"custom-operator libraries; export the model with standard operators.",
            field="model",
        )
    if len(reason) > 300:
        reason = reason[:299] + "…"
    return LoadError(f"{label} is not a valid ONNX model that ONNX Runtime can run ({reason}).", field="model")


def _protobuf_refusal(buf, outline: _Outline | None, label: str, runtime: str) -> LoadError:
    """ONNX Runtime could not parse the protobuf message: subgraphs nested too deep, or a
    damaged file."""
    levels = None
    if outline is not None and outline.graph is not None:
        try:
            levels = _subgraph_levels(buf, outline.graph)
        except _Malformed:
            levels = None
    if levels is not None and levels > MAX_SUBGRAPH_LEVELS:
        return LoadError(
            f"{label} nests subgraphs (the branches of If nodes, the bodies of Loop and Scan nodes) "
            f"{levels:,} levels deep; {runtime} reads at most about {MAX_SUBGRAPH_LEVELS} levels (its "
            f"protobuf parser stops at 100 nested messages). Exporters write a few levels: the file is "
            f"crafted or damaged. Flatten the model's control flow, or export it again.",
            field="model",
        )
    return LoadError(
        f"{label} is not a valid ONNX model: {runtime} cannot read it (the protobuf message is damaged, or "
        f"is not an ONNX ModelProto). Export the model again (e.g. skl2onnx.to_onnx) and upload the .onnx file.",
        field="model",
    )


def _onnx_session(path: str, label: str):
    """An ONNX Runtime session on a private copy of the file (no neighbouring files), after the
    checks of :func:`_check_outline`. Runs in the isolated load or job process only."""
    try:
        import onnxruntime as ort
    except (ImportError, OSError) as exc:  # e.g. too little address space to map its library
        raise LoadError(
            f"{label} could not be loaded: ONNX Runtime did not start in the model process ({short(exc)}). "
            f"If this repeats, the operator may have set --job-memory-mb too low for it.",
            field="model",
        ) from exc

    with tempfile.TemporaryDirectory(prefix="onnx-load-") as folder:
        local = os.path.join(folder, "model.onnx")
        shutil.copyfile(path, local)
        with open(local, "rb") as handle:
            try:
                buf = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file
                buf = b""  # type: ignore[assignment]
        try:
            try:
                outline: _Outline | None = _outline(buf)
            except _Malformed:
                outline = None  # not protobuf: ONNX Runtime says so below
            if outline is not None:
                _check_outline(outline, label)
            options = ort.SessionOptions()
            options.log_severity_level = 3  # a crafted file's warnings would flood the server log
            try:
                session = ort.InferenceSession(local, sess_options=options, providers=["CPUExecutionProvider"])
            except Exception as exc:
                raise _explain(exc, buf, outline, label, (local, folder, path)) from exc
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()
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
    Runtime errors become :class:`compute.ModelError` naming the file, and so does an output
    that is not one value (or probability row) per input row, or not finite: the error then
    has ``rows``, the positions of the rows concerned in the batch.
    """

    #: rows predicted at load (:func:`dashboard.loading.checks.check_model_data`): a graph is cheap
    #: to call, and may fail only for some batch sizes or rows
    LOAD_PROBE_ROWS = 10_000
    LOAD_PROBE_CELLS = 2_000_000

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
        if not self._inputs:
            raise LoadError(f"{name} has no inputs, so it cannot depend on the data.", field="model")
        most = Policy().max_columns
        if len(self._inputs) > most:
            raise LoadError(
                f"{name} takes {len(self._inputs):,} separate inputs, one per column; this server reads data "
                f"files of at most {most:,} columns, so it could never be fed. Export it with one tensor input "
                f"(all columns in one [None, p] input) and upload a data file of at most {most:,} columns.",
                field="model",
            )
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
        if not outputs:
            raise LoadError(f"{name} has no outputs.", field="model")
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
        numbers = proba[0] if proba else outputs[0]
        if numbers.type in NOT_NUMBERS or not (numbers.type.startswith(("tensor(", "seq(map("))):
            role = "its class probabilities" if proba else "its prediction (the first output)"
            raise LoadError(
                f"{name}: {role}, output {numbers.name!r}, is of type {numbers.type}, not numbers. A regressor's "
                f"first output must be a numeric tensor of one value per row; a classifier needs an output of "
                f"class probabilities named like 'probabilities' or 'output_probability' (as skl2onnx exports "
                f"it). A model that outputs class labels only cannot be explained here: export its probabilities.",
                field="model",
            )
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

    def load_probe_rows(self, n_columns: int) -> int:
        """Rows to predict when the model is loaded: up to :attr:`LOAD_PROBE_ROWS`, at most
        :attr:`LOAD_PROBE_CELLS` values."""
        return max(5, min(self.LOAD_PROBE_ROWS, self.LOAD_PROBE_CELLS // max(1, n_columns)))

    def predict(self, X) -> np.ndarray:
        if self._estimator_type == "regressor":
            out = self._run(self._output_name, X)
            try:
                out = np.asarray(out, dtype=np.float64)
            except (TypeError, ValueError) as exc:  # its declared output type said numbers
                raise ModelError(f"{self.name} returned values that are not numbers ({short(exc)}).") from exc
            out = out.ravel() if out.ndim == 2 and out.shape[1] == 1 else out
            if out.ndim != 1:
                raise ModelError(
                    f"{self.name} returned an array of shape {out.shape} from its output {self._output_name!r} "
                    f"for {len(out)} rows; a regressor must return one number per row."
                )
            return self._finite(out, X)
        if self._label_name is None:
            return self.classes_[np.argmax(self._predict_proba(X), axis=1)]
        return np.asarray(self._run(self._label_name, X)).ravel()

    def _predict_proba(self, X) -> np.ndarray:
        out = self._run(self._proba_name, X)
        if not self._proba_is_map:
            return self._finite(np.asarray(out, dtype=np.float64), X)
        classes = self.classes_
        if not out:
            return np.empty((0, len(classes)))
        if list(out[0]) == list(classes):
            table = np.array([list(row.values()) for row in out], dtype=np.float64)
        else:
            table = np.array([[row[c] for c in classes] for row in out], dtype=np.float64)
        return self._finite(table, X)

    def _finite(self, out: np.ndarray, X) -> np.ndarray:
        """``out``, or a ModelError naming the rows whose output is NaN or infinite."""
        bad = ~np.isfinite(out)
        if not bad.any():
            return out
        rows = np.flatnonzero(bad.any(axis=1) if bad.ndim == 2 else bad)
        error = ModelError(
            f"{self.name} returned NaN or infinite values for {len(rows):,} of {len(out):,} rows (e.g. for "
            f"{_row_text(X, rows[0], self._columns)}): its graph cannot handle such inputs (a log of a negative "
            f"number, a division by zero, ...). Check the data for values the model was not trained on, or fix "
            f"the model."
        )
        error.rows = rows  # type: ignore[attr-defined]
        raise error

    def _run(self, output: str, X):
        n_rows = len(X)
        try:
            out = self._session.run([output], self._feeds(X))[0]
        except Exception as exc:
            reason = _reason(str(exc)) or type(exc).__name__
            reason = reason if len(reason) <= 200 else reason[:199] + "…"
            if "Failed to allocate memory" in reason or "bad_alloc" in reason:
                raise ModelError(
                    f"{self.name} ran out of memory predicting {n_rows:,} rows ({reason}). This server limits the "
                    f"memory of each model process (option --job-memory-mb); a graph that needs this much for a "
                    f"few rows may be crafted."
                ) from exc
            raise ModelError(f"{self.name} could not predict: {type(exc).__name__}: {reason}") from exc
        shape = tuple(getattr(out, "shape", ())) if not isinstance(out, list) else (len(out),)
        if not shape or shape[0] != n_rows:
            got = "a single value" if not shape else f"{shape[0]:,} row{'s' if shape[0] != 1 else ''} of output"
            raise ModelError(
                f"{self.name} returned {got} (shape {shape}) from {output!r} for {n_rows:,} input rows: its output "
                f"does not follow the batch, so this server cannot use it. A model must return one prediction per "
                f"input row (the first dimension of each output is the batch)."
            )
        return out

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


def _row_text(X, position: int, names: list[str] | None) -> str:
    """The first columns of one row of a batch, as ``name=value`` pairs (an array's columns by
    the names the model's metadata gives, else by their number, counted from 1)."""
    if isinstance(X, pd.DataFrame):
        pairs = list(X.iloc[position].items())
    else:
        values = np.ravel(np.asarray(X)[position])
        labels = names if names and len(names) == len(values) else [f"column {j + 1}" for j in range(len(values))]
        pairs = list(zip(labels, values))
    shown = [f"{c}={_value(v)}" for c, v in pairs[:4]]
    return ", ".join(shown) + (", ..." if len(pairs) > 4 else "")


def _value(v) -> str:
    v = v.item() if isinstance(v, np.generic) else v
    return f"{v:.4g}" if isinstance(v, float) else repr(v)[:30]
