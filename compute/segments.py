"""Segments of a prediction stream, and their rows described without building them.

A :class:`Segment` is a run of intervened rows inside one stream of model calls
(:func:`compute.prediction.predict_segments`). Its rows are described by a :class:`RowSpec`
(positions and replaced columns), a :class:`GridSpec` (rows of a curve tensor) or a
:class:`CycleSpec` (rows of a cycle: PFI's repeats, the interaction passes), so that a chunk
spanning several segments of one numeric design is gathered once into one array
(:func:`_gathered`, into a thread's reused :func:`_scratch` array), and a chunk of a cycle
fed to a model that leaves its input alone is written into a reused buffer holding the cycle
(:class:`_CycleBuffer`), where only the replaced columns change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .intervention import Design


@dataclass(frozen=True)
class RowSpec:
    """Rows described without building them: positions in ``design`` and the columns
    replaced (column -> values, one per row), as :meth:`Design.block` takes them."""

    design: Design
    positions: np.ndarray
    replace: dict

    @property
    def n_rows(self) -> int:
        return len(self.positions)

    def block(self):
        return self.design.block(self.positions, self.replace)

    def write(self, out: np.ndarray) -> None:
        """Write the rows into ``out`` (rows x columns of a numeric design, ``block_dtype``)."""
        _write_rows(self.design, self.positions, self.replace, out)


def _write_rows(design: Design, positions: np.ndarray, replace: dict, out: np.ndarray) -> None:
    # into an existing array: mode "clip" (the positions are valid) writes in place, where
    # the default mode buffers a copy first
    np.take(design.rows_array(), positions, axis=0, out=out, mode="clip")
    for column, values in replace.items():
        out[:, design.position(column)] = values


@dataclass(frozen=True)
class GridSpec:
    """Rows ``start:stop`` of a curve tensor, row by row: row t is design row
    ``base[t // n_grid]`` with ``column`` at grid point ``grid[t % n_grid]`` (``grid`` cast
    for the design, ``n_grid = len(grid)``). On numeric data each observation's row is read
    once and repeated over its grid points, with no index arithmetic per tensor row."""

    design: Design
    base: np.ndarray
    column: Any
    grid: Any
    start: int
    stop: int

    @property
    def n_rows(self) -> int:
        return self.stop - self.start

    @property
    def positions(self) -> np.ndarray:
        return repeated(self.base, len(self.grid), self.start, self.stop)

    @property
    def replace(self) -> dict:
        return {self.column: self.grid[np.arange(self.start, self.stop) % len(self.grid)]}

    def block(self):
        design = self.design
        if not design.numeric:
            return design.block(self.positions, self.replace)
        out = np.empty((self.n_rows, len(design.columns)), dtype=design.block_dtype)
        self.write(out)
        return design.wrap(out)

    def write(self, out: np.ndarray) -> None:
        """Write the rows into ``out`` (rows x columns of a numeric design, ``block_dtype``):
        the observations' rows read once, then each repeated over its grid points."""
        design, n_grid = self.design, len(self.grid)
        first, last = self.start // n_grid, -(-self.stop // n_grid)
        rows = np.take(design.rows_array(), self.base[first:last], axis=0)
        offset = first * n_grid
        local = repeated(np.arange(last - first), n_grid, self.start - offset, self.stop - offset)
        np.take(rows, local, axis=0, out=out, mode="clip")  # "clip": in place (positions are valid)
        out[:, design.position(self.column)] = cycled(np.asarray(self.grid, dtype=out.dtype), self.start, self.stop)


@dataclass(frozen=True)
class CycleSpec:
    """Rows ``start:stop`` of a cycle through the rows ``base`` of ``design``, repeated end
    to end (row t is design row ``base[t % base.size]``), with the columns in ``replace``
    overwritten (values aligned with the rows). PFI's repeats and the interaction passes are
    such cycles: a chunk of them can be written into a buffer that already holds the cycle,
    where only the replaced columns change. (A curve tensor is not: it stays row by row,
    the order in which a tree ensemble predicts fastest, see ``profile._profile``.)"""

    design: Design
    base: np.ndarray
    start: int
    stop: int
    replace: dict

    @property
    def n_rows(self) -> int:
        return self.stop - self.start

    @property
    def positions(self) -> np.ndarray:
        return self.base[np.arange(self.start, self.stop) % self.base.size]

    def block(self):
        return self.design.block(self.positions, self.replace)

    def write(self, out: np.ndarray) -> None:
        """Write the rows into ``out`` (rows x columns of a numeric design, ``block_dtype``)."""
        _write_rows(self.design, self.positions, self.replace, out)


