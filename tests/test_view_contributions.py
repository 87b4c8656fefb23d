"""The contributions view (issue 14, item 3): the selected row's Shapley contributions are
the library's, add up to the prediction, and are planned only for a selected row."""

from __future__ import annotations

import re

import numpy as np
import pytest
from numpy.testing import assert_allclose

import compute
from dashboard import jobs, planning, views
from dashboard.config import Config
from dashboard.loading import load_model
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import contributions, plan_state


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("contrib-cache")), max_curves=200))._wip_context


def _results(ctx, ws_id: str, **changes) -> dict:
    state, error = normalize(ctx, {**default_state(), "ws": ws_id, **changes})
    ws = ctx.store.workspace(ws_id)
    planned = plan_state(ctx, ws, state)
    tasks = [t for t in planned["tasks"] if t["kind"] == contributions.KIND]
    jobs.run(ctx.store, ws, tasks, policy=ctx.policy)
    return {"state": state, "keys": planned["keys"], "tasks": tasks}


def test_planned_for_the_selected_row_of_the_selected_model_only(ctx):
    none = _results(ctx, "demo-diabetes")
    assert none["tasks"] == [] and none["keys"][contributions.KIND] == {}
    one = _results(ctx, "demo-diabetes", obs="7", model="ridge")
    assert [(t["model"], t["params"]["obs"]) for t in one["tasks"]] == [("ridge", "7")]
    other = _results(ctx, "demo-diabetes", obs="8", model="ridge")
    assert other["keys"][contributions.KIND] != one["keys"][contributions.KIND]
    # a row the data set does not have is dropped from the state, so nothing is planned
    ghost = _results(ctx, "demo-diabetes", obs="no-such-row")
    assert ghost["state"]["obs"] is None and ghost["tasks"] == []


def test_waterfall_and_table_are_the_librarys_and_add_up(ctx):
    results = _results(ctx, "demo-diabetes", obs="7")
    out = views.render(ctx, "contributions", results)
    ws = ctx.store.workspace("demo-diabetes")
    entry = ws.model(results["state"]["model"])
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    X = ctx.store.data(ws)[list(entry.features)]
    ref = compute.shapley_contributions(
        model, X, 7, n_background=contributions.N_BACKGROUND, random_state=planning.SEED
    )
    table = {r["feature"]: r for r in out["data"]}
    assert set(table) == set(X.columns)
    for feature, row in table.items():
        assert_allclose(row["contribution"], ref.values[feature], rtol=1e-12)  # unrounded: the column shows 3 digits
        assert row["value"] == f"{X.loc[7, feature]:.4g}"
    bars = out["figure"].data[0]
    assert list(bars.measure) == ["absolute", *["relative"] * (len(bars.x) - 2), "total"]
    assert_allclose(bars.x[0] + sum(bars.x[1:-1]), bars.x[-1], rtol=1e-9)  # efficiency, as drawn
    assert_allclose(bars.x[-1], model.predict(X.loc[[7]])[0], rtol=1e-9)
    assert out["figure"].layout.title.text == "Why row 7 gets its predicted progression"
    assert "= mean" in out["info"] and "exact over all coalitions" in out["info"]


def test_without_a_selection_the_view_waits_for_the_default_row(ctx):
    """Before the curves name the default observation the panel waits for them; it never
    says "No observation selected" (test_view_whatif checks the row it then explains)."""
    results = _results(ctx, "demo-x3")
    out = views.render(ctx, "contributions", {**results})
    assert out["data"] == [] and out["info"] == ""
    assert out["figure"].layout.annotations[0].text == "Waiting for the ICE/ICI pass…"


def test_a_classifier_is_explained_in_percentage_points(ctx):
    """The mean and this prediction are probabilities, in % (as the what-if writes them);
    the contributions are their differences, in percentage points."""
    results = _results(ctx, "demo-cancer", obs="3")
    out = views.render(ctx, "contributions", results)
    assert out["figure"].layout.title.text == "Why row 3 gets its probability of malignant"
    assert out["figure"].layout.xaxis.title.text == "predicted probability (%)"
    cells = out["figure"].data[0].text
    assert cells[0].endswith(" %") and cells[-1].endswith(" %"), (cells[0], cells[-1])
    assert all(t.endswith(" pp") and t[0] in "+\u2212" for t in cells[1:-1])
    assert re.search(r"probability of malignant \d+\.\d %( = mean \d+\.\d %)", out["info"]), out["info"]
    assert " pp = mean" not in out["info"]
    header = [c["name"] for c in out["columns"]]
    assert header[:3] == ["feature", "value", "contribution (pp)"]
    shown = {c["id"]: c.get("format", {}).get("specifier") for c in out["columns"]}
    assert shown["contribution (pp)"] == ",.3~r"  # the DataTable rounds for the eye, the data is exact
    total = sum(r["contribution (pp)"] for r in out["data"])
    assert np.isfinite(total)
