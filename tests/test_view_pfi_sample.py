"""Issue 12: PFI on a seeded row sample within a budget of model rows, its standard error
beside each bar, and "Use all rows" (a state field, in the URL)."""

from __future__ import annotations

import pytest
from numpy.testing import assert_allclose

import compute
from dashboard import ids, jobs, planning, views
from dashboard.callbacks.compute import plan_state
from dashboard.callbacks.drilldown import normalize, update_state
from dashboard.config import Config
from dashboard.loading import load_model
from dashboard.server import create_app
from dashboard.state import default_state, search_from_state, state_from_search
from dashboard.views import base
from dashboard.views.base import load_inputs


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("sample-cache")), max_curves=200))._wip_context


@pytest.fixture
def small_budget(monkeypatch):
    """3,000 model rows: the X3 demo's 3 features x 10 repeats get a 100-row sample of 500."""
    monkeypatch.setattr(planning, "PFI_BUDGET", 3_000)
    monkeypatch.setattr(planning, "PFI_MIN_ROWS", 50)
    yield
    base._INPUTS.items.clear()  # records planned under this budget are memoised per process
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
    from dashboard.state import DEFAULT_REPEATS

    assert planning.DEFAULT_PFI_REPEATS == DEFAULT_REPEATS
    for repeats in (10, 20, 40):
        state = normalize(ctx, {**default_state(), "ws": "demo-x3", "repeats": repeats})[0]
        tasks = [t for t in plan_state(ctx, ctx.store.workspace("demo-x3"), state)["tasks"] if t["kind"] == "pfi"]
        assert [t["params"]["n_obs"] for t in tasks] == [100] * len(tasks)
