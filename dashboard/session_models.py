"""Models that live in the Python session that opened the dashboard (``dashboard.show``,
``dashboard.report``, a pickle named on the command line): the user's own objects, never
a visitor's file. A workspace names such a model by a ``memory:`` path; the job processes,
forked from this process, find the object here (they inherit it), so the model still runs
only in an isolated, limited process. Another process (a later server on the same cache)
does not have it and says so."""

from __future__ import annotations

import hashlib
import pickle
import uuid

import compute

PREFIX = "memory:"
_MODELS: dict[str, object] = {}


def keep(model) -> tuple[str, str]:
    """Register ``model``; returns its ``memory:`` path and its content hash (the same
    fitted model twice: one key, so its cached results are found again in this session)."""
    try:
        sha = hashlib.sha256(pickle.dumps(model, protocol=5)).hexdigest()
    except Exception:  # an object that does not pickle: a key of its own (nothing cached across)
        sha = hashlib.sha256(uuid.uuid4().bytes).hexdigest()
    path = PREFIX + sha[:32]
    _MODELS[path] = model
    return path, sha


def is_session_model(path: str) -> bool:
    return isinstance(path, str) and path.startswith(PREFIX)


def get(path: str, name: str):
    """The registered model, or a clear error when this process does not hold it."""
    try:
        return _MODELS[path]
    except KeyError:
        raise compute.ModelError(
            f"The model {name!r} was an object of the Python session that opened this data set, which is no "
            "longer running; open it again from Python (dashboard.show) or the command line."
        ) from None
