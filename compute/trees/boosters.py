"""Reading LightGBM and CatBoost models into one :class:`~.ensemble.Ensemble` (XGBoost:
:mod:`.xgboost_read`), and the inverse links the readers share (:func:`finisher`).

Each reader reproduces its library's own prediction function from the model's own dump:

- **LightGBM** (numeric ``<=`` splits): the model's text (``model_to_string``, the
  iterations predict uses), doubles throughout. ``missing_type`` NaN: a missing value goes
  ``default_left``; None: it is read as 0.0; values within 1e-35 of 0 are read as 0.0. Then
  the objective's link (``sigmoid:`` scale included). Categorical splits: the bitsets of
  ``cat_threshold`` (:func:`_lgb_categorical`).
- **CatBoost** (symmetric trees, numeric features): the JSON model. A split goes right when
  ``x > border`` (float32 inputs and borders); NaN as ``nan_value_treatment`` says (Min, or
  no missing value in training: left; Max: right). Each oblivious tree of depth d becomes a
  binary tree of 2^d leaves; then ``scale_and_bias`` and the link of the loss. Categorical
  features are not read (:func:`catboost_refusal` names them).

What a reader cannot reproduce exactly raises :class:`~.ensemble.Unsupported` naming it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from functools import partial

import numpy as np

from .ensemble import Ensemble, Unsupported, join_trees

#: One float32 rounding step (unit roundoff of float32).
U32 = 2.0**-24
#: Deepest CatBoost tree expanded (2^12 leaves).
CATBOOST_DEPTH = 12

LGB_IDENTITY = {"regression", "regression_l1", "huber", "fair", "quantile", "mape"}
LGB_EXP = {"poisson", "gamma", "tweedie"}
#: LightGBM's kZeroThreshold (1e-35f): its predict reads values this close to 0 as 0.0.
LGB_ZERO = float(np.float32(1e-35))


# --- links ----------------------------------------------------------------------------------
def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _binary(base: float, scale: float, total: np.ndarray) -> np.ndarray:
    """A binary classifier's probabilities (rows x 2) from its sums (rows x 1): as
    ``[1 - p, p]`` with ``p = sigmoid(scale * (base + total))``, the same operations in place,
    each class's column contiguous (the class shown is read without a gather)."""
    pair = np.empty((2, total.shape[0]))
    p = pair[1]
    np.add(total[:, 0], base, out=p)
    if scale != 1.0:
        p *= scale
    np.negative(p, out=p)
    np.exp(p, out=p)
    p += 1.0
    np.divide(1.0, p, out=p)
    np.subtract(1.0, p, out=pair[0])
    return pair.T


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def finisher(link: str, base: np.ndarray, classifier: bool, scale: float = 1.0) -> Callable:
    """The function from the sum over trees (rows x outputs) to what the model's predict
    (regressor) or predict_proba (classifier) returns: ``base`` added, then the inverse
    link ("identity", "exp", "sigmoid" with ``scale``, "softmax", "ova": a sigmoid per
    class)."""
    base = np.asarray(base, dtype=np.float64).reshape(1, -1)
    if link == "sigmoid" and classifier and base.size == 1:
        return partial(_binary, float(base[0, 0]), float(scale))

    def finish(total: np.ndarray) -> np.ndarray:
        raw = base + total
        if link == "softmax":
            return _softmax(raw)
        if link == "ova":
            return _sigmoid(scale * raw)
        one = raw[:, 0]
        out = one if link == "identity" else np.exp(one) if link == "exp" else _sigmoid(scale * one)
        return np.column_stack([1.0 - out, out]) if classifier else out

    return finish


# --- LightGBM -------------------------------------------------------------------------------
def _lgb_link(objective: str) -> tuple[str, float]:
    """The inverse link and sigmoid scale of a LightGBM objective string ("binary sigmoid:1")."""
    words = objective.split()
    head = words[0] if words else ""
    options = dict(w.split(":", 1) for w in words[1:] if ":" in w)
    if "sqrt" in words[1:]:
        raise Unsupported(f"LightGBM objective {objective!r} (reg_sqrt): not read")
    scale = float(options.get("sigmoid", 1.0))
    if head in LGB_IDENTITY:
        return "identity", 1.0
    if head in LGB_EXP:
        return "exp", 1.0
    if head == "binary":
        return "sigmoid", scale
    if head in ("cross_entropy", "xentropy"):
        return "sigmoid", 1.0
    if head in ("multiclass", "softmax"):
        return "softmax", 1.0
    if head in ("multiclassova", "multiclass_ova", "ova", "ovr"):
        return "ova", scale
    raise Unsupported(f"LightGBM objective {objective or 'custom'!r}: its output is not read by the tree engine")


