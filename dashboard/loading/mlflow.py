"""MLflow model folders (``MLmodel`` + the flavour's files), as a folder on the command line or
as an uploaded ``.zip`` of one: the flavour is mapped to the native file format the other
doors read, so every check of that format applies to the file inside.

``MLmodel`` is read as data (PyYAML's ``safe_load``, which builds only plain types; at most
64 KiB, a mapping). Flavours: ``xgboost`` (``model.ubj`` / ``.json``; other suffixes read by
content), ``lightgbm`` (a Booster's ``model.lgb`` text; the scikit-learn wrapper's
``model.skops`` goes through the skops allow-list), ``catboost`` (``model.cb``, saved as
``cbm`` or ``json``), ``onnx`` (``model.onnx``) and ``sklearn`` saved as ``skops``. Pickled
flavours (scikit-learn's or LightGBM's ``pickle``/``cloudpickle``, a ``python_function`` model
of its own) are refused naming the flavour, unless the operator allows pickles.

A zip is read only in the isolated load or job process: at most :data:`MAX_MEMBERS` members,
no absolute path, ``..``, backslash or symbolic link, only stored or deflated members, their
declared sizes within the upload limit and checked again while reading. Only ``MLmodel`` and
the flavour's file are unpacked, into a private temporary folder removed after the load."""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pandas as pd

from compute.errors import InputError

from .errors import LoadError, Policy, short
from .formats import PICKLED_FILE

MLMODEL = "MLmodel"
MAX_MLMODEL = 64 * 2**10
MAX_MEMBERS = 1000
#: how each native flavour's file is read: the suffix of the format the other doors take
_XGBOOST_FORMATS = {"ubj": ".ubj", "json": ".json"}
_CATBOOST_FORMATS = {"cbm": ".cbm", "json": ".json"}
_PICKLED = ("pickle", "cloudpickle")


@dataclass(frozen=True)
class Inner:
    """The native file an MLflow folder holds: its member name, the suffix of its format,
    the flavour, the input column names of the folder's signature (None: not named) and
    their types (``(name, type)`` pairs, MLflow's: double, float, long, integer, boolean,
    string...)."""

    member: str
    suffix: str
    flavour: str
    columns: tuple[str, ...] | None
    types: tuple[tuple[str, str], ...] = ()


def folder_archive(folder: Path, policy: Policy = Policy()) -> bytes:
    """An MLflow model folder (the operator's, on the command line) as the bytes of a zip the
    upload form would take: its files at the archive's root, in name order, dated 1980, so
    the same folder gives the same bytes (and the same cache key). Raises :class:`LoadError`
    for a folder without ``MLmodel``, a symbolic link, or more than the upload limit."""
    label = folder.name or str(folder)
    if not (folder / MLMODEL).is_file():
        raise LoadError(
            f"{folder}: a model folder must be an MLflow model (an MLmodel file and the flavour's files); "
            f"it has no {MLMODEL} file.",
            field="model",
        )
    files: list[tuple[str, Path]] = []
    total = 0
    for root, dirs, names in os.walk(folder, followlinks=False):
        for entry in [*dirs, *names]:
            full = Path(root) / entry
            if full.is_symlink():
                raise LoadError(
                    f"{label}: {full.relative_to(folder)} is a symbolic link; copy the file in.", field="model"
                )
        for entry in names:
            full = Path(root) / entry
            total += full.stat().st_size
            files.append((full.relative_to(folder).as_posix(), full))
            if len(files) > MAX_MEMBERS or total > policy.max_bytes:
                raise LoadError(
                    f"{label} holds more than {MAX_MEMBERS} files or {policy.max_bytes / 2**20:.0f} MB; an MLflow "
                    "model folder holds MLmodel and the flavour's few files.",
                    field="model",
                )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for rel, full in sorted(files):
            archive.writestr(zipfile.ZipInfo(rel, (1980, 1, 1, 0, 0, 0)), full.read_bytes())
    return buffer.getvalue()


