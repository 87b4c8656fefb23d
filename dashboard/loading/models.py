"""Model files: .skops through the allow-list of :mod:`dashboard.model_trust`, .onnx through
:mod:`dashboard.loading.onnx`, XGBoost / LightGBM / CatBoost files through
:mod:`dashboard.loading.boosters`, pickles only when the operator opts in."""

from __future__ import annotations

import json
import os
import warnings
import weakref

from compute.trees import walk

from ..model_trust import Inspection, ModelFileError, allow_list, check_model, inspect_skops
from .boosters import BOOSTER_SUFFIXES, booster_versions, load_booster
from .errors import LoadError, Policy, check_size, file_suffix, short
from .mlflow import MLFLOW_SUFFIX, inner_name, load_mlflow, unpacked
from .onnx import load_onnx, onnx_versions
from .sniff import AMBIGUOUS_SUFFIXES, suffix_by_content

MODEL_SUFFIXES = (".skops", ".onnx", *BOOSTER_SUFFIXES, ".pkl", ".pickle", ".joblib", MLFLOW_SUFFIX)
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
#: what the page says it accepts
FORMATS_TEXT = (
    ".skops, .onnx, XGBoost .json/.ubj, LightGBM .txt, CatBoost .cbm/.json, .model/.bst, an MLflow model .zip"
)


# --- models --------------------------------------------------------------------------------
def model_untrusted_types(path, *, policy: Policy = Policy(), name: str | None = None) -> list[str]:
    """Types in a ``.skops`` file (or the one an MLflow ``.zip`` holds) that the user would
    have to accept; [] for other formats.

    Every type named in the schema that is not on the allow-list with the loader it uses
    (see :mod:`dashboard.model_trust`); read without building any object or calling skops.
    Raises :class:`LoadError` for a file that is not a valid .skops file, whatever is wrong.
    """
    path = os.fspath(path)
    label = name or os.path.basename(path)
    suffix = file_suffix(path, name, MODEL_SUFFIXES)
    if suffix == MLFLOW_SUFFIX:  # an MLflow zip: its archive, MLmodel and flavour checked; a skops file's types
        check_size(path, label, policy, "model")
        with unpacked(path, label, policy) as (inner_path, inner):
            return model_untrusted_types(inner_path, policy=policy, name=inner_name(label, inner))
    if suffix != ".skops":
        return []
    check_size(path, label, policy, "model")
    return list(_inspect_skops(path, label, policy).refused)


def load_model(path, *, name: str | None = None, policy: Policy = Policy(), accepted_types=(), classes=None) -> object:
    """Load an uploaded model file; see the module docstring for what each format may do.

    ``name`` is the user's file name, shown in messages. The format comes from the suffix of
    ``path`` (or of ``name`` when ``path`` has none of :data:`MODEL_SUFFIXES`); a ``.model`` or
    ``.bst`` file is read by its content (:mod:`dashboard.loading.sniff`).
    ``accepted_types`` are skops type names the user accepted (honoured only with
    ``policy.allow_user_types``). ``classes``: the class labels of an XGBoost or LightGBM
    classifier (its file does not store them; see :func:`dashboard.loading.boosters.booster_classes`).
    """
    path = os.fspath(path)
    label = name or os.path.basename(path)
    suffix = _format_suffix(path, name, label)
    if suffix not in MODEL_SUFFIXES:
        raise LoadError(
            f"{label}: a model file must end in {', '.join((*MODEL_SUFFIXES, *AMBIGUOUS_SUFFIXES))} (got "
            f"{suffix or 'no suffix'}). Save it with skops.io.dump(model, 'model.skops'), export it to "
            f"ONNX, or save a gradient-boosting model with its library's save_model (XGBoost .json/.ubj, "
            f"LightGBM .txt, CatBoost .cbm; .model / .bst are read by their content), or upload an MLflow "
            f"model folder as a .zip.",
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
    check_size(path, label, policy, "model")
    if suffix == MLFLOW_SUFFIX:  # an MLflow model folder's zip: the flavour's native file, loaded as such

        def native(inner: str, name: str, given: Policy) -> object:
            return load_model(inner, name=name, policy=given, accepted_types=accepted_types, classes=classes)

        return load_mlflow(path, label, policy, native)[0]
    versions: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if suffix == ".skops":
            model, versions = _load_skops(path, label, policy, tuple(accepted_types))
        elif suffix == ".onnx":
            model = load_onnx(path, label)
        elif suffix in BOOSTER_SUFFIXES:
            model = load_booster(path, label, suffix, classes=classes)
        else:
            model = _load_pickle(path, label)
        if suffix not in (".onnx", *BOOSTER_SUFFIXES):
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
    try:
        suffix = _format_suffix(path, None, os.path.basename(path))
        if suffix == ".skops":
            schema = _skops_schema(path, "model.skops")
            found = {"skops": str(schema.get("_skops_version", "")), "skops protocol": str(schema.get("protocol", ""))}
            sk = sorted(set(_values_of(schema, "_sklearn_version")))
            if sk:
                found["scikit-learn"] = ", ".join(sk)
            return {k: v for k, v in found.items() if v}
        if suffix == ".onnx":
            return onnx_versions(path)
        if suffix in BOOSTER_SUFFIXES:
            return booster_versions(path, suffix)
    except Exception:  # unreadable: load_model says why
        return {}
    return {}


def _format_suffix(path: str, name: str | None, label: str) -> str:
    """The suffix that says the file's format: its own, or for a ``.model`` / ``.bst`` file
    (LightGBM's and XGBoost's examples use them for several formats) the one its first
    bytes say (raises :class:`LoadError` for content none of those formats has)."""
    suffix = file_suffix(path, name, (*MODEL_SUFFIXES, *AMBIGUOUS_SUFFIXES))
    if suffix not in AMBIGUOUS_SUFFIXES:
        return suffix
    try:
        return suffix_by_content(path, label)
    except OSError as exc:
        raise LoadError(f"{label} could not be read; upload it again.", field="model") from exc


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


def preload() -> None:
    """Import what every .skops load needs and build the allow-list once, in the server
    process: each job runs in a forked child, which then inherits them instead of spending
    about 1.5 s on imports (``all_estimators()`` imports all of scikit-learn) before its
    first prediction, and the tree engine's compiled walk is loaded. Importing runs no code
    from any file."""
    import skops.io  # noqa: F401

    allow_list()
    trouble = walk.warm()  # numba and the tree engine's kernels (about 0.6 s), not in every job
    if trouble:
        warnings.warn(trouble, RuntimeWarning, stacklevel=2)


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
            f"{label} needs a module this server does not have ({short(exc)}); ask the "
            f"operator to install it, or export the model to ONNX.",
            field="model",
        ) from exc
    except Exception as exc:  # a crafted schema can make skops fail in any way (even RecursionError)
        raise LoadError(
            f"{label} is not a valid .skops file ({type(exc).__name__}: {short(exc)}).{_skops_hint(found.schema)}",
            field="model",
        ) from exc


# --- pickle / joblib (operator opt-in only) ------------------------------------------------
def _load_pickle(path: str, label: str) -> object:
    import joblib

    try:
        return joblib.load(path)
    except Exception as exc:
        raise LoadError(
            f"{label} could not be loaded as a pickle/joblib file ({type(exc).__name__}: {short(exc)}).", field="model"
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
