"""dashboard logic without a browser: state, controller, jobs, views, export, store, upload, load, config.

Callbacks are thin wrappers around plain functions taking a ``Context``; these tests call the
functions on a context built by ``create_app`` on a temporary cache folder, with the demo-x3
results (X3 interaction simulation, random forest, 200 explained rows) computed once.
"""

from __future__ import annotations

import io
import os
import re
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import plotly
import pytest
import skops.io as sio
from dash import no_update
from numpy.testing import assert_allclose
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import compute
from dashboard import figures, ids, planning, tasks, views
from dashboard.callbacks.compute import finish_job, request_id, resolve_state, run_request
from dashboard.callbacks.drilldown import (
    build_condition,
    control_options,
    controller_outputs,
    parse_values,
    update_state,
)
from dashboard.callbacks.load import describe_data, describe_models, load_outputs, load_workspace
from dashboard.config import Config, from_env, parse_args
from dashboard.html_report import report_html
from dashboard.server import create_app
from dashboard.state import (
    default_state,
    normalize,
    search_from_state,
    state_from_search,
)
from dashboard.store import Store, result_key, safe_name
from dashboard.views import export as export_table
from dashboard.views import influential as influential_view
from dashboard.views import pfi as pfi_view
from dashboard.views import plan_state
from dashboard.views.pfi import DEFAULT_REPEATS, MAX_REPEATS

FEATURES = ["X1", "X2", "X3"]


# --- fixtures ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def app(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("wip-cache")), max_curves=200))


@pytest.fixture(scope="session")
def ctx(app):
    return app._wip_context


def _resolved(ctx, state):
    """The results record of a state, computing what is missing first."""
    resolved = resolve_state(ctx, state, None)
    results, request = resolved.results, resolved.request
    if isinstance(request, dict):
        assert run_request(ctx, request).get("ok"), "background job failed"
        resolved = resolve_state(ctx, state, None)
        results, request = resolved.results, resolved.request
    assert isinstance(results, dict) and "keys" in results
    return results


@pytest.fixture(scope="session")
def state(ctx):
    state, error = normalize(ctx, default_state())
    assert error is None
    return state


@pytest.fixture(scope="session")
def results(ctx, state):
    return _resolved(ctx, state)


@pytest.fixture(scope="session")
def sub_state(state):
    return {**state, "subgroup": "X3 == 0"}


@pytest.fixture(scope="session")
def sub_results(ctx, sub_state):
    return _resolved(ctx, sub_state)


@pytest.fixture(scope="session")
def data(ctx):
    return ctx.store.data(ctx.store.workspace("demo-x3"))


@pytest.fixture(scope="session")
def summary(ctx, results):
    return ctx.store.get(results["keys"]["summary"])


@pytest.fixture(scope="session")
def profiles(ctx, results):
    return {f: ctx.store.get(key) for f, key in results["keys"]["profiles"].items()}


@pytest.fixture(scope="session")
def x3_zero(data):
    return data["X3"] == 0


def _inputs(state, **values):
    """Controller inputs as ``register`` builds them (the previous subgroup from the state)."""
    return {"previous_subgroup": state.get("subgroup", ""), **values}


# --- state in the URL ----------------------------------------------------------------------
def test_search_round_trip_keeps_every_field():
    """state_from_search(search_from_state(s)) == s, with quotes, spaces, == and exclusions."""
    s = {
        **default_state(),
        "ws": "demo-x3",
        "model": "random forest",
        "feature": "X2",
        "subgroup": "`my col` == 'a b' and city == \"São Paulo\" and X3 == 0 and X1 >= -1.5",
        "obs": "17",
        "centered": True,
        "repeats": 40,
        "sfimp": True,
        "exclude": ["17", "250", "3"],
        "ale_k": 35,
    }
    assert state_from_search(search_from_state(s)) == s


@pytest.mark.parametrize(
    "query, repeats",
    [
        ("?repeats=abc", DEFAULT_REPEATS),
        ("?repeats=1e3", DEFAULT_REPEATS),
        ("?repeats=99999999999999", MAX_REPEATS),
        ("?repeats=-4", 2),
    ],
)
def test_bad_repeats_in_query_fall_back(query, repeats):
    """A non-integer repeats falls back to the default; out-of-range ones are clipped."""
    assert state_from_search("?ws=demo-x3&" + query.lstrip("?"))["repeats"] == repeats


def test_unknown_query_keys_are_ignored():
    """Keys the state does not know leave the default state untouched."""
    assert state_from_search("?ws=demo-x3&evil=1&__proto__=x") == {**default_state(), "ws": "demo-x3"}


# --- controller ----------------------------------------------------------------------------
def test_pfi_bar_click_selects_feature(ctx, state):
    """A click on a PFI bar (customdata = feature name) selects that feature."""
    click = {"select_pfi_graph": {"points": [{"customdata": "X2"}]}}
    new, error = update_state(ctx, state, pfi_view.PFI_GRAPH, _inputs(state, **click))
    assert (new["feature"], error) == ("X2", None)


def test_ici_curve_click_selects_observation(ctx, state):
    """A click on an ICI curve (mapped clientside to its row label 17) selects observation "17"."""
    new, error = update_state(ctx, state, ids.CLICKED_ROW, _inputs(state, clicked={"row": 17, "t": 1}))
    assert (new["obs"], error) == ("17", None)


def test_bad_subgroup_keeps_previous(ctx, state):
    """An unknown column is reported by name and the previous subgroup stays."""
    before = {**state, "subgroup": "X1 > 0"}
    new, error = update_state(ctx, before, ids.SUBGROUP_APPLY, _inputs(before, subgroup_text="X9 == 0"))
    assert "X9" in error
    assert new["subgroup"] == "X1 > 0"


def test_empty_subgroup_is_refused(ctx, state):
    """A condition selecting 0 rows is refused with a message and not applied."""
    before = {**state, "subgroup": "X1 > 0"}
    new, error = update_state(ctx, before, ids.SUBGROUP_APPLY, _inputs(before, subgroup_text="X1 > 1000"))
    assert "selects 0 of 500 rows" in error
    assert new["subgroup"] == "X1 > 0"


@pytest.mark.parametrize("current, expected", [("", "X3 == 0"), ("X1 > 0", "(X1 > 0) and X3 == 0")])
def test_condition_builder_ands_with_subgroup(ctx, state, current, expected):
    """The builder's X3 == 0 becomes the subgroup, ANDed with an existing one."""
    before = {**state, "subgroup": current}
    new, error = update_state(
        ctx, before, ids.COND_ADD, _inputs(before, cond_column="X3", cond_op="==", cond_value="0")
    )
    assert (new["subgroup"], error) == (expected, None)


