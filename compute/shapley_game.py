"""The coalition game of Shapley feature importance and its estimators (SFIMP), Casalicchio,
Molnar & Bischl (2018), Sec. 5: coalition errors GE_S (Eq. 5/6, Algorithm 2 line 7) computed
once per coalition, and the Shapley values (Eq. 11) by exact enumeration or by sampled,
antithetic feature orderings. ``compute.shapley`` builds the game and reports its values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .losses import Loss
from .prediction import Predictor, predict_pass, predict_positions

#: Most intervened rows evaluated per batch of coalitions (bounds memory to a few floats each).
BATCH_ROWS = 2_000_000
#: Most per-row coalition errors (coalitions x rows) kept for ``row_std_error``.
ROW_ERRORS_MAX = 20_000_000


@dataclass(frozen=True, eq=False)
class ShapleyCoalitions:
    """Coalition errors of a SFIMP game computed apart (:func:`shapley_coalitions`):
    ``errors[mask]`` per observation permutation, ``rows[mask]`` per row (mean over the
    permutations), ``n_rows`` the model rows they cost."""

    errors: Mapping[int, np.ndarray]
    rows: Mapping[int, np.ndarray]
    n_rows: int


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
            # from those rows alone (take_numbers): a row's contributions on millions of rows
            # would otherwise copy all of them for its 100 background rows (6 s at 2,000,000 x 100)
            self._own = design.take_numbers(np.tile(rows, n_perm))
            self._donor = design.take_numbers(self.donors.ravel())

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
