"""Shapley feature importance (SFIMP), Casalicchio, Molnar & Bischl (2018), Sec. 5.

The payout of a coalition S of players (features or groups of columns) is how much lower
the model's error is when only the features in S are known than when none is:

    v(S) = GE_{empty} - GE_S                       (minus Eq. 10: the v_PFI form, Sec. 5)

where GE_S is the error with every feature outside S marginalised by permuting it jointly
over the observations (Eq. 5/6; Algorithm 2, line 7):

    GE_S = 1/(n L) sum_l sum_i L(f(x_S^(i), x_C^(tau_l(i))), y_i),   l = 1..L observation permutations.

SFIMP of player j is its Shapley value in this game (Eq. 11). With this sign an important
feature has a positive value, and the values add up to ``total`` = v(P) = GE_empty - GE_P,
the drop in error the model achieves over knowing nothing (efficiency).

The same observation permutations tau_l serve every coalition (common random numbers), and
each coalition's error is computed once and cached, so efficiency holds exactly in both
modes: exact enumeration of all 2^p coalitions, and sampled feature orderings (Algorithm 2
made efficient: one ordering yields every player's marginal contribution from p + 1
coalitions, orderings come in antithetic pairs (an ordering and its reverse), and sampling
stops at a requested standard error or a budget of model rows).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from .ciu import with_instances
from .errors import InputError, ModelError
from .losses import Loss
from .prediction import Predictor, predict_pass, predict_positions
from .sampling import sample_rows
from .validation import (
    check_frame,
    check_int,
    check_kwargs,
    check_model,
    check_n_jobs,
    check_players,
    check_real,
    check_rng,
    check_target,
    make_predictor,
)

#: Most intervened rows evaluated per batch of coalitions (bounds memory to a few floats each).
BATCH_ROWS = 2_000_000
#: Most per-row coalition errors (coalitions x rows) kept for ``row_std_error``.
ROW_ERRORS_MAX = 20_000_000
#: Most feature orderings ``n_permutations`` may ask for.
MAX_ORDERINGS = 100_000


@dataclass(frozen=True, eq=False)
class ShapleyImportance:
    """SFIMP values of one model on one data set.

    Attributes
    ----------
    values : Series of SFIMP per player; positive = share of the error drop the player earns.
    std_error : Series, Monte-Carlo standard error of each value: the spread over the
        observation permutations tau_l (both modes; NaN with a single permutation) combined,
        in sampled mode, with the spread over sampled feature orderings.
    total : v(P) = GE_empty - GE_P; ``values.sum() == total``.
    model_error : GE_P, the model's error with all features (left number of Fig. 5a).
    baseline_error : GE_empty, the error with every feature marginalised.
    exact : whether all 2^p coalitions were enumerated.
    n_orderings : feature orderings sampled (0 in exact mode).
    n_rows : model rows evaluated.
    converged : whether every standard error is at most ``tol * |total|``.
    players : player name -> tuple of its columns.
    row_std_error : Series, the standard error the choice of rows adds: each row's own
        Shapley values (v is a mean over rows, so SFIMP is the mean of the rows' values, the
        permutations and orderings shared), their spread over the rows / sqrt(rows); None
        when the rows' coalition errors would not fit ``ROW_ERRORS_MAX``.
    rows : labels of the rows used; ``n_total``: the rows of X (``n_obs`` sampled from it).
    """

    values: pd.Series
    std_error: pd.Series
    total: float
    model_error: float
    baseline_error: float
    exact: bool
    n_orderings: int
    n_rows: int
    converged: bool
    players: Mapping[str, tuple]
    params: Mapping[str, Any] = field(default_factory=dict)
    row_std_error: pd.Series | None = None
    rows: pd.Index | None = None
    n_total: int | None = None

    @property
    def sampled(self) -> bool:
        """True when a sample of the rows was used (``n_obs``)."""
        return self.rows is not None and self.n_total is not None and len(self.rows) < self.n_total

    @property
    def proportions(self) -> pd.Series:
        """Share of the explainable performance per player (the percentages of Fig. 5a)."""
        return self.values / self.total

    @property
    def total_std_error(self) -> pd.Series:
        """Each value's standard error: the Monte-Carlo one (permutations, orderings) and, on
        a row sample, the sample's, combined as independent errors: sqrt(se^2 + row_se^2)."""
        if self.sampled and self.row_std_error is not None:
            return np.sqrt(self.std_error**2 + self.row_std_error.reindex(self.std_error.index) ** 2)
        return self.std_error

    def to_frame(self) -> pd.DataFrame:
        """One row per player: value, std_error, proportion, model_error."""
        frame = pd.DataFrame({"value": self.values, "std_error": self.std_error, "proportion": self.proportions})
        frame["model_error"] = self.model_error
        frame.index.name = "feature"
        return frame


