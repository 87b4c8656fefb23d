"""permutation_importance: expectations, invariances and agreement with the profile."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.linear_model import LinearRegression

import compute
from compute import feature_profile, permutation_importance
from compute.importance import permutation_block


def test_mean_over_many_repeats_approaches_eq7(ols, reg_data):
    """Eq. (8) is an unbiased Monte-Carlo estimate of Eq. (7): with 400 repeats the mean
    lies within 4 standard errors of the exact observed-grid PFI."""
    X, y = reg_data
    table = permutation_importance(ols, X, y, n_repeats=400, random_state=1)
    for col in X.columns:
        exact = feature_profile(ols, X, y, col).importance
        se = table.std[col] / np.sqrt(400)
        assert abs(table.importance[col] - exact) < 4 * se + 1e-12, col


def test_table_layout(ols, reg_data):
    """One row per feature: importance, std and one column per repeat; attrs carry GE."""
    X, y = reg_data
    result = permutation_importance(ols, X, y, n_repeats=3)
    assert isinstance(result, compute.PermutationImportance) and result.n_repeats == 3
    assert result.n_rows == len(X) and result.loss == "squared_error" and result.kind == "difference"
    table = result.to_frame()
    assert list(table.index) == ["x1", "x2", "x3"]
    assert list(table.columns) == ["importance", "std", "repeat_1", "repeat_2", "repeat_3"]
    reps = table[["repeat_1", "repeat_2", "repeat_3"]].to_numpy()
    assert_allclose(table.importance, reps.mean(axis=1))
    assert_allclose(table["std"], reps.std(axis=1))
    assert result.model_error == pytest.approx(np.mean((ols.predict(X) - y) ** 2))


def test_ratio_is_difference_over_error_plus_one(gbm, reg_data):
    """Eq. (4)'s ratio form equals 1 + difference / GE for the same permutations."""
    X, y = reg_data
    diff = permutation_importance(gbm, X, y, n_repeats=4, random_state=2)
    ratio = permutation_importance(gbm, X, y, n_repeats=4, random_state=2, kind="ratio")
    assert_allclose(ratio.importance, 1 + diff.importance / diff.model_error, rtol=1e-12)


def test_repeat_equals_manual_permutation(gbm, reg_data):
    """Each repeat is the error after permuting one column, minus the model's error: replayed
    by hand from the documented seed protocol (the call's generator draws one entropy; item k
    permutes with ``default_rng(SeedSequence(entropy, spawn_key=(k,)))``, one permutation of
    the rows per repeat), every repeat equal to 1e-12."""
    X, y = reg_data
    table = permutation_importance(gbm, X, y, n_repeats=50, random_state=3, features=["x2", "x1"])
    base = np.mean((gbm.predict(X) - y) ** 2)
    entropy = int(np.random.default_rng(3).integers(2**63))
    for k, feature in enumerate(["x2", "x1"]):
        perm_rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(k,)))
        manual = []
        for _ in range(50):
            Xp = X.copy()
            Xp[feature] = X[feature].to_numpy()[perm_rng.permutation(len(X))]
            manual.append(np.mean((gbm.predict(Xp) - y) ** 2) - base)
        assert_allclose(table.repeats.loc[feature].to_numpy(float), manual, rtol=1e-12, atol=1e-12)
    assert_allclose(table.model_error, base, rtol=1e-12)


def test_n_jobs_and_chunks_do_not_change_results(gbm, reg_data):
    """For one random_state, n_jobs=2 and tiny chunks reproduce the serial result."""
    X, y = reg_data
    a = permutation_importance(gbm, X, y, n_repeats=5, random_state=7)
    b = permutation_importance(gbm, X, y, n_repeats=5, random_state=7, n_jobs=2, chunk_rows=23)
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
    assert a.model_error == b.model_error


@pytest.mark.parametrize("chunk_rows", [None, 7, 299, 1000])
def test_each_repeat_on_a_row_sample_equals_the_model_on_its_permuted_rows(reg_data, chunk_rows):
    """On a sample of rows (n_obs) and chunks that cut across features and repeats (one
    gather per chunk from the sample's own design), each repeat's PFI is the model's loss on
    the sample with the feature's values taken from its stored donors, minus its loss on the
    sample, written out row by row with the model (exact to rounding)."""
    X, y = reg_data
    model = LinearRegression().fit(X.assign(x1=X.x1**2), y)
    res = permutation_block(model, X, y, n_obs=150, n_repeats=3, random_state=5, keep_pairs=True, chunk_rows=chunk_rows)
    at = X.index.get_indexer(res.rows)
    sample, target = X.iloc[at], np.asarray(y)[at]
    base = np.mean((model.predict(sample) - target) ** 2)
    assert res.model_error == pytest.approx(base, rel=1e-12)
    for k, feature in enumerate(res.repeats.index):
        for r in range(3):
            permuted = sample.copy()
            permuted[feature] = sample[feature].to_numpy()[res.pairs.donors[k, r]]
            expected = np.mean((model.predict(permuted) - target) ** 2) - base
            assert res.repeats.loc[feature].iloc[r] == pytest.approx(expected, rel=1e-10, abs=1e-12)


