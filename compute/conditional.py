"""``conditional_importance``: PFI that keeps the permuted rows in the data's distribution.

Permuting a feature that depends on others makes rows that never occur (a tall child, a
cheap mansion) and asks the model about them: the marginal PFI of Casalicchio, Molnar &
Bischl (2018, Eq. 4 and 8) then measures the model's extrapolation as much as its reliance
on the feature. Molnar, König, Bischl & Casalicchio, "Model-agnostic feature importance and
effects with dependent features: a conditional subgroup approach" (Data Mining and
Knowledge Discovery, 2023; arXiv:2006.04628) permute within subgroups instead: a shallow
tree learns x_j from the other features, and within each of its leaves G_1..G_K x_j is
(nearly) independent of them, so permuting it there keeps the joint distribution. Their
conditional-subgroup PFI is the size-weighted mean of the subgroups' PFIs,

    cs-PFI_j = sum_k (n_k / n) PFI_j^(G_k),
    PFI_j^(G_k) = (1/n_k) sum_{i in G_k} L(f(x_j^(tau_k(i)), x_-j^(i)), y_i) - L(f(x^(i)), y_i),

with tau_k a permutation of G_k: one permutation of all rows that moves each row only
within its leaf (Eq. 8 of Casalicchio et al. with the permutation restricted), repeated
``n_repeats`` times. The paper grows transformation trees (numeric x_j) and conditional
inference trees (categorical), minbucket 30, and studies depths 1 to 5 (its code,
github.com/christophM/paper_conditional_subgroups, also runs CART); we grow CART (the
split search of :mod:`.splits`: squared error for a numeric x_j, Gini for a categorical
one), so every leaf is a condition of the subgroup language and can be read or selected
on the page. The equation numbers of the journal version could not be checked against a
copy of the text; the estimator above is the one the authors' code computes.

For a linear model f = sum_j b_j x_j and the squared error, the conditional PFI
(difference) is 2 b_j^2 Var(x_j | x_-j), the marginal one 2 b_j^2 Var(x_j): with two
features correlated at rho, the conditional one is (1 - rho^2) of the marginal one (the
tests check this).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .errors import InputError
from .importance import _aggregate, _permuted_errors, _setup
from .results import PermutationImportance
from .sampling import is_categorical
from .splits import Leaf, Split, SplitSearch, grow_tree
from .subgroup import parse_subgroup
from .validation import check_int

__all__ = ["ConditionalImportance", "conditional_importance"]

#: The paper's minbucket: the fewest rows in a subgroup.
MIN_LEAF = 30
#: The significance level of a split (as the paper's ctree, alpha = 0.05).
ALPHA = 0.05


@dataclass(frozen=True, eq=False)
class ConditionalImportance:
    """Conditional (cs-PFI) beside marginal PFI, per feature.

    ``conditional`` and ``marginal`` are :class:`PermutationImportance` results on the same
    rows, loss and seed (``marginal`` equals ``permutation_importance`` with the same
    arguments). ``subgroups[feature]``: one row per leaf, columns ``condition`` (the
    subgroup language), ``readable`` (for people), ``n`` (rows) and ``importance`` (the
    PFI within the leaf, its permutations kept there; their ``n``-weighted mean is the
    conditional PFI). ``conditioned_on[feature]``: the columns the feature's tree split on,
    most variance explained first (empty: nothing in the data predicts the feature).
    """

    conditional: PermutationImportance
    marginal: PermutationImportance | None
    subgroups: dict
    conditioned_on: dict
    max_depth: int
    min_leaf: int
    alpha: float

    @property
    def features(self) -> list:
        return self.conditional.features

    @property
    def importance(self) -> pd.Series:
        """The conditional PFI per feature."""
        return self.conditional.importance

    @property
    def std_error(self) -> pd.Series:
        """Its Monte-Carlo standard error over the permutations (as
        :attr:`PermutationImportance.std_error`)."""
        return self.conditional.std_error

    def to_frame(self) -> pd.DataFrame:
        """One row per feature: ``importance`` (conditional), ``std_error``, ``marginal``,
        ``marginal_std_error`` (computed with ``marginal=True``), ``n_subgroups``."""
        columns = {"importance": self.conditional.importance, "std_error": self.conditional.std_error}
        if self.marginal is not None:
            columns |= {"marginal": self.marginal.importance, "marginal_std_error": self.marginal.std_error}
        columns["n_subgroups"] = pd.Series({f: len(self.subgroups[f]) for f in self.features})
        frame = pd.DataFrame(columns)
        frame.index.name = "feature"
        return frame

    @classmethod
    def concat(cls, parts: list[ConditionalImportance]) -> ConditionalImportance:
        """Blocks of features computed apart (``conditional_importance(streams=...)`` on the
        same rows, seed and trees' settings) joined into one result, in the order given: the
        one call's numbers (:meth:`PermutationImportance.concat` for both PFIs)."""
        if not parts:
            raise InputError("'parts' is empty: give at least one ConditionalImportance.")
        first = parts[0]
        settings = (first.max_depth, first.min_leaf, first.alpha, first.marginal is None)
        if any((p.max_depth, p.min_leaf, p.alpha, p.marginal is None) != settings for p in parts[1:]):
            raise InputError("The parts were computed with other trees' settings; they cannot be joined.")
        marginals = [p.marginal for p in parts if p.marginal is not None]
        return replace(
            first,
            conditional=PermutationImportance.concat([p.conditional for p in parts]),
            marginal=PermutationImportance.concat(marginals) if marginals else None,
            subgroups={f: t for p in parts for f, t in p.subgroups.items()},
            conditioned_on={f: c for p in parts for f, c in p.conditioned_on.items()},
        )

    def describe(self, feature) -> str:
        """Where the feature was shuffled, for people: "x2 was shuffled within: x1 ≤ -0.52;
        -0.52 < x1 ≤ 0.61; x1 > 0.61"."""
        if feature not in self.subgroups:
            raise KeyError(f"{feature!r} is not one of this result's features {self.features[:10]!r}.")
        leaves = self.subgroups[feature]
        if len(leaves) == 1:
            return f"{feature} was shuffled among all rows (no other feature predicts it)"
        return f"{feature} was shuffled within: " + "; ".join(leaves["readable"])


def conditional_importance(
    model,
    X,
    y,
    *,
    features=None,
    n_repeats=5,
    max_depth=4,
    min_leaf=MIN_LEAF,
    alpha=ALPHA,
    marginal=True,
    loss=None,
    kind="difference",
    output=None,
    n_obs=None,
    random_state=0,
    n_jobs=1,
    chunk_rows=None,
    engine="auto",
    streams=None,
) -> ConditionalImportance:
    """Conditional-subgroup PFI (cs-PFI; see the module docstring) with the marginal PFI
    beside it.

    Parameters
    ----------
    model, X, y, loss, kind, output, n_obs, random_state, n_jobs, chunk_rows, engine :
        As in :func:`compute.permutation_importance`; the marginal PFI is exactly that
        call's result (its random streams), the conditional one uses further streams. Both
        take the engine chosen (the exact tree walk: one walk per row serves every
        permutation, within the subgroups too); ``conditional.engine`` says which ran.
    features : column label or list, optional
        Default: every input of the model. Each feature's tree learns it from all the
        model's other inputs.
    n_repeats : int, default 5
        Permutations per feature (for each of the two PFIs).
    max_depth : int in 0..8, default 4
        Depth of each feature's tree (at most 2**max_depth subgroups); 0 gives the
        marginal PFI.
    min_leaf : int, default 30 (the paper's minbucket)
        The fewest rows in a subgroup.
    alpha : float in (0, 1], default 0.05 (the paper's ctree)
        A split is made only where it is significant at ``alpha`` (an F / chi-square test
        of the split, Bonferroni over the splits searched; see :func:`.splits.grow_tree`):
        on a feature nothing predicts, the tree stays one leaf instead of splitting on noise
        (whose in-sample leaves would shrink the conditional PFI a little by chance). 1
        splits wherever the tree can.

    marginal : bool, default True
        Also compute the marginal PFI (a caller that has it already, with the same
        arguments, saves half the cost); False leaves ``marginal`` None.
    streams : list of int, optional
        As in :func:`compute.importance.permutation_block`: the random streams a block of
        features has in a larger call (feature k of the whole call: stream k; its conditional
        permutations: the stream's second child, ``spawn_key=(k, 1)``), so blocks computed
        apart on the same rows and seed join (:meth:`ConditionalImportance.concat`) into
        exactly the one call.

    Returns
    -------
    :class:`ConditionalImportance`. Cost: 2 x features x n_repeats x rows model rows (as two
    PFI calls; half without ``marginal``) plus a tree per feature on the rows used (no model
    call).
    """
    max_depth = check_int(max_depth, "max_depth", low=0, high=8)
    min_leaf = check_int(min_leaf, "min_leaf", low=1)
    _check_options(alpha, marginal)
    setup = _setup(
        model,
        X,
        y,
        loss=loss,
        n_repeats=n_repeats,
        kind=kind,
        features=features,
        output=output,
        n_obs=n_obs,
        random_state=random_state,
        n_jobs=n_jobs,
        chunk_rows=chunk_rows,
        engine=engine,
        streams=streams,
    )
    marginal_pfi = _aggregate(setup, _permuted_errors(setup)) if marginal else None
    frame = setup.predictor.design.frame.iloc[setup.rows]
    trees = [_subgroups(frame, name, max_depth, min_leaf, float(alpha)) for name, _ in setup.items]
    n_items, n = len(setup.items), setup.rows.size
    conditional_setup = replace(
        setup,
        # item k's conditional permutations: the second child of its marginal stream (whatever
        # the other items of the call, so a block of features computed apart draws the same)
        seeds=[np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, 1)) for seed in setup.seeds],
        strata=tuple(tree.labels for tree in trees),
        pair_donors=np.empty((n_items, setup.n_repeats, n), dtype=np.int32),
        pair_losses=np.empty((n_items, setup.n_repeats, n)),
    )
    found = _permuted_errors(conditional_setup)
    conditional = _aggregate(conditional_setup, found)
    assert conditional_setup.pair_losses is not None
    changes = conditional_setup.pair_losses.mean(axis=1)  # (items, rows): each row's mean loss change
    subgroups = {
        name: _leaf_table(trees[k], changes[k], found.base, setup.kind) for k, (name, _) in enumerate(setup.items)
    }
    conditioned_on = {name: trees[k].columns for k, (name, _) in enumerate(setup.items)}
    return ConditionalImportance(
        conditional=conditional.without_pairs(),
        marginal=marginal_pfi,
        subgroups=subgroups,
        conditioned_on=conditioned_on,
        max_depth=max_depth,
        min_leaf=min_leaf,
        alpha=float(alpha),
    )


