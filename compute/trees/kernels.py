"""The compiled walk of numeric ensembles, cut in query positions (numba).

:mod:`.compiled` hands here the curves and lookups of an ensemble without categorical
splits whose trees are not too deep (:func:`takes`). A row's queries (a curve's grid, or
a PFI row's donor values) are sorted by their bin of j once, the missing ones first; the
walk then carries, instead of a range of bins, the range of those sorted positions reaching
a node: a node on j cuts it where its threshold falls among the queries, and a side no
query reaches is never walked. At a leaf, the range is two entries of a difference along
the sorted queries (one, at the first position, for a leaf reached by every query), summed
up once per row after the last tree: every query of a row costs one addition, not one test
per leaf reached.

Every row first descends each tree as ``predict`` does, a group of rows at a time and
without a branch per level (a leaf and a node on j are their own children), so the rows'
descents overlap in the processor; a tree that never splits on j ends there (one ordinary
prediction per row, the same for every query), and only a row stopped at a node on j is
walked on from it. Node records are packed (``meta``: feature, right, left, missing-left in
one int32 row) so a step reads one line; rows without a missing value (checked once per
block) descend without testing for one, a quarter fewer instructions a step. Blocks of
about a thousand rows (:data:`.compiled.KERNEL_ROWS`) keep their differences in the cache.
The sums equal :mod:`.walk`'s (the NumPy reference) up to the order of float64 additions.
"""

from __future__ import annotations

import weakref
from functools import cache
from typing import NamedTuple

import numpy as np

from .ensemble import Ensemble


class Packed(NamedTuple):
    """The ensemble's nodes as these kernels read them (a named tuple numba types)."""

    meta: np.ndarray  # int32 (nodes, 4): feature (-1: leaf), right, left (a leaf: itself), missing goes left
    threshold: np.ndarray
    value: np.ndarray
    column: np.ndarray
    roots: np.ndarray
    depth: np.ndarray  # per tree: its number of levels below the root
    node_cut: np.ndarray  # per node on j: its threshold's bin (per-row queries) or position (shared ones)
    split: np.ndarray  # int32 (nodes, 2): right and left child (meta's are the node itself on j)


class Queries(NamedTuple):
    """Each row's queries sorted by bin (one shared row when every row has the same ones)."""

    bins: np.ndarray  # int64 (rows or 1, queries): sorted bins, -1 (missing) first
    order: np.ndarray  # int64 (rows or 1, queries): the query at each sorted position
    n_nan: np.ndarray  # int64 (rows or 1,): how many are missing


@cache
def _compiled() -> dict:
    """The kernels, compiled on first use (numba imported here, not with ``compute``)."""
    import numba

    def jit(fn, **options):
        try:
            return numba.njit(cache=True, nogil=True, **options)(fn)
        except RuntimeError:  # pragma: no cover - no writable cache folder
            return numba.njit(nogil=True, **options)(fn)

    env = globals()
    env["_walk"] = jit(_walk_py, inline="always")
    return {"sums": jit(_sums_py)}


