"""Reading a fitted scikit-learn tree model into one flat array of nodes (:class:`Ensemble`).

The engine recomputes the model's own prediction function exactly: the same comparisons
(``x <= threshold``, inputs rounded to float32 first where scikit-learn's trees validate
their input as float32; float64 for HistGradientBoosting), the same directions for missing
values (``missing_go_to_left``), the same base score (the init estimator's raw prediction,
HistGradientBoosting's baseline), the learning rate and the same link, applied by the model's
own loss object (``_loss.predict_proba``, ``_loss.link.inverse``). No formula of a paper
changes: only how the model is evaluated on the intervened rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np


class Unsupported(Exception):
    """The tree engine cannot read this model; the message says why."""


@dataclass(frozen=True)
class Ensemble:
    """Every tree of a model as one array of nodes (node ids global across trees).

    ``feature`` is -1 at leaves; a leaf's ``value`` row (width ``value.shape[1]``) is added
    to the outputs ``column[leaf] : column[leaf] + width`` of the sum over trees, which
    ``finish`` turns into what the model's ``predict`` (regressors) or ``predict_proba``
    (classifiers) returns.
    """

    name: str
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    missing_left: np.ndarray
    value: np.ndarray
    column: np.ndarray
    roots: np.ndarray
    n_outputs: int
    float32: bool  # inputs are rounded to float32 before each comparison
    finish: Callable[[np.ndarray], np.ndarray]

    @cached_property
    def children(self) -> np.ndarray:
        """Node i's right child at 2i, its left child at 2i + 1 (leaves: themselves)."""
        out = np.empty(2 * self.feature.size, dtype=np.int32)
        own = np.arange(self.feature.size, dtype=np.int32)
        out[0::2] = np.where(self.feature < 0, own, self.right)
        out[1::2] = np.where(self.feature < 0, own, self.left)
        return out

    def compared(self, values: np.ndarray) -> np.ndarray:
        """Values as the model compares them with its thresholds (float64 arrays)."""
        values = np.asarray(values, dtype=np.float64)
        return values.astype(np.float32).astype(np.float64) if self.float32 else values

    def bins(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """The sorted distinct thresholds on feature ``j`` and, per node, the position of its
        threshold among them: ``x <= t_k`` exactly when ``searchsorted(t, x) <= k``."""
        on_j = self.feature == j
        found = np.unique(self.threshold[on_j])
        node_bin = np.zeros(self.feature.size, dtype=np.int64)
        node_bin[on_j] = np.searchsorted(found, self.threshold[on_j])
        return found, node_bin


def _join(trees: list[dict], **common: Any) -> Ensemble:
    """One :class:`Ensemble` from per-tree node arrays (local child ids, -1 at leaves)."""
    offsets = np.cumsum([0] + [t["feature"].size for t in trees])
    if offsets[-1] >= 2**30:
        raise Unsupported(f"{common['name']} has {offsets[-1]:,} nodes, more than the walk indexes")
    feature = np.concatenate([t["feature"] for t in trees]).astype(np.int32)  # int32: half the bytes per walk step
    leaf = feature < 0

    def children(key: str) -> np.ndarray:
        out = np.concatenate([t[key].astype(np.int64) + off for t, off in zip(trees, offsets)])
        return np.where(leaf, -1, out).astype(np.int32)

    return Ensemble(
        feature=np.where(leaf, -1, feature),
        threshold=np.concatenate([t["threshold"] for t in trees]).astype(np.float64),
        left=children("left"),
        right=children("right"),
        missing_left=np.concatenate([t["missing_left"] for t in trees]).astype(bool),
        value=np.concatenate([t["value"] for t in trees]).astype(np.float64),
        column=np.concatenate([np.full(t["feature"].size, t["column"], dtype=np.int64) for t in trees]),
        roots=offsets[:-1].astype(np.int32),
        **common,
    )


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

    return _join(trees, name=kind, n_outputs=width, float32=True, finish=finish)


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

    return _join(trees, name=kind, n_outputs=k, float32=True, finish=finish)


def read_hist_gradient_boosting(model, kind: str) -> Ensemble:
    """HistGradientBoosting*: baseline + sum of the trees (leaf values include the
    learning rate), then ``_loss.predict_proba`` or ``_loss.link.inverse``."""
    categorical = getattr(model, "is_categorical_", None)
    if getattr(model, "_preprocessor", None) is not None or (categorical is not None and np.any(categorical)):
        raise Unsupported(f"{kind} with categorical features: categorical bitsets are not yet walked")
    k = int(model.n_trees_per_iteration_)
    trees = []
    for iteration in model._predictors:
        for c, predictor in enumerate(iteration):
            nodes = predictor.nodes
            leaf = nodes["is_leaf"].astype(bool)
            trees.append(
                {
                    "feature": np.where(leaf, -1, nodes["feature_idx"]),
                    "threshold": nodes["num_threshold"],
                    "left": nodes["left"],
                    "right": nodes["right"],
                    "missing_left": nodes["missing_go_to_left"],
                    "value": nodes["value"][:, None],
                    "column": c,
                }
            )
    base = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(1, k)
    classifier = kind.endswith("Classifier")
    loss = model._loss

    def finish(total: np.ndarray) -> np.ndarray:
        raw = np.asfortranarray(base + total)
        if classifier:
            return np.asarray(loss.predict_proba(raw), dtype=np.float64)
        return np.asarray(loss.link.inverse(raw.ravel()), dtype=np.float64)

    return _join(trees, name=kind, n_outputs=k, float32=False, finish=finish)


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

#: Libraries read later (issue 42); until then their models fall back under engine="auto".
LATER = {"xgboost": "XGBoost", "lightgbm": "LightGBM", "catboost": "CatBoost"}


def read_model(model) -> Ensemble:
    """The :class:`Ensemble` of a supported model (the last step of a pipeline whose earlier
    steps pass the rows through), or :class:`Unsupported` naming why not."""
    model = _last_step(model)
    cls = type(model)
    name = cls.__name__
    root = cls.__module__.split(".")[0]
    if root in LATER:
        raise Unsupported(f"{LATER[root]} models ({name}): not yet read by the tree engine")
    if root != "sklearn" or name not in READERS:
        raise Unsupported(f"{name} is not a tree model the engine reads (scikit-learn trees and ensembles)")
    if not cls.__module__.startswith("sklearn."):
        raise Unsupported(f"{name} from {cls.__module__} is not scikit-learn's own class")
    return READERS[name](model, name)


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