def test_between_needs_two_values(ctx, state):
    """'between' with one value is an error and leaves the subgroup as it was."""
    new, error = update_state(
        ctx, state, ids.COND_ADD, _inputs(state, cond_column="X1", cond_op="between", cond_value="0")
    )
    assert "two values" in error
    assert new["subgroup"] == state["subgroup"]


def test_build_condition_between_and_parse_values():
    """Typed values parse to numbers, booleans and unquoted strings; between takes two."""
    assert parse_values("1, 2.5, 'a', true") == [1, 2.5, "a", True]
    assert build_condition("X1", "between", "0, 1.5") == "X1 between 0 and 1.5"


def test_unknown_workspace_falls_back_to_demo(ctx, state):
    """An unknown workspace id shows the default demo with an error naming the id."""
    new, error = update_state(ctx, state, ids.WS_SELECT, _inputs(state, ws="abcdefghijklmnopqrstuv"))
    assert new["ws"] == "demo-x3"
    assert "abcdefghijklmnopqrstuv" in error


def test_more_repetitions_double_up_to_max(ctx, state):
    """'More repetitions' doubles repeats and stops at MAX_REPEATS."""
    seen, current = [], state
    for _ in range(6):
        current, _ = update_state(ctx, current, ids.REPEATS_MORE, _inputs(current))
        seen.append(current["repeats"])
    assert seen == [20, 40, 80, 160, MAX_REPEATS, MAX_REPEATS]


def test_exclude_negative_selected_and_clear(ctx, state):
    """Exclusions accumulate (negative rows, then the selected one) and clear to []."""
    s1, _ = update_state(ctx, state, ids.EXCLUDE_NEGATIVE, _inputs(state, negative=["7", "5"]))
    s2, _ = update_state(ctx, {**s1, "obs": "17"}, ids.EXCLUDE_SELECTED, _inputs(s1))
    s3, _ = update_state(ctx, s2, ids.EXCLUDE_CLEAR, _inputs(s2))
    assert (s1["exclude"], s2["exclude"], s3["exclude"]) == (["5", "7"], ["17", "5", "7"], [])


def test_control_options_list_models_features_and_columns(ctx, state):
    """The dropdowns of demo-x3: its model, its features and all columns for the builder."""
    options = control_options(ctx, state)
    assert set(options) == {"ws_options", "model_options", "feature_options", "column_options"}
    demos, models = options["ws_options"], options["model_options"]
    features, columns = options["feature_options"], options["column_options"]
    assert "demo-x3" in [d["value"] for d in demos]
    assert (models, [f["value"] for f in features]) == (["random forest"], FEATURES)
    assert [f["label"] for f in features] == FEATURES  # no labels: the column names
    assert [c["value"] for c in columns] == FEATURES + ["Y"]


def test_uploads_of_this_tab_stay_listed_after_switching_to_a_demo(ctx, model_upload, data_upload):
    """Issue 11, defect 8: an uploaded data set vanished from the list once a demo was shown.
    The tab's own uploads (its session storage) stay listed; unknown or forged ids are not."""
    loaded = load_workspace(ctx, [model_upload], data_upload, "y", None, None, [], False, None)["ws"]
    demo = normalize(ctx, {**default_state(), "ws": "demo-x3"})[0]
    forged = ["no-such-workspace", 42, "x" * 5000, None]
    listed = [o["value"] for o in control_options(ctx, demo, [loaded, *forged])["ws_options"]]
    assert loaded in listed and listed.count(loaded) == 1
    from dashboard.demos import DEMOS

    assert not set(listed) - {loaded, *DEMOS}
    assert loaded not in [o["value"] for o in control_options(ctx, demo)["ws_options"]]  # another tab: not listed


def test_ici_table_click_on_second_page_selects_that_row(app, ctx, state, results):
    """A click on the first row of the ICI table's second page selects that row."""
    rows = views.render(ctx, "influential", results)["data"]
    page_size = app.layout[influential_view.ICI_TABLE].page_size
    assert len(rows) > page_size
    clicked = rows[page_size]
    # what dash-table sends: the viewport (page) row index, and row_id only when rows have an "id"
    cell = {"row": 0, "column": 0, "column_id": "row"}
    if "id" in clicked:
        cell["row_id"] = clicked["id"]
    new, _ = update_state(ctx, state, influential_view.ICI_TABLE, _inputs(state, select_ici_table=cell))
    assert new["obs"] == str(clicked["row"])


# --- resolving a state ---------------------------------------------------------------------
def test_cached_state_resolves_without_request(ctx, state, results):
    """Once computed, a state resolves to its result keys with no job request."""
    resolved = resolve_state(ctx, state, None)
    again, request, status = resolved.results, resolved.request, resolved.status
    assert again == results
    assert not isinstance(request, dict) and status is None


def test_new_subgroup_needs_only_pfi_tasks(ctx, state, results):
    """A new subgroup reuses the cached profiles: every missing task permutes on the new rows
    (PFI, and the dependent features shuffled together)."""
    sub = {**state, "subgroup": "X1 > 0.123"}
    request = resolve_state(ctx, sub, None).request
    assert request["state"]["subgroup"] == "X1 > 0.123"
    todo = planning.missing(ctx.store, plan_state(ctx, ctx.store.workspace(sub["ws"]), sub)["tasks"])
    # the row tasks: PFI and every declared task that runs on the rows PFI uses (from the registry),
    # and SFIMP where it is computed by itself (a cheap demo)
    row_kinds = {"pfi"} | {spec.kind for spec in views.task_specs() if spec.rows}
    ws = ctx.store.workspace(sub["ws"])
    if tasks.sfimp_by_itself(ws, len(ctx.store.data(ws))):
        row_kinds.add("sfimp")
    assert sorted(t["kind"] for t in todo) == sorted(row_kinds)


