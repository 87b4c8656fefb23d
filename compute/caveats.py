"""The caveats of permutation importance, made measurable (seed 001, "Caveats").

Seed 001 names three ways a PFI chart misleads: (2) too few permutations, so the ranking
is still moving; (3) strongly dependent features, where shuffling one alone makes rows the
data never holds (extrapolation) and the features split the importance between them; and,
in its bike-sharing example, a leaked feature that carries nearly all the importance of a
near-perfect model. Each function here turns one into a number a view can show; none calls
a model (grouped PFI, the remedy for (3), is ``permutation_importance(groups=...)``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import InputError
from .losses import CLASSIFICATION_LOSSES, REGRESSION_LOSSES
from .results import PermutationImportance
from .sampling import is_categorical
from .validation import as_pandas, is_label

__all__ = [
    "Dependence",
    "LeakageCheck",
    "PfiConvergence",
    "constant_model_error",
    "feature_dependence",
    "grouped_against_alone",
    "leakage_check",
    "pfi_convergence",
]


# --- (2) convergence ------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PfiConvergence:
    """Running PFI over the first r = 1..R permutations (see :func:`pfi_convergence`).

    ``importance``, ``lower``, ``upper``: DataFrames, features x r (columns 1..R); ``ranks``:
    each feature's rank (1 = most important) after r permutations; ``stable_from``: the
    smallest r from which the order of the ``top`` features no longer changes;
    ``top_stable_from``: the same for the most important feature alone.
    """

    importance: pd.DataFrame
    lower: pd.DataFrame
    upper: pd.DataFrame
    ranks: pd.DataFrame
    top: list
    stable_from: int
    top_stable_from: int
    level: float

    @property
    def n_repeats(self) -> int:
        return int(self.importance.shape[1])

    @property
    def settled(self) -> bool:
        """The order of the top features held over at least the last half of the permutations."""
        return self.stable_from <= max(1, self.n_repeats // 2)

    def to_frame(self) -> pd.DataFrame:
        """Long form: feature, permutations, importance, lower, upper, rank."""
        parts = {
            "importance": self.importance,
            "lower": self.lower,
            "upper": self.upper,
            "rank": self.ranks,
        }
        frame = pd.concat({k: v.stack() for k, v in parts.items()}, axis=1)
        frame.index.names = ["feature", "permutations"]
        return frame.reset_index()


def pfi_convergence(pfi: PermutationImportance, *, level: float = 0.95, top: int = 5) -> PfiConvergence:
    """PFI after the first r permutations, r = 1..R, with a confidence band.

    The PFI of Eq. (8) of Casalicchio et al. (2018) averages R permutations; after r of them
    it is the running mean m_r = (1/r) sum_{s<=r} PFI_s, with the Monte-Carlo band
    m_r +- z * sd_r / sqrt(r) (sd_r: the sample standard deviation, ddof=1, of the first r;
    no band at r = 1; z the normal quantile of ``level``). Seed 001, caveat 2: "the most
    important feature changes and only stabilises with higher-order permutations". The
    ranking at r orders the features by m_r (ties by name order); ``stable_from`` is one
    more than the last r whose order of the final ``top`` features (their ranks among all)
    differs from the order at R. From the cached repeats: no model call. At r = R,
    ``importance`` equals ``pfi.importance``.
    """
    if not isinstance(pfi, PermutationImportance):
        raise InputError(f"'pfi' must be a PermutationImportance (got {type(pfi).__name__}).")
    if not 0 < float(level) < 1:
        raise InputError(f"'level' must be a probability in (0, 1) (got {level!r}).")
    if not isinstance(top, (int, np.integer)) or top < 1:
        raise InputError(f"'top' must be a whole number of at least 1 (got {top!r}).")
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + float(level) / 2)
    values = pfi.repeats.to_numpy(dtype=float)  # features x R
    n_features, n_repeats = values.shape
    r = np.arange(1, n_repeats + 1)
    cumsum = np.cumsum(values, axis=1)
    mean = cumsum / r
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (np.cumsum(values**2, axis=1) - r * mean**2) / (r - 1)
        half = z * np.sqrt(np.clip(var, 0, None) / r)
    half[:, 0] = np.nan
    # ranks: 1 = largest running mean; ties keep the features' order (stable sort)
    order = np.argsort(-mean, axis=0, kind="stable")
    ranks = np.empty_like(order)
    ranks[order, np.arange(n_repeats)[None, :]] = np.arange(1, n_features + 1)[:, None]
    k = min(int(top), n_features)
    final_top = order[:k, -1]
    same = np.all(order[:k, :] == final_top[:, None], axis=0)
    changed = np.flatnonzero(~same)
    stable_from = int(changed[-1] + 2) if changed.size else 1
    top_changed = np.flatnonzero(order[0, :] != order[0, -1])
    top_stable_from = int(top_changed[-1] + 2) if top_changed.size else 1

    def frame(a):
        return pd.DataFrame(a, index=pfi.repeats.index, columns=pd.Index(r, name="permutations"))

    return PfiConvergence(
        importance=frame(mean),
        lower=frame(mean - half),
        upper=frame(mean + half),
        ranks=frame(ranks),
        top=[pfi.repeats.index[i] for i in final_top],
        stable_from=stable_from,
        top_stable_from=top_stable_from,
        level=float(level),
    )


# --- (3) dependence -------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Dependence:
    """Pairwise dependence of features, each in [0, 1] (see :func:`feature_dependence`).

    ``strength``: features x features (1 on the diagonal); ``measure``: which measure each
    pair uses ("rank correlation", "correlation ratio", "Cramér's V"); ``n_rows``: the rows
    used (a seeded sample when the data had more than ``max_rows``).
    """

    strength: pd.DataFrame
    measure: pd.DataFrame
    n_rows: int

    def partners(self, feature: Hashable, threshold: float = 0.7) -> pd.Series:
        """The other features at least ``threshold`` dependent with ``feature``, strongest first."""
        if feature not in self.strength.index:
            raise InputError(f"{feature!r} is not among the features of this dependence table.")
        row = self.strength.loc[feature].drop(feature)
        return row[row >= threshold].sort_values(ascending=False, kind="stable")

    def flagged(self, threshold: float = 0.7) -> dict:
        """feature -> list of its partners (at least ``threshold``), for every feature with one."""
        found = {f: list(self.partners(f, threshold).index) for f in self.strength.index}
        return {f: p for f, p in found.items() if p}

    def groups(self, threshold: float = 0.7, max_groups: int = 6, max_size: int = 4) -> dict:
        """Groups to permute jointly: each flagged feature with its strongest partners (at
        most ``max_size`` columns), in the data's column order, duplicates dropped; the
        ``max_groups`` with the strongest link first. Keys: the members joined by " + "."""
        candidates = []
        for feature, partners in self.flagged(threshold).items():
            members = {feature, *partners[: max_size - 1]}
            ordered = [f for f in self.strength.index if f in members]
            link = float(self.strength.loc[feature, partners[0]])
            candidates.append((link, ordered))
        candidates.sort(key=lambda c: -c[0])
        out: dict = {}
        for _, group in candidates:
            name = " + ".join(str(m) for m in group)
            if name not in out:
                out[name] = group
            if len(out) >= max_groups:
                break
        return out


def feature_dependence(
    X: pd.DataFrame, features: Sequence | None = None, *, max_rows: int = 20_000, random_state: int = 0
) -> Dependence:
    """How strongly each pair of features depends on each other, on a common [0, 1] scale.

    Numeric with numeric: the absolute Spearman rank correlation |rho| (monotone
    dependence). Categorical with numeric: the correlation ratio eta = sqrt(SS_between /
    SS_total) of the numeric column's ranks across the levels (1 when the levels determine
    the ranks), adjusted for the levels' degrees of freedom (epsilon-squared: SS_between
    less (k - 1) times the within mean square), so a column of many levels is not
    "dependent" by chance. Categorical with categorical: Cramér's V with Bergsma's (2013)
    bias correction, sqrt(max(0, phi^2 - (r-1)(c-1)/(n-1)) / min(r~ - 1, c~ - 1)) with
    r~ = r - (r-1)^2/(n-1), for the same reason. Each is about 0 for independent columns and
    1 for a deterministic (for rho: monotone) relation. Seed 001, caveat 3: strongly
    dependent features share importance, and permuting one alone evaluates the model on
    rows the data never holds. Rows missing either value are left out of that pair. On
    more than ``max_rows`` rows a seeded sample of ``max_rows`` is used (sampling error of
    rho about 1/sqrt(max_rows), under 0.01).
    """
    X = as_pandas(X)  # a Polars or PyArrow frame: pandas from here on
    if not isinstance(X, pd.DataFrame):
        raise InputError(f"'X' must be a pandas DataFrame (got {type(X).__name__}).")
    features = list(X.columns) if features is None else ([features] if is_label(features) else list(features))
    unknown = [f for f in features if f not in X.columns]
    if unknown:
        raise InputError(f"'features' names columns not in 'X': {unknown[:5]!r}.")
    frame = X[features]
    if len(frame) > max_rows:
        rng = np.random.default_rng(random_state)
        frame = frame.iloc[np.sort(rng.choice(len(frame), size=max_rows, replace=False))]
    kinds = {f: is_categorical(frame[f]) for f in features}
    numeric = [f for f in features if not kinds[f]]
    ranks = frame[numeric].astype(float).rank(method="average") if numeric else pd.DataFrame(index=frame.index)
    strength = pd.DataFrame(np.eye(len(features)), index=features, columns=features)
    measure = pd.DataFrame("", index=features, columns=features, dtype=object)
    if numeric:
        with np.errstate(invalid="ignore", divide="ignore"):  # a constant column: no correlation (0)
            rho = _rank_correlation(frame[numeric], ranks)
        block = np.abs(np.nan_to_num(rho, nan=0.0))
        np.fill_diagonal(block, 1.0)
        strength.loc[numeric, numeric] = block
        measure.loc[numeric, numeric] = "rank correlation"
    for i, a in enumerate(features):
        for b in features[i + 1 :]:
            if not kinds[a] and not kinds[b]:
                continue
            if kinds[a] and kinds[b]:
                value, name = _cramers_v(frame[a], frame[b]), "Cramér's V"
            else:
                cat, num = (a, b) if kinds[a] else (b, a)
                value, name = _correlation_ratio(frame[cat], frame[num]), "correlation ratio"
            strength.loc[a, b] = strength.loc[b, a] = value
            measure.loc[a, b] = measure.loc[b, a] = name
    for f in features:
        measure.loc[f, f] = "itself"
    return Dependence(strength=strength.astype(float), measure=measure, n_rows=len(frame))


def grouped_against_alone(
    grouped: PermutationImportance, alone: PermutationImportance, groups: Mapping[Hashable, Sequence]
) -> pd.DataFrame:
    """Per group of dependent features: its PFI shuffled together (``grouped``: a
    ``permutation_importance(groups=...)`` on the same rows and loss) against the sum of its
    members' PFI shuffled one at a time (``alone``). Seed 001, "Caveats" (3): dependent
    features split the importance between them, or a feature shuffled alone is evaluated on
    rows unlike the data; the gap says which happened.

    Returns a DataFrame indexed by group name with columns ``together``, ``alone_sum`` and
    ``gap`` (together - alone_sum), in the order of ``groups``.
    """
    if not isinstance(grouped, PermutationImportance) or not isinstance(alone, PermutationImportance):
        raise InputError("'grouped' and 'alone' must be PermutationImportance results (permutation_importance).")
    rows = []
    for name, members in groups.items():
        if name not in grouped.importance.index:
            raise InputError(f"Group {name!r} is not in the grouped result (it has {list(grouped.importance.index)}).")
        missing = [m for m in members if m not in alone.importance.index]
        if missing:
            raise InputError(f"The members {missing} of group {name!r} are not in the one-at-a-time result.")
        together = float(grouped.importance[name])
        alone_sum = float(alone.importance.reindex(list(members)).sum())
        rows.append({"group": name, "together": together, "alone_sum": alone_sum, "gap": together - alone_sum})
    return pd.DataFrame(rows, columns=["group", "together", "alone_sum", "gap"]).set_index("group")


def _rank_correlation(values: pd.DataFrame, ranks: pd.DataFrame) -> np.ndarray:
    """Spearman's rho of every pair of numeric columns (pairwise complete rows when some are missing)."""
    if values.shape[1] == 1:
        return np.ones((1, 1))
    if not ranks.isna().any().any():
        return np.atleast_2d(np.corrcoef(ranks.to_numpy().T))
    return values.astype(float).corr(method="spearman").to_numpy()


