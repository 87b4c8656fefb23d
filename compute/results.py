"""Result objects: typed, frozen, with cheap derived views that never predict again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from . import aggregation as agg
from .checks import check_choice, check_int
from .errors import InputError


class Extremes(NamedTuple):
    """Row labels of the observations with the largest and smallest ICI integrals."""

    largest: pd.Index  # in decreasing order of local importance
    smallest: pd.Index  # in increasing order of local importance


@dataclass(frozen=True, eq=False)
class FeatureProfile:
    """One intervention/prediction pass for one feature; every curve view derives from it.

    Attributes
    ----------
    feature : column label of the feature S.
    grid, grid_weights : ndarray of shape (n_grid,)
        Grid values (floats, or an object array of levels with ``None`` for missing) and
        their weights, summing to one: the feature's empirical distribution on the grid.
    categorical : whether the grid is a set of levels.
    rows : Index of shape (n_obs,), the row labels of the explained observations.
    x : ndarray of shape (n_obs,), the observed feature value of each explained row.
    pred : ndarray of shape (n_obs, n_grid), the ICE tensor f(x_S^(k), x_C^(i)).
    base_pred : ndarray of shape (n_obs,), predictions on the unmodified rows.
    loss_grid, base_loss : pointwise losses at the grid and at the unmodified rows
        (None when no target was given).
    output : the class whose probability ``pred`` holds (None for a regressor).
    params : what produced the profile (grid spec, loss, n_obs, random_state, ...).
    """

    feature: Any
    grid: np.ndarray
    grid_weights: np.ndarray
    categorical: bool
    rows: pd.Index
    x: np.ndarray
    pred: np.ndarray
    base_pred: np.ndarray
    loss_grid: np.ndarray | None = None
    base_loss: np.ndarray | None = None
    output: Any = None
    params: Mapping[str, Any] = field(default_factory=dict)

    # --- prediction views (no target needed) -------------------------------------------
    @property
    def ice(self) -> np.ndarray:
        """ICE curves, shape (n_obs, n_grid)."""
        return self.pred

    @cached_property
    def centered_ice(self) -> np.ndarray:
        """ICE curves minus their value at the first grid point, shape (n_obs, n_grid)."""
        return agg.centered_ice(self.pred)

    @cached_property
    def pd(self) -> np.ndarray:
        """Partial dependence (Eq. 2), shape (n_grid,)."""
        return agg.pd_curve(self.pred)

    # --- importance views (need the target) --------------------------------------------
    @property
    def has_target(self) -> bool:
        return self.loss_grid is not None

    def _need_target(self, what: str) -> tuple[np.ndarray, np.ndarray]:
        """(loss_grid, base_loss), or an InputError saying ``what`` needs the target."""
        if self.loss_grid is None or self.base_loss is None:
            raise InputError(
                f"{what} needs the target: pass y to feature_profile (it was called with y=None, "
                f"which gives only ICE and PD)."
            )
        return self.loss_grid, self.base_loss

    @cached_property
    def ici(self) -> np.ndarray:
        """ICI curves dL_i(x_S^(k)), shape (n_obs, n_grid)."""
        loss_grid, base_loss = self._need_target("ICI")
        return agg.ici_curves(loss_grid, base_loss)

    @cached_property
    def pi(self) -> np.ndarray:
        """PI curve, the mean ICI curve, shape (n_grid,)."""
        self._need_target("PI")
        return agg.pi_curve(self.ici)

    @cached_property
    def local_importance(self) -> np.ndarray:
        """Local PFI of each observation (the ICI integrals), shape (n_obs,)."""
        self._need_target("Local importance")
        return agg.local_importance(self.ici, self.grid_weights)

    @cached_property
    def importance(self) -> float:
        """Global PFI, Eq. (9): the mean local importance."""
        self._need_target("PFI")
        return agg.global_importance(self.local_importance)

    @property
    def model_error(self) -> float:
        """Mean loss of the model on the explained rows, unmodified."""
        _, base_loss = self._need_target("The model error")
        return float(base_loss.mean())

    # --- the missing point ------------------------------------------------------------------
    @property
    def has_missing_point(self) -> bool:
        """A numeric grid ending with the missing point (NaN): the feature has missing values."""
        return (not self.categorical) and self.grid.size > 0 and bool(np.isnan(self.grid[-1]))

    def without_missing_point(self) -> FeatureProfile:
        """The profile over the numeric grid points only (weights renormalised), for views
        that need an ordered axis (ALE, ICE impact); the rows' own predictions are kept."""
        if not self.has_missing_point:
            return self
        weights = self.grid_weights[:-1]
        return replace(
            self,
            grid=self.grid[:-1],
            grid_weights=weights / weights.sum() if weights.sum() > 0 else weights,
            pred=self.pred[:, :-1],
            loss_grid=None if self.loss_grid is None else self.loss_grid[:, :-1],
        )

    # --- subgroups and extremes --------------------------------------------------------
    # --- the curve views draw ---------------------------------------------------------
    def curves(self, kind: str = "ICE", *, centered: bool = False) -> np.ndarray:
        """The ICE or ICI curves, shape (n_obs, n_grid); ``centered``: each minus its value at
        the first grid point (centred ICE, Goldstein et al. 2015; the same shift for ICI)."""
        check_choice(kind, "kind", ("ICE", "ICI"))
        values = self.ici if kind == "ICI" else self.ice
        return agg.centered_ice(values) if centered else values

    def mean_curve(self, kind: str = "ICE", *, mask=None, centered: bool = False) -> np.ndarray:
        """The mean of :meth:`curves` over the rows of ``mask`` (all explained rows by default;
        a mask as :meth:`subset` takes): the PD (Eq. 2) or PI curve of those rows, centred
        when asked; the line the ICE and ICI views draw over their curves."""
        keep = np.arange(len(self.rows)) if mask is None else self._mask_positions(mask)
        if keep.size == 0:
            raise InputError(f"The 'mask' selects 0 of the {len(self.rows)} explained rows; choose another condition.")
        return self.curves(kind, centered=centered)[keep].mean(axis=0)

    def subset(self, mask) -> FeatureProfile:
        """The profile of a subgroup of the explained rows, without predicting again.

        ``mask`` is a boolean Series indexed by row labels (as :func:`parse_subgroup`
        returns; labels not among ``rows`` are ignored) or a boolean array of length
        ``n_obs``. Grid and grid weights stay those of the whole data, so the subgroup's
        ``importance`` is the conditional PFI of Casalicchio et al. (2018), Sec. 6.1: the
        mean local importance over the subgroup.
        """
        keep = self._mask_positions(mask)
        if keep.size == 0:
            raise InputError(
                f"The subgroup 'mask' selects 0 of the {len(self.rows)} explained rows; choose another condition."
            )
        take = lambda a: None if a is None else a[keep]  # noqa: E731
        return replace(
            self,
            rows=self.rows[keep],
            x=self.x[keep],
            pred=self.pred[keep],
            base_pred=self.base_pred[keep],
            loss_grid=take(self.loss_grid),
            base_loss=take(self.base_loss),
            params={**self.params, "subset_of": len(self.rows)},
        )

    def _mask_positions(self, mask) -> np.ndarray:
        if isinstance(mask, pd.Series):
            if not mask.index.is_unique:
                raise InputError("The subgroup 'mask' Series has duplicated row labels.")
            aligned = mask.reindex(self.rows)
            if aligned.isna().any():
                missing = self.rows[aligned.isna().to_numpy()][:5].tolist()
                raise InputError(f"The subgroup 'mask' has no value for rows {missing!r}.")
            values = aligned.to_numpy()
        else:
            values = np.asarray(mask)
            if values.shape != (len(self.rows),):
                raise InputError(
                    f"The subgroup 'mask' array must have one entry per explained row "
                    f"({len(self.rows)}) (got shape {values.shape})."
                )
        if values.dtype != bool:
            raise InputError(f"The subgroup 'mask' must be boolean (got dtype {values.dtype}).")
        return np.flatnonzero(values)

    def extremes(self, k: int = 1) -> Extremes:
        """Row labels of the ``k`` largest and ``k`` smallest ICI integrals (Fig. 6)."""
        k = check_int(k, "k", low=1)
        local = self.local_importance
        k = min(k, local.size)
        largest, _ = agg.rank_extremes(local, k)  # ties to the earlier row, as every view
        return Extremes(largest=self.rows[largest], smallest=self.rows[agg.smallest_positions(local, k)])