def test_a_state_being_computed_never_shows_another_states_charts(ctx, state, results):
    """Issue 11, defect 2: while the job of a new data set ran, the page showed the new header
    over the previous data set's charts. The pending state's record replaces them at once:
    its cached parts show, the rest waits."""
    other, error = normalize(ctx, {**state, "ws": "demo-diabetes", "subgroup": "age > 0.0123"})
    assert error is None
    resolved = resolve_state(ctx, other, None)
    pending, request, status = resolved.results, resolved.request, resolved.status
    assert isinstance(request, dict) and status.startswith("Computing")
    assert pending["state"]["ws"] == "demo-diabetes" and pending["pending"]
    pfi = views.render(ctx, "pfi", pending)["figure"]
    assert not pfi.data and "Waiting" in pfi.layout.annotations[0].text
    ici = views.render(ctx, "ici", pending)["figure"]
    assert not any("X1" in str(t.name) for t in ici.data)  # nothing of demo-x3
    # once the job is done, the same state draws its charts (nothing cached from the wait)
    assert run_request(ctx, request).get("ok")
    resolved = resolve_state(ctx, other, None)
    done, request = resolved.results, resolved.request
    assert not isinstance(request, dict) and not done.get("pending")
    assert views.render(ctx, "pfi", done)["figure"].data and views.render(ctx, "ici", done)["figure"].data
    # a cached feature switch of the first data set still draws everything from the cache
    resolved = resolve_state(ctx, {**state, "feature": "X2"}, None)
    switched, request = resolved.results, resolved.request
    assert not isinstance(request, dict) and views.render(ctx, "pfi", switched)["figure"].data


def test_finish_job_reports_the_job_error(ctx, state, results):
    """A failed job for the current state shows its error as results and status."""
    pending = {**state, "subgroup": "X2 > 0.456"}
    request = resolve_state(ctx, pending, None).request
    finished = finish_job(ctx, pending, {"request": request["request"], "error": "model crashed"})
    out, status, retry = finished["results"], finished["status"], finished["retry"]
    assert (out["error"], status) == ("model crashed", "model crashed")
    assert retry == {}  # Retry shown: a time or memory limit may pass on a second try


# --- aggregations of the summary -----------------------------------------------------------
def test_conditional_pfi_all_is_eq9(summary, profiles):
    """The 'all' column is the mean ICI integral and equals each profile's importance (Eq. 9)."""
    table = summary.conditional_pfi()
    for f, prof in profiles.items():
        assert_allclose(table.loc[f, "all"], np.mean(prof.local_importance), rtol=1e-12)
        assert_allclose(table.loc[f, "all"], prof.importance, rtol=1e-12)


def test_conditional_pfi_reproduces_table1(summary, x3_zero):
    """On X3 == 0 X1's PFI is > 10x X2's, on the complement the reverse (seed 000, Table 1)."""
    table = summary.conditional_pfi(x3_zero)
    assert table.loc["X1", "subgroup"] > 10 * table.loc["X2", "subgroup"]
    assert table.loc["X2", "complement"] > 10 * table.loc["X1", "complement"]
    assert table.attrs["counts"]["subgroup"] + table.attrs["counts"]["complement"] == len(summary.rows)


def test_conditional_pfi_without_excluded_is_kept_mean(summary):
    """The 'without excluded' column is the mean ICI integral over the rows kept."""
    rows = summary.rows
    excluded = [str(rows[0]), str(rows[5]), str(rows[9])]
    table = summary.conditional_pfi(None, excluded)
    kept = summary.local.drop(index=[rows[0], rows[5], rows[9]])
    assert_allclose(table["without excluded"].reindex(FEATURES), kept[FEATURES].mean(), rtol=1e-12)
    assert table.attrs["counts"]["without excluded"] == len(rows) - 3


def test_global_ci_is_mean_relative_ice_range(summary, profiles):
    """Global CI equals a loop over rows of (ICE max - ICE min) / (output range)."""
    lo, hi = summary.out_range
    expected = {}
    for f, prof in profiles.items():
        ranges = [
            max(prof.pred[i].max(), prof.base_pred[i]) - min(prof.pred[i].min(), prof.base_pred[i])
            for i in range(len(prof.rows))
        ]
        expected[f] = np.mean(ranges) / (hi - lo)
    assert_allclose(summary.global_ci()["CI"].reindex(FEATURES), pd.Series(expected)[FEATURES], rtol=1e-10)


def test_observation_ciu_matches_ciu_from_profiles(summary, profiles):
    """CIU read off the summary equals compute.ciu_from_profiles for the same row."""
    row = summary.rows[7]
    ours = summary.ciu(str(row))
    ref = compute.ciu_from_profiles(profiles, row, out_range=summary.out_range)
    for col in ("CI", "CU", "influence"):
        assert_allclose(ours[col].reindex(FEATURES), ref[col].reindex(FEATURES), atol=1e-12)


def test_influential_top_bottom_and_negatives(summary, profiles):
    """influential lists the k largest and k smallest ICI integrals and counts negatives."""
    prof = profiles["X1"]
    local = pd.Series(prof.local_importance, index=prof.rows)
    table = summary.influential("X1", k=3)
    assert list(table.index[:3]) == list(local.sort_values(ascending=False, kind="stable").index[:3])
    assert list(table.index[3:]) == list(local.sort_values(kind="stable").index[:3])
    assert table.attrs["n_negative"] == int((local < 0).sum())


def test_select_rows_with_exclusions(data):
    """select_rows is the condition minus the excluded labels (given as strings or ints)."""
    zero = data.index[data["X3"] == 0]
    mask = planning.select_rows(data, "X3 == 0", [str(zero[0]), int(zero[1]), "not-a-row"])
    expected = (data["X3"] == 0) & ~data.index.isin(zero[:2])
    assert mask.equals(expected)


def test_rows_id_order_insensitive_and_specific():
    """rows_id ignores the order and type of exclusions, and differs for other selections."""
    a = planning.rows_id("X3 == 0", ["2", "1"])
    assert re.fullmatch(r"[0-9a-f]{24}", a)
    assert a == planning.rows_id("X3 == 0", ["1", "2"]) == planning.rows_id(" X3 == 0 ", [1, 2])
    assert (
        len({a, planning.rows_id("X3 == 0", ["1"]), planning.rows_id("X3 == 1", ["1", "2"]), planning.rows_id("", [])})
        == 4
    )


def test_result_key_depends_on_content_only(ctx):
    """result_key changes with model sha, data sha, loss or params, not with names or titles."""
    ws = ctx.store.workspace("demo-x3")
    model = ws.models[0]
    base = result_key("pfi", ws, model, rows="r", n_repeats=10)
    changed = [
        result_key("pfi", ws, replace(model, sha="0" * 64), rows="r", n_repeats=10),
        result_key("pfi", replace(ws, data_sha="0" * 64), model, rows="r", n_repeats=10),
        result_key("pfi", replace(ws, loss="absolute_error"), model, rows="r", n_repeats=10),
        result_key("pfi", ws, model, rows="r", n_repeats=20),
    ]
    same = [
        result_key("pfi", ws, replace(model, name="renamed"), rows="r", n_repeats=10),
        result_key("pfi", replace(ws, title="other title"), model, n_repeats=10, rows="r"),
    ]
    assert base not in changed and len(set(changed)) == 4
    assert same == [base, base]


