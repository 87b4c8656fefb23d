"""The walk compiled with numba: one depth-first walk per row and tree, j left free.

Same arithmetic as :mod:`.walk` (the NumPy reference, kept for a machine without numba):
at a node on another feature the row goes where ``x <= threshold`` (missing values:
``missing_left``) sends it; at a node on j it goes both ways, each side keeping its range of
j's threshold ranks ("bins"), so a leaf is reached for the values whose bin lies in its
range (and for a missing j when the flag says so). The row's sums are then a difference
along the sorted grid (curves) or a test of each of its own queries (PFI's donors), written
straight into the result: no path arrays, no Python loop per row.

Compiled once per machine (a few seconds; numba's cache on disk next to this file, or its
user cache), loaded in about 0.3 s. Imported only by the walk's first use
(:mod:`.walk`, where ``COMPILED`` says whether numba is installed), so ``import compute``
does not import numba; the dashboard's server loads it before its jobs fork (:func:`warm`).
"""

from __future__ import annotations

import types
from dataclasses import dataclass, replace
from functools import cache
from typing import NamedTuple

import numpy as np

from . import kernels, masks
from .blocks import blocks, each_block
from .categories import levels
from .read import Ensemble, read_model


class _Nodes(NamedTuple):
    """The ensemble's node arrays as the kernels read them (a named tuple numba types)."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    missing_left: np.ndarray
    value: np.ndarray
    column: np.ndarray
    roots: np.ndarray
    node_bin: np.ndarray  # per node on j, its threshold's rank among j's (categorical j: its left levels' bits)
    node_bin2: np.ndarray  # the same for k (a pair's second feature; else unused)
    cat_index: np.ndarray  # categorical splits (see .categories): the node's row of bitsets, -1 numeric
    bitsets: np.ndarray
    invalid_left: np.ndarray
    cat_low: np.ndarray  # [Ensemble.cat_low]


@cache
def _kernels() -> dict:
    """The kernels, compiled: numba is imported here, on the walk's first use, not with
    ``compute``. Each is built twice (:func:`_variant`): for ensembles without categorical
    splits (``HAS_CAT`` False, a constant to numba, so their test is compiled away: a test
    read at run time cost the numeric walk 40 %) and with them (key suffix ``"_cat"``).
    Compiled code is cached on disk (next to this file, else numba's user cache; per
    process where neither is writable)."""
    import numba

    def jit(fn, **options):
        try:
            return numba.njit(cache=True, nogil=True, **options)(fn)
        except RuntimeError:  # pragma: no cover - no writable cache folder
            return numba.njit(nogil=True, **options)(fn)

    kernels = {}
    for categorical in (False, True):
        tag = "_cat" if categorical else ""
        env: dict = {"HAS_CAT": categorical}
        # inlined into the kernels: a call per (row, tree) would copy the node arrays' headers
        env["_in_set"] = jit(_variant(_in_set_py, f"_in_set{tag}", env), inline="always")
        env["_reach"] = jit(_variant(_reach_py, f"_reach{tag}", env), inline="always")
        env["_reach2"] = jit(_variant(_reach2_py, f"_reach2{tag}", env), inline="always")
        for name, fn in (("curves", _curves), ("lookups", _lookups), ("pairs", _pairs)):
            kernels[name + tag] = jit(_variant(fn, f"{fn.__name__}{tag}", env))
    return kernels


def _variant(fn, name: str, env: dict):
    """``fn`` under another name (numba caches each under its own) whose globals ``env``
    overrides: the compiled helpers it calls and the constant ``HAS_CAT``."""
    code = fn.__code__.replace(co_name=name, co_qualname=name)
    out = types.FunctionType(code, {**fn.__globals__, **env}, name)
    out.__qualname__ = name
    return out


def _kernel(ens: Ensemble, name: str):
    return _kernels()[name + ("_cat" if ens.categorical else "")]


#: Whether the walk may meet categorical splits: a constant of each compiled variant (see
#: :func:`_kernels`); the Python functions below read this one.
HAS_CAT = True


def _reach_py(nodes, free, x, root, stack, found):  # pragma: no cover - compiled
    """The leaves one row (values ``x``) reaches in the tree at ``root`` with j free, written
    to ``found`` as (leaf, lo, hi, missing) rows; returns how many. ``free``: see :func:`_free`.
    A categorical j keeps the bits of its levels in ``lo`` (``hi`` unused)."""
    feature, threshold, left, right = nodes.feature, nodes.threshold, nodes.left, nodes.right
    missing_left, node_bin = nodes.missing_left, nodes.node_bin
    j, n_bins, cat_j = free[0], free[1], free[6]
    count, top = 0, 0
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = root, free[7], n_bins, 1
    while top >= 0:
        node, lo, hi, nan = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        top -= 1
        while True:
            f = feature[node]
            if f < 0:
                found[count, 0], found[count, 1], found[count, 2], found[count, 3] = node, lo, hi, nan
                count += 1
                break
            if f == j and cat_j == 1:  # both ways: left keeps the levels its set holds, right the others
                m, to_left = node_bin[node], missing_left[node]
                r_lo, r_nan = lo & ~m, 0 if to_left else nan
                if r_lo != 0 or r_nan == 1:
                    top += 1
                    stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = right[node], r_lo, hi, r_nan
                lo, nan = lo & m, nan if to_left else 0
                if lo == 0 and nan == 0:
                    break
                node = left[node]
            elif f == j:  # both ways: left keeps bins lo..min(hi, k), right max(lo, k + 1)..hi
                k, to_left = node_bin[node], missing_left[node]
                r_lo, r_nan = max(lo, k + 1), 0 if to_left else nan
                if r_lo <= hi or r_nan == 1:
                    top += 1
                    stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = right[node], r_lo, hi, r_nan
                hi, nan = min(hi, k), nan if to_left else 0
                if lo > hi and nan == 0:
                    break
                node = left[node]
            elif np.isnan(x[f]):
                node = left[node] if missing_left[node] else right[node]
            elif HAS_CAT and nodes.cat_index[node] >= 0:
                node = left[node] if _in_set(nodes, node, x[f]) else right[node]
            else:
                node = left[node] if x[f] <= threshold[node] else right[node]
    return count


def _in_set_py(nodes, node, v):  # pragma: no cover - compiled
    """Whether a (non-missing) value goes left at a categorical node: its category's bit, or
    ``invalid_left`` outside the sets' range (int64 words shifted arithmetically: bit 63 too)."""
    if not v > nodes.cat_low[0] or v >= nodes.bitsets.shape[1] * 64:
        return nodes.invalid_left[node]
    c = np.int64(v)
    return ((nodes.bitsets[nodes.cat_index[node], c >> 6] >> (c & 63)) & 1) == 1


