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

from .errors import InputError, SubgroupError
from .results import FeatureProfile
from .sampling import is_categorical
from .subgroup import format_condition, parse_subgroup
from .validation import is_label

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
    if features is None:
        features = [c for c in X.columns if c != profile.feature]
    features = [features] if is_label(features) else list(features)
    unknown = [f for f in features if f not in X.columns]
    if unknown:
        raise InputError(f"'features' names columns not in 'X': {unknown[:5]!r}.")
    frame = X.loc[profile.rows, features]

    positions = np.arange(len(profile.rows))
    if mask is not None:
        if isinstance(mask, pd.Series):
            mask = mask.reindex(profile.rows).fillna(False).to_numpy(bool)
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (len(profile.rows),):
            raise InputError(f"'mask' must have one value per profile row ({len(profile.rows)}); got {mask.shape}.")
        positions = np.flatnonzero(mask)
    local = profile.local_importance
    params = {
        "max_depth": int(max_depth),
        "min_leaf_share": float(min_leaf_share),
        "features": [str(f) for f in features],
    }
    base = _wrap(condition.strip()) if condition and condition.strip() else ""
    if positions.size == 0:
        return SubgroupSuggestions(profile.feature, (), 0, float("nan"), 0.0, condition, params)

    weighted = curves * np.sqrt(np.asarray(profile.grid_weights, float))[None, :]
    row_sq = np.einsum("ij,ij->i", weighted, weighted)
    tree = _Tree(weighted, row_sq, frame, max(1, math.ceil(float(min_leaf_share) * positions.size)))
    root = tree.risk(positions)
    splits: list[RegionalSplit] = []

    def grow(node: np.ndarray, atoms: list[str], depth: int) -> None:
        if depth >= max_depth or node.size < 2 * tree.min_leaf:
            return
        best = tree.best_split(node)
        if best is None or best.gain <= 1e-12 * max(root, 1e-300):
            return
        left_atoms, right_atoms = [*atoms, best.left_rule], [*atoms, best.right_rule]
        splits.append(
            RegionalSplit(
                column=best.column,
                depth=depth,
                node=_join(base, atoms),
                left=_join(base, left_atoms),
                right=_join(base, right_atoms),
                left_rule=best.left_rule,
                right_rule=best.right_rule,
                share=float(best.gain / root) if root > 0 else 0.0,
                n_left=int(best.left.size),
                n_right=int(best.right.size),
                importance_left=float(local[best.left].mean()),
                importance_right=float(local[best.right].mean()),
            )
        )
        grow(best.left, left_atoms, depth + 1)
        grow(best.right, right_atoms, depth + 1)

    if root > 0:
        grow(positions, [], 0)
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


@dataclass
class _Best:
    gain: float
    column: Hashable
    left: np.ndarray
    right: np.ndarray
    left_rule: str
    right_rule: str


