"""Each view is drawn again only when what it shows can change (issue 11, item 10).

A view declares the state fields it reads (``View.reads``); the page skips a view whose
fields and results' availability are unchanged (``views.signatures``). These tests hold the
declarations to the truth: changing any field a view does not declare leaves every one of
its outputs as it was, and changing a declared field changes its signature."""

from __future__ import annotations

import json

import plotly.utils
import pytest

from dashboard import jobs, views
from dashboard.callbacks.compute import resolve_state
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state, normalize, state_fields, view_fields
from dashboard.views import plan_state

WS = "demo-diabetes"
BASE = {"ws": WS, "model": "random forest", "feature": "bmi", "obs": "7"}
# one other value per field (ws aside: every view reads it)
VARIANTS = {
    "model": {"model": "ridge"},
    "feature": {"feature": "bp"},
    "subgroup": {"subgroup": "sex == 2"},
    "obs": {"obs": "8"},
    "centered": {"centered": True},
    "repeats": {"repeats": 20},
    "sfimp": {"sfimp": True},
    "pfi_all": {"pfi_all": True},
    "exclude": {"exclude": ["3", "11"]},
    "ale_k": {"ale_k": 8},
    "pair": {"pair": json.dumps(["bmi", "s5"])},
    "edit": {"edit": {"bmi": 30.0, "s5": 4.2}},
    "present": {"present": True},  # how the page is laid out: no view reads it
}


def _variant(field):
    """Another valid value of a view's whole-number or yes/no field (its default moved by one,
    or flipped): a view's new URL field needs no edit here; other kinds are listed above."""
    default = field.default
    if isinstance(default, bool):
        return {field.name: not default}
    if isinstance(default, int):
        for value in (default - 1, default + 1):
            if field.clean(value) == value:
                return {field.name: value}
    return None


for _field in view_fields():
    if _field.name not in VARIANTS and _variant(_field) is not None:
        VARIANTS[_field.name] = _variant(_field)


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("reads-cache")), max_curves=200))._wip_context


def _record(ctx, changes: dict) -> dict:
    """The results record of the state, its results computed (SFIMP left out: costly, and
    a view that does not read the flag must not care whether it is there)."""
    state, error = normalize(ctx, {**default_state(), **BASE, **changes})
    assert error is None
    ws = ctx.store.workspace(WS)
    planned = plan_state(ctx, ws, state)
    jobs.run(ctx.store, ws, [t for t in planned["tasks"] if t["kind"] != "sfimp"], policy=ctx.policy)
    results = resolve_state(ctx, state, None).results
    assert isinstance(results, dict) and "sigs" in results
    return results


def _drawn(ctx, view, results) -> str:
    return json.dumps(views.render(ctx, view, results), cls=plotly.utils.PlotlyJSONEncoder, sort_keys=True)


def test_every_field_has_a_variant():
    assert set(VARIANTS) == set(state_fields()) - {"ws"}


@pytest.mark.parametrize("field", sorted(VARIANTS))
def test_a_field_a_view_does_not_read_leaves_it_as_it_was(ctx, field):
    base = _record(ctx, {})
    other = _record(ctx, VARIANTS[field])
    assert other["state"][field] != base["state"][field]
    skipped = [v for v in views.REGISTRY if field not in v.fields]
    for view in skipped:
        assert other["sigs"][view.name] == base["sigs"][view.name], view.name
        assert _drawn(ctx, view, other) == _drawn(ctx, view, base), f"{view.name} reads {field!r}"
    for view in views.REGISTRY:
        if field in view.fields:
            assert other["sigs"][view.name] != base["sigs"][view.name], view.name


def test_an_edit_redraws_only_the_views_that_show_it(ctx):
    base = _record(ctx, {})
    edited = _record(ctx, VARIANTS["edit"])
    changed = {name for name, sig in edited["sigs"].items() if sig != base["sigs"][name]}
    # the influence panel compares with the contributions of the row as it is, not as edited (issue 39)
    assert changed == {"whatif", "contributions", "influence"}


def test_a_pending_record_redraws_a_view_when_its_results_arrive(ctx):
    """While a job runs, a view whose results are missing has another signature than once
    they are cached; a view whose results are all cached keeps its signature."""
    done = _record(ctx, {})
    state = {**done["state"], "obs": "9"}
    ws = ctx.store.workspace(WS)
    pending = resolve_state(ctx, state, None).results
    assert pending.get("pending")
    assert pending["sigs"]["pfi"] == done["sigs"]["pfi"]  # obs is not read, PFI is cached
    planned = plan_state(ctx, ws, pending["state"])
    jobs.run(ctx.store, ws, [t for t in planned["tasks"] if t["kind"] != "sfimp"], policy=ctx.policy)
    complete = resolve_state(ctx, state, None).results
    assert not complete.get("pending")
    assert complete["sigs"]["whatif"] != pending["sigs"]["whatif"]  # its result arrived
    assert complete["sigs"]["pfi"] == pending["sigs"]["pfi"]


