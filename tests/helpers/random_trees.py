"""Random trees for the tree engine's tests, and a predict of them one node at a time."""

from __future__ import annotations

import numpy as np


def random_tree(rng, depth: int, p: int, levels: np.ndarray, *, stop: tuple[float, int] = (0.2, 2)) -> dict:
    """A random tree down to ``depth``: thresholds from a few ``levels`` (ties with the data),
    random missing directions, local child ids. ``stop`` = (probability, first level): a
    branch at that level or deeper stops early with that probability (0.0: every branch
    ``depth`` deep, 2**depth leaves)."""
    feature, threshold, left, right, missing, value = [], [], [], [], [], []
    chance, first = stop

    def node(level: int) -> int:
        at = len(feature)
        for items in (feature, threshold, left, right, missing, value):
            items.append(0)
        if level == depth or (chance > 0 and level >= first and rng.random() < chance):
            feature[at], left[at], right[at], value[at] = -1, -1, -1, rng.normal()
            return at
        feature[at], threshold[at], missing[at] = rng.integers(0, p), rng.choice(levels), rng.random() < 0.5
        left[at] = node(level + 1)
        right[at] = node(level + 1)
        return at

    node(0)
    return {
        "feature": np.array(feature),
        "threshold": np.array(threshold, dtype=float),
        "left": np.array(left),
        "right": np.array(right),
        "missing_left": np.array(missing),
        "value": np.array(value, dtype=float)[:, None],
        "column": 0,
    }


def brute_force(ens, X: np.ndarray) -> np.ndarray:
    """Each row's sum over trees, one node at a time, as a predict does."""
    out = np.zeros(X.shape[0])
    for i, x in enumerate(X):
        for root in ens.roots:
            node = int(root)
            while ens.feature[node] >= 0:
                v = x[ens.feature[node]]
                go_left = ens.missing_left[node] if np.isnan(v) else v <= ens.threshold[node]
                node = int(ens.left[node] if go_left else ens.right[node])
            out[i] += ens.value[node, 0]
    return out
