"""What an uploaded ``.skops`` file may contain, and checks of the model it builds.

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

The archive may unpack to at most ``limit`` bytes (the caller passes the upload limit). That
is checked on the sizes the zip declares, then again while stream-decompressing every member
with a running total (declared sizes can lie), including the arrays inside SciPy's ``.npz``
members, and on the bytes the schema makes skops read (a member named by many nodes is read
once per node). Only stored and deflated members are accepted: bzip2 and LZMA can expand a
few kilobytes into gigabytes in a single decompression step.

After skops has built the model, :func:`check_model` validates what scikit-learn's compiled
code reads without bounds checks, before any prediction: decision trees (children in range,
each node reached once from the root, feature indices below the number of input columns,
no NaN thresholds, node count consistent with the arrays), the estimators that call them
without validating the input (forests, gradient boosting, bagging), histogram gradient
boosting predictors (the same, plus categorical bitset indices; their input width is also
checked at every call), libsvm models (support vector counts, coefficient and intercept
shapes), neighbour search trees (rebuilt from their data, never trusted as stored) and
cluster centres. It also refuses text vectorizers that would read files named in the data.
"""

from __future__ import annotations

import functools
import io
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

#: skops protocols whose loaders this module knows (protocol 0 named functions differently).
SKOPS_PROTOCOLS = (1, 2)
#: JSON nesting deeper than this is refused (skops rebuilds the schema recursively).
MAX_SCHEMA_DEPTH = 200
MAX_MEMBERS = 200_000
_CHUNK = 1 << 20

# Loaders of the current skops protocol (skops.io._*.NODE_TYPE_MAPPING). A schema naming any
# other loader is refused before skops sees it.
KNOWN_LOADERS = frozenset(
    {
        "DictNode",
        "DefaultDictNode",
        "ListNode",
        "SetNode",
        "TupleNode",
        "BytesNode",
        "BytearrayNode",
        "SliceNode",
        "FunctionNode",
        "MethodNode",
        "PartialNode",
        "TypeNode",
        "ConstructorFromReduceNode",
        "ObjectNode",
        "JsonNode",
        "OperatorFuncNode",
        "CachedNode",
        "NdArrayNode",
        "MaskedArrayNode",
        "DTypeNode",
        "RandomStateNode",
        "RandomGeneratorNode",
        "SparseMatrixNode",
        "LossNode",
        "TreeNode",
    }
)

# Private scikit-learn classes that fitted models of the usual kinds hold as attributes, found
# by dumping such models with skops.io.dump and listing every type in the schema (see
# tests/test_model_trust.py). Each is either plain data, or validated by check_model.
_SKLEARN_INTERNAL = (
    ("sklearn._loss.link", ("IdentityLink", "Interval", "LogLink", "LogitLink", "HalfLogitLink", "MultinomialLogit")),
    (
        "sklearn._loss.loss",
        (
            "HalfSquaredError",
            "AbsoluteError",
            "PinballLoss",
            "HuberLoss",
            "HalfPoissonLoss",
            "HalfGammaLoss",
            "HalfTweedieLoss",
            "HalfTweedieLossIdentity",
            "HalfBinomialLoss",
            "ExponentialLoss",
            "HalfMultinomialLoss",
        ),
    ),
    ("sklearn.ensemble._hist_gradient_boosting.binning", ("_BinMapper",)),
    ("sklearn.ensemble._hist_gradient_boosting.predictor", ("TreePredictor",)),
    ("sklearn.compose._column_transformer", ("make_column_selector",)),
    ("sklearn.neural_network._stochastic_optimizers", ("AdamOptimizer", "SGDOptimizer")),
    ("sklearn.neighbors._kd_tree", ("KDTree",)),
    ("sklearn.neighbors._ball_tree", ("BallTree",)),
    (
        "sklearn.metrics._dist_metrics",
        ("EuclideanDistance64", "ManhattanDistance64", "ChebyshevDistance64", "MinkowskiDistance64"),
    ),
)
# Cython losses that skops' LossNode rebuilds by calling the class with arguments from the file.
_SKLEARN_LOSSES = (
    (
        "sklearn._loss._loss",
        (
            "CyHalfSquaredError",
            "CyAbsoluteError",
            "CyPinballLoss",
            "CyHuberLoss",
            "CyHalfPoissonLoss",
            "CyHalfGammaLoss",
            "CyHalfTweedieLoss",
            "CyHalfTweedieLossIdentity",
            "CyHalfBinomialLoss",
            "CyExponentialLoss",
            "CyHalfMultinomialLoss",
        ),
    ),
    (
        "sklearn.linear_model._sgd_fast",
        (
            "Hinge",
            "ModifiedHuber",
            "SquaredHinge",
            "EpsilonInsensitive",
            "SquaredEpsilonInsensitive",
            "Huber",
            "Log",
            "SquaredLoss",
        ),
    ),
)
_SCIPY_SPARSE = ("csr_matrix", "csc_matrix", "coo_matrix", "csr_array", "csc_array", "coo_array")
_FUNCTIONS = ("sklearn.utils.validation.check_array",)
# Builtin classes used as values (dtype=int, dtype=object, dict key types).
_BUILTIN_VALUE_TYPES = ("int", "float", "str", "bool", "complex", "bytes", "object", "list", "tuple", "set", "map")
_METRIC_CLASSES = ("EuclideanDistance64", "ManhattanDistance64", "ChebyshevDistance64", "MinkowskiDistance64")


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
    return {_type_name(obj) for obj in vars(np).values() if isinstance(obj, type) and issubclass(obj, np.generic)}


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
        "JsonNode": {"builtins.str", "builtins.int", "builtins.float", "builtins.bool", "builtins.NoneType"},
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
    refused: tuple[str, ...]  # names not on the allow-list (with the loaders used)

    @property
    def allowed(self) -> list[str]:
        return sorted(set(self.types) - set(self.refused))


