"""Missing values (issue 12): a numeric feature's grid has "missing" as a point of its own, the
model is asked about it, and the integrals cover the rows as they are."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline

import compute
from compute.sampling import make_grid


@pytest.fixture(scope="module")
def gaps():
    """Three numeric features, 'b' missing in 20 % of the rows; y depends on b and on
    whether it is missing."""
    rng = np.random.default_rng(0)
    n = 300
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "c": rng.integers(0, 4, n).astype(float)})
    gone = rng.uniform(size=n) < 0.2
    y = X.a + 2 * np.where(gone, 1.5, X.b) + 0.3 * rng.normal(size=n)
    X.loc[gone, "b"] = np.nan
    return X, y.to_numpy(), gone


@pytest.fixture(scope="module")
def hgb(gaps):
    X, y, _ = gaps
    return HistGradientBoostingRegressor(max_iter=60, random_state=0).fit(X, y)  # takes NaN natively


def test_numeric_grid_has_the_missing_point_last_with_its_share(gaps):
    X, _, gone = gaps
    grid = make_grid(X.b, "observed")
    assert np.isnan(grid.values[-1]) and not np.isnan(grid.values[:-1]).any()
    assert grid.weights[-1] == pytest.approx(gone.mean())
    assert grid.weights.sum() == pytest.approx(1.0)
    assert_allclose(grid.weights[:-1], np.full(grid.values.size - 1, 1 / len(X)))  # distinct values
    quantiles = make_grid(X.b, 10)
    assert quantiles.values.size == 11 and quantiles.weights[-1] == pytest.approx(gone.mean())
    assert make_grid(X.a, "observed").values.size == len(X)  # no missing value, no missing point


def test_ice_at_the_missing_point_is_the_models_prediction_with_nan(gaps, hgb):
    X, y, gone = gaps
    prof = compute.feature_profile(hgb, X, y, "b")
    assert prof.has_missing_point
    with_nan = X.assign(b=np.nan)
    assert_allclose(prof.ice[:, -1], hgb.predict(with_nan), rtol=1e-12)
    # rows whose own value is missing sit on the missing point: their own prediction is read there
    assert_allclose(prof.base_pred, hgb.predict(X), rtol=1e-12)
    assert_allclose(prof.ici[gone, -1], 0.0, atol=1e-12)


def test_pfi_on_the_observed_grid_counts_missing_like_any_value(gaps, hgb):
    """Eq. 7 with the missing point: the mean over all n x n pairs (row i with the value of
    row j, missing or not) of the loss, minus the model's error, written out."""
    X, y, _ = gaps
    prof = compute.feature_profile(hgb, X, y, "b")
    n = len(X)
    pairs = X.loc[X.index.repeat(n)].reset_index(drop=True)
    pairs["b"] = np.tile(X.b.to_numpy(), n)
    loss = (hgb.predict(pairs) - np.repeat(y, n)) ** 2
    brute = loss.mean() - np.mean((hgb.predict(X) - y) ** 2)
    assert prof.importance == pytest.approx(brute, rel=1e-10)
    # permutation PFI (Eq. 8) permutes the missing values with the others and estimates it
    pfi = compute.permutation_importance(hgb, X, y, features=["b"], n_repeats=200, random_state=1)
    assert abs(pfi.importance["b"] - brute) < 4 * pfi.std_error["b"]


def test_a_pipeline_with_an_imputer_predicts_the_imputed_value_at_the_missing_point(gaps):
    X, y, _ = gaps
    pipe = make_pipeline(SimpleImputer(strategy="mean"), LinearRegression()).fit(X, y)
    prof = compute.feature_profile(pipe, X, y, "b", grid=20)
    filled = X.assign(b=X.b.mean())
    assert_allclose(prof.ice[:, -1], pipe.predict(filled), rtol=1e-10)


def test_views_with_an_ordered_axis_leave_the_missing_point_out(gaps, hgb):
    X, y, gone = gaps
    prof = compute.feature_profile(hgb, X, y, "b", grid=30)
    bare = prof.without_missing_point()
    assert bare.grid.size == prof.grid.size - 1 and bare.grid_weights.sum() == pytest.approx(1.0)
    assert_allclose(bare.pred, prof.pred[:, :-1])
    impact = compute.ice_impact(prof)
    assert impact.notna().all() and impact.equals(compute.ice_impact(bare))
    ale = compute.ale_from_profile(prof, n_intervals=5)
    assert np.isfinite(ale.to_numpy(dtype=float)).all()
    assert ale.equals(compute.ale_from_profile(bare, n_intervals=5))
    assert int(ale["n_obs"].sum()) == int((~gone).sum())  # rows with a missing value have no interval
    # the subgroup finder and CIU read the curves with the missing point (no NaN comes out)
    found = compute.suggest_subgroups(prof, X)
    assert all(np.isfinite(s.share) for s in found.splits)


