"""Can the data tell two features' importance apart? One rule for every place that says so.

The findings ("which these data cannot tell apart"), the ranking's verdict ("Has the ranking
settled?") and the PFI panel all decide with :func:`compare_features`, so they cannot
disagree. PFI (Casalicchio et al. 2018, Eq. 8) of two features on the same rows uses the
same permutation seeds for both, so their difference is judged *paired*: the per-permutation
differences d_r = PFI_a,r - PFI_b,r give the mean difference and its standard error
sd(d) / sqrt(R) (ddof=1). Two features are told apart when the difference is more than
``z`` (1.96: a 95 % normal interval) of those standard errors from 0.

The rows are a second source of error the permutations do not see (another sample of rows
would give other PFIs), and the standard error written after every "±" covers it: each row's
loss change averaged over the permutations, its spread over sqrt(n) rows
(``row_std_error``). A comparison is then paired on the rows: var(PFI_a - PFI_b) =
C_aa + C_bb - 2 C_ab with C the covariance over the rows of the two features' mean changes
(``row_covariance``), so a feature that matters on the same rows as another is compared
row by row. Where that covariance was not kept (results joined from blocks, or a subgroup's
reused pairs) the standard error is sqrt(se_a² + se_b²): unpaired, so it errs towards
"cannot tell apart". A result with neither (built by hand from repeats) is compared over
its permutations alone, as above.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .results import PermutationImportance
from .validation import check_int

__all__ = ["FeatureDifference", "compare_features", "ranking_ties", "tied_with"]

Z = 1.96


@dataclass(frozen=True)
class FeatureDifference:
    """PFI of ``a`` minus PFI of ``b``, its standard error and whether it is clear of 0."""

    a: object
    b: object
    difference: float
    std_error: float
    clear: bool
    paired: bool


def _check(pfi, *features) -> None:
    if not isinstance(pfi, PermutationImportance):
        raise InputError(f"'pfi' must be a PermutationImportance (got {type(pfi).__name__}).")
    for f in features:
        if f not in pfi.repeats.index:
            raise InputError(f"{f!r} is not a feature of this PFI result (its features: {list(pfi.repeats.index)!r}).")


def compare_features(pfi: PermutationImportance, a, b, *, z: float = Z) -> FeatureDifference:
    """Whether ``pfi`` tells ``a`` and ``b`` apart (see the module docstring)."""
    _check(pfi, a, b)
    repeats = pfi.repeats
    diff = repeats.loc[a].to_numpy(float) - repeats.loc[b].to_numpy(float)
    mean = float(diff.mean())
    cov = pfi.row_covariance
    if cov is not None and a in cov.index and b in cov.index:
        se = float(np.sqrt(max(cov.at[a, a] + cov.at[b, b] - 2 * cov.at[a, b], 0.0)))
        paired = True
    elif pfi.row_std_error is not None:
        se = float(np.hypot(pfi.row_std_error.get(a, np.nan), pfi.row_std_error.get(b, np.nan)))
        paired = False
    else:
        se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("nan")
        paired = True
    clear = bool(np.isfinite(se) and abs(mean) > z * se)
    return FeatureDifference(a, b, mean, se, clear, paired)


def tied_with(pfi: PermutationImportance, feature, *, z: float = Z) -> list:
    """The features with positive importance that ``pfi`` cannot tell from ``feature``, in
    order of importance (``feature`` left out)."""
    _check(pfi, feature)
    importance = pfi.importance.sort_values(ascending=False, kind="stable")
    return [
        f
        for f in importance.index
        if f != feature and importance[f] > 0 and not compare_features(pfi, feature, f, z=z).clear
    ]


def ranking_ties(pfi: PermutationImportance, top: int, *, z: float = Z) -> list[tuple]:
    """Neighbouring pairs among the ``top`` most important features (positive importance
    only) that ``pfi`` cannot tell apart: where the ranking's order is not settled."""
    _check(pfi)
    top = check_int(top, "top", low=1)
    importance = pfi.importance.sort_values(ascending=False, kind="stable")
    leaders = [f for f in importance.index[:top] if importance[f] > 0]
    return [(a, b) for a, b in zip(leaders, leaders[1:]) if not compare_features(pfi, a, b, z=z).clear]