class _Tree:
    """Split search over the weighted curves (rows x grid, already times sqrt(w_k))."""

    def __init__(self, weighted: np.ndarray, row_sq: np.ndarray, frame: pd.DataFrame, min_leaf: int):
        self.weighted, self.row_sq, self.frame, self.min_leaf = weighted, row_sq, frame, min_leaf
        self.columns = [(c, frame[c], is_categorical(frame[c])) for c in frame.columns]

    def risk(self, node: np.ndarray) -> float:
        s = self.weighted[node].sum(axis=0)
        return float(self.row_sq[node].sum() - s @ s / node.size)

    def best_split(self, node: np.ndarray) -> _Best | None:
        """The best split of the node whose conditions state it exactly (checked by parsing
        them over the node's rows; only the winner is parsed unless it fails)."""
        found: list[_Best] = []
        total = self.weighted[node].sum(axis=0)
        q_total = float(self.row_sq[node].sum())
        risk = q_total - float(total @ total) / node.size
        for column, series, categorical in self.columns:
            values = series.to_numpy()[node]
            try:
                best = (
                    self._levels(node, column, values, total, q_total, risk)
                    if categorical
                    else self._numeric(node, column, values, total, q_total, risk)
                )
            except (SubgroupError, TypeError, ValueError, OverflowError):
                best = None  # a column the condition language cannot state (mixed types): no split
            if best is not None:
                found.append(best)
        found.sort(key=lambda b: -b.gain)  # stable: ties keep the columns' order
        return next((b for b in found if _parses(b, self.frame)), None)

    def _gain(self, s_left, q_left, n_left, total, q_total, n, risk):
        """Gain of splits given the left sums (vectorised over candidates)."""
        s_right = total[None, :] - s_left
        left = q_left - np.einsum("ij,ij->i", s_left, s_left) / n_left
        right = (q_total - q_left) - np.einsum("ij,ij->i", s_right, s_right) / (n - n_left)
        return risk - left - right

    def _levels(self, node, column, values, total, q_total, risk) -> _Best | None:
        missing = pd.isna(values)
        codes, levels = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
        codes = np.where(missing, len(levels), codes)  # missing: a level of its own
        n_levels = len(levels) + int(missing.any())
        if n_levels < 2:
            return None
        n = node.size
        counts = np.bincount(codes, minlength=n_levels)
        sums = np.zeros((n_levels, self.weighted.shape[1]))
        np.add.at(sums, codes, self.weighted[node])
        q = np.bincount(codes, weights=self.row_sq[node], minlength=n_levels)
        ok = (counts >= self.min_leaf) & (n - counts >= self.min_leaf)
        if not ok.any():
            return None
        gains = np.full(n_levels, -np.inf)
        idx = np.flatnonzero(ok)
        gains[idx] = self._gain(sums[idx], q[idx], counts[idx], total, q_total, n, risk)
        k = int(np.argmax(gains))
        left = codes == k
        if k == len(levels):
            left_rule = format_condition(column, "is missing")
            right_rule = format_condition(column, "is not missing")
        else:
            level = _plain(levels[k])
            left_rule = format_condition(column, "==", level)
            others = [_plain(v) for i, v in enumerate(levels) if i != k]
            if len(others) == 1 and not missing.any():
                right_rule = format_condition(column, "==", others[0])
            elif missing.any():
                right_rule = f"({format_condition(column, '!=', level)} or {format_condition(column, 'is missing')})"
            else:
                right_rule = format_condition(column, "!=", level)
        return _Best(float(gains[k]), column, node[left], node[~left], left_rule, right_rule)

    def _numeric(self, node, column, values, total, q_total, risk) -> _Best | None:
        values = np.asarray(values, dtype=float)
        missing = np.isnan(values)
        n = node.size
        best: _Best | None = None
        if missing.any() and not missing.all():  # "is missing" against the rest
            count = int(missing.sum())
            if min(count, n - count) >= self.min_leaf:
                s = self.weighted[node[missing]].sum(axis=0)[None, :]
                q = np.array([self.row_sq[node[missing]].sum()])
                gain = float(self._gain(s, q, np.array([count]), total, q_total, n, risk)[0])
                best = _Best(
                    gain,
                    column,
                    node[missing],
                    node[~missing],
                    format_condition(column, "is missing"),
                    format_condition(column, "is not missing"),
                )
        present = np.flatnonzero(~missing)
        order = present[np.argsort(values[present], kind="stable")]
        v = values[order]
        if v.size < 2 or v[0] == v[-1]:
            return best
        s_cum = np.cumsum(self.weighted[node[order]], axis=0)
        q_cum = np.cumsum(self.row_sq[node[order]])
        k = np.arange(1, v.size)  # left = the k smallest present values
        valid = (v[k - 1] < v[k]) & (k >= self.min_leaf) & (n - k >= self.min_leaf)
        valid &= np.isfinite(v[k - 1]) & np.isfinite(v[k])  # no threshold next to an infinity
        if not valid.any():
            return best
        k = k[valid]
        gains = self._gain(s_cum[k - 1], q_cum[k - 1], k, total, q_total, n, risk)
        j = int(np.argmax(gains))
        if best is not None and best.gain * (1 + 1e-12) >= gains[j]:
            return best
        cut = int(k[j])
        low, high = v[cut - 1], v[cut]
        left = order[:cut]
        right = np.setdiff1d(np.arange(n), left, assume_unique=True)
        distinct = np.unique(v)
        integer = pd.api.types.is_integer_dtype(self.frame[column]) or bool(np.all(distinct == np.round(distinct)))
        if integer and pd.api.types.is_integer_dtype(self.frame[column]):
            # the column's own integers (a float loses those above 2**53)
            column_values = self.frame[column].to_numpy()
            low = column_values[node[order[cut - 1]]].item()
            high = column_values[node[order[cut]]].item()
        if distinct.size == 2 and not missing.any():
            left_rule = format_condition(column, "==", _number(low, integer))
            right_rule = format_condition(column, "==", _number(high, integer))
        else:
            threshold = _number(low, True) if integer else _between(low, high)
            left_rule = format_condition(column, "<=", threshold)
            right_rule = format_condition(column, ">", threshold)
            if missing.any():
                right_rule = f"({right_rule} or {format_condition(column, 'is missing')})"
        return _Best(float(gains[j]), column, node[left], node[right], left_rule, right_rule)


def _number(value, integer: bool):
    return int(value) if integer else float(value)


def _parses(best: _Best, frame: pd.DataFrame) -> bool:
    """The split's two conditions select, over the node's own rows, exactly its two sides."""
    rows = frame.iloc[np.concatenate([best.left, best.right])]
    try:
        left = parse_subgroup(best.left_rule, rows).to_numpy()
        right = parse_subgroup(best.right_rule, rows).to_numpy()
    except SubgroupError:
        return False
    k = best.left.size
    return bool(left[:k].all() and not left[k:].any() and right[k:].all() and not right[:k].any())


def _between(low: float, high: float) -> float:
    """The shortest decimal d with low <= d < high (a readable threshold that splits the
    data exactly where the tree does)."""
    for digits in range(-6, 17):
        scale = 10.0**digits
        d = math.ceil(low * scale) / scale
        text = f"{d:.{max(digits, 0)}f}"
        d = float(text)
        if low <= d < high:
            return d
    return float(low)


def _plain(value):
    """A level as a Python scalar (numpy scalars to int/float/bool/str)."""
    return value.item() if isinstance(value, np.generic) else value


def _wrap(condition: str) -> str:
    """The subgroup in brackets: 'and' binds tighter than 'or' (however the 'or' is spelt)."""
    return f"({condition})"


def _join(base: str, atoms: list[str]) -> str:
    return " and ".join(([base] if base else []) + atoms)
