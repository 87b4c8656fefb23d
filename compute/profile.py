"""``feature_profile``: one intervention pass per feature gives ICE, PD, ICI, PI and PFI."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from .errors import InputError
from .losses import Loss
from .prediction import (
    GridSpec,
    Predictor,
    Segment,
    predict_segments,
    repeated,
    unmodified_segment,
)
from .results import FeatureProfile
from .sampling import Grid, make_grid, sample_rows
from .trees import Choice, Own, check_rows, choose_engine, own_in_pass, profile_pass
from .validation import (
    check_feature,
    check_features,
    check_frame,
    check_grid,
    check_int,
    check_kwargs,
    check_n_jobs,
    check_rng,
    encode_target,
    make_predictor,
    resolve_loss,
)


def feature_profile(
    model,
    X,
    y=None,
    feature=None,
    *,
    grid="observed",
    grid_weights=None,
    loss=None,
    output=None,
    n_obs=None,
    random_state=0,
    n_jobs=1,
    chunk_rows=None,
    engine="auto",
    column=None,
) -> FeatureProfile:
    """Intervene on one feature over a grid and evaluate the model once on all of it.

    Algorithm 1 of Casalicchio, Molnar & Bischl (2018), vectorised: the ``n_obs x n_grid``
    intervened rows are predicted in a few large batches, and ICE, PD (Eq. 2), ICI, PI,
    local PFI and global PFI (Eq. 7 and 9) are all aggregations of that one tensor.

    Parameters
    ----------
    model : fitted estimator
        Anything with ``predict`` (regressors) or ``predict_proba``/``predict`` and
        ``classes_`` (classifiers), e.g. a scikit-learn ``Pipeline``.
    X : DataFrame
        The data the importance refers to (usually a test set). The grid is built from
        all of X; the curves are drawn for all rows or for a sample of ``n_obs``.
    y : array-like of shape (len(X),), optional
        Target. Without it only the prediction views (ICE, PD) are available.
    feature : column label
        The feature S.
    grid : "observed", int or array-like, default "observed"
        See :func:`compute.sampling.make_grid`. ``"observed"`` makes ``importance`` the
        exact estimator of Eq. (7).
    grid_weights : array-like, optional
        Weights for an explicit array grid (default: the share of observed values nearest
        to each point).
    loss : str or callable, optional
        ``"squared_error"`` (default for regressors), ``"absolute_error"``, ``"log_loss"``
        (default for classifiers with ``predict_proba``), ``"brier"``, ``"zero_one"``, or
        ``loss(y_true, raw) -> ndarray`` of per-row losses, where ``raw`` is ``predict``'s
        output for regressors and ``predict_proba``'s for classifiers.
    output : class label, optional
        For classifiers, the class whose probability ICE and PD show (default: the last
        of ``model.classes_``).
    n_obs : int, optional
        Explain a random sample of this many rows (seeded by ``random_state``).
    random_state : int, Generator or None, default 0
    n_jobs : int, default 1
        Threads evaluating chunks in parallel (-1: all cores).
    chunk_rows : int, optional
        Most intervened rows per model call (default: within a 256 MiB budget).
    engine : {"auto", "trees", "predict"}, default "auto"
        How the intervened rows are evaluated. ``"trees"``: the exact tree walk
        (:mod:`compute.trees`: scikit-learn tree models, XGBoost, LightGBM and CatBoost; one
        walk per row and tree gives the row's whole ICE curve, the same numbers as the
        model's own predict, XGBoost's within its float32 rounding); it raises a
        ``ModelError`` naming why a model is not read. ``"predict"``: the batched predict
        of every intervened row. ``"auto"``: the walk when the model is read, else the
        batched predict. ``params["engine"]`` says which ran ("exact tree walk" or
        "batched predict"), ``params["engine_reason"]`` why the walk was not taken.
    column : Series, optional
        The feature's values in the whole data set the grid is built from (default:
        ``X[feature]``). With it ``X`` may hold the rows to explain alone: the call on
        ``X.iloc[rows]``, with ``rows`` the sample ``n_obs`` draws from the whole data
        (:func:`compute.sampling.sample_rows`) and the same ``n_obs`` and ``random_state``,
        is the call on the whole data, number for number (a split job's part reads its
        sample and one column, never the whole data set).

    Returns
    -------
    FeatureProfile
    """
    X = check_frame(X)
    predictor, Xm = make_predictor(model, X, output)
    check_feature(Xm.columns, feature)
    grid = check_grid(grid, Xm[feature])
    n_obs = check_int(n_obs, "n_obs", low=1, none_ok=True)
    chunk_rows = check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    n_jobs = check_n_jobs(n_jobs)
    rng = check_rng(random_state)
    loss_obj: Loss | None = resolve_loss(loss, predictor)  # checked even when unused (y=None)
    if y is None:
        loss_obj = None
    y_enc = encode_target(y, len(X), predictor, loss_obj) if loss_obj is not None else None
    grid_obj = _checked_grid(_grid_column(Xm, feature, column), grid, grid_weights)
    choice = choose_engine(engine, predictor)
    rows = sample_rows(len(X), n_obs, rng)
    params = {
        "grid": grid if isinstance(grid, (str, int)) else "array",
        "loss": None if loss_obj is None else loss_obj.name,
        "n_obs": n_obs,
        "random_state": random_state if isinstance(random_state, int) else None,
        **choice.note(),
    }
    return _profile(
        predictor,
        feature,
        grid_obj,
        X.index,
        rows,
        y_enc,
        loss=loss_obj,
        params=params,
        chunk_rows=chunk_rows,
        n_jobs=n_jobs,
        choice=choice,
    )


def feature_profiles(model, X, y=None, features=None, *, n_jobs=1, **kwargs) -> dict:
    """:func:`feature_profile` for several features (default: all the model's inputs),
    features in parallel threads. Returns ``{feature: FeatureProfile}`` in input order."""
    check_kwargs(kwargs, feature_profile, "feature_profiles", taken=("model", "X", "y", "feature", "n_jobs"))
    X = check_frame(X)
    _, Xm = make_predictor(model, X, kwargs.get("output"))
    features = check_features(features, Xm.columns)  # one label is a list of one
    n_jobs = check_n_jobs(n_jobs)
    run = delayed(lambda f: feature_profile(model, X, y, f, n_jobs=1, **kwargs))
    profiles = Parallel(n_jobs=n_jobs, prefer="threads")(run(f) for f in features)
    return dict(zip(features, profiles))


def _grid_column(Xm: pd.DataFrame, feature, column) -> pd.Series:
    """The values the grid describes: ``X[feature]``, or the whole data's ``column``."""
    if column is None:
        return Xm[feature]
    if np.ndim(column) != 1 or len(column) < 1:
        raise InputError(
            f"The 'column' must be the values of {feature!r} in the whole data, one dimension and at least one "
            f"value (got shape {np.shape(column)})."
        )
    values = column if isinstance(column, pd.Series) else pd.Series(np.asarray(column))
    return values.rename(feature)


def _checked_grid(column: pd.Series, grid, grid_weights) -> Grid:
    if grid_weights is not None:
        try:
            weights = np.asarray(grid_weights, dtype=float)
        except (TypeError, ValueError) as exc:
            raise InputError(f"The 'grid_weights' must be numbers, one per grid point (got {grid_weights!r}).") from exc
        if isinstance(grid, (str, int)):
            raise InputError(f"The 'grid_weights' needs an array 'grid' of the same length (got grid={grid!r}).")
        if weights.shape != (len(grid),):
            raise InputError(
                f"The 'grid_weights' needs an array 'grid' of the same length (got {weights.size} "
                f"weight(s) for {len(grid)} grid points)."
            )
        if not np.all(np.isfinite(weights)) or (weights < 0).any() or weights.sum() <= 0:
            raise InputError(
                f"The 'grid_weights' must be finite, non-negative and not all zero (got "
                f"{np.array2string(weights, threshold=6)})."
            )
    grid_obj = make_grid(column, grid, grid_weights)
    if all(value is None or (isinstance(value, float) and np.isnan(value)) for value in grid_obj.values):
        raise InputError(
            f"Feature {column.name!r} has no curve: {column.name} holds no values in these rows (all missing)."
        )
    if grid_obj.values.size < 2:
        raise InputError(
            f"Feature {column.name!r} has a single distinct value ({_plain_value(grid_obj.values[0])}) in these "
            "rows; a curve needs at least two grid points."
        )
    return grid_obj


def _plain_value(value) -> str:
    """A value as people read it: ``0.0`` or ``'US'``, never NumPy's ``np.float64(0.0)``."""
    value = value.item() if isinstance(value, np.generic) else value
    return repr(value) if isinstance(value, str) else str(value)


def _profile(
    predictor: Predictor,
    feature,
    grid: Grid,
    index: pd.Index,
    rows: np.ndarray,
    y_enc: np.ndarray | None,
    *,
    loss: Loss | None,
    params: dict,
    chunk_rows: int | None,
    n_jobs: int,
    choice: Choice | None = None,
) -> FeatureProfile:
    design = predictor.design
    n_obs, n_grid = rows.size, grid.values.size
    grid_values = design.cast(feature, grid.values)

    # The tensor row by row: row i * n_grid + g is observation rows[i] with the feature at
    # grid point g. This order matters: consecutive rows differ in one value only, so a
    # tree ensemble walking row after row (LightGBM) takes nearly the same paths, measured
    # 3x faster than in grid-major order. Gathered from the observations' own design when
    # they are a sample (cache-local, row-major copies; the same values).
    local = design.subset(rows) if n_obs < design.n_rows else design
    at = local.every_row if local is not design else rows

    def rows_of(start, stop):
        return GridSpec(local, at, feature, grid_values, start, stop)

    def make_block(start, stop):
        return rows_of(start, stop).block()

    # The unmodified row of an observation whose own value is a grid point is already in
    # the tensor (bit for bit): read it off. Rows whose value is not a grid point ride
    # along at the end of the same stream (one model call, not two).
    x = _own_values(design, feature, rows, grid.categorical)
    own = _grid_position(x, grid)
    on_grid = own >= 0
    off = ~on_grid
    tensor = Segment(n_obs * n_grid, make_block, lambda a, b: repeated(rows, n_grid, a, b), rows_of)
    segments = [tensor, unmodified_segment(predictor, rows[off], local, at[off])] if off.any() else [tensor]
    walked = None
    if choice is not None and choice.ensemble is not None:  # the exact tree walk: the same stream's numbers
        walked = _walked(
            choice,
            predictor,
            rows,
            feature,
            grid_values,
            off,
            target=(y_enc, loss),
            sample=(local, at),
            chunk_rows=chunk_rows,
            n_jobs=n_jobs,
        )
        params.update(walked.choice.note())
    if walked is not None and walked.values is not None:
        values, losses = walked.values, walked.losses
    else:
        values, losses = predict_segments(
            predictor, segments, y_enc=y_enc, loss=loss, chunk_rows=chunk_rows, n_jobs=n_jobs
        )
    pred = values[: n_obs * n_grid].reshape(n_obs, n_grid)
    loss_grid = None if losses is None else losses[: n_obs * n_grid].reshape(n_obs, n_grid)

    base_pred = np.empty(n_obs)
    base_pred[on_grid] = pred[on_grid, own[on_grid]]
    base_pred[off] = values[n_obs * n_grid :]
    base_loss = None
    if loss is not None:
        assert losses is not None and loss_grid is not None  # a loss was given
        base_loss = np.empty(n_obs)
        base_loss[on_grid] = loss_grid[on_grid, own[on_grid]]
        base_loss[off] = losses[n_obs * n_grid :]
    return FeatureProfile(
        feature=feature,
        grid=grid.values,
        grid_weights=grid.weights,
        categorical=grid.categorical,
        rows=index[rows],
        x=x,
        pred=pred,
        base_pred=base_pred,
        loss_grid=loss_grid,
        base_loss=base_loss,
        output=predictor.output,
        params=params,
    )


@dataclass(frozen=True)
class _Walked:
    """A profile's stream from the tree walk (``values`` None: the walk was not used) and
    the engine that ran."""

    choice: Choice
    values: np.ndarray | None = None
    losses: np.ndarray | None = None


def _walked(
    choice: Choice, predictor, rows, feature, grid_values, off, *, target, sample, chunk_rows, n_jobs
) -> _Walked:
    """The profile's stream (the tensor, then the rows ``rows[off]`` unmodified) from the
    exact tree walk (:func:`compute.trees.profile_pass`), once the walk gives the model's own
    predict of the check rows (:func:`compute.trees.check_rows`, read from the sample's
    design ``sample``: (design, positions in it)). Where the walk's pass gives the rows' own
    values too (:func:`compute.trees.own_in_pass`: bit masks) the model predicts those few
    rows only (its predict of every row cost LightGBM half the walk's time, 100,000 x 50);
    else it predicts every row, their own values bit for bit."""
    choice = choice.for_columns([feature])
    if choice.ensemble is None or choice.space is None:
        return _Walked(choice)
    numbers = choice.space.rows(rows)  # gathered once: profile_pass reads them again
    in_pass = own_in_pass(choice.ensemble, choice.space.column(feature))
    picked = check_rows(numbers) if in_pass else np.arange(rows.size)
    local, at = sample
    y_enc, loss = (None, None) if in_pass else target
    check = unmodified_segment(predictor, rows[picked], local, at[picked])
    checked, losses = predict_segments(predictor, [check], y_enc=y_enc, loss=loss, chunk_rows=chunk_rows, n_jobs=n_jobs)
    choice = choice.verified(predictor, rows[picked], checked, numbers[picked] if in_pass else numbers)
    if choice.ensemble is None:
        return _Walked(choice)
    own = None if in_pass else Own(checked, losses)
    values, losses = profile_pass(choice, predictor, rows, feature, grid_values, target=target, own=own, after=off)
    return _Walked(choice, values, losses)  # the rows ``rows[off]`` unmodified at the end


def _own_values(design, feature, rows: np.ndarray, categorical: bool) -> np.ndarray:
    if not categorical:
        return np.asarray(design.column_values(feature, rows), dtype=float)
    values = np.asarray(design.frame[feature].array.take(rows), dtype=object)
    values[pd.isna(values)] = None
    return values


def _grid_position(x: np.ndarray, grid: Grid) -> np.ndarray:
    """Position of each value in the grid, -1 where it is not a grid point."""
    if grid.categorical:
        return pd.Index(grid.values).get_indexer(x)
    finite = grid.values[~np.isnan(grid.values)]  # the missing point (NaN) is last, if any
    pos = np.clip(np.searchsorted(finite, x), 0, max(finite.size - 1, 0))
    out = np.where(finite[pos] == x, pos, -1)
    if finite.size < grid.values.size:  # a missing own value sits on the missing point
        out = np.where(np.isnan(x), grid.values.size - 1, out)
    return out
