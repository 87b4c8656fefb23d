"""Reading an XGBoost model (``gbtree``; also XGBRF*) into one :class:`~.ensemble.Ensemble`.

The reader reproduces XGBoost's own prediction function from its JSON model
(``Booster.save_raw("json")``):

- **numeric splits**: XGBoost rounds inputs to float32 and goes left when ``x < t``; the
  float32 values below ``t`` are those ``<= nextafter(t, -inf)``, so the walk's ``<=`` on
  float32-rounded inputs takes the same side. A missing value goes ``default_left``.
- **categorical splits** (``split_type`` 1, ``enable_categorical=True``; one-hot splits
  too, a set of one category): the node's categories (``categories`` from
  ``categories_segments[i]``, ``categories_sizes[i]`` of them, node ``categories_nodes[i]``)
  go right, every other value left (XGBoost's ``common::Decision``): a category not in the
  set, a value past the largest category, a negative value (-0.5 included) or one beyond
  2^24; a non-integer value is truncated to its category first (2.7 is 2), after the
  float32 rounding. A missing value goes ``default_left``. Checked against XGBoost 3.2's
  predict (tests/test_tree_xgboost_categorical.py). The walk's sets hold the categories that
  go left (:mod:`.categories`): the complement of XGBoost's, with ``invalid_left`` set.
- **pandas category columns**: XGBoost >= 3.1 stores the training levels (the model's
  ``cats``) and codes a frame's level by its position among them, whatever the order of the
  frame's own categories; it refuses a frame whose categories include one it never saw.
  :func:`xgboost_codes` is that coding, the step the walk reads such a frame through.

The base score (``learner_model_param.base_score``, in the output space: the margin is its
link; binary:logitraw's is a margin) is added to the sum of the leaves of the trees in the
iteration window the model's predict uses (``best_iteration`` after early stopping); then the
objective's inverse link. XGBoost sums in float32, the walk in float64: see
:func:`xgboost_rounding` for the bound (``Ensemble.rounding``).
"""

from __future__ import annotations

import json
import math
import weakref

import numpy as np
import pandas as pd

from .boosters import U32, finisher
from .ensemble import Ensemble, Unsupported, join_trees

XGB_IDENTITY = {
    "reg:squarederror",
    "reg:linear",
    "reg:squaredlogerror",
    "reg:pseudohubererror",
    "reg:absoluteerror",
    "reg:quantileerror",
}
XGB_EXP = {"reg:gamma", "reg:tweedie", "count:poisson"}
XGB_SIGMOID = {"reg:logistic", "binary:logistic"}
#: Largest category a categorical split may hold (the walk keeps a bit per category per split).
XGB_MAX_CATEGORY = 2**14


def _xgb_floats(text) -> np.ndarray:
    """``base_score`` as XGBoost writes it ("5E-1", "[1E0,2E0]") in float32."""
    parts = str(text).strip().strip("[]").split(",")
    return np.array([float(p) for p in parts if p.strip()], dtype=np.float32)


def _xgb_link(objective: str, classifier: bool, wrapper: bool) -> str:
    """The inverse link XGBoost's predict (or predict_proba) applies after the sum."""
    if objective in XGB_IDENTITY:
        return "identity"
    if objective in XGB_EXP:
        return "exp"
    if objective in XGB_SIGMOID:
        return "sigmoid"
    if objective == "multi:softprob":
        return "softmax"
    # the dashboard's loader turns these margins into probabilities (see BoosterModel)
    if wrapper and objective == "binary:logitraw":
        return "sigmoid"
    if wrapper and objective == "multi:softmax":
        return "softmax"
    if objective == "binary:logitraw" and not classifier:
        return "identity"
    raise Unsupported(f"XGBoost objective {objective or 'custom'!r}: its output is not read by the tree engine")


def _xgb_base_margin(base: np.ndarray, objective: str, k: int) -> np.ndarray:
    """The base score as a margin: XGBoost >= 2 stores it in the output space."""
    base = np.asarray(base, dtype=np.float32)
    if base.size == 1 and k > 1:
        base = np.full(k, base[0], dtype=np.float32)
    if objective in XGB_SIGMOID:  # binary:logitraw keeps its base score as a margin
        with np.errstate(divide="ignore"):
            return -np.log(np.float32(1.0) / base - np.float32(1.0)).astype(np.float64)
    if objective in XGB_EXP:
        return np.log(base).astype(np.float64)
    return base.astype(np.float64)