def _check_options(alpha, marginal) -> None:
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
        raise InputError(f"The 'alpha' parameter must be a significance level in (0, 1] (got {alpha!r}).")
    if not isinstance(marginal, (bool, np.bool_)):
        raise InputError(f"The 'marginal' parameter must be True or False (got {marginal!r}).")


def _leaf_table(tree: _Subgroups, changes: np.ndarray, base: np.ndarray, kind: str) -> pd.DataFrame:
    """One row per leaf: its condition, readable text, rows and the PFI within it (the mean
    loss change of its rows, or their mean permuted loss over their mean loss)."""
    rows = []
    for label, leaf in enumerate(tree.leaves):
        inside = tree.labels == label
        change, own = changes[inside].mean(), base[inside].mean()
        placed = leaf.steps or len(tree.leaves) == 1  # else: the rows no leaf's condition holds
        rows.append(
            {
                "condition": leaf.condition if placed else "",
                "readable": leaf.readable if placed else "rows no other subgroup's condition holds",
                "n": int(inside.sum()),
                "importance": change if kind == "difference" else (change + own) / own,
            }
        )
    return pd.DataFrame(rows, columns=["condition", "readable", "n", "importance"])


@dataclass(frozen=True)
class _Subgroups:
    """A feature's tree: the leaf label of every row (0..K-1), the leaves and the columns
    split on (most gain first)."""

    labels: np.ndarray
    leaves: list[Leaf]
    columns: list


