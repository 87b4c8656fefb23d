"""The performance view (issue 14, item 1): planned by the view itself, its numbers the
library's, the threshold a control the server checks."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn import metrics

import compute
from dashboard import jobs, planning, views
from dashboard.config import Config
from dashboard.html_report import report_html
from dashboard.loading import load_model
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import performance, plan_state


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("perf-cache")), max_curves=200))._wip_context


def _results(ctx, ws_id: str, **changes) -> dict:
    """The results record of a state with only the predictions computed (the view reads
    nothing else), through the planner and the job runner."""
    state, error = normalize(ctx, {**default_state(), "ws": ws_id})
    state, error = normalize(ctx, {**state, **changes})
    assert error is None, error
    ws = ctx.store.workspace(ws_id)
    planned = plan_state(ctx, ws, state)
    tasks = [t for t in planned["tasks"] if t["kind"] == performance.KIND]
    assert {t["model"] for t in tasks} == {m.name for m in ws.models}  # one pass per model
    jobs.run(ctx.store, ws, tasks, policy=ctx.policy)
    return {"state": state, "keys": planned["keys"]}


def _model(ctx, ws_id: str, name: str | None = None):
    ws = ctx.store.workspace(ws_id)
    entry = ws.model(name)
    return ws, entry, load_model(ctx.store.path(entry.path), name=entry.name)


def test_the_prediction_task_does_not_depend_on_subgroup_feature_or_threshold(ctx):
    """A subgroup or feature switch re-uses the one prediction pass per model."""
    a = _results(ctx, "demo-x3")
    b = _results(ctx, "demo-x3", subgroup="X3 == 0", feature="X2")
    assert a["keys"][performance.KIND] == b["keys"][performance.KIND]
    state = b["state"]
    ws = ctx.store.workspace("demo-x3")
    assert not planning.missing(
        ctx.store, [t for t in plan_state(ctx, ws, state)["tasks"] if t["kind"] == "predictions"]
    )


def test_regression_table_is_the_librarys_on_subgroup_rest_and_all(ctx):
    results = _results(ctx, "demo-x3", subgroup="X3 == 0")
    out = views.render(ctx, "performance", results)
    ws, _, model = _model(ctx, "demo-x3")
    data = ctx.store.data(ws)
    X, y = data[list(ws.features)], data[ws.target]
    inside = (data["X3"] == 0).to_numpy()
    rows = {(r["model"], r["rows"]): r for r in out["data"]}
    assert set(rows) == {(ws.models[0].name, g) for g in ("subgroup", "rest", "all rows")}
    # the unrounded numbers behind the table, against scikit-learn on the model's own predictions
    table = performance.metrics_table(views.load_inputs(ctx, results))
    for group, mask in (("subgroup", inside), ("rest", ~inside), ("all rows", np.ones(len(X), bool))):
        row, exact = rows[(ws.models[0].name, group)], table.loc[(ws.models[0].name, group)]
        guess = model.predict(X[mask])
        assert row["count"] == exact["count"] == mask.sum()
        assert_allclose(exact["squared error (PFI's loss)"], metrics.mean_squared_error(y[mask], guess), rtol=1e-12)
        assert_allclose(exact["R²"], metrics.r2_score(y[mask], guess), rtol=1e-12)
        assert_allclose(exact["MAE"], metrics.mean_absolute_error(y[mask], guess), rtol=1e-12)
        # the page shows them rounded for people: 3 significant digits
        for column in ("squared error (PFI's loss)", "R²", "MAE"):
            assert_allclose(float(str(row[column]).replace(",", "")), exact[column], rtol=5e-3)
    # the error is PFI's reference error on the subgroup's rows
    pfi = compute.permutation_importance(model, X[inside], y[inside], loss=ws.loss, n_repeats=1)
    subgroup_error = table.loc[(ws.models[0].name, "subgroup"), "squared error (PFI's loss)"]
    assert_allclose(subgroup_error, pfi.model_error, rtol=1e-12)
    fit = out["fit"]
    assert "Predicted against observed" in fit.layout.title.text
    assert [t.name for t in fit.data] == ["predicted = observed", "subgroup", "rest"]
    assert_allclose(np.sort(fit.data[1].y), np.sort(model.predict(X[inside])), rtol=1e-12)
    residuals = out["by_feature"].data[0]
    assert_allclose(np.sort(residuals.y), np.sort(y[inside] - model.predict(X[inside])), rtol=1e-9)
    assert out["confusion"] == [] and out["threshold_style"] == {"display": "none"}


def test_classifier_confusion_matrix_follows_the_threshold(ctx):
    results = _results(ctx, "demo-cancer", subgroup="`worst radius` > 16")
    ws, entry, model = _model(ctx, "demo-cancer", results["state"]["model"])
    data = ctx.store.data(ws)
    X, y = data[list(entry.features)], data[ws.target]
    inside = (data["worst radius"] > 16).to_numpy()
    p = model.predict_proba(X[inside])[:, list(model.classes_).index("malignant")]
    for threshold in (0.3, 0.9):
        out = views.render(ctx, "performance", results, controls={"threshold": threshold})
        expected = metrics.confusion_matrix(y[inside] == "malignant", p >= threshold)
        cells = [
            [int(r[c].split(" ")[0].replace(",", "")) for c in ("predicted not malignant", "predicted malignant")]
            for r in out["confusion"]
        ]
        assert cells == expected.tolist(), threshold
        assert f"threshold of {threshold:.2f}" in out["info"]
    assert out["threshold_style"] == {}
    # a hostile or broken control value falls back to 0.5
    for bad in ("1; drop", 7, None, float("nan")):
        hostile = views.render(ctx, "performance", results, controls={"threshold": bad})
        assert "threshold of 0.50" in hostile["info"]
    fit = out["fit"]
    assert fit.layout.xaxis.title.text == "predicted probability of malignant"
    # probabilities in % on both charts (the report mixed 0-1 and %): the axis and the hovers
    by_feature = out["by_feature"]
    assert fit.layout.yaxis.tickformat == by_feature.layout.yaxis.tickformat == ".0%"
    assert all("%{y:.1%}" in t.hovertemplate for t in by_feature.data)
    assert "%{x:.1%}" in fit.data[1].hovertemplate
    assert {t.name for t in fit.data} >= {f"{m.name}: subgroup" for m in ws.models}
    rows = {(r["model"], r["rows"]): r for r in out["data"]}
    auc = metrics.roc_auc_score(y[inside] == "malignant", p)
    assert_allclose(float(rows[(entry.name, "subgroup")]["AUC"]), auc, rtol=5e-3)  # as shown
    exact = performance.metrics_table(views.load_inputs(ctx, results))
    assert_allclose(exact.loc[(entry.name, "subgroup"), "AUC"], auc, rtol=1e-12)


def test_report_and_export_include_the_view(ctx):
    results = _results(ctx, "demo-x3")
    html = report_html(ctx, results)
    assert "How good is each model, and where?" in html and "Predicted against observed" in html
    download = views.export(ctx, performance.EXPORT, results)
    assert download["filename"] == "performance.csv" and "RMSE" in download["content"]


def test_a_multiclass_models_accuracy_in_the_numbers_is_the_tables(ctx):
    """Issue 41, item 5: the JSON's "accuracy" of a three-class model was the explained
    class's accuracy at the threshold (that class against the rest), overwriting the table's
    accuracy (the most probable class right). Each keeps its own name now."""
    from sklearn.datasets import load_iris
    from sklearn.ensemble import RandomForestClassifier

    from dashboard.doors import open_workspace

    iris = load_iris(as_frame=True)
    data = iris.frame.rename(columns={"target": "species"})
    features = [c for c in data.columns if c != "species"]
    model = RandomForestClassifier(n_estimators=15, max_depth=2, random_state=0).fit(data[features], data.species)
    ws = open_workspace(ctx, {"forest": model}, data, "species", title="iris", output=0)
    found = views.performance.library(views.load_inputs(ctx, _results(ctx, ws.id)))
    right = metrics.accuracy_score(data.species, model.predict(data[features]))
    assert_allclose(found["accuracy"][("forest", "all rows")], right, rtol=1e-12)
    threshold = found["accuracy at the threshold (0 or not)"]
    p = model.predict_proba(data[features])[:, 0]
    assert_allclose(threshold, np.mean((p >= 0.5) == (data.species == 0)), rtol=1e-12)
    assert not np.isclose(threshold, right)  # two quantities: the case the old key mixed up
