"""Models that live in the Python session that opened the dashboard (``dashboard.show``,
``dashboard.report``, a pickle named on the command line): the user's own objects, never
a visitor's file. A workspace names such a model by a ``memory:`` path. The model is kept
here as its pickled bytes and unpickled only in a job process (forked from this one, it
inherits the bytes): the web process never runs, nor even imports, the model's library (a
booster's OpenMP pool started here would hang every job forked afterwards), and the model
still runs only in an isolated, limited process. Another process (a later server on the
same cache) does not have it and says so."""

from __future__ import annotations

import hashlib
import io
import pickle

import compute

from .api import Pickled

PREFIX = "memory:"
_BLOBS: dict[str, Pickled] = {}
_LOADED: dict[str, object] = {}  # this process's unpickled models (a job process's)


def keep(model) -> tuple[str, str]:
    """Register a model (an object, pickled here, or :class:`Pickled` bytes); returns its
    ``memory:`` path and the bytes' hash (the same model twice: one key, so its cached
    results are found again). An object that does not pickle raises ``pickle``'s error."""
    given = model if isinstance(model, Pickled) else Pickled(pickle.dumps(model, protocol=5))
    sha = hashlib.sha256(given.how.encode() + b":" + given.blob).hexdigest()
    path = PREFIX + sha[:32]
    _BLOBS[path] = given
    return path, sha


def is_session_model(path: str) -> bool:
    return isinstance(path, str) and path.startswith(PREFIX)


def get(path: str, name: str):
    """The model, unpickled in this process at its first use; a clear error when this
    process does not hold it."""
    if path in _LOADED:
        return _LOADED[path]
    given = _BLOBS.get(path)
    if given is None:
        raise compute.ModelError(
            f"The model {name!r} was an object of the Python session that opened this data set, which is no "
            "longer running; open it again from Python (dashboard.show) or the command line."
        )
    if given.how == "joblib":
        import joblib  # noqa: PLC0415 - only a joblib file named on the command line needs it

        model = joblib.load(io.BytesIO(given.blob))
    else:
        model = pickle.loads(given.blob)  # the session's own object, handed over by its owner
    _LOADED[path] = model
    return model
