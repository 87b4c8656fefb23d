"""The walk with one feature left free, and the exact sums it gives.

With feature j free, each row goes through each tree once, level by level for all rows
and trees at once (NumPy arrays of node ids, never a Python loop per row): at a node
testing another feature the row goes one way, as in ``predict``; at a node testing j it
goes both ways, each side keeping the interval of j on which it is reached. Intervals are
held as threshold ranks ("bins"): with t the sorted distinct thresholds on j, ``x <= t_k``
exactly when ``searchsorted(t, x) <= k``, so a leaf reached on bins ``lo..hi`` is reached for
every value whose bin lies there, and nothing is rounded. A leaf also records whether a
missing j reaches it (``missing_go_to_left``). The model's output at any value of j is then
a lookup: the sum of the leaf values whose interval holds the value's bin.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import numpy as np

from . import compiled
from .read import Ensemble

#: Whether the compiled walk (:mod:`.compiled`, numba) computes the sums; without numba this
#: module's NumPy walk does (the same sums, slower). numba is imported on first use only.
COMPILED = importlib.util.find_spec("numba") is not None
#: Most (row, tree) walks started at once: bounds the walk's arrays (a few hundred MB).
WALK_ITEMS = 2_000_000
#: Most floats of one chunk's table of sums.
TABLE_FLOATS = 8_000_000


@dataclass(frozen=True)
class Paths:
    """The leaves each row reaches with j free: ``row`` (position in the rows walked),
    ``leaf`` (node id), bins ``lo..hi`` of j reaching it (empty when lo > hi) and ``nan``
    (a missing j reaches it)."""

    row: np.ndarray
    leaf: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    nan: np.ndarray


#: Interval codes: bins ``lo`` and ``hi`` and the missing flag packed in one int64 per walk,
#: so a level compacts three arrays, not five.
_SHIFT = np.int64(30)
_MASK = np.int64((1 << 30) - 1)
_NAN = np.int64(1) << np.int64(61)


@dataclass(frozen=True)
class _Walks:
    """Walks under way: the offset of each one's row in the flat rows, its node and its
    interval code (None: never cut, all bins and missing values reach it)."""

    row: np.ndarray
    node: np.ndarray
    code: np.ndarray | None = None

    def take(self, mask: np.ndarray) -> _Walks:
        at = np.flatnonzero(mask)  # once, then one gather per array
        return _Walks(self.row.take(at), self.node.take(at), None if self.code is None else self.code.take(at))

    def codes(self, full: np.int64) -> np.ndarray:
        return self.code if self.code is not None else np.full(self.row.size, full, dtype=np.int64)


def walk(ens: Ensemble, X: np.ndarray, j: int, node_bin: np.ndarray, n_bins: int) -> Paths:
    """Every row of ``X`` (compared values, rows x features) through every tree, j free.

    Walks never cut at a node on j (most of them) carry no interval; those cut carry
    theirs, so most of the work is that of a plain predict."""
    n, n_trees = X.shape[0], ens.roots.size
    flat, width = X.ravel(), X.shape[1]
    full = (np.int64(n_bins) << _SHIFT) | _NAN  # bins 0..n_bins, and missing
    # each walk carries its row's offset in ``flat`` (int32 when it fits: half the bytes)
    offsets = np.arange(n, dtype=np.int32 if n * width < 2**31 else np.int64) * width
    plain = _Walks(np.repeat(offsets, n_trees), np.tile(ens.roots, n))
    cut = _Walks(offsets[:0], ens.roots[:0], np.empty(0, dtype=np.int64))
    done: list[_Walks] = []
    missing = bool(np.isnan(flat).any())
    while plain.row.size or cut.row.size:
        plain, plain_cut = _level(ens, flat, j, node_bin, plain, done, full=full, missing=missing)
        cut, more_cut = _level(ens, flat, j, node_bin, cut, done, full=full, missing=missing)
        if plain_cut is not None or more_cut is not None:
            parts = [w for w in (cut, plain_cut, more_cut) if w is not None]
            cut = _Walks(*(np.concatenate([getattr(w, key) for w in parts]) for key in ("row", "node", "code")))
    if not done:
        empty = np.empty(0, dtype=np.int64)
        return Paths(empty, empty, empty, empty, np.empty(0, dtype=bool))
    code = np.concatenate([w.codes(full) for w in done])
    row = (np.concatenate([w.row for w in done]) // width).astype(np.int64)
    return Paths(
        row, np.concatenate([w.node for w in done]), code & _MASK, (code >> _SHIFT) & _MASK, (code & _NAN) != 0
    )


def _level(ens, flat, j, node_bin, walks: _Walks, done: list, *, full, missing: bool) -> tuple[_Walks, _Walks | None]:
    """One step down for every walk: those at a leaf go to ``done``, those at a node on j
    are cut in two (returned second), the others go where the row's value sends them."""
    if not walks.row.size:
        return walks, None
    feature = ens.feature[walks.node]
    leaf = feature < 0
    if leaf.any():
        done.append(walks.take(leaf))
        walks, feature = walks.take(~leaf), feature[~leaf]
    free = feature == j
    cut = None
    if free.any():
        on_j = walks.take(free)
        cut = _split(ens, node_bin, on_j.row, on_j.node, on_j.codes(full))
        walks, feature = walks.take(~free), feature[~free]
    node = walks.node
    x = flat[walks.row + feature]
    go_left = (x <= ens.threshold[node]).view(np.int8)
    if missing:
        nan = np.isnan(x)
        if nan.any():
            go_left[nan] = ens.missing_left[node[nan]]
    return _Walks(walks.row, ens.children[2 * node + go_left], walks.code), cut