def shapley_importance(
    model,
    X,
    y,
    features=None,
    *,
    loss=None,
    n_permutations=None,
    n_obs_permutations=5,
    random_state=0,
    n_jobs=1,
    output=None,
    n_obs=None,
    exact_max_players=12,
    tol=0.01,
    max_rows=20_000_000,
    chunk_rows=None,
    coalitions=None,
) -> ShapleyImportance:
    """Shapley feature importance (SFIMP) of Casalicchio et al. (2018), Eq. (10)-(11).

    Parameters
    ----------
    model, X, y, loss, output, chunk_rows :
        As in :func:`compute.feature_profile`; ``y`` is required.
    features : list or dict, optional
        The players. Default: every input column of the model. A list of columns (an item
        may itself be a list: a group varied jointly, named ``"a+b"``), or a dict
        ``{name: column or list of columns}``, e.g. the columns of a one-hot block or a
        correlated pair. Model inputs that belong to no player keep their observed values.
    n_permutations : int, optional
        Number of feature orderings to sample, at most 100000 (rounded up to an even
        number: antithetic pairs). Default: exact enumeration when there are at most
        ``exact_max_players`` players, otherwise orderings are sampled until every standard
        error is at most ``tol * |total|`` or ``max_rows`` model rows have been evaluated.
    n_obs_permutations : int, default 5
        Observation permutations tau_l estimating each coalition's error (m_obs of
        Algorithm 2), shared by all coalitions.
    random_state : int, Generator or None, default 0
        With the same seed, several models on the same data share the permutations.
    n_jobs : int, default 1
        Threads evaluating chunks of intervened rows.
    n_obs : int, optional
        Use a seeded sample of this many rows of X.
    exact_max_players, tol, max_rows :
        See ``n_permutations``.
    coalitions : list of :class:`ShapleyCoalitions`, optional
        Coalition errors computed apart (:func:`shapley_coalitions` with the same data,
        players, seed and permutations, e.g. batches of the exact game on other machines):
        they are not computed again, and the result is the call's own, bit for bit.

    Returns
    -------
    ShapleyImportance
    """
    setup = _setup_game(
        model=model,
        X=X,
        y=y,
        features=features,
        loss=loss,
        n_obs_permutations=n_obs_permutations,
        random_state=random_state,
        n_jobs=n_jobs,
        output=output,
        n_obs=n_obs,
        chunk_rows=chunk_rows,
    )
    game, players, rng, X = setup.game, setup.players, setup.rng, setup.X
    n_permutations = check_int(n_permutations, "n_permutations", low=1, high=MAX_ORDERINGS, none_ok=True)
    exact_max_players = check_int(exact_max_players, "exact_max_players", low=1, high=20)
    max_rows = check_int(max_rows, "max_rows", low=1)
    tol = check_real(tol, "tol", low=0.0, strict=True, allowed="a positive number")
    for part in coalitions or ():
        game.add(part)
    p = len(players)
    exact = n_permutations is None and p <= exact_max_players
    n_perm = game.donors.shape[0]
    # per-row errors of every coalition evaluated: 2^p of them, or at most max_rows / L rows'
    # worth (and (p + 1) per ordering asked for) when sampling
    n = game.rows.size
    sampled_cells = max_rows // n_perm if n_permutations is None else (n_permutations + 1) * (p + 1) * n
    game.keep_rows = ((1 << p) * n if exact else sampled_cells) <= ROW_ERRORS_MAX
    if exact:
        estimate = _exact_shapley(game, p)
        estimate = replace(estimate, converged=bool(np.all(estimate.std_error <= tol * abs(game.value(game.full)))))
    else:
        estimate = _sampled_shapley(game, p, rng, n_permutations=n_permutations, tol=tol, max_rows=max_rows)
    values, std_error, phi_rows = estimate.values, estimate.std_error, estimate.phi_rows
    n_orderings, converged = estimate.n_orderings, estimate.converged
    names = list(players)
    row_se = None
    if phi_rows is not None:
        spread = phi_rows.std(axis=1, ddof=1) if game.rows.size > 1 else np.full(p, np.nan)
        row_se = pd.Series(spread / np.sqrt(game.rows.size), index=names, name="row_std_error")
    return ShapleyImportance(
        values=pd.Series(values, index=names, name="sfimp"),
        std_error=pd.Series(std_error, index=names, name="std_error"),
        total=game.value(game.full),
        model_error=game.error(game.full),
        baseline_error=game.error(0),
        exact=exact,
        n_orderings=n_orderings,
        n_rows=game.n_rows,
        converged=converged,
        players=players,
        params={**setup.params, "random_state": random_state if isinstance(random_state, int) else None},
        row_std_error=row_se,
        rows=X.index[game.rows],
        n_total=len(X),
    )