# --- views -----------------------------------------------------------------------------------
def test_ici_largest_integral_curve_is_the_largest(ctx, results, profiles):
    """The ICI curve in the largest-integral colour is the row with the largest ICI integral
    of the feature."""
    ici = views.render(ctx, "ici", results)["figure"]
    largest = [t for t in ici.data if t.line.color == figures.LARGEST_COLOR]
    prof = profiles["X1"]
    assert len(largest) == 1
    assert largest[0].customdata[0] == prof.rows[np.argmax(prof.local_importance)]


def test_pi_figure_has_subgroup_and_complement(ctx, sub_results, profiles, x3_zero):
    """With a subgroup the PI figure has 3 curves: all, the subgroup and its complement."""
    pi = views.render(ctx, "pi", sub_results)["figure"]
    curves = [t for t in pi.data if t.type == "scatter"]
    prof = profiles["X1"]
    inside = x3_zero.reindex(prof.rows).to_numpy(bool)
    assert len(curves) == 3
    assert_allclose(curves[0].y, prof.pi)
    assert_allclose(curves[1].y, prof.subset(inside).pi)
    assert_allclose(curves[2].y, prof.subset(~inside).pi)


def test_pfi_table_has_group_columns_with_counts(ctx, sub_results, summary, x3_zero, data):
    """The PFI-within-the-subgroup table: all rows (the Overview bars on every row, with their
    standard error), then the subgroup and the complement from the ICI curves, each with its n."""
    columns = views.render(ctx, "conditional_pfi", sub_results)["columns"]
    n_sub = int(x3_zero.reindex(summary.rows).sum())
    n_all = len(summary.rows)
    assert [c["name"] for c in columns] == [
        "feature",
        f"all (n={len(data)}): PFI as the Overview bars on all rows",
        "all: ± standard error",
        f"subgroup (n={n_sub}): PFI within, from the ICI curves",
        f"complement (n={n_all - n_sub}): PFI within, from the ICI curves",
    ]


def test_observation_view_defaults_to_largest_integral(ctx, results, summary):
    """With no observation selected the CIU view shows the row whose ICI integrals sum
    highest over the features, and says it is the default."""
    info = views.render(ctx, "ciu", results)["info"]
    rows = views.render(ctx, "observation", results)["data"]
    best = summary.local.sum(axis=1).idxmax()
    assert f"row {best} (shown by default: the most influential row" in info
    ici = next(r["value"] for r in rows if r["column"] == "ICI integral (X1)")
    assert ici == f"{summary.local.loc[best, 'X1']:.4g}"  # shown to 4 significant digits


def test_ale_view_has_default_k_intervals_none_empty(ctx, results, profiles):
    """The ALE panel: 20 type-1 quantile intervals of the explained rows (none empty), not one
    interval per grid point (499 intervals, 299 empty, on demo-x3 before)."""
    from dashboard.views.ale import DEFAULT_ALE_K

    assert DEFAULT_ALE_K == 20 and results["state"]["ale_k"] == 20
    prof = profiles["X1"]
    fig = views.render(ctx, "ale", results)["figure"]
    expected = compute.ale_from_profile(prof, n_intervals=DEFAULT_ALE_K)
    assert_allclose(fig.data[0].y, expected.ale)
    counts = np.asarray(fig.data[1].y)
    assert counts.size == 20 and (counts > 0).all() and counts.sum() == len(prof.rows)


def test_ale_intervals_follow_the_state_and_the_url(ctx, state, profiles):
    """K typed in the ALE panel goes into the state (clamped to [2, 200]) and the URL, and the
    view draws that many intervals."""
    from dashboard.views.ale import ALE_INTERVALS

    new, error = update_state(ctx, state, ALE_INTERVALS, _inputs(state, field_ale_k=5))
    assert error is None and new["ale_k"] == 5 and "ale_k=5" in search_from_state(new)
    assert state_from_search(search_from_state(new))["ale_k"] == 5
    fig = views.render(ctx, "ale", _resolved(ctx, new))["figure"]
    assert_allclose(fig.data[0].y, compute.ale_from_profile(profiles["X1"], n_intervals=5).ale)
    assert np.asarray(fig.data[1].y).size == 5
    assert update_state(ctx, state, ALE_INTERVALS, _inputs(state, field_ale_k=10_000))[0]["ale_k"] == 200
    # a value that is not a number leaves K as it was (not the default)
    assert update_state(ctx, new, ALE_INTERVALS, _inputs(new, field_ale_k="x"))[0]["ale_k"] == 5
    assert update_state(ctx, new, ALE_INTERVALS, _inputs(new, field_ale_k=True))[0]["ale_k"] == 5
    # the number input shows the state's K (after a URL load, say)
    loaded = controller_outputs(ctx, None, ids.URL, {"search": "?ws=demo-x3&ale_k=7"})
    assert loaded["state"]["ale_k"] == 7 and loaded["field_ale_k"] == 7


# --- export ----------------------------------------------------------------------------------
def test_export_pfi_csv_parses_back(ctx, results, sub_results, summary, x3_zero):
    """The PFI CSV download parses back to every feature's all-rows PFI (the bars' result, one
    number) and, on a subgroup, the PFI within it from the curves, under the page's headers."""
    bars = views.load_inputs(ctx, results).pfi["random forest"]
    out = export_table(ctx, ids.EXPORT_PFI, results)
    assert isinstance(out, dict) and out["filename"] == "pfi.csv"
    frame = pd.read_csv(io.StringIO(out["content"]), index_col=0)
    assert sorted(frame.index) == FEATURES
    assert_allclose(frame["all (n=500): PFI as the Overview bars on all rows"], bars.importance[frame.index], rtol=1e-9)
    assert_allclose(frame["all: ± standard error"], bars.uncertainty[frame.index], rtol=1e-9)
    assert_allclose(frame["random forest: PFI as the Overview bars on all 500 rows"], bars.importance[frame.index])
    sub = pd.read_csv(io.StringIO(export_table(ctx, ids.EXPORT_PFI, sub_results)["content"]), index_col=0)
    inside = x3_zero.reindex(summary.rows).to_numpy(bool)
    column = f"subgroup (n={int(inside.sum())}): PFI within, from the ICI curves"
    assert_allclose(sub[column].reindex(FEATURES), summary.local[inside][FEATURES].mean(), rtol=1e-9)


