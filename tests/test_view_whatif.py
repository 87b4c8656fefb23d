"""The what-if view (issue 14, item 2): the edit lives in the state and the URL, is cleaned
against the data, is computed in the job on the edited row, and the contributions follow it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dash import no_update
from numpy.testing import assert_allclose

import compute
from dashboard import ids, jobs, planning, views
from dashboard.callbacks.compute import resolve_state, run_request
from dashboard.callbacks.drilldown import controller_outputs, edit_values, normalize, update_state
from dashboard.config import Config
from dashboard.html_report import report_html
from dashboard.loading import load_model
from dashboard.server import create_app
from dashboard.state import clean_state, default_state, search_from_state, state_from_search
from dashboard.views import contributions, plan_state, whatif


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("whatif-cache")), max_curves=200))._wip_context


def _state(ctx, ws_id: str, **changes) -> dict:
    return normalize(ctx, {**default_state(), "ws": ws_id, **changes})[0]


def _results(ctx, ws_id: str, kinds=(whatif.KIND, contributions.KIND), **changes) -> dict:
    state = _state(ctx, ws_id, **changes)
    ws = ctx.store.workspace(ws_id)
    planned = plan_state(ctx, ws, state)
    tasks = [t for t in planned["tasks"] if t["kind"] in kinds]
    jobs.run(ctx.store, ws, tasks, policy=ctx.policy)
    return {"state": state, "keys": planned["keys"], "tasks": tasks}


def _model_and_data(ctx, ws_id: str, model_name: str):
    ws = ctx.store.workspace(ws_id)
    entry = ws.model(model_name)
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    return model, ctx.store.data(ws)[list(entry.features)]


# --- the edit in the state ------------------------------------------------------------------------
def test_the_edit_round_trips_through_the_url_and_needs_a_row():
    state = clean_state({**default_state(), "obs": "7", "edit": {"bmi": 30.5, "sex": 1}})
    search = search_from_state(state)
    assert "edit=" in search
    assert state_from_search(search)["edit"] == {"bmi": 30.5, "sex": 1}
    # without a selected row there is nothing to edit
    assert clean_state({**default_state(), "edit": {"bmi": 30.5}})["edit"] == {}
    assert "edit" not in search_from_state({**state, "obs": None})


@pytest.mark.parametrize(
    "raw",
    [
        "not a dict",
        {"bmi": True},  # a bool is not a number
        {"bmi": float("inf")},
        {"bmi": 10**400},
        {"bmi": [1, 2]},
        {7: 1.0},  # keys are column texts
        {"bmi": "x" * 5000},
    ],
)
def test_forged_edits_are_dropped(raw):
    assert clean_state({**default_state(), "obs": "1", "edit": raw})["edit"] == {}


def test_forged_edit_in_a_url_is_dropped():
    for search in ("?ws=demo-x3&obs=1&edit=%7Bnot-json", "?ws=demo-x3&obs=1&edit=%5B1%2C2%5D"):
        assert state_from_search(search)["edit"] == {}


def test_normalize_keeps_only_what_the_data_allows(ctx):
    data = ctx.store.data(ctx.store.workspace("demo-diabetes"))
    row = data.loc[7]
    state = _state(
        ctx,
        "demo-diabetes",
        obs="7",
        edit={
            "bmi": 1000.0,  # above the observed maximum: clamped to it
            "age": -5,  # below the minimum: clamped
            "s1": float(row["s1"]),  # the row's own value: not an edit
            "nope": 3.0,  # not a column of the model
            "progression": 10.0,  # the target is no model input
            "sex": "two",  # a numeric column takes numbers only
        },
    )
    assert state["edit"] == {"age": float(data["age"].min()), "bmi": float(data["bmi"].max())}


def test_clean_edits_of_categorical_and_integer_columns():
    data = pd.DataFrame(
        {"klass": ["1st", "2nd", "3rd", "2nd"], "sibs": [0, 1, 5, 2], "flag": [True, False, True, True]}
    )
    edits = planning.clean_edits(data, ["klass", "sibs", "flag"], 1, {"klass": "3rd", "sibs": 2.6, "flag": "True"})
    assert edits == {"flag": "True", "klass": "3rd", "sibs": 3}
    assert planning.clean_edits(data, ["klass", "sibs"], 1, {"klass": "4th", "sibs": 1}) == {}


def test_selecting_another_row_drops_the_edit_and_reset_clears_it(ctx):
    state = _state(ctx, "demo-diabetes", obs="7", edit={"bmi": 35.0})
    assert state["edit"] == {"bmi": 35.0}
    same, _ = update_state(ctx, state, ids.CLICKED_ROW, {"clicked": {"row": 7}})
    assert same["edit"] == {"bmi": 35.0}
    other, _ = update_state(ctx, state, ids.CLICKED_ROW, {"clicked": {"row": 8}})
    assert other["obs"] == "8" and other["edit"] == {}
    reset, _ = update_state(ctx, state, ids.WHATIF_RESET, {})
    assert reset["edit"] == {} and reset["obs"] == "7"


def test_the_form_edits_the_row_it_was_drawn_for(ctx):
    state = _state(ctx, "demo-diabetes", obs="7")
    data = ctx.store.data(ctx.store.workspace("demo-diabetes"))
    form = {c: float(v) for c, v in data.loc[7].drop("progression").items()}  # every field, as drawn
    out = controller_outputs(ctx, state, ids.WHATIF_EDIT, {"whatif": {"row": "7", "edit": {**form, "bp": 120.0}}})
    assert out["state"]["edit"] == {"bp": 120.0}
    assert state_from_search(out["search"])["edit"] == {"bp": 120.0}  # shared by the link
    # a form drawn for row 8 (the selection moved on) edits nothing
    stale = controller_outputs(ctx, state, ids.WHATIF_EDIT, {"whatif": {"row": "8", "edit": {"bp": 120.0}}})
    assert stale["state"] is no_update and stale["search"] is no_update


# --- the task and the views -----------------------------------------------------------------------
def test_planned_with_the_edit_in_its_key(ctx):
    plain = _results(ctx, "demo-diabetes", kinds=(), obs="7")
    edited = _results(ctx, "demo-diabetes", kinds=(), obs="7", edit={"bmi": 35.0})
    for kind in (whatif.KIND, contributions.KIND):
        assert plain["keys"][kind] != edited["keys"][kind]
    ws = ctx.store.workspace("demo-diabetes")
    planned = plan_state(ctx, ws, edited["state"])
    by_kind = {t["kind"]: t["params"] for t in planned["tasks"] if t["kind"] in (whatif.KIND, contributions.KIND)}
    assert by_kind[whatif.KIND]["edit"] == {"bmi": 35.0} and by_kind[contributions.KIND]["edit"] == {"bmi": 35.0}
    # without an edit the contributions task (and its cache key) is what it was before what-if existed
    assert (
        "edit"
        not in [t for t in plan_state(ctx, ws, plain["state"])["tasks"] if t["kind"] == "contributions"][0]["params"]
    )


def test_what_if_view_shows_the_models_prediction_on_the_edited_row(ctx):
    results = _results(ctx, "demo-diabetes", obs="7", model="random forest", feature="bmi", edit={"bmi": 35.0})
    model, X = _model_and_data(ctx, "demo-diabetes", "random forest")
    edited = X.loc[[7]].copy()
    edited["bmi"] = 35.0
    expected, before = model.predict(edited)[0], model.predict(X.loc[[7]])[0]
    out = views.render(ctx, "whatif", results)
    assert f"{before:.4g} → {expected:.4g}" in out["info"] and "bmi" in out["info"]
    points = [t for t in out["figure"].data if len(t.x) == 1]
    assert [p.x[0] for p in points] == [X.loc[7, "bmi"], 35.0]
    assert_allclose([p.y[0] for p in points], [before, expected], rtol=1e-9)
    assert out["figure"].layout.title.text == "How the prediction for row 7 moves with bmi"
    # the form: one field per model input, the edited one marked and saying what the row had
    fields = {f.children[0].children: f for f in out["form"]}
    assert set(fields) == set(X.columns)
    assert fields["bmi"].className == "whatif-field edited" and fields["age"].className == "whatif-field"
    assert fields["bmi"].children[1].children == f"was {X.loc[7, 'bmi']:.4g}"
    assert out["reset_style"] == {}
    # CIU: bars of the edited row, open markers of the original
    names = [t.name for t in out["ciu"].data]
    assert "CI × CU before the edit" in names and "CI before the edit" in names


def test_contributions_explain_the_edited_row(ctx):
    results = _results(ctx, "demo-diabetes", obs="7", model="ridge", edit={"bmi": 35.0, "s5": 4.0})
    model, X = _model_and_data(ctx, "demo-diabetes", "ridge")
    edited = X.loc[[7]].copy()
    edited["bmi"], edited["s5"] = 35.0, 4.0
    out = views.render(ctx, "contributions", results)
    bars = out["figure"].data[0]
    assert_allclose(bars.x[-1], model.predict(edited)[0], rtol=1e-9)
    ref = compute.shapley_contributions(
        model, X, edited, n_background=contributions.N_BACKGROUND, random_state=planning.SEED
    )
    table = {r["feature"]: r for r in out["data"]}
    assert table["bmi"]["value"] == "35"
    assert_allclose(table["bmi"]["contribution"], ref.values["bmi"], rtol=1e-12)
    assert "(as edited)" in out["figure"].layout.title.text


def test_a_classifier_what_if_in_percentage_points(ctx):
    results = _results(ctx, "demo-cancer", kinds=(whatif.KIND,), obs="3", model="logistic regression")
    model, X = _model_and_data(ctx, "demo-cancer", "logistic regression")
    feature = results["state"]["feature"]
    high = float(X[feature].max())
    results = _results(
        ctx, "demo-cancer", kinds=(whatif.KIND,), obs="3", model="logistic regression", edit={feature: high}
    )
    ws = ctx.store.workspace("demo-cancer")
    edited = X.loc[[3]].copy()
    edited[feature] = high
    p = model.predict_proba(edited)[0, list(model.classes_).index(ws.output)] * 100
    out = views.render(ctx, "whatif", results)
    assert f"→ {p:.1f} %" in out["info"]
    assert out["figure"].layout.yaxis.title.text.startswith("probability of")


def test_without_a_selection_every_observation_panel_explains_the_default_row(ctx):
    """Issue 28: no "No observation selected" beside a panel showing a row. Once the curves
    are cached the planner resolves the default observation (the most influential row over
    all features), plans the what-if and contributions for it, and every panel of the
    section (CIU too) names that row and says it is the default."""
    state = _state(ctx, "demo-x3", feature="X2")
    ws = ctx.store.workspace("demo-x3")
    before = plan_state(ctx, ws, state)
    assert before["state"]["obs"] is None  # the curves are not cached yet: no row to name
    assert not [t for t in before["tasks"] if t["kind"] in (whatif.KIND, contributions.KIND)]
    blank = views.render(ctx, "whatif", {"state": state, "keys": before["keys"]})
    assert "No observation" not in str(blank) and blank["form"] == []
    jobs.run(ctx.store, ws, planning.missing(ctx.store, before["tasks"]), policy=ctx.policy)

    summary = ctx.store.get(before["keys"]["summary"])
    total = summary.local.sum(axis=1)  # brute force: the row whose ICI integrals sum highest
    expected = total.index[int(np.argmax(total.to_numpy()))]
    local = summary.local["X2"]
    after = plan_state(ctx, ws, state)
    assert after["state"]["obs"] == str(expected) and after["state"]["obs_default"]
    # a feature switch keeps the row (and its cached what-if and contributions)
    assert plan_state(ctx, ws, {**state, "feature": "X1"})["state"]["obs"] == str(expected)
    planned = {t["kind"]: t for t in after["tasks"]}
    assert planned[whatif.KIND]["params"]["obs"] == str(expected)
    assert planned[contributions.KIND]["params"]["obs"] == str(expected)
    # a subgroup moves the default into it
    data = ctx.store.data(ws)
    other = 1 - data.loc[expected, "X3"]
    inside = _state(ctx, "demo-x3", feature="X2", subgroup=f"X3 == {other}")
    row = plan_state(ctx, ws, inside)["state"]["obs"]
    assert data.loc[planning.row_label(row, data.index), "X3"] == other
    in_group = total[data.loc[total.index, "X3"] == other]
    assert row == str(in_group.index[int(np.argmax(in_group.to_numpy()))])

    jobs.run(ctx.store, ws, planning.missing(ctx.store, after["tasks"]), policy=ctx.policy)
    results = {"state": state, "keys": after["keys"]}
    named = f"row {expected} (shown by default: the most influential row, its ICI integrals summed over the features)"
    texts = {name: str(views.render(ctx, name, results)) for name in ("whatif", "contributions", "ciu")}
    for name, text in texts.items():
        assert named[1:] in text, name  # "Row 412 (…" opening a sentence
        assert "No observation" not in text and "no observation" not in text, name
    table = views.render(ctx, "observation", results)["data"]
    assert {"column": "ICI integral (X2)", "value": f"{local.loc[expected]:.4g}"} in table
    form = views.render(ctx, "whatif", results)["form"]
    assert form and all(f.children[1].id["row"] == str(expected) for f in form)


def test_editing_the_default_row_selects_it():
    """The what-if form of the default row sends its row with the edit: the edit selects it."""
    state = {**default_state(), "ws": "demo-x3", "obs": None}
    sent = {"row": "42", "edit": {"X1": 0.5}}
    edited = edit_values(state, {"whatif": sent})
    assert edited["obs"] == "42" and edited["edit"] == {"X1": 0.5}
    moved_on = {**state, "obs": "7"}
    assert edit_values(moved_on, {"whatif": sent}) == moved_on  # a form of another row


def test_export_is_the_librarys_table(ctx):
    results = _results(ctx, "demo-diabetes", kinds=(whatif.KIND,), obs="7", edit={"bmi": 35.0})
    sent = views.export(ctx, whatif.EXPORT, results)
    frame = pd.read_csv(pd.io.common.StringIO(sent["content"]), index_col=0)
    assert frame.loc["bmi", "edited"] == 35.0
    assert {"CI original", "CU edited"} <= set(frame.columns)
    assert np.isfinite(frame.loc["(prediction)", ["original", "edited"]].astype(float)).all()


def test_the_report_carries_the_what_if_and_its_contributions(ctx):
    results = _results(
        ctx, "demo-diabetes", kinds=(whatif.KIND, contributions.KIND, "profiles"), obs="7", edit={"bmi": 35.0}
    )
    page = report_html(ctx, results)
    assert "What if this observation were different?" in page and "Why this prediction" in page
    assert "with bmi" in page and "(as edited)" in page


def test_one_job_computes_the_default_rows_what_if(tmp_path):
    """The job that computes the curves also computes the what-if and contributions of the
    default observation they name: after it the page needs no second job."""
    ctx = create_app(Config(cache_dir=str(tmp_path / "cache"), max_curves=200))._wip_context
    state = _state(ctx, "demo-x3")
    first = resolve_state(ctx, state, None)
    assert isinstance(first.request, dict) and first.results["state"]["obs"] is None
    assert run_request(ctx, first.request).get("ok")
    after = resolve_state(ctx, state, None)
    assert not isinstance(after.request, dict) and not after.results.get("pending")
    shown = plan_state(ctx, ctx.store.workspace("demo-x3"), state)
    assert shown["state"]["obs_default"]
    for kind in (whatif.KIND, contributions.KIND):
        assert ctx.store.has(shown["keys"][kind]["random forest"]), kind


def test_exclude_selected_with_none_chosen_excludes_the_row_shown(ctx):
    """ "Exclude selected observation" while every panel shows the default row excludes that
    row, and another becomes the default (it did nothing before: no row was chosen)."""
    from dashboard import ids

    state = _state(ctx, "demo-x3")
    ws = ctx.store.workspace("demo-x3")
    jobs.run(ctx.store, ws, planning.missing(ctx.store, plan_state(ctx, ws, state)["tasks"]), policy=ctx.policy)
    shown = plan_state(ctx, ws, state)["state"]["obs"]
    assert shown is not None
    after, _ = update_state(ctx, state, ids.EXCLUDE_SELECTED, {"state": state})
    assert after["exclude"] == [shown] and after["obs"] is None
    assert plan_state(ctx, ws, after)["state"]["obs"] not in (None, shown)


def test_a_probability_is_named_by_its_class_when_the_data_set_names_none():
    """Issue 39, words: a multiclass model's what-if read 'Predicted cultivar of row 44: 0.9452 →
    0.1349'; the class the result explains names the probability, in %."""
    from types import SimpleNamespace

    from dashboard.views.whatif import _units

    units = _units(SimpleNamespace(output=None, target="cultivar"), "cultivar 2")
    assert (units.scale, units.unit, units.what) == (100.0, "pp", "probability of cultivar 2 (%)")
    assert _units(SimpleNamespace(output=None, target="price"), None).what == "predicted price"


