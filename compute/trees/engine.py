"""Choosing the engine of a block method, and the tree engine's passes.

``engine="auto"`` (default) takes the exact tree walk when the model is one the engine
reads, else the batched predict, recording why (:class:`Choice`); ``"trees"`` raises
:class:`~compute.errors.ModelError` naming why a model is not read; ``"predict"`` is the
batched predict of every intervened row (the reference, and the path of every other model).
Before it is used, the walk is checked against the model's own predictions of a few of the
unmodified rows (those with missing values first; a profile predicts only these, other
passes predict every row anyway): a disagreement (another library version's arithmetic)
falls back, never a wrong number.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import InputError, ModelError
from ..losses import Loss
from ..prediction import Predictor, _custom_loss
from . import walk
from .boosters import catboost_named, catboost_refusal
from .categories import levels
from .read import Ensemble, Unsupported, forget, pipeline_parts, read_model_cached
from .space import Space, check_column_wise
from .walk import curve_and_own_sums, curve_sums, lookup_sums, value_bins
from .xgboost_read import xgboost_codes

ENGINES = ("auto", "trees", "predict")
TREE_WALK = "exact tree walk"
BATCHED_PREDICT = "batched predict"
#: Rows of the data the walk is checked on against the model's own predict.
CHECK_ROWS = 32
#: Largest gap (relative to the spread of the checked outputs) the check accepts by default
#: (each :class:`Ensemble` states its own: ``tolerance`` relative, plus ``rounding`` absolute
#: where its library sums in float32).
CHECK_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Choice:
    """The engine a call runs on: ``ensemble`` for the tree walk (None: batched predict),
    ``reason`` why the batched predict was taken (None otherwise), ``forced`` when the walk
    was asked for (``engine="trees"``: a walk that cannot be used raises)."""

    ensemble: Ensemble | None
    reason: str | None = None
    forced: bool = False
    space: Space | None = None  # the rows as the walked model receives them (with the ensemble)
    cached: bool = False  # the ensemble was read by an earlier call (checked again on a disagreement)

    @property
    def name(self) -> str:
        return TREE_WALK if self.ensemble is not None else BATCHED_PREDICT

    def note(self) -> dict:
        """What a result records: ``engine`` and ``engine_reason``."""
        return {"engine": self.name, "engine_reason": self.reason}

    def verified(
        self, predictor: Predictor, rows: np.ndarray, own_values: np.ndarray, numbers: np.ndarray | None = None
    ) -> Choice:
        """This choice once the walk is checked against the model's own curve values
        ``own_values`` of the rows ``rows`` (the unmodified rows a pass predicts anyway, or
        the :func:`check_rows` of a profile's; ``numbers``: their model input when already
        gathered): up to :data:`CHECK_ROWS` of them, those with missing values first. A walk
        that disagrees gives the batched predict with the reason (``engine="trees"``: raises)."""
        if self.ensemble is None or self.space is None:
            return self
        try:
            _verify(self.ensemble, self.space, predictor, (rows, numbers), own_values)
        except Unsupported as exc:
            if not self.cached:
                return _fallback(exc, self.forced)
            _, final = pipeline_parts(predictor.model)  # read before this model was fitted again: read it now
            forget(final)
            try:
                fresh = replace(self, ensemble=read_model_cached(final)[0], cached=False)
            except Unsupported as again:
                return _fallback(again, self.forced)
            return fresh.verified(predictor, rows, own_values, numbers)
        return self

    def numbers(self, rows: np.ndarray) -> np.ndarray:
        """The rows ``rows`` as the walk compares them (a walk was chosen)."""
        assert self.ensemble is not None and self.space is not None
        return self.ensemble.compared(self.space.rows(rows))

    def for_columns(self, columns) -> Choice:
        """This choice for a pass intervening on ``columns``: the batched predict (with the
        reason; ``engine="trees"``: raises) when the model receives one of them in other than
        exactly one column (a pipeline's one-hot encoding), or its categories in more groups
        than the walk holds (:data:`.categories.MAX_LEVELS`)."""
        if self.ensemble is None or self.space is None:
            return self
        try:
            for column in columns:
                j = self.space.column(column)
                if self.ensemble.is_categorical(j):
                    levels(self.ensemble, j)  # more groups of categories than the walk holds: Unsupported
        except Unsupported as exc:
            return _fallback(exc, self.forced)
        return self


def _fallback(exc: Unsupported, forced: bool) -> Choice:
    if forced:
        raise ModelError(f"engine='trees' cannot compute this model: {exc}. Use engine='auto' or 'predict'.") from exc
    return Choice(None, str(exc))


def choose_engine(engine, predictor: Predictor) -> Choice:
    """The engine for ``predictor`` (before the walk is checked, :meth:`Choice.verified`)."""
    if not isinstance(engine, str) or engine not in ENGINES:
        raise InputError(f"The 'engine' parameter must be one of {list(ENGINES)!r} (got {engine!r}).")
    if engine == "predict":
        return Choice(None, "engine='predict' was asked for")
    try:
        (ens, cached), space = _readable(predictor)
        return Choice(ens, forced=engine == "trees", space=space, cached=cached)
    except Unsupported as exc:
        return _fallback(exc, engine == "trees")


#: Models whose PFI the NumPy walk (without numba) computes slower than the batched predict
#: at the usual repeats (benchmarks/speed_trees.py: a full-depth forest 1.6x the raw predict
#: at 10 repeats, where the batched predict is 0.9x; compiled: 0.4x): under "auto" without
#: numba their PFI takes the predict.
SLOWER_FOR_PFI = ("DecisionTree", "RandomForest", "ExtraTrees")


def for_permutations(choice: Choice) -> Choice:
    """The engine of a PFI call under ``engine="auto"``: the walk, except for deep single
    trees and forests (:data:`SLOWER_FOR_PFI`) when the walk is not compiled, where the
    batched predict is faster."""
    ens = choice.ensemble
    if ens is None or choice.forced or walk.COMPILED or not ens.name.startswith(SLOWER_FOR_PFI):
        return choice
    return Choice(
        None,
        f"{ens.name}: the NumPy tree walk is slower than the batched predict for PFI (engine='trees' forces it)",
    )


def _readable(predictor: Predictor) -> tuple[tuple[Ensemble, bool], Space]:
    """The model's :class:`Ensemble` (and whether it was read before) and the :class:`Space`
    it reads the rows in, or :class:`Unsupported` naming why the walk cannot compute it on
    this data."""
    design = predictor.design
    pre, final = pipeline_parts(predictor.model)
    for step in pre:
        check_column_wise(step)
    own = getattr(final, "_preprocessor", None)  # HistGradientBoosting's own encoder of categorical features
    if own is not None and type(final).__name__.startswith("HistGradientBoosting"):
        pre = (*pre, own)
    if not pre and not design.numeric:
        pre = (_coding(final, design.frame),)
    ens, cached = read_model_cached(final)
    if ens.categorical and not walk.COMPILED:
        raise Unsupported("categorical splits are walked by the compiled walk only (numba is not installed)")
    if predictor.is_classifier and not predictor.has_proba:
        raise Unsupported("a classifier without predict_proba")
    if predictor.is_classifier and predictor.classes is not None:
        width = ens.n_outputs if ens.n_outputs > 1 else 2
        if width != len(predictor.classes):
            raise Unsupported(f"{ens.name} gives {width} outputs for {len(predictor.classes)} classes")
    if not pre and ens.float32 and design.max_abs() > np.finfo(np.float32).max:
        raise Unsupported("values beyond float32's range, which the model refuses")
    return (ens, cached), Space(design, pre)


def _coding(model, frame):
    """The step giving the walk a frame with non-numeric columns as ``model`` reads it: an
    XGBoost model's pandas category columns as its codes (:func:`.xgboost_read.xgboost_codes`),
    or :class:`Unsupported` naming why not (a CatBoost model's categorical features by name)."""
    if type(model).__module__.split(".")[0] == "catboost":
        refusal = catboost_refusal(catboost_named(model))
        if refusal:
            raise Unsupported(refusal)
    return xgboost_codes(model, frame)


def _verify(ens: Ensemble, space: Space, predictor: Predictor, rows, own_values: np.ndarray) -> None:
    """Unsupported unless the walk gives the model's ``own_values`` of ``rows`` = (positions,
    their model input or None) on the :func:`check_rows` among them."""
    positions, numbers = rows
    numbers = space.rows(positions) if numbers is None else numbers
    picked = check_rows(numbers)
    numeric = [j for j in range(numbers.shape[1]) if not ens.is_categorical(j)]
    j = numeric[0] if numeric else 0  # any feature at the rows' own values: a numeric one needs no levels
    sums = lookup_sums(ens, ens.compared(numbers[picked]), j, numbers[picked, j : j + 1])[:, 0, :]
    mine = np.asarray(predictor.value(ens.finish(sums)), dtype=np.float64)
    theirs = np.asarray(own_values, dtype=np.float64)[picked]
    spread = max(float(np.ptp(theirs)) if theirs.size else 0.0, float(np.max(np.abs(theirs), initial=0.0)), 1e-300)
    gap = float(np.max(np.abs(mine - theirs), initial=0.0)) if mine.shape == theirs.shape else np.inf
    if not gap <= ens.tolerance * spread + ens.rounding:
        raise Unsupported(f"the walk disagrees with the model's own predict on the check rows (gap {gap:.3g})")


def check_rows(numbers: np.ndarray) -> np.ndarray:
    """Up to :data:`CHECK_ROWS` rows: those with missing values first, then spread evenly."""
    n = numbers.shape[0]
    missing = np.flatnonzero(np.isnan(numbers).any(axis=1))[: CHECK_ROWS // 2]
    spread = np.unique(np.linspace(0, n - 1, min(n, CHECK_ROWS - missing.size)).astype(np.int64))
    return np.unique(np.concatenate([missing, spread]))


def pointwise_loss(loss: Loss, target, raw: np.ndarray) -> np.ndarray:
    """Each row's loss as the batched predict computes it: a built-in loss directly, a
    user's callable checked (``prediction._custom_loss``)."""
    return loss.fn(target, raw) if loss.builtin else _custom_loss(loss, target, raw)


@dataclass(frozen=True)
class Own:
    """The rows' own predictions (the model's own predict of the unmodified rows, or the
    walk's at their own values): ``values`` (curve values) and ``losses`` (None without a
    target). A cell whose walk is the row's own (the feature's value in the same bin as the
    row's) takes these, bit for bit, so a change is exactly 0 where the model cannot see one."""

    values: np.ndarray
    losses: np.ndarray | None


#: Cells (rows x grid points) finished at a time by :func:`profile_pass`: the link's and the
#: loss's temporaries (a few arrays of this size) stay in the cache.
FINISH_CELLS = 16_384


def profile_pass(
    choice: Choice,
    predictor: Predictor,
    rows: np.ndarray,
    feature,
    grid_values: np.ndarray,
    *,
    target: tuple[np.ndarray | None, Loss | None],
    own: Own | None,
    after: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The ``rows x grid`` tensor of a profile (values and, given ``target = (y_enc,
    loss)``, losses; flat, row by row) from one walk per row and tree (``choice``: a walk),
    followed by the own values (and losses) of the rows ``after`` (positions or a mask of
    ``rows``) appended, as ``np.concatenate`` would. ``own`` None: the rows' own values
    from the same walk (:func:`.walk.curve_and_own_sums`)."""
    ens, space = choice.ensemble, choice.space
    assert ens is not None and space is not None  # a walk was chosen
    j = space.column(feature)
    X = space.rows(rows)
    grid = space.values(feature, grid_values)
    y_enc, loss = target
    with_loss = loss is not None and y_enc is not None
    if own is None:
        sums, own_sums = curve_and_own_sums(ens, X, j, grid, raw=True)
        own_raw = ens.finish(own_sums)
        own_losses = pointwise_loss(loss, y_enc[rows], own_raw) if loss is not None and y_enc is not None else None
        own = Own(np.asarray(predictor.value(own_raw)), own_losses)
    else:
        sums = curve_sums(ens, ens.compared(X), j, grid)
    n, m = sums.shape[0], sums.shape[1]
    flat = sums.reshape(n * m, -1)
    own_bins, grid_bins = value_bins(ens, j, X[:, j]), value_bins(ens, j, grid)
    values = losses = None
    step = max(1, FINISH_CELLS // max(1, m))
    for a in range(0, max(n, 1), step):  # a block of rows at a time (its temporaries in the cache)
        b = min(a + step, n)
        raw = ens.finish(flat[a * m : b * m])
        same = own_bins[a:b, None] == grid_bins[None, :]  # the row's own walk: its own values, bit for bit
        values = _cells(values, np.asarray(predictor.value(raw)), (a, b, n, m), own.values, same, after)
        if with_loss:
            assert loss is not None and y_enc is not None
            found = pointwise_loss(loss, np.repeat(y_enc[rows[a:b]], m), raw)
            losses = _cells(losses, found, (a, b, n, m), own.losses, same, after)
    assert values is not None  # the loop ran
    return values, losses


def _cells(out: np.ndarray | None, found: np.ndarray, block: tuple[int, int, int, int], own, same, tail) -> np.ndarray:
    """``out`` (made on the first block: ``n x m`` cells, then ``own[tail]``, as
    ``np.concatenate([cells, own[tail]])`` would be) with the cells of rows ``a:b`` set to
    ``found``, or where ``same`` (the row's own walk) to the row's ``own`` value (``own``
    None: no own values, no tail)."""
    a, b, n, m = block
    if out is None:
        extra = own[tail] if own is not None and tail is not None else found[:0]
        out = np.empty(n * m + extra.size, dtype=np.result_type(found, extra))
        out[n * m :] = extra
    cells = out[a * m : b * m].reshape(b - a, m)
    cells[...] = found.reshape(b - a, m)
    if own is not None:
        np.copyto(cells, own[a:b, None], where=same, casting="unsafe")
    return out


def permuted_losses(
    choice: Choice,
    predictor: Predictor,
    rows: np.ndarray,
    columns: list,
    donors: np.ndarray,
    target: tuple[tuple[np.ndarray, Loss], np.ndarray],
    *,
    numbers: np.ndarray | None = None,
) -> np.ndarray:
    """The losses of rows ``rows`` with ``columns`` (one column) taken from the rows
    ``rows[donors[r]]`` (repeats x rows), repeat-major as PFI's stream: one walk per row for
    every repeat, each donor's value looked up in its row's intervals. ``target`` is
    ``((y_enc, loss), own losses of the rows)``; a donor whose value walks as the row's own
    gives the row's own loss. ``numbers``: the rows as the walk compares them
    (:meth:`Choice.numbers`), when found once for several columns."""
    ens, space = choice.ensemble, choice.space
    assert ens is not None and space is not None  # a walk was chosen
    (column,) = columns
    j = space.column(column)
    X = choice.numbers(rows) if numbers is None else numbers
    x = X[:, j]
    bins = value_bins(ens, j, x)  # once: the donors' bins are gathered, as their values
    donor_bins = bins[donors]  # repeats x rows
    queries = x[donors].T  # rows x repeats
    sums = lookup_sums(ens, X, j, queries, np.ascontiguousarray(donor_bins.T))  # rows x repeats x outputs
    raw = ens.finish(sums.transpose(1, 0, 2).reshape(donors.size, -1))
    (y_enc, loss), own = target
    losses = pointwise_loss(loss, np.tile(y_enc[rows], donors.shape[0]), raw)
    same = donor_bins == bins[None, :]  # the donor's value walks as the row's own
    losses = losses.reshape(donors.shape)
    np.copyto(losses, own, where=same, casting="unsafe")
    return losses.ravel()