def _reach2_py(nodes, free, x, root, stack, found):  # pragma: no cover - compiled
    """As ``_reach_py`` with two features free (a pair's H statistic): the leaves one row
    (values ``x``) reaches in the tree at ``root`` with j and k free,
    written to ``found`` as rows (leaf, lo, hi, missing, lo2, hi2, missing2): the bins of j
    and of k reaching it and whether a missing value does; returns how many. ``free`` = [j,
    j's number of bins, the largest tree's size, k, k's number of bins]. A kernel of its own:
    its state in an array costs the one-feature walk 2.5x, so that one keeps scalars."""
    feature, threshold, left, right = nodes.feature, nodes.threshold, nodes.left, nodes.right
    missing_left = nodes.missing_left
    j, k = free[0], free[3]
    count, top = 0, 0
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = root, free[7], free[1], 1
    stack[0, 4], stack[0, 5], stack[0, 6] = free[9], free[4], 1
    cur = np.empty(7, dtype=np.int64)
    while top >= 0:
        cur[:] = stack[top]
        top -= 1
        while True:
            node = cur[0]
            f = feature[node]
            if f < 0:
                found[count] = cur
                count += 1
                break
            if f == j or f == k:  # both ways: left keeps bins lo..min(hi, t), right max(lo, t + 1)..hi
                o = 1 if f == j else 4
                t = nodes.node_bin[node] if f == j else nodes.node_bin2[node]
                lo, hi, nan, to_left = cur[o], cur[o + 1], cur[o + 2], missing_left[node]
                categorical = free[6] == 1 if f == j else free[8] == 1  # levels' bits in lo (see _reach_py)
                r_lo = lo & ~t if categorical else max(lo, t + 1)
                r_nan = 0 if to_left else nan
                if (r_lo != 0 if categorical else r_lo <= hi) or r_nan == 1:
                    top += 1
                    stack[top] = cur
                    stack[top, 0], stack[top, o], stack[top, o + 2] = right[node], r_lo, r_nan
                if categorical:
                    cur[o] = lo & t
                else:
                    cur[o + 1] = min(hi, t)
                cur[o + 2] = nan if to_left else 0
                if (cur[o] == 0 if categorical else cur[o] > cur[o + 1]) and cur[o + 2] == 0:
                    break
                cur[0] = left[node]
            elif np.isnan(x[f]):
                cur[0] = left[node] if missing_left[node] else right[node]
            elif HAS_CAT and nodes.cat_index[node] >= 0:
                cur[0] = left[node] if _in_set(nodes, node, x[f]) else right[node]
            else:
                cur[0] = left[node] if x[f] <= threshold[node] else right[node]
    return count