def _cramers_v(a: pd.Series, b: pd.Series) -> float:
    keep = a.notna().to_numpy() & b.notna().to_numpy()
    if keep.sum() < 2:
        return 0.0
    table = pd.crosstab(a[keep].astype(str), b[keep].astype(str)).to_numpy(dtype=float)
    if min(table.shape) < 2:
        return 0.0
    n = table.sum()
    expected = table.sum(axis=1, keepdims=True) @ table.sum(axis=0, keepdims=True) / n
    chi2 = float(((table - expected) ** 2 / expected).sum())
    r, c = table.shape
    phi2 = max(0.0, chi2 / n - (r - 1) * (c - 1) / (n - 1))  # Bergsma (2013)
    r_adj, c_adj = r - (r - 1) ** 2 / (n - 1), c - (c - 1) ** 2 / (n - 1)
    denominator = min(r_adj - 1, c_adj - 1)
    return float(np.sqrt(min(phi2 / denominator, 1.0))) if denominator > 0 else 0.0


def _correlation_ratio(levels: pd.Series, values: pd.Series) -> float:
    keep = levels.notna().to_numpy() & values.notna().to_numpy()
    if keep.sum() < 2:
        return 0.0
    y = values[keep].astype(float).rank(method="average").to_numpy()
    codes, _ = pd.factorize(levels[keep].astype(str))
    total = float(((y - y.mean()) ** 2).sum())
    if total <= 0:
        return 0.0
    counts = np.bincount(codes)
    means = np.bincount(codes, weights=y) / counts
    between = float((counts * (means - y.mean()) ** 2).sum())
    k, n = counts.size, y.size
    if n <= k:
        return 0.0
    within_mean_square = (total - between) / (n - k)
    epsilon2 = (between - (k - 1) * within_mean_square) / total  # adjusted for k - 1 degrees of freedom
    return float(np.sqrt(min(max(epsilon2, 0.0), 1.0)))