def test_the_toolbar_says_which_rows_and_the_curves_sample(ctx, tmp_path_factory):
    """The line under the subgroup box (shown whatever section is open): the selected rows,
    and the sample the curves use when they explain fewer rows than the data has."""
    from dashboard.callbacks.views import rows_line

    whole = _record(ctx, {"subgroup": "sex == 2"})
    data = ctx.store.data(ctx.store.workspace(WS))
    n_sub = int((data["sex"] == 2).sum())
    assert rows_line(ctx, whole) == f"subgroup sex == 2: {n_sub:,} of {len(data):,} rows"
    small = create_app(Config(cache_dir=str(tmp_path_factory.mktemp("sample-cache")), max_curves=50))._wip_context
    state, _ = normalize(small, {**default_state(), **BASE})
    ws = small.store.workspace(WS)
    planned = plan_state(small, ws, state)
    jobs.run(small.store, ws, [t for t in planned["tasks"] if t["kind"] == "profiles"], policy=small.policy)
    record = resolve_state(small, state, None).results
    assert rows_line(small, record) == f"all {len(data):,} rows; curves and CIU on a 50-row sample of {len(data):,}"


def test_every_view_sits_in_a_section_and_the_page_has_one_tab_each(ctx):
    from dashboard import layout
    from dashboard.views import SECTIONS

    keys = [key for key, _, _ in SECTIONS]
    assert {v.section for v in views.REGISTRY} <= set(keys)
    assert [v.section for v in views.REGISTRY] == sorted((v.section for v in views.REGISTRY), key=keys.index)
    tabs = layout.views()
    assert [t.value for t in tabs.children] == keys
    for tab in tabs.children:  # each tab holds exactly its section's panels (and their input stores)
        text = json.dumps(tab.to_plotly_json(), cls=plotly.utils.PlotlyJSONEncoder)
        for view in views.REGISTRY:
            # the id as a JSON string: "view-input-ale" is also the start of "view-input-ale_range"
            assert (json.dumps(views.input_id(view)) in text) == (view.section == tab.value), (view.name, tab.value)


def test_on_a_subgroup_both_pfi_views_say_why_they_differ(ctx):
    """Issue 11, defect 6: the feature defining the subgroup gets 0 from the permutation bars
    (shuffled within the subgroup, where it is constant) but not from the PFI within the subgroup
    (values from all rows); each view says so in one line, and only when a subgroup is set."""
    sub = _record(ctx, {"subgroup": "sex == 2"})
    bars = views.render(ctx, "pfi", sub)
    table = views.render(ctx, "conditional_pfi", sub)
    assert "shuffled among the subgroup's rows only" in bars["info"]
    assert "Why the subgroup's column can differ from the Overview bars on a subgroup" in table["info"]
    pfi = next(iter(views.load_inputs(ctx, sub).pfi.values()))
    assert pfi.importance["sex"] == 0.0  # constant in the subgroup
    cond = {r["feature"]: r for r in table["data"]}["sex"]
    assert next(v for k, v in cond.items() if k.startswith("subgroup")) > 0
    whole = _record(ctx, {})
    assert "subgroup" not in views.render(ctx, "pfi", whole)["info"]
    assert views.render(ctx, "conditional_pfi", whole)["info"] == ""


@pytest.mark.parametrize("ws_id", ["demo-x3", "demo-diabetes", "demo-cancer"])
def test_the_subgroup_hint_is_a_condition_on_this_data(ctx, ws_id):
    """Issue 11, defect 8: the box's example names this data set's own column and a value
    that splits it (it said `X3 == 0` on any data)."""
    import compute
    from dashboard.callbacks.drilldown import subgroup_example

    hint = subgroup_example(ctx, {"ws": ws_id})
    assert hint.startswith("all rows; e.g. ")
    ws = ctx.store.workspace(ws_id)
    data = ctx.store.data(ws)
    mask = compute.parse_subgroup(hint.removeprefix("all rows; e.g. "), data)
    assert 0 < int(mask.sum()) < len(data)
    assert str(ws.features[0]) in hint


def test_every_csv_export_names_every_column(ctx):
    """Issue 11, defect 8: CSVs had a first column without a header. Every export of a
    drill-down with a subgroup and a selected, edited row has a name on each column."""
    record = _record(ctx, {"subgroup": "sex == 2", "edit": {"bmi": 30.0}})
    seen = 0
    for button in views.exports():
        sent = views.export(ctx, button, record)
        if sent is None:
            continue
        header, first = sent["content"].splitlines()[:2]
        assert all(name.strip() for name in header.split(",")), (button, header)
        seen += 1
    assert seen >= 6
    ici = views.export(ctx, "export-ici", record)["content"]
    assert "in_subgroup" in ici.splitlines()[0]  # the ICI CSV marks the subgroup's rows


def test_each_view_asks_its_question_in_plain_words_and_cites_in_a_method_note():
    """Issue 11: plain language first, citations second. The panel's line is a question with
    no equation or paper in it; the method (paper, equation) is the view's "method" note."""
    for view in views.REGISTRY:
        assert "?" in view.question, view.name
        assert not any(w in view.question for w in ("Eq.", "et al", "Främling", "Fig.")), view.name
    cited = [v.name for v in views.REGISTRY if any(w in v.method for w in ("Eq.", "et al", "Främling", "paper"))]
    assert len(cited) >= len(views.REGISTRY) - 3, cited