def _walk_py(pk, x, root, cuts, stack, diff):  # pragma: no cover - compiled
    """One row (values ``x``) through the tree at ``root`` with j free, each leaf reached
    adding its value to ``diff`` (sorted positions + 1, outputs) over the positions
    ``lo..hi - 1`` of the sorted queries that reach it. ``cuts``: the row's sorted bins
    (empty: ``node_cut`` holds positions already). ``stack[0]`` = (j, first non-missing
    position, number of queries)."""
    meta, threshold, node_cut, value, column = pk.meta, pk.threshold, pk.node_cut, pk.value, pk.column
    j, first, n_q, width = stack[0, 0], stack[0, 1], stack[0, 2], value.shape[1]
    top = 1
    stack[1, 0], stack[1, 1], stack[1, 2], stack[1, 3] = root, first, n_q, 1
    while top >= 1:
        node, lo, hi, nan = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        top -= 1
        while True:
            f = meta[node, 0]
            if f < 0:
                c0 = column[node]
                if nan == 1 and lo == first and hi == n_q:  # every query: at the first position
                    for c in range(width):
                        diff[0, c0 + c] += value[node, c]
                    break
                if lo < hi:
                    for c in range(width):
                        diff[lo, c0 + c] += value[node, c]
                        diff[hi, c0 + c] -= value[node, c]
                if nan == 1 and first > 0:
                    for c in range(width):
                        diff[0, c0 + c] += value[node, c]
                        diff[first, c0 + c] -= value[node, c]
                break
            if f == j:  # both ways: left keeps the positions up to the cut, right those after
                if cuts.size == 0:
                    p = node_cut[node]
                else:
                    k, p = node_cut[node], 0
                    for q in range(cuts.size):
                        p += 1 if cuts[q] <= k else 0
                to_left = meta[node, 3] == 1
                r_lo, r_nan = max(lo, p), 0 if to_left else nan
                if r_lo < hi or (r_nan == 1 and first > 0):
                    top += 1
                    stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = pk.split[node, 0], r_lo, hi, r_nan
                hi, nan = min(hi, p), nan if to_left else 0
                if lo >= hi and (nan == 0 or first == 0):
                    break
                node = pk.split[node, 1]
            else:  # as predict, without a branch: right child in column 1, left in 2
                v = x[f]
                go = (v <= threshold[node]) | (np.isnan(v) & (meta[node, 3] == 1))
                node = meta[node, 1 + go]


#: What :func:`_sums_py` calls: the compiled ``_walk_py`` once :func:`_compiled` ran.
_walk = _walk_py


def _sums_py(pk, j, X, qs, out, missing):  # pragma: no cover - compiled
    """Rows x queries sums (``out``, in the queries' own order) of rows ``X``: tree by tree
    (one tree's nodes stay in the cache for every row), then each row's difference summed
    along its sorted queries. A tree's rows first descend as ``predict`` does, ``GROUP`` at
    a time and without a branch per level (a leaf is its own child, a node on j too), so
    their descents overlap in the processor; those stopped at a node on j walk on from it.
    ``missing``: whether ``X`` has a missing value (without, a step skips its test)."""
    roots, depth, meta, threshold, value, column = pk.roots, pk.depth, pk.meta, pk.threshold, pk.value, pk.column
    n_rows, n_q, n_out, width = X.shape[0], out.shape[1], out.shape[2], value.shape[1]
    shared = qs.bins.shape[0] == 1
    size = 2
    for t in range(roots.size):  # the largest tree's nodes + 2 bound the stack
        size = max(size, (roots[t + 1] if t + 1 < roots.size else meta.shape[0]) - roots[t] + 2)
    stack = np.empty((size, 4), dtype=np.int64)
    no_cuts = np.empty(0, dtype=np.int64)
    diff = np.zeros((n_rows, n_q + 1, n_out))
    at = np.empty(GROUP, dtype=np.int64)
    for t in range(roots.size):
        for i0 in range(0, n_rows, GROUP):
            g = min(GROUP, n_rows - i0)
            at[:g] = roots[t]
            for _ in range(depth[t]):  # as deep as the tree: a stopped row stays where it is
                if missing:
                    for r in range(g):
                        node = at[r]
                        v = X[i0 + r, max(meta[node, 0], 0)]
                        go = (v <= threshold[node]) | (np.isnan(v) & (meta[node, 3] == 1))
                        at[r] = meta[node, 1 + go]
                else:  # no missing value in X: one comparison a step (a quarter less time)
                    for r in range(g):
                        node = at[r]
                        at[r] = meta[node, 1 + (X[i0 + r, max(meta[node, 0], 0)] <= threshold[node])]
            for r in range(g):
                node, i = at[r], i0 + r
                if meta[node, 0] < 0:  # reached whatever j is: the same for every query
                    for c in range(width):
                        diff[i, 0, column[node] + c] += value[node, c]
                    continue
                q = 0 if shared else i
                stack[0, 0], stack[0, 1], stack[0, 2] = j, qs.n_nan[q], n_q
                _walk(pk, X[i], node, no_cuts if shared else qs.bins[q], stack, diff[i])
    for i in range(n_rows):
        q = 0 if shared else i
        for c in range(n_out):
            running = 0.0
            for p in range(n_q):
                running += diff[i, p, c]
                out[i, qs.order[q, p], c] = running


