"""Curves and lookups of small trees from bit masks of leaves, many rows at once (numba).

:mod:`.compiled` hands here the curves (a grid shared by the rows) of an ensemble without
categorical splits whose trees have at most 64 leaves each (the boosters: 31 leaves, or
depth 6). A tree's leaves are numbered left to right, one bit each of an int64. A node a
row goes right at rules out the leaves of its left subtree; the leaf the row reaches is the
lowest bit no such node ruled out: QuickScorer's exit leaf (Lucchese et al., SIGIR 2015,
Sec. 3: "the leftmost leaf not ruled out by a false node"), its proof unchanged when some
nodes' outcomes come from elsewhere. Here the row's own values decide every node on
another feature than j, and the grid decides the nodes on j: the grid's sorted positions
fall in stretches between the tree's cuts (and the missing grid values, when it has any),
every position of a stretch going the same way at every node on j, so each stretch has its
own mask (built once per feature and grid, :func:`tables`). A row's curve in a tree is then
one leaf per stretch: the lowest bit of its mask ANDed with the stretch's, added to the
stretch's positions as a difference (summed along the grid once, after the last tree).

The row's mask needs no branch: every node on another feature, in turn, ANDs each row of a
block (its values as columns, contiguous) with the node's mask or with all ones, which the
compiler turns into vector instructions over the rows. Measured on 100,000 x 50 rows, grid 50,
one thread: 2.6x (XGBoost, depth 6) to 4.6x (HistGradientBoosting, 31 leaves) faster than
the depth-first walk of :mod:`.kernels`, which keeps the trees of more leaves (forests).

The same pass gives each row's sums at its own value (the nodes on j decided by it: the
exact QuickScorer exit leaf), so a profile needs no model call for its rows' own values.
PFI's lookups (each row's own donors, :func:`lookup_sums`) take the masks on trees of at
most :data:`LOOKUP_LEAVES` leaves: the stretches are ranges of j's bins there, and a table
per tree names each bin's stretch.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np


class Masks(NamedTuple):
    """Per tree ``k``: its leaves ``leaf[leaf_off[k]:]`` by bit, its nodes on other features
    ``cond_*[cond_off[k]:cond_j[k]]`` (the bits their left subtree holds cleared in
    ``cond_mask``; its nodes on j follow, up to ``cond_off[k + 1]``: a row's own value) and
    its grid stretches ``iv_*[iv_off[k]:iv_off[k + 1]]`` (sorted positions ``lo..hi - 1``
    and the leaves the nodes on j leave them, ``iv_mask``)."""

    leaf_off: np.ndarray
    leaf: np.ndarray
    cond_off: np.ndarray
    cond_feature: np.ndarray
    cond_threshold: np.ndarray
    cond_missing_left: np.ndarray
    cond_mask: np.ndarray
    iv_off: np.ndarray
    iv_lo: np.ndarray
    iv_hi: np.ndarray
    iv_mask: np.ndarray
    cond_j: np.ndarray  # per tree: where its nodes on j start among its conds (after the others)


#: De Bruijn sequence for 64 bits: the lowest set bit b of a mask m is ``_LOWEST[((m & -m) *
#: DE_BRUIJN) >> 58 & 63]`` (a multiply and a load; numba has no count-trailing-zeros).
DE_BRUIJN = 0x03F79D71B4CB0A89
LOWEST = np.zeros(64, dtype=np.int64)
for _bit in range(64):
    LOWEST[(((1 << _bit) * DE_BRUIJN) % (1 << 64)) >> 58] = _bit
#: Most leaves a subtree may have to take the masks (one bit each in an int64).
MAX_LEAVES = 64


def jit(fn, **options):
    """``fn`` compiled by numba (imported here, on the walk's first use), cached on disk where
    a folder is writable, releasing the GIL."""
    import numba

    try:
        return numba.njit(cache=True, nogil=True, **options)(fn)
    except RuntimeError:  # pragma: no cover - no writable cache folder
        return numba.njit(nogil=True, **options)(fn)


@cache
def compiled() -> dict:
    """The compiled functions: ``sums`` (a block of rows) and ``tables``."""
    env = globals()
    env["_span"] = jit(_span_py, inline="always")
    env["_number"] = jit(_number_py)
    env["_add"] = jit(_add_py)
    env["_add_leaves"] = jit(_add_leaves_py)
    env["_cond"] = jit(_cond_py)
    env["_and_conds"] = jit(_and_conds_py)
    env["_columns"] = jit(_columns_py)
    return {"sums": jit(_sums_py), "lookups": jit(_lookups_py), "tables": jit(_tables_py)}


#: Rows of a block (their columns and differences, about 200 kB, stay in the cache).
ROWS = 256


#: Whether curves take these masks where :func:`takes` allows (False: :mod:`.kernels`).
ENABLED = True


def takes(ens, most: int = MAX_LEAVES) -> bool:
    """Whether every tree of ``ens`` has at most ``most`` leaves (and :data:`ENABLED`)."""
    if not ENABLED:
        return False
    leaves = np.add.reduceat((np.asarray(ens.feature) < 0).astype(np.int64), np.asarray(ens.roots))
    return bool(ens.roots.size) and int(leaves.max()) <= min(most, MAX_LEAVES)


def curve_sums(
    ens, X: np.ndarray, j: int, node_bin: np.ndarray, grid_bins: np.ndarray, each, *, raw: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Rows x grid x outputs sums of ``X`` with j at each grid value (its bins ``grid_bins``;
    ``node_bin``: the bins of the nodes on j), and each row's sums at its own value (rows x
    outputs, the same pass: its nodes on j too): ``each(rows, work)`` runs ``work(a, b)`` on
    blocks of at most ``rows`` rows (:func:`.blocks.each_block`). ``raw``: ``X`` is not
    yet :meth:`~.ensemble.Ensemble.compared` (each block is, as it is copied)."""
    order = np.argsort(grid_bins, kind="stable").astype(np.int64)
    sorted_bins = grid_bins[order]
    cut = np.where(ens.feature == j, np.searchsorted(sorted_bins, node_bin, side="right"), 0)
    mk = tables(ens, j, cut, int((sorted_bins < 0).sum()), sorted_bins.size)
    out = np.empty((X.shape[0], sorted_bins.size, ens.n_outputs))
    own = np.zeros((X.shape[0], ens.n_outputs))
    X = np.asarray(X, dtype=np.float64)  # either memory order: each block is copied by feature
    kernel = compiled()["sums"]
    rounded = raw and ens.float32
    each(ROWS, lambda a, b: kernel(mk, ens.value, ens.column, (X[a:b], rounded), order, (out[a:b], own[a:b])))
    return out, own


#: Most leaves of a tree whose lookups (PFI's donors) take these masks (0: none; else
#: :mod:`.kernels`): with ten queries a row, a mask's condition per node pays off on the
#: histogram boosters' 31 leaves (PFI 20 % faster, 20,000 x 50) but not on XGBoost's
#: 64 (60 % slower than the pruned walk).
LOOKUP_LEAVES = 32


def lookup_sums(ens, X: np.ndarray, free: tuple, bins: np.ndarray, each) -> np.ndarray:
    """Rows x queries x outputs sums of ``X`` with j at each row's own queries (their bins
    ``bins``, -1 missing; ``free`` = (j, the bins of the nodes on j, j's number of bins)):
    the stretches are ranges of bins here, shifted by one so a missing query (position 0) has
    its own, and a table per tree gives each position's stretch (:func:`_lookups_py`)."""
    j, node_bin, n_bins = free
    width = n_bins + 2
    mk = tables(ens, j, np.where(ens.feature == j, node_bin + 2, 0), 1, width)
    stretch = np.repeat(np.arange(mk.iv_lo.size), mk.iv_hi - mk.iv_lo).reshape(-1, width)  # trees x positions
    out = np.empty((X.shape[0], bins.shape[1], ens.n_outputs))
    X, bins = np.asarray(X, dtype=np.float64), np.ascontiguousarray(bins, dtype=np.int64)
    kernel = compiled()["lookups"]
    each(ROWS, lambda a, b: kernel(mk, ens.value, ens.column, X[a:b], (bins[a:b], stretch), out[a:b]))
    return out


def tables(ens, j: int, node_cut: np.ndarray, first: int, n_q: int) -> Masks:
    """The masks of ``ens``'s trees with j free, for a grid of ``n_q``
    sorted positions (the missing ones ``0..first - 1``) cut by the nodes on j at
    ``node_cut``."""
    tree = (
        np.asarray(ens.feature, dtype=np.int64),
        np.asarray(ens.left, dtype=np.int64),
        np.asarray(ens.right, dtype=np.int64),
        np.asarray(ens.missing_left, dtype=np.bool_),
        np.asarray(ens.roots, dtype=np.int64),
    )
    threshold = np.asarray(ens.threshold, dtype=np.float64)
    cut = np.asarray(node_cut, dtype=np.int64)
    out, counts = compiled()["tables"](tree, threshold, np.int64(j), cut, np.int64(first), np.int64(n_q))
    k, n_leaves, n_cond, n_iv = (int(c) for c in counts)
    ends = (k + 1, n_leaves, k + 1, n_cond, n_cond, n_cond, n_cond, k + 1, n_iv, n_iv, n_iv, k)
    return Masks(*(np.ascontiguousarray(a[:end]) for a, end in zip(out, ends)))


def _span_py(lo, hi):  # pragma: no cover - compiled
    """The bits lo..hi - 1 of an int64 (hi up to 64)."""
    upper = np.int64(-1) if hi >= 64 else (np.int64(1) << np.int64(hi)) - np.int64(1)
    return upper & ~((np.int64(1) << np.int64(lo)) - np.int64(1))


def _number_py(tree, node, start, order):  # pragma: no cover - compiled
    """Pre-order of the subtree at ``node`` into ``order`` (its nodes) and ``start`` (per
    node, how many leaves come before it: a leaf's bit); returns (nodes, leaves)."""
    feature, left, right = tree[0], tree[1], tree[2]
    stack = np.empty(order.size + 1, dtype=np.int64)
    top, count, leaves = 0, 0, 0
    stack[0] = node
    while top >= 0:
        at = stack[top]
        top -= 1
        order[count] = at
        count += 1
        start[at] = leaves
        if feature[at] < 0:
            leaves += 1
        else:
            stack[top + 1], stack[top + 2] = right[at], left[at]  # left popped first
            top += 2
    return count, leaves


def _tables_py(tree, threshold, j, node_cut, first, n_q):  # pragma: no cover - compiled
    """:class:`Masks` arrays of every tree (of at most :data:`MAX_LEAVES` leaves), with how
    many of each were filled (``counts``): ``tree`` = (feature, left, right, missing_left,
    roots), ``node_cut`` per node on j its cut among the sorted grid positions, ``first``
    the first non-missing position, ``n_q`` the grid's size."""
    n, roots = tree[0].size, tree[4]
    out = (
        np.zeros(roots.size + 1, dtype=np.int64),  # leaf_off
        np.empty(n, dtype=np.int64),  # leaf
        np.zeros(roots.size + 1, dtype=np.int64),  # cond_off
        np.empty(n, dtype=np.int64),  # cond_feature
        np.empty(n),  # cond_threshold
        np.empty(n, dtype=np.bool_),  # cond_missing_left
        np.empty(n, dtype=np.int64),  # cond_mask
        np.zeros(roots.size + 1, dtype=np.int64),  # iv_off
        np.empty(n + 2 * roots.size, dtype=np.int64),  # iv_lo
        np.empty(n + 2 * roots.size, dtype=np.int64),  # iv_hi
        np.empty(n + 2 * roots.size, dtype=np.int64),  # iv_mask
        np.zeros(roots.size, dtype=np.int64),  # cond_j
    )
    counts = np.zeros(4, dtype=np.int64)  # trees, leaves, nodes on other features, stretches
    start, order = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    for t in range(roots.size):
        _add(tree, threshold, roots[t], (j, node_cut, first, n_q, start, order), out, counts)
    return out, counts


def _add_py(tree, threshold, node, grid, out, counts):  # pragma: no cover - compiled
    """The tables of the tree at ``node`` appended to ``out`` (``grid`` = (j, node_cut, first,
    n_q, and two scratch arrays))."""
    feature, right, missing_left = tree[0], tree[2], tree[3]
    j, node_cut, first, n_q, start, order = grid
    count, _ = _number(tree, node, start, order)
    k = counts[0]
    cuts = np.empty(count + 2, dtype=np.int64)
    n_cuts = 0
    for e in range(count):
        at = order[e]
        if feature[at] < 0:
            out[1][counts[1]] = at
            counts[1] += 1
        elif feature[at] != j:
            _cond(tree, threshold, at, start, out, counts)
        else:
            cuts[n_cuts] = min(max(node_cut[at], first), n_q)
            n_cuts += 1
    out[11][k] = counts[2]
    for e in range(count):  # the nodes on j, last: a row's own value (the curves skip them)
        if feature[order[e]] == j:
            _cond(tree, threshold, order[e], start, out, counts)
    cuts[n_cuts], cuts[n_cuts + 1] = first, n_q
    bounds = np.unique(cuts[: n_cuts + 2])
    for b in range(-1, bounds.size - 1):  # -1: the missing grid values (positions 0..first - 1)
        lo, hi = (0, first) if b < 0 else (bounds[b], bounds[b + 1])
        if lo >= hi:
            continue
        m = np.int64(-1)
        for e in range(count):
            at = order[e]
            if feature[at] == j and not (missing_left[at] if b < 0 else lo < node_cut[at]):
                m &= ~_span(start[at], start[right[at]])
        c = counts[3]
        out[8][c], out[9][c], out[10][c] = lo, hi, m
        counts[3] += 1
    counts[0] += 1
    out[0][k + 1], out[2][k + 1], out[7][k + 1] = counts[1], counts[2], counts[3]


def _cond_py(tree, threshold, at, start, out, counts):  # pragma: no cover - compiled
    """Node ``at`` appended to the conds of ``out``: its feature, threshold, missing
    direction and the mask clearing its left subtree's leaves."""
    c = counts[2]
    out[3][c], out[4][c], out[5][c] = tree[0][at], threshold[at], tree[3][at]
    out[6][c] = ~_span(start[at], start[tree[2][at]])
    counts[2] += 1


def _sums_py(mk, value, column, rows, order, outs):  # pragma: no cover - compiled
    """``outs[0]`` (rows x grid x outputs, the grid in its own order; ``order``: the grid
    point at each sorted position) := the sums of the block of rows ``rows[0]`` (rounded to
    float32 first where ``rows[1]``), tree by tree, and ``outs[1]`` (rows x outputs, zeros)
    += each row's sums at its own value."""
    out, own = outs
    X = rows[0]
    n, n_q, n_out = X.shape[0], out.shape[1], out.shape[2]
    columns = _columns(X, rows[1])
    missing = np.isnan(columns).any()
    mask, own_mask = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    diff = np.zeros((n, n_q + 1, n_out))
    for k in range(mk.leaf_off.size - 1):
        mask[:] = -1
        _and_conds(mk, columns, (mk.cond_off[k], mk.cond_j[k]), mask, missing)
        _add_leaves(mk, value, column, k, mask, diff)
        own_mask[:] = mask  # and the nodes on j at the row's own value: its own leaf
        _and_conds(mk, columns, (mk.cond_j[k], mk.cond_off[k + 1]), own_mask, missing)
        base = mk.leaf_off[k]
        for i in range(n):
            m = own_mask[i]
            node = mk.leaf[base + LOWEST[(((m & -m) * DE_BRUIJN) >> 58) & 63]]
            for c in range(value.shape[1]):
                own[i, column[node] + c] += value[node, c]
    for i in range(n):
        for c in range(n_out):
            running = 0.0
            for p in range(n_q):
                running += diff[i, p, c]
                out[i, order[p], c] = running


def _lookups_py(mk, value, column, X, queries, out):  # pragma: no cover - compiled
    """``out`` (rows x queries x outputs) := the sums of the block of rows ``X`` (compared
    values) with j at each row's queries (``queries`` = (their bins, trees x positions: the
    stretch holding each bin + 1)): tree by tree, each row's mask ANDed with its query's
    stretch."""
    bins, stretch = queries
    n, n_q, width = X.shape[0], bins.shape[1], value.shape[1]
    columns = _columns(X, False)
    missing = np.isnan(columns).any()
    mask = np.empty(n, dtype=np.int64)
    out[:] = 0.0
    for k in range(mk.leaf_off.size - 1):
        mask[:] = -1
        _and_conds(mk, columns, (mk.cond_off[k], mk.cond_j[k]), mask, missing)
        base = mk.leaf_off[k]
        for i in range(n):
            for q in range(n_q):
                m = mask[i] & mk.iv_mask[stretch[k, bins[i, q] + 1]]
                node = mk.leaf[base + LOWEST[(((m & -m) * DE_BRUIJN) >> 58) & 63]]
                for c in range(width):
                    out[i, q, column[node] + c] += value[node, c]


def _columns_py(X, rounded):  # pragma: no cover - compiled
    """The block's values by feature (features x rows, contiguous), each rounded to float32
    first where ``rounded`` (the comparison of a float32 ensemble, without a copy of every
    row beforehand)."""
    n, p = X.shape
    columns = np.empty((p, n))
    if rounded:
        for f in range(p):
            for i in range(n):
                columns[f, i] = np.float64(np.float32(X[i, f]))
    else:
        for f in range(p):
            for i in range(n):
                columns[f, i] = X[i, f]
    return columns


def _and_conds_py(mk, columns, span, mask, missing):  # pragma: no cover - compiled
    """``mask`` of each row (``columns``: the block's values by feature) ANDed with the conds
    ``span[0]..span[1] - 1`` where the row goes right: every row at once, vector instructions."""
    for e in range(span[0], span[1]):
        xs, t, m, to_nan = columns[mk.cond_feature[e]], mk.cond_threshold[e], mk.cond_mask[e], mk.cond_missing_left[e]
        if missing:
            for i in range(mask.size):
                mask[i] &= m | -np.int64((xs[i] <= t) | (np.isnan(xs[i]) & to_nan))
        else:
            for i in range(mask.size):
                mask[i] &= m | -np.int64(xs[i] <= t)


def _add_leaves_py(mk, value, column, k, mask, diff):  # pragma: no cover - compiled
    """Each row's leaf of tree ``k`` on each stretch (the lowest bit of its ``mask`` ANDed
    with the stretch's) added to ``diff`` over the stretch's positions."""
    base, width = mk.leaf_off[k], value.shape[1]
    for e in range(mk.iv_off[k], mk.iv_off[k + 1]):
        stretch, lo, hi = mk.iv_mask[e], mk.iv_lo[e], mk.iv_hi[e]
        for i in range(mask.size):
            m = mask[i] & stretch
            node = mk.leaf[base + LOWEST[(((m & -m) * DE_BRUIJN) >> 58) & 63]]
            c0 = column[node]
            for c in range(width):
                diff[i, lo, c0 + c] += value[node, c]
                diff[i, hi, c0 + c] -= value[node, c]


_span = _span_py
_number = _number_py
_add = _add_py
_add_leaves = _add_leaves_py
_cond = _cond_py
_and_conds = _and_conds_py
_columns = _columns_py
