"""Issue 13's views show what the library computes on the same rows: the subgroup finder, the
convergence chart, the caveats panel (dependence, grouped PFI, leak check), and the controller
applies a clicked suggestion like typed text."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.components import texts as _texts
from numpy.testing import assert_allclose

import compute
from dashboard import ids, jobs, planning, views
from dashboard.callbacks.drilldown import update_state
from dashboard.config import Config
from dashboard.html_report import report_html
from dashboard.loading import load_model
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import caveats, load_inputs, plan_state


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("caveats-cache")), max_curves=300))._wip_context


def _state(ctx, ws_id: str, **changes) -> dict:
    return normalize(ctx, {**default_state(), "ws": ws_id, **changes})[0]


def _results(ctx, ws_id: str, **changes) -> dict:
    """A results record with every planned task of the state computed."""
    state = _state(ctx, ws_id, **changes)
    ws = ctx.store.workspace(ws_id)
    planned = plan_state(ctx, ws, state)
    jobs.run(ctx.store, ws, planning.missing(ctx.store, planned["tasks"]), policy=ctx.policy)
    return {"state": state, "keys": planned["keys"]}


def _buttons(component) -> list[dict]:
    if isinstance(component, (list, tuple)):
        return [b for c in component for b in _buttons(c)]
    found = [component.id] if isinstance(getattr(component, "id", None), dict) else []
    children = getattr(component, "children", None)
    return found + ([] if children is None or isinstance(children, str) else _buttons(children))


def test_subgroup_finder_lists_the_librarys_splits_as_buttons(ctx):
    results = _results(ctx, "demo-x3", feature="X1")
    out = views.render(ctx, "subgroup_finder", results)
    inp = load_inputs(ctx, results)
    found = compute.suggest_subgroups(inp.profile, inp.data, features=["X2", "X3"])
    conditions = [b["condition"] for b in _buttons(out["list"])]
    useful = [s for s in found.splits if s.share >= 0.01]
    assert conditions == [c for s in useful[:5] for c in (s.left, s.right)]
    assert conditions[:2] == ["X3 == 0", "X3 == 1"]
    assert all(b["type"] == ids.SUGGESTED for b in _buttons(out["list"]))
    text = " ".join(_texts(out["list"]))
    assert f"{found.splits[0].share:.0%}" in text and "Split on X3" in text
    assert "differs most across X3 == 0 and X3 == 1" in out["info"]
    # the report lists them (buttons as text)
    html = report_html(ctx, results)
    assert "Subgroups found for you" in html and "X3 == 0: importance of X1 from its curves" in html


def test_subgroup_finder_inside_a_subgroup_and_without_excluded_rows(ctx):
    results = _results(ctx, "demo-x3", feature="X1", subgroup="X3 == 0", exclude=["3", "5"])
    out = views.render(ctx, "subgroup_finder", results)
    inp = load_inputs(ctx, results)
    mask = inp.profile_mask & ~inp.profile.rows.astype(str).isin(["3", "5"])
    found = compute.suggest_subgroups(inp.profile, inp.data, features=["X2", "X3"], mask=mask, condition="X3 == 0")
    assert found.n_rows == int(mask.sum())
    conditions = [b["condition"] for b in _buttons(out["list"])]
    assert conditions and all(c.startswith("(X3 == 0) and X2") for c in conditions)
    assert conditions[0] == found.splits[0].left
    assert "the subgroup's" in out["info"] and "no strong interaction" in out["info"]


def test_a_clicked_suggestion_becomes_the_subgroup_and_a_forged_one_is_refused(ctx):
    state = _state(ctx, "demo-x3", feature="X1")
    new, error = update_state(ctx, state, ids.SUGGESTED_PICK, {"suggested": {"condition": "X3 == 0", "t": 1}})
    assert error is None and new["subgroup"] == "X3 == 0"
    bad, error = update_state(ctx, state, ids.SUGGESTED_PICK, {"suggested": {"condition": "__import__('os')", "t": 2}})
    assert bad["subgroup"] == "" and error
    same, error = update_state(ctx, state, ids.SUGGESTED_PICK, {"suggested": {"condition": 5}})
    assert same["subgroup"] == "" and error is None


def test_convergence_view_draws_the_running_mean_of_the_bars(ctx):
    results = _results(ctx, "demo-x3", feature="X2")
    inp = load_inputs(ctx, results)
    pfi = inp.pfi[inp.state["model"]]
    fig = views.render(ctx, "pfi_convergence", results)["figure"]
    lines = {t.name: t for t in fig.data if t.mode == "lines+markers"}
    assert set(lines) == set(pfi.features)  # 3 features: all shown
    for name, trace in lines.items():
        assert_allclose(trace.y[-1], pfi.importance[name], rtol=1e-12)
        assert_allclose(trace.y[0], pfi.repeats.loc[name].iloc[0], rtol=1e-12)
    conv = compute.pfi_convergence(pfi)
    assert fig.layout.xaxis.title.text == "number of permutations"
    assert str(conv.top[0]) in views.render(ctx, "pfi_convergence", results)["info"]


def test_caveats_grouped_pfi_is_the_librarys_on_the_pfi_rows(ctx):
    """Breast cancer, subgroup 'worst radius > 16': the grouped PFI task ran on the subgroup's
    rows only, and its bars equal permutation_importance(groups=...) on those rows."""
    results = _results(ctx, "demo-cancer", subgroup="`worst radius` > 16")
    inp = load_inputs(ctx, results)
    model_name = inp.state["model"]
    found = inp.results(caveats.KIND)[model_name]
    rows = planning.select_rows(inp.data, "`worst radius` > 16").to_numpy()
    assert found["pfi"].n_rows == int(rows.sum()) < len(inp.data)
    ws = inp.ws
    entry = ws.model(model_name)
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    X = inp.data[list(entry.features)][rows]
    y = inp.data[ws.target][rows]
    groups = compute.feature_dependence(X).groups(caveats.THRESHOLD)
    assert found["groups"] == groups and groups
    direct = compute.permutation_importance(
        model,
        X,
        y,
        loss=ws.loss,
        output=ws.output,
        groups=groups,
        n_repeats=inp.state["repeats"],
        random_state=planning.SEED,
    )
    assert_allclose(found["pfi"].importance, direct.importance, rtol=1e-12)
    out = views.render(ctx, "pfi_caveats", results)
    together = next(t for t in out["figure"].data if t.name == "shuffled together")
    alone = next(t for t in out["figure"].data if t.name == "each shuffled alone, summed")
    pfi = inp.pfi[model_name]
    frame = caveats.group_rows(found, pfi)
    assert sorted(np.round(together.x, 12)) == sorted(np.round(frame["together"].to_numpy(), 12))
    for name, members in groups.items():
        assert frame.loc[name, "alone_sum"] == pytest.approx(pfi.importance[members].sum(), rel=1e-12)
    assert sorted(np.round(alone.x, 12)) == sorted(np.round(frame["alone_sum"].to_numpy(), 12))
    # the table lists dependent pairs with the library's strengths
    dep = compute.feature_dependence(X)
    for row in out["data"][:5]:
        assert row["strength"] == pytest.approx(dep.strength.loc[row["feature"], row["depends on"]], rel=1e-3)
    # the leak line reads leakage_check on the same rows
    check = compute.leakage_check(pfi, y.to_numpy())
    assert f"{check.skill:.3f}" in out["leak"]


def test_pfi_bars_name_the_chosen_features_dependent_partners(ctx):
    results = _results(ctx, "demo-cancer", feature="mean radius")
    info = views.render(ctx, "pfi", results)["info"]
    assert "mean radius depends strongly on mean area (rank correlation" in info
    x3 = views.render(ctx, "pfi", _results(ctx, "demo-x3"))["info"]
    assert "depends strongly" not in x3 and "Strongly dependent" not in x3
    caveat = views.render(ctx, "pfi_caveats", _results(ctx, "demo-x3"))
    assert "No two features depend strongly" in caveat["figure"].layout.annotations[0].text
    assert caveat["data"] == []