#: Rows descending a tree together (their steps interleaved).
GROUP = 16


def packed(ens: Ensemble, j: int, node_bin: np.ndarray, positions: np.ndarray | None) -> Packed:
    """The ensemble packed for a walk with j free: ``node_bin`` its nodes' bins of j;
    ``positions`` (shared queries: their sorted bins) turns them into cut positions."""
    own = np.arange(ens.feature.size)
    leaf = ens.feature < 0
    right, left = np.where(leaf, own, ens.right), np.where(leaf, own, ens.left)
    on = ens.feature == j  # a node on j is its own child too: a plain descent stops there
    meta = np.stack([ens.feature, np.where(on, own, right), np.where(on, own, left), ens.missing_left], axis=1)
    cut = node_bin if positions is None else np.searchsorted(positions, node_bin, side="right")
    return Packed(
        np.ascontiguousarray(meta, dtype=np.int32),
        ens.threshold,
        ens.value,
        ens.column,
        ens.roots.astype(np.int64),
        _depths(ens),
        np.asarray(cut, dtype=np.int64),
        np.stack([ens.right, ens.left], axis=1).astype(np.int32),
    )


def sorted_queries(bins: np.ndarray) -> Queries:
    """Each row's query bins (rows x queries, -1: missing) sorted, with their order."""
    order = np.argsort(bins, axis=1, kind="stable")
    ranked = np.take_along_axis(bins, order, axis=1)
    return Queries(
        np.ascontiguousarray(ranked, dtype=np.int64),
        np.ascontiguousarray(order, dtype=np.int64),
        (ranked < 0).sum(axis=1).astype(np.int64),
    )


def sums(pk: Packed, j: int, X: np.ndarray, qs: Queries, out: np.ndarray) -> None:
    """``out`` (rows x queries x outputs) := the sums of rows ``X`` with j at each query."""
    _compiled()["sums"](pk, np.int64(j), X, qs, out, bool(np.isnan(X).any()))


#: Deepest trees these kernels take: curves (a grid shared by the rows) and lookups (each
#: row's own queries). Every row of a group descends as deep as the deepest of them, and a
#: lookup counts its row's queries at each node on j, which deep, uneven trees (full-depth
#: forests; lookups: HistGradientBoosting and LightGBM too, their leaf-wise trees 17-18
#: deep) repay less than the general walk (benchmarks/speed_trees.py).
MAX_DEPTH = {"curves": 20, "lookups": 8}
_DEPTHS: dict[int, np.ndarray] = {}


def takes(ens: Ensemble, kind: str) -> bool:
    """Whether these kernels take ``ens`` for ``kind`` ("curves" or "lookups"): its deepest
    tree within :data:`MAX_DEPTH`."""
    return int(_depths(ens).max(initial=0)) <= MAX_DEPTH[kind]


def _depths(ens: Ensemble) -> np.ndarray:
    """Each tree's depth (levels of splits below its root; read once per ensemble)."""
    key = id(ens)
    if key not in _DEPTHS:
        _DEPTHS[key] = _read_depths(ens)
        weakref.finalize(ens, _DEPTHS.pop, key, None)
    return _DEPTHS[key]


def _read_depths(ens: Ensemble) -> np.ndarray:
    level = np.zeros(ens.feature.size, dtype=np.int64)
    at = ens.roots.astype(np.int64)
    while at.size:
        split = at[ens.feature[at] >= 0]
        children = np.concatenate([ens.left[split], ens.right[split]]).astype(np.int64)
        level[children] = np.concatenate([level[split], level[split]]) + 1
        at = children
    tree = np.searchsorted(ens.roots, np.arange(ens.feature.size), side="right") - 1
    depth = np.zeros(ens.roots.size, dtype=np.int64)
    np.maximum.at(depth, tree, level)
    return depth