#: What the kernels call: in each compiled variant, the compiled ``_reach_py`` / ``_reach2_py``
#: / ``_in_set_py`` of the same variant (:func:`_kernels`).
_reach = _reach_py
_reach2 = _reach2_py
_in_set = _in_set_py


def _curves(nodes, free, X, start, out, at_nan):  # pragma: no cover - compiled
    """Rows x sorted grid sums (``out``) and the sums at a missing j (``at_nan``): a leaf
    reached whatever j is adds to the row's constant, another to the grid positions
    ``start[lo]:start[hi + 1]`` of its bins (as a difference, summed along the grid)."""
    value, column, roots = nodes.value, nodes.column, nodes.roots
    n_bins, size, full = free[1], free[2], free[7]  # locals: a load per use otherwise (out may alias)
    n_rows, m, n_out, width = X.shape[0], out.shape[1], out.shape[2], value.shape[1]
    stack, found = np.empty((size, 4), dtype=np.int64), np.empty((size, 4), dtype=np.int64)
    const, nan_sum = np.zeros((n_rows, n_out)), np.zeros((n_rows, n_out))
    diff = np.zeros((n_rows, m + 1, n_out))
    for t in range(roots.size):  # tree by tree: one tree's nodes stay in the cache for every row
        for i in range(n_rows):
            for e in range(_reach(nodes, free, X[i], roots[t], stack, found)):
                leaf, lo, hi, nan = found[e, 0], found[e, 1], found[e, 2], found[e, 3]
                c0 = column[leaf]
                if lo == full and hi == n_bins and nan == 1:
                    for c in range(width):
                        const[i, c0 + c] += value[leaf, c]
                    continue
                a, b = start[lo], start[hi + 1] if lo <= hi else start[lo]
                for c in range(width if a < b else 0):
                    diff[i, a, c0 + c] += value[leaf, c]
                    diff[i, b, c0 + c] -= value[leaf, c]
                for c in range(width if nan == 1 else 0):
                    nan_sum[i, c0 + c] += value[leaf, c]
    for i in range(n_rows):
        for c in range(n_out):
            running = const[i, c]
            for p in range(m):
                running += diff[i, p, c]
                out[i, p, c] = running
            at_nan[i, c] = const[i, c] + nan_sum[i, c]