def _subgroups(frame: pd.DataFrame, feature, max_depth: int, min_leaf: int, alpha: float) -> _Subgroups:
    """The subgroups of a CART learning ``feature`` from the other columns."""
    target, others = frame[feature], frame.drop(columns=[feature])
    n = len(frame)
    if is_categorical(target):
        codes, levels = pd.factorize(target.astype(object), use_na_sentinel=True)
        codes = np.where(codes < 0, len(levels), codes)  # missing: a class of its own
        values = np.eye(int(codes.max()) + 1)[codes]  # one-hot: squared error = Gini
        fitted = np.arange(n)
        df = max(values.shape[1] - 1, 1)
    else:
        numbers = target.to_numpy(dtype=float, na_value=np.nan)
        fitted = np.flatnonzero(~np.isnan(numbers))  # rows missing the feature: placed by the conditions
        values = np.where(np.isnan(numbers), 0.0, numbers)[:, None]
        df = 1
    gains: dict = {}

    def record(split: Split, atoms: list[str], depth: int) -> None:
        gains[split.column] = gains.get(split.column, 0.0) + split.gain

    if others.shape[1] == 0 or fitted.size < 2 * min_leaf or max_depth == 0:
        leaves = [Leaf(fitted, ())]
    else:
        search = SplitSearch(values, others, min_leaf)
        test = alpha if alpha < 1 else None
        leaves = grow_tree(search, fitted, max_depth, alpha=test, df=df, on_split=record)
    labels = np.full(n, -1)
    for label, leaf in enumerate(leaves):
        labels[leaf.rows] = label
    unplaced = np.flatnonzero(labels < 0)
    if unplaced.size:
        rows = others.iloc[unplaced]
        for label, leaf in enumerate(leaves):
            inside = parse_subgroup(leaf.condition, rows).to_numpy() if leaf.steps else np.ones(unplaced.size, bool)
            labels[unplaced[inside & (labels[unplaced] < 0)]] = label
        # a row no leaf's condition holds (a level the tree never saw): its own subgroup
        if (labels < 0).any():
            leaves = [*leaves, Leaf(np.flatnonzero(labels < 0), ())]
            labels[labels < 0] = len(leaves) - 1
    for label, leaf in enumerate(leaves):  # the rows each leaf holds, placed ones included
        leaves[label] = replace(leaf, rows=np.flatnonzero(labels == label))
    return _Subgroups(labels, leaves, sorted(gains, key=lambda c: -gains[c]))