def test_report_is_one_self_contained_document(ctx, results):
    """The HTML report is one document with plotly.js inline once, no remote scripts."""
    html = report_html(ctx, results)
    banner = re.findall(r"\* plotly\.js v\d+\.\d+\.\d+", html)
    assert html.count("<html") == 1 and html.count("</html>") == 1
    assert len(banner) == 1 and plotly.offline.get_plotlyjs()[:300] in html
    assert 'src="http' not in html and "src='http" not in html
    assert all(f in html for f in FEATURES)


def test_report_reads_as_a_document(ctx, results):
    """Issue 11: the report opens with the data, models, rows and feature it is about, is
    organised by the page's sections with their questions, and holds no placeholder."""
    from dashboard.views import SECTIONS

    html = report_html(ctx, results)
    facts = ("<dt>Data</dt>", "<dt>Target</dt>", "<dt>Models</dt>", "<dt>Rows looked at</dt>", "all 500 rows")
    assert [f for f in facts if f not in html] == []
    headings = re.findall(r"<h2>(.*?)</h2>", html)
    assert headings and set(headings) <= {label for _, label, _ in SECTIONS} and "Overview" in headings
    text = re.sub(r"<script.*?</script>", "", html, flags=re.S)  # plotly.js aside: the document's own words
    found = [p for p in ("Press", "Waiting", "Drawing this view", "Computing", "No observation selected") if p in text]
    assert found == []  # (a plain list: pytest's diff of a whole page takes minutes)
    # issue 39: the report stands alone: no dead relative link; from the page, the live server is named
    assert 'href="?' not in html and "<dt>Loss</dt><dd>squared error</dd>" in html and "log_loss" not in text
    served = report_html(ctx, results, "http://127.0.0.1:8050/")
    assert "Made with the dashboard at http://127.0.0.1:8050/. While that server runs" in served
    assert 'href="http://127.0.0.1:8050/?ws=' in served


def test_export_ciu_of_unexplained_obs_falls_back(ctx, state, summary, data):
    """Export CIU with an obs outside the explained rows exports the row the view shows."""
    outside = next(r for r in data.index if r not in summary.rows)
    results = _resolved(ctx, {**state, "obs": str(outside)})
    best = summary.local.sum(axis=1).idxmax()
    info = views.render(ctx, "ciu", results)["info"]
    assert f"row {best} (row {outside}, the one selected, is not among the rows the curves explain;" in info
    assert export_table(ctx, ids.EXPORT_CIU, results)["filename"] == f"ciu-row-{best}.csv"


def test_export_ciu_default_row_is_the_views(ctx, sub_state, sub_results, summary, x3_zero):
    """With a subgroup and no obs, the CIU CSV is of the row the CIU view shows."""
    results = _resolved(ctx, {**sub_state, "feature": "X2"})
    total = summary.local.sum(axis=1)
    best = total[x3_zero.reindex(total.index).to_numpy(bool)].idxmax()
    assert (
        f"row {best} (shown by default: the most influential row of the subgroup"
        in views.render(ctx, "ciu", results)["info"]
    )
    assert export_table(ctx, ids.EXPORT_CIU, results)["filename"] == f"ciu-row-{best}.csv"


# --- store -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../../etc/passwd", "..\\..\\boot.ini", "..", ".bashrc", "/abs/x.csv"])
def test_safe_name_strips_paths(name):
    """safe_name leaves no path separator and no leading dot."""
    cleaned = safe_name(name)
    assert cleaned and "/" not in cleaned and "\\" not in cleaned and not cleaned.startswith(".")


@pytest.mark.parametrize("token", ["../x", "a" * 200, "", None, 17, "unknown-but-well-formed-token"])
def test_upload_path_refuses_bad_or_unknown_tokens(tmp_path, token):
    """upload_path is None for malformed, over-long and unknown tokens."""
    assert Store(tmp_path).upload_path(token) is None


def test_upload_path_finds_a_new_upload(tmp_path):
    """A token from new_upload leads back to its file."""
    store = Store(tmp_path)
    token, path = store.new_upload("../data.csv")
    path.write_text("a\n1\n")
    assert store.upload_path(token) == path
    assert path.parent.parent == store.root / "uploads"


def test_workspace_refuses_path_escape(tmp_path):
    """A workspace id that is a path is refused (None), not read."""
    store = Store(tmp_path)
    (tmp_path / "etc.json").write_text("{}")
    assert store.workspace("../../etc") is None
    assert store.workspace("../etc") is None


def test_purge_uploads_deletes_only_old_folders(tmp_path):
    """purge_uploads removes folders older than the TTL and keeps fresh ones."""
    store = Store(tmp_path)
    old, old_path = store.new_upload("old.csv")
    fresh, fresh_path = store.new_upload("fresh.csv")
    old_path.write_text("x")
    fresh_path.write_text("x")
    past = time.time() - 3 * 3600
    os.utime(old_path.parent, (past, past))
    assert store.purge_uploads(ttl_hours=2) == 1
    assert store.upload_path(old) is None and not old_path.parent.exists()
    assert store.upload_path(fresh) == fresh_path


# --- upload route ----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def small_app(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("wip-small")), upload_limit_mb=1))


def _post(app, **form):
    return app.server.test_client().post("/upload", data=form, content_type="multipart/form-data")


def test_upload_stores_data_file(app, ctx):
    """A CSV posted as kind=data answers {id, name, size} and lands in uploads/<id>/."""
    body = b"a,b\n1,2\n3,4\n"
    res = _post(app, kind="data", file=(io.BytesIO(body), "table.csv"))
    reply = res.get_json()
    assert res.status_code == 200 and set(reply) == {"id", "name", "size"}
    assert (reply["name"], reply["size"]) == ("table.csv", len(body))
    path = ctx.store.upload_path(reply["id"])
    assert path == ctx.store.root / "uploads" / reply["id"] / "table.csv"
    assert path.read_bytes() == body


def test_upload_wrong_suffix_is_400(app):
    """A data upload with a .txt name is refused with a message naming the suffix."""
    res = _post(app, kind="data", file=(io.BytesIO(b"a\n1\n"), "table.txt"))
    assert res.status_code == 400 and ".txt" in res.get_json()["error"]


def test_upload_without_kind_is_400(app):
    """An upload that does not say model or data is refused."""
    res = _post(app, file=(io.BytesIO(b"a\n1\n"), "table.csv"))
    assert res.status_code == 400 and "'model' or 'data'" in res.get_json()["error"]


