"""Issue 41: an empty (all-missing) column the model reads leaves the interactions and what-if
panels computing for the other features.

An empty numeric column gets a one-point grid, "missing" (NaN, weight 1), as a constant column
gets its one value (``compute.sampling.make_grid``): Friedman's H statistics and the what-if
then run for every feature, the empty one's H² is exactly 0 (fixing a feature that holds one
value changes nothing) and its own curve panels say in words why there is no curve. Checked
through the page (an XGBoost 1.6 file from tests/data/old_models, read in the job process) and
the library (HistGradientBoosting), each against the model's own predictions.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import compute
from compute.errors import InputError
from compute.sampling import make_grid
from dashboard import views
from dashboard.callbacks.compute import resolve_state, run_request
from dashboard.config import Config
from dashboard.doors import open_workspace
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import plan_state

ROOT = Path(__file__).resolve().parent.parent
OLD = ROOT / "tests" / "data" / "old_models"
XGB_FILE = OLD / "xgboost-1.6.2-regression.json"
needs_xgboost = pytest.mark.skipif(importlib.util.find_spec("xgboost") is None, reason="needs xgboost")


def _given() -> pd.DataFrame:
    """The rows given: b is empty in every row, c holds one value."""
    return pd.read_csv(OLD / "data.csv")[["a", "b", "c", "y"]].assign(b=np.nan, c=2.0)


def _brute_h2(predict, X: pd.DataFrame, j) -> float:
    """H²_j of Friedman & Popescu (2008) from its definition, one model call per row pair:
    F(x_i), PD_j(x_ij) = mean_l F(x_l with x_j := x_ij), PD_-j(x_i,-j) = mean_l F(x_i with
    x_j := x_lj), each centred over the rows."""
    n = len(X)
    rows = X.iloc[np.repeat(np.arange(n), n)].reset_index(drop=True)  # row i, n times
    donors = X[j].to_numpy()[np.tile(np.arange(n), n)]
    block = predict(rows.assign(**{j: donors})).reshape(n, n)  # block[i, l] = F(x_i with x_j := x_lj)
    f = predict(X)
    pd_j = block.mean(axis=0)  # PD_j(x_lj): x_j := x_lj in every row
    pd_rest = block.mean(axis=1)  # PD_-j(x_i,-j)
    joint, additive = f - f.mean(), (pd_j - pd_j.mean()) + (pd_rest - pd_rest.mean())
    return float(((joint - additive) ** 2).sum() / (joint**2).sum())


# --- through the page: an XGBoost file, b empty, c constant --------------------------------


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    if importlib.util.find_spec("xgboost") is None:
        pytest.skip("needs xgboost")
    ctx = create_app(Config(cache_dir=str(tmp_path_factory.mktemp("empty-panels")), max_curves=300))._wip_context
    ws = open_workspace(ctx, {"xgb": XGB_FILE}, _given(), "y", title="y")
    return ctx, ws


def _computed(ctx, ws, **changes) -> dict:
    state = normalize(ctx, {**default_state(), "ws": ws.id, **changes})[0]
    done = run_request(ctx, {"state": state})
    assert done.get("ok") and "error" not in done, done
    resolved = resolve_state(ctx, state, done).results
    assert "error" not in resolved and not resolved.get("pending"), resolved
    return {"state": state, "keys": plan_state(ctx, ws, state)["keys"]}


def _annotation(figure) -> str:
    text = " ".join(a.text for a in figure.layout.annotations) if figure.layout.annotations else ""
    return text.replace("-<br>", "-").replace("<br>", " ")


@pytest.fixture(scope="module")
def on_a(opened):
    ctx, ws = opened
    return _computed(ctx, ws, feature="a")


def test_the_interactions_are_computed_with_an_empty_column(opened, on_a):
    ctx, _ = opened
    result = views.load_inputs(ctx, on_a).results("interactions")["xgb"]
    assert list(result.overall.index) == ["a", "b", "c"]
    assert np.isfinite(result.overall.to_numpy(float)).all()
    # b (empty) and c (one value) interact with nothing: exactly 0, not NaN
    assert result.overall.loc["b", "h2"] == 0.0 and result.overall.loc["b", "h"] == 0.0
    assert result.overall.loc["c", "h2"] == 0.0
    with_b = result.pairs[(result.pairs.feature_1 == "b") | (result.pairs.feature_2 == "b")]
    assert len(with_b) == 2 and (with_b.h2 == 0.0).all() and (with_b.h == 0.0).all()
    out = views.render(ctx, "interactions", on_a)
    assert not _annotation(out["bars"]) and "could not be computed" not in str(out)
    bars = out["bars"].data[0]
    assert dict(zip(bars.y, np.asarray(bars.x, float), strict=True))["b"] == 0.0
    assert "nan" not in str(out["matrix"].data[0].text).lower()


def test_the_what_if_is_computed_and_the_empty_feature_says_why_it_has_no_curve(opened, on_a):
    ctx, ws = opened
    result = views.load_inputs(ctx, on_a).results("whatif")["xgb"]
    assert np.isnan(result.grids["b"]).all() and result.grids["b"].size == 1
    assert result.ciu.loc["b", "CI"] == 0.0 and result.ciu.loc["c", "CI"] == 0.0
    assert result.ciu.loc["a", "CI"] > 0
    out = views.render(ctx, "whatif", on_a)
    assert not _annotation(out["figure"]) and len(out["figure"].data) == 4  # a's curves and points
    on_b = _computed(ctx, ws, feature="b", obs=on_a["state"]["obs"])
    said = _annotation(views.render(ctx, "whatif", on_b)["figure"])
    assert "b holds no values in these rows (all missing), so it has no curve" in said, said
    for name in ("ice", "ici", "pi", "ale"):
        said = _annotation(views.render(ctx, name, on_b)["figure"])
        assert "b holds no values in these rows (all missing)" in said, (name, said)
    on_c = _computed(ctx, ws, feature="c")  # the constant column: likewise, with its value
    said = _annotation(views.render(ctx, "whatif", on_c)["figure"])
    assert "c holds one value (2) in these rows, so it has no curve" in said, said
    table = views.render(ctx, "observation", on_b)["data"]  # the row's values, no ICI integral for b
    assert {"column": "b", "value": "(missing)"} in table and not any("ICI" in r["column"] for r in table)
    hint = str(views.render(ctx, "whatif", on_b)["form"])
    assert "no values in these rows" in hint and "(missing) to (missing)" not in hint


@needs_xgboost
def test_the_page_numbers_equal_xgboost_s_own_predictions(opened, on_a):
    """Last in this file: XGBoost is loaded in this process only after the job processes ran."""
    import xgboost

    ctx, _ = opened
    model = xgboost.XGBRegressor()
    model.load_model(str(XGB_FILE))
    given = _given()
    X = given[["a", "b", "c"]]

    def predict(frame):
        return model.predict(frame[["a", "b", "c"]]).astype(float)

    inp = views.load_inputs(ctx, on_a)
    inter = inp.results("interactions")["xgb"]
    assert inter.n_rows == len(X)  # 120 rows: no sample
    assert inter.overall.loc["a", "h2"] == pytest.approx(_brute_h2(predict, X, "a"), rel=1e-6)
    assert _brute_h2(predict, X, "b") == pytest.approx(0.0, abs=1e-12)  # the brute force agrees: no interaction
    whatif = inp.results("whatif")["xgb"]
    row = X.loc[[whatif.row]]
    grid = whatif.grids["a"]
    expected = predict(row.iloc[np.zeros(grid.size, dtype=int)].assign(a=grid))
    np.testing.assert_allclose(whatif.curves["a"][0], expected, rtol=1e-6)
    assert whatif.curves["b"][0] == pytest.approx([predict(row)[0]], rel=1e-6)  # b at "missing": the row itself


# --- the library: HistGradientBoosting ----------------------------------------------------


@pytest.fixture(scope="module")
def hgb():
    from sklearn.ensemble import HistGradientBoostingRegressor

    rng = np.random.default_rng(1)
    n = 150
    train = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n), "e": rng.normal(size=n)})
    train.loc[::4, "e"] = np.nan
    y = train.x1 * train.x2 + train.e.fillna(1.0) + 0.1 * rng.normal(size=n)
    model = HistGradientBoostingRegressor(max_iter=30, random_state=0).fit(train, y)
    X = train.iloc[:40].assign(e=np.nan)  # e empty in the rows given
    return model, X


def test_an_empty_column_gets_the_missing_point_alone():
    empty = pd.Series([np.nan] * 5, name="e")
    for grid in ("observed", 7):
        g = make_grid(empty, grid)
        assert g.values.size == 1 and np.isnan(g.values[0]) and g.weights.tolist() == [1.0]
    assert make_grid(pd.Series([2.0] * 5, name="c"), "observed").values.tolist() == [2.0]  # as a constant one
    with pytest.raises(InputError, match=r"'e' holds no values in these rows \(all missing\): an array 'grid' needs"):
        make_grid(empty, [0.0, 1.0])


def test_the_library_s_interactions_with_an_empty_column(hgb):
    model, X = hgb
    result = compute.interaction_strength(model, X, n_obs=None, pairs="all")
    assert list(result.overall.index) == ["x1", "x2", "e"]
    assert result.overall.loc["e", "h2"] == 0.0 and result.overall.loc["e", "h"] == 0.0

    def predict(frame):
        return model.predict(frame[["x1", "x2", "e"]])

    for j in ("x1", "x2"):
        assert result.overall.loc[j, "h2"] == pytest.approx(_brute_h2(predict, X, j), rel=1e-9, abs=1e-12)
    assert result.overall.loc["x1", "h2"] > 0.01  # x1 x x2: a real interaction, not a trivial 0
    surface = result.pd2("x1", "e")  # e's one point: "missing"; PD of x1 with e as it is
    assert surface.shape[1] == 1 and np.isnan(surface.columns[0])
    expected = [predict(X.assign(x1=v)).mean() for v in surface.index]
    np.testing.assert_allclose(surface.iloc[:, 0].to_numpy(), expected, rtol=1e-9)


def test_the_library_s_what_if_with_an_empty_column(hgb):
    model, X = hgb
    row = X.index[3]
    result = compute.what_if(model, X, row, {"x2": 0.5}, grid=10)
    assert np.isnan(result.grids["e"]).all() and result.curves["e"].shape == (2, 1)
    edited = X.loc[[row]].assign(x2=0.5)
    assert result.prediction == pytest.approx(model.predict(edited)[0], rel=1e-12)
    assert result.curves["e"][1][0] == pytest.approx(model.predict(edited)[0], rel=1e-12)
    grid = result.grids["x1"]
    expected = model.predict(edited.iloc[np.zeros(grid.size, dtype=int)].assign(x1=grid))
    np.testing.assert_allclose(result.curves["x1"][1], expected, rtol=1e-12)
    assert result.ciu.loc["e", "CI"] == 0.0 and result.ciu.loc["x1", "CI"] > 0


def test_the_empty_feature_s_own_curve_is_refused_in_words(hgb):
    model, X = hgb
    with pytest.raises(InputError, match=r"Feature 'e' has no curve: e holds no values in these rows \(all missing\)"):
        compute.feature_profile(model, X, feature="e")
    pfi = compute.permutation_importance(model, X, model.predict(X), n_repeats=3)
    assert pfi.importance["e"] == 0.0 and pfi.importance["x1"] > 0
    assert pfi.uncertainty["e"] == 0.0  # every row's loss change is exactly 0, not 1e-17 of rounding
