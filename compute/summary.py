"""What every per-row view needs from a model's feature profiles, without the ICE tensors.

A :class:`ProfileSummary` keeps, for the explained rows of one model, each row's ICI
integral per feature (local PFI, Casalicchio et al. 2018, Eq. 9), the extremes of its ICE
curve per feature and its unmodified prediction. From those alone, with no model call:

- conditional PFI of any subgroup of the explained rows (Sec. 6.1: the mean local PFI over
  the subgroup, grid and weights of all data), and of the rows left after exclusions;
- CIU of any explained row (Främling 2022, Eq. 6, 8, 10) and global CI (Sec. 4.1) with the
  same out-of-range rule as :func:`compute.global_contextual_importance`;
- the most and least influential rows of a feature, with one tie rule everywhere
  (:func:`rank_extremes`);
- per feature, ICE feature impact (:func:`compute.ice_impact`) and PD importance
  (:func:`compute.pd_importance`), computed from each profile as it passes.

Every number the dashboard shows about rows comes from here, so the page and the library
cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .aggregation import rank_extremes
from .ciu import COLUMNS as CIU_COLUMNS
from .ciu import check_out_range, check_utility, ciu_table
from .effects import ice_impact, pd_importance
from .errors import InputError
from .results import FeatureProfile


@dataclass(frozen=True, eq=False)
class ProfileSummary:
    """Per-row results of one model's feature profiles (see the module docstring).

    ``local``, ``ice_min`` and ``ice_max`` are DataFrames indexed by the explained rows with
    one column per feature; ``ice_min``/``ice_max`` include the row's own prediction (the
    instance is part of its sweep, as in :func:`compute.contextual_importance`).
    ``out_range`` is CIU's (MIN, MAX): (0, 1) for probabilities, else the range of the
    model's predictions over all rows of X (not only the explained ones).
    """

    features: tuple
    local: pd.DataFrame
    ice_min: pd.DataFrame
    ice_max: pd.DataFrame
    base_pred: pd.Series
    base_loss: pd.Series
    out_range: tuple[float, float]
    impact: pd.DataFrame = field(default_factory=pd.DataFrame)
    pd_importance: pd.Series = field(default_factory=lambda: pd.Series(dtype=float))
    grids: Mapping = field(default_factory=dict)
    n_rows: int = 0  # rows of X the explained rows were drawn from

    @property
    def rows(self) -> pd.Index:
        return self.local.index

    @classmethod
    def from_profiles(
        cls,
        profiles,
        *,
        out_range,
        n_rows: int | None = None,
    ) -> ProfileSummary:
        """Summarise profiles of the same explained rows (one per feature, with a target).

        ``profiles``: a dict {feature: FeatureProfile} or any iterable of (feature,
        FeatureProfile) pairs, consumed one at a time (a generator keeps one ICE tensor in
        memory at once). Each profile's ICE feature impact and PD importance are computed
        as it passes (no impact for a feature with fewer than two numeric values: no slope)."""
        out_range = check_out_range(out_range)
        items = profiles.items() if isinstance(profiles, Mapping) else profiles
        first = None
        local, ice_min, ice_max, grids, impact, firm = {}, {}, {}, {}, {}, {}
        for name, prof in items:
            if not isinstance(prof, FeatureProfile):
                raise InputError(f"The 'profiles' value {name!r} must be a FeatureProfile.")
            first = prof if first is None else first
            if not prof.rows.equals(first.rows):
                raise InputError(f"The profile of {name!r} explains other rows than the first profile.")
            local[name] = prof.local_importance
            ice_min[name] = np.minimum(prof.pred.min(axis=1), prof.base_pred)
            ice_max[name] = np.maximum(prof.pred.max(axis=1), prof.base_pred)
            grids[name] = {
                "n_grid": int(len(prof.grid)),
                "grid": prof.params.get("grid"),
                "categorical": bool(prof.categorical),
            }
            numeric_points = len(prof.without_missing_point().grid)  # one value and "missing": no slope
            impact[name] = ice_impact(prof) if numeric_points > 1 else pd.Series(dtype=float)
            firm[name] = pd_importance(prof)
        if first is None:
            raise InputError("The 'profiles' are empty; pass at least one FeatureProfile.")
        rows = first.rows
        return cls(
            features=tuple(local),
            local=pd.DataFrame(local, index=rows),
            ice_min=pd.DataFrame(ice_min, index=rows),
            ice_max=pd.DataFrame(ice_max, index=rows),
            base_pred=pd.Series(first.base_pred, index=rows),
            base_loss=pd.Series(first.base_loss, index=rows),
            out_range=out_range,
            impact=pd.DataFrame(impact).T,
            pd_importance=pd.Series(firm),
            grids=grids,
            n_rows=len(rows) if n_rows is None else int(n_rows),
        )

    # --- rows ------------------------------------------------------------------------------
    def _inside(self, mask) -> np.ndarray:
        """A boolean array over the explained rows from a mask over X's rows (labels not
        explained are ignored; explained rows the mask does not name are outside)."""
        if mask is None:
            return np.ones(len(self.rows), dtype=bool)
        if isinstance(mask, pd.Series):
            return mask.reindex(self.rows).fillna(False).to_numpy(dtype=bool)
        values = np.asarray(mask, dtype=bool)
        if values.shape != (len(self.rows),):
            raise InputError(
                f"The 'mask' must be a boolean Series over row labels or have one entry per "
                f"explained row ({len(self.rows)}); got shape {values.shape}."
            )
        return values

    def _positions(self, labels) -> np.ndarray:
        index = pd.Index(list(labels or ()))
        if pd.api.types.is_integer_dtype(self.rows.dtype) and not pd.api.types.is_integer_dtype(index.dtype):
            index = pd.Index([_as_int(v) for v in index], dtype=object)
        return self.rows.isin(index)

    # --- conditional PFI (Eq. 9) -----------------------------------------------------------
    def conditional_pfi(self, mask=None, excluded=()) -> pd.DataFrame:
        """PFI of every feature as the mean ICI integral over all explained rows, the
        subgroup ``mask`` and its complement (Sec. 6.1), and the rows left after removing
        ``excluded`` row labels (Sec. 6.2, Table 2 row 3). ``attrs["counts"]`` holds each
        column's number of rows. Sorted by the all-rows PFI, largest first."""
        local = self.local
        table = {"all": local.mean(axis=0)}
        counts = {"all": len(local)}
        if mask is not None:
            inside = self._inside(mask)
            table["subgroup"] = local[inside].mean(axis=0) if inside.any() else np.nan
            table["complement"] = local[~inside].mean(axis=0) if (~inside).any() else np.nan
            counts["subgroup"], counts["complement"] = int(inside.sum()), int((~inside).sum())
        if excluded:
            keep = ~self._positions(excluded)
            table["without excluded"] = local[keep].mean(axis=0)
            counts["without excluded"] = int(keep.sum())
        frame = pd.DataFrame(table)
        frame.attrs["counts"] = counts
        return frame.sort_values("all", ascending=False, kind="stable")

    # --- CIU ----------------------------------------------------------------------------------
    def ciu(self, row, *, phi0: float = 0.5, utility: str = "increasing") -> pd.DataFrame:
        """CI, CU and contextual influence of one explained row (Eq. 6, 8, 10), indexed by
        feature, columns as :func:`compute.contextual_importance`."""
        phi0, utility = check_utility(phi0, utility)
        where = self._positions([row])
        if not where.any():
            raise InputError(f"Observation {row!r} is not among the explained rows; pick a curve in the ICI view.")
        i = int(np.flatnonzero(where)[0])
        ymin, ymax = self.ice_min.to_numpy(float)[i], self.ice_max.to_numpy(float)[i]
        y = np.full(ymin.shape, float(self.base_pred.iloc[i]))
        out = ciu_table(ymin, ymax, y, self.out_range, phi0=phi0, utility=utility)
        return pd.DataFrame(out, index=pd.Index(self.features, name="feature"))[CIU_COLUMNS]

    def global_ci(self, mask=None) -> pd.DataFrame:
        """Global CI (Sec. 4.1) over the explained rows in ``mask`` (all when None or when
        it selects none): mean CI, its standard deviation and the share of rows flagged out
        of range by the library's rule (ymin < MIN, ymax > MAX, CI > 1, CU < 0 or CU > 1).
        Sorted by CI, largest first."""
        inside = self._inside(mask)
        if not inside.any():
            inside = np.ones(len(self.rows), dtype=bool)
        ymin = self.ice_min.to_numpy(float)[inside]
        ymax = self.ice_max.to_numpy(float)[inside]
        y = self.base_pred.to_numpy(float)[inside][:, None]
        out = ciu_table(ymin, ymax, y, self.out_range)
        frame = pd.DataFrame(
            {
                "CI": out["CI"].mean(axis=0),
                "CI_std": out["CI"].std(axis=0, ddof=0),
                "out_of_range_share": out["out_of_range"].mean(axis=0),
            },
            index=pd.Index(self.features, name="feature"),
        )
        return frame.sort_values("CI", ascending=False, kind="stable")

    # --- influential rows ------------------------------------------------------------------------
    def most_influential(self, mask=None):
        """The label of the explained row in ``mask`` (all of them when it holds none) whose
        ICI integrals, summed over the features, are largest: the row whose loss the features
        move most when their values are replaced (Casalicchio et al. 2018, Eq. 4 summed over
        the features); ties to the earlier row, NaN integrals counted as 0."""
        inside = self._inside(mask)
        if not inside.any():
            inside = np.ones(len(self.rows), dtype=bool)
        total = np.nansum(self.local.to_numpy(float), axis=1)
        positions = np.flatnonzero(inside)
        return self.rows[positions[int(np.argmax(total[positions]))]]

    def influential(self, feature, k: int = 10, mask=None) -> pd.DataFrame:
        """The ``k`` most and ``k`` least influential explained rows in ``mask`` for
        ``feature`` (largest / smallest ICI integral; ties to the earlier row, as
        :func:`rank_extremes`). Columns ici_integral and rank; ``attrs``: n_negative, n."""
        if feature not in self.local.columns:
            raise InputError(f"Feature {feature!r} is not among the summarised features {list(self.features)}.")
        inside = np.flatnonzero(self._inside(mask))
        values = self.local[feature].to_numpy(float)[inside]
        largest, smallest = rank_extremes(values, k)
        rows = self.rows[inside]
        frame = pd.DataFrame(
            {
                "ici_integral": np.concatenate([values[largest], values[smallest]]),
                "rank": ["most influential"] * len(largest) + ["least influential"] * len(smallest),
            },
            index=pd.Index(np.concatenate([rows[largest], rows[smallest]]), name="row"),
        )
        frame.attrs["n_negative"] = int((values < 0).sum())
        frame.attrs["n"] = int(values.size)
        return frame


def _as_int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return value