# --- leakage ----------------------------------------------------------------------------------
def constant_model_error(y, loss: str, n_classes: int | None = None) -> float:
    """The mean loss of the best constant prediction on ``y``: the yardstick a model's
    error is read against (its skill is 1 - error / this).

    squared_error: the variance of y (so the skill is R^2); absolute_error: the mean
    absolute deviation from the median; log_loss: the entropy of the class shares (the
    skill is McFadden's pseudo-R^2); brier: sum_k q_k (1 - q_k) over the class shares q_k
    (q (1 - q) for a two-class model, scikit-learn's binary Brier score); zero_one: 1 - the
    largest class share. ``n_classes``: the model's number of classes (the Brier score of a
    model of three or more classes sums over all of them even where ``y`` holds two);
    default: the classes found in ``y``.
    """
    values = pd.Series(np.asarray(y).ravel())
    if values.isna().any():
        raise InputError("'y' has missing values; drop those rows first.")
    if len(values) == 0:
        raise InputError("'y' is empty.")
    if loss in REGRESSION_LOSSES:
        v = values.astype(float).to_numpy()
        return float(v.var()) if loss == "squared_error" else float(np.abs(v - np.median(v)).mean())
    if loss not in CLASSIFICATION_LOSSES:
        raise InputError(f"No constant-model yardstick for loss {loss!r}; use one of the built-in losses.")
    shares = values.astype(str).value_counts(normalize=True).to_numpy()
    if loss == "log_loss":
        return float(-(shares * np.log(shares)).sum())
    if loss == "brier":
        value = float((shares * (1 - shares)).sum())
        classes = len(shares) if n_classes is None else int(n_classes)
        return value / 2 if classes <= 2 else value
    return float(1 - shares.max())


