"""Prediction stage (SIPA, Scholbeck et al. 2019, Sec. 4): batched, chunked model calls.

:class:`Predictor` wraps a fitted model once (regressor or classifier, array or DataFrame
input, the class whose probability the curves show) and :func:`predict_pass` evaluates it
on a stream of intervened blocks: at most ``chunk_rows`` rows per model call, chunks in
parallel threads when ``n_jobs > 1``. Each chunk is reduced at once to two float arrays,
the curve value (prediction or class probability) and the pointwise loss, so memory grows
with the number of intervened rows only by a few floats per row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from .errors import InputError, ModelError
from .intervention import Design
from .losses import Loss
from .segments import GridSpec as GridSpec  # re-exported: compute/profile.py imports it from here
from .segments import RowSpec, Segment, _CycleBuffer, _gathered, _one_cycle, _one_turn, _scratch
from .segments import repeated as repeated  # re-exported: compute/profile.py imports it from here

#: Memory budget of one chunk of intervened rows (bytes), shared by all compute functions.
CHUNK_BYTES = 256 * 2**20
#: Chunk budget (bytes) of the streams fed to a model that declares ``input_read_only``, each
#: written into one reused buffer per thread: small enough that a buffer (a chunk plus one
#: turn of a cycle) stays under glibc's largest mmap threshold (32 MiB), so a pass's buffers
#: come from warm heap memory instead of fresh pages (measured: 15-50 ms less outside the
#: model per PFI pass of 2.5 million rows than at 32 MiB), yet large enough that a booster
#: call's fixed cost (about 0.1 ms) is under 1 % of the call.
REUSED_CHUNK_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Predictor:
    """A fitted model with everything needed to call it and read its output."""

    model: Any
    design: Design
    classes: np.ndarray | None  # None for a regressor
    has_proba: bool
    output_index: int | None  # class whose probability the curves show
    # the model never writes to nor keeps the rows it is given (it declares
    # ``input_read_only = True``): successive blocks may reuse one buffer
    reuse_blocks: bool = False

    @property
    def is_classifier(self) -> bool:
        return self.classes is not None

    @property
    def output(self):
        return None if self.classes is None else self.classes[self.output_index]

    def raw(self, block) -> np.ndarray:
        """One model call: predictions, class probabilities or predicted class positions."""
        n_rows = len(block)
        try:
            expected: tuple[int, ...]
            if self.classes is not None and self.has_proba:
                out = np.asarray(self.model.predict_proba(block), dtype=np.float64)
                expected = (n_rows, len(self.classes))
            else:
                out = np.asarray(self.model.predict(block))
                expected = (n_rows,)
        except Exception as exc:  # the model is a black box: any failure is its own
            method = "predict_proba" if self.is_classifier and self.has_proba else "predict"
            raise ModelError(
                f"The model's {method} failed on {n_rows} rows: {type(exc).__name__}: {_shorten(str(exc))}"
            ) from exc
        if out.ndim == 2 and out.shape[1] == 1 and expected == (n_rows,):
            out = out[:, 0]
        if out.shape != expected:
            raise ModelError(
                f"The model returned an array of shape {out.shape} for {n_rows} rows; expected {expected}."
            )
        if self.is_classifier and not self.has_proba:  # labels -> class positions
            return pd.Index(self.classes).get_indexer(out)
        method = "predict_proba" if self.is_classifier else "predict"
        if not self.is_classifier:
            try:
                out = out.astype(float, copy=False)
            except (TypeError, ValueError) as exc:
                example = out.ravel()[0] if out.size else None
                raise ModelError(
                    f"The model's {method} returned non-numeric values (dtype {out.dtype}, e.g. "
                    f"{example!r}); a regressor must return numbers. Is it a classifier without "
                    f"classes_?"
                ) from exc
        # one sum is finite only if every value is (NaN and infinity propagate; an overflow
        # to infinity only sends us to the exact check): no boolean array per call
        with np.errstate(over="ignore", invalid="ignore"):
            total = np.add.reduce(out, axis=None) if out.dtype.kind == "f" else np.nan
        if np.isfinite(total):
            return out
        bad = ~np.isfinite(out)
        if bad.any():
            n_bad = int(bad.any(axis=1).sum()) if bad.ndim == 2 else int(bad.sum())
            raise ModelError(
                f"The model's {method} returned NaN or infinite values for {n_bad} of {n_rows} rows; "
                f"check the data for values the model cannot handle."
            )
        return out

    def value(self, raw: np.ndarray) -> np.ndarray:
        """The curve value of each row: the prediction, or the output class's probability."""
        if not self.is_classifier:
            return raw
        if self.has_proba:
            return raw[:, self.output_index]
        return (raw == self.output_index).astype(float)