def _lgb_text(booster) -> tuple[dict, list[dict]]:
    """The header fields and each tree's fields of the model's text (``model_to_string``, the
    iterations predict uses: ``best_iteration``); parsed directly, several times faster than
    ``dump_model`` and exact where that clamps thresholds to +-1e300 (an infinite one)."""
    text = booster.model_to_string().split("\nend of trees")[0]
    head, *blocks = text.split("\nTree=")
    header = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
    header["average_output"] = "average_output" in head.splitlines()
    trees = [dict(line.split("=", 1) for line in block.splitlines()[1:] if "=" in line) for block in blocks]
    return header, trees


def _lgb_threshold(threshold: np.ndarray) -> np.ndarray:
    """The thresholds the walk compares raw values with: LightGBM's predict reads every value
    with ``|x| <= LGB_ZERO`` as 0.0 (its rows are sparse), so a threshold inside that band
    becomes its edge on the side 0.0 falls (outside the band nothing changes)."""
    band = (threshold >= -LGB_ZERO) & (threshold < LGB_ZERO)
    edge = np.where(threshold >= 0.0, LGB_ZERO, np.nextafter(-LGB_ZERO, -np.inf))
    return np.where(band, edge, threshold)


def _lgb_tree(fields: dict, column: int) -> dict:
    """One tree of the model's text as node arrays: internal nodes first, then the leaves (a
    child ``c < 0`` is leaf ``~c``). ``decision_type`` bits: 1 categorical, 2 default left,
    (d >> 2) & 3 the missing type (0 None: NaN read as 0.0; 1 Zero; 2 NaN: default side)."""
    if int(fields.get("is_linear", "0") or 0):
        raise Unsupported("LightGBM linear trees (linear_tree=True): leaves are not constants")
    leaf_value = np.array(fields.get("leaf_value", "").split(), dtype=np.float64)
    n_inner = leaf_value.size - 1
    decision = np.array(fields.get("decision_type", "").split(), dtype=np.int64)[:n_inner]
    missing = (decision >> 2) & 3
    if np.any(missing == 1):
        raise Unsupported("LightGBM missing_type 'Zero' (zero as missing): not read")
    threshold = _lgb_threshold(np.array(fields.get("threshold", "").split(), dtype=np.float64)[:n_inner])

    def children(key: str) -> np.ndarray:
        c = np.array(fields.get(key, "").split(), dtype=np.int64)[:n_inner]
        return np.concatenate([np.where(c >= 0, c, n_inner + ~c), np.full(n_inner + 1, -1)])

    inner = np.array(fields.get("split_feature", "").split(), dtype=np.int64)[:n_inner]
    categorical = (decision & 1) != 0
    tree = {
        "feature": np.concatenate([inner, np.full(n_inner + 1, -1)]),
        "threshold": np.concatenate([threshold, np.zeros(n_inner + 1)]),
        "left": children("left_child"),
        "right": children("right_child"),
        # NaN: the default side (missing type NaN), else read as 0.0
        "missing_left": np.concatenate(
            [np.where(missing == 2, (decision & 2) != 0, threshold >= 0.0), [False] * (n_inner + 1)]
        ),
        "value": np.concatenate([np.zeros(n_inner), leaf_value])[:, None],
        "column": column,
    }
    if categorical.any():
        tree.update(_lgb_categorical(fields, categorical, np.asarray(tree["missing_left"])))
    return tree


def _lgb_categorical(fields: dict, categorical: np.ndarray, missing_left: np.ndarray) -> dict:
    """A tree's categorical splits (``decision_type`` bit 1) as :class:`Ensemble` fields: the
    node's ``threshold`` indexes ``cat_boundaries``, whose range of ``cat_threshold`` is the
    node's bitset (uint32 words; category c at bit c % 32 of word c // 32). LightGBM casts a
    value to int: a negative one (-1 and below) goes right, as a category past the bitset
    and a missing value (under either missing type: checked against its predict)."""
    n_inner = categorical.size
    bounds = np.array(fields["cat_boundaries"].split(), dtype=np.int64)
    words = np.array(fields["cat_threshold"].split(), dtype=np.uint64).astype(np.uint32)
    at = np.flatnonzero(categorical)
    index = np.array(fields["threshold"].split(), dtype=np.float64)[:n_inner][at].astype(np.int64)
    width = int(np.diff(bounds).max(initial=1))
    sets = np.zeros((at.size, width + width % 2), dtype=np.uint32)
    for row, i in enumerate(index):
        sets[row, : bounds[i + 1] - bounds[i]] = words[bounds[i] : bounds[i + 1]]
    bitsets = sets.view(np.int64)
    cat_index = np.full(2 * n_inner + 1, -1, dtype=np.int64)
    cat_index[at] = np.arange(at.size)
    nan_left = missing_left.copy()
    nan_left[at] = False  # a missing value goes right, whatever the missing type
    invalid_left = np.zeros(2 * n_inner + 1, dtype=bool)
    return {"cat_index": cat_index, "bitsets": bitsets, "invalid_left": invalid_left, "missing_left": nan_left}


