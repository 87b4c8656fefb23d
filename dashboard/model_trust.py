"""What an uploaded ``.skops`` file may contain.

This module is the security boundary for skops uploads. skops rebuilds a model from a JSON
schema in which every node names a Python type (``__module__`` + ``__class__``) and the
*loader* that builds it (``__loader__``): ``ObjectNode`` creates an instance with ``__new__``
and ``__setstate__``, ``TypeNode`` returns the named class itself, ``FunctionNode`` the named
function, ``LossNode`` calls the named class with arguments from the file, and so on. A class
defined by a trusted package is not harmless for that reason alone (NumPy's ``DataSource``
deletes its folder when it is freed), so the rule here is an allow-list of exact
``(loader, type)`` pairs, :func:`allow_list`:

- ``ObjectNode``: scikit-learn's public estimators (``sklearn.utils.all_estimators()``, never
  a ``tests``/``_testing`` module) and the private fitted-attribute types typical models
  hold (loss and link objects, histogram-gradient-boosting predictors and bin mapper, the
  neighbour search trees with their basic distance metrics, MLP optimisers,
  ``make_column_selector``), listed by name in :data:`_SKLEARN_INTERNAL`.
- ``TreeNode``: ``sklearn.tree._tree.Tree``; ``LossNode``: scikit-learn's Cython losses.
- NumPy arrays, dtypes, scalar types (as array values, or as classes used as values, e.g.
  ``dtype=np.float64``), ``RandomState``/``Generator``, masked arrays; SciPy's CSR, CSC and
  COO sparse matrices and arrays; the builtin containers skops itself uses.
- Functions: only ``sklearn.utils.validation.check_array`` (inside ``functools.partial``),
  which scikit-learn itself stores in a fitted ``HistGradientBoosting*`` with categorical
  features; it only validates arrays. Any other function, method, or class used as a value
  is refused, whichever package defines it.

Every node of the schema is checked (an iterative walk, not skops' own list of untrusted
types), together with the loader it uses. A node whose ``__loader__``, ``__module__`` or
``__class__`` is not a string, an unknown loader, a bad protocol, a damaged or oversized
archive: all raise :class:`ModelFileError` with a message naming the file.

The neighbour search trees and the HistGradientBoosting predictor hold index arrays that
scikit-learn reads without bounds checks; the loader validates such structures after skops
has built them.
"""

from __future__ import annotations

import functools
import json
import zipfile
from dataclasses import dataclass

import numpy as np

#: skops protocols whose loaders this module knows (protocol 0 named functions differently).
SKOPS_PROTOCOLS = (1, 2)
#: JSON nesting deeper than this is refused (skops rebuilds the schema recursively).
MAX_SCHEMA_DEPTH = 200
MAX_MEMBERS = 200_000

# Loaders of the current skops protocol (skops.io._*.NODE_TYPE_MAPPING). A schema naming any
# other loader is refused before skops sees it.
KNOWN_LOADERS = frozenset({
    "DictNode", "DefaultDictNode", "ListNode", "SetNode", "TupleNode", "BytesNode",
    "BytearrayNode", "SliceNode", "FunctionNode", "MethodNode", "PartialNode", "TypeNode",
    "ConstructorFromReduceNode", "ObjectNode", "JsonNode", "OperatorFuncNode", "CachedNode",
    "NdArrayNode", "MaskedArrayNode", "DTypeNode", "RandomStateNode", "RandomGeneratorNode",
    "SparseMatrixNode", "LossNode", "TreeNode",
})

# Private scikit-learn classes that fitted models of the usual kinds hold as attributes, found
# by dumping such models with skops.io.dump and listing every type in the schema (see
# tests/test_model_trust.py). Each is either plain data, or validated by check_model.
_SKLEARN_INTERNAL = (
    ("sklearn._loss.link", ("IdentityLink", "Interval", "LogLink", "LogitLink", "HalfLogitLink",
                            "MultinomialLogit")),
    ("sklearn._loss.loss", ("HalfSquaredError", "AbsoluteError", "PinballLoss", "HuberLoss",
                            "HalfPoissonLoss", "HalfGammaLoss", "HalfTweedieLoss",
                            "HalfTweedieLossIdentity", "HalfBinomialLoss", "ExponentialLoss",
                            "HalfMultinomialLoss")),
    ("sklearn.ensemble._hist_gradient_boosting.binning", ("_BinMapper",)),
    ("sklearn.ensemble._hist_gradient_boosting.predictor", ("TreePredictor",)),
    ("sklearn.compose._column_transformer", ("make_column_selector",)),
    ("sklearn.neural_network._stochastic_optimizers", ("AdamOptimizer", "SGDOptimizer")),
    ("sklearn.neighbors._kd_tree", ("KDTree",)),
    ("sklearn.neighbors._ball_tree", ("BallTree",)),
    ("sklearn.metrics._dist_metrics", ("EuclideanDistance64", "ManhattanDistance64",
                                       "ChebyshevDistance64", "MinkowskiDistance64")),
)
# Cython losses that skops' LossNode rebuilds by calling the class with arguments from the file.
_SKLEARN_LOSSES = (
    ("sklearn._loss._loss", ("CyHalfSquaredError", "CyAbsoluteError", "CyPinballLoss",
                             "CyHuberLoss", "CyHalfPoissonLoss", "CyHalfGammaLoss",
                             "CyHalfTweedieLoss", "CyHalfTweedieLossIdentity",
                             "CyHalfBinomialLoss", "CyExponentialLoss", "CyHalfMultinomialLoss")),
    ("sklearn.linear_model._sgd_fast", ("Hinge", "ModifiedHuber", "SquaredHinge", "EpsilonInsensitive",
                                        "SquaredEpsilonInsensitive", "Huber", "Log", "SquaredLoss")),
)
_SCIPY_SPARSE = ("csr_matrix", "csc_matrix", "coo_matrix", "csr_array", "csc_array", "coo_array")
_FUNCTIONS = ("sklearn.utils.validation.check_array",)
# Builtin classes used as values (dtype=int, dtype=object, dict key types).
_BUILTIN_VALUE_TYPES = ("int", "float", "str", "bool", "complex", "bytes", "object", "list",
                        "tuple", "set", "map")