def _lookups(nodes, free, X, bins, out):  # pragma: no cover - compiled
    """Rows x queries sums: a leaf reached whatever j is adds to every query of its row,
    another to the queries whose bin it spans (a categorical j: whose level it holds; a
    missing query, bin -1: if missing reaches it)."""
    value, column, roots = nodes.value, nodes.column, nodes.roots
    n_bins, size, full, cat_j = free[1], free[2], free[7], free[6]  # locals, as in _curves
    n_rows, n_q, n_out, width = X.shape[0], out.shape[1], out.shape[2], value.shape[1]
    stack, found = np.empty((size, 4), dtype=np.int64), np.empty((size, 4), dtype=np.int64)
    const = np.zeros((n_rows, n_out))
    out[:] = 0.0
    for t in range(roots.size):  # tree by tree, as in _curves
        for i in range(n_rows):
            for e in range(_reach(nodes, free, X[i], roots[t], stack, found)):
                leaf, lo, hi, nan = found[e, 0], found[e, 1], found[e, 2], found[e, 3]
                c0 = column[leaf]
                if lo == full and hi == n_bins and nan == 1:
                    for c in range(width):
                        const[i, c0 + c] += value[leaf, c]
                    continue
                missing = 1.0 if nan == 1 else 0.0
                for c in range(width):  # branch-free over the queries (a branch each mispredicts)
                    v = value[leaf, c]
                    if cat_j == 1:  # a categorical j: the query's level is one of the leaf's bits
                        for q in range(n_q):
                            b = bins[i, q]
                            w = missing if b < 0 else float((lo >> max(b, 0)) & 1)
                            out[i, q, c0 + c] += w * v
                        continue
                    for q in range(n_q):
                        b = bins[i, q]
                        w = missing if b < 0 else (1.0 if lo <= b <= hi else 0.0)
                        out[i, q, c0 + c] += w * v
    for i in range(n_rows):
        for q in range(n_q):
            for c in range(n_out):
                out[i, q, c] += const[i, c]


def _pairs(nodes, free, X, queries, start, out):  # pragma: no cover - compiled
    """Rows x queries sums with j and k at the bins ``queries[0, q]``, ``queries[1, q]`` (the
    same for every row; -1: missing), the queries sorted by j's bin: ``start[b + 1]`` is the
    first query whose bin of j is at least b, so a leaf looks only at the queries its range
    of j holds (those at a missing j if missing reaches it) and tests their k."""
    value, column, roots = nodes.value, nodes.column, nodes.roots
    size, n_rows, width, cat_j, cat_k = free[2], X.shape[0], value.shape[1], free[6], free[8]
    stack, found = np.empty((size, 7), dtype=np.int64), np.empty((size, 7), dtype=np.int64)  # 7: see _reach2_py
    out[:] = 0.0
    for t in range(roots.size):
        for i in range(n_rows):
            for e in range(_reach2(nodes, free, X[i], roots[t], stack, found)):
                leaf, lo, hi, c0 = found[e, 0], found[e, 1], found[e, 2], column[found[e, 0]]
                for part in range(2):  # the queries at a missing j (first), then those in lo..hi
                    if part == 0:
                        first, stop = start[0], start[1] if found[e, 3] == 1 else start[0]
                    elif cat_j == 1:  # a categorical j: every query at a value, tested on its level
                        first, stop = start[1], start[start.size - 1]
                    else:
                        first, stop = start[lo + 1], start[hi + 2] if lo <= hi else start[lo + 1]
                    for q in range(first, stop):
                        if part == 1 and cat_j == 1 and (lo >> queries[0, q]) & 1 == 0:
                            continue
                        b = queries[1, q]
                        if b < 0:
                            if found[e, 6] == 0:
                                continue
                        elif cat_k == 1:
                            if (found[e, 4] >> b) & 1 == 0:
                                continue
                        elif not found[e, 4] <= b <= found[e, 5]:
                            continue
                        for c in range(width):
                            out[i, q, c0 + c] += value[leaf, c]


@dataclass(frozen=True)
class _Free:
    """What the walk knows of a free feature j: its values' ``bins`` (-1: missing; a
    categorical j: levels, :mod:`.categories`), per node on j ``node_bin`` (its threshold's
    rank; categorical: its left levels' bits), ``n_bins`` and the walk's start: ``full``
    (0, or every level's bit)."""

    bins: np.ndarray
    node_bin: np.ndarray
    n_bins: int
    categorical: bool
    full: int


