"""Issue 12: PFI on a seeded row sample within a budget of model rows, its standard error
beside each bar, and "Use all rows" (a state field, in the URL)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from numpy.testing import assert_allclose

import compute
from compute.importance import permutation_block
from dashboard import budgets, ids, jobs, planning, tasks, views
from dashboard import resolve as resolving
from dashboard.callbacks.drilldown import update_state
from dashboard.config import Config
from dashboard.loading import load_model
from dashboard.server import create_app
from dashboard.state import default_state, normalize, search_from_state, state_from_search
from dashboard.views import base, load_inputs, plan_state


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("sample-cache")), max_curves=200))._wip_context


@pytest.fixture(autouse=True)
def _memos():
    """Each test plans under its own budgets: nothing memoised under another's is reused."""
    _forget()
    yield
    _forget()


@pytest.fixture
def small_budget(monkeypatch):
    """1,500 model rows, twice that for the X3 demo's forest (the exact tree walk computes its
    PFI): its 3 features x 10 repeats get a 100-row sample of 500."""
    monkeypatch.setattr(budgets, "PFI_BUDGET", 1_500)
    monkeypatch.setattr(budgets, "PFI_MIN_ROWS", 50)
    _forget()
    yield
    _forget()  # records planned under this budget are memoised per process


def _forget():
    """Forget the resolutions and records memoised per process (planned under another budget)."""
    views._INPUTS.items.clear()
    resolving._RESOLVED.items.clear()
    base._RESULTS.items.clear()


def _results(ctx, state) -> dict:
    ws = ctx.store.workspace(state["ws"])
    planned = plan_state(ctx, ws, state)
    jobs.run(ctx.store, ws, planning.missing(ctx.store, planned["tasks"]), policy=ctx.policy)
    return {"state": state, "keys": planned["keys"]}


def test_pfi_runs_on_a_sample_within_the_budget_and_says_so(ctx, small_budget):
    state = normalize(ctx, {**default_state(), "ws": "demo-x3"})[0]
    tasks = [t for t in plan_state(ctx, ctx.store.workspace("demo-x3"), state)["tasks"] if t["kind"] == "pfi"]
    assert tasks and all(t["params"]["n_obs"] == 100 for t in tasks)
    results = _results(ctx, state)
    inp = load_inputs(ctx, results)
    pfi = inp.pfi[inp.state["model"]]
    assert pfi.sampled and pfi.n_rows == 100 and pfi.n_total == 500
    # the library's numbers for the same sample and seed
    ws = inp.ws
    entry = ws.model(inp.state["model"])
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    direct = compute.permutation_importance(
        model, inp.data[list(entry.features)], inp.data[ws.target], loss=ws.loss, n_obs=100, random_state=planning.SEED
    )
    assert_allclose(pfi.repeats.to_numpy(), direct.repeats.to_numpy(), rtol=1e-12)  # chunking: last-bit sums
    out = views.render(ctx, "pfi", results)
    assert "seeded sample of 100 of the 500 selected rows" in out["info"]
    assert out["all_style"] == {} and out["all_label"] == "Use all rows"
    bar = out["figure"].data[0]
    assert list(bar.text) == [f"±{pfi.row_std_error[f]:.2g}" for f in bar.y]
    assert "sample of 100 of 500 rows" in out["figure"].layout.title.subtitle.text
    # the grouped PFI of the caveats view uses the same rows (same seed and budget)
    group_task = next(t for t in plan_state(ctx, ws, state)["tasks"] if t["kind"] == "pfi_groups")
    assert group_task["params"]["n_obs"] == 100


def test_use_all_rows_is_a_state_field_shared_by_url(ctx, small_budget):
    state = normalize(ctx, {**default_state(), "ws": "demo-x3"})[0]
    new, error = update_state(ctx, state, ids.PFI_ALL, {})
    assert error is None and new["pfi_all"] is True
    assert "pfi_all=1" in search_from_state(new) and state_from_search(search_from_state(new))["pfi_all"] is True
    tasks = [t for t in plan_state(ctx, ctx.store.workspace("demo-x3"), new)["tasks"] if t["kind"] == "pfi"]
    assert all(t["params"]["n_obs"] is None for t in tasks)
    results = _results(ctx, new)
    out = views.render(ctx, "pfi", results)
    assert out["info"].startswith("500 rows.") and out["all_label"] == "Back to a sample"
    assert not out["figure"].data[0].text
    back, _ = update_state(ctx, new, ids.PFI_ALL, {})
    assert back["pfi_all"] is False