def _xgb_sets(tree: dict) -> list[tuple[int, np.ndarray]]:
    """Each categorical node of a JSON tree with the categories it sends right."""
    nodes = [int(i) for i in tree.get("categories_nodes", [])]
    segments = [int(i) for i in tree.get("categories_segments", [])]
    sizes = [int(i) for i in tree.get("categories_sizes", [])]
    cats = np.asarray(tree.get("categories", []), dtype=np.int64)
    split_type = np.asarray(tree.get("split_type", []), dtype=np.int64)
    if sorted(nodes) != np.flatnonzero(split_type == 1).tolist() or not len(nodes) == len(segments) == len(sizes):
        raise Unsupported("an XGBoost tree whose categorical nodes do not match its category sets")
    if np.any(~np.isin(split_type, (0, 1))):
        raise Unsupported(f"XGBoost split types {sorted(set(split_type.tolist()))}: only 0 and 1 are read")
    found = [(node, cats[start : start + size]) for node, start, size in zip(nodes, segments, sizes)]
    if any(s.size and (s.min() < 0 or s.max() >= XGB_MAX_CATEGORY) for _, s in found):
        raise Unsupported(f"an XGBoost categorical split on a category beyond {XGB_MAX_CATEGORY:,} (not read)")
    return found


def _xgb_categorical(tree: dict, n: int, words: int) -> dict:
    """A tree's categorical splits as :class:`Ensemble` fields: per node, the set of the
    categories going left (every category below ``words x 64`` but the node's own) and
    ``invalid_left`` (negative values and those past the sets go left, as XGBoost's)."""
    found = _xgb_sets(tree)
    sets = np.full((len(found), words), np.uint64(2**64 - 1), dtype=np.uint64)
    for row, (_, right) in enumerate(found):
        for c in right.tolist():
            sets[row, c // 64] &= ~np.uint64(1 << (c % 64))
    cat_index = np.full(n, -1, dtype=np.int64)
    cat_index[[node for node, _ in found]] = np.arange(len(found))
    return {"cat_index": cat_index, "bitsets": sets.view(np.int64), "invalid_left": np.ones(n, dtype=bool)}


def _xgb_tree(tree: dict, column: int, words: int = 1) -> dict:
    """One XGBoost JSON tree as node arrays: ``x < t`` as ``x <= nextafter(t, -inf)``; the
    categorical splits' sets ``words`` int64 words wide (the same for every tree: the walk
    reads a category past a tree's words as outside every set)."""
    params = tree.get("tree_param", {})
    if int(params.get("size_leaf_vector", "1") or 1) > 1:
        raise Unsupported("XGBoost multi-target trees (vector leaves) are not read")
    left = np.asarray(tree["left_children"], dtype=np.int64)
    cond = np.asarray(tree["split_conditions"], dtype=np.float32)
    leaf = left < 0
    categorical = np.zeros(left.size, dtype=bool)
    categorical[: len(tree.get("split_type", []))] = np.asarray(tree.get("split_type", []), dtype=np.int64) != 0
    below = np.nextafter(cond, np.float32(-np.inf)).astype(np.float64)
    out = {
        "feature": np.where(leaf, -1, np.asarray(tree["split_indices"], dtype=np.int64)),
        "threshold": np.where(leaf | categorical, 0.0, below),
        "left": left,
        "right": np.asarray(tree["right_children"], dtype=np.int64),
        "missing_left": np.asarray(tree["default_left"], dtype=bool),
        "value": np.where(leaf, cond.astype(np.float64), 0.0)[:, None],
        "column": column,
    }
    if categorical.any():
        out.update(_xgb_categorical(tree, left.size, words))
    return out


def _xgb_words(trees: list[dict]) -> int:
    """The int64 words of the widest categorical split's set (the largest category + 1)."""
    largest = max((int(max(t.get("categories") or [0])) for t in trees), default=0)
    return largest // 64 + 1


def _xgb_window(model: dict, window: tuple[int, int]) -> slice:
    """The trees of the iterations ``window`` (``(0, 0)``: all), as XGBoost's predict."""
    first, stop = (int(w) for w in window)
    n_trees = len(model["trees"])
    if stop <= 0:
        return slice(0, n_trees)
    indptr = model.get("iteration_indptr")
    if not indptr:
        raise Unsupported("an XGBoost model without iteration_indptr (written by XGBoost < 2): not read")
    stop = min(stop, len(indptr) - 1)
    return slice(int(indptr[first]), int(indptr[stop]))


def xgboost_rounding(base: np.ndarray, trees: list[dict], link: str, k: int) -> float:
    """Bound on |XGBoost's output - the walk's| for one output value (absolute).

    XGBoost adds the T leaf values of an output's trees to its base margin b one by one in
    float32 (unit roundoff u = 2^-24); any order of n float additions errs by at most
    gamma_n x the sum of the magnitudes (Higham, Accuracy and Stability, Eq. 4.4), gamma_n =
    nu/(1-nu). With the float32 link of the base score (a few ulps of |b|, and a few u where
    the logit cancels near b = 0) and the walk's own float64 sum, the margin is off by at most
    ``e = (T + 4) u S + 4 u``, S = |b| + sum over trees of max |leaf value|. The link then
    scales it: identity e (+ u S for the float32 output); sigmoid (slope <= 1/4) e/4;
    softmax (|dp_i| <= 2 p_i (1 - p_i) max|dz| <= max|dz|/2) e/2; exp e^(M + e) e, M the
    largest margin (b + the sum of the largest leaf values). Plus the float32 evaluation of
    the link and of 1 - p: (k + 8) u for probabilities, 4 u e^(M + e) for exp."""
    worst = 0.0
    for c in range(k):
        mine = [t for t in trees if t["column"] == c]
        size = abs(float(base[c])) + sum(float(np.max(np.abs(t["value"]), initial=0.0)) for t in mine)
        margin = (len(mine) + 4) * U32 * size + 4 * U32
        if link == "identity":
            out = margin + U32 * size
        elif link == "exp":  # |e^a - e^b| <= e^max(a, b) |a - b|, a and b below the largest margin + e
            highest = float(base[c]) + sum(float(np.max(t["value"], initial=0.0)) for t in mine)
            out = math.exp(min(highest + margin, 700.0)) * (margin + 4 * U32)
        else:
            out = margin / (4.0 if link == "sigmoid" else 2.0) + (k + 8) * U32
        worst = max(worst, out)
    return worst


def read_xgboost(
    booster,
    name: str,
    *,
    classifier: bool,
    window: tuple[int, int] = (0, 0),
    wrapper: bool = False,
) -> Ensemble:
    """An ``xgboost.Booster`` as its predict computes it over the iterations ``window``;
    ``wrapper``: the dashboard's loader, which turns logitraw / softmax margins into
    probabilities."""
    doc = json.loads(bytes(booster.save_raw("json")))
    learner = doc["learner"]
    booster_kind = learner["gradient_booster"].get("name", "")
    if booster_kind != "gbtree":
        raise Unsupported(f"XGBoost booster {booster_kind!r}: only gbtree is read (dart, gblinear are not)")
    param = learner["learner_model_param"]
    if int(param.get("num_target", "1") or 1) != 1:
        raise Unsupported("XGBoost multi-target models are not read")
    objective = learner.get("objective", {}).get("name", "")
    link = _xgb_link(objective, classifier, wrapper)
    model = learner["gradient_booster"]["model"]
    _levels_of(booster, learner)
    k = max(int(param.get("num_class", "0") or 0), 1)
    if (k > 1) != (link == "softmax"):
        raise Unsupported(f"XGBoost objective {objective!r} with {k} classes is not read")
    span = _xgb_window(model, window)
    info = [int(c) for c in model["tree_info"]][span]
    words = _xgb_words(model["trees"][span])
    trees = [_xgb_tree(t, c, words) for t, c in zip(model["trees"][span], info)]
    if not trees:
        raise Unsupported("an XGBoost model without trees")
    base = _xgb_base_margin(_xgb_floats(param.get("base_score", "0")), objective, k)
    if not np.all(np.isfinite(base)):
        raise Unsupported("an XGBoost base score outside its link's range")
    return join_trees(
        trees,
        name=name,
        n_outputs=k,
        float32=True,
        finish=finisher(link, base, classifier),
        rounding=xgboost_rounding(base, trees, link, k),
    )


def xgb_sklearn(model, name: str) -> Ensemble:
    """An ``XGBRegressor`` / ``XGBClassifier`` (and XGBRF*) as its predict computes it."""
    if callable(getattr(model, "objective", None)):
        raise Unsupported(f"{name} with a custom objective (a callable): its output is not read")
    missing = getattr(model, "missing", np.nan)
    if missing is not None and not (isinstance(missing, float) and math.isnan(missing)):
        raise Unsupported(f"{name} with missing={missing!r}: only NaN as the missing value is read")
    if getattr(model, "booster", None) not in (None, "gbtree"):
        raise Unsupported(f"{name} with booster={model.booster!r}: only gbtree is read (dart, gblinear are not)")
    try:
        window = (0, int(model.best_iteration) + 1)  # what XGBModel.predict uses after early stopping
    except AttributeError:
        window = (0, 0)
    classifier = name.endswith("Classifier")
    return read_xgboost(model.get_booster(), name, classifier=classifier, window=window)


# --- pandas category columns ----------------------------------------------------------------
#: Per live booster (by id): its feature names and the training levels of its categorical
#: features (``cats``), or why they are not read (text), read with its JSON.
_LEVELS: dict[int, tuple[list[str], dict[str, list]] | str] = {}


def _stored_levels(learner: dict) -> tuple[list[str], dict[str, list]] | str:
    """The feature names and, per categorical feature, the training levels XGBoost >= 3.1
    stores (``cats.enc``: text as UTF-8 bytes cut at ``offsets``, else the ``values``), or
    why they cannot be read."""
    names = [str(n) for n in learner.get("feature_names") or []]
    types = [str(t) for t in learner.get("feature_types") or []]
    cats = learner["gradient_booster"]["model"].get("cats") or {}
    enc = cats.get("enc") or []
    if not names or len(enc) != len(names):
        return "an XGBoost model without stored training levels (XGBoost >= 3.1) fed category columns"
    levels = {}
    for name, kind, item in zip(names, types, enc):
        if kind != "c":
            continue
        if "offsets" not in item:
            levels[name] = list(item.get("values") or [])
            continue
        offsets, blob = item["offsets"], np.asarray(item.get("values") or [], dtype=np.int64)
        if blob.size and (blob.min() < 0 or blob.max() > 127):  # XGBoost 3.2 cuts them at character offsets
            return f"the levels of {name!r} are non-ASCII text, which XGBoost's stored levels do not hold exactly"
        text = blob.astype(np.uint8).tobytes().decode("ascii")
        levels[name] = [text[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    return names, levels


def _levels_of(booster, learner: dict | None = None) -> tuple[list[str], dict[str, list]] | str:
    """:func:`_stored_levels` of ``booster`` (its JSON's ``learner``, read when not given),
    kept while it lives."""
    key = id(booster)
    if key in _LEVELS:
        return _LEVELS[key]
    found = _stored_levels(learner if learner is not None else json.loads(bytes(booster.save_raw("json")))["learner"])
    try:
        weakref.finalize(booster, _LEVELS.pop, key, None)
    except TypeError:  # an object without weak references: not kept
        return found
    _LEVELS[key] = found
    return found


class XGBoostCodes:
    """A frame's columns as an XGBoost model (fitted on pandas category columns) reads them:
    a category column's level as its position among the training ``levels``, a missing one
    as NaN; numbers (and booleans) as floats. A column step of :class:`.space.Space`."""

    def __init__(self, names: list[str], levels: dict[str, list]) -> None:
        self.feature_names_in_ = np.asarray(names, dtype=object)
        self.levels = {name: pd.Index(found) for name, found in levels.items()}

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        out = np.empty((len(frame), len(self.feature_names_in_)), dtype=np.float64)
        for j, name in enumerate(self.feature_names_in_):
            column = frame.iloc[:, j]  # the frame's columns are the model's, in order
            if name not in self.levels:
                out[:, j] = column.to_numpy(dtype=np.float64, na_value=np.nan)
                continue
            codes = self.levels[name].get_indexer(column.astype(object)).astype(np.float64)
            missing = column.isna().to_numpy()
            if np.any((codes < 0) & ~missing):
                raise Unsupported(f"a level of {name!r} outside its training levels, which XGBoost refuses")
            out[:, j] = np.where(missing, np.nan, codes)
        return out


def xgboost_codes(model, frame: pd.DataFrame) -> XGBoostCodes:
    """The step giving the walk ``frame`` as the XGBoost ``model`` reads it (its columns in the
    model's order), or :class:`Unsupported` naming why not: a column neither numbers nor a
    pandas category, a category column the model does not read as one, a model without
    stored training levels, or a frame with a level outside them (XGBoost refuses it)."""
    if type(model).__module__.split(".")[0] != "xgboost" or not hasattr(model, "get_booster"):
        raise Unsupported("the data has non-numeric columns: the engine walks numeric inputs only")
    stored = _levels_of(model.get_booster())
    if isinstance(stored, str):
        raise Unsupported(stored)
    names, levels = stored
    for name in frame.columns:
        dtype = frame[name].dtype
        if isinstance(dtype, pd.CategoricalDtype):
            if str(name) not in levels:
                raise Unsupported(f"a category column {name!r} the XGBoost model reads as numbers")
            known = set(levels[str(name)])
            unseen = [c for c in dtype.categories if c not in known]
            if unseen:
                raise Unsupported(f"{name!r} has levels outside the training ones ({unseen[:3]}): XGBoost refuses them")
        elif not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)):
            raise Unsupported(f"the column {name!r} is neither numbers nor a pandas category: the walk reads neither")
    if [str(c) for c in frame.columns] != names:
        raise Unsupported("the data's columns are not the XGBoost model's features in order")
    return XGBoostCodes(names, levels)
