"""Subgroups found for you: where a feature's importance differs most, by tree splits on ICI curves.

A feature's ICI curves (Casalicchio, Molnar & Bischl 2018, Sec. 4) differ from row to row.
When part of that difference follows another feature (an interaction: in the X3 simulation
X1 matters only where X3 == 0), a split on that other feature separates curves that differ.
:func:`suggest_subgroups` grows a shallow regression tree, as the regional-effect methods
of the same group do on ICE curves (Herbinger, Bischl & Casalicchio 2022, "REPID: Regional
Effect Plots with implicit Interaction Detection", AISTATS; Herbinger et al. 2023, "Decomposing
Global Feature Effects Based on Feature Interactions", GADGET), but on the ICI curves, so the
subgroups are where the feature's *importance* (its local PFI, Eq. 9) differs.

Objective. Each row i has an ICI curve c_i(x_k) on the feature's grid x_1..x_K with weights
w_k (the feature's empirical distribution on the grid, summing to one). The risk of a node N
is the weighted sum of squares of its curves around their mean curve,

    R(N) = sum_{i in N} sum_k w_k (c_i(x_k) - cbar_N(x_k))^2,

(so the integral over the feature's distribution of the squared deviation: the L2 loss of
REPID/GADGET on ICI curves); a split N -> (A, B) on another feature gains R(N) - R(A) - R(B).
The tree is grown greedily (CART), depth at most ``max_depth``, every leaf at least
``min_leaf_share`` of the rows. Each split reports its gain as a share of R(root): how much
of the variance of the ICI curves it explains. All from the profile's cached tensor: no
model call.

Candidate splits: a numeric column at every threshold between two observed values (rows
with a missing value go with the upper side; ``is missing`` is a split of its own); a
categorical column, one level against the rest (missing counts as a level).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .errors import InputError
from .results import FeatureProfile
from .splits import SplitSearch, grow_tree, join_conditions, wrap_condition
from .validation import as_pandas, is_label

__all__ = ["RegionalSplit", "SubgroupSuggestions", "suggest_subgroups"]


@dataclass(frozen=True)
class RegionalSplit:
    """One split of the tree: the node it splits and its two children.

    ``node``: the node's condition ("" for all rows considered); ``left`` / ``right``: the
    children's full conditions (parse them with :func:`compute.parse_subgroup`);
    ``left_rule`` / ``right_rule``: the split's own conditions. ``share``: the gain as a share
    of the root's ICI sum of squares. ``importance_*``: the feature's PFI on each child (the
    mean ICI integral, Eq. 9).
    """

    column: Hashable
    depth: int  # 0 for the root's split
    node: str
    left: str
    right: str
    left_rule: str
    right_rule: str
    share: float
    n_left: int
    n_right: int
    importance_left: float
    importance_right: float


@dataclass(frozen=True, eq=False)
class SubgroupSuggestions:
    """The tree's splits, largest share first (see :func:`suggest_subgroups`)."""

    feature: Hashable
    splits: tuple[RegionalSplit, ...]
    n_rows: int
    importance: float  # the feature's PFI on all rows considered (mean ICI integral)
    total_share: float  # share of the ICI sum of squares the tree's leaves explain
    condition: str = ""  # the rows considered ("" for every explained row)
    params: dict = field(default_factory=dict)

    @property
    def best_share(self) -> float:
        return self.splits[0].share if self.splits else 0.0

    def to_frame(self) -> pd.DataFrame:
        """One row per split: its children's conditions, sizes and PFI, and its share."""
        cols = [
            "column",
            "depth",
            "left",
            "n_left",
            "importance_left",
            "right",
            "n_right",
            "importance_right",
            "share",
        ]
        return pd.DataFrame([{c: getattr(s, c) for c in cols} for s in self.splits], columns=cols)