def default_chunk_rows(design: Design, n_outputs: int = 1) -> int:
    """Rows per model call that keep one chunk within :data:`CHUNK_BYTES`.

    Counts the block itself, a copy the model may make while validating it, and the
    outputs; the constant is deliberately generous so chunks stay large.
    """
    bytes_per_row = 8 * (2 * len(design.columns) + n_outputs + 2)
    return max(1, CHUNK_BYTES // bytes_per_row)


def predict_pass(
    predictor: Predictor,
    n_total: int,
    make_block: Callable[[int, int], object],
    *,
    y_enc: np.ndarray | None = None,
    obs_of: Callable[[int, int], np.ndarray] | None = None,
    loss: Loss | None = None,
    chunk_rows: int | None = None,
    n_jobs: int | None = 1,
    keep_values: bool = True,
    breaks: tuple[int, ...] = (),
    targets_of: Callable[[int, int], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Evaluate the model on ``n_total`` intervened rows, chunk by chunk.

    Parameters
    ----------
    make_block : callable ``(start, stop) -> block``
        Builds the intervened rows ``start:stop`` of the flattened tensor.
    y_enc, obs_of, loss :
        When given, ``obs_of(start, stop)`` are the positions in ``y_enc`` of the
        observations behind those rows, and the pointwise loss is returned as well.

    keep_values : bool, default True
        False when only the losses are wanted (PFI): ``values`` is then empty, and the pass
        writes no array of curve values.
    breaks : row positions
        Where a chunk must end (a chunk never spans one), e.g. where rows built one way
        follow rows built another way.
    targets_of : callable ``(start, stop) -> target``, optional
        The target of rows ``start:stop`` when it is cheaper than ``y_enc[obs_of(start, stop)]``
        (the same values).

    Returns
    -------
    values : ndarray of shape (n_total,) (shape (0,) without ``keep_values``)
    losses : ndarray of shape (n_total,) or None
    """
    chunk_rows = chunk_rows or default_chunk_rows(predictor.design)
    n_workers = _effective_jobs(n_jobs)
    if n_workers > 1:  # enough chunks to keep every worker busy
        chunk_rows = min(chunk_rows, -(-n_total // n_workers))
    edges = sorted({0, n_total, *(int(b) for b in breaks if 0 < b < n_total)})
    bounds = [(a, min(a + chunk_rows, hi)) for lo, hi in zip(edges, edges[1:]) for a in range(lo, hi, chunk_rows)]
    values = np.empty(n_total if keep_values else 0)
    losses = np.empty(n_total) if loss is not None else None

    def run(start: int, stop: int) -> None:
        raw = predictor.raw(make_block(start, stop))
        if keep_values:
            values[start:stop] = predictor.value(raw)
        if losses is not None:
            # losses exist only when a loss was given, and then y_enc and obs_of come with it
            assert loss is not None and y_enc is not None and obs_of is not None
            target = targets_of(start, stop) if targets_of is not None else y_enc[obs_of(start, stop)]
            losses[start:stop] = loss.fn(target, raw) if loss.builtin else _custom_loss(loss, target, raw)

    if n_workers == 1 or len(bounds) == 1:
        for start, stop in bounds:
            run(start, stop)
    else:
        Parallel(n_jobs=n_workers, prefer="threads")(delayed(run)(a, b) for a, b in bounds)
    return values, losses


def predict_segments(
    predictor: Predictor,
    segments: list[Segment],
    *,
    y_enc: np.ndarray | None = None,
    loss: Loss | None = None,
    chunk_rows: int | None = None,
    n_jobs: int | None = 1,
    keep_values: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Evaluate several runs of rows as one stream, so a chunk may span several of them.

    Every model call has a fixed cost (input validation, a forest's per-tree dispatch:
    tens of milliseconds for a 100-tree forest), so the rows of many small interventions
    (features, repeats, the unmodified rows) go through as few calls as the chunk budget
    allows. Returns the values (and losses) of all segments, concatenated in order
    (``keep_values`` as in :func:`predict_pass`).

    A stream of cycles (:class:`CycleSpec`) fed to a model that leaves its input alone
    (``Predictor.reuse_blocks``) is written into one buffer per thread holding the cycle:
    each chunk overwrites only its replaced columns and puts them back after the call, so a
    chunk costs a few column writes instead of a copy of all its rows, and the buffer, built
    once per pass, is about the size of the CPU's last-level cache (:data:`REUSED_CHUNK_BYTES`).
    """
    starts = np.concatenate([[0], np.cumsum([seg.n_rows for seg in segments])]).astype(np.int64)
    design = predictor.design
    reusable = predictor.reuse_blocks and design.numeric
    reuse = reusable and any(seg.cycles for seg in segments)
    budget = max(1, REUSED_CHUNK_BYTES // (design.block_dtype.itemsize * max(1, len(design.columns))))
    if reusable and chunk_rows is None:
        chunk_rows = budget
    # a buffer holds a chunk and one turn of the cycle: a longer cycle than the budget (PFI on
    # many rows without a sample) is gathered, not copied whole into every thread's buffer
    limit = max(budget, chunk_rows or 0)
    buffers = threading.local()

    def pieces(a, b):
        first = int(np.searchsorted(starts, a, side="right")) - 1
        for k in range(first, len(segments)):
            lo, hi = max(a, starts[k]), min(b, starts[k + 1])
            if lo >= hi:
                if starts[k] >= b:
                    break
                continue
            yield segments[k], int(lo - starts[k]), int(hi - starts[k])

    def make_block(a, b):
        parts = list(pieces(a, b))
        if all(seg.rows_of is not None for seg, _, _ in parts):
            specs = [seg.rows_of(lo, hi) for seg, lo, hi in parts]
            if reuse and _one_cycle(specs, limit):
                return _CycleBuffer.of(buffers, specs, chunk_rows or b - a).block(specs)
            first = specs[0].design
            if (len(parts) > 1 or reusable) and first.numeric and all(spec.design is first for spec in specs):
                return _gathered(first, specs, _scratch(buffers, first, b - a) if reusable else None)
        return design.concat([seg.make_block(lo, hi) for seg, lo, hi in parts])

    def obs_of(a, b):
        return np.concatenate([seg.obs_of(lo, hi) for seg, lo, hi in pieces(a, b)])

    turns: dict[int, np.ndarray] = {}  # per cycle of observations: its target, tiled over a chunk and a turn

    def targets_of(a, b):
        assert y_enc is not None  # only asked for with a loss, which comes with a target
        parts = list(pieces(a, b))
        cycle = parts[0][0].observations
        if cycle is None or not _one_turn(parts, cycle):
            return y_enc[obs_of(a, b)]
        tiled = turns.get(id(cycle))
        if tiled is None:
            n_turns = -(-(min(chunk_rows or b - a, int(starts[-1])) + cycle.size) // cycle.size)
            tiled = turns[id(cycle)] = np.tile(y_enc[cycle], n_turns)  # read-only: threads may share it
        phase = parts[0][1] % cycle.size
        if phase + b - a > tiled.size:
            return y_enc[obs_of(a, b)]
        return tiled[phase : phase + b - a]

    return predict_pass(
        predictor,
        int(starts[-1]),
        make_block,
        y_enc=y_enc,
        obs_of=obs_of if loss is not None else None,
        loss=loss,
        chunk_rows=chunk_rows,
        n_jobs=n_jobs,
        keep_values=keep_values,
        targets_of=targets_of if loss is not None else None,
        # a chunk mixing cycled rows with others would be gathered: cut it where they meet
        breaks=tuple(int(starts[k]) for k in range(1, len(segments)) if segments[k].cycles != segments[k - 1].cycles)
        if reuse
        else (),
    )


def unmodified_segment(
    predictor: Predictor, rows: np.ndarray, local: Design | None = None, at: np.ndarray | None = None
) -> Segment:
    """The rows at positions ``rows`` as they are; read from ``local`` at positions ``at``
    when given (the same rows in a subset's design, see :meth:`Design.subset`), so that they
    share a chunk's gather with other rows read from it."""
    design, where = (predictor.design, rows) if local is None or at is None else (local, at)
    return Segment(
        rows.size,
        lambda a, b: design.block(where[a:b], {}),
        lambda a, b: rows[a:b],
        lambda a, b: RowSpec(design, where[a:b], {}),
    )


def predict_positions(
    predictor: Predictor,
    rows: np.ndarray,
    *,
    y_enc: np.ndarray | None = None,
    loss: Loss | None = None,
    chunk_rows: int | None = None,
    n_jobs: int | None = 1,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Values (and losses, given ``loss``) of the unmodified rows at positions ``rows``."""
    return predict_segments(
        predictor, [unmodified_segment(predictor, rows)], y_enc=y_enc, loss=loss, chunk_rows=chunk_rows, n_jobs=n_jobs
    )


def _custom_loss(loss: Loss, y, raw: np.ndarray) -> np.ndarray:
    """Call a user's loss callable; its failures and wrong outputs name the 'loss' parameter."""
    n_rows = len(raw)
    try:
        out = np.asarray(loss.fn(y, raw), dtype=float)
    except Exception as exc:  # the callable is the user's: any failure is its own
        raise InputError(
            f"The 'loss' callable failed on {n_rows} rows: {type(exc).__name__}: {_shorten(str(exc))}"
        ) from exc
    if out.shape != (n_rows,):
        raise InputError(
            f"The 'loss' callable returned shape {out.shape} for {n_rows} rows; it must return one "
            f"loss per row, shape ({n_rows},)."
        )
    if np.isnan(out).any():
        raise InputError(f"The 'loss' callable returned NaN for {int(np.isnan(out).sum())} of {n_rows} rows.")
    return out


def _effective_jobs(n_jobs: int | None) -> int:
    if n_jobs is None:
        return 1
    if n_jobs < 0:
        import os

        return max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    return n_jobs


def _shorten(text: str, limit: int = 300) -> str:
    """The first non-empty line of a model's error message, at most ``limit`` characters (the
    full message stays on the chained exception)."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    text = lines[0] if lines else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"
