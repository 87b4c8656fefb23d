"""Feature effects and effect-based importance: ICE feature impact, ALE, marginal effects, FIRM.

Every measure is an aggregation (SIPA stage 4, Scholbeck et al. 2019) of intervened
predictions. ICE feature impact and the PD-variance importance (FIRM) aggregate the ICE
tensor of a :class:`~compute.results.FeatureProfile` and never predict again, so the
dashboard can compute them from a cached profile. ALE and marginal effects need values off
the grid (interval boundaries, ``x +- h``): each makes its own intervention through
``Design.block`` and evaluates it in one batched :func:`~compute.prediction.predict_pass`
per feature (two intervened rows per observation).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .errors import InputError
from .prediction import Predictor, predict_pass
from .profile import feature_profiles
from .results import FeatureProfile
from .sampling import MAX_GRID, is_categorical, quantile_bounds
from .validation import (
    check_feature,
    check_features,
    check_frame,
    check_int,
    check_n_jobs,
    check_profile,
    check_real,
    is_real,
    make_predictor,
)

IMPACT_COLUMNS = ("impact", "signed_impact", "in_distribution_impact", "heterogeneity", "non_linearity")
#: Default finite-difference step of the marginal effects, as a fraction of the feature's sd.
DEFAULT_STEP = 1e-3


# --- ICE feature impact ("Bringing a Ruler Into the Black Box", Sec. 3.2-4.3) -------------
def ice_impact(prof: FeatureProfile, *, alpha: float = 0.0, sd: float | None = None) -> pd.Series:
    """ICE feature impact, in-distribution impact, heterogeneity and non-linearity of a profile.

    "Bringing a Ruler Into the Black Box" (2021). Our copy lost Eq. (1)-(5); we implement
    the following reading of the prose. Notation: grid ``z_0 < ... < z_{m-1}``, runs
    ``dz_k = z_{k+1} - z_k``, range ``span = z_{m-1} - z_0``, rises of row i
    ``df[i, k] = pred[i, k+1] - pred[i, k]``, slopes ``s[i, k] = df[i, k] / dz_k``.

    Sec. 3.2: for each consecutive pair of phantom points the "absolute change in
    prediction divided by the change in feature" is computed, the impact is "the mean of
    all the terms" over phantom points and observations, times the feature's sd, and reads
    as "the absolute change in the predicted value for each one-unit change" of the
    standardised feature. The phantom points are the unique observed values (Sec. 3.1),
    or for many unique values a sample from each quantile. We read "the mean of the
    rise-over-run terms" as the mean slope along the curve, each term weighted by its run
    ``dz_k / span``: the mean of ``|df/dx|`` over the grid's range. Every measure below is
    that run-weighted mean. On an evenly spaced grid (the paper's integer and binary
    features) it is the unweighted mean of the terms, and for a linear model it is
    ``|b| * sd`` on any grid (Sec. 4.2). The unweighted mean over unequal runs (our reading
    until issue 10) describes the grid, not the model: a tree's jump J between two
    observed values 1e-4 apart enters as J / 1e-4, so the measure grows without bound as
    the grid is refined (a gradient-boosting model on a Titanic-like fare: 141 on the
    observed grid, 1.7 on 20 quantile points, 576 on 50). The run-weighted mean
    converges: for a step function it is the sum of the jumps over the range, on any grid
    that separates them.

    * impact, Eq. (1): ``sd * mean_i sum_k |df[i, k]| / span`` (each ICE curve's total
      variation over its run); ``signed_impact`` is the same without the absolute value,
      ``sd * mean_i (pred[i, -1] - pred[i, 0]) / span`` (the direction, end of Sec. 3.2);
    * in-distribution impact, Eq. (2)-(3), Sec. 3.3: the likelihood of phantom point k of
      row i is ``L[i, k] = exp(-alpha |z_k - x_i| / sd)``; a slope joins two phantom
      points, so its weight is the mean of their two likelihoods (our reading; the
      authors' code attaches it to the right point only) times its run:
      ``sd * sum L_ik |df[i, k]| / sum L_ik dz_k``. ``alpha = 0`` gives the impact. A row
      with a missing own value is not down-weighted;
    * heterogeneity, Eq. (4), Sec. 4.3: the spread across observations at a fixed grid
      interval, run-weighted over the intervals: ``sd * sum_k std_i(df[i, k]) / span``;
    * non-linearity, Eq. (5), Sec. 4.3: the spread of one observation's slopes across the
      grid, averaged over the observations. The paper's standard deviation diverges under
      refinement for a curve with a jump (a run dz carrying a rise J adds J^2 / (dz span)
      to the variance), so we take the run-weighted mean absolute deviation from the
      row's mean slope ``c_i = (pred[i, -1] - pred[i, 0]) / span``:
      ``sd * mean_i sum_k |df[i, k] - c_i dz_k| / span``, the total variation of the ICE
      curve minus its chord. It is at most twice the impact.

    Spreads are taken on the slopes (as in the authors' published code), so a linear model
    has heterogeneity = non-linearity = 0, an additive one heterogeneity 0, and an
    interaction heterogeneity > 0. Standard deviations are population ones (``ddof=0``),
    both the feature's ``sd`` and the spread across rows.

    Categorical features (our analogue, the paper has none): levels have no order and no
    distance, so we use the discrete metric, in which every two levels are one unit apart
    and therefore "consecutive": slopes become the differences ``pred[i, b] - pred[i, a]``
    over all pairs of levels ``a < b`` (in grid order), ``sd`` is 1 and the distance of a
    phantom level to the row's own level is 0 or 1. ``signed_impact`` then reads from the
    earlier to the later level (False -> True, category order), so it means something for
    booleans and ordered categories. A pair's in-distribution weight is again the mean of
    its two likelihoods; heterogeneity is the mean over pairs of the spread across rows;
    non-linearity is undefined (NaN). ``sd`` is not used.

    Parameters
    ----------
    prof : FeatureProfile
    alpha : float, default 0
        Decay of the phantom-point likelihood, >= 0.
    sd : float, optional
        The feature's standard deviation (default: the population sd of the profile's grid
        under its weights, exactly the data's sd for the observed grid).

    Returns
    -------
    Series indexed by ``impact, signed_impact, in_distribution_impact, heterogeneity,
    non_linearity``.
    """
    prof = check_profile(prof)
    alpha = check_real(alpha, "alpha", low=0.0)
    if prof.categorical:
        values = _level_impact(prof.pred, pd.Index(prof.grid).get_indexer(prof.x), alpha)
    else:
        prof = prof.without_missing_point()  # slopes need an ordered axis; "missing" is not on it
        sd = _weighted_sd(prof.grid, prof.grid_weights) if sd is None else sd
        sd = check_real(sd, "sd", low=0.0, strict=True)  # 0 when the grid weights sit on one point
        values = _numeric_impact(prof.pred, prof.grid, prof.x, sd, alpha)
    return pd.Series([values[c] for c in IMPACT_COLUMNS], index=list(IMPACT_COLUMNS), name=prof.feature, dtype=float)


def ice_feature_impact(
    model,
    X,
    features=None,
    *,
    grid="observed",
    alpha=0.0,
    output=None,
    n_obs=None,
    random_state=0,
    n_jobs=1,
    chunk_rows=None,
) -> pd.DataFrame:
    """ICE feature impact of several features (see :func:`ice_impact`), one pass per feature.

    Parameters
    ----------
    model, X, grid, output, n_obs, random_state, n_jobs, chunk_rows :
        As in :func:`compute.feature_profile` (the paper's grid is ``"observed"``).
    features : list of column labels, optional
        Default: every input of the model.
    alpha : float, default 0
        Decay of the in-distribution weights, >= 0.

    Returns
    -------
    DataFrame indexed by feature, columns as :func:`ice_impact`, with ``sd`` the population
    standard deviation of the feature over all non-missing values in X.
    """
    X = check_frame(X)
    alpha = check_real(alpha, "alpha", low=0.0)
    profiles = feature_profiles(
        model,
        X,
        None,
        features,
        grid=grid,
        output=output,
        n_obs=n_obs,
        random_state=random_state,
        n_jobs=n_jobs,
        chunk_rows=chunk_rows,
    )
    rows = [
        ice_impact(prof, alpha=alpha, sd=None if prof.categorical else _column_sd(X[name]))
        for name, prof in profiles.items()
    ]
    return pd.DataFrame(rows).set_axis(pd.Index(list(profiles), name="feature"))


def _numeric_impact(pred, grid, x, sd, alpha) -> dict[str, float]:
    """Run-weighted means of the slopes (see :func:`ice_impact`); no division by a run."""
    run = np.diff(grid)  # (n_grid - 1,)
    span = grid[-1] - grid[0]
    rise = np.diff(pred, axis=1)  # (n_obs, n_grid - 1)
    chord = (pred[:, -1] - pred[:, 0]) / span  # (n_obs,): each row's mean slope
    distance = np.abs(grid[None, :] - x[:, None]) / sd
    distance = np.where(np.isnan(distance), 0.0, distance)
    # the weighted mean is a ratio: shifting by the smallest distance only avoids underflow
    phantom = np.exp(-alpha * (distance - distance.min()))
    like = (phantom[:, :-1] + phantom[:, 1:]) / 2.0
    return {
        "impact": sd * np.abs(rise).sum(axis=1).mean() / span,
        "signed_impact": sd * chord.mean(),
        "in_distribution_impact": sd * (like * np.abs(rise)).sum() / (like * run).sum(),
        "heterogeneity": sd * rise.std(axis=0).sum() / span,
        "non_linearity": sd * np.abs(rise - chord[:, None] * run).sum(axis=1).mean() / span,
    }


def _level_impact(pred, own, alpha) -> dict[str, float]:
    """The pairwise analogue without building the (n_obs, n_pairs) tensor.

    For values v_0..v_{L-1}, sum_{a<b} (v_b - v_a) = sum_k (2k - L + 1) v_k: in grid order
    for the signed sum, in sorted order for the sum of absolute differences. The spread of
    v_b - v_a across rows comes from the level covariance: C_aa + C_bb - 2 C_ab.
    """
    n_obs, n_levels = pred.shape
    n_pairs = n_levels * (n_levels - 1) / 2.0
    coef = 2.0 * np.arange(n_levels) - n_levels + 1
    total_abs = np.sort(pred, axis=1) @ coef
    total_signed = pred @ coef
    on_grid = own >= 0
    own_pred = pred[np.arange(n_obs), np.where(on_grid, own, 0)]
    to_own = np.where(on_grid, np.abs(pred - own_pred[:, None]).sum(axis=1), 0.0)
    # pair weight (L_a + L_b) / 2 with L = 1 at the own level, exp(-alpha) elsewhere
    far = np.exp(-alpha)
    weighted = far * total_abs + (1.0 - far) / 2.0 * to_own
    weight = far * n_pairs + (1.0 - far) / 2.0 * (n_levels - 1) * on_grid
    cov = np.atleast_2d(np.cov(pred, rowvar=False, bias=True))
    var = np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2.0 * cov
    upper = np.triu_indices(n_levels, k=1)
    return {
        "impact": total_abs.mean() / n_pairs,
        "signed_impact": total_signed.mean() / n_pairs,
        "in_distribution_impact": weighted.sum() / weight.sum(),
        "heterogeneity": np.sqrt(np.clip(var[upper], 0.0, None)).mean(),
        "non_linearity": np.nan,
    }


# --- PD-variance importance (FIRM), Scholbeck et al. (2019), Sec. 5 ----------------------
def pd_importance(prof: FeatureProfile) -> float:
    """Variance-based importance: the standard deviation of the PD (FIRM).

    Scholbeck et al. (2019), Sec. 5 (after Greenwell et al. 2018 and Zien et al. 2009):
    ``I(x_S) = sd_i PD(x_S^(i))`` over the observed values for a numeric feature, and
    ``(max PD - min PD) / 4`` over the levels for a categorical one. We take the population
    form: ``sqrt(sum_k w_k (PD_k - sum_l w_l PD_l)^2)`` with the grid weights, which on the
    observed grid (weights = frequencies) is exactly the 1/n standard deviation over the n
    observations. The paper's 1/(n-1) form is this times ``sqrt(n / (n - 1))``.
    """
    curve = check_profile(prof).pd
    if prof.categorical:
        return float((curve.max() - curve.min()) / 4.0)
    return _weighted_sd(curve, prof.grid_weights)


def pd_variance_importance(
    model,
    X,
    features=None,
    *,
    grid="observed",
    output=None,
    n_obs=None,
    random_state=0,
    n_jobs=1,
    chunk_rows=None,
) -> pd.DataFrame:
    """:func:`pd_importance` of several features: DataFrame indexed by feature, column
    ``importance``. Arguments as in :func:`compute.feature_profiles`; keep the default
    ``grid="observed"`` for the estimator of the paper (over the observed values)."""
    profiles = feature_profiles(
        model,
        X,
        None,
        features,
        grid=grid,
        output=output,
        n_obs=n_obs,
        random_state=random_state,
        n_jobs=n_jobs,
        chunk_rows=chunk_rows,
    )
    values = pd.DataFrame({"importance": [pd_importance(p) for p in profiles.values()]})
    return values.set_axis(pd.Index(list(profiles), name="feature"))


# --- ALE, Scholbeck et al. (2019), Sec. 3 / Apley & Zhu (2020) ----------------------------
def ale_curve(model, X, feature, *, n_intervals=10, output=None, n_jobs=1, chunk_rows=None) -> pd.DataFrame:
    """First-order accumulated local effects on quantile intervals.

    Scholbeck et al. (2019), Sec. 3, Eq. (2) estimated in their steps (i)-(iii): the
    boundaries ``z_0 < ... < z_K`` are the minimum and the type-1 quantiles of the
    feature at k/K (:func:`compute.sampling.quantile_bounds`, as Apley's ALEPlot and R's
    iml place them; ties may merge intervals). Every boundary is an observed value, so no
    interval is empty and the ALE of a linear model is exactly linear. A row with
    ``z_{k-1} < x_i <= z_k`` (``z_0`` belongs to the first interval) is set to both
    boundaries, and the finite difference ``f(z_k, x_C^(i)) - f(z_{k-1}, x_C^(i))`` is
    averaged within the interval and summed up to each boundary. All ``2 n`` intervened
    rows go through one batched pass. Centring as Apley's ALEPlot package: each row stands for the mean
    of its interval's two boundary values, so the ``weight`` column,
    ``(n_k + n_{k+1}) / 2n``, sums to one and ``weight @ ale == 0``.

    Parameters
    ----------
    model, X, output, n_jobs, chunk_rows :
        As in :func:`compute.feature_profile`.
    feature : column label
        A numeric feature.
    n_intervals : int, default 10
        Number of quantile intervals K, >= 2 (fewer when ties merge bounds).

    Returns
    -------
    DataFrame with one row per boundary: ``grid`` (z_k), ``ale`` (centred ALE at z_k),
    ``weight`` (centring weight) and ``n_obs`` (rows in the interval ending at z_k).
    """
    X = check_frame(X)
    predictor, Xm = make_predictor(model, X, output)
    check_feature(Xm.columns, feature)
    n_intervals = check_int(n_intervals, "n_intervals", low=2, high=MAX_GRID - 1)
    n_jobs, chunk_rows = check_n_jobs(n_jobs), check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    x = _numeric_values(Xm[feature], "ALE")
    rows = np.flatnonzero(~np.isnan(x))
    bounds = quantile_bounds(x[rows], n_intervals)
    interval = _interval_of(x[rows], bounds)
    fd = _difference_pass(
        predictor, feature, rows, bounds[interval - 1], bounds[interval], chunk_rows=chunk_rows, n_jobs=n_jobs
    )
    return _ale_frame(bounds, *ale_values(fd, interval, bounds.size - 1))


def ale_from_profile(prof: FeatureProfile, *, n_intervals: int | None = None) -> pd.DataFrame:
    """ALE read off a profile's ICE tensor, with interval bounds on the profile's grid.

    ``pred[i, b_k] - pred[i, b_{k-1}]`` is the finite difference of :func:`ale_curve` for a
    row in interval k (Scholbeck et al. 2019, Sec. 3, Eq. 2), so no prediction is needed;
    the bounds must therefore be grid points. Rows whose own value lies outside the grid's
    range are left out.

    Parameters
    ----------
    prof : FeatureProfile
        Profile of a numeric feature.
    n_intervals : int, optional
        ``None`` (default): every grid point is a bound, so with ``grid=bounds`` (an array)
        and all rows this equals ``ale_curve``; on an observed grid that is one interval per
        distinct value, mostly noise. ``K >= 2``: the bounds of :func:`ale_curve`, the
        minimum and the type-1 quantiles at k/K (:func:`compute.sampling.quantile_bounds`)
        of the explained rows' own values, each snapped onto the grid: the lowest down to
        the largest grid point <= it, the others up to the smallest grid point >= it, then
        duplicates removed. On an observed grid every own value is a grid point, so nothing
        moves and the result equals ``ale_curve(model, X.loc[prof.rows], feature,
        n_intervals=K)``. On a quantile grid the bounds are the grid points just above the
        type-1 quantiles, not the quantiles: the intervals are coarser and their row counts
        less even, but still none is empty (the type-1 quantile ``q_k``, an own value, lies
        in ``(b_{k-1}, b_k]``), and there are at most ``min(K, n_grid - 1)`` of them.

    Returns
    -------
    DataFrame with the columns of :func:`ale_curve`.
    """
    if check_profile(prof).categorical:
        raise InputError(f"ALE needs a numeric feature; {prof.feature!r} is categorical.")
    n_intervals = check_int(n_intervals, "n_intervals", low=2, high=MAX_GRID - 1, none_ok=True)
    prof = prof.without_missing_point()  # rows with a missing value have no interval (left out)
    inside = (prof.x >= prof.grid[0]) & (prof.x <= prof.grid[-1])
    if not inside.any():
        raise InputError(f"No explained row of {prof.feature!r} lies within the grid's range.")
    x, pred = prof.x[inside], prof.pred[inside]
    at = np.arange(prof.grid.size)  # positions of the bounds in the grid
    if n_intervals is not None:
        at = _snap_to_grid(quantile_bounds(x, n_intervals), prof.grid)
        if at.size < 2:
            raise InputError(
                f"The explained rows of {prof.feature!r} all take one value ({float(x[0])}); ALE needs at least two."
            )
    bounds = prof.grid[at]
    interval = _interval_of(x, bounds)
    rows = np.arange(pred.shape[0])
    fd = pred[rows, at[interval]] - pred[rows, at[interval - 1]]
    return _ale_frame(bounds, *ale_values(fd, interval, bounds.size - 1))


def _snap_to_grid(bounds: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Grid positions of the bounds: the first down, the others up, duplicates removed."""
    first = np.searchsorted(grid, bounds[:1], side="right") - 1
    rest = np.searchsorted(grid, bounds[1:], side="left")
    return np.unique(np.r_[first, rest])


def ale_values(fd: np.ndarray, interval: np.ndarray, n_intervals: int) -> tuple[np.ndarray, np.ndarray]:
    """Accumulate interval-wise mean finite differences and centre (steps ii and iii).

    ``fd[i] = f(z_k, x_C^(i)) - f(z_{k-1}, x_C^(i))`` for the row's ``interval[i] = k`` in
    [1, n_intervals]. Returns the centred ALE at the n_intervals + 1 boundaries and the
    rows per interval (``counts[0] = 0``).
    """
    counts = np.bincount(interval, minlength=n_intervals + 1)
    sums = np.bincount(interval, weights=fd, minlength=n_intervals + 1)
    uncentred = np.cumsum(sums / np.maximum(counts, 1))
    return uncentred - _centring_weights(counts) @ uncentred, counts


def _centring_weights(counts: np.ndarray) -> np.ndarray:
    return (counts + np.append(counts[1:], 0)) / (2.0 * counts.sum())


def _interval_of(x: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """k with z_{k-1} < x <= z_k, and 1 for x = z_0."""
    return np.clip(np.searchsorted(bounds, x, side="left"), 1, bounds.size - 1)


def _ale_frame(bounds, ale, counts) -> pd.DataFrame:
    return pd.DataFrame({"grid": bounds, "ale": ale, "weight": _centring_weights(counts), "n_obs": counts})


# --- Marginal effects, Scholbeck et al. (2019), Sec. 2-3 ----------------------------------
def marginal_effects(
    model, X, features=None, *, at=None, step=None, output=None, n_jobs=1, chunk_rows=None
) -> pd.DataFrame:
    """Average marginal effects (AME), at the means (MEM) or at representative values (MER).

    Scholbeck et al. (2019), Sec. 2 (symmetric difference quotient) and Sec. 3: the
    marginal effect of a row is ``(f(x_S + h, x_C) - f(x_S - h, x_C)) / 2h``, and the
    result is its mean over the rows (rows missing the feature are left out), at the
    observed rows (AME), with every numeric feature set to its mean and categorical ones
    as observed (MEM; the ME at the mean vector for all-numeric data), or with the given
    columns set to the given values (MER). One batched pass of 2 n rows per feature.

    Parameters
    ----------
    model, X, output, n_jobs, chunk_rows :
        As in :func:`compute.feature_profile`.
    features : list of column labels, optional
        Numeric features (default: every numeric input of the model).
    at : None, "mean" or dict, optional
        None: AME; ``"mean"``: MEM; ``{column: value}``: MER.
    step : float or dict, optional
        The step h, > 0: one value for all features or ``{feature: h}``. Default (and for
        features missing from a dict): ``DEFAULT_STEP`` (1e-3) times the feature's
        population sd in X, small against the feature's scale yet far above rounding.

    Returns
    -------
    DataFrame indexed by feature: ``effect`` (mean ME), ``effect_sd`` (population sd of the
    rows' MEs: large when the effect varies) and ``step``; ``attrs["kind"]`` is "AME",
    "MEM" or "MER".
    """
    X = check_frame(X)
    predictor, Xm = make_predictor(model, X, output)
    features = _numeric_features(Xm, features, "A marginal effect")
    steps = _check_steps(step, Xm, features)
    n_jobs, chunk_rows = check_n_jobs(n_jobs), check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    kind, values = _check_at(at, Xm)
    if values:
        predictor, Xm = make_predictor(model, _set_columns(Xm, values, predictor), output)
    records = []
    for feature, h in zip(features, steps):
        x = Xm[feature].to_numpy(dtype=float, na_value=np.nan)
        rows = np.flatnonzero(~np.isnan(x))
        me = _difference_pass(
            predictor, feature, rows, x[rows] - h, x[rows] + h, chunk_rows=chunk_rows, n_jobs=n_jobs
        ) / (2.0 * h)
        records.append((me.mean(), me.std(), h))
    index = pd.Index(features, name="feature")
    frame = pd.DataFrame(records, columns=["effect", "effect_sd", "step"], index=index)
    frame.attrs["kind"] = kind
    return frame


def _difference_pass(
    predictor: Predictor,
    feature,
    rows: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    *,
    chunk_rows: int | None,
    n_jobs: int,
) -> np.ndarray:
    """``f(high_i, x_C^(i)) - f(low_i, x_C^(i))`` for each row: one pass over 2 n rows."""
    points = np.column_stack([low, high]).astype(float).ravel()  # low_0, high_0, low_1, ...

    def make_block(start, stop):
        return predictor.design.block(rows[np.arange(start, stop) // 2], {feature: points[start:stop]})

    values, _ = predict_pass(predictor, points.size, make_block, chunk_rows=chunk_rows, n_jobs=n_jobs)
    return values[1::2] - values[::2]


def _check_at(at, Xm: pd.DataFrame) -> tuple[str, dict]:
    if at is None:
        return "AME", {}
    if isinstance(at, str) and at == "mean":
        numeric = [c for c in Xm.columns if not is_categorical(Xm[c])]
        return "MEM", {c: float(np.nanmean(Xm[c].to_numpy(dtype=float, na_value=np.nan))) for c in numeric}
    if not isinstance(at, Mapping) or not at:
        raise InputError(
            f"The 'at' parameter must be None (AME), \"mean\" (MEM) or a non-empty dict "
            f"{{column: value}} (MER) (got {at!r})."
        )
    for column, value in at.items():
        check_feature(Xm.columns, column, name="column in 'at'")
        if is_categorical(Xm[column]):
            levels = pd.unique(Xm[column].to_numpy(dtype=object)).tolist()
            if value not in levels:
                raise InputError(f"The 'at' value {value!r} is not a level of {column!r}; its levels are {levels!r}.")
        elif not is_real(value):
            raise InputError(f"The 'at' value of numeric column {column!r} must be a finite number (got {value!r}).")
    return "MER", dict(at)


def _set_columns(Xm: pd.DataFrame, values: dict, predictor: Predictor) -> pd.DataFrame:
    frame = Xm.copy()
    for column, value in values.items():
        if is_categorical(Xm[column]):
            frame[column] = predictor.design.cast(column, np.full(len(frame), value, dtype=object))
        else:
            frame[column] = np.full(len(frame), float(value))
    return frame


def _check_steps(step, Xm: pd.DataFrame, features: list) -> list[float]:
    given = step if isinstance(step, Mapping) else {f: step for f in features}
    unknown = [f for f in given if f not in features]
    if unknown:
        raise InputError(f"The 'step' dict names {unknown!r}, which are not among the features {features!r}.")
    steps = []
    for feature in features:
        h = given.get(feature)
        if h is None:  # features are not constant (checked), so sd > 0
            h = DEFAULT_STEP * _column_sd(Xm[feature])
        steps.append(check_real(h, "step", low=0.0, strict=True))
    return steps


# --- shared checks and helpers -------------------------------------------------------------
def _numeric_features(Xm: pd.DataFrame, features, what: str) -> list:
    if features is None:
        features = [c for c in Xm.columns if not is_categorical(Xm[c])]
        if not features:
            raise InputError(f"{what} needs numeric features, and the model has none.")
    features = check_features(features, Xm.columns)
    for feature in features:
        _numeric_values(Xm[feature], what)
    return features


def _numeric_values(column: pd.Series, what: str) -> np.ndarray:
    """The column as floats; raise for a categorical, all-missing or constant feature."""
    if is_categorical(column):
        example = column.dropna().iloc[:1].tolist()
        raise InputError(
            f"{what} needs a numeric feature, but {column.name!r} is categorical (dtype "
            f"{column.dtype}, e.g. {example}); use ice_feature_impact or pd_variance_importance."
        )
    x = column.to_numpy(dtype=float, na_value=np.nan)
    finite = x[~np.isnan(x)]
    if finite.size == 0:
        raise InputError(f"Feature {column.name!r} has no non-missing values.")
    if finite.min() == finite.max():
        raise InputError(f"Feature {column.name!r} is constant ({float(finite[0])}); it has no effect to measure.")
    return x


def _column_sd(column: pd.Series) -> float:
    """Population standard deviation (ddof=0) of the non-missing values."""
    return float(np.nanstd(column.to_numpy(dtype=float, na_value=np.nan)))


def _weighted_sd(values: np.ndarray, weights: np.ndarray) -> float:
    mean = weights @ values
    return float(np.sqrt(weights @ (values - mean) ** 2))
