"""``permutation_importance``: PFI with repetitions, one batched pass per feature."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .errors import InputError
from .prediction import Segment, predict_segments, unmodified_segment
from .results import PermutationImportance
from .validation import (
    check_choice,
    check_features,
    check_frame,
    check_int,
    check_n_jobs,
    check_rng,
    check_target,
    make_predictor,
)

KINDS = ("difference", "ratio")
#: Most intervened rows per batch of features (bounds the per-row loss buffer).
BATCH_ROWS = 4_000_000


def permutation_importance(
    model,
    X,
    y,
    *,
    loss=None,
    n_repeats=10,
    kind="difference",
    features=None,
    output=None,
    random_state=0,
    n_jobs=1,
    chunk_rows=None,
) -> PermutationImportance:
    """Permutation feature importance with repetitions.

    Casalicchio, Molnar & Bischl (2018), Eq. (4) estimated by Eq. (8): for each repeat r a
    random permutation tau_r of the rows is applied to feature S, and

        difference: PFI_r = (1/n) sum_i L(f(x_S^(tau_r(i)), x_C^(i)), y_i) - GE
        ratio:      PFI_r = (1/n) sum_i L(f(x_S^(tau_r(i)), x_C^(i)), y_i) / GE

    with GE = (1/n) sum_i L(f(x^(i)), y_i), Eq. (1). A positive difference (a ratio above
    one) means the model relies on the feature. The unmodified rows and all features x
    repeats form one stream of intervened rows, evaluated in as few model calls as the
    chunk budget allows; ``n_jobs`` threads share the chunks.

    Parameters
    ----------
    model, X, y, loss, output, chunk_rows :
        As in :func:`compute.feature_profile` (``y`` is required here).
    n_repeats : int, default 10
        Number of permutations per feature.
    kind : {"difference", "ratio"}
    features : column label or list of column labels, optional
        Default: every input of the model.
    random_state : int, Generator or None, default 0
        Results do not depend on ``n_jobs`` or ``chunk_rows`` for a given seed.
    n_jobs : int, default 1
        Threads evaluating chunks in parallel.

    Returns
    -------
    :class:`PermutationImportance`: ``repeats`` (features x ``repeat_1`` ...
    ``repeat_<n_repeats>``), ``importance`` (mean over repeats), ``std`` (``ddof=0`` as in
    scikit-learn), ``model_error`` (GE), ``loss``, ``kind``, ``n_rows``; ``to_frame()``
    gives importance, std and the repeats as one table.
    """
    X = check_frame(X)
    predictor, Xm = make_predictor(model, X, output)
    features = check_features(features, Xm.columns)
    n_repeats = check_int(n_repeats, "n_repeats", low=1, high=100_000)
    kind = check_choice(kind, "kind", KINDS)
    chunk_rows = check_int(chunk_rows, "chunk_rows", low=1, none_ok=True)
    n_jobs = check_n_jobs(n_jobs)
    rng = check_rng(random_state)
    loss_obj, y_enc = check_target(y, len(X), predictor, loss, "permutation_importance")

    design = predictor.design
    n = len(X)
    rows = np.arange(n)
    seeds = np.random.SeedSequence(rng.integers(2**63)).spawn(len(features))

    def permuted(feature, seed) -> Segment:
        """All repeats of one feature: row r*n + i is observation i with the feature's
        value taken from observation donors[r*n + i] (permutation tau_r)."""
        perm_rng = np.random.default_rng(seed)
        donors = np.concatenate([perm_rng.permutation(n) for _ in range(n_repeats)])
        return Segment(
            n * n_repeats,
            lambda a, b: design.block(np.arange(a, b) % n, {feature: design.column_values(feature, donors[a:b])}),
            lambda a, b: np.arange(a, b) % n,
        )

    # One stream: the unmodified rows, then every feature x repeat, cut into batches of
    # whole features (at most BATCH_ROWS rows, so the loss buffer stays bounded). Threads
    # (n_jobs) share the chunks: a few large model calls replace one or more per feature.
    per_feature = n * n_repeats
    batch = max(1, BATCH_ROWS // per_feature)
    segments = [unmodified_segment(predictor, rows)] + [permuted(f, s) for f, s in zip(features, seeds)]
    errors = np.empty((len(features), n_repeats))  # permuted errors
    model_error: float | None = None
    for start in range(0, len(features), batch):
        group = segments[1 + start : 1 + start + batch]
        head = [segments[0]] if model_error is None else []
        _, losses = predict_segments(
            predictor, head + group, y_enc=y_enc, loss=loss_obj, chunk_rows=chunk_rows, n_jobs=n_jobs
        )
        assert losses is not None  # a loss was given, so the pass returns losses
        if head:
            model_error, losses = float(losses[:n].mean()), losses[n:]
        errors[start : start + len(group)] = losses.reshape(len(group), n_repeats, n).mean(axis=2)
    assert model_error is not None  # the first batch always carries the unmodified rows
    if kind == "difference":
        values = errors - model_error
    elif model_error <= 1e-12 * max(float(errors.max()), 1e-300):
        raise InputError(
            f"The ratio form of PFI is undefined: the model's error on this data is "
            f"{model_error:.3g}, essentially 0. Use kind='difference'."
        )
    else:
        values = errors / model_error
    repeats = pd.DataFrame(
        values, index=pd.Index(features, name="feature"), columns=[f"repeat_{r + 1}" for r in range(n_repeats)]
    )
    return PermutationImportance(repeats=repeats, model_error=model_error, loss=loss_obj.name, kind=kind, n_rows=n)