@dataclass(frozen=True, eq=False)
class ShapleyCoalitions:
    """Coalition errors of a SFIMP game computed apart (:func:`shapley_coalitions`):
    ``errors[mask]`` per observation permutation, ``rows[mask]`` per row (mean over the
    permutations), ``n_rows`` the model rows they cost."""

    errors: Mapping[int, np.ndarray]
    rows: Mapping[int, np.ndarray]
    n_rows: int


def shapley_coalitions(
    model,
    X,
    y,
    masks,
    features=None,
    *,
    loss=None,
    n_obs_permutations=5,
    random_state=0,
    n_jobs=1,
    output=None,
    n_obs=None,
    chunk_rows=None,
) -> ShapleyCoalitions:
    """The errors of the coalitions ``masks`` (bit k set: player k known, players in the
    order of ``features``) of the game ``shapley_importance`` plays with the same arguments:
    a batch of the exact game computed on its own, for ``shapley_importance(coalitions=...)``
    to join (one job spread over several machines)."""
    setup = _setup_game(
        model=model,
        X=X,
        y=y,
        features=features,
        loss=loss,
        n_obs_permutations=n_obs_permutations,
        random_state=random_state,
        n_jobs=n_jobs,
        output=output,
        n_obs=n_obs,
        chunk_rows=chunk_rows,
    )
    game, players = setup.game, setup.players
    top = 1 << len(players)
    try:
        chosen = np.unique(np.asarray(masks).ravel())
        whole = chosen.size == 0 or np.issubdtype(chosen.dtype, np.integer)
    except (TypeError, ValueError):
        whole = False
    if not whole or (chosen.size and (chosen.min() < 0 or chosen.max() >= top)):
        raise InputError(f"The 'masks' must be coalitions of the {len(players)} players: whole numbers in [0, {top}).")
    game.keep_rows = top * game.rows.size <= ROW_ERRORS_MAX  # the whole exact call's rule
    own = game.n_rows
    chosen = chosen.astype(np.int64)
    game.evaluate(chosen)
    keys = [int(m) for m in chosen]
    return ShapleyCoalitions(
        errors={m: game._errors[m] for m in keys},
        rows={m: game._rows[m] for m in keys if m in game._rows} if game.keep_rows else {},
        n_rows=game.n_rows - own,
    )


@dataclass(frozen=True, eq=False)
class _Setup:
    """The game ``shapley_importance`` and ``shapley_coalitions`` share, its players, the
    generator after the rows and observation permutations were drawn, and the checked
    parameters the result reports."""

    game: _Game
    players: dict
    rng: np.random.Generator
    X: pd.DataFrame  # the checked data (an array becomes a frame)
    params: dict