def test_upload_over_limit_is_413_and_not_stored(small_app):
    """A 1.2 MB body on a 1 MiB server is refused (413, naming the limit); nothing is stored."""
    uploads = small_app._wip_context.store.root / "uploads"
    before = set(os.listdir(uploads))
    res = _post(small_app, kind="data", file=(io.BytesIO(b"x" * int(1.2 * 2**20)), "big.csv"))
    assert res.status_code == 413 and "1 MiB" in res.get_json()["error"]
    assert set(os.listdir(uploads)) == before


def test_upload_just_over_limit_leaves_no_folder(small_app):
    """A file just over the limit (within the form overhead) is refused and leaves nothing."""
    uploads = small_app._wip_context.store.root / "uploads"
    before = set(os.listdir(uploads))
    res = _post(small_app, kind="data", file=(io.BytesIO(b"x" * (2**20 + 10_000)), "big.csv"))
    assert res.status_code == 413
    assert set(os.listdir(uploads)) == before


# --- load your own ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def frame():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(80, 2)), columns=["a", "b"])
    df["y"] = 2 * df["a"] - df["b"] + 0.1 * rng.normal(size=len(df))
    return df


@pytest.fixture(scope="session")
def pipeline(frame):
    return make_pipeline(StandardScaler(), LinearRegression()).fit(frame[["a", "b"]], frame["y"])


def _upload(ctx, name, write):
    token, path = ctx.store.new_upload(name)
    write(path)
    return {"id": token, "name": name, "size": path.stat().st_size}


@pytest.fixture(scope="session")
def data_upload(ctx, frame):
    return _upload(ctx, "table.csv", lambda p: frame.to_csv(p, index=False))


@pytest.fixture(scope="session")
def model_upload(ctx, pipeline):
    return _upload(ctx, "linear.skops", lambda p: sio.dump(pipeline, p))


def test_pickle_upload_refused_unopened(ctx, monkeypatch):
    """A .pkl upload is refused with a pointer to skops, and the file is never opened."""
    import pickle

    import joblib

    def opened(*_a, **_k):
        raise AssertionError("the pickle file was opened")

    monkeypatch.setattr(pickle, "load", opened)
    monkeypatch.setattr(pickle, "loads", opened)
    monkeypatch.setattr(joblib, "load", opened)
    upload = _upload(ctx, "m.pkl", lambda p: p.write_bytes(b"\x80\x04not really a pickle"))
    _, errors, options, _ = describe_models(ctx, [upload])
    assert len(errors) == 1 and "skops" in errors[0].children and "refused" in errors[0].children
    assert options == []


def test_describe_data_offers_columns_as_targets(ctx, data_upload):
    """A CSV upload is described by its size and offers its columns, the last as target."""
    info, error, columns, target, _ = describe_data(ctx, data_upload)
    assert (error, columns, target) == (None, ["a", "b", "y"], "y")
    assert "80 rows × 3 columns" in info


def test_load_workspace_creates_random_token_workspace(ctx, model_upload, data_upload):
    """Loading a skops model and a CSV twice gives two unguessable ids with the model's features."""
    first = load_workspace(ctx, [model_upload], data_upload, "y", None, None, [], False, None)
    second = load_workspace(ctx, [model_upload], data_upload, "y", None, None, [], False, None)
    assert re.fullmatch(r"[A-Za-z0-9_-]{16,}", first["ws"]) and first["ws"] != second["ws"]
    ws = ctx.store.workspace(first["ws"])
    assert (ws.task, ws.loss, ws.models[0].features) == ("regression", "squared_error", ("a", "b"))


def test_held_out_question_is_kept_and_said_in_pfi_and_performance(ctx, model_upload, data_upload):
    """Issue 14, item 1: the answer to "did the models see these rows in training?" is kept
    with the workspace (a forged answer is "unknown"), and the PFI and performance views say
    what it means; held-out data (the demos) needs no note."""
    from dashboard import views

    roles = {}
    for role in ("training", "unknown", "held-out", "evil"):
        out = load_workspace(ctx, [model_upload], data_upload, "y", None, None, [], False, None, role)
        roles[role] = ctx.store.workspace(out["ws"])
    assert {k: ws.data_role for k, ws in roles.items()} == {
        "training": "training",
        "unknown": "unknown",
        "held-out": "held-out",
        "evil": "unknown",
    }
    # adding models to the data shown keeps what was said of its rows
    added = load_workspace(
        ctx, [model_upload], None, "y", None, None, [], True, {"ws": roles["training"].id}, "held-out"
    )
    assert ctx.store.workspace(added["ws"]).data_role == "training"
    pfi_info, perf_info = {}, {}
    for role, ws in roles.items():
        results = _resolved(ctx, {**default_state(), "ws": ws.id})
        pfi_info[role] = views.render(ctx, "pfi", results)["info"]
        run_request(ctx, {"state": results["state"]})  # the performance view's predictions
        perf_info[role] = views.render(ctx, "performance", _resolved(ctx, results["state"]))["info"]
    assert "memorisation included" in pfi_info["training"] and "optimistic" in perf_info["training"]
    assert "not said at Load" in pfi_info["unknown"] and "not said at Load" in perf_info["unknown"]
    assert "memoris" not in pfi_info["held-out"] and "optimistic" not in perf_info["held-out"]
    assert ctx.store.workspace("demo-x3").data_role == "held-out"


def test_workspaces_saved_before_the_question_read_as_before():
    import json

    from dashboard.store import Workspace

    old = {"id": "w", "title": "t", "data_path": "d", "data_sha": "s", "target": "y", "task": "regression"}
    old |= {"loss": "squared_error", "models": [], "features": []}
    assert Workspace.from_json(json.dumps(old)).data_role == "unknown"
    assert Workspace.from_json(json.dumps({**old, "demo": True})).data_role == "held-out"


def test_load_workspace_missing_target_is_target_error(ctx, model_upload, data_upload):
    """A target that is not a column is reported on the target field."""
    out = load_workspace(ctx, [model_upload], data_upload, "yy", None, None, [], False, None)
    assert set(out) == {"errors"} and set(out["errors"]) == {"target"}
    assert "'yy'" in out["errors"]["target"]


def test_load_workspace_classifier_loss_for_regressor(ctx, model_upload, data_upload):
    """log_loss for a regressor is reported on the loss field."""
    out = load_workspace(ctx, [model_upload], data_upload, "y", "log_loss", None, [], False, None)
    assert set(out["errors"]) == {"loss"} and "log_loss" in out["errors"]["loss"]


def test_load_outputs_puts_loss_error_in_status():
    """A loss error is shown as the load status; nothing is loaded."""
    out = load_outputs({"errors": {"loss": "bad loss"}})
    assert (out["model_error"], out["data_error"], out["target_error"], out["status"]) == (None, None, None, "bad loss")
    assert out["loaded"] is no_update