def suggest_subgroups(
    profile: FeatureProfile,
    X: pd.DataFrame,
    *,
    features: Sequence | None = None,
    mask=None,
    condition: str = "",
    max_depth: int = 3,
    min_leaf_share: float = 0.05,
) -> SubgroupSuggestions:
    """Subgroups, defined by splits on other features, across which ``profile.feature``'s
    ICI curves (its importance) differ most; see the module docstring for the objective.

    Parameters
    ----------
    profile : FeatureProfile with a target (its ICI curves).
    X : DataFrame holding at least the profile's rows (by label) and the split columns.
    features : columns to split on; default every column of ``X`` but the profile's feature.
    mask : boolean array over ``profile.rows`` (or Series by row label): the rows to
        consider (the current subgroup); default all. ``condition`` is that subgroup's text,
        put in front of every suggested condition.
    max_depth : int in 1..5.
    min_leaf_share : float in (0, 0.5]: the least share of the considered rows in a child.

    Returns
    -------
    :class:`SubgroupSuggestions`, splits sorted by ``share`` (largest first).
    """
    if not isinstance(profile, FeatureProfile):
        raise InputError(f"'profile' must be a FeatureProfile (got {type(profile).__name__}).")
    X = as_pandas(X)  # a Polars or PyArrow frame: pandas from here on
    if not isinstance(X, pd.DataFrame):
        raise InputError(f"'X' must be a pandas DataFrame (got {type(X).__name__}).")
    if not isinstance(max_depth, (int, np.integer)) or not 1 <= int(max_depth) <= 5:
        raise InputError(f"'max_depth' must be a whole number from 1 to 5 (got {max_depth!r}).")
    if not isinstance(min_leaf_share, (int, float)) or not 0 < float(min_leaf_share) <= 0.5:
        raise InputError(f"'min_leaf_share' must be a share in (0, 0.5] (got {min_leaf_share!r}).")
    curves = profile.ici  # raises a clear InputError without a target
    missing_rows = profile.rows.difference(X.index)
    if len(missing_rows):
        raise InputError(
            f"'X' lacks {len(missing_rows)} of the profile's rows (first: {missing_rows[0]!r}); pass the data "
            "the profile was computed on."
        )
    features = _split_features(profile, X, features)
    frame = X.loc[profile.rows, features]

    positions = _considered(profile, mask)
    local = profile.local_importance
    params = {
        "max_depth": int(max_depth),
        "min_leaf_share": float(min_leaf_share),
        "features": [str(f) for f in features],
    }
    base = wrap_condition(condition.strip()) if condition and condition.strip() else ""
    if positions.size == 0:
        return SubgroupSuggestions(profile.feature, (), 0, float("nan"), 0.0, condition, params)

    weighted = curves * np.sqrt(np.asarray(profile.grid_weights, float))[None, :]
    search = SplitSearch(weighted, frame, max(1, math.ceil(float(min_leaf_share) * positions.size)))
    root = search.risk(positions)
    splits: list[RegionalSplit] = []

    def record(best, atoms: list[str], depth: int) -> None:
        splits.append(
            RegionalSplit(
                column=best.column,
                depth=depth,
                node=join_conditions(base, atoms),
                left=join_conditions(base, [*atoms, best.left_rule]),
                right=join_conditions(base, [*atoms, best.right_rule]),
                left_rule=best.left_rule,
                right_rule=best.right_rule,
                share=float(best.gain / root) if root > 0 else 0.0,
                n_left=int(best.left.size),
                n_right=int(best.right.size),
                importance_left=float(local[best.left].mean()),
                importance_right=float(local[best.right].mean()),
            )
        )

    if root > 0:
        grow_tree(search, positions, int(max_depth), on_split=record)
    splits.sort(key=lambda s: (-s.share, s.depth))
    return SubgroupSuggestions(
        feature=profile.feature,
        splits=tuple(splits),
        n_rows=int(positions.size),
        importance=float(local[positions].mean()),
        total_share=float(sum(s.share for s in splits)),
        condition=condition.strip() if condition else "",
        params=params,
    )


def _split_features(profile: FeatureProfile, X: pd.DataFrame, features) -> list:
    """The columns to split on, each checked to be in ``X`` (default: every column of ``X``
    but the profile's feature)."""
    if features is None:
        features = [c for c in X.columns if c != profile.feature]
    features = [features] if is_label(features) else list(features)
    unknown = [f for f in features if f not in X.columns]
    if unknown:
        raise InputError(f"'features' names columns not in 'X': {unknown[:5]!r}.")
    return features


def _considered(profile: FeatureProfile, mask) -> np.ndarray:
    """Positions in ``profile.rows`` of the rows to consider: all of them, or those ``mask``
    selects (a boolean array over the profile's rows, or a Series by row label)."""
    if mask is None:
        return np.arange(len(profile.rows))
    if isinstance(mask, pd.Series):
        mask = mask.reindex(profile.rows).fillna(False).to_numpy(bool)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (len(profile.rows),):
        raise InputError(f"'mask' must have one value per profile row ({len(profile.rows)}); got {mask.shape}.")
    return np.flatnonzero(mask)