@dataclass(frozen=True, eq=False)
class _Estimate:
    """Shapley values of the players with their standard errors; the per-row values when kept
    (``phi_rows``: players x rows); the orderings sampled (0: exact) and whether the
    sampling met its tolerance."""

    values: np.ndarray
    std_error: np.ndarray
    phi_rows: np.ndarray | None = None
    n_orderings: int = 0
    converged: bool = False


def _setup_game(
    *, model, X, y, features, loss, n_obs_permutations, random_state, n_jobs, output, n_obs, chunk_rows
) -> _Setup:
    """The checked inputs and the game (rows sampled, observation permutations drawn) that
    ``shapley_importance`` and ``shapley_coalitions`` share."""
    X = check_frame(X)
    predictor, Xm = make_predictor(model, X, output)
    players = check_players(features, list(Xm.columns))
    n_obs_permutations = check_int(n_obs_permutations, "n_obs_permutations", low=1, high=10_000)
    n_obs = check_int(n_obs, "n_obs", low=2, none_ok=True)
    chunk_rows = check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    n_jobs = check_n_jobs(n_jobs)
    rng = check_rng(random_state)
    loss_obj, y_enc = check_target(y, len(X), predictor, loss, "shapley_importance")

    rows = sample_rows(len(X), n_obs, rng)
    donors = np.stack([rows[rng.permutation(rows.size)] for _ in range(n_obs_permutations)])
    game = _Game(predictor, y_enc, loss_obj, rows, players, donors, chunk_rows=chunk_rows, n_jobs=n_jobs)
    params = {"loss": loss_obj.name, "n_obs_permutations": n_obs_permutations, "n_obs": n_obs}
    return _Setup(game=game, players=players, rng=rng, X=X, params=params)


def compare_shapley_importance(models: Mapping[str, object], X, y, **kwargs) -> pd.DataFrame:
    """SFIMP of several fitted models on the same data, as one tidy table.

    Every model is evaluated with the same ``random_state`` (default 0), hence the same
    observation permutations and orderings. Returns columns model, feature, value,
    std_error, proportion, model_error (one row per model and player).
    """
    if not isinstance(models, Mapping) or not models:
        raise InputError(
            f"The 'models' must be a non-empty dict {{name: fitted model}} (got "
            f"{type(models).__name__}{' (empty)' if isinstance(models, Mapping) else ''})."
        )
    check_kwargs(kwargs, shapley_importance, "compare_shapley_importance")
    for name, model in models.items():
        check_model(model, f"Model {name!r} in 'models'")
    frames = []
    for name, model in models.items():
        try:
            result = shapley_importance(model, X, y, **kwargs)
        except ModelError as exc:
            raise ModelError(f"Model {name!r} in 'models': {exc}") from exc
        frame = result.to_frame().reset_index()
        frame.insert(0, "model", name)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


# --- one prediction, explained additively ---------------------------------------------------
@dataclass(frozen=True, eq=False)
class ShapleyContributions:
    """Interventional Shapley values of one prediction, in the prediction's units.

    Attributes
    ----------
    values : Series, each player's contribution: positive pushes the prediction up.
    std_error : Series, Monte-Carlo standard error from the background sample (the spread
        of the per-background-row values) and, in sampled mode, the sampled orderings.
    prediction : f(x), the explained prediction (or output-class probability).
    base_value : the mean prediction over the background rows; ``base_value +
        values.sum() == prediction`` (efficiency, exact in both modes).
    exact, n_orderings, n_rows, players : as in :class:`ShapleyImportance`.
    n_background : background rows.
    output : the class whose probability is explained (None for a regressor).
    """

    values: pd.Series
    std_error: pd.Series
    prediction: float
    base_value: float
    exact: bool
    n_orderings: int
    n_background: int
    n_rows: int
    players: dict[str, tuple] = field(default_factory=dict)
    output: Any = None

    def to_frame(self) -> pd.DataFrame:
        """One row per player: contribution and std_error, largest absolute value first."""
        frame = pd.DataFrame({"contribution": self.values, "std_error": self.std_error})
        return frame.loc[self.values.abs().sort_values(ascending=False, kind="stable").index]