def test_the_grids_are_kept_and_the_next_rows_what_if_reads_them(ctx, monkeypatch):
    """The what-if's grids depend on the data alone: built once per data set and model, then
    the what-if of every other row reads them (no sort of every column per click), with the
    numbers of a call that builds them."""
    _results(ctx, "demo-diabetes", kinds=(whatif.KIND,), obs="11", model="random forest")
    built = compute.what_if_grids
    monkeypatch.setattr(compute, "what_if_grids", lambda *a, **k: pytest.fail("the grids were built again"))
    second = _results(ctx, "demo-diabetes", kinds=(whatif.KIND,), obs="23", model="random forest", edit={"bmi": 30.0})
    assert second["tasks"]  # computed now, from the kept grids
    found = ctx.store.get(second["tasks"][0]["key"])
    model, X = _model_and_data(ctx, "demo-diabetes", "random forest")
    direct = compute.what_if(model, X, 23, {"bmi": 30.0}, grid=whatif.GRID, grids=built(X, whatif.GRID))
    for f in X.columns:  # the forest (n_jobs=-1) adds its trees in the threads' order: to rounding
        np.testing.assert_array_equal(found.grids[f], direct.grids[f])
        assert_allclose(found.curves[f], direct.curves[f], rtol=1e-12)
    assert_allclose(found.prediction, direct.prediction, rtol=1e-12)
