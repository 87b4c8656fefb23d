"""Reading XGBoost, LightGBM and CatBoost models into one :class:`~.ensemble.Ensemble`.

Each reader reproduces its library's own prediction function from the model's own dump:

- **XGBoost** (``gbtree``, numeric splits; also XGBRF*): the JSON model
  (``Booster.save_raw("json")``). XGBoost rounds inputs to float32 and goes left when
  ``x < t``; the float32 values below ``t`` are those ``<= nextafter(t, -inf)``, so the
  walk's ``<=`` on float32-rounded inputs takes the same side. A missing value goes
  ``default_left``. The base score (``learner_model_param.base_score``, in the output space:
  the margin is its link; binary:logitraw's is a margin) is added to the sum of the leaves
  of the trees in the iteration window the model's predict uses (``best_iteration`` after
  early stopping); then the objective's inverse link. XGBoost sums in float32, the walk in
  float64: see :func:`xgboost_rounding` for the bound (``Ensemble.rounding``).
- **LightGBM** (numeric ``<=`` splits): the model's text (``model_to_string``, the
  iterations predict uses), doubles throughout. ``missing_type`` NaN: a missing value goes
  ``default_left``; None: it is read as 0.0; values within 1e-35 of 0 are read as 0.0. Then
  the objective's link (``sigmoid:`` scale included).
- **CatBoost** (symmetric trees, numeric features): the JSON model. A split goes right when
  ``x > border`` (float32 inputs and borders); NaN as ``nan_value_treatment`` says (Min, or
  no missing value in training: left; Max: right). Each oblivious tree of depth d becomes a
  binary tree of 2^d leaves; then ``scale_and_bias`` and the link of the loss.

What a reader cannot reproduce exactly raises :class:`~.ensemble.Unsupported` naming it.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable

import numpy as np

from .ensemble import Ensemble, Unsupported, join_trees

#: One float32 rounding step (unit roundoff of float32).
U32 = 2.0**-24
#: Deepest CatBoost tree expanded (2^12 leaves).
CATBOOST_DEPTH = 12

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
LGB_IDENTITY = {"regression", "regression_l1", "huber", "fair", "quantile", "mape"}
LGB_EXP = {"poisson", "gamma", "tweedie"}
#: LightGBM's kZeroThreshold (1e-35f): its predict reads values this close to 0 as 0.0.
LGB_ZERO = float(np.float32(1e-35))


# --- links ----------------------------------------------------------------------------------
def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _finisher(link: str, base: np.ndarray, classifier: bool, scale: float = 1.0) -> Callable:
    """The function from the sum over trees (rows x outputs) to what the model's predict
    (regressor) or predict_proba (classifier) returns: ``base`` added, then the inverse
    link ("identity", "exp", "sigmoid" with ``scale``, "softmax", "ova": a sigmoid per
    class)."""
    base = np.asarray(base, dtype=np.float64).reshape(1, -1)

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


# --- XGBoost --------------------------------------------------------------------------------
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


def _xgb_tree(tree: dict, column: int) -> dict:
    """One XGBoost JSON tree as node arrays: ``x < t`` as ``x <= nextafter(t, -inf)``."""
    params = tree.get("tree_param", {})
    if int(params.get("size_leaf_vector", "1") or 1) > 1:
        raise Unsupported("XGBoost multi-target trees (vector leaves) are not read")
    if any(int(s) != 0 for s in tree.get("split_type", [])):
        raise Unsupported("XGBoost categorical splits: the walk compares numbers only (x < threshold)")
    left = np.asarray(tree["left_children"], dtype=np.int64)
    cond = np.asarray(tree["split_conditions"], dtype=np.float32)
    leaf = left < 0
    below = np.nextafter(cond, np.float32(-np.inf)).astype(np.float64)
    return {
        "feature": np.where(leaf, -1, np.asarray(tree["split_indices"], dtype=np.int64)),
        "threshold": np.where(leaf, 0.0, below),
        "left": left,
        "right": np.asarray(tree["right_children"], dtype=np.int64),
        "missing_left": np.asarray(tree["default_left"], dtype=bool),
        "value": np.where(leaf, cond.astype(np.float64), 0.0)[:, None],
        "column": column,
    }


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
    k = max(int(param.get("num_class", "0") or 0), 1)
    if (k > 1) != (link == "softmax"):
        raise Unsupported(f"XGBoost objective {objective!r} with {k} classes is not read")
    span = _xgb_window(model, window)
    info = [int(c) for c in model["tree_info"]][span]
    trees = [_xgb_tree(t, c) for t, c in zip(model["trees"][span], info)]
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
        finish=_finisher(link, base, classifier),
        rounding=xgboost_rounding(base, trees, link, k),
    )


def _xgb_sklearn(model, name: str) -> Ensemble:
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
        finish=_finisher(link, np.zeros(k), classifier, scale),
        cat_low=-1.0,  # LightGBM casts to int: -0.5 is category 0
    )


def _lgb_sklearn(model, name: str) -> Ensemble:
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


def read_catboost(model, name: str, *, loss: str, classifier: bool, exponent: bool = False) -> Ensemble:
    """A CatBoost model of symmetric trees on numeric features (``save_model(format="json")``)."""
    doc = _catboost_json(model)
    info = doc.get("features_info", {})
    if any(info.get(key) for key in ("categorical_features", "text_features", "embedding_features")):
        raise Unsupported("CatBoost models with categorical, text or embedding features are not read")
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
    return join_trees(trees, name=name, n_outputs=dim, float32=True, finish=_finisher(link, bias, classifier))


def _cb_loss(model) -> str:
    params = model.get_all_params() if hasattr(model, "get_all_params") else {}
    return str(params.get("loss_function") or model.get_params().get("loss_function") or "").split(":")[0]


def _cb_sklearn(model, name: str) -> Ensemble:
    if model.get_cat_feature_indices() or getattr(model, "get_text_feature_indices", list)():
        raise Unsupported(f"{name} with categorical or text features: not read")
    classifier = name.endswith("Classifier")
    loss = _cb_loss(model)
    if not classifier and loss not in ("RMSE", "MAE", "Quantile", "MAPE", "Huber", "Lq", "LogCosh", "Expectile"):
        raise Unsupported(f"{name} with loss {loss!r}: its predict's output is not read")
    return read_catboost(model, name, loss=loss, classifier=classifier)


# --- dispatch -------------------------------------------------------------------------------
SKLEARN_API = {
    "XGBRegressor": _xgb_sklearn,
    "XGBClassifier": _xgb_sklearn,
    "XGBRFRegressor": _xgb_sklearn,  # num_parallel_tree trees per iteration, summed as well
    "XGBRFClassifier": _xgb_sklearn,
    "LGBMRegressor": _lgb_sklearn,
    "LGBMClassifier": _lgb_sklearn,
    "CatBoostRegressor": _cb_sklearn,
    "CatBoostClassifier": _cb_sklearn,
}


def read_booster(model, name: str, library: str) -> Ensemble:
    """A model of one of the boosting libraries (its scikit-learn wrapper or raw booster)."""
    reader = SKLEARN_API.get(name)
    if reader is not None:
        return reader(model, name)
    if library == "xgboost" and name == "Booster":
        return read_xgboost(model, name, classifier=False)
    if library == "lightgbm" and name == "Booster":
        return read_lightgbm(model, name, classifier=False)
    raise Unsupported(f"{name} ({library}) is not a model the tree engine reads")


def read_source(source: tuple, name: str) -> Ensemble:
    """A wrapped booster (the dashboard's loaded files): ``model.tree_source()`` gives
    ``(library, options)``; options hold the native ``model`` its predict calls, ``task``
    ("regression" or "classification"), ``objective``, XGBoost's iteration ``window``,
    whether CatBoost's output is ``exponent`` (exp of the raw sum) and whether columns are
    ``categorical`` (coded levels: refused)."""
    library, options = source
    native = options.get("model")
    classifier = options.get("task") == "classification"
    if native is None:
        raise Unsupported(f"{name}: its {library} model is not at hand for the tree engine")
    if options.get("categorical"):
        raise Unsupported(f"{name} has categorical columns: the walk compares numbers only")
    if library == "xgboost":
        first, stop = options.get("window", (0, 0))
        return read_xgboost(native, name, classifier=classifier, window=(int(first), int(stop)), wrapper=True)
    if library == "lightgbm":
        return read_lightgbm(native, name, classifier=classifier)
    if library == "catboost":
        loss = str(options.get("objective", ""))
        return read_catboost(native, name, loss=loss, classifier=classifier, exponent=bool(options.get("exponent")))
    raise Unsupported(f"{name}: a {library} model is not read by the tree engine")
