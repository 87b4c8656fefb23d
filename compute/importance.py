"""``permutation_importance``: PFI with repetitions, one batched pass per feature."""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .errors import InputError, ModelError
from .prediction import predict_segments
from .results import PermutationImportance, PermutationPairs
from .sampling import sample_rows
from .segments import Segment, cycle_segment
from .trees import BATCHED_PREDICT, TREE_WALK, Choice, choose_engine, for_permutations, permuted_losses
from .validation import (
    check_choice,
    check_features,
    check_frame,
    check_int,
    check_n_jobs,
    check_rng,
    check_target,
    make_predictor,
)

KINDS = ("difference", "ratio")
#: Permuted positions (items x repeats x rows) from which the permutations are drawn in threads.
PARALLEL_DRAWS = 200_000
#: Most intervened rows per batch of features (bounds the per-row loss buffer).
BATCH_ROWS = 4_000_000


def permutation_importance(
    model,
    X,
    y,
    *,
    loss=None,
    n_repeats=10,
    kind="difference",
    features=None,
    groups=None,
    output=None,
    n_obs=None,
    random_state=0,
    n_jobs=1,
    chunk_rows=None,
    engine="auto",
) -> PermutationImportance:
    """Permutation feature importance with repetitions.

    Casalicchio, Molnar & Bischl (2018), Eq. (4) estimated by Eq. (8): for each repeat r a
    random permutation tau_r of the rows is applied to feature S, and

        difference: PFI_r = (1/n) sum_i L(f(x_S^(tau_r(i)), x_C^(i)), y_i) - GE
        ratio:      PFI_r = (1/n) sum_i L(f(x_S^(tau_r(i)), x_C^(i)), y_i) / GE

    with GE = (1/n) sum_i L(f(x^(i)), y_i), Eq. (1). A positive difference (a ratio above
    one) means the model relies on the feature. The unmodified rows and all features x
    repeats form one stream of intervened rows, evaluated in as few model calls as the
    chunk budget allows; ``n_jobs`` threads share the chunks.

    Parameters
    ----------
    model, X, y, loss, output, chunk_rows :
        As in :func:`compute.feature_profile` (``y`` is required here).
    n_repeats : int, default 10
        Number of permutations per feature.
    kind : {"difference", "ratio"}
    features : column label or list of column labels, optional
        Default: every input of the model (none when ``groups`` is given).
    groups : mapping of name -> list of column labels, optional
        Grouped PFI: each group's columns are permuted jointly (one permutation tau_r moves
        them together, so their joint distribution is kept), as dalex's ``variable_groups``.
        Rows named by the group names follow the features' rows. The k-th item (features
        first, then groups) uses the k-th random stream, so a one-column group placed where
        a feature was gets exactly that feature's permutations and PFI.
    n_obs : int, optional
        Use a seeded random sample of this many rows (as ``shapley_importance``'s ``n_obs``):
        the permutations move values among the sampled rows only, so the result equals
        ``permutation_importance`` on ``X.loc[result.rows]`` with the same ``random_state``
        (the sample is drawn after the permutations' seed). For large data: the cost is
        ``n_obs x features x n_repeats`` predictions instead of ``n x features x n_repeats``;
        ``row_std_error`` says what the sample costs in precision.
    random_state : int, Generator or None, default 0
        Results do not depend on ``n_jobs`` or ``chunk_rows`` for a given seed.
    n_jobs : int, default 1
        Threads evaluating chunks in parallel.
    engine : {"auto", "trees", "predict"}, default "auto"
        As in :func:`compute.feature_profile`: ``"trees"`` walks each row through each tree
        once per feature and looks every repeat's donor value up in the row's intervals
        (the same losses as the batched predict); groups of several columns take the
        batched predict, and so do single trees and forests under ``"auto"`` (the NumPy
        walk is slower than their predict for PFI; boosted ensembles are walked).
        ``result.engine`` and ``result.engine_reason`` say which ran and why.
    Returns
    -------
    :class:`PermutationImportance`: ``repeats`` (features x ``repeat_1`` ...
    ``repeat_<n_repeats>``), ``importance`` (mean over repeats), ``std`` (``ddof=0`` as in
    scikit-learn), ``model_error`` (GE), ``loss``, ``kind``, ``n_rows`` (the rows used),
    ``n_total`` (the rows of X), ``rows`` (their labels), ``row_std_error`` (the standard
    error of each PFI as a mean over those rows: the spread across rows of each row's loss
    change, averaged over the permutations, over sqrt(n_rows); it covers the choice of rows
    as well as of permutations); ``to_frame()`` gives importance, std and the repeats.
    """
    return permutation_block(
        model,
        X,
        y,
        loss=loss,
        n_repeats=n_repeats,
        kind=kind,
        features=features,
        groups=groups,
        output=output,
        n_obs=n_obs,
        random_state=random_state,
        n_jobs=n_jobs,
        chunk_rows=chunk_rows,
        engine=engine,
    )


