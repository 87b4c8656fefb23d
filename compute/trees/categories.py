"""Categorical splits in the walk: a feature's values grouped by how the trees treat them.

A categorical split sends a value left when its category (the value truncated to a whole
number, as every library casts it) is in the node's set, a bit of :attr:`Ensemble.bitsets`;
a missing value goes the node's missing direction, a value outside the sets' range (below
``cat_low``, or past the last bit) where ``invalid_left`` says (scikit-learn: the missing
direction; LightGBM: right; XGBoost: left, as any value outside its node's set). With such a
feature j left free, its values cannot be ranked along thresholds; they are grouped instead
into classes ("levels") of values that go the same way at every node on j, which the model
therefore cannot tell apart. A walk keeps the set of levels that reach it as bits of one
int64 (at most :data:`MAX_LEVELS` levels), cut at a node on j into those its set sends left
and the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ensemble import Ensemble, Unsupported

#: Most levels of a categorical feature the walk holds (bits of one int64, sign bit aside).
MAX_LEVELS = 62


@dataclass(frozen=True)
class Levels:
    """How feature j's values are grouped: ``table[c]`` is the level of category c (0 up to
    the sets' range), ``invalid`` that of a value outside it; ``node_mask[node]`` has bit
    ``l`` set when level l goes left at that node on j; ``n`` levels in all."""

    table: np.ndarray
    invalid: int
    node_mask: np.ndarray
    n: int
    low: float  # a value above it is a category (:attr:`Ensemble.cat_low`)

    def of(self, values) -> np.ndarray:
        """The level of each value (-1: missing), of the shape of ``values``."""
        v = np.asarray(values, dtype=np.float64)
        nan = np.isnan(v)
        inside = ~nan & (v > self.low) & (v < self.table.size)
        out = np.full(v.shape, self.invalid, dtype=np.int64)
        out[inside] = self.table[v[inside].astype(np.int64)]
        out[nan] = -1
        return out

    @property
    def full(self) -> int:
        """Every level's bit."""
        return (1 << self.n) - 1


def goes_left(ens: Ensemble, nodes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each value (rows) goes left at each categorical node (columns), as the model
    decides: missing values their node's way, values outside the sets' range
    ``invalid_left``'s, any other by its category's bit."""
    assert ens.bitsets is not None and ens.cat_index is not None and ens.invalid_left is not None
    limit = ens.bitsets.shape[1] * 64
    v = np.asarray(values, dtype=np.float64)[:, None]
    nan = np.isnan(v)
    inside = ~nan & (v > ens.cat_low) & (v < limit)
    code = np.where(inside, v, 0).astype(np.int64)  # toward zero, as the libraries cast
    word = ens.bitsets[ens.cat_index[nodes][None, :], code // 64]
    bit = ((word >> (code % 64)) & 1) == 1
    out = np.where(inside, bit, ens.invalid_left[nodes][None, :])
    return np.where(nan, ens.missing_left[nodes][None, :], out)


def levels(ens: Ensemble, j: int) -> Levels:
    """Feature j's :class:`Levels` (kept on the ensemble), or :class:`Unsupported` when the
    trees tell more than :data:`MAX_LEVELS` groups of its values apart."""
    if j in ens._levels:
        return ens._levels[j]
    assert ens.bitsets is not None
    on_j = np.flatnonzero(ens.feature == j)
    limit = ens.bitsets.shape[1] * 64
    codes = np.append(np.arange(limit, dtype=np.float64), -1.0)  # every category, then one outside (below)
    left = goes_left(ens, on_j, codes)
    first, level = np.unique(left, axis=0, return_index=True, return_inverse=True)[1:]
    level = level.ravel()
    n = first.size
    if n > MAX_LEVELS:
        raise Unsupported(
            f"feature {j} has {n} groups of categories the trees tell apart (the walk holds {MAX_LEVELS})"
        )
    node_mask = np.zeros(ens.feature.size, dtype=np.int64)
    by_level = left[first]  # the decisions of each level's first category (levels x nodes)
    node_mask[on_j] = (by_level.astype(np.int64) << np.arange(n, dtype=np.int64)[:, None]).sum(axis=0)
    found = Levels(level[:limit], int(level[limit]), node_mask, n, ens.cat_low)
    ens._levels[j] = found
    return found
