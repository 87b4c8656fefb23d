"""``interaction_strength``: Friedman's H statistics, which features act together.

Friedman & Popescu (2008), "Predictive learning via rule ensembles", Annals of Applied
Statistics 2(3), Sec. 8.1. With F the model's prediction (a classifier's probability of the
output class) and partial dependences evaluated at the explained rows x_1..x_n, each
averaged over the same rows and centred to mean zero over them (a tilde):

    PD_j(v)       = (1/n) sum_l F(x_l with x_j := v)
    PD_-j(w)      = (1/n) sum_l F(x_l with x_-j := w)
    PD_jk(v, u)   = (1/n) sum_l F(x_l with x_j := v, x_k := u)

    H^2_jk = sum_i [PD~_jk(x_ij, x_ik) - PD~_j(x_ij) - PD~_k(x_ik)]^2 / sum_i PD~_jk(x_ij, x_ik)^2
    H^2_j  = sum_i [F~(x_i) - PD~_j(x_ij) - PD~_-j(x_i,-j)]^2 / sum_i F~(x_i)^2

(the two-variable statistic, their Eq. 44, and x_j against all other features). H^2 is the
share of the joint effect's variance that the sum of the one-feature effects does not
explain: 0 for an additive model, 1 when the joint effect is pure interaction. A weak
joint effect can make the ratio large on noise, so each statistic also comes unnormalised
(Greenwell et al.'s and the hstats package's proposal, as pyartemis computes it):

    h_jk = sqrt( (1/n) sum_i [PD~_jk - PD~_j - PD~_k]^2 )

in the units of the prediction: how far the joint effect is from additive, on average.

Cost. One pass per feature: the n x n block F(x_l with x_j := x_aj) gives PD_j (mean over l)
and PD_-j (mean over a) at once, and a feature with u distinct values needs only u x n rows
(a binary feature: 2n). One pass per pair: u_jk x n rows (its distinct value pairs), plus
the 2-D partial dependence on a ``grid_size`` x ``grid_size`` grid for the heatmap (the
pairs' grid cost: grid points x n). Rows: a seeded sample of ``n_obs`` rows (default 300:
n^2 = 90,000 model rows per feature and per pair).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from .errors import InputError
from .prediction import predict_segments, unmodified_segment
from .sampling import make_grid, sample_rows
from .segments import Segment, cycle_segment
from .trees import Choice, Own, choose_engine, compiled, lookup_sums, profile_pass, walk
from .validation import check_features, check_frame, check_int, check_n_jobs, check_rng, make_predictor

__all__ = ["InteractionStrength", "interaction_strength"]

#: Pairs evaluated by default: every pair of at most this many features (those interacting most).
MAX_PAIR_FEATURES = 8
#: A pair's interaction matters when its h is at least this share of the largest pair's.
MATERIAL = 0.05


@dataclass(frozen=True, eq=False)
class InteractionStrength:
    """Friedman's H statistics (see the module docstring).

    ``overall``: one row per feature (index: the feature), columns ``h2`` (H^2_j, against all
    other features) and ``h`` (unnormalised, prediction units). ``pairs``: columns
    ``feature_1``, ``feature_2``, ``h2``, ``h``, the strongest first: by ``h2`` among the
    pairs whose ``h`` is at least 5 % of the largest, then the rest (a pure but negligible
    interaction has H^2 = 1: the ratio alone would put it first).
    ``n_rows`` of ``n_total`` rows explained (``rows``: their labels); ``model_rows``: the
    rows the model was called on. ``engine``: what computed the per-feature pass ("exact
    tree walk" or "batched predict"; ``engine_reason`` why not the walk); the pairs take the
    same engine, the walk with both features free (compiled only: without numba, the batched
    predict).
    """

    overall: pd.DataFrame
    pairs: pd.DataFrame
    grids: dict  # (a, b) -> (grid of a, grid of b, 2-D PD: len(grid a) x len(grid b))
    n_rows: int
    n_total: int
    rows: pd.Index
    model_rows: int
    output: object = None
    engine: str = "batched predict"
    engine_reason: str | None = None

    @property
    def features(self) -> pd.Series:
        """H^2 of each feature with all the others."""
        return self.overall["h2"].rename("h2")

    @property
    def sampled(self) -> bool:
        return self.n_rows < self.n_total

    def pd2(self, a, b) -> pd.DataFrame:
        """The 2-D partial dependence of a computed pair on its grid (uncentred, in the
        prediction's units): index the grid of ``a``, columns the grid of ``b``."""
        if (a, b) in self.grids:
            grid_a, grid_b, values = self.grids[(a, b)]
            frame = pd.DataFrame(values, index=pd.Index(grid_a, name=a), columns=pd.Index(grid_b, name=b))
            return frame
        if (b, a) in self.grids:
            return self.pd2(b, a).T
        raise InputError(
            f"The pair ({a!r}, {b!r}) was not computed; computed pairs: "
            f"{[tuple(p) for p in self.pairs[['feature_1', 'feature_2']].to_numpy()][:10]!r}."
        )


def interaction_strength(
    model,
    X,
    *,
    features=None,
    pairs=None,
    top=MAX_PAIR_FEATURES,
    n_obs=300,
    grid_size=20,
    output=None,
    random_state=0,
    n_jobs=1,
    chunk_rows=None,
    engine="auto",
) -> InteractionStrength:
    """Friedman's H^2 per feature (against all others) and per pair, with the unnormalised
    statistic and the pairs' 2-D partial dependence.

    Parameters
    ----------
    model, X, output, n_jobs, chunk_rows :
        As in :func:`compute.feature_profile`.
    features : column label or list, optional
        The features whose overall statistic is computed; default every input of the model.
    pairs : list of (a, b), "all" or None
        The pairs to compute. Default: every pair of the ``top`` features with the largest
        overall ``h`` (Friedman & Popescu's advice: look for the partners of the features
        that interact at all); every pair of ``features`` when there are at most ``top``.
    top : int, default 8
    n_obs : int or None, default 300
        A seeded random sample of rows to explain (and average over); None: every row
        (the cost grows with its square).
    grid_size : int, default 20
        Points per feature of the pairs' 2-D partial dependence (quantiles; a categorical
        feature's levels).
    random_state : int, Generator or None, default 0
    engine : {"auto", "trees", "predict"}, default "auto"
        As in :func:`compute.feature_profile`: the per-feature pass (``n`` rows x their
        distinct values of the feature) and each pair's (with both features free) from the
        exact tree walk where the model is a tree model the engine reads.

    Returns
    -------
    :class:`InteractionStrength`.
    """
    X = check_frame(X)
    predictor, Xm = make_predictor(model, X, output)
    features = check_features(features, Xm.columns)
    n_obs = check_int(n_obs, "n_obs", low=2, none_ok=True)
    grid_size = check_int(grid_size, "grid_size", low=2, high=100)
    top = check_int(top, "top", low=2, high=100)
    chunk_rows = check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    n_jobs = check_n_jobs(n_jobs)
    rng = check_rng(random_state)
    rows = np.sort(sample_rows(len(X), n_obs, rng))
    local = predictor.design.subset(rows)
    codes = {f: _codes(local.frame[f].to_numpy()) for f in Xm.columns}
    sample = _Sample(predictor, local, codes, chunk_rows, n_jobs, rows=rows, choice=choose_engine(engine, predictor))
    frame = sample.overall(features)
    chosen = _pairs(pairs, features, frame, Xm.columns, top)
    grids = {f: _grid(X[f], grid_size, predictor.design) for f in {f for pair in chosen for f in pair}}
    pair_frame, found = sample.pairs(chosen, grids)
    n, model_rows = sample.n, sample.model_rows
    return InteractionStrength(
        overall=frame,
        pairs=pair_frame,
        grids=found,
        n_rows=n,
        n_total=len(X),
        rows=X.index[rows],
        model_rows=int(model_rows),
        output=predictor.output,
        engine=sample.choice.name,
        engine_reason=sample.choice.reason,
    )


@dataclass
class _Sample:
    """The explained rows and the passes over them; ``model_rows`` counts the rows predicted.
    ``codes[f]``: each row's distinct-value number of f and the first row of each value."""

    predictor: Any
    local: Any  # the sample's Design
    codes: dict
    chunk_rows: int | None
    n_jobs: int
    model_rows: int = 0
    pd1: dict = field(default_factory=dict)  # f -> PD_f at each row's own value
    scale: float = 0.0  # the largest centred prediction: what rounding is measured against
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # positions in the data
    choice: Choice = Choice(None)  # the per-feature pass's engine

    @property
    def n(self) -> int:
        return self.local.n_rows

    def run(self, segments) -> np.ndarray:
        values, _ = predict_segments(self.predictor, segments, chunk_rows=self.chunk_rows, n_jobs=self.n_jobs)
        self.model_rows += values.size
        return values

    def overall(self, features: list) -> pd.DataFrame:
        """H^2_j and h_j: one pass per feature, block[v, l] = F(x_l with x_j := the v-th
        distinct value); PD_j is its mean over l, PD_-j its mean over the rows' values."""
        n = self.n
        walked = self._walked(features)
        blocks = (
            walked
            if walked is not None
            else self.run([_replaced(self.local, {f: self.codes[f][1]}, n) for f in features])
        )
        found, start = [], 0
        for f in features:
            inverse, reps = self.codes[f]
            block = blocks[start : start + reps.size * n].reshape(reps.size, n)
            start += block.size
            prediction = block[inverse, np.arange(n)]  # row l with its own value: F(x_l)
            self.pd1[f] = block.mean(axis=1)[inverse]
            pd_rest = np.bincount(inverse, minlength=reps.size) @ block / n
            found.append((f, _centred(prediction), _centred(self.pd1[f]) + _centred(pd_rest)))
        self.scale = float(np.abs(found[0][1]).max()) if found else 0.0
        rows = [(f, *_statistic(joint, additive, self.scale)) for f, joint, additive in found]
        return pd.DataFrame(rows, columns=["feature", "h2", "h"]).set_index("feature")

    def _walked(self, features: list) -> np.ndarray | None:
        """The per-feature blocks (value-major, as the batched pass gives them) from the exact
        tree walk, or None when it is not used: one model call on the n rows, which the walk
        is checked against, then every cell from one walk per row and tree, the cells at a
        row's own value too. Every cell of H then comes from the walk, the pairs' as well:
        a model that sums in float32 (XGBoost) differs from the walk by its rounding, which
        a cell from the model beside cells from the walk would show as an interaction."""
        self.choice = self.choice.for_columns(features)
        if self.choice.ensemble is None:
            return None
        as_they_are = [unmodified_segment(self.predictor, self.rows, self.local, self.local.every_row)]
        own_values, _ = predict_segments(self.predictor, as_they_are, chunk_rows=self.chunk_rows, n_jobs=self.n_jobs)
        self.model_rows += own_values.size
        self.choice = self.choice.verified(self.predictor, self.rows, own_values)
        if self.choice.ensemble is None:
            return None
        ens, space = self.choice.ensemble, self.choice.space
        assert space is not None  # a walk was chosen
        numbers = ens.compared(space.rows(self.rows))
        own = Own(
            np.asarray(self.predictor.value(ens.finish(lookup_sums(ens, numbers, 0, numbers[:, :1])[:, 0, :]))), None
        )
        blocks = []
        for f in features:
            reps = self.codes[f][1]
            values = self.local.frame[f].to_numpy()[reps]  # the walk's space maps them (a pipeline's encoding)
            cells, _ = profile_pass(
                self.choice,
                self.predictor,
                self.rows,
                f,
                values,
                target=(None, None),
                own=own,
            )
            blocks.append(cells.reshape(self.n, reps.size).T.ravel())
        return np.concatenate(blocks) if blocks else np.empty(0)

    def _walked_pair(self, a, b, combo_reps: np.ndarray, mesh: tuple) -> np.ndarray | None:
        """A pair's pass (its distinct value pairs, then its grid; query-major, as the batched
        pass) from one walk per row and tree with both features free, or None when the walk
        is not used (not a tree model the engine reads, or not compiled)."""
        ens, space = self.choice.ensemble, self.choice.space
        if ens is None or space is None or not walk.COMPILED or self.choice.for_columns([a, b]).ensemble is None:
            return None
        frame = self.local.frame
        queries = np.vstack(
            [
                np.concatenate(
                    [
                        space.values(a, frame[a].to_numpy()[combo_reps]),
                        np.repeat(space.values(a, mesh[0]), len(mesh[1])),
                    ]
                ),
                np.concatenate(
                    [space.values(b, frame[b].to_numpy()[combo_reps]), np.tile(space.values(b, mesh[1]), len(mesh[0]))]
                ),
            ]
        )
        numbers = ens.compared(space.rows(self.rows))
        sums = compiled.pair_sums(ens, numbers, space.column(a), space.column(b), queries)
        cells = np.asarray(self.predictor.value(ens.finish(sums.reshape(-1, ens.n_outputs))), dtype=np.float64)
        return cells.reshape(self.n, queries.shape[1]).T.ravel()

    def pairs(self, chosen: list, grids: dict) -> tuple[pd.DataFrame, dict]:
        """H^2_jk and h_jk of each pair (one pass: its distinct value pairs, then its grid),
        strongest first, and each pair's 2-D partial dependence on the grid."""
        n = self.n
        for f in {f for pair in chosen for f in pair} - set(self.pd1):  # partners outside ``features``
            inverse, reps = self.codes[f]
            self.pd1[f] = self.run([_replaced(self.local, {f: reps}, n)]).reshape(reps.size, n).mean(axis=1)[inverse]
        rows, found = [], {}
        for a, b in chosen:
            combo, combo_reps = _codes(self.codes[a][0] * (self.codes[b][1].size) + self.codes[b][0])
            (ga, va), (gb, vb) = grids[a], grids[b]
            values = self._walked_pair(a, b, combo_reps, (va, vb))
            if values is None:
                values = self.run(
                    [_replaced(self.local, {a: combo_reps, b: combo_reps}, n), _mesh(self.local, a, va, b, vb, n)]
                )
            pd_ab = values[: combo_reps.size * n].reshape(combo_reps.size, n).mean(axis=1)[combo]
            surface = values[combo_reps.size * n :].reshape(len(ga) * len(gb), n).mean(axis=1)
            rows.append((a, b, *_statistic(_centred(pd_ab), _centred(self.pd1[a]) + _centred(self.pd1[b]), self.scale)))
            found[(a, b)] = (ga, gb, surface.reshape(len(ga), len(gb)))
        frame = pd.DataFrame(rows, columns=["feature_1", "feature_2", "h2", "h"])
        # strongest first: by H^2 among the pairs whose interaction matters (h at least 5 % of
        # the largest), then the others; a pure but negligible interaction (H^2 = 1) goes last
        material = frame["h"] >= MATERIAL * frame["h"].max() if len(frame) else frame["h"]
        frame = (
            frame.assign(_material=material)
            .sort_values(["_material", "h2", "h"], ascending=False, kind="stable")
            .drop(columns="_material")
            .reset_index(drop=True)
        )
        return frame, found


def _codes(values) -> tuple[np.ndarray, np.ndarray]:
    """Each row's distinct-value number (missing values are one value) and the first row
    holding each distinct value."""
    inverse, _ = pd.factorize(pd.Series(values), use_na_sentinel=False)
    return np.asarray(inverse), np.unique(inverse, return_index=True)[1]


def _replaced(local, sources: dict, n: int) -> Segment:
    """Rows (v, l) for v over the positions in each ``sources`` value (all the same length):
    row l of the sample with each column c := its value at row sources[c][v] (a cycle
    through the sample's rows)."""
    first = next(iter(sources.values()))

    def replace_of(a, b):
        t = np.arange(a, b)
        return {c: local.column_values(c, pos[t // n]) for c, pos in sources.items()}

    return cycle_segment(local, local.every_row, len(first) * n, replace_of)


def _mesh(local, a, values_a, b, values_b, n: int) -> Segment:
    """Rows (p, q, l): row l of the sample with a := values_a[p], b := values_b[q]."""
    na, nb = len(values_a), len(values_b)

    def replace_of(lo, hi):
        cell = np.arange(lo, hi) // n
        return {a: values_a[cell // nb], b: values_b[cell % nb]}

    return cycle_segment(local, local.every_row, na * nb * n, replace_of)


def _grid(column: pd.Series, size: int, design) -> tuple[np.ndarray, object]:
    """The pair heatmap's grid of a feature: its points (for people) and cast values."""
    grid = make_grid(column, size)
    return grid.values, design.cast(column.name, grid.values)


def _centred(values: np.ndarray) -> np.ndarray:
    return values - values.mean()


def _statistic(joint: np.ndarray, additive: np.ndarray, scale: float) -> tuple[float, float]:
    """H^2 and the unnormalised h. Both are 0 where the gap is rounding (h below 1e-9 of
    the predictions' largest centred value ``scale``: an additive model leaves 1e-16), and
    H^2 is 0 when the joint effect itself is (nothing to interact)."""
    gap = float(((joint - additive) ** 2).sum())
    total = float((joint**2).sum())
    h = float(np.sqrt(gap / joint.size))
    if h <= 1e-9 * scale:
        return 0.0, 0.0
    if np.sqrt(total / joint.size) <= 1e-9 * scale:
        return 0.0, h
    return gap / total, h


def _pairs(pairs, features: list, overall: pd.DataFrame, columns, top: int) -> list[tuple]:
    if pairs is None:
        strongest = set(overall["h"].sort_values(ascending=False, kind="stable").index[:top])
        keep = [f for f in features if f in strongest]
        return list(combinations(keep, 2))
    if isinstance(pairs, str):
        if pairs != "all":
            raise InputError(
                f"The 'pairs' parameter must be a list of (feature, feature), 'all' or None (got {pairs!r})."
            )
        return list(combinations(features, 2))
    chosen = []
    for pair in pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InputError(f"Each item of 'pairs' must be two features (got {pair!r}).")
        a, b = check_features(list(pair), columns, name="pairs")
        if a == b:
            raise InputError(f"A pair needs two different features (got {pair!r}).")
        if (a, b) not in chosen and (b, a) not in chosen:
            chosen.append((a, b))
    return chosen