#: Results cached before the engine fields moved onto :class:`PermutationImportance` unpickle as it.
EnginePermutationImportance = PermutationImportance


def permutation_block(
    model,
    X,
    y,
    *,
    streams=None,
    keep_pairs=False,
    **options,
) -> PermutationImportance:
    """:func:`permutation_importance` as a part of a larger computation: the seam a job
    runner splits PFI at (not part of the public signature).

    Parameters
    ----------
    model, X, y, **options :
        As in :func:`permutation_importance`.
    streams : list of int, optional
        The random stream of each item (features, then groups); default 0, 1, 2, ... . A
        block of features given the streams they have in a larger call gets exactly their
        permutations there, so blocks computed apart (on other machines) and joined with
        :meth:`PermutationImportance.concat` equal the one call.
    keep_pairs : bool, default False
        Keep every (row, donor) pair's loss (``result.pairs``, 12 bytes per row x feature x
        repeat), so that :meth:`PermutationImportance.restrict` gives a subgroup's PFI from
        these permutations without calling the model again.

    """
    setup = _setup(model, X, y, streams=streams, keep_pairs=keep_pairs, **options)
    return _aggregate(setup, _permuted_errors(setup))


@dataclass(frozen=True)
class _Setup:
    """A checked PFI call: the predictor and loss, the items (features, then groups) with
    their random streams, the rows used and the pair buffers (``keep_pairs``)."""

    predictor: Any
    loss: Any
    y: np.ndarray
    items: list
    seeds: list
    rows: np.ndarray
    index: pd.Index  # the labels of X
    n_repeats: int
    kind: str
    chunk_rows: int | None
    n_jobs: int
    pair_donors: np.ndarray | None
    pair_losses: np.ndarray | None
    # conditional importance: per item, a label per row; the permutations stay within labels
    strata: tuple[np.ndarray | None, ...] | None = None
    streamed: bool = False  # a block of a split job (streams given): keep each row's change for concat
    choice: Choice = Choice(None)  # the engine: the exact tree walk or the batched predict


def _setup(
    model,
    X,
    y,
    *,
    loss=None,
    n_repeats=10,
    kind="difference",
    features=None,
    groups=None,
    output=None,
    n_obs=None,
    random_state=0,
    n_jobs=1,
    chunk_rows=None,
    streams=None,
    keep_pairs=False,
    engine="auto",
) -> _Setup:
    """Every argument checked, the rows and the items' random streams drawn."""
    X = check_frame(X)
    predictor, Xm = make_predictor(model, X, output)
    groups = _check_groups(groups, Xm.columns)
    if groups and (features is None or (isinstance(features, (list, tuple)) and len(features) == 0)):
        features = []  # only the groups
    else:
        features = check_features(features, Xm.columns)
    clash = [name for name in groups if name in features]
    if clash:
        raise InputError(f"The 'groups' names {clash[:3]!r} are also in 'features'; give the groups other names.")
    n_repeats = check_int(n_repeats, "n_repeats", low=1, high=100_000)
    kind = check_choice(kind, "kind", KINDS)
    chunk_rows = check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    n_jobs = check_n_jobs(n_jobs)
    rng = check_rng(random_state)
    loss_obj, y_enc = check_target(y, len(X), predictor, loss, "permutation_importance")
    n_obs = check_int(n_obs, "n_obs", low=2, none_ok=True)
    items = [(f, [f]) for f in features] + list(groups.items())
    entropy, rows = _draw(rng, len(X), n_obs)
    streamed = streams is not None
    streams = _check_streams(streams, len(items))
    if not isinstance(keep_pairs, (bool, np.bool_)):
        raise InputError(f"The 'keep_pairs' parameter must be True or False (got {keep_pairs!r}).")
    n = rows.size
    choice = for_permutations(choose_engine(engine, predictor))
    joint = [name for name, members in groups.items() if len(members) > 1]
    if choice.ensemble is not None and joint:
        if engine == "trees":
            raise ModelError(
                f"engine='trees' cannot compute grouped PFI ({joint[0]!r} has several columns): the walk leaves "
                "one column free at a time."
            )
        choice = Choice(None, "groups of several columns: the walk leaves one column free at a time")
    choice = choice.for_columns([column for _, members in items for column in members])
    return _Setup(
        predictor=predictor,
        loss=loss_obj,
        y=y_enc,
        items=items,
        # SeedSequence(e).spawn(k)[i] is SeedSequence(e, spawn_key=(i,)): the stream of item i
        seeds=[np.random.SeedSequence(entropy, spawn_key=(s,)) for s in streams],
        rows=rows,
        index=X.index,
        n_repeats=n_repeats,
        kind=kind,
        chunk_rows=chunk_rows,
        n_jobs=n_jobs,
        pair_donors=np.empty((len(items), n_repeats, n), dtype=np.int32) if keep_pairs else None,
        pair_losses=np.empty((len(items), n_repeats, n)) if keep_pairs else None,
        streamed=streamed,
        choice=choice,
    )


