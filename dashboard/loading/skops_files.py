"""``.skops`` files: their schema read without building any object, the types a user would have
to accept, the versions they record, and the load through the allow-list of
:mod:`dashboard.model_trust` (moved here from :mod:`dashboard.loading.models`, so that the table
of formats, :mod:`dashboard.loading.formats`, can name this loader)."""

from __future__ import annotations

import json

from ..model_trust import Inspection, ModelFileError, inspect_skops
from .errors import LoadError, Policy, short


def inspect_file(path: str, label: str, policy: Policy) -> Inspection:
    try:
        return inspect_skops(path, label, limit=policy.max_bytes)
    except ModelFileError as exc:
        raise LoadError(str(exc), field="model") from exc


def skops_schema(path: str, label: str | None, policy: Policy = Policy()) -> dict:
    return inspect_file(path, label or "model.skops", policy).schema


def untrusted_types(path: str, label: str, policy: Policy) -> list[str]:
    """The types of the file off the allow-list (what the user would have to accept)."""
    return list(inspect_file(path, label, policy).refused)


def skops_versions(path: str) -> dict[str, str]:
    """``skops``, ``skops protocol`` and ``scikit-learn`` (the ``_sklearn_version`` values in the
    schema, comma-joined if several), read without loading the model."""
    schema = skops_schema(path, "model.skops")
    found = {"skops": str(schema.get("_skops_version", "")), "skops protocol": str(schema.get("protocol", ""))}
    sk = sorted(set(values_of(schema, "_sklearn_version")))
    if sk:
        found["scikit-learn"] = ", ".join(sk)
    return {k: v for k, v in found.items() if v}


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


def values_of(schema, key: str) -> list[str]:
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


def _refuse_unaccepted(label: str, rest: list[str], policy: Policy, accepted: tuple) -> None:
    """Types off the allow-list load only when the operator allows user types and the user
    ticked every one of them."""
    if not rest:
        return
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


def load_skops(path: str, label: str, policy: Policy, accepted: tuple) -> tuple[object, list[str]]:
    """The model and the scikit-learn versions its schema records."""
    found = inspect_file(path, label, policy)
    rest = list(found.refused)
    _refuse_unaccepted(label, rest, policy, accepted)
    import skops.io as sio

    # skops audits the file again and refuses anything outside this exact list
    trusted = found.allowed + [t for t in rest if t in accepted]
    try:
        return sio.load(path, trusted=trusted), values_of(found.schema, "_sklearn_version")
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