def test_small_data_is_never_sampled(ctx):
    """With the real budget the demos' PFI uses every row and no button shows."""
    state = normalize(ctx, {**default_state(), "ws": "demo-x3"})[0]
    out = views.render(ctx, "pfi", _results(ctx, state))
    assert out["info"].startswith("500 rows.") and out["all_style"] == {"display": "none"}


def test_more_repetitions_keep_the_rows_of_the_sample(ctx, small_budget):
    """Review finding: sizing the sample by rows x repeats halved it at 20 repetitions, so
    "More repetitions" made PFI less precise. The sample is sized for the default 10."""
    from dashboard.views.pfi import DEFAULT_REPEATS

    assert planning.DEFAULT_PFI_REPEATS == DEFAULT_REPEATS
    for repeats in (10, 20, 40):
        state = normalize(ctx, {**default_state(), "ws": "demo-x3", "repeats": repeats})[0]
        tasks = [t for t in plan_state(ctx, ctx.store.workspace("demo-x3"), state)["tasks"] if t["kind"] == "pfi"]
        assert [t["params"]["n_obs"] for t in tasks] == [100] * len(tasks)


@pytest.fixture
def pairs_budget(monkeypatch):
    """4,500 model rows, twice that walked: a 300-row sample of the X3 demo's 500; X3 == 0
    holds about half of it, so about 75 pairs per permutation lie inside (PFI_MIN_ROWS 50:
    reused)."""
    monkeypatch.setattr(budgets, "PFI_BUDGET", 4_500)
    monkeypatch.setattr(budgets, "PFI_MIN_ROWS", 50)
    _forget()
    yield
    _forget()


def test_a_subgroups_pfi_reuses_the_all_rows_permutations(ctx, pairs_budget):
    """Issue 12: on a sample, a subgroup's PFI is the all-rows permutations restricted to it
    (the library's restrict() of the same call, bit for bit); the next subgroup is derived in
    the web process, no job; the grouped PFI follows the bars; the view says how."""
    from dashboard.callbacks.compute import resolve_state

    ws = ctx.store.workspace("demo-x3")
    state = normalize(ctx, {**default_state(), "ws": ws.id, "subgroup": "X3 == 0"})[0]
    tasks = [t for t in plan_state(ctx, ws, state)["tasks"] if t["kind"] in ("pfi", "pfi_groups")]
    whole = [t for t in tasks if t["kind"] == "pfi" and t["params"].get("keep")]
    mine = [t for t in tasks if t["kind"] == "pfi" and t["params"].get("pairs")]
    assert len(whole) == len(mine) == len(ws.models) and all(t["params"]["condition"] == "" for t in whole)
    assert [t["also"] for t in whole] == [[t["params"]["pairs"]] for t in mine]
    assert all(t["params"].get("via_pairs") for t in tasks if t["kind"] == "pfi_groups")
    results = _results(ctx, state)
    inp = load_inputs(ctx, results)
    pfi = inp.pfi[inp.state["model"]]
    entry = ws.model(inp.state["model"])
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    X, y = inp.data[list(entry.features)], inp.data[ws.target]
    direct = permutation_block(model, X, y, loss=ws.loss, n_obs=300, random_state=planning.SEED, keep_pairs=True)
    inside = (X.loc[direct.rows, "X3"] == 0).to_numpy()
    expected = direct.restrict(inside, n_total=int((X.X3 == 0).sum()))
    assert_allclose(pfi.repeats.to_numpy(), expected.repeats.to_numpy(), rtol=1e-12)
    assert pfi.n_pairs.equals(expected.n_pairs) and pfi.rows.equals(expected.rows)
    assert pfi.importance["X3"] == 0.0  # constant in the subgroup, as a shuffle within it gives
    out = views.render(ctx, "pfi", results)
    assert "reuses the permutations of all rows" in out["info"] and out["all_label"] == "Use all rows"
    assert "row pairs per permutation, reused from all rows" in out["figure"].layout.title.subtitle.text
    assert list(out["figure"].data[0].text) == [f"±{pfi.row_std_error[f]:.2g}" for f in out["figure"].data[0].y]
    # the next subgroup: derived from the cached pairs as the state resolves, before any job
    other = normalize(ctx, {**default_state(), "ws": ws.id, "subgroup": "X3 == 1"})[0]
    key = plan_state(ctx, ws, other)["keys"]["pfi"][entry.name]
    assert not ctx.store.has(key)
    resolve_state(ctx, other, None)
    derived = ctx.store.get(key)
    assert derived is not None and derived.n_pairs is not None
    assert_allclose(derived.repeats.to_numpy(), direct.restrict(~inside).repeats.to_numpy(), rtol=1e-12)
    # "Use all rows": the subgroup's own permutations on all its rows
    own = [t for t in plan_state(ctx, ws, {**state, "pfi_all": True})["tasks"] if t["kind"] == "pfi"]
    assert all(not t["params"].get("pairs") and t["params"]["n_obs"] is None for t in own)