def load_mlflow(
    path: str, label: str, policy: Policy, load_native: Callable[[str, str, Policy], object]
) -> tuple[object, Inner]:
    """The model of an MLflow zip: its flavour's file unpacked into a private folder and
    loaded by ``load_native(path, name, policy)`` (the loader of that format, with its
    checks); the signature's column names given to a model whose file names none."""
    with unpacked(path, label, policy) as (target, inner):
        model = load_native(target, inner_name(label, inner), policy)
    name_columns(model, inner.columns)
    check_signature_types(model, inner.types, label)
    return model, inner


def inner_name(label: str, inner: Inner) -> str:
    """How messages name the file inside: ``model.zip (model.ubj)``."""
    return f"{label} ({inner.member})"


@contextlib.contextmanager
def unpacked(path: str, label: str, policy: Policy) -> Iterator[tuple[str, Inner]]:
    """The flavour's file of an MLflow zip, unpacked into a private temporary folder (removed
    on leaving), and what it is; raises :class:`LoadError` naming ``label`` for a zip or an
    ``MLmodel`` this server does not read."""
    with tempfile.TemporaryDirectory(prefix="wip-mlflow-") as folder:
        os.chmod(folder, 0o700)
        with _open_zip(path, label) as archive:
            prefix = _check_members(archive, label, policy)
            meta = read_mlmodel(_read(archive, prefix + MLMODEL, label, MAX_MLMODEL), label)
            inner = flavour_file(meta, label, policy)
            target = Path(folder) / ("model" + inner.suffix)
            target.write_bytes(_read(archive, prefix + inner.member, label, policy.max_bytes))
        yield str(target), inner