def inspect_skops(path: str, label: str, *, limit: int) -> Inspection:
    """Check the archive and its schema; list the types it names. Never builds an object.

    Raises :class:`ModelFileError` for anything that is not a sound skops archive within
    ``limit`` unpacked bytes. Any unexpected exception while reading becomes one too.
    """
    try:
        schema, sizes = _read_archive(path, label, limit)
        types, references = _schema_types(schema, label)
    except ModelFileError:
        raise
    except Exception as exc:
        raise ModelFileError(f"{label} is not a valid .skops file ({type(exc).__name__}: {_first_line(exc)}).") from exc
    read = 0
    for member, count in references.items():
        if member not in sizes:
            raise ModelFileError(
                f"{label} is not a valid .skops file: its schema refers to "
                f"{member!r}, which the archive does not contain."
            )
        read += sizes[member] * count
    if read > limit:
        raise ModelFileError(
            f"{label} makes the loader read {read / 2**20:.0f} MB (members "
            f"named several times by its schema), more than this server accepts "
            f"({limit / 2**20:.0f} MB)."
        )
    refused = tuple(sorted(name for name, loaders in types.items() if not is_allowed(name, loaders)))
    return Inspection(schema=schema, types=types, refused=refused)


def _read_archive(path: str, label: str, limit: int) -> tuple[dict, dict[str, int]]:
    bad = ModelFileError(
        f"{label} is not a valid .skops file (it is not a skops zip archive); save "
        f"the model with skops.io.dump(model, 'model.skops')."
    )
    if not zipfile.is_zipfile(path):
        raise bad
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        names = [info.filename for info in infos]
        if "schema.json" not in names:
            raise bad
        if len(infos) > MAX_MEMBERS or len(set(names)) != len(names):
            raise ModelFileError(
                f"{label} is not a valid .skops file: it has "
                f"{'duplicated' if len(infos) <= MAX_MEMBERS else 'too many'} "
                f"members."
            )
        for info in infos:
            if info.flag_bits & 0x1:
                raise ModelFileError(
                    f"{label} has an encrypted member ({info.filename!r}); upload an unencrypted skops file."
                )
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise ModelFileError(
                    f"{label} uses a compression this server does not unpack (member "
                    f"{info.filename!r}, method {info.compress_type}); save it with "
                    f"skops.io.dump(model, path) or compression=zipfile.ZIP_DEFLATED."
                )
        declared = sum(info.file_size for info in infos)
        if declared > limit:
            raise _too_big(label, declared, limit)
        budget = _Budget(label, limit)
        for info in infos:
            with archive.open(info) as member:
                if info.filename.endswith(".npz"):
                    _check_npz(member, info.filename, budget)
                elif info.filename.endswith(".npy"):
                    _check_npy(member, info, budget, label)
                else:
                    _drain(member, budget)
        raw = archive.read("schema.json")
    schema = json.loads(raw)
    if not isinstance(schema, dict):
        raise bad
    protocol = schema.get("protocol")
    if isinstance(protocol, bool) or protocol not in SKOPS_PROTOCOLS:
        raise ModelFileError(
            f"{label} was written with skops protocol {protocol!r}; this server "
            f"reads protocols {', '.join(map(str, SKOPS_PROTOCOLS))}. Save the model "
            f"again with a recent skops."
        )
    return schema, {info.filename: info.file_size for info in infos}


