"""Greedy CART split search whose splits are conditions of the subgroup language.

Shared by the subgroups found for you (:mod:`.regional`, on ICI curves) and conditional
importance (:mod:`.conditional`, on a feature's values given the others). The risk of a
node N of rows, each with a vector c_i (a curve times the square root of its weights, or a
feature's value, or a one-hot class), is the sum of squares around the node's mean,

    R(N) = sum_{i in N} ||c_i - cbar_N||^2,

(for one-hot classes, |N| times the Gini impurity: a classification tree), and a split
N -> (A, B) gains R(N) - R(A) - R(B). Candidate splits: a numeric column at every threshold
between two observed values (rows with a missing value go with the upper side; ``is
missing`` is a split of its own); a categorical column, one level against the rest (missing
counts as a level). Each split is written as two conditions that :func:`parse_subgroup`
parses back to exactly its two sides (checked), with the shortest readable threshold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.special import chdtrc

from .errors import SubgroupError
from .sampling import is_categorical
from .subgroup import format_condition, parse_subgroup


@dataclass
class Split:
    gain: float
    column: Hashable
    left: np.ndarray
    right: np.ndarray
    left_rule: str
    right_rule: str
    threshold: float | None = None  # a numeric "<= t" / "> t" split: left is "<= t"
    missing_right: bool = False  # the right side holds the rows missing the column
    risk: float = float("nan")  # the node's risk R(N)


class SplitSearch:
    """Split search over the rows' vectors ``weighted`` (rows x k) by the columns of
    ``frame`` (same rows), every child at least ``min_leaf`` rows."""

    def __init__(self, weighted: np.ndarray, frame: pd.DataFrame, min_leaf: int):
        self.weighted, self.frame, self.min_leaf = weighted, frame, min_leaf
        self.row_sq = np.einsum("ij,ij->i", weighted, weighted)
        self.columns = [(c, frame[c], is_categorical(frame[c])) for c in frame.columns]

    def risk(self, node: np.ndarray) -> float:
        s = self.weighted[node].sum(axis=0)
        return float(self.row_sq[node].sum() - s @ s / node.size)

    def best_split(self, node: np.ndarray) -> Split | None:
        """The best split of the node whose conditions state it exactly (checked by parsing
        them over the node's rows; only the winner is parsed unless it fails)."""
        found: list[Split] = []
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
        best = next((b for b in found if _parses(b, self.frame)), None)
        if best is None:
            return None
        return replace(best, risk=risk)

    def candidates(self, node: np.ndarray) -> int:
        """The splits of the node searched (at most: one per distinct value of each column),
        for a multiple-test bound."""
        found = sum(max(pd.Series(s.to_numpy()[node]).nunique(dropna=False) - 1, 0) for _, s, _ in self.columns)
        return max(int(found), 1)

    def _gain(self, s_left, q_left, n_left, *, total, q_total, n, risk):
        """Gain of splits given the left sums (vectorised over candidates)."""
        s_right = total[None, :] - s_left
        left = q_left - np.einsum("ij,ij->i", s_left, s_left) / n_left
        right = (q_total - q_left) - np.einsum("ij,ij->i", s_right, s_right) / (n - n_left)
        return risk - left - right

    def _levels(self, node, column, values, total, q_total, risk) -> Split | None:
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
        gains[idx] = self._gain(sums[idx], q[idx], counts[idx], total=total, q_total=q_total, n=n, risk=risk)
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
        return Split(float(gains[k]), column, node[left], node[~left], left_rule, right_rule)

    def _numeric(self, node, column, values, total, q_total, risk) -> Split | None:
        values = np.asarray(values, dtype=float)
        missing = np.isnan(values)
        n = node.size
        best: Split | None = None
        if missing.any() and not missing.all():  # "is missing" against the rest
            count = int(missing.sum())
            if min(count, n - count) >= self.min_leaf:
                s = self.weighted[node[missing]].sum(axis=0)[None, :]
                q = np.array([self.row_sq[node[missing]].sum()])
                gain = float(self._gain(s, q, np.array([count]), total=total, q_total=q_total, n=n, risk=risk)[0])
                best = Split(
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
        gains = self._gain(s_cum[k - 1], q_cum[k - 1], k, total=total, q_total=q_total, n=n, risk=risk)
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
            threshold = _number(low, True) if integer else between(low, high)
            left_rule = format_condition(column, "<=", threshold)
            right_rule = format_condition(column, ">", threshold)
            if missing.any():
                right_rule = f"({right_rule} or {format_condition(column, 'is missing')})"
            return Split(
                float(gains[j]),
                column,
                node[left],
                node[right],
                left_rule,
                right_rule,
                threshold=float(threshold),
                missing_right=bool(missing.any()),
            )
        return Split(float(gains[j]), column, node[left], node[right], left_rule, right_rule)


def _number(value, integer: bool):
    return int(value) if integer else float(value)


def _parses(best: Split, frame: pd.DataFrame) -> bool:
    """The split's two conditions select, over the node's own rows, exactly its two sides."""
    rows = frame.iloc[np.concatenate([best.left, best.right])]
    try:
        left = parse_subgroup(best.left_rule, rows).to_numpy()
        right = parse_subgroup(best.right_rule, rows).to_numpy()
    except SubgroupError:
        return False
    k = best.left.size
    return bool(left[:k].all() and not left[k:].any() and right[k:].all() and not right[:k].any())


def between(low: float, high: float) -> float:
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


def wrap_condition(condition: str) -> str:
    """The subgroup in brackets: 'and' binds tighter than 'or' (however the 'or' is spelt)."""
    return f"({condition})"


def join_conditions(base: str, atoms: list[str]) -> str:
    return " and ".join(([base] if base else []) + atoms)


@dataclass(frozen=True)
class Step:
    """One split on the way to a leaf: its column, the side's condition and, for a numeric
    threshold, the threshold, the side (``upper``: the "> t" side) and whether the side
    holds the missing values."""

    column: Hashable
    rule: str
    threshold: float | None = None
    upper: bool = False
    missing: bool = False


@dataclass(frozen=True)
class Leaf:
    """A leaf of a grown tree: its rows (positions) and the splits leading to it."""

    rows: np.ndarray
    steps: tuple[Step, ...]

    @property
    def condition(self) -> str:
        """The leaf in the subgroup language (:func:`parse_subgroup` selects its rows);
        empty for the root."""
        return join_conditions("", [step.rule for step in self.steps])

    @property
    def readable(self) -> str:
        """The leaf for people: a column's thresholds merged into one interval
        ("-0.52 < x1 ≤ 0.61"), other conditions as they are, joined by "and"; "all rows"
        for the root."""
        if not self.steps:
            return "all rows"
        parts: list[str] = []
        for column in dict.fromkeys(step.column for step in self.steps):
            steps = [step for step in self.steps if step.column == column]
            if any(step.threshold is None for step in steps):
                parts.extend(dict.fromkeys(step.rule for step in steps))
                continue
            lows = [step.threshold for step in steps if step.upper and step.threshold is not None]
            highs = [step.threshold for step in steps if not step.upper and step.threshold is not None]
            name = str(column)
            text = name
            if lows:
                text = f"{_short(max(lows))} < {text}"
            if highs:
                text = f"{text} ≤ {_short(min(highs))}"
            if all(step.missing for step in steps):  # every side taken kept the missing rows
                text = f"({text} or {name} missing)"
            parts.append(text)
        return " and ".join(parts)


def _short(value: float) -> str:
    return f"{value:.4g}"


def grow_tree(
    search: SplitSearch,
    positions: np.ndarray,
    max_depth: int,
    *,
    alpha: float | None = None,
    df: int = 1,
    on_split: Callable[[Split, list[str], int], None] | None = None,
) -> list[Leaf]:
    """CART: split each node on its best split until ``max_depth`` or too few rows (and a
    gain above 1e-12 of the root's risk); the leaves in depth-first order, left before
    right. ``on_split(split, atoms, depth)`` sees every split made.

    ``alpha``: split only where the split is significant, as conditional inference trees
    (ctree, alpha = 0.05) stop: the best split's statistic T = (n - 2) G / (R - G) (G its
    gain, R the node's risk, n its rows; an F(1, n - 2) statistic for a numeric response,
    about chi-square with ``df`` degrees of freedom for ``df`` + 1 one-hot classes) has
    p-value P(chi2_df > T), and the split is made if that p-value times the number of
    splits searched (Bonferroni, conservative: the thresholds of a column are correlated)
    is below ``alpha``. Without it, a tree on a feature nothing predicts still splits on
    noise, and its in-sample leaves look purer than they are."""
    root = search.risk(positions)
    leaves: list[Leaf] = []

    def grow(node: np.ndarray, steps: list[Step], depth: int) -> None:
        best = None
        if depth < max_depth and node.size >= 2 * search.min_leaf and root > 0:
            best = search.best_split(node)
        if best is not None and alpha is not None and not _significant(best, search.candidates(node), alpha, df):
            best = None
        if best is None or best.gain <= 1e-12 * max(root, 1e-300):
            leaves.append(Leaf(node, tuple(steps)))
            return
        if on_split is not None:
            on_split(best, [step.rule for step in steps], depth)
        left = Step(best.column, best.left_rule, best.threshold, upper=False, missing=False)
        right = Step(best.column, best.right_rule, best.threshold, upper=True, missing=best.missing_right)
        grow(best.left, [*steps, left], depth + 1)
        grow(best.right, [*steps, right], depth + 1)

    grow(positions, [], 0)
    return leaves


def _significant(split: Split, candidates: int, alpha: float, df: int) -> bool:
    """The split's Bonferroni-adjusted p-value (over ``candidates`` splits) is below ``alpha``
    (see :func:`grow_tree`)."""
    n = split.left.size + split.right.size
    rest = split.risk - split.gain
    if rest <= 1e-12 * max(split.risk, 1e-300):
        return True  # the split leaves no variance: as significant as it gets
    statistic = (n - 2) * split.gain / rest
    return bool(chdtrc(df, statistic) * candidates < alpha)
