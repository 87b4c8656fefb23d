"""Gradient-boosting model files read as data and checked before a native parser sees them.

XGBoost (``.json``, ``.ubj``), LightGBM (text ``.txt``) and CatBoost (``.cbm``, ``.json``) load
their files with C++ parsers. A crafted file (a split on feature 10^9, a child index outside
its tree, 10^7 declared trees with one present, a tree size that points past the end) could
make them read out of bounds, allocate without bound or never finish. So each file is first
parsed here in plain Python (``json``, a bounded UBJSON reader, LightGBM's text layout) and
its structure checked: declared counts against what is present, node and child indices within
their tree and every non-root node reached exactly once from the root (no cycle), feature
indices within the declared width, finite thresholds and leaf values. Only a file that passes
goes to the library's own loader, and that still runs in the isolated, limited process
(:mod:`dashboard.isolation`). A CatBoost ``.cbm`` (a FlatBuffers blob) gets its magic and size
checked here; once loaded, the model is exported to CatBoost's JSON inside the same isolated
process and that is checked the same way before any prediction.

Each check raises :class:`ModelFileError` with a message naming the file and what is wrong.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass, field

import numpy as np

from ..model_trust import ModelFileError
from .tree_checks import MAX_CATEGORY, _finite, _ints, _numbers_or_nan, check_binary_tree
from .ubjson import _refuse


# --- XGBoost --------------------------------------------------------------------------------
@dataclass
class XGBoostFile:
    """What an XGBoost model file says about itself (read without XGBoost)."""

    feature_names: list[str]
    feature_types: list[str]
    categories: dict[int, list] = field(default_factory=dict)  # feature position -> training levels
    objective: str = ""
    num_class: int = 0
    num_target: int = 1
    booster: str = "gbtree"
    best_iteration: int | None = None
    sklearn: dict = field(default_factory=dict)  # the scikit-learn wrapper's attributes
    version: str = ""


def _xgb_categories(cats, n_features: int, label: str) -> dict[int, list]:
    """The levels stored per categorical feature (XGBoost >= 3.1), in training order."""
    if not isinstance(cats, dict):
        return {}
    enc = cats.get("enc")
    if not isinstance(enc, list) or len(enc) not in (0, n_features):
        raise _refuse(label, f"the stored categories cover {len(enc) if isinstance(enc, list) else '?'} features")
    found: dict[int, list] = {}
    for j, item in enumerate(enc):
        if not isinstance(item, dict):
            raise _refuse(label, "a stored category list is not an object")
        values = item.get("values")
        values = [] if values is None else values
        if "offsets" in item:  # strings: UTF-8 bytes cut at the offsets
            offsets = _ints(item["offsets"], label, "category offsets")
            raw = _ints(values, label, "category bytes")
            if offsets.size == 0:
                continue
            if offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != raw.size:
                raise _refuse(label, "category offsets do not match the stored bytes")
            if raw.size and (raw.min() < 0 or raw.max() > 255):
                raise _refuse(label, "category bytes are not bytes")
            blob = raw.astype(np.uint8).tobytes()
            try:
                found[j] = [blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:])]
            except UnicodeDecodeError as exc:
                raise _refuse(label, "a category is not UTF-8") from exc
        elif np.asarray(values).size:
            found[j] = _finite(values, label, "numeric categories").tolist()
    return found


def check_xgboost(doc, label: str) -> XGBoostFile:
    """Check an XGBoost model document (``Booster.save_model``, JSON or UBJSON) and return what
    it says; raise :class:`ModelFileError` for anything a native parser should not see."""
    learner = doc.get("learner") if isinstance(doc, dict) else None
    if not isinstance(learner, dict):
        raise _refuse(label, "no 'learner' object (is it an XGBoost model saved with save_model?)")
    param = learner.get("learner_model_param") or {}
    try:
        n_features = int(param.get("num_feature", -1))
        num_class = int(param.get("num_class", 0))
        num_target = int(param.get("num_target", 1))
    except (TypeError, ValueError) as exc:
        raise _refuse(label, "learner_model_param holds no counts") from exc
    if not 0 < n_features <= 1_000_000 or not 0 <= num_class <= 100_000 or num_target < 1:
        raise _refuse(label, f"{n_features:,} features, {num_class:,} classes, {num_target} targets declared")
    names = [str(n) for n in learner.get("feature_names") or []]
    types = [str(t) for t in learner.get("feature_types") or []]
    if names and len(names) != n_features or types and len(types) != n_features:
        raise _refuse(label, f"{len(names)} feature names and {len(types)} types for {n_features} features")
    objective = learner.get("objective") or {}
    gb = learner.get("gradient_booster") or {}
    kind = str(gb.get("name", ""))
    info = XGBoostFile(
        feature_names=names,
        feature_types=types or ["float"] * n_features,
        objective=str(objective.get("name", "")) if isinstance(objective, dict) else "",
        num_class=num_class,
        num_target=num_target,
        booster=kind,
    )
    _xgb_attributes(info, learner.get("attributes") or {}, label)
    _xgb_version(info, doc.get("version"), label)
    width = max(num_class, 1) * num_target
    if kind == "gblinear":
        weights = _finite((gb.get("model") or {}).get("weights"), label, "linear weights")
        if weights.size != (n_features + 1) * width:
            raise _refuse(label, f"{weights.size:,} linear weights for {n_features} features and {width} outputs")
        return info
    model = gb.get("gbtree") if kind == "dart" else gb
    model = (model or {}).get("model") if isinstance(model, dict) else None
    if kind not in ("gbtree", "dart") or not isinstance(model, dict):
        raise _refuse(label, f"an unknown booster {kind!r}")
    trees = model.get("trees")
    if not isinstance(trees, list):
        raise _refuse(label, "no list of trees")
    try:
        declared = int((model.get("gbtree_model_param") or {}).get("num_trees", -1))
    except (TypeError, ValueError) as exc:
        raise _refuse(label, "num_trees is not a number") from exc
    tree_info = _ints(model.get("tree_info"), label, "tree_info")
    if declared != len(trees) or tree_info.size != len(trees):
        raise _refuse(label, f"{declared:,} trees declared, {len(trees):,} present, {tree_info.size:,} in tree_info")
    if tree_info.size and (tree_info.min() < 0 or tree_info.max() >= width):
        raise _refuse(label, f"a tree feeds output {int(tree_info.max())} of {width}")
    indptr = _ints(model.get("iteration_indptr"), label, "iteration_indptr")
    if indptr.size and (indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != len(trees)):
        raise _refuse(label, "iteration_indptr does not cover the trees")
    if kind == "dart":
        drop = _finite((gb.get("weight_drop")), label, "dart weights")
        if drop.size != len(trees):
            raise _refuse(label, f"{drop.size:,} dart weights for {len(trees):,} trees")
    info.categories = _xgb_categories(model.get("cats"), n_features, label)
    for t, tree in enumerate(trees):
        _check_xgb_tree(tree, t, n_features, info, label)
    return info


def _xgb_attributes(info: XGBoostFile, attrs, label: str) -> None:
    """The learner's attributes: the best iteration and the scikit-learn wrapper's settings."""
    if not isinstance(attrs, dict):
        return
    if "best_iteration" in attrs:
        try:
            info.best_iteration = int(attrs["best_iteration"])
        except (TypeError, ValueError) as exc:
            raise _refuse(label, "best_iteration is not a number") from exc
    try:
        sk = json.loads(attrs.get("scikit_learn") or "{}")
        info.sklearn = sk if isinstance(sk, dict) else {}
    except ValueError:
        info.sklearn = {}


def _xgb_version(info: XGBoostFile, version, label: str) -> None:
    """The XGBoost version that wrote the file; refused before 1.0."""
    if not isinstance(version, (list, np.ndarray)):
        return
    info.version = ".".join(str(int(v)) for v in list(version)[:3])
    if len(version) and int(version[0]) < 1:  # JSON before 1.0 was an unversioned draft
        raise ModelFileError(
            f"{label} was written by XGBoost {info.version}; this server reads XGBoost's JSON and UBJSON "
            "from XGBoost 1.0 on. Load it with the XGBoost that wrote it, or a newer one, and save it "
            "again with save_model('model.json')."
        )


def _check_xgb_tree(tree, t: int, n_features: int, info: XGBoostFile, label: str) -> None:
    where = f"tree {t}"
    if not isinstance(tree, dict):
        raise _refuse(label, f"{where} is not an object")
    param = tree.get("tree_param") or {}
    try:
        n = int(param.get("num_nodes", -1))
        leaf_vector = int(param.get("size_leaf_vector", 1) or 1)
    except (TypeError, ValueError) as exc:
        raise _refuse(label, f"{where} declares no node count") from exc
    if leaf_vector > 1:
        raise _refuse(label, f"{where} has vector leaves (multi-target trees), which this server does not run")
    left = _ints(tree.get("left_children"), label, f"{where}'s children")
    right = _ints(tree.get("right_children"), label, f"{where}'s children")
    split = _ints(tree.get("split_indices"), label, f"{where}'s split features")
    cond = _numbers_or_nan(tree.get("split_conditions"), label, f"{where}'s thresholds")
    weights = _finite(tree.get("base_weights"), label, f"{where}'s leaf values")
    if not (n == left.size == right.size == split.size == cond.size == weights.size) or n < 1:
        raise _refuse(label, f"{where} declares {n:,} nodes, {left.size:,} present")
    check_binary_tree(left, right, label, where)
    used = split[left >= 0]
    if used.size and (used.min() < 0 or used.max() >= n_features):
        raise _refuse(label, f"{where} splits on feature {int(used.max()):,}; the model has {n_features}")
    nodes = _ints(tree.get("categories_nodes"), label, f"{where}'s categorical nodes")
    # XGBoost 1.4-1.6 write NaN as the (unused) threshold of a categorical node: its test is
    # its categories, checked below; every other node's threshold or leaf value is a number
    unused = np.zeros(n, dtype=bool)
    unused[nodes[(nodes >= 0) & (nodes < n)]] = True
    if np.any(~np.isfinite(cond) & ~(np.isnan(cond) & unused & (left >= 0))):
        raise _refuse(label, f"{where}'s thresholds hold a non-finite value")
    if nodes.size:
        cats = _ints(tree.get("categories"), label, f"{where}'s categories")
        seg = _ints(tree.get("categories_segments"), label, f"{where}'s category segments")
        size = _ints(tree.get("categories_sizes"), label, f"{where}'s category sizes")
        if not (seg.size == size.size == nodes.size) or nodes.min() < 0 or nodes.max() >= n:
            raise _refuse(label, f"{where}'s categorical nodes do not match the tree")
        if seg.min() < 0 or size.min() < 0 or np.any(seg + size > cats.size):
            raise _refuse(label, f"{where}'s category segments point outside its categories")
        if cats.size and (cats.min() < 0 or cats.max() >= MAX_CATEGORY):
            raise _refuse(label, f"{where} tests category {int(cats.max()):,}")
        for k, node in enumerate(nodes):
            levels = info.categories.get(int(split[node]))
            chosen = cats[seg[k] : seg[k] + size[k]]
            if levels is not None and chosen.size and chosen.max() >= len(levels):
                raise _refuse(label, f"{where} tests category {int(chosen.max())} of {len(levels)} stored")


# --- LightGBM -------------------------------------------------------------------------------
@dataclass
class LightGBMFile:
    feature_names: list[str]
    categorical: list[int]  # positions of categorical features
    pandas_categorical: list | None  # the training levels per categorical feature (pandas input)
    objective: str
    num_class: int
    per_iteration: int
    version: str


_TREE_KEYS_INTERNAL = ("split_feature", "threshold", "decision_type", "left_child", "right_child")


def _kv(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        if not line or line.startswith("["):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        out[key.strip()] = value.strip()
    return out


def _numbers(text: str | None, label: str, what: str, *, whole: bool = False) -> np.ndarray:
    parts = (text or "").split()
    try:
        arr = np.array(parts, dtype=np.float64)
    except ValueError as exc:
        raise _refuse(label, f"{what} are not numbers") from exc
    if not np.all(np.isfinite(arr)):
        raise _refuse(label, f"{what} hold a non-finite value")
    if whole:
        if not np.all(arr == np.round(arr)):
            raise _refuse(label, f"{what} are not whole numbers")
        return arr.astype(np.int64)
    return arr


def check_lightgbm(data: bytes, label: str) -> LightGBMFile:
    """Check a LightGBM text model (``Booster.save_model``) and return what it says."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(label, "not UTF-8 text (LightGBM's text format)") from exc
    if not text.startswith("tree\n"):
        raise _refuse(label, "it does not start with LightGBM's 'tree' line")
    first = text.find("\nTree=")
    end = text.find("\nend of trees")
    closed = end >= 0  # LightGBM 2.0 wrote no 'end of trees' line: its trees run to the next section
    if first >= 0 and not closed:
        end = min((i for i in (text.find(m, first) for m in _AFTER_TREES) if i >= 0), default=-1)
    if first < 0 or end < first:
        raise _refuse(label, "no trees between the header and 'end of trees'")
    head = _kv(text[:first].splitlines())
    _check_lgb_version(head.get("version"), label)
    try:
        num_class = int(head.get("num_class", "1"))
        per_iteration = int(head.get("num_tree_per_iteration", "1"))
        max_feature = int(head["max_feature_idx"])
    except (KeyError, ValueError) as exc:
        raise _refuse(label, "the header lacks num_class, num_tree_per_iteration or max_feature_idx") from exc
    names = head.get("feature_names", "").split()
    if not 0 <= max_feature < 1_000_000 or len(names) != max_feature + 1:
        raise _refuse(label, f"{len(names)} feature names for max_feature_idx {max_feature}")
    if not 1 <= per_iteration <= 100_000 or not 1 <= num_class <= 100_000:
        raise _refuse(label, f"{num_class:,} classes and {per_iteration:,} trees per iteration declared")
    infos = head.get("feature_infos", "").split()
    if len(infos) != len(names):
        raise _refuse(label, f"{len(infos)} feature_infos for {len(names)} features")
    categorical = [j for j, s in enumerate(infos) if s != "none" and not s.startswith("[")]
    present = text.count("\nTree=", first, end + 1)
    declared = (head.get("tree_sizes") or "").strip()
    if declared and declared.count(" ") + 1 != present:  # counted before 10^7 sizes are parsed
        raise _refuse(label, f"tree_sizes declare {declared.count(' ') + 1:,} trees, {present:,} present")
    sizes = _numbers(declared, label, "tree_sizes", whole=True)
    blob = text.encode("utf-8")
    start = len(text[: first + 1].encode("utf-8"))
    stop = len(text[: end + 1].encode("utf-8"))
    if sizes.size:  # the loader jumps by these sizes: they must tile the trees exactly
        # (without 'end of trees', up to the blank lines before the next section)
        slack = 0 if closed else len(blob[start:stop]) - len(blob[start:stop].rstrip(b"\n"))
        if sizes.min() < 1 or not 0 <= stop - start - int(sizes.sum()) <= slack:
            raise _refuse(
                label,
                f"tree_sizes declare {sizes.size:,} trees of {int(sizes.sum()):,} bytes, "
                f"{stop - start:,} bytes present",
            )
        cuts = start + np.concatenate([[0], np.cumsum(sizes)])
        blocks = [blob[a:b].decode("utf-8", "replace") for a, b in zip(cuts[:-1], cuts[1:])]
    else:
        blocks = ["Tree=" + b for b in text[first + 1 : end + 1].split("Tree=")[1:]]
    for i, block in enumerate(blocks):
        if not block.startswith(f"Tree={i}\n"):
            raise _refuse(label, f"tree {i} does not start where tree_sizes say")
        _check_lgb_tree(_kv(block.splitlines()[1:]), i, max_feature, label)
    if len(blocks) % per_iteration:
        raise _refuse(label, f"{len(blocks)} trees for {per_iteration} trees per iteration")
    return LightGBMFile(
        feature_names=names,
        categorical=categorical,
        pandas_categorical=_lgb_pandas_categorical(text[end:], categorical, label),
        objective=head.get("objective", ""),
        num_class=num_class,
        per_iteration=per_iteration,
        version=head.get("version", ""),
    )


def _lgb_pandas_categorical(tail: str, categorical: list[int], label: str):
    """The levels of each categorical column a pandas frame trained on (the file's last line),
    one list per categorical feature; None when the file has none."""
    found = re.search(r"\npandas_categorical:(.*)", tail)
    if not found:
        return None
    try:
        pandas_categorical = json.loads(found.group(1))
    except ValueError as exc:
        raise _refuse(label, "pandas_categorical is not JSON") from exc
    if pandas_categorical is not None and (
        not isinstance(pandas_categorical, list) or len(pandas_categorical) != len(categorical)
    ):
        raise _refuse(
            label,
            f"pandas_categorical lists levels for {len(pandas_categorical or [])} features, "
            f"{len(categorical)} are categorical",
        )
    return pandas_categorical


#: the sections LightGBM writes after its trees (2.0 wrote no 'end of trees' line before them)
_AFTER_TREES = ("\nfeature importances:", "\nfeature_importances:", "\nparameters:", "\npandas_categorical:")
#: LightGBM text format versions its current releases read: v2 (LightGBM 2.0-2.2), v3 (2.3-3.x), v4
LGB_FORMATS = ("v2", "v3", "v4")


def _check_lgb_version(version: str | None, label: str) -> None:
    """Refuse a text format this server's LightGBM does not read, naming its version."""
    if version in LGB_FORMATS:
        return
    formats = ", ".join(LGB_FORMATS)
    if version is None or re.fullmatch(r"v[01]", version):
        said = f"format {version}" if version else "no format version, as LightGBM before 2.0 wrote"
        raise ModelFileError(
            f"{label} is a LightGBM text model with {said}; this server reads formats {formats} "
            "(LightGBM 2.0 and later). Load it with the LightGBM that wrote it and save it again with "
            "LightGBM 2.0 or later (Booster.save_model('model.txt'))."
        )
    raise ModelFileError(
        f"{label} is a LightGBM text model with format {version[:20]!r}, which this server does not read "
        f"(it reads formats {formats}); save it as LightGBM 4 writes it, or ask the operator to update LightGBM."
    )


def _check_lgb_tree(kv: dict[str, str], i: int, max_feature: int, label: str) -> None:
    where = f"tree {i}"
    try:
        leaves = int(kv["num_leaves"])
        num_cat = int(kv.get("num_cat", "0"))
    except (KeyError, ValueError) as exc:
        raise _refuse(label, f"{where} has no num_leaves") from exc
    if not 1 <= leaves <= 10_000_000 or num_cat < 0:
        raise _refuse(label, f"{where} declares {leaves:,} leaves and {num_cat:,} categorical splits")
    values = _numbers(kv.get("leaf_value"), label, f"{where}'s leaf values")
    if values.size != leaves:
        raise _refuse(label, f"{where} declares {leaves:,} leaves, {values.size:,} leaf values present")
    if leaves == 1:
        return
    n = leaves - 1
    arrays = {
        key: _numbers(kv.get(key), label, f"{where}'s {key}", whole=key != "threshold") for key in _TREE_KEYS_INTERNAL
    }
    short = [k for k, a in arrays.items() if a.size != n]
    if short:
        raise _refuse(
            label,
            f"{where} declares {leaves:,} leaves but its {short[0]} has "
            f"{arrays[short[0]].size:,} values for {n:,} splits",
        )
    feature = arrays["split_feature"]
    if feature.min() < 0 or feature.max() > max_feature:
        raise _refuse(label, f"{where} splits on feature {int(feature.max()):,}; the model has {max_feature + 1}")
    left, right = arrays["left_child"], arrays["right_child"]
    kids = np.concatenate([left, right])
    inner, leaf = kids[kids >= 0], ~kids[kids < 0]
    if inner.size and inner.max() >= n or leaf.size and leaf.max() >= leaves:
        raise _refuse(label, f"{where} has a child index outside its {leaves:,} leaves")
    if np.any(np.concatenate([left - np.arange(n), right - np.arange(n)])[kids >= 0] <= 0):
        raise _refuse(label, f"{where} has a child before its parent (a cycle)")
    if len(np.unique(inner)) != inner.size or len(np.unique(leaf)) != leaf.size:
        raise _refuse(label, f"{where} has a node with two parents")
    if inner.size != n - 1 or leaf.size != leaves:
        raise _refuse(label, f"{where} does not reach every node exactly once")
    is_cat = (arrays["decision_type"] & 1).astype(bool)
    if is_cat.any():
        bounds = _numbers(kv.get("cat_boundaries"), label, f"{where}'s cat_boundaries", whole=True)
        words = _numbers(kv.get("cat_threshold"), label, f"{where}'s cat_threshold", whole=True)
        if bounds.size != num_cat + 1 or bounds[0] != 0 or np.any(np.diff(bounds) < 0) or bounds[-1] != words.size:
            raise _refuse(label, f"{where}'s cat_boundaries do not match its {num_cat} categorical splits")
        index = arrays["threshold"][is_cat]
        if np.any(index != np.round(index)) or index.min() < 0 or index.max() >= num_cat:
            raise _refuse(label, f"{where} points to categorical split {int(index.max()):,} of {num_cat}")
        if words.size and (words.min() < 0 or words.max() >= 2**32):
            raise _refuse(label, f"{where}'s category bitsets are not 32-bit words")
    if kv.get("is_linear", "0") not in ("0", ""):
        coeff = _numbers(kv.get("leaf_coeff"), label, f"{where}'s linear coefficients")
        feats = _numbers(kv.get("leaf_features"), label, f"{where}'s linear features", whole=True)
        counts = _numbers(kv.get("num_features"), label, f"{where}'s linear feature counts", whole=True)
        _numbers(kv.get("leaf_const"), label, f"{where}'s linear constants")
        if counts.size != leaves or counts.min() < 0 or int(counts.sum()) != feats.size or coeff.size != feats.size:
            raise _refuse(label, f"{where}'s linear leaves do not match their features")
        if feats.size and (feats.min() < 0 or feats.max() > max_feature):
            raise _refuse(label, f"{where}'s linear leaves use feature {int(feats.max()):,}")


# --- CatBoost -------------------------------------------------------------------------------
CBM_MAGIC = b"CBM1"
#: the oldest CatBoost whose .cbm and JSON models this server reads
CB_OLDEST = (1, 0)
#: the release in CatBoost's build text (``model_info["catboost_version_info"]``, also inside a
#: .cbm): a release build's branch "tags/v1.2.10" or its summary "CatBoost release 1.2.10"
_CB_RELEASE = re.compile(r"Branch:\s*tags/v(\d+\.\d+(?:\.\d+)?)\b|\brelease\s+v?(\d+\.\d+(?:\.\d+)?)\b", re.IGNORECASE)


def catboost_version(model_info) -> str:
    """The CatBoost release that wrote a model, from its model_info (a ``version`` entry, else
    the build text in ``catboost_version_info``); "" when it does not say (a build from a
    branch, as 1.0.6's wheels are)."""
    if not isinstance(model_info, dict):
        return ""
    stated = model_info.get("version")
    if isinstance(stated, str) and re.fullmatch(r"v?\d+\.\d+(\.\d+)?", stated.strip()):
        return stated.strip().lstrip("v")
    text = model_info.get("catboost_version_info")
    found = _CB_RELEASE.search(text[:20_000]) if isinstance(text, str) else None
    return (found.group(1) or found.group(2)) if found else ""


def check_catboost_version(version: str, label: str) -> None:
    """Refuse a model written by a CatBoost older than :data:`CB_OLDEST`, naming its version."""
    if not version:
        return
    major, minor = (int(v) for v in version.split(".")[:2])
    if (major, minor) < CB_OLDEST:
        oldest = ".".join(map(str, CB_OLDEST))
        raise ModelFileError(
            f"{label} was written by CatBoost {version}; this server reads CatBoost's .cbm and JSON models from "
            f"CatBoost {oldest} on. Load it with the CatBoost that wrote it, or a newer one, and save it again "
            "with save_model('model.cbm')."
        )


def cbm_version(data: bytes) -> str:
    """The CatBoost release a .cbm names in its embedded build text ("" when unreadable)."""
    start = data.find(b"Git info:")
    if start < 0:
        return ""
    text = data[start : start + 4096].decode("utf-8", "replace")
    return catboost_version({"catboost_version_info": text})


def check_cbm(data: bytes, label: str) -> None:
    """A CatBoost binary model: the magic, the FlatBuffers size it declares and, when its
    build text names one, the CatBoost release that wrote it (the rest is checked on the
    model's JSON export, :func:`check_catboost_json`, before any prediction)."""
    if len(data) < 8 or data[:4] != CBM_MAGIC:
        raise _refuse(label, "it does not start with CatBoost's 'CBM1' mark")
    (size,) = struct.unpack("<I", data[4:8])
    if size < 8 or 8 + size > len(data):
        raise _refuse(label, f"it declares a {size:,}-byte model, {len(data) - 8:,} bytes present")
    check_catboost_version(cbm_version(data), label)


def check_catboost_json(doc, label: str) -> dict:
    """Check a CatBoost JSON model (``save_model(format='json')``); returns its model_info. A
    model written by a CatBoost before 1.0 (its model_info names the release) is refused,
    naming the version."""
    if not isinstance(doc, dict) or not isinstance(doc.get("features_info"), dict):
        raise _refuse(label, "no 'features_info' (is it a CatBoost model saved with format='json'?)")
    check_catboost_version(catboost_version(doc.get("model_info")), label)
    info = doc["features_info"]
    floats = info.get("float_features") or []
    cats = info.get("categorical_features") or []
    if not isinstance(floats, list) or not isinstance(cats, list):
        raise _refuse(label, "features_info lists no features")
    flat = []
    for f in floats + cats:
        if not isinstance(f, dict):
            raise _refuse(label, "a feature entry is not an object")
        flat.append(f.get("flat_feature_index"))
    flat_idx = _ints(flat, label, "flat feature indices")
    width = len(flat)
    if width == 0 or width > 1_000_000 or (flat_idx.size and (flat_idx.min() < 0 or flat_idx.max() >= 10 * width + 10)):
        raise _refuse(label, f"{width:,} features with flat indices up to {int(flat_idx.max(initial=0)):,}")
    for f in floats:
        _finite(f.get("borders") or [], label, "float feature borders")
    scale = doc.get("scale_and_bias")
    if scale is not None:
        if not isinstance(scale, list) or len(scale) != 2:
            raise _refuse(label, "scale_and_bias is not [scale, bias]")
        _finite([scale[0]], label, "the scale")
        _finite(scale[1], label, "the bias")
    trees = doc.get("oblivious_trees")
    if trees is None and doc.get("trees") is not None:
        raise _refuse(label, "non-symmetric trees (grow_policy Depthwise/Lossguide) are not checked by this server")
    if not isinstance(trees, list):
        raise _refuse(label, "no oblivious_trees")
    n_float, n_cat = len(floats), len(cats)
    for t, tree in enumerate(trees):
        if not isinstance(tree, dict) or not isinstance(tree.get("splits", []), list):
            raise _refuse(label, f"tree {t} is not an object with splits")
        splits = tree.get("splits") or []
        if len(splits) > 16:
            raise _refuse(label, f"tree {t} has depth {len(splits)} (CatBoost's limit is 16)")
        values = _finite(tree.get("leaf_values"), label, f"tree {t}'s leaf values")
        if values.size == 0 or values.size % (1 << len(splits)):
            raise _refuse(label, f"tree {t} has depth {len(splits)} and {values.size:,} leaf values")
        for s in splits:
            if not isinstance(s, dict):
                raise _refuse(label, f"tree {t} has a split that is not an object")
            kind = s.get("split_type")
            if kind == "FloatFeature":
                j = s.get("float_feature_index")
                if not isinstance(j, int) or not 0 <= j < n_float:
                    raise _refuse(label, f"tree {t} splits on float feature {j} of {n_float}")
                border = s.get("border")
                if not isinstance(border, (int, float)) or not math.isfinite(border):
                    raise _refuse(label, f"tree {t} has a non-finite border")
            elif kind == "OneHotFeature":
                j = s.get("cat_feature_index")
                if not isinstance(j, int) or not 0 <= j < n_cat:
                    raise _refuse(label, f"tree {t} splits on categorical feature {j} of {n_cat}")
            elif kind != "OnlineCtr":
                raise _refuse(label, f"tree {t} has a split of unknown type {kind!r}")
    model_info = doc.get("model_info")
    return model_info if isinstance(model_info, dict) else {}
