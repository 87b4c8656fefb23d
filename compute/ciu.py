"""Contextual importance and utility (CIU), Främling (2022), Sec. 3.

For an instance x and a feature (or a group of features varied jointly) {i}, the model is
swept over values of {i} with every other feature held at x. From the smallest and largest
outputs found, ymin_{i}(x) and ymax_{i}(x), and the output range [MIN, MAX]:

    CI = (ymax_{i} - ymin_{i}) / (MAX - MIN)                     Eq. (6), {I} = all features
    CU = (y(x) - ymin_{i}) / (ymax_{i} - ymin_{i})                 Eq. (8), increasing utility
    CU = (ymax_{i} - y(x)) / (ymax_{i} - ymin_{i})                 Eq. (8), decreasing utility
    influence = CI * (CU - phi0)                                   Eq. (10)

Sweep (the seed's scheme): for numeric features the instance's own value, the feature's min
and max in X and ``n_samples`` uniform random values in between; for categorical features
every level found in X. Groups: the instance, the corners of the numeric members' [min, max]
box (categorical members at one level drawn at random) when there are at most 2^10 of them, and
``n_samples`` random joint draws (numeric uniform, categorical uniform over levels).

CI or CU outside [0, 1] means the model leaves [MIN, MAX] for some swept input (over- or
undershooting, "detecting model instability" in Sec. 3): the value is kept, not clipped,
and the row is flagged in ``out_of_range``. Where the sweep changes nothing (ymax = ymin),
CI is 0, CU is undefined (NaN) and the influence is 0.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import pandas as pd

from .errors import InputError
from .performance import Predictions
from .prediction import Predictor, predict_positions, predict_segments, unmodified_segment
from .results import FeatureProfile
from .sampling import is_categorical, make_grid
from .segments import Segment
from .validation import (
    as_pandas,
    check_choice,
    check_frame,
    check_int,
    check_n_jobs,
    check_players,
    check_real,
    check_rng,
    is_label,
    is_real,
    make_predictor,
)

COLUMNS = ["CI", "CU", "influence", "ymin", "ymax", "y", "out_of_range"]
UTILITIES = ("increasing", "decreasing")
MAX_CORNERS = 1024


def ciu_table(ymin, ymax, y, out_range, *, phi0=0.5, utility="increasing") -> pd.DataFrame | dict:
    """CI, CU and contextual influence from swept extremes (Eq. 6, 8 and 10), vectorised.

    ``ymin``, ``ymax`` and ``y`` broadcast together (one value per feature, or an
    (instances x features) array); returns a dict of arrays with the keys of ``COLUMNS``.
    """
    ymin, ymax, y = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (ymin, ymax, y)))
    low, high = out_range
    spread = ymax - ymin
    ci = spread / (high - low)
    with np.errstate(divide="ignore", invalid="ignore"):
        cu = (y - ymin) / spread if utility == "increasing" else (ymax - y) / spread
    cu = np.where(spread > 0, cu, np.nan)
    influence = np.where(spread > 0, ci * (cu - phi0), 0.0)
    flag = (ymin < low) | (ymax > high) | (ci > 1) | (cu < 0) | (cu > 1)
    return {"CI": ci, "CU": cu, "influence": influence, "ymin": ymin, "ymax": ymax, "y": y, "out_of_range": flag}


def contextual_importance(
    model,
    X,
    instance,
    features=None,
    *,
    output=None,
    n_samples=100,
    phi0=0.5,
    out_range=None,
    random_state=0,
    utility="increasing",
    n_jobs=1,
    chunk_rows=None,
) -> pd.DataFrame:
    """CIU of one instance: a DataFrame indexed by feature (or group).

    Parameters
    ----------
    model, output, n_jobs, chunk_rows : as in :func:`compute.feature_profile`
        For a classifier CIU explains the probability of ``output`` (default the last class).
    X : DataFrame
        Data giving each feature's min, max and levels (and, for regressors, the output
        range when ``out_range`` is not given).
    instance : row label of X, or a one-row DataFrame with X's columns
        A value outside X's range is swept too, so ymin/ymax include it.
    features : list or dict, optional
        Features or groups varied jointly, as in :func:`compute.shapley_importance`.
    n_samples : int, default 100
        Random values per feature (or joint draws per group) besides min, max and the instance.
    phi0 : float in [0, 1], default 0.5
        Baseline utility of the contextual influence (Eq. 10).
    out_range : (MIN, MAX), optional
        Default: (0, 1) for class probabilities; for regressors the range of the model's
        predictions over X.
    utility : {"increasing", "decreasing"}
        Whether a higher output is better (A > 0 in Eq. 8) or worse (A < 0).

    Returns
    -------
    DataFrame with columns CI, CU, influence, ymin, ymax, y, out_of_range.
    """
    return _ciu(
        model=model,
        X=X,
        instances=[instance],
        features=features,
        output=output,
        n_samples=n_samples,
        phi0=phi0,
        out_range=out_range,
        random_state=random_state,
        utility=utility,
        n_jobs=n_jobs,
        chunk_rows=chunk_rows,
        single=True,
    )


def global_contextual_importance(
    model,
    X,
    instances=None,
    features=None,
    *,
    output=None,
    n_samples=100,
    out_range=None,
    random_state=0,
    n_instances=None,
    n_jobs=1,
    chunk_rows=None,
) -> pd.DataFrame:
    """Global CI (Främling 2022, Sec. 4.1): the mean CI over a set of instances.

    ``instances``: row labels of X (default: all rows, or a seeded sample of
    ``n_instances``). All instances are swept in one batched pass per feature over the same
    swept values. Returns a DataFrame indexed by feature with columns CI (mean), CI_std and
    out_of_range_share (the share of instances flagged).
    """
    X = check_frame(X)
    rng = check_rng(random_state)
    n_instances = check_int(n_instances, "n_instances", low=1, none_ok=True)
    if instances is None:
        take = (
            np.arange(len(X))
            if n_instances is None or n_instances >= len(X)
            else np.sort(rng.choice(len(X), n_instances, replace=False))
        )
        instances = list(X.index[take])
    elif isinstance(instances, (list, tuple, pd.Index, np.ndarray, pd.Series)):
        instances = list(instances)
    elif is_label(instances):
        instances = [instances]  # one row label
    else:
        raise InputError(
            f"The 'instances' parameter must be row labels of X (got {type(instances).__name__}); "
            f"for the rows of a DataFrame pass its index."
        )
    if not instances:
        raise InputError("The 'instances' parameter names no rows; give at least one row label of X.")
    table = _ciu(
        model=model,
        X=X,
        instances=instances,
        features=features,
        output=output,
        n_samples=n_samples,
        phi0=0.5,
        out_range=out_range,
        random_state=rng,
        utility="increasing",
        n_jobs=n_jobs,
        chunk_rows=chunk_rows,
        single=False,
    )
    grouped = table.groupby(level="feature", sort=False)
    return pd.DataFrame(
        {
            "CI": grouped["CI"].mean(),
            "CI_std": grouped["CI"].std(ddof=0),
            "out_of_range_share": grouped["out_of_range"].mean(),
        }
    )


def output_range(model, X, *, output=None, n_jobs=1, chunk_rows=None) -> tuple[float, float]:
    """CIU's output range (MIN, MAX) when none is given (Främling 2022, Sec. 3): (0, 1) for
    a class probability, else the range of the model's predictions over the rows of X.

    The rule :func:`contextual_importance` and :func:`global_contextual_importance` apply
    by default; pass its value as ``out_range`` to read CIU off profiles consistently."""
    X = check_frame(X)
    predictor, Xm = make_predictor(model, X, output)
    chunk_rows = check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    n_jobs = check_n_jobs(n_jobs)
    return _default_range(predictor, len(Xm), chunk_rows, n_jobs)


def output_range_of(pred) -> tuple[float, float]:
    """:func:`output_range` read off the model's predictions on the same rows (``pred``, the
    :class:`~compute.Predictions` of :func:`compute.predict_rows`): (0, 1) for a classifier,
    else the range of the predictions; no model call. Equal to ``output_range(model, X)`` for
    the ``predict_rows(model, X)`` it is given (the same predictions)."""
    if not isinstance(pred, Predictions):
        raise InputError(f"'pred' must be the Predictions of compute.predict_rows (got {type(pred).__name__}).")
    if pred.is_classifier:
        return (0.0, 1.0)
    raw = np.asarray(pred.raw, dtype=float)
    found = (float(raw.min()), float(raw.max())) if raw.size else (np.nan, np.nan)
    return check_out_range(found, derived=True)


def _default_range(predictor: Predictor, n_rows: int, chunk_rows, n_jobs) -> tuple[float, float]:
    if predictor.is_classifier:
        return (0.0, 1.0)
    return check_out_range(_prediction_range(predictor, n_rows, chunk_rows, n_jobs), derived=True)


def ciu_from_profiles(profiles, row, *, out_range, phi0=0.5, utility="increasing") -> pd.DataFrame:
    """CIU of one explained row read off the ICE rows of feature profiles: no predictions.

    Each profile's grid must cover the feature's range (the observed grid and quantile
    grids from :func:`compute.feature_profile` include the min and max): ymin and ymax are
    then the extremes of the row's ICE curve, y its unmodified prediction.
    """
    phi0, utility = check_utility(phi0, utility)
    out_range = check_out_range(out_range)
    if not isinstance(profiles, Mapping):
        raise InputError(
            f"The 'profiles' parameter must be a dict {{feature: FeatureProfile}} (got {type(profiles).__name__})."
        )
    if not profiles:
        raise InputError("The 'profiles' dict is empty; pass at least one FeatureProfile.")
    if not is_label(row):
        raise InputError(f"The 'row' must be one row label (got {type(row).__name__} {row!r}).")
    names, ymin, ymax, y = [], [], [], []
    for name, prof in profiles.items():
        if not isinstance(prof, FeatureProfile):
            raise InputError(f"The 'profiles' value {name!r} must be a FeatureProfile (got {type(prof).__name__}).")
        where = _row_position(prof.rows, row)
        if where is None:
            raise InputError(f"The 'row' {row!r} is not among the rows explained by the profile of {name!r}.")
        ice = prof.pred[where]
        names.append(name)
        y_row = prof.base_pred[where]
        ymin.append(min(ice.min(), y_row))
        ymax.append(max(ice.max(), y_row))
        y.append(y_row)
    out = ciu_table(ymin, ymax, y, out_range, phi0=phi0, utility=utility)
    return pd.DataFrame(out, index=pd.Index(names, name="feature"))[COLUMNS]


# --- implementation --------------------------------------------------------------------
def _ciu(
    *,
    model,
    X,
    instances,
    features,
    output,
    n_samples,
    phi0,
    out_range,
    random_state,
    utility,
    n_jobs,
    chunk_rows,
    single: bool,
) -> pd.DataFrame:
    X = check_frame(X)
    instances = [as_pandas(inst, "instance") for inst in instances]  # a Polars or PyArrow row
    predictor, Xm = make_predictor(model, X, output)
    players = check_players(features, list(Xm.columns))
    n_samples = check_int(n_samples, "n_samples", low=0, high=1_000_000)
    chunk_rows = check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    n_jobs = check_n_jobs(n_jobs)
    phi0, utility = check_utility(phi0, utility)
    rng = check_rng(random_state)
    if out_range is not None:
        out_range = check_out_range(out_range)
    predictor, positions = with_instances(predictor, Xm, instances, "'instance'" if single else "'instances' entry")
    if out_range is None:
        out_range = _default_range(predictor, len(Xm), chunk_rows, n_jobs)

    design = predictor.design
    n_inst = positions.size
    # One stream of rows, evaluated in as few model calls as the chunk budget allows: the
    # instances themselves, then for each player its instances x swept values.
    segments, sizes = [unmodified_segment(predictor, positions)], []
    for group in players.values():
        swept = _swept_values(Xm, group, n_samples, rng)
        n_vals = len(next(iter(swept.values())))
        if n_vals == 0:
            raise InputError(
                f"The 'n_samples' parameter must be >= 1 to sweep a group of {len(group)} numeric "
                f"columns, too many to enumerate their corners (got {n_samples})."
            )
        cast = {c: design.cast(c, v) for c, v in swept.items()}

        def make_block(a, b, cast=cast, n_vals=n_vals):
            flat = np.arange(a, b)
            return design.block(positions[flat // n_vals], {c: v[flat % n_vals] for c, v in cast.items()})

        segments.append(Segment(n_inst * n_vals, make_block))
        sizes.append(n_vals)
    values = predict_segments(predictor, segments, chunk_rows=chunk_rows, n_jobs=n_jobs)[0]
    y = values[:n_inst]
    starts = n_inst + np.concatenate([[0], np.cumsum(np.array(sizes) * n_inst)])
    names, ymins, ymaxs = list(players), [], []
    for k, n_vals in enumerate(sizes):
        swept_pred = values[starts[k] : starts[k + 1]].reshape(n_inst, n_vals)
        ymins.append(np.minimum(swept_pred.min(axis=1), y))  # the instance itself is swept too
        ymaxs.append(np.maximum(swept_pred.max(axis=1), y))
    ymin, ymax = np.stack(ymins, axis=1), np.stack(ymaxs, axis=1)  # (instances, players)
    out = ciu_table(ymin, ymax, y[:, None], out_range, phi0=phi0, utility=utility)
    labels = [_label(inst) for inst in instances]
    index = pd.MultiIndex.from_product([labels, names], names=["instance", "feature"])
    table = pd.DataFrame({k: np.asarray(v).ravel() for k, v in out.items()}, index=index)[COLUMNS]
    return table.droplevel("instance") if single else table


def with_instances(predictor: Predictor, Xm: pd.DataFrame, instances, what: str):
    """Positions of the instances in the design; one-row DataFrames are appended to it.

    ``what`` names the parameter in messages (``'instance'`` or ``'instances' entry``).
    """
    positions, extra = [], []
    for inst in instances:
        inst = as_pandas(inst, what.strip("'"))  # a one-row Polars or PyArrow frame (what-if, Shapley)
        if isinstance(inst, pd.DataFrame):
            if len(inst) != 1:
                raise InputError(f"The {what} DataFrame must have exactly one row (got {len(inst)}).")
            missing = [c for c in Xm.columns if c not in inst.columns]
            if missing:
                raise InputError(f"The {what} lacks columns {missing!r}.")
            extra.append(inst[list(Xm.columns)])
            positions.append(len(Xm) + len(extra) - 1)
        elif not is_label(inst):
            hint = "; for a row of X pass its label, or X.loc[[label]]" if isinstance(inst, pd.Series) else ""
            raise InputError(
                f"The {what} must be a row label of X or a one-row DataFrame (got {type(inst).__name__}{hint})."
            )
        elif inst in Xm.index:
            loc = Xm.index.get_loc(inst)
            if not isinstance(loc, (int, np.integer)):
                raise InputError(f"The {what} label {inst!r} is not unique in X; pass the row as a one-row DataFrame.")
            positions.append(int(loc))
        else:
            raise InputError(f"The {what} {inst!r} is neither a row label of X nor a one-row DataFrame.")
    if extra:
        combined = pd.concat([Xm, *extra], ignore_index=True)
        for col in Xm.columns:  # keep the data's dtypes (a concat may widen them)
            if isinstance(Xm[col].dtype, pd.CategoricalDtype):
                combined[col] = pd.Categorical(combined[col], dtype=Xm[col].dtype)
        design = type(predictor.design)(combined, as_frame=predictor.design.as_frame)
        predictor = Predictor(predictor.model, design, predictor.classes, predictor.has_proba, predictor.output_index)
    return predictor, np.asarray(positions, dtype=np.intp)


def _row_position(rows: pd.Index, row) -> int | None:
    """Position of the first row labelled ``row``, None when there is none."""
    try:
        loc = rows.get_loc(row)
    except (KeyError, TypeError, ValueError):  # not a label of this index (Arrow raises ValueError)
        return None
    if isinstance(loc, slice):
        return loc.start
    if isinstance(loc, np.ndarray):
        return int(np.flatnonzero(loc)[0])
    return int(loc)


def _swept_values(Xm: pd.DataFrame, group: tuple, n_samples: int, rng) -> dict:
    """Values of the group's columns to sweep (equal-length arrays, one entry per point)."""
    if len(group) == 1:
        col = Xm[group[0]]
        if is_categorical(col):
            return {group[0]: make_grid(col, "observed").values}
        lo, hi = _range(col)
        return {group[0]: np.concatenate([[lo, hi], rng.uniform(lo, hi, n_samples)])}
    numeric = [c for c in group if not is_categorical(Xm[c])]
    out: dict = {}
    corners = list(itertools.product((0, 1), repeat=len(numeric))) if 2 ** len(numeric) <= MAX_CORNERS else []
    for c in group:
        col = Xm[c]
        if c in numeric:
            lo, hi = _range(col)
            corner_vals = [lo if corner[numeric.index(c)] == 0 else hi for corner in corners]
            out[c] = np.concatenate([corner_vals, rng.uniform(lo, hi, n_samples)])
        else:
            levels = make_grid(col, "observed").values
            # corners keep categorical members at a level drawn once; random draws vary them
            fixed = [levels[rng.integers(levels.size)]] * len(corners)
            drawn = levels[rng.integers(levels.size, size=n_samples)]
            out[c] = np.array(fixed + list(drawn), dtype=object)
    return out