def test_small_subgroups_and_small_data_keep_their_own_permutations(ctx, pairs_budget, monkeypatch):
    ws = ctx.store.workspace("demo-x3")
    data = ctx.store.data(ws)
    assert planning.pfi_via_pairs(data, "X3 == 0", (), 300)
    assert not planning.pfi_via_pairs(data, "X1 > 0.8", (), 300)  # about 10 %: too few pairs inside
    assert not planning.pfi_via_pairs(data, "", (), 300)  # all rows: the call itself
    assert not planning.pfi_via_pairs(data, "X3 == 0", (), None)  # every row: a shuffle within costs little
    monkeypatch.setattr(budgets, "PAIRS_MAX", 1_000)  # pairs too many to keep: the subgroup's own
    state = normalize(ctx, {**default_state(), "ws": ws.id, "subgroup": "X3 == 0"})[0]
    tasks = [t for t in plan_state(ctx, ws, state)["tasks"] if t["kind"] == "pfi"]
    own = [t for t in tasks if t["params"]["condition"] == "X3 == 0"]
    assert len(own) == len(ws.models) and not any(t["params"].get("pairs") for t in tasks)
    # and the focus model's PFI on all rows, which the Subgroups table's all-rows column shows
    assert [(t["model"], t["params"]["condition"]) for t in tasks if t not in own] == [(state["model"], "")]


def test_grouped_pfi_follows_bars_reused_from_all_rows(ctx):
    """The caveats view's task with ``inside`` (bars reused from all rows): the groups found
    on the subgroup, shuffled on every row and restricted, on the bars' own rows."""
    from dashboard.views import caveats

    ws = ctx.store.workspace("demo-cancer")
    entry = ws.model(ws.models[0].name)
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    data = ctx.store.data(ws)
    X, y = data[list(entry.features)], data[ws.target]
    inside = (X["mean radius"] > 12).to_numpy()
    params = {"n_repeats": 3, "threshold": caveats.THRESHOLD, "n_obs": 400, "via_pairs": True}
    found = caveats.run(model, X, y, ws, params, 1, inside=inside)
    groups = compute.feature_dependence(X[inside], list(ws.features)).groups(caveats.THRESHOLD)
    assert found["groups"] == groups and groups
    direct = permutation_block(
        model, X, y, loss=ws.loss, groups=groups, n_repeats=3, n_obs=400, random_state=planning.SEED, keep_pairs=True
    )
    expected = direct.restrict(inside[X.index.get_indexer(direct.rows)])
    assert_allclose(found["pfi"].repeats.to_numpy(), expected.repeats.to_numpy(), rtol=0, atol=0)
    bars = permutation_block(
        model, X, y, loss=ws.loss, n_repeats=3, n_obs=400, random_state=planning.SEED, keep_pairs=True
    ).restrict(inside[X.index.get_indexer(direct.rows)])
    assert found["pfi"].rows.equals(bars.rows) and found["pfi"].n_total == int(inside.sum())