@dataclass(frozen=True)
class Segment:
    """A run of intervened rows inside one prediction stream.

    ``make_block(lo, hi)`` builds its rows ``lo:hi`` (local numbering); ``obs_of(lo, hi)``
    gives the positions in the target of the observations behind them (for the loss).
    ``rows_of(lo, hi)``, when given, describes the same rows without building them (a
    :class:`RowSpec`, :class:`GridSpec` or :class:`CycleSpec`), so a chunk spanning several segments of one
    numeric design is gathered once into one array instead of built per segment and
    stacked, or, for a cycle and a model that leaves its input alone, written into a reused
    buffer. ``cycles`` says that ``rows_of`` gives :class:`CycleSpec`\\ s; ``observations``,
    when given, that row t's observation is ``observations[t % observations.size]`` (then
    ``obs_of`` gives those), so a chunk's target is a slice of the target over a few turns.
    """

    n_rows: int
    make_block: Callable[[int, int], object]
    obs_of: Callable[[int, int], np.ndarray] | None = None
    rows_of: Callable[[int, int], RowSpec | CycleSpec | GridSpec] | None = None
    cycles: bool = False
    observations: np.ndarray | None = None


def cycle_segment(
    design: Design,
    base: np.ndarray,
    n_rows: int,
    replace_of: Callable[[int, int], dict],
    observations: np.ndarray | None = None,
) -> Segment:
    """A segment of ``n_rows`` rows cycling through the rows ``base`` of ``design``, with
    ``replace_of(lo, hi)`` the replaced columns of its rows ``lo:hi`` (see :class:`CycleSpec`)
    and, for the loss, ``observations[t % observations.size]`` the observation of row t
    (``observations`` aligned with ``base``)."""

    def rows_of(lo: int, hi: int) -> CycleSpec:
        return CycleSpec(design, base, lo, hi, replace_of(lo, hi))

    obs_of = None if observations is None else (lambda lo, hi: cycled(observations, lo, hi))
    return Segment(n_rows, lambda lo, hi: rows_of(lo, hi).block(), obs_of, rows_of, True, observations)