def test_curves_and_pi_draw_the_missing_point_apart_from_the_lines(gaps, hgb):
    """ICI/ICE lines stop at the largest value; each curve's value at "missing" is a dot to
    the right (a trace of its own), the PI/PD a lone marker after a gap, and the axis says
    "missing (share)"; the PI's histogram has a bar for the missing rows."""
    from dashboard import figures

    X, y, gone = gaps
    prof = compute.feature_profile(hgb, X, y, "b", grid=25)
    fig = figures.ici_figure(prof, n_points=1000)
    lines, dots = fig.data[0], next(t for t in fig.data if t.name == "ICI at missing")
    x_missing = figures._x_values(prof)[-1]
    assert x_missing > np.nanmax(prof.grid[:-1])
    xs = np.asarray(lines.x, float)
    assert not np.any(np.isclose(xs[np.isfinite(xs)], x_missing))  # no line reaches "missing"
    assert len(dots.y) == len(prof.rows)
    assert_allclose(np.sort(np.asarray(dots.y, float)), np.sort(prof.ici[:, -1]), rtol=1e-6)
    pi = next(t for t in fig.data if t.name.startswith("PI"))
    assert np.isnan(pi.x[-2]) and pi.x[-1] == x_missing and pi.y[-1] == pytest.approx(prof.pi[-1])
    assert pi.mode == "lines+markers" and list(pi.marker.size[:-1]) == [0] * (len(pi.x) - 1)
    assert any(a.text == f"missing ({gone.mean():.0%})" for a in fig.layout.annotations)
    pi_fig = figures.pi_figure(prof, x_all=X.b.to_numpy())
    bar = next(t for t in pi_fig.data if t.name == "missing")
    assert list(bar.y) == [int(gone.sum())]
    # a profile without missing values is drawn as before: no dots, no gap
    plain = figures.ici_figure(compute.feature_profile(hgb, X, y, "a", grid=25), n_points=1000)
    assert not any(t.name == "ICI at missing" for t in plain.data)


def test_a_column_of_one_value_and_missing_values_does_not_stop_the_pass(tmp_path):
    """Review finding: an indicator column (1 or missing) has a two-point grid, [1, missing];
    ICE impact needs two numbers and used to fail the whole model's ICE/ICI task."""
    import skops.io as sio

    from dashboard import jobs, planning
    from dashboard.config import Config
    from dashboard.server import create_app
    from dashboard.state import default_state, normalize
    from dashboard.store import ModelEntry, Workspace, new_workspace_id
    from dashboard.views import plan_state

    ctx = create_app(Config(cache_dir=str(tmp_path / "cache"), max_curves=100, warm=False))._wip_context
    rng = np.random.default_rng(0)
    n = 200
    data = pd.DataFrame({"x": rng.normal(size=n), "flag": np.where(rng.uniform(size=n) < 0.3, 1.0, np.nan)})
    data["y"] = data.x + np.nan_to_num(data.flag) + 0.1 * rng.normal(size=n)
    model = HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(data[["x", "flag"]], data.y)
    path = tmp_path / "hgb.skops"
    sio.dump(model, path)
    rel, sha = ctx.store.keep_model(path, ".skops")
    data_rel, data_sha = ctx.store.keep_data(data)
    ws = Workspace(
        id=new_workspace_id(),
        title="flags",
        data_path=data_rel,
        data_sha=data_sha,
        target="y",
        task="regression",
        loss="squared_error",
        models=(ModelEntry(name="hgb", path=rel, sha=sha, features=("x", "flag")),),
        features=("x", "flag"),
    )
    ctx.store.save_workspace(ws)
    state = normalize(ctx, {**default_state(), "ws": ws.id})[0]
    planned = plan_state(ctx, ws, state)
    jobs.run(ctx.store, ws, [t for t in planned["tasks"] if t["kind"] == "profiles"], policy=ctx.policy)
    summary = ctx.store.get(planned["keys"]["summary"])
    assert summary is not None and summary.impact.loc["x"].notna().all()
    flag = ctx.store.get(planned["keys"]["profiles"]["flag"])
    assert flag.grid.size == 2 and flag.has_missing_point
    assert planning.missing(ctx.store, [t for t in planned["tasks"] if t["kind"] == "profiles"]) == []


def test_ale_leaves_out_exactly_the_rows_with_a_missing_value(gaps, hgb):
    X, y, gone = gaps
    prof = compute.feature_profile(hgb, X, y, "b", grid=30)
    ale = compute.ale_from_profile(prof, n_intervals=5)
    assert int(ale["n_obs"].sum()) + int(gone.sum()) == len(X)