def shapley_contributions(
    model,
    X,
    instance,
    features=None,
    *,
    n_background=200,
    n_permutations=None,
    random_state=0,
    n_jobs=1,
    output=None,
    exact_max_players=12,
    tol=0.01,
    max_rows=5_000_000,
    chunk_rows=None,
) -> ShapleyContributions:
    """Additive explanation of one prediction: interventional Shapley values.

    The game of a coalition S of players is the expected prediction when the features in S
    take the instance's values and the others a background row's (the interventional or
    "marginal" value function of SHAP, Lundberg & Lee 2017; Janzing et al. 2020):

        v(S) = 1/m sum_b f(x_S, b_C) - 1/m sum_b f(b),   b over m background rows of X.

    It is evaluated with the coalition engine of SFIMP (Casalicchio et al. 2018, Sec. 5,
    Algorithm 2): exact enumeration of all 2^p coalitions up to ``exact_max_players``
    players, otherwise antithetic pairs of sampled orderings until every standard error is
    at most ``tol`` times |f(x) - base value| (or ``max_rows`` model rows). Each background
    row plays the part of an observation permutation, so the standard error includes the
    background sampling. For a linear model f(x) = b0 + sum_j b_j x_j the values are
    b_j (x_j - mean_b b_j), exactly.

    Parameters
    ----------
    model, X, features, output, n_jobs, chunk_rows, exact_max_players, tol :
        As in :func:`shapley_importance`; players are raw columns (or groups of them), so a
        pipeline's one-hot block is one player.
    instance : row label of X, or a one-row DataFrame (e.g. an edited row: what-if)
    n_background : int, default 200
        Background rows: a seeded sample of X (all rows when X has fewer).
    n_permutations : int, optional
        Sample this many orderings instead of the default rule.
    random_state : int, Generator or None, default 0

    Returns
    -------
    ShapleyContributions
    """

    X = check_frame(X)
    predictor, Xm = make_predictor(model, X, output)
    players = check_players(features, list(Xm.columns))
    n_background = check_int(n_background, "n_background", low=1)
    n_permutations = check_int(n_permutations, "n_permutations", low=1, high=MAX_ORDERINGS, none_ok=True)
    exact_max_players = check_int(exact_max_players, "exact_max_players", low=1, high=20)
    max_rows = check_int(max_rows, "max_rows", low=1)
    chunk_rows = check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    tol = check_real(tol, "tol", low=0.0, strict=True, allowed="a positive number")
    n_jobs = check_n_jobs(n_jobs)
    rng = check_rng(random_state)
    background = sample_rows(len(Xm), n_background, rng)
    predictor, position = with_instances(predictor, Xm, [instance], "'instance'")
    game = _Game(predictor, None, None, position, players, background[:, None], chunk_rows=chunk_rows, n_jobs=n_jobs)
    p = len(players)
    exact = n_permutations is None and p <= exact_max_players
    if exact:
        estimate = _exact_shapley(game, p)
    else:
        estimate = _sampled_shapley(game, p, rng, n_permutations=n_permutations, tol=tol, max_rows=max_rows)
    values, std_error, n_orderings = estimate.values, estimate.std_error, estimate.n_orderings
    game.evaluate([0])
    names = list(players)
    return ShapleyContributions(
        values=pd.Series(values, index=names, name="contribution"),
        std_error=pd.Series(std_error, index=names, name="std_error"),
        prediction=game.error(game.full),
        base_value=game.error(0),
        exact=exact,
        n_orderings=n_orderings,
        n_background=int(background.size),
        n_rows=game.n_rows,
        players=players,
        output=predictor.output,
    )