def _open_zip(path: str, label: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise LoadError(f"{label} is not a readable zip file ({short(exc)}).", field="model") from exc


def _check_members(archive: zipfile.ZipFile, label: str, policy: Policy) -> str:
    """Refuse a zip whose members could escape a folder or expand beyond the limit; the
    folder prefix of ``MLmodel`` ("" at the root, or one top folder)."""
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        raise LoadError(
            f"{label} holds {len(members):,} files; an MLflow model zip holds at most {MAX_MEMBERS}.", field="model"
        )
    declared = 0
    for info in members:
        name = info.filename
        parts = PurePosixPath(name).parts
        if name.startswith("/") or "\\" in name or ".." in parts or (parts and parts[0].endswith(":")):
            raise LoadError(
                f"{label}: the member {name[:200]!r} names a path outside the folder; refused.", field="model"
            )
        if stat.S_ISLNK(info.external_attr >> 16):
            raise LoadError(f"{label}: the member {name[:200]!r} is a symbolic link; refused.", field="model")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise LoadError(
                f"{label}: the member {name[:200]!r} is compressed with a method this server does not read "
                "(only stored or deflated members); zip the folder again with the usual settings.",
                field="model",
            )
        declared += max(info.file_size, 0)
    if declared > policy.max_bytes:
        raise LoadError(
            f"{label} declares {declared / 2**20:,.0f} MB unpacked; this server unpacks at most "
            f"{policy.max_bytes / 2**20:.0f} MB (the upload limit).",
            field="model",
        )
    found = [i.filename for i in members if PurePosixPath(i.filename).name == MLMODEL and not i.is_dir()]
    found = [n for n in found if len(PurePosixPath(n).parts) <= 2]
    if len(found) != 1:
        what = "no MLmodel file" if not found else f"{len(found)} MLmodel files"
        raise LoadError(
            f"{label} holds {what} at its top: it must be the zip of one MLflow model folder (MLmodel and the "
            "flavour's files, e.g. as mlflow.<flavour>.save_model writes them).",
            field="model",
        )
    return found[0][: -len(MLMODEL)]


def _read(archive: zipfile.ZipFile, member: str, label: str, limit: int) -> bytes:
    """A member's bytes, at most ``limit`` of them counted while decompressing."""
    try:
        info = archive.getinfo(member)
    except KeyError as exc:
        raise LoadError(f"{label} has no {member}, which its MLmodel names.", field="model") from exc
    if info.file_size > limit:
        raise LoadError(f"{label}: {member} declares {info.file_size:,} bytes, over {limit:,}.", field="model")
    chunks, total = [], 0
    try:
        with archive.open(info) as handle:
            while chunk := handle.read(2**20):
                total += len(chunk)
                if total > limit:
                    raise LoadError(f"{label}: {member} unpacks to more than {limit:,} bytes.", field="model")
                chunks.append(chunk)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise LoadError(f"{label}: {member} could not be unpacked ({short(exc)}).", field="model") from exc
    return b"".join(chunks)


def read_mlmodel(data: bytes, label: str) -> dict:
    """``MLmodel`` as a mapping, read as YAML data (no object construction), at most 64 KiB."""
    name = f"{label}: MLmodel"
    try:
        import yaml
    except ImportError as exc:  # a dependency: missing only from a partial installation
        raise LoadError(
            f"{name} cannot be read: PyYAML is not installed on this server (pip install pyyaml).", field="model"
        ) from exc
    if len(data) > MAX_MLMODEL:
        raise LoadError(f"{name} is {len(data):,} bytes; an MLmodel file holds at most {MAX_MLMODEL:,}.", field="model")
    try:
        meta = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        raise LoadError(f"{name} is not valid YAML ({short(exc)}).", field="model") from exc
    if not isinstance(meta, dict) or not isinstance(meta.get("flavors"), dict):
        raise LoadError(
            f"{name} is not an MLflow MLmodel file: a YAML mapping with a 'flavors' mapping is expected.",
            field="model",
        )
    return meta


def flavour_file(meta: dict, label: str, policy: Policy) -> Inner:
    """Which file of the folder holds the model, and in which format (see the module
    docstring); refuses pickled and unknown flavours naming them."""
    flavours = meta["flavors"]
    columns = signature_columns(meta, label, policy)
    typed = signature_types(meta, columns)

    def conf(name: str) -> dict:
        found = flavours.get(name)
        return found if isinstance(found, dict) else {}

    def member(value, flavour: str) -> str:
        if not isinstance(value, str) or not value or len(value) > 300:
            raise LoadError(f"{label}: the MLmodel's {flavour} flavour names no model file.", field="model")
        parts = PurePosixPath(value).parts
        if value.startswith("/") or "\\" in value or ".." in parts:
            raise LoadError(f"{label}: the MLmodel's {flavour} flavour names a file outside the folder.", field="model")
        return value

    if "xgboost" in flavours:
        data = member(conf("xgboost").get("data"), "xgboost")
        fmt = _text(conf("xgboost").get("model_format") or PurePosixPath(data).suffix.lstrip("."))
        return Inner(data, _XGBOOST_FORMATS.get(fmt, ".model"), "xgboost", columns, typed)  # .model: by content
    if "lightgbm" in flavours:
        data = member(conf("lightgbm").get("data"), "lightgbm")
        serial = conf("lightgbm").get("serialization_format")
        if data.endswith(".lgb"):  # a Booster: LightGBM's text format
            return Inner(data, ".txt", "lightgbm", columns, typed)
        _refuse_pickled("lightgbm", serial, data, label, policy)
        return Inner(data, ".skops" if serial == "skops" else PICKLED_FILE, "lightgbm", columns, typed)
    if "catboost" in flavours:
        data = member(conf("catboost").get("data") or "model.cb", "catboost")
        fmt = _text(conf("catboost").get("save_format") or "cbm")
        if fmt not in _CATBOOST_FORMATS:
            raise LoadError(
                f"{label}: its catboost flavour is saved as {fmt[:40]!r}; this server reads CatBoost's 'cbm' and "
                "'json' formats (mlflow.catboost.save_model's default is cbm).",
                field="model",
            )
        return Inner(data, _CATBOOST_FORMATS[fmt], "catboost", columns, typed)
    if "onnx" in flavours:
        return Inner(member(conf("onnx").get("data"), "onnx"), ".onnx", "onnx", columns)
    if "sklearn" in flavours:
        sk = conf("sklearn")
        data = member(sk.get("pickled_model"), "sklearn")
        serial = sk.get("serialization_format") or "cloudpickle"
        _refuse_pickled("sklearn", serial, data, label, policy)
        return Inner(data, ".skops" if serial == "skops" else PICKLED_FILE, "sklearn", columns, typed)
    if "python_function" in flavours:
        raise LoadError(
            f"{label} is an MLflow model of the python_function flavour only (a Python model class saved with "
            "cloudpickle): loading it executes its code, and this server does not run such models. Save the "
            "model with a native flavour (mlflow.xgboost, mlflow.lightgbm, mlflow.catboost, mlflow.onnx, or "
            "mlflow.sklearn with serialization_format='skops'), or pass the loaded model to dashboard.show().",
            field="model",
        )
    known = ", ".join(sorted(_text(f) for f in flavours)[:10]) or "none"
    raise LoadError(
        f"{label}: its MLmodel's flavours ({known}) are none this server reads (xgboost, lightgbm, catboost, "
        "onnx, sklearn saved as skops).",
        field="model",
    )


def _text(value) -> str:
    """A value of MLmodel as text for a message: a string (at most 40 characters), else its
    type (a crafted file's nested aliases are never expanded into text)."""
    return value[:40] if isinstance(value, str) else type(value).__name__


def _refuse_pickled(flavour: str, fmt, data: str, label: str, policy: Policy) -> None:
    if fmt == "skops":
        return
    if fmt not in _PICKLED:
        raise LoadError(
            f"{label}: its {flavour} flavour has the unknown serialization_format {_text(fmt)!r}.", field="model"
        )
    if not policy.allow_pickle:
        raise LoadError(
            f"{label} is an MLflow model of the {flavour} flavour saved with {fmt} ({data}): loading it executes "
            f"any code it contains, so this server refuses it. Save it again with "
            f"mlflow.{flavour}.save_model(model, path, serialization_format='skops')"
            + (
                " or save the Booster (model.booster_), which MLflow writes as LightGBM text"
                if flavour == "lightgbm"
                else ""
            )
            + "; for trusted users only, the operator can start the server with --allow-pickle.",
            field="model",
        )


def signature_columns(meta: dict, label: str, policy: Policy) -> tuple[str, ...] | None:
    """The input column names of the MLmodel's signature (a JSON list inside the YAML), or
    None when it has none or its inputs are tensors."""
    signature = meta.get("signature")
    text = signature.get("inputs") if isinstance(signature, dict) else None
    if not isinstance(text, str) or not text:
        return None
    try:
        inputs = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise LoadError(
            f"{label}: the MLmodel's signature inputs are not valid JSON ({short(exc)}).", field="model"
        ) from exc
    if not isinstance(inputs, list) or not inputs or len(inputs) > policy.max_columns:
        return None
    names = [i.get("name") if isinstance(i, dict) and i.get("type") != "tensor" else None for i in inputs]
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        return None
    return tuple(str(n) for n in names)


def signature_types(meta: dict, columns: tuple[str, ...] | None) -> tuple[tuple[str, str], ...]:
    """``(name, type)`` of each named column of the signature (read as
    :func:`signature_columns` reads its names; () without them)."""
    if not columns:
        return ()
    inputs = json.loads(meta["signature"]["inputs"])  # read and checked by signature_columns
    return tuple((str(i["name"]), i["type"]) for i in inputs if isinstance(i.get("type"), str))


#: MLflow's column types this server checks the data against (others, e.g. datetime or binary,
#: are left to the model)
NUMBER_TYPES = ("double", "float")
WHOLE_TYPES = ("long", "integer")
CHECKED_TYPES = (*NUMBER_TYPES, *WHOLE_TYPES, "boolean", "string")


def type_mismatch(column: pd.Series, wanted: str) -> str | None:
    """What ``column`` holds when that contradicts the signature's type ``wanted`` (None:
    compatible). Numbers of any width are compatible with double and float (a long column
    where the signature says double, as MLflow converts it); long and integer take whole
    numbers (a float column read with missing values included); boolean takes booleans and
    0/1; string takes text or categories."""
    dtype = column.dtype
    known = column.dropna()
    is_bool = pd.api.types.is_bool_dtype(dtype)
    is_number = pd.api.types.is_numeric_dtype(dtype) and not is_bool
    if wanted in NUMBER_TYPES and (is_number or is_bool):
        return None
    if wanted in WHOLE_TYPES:
        if is_bool or pd.api.types.is_integer_dtype(dtype):
            return None
        if is_number:
            values = known.to_numpy(dtype=float)
            fractional = values[values != values.round()]
            if not len(fractional):
                return None
            return f"numbers with a fractional part ({dtype}, e.g. {float(fractional[0])!r})"
    if wanted == "boolean":
        if is_bool or (is_number and known.isin([0, 1]).all()):
            return None
        if is_number:
            return f"numbers other than 0 and 1 ({dtype}, e.g. {_plain(known[~known.isin([0, 1])].iloc[0])!r})"
    if wanted == "string" and not is_number and not is_bool:
        return None
    example = f", e.g. {_plain(known.iloc[0])!r}" if len(known) else ""
    if is_bool:
        return f"true/false values ({dtype}{example})"
    if is_number:
        return f"numbers ({dtype}{example})"
    return f"text ({dtype}{example})"


def _plain(value):
    """A NumPy scalar as the Python value it holds (``2.5``, not ``np.float64(2.5)``)."""
    return value.item() if hasattr(value, "item") else value


class SignatureCheck:
    """The model's ``check_columns`` (called by the load's checks with the model's input
    columns): refuses a data column whose type contradicts the MLflow signature's, naming the
    column and both types (:class:`compute.errors.InputError`), then runs the native model's
    own check. Stored on the loaded model; picklable with it."""

    def __init__(self, model, types: tuple[tuple[str, str], ...], label: str):
        self.model, self.types, self.label = model, types, label

    def __call__(self, X) -> None:
        for name, wanted in self.types:
            if wanted not in CHECKED_TYPES or name not in X.columns:
                continue
            held = type_mismatch(X[name], wanted)
            if held is not None:
                raise InputError(
                    f"The column {name!r} holds {held}, but the signature of the MLflow model {self.label} gives it "
                    f"the type {wanted}: is it the column the model was trained on? Convert the column, or save the "
                    "model with a signature inferred from its training data (mlflow.models.infer_signature)."
                )
        own = getattr(type(self.model), "check_columns", None)
        if own is not None:
            own(self.model, X)


def check_signature_types(model, types: tuple[tuple[str, str], ...], label: str) -> None:
    """Have the load's column check compare the data's column types with the signature's."""
    if any(wanted in CHECKED_TYPES for _, wanted in types):
        try:
            model.check_columns = SignatureCheck(model, types, label)
        except AttributeError:  # an object that takes no attributes: its own checks only
            pass


def name_columns(model, columns: tuple[str, ...] | None) -> None:
    """Give a native model whose file names no inputs (a booster trained on an array, a
    single-tensor ONNX graph) the signature's column names, when their number fits."""
    if not columns or getattr(model, "_columns", "") is not None:
        return
    try:
        width = model.n_features_in_
    except AttributeError:
        width = len(columns)
    if width == len(columns):
        model._columns = list(columns)