def value_bins(ens: Ensemble, j: int, values: np.ndarray) -> np.ndarray:
    """Feature j's bins of ``values`` (as the model compares them; any shape): the rank
    among j's thresholds, -1 for a missing value; a categorical j: its levels. Two values
    walk the same paths of every tree exactly when their bins are equal."""
    compared = ens.compared(values)
    if ens.is_categorical(j):
        return levels(ens, j).of(compared)
    thresholds, _ = ens.bins(j)
    nan = np.isnan(compared)
    return np.where(nan, -1, np.searchsorted(thresholds, np.where(nan, 0.0, compared))).astype(np.int64)


def _bins(ens: Ensemble, j: int, values: np.ndarray, bins: np.ndarray | None = None) -> _Free:
    """Feature j's bins of ``values`` (``bins``: already found, :func:`value_bins`) and its
    nodes' ranks."""
    if bins is None:
        bins = value_bins(ens, j, values)
    if ens.is_categorical(j):
        found = levels(ens, j)
        return _Free(bins, found.node_mask, found.n, True, found.full)
    thresholds, node_bin = ens.bins(j)
    return _Free(bins, node_bin, thresholds.size, False, 0)


def _nodes(ens: Ensemble, node_bin: np.ndarray, node_bin2: np.ndarray | None = None) -> _Nodes:
    cat_index, bitsets, invalid_left = ens.cat_index, ens.bitsets, ens.invalid_left
    if cat_index is None or bitsets is None or invalid_left is None:  # no categorical split: never read
        cat_index, bitsets, invalid_left = ens.roots[:1] * 0 - 1, np.zeros((1, 1), dtype=np.int64), ens.missing_left
    return _Nodes(
        ens.feature,
        ens.threshold,
        ens.left,
        ens.right,
        ens.missing_left,
        ens.value,
        ens.column,
        ens.roots,
        node_bin,
        node_bin if node_bin2 is None else node_bin2,
        cat_index,
        bitsets,
        invalid_left,
        np.array([ens.cat_low]),
    )


def _free(ens: Ensemble, j: int, first: _Free, second: tuple[int, _Free | None] = (-2, None)) -> np.ndarray:
    """[j, its number of bins, the largest tree's node count + 1 (bounds a walk's stack and
    leaves), k (-2: none), k's number of bins, whether any split is categorical, whether j
    is, j's start (0, or its levels' bits), whether k is, k's start]."""
    size = np.diff(np.append(ens.roots, ens.feature.size)).max(initial=0) + 1
    k, other = second
    k_bins, k_cat, k_full = (0, 0, 0) if other is None else (other.n_bins, int(other.categorical), other.full)
    has_cat = int(ens.categorical)
    return np.array(
        [j, first.n_bins, size, k, k_bins, has_cat, int(first.categorical), first.full, k_cat, k_full], dtype=np.int64
    )


def pair_sums(ens: Ensemble, X: np.ndarray, j: int, k: int, values: np.ndarray) -> np.ndarray:
    """Sum of leaf values of each row of ``X`` with j := ``values[0, q]`` and k :=
    ``values[1, q]`` for each q (shape rows x queries x outputs): one walk per row and tree
    with both free (Friedman's H of a pair: its distinct value pairs and its 2-D grid)."""
    on_j, on_k = _bins(ens, j, values[0]), _bins(ens, k, values[1])
    order = np.argsort(on_j.bins, kind="stable")  # by j's bin, the missing ones (-1) first
    queries = np.ascontiguousarray(np.array([on_j.bins, on_k.bins], dtype=np.int64)[:, order])
    start = np.searchsorted(queries[0], np.arange(-1, on_j.n_bins + 2), side="left").astype(np.int64)
    nodes, free = _nodes(ens, on_j.node_bin, on_k.node_bin), _free(ens, j, on_j, (k, on_k))
    found = np.empty((X.shape[0], queries.shape[1], ens.n_outputs))
    X = np.ascontiguousarray(X, dtype=np.float64)
    kernel = _kernel(ens, "pairs")
    each_block(
        blocks(X.shape[0], queries.shape[1] * ens.n_outputs),
        lambda a, b: kernel(nodes, free, X[a:b], queries, start, found[a:b]),
    )
    out = np.empty_like(found)
    out[:, order] = found
    return out