@dataclass(frozen=True, eq=False)
class PermutationPairs:
    """Every (row, donor) pair of a ``permutation_block(keep_pairs=True)`` call:
    ``changes[k, r, i]`` is the loss of row ``i`` (a position in the result's ``rows``) with
    item ``k``'s columns taken from row ``donors[k, r, i]`` in permutation ``r``, minus its
    loss unmodified ``base[i]`` as predicted in the same call (so a donor with the row's own
    values gives exactly 0, also in blocks computed apart)."""

    changes: np.ndarray  # (items, repeats, rows)
    donors: np.ndarray  # (items, repeats, rows), int32 positions
    base: np.ndarray  # (rows,)


@dataclass(frozen=True, eq=False)
class PermutationImportance:
    """Permutation feature importance with repetitions (Casalicchio et al. 2018, Eq. 8).

    ``repeats``: DataFrame indexed by feature, one column per permutation
    (``repeat_1`` ...), each the loss after permuting the feature minus (``kind``
    "difference") or divided by ("ratio") the model's error ``model_error`` on the
    ``n_rows`` rows. ``importance`` and ``std`` (ddof=0) summarise the repeats.
    """

    repeats: pd.DataFrame
    model_error: float
    loss: str
    kind: str = "difference"
    n_rows: int = 0
    n_total: int | None = None  # rows of the data (n_rows of them used, when sampled)
    rows: pd.Index | None = None  # labels of the rows used
    row_std_error: pd.Series | None = None  # standard error over the rows used (see permutation_importance)
    pairs: PermutationPairs | None = None  # keep_pairs=True: every (row, donor) pair's loss
    # restrict(): the pairs found inside the subgroup per item and permutation (else None)
    n_pairs: pd.DataFrame | None = None
    # features x features: covariance over the rows of two features' mean loss changes, so a
    # comparison of two features is paired on the rows (compute.separation); None where not kept
    row_covariance: pd.DataFrame | None = None
    # a block of a split job (``streams``): each row's mean loss change (items x rows, float32),
    # so the joined result's covariance is that of one call; None otherwise
    row_changes: np.ndarray | None = None
    # which engine computed the losses: "exact tree walk" or "batched predict" (compute.trees),
    # and why the walk was not taken under engine="auto" (None when it ran or was not asked)
    engine: str = "batched predict"
    engine_reason: str | None = None

    @classmethod
    def concat(cls, parts: list[PermutationImportance]) -> PermutationImportance:
        """Blocks of features computed apart (``permutation_block(streams=...)`` on the
        same rows and seed) joined into one result, in the order given."""
        if not parts:
            raise InputError("'parts' is empty: give at least one PermutationImportance.")
        first = parts[0]
        for part in parts[1:]:
            same = (part.model_error, part.loss, part.kind, part.n_rows, part.n_total, part.n_repeats) == (
                first.model_error,
                first.loss,
                first.kind,
                first.n_rows,
                first.n_total,
                first.n_repeats,
            )
            if not same or (first.rows is not None and not first.rows.equals(part.rows)):
                raise InputError("The parts were computed on other rows, loss or repeats; they cannot be joined.")
        repeats = pd.concat([p.repeats for p in parts])
        if repeats.index.has_duplicates:
            raise InputError(f"The parts share features: {sorted(set(repeats.index[repeats.index.duplicated()]))!r}.")
        errors = [p.row_std_error for p in parts]
        pairs = None
        if all(p.pairs is not None for p in parts):
            found = [p.pairs for p in parts if p.pairs is not None]
            pairs = PermutationPairs(
                np.concatenate([q.changes for q in found]), np.concatenate([q.donors for q in found]), found[0].base
            )
        covariance = None
        if all(p.row_changes is not None for p in parts):  # the covariance one call would give
            changes = np.concatenate([p.row_changes for p in parts if p.row_changes is not None])
            cov = np.atleast_2d(np.cov(changes, ddof=1)) / changes.shape[1]
            if first.kind != "difference":
                cov = cov / first.model_error**2
            covariance = pd.DataFrame(cov, index=repeats.index, columns=repeats.index)
        return replace(
            first,
            repeats=repeats,
            row_std_error=None if any(e is None for e in errors) else pd.concat(errors),
            pairs=pairs,
            row_covariance=covariance,
            row_changes=None,
        )

    def without_pairs(self) -> PermutationImportance:
        """The result without its pairs (small enough to read on every view)."""
        return replace(self, pairs=None)

    def restrict(self, subgroup, n_total: int | None = None) -> PermutationImportance:
        """PFI of a subgroup from these permutations, with no new model call (needs
        ``keep_pairs=True``). ``subgroup``: a boolean mask over ``rows``, or row labels.

        Eq. (8) on the subgroup G permutes the feature among G's rows. The permutations
        tau_r of all the rows hold such pairs already: row i in G whose donor tau_r(i) is in G
        too. Given that, tau_r(i) is uniform over G (i itself included, as in a permutation
        of G), so the mean loss change over those pairs estimates the same Eq. (7) on G as a
        permutation within G; about |G|^2/n pairs per permutation instead of |G|. Repeat r
        is the mean over permutation r's pairs in G ("ratio": mean permuted loss over mean
        unmodified loss on those pairs' rows). ``row_std_error`` treats each row as a
        cluster of its pairs (the ratio estimator's clustered standard error with the
        k/(k-1) factor), which is ``row_std_error`` of the call itself when G is every row.
        ``n_pairs``: pairs per item and permutation. ``n_total``: the subgroup's rows in the
        whole data (for the label), default the rows of G used.
        """
        if self.pairs is None:
            raise InputError("This result keeps no pairs: compute it with permutation_block(keep_pairs=True).")
        inside = self._subgroup_mask(subgroup)
        changes, donors, base = self.pairs.changes, self.pairs.donors, self.pairs.base
        valid = inside[donors] & inside[None, None, :]  # (items, repeats, rows)
        count = valid.sum(axis=2)
        if int(count.min()) < 2:
            raise InputError(
                f"The subgroup holds {int(inside.sum())} of the {inside.size} permuted rows; some permutation "
                "pairs fewer than 2 of them with each other. Compute the subgroup's own permutations."
            )
        change = np.where(valid, changes, 0.0)
        if self.kind == "difference":
            values = change.sum(axis=2) / count
        else:
            unmodified = np.where(valid, base, 0.0).sum(axis=2)
            values = (change.sum(axis=2) + unmodified) / unmodified
        model_error = float(base[inside].mean())
        if self.kind == "ratio" and model_error <= 1e-12 * max(float(np.abs(changes).max()), 1e-300):
            raise InputError(
                f"The ratio form of PFI is undefined on this subgroup: the model's error there is {model_error:.3g}, "
                "essentially 0. Use kind='difference'."
            )
        per_row, per_count = change.sum(axis=1), valid.sum(axis=1)  # (items, rows): clusters
        theta = per_row.sum(axis=1) / per_count.sum(axis=1)
        k = (per_count > 0).sum(axis=1)
        spread = ((per_row - theta[:, None] * per_count) ** 2).sum(axis=1)
        row_se = np.sqrt(spread * k / np.maximum(k - 1, 1)) / per_count.sum(axis=1)
        if self.kind == "ratio":
            row_se = row_se / model_error
        index = self.repeats.index
        assert self.rows is not None  # every result of permutation_importance names its rows
        return PermutationImportance(
            repeats=pd.DataFrame(values, index=index, columns=self.repeats.columns),
            model_error=model_error,
            loss=self.loss,
            kind=self.kind,
            n_rows=int(inside.sum()),
            n_total=int(inside.sum()) if n_total is None else int(n_total),
            rows=self.rows[inside],
            row_std_error=pd.Series(row_se, index=index, name="row_std_error"),
            n_pairs=pd.DataFrame(count, index=index, columns=self.repeats.columns),
            engine=self.engine,  # the pairs' losses, computed by the same engine
            engine_reason=self.engine_reason,
        )

    def _subgroup_mask(self, subgroup) -> np.ndarray:
        n = self.n_rows
        if isinstance(subgroup, pd.Series) and subgroup.dtype == bool and self.rows is not None:
            if subgroup.index.has_duplicates or not self.rows.isin(subgroup.index).all():
                raise InputError("The subgroup mask must have a unique label for every row this result used.")
            subgroup = subgroup.reindex(self.rows).to_numpy()  # by label, not position
        if isinstance(subgroup, (list, tuple)) and subgroup and all(isinstance(v, (bool, np.bool_)) for v in subgroup):
            subgroup = np.asarray(subgroup, dtype=bool)
        if isinstance(subgroup, np.ndarray) and subgroup.dtype == bool:
            values = subgroup
            if values.shape != (n,):
                raise InputError(f"The subgroup mask has {values.size} entries; this result used {n} rows.")
            return values
        if self.rows is None:
            raise InputError("This result does not name its rows; give the subgroup as a boolean mask.")
        return np.asarray(self.rows.isin(pd.Index(subgroup)))

    @property
    def sampled(self) -> bool:
        """True when a sample of the rows was used (``n_obs``)."""
        return self.n_total is not None and self.n_rows < self.n_total

    @property
    def features(self) -> list:
        return list(self.repeats.index)

    @property
    def n_repeats(self) -> int:
        return int(self.repeats.shape[1])

    @property
    def importance(self) -> pd.Series:
        return self.repeats.mean(axis=1).rename("importance")

    @property
    def std(self) -> pd.Series:
        return self.repeats.std(axis=1, ddof=0).rename("std")

    @property
    def std_error(self) -> pd.Series:
        """Monte-Carlo standard error of each mean over the permutations: std (ddof=1) / sqrt(R);
        NaN with one repeat."""
        if self.n_repeats < 2:
            return pd.Series(np.nan, index=self.repeats.index, name="std_error")
        return (self.repeats.std(axis=1, ddof=1) / np.sqrt(self.n_repeats)).rename("std_error")

    @property
    def uncertainty(self) -> pd.Series:
        """The one standard error written after "±" and drawn as whiskers wherever this
        result is shown (page, report, JSON): ``row_std_error`` when there is one (a row
        sample or a subgroup's reused pairs: it covers the choice of rows as well as of
        permutations), else ``std_error`` (over the permutations)."""
        error = self.row_std_error if self.row_std_error is not None else self.std_error
        return error.reindex(self.repeats.index).rename("std_error")

    @property
    def uncertainty_words(self) -> str:
        """What :attr:`uncertainty` is, for the place it is shown."""
        over = f"{self.n_repeats} permutation{'s' if self.n_repeats != 1 else ''}"
        if self.row_std_error is not None:
            return f"standard error over the {self.n_rows:,} rows used and {over}"
        return f"standard error over {over}"

    def relative_error(self, min_share: float = 0.05) -> float:
        """The largest standard error relative to its importance among the features that
        matter (importance at least ``min_share`` of the largest); 0 when none does. A
        near-zero importance has a huge relative spread that says nothing about the ranking."""
        importance = self.importance
        top = float(importance.max())
        if not np.isfinite(top) or top <= 0:
            return 0.0
        matter = importance >= min_share * top
        return float((self.uncertainty[matter] / importance[matter]).max())

    def to_frame(self) -> pd.DataFrame:
        """importance, std and one column per repeat, indexed by feature."""
        frame = pd.concat([self.importance, self.std, self.repeats], axis=1)
        frame.index.name = "feature"
        return frame