def _all_permuted(setup: _Setup, local, at: np.ndarray, items: range) -> list[Segment]:
    """The segments of ``items``. Drawing the permutations and gathering the donors' values
    is a few percent of a fast model's pass (each Fisher-Yates step of
    ``Generator.permutation`` is a bounded random draw), so large draws run on the CPU's
    cores: numpy shuffles and gathers without the GIL, and each item has its own generator,
    so the permutations do not depend on the threads."""
    workers = min(len(items), os.cpu_count() or 1, 8)
    if workers < 2 or len(items) * setup.n_repeats * setup.rows.size < PARALLEL_DRAWS:
        return [_permuted(setup, local, at, k) for k in items]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda k: _permuted(setup, local, at, k), items))


def _positions(setup: _Setup, k: int) -> np.ndarray:
    """The donors of item k, all repeats end to end (repeat r's permutation tau_r of the
    rows at ``r*n:(r+1)*n``), from the item's own random stream; kept in the pairs."""
    n = setup.rows.size
    perm_rng = np.random.default_rng(setup.seeds[k])
    labels = None if setup.strata is None else setup.strata[k]
    if labels is None:
        positions = np.concatenate([perm_rng.permutation(n) for _ in range(setup.n_repeats)])
    else:
        positions = np.concatenate([permutation_within(labels, perm_rng) for _ in range(setup.n_repeats)])
    if setup.pair_donors is not None:
        setup.pair_donors[k] = positions.reshape(setup.n_repeats, n)
    return positions


def _walked_losses(setup: _Setup, choice: Choice, items: range, base: np.ndarray) -> np.ndarray:
    """The losses :func:`predict_segments` gives for the stream of ``items``, from the exact
    tree walk (``choice``): one walk per row and item, every repeat's donor looked up in the
    row's intervals (:mod:`compute.trees`); ``base`` the rows' own losses (the model's)."""
    predictor, rows = setup.predictor, setup.rows
    parts = []
    target = ((setup.y, setup.loss), base)
    numbers = choice.numbers(rows)  # once for every item
    for k in items:
        donors = _positions(setup, k).reshape(setup.n_repeats, rows.size)
        parts.append(permuted_losses(choice, predictor, rows, setup.items[k][1], donors, target, numbers=numbers))
    return np.concatenate(parts)


def _permuted(setup: _Setup, local, at: np.ndarray, k: int) -> Segment:
    """All repeats of item k (a feature or a group): row r*n + i is observation rows[i] with
    the item's columns taken from observation donors[r*n + i] (permutation tau_r of the rows),
    gathered from the sample's own design when it is a sample (cache-local copies; the same
    values as gathering from all of X). The donors' values are gathered once for all repeats
    (numeric data: in the dtype of the blocks they are written into)."""
    n, rows, columns = setup.rows.size, setup.rows, setup.items[k][1]
    positions = _positions(setup, k)
    donors = positions if at is local.every_row else at[positions]  # a sample's own design: the same
    if local.numeric:  # each column read contiguously, written in the blocks' dtype
        numbers, dtype = local.numbers(), local.block_dtype
        values = {c: np.ascontiguousarray(numbers[:, local.position(c)], dtype=dtype).take(donors) for c in columns}
    else:
        values = {c: local.column_values(c, donors) for c in columns}

    def replace_of(a, b):
        return {c: v[a:b] for c, v in values.items()}

    return cycle_segment(local, at, n * setup.n_repeats, replace_of, rows)


