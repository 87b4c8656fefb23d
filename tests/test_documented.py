"""Documented behaviour that no other test held: each test here fails on a plausible wrong
implementation named in its docstring."""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.testing import assert_allclose
from sklearn.linear_model import LogisticRegression

import compute
from compute.effects import _weighted_sd


def test_pfi_replays_its_own_seeding_exactly(gbm, reg_data):
    """Every repeat of permutation_importance equals the loss after the permutation its
    documented seeding draws (SeedSequence(rng.integers(2**63)).spawn(n_features), one
    generator per feature, n_repeats permutations in turn), to 1e-12. Catches an
    off-by-one repeat, a shared generator across features, or a permutation applied to
    the wrong rows."""
    X, y = reg_data
    features = ["x1", "x2"]
    table = compute.permutation_importance(gbm, X, y, n_repeats=4, random_state=11, features=features)
    base = np.mean((gbm.predict(X) - np.asarray(y)) ** 2)
    rng = np.random.default_rng(11)
    seeds = np.random.SeedSequence(rng.integers(2**63)).spawn(len(features))
    for feature, seed in zip(features, seeds):
        perm_rng = np.random.default_rng(seed)
        for r in range(4):
            Xp = X.copy()
            Xp[feature] = X[feature].to_numpy()[perm_rng.permutation(len(X))]
            expected = np.mean((gbm.predict(Xp) - np.asarray(y)) ** 2) - base
            assert_allclose(table.repeats.loc[feature, f"repeat_{r + 1}"], expected, rtol=1e-12, atol=1e-12)


def test_centered_ice_is_zero_at_the_first_grid_point(gbm, reg_data):
    """Centred ICE subtracts each curve's value at the first grid point (not the mean, not
    the PD): column 0 is exactly 0 and the rest keep the curve's differences."""
    X, y = reg_data
    prof = compute.feature_profile(gbm, X, y, "x1", grid=20)
    assert np.all(prof.centered_ice[:, 0] == 0.0)
    assert_allclose(prof.centered_ice, prof.ice - prof.ice[:, :1], rtol=0, atol=0)
    assert np.abs(prof.centered_ice[:, 1:]).max() > 0


def test_weighted_sd_with_repeated_values_is_the_population_sd():
    """Frequency weights on a grid of distinct values give the population sd of the data
    with its repeats (ddof=0), not the sd of the distinct values."""
    data = np.array([1.0, 1.0, 1.0, 2.0, 5.0, 5.0])
    values, counts = np.unique(data, return_counts=True)
    assert_allclose(_weighted_sd(values, counts / counts.sum()), data.std(ddof=0), rtol=1e-14)
    assert abs(_weighted_sd(values, counts / counts.sum()) - values.std()) > 0.1


def test_classifier_output_defaults_to_the_last_class():
    """With output omitted, curves show the probability of the last class in classes_
    (README: 'default the last class'), not the first, not the predicted label."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=120), "b": rng.normal(size=120)})
    y = np.array(["low", "mid", "high"])[(X["a"] > -0.4).astype(int) + (X["a"] > 0.4).astype(int)]
    model = LogisticRegression(max_iter=500).fit(X, y)
    prof = compute.feature_profile(model, X, y, "b", grid=5)
    assert_allclose(prof.base_pred, model.predict_proba(X)[:, -1], rtol=1e-12)
    assert prof.output == model.classes_[-1]
    explicit = compute.feature_profile(model, X, y, "b", grid=5, output=model.classes_[0])
    assert_allclose(explicit.base_pred, model.predict_proba(X)[:, 0], rtol=1e-12)
