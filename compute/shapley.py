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

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from .ciu import with_instances
from .errors import InputError, ModelError
from .sampling import sample_rows
from .shapley_game import ROW_ERRORS_MAX, ShapleyCoalitions, _exact_shapley, _Game, _sampled_shapley
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
