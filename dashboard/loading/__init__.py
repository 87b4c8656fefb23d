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
- XGBoost ``.json`` / ``.ubj``, LightGBM ``.txt``, CatBoost ``.cbm`` / ``.json``: the
  libraries' own data formats, checked in plain Python before their C++ loaders see them
  (:mod:`dashboard.loading.booster_files`), then run behind the estimator interface
  (:mod:`dashboard.loading.boosters`).
- pickle and joblib files: refused unopened unless ``Policy.allow_pickle``.
- ``.csv`` / ``.parquet``: parsed by pandas / pyarrow after size, encoding and header checks.

Which suffix is which model format, its loader, checks and trust level: one table,
:mod:`dashboard.loading.formats`, that every door reads.

Every error is a :class:`LoadError` whose ``field`` says which input of the page it concerns
("model", "data", "target", "output" or "loss") and whose message names the user's file name
(the ``name`` argument), never a server path.

Load warnings (a model saved with another scikit-learn version) are kept in a
``WeakKeyDictionary`` keyed by the loaded model object (falling back to an attribute for
unhashable models) and read with :func:`load_warnings`; they disappear with the model.
"""

from .boosters import BOOSTER_SUFFIXES, BoosterModel, booster_classes
from .checks import check_model_data, infer_task
from .data import DATA_SUFFIXES, read_data
from .errors import FIELDS, LoadError, Policy
from .formats import FORMATS, FORMATS_TEXT, MODEL_SUFFIXES, PICKLE_SUFFIXES, ModelFormat
from .models import (
    load_model,
    load_warnings,
    model_untrusted_types,
    model_versions,
    preload,
)
from .onnx import OnnxModel

__all__ = [
    "BOOSTER_SUFFIXES",
    "DATA_SUFFIXES",
    "FORMATS",
    "FORMATS_TEXT",
    "ModelFormat",
    "BoosterModel",
    "booster_classes",
    "FIELDS",
    "MODEL_SUFFIXES",
    "PICKLE_SUFFIXES",
    "LoadError",
    "OnnxModel",
    "Policy",
    "check_model_data",
    "infer_task",
    "load_model",
    "load_warnings",
    "model_untrusted_types",
    "model_versions",
    "preload",
    "read_data",
]