def repeated(rows: np.ndarray, times: int, a: int, b: int) -> np.ndarray:
    """``rows[np.arange(a, b) // times]`` (rows ``a:b`` of ``rows`` with each repeated
    ``times`` times), without index arithmetic per row."""
    first = a // times
    return np.repeat(rows[first : -(-b // times)], times)[a - first * times : b - first * times]


def cycled(rows: np.ndarray, a: int, b: int) -> np.ndarray:
    """``rows[np.arange(a, b) % rows.size]`` (the observations behind rows ``a:b`` of a
    cycle through ``rows``), by whole copies of ``rows`` instead of index arithmetic."""
    start = a % rows.size
    return np.tile(rows, -(-(start + b - a) // rows.size))[start : start + b - a]


def _gathered(design: Design, specs: list, rows: np.ndarray | None = None) -> object:
    """Several segments' rows of one numeric design as one block: each segment writes its
    rows into its own slice of one array (the values :meth:`Design.block` gives per segment,
    without a second copy to stack them): ``rows`` when given (a reused buffer of exactly
    their size), else a new array."""
    if rows is None:
        rows = np.empty((sum(spec.n_rows for spec in specs), len(design.columns)), dtype=design.block_dtype)
    start = 0
    for spec in specs:
        spec.write(rows[start : start + spec.n_rows])
        start += spec.n_rows
    return design.wrap(rows)


def _scratch(store: threading.local, design: Design, n_rows: int) -> np.ndarray:
    """This thread's reused array for ``n_rows`` rows of ``design`` (made on first use, or
    when a chunk is larger than any before): warm memory, where a new array per chunk would
    be fresh pages from the system, each first written at a cost (measured: half of
    building a curve chunk)."""
    found = getattr(store, "scratch", None)
    if found is None or found.shape[0] < n_rows or found.dtype != design.block_dtype:
        found = store.scratch = np.empty((n_rows, len(design.columns)), dtype=design.block_dtype)
    return found[:n_rows]


def _one_turn(parts: list, cycle: np.ndarray) -> bool:
    """Whether the pieces ``(segment, lo, hi)`` of a chunk continue one cycle of the
    observations ``cycle`` (each segment cycling through it, each piece starting where the
    previous one stopped, modulo its size)."""
    for (_, _, stop), (after, start, _) in zip(parts, parts[1:]):
        if after.observations is not cycle or (start - stop) % cycle.size:
            return False
    return True


def _one_cycle(specs: list, longest: int) -> bool:
    """Whether the rows of ``specs`` continue one cycle of at most ``longest`` rows (same
    design and base, each part starting where the previous one stopped, modulo the cycle)."""
    first = specs[0]
    if not isinstance(first, CycleSpec) or first.base.size > longest:
        return False
    period = first.base.size
    for before, after in zip(specs, specs[1:]):
        if not isinstance(after, CycleSpec) or after.design is not first.design or after.base is not first.base:
            return False
        if (after.start - before.stop) % period:
            return False
    return True


class _CycleBuffer:
    """One thread's buffer for the chunks of a cycle: the cycle's rows repeated over a
    chunk plus one period (row r holds design row ``base[r % period]``), so a chunk starting
    anywhere in the cycle is a contiguous slice of it. A chunk's replaced columns are
    written in and put back (from the cycle's own columns) before the next chunk."""

    def __init__(self, design: Design, base: np.ndarray, chunk_rows: int) -> None:
        one = np.ascontiguousarray(design.rows_array()[base])  # row-major whatever the design's order
        self.design, self.period = design, base.size
        self.tile = np.tile(one, (-(-(chunk_rows + self.period) // self.period), 1))
        self.columns = np.ascontiguousarray(one.T)  # each column's values over one period
        self.dirty: list[tuple[int, int, int]] = []  # tile rows u:v of column j overwritten

    @staticmethod
    def of(store: threading.local, specs: list, chunk_rows: int) -> _CycleBuffer:
        """This thread's buffer for the cycle of ``specs`` (made on first use)."""
        first = specs[0]
        key = (id(first.design), id(first.base))
        found = getattr(store, "buffers", None)
        if found is None:
            found = store.buffers = {}
        rows = sum(spec.stop - spec.start for spec in specs)
        buffer = found.get(key)
        if buffer is None or buffer.tile.shape[0] < rows + buffer.period:
            buffer = found[key] = _CycleBuffer(first.design, first.base, max(chunk_rows, rows))
        return buffer

    def block(self, specs: list):
        for u, v, j in self.dirty:
            _fill_cycle(self.tile[u:v, j], self.columns[j], u % self.period)
        self.dirty = []
        phase = specs[0].start % self.period
        u = phase
        for spec in specs:
            v = u + spec.stop - spec.start
            for column, values in spec.replace.items():
                j = self.design.position(column)
                self.tile[u:v, j] = values
                self.dirty.append((u, v, j))
            u = v
        return self.design.wrap(self.tile[phase:u])


def _fill_cycle(target: np.ndarray, values: np.ndarray, phase: int) -> None:
    """``target[i] = values[(phase + i) % values.size]`` for a (strided) 1-d view, written
    period by period."""
    period, size = values.size, target.size
    head = min(period - phase, size)
    target[:head] = values[phase : phase + head]
    rest = target[head:]
    whole = rest.size - rest.size % period
    if whole:
        periods = rest[:whole].reshape(-1, period)  # a view: a 1-d slice reshapes without a copy
        periods[...] = values
    rest[whole:] = values[: rest.size - whole]
