"""Reading a fitted scikit-learn tree model into one flat array of nodes (:class:`Ensemble`).

The engine recomputes the model's own prediction function exactly: the same comparisons
(``x <= threshold``, inputs rounded to float32 first where scikit-learn's trees validate
their input as float32; float64 for HistGradientBoosting), the same directions for missing
values (``missing_go_to_left``), the same base score (the init estimator's raw prediction,
HistGradientBoosting's baseline), the learning rate and the same link, applied by the model's
own loss object (``_loss.predict_proba``, ``_loss.link.inverse``). No formula of a paper
changes: only how the model is evaluated on the intervened rows. XGBoost, LightGBM and
CatBoost models (their scikit-learn wrappers, raw boosters, and wrapped boosters that offer
``tree_source()``) are read by :mod:`.xgboost_read` and :mod:`.boosters`, dispatched here.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .boosters import cb_sklearn, lgb_sklearn, read_catboost, read_lightgbm
from .ensemble import Ensemble, Unsupported, join_trees
from .xgboost_read import read_xgboost, xgb_sklearn

__all__ = ["BOOSTERS", "READERS", "Ensemble", "Unsupported", "read_model"]


def _sk_tree(estimator, column: int = 0, classes: int | None = None) -> dict:
    """The node arrays of a fitted scikit-learn ``DecisionTree*`` (its ``tree_``)."""
    tree = estimator.tree_
    nodes = tree.__getstate__()["nodes"]  # every field at once
    value = tree.value[:, 0, :classes] if classes else tree.value[:, 0, :1]
    left = nodes["left_child"]
    return {
        "feature": np.where(left < 0, -1, nodes["feature"]),
        "threshold": nodes["threshold"],
        "left": left,
        "right": nodes["right_child"],
        "missing_left": nodes["missing_go_to_left"].astype(bool),
        "value": value,
        "column": column,
    }


def _single_output(model) -> None:
    if getattr(model, "n_outputs_", 1) != 1:
        raise Unsupported(f"{type(model).__name__} with {model.n_outputs_} outputs: only single-output models are read")


def read_forest(model, kind: str) -> Ensemble:
    """DecisionTree*, RandomForest*, ExtraTrees*: the mean of the trees' predictions
    (class fractions for classifiers, as ``predict_proba``)."""
    _single_output(model)
    estimators = [model] if kind.startswith("DecisionTree") else list(model.estimators_)
    n_classes = int(model.n_classes_) if kind.endswith("Classifier") else None
    trees = [_sk_tree(e, 0, n_classes) for e in estimators]
    count = float(len(estimators))
    width = n_classes or 1

    def finish(total: np.ndarray) -> np.ndarray:
        out = total / count if count > 1 else total
        return out if n_classes else out[:, 0]

    return join_trees(trees, name=kind, n_outputs=width, float32=True, finish=finish)


def read_gradient_boosting(model, kind: str) -> Ensemble:
    """GradientBoosting*: init estimator's raw prediction + learning_rate x sum of stages,
    then the loss's link (``_loss.predict_proba``) for classifiers."""
    from sklearn.dummy import DummyClassifier, DummyRegressor

    init = model.init_
    if not (isinstance(init, str) and init == "zero") and type(init) not in (DummyRegressor, DummyClassifier):
        raise Unsupported(f"{kind} with a custom init estimator ({type(init).__name__}) is not read")
    stages = model.estimators_
    k = stages.shape[1]
    base = np.asarray(model._raw_predict_init(np.zeros((1, model.n_features_in_), dtype=np.float32)), dtype=float)[0]
    trees = [_sk_tree(stages[i, c], c) for i in range(stages.shape[0]) for c in range(k)]
    rate = float(model.learning_rate)
    classifier = kind.endswith("Classifier")
    loss = model._loss

    def finish(total: np.ndarray) -> np.ndarray:
        raw = base + rate * total
        if not classifier:
            return raw[:, 0]
        return np.asarray(loss.predict_proba(raw[:, 0] if k == 1 else raw), dtype=np.float64)

    return join_trees(trees, name=kind, n_outputs=k, float32=True, finish=finish)