def test_long_model_file_name_still_computes(ctx, pipeline, data_upload):
    """A model whose file name is 130+ characters loads and its results compute."""
    upload = _upload(ctx, "m" * 130 + ".skops", lambda p: sio.dump(pipeline, p))
    out = load_workspace(ctx, [upload], data_upload, "y", None, None, [], False, None)
    state, _ = normalize(ctx, {**default_state(), "ws": out["ws"]})
    request = resolve_state(ctx, state, None).request
    done = run_request(ctx, request)
    assert done["ok"] is True
    # the id the page then plans (the default observation's tasks joined the plan): all cached
    after = resolve_state(ctx, state, done)
    assert not isinstance(after.request, dict) and not after.results.get("pending")
    assert done["request"] == request_id(plan_state(ctx, ctx.store.workspace(out["ws"]), state)["tasks"])


# --- configuration ---------------------------------------------------------------------------
def test_parse_args_overrides_env(tmp_path):
    """Command-line options override the environment (port, allow_pickle)."""
    config = parse_args(["--port", "9000", "--allow-pickle"], environ={"WIP_CACHE_DIR": str(tmp_path)})
    assert (config.port, config.allow_pickle, config.cache_dir) == (9000, True, str(tmp_path))


def test_bad_env_port_exits_naming_variable(tmp_path):
    """WIP_PORT=abc stops with a message naming WIP_PORT."""
    with pytest.raises(SystemExit, match="WIP_PORT"):
        parse_args([], environ={"WIP_CACHE_DIR": str(tmp_path), "WIP_PORT": "abc"})


def test_secret_key_kept_in_cache_dir_option(tmp_path, monkeypatch):
    """With --cache-dir D the shared secret key is kept in D (README: 'kept in the cache folder')."""
    monkeypatch.chdir(tmp_path)
    chosen = tmp_path / "chosen"
    config = parse_args(["--cache-dir", str(chosen)], environ={})
    key_file = chosen / "secret_key"
    assert key_file.exists() and key_file.read_text().strip() == config.secret_key


def test_help_does_not_print_secret_key(tmp_path, capsys):
    """python app.py --help does not print the secret key."""
    secret = from_env({"WIP_CACHE_DIR": str(tmp_path)}).secret_key  # the key kept in the folder
    with pytest.raises(SystemExit):
        parse_args(["--help"], environ={"WIP_CACHE_DIR": str(tmp_path)})
    assert secret not in "".join(capsys.readouterr().out.split())


# --- the controller's reducers ----------------------------------------------------------------
def test_sfimp_and_repetitions_can_be_switched_back(ctx):
    """Issue 11, defect 8: SFIMP toggles off again and repetitions go back to the default, so
    later subgroups no longer pay for them."""
    state = normalize(ctx, {**default_state(), "ws": "demo-diabetes"})[0]
    on, _ = update_state(ctx, state, ids.SFIMP_RUN, {})
    off, _ = update_state(ctx, on, ids.SFIMP_RUN, {})
    assert (on["sfimp"], off["sfimp"]) == (True, False)
    more, _ = update_state(ctx, state, ids.REPEATS_MORE, {})
    back, _ = update_state(ctx, more, ids.REPEATS_RESET, {})
    assert (more["repeats"], back["repeats"]) == (20, 10)
    ws = ctx.store.workspace("demo-diabetes")
    assert plan_state(ctx, ws, off)["keys"]["sfimp"] == {}
    assert plan_state(ctx, ws, on)["keys"]["sfimp"]
    # the X3 demo's SFIMP is cheap (3 features: 8 coalitions): computed without being asked
    x3 = ctx.store.workspace("demo-x3")
    assert plan_state(ctx, x3, normalize(ctx, {**default_state(), "ws": "demo-x3"})[0])["keys"]["sfimp"]
    words = views.render(ctx, "sfimp", {"state": off, "keys": plan_state(ctx, ws, off)["keys"]})["figure"]
    assert "costs about" in words.layout.annotations[0].text and "model rows" in words.layout.annotations[0].text


@pytest.mark.parametrize(
    "trigger, reducer, inputs, changed",
    [
        (ids.MODEL_SELECT, "choose_model", {"model": "m2"}, {"model": "m2"}),
        (ids.FEATURE_SELECT, "choose_feature", {"feature": "X2"}, {"feature": "X2"}),
        (
            pfi_view.PFI_GRAPH,
            "select_feature",
            {"select_pfi_graph": {"points": [{"customdata": "X3"}]}},
            {"feature": "X3"},
        ),
        (ids.CLICKED_ROW, "click_curve_row", {"clicked": {"row": 12, "t": 1}}, {"obs": "12"}),
        (influential_view.ICI_TABLE, "select_obs", {"select_ici_table": {"row_id": "40", "row": 0}}, {"obs": "40"}),
        (ids.SUBGROUP_APPLY, "apply_subgroup", {"subgroup_text": "  X3 == 0 "}, {"subgroup": "X3 == 0"}),
        (ids.SUBGROUP_CLEAR, "clear_subgroup", {}, {"subgroup": ""}),
        (
            ids.COND_ADD,
            "add_condition",
            {"cond_column": "X1", "cond_op": ">", "cond_value": "0"},
            {"subgroup": "(X3 == 1) and X1 > 0"},
        ),
        (ids.REPEATS_MORE, "more_repeats", {}, {"repeats": 20}),
        (ids.SFIMP_RUN, "run_sfimp", {}, {"sfimp": True}),
        (ids.CENTERED, "set_centered", {"field_centered": ["c"]}, {"centered": True}),
        (ids.PFI_ALL, "toggle_pfi_all", {}, {"pfi_all": True}),
        (ids.REPEATS_RESET, "reset_repeats", {}, {}),
        (ids.EXCLUDE_SELECTED, "exclude_selected", {}, {"exclude": ["5", "7"]}),
        (ids.EXCLUDE_NEGATIVE, "exclude_negative", {"negative": ["9", "5"]}, {"exclude": ["5", "9"]}),
        (ids.EXCLUDE_CLEAR, "clear_exclusions", {}, {"exclude": []}),
    ],
)
def test_each_reducer_changes_only_its_fields(trigger, reducer, inputs, changed):
    """Each triggering input has one small pure reducer (state, inputs) -> state that
    changes exactly the fields it is about."""
    from dashboard.callbacks import drilldown

    before = {
        **default_state(),
        "ws": "demo-x3",
        "model": "m1",
        "feature": "X1",
        "subgroup": "X3 == 1",
        "obs": "7",
        "exclude": ["5"],
    }
    fn = drilldown.REDUCERS[trigger]
    assert fn.__name__ == reducer
    after = fn(dict(before), inputs)
    assert after == {**before, **changed}
    assert before["exclude"] == ["5"], "a reducer must not modify the state it is given"