def _range(col: pd.Series) -> tuple[float, float]:
    values = col.to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(values).all():
        raise InputError(f"Feature {col.name!r} has no non-missing values to sweep.")
    return float(np.nanmin(values)), float(np.nanmax(values))


def _prediction_range(predictor: Predictor, n_rows: int, chunk_rows, n_jobs) -> tuple[float, float]:
    pred = predict_positions(predictor, np.arange(n_rows), chunk_rows=chunk_rows, n_jobs=n_jobs)[0]
    return float(pred.min()), float(pred.max())


def check_out_range(out_range, *, derived: bool = False) -> tuple[float, float]:
    """``(MIN, MAX)`` as two finite floats with MIN < MAX; ``derived``: from the predictions."""
    if isinstance(out_range, (str, bytes, Mapping)) or not hasattr(out_range, "__len__") or len(out_range) != 2:
        raise InputError(f"The 'out_range' parameter must be a pair (MIN, MAX) (got {out_range!r}).")
    low, high = out_range
    if not (is_real(low) and is_real(high) and high > low):
        hint = "; the model's predictions over X are constant, so pass out_range explicitly" if derived else ""
        raise InputError(f"The 'out_range' must be two finite numbers with MIN < MAX (got {out_range!r}){hint}.")
    return float(low), float(high)


def check_utility(phi0, utility) -> tuple[float, str]:
    phi0 = check_real(phi0, "phi0", low=0.0, high=1.0)
    return phi0, check_choice(utility, "utility", UTILITIES)


def _label(instance):
    return "instance" if isinstance(instance, pd.DataFrame) else instance