def warm() -> None:
    """Load (or compile) the kernels now, e.g. before a server forks its jobs, so no job pays
    for it: one call of each on a two-leaf tree (the types every model's arrays have), with a
    numeric and with a categorical split (both variants)."""
    from sklearn.tree import DecisionTreeRegressor

    rows = np.array([[0.0, 1.0], [1.0, 0.0]])
    numeric = read_model(DecisionTreeRegressor(max_depth=1).fit(rows, [0.0, 1.0]))
    split = numeric.feature >= 0  # the same tree with its split made categorical: the other variant
    categorical = replace(
        numeric,
        cat_index=np.where(split, 0, -1).astype(np.int32),
        bitsets=np.ones((1, 1), dtype=np.int64),
        invalid_left=numeric.missing_left.copy(),
        _levels={},
    )
    for ens in (numeric, categorical):
        curve_sums(ens, rows, 0, np.array([0.0, np.nan]))
        curve_sums(ens, rows, 1, np.array([0.0, np.nan]))
        lookup_sums(ens, rows, 0, rows)
        pair_sums(ens, rows, 0, 1, rows)


#: Most rows of a block of :mod:`.kernels` (whose per-row differences along the queries it
#: sums and whose rows it reads once per tree: 1,000 rows kept ICE 10 % and PFI 13 % faster
#: than 5,000 and 10,000 on XGBoost, benchmarks/speed_trees.py).
KERNEL_ROWS = 1024


def curve_sums(ens: Ensemble, X: np.ndarray, j: int, grid: np.ndarray) -> np.ndarray:
    """As :func:`.walk.curve_sums` (rows x grid x outputs), compiled. A categorical j's grid
    is looked up as every row's queries (its levels are not ranked along the grid)."""
    if ens.is_categorical(j):
        return lookup_sums(ens, X, j, np.broadcast_to(np.asarray(grid, dtype=np.float64), (X.shape[0], len(grid))))
    on_j = _bins(ens, j, grid)
    if NUMERIC and not ens.categorical and masks.takes(ens):  # small trees: bit masks (.masks)
        each = _each(X.shape[0], on_j.bins.size * ens.n_outputs)
        return masks.curve_sums(ens, X, j, on_j.node_bin, on_j.bins, each)[0]
    if NUMERIC and not ens.categorical and kernels.takes(ens, "curves"):
        return _numeric(ens, X, j, on_j, on_j.bins[None, :])
    finite = np.flatnonzero(on_j.bins >= 0)
    order = finite[np.argsort(on_j.bins[finite], kind="stable")]
    sorted_bins = on_j.bins[order]
    start = np.searchsorted(sorted_bins, np.arange(on_j.n_bins + 2), side="left").astype(np.int64)
    n = X.shape[0]
    on_grid = np.empty((n, order.size, ens.n_outputs))
    at_nan = np.empty((n, ens.n_outputs))
    X = np.ascontiguousarray(X, dtype=np.float64)
    nodes, free, kernel = _nodes(ens, on_j.node_bin), _free(ens, j, on_j), _kernel(ens, "curves")
    each_block(
        blocks(n, order.size * ens.n_outputs),
        lambda a, b: kernel(nodes, free, X[a:b], start, on_grid[a:b], at_nan[a:b]),
    )
    out = np.empty((n, len(grid), ens.n_outputs))
    out[:, order] = on_grid
    missing = np.flatnonzero(on_j.bins < 0)
    if missing.size:
        out[:, missing] = at_nan[:, None, :]
    return out


