"""Model files, loaded by their row of the table of formats (:mod:`dashboard.loading.formats`):
.skops through the allow-list of :mod:`dashboard.model_trust`, .onnx through
:mod:`dashboard.loading.onnx`, XGBoost / LightGBM / CatBoost files through
:mod:`dashboard.loading.boosters`, pickles only when the operator opts in, an MLflow model's
zip by the row of the file it holds."""

from __future__ import annotations

import os
import warnings
import weakref

from compute.trees import walk

from ..model_trust import allow_list
from .errors import LoadError, Policy, check_size, file_suffix
from .formats import (
    FORMATS_TEXT,
    MODEL_SUFFIXES,
    PICKLE_SUFFIXES,
    REFUSE,
    ModelFormat,
    Request,
    content_suffix,
    decision,
    format_of,
    refusal,
)
from .mlflow import inner_name, load_mlflow, unpacked
from .sniff import AMBIGUOUS_SUFFIXES

__all__ = ["FORMATS_TEXT", "MODEL_SUFFIXES", "PICKLE_SUFFIXES"]


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
    fmt = format_of(file_suffix(path, name, MODEL_SUFFIXES))
    if fmt is None or not fmt.lists_types:
        return []
    check_size(path, label, policy, "model")
    if fmt.container:  # an MLflow zip: its archive, MLmodel and flavour checked; a skops file's types
        with unpacked(path, label, policy) as (inner_path, inner):
            return model_untrusted_types(inner_path, policy=policy, name=inner_name(label, inner))
    assert fmt.types is not None
    return fmt.types(path, label, policy)


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
    suffix = content_suffix(path, name, label)
    fmt = format_of(suffix)
    if fmt is None:
        raise LoadError(
            f"{label}: a model file must end in {', '.join((*MODEL_SUFFIXES, *AMBIGUOUS_SUFFIXES))} (got "
            f"{suffix or 'no suffix'}). Save it with skops.io.dump(model, 'model.skops'), export it to "
            f"ONNX, or save a gradient-boosting model with its library's save_model (XGBoost .json/.ubj, "
            f"LightGBM .txt, CatBoost .cbm; .model / .bst are read by their content), or upload an MLflow "
            f"model folder as a .zip.",
            field="model",
        )
    if decision(fmt, policy) == REFUSE:
        raise refusal(fmt, label)
    check_size(path, label, policy, "model")
    request = Request(suffix, policy, tuple(accepted_types), classes)
    if fmt.container:  # an MLflow model folder's zip: the flavour's native file, loaded as such

        def native(inner: str, name: str, given: Policy) -> object:
            return load_model(inner, name=name, policy=given, accepted_types=accepted_types, classes=classes)

        return load_mlflow(path, label, policy, native)[0]
    model, versions = _loaded(fmt, path, label, request)
    if not hasattr(model, "predict") and not hasattr(model, "predict_proba"):
        raise LoadError(
            f"{label} holds a {type(model).__name__}, which has neither predict nor predict_proba; "
            f"upload a fitted model (an estimator or a Pipeline).",
            field="model",
        )
    _remember_warnings(model, _version_warnings(model, label, versions))
    return model


def _loaded(fmt: ModelFormat, path: str, label: str, request: Request) -> tuple[object, list[str]]:
    """The model, by its format's loader and checks, and the scikit-learn versions it records
    (its own, and those of the warnings scikit-learn gave while it was built)."""
    assert fmt.load is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, versions = fmt.load(path, label, request)
        for check in fmt.checks:
            check(model, label)  # before anything calls the model
    versions = list(versions) + [
        str(w.message.original_sklearn_version) for w in caught if hasattr(w.message, "original_sklearn_version")
    ]
    return model, versions


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
        suffix = content_suffix(path, None, os.path.basename(path))
        fmt = format_of(suffix)
        if fmt is not None and fmt.versions is not None:
            return fmt.versions(path, suffix)
    except Exception:  # unreadable: load_model says why
        return {}
    return {}


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