def test_ignored_feature_scores_zero_every_repeat(reg_data):
    """A feature the model ignores has zero importance in every repeat."""
    X, y = reg_data
    model = LinearRegression().fit(X.assign(x3=0.0), y)
    table = permutation_importance(model, X, y, n_repeats=5)
    assert_allclose(table.to_frame().loc["x3"].to_numpy(), 0.0, atol=1e-12)


def test_classifier_zero_one(forest_clf, clf_data):
    """Classification with zero_one works on a mixed-type pipeline; all rows finite."""
    X, y = clf_data
    table = permutation_importance(forest_clf, X, y, loss="zero_one", n_repeats=3)
    assert np.isfinite(table.to_frame().to_numpy()).all()
    assert table.model_error == pytest.approx(np.mean(forest_clf.predict(X) != y))


def test_standard_error_and_relative_error_ignore_features_that_do_not_matter():
    """The 'more repetitions' hint looks at the features that matter: a near-zero feature's
    huge relative spread (2311 % on the diabetes demo) must not trigger it."""
    repeats = pd.DataFrame(
        {"repeat_1": [10.0, 0.001, 2.0], "repeat_2": [11.0, -0.002, 2.2], "repeat_3": [9.0, 0.003, 1.8]},
        index=["big", "noise", "mid"],
    )
    res = compute.PermutationImportance(repeats=repeats, model_error=1.0, loss="squared_error")
    assert_allclose(res.std_error, repeats.std(axis=1, ddof=1) / np.sqrt(3), rtol=1e-12)
    expected = max(res.std_error["big"] / 10.0, res.std_error["mid"] / 2.0)
    assert res.relative_error() == pytest.approx(expected)
    assert res.relative_error(min_share=0.0) > 1.0  # counting the noise feature blows it up


def test_a_row_sample_equals_pfi_on_that_sample_with_the_same_seed(gbm, reg_data):
    """Issue 12: permutation_importance(n_obs=k) is PFI on a seeded sample of k rows: with
    the same random_state it equals the call on X.loc[result.rows] bit for bit."""
    X, y = reg_data
    y = pd.Series(y, index=X.index)
    sampled = permutation_importance(gbm, X, y, n_obs=25, n_repeats=4, random_state=7)
    assert sampled.sampled and sampled.n_rows == 25 and sampled.n_total == len(X) == 60
    assert len(set(sampled.rows)) == 25 and set(sampled.rows) <= set(X.index)
    direct = permutation_importance(gbm, X.loc[sampled.rows], y.loc[sampled.rows], n_repeats=4, random_state=7)
    assert_allclose(sampled.repeats.to_numpy(), direct.repeats.to_numpy(), rtol=0, atol=0)
    assert sampled.model_error == direct.model_error
    assert_allclose(sampled.row_std_error, direct.row_std_error, rtol=0, atol=0)
    # all rows: no sample, the same as before
    full = permutation_importance(gbm, X, y, n_repeats=4, random_state=7)
    assert not full.sampled and full.n_rows == len(X) and list(full.rows) == list(X.index)
    assert_allclose(full.repeats, permutation_importance(gbm, X, y, n_obs=len(X), n_repeats=4, random_state=7).repeats)


def test_row_standard_error_is_the_spread_of_each_rows_loss_change(ols, reg_data):
    """row_std_error = sd over rows of (mean over repeats of the row's permuted loss) minus its
    own loss, over sqrt(n), written out with explicit permutations."""
    X, y = reg_data
    res = permutation_importance(ols, X, y, features=["x2"], n_repeats=3, random_state=0)
    # the permutations the function used: the same seed streams, as documented
    rng = np.random.default_rng(0)
    seed = np.random.SeedSequence(rng.integers(2**63)).spawn(1)[0]
    perm_rng = np.random.default_rng(seed)
    base = (ols.predict(X) - y) ** 2
    changes = np.zeros(len(X))
    for _ in range(3):
        Xp = X.copy()
        Xp["x2"] = X.x2.to_numpy()[perm_rng.permutation(len(X))]
        changes += ((ols.predict(Xp) - y) ** 2 - base) / 3
    assert res.importance["x2"] == pytest.approx(changes.mean(), rel=1e-10)
    assert res.row_std_error["x2"] == pytest.approx(changes.std(ddof=1) / np.sqrt(len(X)), rel=1e-10)