def read_hist_gradient_boosting(model, kind: str) -> Ensemble:
    """HistGradientBoosting*: baseline + sum of the trees (leaf values include the
    learning rate), then ``_loss.predict_proba`` or ``_loss.link.inverse``."""
    k = int(model.n_trees_per_iteration_)
    known = _hgb_known_categories(model)
    trees = []
    for iteration in model._predictors:
        for c, predictor in enumerate(iteration):
            nodes = predictor.nodes
            leaf = nodes["is_leaf"].astype(bool)
            tree = {
                "feature": np.where(leaf, -1, nodes["feature_idx"]),
                "threshold": nodes["num_threshold"],
                "left": nodes["left"],
                "right": nodes["right"],
                "missing_left": nodes["missing_go_to_left"],
                "value": nodes["value"][:, None],
                "column": c,
            }
            if known is not None:
                tree.update(_hgb_categorical_splits(predictor, known))
            trees.append(tree)
    base = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(1, k)
    classifier = kind.endswith("Classifier")
    loss = model._loss

    def finish(total: np.ndarray) -> np.ndarray:
        raw = np.asfortranarray(base + total)
        if classifier:
            return np.asarray(loss.predict_proba(raw), dtype=np.float64)
        return np.asarray(loss.link.inverse(raw.ravel()), dtype=np.float64)

    return join_trees(trees, name=kind, n_outputs=k, float32=False, finish=finish)


def _hgb_known_categories(model) -> tuple[np.ndarray, np.ndarray] | None:
    """The categories each categorical feature saw in fit (bitsets, and each feature's row
    of them), or None when no feature is categorical."""
    categorical = getattr(model, "is_categorical_", None)
    if categorical is None or not np.any(categorical):
        return None
    bitsets, row = model._bin_mapper.make_known_categories_bitsets()
    return np.asarray(bitsets, dtype=np.uint32), np.asarray(row)