class ModelFileError(ValueError):
    """An uploaded model file is refused; the message names the file and says why."""


def _type_name(cls) -> str:
    return f"{cls.__module__}.{cls.__name__}"


def _resolve(groups) -> set[str]:
    """Names of the classes in ``groups`` that this installation defines."""
    import importlib

    found = set()
    for module_name, names in groups:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in names:
            cls = getattr(module, name, None)
            if isinstance(cls, type):
                found.add(_type_name(cls))
    return found


def sklearn_estimator_types() -> set[str]:
    """scikit-learn's public estimator classes, by the name skops writes (module.class)."""
    from sklearn.utils import all_estimators

    names = set()
    for _, cls in all_estimators():
        parts = cls.__module__.split(".")
        if parts[0] != "sklearn" or {"tests", "_testing", "testing"} & set(parts):
            continue
        names.add(_type_name(cls))
    return names


def _numpy_scalar_types() -> set[str]:
    return {_type_name(obj) for obj in vars(np).values()
            if isinstance(obj, type) and issubclass(obj, np.generic)}


@functools.cache
def allow_list() -> dict[str, frozenset[str]]:
    """Loader -> the exact type names it may build without the user's acceptance."""
    import scipy.sparse

    scalars = _numpy_scalar_types()
    sparse = {_type_name(getattr(scipy.sparse, n)) for n in _SCIPY_SPARSE if hasattr(scipy.sparse, n)}
    allowed = {
        "ObjectNode": sklearn_estimator_types() | _resolve(_SKLEARN_INTERNAL),
        "TreeNode": {"sklearn.tree._tree.Tree"},
        "LossNode": _resolve(_SKLEARN_LOSSES),
        "NdArrayNode": {"numpy.ndarray"} | scalars,
        "TypeNode": scalars | {f"builtins.{n}" for n in _BUILTIN_VALUE_TYPES},
        "DTypeNode": {"numpy.dtype"},
        "MaskedArrayNode": {_type_name(np.ma.MaskedArray)},
        "RandomStateNode": {_type_name(np.random.RandomState)},
        "RandomGeneratorNode": {_type_name(np.random.Generator)},
        "SparseMatrixNode": sparse,
        "DictNode": {"builtins.dict", "collections.OrderedDict"},
        "ListNode": {"builtins.list"},
        "SetNode": {"builtins.set"},
        "TupleNode": {"builtins.tuple"},
        "SliceNode": {"builtins.slice"},
        "BytesNode": {"builtins.bytes"},
        "BytearrayNode": {"builtins.bytearray"},
        "JsonNode": {"builtins.str", "builtins.int", "builtins.float", "builtins.bool",
                     "builtins.NoneType"},
        "FunctionNode": set(_FUNCTIONS),
        "PartialNode": {"functools.partial"},
    }
    # A CachedNode re-uses an object built elsewhere in the file; it only repeats that type.
    allowed["CachedNode"] = set().union(*allowed.values())
    return {loader: frozenset(names) for loader, names in allowed.items()}


def is_allowed(type_name: str, loaders) -> bool:
    """True if every loader in ``loaders`` may build ``type_name`` without acceptance."""
    table = allow_list()
    return bool(loaders) and all(type_name in table.get(loader, ()) for loader in loaders)


# --- the archive and its schema --------------------------------------------------------------
@dataclass(frozen=True)
class Inspection:
    """What a .skops file would build, read without building anything."""

    schema: dict
    types: dict[str, frozenset[str]]  # type name -> loaders that build it
    refused: tuple[str, ...]          # names not on the allow-list (with the loaders used)

    @property
    def allowed(self) -> list[str]:
        return sorted(set(self.types) - set(self.refused))