def read_lightgbm(booster, name: str, *, classifier: bool) -> Ensemble:
    """A ``lightgbm.Booster`` over the iterations its predict uses (``best_iteration``)."""
    header, fields = _lgb_text(booster)
    if header["average_output"]:
        raise Unsupported("LightGBM random forest mode (average_output): not read")
    link, scale = _lgb_link(header.get("objective", ""))
    k = int(header.get("num_tree_per_iteration", "1"))
    if (k > 1) != (link in ("softmax", "ova")):
        raise Unsupported(f"LightGBM objective {header.get('objective')!r} with {k} trees per iteration")
    trees = [_lgb_tree(f, i % k) for i, f in enumerate(fields)]
    if not trees:
        raise Unsupported("a LightGBM model without trees")
    return join_trees(
        trees,
        name=name,
        n_outputs=k,
        float32=False,
        finish=finisher(link, np.zeros(k), classifier, scale),
        cat_low=-1.0,  # LightGBM casts to int: -0.5 is category 0
    )


def lgb_sklearn(model, name: str) -> Ensemble:
    """An ``LGBMRegressor`` / ``LGBMClassifier`` as its predict computes it."""
    if not isinstance(getattr(model, "objective", None) or "", str):
        raise Unsupported(f"{name} with a custom objective (a callable): its output is not read")
    classifier = name.endswith("Classifier")
    return read_lightgbm(model.booster_, name, classifier=classifier)


# --- CatBoost -------------------------------------------------------------------------------
def _catboost_json(model) -> dict:
    with tempfile.TemporaryDirectory(prefix="trees-catboost-") as folder:
        path = os.path.join(folder, "model.json")
        model.save_model(path, format="json")
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)


def _cb_nan_left(features: list[dict]) -> dict[int, bool]:
    """Per float feature: whether a missing value goes left. CatBoost goes right when
    ``x > border``: "AsFalse" (nan_mode Min) and "AsIs" (no missing value in training: the
    comparison with NaN is false) send it left, "AsTrue" (Max) right."""
    out = {}
    for f in features:
        treatment = f.get("nan_value_treatment", "AsIs")
        if treatment not in ("AsFalse", "AsIs", "AsTrue"):
            raise Unsupported(f"CatBoost nan_value_treatment {treatment!r} on feature {f['feature_index']}: not read")
        out[int(f["feature_index"])] = treatment != "AsTrue"
    return out


def _cb_tree(tree: dict, nan_left: dict[int, bool], dim: int) -> list[dict]:
    """One oblivious tree (split i sets bit i of the leaf index when ``x > border``) as a
    binary tree per output (a full tree of depth d: node n's children 2n+1, 2n+2)."""
    splits = tree.get("splits", [])
    depth = len(splits)
    if depth > CATBOOST_DEPTH:
        raise Unsupported(f"a CatBoost tree of depth {depth} (more than {CATBOOST_DEPTH} is not expanded)")
    if any(s.get("split_type") != "FloatFeature" for s in splits):
        raise Unsupported("CatBoost splits on categorical, text or embedding features: not read")
    n_inner = 2**depth - 1
    n = 2 * n_inner + 1
    leaf_values = np.asarray(tree["leaf_values"], dtype=np.float64).reshape(2**depth, dim)
    feature = np.full(n, -1, dtype=np.int64)
    threshold = np.zeros(n)
    missing_left = np.zeros(n, dtype=bool)
    node = np.arange(n, dtype=np.int64)
    for level in range(depth):  # level l tests the split applied l-th from the root: the last split
        split = splits[depth - 1 - level]
        at = np.arange(2**level - 1, 2 ** (level + 1) - 1)
        feature[at] = int(split["float_feature_index"])
        threshold[at] = float(np.float32(split["border"]))
        missing_left[at] = nan_left.get(int(split["float_feature_index"]), True)
    leaf = feature < 0
    left = np.where(leaf, -1, 2 * node + 1)
    right = np.where(leaf, -1, 2 * node + 2)
    # the leaf reached by the path bits (root first = the highest bit) is CatBoost's index
    index = np.arange(2**depth)
    value = np.zeros((n, dim))
    value[n_inner + index] = leaf_values[index]
    return [
        {
            "feature": feature,
            "threshold": threshold,
            "left": left,
            "right": right,
            "missing_left": missing_left,
            "value": value[:, c : c + 1],
            "column": c,
        }
        for c in range(dim)
    ]


