"""The tree engine's model: every tree of a model as one flat array of nodes
(:class:`Ensemble`), built by the readers (:mod:`.read` for scikit-learn, :mod:`.boosters`
for XGBoost, LightGBM and CatBoost) with :func:`join_trees`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

#: Values rounded to float32 at a time by :meth:`Ensemble.compared` (their float32 copy,
#: 256 kB, stays in the cache).
ROUNDED = 65_536


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
    #: Largest gap between the walk and the model's own output the check accepts, relative
    #: to the spread of the outputs (the walk and the library both sum in float64) ...
    tolerance: float = 1e-9
    #: ... plus this absolute gap: the library's own rounding where it sums in float32
    #: (XGBoost, :func:`.xgboost_read.xgboost_rounding`), in the units of one output value.
    rounding: float = 0.0
    #: Categorical splits (:mod:`.categories`): per node, its row of ``bitsets`` (-1: a
    #: numeric split); a row's bit c set sends category c left; ``invalid_left``: where a
    #: value outside the sets' range (negative, too large) goes. None: no categorical split.
    cat_index: np.ndarray | None = None
    bitsets: np.ndarray | None = None  # int64 words (sets x words)
    invalid_left: np.ndarray | None = None
    #: A value is a category (its bit looked up) when above this: 0 and up for scikit-learn
    #: and XGBoost; LightGBM casts to int first, so -0.5 is category 0 (``cat_low`` -1).
    cat_low: float = float(np.nextafter(0.0, -1.0))
    _levels: dict = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def categorical(self) -> bool:
        """Whether any split is categorical."""
        return self.cat_index is not None and bool((self.cat_index >= 0).any())

    def is_categorical(self, j: int) -> bool:
        """Whether feature ``j``'s splits are categorical."""
        return self.categorical and bool((self.cat_index[self.feature == j] >= 0).any())  # type: ignore[index]

    @cached_property
    def children(self) -> np.ndarray:
        """Node i's right child at 2i, its left child at 2i + 1 (leaves: themselves)."""
        out = np.empty(2 * self.feature.size, dtype=np.int32)
        own = np.arange(self.feature.size, dtype=np.int32)
        out[0::2] = np.where(self.feature < 0, own, self.right)
        out[1::2] = np.where(self.feature < 0, own, self.left)
        return out

    def compared(self, values: np.ndarray) -> np.ndarray:
        """Values as the model compares them with its thresholds (float64 arrays): rounded to
        float32 a slice at a time where the model compares in float32 (no float32 copy of
        every row beside the result)."""
        values = np.asarray(values, dtype=np.float64)
        if not self.float32:
            return values
        out = np.empty(values.shape)
        flat, into = values.reshape(-1), out.reshape(-1)
        for a in range(0, flat.size, ROUNDED):
            into[a : a + ROUNDED] = flat[a : a + ROUNDED].astype(np.float32)
        return out

    def bins(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """The sorted distinct thresholds on feature ``j`` and, per node, the position of its
        threshold among them: ``x <= t_k`` exactly when ``searchsorted(t, x) <= k``."""
        on_j = self.feature == j
        found = np.unique(self.threshold[on_j])
        node_bin = np.zeros(self.feature.size, dtype=np.int64)
        node_bin[on_j] = np.searchsorted(found, self.threshold[on_j])
        return found, node_bin


def join_trees(trees: list[dict], **common: Any) -> Ensemble:
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
        **_categories(trees, offsets),
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


def _categories(trees: list[dict], offsets: np.ndarray) -> dict:
    """The joined categorical fields of per-tree ``cat_index`` (local rows of the tree's own
    ``bitsets``, -1: numeric), ``bitsets`` and ``invalid_left``; none when no tree has one."""
    if not any("cat_index" in t for t in trees):
        return {}
    sets = [t.get("bitsets", np.zeros((0, 1), dtype=np.int64)) for t in trees]
    words = max(s.shape[1] for s in sets)
    padded = [np.pad(np.asarray(s, dtype=np.int64), ((0, 0), (0, words - s.shape[1]))) for s in sets]
    starts = np.cumsum([0] + [s.shape[0] for s in padded])
    index = [
        np.where(t["cat_index"] >= 0, t["cat_index"] + start, -1) if "cat_index" in t else np.full(n, -1)
        for t, start, n in zip(trees, starts, np.diff(offsets))
    ]
    invalid = [t.get("invalid_left", t["missing_left"]) for t in trees]
    return {
        "cat_index": np.concatenate(index).astype(np.int32),
        "bitsets": np.concatenate(padded) if starts[-1] else np.zeros((1, 1), dtype=np.int64),
        "invalid_left": np.concatenate(invalid).astype(bool),
    }