def _hgb_categorical_splits(predictor, known: tuple[np.ndarray, np.ndarray]) -> dict:
    """A HistGradientBoosting tree's categorical splits as :class:`Ensemble` fields: its
    predictor sends category c left when c is in the node's left set, right when c is
    another category seen in fit, and an unseen category (or a negative value) the missing
    direction: the set written is therefore the left set plus, at nodes whose missing values
    go left, every category not seen (its 256 bits as four int64 words)."""
    nodes = predictor.nodes
    categorical = nodes["is_categorical"].astype(bool) & ~nodes["is_leaf"].astype(bool)
    at = np.flatnonzero(categorical)
    seen_sets, row = known
    left = np.asarray(predictor.raw_left_cat_bitsets, dtype=np.uint32)[nodes["bitset_idx"][at]]
    seen = seen_sets[row[nodes["feature_idx"][at]]]
    unseen_left = np.where(nodes["missing_go_to_left"][at].astype(bool)[:, None], ~seen, 0).astype(np.uint32)
    words = np.ascontiguousarray(left | unseen_left).view(np.int64).reshape(at.size, seen_sets.shape[1] // 2)
    index = np.full(nodes.size, -1, dtype=np.int64)
    index[at] = np.arange(at.size)
    return {"cat_index": index, "bitsets": words, "invalid_left": nodes["missing_go_to_left"]}


READERS: dict[str, Callable[[Any, str], Ensemble]] = {
    "DecisionTreeRegressor": read_forest,
    "DecisionTreeClassifier": read_forest,
    "RandomForestRegressor": read_forest,
    "RandomForestClassifier": read_forest,
    "ExtraTreesRegressor": read_forest,
    "ExtraTreesClassifier": read_forest,
    "GradientBoostingRegressor": read_gradient_boosting,
    "GradientBoostingClassifier": read_gradient_boosting,
    "HistGradientBoostingRegressor": read_hist_gradient_boosting,
    "HistGradientBoostingClassifier": read_hist_gradient_boosting,
}

#: The boosting libraries, read by :mod:`.boosters`.
BOOSTERS = {"xgboost": "XGBoost", "lightgbm": "LightGBM", "catboost": "CatBoost"}


def read_model(model) -> Ensemble:
    """The :class:`Ensemble` of a supported model (the last step of a pipeline whose earlier
    steps pass the rows through), or :class:`Unsupported` naming why not."""
    model = _last_step(model)
    cls = type(model)
    name = cls.__name__
    root = cls.__module__.split(".")[0]
    source = getattr(model, "tree_source", None)
    if root not in BOOSTERS and callable(source):  # a wrapped booster (the dashboard's loaded files)
        return read_source(source(), str(getattr(model, "name", name)))
    if root in BOOSTERS:
        return read_booster(model, name, root)
    if root != "sklearn" or name not in READERS:
        raise Unsupported(f"{name} is not a tree model the engine reads")
    if not cls.__module__.startswith("sklearn."):
        raise Unsupported(f"{name} from {cls.__module__} is not scikit-learn's own class")
    return READERS[name](model, name)


# --- dispatch -------------------------------------------------------------------------------
SKLEARN_API = {
    "XGBRegressor": xgb_sklearn,
    "XGBClassifier": xgb_sklearn,
    "XGBRFRegressor": xgb_sklearn,  # num_parallel_tree trees per iteration, summed as well
    "XGBRFClassifier": xgb_sklearn,
    "LGBMRegressor": lgb_sklearn,
    "LGBMClassifier": lgb_sklearn,
    "CatBoostRegressor": cb_sklearn,
    "CatBoostClassifier": cb_sklearn,
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
    ``categorical`` (coded levels: refused; CatBoost's reader names its features)."""
    library, options = source
    native = options.get("model")
    classifier = options.get("task") == "classification"
    if native is None:
        raise Unsupported(f"{name}: its {library} model is not at hand for the tree engine")
    if options.get("categorical") and library != "catboost":  # CatBoost's reader names its features
        raise Unsupported(f"{name} has categorical columns, coded by the loaded file's levels: not walked")
    if library == "xgboost":
        first, stop = options.get("window", (0, 0))
        return read_xgboost(native, name, classifier=classifier, window=(int(first), int(stop)), wrapper=True)
    if library == "lightgbm":
        return read_lightgbm(native, name, classifier=classifier)
    if library == "catboost":
        loss = str(options.get("objective", ""))
        return read_catboost(native, name, loss=loss, classifier=classifier, exponent=bool(options.get("exponent")))
    raise Unsupported(f"{name}: a {library} model is not read by the tree engine")


#: Ensembles read, by the id of the live model object they were read from (an entry goes when
#: its model is collected): a job computing every feature's curves on one model reads it once.
_READ: dict[int, Ensemble] = {}


def read_model_cached(model) -> tuple[Ensemble, bool]:
    """:func:`read_model`, kept while ``model`` lives, and whether it came from the cache. A
    model fitted again in place keeps its id: the engine checks every ensemble against the
    model's own predictions before use and reads it again on a disagreement (:func:`forget`)."""
    key = id(model)
    if key in _READ:
        return _READ[key], True
    ens = read_model(model)
    try:
        weakref.finalize(model, _READ.pop, key, None)
    except TypeError:  # an object without weak references: not kept
        return ens, False
    _READ[key] = ens
    return ens, False


def forget(model) -> None:
    """Drop ``model``'s cached ensemble (it disagreed with the model: fitted again)."""
    _READ.pop(id(model), None)


def pipeline_parts(model) -> tuple[tuple, Any]:
    """The steps a ``Pipeline`` (nested ones flattened) applies before its final estimator
    (None and "passthrough" left out), and that estimator; ``((), model)`` for a model alone."""
    steps = getattr(model, "steps", None)
    if steps is None or type(model).__name__ != "Pipeline":
        return (), model
    before = tuple(
        step for _, step in steps[:-1] if step is not None and not (isinstance(step, str) and step == "passthrough")
    )
    inner, final = pipeline_parts(steps[-1][1])
    return before + inner, final


def _passthrough(step) -> bool:
    return isinstance(step, str) and step == "passthrough"


def _last_step(model):
    """The final estimator of a ``Pipeline`` whose other steps are None or "passthrough"."""
    steps = getattr(model, "steps", None)
    if steps is None or type(model).__name__ != "Pipeline":
        return model
    before = [step for _, step in steps[:-1] if step is not None and step != "passthrough"]
    if before:
        names = ", ".join(type(step).__name__ for step in before)
        raise Unsupported(
            f"a Pipeline transforming its rows first ({names}): the engine reads only the model's own rows"
        )
    return _last_step(steps[-1][1])