#: What CatBoost computes from each kind of non-numeric feature (the walk reads none of it).
CATBOOST_DERIVED = {
    "categorical": "one-hot splits and CTR statistics of category combinations",
    "text": "token statistics of the text (dictionaries, naive Bayes, BM25 estimators)",
    "embedding": "distances and LDA projections of the vectors",
}


def catboost_refusal(named: dict[str, list]) -> str | None:
    """Why the walk does not read a CatBoost model with the non-numeric features ``named``
    (kind -> the features' names; None: it has none), naming them."""
    parts = [
        f"CatBoost's {kind} features ({', '.join(map(str, names[:8]))}{', ...' if len(names) > 8 else ''}) "
        f"are computed from {CATBOOST_DERIVED[kind]}"
        for kind, names in named.items()
        if names
    ]
    return "; ".join(parts) + ", which the tree walk does not read" if parts else None


def catboost_named(model) -> dict[str, list]:
    """A fitted CatBoost scikit-learn model's categorical and text features by name."""
    names = list(getattr(model, "feature_names_", None) or [])

    def named(method: str) -> list:
        found = getattr(model, method, None)
        indices = list(found()) if callable(found) else []
        return [names[i] if i < len(names) else i for i in indices]

    return {"categorical": named("get_cat_feature_indices"), "text": named("get_text_feature_indices")}


def read_catboost(model, name: str, *, loss: str, classifier: bool, exponent: bool = False) -> Ensemble:
    """A CatBoost model of symmetric trees on numeric features (``save_model(format="json")``)."""
    doc = _catboost_json(model)
    info = doc.get("features_info", {})
    named = {
        kind: [f.get("feature_id") or f.get("flat_feature_index", "?") for f in info.get(f"{kind}_features") or []]
        for kind in CATBOOST_DERIVED
    }
    refusal = catboost_refusal(named)
    if refusal:
        raise Unsupported(refusal)
    if "oblivious_trees" not in doc:
        raise Unsupported("CatBoost non-symmetric trees (grow_policy Depthwise or Lossguide) are not read")
    nan_left = _cb_nan_left(info.get("float_features", []))
    scale, bias = doc.get("scale_and_bias", [1.0, [0.0]])
    bias = np.atleast_1d(np.asarray(bias, dtype=np.float64))
    dim = max(bias.size, 1)
    trees = [part for tree in doc["oblivious_trees"] for part in _cb_tree(tree, nan_left, dim)]
    if not trees:
        raise Unsupported("a CatBoost model without trees")
    if float(scale) != 1.0:
        trees = [{**t, "value": t["value"] * float(scale)} for t in trees]
    if loss in ("Logloss", "CrossEntropy") and classifier:
        link = "sigmoid"
    elif loss == "MultiClass" and classifier:
        link = "softmax"
    elif loss == "MultiClassOneVsAll" and classifier:
        link = "ova"
    elif not classifier:
        link = "exp" if exponent else "identity"
    else:
        raise Unsupported(f"CatBoost loss {loss!r}: its output is not read by the tree engine")
    if (dim > 1) != (link in ("softmax", "ova")):
        raise Unsupported(f"CatBoost loss {loss!r} with {dim} outputs is not read")
    return join_trees(trees, name=name, n_outputs=dim, float32=True, finish=finisher(link, bias, classifier))


def _cb_loss(model) -> str:
    params = model.get_all_params() if hasattr(model, "get_all_params") else {}
    return str(params.get("loss_function") or model.get_params().get("loss_function") or "").split(":")[0]


def cb_sklearn(model, name: str) -> Ensemble:
    """A ``CatBoostRegressor`` / ``CatBoostClassifier`` on numeric features."""
    refusal = catboost_refusal(catboost_named(model))
    if refusal:
        raise Unsupported(refusal)
    classifier = name.endswith("Classifier")
    loss = _cb_loss(model)
    if not classifier and loss not in ("RMSE", "MAE", "Quantile", "MAPE", "Huber", "Lq", "LogCosh", "Expectile"):
        raise Unsupported(f"{name} with loss {loss!r}: its predict's output is not read")
    return read_catboost(model, name, loss=loss, classifier=classifier)