def test_every_controller_input_has_a_reducer():
    from dashboard.callbacks import drilldown

    triggers = {dep.component_id for dep in drilldown.CONTROLLER_INPUTS.values() if type(dep).__name__ == "Input"}
    assert triggers == set(drilldown.REDUCERS)
    # every view's selection is an input of the controller, with its reducer
    selections = {s.id for s in views.selects()}
    # (the built-in ones at least: a new view's select needs no edit here)
    assert {pfi_view.PFI_GRAPH, "sfimp-graph", "global-ci-graph", influential_view.ICI_TABLE} <= selections
    assert selections <= triggers


# --- every view family shows the library's numbers --------------------------------------------
def _demo_model(ctx):
    from dashboard.loading import load_model

    ws = ctx.store.workspace("demo-x3")
    entry = ws.models[0]
    return ws, load_model(ctx.store.path(entry.path), name=entry.name)


def test_pfi_bars_are_the_librarys_permutation_importance(ctx, sub_state, sub_results, data):
    """The PFI bars on a subgroup are compute.permutation_importance on that subgroup's
    rows with the planner's seed and repeats."""
    ws, model = _demo_model(ctx)
    fig = views.render(ctx, "pfi", sub_results)["figure"]
    bar = next(t for t in fig.data if t.type == "bar")
    mask = data["X3"] == 0
    X = data[list(ws.features)]
    ref = compute.permutation_importance(
        model, X[mask], data[ws.target][mask], loss=ws.loss, n_repeats=sub_state["repeats"], random_state=planning.SEED
    )
    assert_allclose(np.asarray(bar.x, float), ref.importance[list(bar.y)].to_numpy(), rtol=1e-12)
    # the whisker is the "±" written everywhere (issue 39); a feature of no importance has one of ~1e-17
    whisker = ref.uncertainty[list(bar.y)].to_numpy()
    assert_allclose(np.asarray(bar.error_x.array, float), whisker, rtol=1e-12, atol=1e-12 * whisker.max())


def test_impact_table_is_the_librarys_ice_impact(ctx, results, profiles):
    out = views.render(ctx, "impact", results)
    for row in out["data"]:
        ref = compute.ice_impact(profiles[row["feature"]])
        assert_allclose(float(row["impact"]), ref["impact"], rtol=1e-12)
        assert_allclose(float(row["differs across rows"]), ref["heterogeneity"], rtol=1e-12)
        assert_allclose(float(row["PD spread"]), compute.pd_importance(profiles[row["feature"]]), rtol=1e-12)
    # headers in words (issue 28), each with its method in the header's tooltip
    names = [c["name"] for c in out["columns"]]
    words = ["impact", "direction", "impact within the data", "differs across rows", "bend", "PD spread"]
    assert names == ["feature", *words]
    assert "ICE non-linearity" in out["tooltips"]["bend"] and "FIRM" in out["tooltips"]["PD spread"]


def test_global_ci_bars_are_the_summarys(ctx, sub_results, summary, x3_zero):
    fig = views.render(ctx, "global_ci", sub_results)["figure"]
    bar = next(t for t in fig.data if t.type == "bar")
    ref = summary.global_ci(x3_zero)
    assert_allclose(np.asarray(bar.x, float), ref.loc[list(bar.y), "CI"].to_numpy(), rtol=1e-12)


def test_ciu_bars_are_the_summarys_for_the_selected_row(ctx, state, summary):
    row = summary.rows[3]
    results = _resolved(ctx, {**state, "obs": str(row)})
    fig = views.render(ctx, "ciu", results)["figure"]
    ref = summary.ciu(row)
    ci = next(t for t in fig.data if t.type == "bar")
    assert_allclose(np.asarray(ci.x, float), ref.loc[list(ci.y), "CI"].to_numpy(), rtol=1e-12)


# --- axis titles (issue 11, defect 1) ----------------------------------------------------------
def _axis_titles(fig) -> dict:
    """{axis: title text} as Plotly.js reads it (a plain-string ``title`` is dropped), for the
    visible axes; the top of two stacked plots shares the bottom's x axis and its title."""
    found = {}
    for key, axis in fig.layout.to_plotly_json().items():
        if not (key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict) and axis.get("visible", True)):
            continue
        if axis.get("matches") and axis.get("showticklabels") is False:
            continue
        title = axis.get("title")
        found[key] = title.get("text", "") if isinstance(title, dict) else ""
    return found


@pytest.mark.parametrize("subgroup", ["", "X3 == 0"])
def test_every_drawn_chart_has_axis_titles(ctx, state, subgroup):
    """Every figure a view draws names both its axes (a plain string title is dropped by
    Plotly.js: PFI, SFIMP, ICI, ICE, CIU, influence and global CI had none on the page)."""
    results = _resolved(ctx, {**state, "subgroup": subgroup, "sfimp": True})
    checked = 0
    for view in views.REGISTRY:
        out = views.render(ctx, view, results)
        for name, (_, prop) in view.outputs.items():
            fig = out[name]
            if prop != "figure" or not fig.data:
                continue
            titles = _axis_titles(fig)
            assert "yaxis" in titles and {"xaxis", "xaxis2"} & set(titles), (view.name, titles)
            assert all(text.strip() for text in titles.values()), (view.name, titles)
            checked += 1
    assert checked >= 9


def test_hover_line_names_the_hovered_row(ctx, data):
    from dashboard.callbacks.views import hover_text

    row = data.index[7]
    text = hover_text(ctx, {"row": int(row), "t": 1}, {"ws": "demo-x3"})
    assert text.startswith(f"row {row}: X1 = ") and "X3 = " in text
    assert hover_text(ctx, {"row": "not-a-row"}, {"ws": "demo-x3"}) == ""
    assert hover_text(ctx, None, {"ws": "demo-x3"}) == ""


def test_warming_computes_the_default_demos_first_views(tmp_path):
    """`python app.py` warms the default demo in a thread (a failure there is only logged, so
    a broken warm-up went unnoticed once: it unpacked resolve_state's result by position)."""
    from dashboard.server import warm

    app = create_app(Config(cache_dir=str(tmp_path / "warm-cache"), max_curves=200))
    assert warm(app) is True
    state, _ = normalize(app._wip_context, default_state())
    assert not isinstance(resolve_state(app._wip_context, state, None).request, dict)