@dataclass(frozen=True)
class LeakageCheck:
    """See :func:`leakage_check`."""

    skill: float  # 1 - model error / constant-model error (R^2 for squared error)
    carriers: list  # the fewest features carrying ``share`` of the positive importance
    carried: float  # the share of the positive importance they carry
    flagged: bool


def leakage_check(
    pfi: PermutationImportance,
    y,
    *,
    skill_min: float = 0.95,
    share: float = 0.8,
    max_carriers: int = 2,
    n_classes: int | None = None,
) -> LeakageCheck:
    """Seed 001's bike-sharing pattern: a near-perfect model whose importance sits on one or
    two features is worth a look for leakage (a feature known only with or after the
    outcome, such as the two counts that sum to the target).

    skill = 1 - GE / E_0, GE the model's error on the PFI rows (``pfi.model_error``) and
    E_0 :func:`constant_model_error` of ``y`` (the same rows; ``n_classes`` as there). The carriers are the fewest
    features, largest PFI first, whose positive PFI (difference form) reaches ``share`` of
    the total positive PFI. Flagged when skill >= ``skill_min``, there are at most
    ``max_carriers`` carriers and the model has more features than carriers. A flag is a
    prompt to check the data, not a verdict: a truly simple problem looks the same.
    """
    if not isinstance(pfi, PermutationImportance):
        raise InputError(f"'pfi' must be a PermutationImportance (got {type(pfi).__name__}).")
    if pfi.kind != "difference":
        raise InputError("leakage_check reads PFI in the difference form (kind='difference').")
    base = constant_model_error(y, pfi.loss, n_classes)
    skill = float(1 - pfi.model_error / base) if base > 0 else float("nan")
    positive = pfi.importance.clip(lower=0).sort_values(ascending=False, kind="stable")
    total = float(positive.sum())
    if total <= 0:
        return LeakageCheck(skill, [], 0.0, False)
    cumulative = positive.cumsum() / total
    n = int(np.searchsorted(cumulative.to_numpy(), share - 1e-12) + 1)
    carriers = list(positive.index[:n])
    flagged = bool(np.isfinite(skill) and skill >= skill_min and n <= max_carriers and len(positive) > n)
    return LeakageCheck(skill, carriers, float(cumulative.iloc[n - 1]), flagged)