class _Budget:
    """A running total of decompressed bytes that refuses the archive past ``limit``."""

    def __init__(self, label: str, limit: int) -> None:
        self.label, self.limit, self.used = label, limit, 0

    def add(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise _too_big(self.label, self.used, self.limit, more=True)


def _too_big(label: str, size: int, limit: int, more: bool = False) -> ModelFileError:
    return ModelFileError(
        f"{label} unpacks to {'more than ' if more else ''}{size / 2**20:.0f} MB, "
        f"more than this server accepts ({limit / 2**20:.0f} MB, the upload "
        f"limit)."
    )


def _drain(stream, budget: _Budget) -> None:
    while chunk := stream.read(_CHUNK):
        budget.add(len(chunk))


def _check_npy(stream, info: zipfile.ZipInfo, budget: _Budget, label: str) -> None:
    """Stream the member, and check that its header declares no more data than it holds
    (numpy allocates the declared size before reading)."""
    from numpy.lib import format as npformat

    head = stream.read(min(info.file_size, 65536 + 16))
    budget.add(len(head))
    buffer = io.BytesIO(head)
    try:
        version = npformat.read_magic(buffer)
        if version == (1, 0):
            shape, _, dtype = npformat.read_array_header_1_0(buffer)
        elif version == (2, 0):
            shape, _, dtype = npformat.read_array_header_2_0(buffer)
        else:  # 3.0 (unicode field names): same header, no public reader
            shape, _, dtype = npformat._read_array_header(buffer, version)  # type: ignore[attr-defined]
    except Exception as exc:
        raise ModelFileError(
            f"{label}: member {info.filename!r} is not a valid .npy array ({_first_line(exc)})."
        ) from exc
    if dtype.hasobject:
        raise ModelFileError(f"{label}: member {info.filename!r} holds Python objects, which skops never writes.")
    declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if declared != info.file_size - buffer.tell():
        raise ModelFileError(
            f"{label}: member {info.filename!r} declares an array of {declared} "
            f"bytes but holds {info.file_size - buffer.tell()}."
        )
    _drain(stream, budget)


def _check_npz(stream, name: str, budget: _Budget) -> None:
    """A SciPy sparse matrix is a zip inside the zip: count what its arrays unpack to."""
    with tempfile.TemporaryFile() as copy:
        while chunk := stream.read(_CHUNK):
            budget.add(len(chunk))
            copy.write(chunk)
        copy.seek(0)
        _check_inner_zip(copy, name, budget)


def _check_inner_zip(fileobj, name: str, budget: _Budget) -> None:
    with zipfile.ZipFile(fileobj) as inner:
        for info in inner.infolist():
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise ModelFileError(f"{budget.label}: member {name!r} uses an unsupported compression.")
            with inner.open(info) as member:
                _drain(member, budget)


def _schema_types(schema: dict, label: str) -> tuple[dict[str, frozenset[str]], dict[str, int]]:
    """Type name -> loaders, and archive member -> how many nodes read it (iterative walk)."""
    types: dict[str, set] = {}
    references: dict[str, int] = {}
    stack = [(schema, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise ModelFileError(
                f"{label} is not a valid .skops file: its schema is nested more than {MAX_SCHEMA_DEPTH} levels deep."
            )
        if isinstance(item, list):
            stack.extend((value, depth + 1) for value in item)
            continue
        if not isinstance(item, dict):
            continue
        if any(key in item for key in ("__loader__", "__module__", "__class__")):
            name, loader = _node_type(item, label)
            types.setdefault(name, set()).add(loader)
            if "__id__" in item and (not isinstance(item["__id__"], int) or isinstance(item["__id__"], bool)):
                raise ModelFileError(
                    f"{label} is not a valid .skops file: a node of type {name} has a non-integer __id__."
                )
            if "file" in item:
                if not isinstance(item["file"], str):
                    raise ModelFileError(
                        f"{label} is not a valid .skops file: a node of type "
                        f"{name} names its data file with a {type(item['file']).__name__}."
                    )
                references[item["file"]] = references.get(item["file"], 0) + 1
        stack.extend((value, depth + 1) for value in item.values())
    return {name: frozenset(loaders) for name, loaders in types.items()}, references


def _node_type(node: dict, label: str) -> tuple[str, str]:
    fields: dict[str, Any] = {key: node.get(key) for key in ("__loader__", "__module__", "__class__")}
    wrong = [key for key, value in fields.items() if not isinstance(value, str) or not value]
    if wrong:
        shown = ", ".join(f"{key} is {type(fields[key]).__name__}" for key in wrong)
        raise ModelFileError(
            f"{label} is not a valid .skops file: a schema node's type fields must be non-empty text ({shown})."
        )
    loader = fields["__loader__"]
    if loader not in KNOWN_LOADERS:
        raise ModelFileError(
            f"{label} is not a valid .skops file: unknown loader {loader[:80]!r} (saved with another skops version?)."
        )
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


# --- the built model -----------------------------------------------------------------------------
def check_model(model, label: str) -> None:
    """Validate what compiled scikit-learn code will read from ``model``; see the module doc.

    Raises :class:`ModelFileError` naming ``label`` and the problem. Neighbour search trees
    are rebuilt in place from their data, and histogram-gradient-boosting predictors check
    their input width at each call.
    """
    try:
        _check_all(model, label)
    except ModelFileError:
        raise
    except Exception as exc:
        raise ModelFileError(
            f"{label} holds a model whose internal arrays are inconsistent ({type(exc).__name__}: {_first_line(exc)})."
        ) from exc


def _objects(root):
    """Every object reachable from ``root`` through instance dicts, containers and object
    arrays (iteratively, each once), with no property or method of the objects called."""
    seen, stack = set(), [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, (str, bytes, int, float, bool, type)):
            continue
        seen.add(id(obj))
        yield obj
        if isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif isinstance(obj, np.ndarray):
            if obj.dtype == object:
                stack.extend(obj.ravel().tolist())
        else:
            stack.extend(_attrs(obj).values())


def _check_all(model, label: str) -> None:
    from sklearn.ensemble import BaseEnsemble
    from sklearn.ensemble._bagging import BaseBagging
    from sklearn.ensemble._forest import BaseForest
    from sklearn.ensemble._gb import BaseGradientBoosting
    from sklearn.ensemble._hist_gradient_boosting.gradient_boosting import (
        BaseHistGradientBoosting,
    )
    from sklearn.ensemble._hist_gradient_boosting.predictor import TreePredictor
    from sklearn.metrics._dist_metrics import DistanceMetric64
    from sklearn.neighbors._ball_tree import BallTree
    from sklearn.neighbors._kd_tree import KDTree
    from sklearn.svm._base import BaseLibSVM
    from sklearn.tree import BaseDecisionTree
    from sklearn.tree._tree import Tree

    objects = list(_objects(model))
    for obj in objects:  # first the parts ...
        if isinstance(obj, Tree):
            _check_tree(obj, label)
        elif isinstance(obj, TreePredictor):
            _check_predictor(obj, label)
        elif isinstance(obj, DistanceMetric64):
            _check_metric(obj, label)
    boosting = []
    for obj in objects:  # ... then the estimators that use them
        if isinstance(obj, (KDTree, BallTree)):
            _rebuild_search_tree(obj, label)
        if isinstance(obj, BaseDecisionTree) and "tree_" in _attrs(obj):  # fitted
            _check_tree_owner(obj, label)
        if isinstance(obj, (BaseForest, BaseGradientBoosting, BaseBagging)) or (
            isinstance(obj, BaseEnsemble) and "estimators_" in _attrs(obj)
        ):
            _check_ensemble(obj, label, bagging=isinstance(obj, BaseBagging))
        if isinstance(obj, BaseGradientBoosting):
            boosting.append(obj)
        if isinstance(obj, BaseHistGradientBoosting):
            _check_hist_gradient_boosting(obj, label)
        if isinstance(obj, BaseLibSVM):
            _check_libsvm(obj, label)
        _check_params(obj, label)
    for obj in boosting:  # calls the initial estimator: only once everything else is checked
        _check_gradient_boosting(obj, label)


def _attrs(obj) -> dict:
    try:
        attrs = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}
    return attrs if isinstance(attrs, dict) else {}


def _fail(label: str, what: str, problem: str) -> ModelFileError:
    return ModelFileError(
        f"{label} is refused: {what} {problem}. The file was altered or damaged; "
        f"save the model again with skops.io.dump."
    )


def _n_features_in(obj, label: str, what: str) -> int:
    n = _attrs(obj).get("n_features_in_")
    if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1:
        return int(n)
    raise _fail(label, what, f"has no valid n_features_in_ (got {n!r}); scikit-learn would not check the input width")


def _check_children(left: np.ndarray, right: np.ndarray, internal: np.ndarray, label: str, what: str) -> None:
    """Children of internal nodes in [1, n), each node the child of exactly one internal node,
    all reachable from the root: a tree, so every walk from the root ends at a leaf after at
    most n steps."""
    n = len(internal)
    kids = np.concatenate([left[internal], right[internal]]).astype(np.int64, copy=False)
    if kids.size and (kids.min() < 1 or kids.max() >= n):
        bad = int(kids[(kids < 1) | (kids >= n)][0])
        raise _fail(label, what, f"has a child index {bad} outside 1..{n - 1} (the root cannot be a child)")
    parents = np.bincount(kids, minlength=n) if kids.size else np.zeros(n, dtype=np.int64)
    if (parents[1:] != 1).any():
        node = int(np.flatnonzero(parents[1:] != 1)[0]) + 1
        raise _fail(
            label,
            what,
            f"has node {node} reached {int(parents[node])} times instead of "
            f"once (a cycle or a shared or orphaned node)",
        )
    # Each non-root node has one parent; it is a tree iff every node's chain of parents
    # reaches the root. Pointer doubling checks that in log2(n) vectorised steps.
    parent = np.zeros(n, dtype=np.int64)
    nodes = np.flatnonzero(internal)
    parent[left[nodes].astype(np.int64)] = nodes
    parent[right[nodes].astype(np.int64)] = nodes
    for _ in range(max(1, int(n).bit_length())):
        parent = parent[parent]
    if (parent != 0).any():
        raise _fail(label, what, f"has a cycle: node {int(np.flatnonzero(parent)[0])} is not reached from the root")


def _check_tree(tree, label: str) -> None:
    what = "a decision tree"
    n, capacity = int(tree.node_count), int(tree.capacity)
    if n < 1 or n != capacity:  # read node_count before any array: the arrays are views of it
        raise _fail(label, what, f"declares {n} nodes but holds {capacity}")
    if tree.n_features < 1 or tree.n_outputs < 1:
        raise _fail(label, what, f"has {tree.n_features} features and {tree.n_outputs} outputs")
    left = np.asarray(tree.children_left)
    right = np.asarray(tree.children_right)
    feature = np.asarray(tree.feature)
    threshold = np.asarray(tree.threshold)
    internal = left != -1
    leaves = ~internal
    if (right[leaves] != -1).any():
        node = int(np.flatnonzero(leaves & (right != -1))[0])
        raise _fail(label, what, f"has leaf {node} with a right child but no left child")
    _check_children(left, right, internal, label, what)
    f = feature[internal]
    if f.size and (f.min() < 0 or f.max() >= tree.n_features):
        bad = int(f[(f < 0) | (f >= tree.n_features)][0])
        raise _fail(label, what, f"splits on feature {bad}, but it has {tree.n_features} input feature(s)")
    t = threshold[internal]
    if np.isnan(t).any() or (t == -np.inf).any():  # +inf is scikit-learn's "missing values only" split
        raise _fail(label, what, "has a NaN or -inf split threshold")
    value = tree.value
    if value.shape[0] != n or value.ndim != 3:
        raise _fail(label, what, f"has a value array of shape {value.shape} for {n} nodes")


def _check_tree_owner(est, label: str) -> None:
    """A DecisionTree*/ExtraTree* checks its input against n_features_in_; that must be the
    width its tree reads."""
    from sklearn.tree._tree import Tree

    tree = _attrs(est)["tree_"]
    name = type(est).__name__
    if not isinstance(tree, Tree):
        raise _fail(label, name, f"has a tree_ of type {type(tree).__name__}, not a Tree")
    n = _n_features_in(est, label, name)
    if tree.n_features != n:
        raise _fail(label, name, f"reads {tree.n_features} features but checks its input for {n}")


def _check_ensemble(est, label: str, bagging: bool) -> None:
    """Forests and gradient boosting validate the input once and call their trees without
    checks (check_input=False), so every tree must expect that width (bagging: its subset)."""
    name = type(est).__name__
    subs = _attrs(est).get("estimators_")
    if subs is None:
        return
    n = _n_features_in(est, label, name)
    subs = list(np.asarray(subs, dtype=object).ravel()) if isinstance(subs, np.ndarray) else list(subs)
    features = _attrs(est).get("estimators_features_") if bagging else None
    for i, sub in enumerate(subs):
        if "n_features_in_" not in _attrs(sub):
            continue
        width = _n_features_in(sub, label, f"estimator {i} of {name}")
        expected = n
        if features is not None:
            try:
                expected = len(features[i])
            except Exception:  # noqa: BLE001
                raise _fail(label, name, f"has no feature subset for estimator {i}") from None
            if expected > n:
                raise _fail(label, name, f"gives estimator {i} {expected} features of {n}")
        if width != expected:
            raise _fail(label, name, f"passes {expected} features to estimator {i}, which expects {width}")


def _check_gradient_boosting(est, label: str) -> None:
    """GradientBoosting*: the compiled predict_stages reads ``estimators_[i, k].tree_`` and
    writes column k of the initial raw predictions, unchecked."""
    from sklearn.tree._tree import Tree

    name = type(est).__name__
    stages = _attrs(est).get("estimators_")
    if stages is None:
        return
    if not isinstance(stages, np.ndarray) or stages.ndim != 2 or stages.dtype != object or stages.size == 0:
        raise _fail(label, name, "has estimators_ that are not a 2-d array of trees")
    for sub in stages.ravel():
        if not isinstance(_attrs(sub).get("tree_"), Tree):
            raise _fail(label, name, f"has a stage of type {type(sub).__name__} without a tree")
    n = _n_features_in(est, label, name)
    raw = est._raw_predict_init(np.zeros((2, n), dtype=np.float32))
    if not isinstance(raw, np.ndarray) or raw.dtype != np.float64 or raw.shape != (2, stages.shape[1]):
        raise _fail(
            label,
            name,
            f"starts from raw predictions of shape {getattr(raw, 'shape', None)} for {stages.shape[1]} trees per stage",
        )


def _check_predictor(pred, label: str) -> None:
    """A HistGradientBoosting TreePredictor: what _predictor.pyx reads without bounds checks."""
    from sklearn.ensemble._hist_gradient_boosting.common import PREDICTOR_RECORD_DTYPE

    what = "a histogram gradient boosting tree"
    nodes = _attrs(pred).get("nodes")
    if not isinstance(nodes, np.ndarray) or nodes.dtype != PREDICTOR_RECORD_DTYPE or nodes.ndim != 1 or len(nodes) < 1:
        raise _fail(label, what, "has no valid node array")
    bitsets = {}
    for key in ("raw_left_cat_bitsets", "binned_left_cat_bitsets"):
        b = _attrs(pred).get(key)
        if not isinstance(b, np.ndarray) or b.ndim != 2 or b.shape[1] != 8 or b.dtype != np.uint32:
            raise _fail(label, what, f"has a {key} that is not an (n, 8) uint32 array")
        bitsets[key] = b
    internal = nodes["is_leaf"] == 0
    _check_children(nodes["left"], nodes["right"], internal, label, what)
    f = nodes["feature_idx"][internal]
    if f.size and f.min() < 0:
        raise _fail(label, what, f"splits on feature {int(f.min())}")
    categorical = internal & (nodes["is_categorical"] != 0)
    idx = nodes["bitset_idx"][categorical]
    rows = min(b.shape[0] for b in bitsets.values())
    if idx.size and idx.max() >= rows:
        raise _fail(label, what, f"uses categorical bitset {int(idx.max())} of {rows}")
    numeric = internal & (nodes["is_categorical"] == 0)
    t = nodes["num_threshold"][numeric]
    if np.isnan(t).any() or (t == -np.inf).any():
        raise _fail(label, what, "has a NaN or -inf split threshold")
    pred.__class__ = _checked_predictor_class()
    pred._max_feature = int(f.max()) if f.size else -1
    pred._categorical_features = np.unique(nodes["feature_idx"][categorical]).astype(np.intp)


def _check_hist_gradient_boosting(est, label: str) -> None:
    from sklearn.ensemble._hist_gradient_boosting.predictor import TreePredictor

    name = type(est).__name__
    attrs = _attrs(est)
    if attrs.get("_in_fit"):
        raise _fail(label, name, "is marked as being fitted (it would read its input as binned)")
    predictors = attrs.get("_predictors")
    if predictors is None:
        return
    n = _n_features_in(est, label, name)
    mapper = attrs.get("_bin_mapper")
    is_cat = _attrs(mapper).get("is_categorical_")
    if is_cat is not None and (not isinstance(is_cat, np.ndarray) or is_cat.shape != (n,)):
        raise _fail(label, name, f"has categorical flags for {getattr(is_cat, 'shape', '?')} of {n} features")
    for stage in predictors:
        for pred in stage:
            if not isinstance(pred, TreePredictor):
                continue
            if pred._max_feature >= n:
                raise _fail(label, name, f"splits on feature {pred._max_feature}, but it has {n}")
            cats = pred._categorical_features
            if cats.size and (is_cat is None or not is_cat[cats].all()):
                raise _fail(
                    label, name, f"splits on feature {int(cats[0])} as categorical, but it is not a categorical feature"
                )


@functools.cache
def _checked_predictor_class():
    from sklearn.ensemble._hist_gradient_boosting.predictor import TreePredictor

    class CheckedTreePredictor(TreePredictor):
        """A TreePredictor validated at load that also checks each input it is given."""

        def predict(self, X, known_cat_bitsets, f_idx_map, n_threads):
            _check_predictor_input(self, X)
            if self._categorical_features.size:
                f_idx_map = np.asarray(f_idx_map)
                if f_idx_map.ndim != 1 or f_idx_map.shape[0] <= self._categorical_features.max():
                    raise ValueError("categorical feature map does not cover the model's features")
                if np.asarray(known_cat_bitsets).shape[0] <= f_idx_map[self._categorical_features].max():
                    raise ValueError("known-category bitsets do not cover the model's features")
            return super().predict(X, known_cat_bitsets, f_idx_map, n_threads)

        def predict_binned(self, X, missing_values_bin_idx, n_threads):
            _check_predictor_input(self, X)
            return super().predict_binned(X, missing_values_bin_idx, n_threads)

    CheckedTreePredictor.__module__ = __name__
    return CheckedTreePredictor


def __getattr__(name):  # pickle finds the class created on first use
    if name == "CheckedTreePredictor":
        return _checked_predictor_class()
    raise AttributeError(name)


def _check_predictor_input(pred, X) -> None:
    shape: tuple[int, ...] = getattr(X, "shape", ())
    if len(shape) != 2 or shape[1] <= pred._max_feature:
        raise ValueError(f"input of shape {shape} is too narrow for a tree that splits on feature {pred._max_feature}")


def _check_metric(metric, label: str) -> None:
    name = type(metric).__name__
    if name not in _METRIC_CLASSES:
        return  # a metric the user accepted: theirs to trust
    p, vec, _ = metric.__getstate__()[:3]
    if not np.isfinite(p) or p < 1:
        raise _fail(label, f"the distance metric {name}", f"has p = {p}")
    if name != "MinkowskiDistance64" and np.asarray(vec).size:
        raise _fail(label, f"the distance metric {name}", "has weights it does not use")


def _rebuild_search_tree(tree, label: str) -> None:
    """KDTree/BallTree index arrays are read without bounds checks: rebuild them from the
    data instead of trusting them (scikit-learn validates data, leaf size and metric)."""
    name = type(tree).__name__
    state = tree.__getstate__()
    data, leaf_size, metric, weights = state[0], state[4], state[11], state[12]
    if type(metric).__name__ not in _METRIC_CLASSES:
        raise _fail(
            label,
            f"the {name}",
            f"uses the distance metric {type(metric).__name__}, which this server does not rebuild",
        )
    if not isinstance(leaf_size, (int, np.integer)) or not 1 <= leaf_size <= 10**6:
        raise _fail(label, f"the {name}", f"has leaf size {leaf_size!r}")
    fresh = type(tree)(np.asarray(data), leaf_size=int(leaf_size), metric=metric, sample_weight=weights)
    tree.__setstate__(fresh.__getstate__())


def _check_libsvm(est, label: str) -> None:
    """SVC/SVR/...: libsvm copies counts, coefficients and intercepts by sizes it trusts."""
    import scipy.sparse as sp
    from sklearn.svm._base import LIBSVM_IMPL

    name = type(est).__name__
    a = _attrs(est)
    if "support_" not in a:
        return
    impl = getattr(est, "_impl", None)  # a class attribute, unless the file overrides it
    if impl not in LIBSVM_IMPL:
        raise _fail(label, name, f"has an unknown libsvm type {impl!r}")
    svm_type = LIBSVM_IMPL.index(impl)
    support: Any = a.get("support_")
    n_support: Any = a.get("_n_support")
    dual: Any = a.get("_dual_coef_")
    intercept: Any = a.get("_intercept_")
    prob_a: Any = a.get("_probA")
    prob_b: Any = a.get("_probB")
    arrays = (support, n_support, intercept, prob_a, prob_b)
    if not all(isinstance(x, np.ndarray) and x.ndim == 1 for x in arrays):
        raise _fail(label, name, "lacks its libsvm arrays")
    n_sv, n_class = len(support), len(n_support)
    m = n_class * (n_class - 1) // 2
    if (
        n_class < 2
        or (n_support < 0).any()
        or (svm_type < 2 and int(n_support.sum()) != n_sv)
        or (svm_type >= 2 and n_class != 2)
    ):
        raise _fail(label, name, f"has support vector counts {n_support.tolist()[:10]} for {n_sv} support vectors")
    if dual is None or tuple(dual.shape) != (n_class - 1, n_sv):
        raise _fail(label, name, f"has dual coefficients of shape {getattr(dual, 'shape', None)}")
    if len(intercept) != m:
        raise _fail(label, name, f"has {len(intercept)} intercepts for {n_class} classes")
    probability = _enabled(a.get("probability")) or _enabled(a.get("_effective_probability"))
    if len(prob_a) != len(prob_b) or len(prob_a) not in ((m,) if probability else (0, m)):
        raise _fail(label, name, f"has {len(prob_a)} probability coefficients for {m} class pairs")
    kernel = a.get("kernel")
    n = _n_features_in(est, label, name) if not callable(kernel) else None
    vectors: Any = a.get("support_vectors_")
    if a.get("_sparse"):
        if kernel == "precomputed" or callable(kernel) or not sp.issparse(vectors) or not sp.issparse(dual):
            raise _fail(label, name, "is a sparse model without sparse support vectors")
        vectors.check_format(full_check=True)
        if vectors.shape != (n_sv, n) or dual.nnz != dual.shape[0] * dual.shape[1]:
            raise _fail(label, name, f"has support vectors of shape {vectors.shape}")
    elif kernel == "precomputed" or callable(kernel):
        fit_shape = a.get("shape_fit_")
        rows = fit_shape[0] if isinstance(fit_shape, tuple) and fit_shape else None
        if not isinstance(rows, (int, np.integer)) or (n_sv and (support.min() < 0 or support.max() >= rows)):
            raise _fail(label, name, f"has support indices outside the {rows} training samples")
    elif not isinstance(vectors, np.ndarray) or vectors.shape != (n_sv, n):
        raise _fail(
            label,
            name,
            f"has support vectors of shape {getattr(vectors, 'shape', None)} for {n_sv} vectors of {n} features",
        )


def _enabled(flag) -> bool:
    """An SVM's probability flag as scikit-learn reads it ("deprecated" means off)."""
    if flag is None or isinstance(flag, str) and flag == "deprecated":
        return False
    try:
        return bool(flag)
    except (TypeError, ValueError):  # e.g. an array: treat as on, so the arrays must be complete
        return True


def _check_params(obj, label: str) -> None:
    """Parameters that make allow-listed estimators touch files or exhaust the machine."""
    a = _attrs(obj)
    kind = type(obj).__module__
    if kind.startswith("sklearn.feature_extraction") and a.get("input", "content") != "content":
        raise _fail(
            label, type(obj).__name__, f"has input={a.get('input')!r}: it would open the files named in the data"
        )
    centres = a.get("cluster_centers_")
    if (
        isinstance(centres, np.ndarray)
        and "n_features_in_" in a
        and kind.startswith("sklearn.")
        and (centres.ndim != 2 or centres.shape[1] != a["n_features_in_"])
    ):
        raise _fail(label, type(obj).__name__, f"has cluster centres of shape {centres.shape}")
    jobs = a.get("n_jobs")
    cores = os.cpu_count() or 1
    if (
        kind.startswith("sklearn.")
        and isinstance(jobs, (int, np.integer))
        and not isinstance(jobs, bool)
        and abs(int(jobs)) > cores
    ):
        obj.n_jobs = cores if jobs > 0 else -1  # same predictions; no thread storm