@dataclass(frozen=True)
class _Errors:
    """The permuted errors (items x repeats), each item's standard error over rows, the
    model's error and each row's own loss."""

    errors: np.ndarray
    row_se: np.ndarray
    model_error: float
    base: np.ndarray
    row_cov: np.ndarray | None = None  # items x items: covariance of the items' mean changes (see below)
    changes: np.ndarray | None = None  # items x rows: each row's mean loss change (float32)
    choice: Choice = Choice(None)  # the engine that ran


#: Most (item, row) loss changes kept during a pass for the row covariance (float32: 40 MB);
#: above it the comparisons of two features fall back to their row standard errors alone.
ROW_CHANGES_MAX = 10_000_000


def _permuted_errors(setup: _Setup) -> _Errors:
    """The permuted errors and the unmodified rows' losses (an :class:`_Errors`). One
    stream: the unmodified rows, then every item x repeat, cut into batches of whole items
    (at most BATCH_ROWS rows, so the loss buffer stays bounded); threads (n_jobs) share the
    chunks, a few large model calls replacing one or more per feature."""
    design, rows, n, n_repeats = setup.predictor.design, setup.rows, setup.rows.size, setup.n_repeats
    local = design.subset(rows) if n < design.n_rows else design
    at = local.every_row if local is not design else rows
    # the sample's rows as they are: the cycle's first turn (read from the same design as the permuted ones)
    unmodified = cycle_segment(local, at, n, lambda a, b: {}, rows)
    errors = np.empty((len(setup.items), n_repeats))
    row_se = np.full(len(setup.items), np.nan)  # standard error over rows of each row's mean loss change
    keep = len(setup.items) * n <= ROW_CHANGES_MAX and n > 1
    changes = np.empty((len(setup.items), n), dtype=np.float32) if keep else None
    batch = max(1, BATCH_ROWS // (n * n_repeats))
    model_error: float | None = None
    base = np.empty(0)
    choice = setup.choice
    if choice.ensemble is not None:  # the rows as they are: the model's own predict, bit for bit
        own_values, own = predict_segments(  # read from the sample's design: never a copy of all rows
            setup.predictor,
            [unmodified],
            y_enc=setup.y,
            loss=setup.loss,
            chunk_rows=setup.chunk_rows,
            n_jobs=setup.n_jobs,
        )
        choice = choice.verified(setup.predictor, rows, own_values)
        if choice.ensemble is not None:
            assert own is not None  # a loss was given
            base = own
            model_error = float(own.mean())
    for start in range(0, len(setup.items), batch):
        group = range(start, min(start + batch, len(setup.items)))
        head = [unmodified] if model_error is None else []
        losses: np.ndarray | None
        if choice.ensemble is not None:
            losses = _walked_losses(setup, choice, group, base)
        else:
            _, losses = predict_segments(
                setup.predictor,
                head + _all_permuted(setup, local, at, group),
                y_enc=setup.y,
                loss=setup.loss,
                chunk_rows=setup.chunk_rows,
                n_jobs=setup.n_jobs,
                keep_values=False,
            )
        assert losses is not None  # a loss was given, so the pass returns losses
        if head:
            base, losses = losses[:n], losses[n:]
            model_error = float(base.mean())
        per = losses.reshape(len(group), n_repeats, n)
        if setup.pair_losses is not None:
            setup.pair_losses[start : start + len(group)] = per - base
        errors[start : start + len(group)] = per.mean(axis=2)
        # (group, n): each row's loss change, averaged over the repeats after subtracting, so a
        # feature whose shuffles change no prediction has changes of exactly 0 (standard error 0)
        change = (per - base[None, None, :]).mean(axis=1)
        row_se[start : start + len(group)] = change.std(axis=1, ddof=1) / np.sqrt(n)
        if changes is not None:
            changes[start : start + len(group)] = change
    assert model_error is not None  # the first batch always carries the unmodified rows
    # the covariance of two items' mean changes over the rows (ddof=1, over n): var(a - b) of a
    # paired comparison is C_aa + C_bb - 2 C_ab; C_aa is row_se² (up to float32 rounding)
    row_cov = None if changes is None else np.atleast_2d(np.cov(changes, ddof=1)) / n
    return _Errors(errors, row_se, model_error, base, row_cov, changes, choice)


def _aggregate(setup: _Setup, found: _Errors) -> PermutationImportance:
    """Eq. (8): each repeat's PFI against the model's error, as a difference or a ratio."""
    errors, row_se, model_error, base = found.errors, found.row_se, found.model_error, found.base
    row_cov = found.row_cov
    if setup.kind == "difference":
        values = errors - model_error
    elif model_error <= 1e-12 * max(float(errors.max()), 1e-300):
        raise InputError(
            f"The ratio form of PFI is undefined: the model's error on this data is "
            f"{model_error:.3g}, essentially 0. Use kind='difference'."
        )
    else:
        values = errors / model_error
        row_se = row_se / model_error
        row_cov = None if row_cov is None else row_cov / model_error**2
    repeats = pd.DataFrame(
        values,
        index=pd.Index([name for name, _ in setup.items], name="feature"),
        columns=[f"repeat_{r + 1}" for r in range(setup.n_repeats)],
    )
    pairs = None
    if setup.pair_losses is not None and setup.pair_donors is not None:
        pairs = PermutationPairs(setup.pair_losses, setup.pair_donors, base)
    return PermutationImportance(
        engine=found.choice.name,
        engine_reason=found.choice.reason,
        repeats=repeats,
        model_error=model_error,
        loss=setup.loss.name,
        kind=setup.kind,
        n_rows=setup.rows.size,
        n_total=len(setup.index),
        rows=setup.index[setup.rows],
        row_std_error=pd.Series(row_se, index=repeats.index, name="row_std_error"),
        pairs=pairs,
        row_covariance=None if row_cov is None else pd.DataFrame(row_cov, index=repeats.index, columns=repeats.index),
        row_changes=found.changes if setup.streamed else None,  # a block of a split job: for concat
    )


def permutation_within(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random permutation of the rows that moves each row only among the rows with its
    label (uniform within each label): position i gets the donor out[i]."""
    order = np.argsort(labels, kind="stable")  # the rows, label by label
    shuffled = np.lexsort((rng.random(labels.size), labels))  # label by label, shuffled within
    out = np.empty(labels.size, dtype=np.int64)
    out[order] = shuffled
    return out


def _draw(rng: np.random.Generator, n: int, n_obs: int | None) -> tuple[int, np.ndarray]:
    """The permutations' entropy, then the rows (drawn after it: the sample's permutations
    are those of the same call on ``X.loc[rows]``)."""
    entropy = int(rng.integers(2**63))
    return entropy, sample_rows(n, n_obs, rng)


def pfi_engine(model, X, output=None) -> str:
    """The engine :func:`permutation_importance` takes for ``model`` on ``X``'s columns under
    ``engine="auto"``, one feature at a time: ``"exact tree walk"`` or ``"batched predict"``
    (:mod:`compute.trees`). A forecast from the model's structure, for planning (a caller
    sizing its row budget); the call itself still checks the walk against the model's own
    predictions and falls back, naming why, should they disagree."""
    predictor, Xm = make_predictor(model, check_frame(X), output)
    choice = for_permutations(choose_engine("auto", predictor)).for_columns(list(Xm.columns))
    return TREE_WALK if choice.ensemble is not None else BATCHED_PREDICT


def permutation_rows(n_rows: int, n_obs: int | None, random_state=0) -> np.ndarray:
    """Positions of the rows ``permutation_importance(X, n_obs=n_obs, random_state=...)``
    uses on ``n_rows`` rows, without calling the model (all of them without a sample)."""
    n_rows = check_int(n_rows, "n_rows", low=1)
    n_obs = check_int(n_obs, "n_obs", low=2, none_ok=True)
    return _draw(check_rng(random_state), n_rows, n_obs)[1]


def _check_streams(streams, n_items: int) -> list[int]:
    if streams is None:
        return list(range(n_items))
    if not isinstance(streams, (list, tuple, np.ndarray)) or len(streams) != n_items:
        raise InputError(
            f"The 'streams' parameter must list one stream number per feature and group ({n_items}); got {streams!r}."
        )
    out = []
    for s in streams:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)) or s < 0:
            raise InputError(f"The 'streams' must be whole numbers >= 0 (got {s!r}).")
        out.append(int(s))
    if len(set(out)) != len(out):
        raise InputError(f"The 'streams' must be distinct (got {out!r}): two items would share permutations.")
    return out


def _check_groups(groups, columns) -> dict:
    """{name: [columns]} of the groups to permute jointly; {} for None."""
    if groups is None:
        return {}
    if not isinstance(groups, Mapping):
        raise InputError(
            f"The 'groups' parameter must map a name to a list of columns, e.g. {{'size': ['height', 'weight']}} "
            f"(got {type(groups).__name__})."
        )
    if not groups:
        raise InputError("The 'groups' mapping is empty; name at least one group of columns.")
    checked = {}
    for name, members in groups.items():
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"Each group in 'groups' needs a non-empty text name (got {name!r}).")
        checked[name] = check_features(members, columns, name=f"groups[{name!r}]")
    return checked