def curve_and_own_sums(
    ens: Ensemble, X: np.ndarray, j: int, grid: np.ndarray, *, raw: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`curve_sums` and each row's sums at its own values (rows x outputs): from the
    same pass where the bit masks (:mod:`.masks`) take the curves, else a lookup. ``raw``:
    ``X`` not yet :meth:`~.ensemble.Ensemble.compared` (the masks compare each block as
    they copy it: no copy of every row first)."""
    if own_in_pass(ens, j):
        on_j = _bins(ens, j, grid)
        each = _each(X.shape[0], on_j.bins.size * ens.n_outputs)
        return masks.curve_sums(ens, X, j, on_j.node_bin, on_j.bins, each, raw=raw)
    X = ens.compared(X) if raw else X
    return curve_sums(ens, X, j, grid), lookup_sums(ens, X, j, X[:, j : j + 1])[:, 0, :]


def own_in_pass(ens: Ensemble, j: int) -> bool:
    """Whether the bit masks (:mod:`.masks`) take j's curves (the own sums in the pass)."""
    return NUMERIC and not ens.categorical and not ens.is_categorical(j) and masks.takes(ens)


def _each(n: int, floats_per_row: int):
    """``each(rows, work)``: ``work(a, b)`` on blocks of at most ``rows`` of ``n`` rows."""
    return lambda rows, work: each_block(blocks(n, floats_per_row, rows), work)


def lookup_sums(
    ens: Ensemble, X: np.ndarray, j: int, queries: np.ndarray, bins: np.ndarray | None = None
) -> np.ndarray:
    """As :func:`.walk.lookup_sums` (rows x queries x outputs), compiled; ``bins``: the
    queries' :func:`value_bins` when already found."""
    on_j = _bins(ens, j, queries, bins)
    if own_in_pass(ens, j) and masks.takes(ens, masks.LOOKUP_LEAVES):
        each = _each(X.shape[0], queries.shape[1] * ens.n_outputs)
        return masks.lookup_sums(ens, X, (j, on_j.node_bin, on_j.n_bins), on_j.bins, each)
    if NUMERIC and not ens.categorical and kernels.takes(ens, "lookups"):
        return _numeric(ens, X, j, on_j, on_j.bins)
    out = np.empty((queries.shape[0], queries.shape[1], ens.n_outputs))
    X = np.ascontiguousarray(X, dtype=np.float64)
    nodes, free, kernel = _nodes(ens, on_j.node_bin), _free(ens, j, on_j), _kernel(ens, "lookups")
    each_block(
        blocks(X.shape[0], queries.shape[1] * ens.n_outputs),
        lambda a, b: kernel(nodes, free, X[a:b], np.ascontiguousarray(on_j.bins[a:b]), out[a:b]),
    )
    return out


#: Whether ensembles without categorical splits take :mod:`.kernels` (rows descending in
#: groups, then cut in query positions) where :func:`.kernels.takes` them; False: the
#: kernels above, as categorical ones do.
NUMERIC = True


def _numeric(ens: Ensemble, X: np.ndarray, j: int, on_j: _Free, bins: np.ndarray) -> np.ndarray:
    """The sums of an ensemble without categorical splits (:mod:`.kernels`): ``bins`` are
    each row's query bins (one shared row: a curve's grid)."""
    shared = bins.shape[0] == 1
    qs = kernels.sorted_queries(bins) if shared else None  # each row's own: sorted in its block, on its thread
    pk = kernels.packed(ens, j, on_j.node_bin, qs.bins[0] if qs is not None else None)
    n, n_q = X.shape[0], bins.shape[1]
    out = np.empty((n, n_q, ens.n_outputs))
    X = np.ascontiguousarray(X, dtype=np.float64)

    def block(a: int, b: int) -> None:
        kernels.sums(pk, j, X[a:b], qs if qs is not None else kernels.sorted_queries(bins[a:b]), out[a:b])

    each_block(blocks(n, n_q * ens.n_outputs, KERNEL_ROWS), block)
    return out