def _split(ens, node_bin, row, node, code) -> _Walks:
    """The walks at a node testing j, each continued on both sides with its interval cut:
    left keeps bins ``lo..min(hi, k)``, right ``max(lo, k + 1)..hi``; the missing flag goes
    the node's missing direction. Walks no value of j reaches any more are dropped."""
    k = node_bin[node]
    lo, hi, nan = code & _MASK, (code >> _SHIFT) & _MASK, code & _NAN
    to_left = ens.missing_left[node]
    left_hi, right_lo = np.minimum(hi, k), np.maximum(lo, k + 1)
    left = lo | (left_hi << _SHIFT) | np.where(to_left, nan, 0)
    right = right_lo | (hi << _SHIFT) | np.where(to_left, 0, nan)
    alive_left = (lo <= left_hi) | (to_left & (nan != 0))
    alive_right = (right_lo <= hi) | (~to_left & (nan != 0))
    return _Walks(
        np.concatenate([row[alive_left], row[alive_right]]),
        np.concatenate([ens.left[node[alive_left]], ens.right[node[alive_right]]]),
        np.concatenate([left[alive_left], right[alive_right]]),
    )


def _chunks(n: int, n_trees: int, floats_per_row: int):
    step = max(1, min(WALK_ITEMS // max(1, n_trees), TABLE_FLOATS // max(1, floats_per_row)))
    return [(a, min(a + step, n)) for a in range(0, n, step)]


def _add(total: np.ndarray, ens: Ensemble, index: np.ndarray, leaf: np.ndarray, sign: float | np.ndarray) -> None:
    """``total.reshape(-1, n_outputs)[index, column[leaf] + c] += sign * value[leaf, c]``."""
    n_out = ens.n_outputs
    flat = total.reshape(-1)
    base = index * n_out + ens.column[leaf]
    for c in range(ens.value.shape[1]):
        flat += np.bincount(base + c, weights=sign * ens.value[leaf, c], minlength=flat.size)


def _whole(paths: Paths, n_bins: int) -> np.ndarray:
    """The leaves reached whatever j is (walks never cut at a node on j: most of them)."""
    return (paths.lo == 0) & (paths.hi == n_bins) & paths.nan


def warm() -> str | None:
    """Load the compiled walk now (numba and its kernels, about 0.6 s), e.g. before a server
    forks its jobs; nothing without numba. A numba that cannot compile here (a broken
    install) turns the compiled walk off for this process and what it forks, returning why:
    the NumPy walk computes the same sums."""
    global COMPILED
    if not COMPILED:
        return None
    try:
        compiled.warm()
    except Exception as exc:  # noqa: BLE001 - any failure of numba itself: the NumPy walk instead
        COMPILED = False
        return f"the tree engine's compiled walk is off ({type(exc).__name__}: {exc}); the NumPy walk runs"
    return None


def curve_sums(ens: Ensemble, X: np.ndarray, j: int, grid: np.ndarray) -> np.ndarray:
    """Sum of leaf values of each row of ``X`` with j at each value of ``grid`` (shape rows
    x grid x outputs): the compiled walk (:mod:`.compiled`) where numba is installed, else
    :func:`curve_sums_numpy`."""
    if COMPILED:
        return compiled.curve_sums(ens, X, j, grid)
    return curve_sums_numpy(ens, X, j, grid)


def own_in_pass(ens: Ensemble, j: int) -> bool:
    """Whether :func:`curve_and_own_sums` gives the rows' own sums from the curves' pass (the
    compiled bit masks, :func:`.compiled.own_in_pass`), not from a walk of their own."""
    return COMPILED and compiled.own_in_pass(ens, j)


def curve_and_own_sums(
    ens: Ensemble, X: np.ndarray, j: int, grid: np.ndarray, *, raw: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`curve_sums` and each row's sums at its own values (rows x outputs): one pass
    where the compiled walk's bit masks take the model (:func:`.compiled.curve_and_own_sums`).
    ``raw``: ``X`` holds the model's input, not yet :meth:`~.ensemble.Ensemble.compared`."""
    if COMPILED:
        return compiled.curve_and_own_sums(ens, X, j, grid, raw=raw)
    X = ens.compared(X) if raw else X
    return curve_sums_numpy(ens, X, j, grid), lookup_sums_numpy(ens, X, j, X[:, j : j + 1])[:, 0, :]


def curve_sums_numpy(ens: Ensemble, X: np.ndarray, j: int, grid: np.ndarray) -> np.ndarray:
    """Sum of leaf values of each row of ``X`` with j at each value of ``grid`` (shape rows
    x grid x outputs): one walk per row; a leaf reached whatever j is adds to the row's
    constant, any other to the grid points in its interval, as a difference along the grid
    summed up (a cumulative sum per row)."""
    thresholds, node_bin = ens.bins(j)
    values = ens.compared(grid)
    finite = np.flatnonzero(~np.isnan(values))
    missing = np.flatnonzero(np.isnan(values))
    order = finite[np.argsort(np.searchsorted(thresholds, values[finite]), kind="stable")]
    sorted_bins = np.searchsorted(thresholds, values[order])
    m, n_out = order.size, ens.n_outputs
    out = np.empty((X.shape[0], grid.size, n_out))
    for a, b in _chunks(X.shape[0], ens.roots.size, (m + 1) * n_out):
        paths = walk(ens, X[a:b], j, node_bin, thresholds.size)
        whole = _whole(paths, thresholds.size)
        const = np.zeros((b - a, n_out))
        _add(const, ens, paths.row[whole], paths.leaf[whole], 1.0)
        part = np.flatnonzero(~whole & (paths.lo <= paths.hi))
        r, leaf = paths.row[part], paths.leaf[part]
        first = np.searchsorted(sorted_bins, paths.lo[part], side="left")
        stop = np.searchsorted(sorted_bins, paths.hi[part], side="right")
        some = first < stop
        r, leaf, first, stop = r[some], leaf[some], first[some], stop[some]
        diff = np.zeros((b - a, m + 1, n_out))
        _add(diff, ens, np.concatenate([r * (m + 1) + first, r * (m + 1) + stop]), np.tile(leaf, 2), _signs(leaf.size))
        out[a:b, order] = np.cumsum(diff, axis=1)[:, :m] + const[:, None, :]
        if missing.size:
            at_nan = const.copy()
            cut_nan = ~whole & paths.nan
            _add(at_nan, ens, paths.row[cut_nan], paths.leaf[cut_nan], 1.0)
            out[a:b, missing] = at_nan[:, None, :]
    return out


def _signs(n: int) -> np.ndarray:
    return np.concatenate([np.ones(n), -np.ones(n)])


def same_walk(ens: Ensemble, j: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether values ``a`` and ``b`` of feature j (broadcast) send a row down the same paths
    of every tree: the same bin among j's thresholds, or both missing (a categorical j: the
    same level, the same way at every node on j). Such a row's output is its own, bit for
    bit."""
    return value_bins(ens, j, a) == value_bins(ens, j, b)


def value_bins(ens: Ensemble, j: int, values: np.ndarray) -> np.ndarray:
    """Feature j's bins of ``values`` (:func:`.compiled.value_bins`): equal bins, the same
    walk (:func:`same_walk`); computed once, they are gathered for repeated values."""
    return compiled.value_bins(ens, j, values)


def lookup_sums(
    ens: Ensemble, X: np.ndarray, j: int, queries: np.ndarray, bins: np.ndarray | None = None
) -> np.ndarray:
    """Sum of leaf values of each row i of ``X`` with j at each of its own values
    ``queries[i, r]`` (shape rows x queries x outputs): compiled where numba is installed,
    else :func:`lookup_sums_numpy`. ``bins``: the queries' :func:`value_bins` when already
    found (e.g. gathered from those of the rows' own values)."""
    if COMPILED:
        return compiled.lookup_sums(ens, X, j, queries, bins)
    return lookup_sums_numpy(ens, X, j, queries, bins)


def lookup_sums_numpy(
    ens: Ensemble, X: np.ndarray, j: int, queries: np.ndarray, bins: np.ndarray | None = None
) -> np.ndarray:
    """Sum of leaf values of each row i of ``X`` with j at each of its own values
    ``queries[i, r]`` (shape rows x queries x outputs), e.g. PFI's donors: a leaf reached
    whatever j is adds to the row's constant, any other is tested against its row's
    queries (few: a walk is cut only at the nodes on j it meets)."""
    thresholds, node_bin = ens.bins(j)
    if bins is None:
        bins = value_bins(ens, j, queries)
    n, n_q = queries.shape
    out = np.empty((n, n_q, ens.n_outputs))
    for a, b in _chunks(n, ens.roots.size, n_q * ens.n_outputs):
        paths = walk(ens, X[a:b], j, node_bin, thresholds.size)
        whole = _whole(paths, thresholds.size)
        const = np.zeros((b - a, ens.n_outputs))
        _add(const, ens, paths.row[whole], paths.leaf[whole], 1.0)
        part = np.flatnonzero(~whole)  # each tested against its row's queries
        row, leaf, lo, hi, nan = paths.row[part], paths.leaf[part], paths.lo[part], paths.hi[part], paths.nan[part]
        chunk = np.zeros((b - a, n_q, ens.n_outputs))
        for q in range(n_q):
            mine = bins[a:b, q][row]  # each leaf's row's query bin
            hit = np.flatnonzero(np.where(mine < 0, nan, (mine >= lo) & (mine <= hi)))
            _add(chunk, ens, row[hit] * n_q + q, leaf[hit], 1.0)
        out[a:b] = chunk + const[:, None, :]
    return out