# --- the coalition game ----------------------------------------------------------------
class _Game:
    """Coalition errors GE_S, each computed once, kept per observation permutation.

    ``_errors[mask]`` is an array of shape (L,): the mean loss of coalition ``mask`` under
    each observation permutation tau_l. Their mean is GE_S (Eq. 6); their spread gives the
    Monte-Carlo error that the choice of permutations adds.
    """

    def __init__(
        self,
        predictor: Predictor,
        y_enc,
        loss: Loss | None,
        rows: np.ndarray,
        players: Mapping[str, tuple],
        donors: np.ndarray,
        *,
        chunk_rows,
        n_jobs,
    ) -> None:
        self.predictor, self.y_enc, self.loss = predictor, y_enc, loss
        self.rows = rows
        self.donors = donors  # (L, n): the row each own row takes marginalised columns from
        n_perm = donors.shape[0]
        design = predictor.design
        self.player_columns = np.zeros((len(players), len(design.columns)), dtype=bool)
        for k, group in enumerate(players.values()):
            self.player_columns[k, [design.position(c) for c in group]] = True
        self.full = (1 << len(players)) - 1
        self.chunk_rows, self.n_jobs = chunk_rows, n_jobs
        self.n_rows = 0
        self._errors: dict[int, np.ndarray] = {}
        self.keep_rows = False  # keep each coalition's per-row error (mean over permutations)
        self._rows: dict[int, np.ndarray] = {}
        # GE_P: nothing is marginalised, so the permutations are irrelevant: n rows suffice.
        values, losses = predict_positions(
            predictor, rows, y_enc=y_enc, loss=loss, chunk_rows=chunk_rows, n_jobs=n_jobs
        )
        self.n_rows += rows.size
        payout = values if loss is None else losses
        assert payout is not None  # a loss game gets losses
        self._errors[self.full] = np.full(n_perm, payout.mean())
        self._rows[self.full] = payout
        if design.numeric:  # own and donor rows of every (l, i), gathered once per game
            numbers = design.numbers()
            self._own = numbers[np.tile(rows, n_perm)]
            self._donor = numbers[self.donors.ravel()]

    def error(self, mask: int) -> float:
        """GE_S (a loss game) or the mean prediction f_S (a prediction game)."""
        return float(self._errors[mask].mean())

    def values(self, mask: int) -> np.ndarray:
        """v(S) under each observation permutation, shape (L,): GE_empty - GE_S for a loss
        game (SFIMP), f_S - f_empty for a prediction game (``loss`` None)."""
        if self.loss is None:
            return self._errors[mask] - self._errors[0]
        return self._errors[0] - self._errors[mask]

    def value(self, mask: int) -> float:
        return float(self.values(mask).mean())

    def evaluate(self, masks) -> None:
        """Compute GE_S for every coalition in ``masks`` not yet known, in large batches."""
        todo = np.array(sorted({int(m) for m in masks} - self._errors.keys()), dtype=np.int64)
        if todo.size == 0:
            return
        n_perm, n = self.donors.shape
        per_coalition = n_perm * n
        batch = max(1, BATCH_ROWS // per_coalition)
        bits = 1 << np.arange(self.player_columns.shape[0], dtype=np.int64)
        for start in range(0, todo.size, batch):
            masks_b = todo[start : start + batch]
            in_s = (masks_b[:, None] & bits[None, :]) != 0  # (batch, players)
            # a column is marginalised when it belongs to a player outside S
            from_donor = (~in_s).astype(np.int8) @ self.player_columns.astype(np.int8) > 0
            make_block = self._block_maker(from_donor, per_coalition, n)
            values, losses = self._pass(
                masks_b.size * per_coalition, make_block, lambda a, b: np.arange(a, b) % per_coalition % n
            )
            payout = values if self.loss is None else losses
            assert payout is not None  # a loss game gets losses
            per = payout.reshape(masks_b.size, n_perm, n)
            self._errors.update(zip(masks_b.tolist(), per.mean(axis=2)))
            if self.keep_rows:
                self._rows.update(zip(masks_b.tolist(), per.mean(axis=1)))

    def add(self, part: ShapleyCoalitions) -> None:
        """Coalition errors computed apart (``shapley_coalitions`` of the same game)."""
        if not isinstance(part, ShapleyCoalitions):
            raise InputError(f"Each of 'coalitions' must be a ShapleyCoalitions (got {type(part).__name__}).")
        n_perm, n = self.donors.shape
        for mask, errors in part.errors.items():
            rows = part.rows.get(mask)
            if np.shape(errors) != (n_perm,) or (rows is not None and np.shape(rows) != (n,)):
                raise InputError(
                    "The 'coalitions' were computed on other rows or permutations; compute them with the "
                    "same data, players, n_obs, n_obs_permutations and random_state."
                )
            self._errors[int(mask)] = np.asarray(errors)
            if rows is not None:  # not kept when too many (ROW_ERRORS_MAX): no row_std_error then
                self._rows[int(mask)] = np.asarray(rows)
        self.n_rows += int(part.n_rows)

    def row_errors(self, masks) -> np.ndarray | None:
        """Per-row errors of ``masks`` (rows x coalitions stacked), None if not all kept."""
        if not all(int(m) in self._rows for m in masks):
            return None
        return np.stack([self._rows[int(m)] for m in masks])

    def _block_maker(self, from_donor: np.ndarray, per_coalition: int, n: int):
        design = self.predictor.design
        if design.numeric:

            def make_block(a, b):
                # whole coalitions by one broadcast select, then cut to rows a:b
                c0, c1 = a // per_coalition, -(-b // per_coalition)
                rows = np.where(from_donor[c0:c1, None, :], self._donor[None], self._own[None])
                rows = rows.reshape(-1, rows.shape[-1])[a - c0 * per_coalition : b - c0 * per_coalition]
                return design.wrap(rows)
        else:

            def make_block(a, b):
                flat = np.arange(a, b)
                within = flat % per_coalition
                own = self.rows[within % n]
                donor = self.donors[within // n, within % n]
                return design.mixed_block(own, donor, from_donor[flat // per_coalition])

        return make_block

    def _pass(self, n_total, make_block, obs_pos):
        """``obs_pos(a, b)``: positions in ``self.rows`` of the observations behind rows a:b."""
        self.n_rows += n_total
        return predict_pass(
            self.predictor,
            n_total,
            make_block,
            y_enc=self.y_enc,
            obs_of=None if self.loss is None else (lambda a, b: self.rows[obs_pos(a, b)]),
            loss=self.loss,
            chunk_rows=self.chunk_rows,
            n_jobs=self.n_jobs,
        )


def _permutation_se(phi_l: np.ndarray) -> np.ndarray:
    """Standard error from the spread of per-permutation values, shape (p, L) -> (p,)."""
    n_perm = phi_l.shape[1]
    if n_perm < 2:
        return np.full(phi_l.shape[0], np.nan)  # one permutation gives no spread to estimate from
    return phi_l.std(axis=1, ddof=1) / np.sqrt(n_perm)


def _exact_shapley(game: _Game, p: int) -> _Estimate:
    """Eq. (11) by enumeration: phi_j = sum_{S not containing j} |S|!(p-|S|-1)!/p! (v(S+j) - v(S)).

    Computed per observation permutation (the Shapley value is linear in v), so the values
    are the mean and the standard error comes from their spread over permutations; and per
    row (each row's payouts from its own errors), when the game keeps them: (p, rows).
    """
    masks = np.arange(1 << p, dtype=np.int64)
    game.evaluate(masks)
    v = np.stack([game.values(int(m)) for m in masks])  # (2^p, L)
    size = np.bitwise_count(masks).astype(np.int64)
    weight = np.array([math.factorial(s) * math.factorial(p - s - 1) for s in range(p)]) / math.factorial(p)
    phi_l = np.empty((p, v.shape[1]))
    for j in range(p):
        without = masks[(masks >> j) & 1 == 0]
        phi_l[j] = weight[size[without]] @ (v[without | (1 << j)] - v[without])
    phi_rows = None
    errors = game.row_errors(masks) if game.keep_rows else None  # (2^p, rows)
    if errors is not None:
        sign = -1.0 if game.loss is not None else 1.0  # v(S) = GE_empty - GE_S, or f_S - f_empty
        phi_rows = np.empty((p, errors.shape[1]))
        for j in range(p):
            without = masks[(masks >> j) & 1 == 0]
            phi_rows[j] = sign * (weight[size[without]] @ (errors[without | (1 << j)] - errors[without]))
    return _Estimate(values=phi_l.mean(axis=1), std_error=_permutation_se(phi_l), phi_rows=phi_rows)


def _sampled_shapley(game: _Game, p: int, rng, *, n_permutations, tol, max_rows) -> _Estimate:
    """Algorithm 2 of Casalicchio et al. (2018) over antithetic pairs of feature orderings.

    Standard error: sqrt(se_orderings^2 + se_permutations^2), the first from the spread
    over antithetic pairs (the i.i.d. units of ordering sampling), the second from the
    spread of the per-observation-permutation values. More orderings shrink only the
    first, so sampling stops when it reaches ``tol * |total|``; ``converged`` then says
    whether the whole error did (if not, raise ``n_obs_permutations``).
    """
    game.evaluate([0])
    total = abs(game.value(game.full))
    target_pairs = None if n_permutations is None else -(-n_permutations // 2)
    contributions: list[np.ndarray] = []  # one (2, p, L) array per antithetic pair
    sign = -1.0 if game.loss is not None else 1.0
    phi_rows: np.ndarray | None = np.zeros((p, game.rows.size)) if game.keep_rows else None
    batch_pairs = 8
    while True:
        if target_pairs is None:  # no batch may overshoot the row budget by much
            rows_per_pair = 2 * max(p - 1, 1) * game.donors.size
            n_new = min(batch_pairs, max(1, (max_rows - game.n_rows) // rows_per_pair))
        else:
            n_new = min(batch_pairs, target_pairs - len(contributions))
        orders = np.stack([rng.permutation(p) for _ in range(n_new)])
        orders = np.stack([orders, orders[:, ::-1]], axis=1).reshape(2 * n_new, p)
        prefix = np.zeros((orders.shape[0], p + 1), dtype=np.int64)
        prefix[:, 1:] = np.cumsum(np.left_shift(1, orders.astype(np.int64)), axis=1)
        game.evaluate(prefix.ravel())
        v = np.stack([np.stack([game.values(int(m)) for m in row]) for row in prefix])  # (orders, p+1, L)
        contrib = np.empty((orders.shape[0], p, v.shape[2]))
        np.put_along_axis(contrib, orders[:, :, None], np.diff(v, axis=1), axis=1)
        contributions.extend(contrib.reshape(n_new, 2, p, v.shape[2]))
        if phi_rows is not None:  # each row's marginal contributions, in the order of the orderings
            for order, masks in zip(orders, prefix):
                errors = game.row_errors(masks)
                if errors is None:
                    phi_rows = None
                    break
                phi_rows[order] += sign * np.diff(errors, axis=0)
        stacked = np.stack(contributions)  # (pairs, 2, p, L)
        pairs = stacked.mean(axis=(1, 3))
        n_pairs = len(pairs)
        se_order = pairs.std(axis=0, ddof=1) / np.sqrt(n_pairs) if n_pairs > 1 else np.full(p, np.inf)
        if target_pairs is not None:
            if n_pairs >= target_pairs:
                break
        elif n_pairs >= 4 and np.all(se_order <= tol * total):
            break
        elif game.n_rows >= max_rows:
            break
        batch_pairs = min(2 * batch_pairs, 256)
    if n_pairs == 1:
        se_order = np.full(p, np.nan)  # one pair gives no spread to estimate from
    se = np.sqrt(se_order**2 + _permutation_se(stacked.mean(axis=(0, 1))) ** 2)
    converged = bool(np.all(se <= tol * total))
    if phi_rows is not None:
        phi_rows = phi_rows / (2 * n_pairs)
    return _Estimate(
        values=pairs.mean(axis=0), std_error=se, phi_rows=phi_rows, n_orderings=2 * n_pairs, converged=converged
    )