def test_sfimp_runs_on_a_sample_within_its_budget_and_says_so(ctx, monkeypatch):
    """SFIMP within SFIMP_BUDGET model rows: 4,000 rows at 2^3 coalitions x 5 permutations
    are 100 of the X3 demo's 500; the library's numbers on that sample; bars with the
    combined standard error; "Use all rows" shows and lifts the sample."""
    import numpy as np

    monkeypatch.setattr(budgets, "SFIMP_BUDGET", 4_000)
    monkeypatch.setattr(budgets, "PFI_MIN_ROWS", 50)
    assert planning.sfimp_sample(3) == 100 and planning.sfimp_sample(3, all_rows=True) is None
    assert planning.sfimp_sample(12) == max(50, 4_000 // (32 * 11 * 5))  # sampled orderings
    ws = ctx.store.workspace("demo-x3")
    state = normalize(ctx, {**default_state(), "ws": ws.id, "sfimp": True})[0]
    tasks = [t for t in plan_state(ctx, ws, state)["tasks"] if t["kind"] == "sfimp"]
    assert tasks and all(t["params"]["n_obs"] == 100 for t in tasks)
    results = _results(ctx, state)
    inp = load_inputs(ctx, results)
    res = inp.sfimp[inp.state["model"]]
    assert res.sampled and len(res.rows) == 100 and res.n_total == 500 and res.row_std_error is not None
    entry = ws.model(inp.state["model"])
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    direct = compute.shapley_importance(
        model,
        inp.data[list(entry.features)],
        inp.data[ws.target],
        loss=ws.loss,
        n_obs=100,
        random_state=planning.SEED,
        exact_max_players=10,
        tol=0.02,
        max_rows=4_000,
    )
    assert_allclose(res.values.to_numpy(), direct.values.to_numpy(), rtol=1e-9)  # the forest adds in thread order
    assert res.rows.equals(direct.rows)
    out = views.render(ctx, "sfimp", results)
    assert "seeded sample of 100 of the 500 selected rows" in out["info"]
    bar = out["figure"].data[0]
    combined = np.sqrt(res.std_error**2 + res.row_std_error**2)
    assert_allclose(bar.error_x.array, combined.reindex(bar.y).to_numpy())
    pfi_out = views.render(ctx, "pfi", results)
    assert pfi_out["all_style"] == {}  # SFIMP's sample: the button shows though PFI uses every row
    every = [t for t in plan_state(ctx, ws, {**state, "pfi_all": True})["tasks"] if t["kind"] == "sfimp"]
    assert all(t["params"]["n_obs"] is None for t in every)


def test_reused_subgroup_pfi_on_data_with_repeated_row_labels(ctx, pairs_budget):
    """An uploaded parquet may repeat row labels: the subgroup's share of the pairs is read by
    position, as the library's restrict() on the same call."""
    ws = ctx.store.workspace("demo-x3")
    data = ctx.store.data(ws).copy()
    data.index = np.arange(len(data)) // 2  # every label twice
    entry = ws.model(ws.models[0].name)
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    X, y = data[list(entry.features)], data[ws.target]
    whole = permutation_block(model, X, y, loss=ws.loss, n_obs=300, random_state=planning.SEED, keep_pairs=True)
    params = {"condition": "X3 == 0", "excluded": [], "n_obs": 300}
    got = tasks._restrict(whole, data, params)
    inside = (X.X3 == 0).to_numpy()[compute.permutation_rows(len(X), 300, planning.SEED)]
    assert np.array_equal(got.repeats.to_numpy(), whole.restrict(inside).repeats.to_numpy())


def test_a_model_the_tree_walk_computes_gets_a_larger_sample(ctx, monkeypatch):
    """Issue 42: the exact tree walk computes a tree model's PFI at 0.2-0.45x the raw predict,
    so its sample is WALKED_PFI_FACTOR times larger; the same data set's other models keep the
    budget's rows. Whether a model is walked is found where it is loaded (compute.pfi_engine)
    and kept in its record."""
    monkeypatch.setattr(budgets, "PFI_BUDGET", 1_500)
    monkeypatch.setattr(budgets, "PFI_MIN_ROWS", 2)
    _forget()
    ws = ctx.store.workspace("demo-cancer")  # gradient boosting (walked) and a logistic regression
    walked = {m.name: m.walked for m in ws.models}
    assert walked == {"gradient boosting": True, "logistic regression": False}
    per_model = 1_500 // (len(ws.features) * 10)  # 5 of the 171 rows
    for focus in walked:
        state = normalize(ctx, {**default_state(), "ws": ws.id, "model": focus})[0]
        planned = plan_state(ctx, ws, state)["tasks"]
        n_obs = {t["model"]: t["params"]["n_obs"] for t in planned if t["kind"] == "pfi"}
        assert n_obs == {"gradient boosting": 2 * per_model, "logistic regression": per_model}
        groups = next(t for t in planned if t["kind"] == "pfi_groups")  # the focus model's bars' rows
        assert groups["params"]["n_obs"] == n_obs[focus]
    # kept in the record; a record written before the field loads as not walked
    again = type(ws).from_json(ws.to_json())
    assert [m.walked for m in again.models] == [True, False]
    old = json.loads(ws.to_json())
    for m in old["models"]:
        del m["walked"]
    assert [m.walked for m in type(ws).from_json(json.dumps(old)).models] == [False, False]
    _forget()