def test_the_row_standard_error_covers_the_sample_it_was_drawn_from(mass_gbm, mass_data):
    """Over 40 samples of 300 rows, the PFI of a sample lies within 2.5 of its own row
    standard errors of the all-rows PFI about 95 % of the time or more (the error is honest)."""
    X, y = mass_data
    truth = permutation_importance(mass_gbm, X, y, n_repeats=5, random_state=0).importance
    hits, total = 0, 0
    for seed in range(40):
        res = permutation_importance(mass_gbm, X, y, n_obs=300, n_repeats=5, random_state=seed)
        z = ((res.importance - truth) / res.row_std_error).abs()
        hits += int((z < 2.5).sum())
        total += len(z)
    assert hits / total > 0.9, hits / total


def test_blocks_of_features_computed_apart_join_into_the_one_call(mass_data):
    """Issue 12 (one job over many machines): features split into blocks, each computed with
    the streams it has in the whole call (on the same rows, seed and sample), joined with
    PermutationImportance.concat, equal the one call bit for bit."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y = mass_data
    model = HistGradientBoostingRegressor(max_iter=30, random_state=0).fit(X, y)
    whole = permutation_importance(model, X, y, n_repeats=4, n_obs=300, random_state=3)
    blocks = [
        permutation_block(
            model, X, y, features=["nox", "ptratio"], streams=[0, 1], n_repeats=4, n_obs=300, random_state=3
        ),
        permutation_block(model, X, y, features=["rm"], streams=[2], n_repeats=4, n_obs=300, random_state=3),
    ]
    joined = compute.PermutationImportance.concat(blocks)
    assert list(joined.repeats.index) == list(whole.repeats.index)
    assert np.array_equal(joined.repeats.to_numpy(), whole.repeats.to_numpy())
    assert np.array_equal(joined.row_std_error.to_numpy(), whole.row_std_error.to_numpy())
    assert joined.model_error == whole.model_error and joined.rows.equals(whole.rows)
    # other streams give other permutations; parts of other rows or repeats do not join
    other = permutation_block(model, X, y, features=["rm"], streams=[0], n_repeats=4, n_obs=300, random_state=3)
    assert not np.array_equal(other.repeats.to_numpy(), whole.repeats.loc[["rm"]].to_numpy())
    elsewhere = permutation_block(model, X, y, features=["rm"], streams=[2], n_repeats=4, n_obs=300, random_state=4)
    with pytest.raises(compute.InputError, match="cannot be joined"):
        compute.PermutationImportance.concat([blocks[0], elsewhere])
    with pytest.raises(compute.InputError, match="share features"):
        compute.PermutationImportance.concat([blocks[1], blocks[1]])


# --- a subgroup's PFI from the all-rows permutations (issue 12) -----------------------------
@pytest.fixture(scope="module")
def grouped():
    """y = a * (1 + 3 g) + b: 'a' matters four times as much where g == 1; g is binary."""
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
    X["g"] = (rng.random(400) < 0.5).astype(int)
    X.index = [f"r{i}" for i in range(len(X))]
    y = pd.Series(X.a * (1 + 3 * X.g) + X.b + 0.1 * rng.normal(size=400), index=X.index)
    return X, y, RandomForestRegressor(n_estimators=30, random_state=0).fit(X, y)


def test_permutation_rows_are_the_rows_the_call_uses(grouped):
    X, y, model = grouped
    res = permutation_importance(model, X, y, n_obs=250, n_repeats=2, random_state=4)
    assert np.array_equal(X.index[compute.permutation_rows(len(X), 250, random_state=4)], res.rows)
    assert np.array_equal(compute.permutation_rows(len(X), None), np.arange(len(X)))


def test_restricting_to_every_row_gives_the_call_itself(grouped):
    """restrict() on every row keeps every pair: the repeats and the row standard error of
    the call (to rounding: a mean of differences instead of a difference of means)."""
    X, y, model = grouped
    for kind in ("difference", "ratio"):
        res = permutation_block(model, X, y, n_obs=300, n_repeats=3, random_state=1, kind=kind, keep_pairs=True)
        every = res.restrict(np.ones(res.n_rows, bool))
        assert_allclose(every.repeats.to_numpy(), res.repeats.to_numpy(), rtol=1e-12, atol=1e-12)
        assert_allclose(every.row_std_error, res.row_std_error, rtol=1e-10)
        assert every.model_error == pytest.approx(res.model_error) and every.rows.equals(res.rows)
        assert (every.n_pairs.to_numpy() == res.n_rows).all()
        assert res.pairs.changes.shape == (4, 3, 300) and res.without_pairs().pairs is None


def test_a_subgroups_pfi_from_the_pairs_inside_it_brute_force(grouped):
    """Each repeat is the mean loss change over the pairs (i, tau_r(i)) with both rows in
    the subgroup, written out with the model; a column constant in the subgroup (g) gets
    exactly 0, as a permutation within the subgroup would give it (the marginal
    replacement of Sec. 6.1 would not: g = 0 donors change the prediction)."""
    X, y, model = grouped
    res = permutation_block(model, X, y, n_repeats=3, random_state=2, keep_pairs=True)
    inside = (X.g == 1).to_numpy()
    sub = res.restrict(inside)
    assert sub.n_rows == inside.sum() and sub.importance["g"] == 0.0
    base = (model.predict(X) - y.to_numpy()) ** 2
    for k, feature in enumerate(res.features):
        for r in range(3):
            donors = res.pairs.donors[k, r]
            pairs = np.flatnonzero(inside & inside[donors])
            Xp = X.iloc[pairs].copy()
            Xp[feature] = X[feature].to_numpy()[donors[pairs]]
            change = (model.predict(Xp) - y.to_numpy()[pairs]) ** 2 - base[pairs]
            assert sub.repeats.iloc[k, r] == pytest.approx(change.mean(), rel=1e-10, abs=1e-12)
            assert sub.n_pairs.iloc[k, r] == pairs.size
    # the same subgroup named by its row labels
    assert_allclose(res.restrict(X.index[inside]).repeats, sub.repeats, rtol=0, atol=0)


def test_a_subgroups_pfi_from_the_pairs_estimates_eq7_on_the_subgroup(grouped):
    """Over 60 seeds the restricted estimate's mean lies within 4 standard errors of Eq. (7)
    on the subgroup (all |G|^2 pairs, brute force); its row standard error is not smaller
    than its spread over the permutations, which it also covers."""
    X, y, model = grouped
    inside = (X.g == 1).to_numpy()
    G, yg = X[inside], y[inside].to_numpy()
    base = (model.predict(G) - yg) ** 2
    m = len(G)
    tiled = G.iloc[np.repeat(np.arange(m), m)].copy()
    tiled["a"] = np.tile(G.a.to_numpy(), m)
    exact = float(((model.predict(tiled) - np.repeat(yg, m)) ** 2).mean() - base.mean())
    values, errors = [], []
    for seed in range(60):
        sub = permutation_block(model, X, y, features=["a"], n_repeats=2, random_state=seed, keep_pairs=True).restrict(
            inside
        )
        values.append(sub.importance["a"])
        errors.append(sub.row_std_error["a"])
    values = np.array(values)
    assert abs(values.mean() - exact) < 4 * values.std(ddof=1) / np.sqrt(60), (values.mean(), exact)
    assert np.mean(errors) > 0.8 * values.std(ddof=1)


def test_pairs_join_and_fail_clearly(grouped):
    """Blocks computed apart keep their pairs when joined (the split job's subgroups); a
    result without pairs, or a subgroup too small to pair, is refused with a message."""
    X, y, model = grouped
    whole = permutation_block(model, X, y, n_obs=300, n_repeats=3, random_state=3, keep_pairs=True)
    blocks = [
        permutation_block(model, X, y, features=f, streams=s, n_obs=300, n_repeats=3, random_state=3, keep_pairs=True)
        for f, s in ((["a", "b"], [0, 1]), (["c", "g"], [2, 3]))
    ]
    inside = X.loc[whole.rows, "g"].to_numpy() == 1
    joined = compute.PermutationImportance.concat(blocks).restrict(inside)
    assert np.array_equal(joined.repeats.to_numpy(), whole.restrict(inside).repeats.to_numpy())
    with pytest.raises(compute.InputError, match="keep_pairs=True"):
        permutation_importance(model, X, y, n_repeats=2).restrict(inside)
    tiny = np.zeros(whole.n_rows, bool)
    tiny[:3] = True
    with pytest.raises(compute.InputError, match="subgroup's own permutations"):
        whole.restrict(tiny)


def test_restrict_reads_masks_by_label_and_refuses_a_zero_error_ratio(grouped):
    """A boolean Series is aligned by its labels (a shuffled one gives the same subgroup), a
    list of booleans is a mask; the ratio on a subgroup the model fits exactly is refused."""
    X, y, model = grouped
    res = permutation_block(model, X, y, n_obs=300, n_repeats=2, random_state=5, keep_pairs=True)
    mask = pd.Series(X.loc[res.rows, "g"].to_numpy() == 1, index=res.rows)
    expected = res.restrict(mask.to_numpy())
    shuffled = mask.sample(frac=1.0, random_state=0)
    assert np.array_equal(res.restrict(shuffled).repeats.to_numpy(), expected.repeats.to_numpy())
    assert np.array_equal(res.restrict(list(mask.to_numpy())).repeats.to_numpy(), expected.repeats.to_numpy())
    exact = FormulaModel(lambda X: X.a * (1 + 3 * X.g) + X.b)
    ratio = permutation_block(exact, X, exact.predict(X) + (X.g == 0) * 0.5, n_repeats=2, kind="ratio", keep_pairs=True)
    with pytest.raises(compute.InputError, match="ratio form of PFI is undefined on this subgroup"):
        ratio.restrict((X.g == 1).to_numpy())


class FormulaModel:
    def __init__(self, fn):
        self.fn = fn

    def predict(self, X):
        return np.asarray(self.fn(X), dtype=float)


class _Float32Model:
    """A model that computes in float32 whatever it is fed (as XGBoost does) and records the
    dtypes of the blocks it was given."""

    def __init__(self, declared):
        self.input_dtype = declared
        self.seen: set = set()
        self.feature_names_in_ = np.array(["x1", "x2", "x3"], dtype=object)
        self.n_features_in_ = 3

    def predict(self, X):
        values = np.asarray(X)
        self.seen.add(values.dtype)
        v = values.astype(np.float32)
        return (v[:, 0] * np.float32(1.7) + v[:, 1] * v[:, 2]).astype(np.float64)


def test_a_model_computing_in_float32_gets_float32_blocks_and_the_same_results(reg_data):
    """A model declaring input_dtype = numpy.float32 (the XGBoost wrapper) is fed float32
    blocks: half the bytes, and PFI and the curves equal those of the same model fed float64
    (it casts to float32 itself). Any other declaration keeps float64 blocks."""
    X, y = reg_data
    X = X[["x1", "x2", "x3"]]
    f32, f64, odd = _Float32Model(np.float32), _Float32Model(None), _Float32Model("float32")
    a = permutation_importance(f32, X, y, n_obs=120, n_repeats=3, random_state=2)
    b = permutation_importance(f64, X, y, n_obs=120, n_repeats=3, random_state=2)
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
    assert f32.seen == {np.dtype(np.float32)} and f64.seen == {np.dtype(np.float64)}
    pa = compute.feature_profile(f32, X, y, "x2", grid=9)
    pb = compute.feature_profile(f64, X, y, "x2", grid=9)
    assert np.array_equal(pa.pred, pb.pred) and np.array_equal(pa.base_pred, pb.base_pred)
    permutation_importance(odd, X, y, n_obs=50, n_repeats=2, random_state=2)
    assert odd.seen == {np.dtype(np.float64)}


def test_the_split_mechanics_are_a_seam_not_the_public_signature():
    """Issue 25: ``streams`` and ``keep_pairs`` (how a job runner splits PFI and keeps its
    pairs) are not parameters of ``permutation_importance``; ``permutation_block`` takes
    them and, without them, is the public call bit for bit."""
    import inspect

    public = inspect.signature(permutation_importance).parameters
    assert "streams" not in public and "keep_pairs" not in public
    assert len(public) <= 14
    with pytest.raises(TypeError):
        permutation_importance(OLS_MODEL, OLS_X, OLS_Y, keep_pairs=True)  # type: ignore[call-arg]
    a = permutation_importance(OLS_MODEL, OLS_X, OLS_Y, n_repeats=3, n_obs=40, random_state=2)
    b = permutation_block(OLS_MODEL, OLS_X, OLS_Y, n_repeats=3, n_obs=40, random_state=2)
    assert np.array_equal(a.repeats.to_numpy(), b.repeats.to_numpy()) and a.pairs is None and b.pairs is None


_RNG = np.random.default_rng(11)
OLS_X = pd.DataFrame(_RNG.normal(size=(80, 3)), columns=["a", "b", "c"])
OLS_Y = OLS_X.a * 2 - OLS_X.b + 0.1 * _RNG.normal(size=80)
OLS_MODEL = LinearRegression().fit(OLS_X, OLS_Y)