def inspect_skops(path: str, label: str, *, limit: int) -> Inspection:
    """Check the archive and its schema; list the types it names. Never builds an object.

    Raises :class:`ModelFileError` for anything that is not a sound skops archive within
    ``limit`` unpacked bytes (as declared). Any unexpected exception while reading becomes
    one too.
    """
    try:
        schema, sizes = _read_archive(path, label, limit)
        types, references = _schema_types(schema, label)
    except ModelFileError:
        raise
    except Exception as exc:
        raise ModelFileError(f"{label} is not a valid .skops file ({type(exc).__name__}: "
                             f"{_first_line(exc)}).") from exc
    for member in references:
        if member not in sizes:
            raise ModelFileError(f"{label} is not a valid .skops file: its schema refers to "
                                 f"{member!r}, which the archive does not contain.")
    refused = tuple(sorted(name for name, loaders in types.items() if not is_allowed(name, loaders)))
    return Inspection(schema=schema, types=types, refused=refused)


def _read_archive(path: str, label: str, limit: int) -> tuple[dict, dict[str, int]]:
    bad = ModelFileError(f"{label} is not a valid .skops file (it is not a skops zip archive); save "
                         f"the model with skops.io.dump(model, 'model.skops').")
    if not zipfile.is_zipfile(path):
        raise bad
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        names = [info.filename for info in infos]
        if "schema.json" not in names:
            raise bad
        if len(infos) > MAX_MEMBERS or len(set(names)) != len(names):
            raise ModelFileError(f"{label} is not a valid .skops file: it has "
                                 f"{'duplicated' if len(infos) <= MAX_MEMBERS else 'too many'} "
                                 f"members.")
        declared = sum(info.file_size for info in infos)
        if declared > limit:
            raise ModelFileError(f"{label} unpacks to {declared / 2**20:.0f} MB, more than this "
                                 f"server accepts ({limit / 2**20:.0f} MB).")
        raw = archive.read("schema.json")
    schema = json.loads(raw)
    if not isinstance(schema, dict):
        raise bad
    protocol = schema.get("protocol")
    if isinstance(protocol, bool) or protocol not in SKOPS_PROTOCOLS:
        raise ModelFileError(f"{label} was written with skops protocol {protocol!r}; this server "
                             f"reads protocols {', '.join(map(str, SKOPS_PROTOCOLS))}. Save the model "
                             f"again with a recent skops.")
    return schema, {info.filename: info.file_size for info in infos}


def _schema_types(schema: dict, label: str) -> tuple[dict[str, frozenset[str]], dict[str, int]]:
    """Type name -> loaders, and archive member -> how many nodes read it (iterative walk)."""
    types: dict[str, set] = {}
    references: dict[str, int] = {}
    stack = [(schema, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise ModelFileError(f"{label} is not a valid .skops file: its schema is nested more "
                                 f"than {MAX_SCHEMA_DEPTH} levels deep.")
        if isinstance(item, list):
            stack.extend((value, depth + 1) for value in item)
            continue
        if not isinstance(item, dict):
            continue
        if any(key in item for key in ("__loader__", "__module__", "__class__")):
            name, loader = _node_type(item, label)
            types.setdefault(name, set()).add(loader)
            if "__id__" in item and (not isinstance(item["__id__"], int) or isinstance(item["__id__"], bool)):
                raise ModelFileError(f"{label} is not a valid .skops file: a node of type {name} "
                                     f"has a non-integer __id__.")
            if "file" in item:
                if not isinstance(item["file"], str):
                    raise ModelFileError(f"{label} is not a valid .skops file: a node of type "
                                         f"{name} names its data file with a {type(item['file']).__name__}.")
                references[item["file"]] = references.get(item["file"], 0) + 1
        stack.extend((value, depth + 1) for value in item.values())
    return {name: frozenset(loaders) for name, loaders in types.items()}, references


def _node_type(node: dict, label: str) -> tuple[str, str]:
    fields = {key: node.get(key) for key in ("__loader__", "__module__", "__class__")}
    wrong = [key for key, value in fields.items() if not isinstance(value, str) or not value]
    if wrong:
        shown = ", ".join(f"{key} is {type(fields[key]).__name__}" for key in wrong)
        raise ModelFileError(f"{label} is not a valid .skops file: a schema node's type fields "
                             f"must be non-empty text ({shown}).")
    loader = fields["__loader__"]
    if loader not in KNOWN_LOADERS:
        raise ModelFileError(f"{label} is not a valid .skops file: unknown loader {loader[:80]!r} "
                             f"(saved with another skops version?).")
    name = f"{fields['__module__']}.{fields['__class__']}"
    if loader == "MethodNode":  # a bound method: skops names it owner type + method
        content = node.get("content")
        func = content.get("func") if isinstance(content, dict) else None
        if not isinstance(func, str):
            raise ModelFileError(f"{label} is not a valid .skops file: a method of {name} has no name.")
        name = f"{name}.{func}"
    return name, loader


def _first_line(exc: BaseException, limit: int = 200) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
