"""One resolve per request (issue 45, item 1): each callback request that starts from a
drill-down state normalises it once and plans it once (``views.resolve``), and hands the
resolution down; nothing below it normalises or plans the same state again.

The counts wrap ``dashboard.state.normalize``, ``dashboard.planning.plan`` and
``dashboard.planning.plan_state`` wherever a module of ours holds them, and drive the callbacks'
bodies as the page does (the controller, resolve, the job, finish, the watchdogs, each view's
render). The per-process memo of resolutions is emptied before each request, so each one is
counted as a worker that never saw the state would answer it.
"""

from __future__ import annotations

import collections
import dataclasses
import sys

import pytest
from dash import no_update

from dashboard import ids, planning, views
from dashboard import resolve as resolving
from dashboard import state as state_module
from dashboard.callbacks import compute as compute_callbacks
from dashboard.callbacks.drilldown import controller_outputs
from dashboard.config import Config
from dashboard.server import create_app

COUNTED = ("normalize", "plan", "plan_state")


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("resolve-once")), max_curves=200))._wip_context


@pytest.fixture
def counts(monkeypatch):
    """Calls of each counted function, wherever it was imported."""
    found: collections.Counter = collections.Counter()
    originals = {
        "normalize": state_module.normalize,
        "plan": planning.plan,
        "plan_state": planning.plan_state,
    }

    def counted(name, fn):
        def inner(*args, **kwargs):
            found[name] += 1
            return fn(*args, **kwargs)

        return inner

    modules = [m for n, m in list(sys.modules.items()) if n.startswith("dashboard") and m is not None]
    for module in modules:
        for name, fn in originals.items():
            if getattr(module, name, None) is fn:
                monkeypatch.setattr(module, name, counted(name, fn))
    return found


def _request(counts, call):
    """One callback request, as a worker that holds no resolution of its state answers it:
    (its result, {counted function: calls})."""
    resolving._RESOLVED.items.clear()
    views._INPUTS.items.clear()
    counts.clear()
    out = call()
    return out, {name: counts[name] for name in COUNTED}


ONCE = {"normalize": 1, "plan": 1, "plan_state": 1}


def _computed(ctx, state):
    """The state's results all cached (a first visit's job)."""
    resolved = compute_callbacks.resolve_state(ctx, state, None)
    if isinstance(resolved.request, dict):
        assert compute_callbacks.run_request(ctx, resolved.request).get("ok")
    return compute_callbacks.resolve_state(ctx, state, None)


def test_a_pfi_request_is_normalised_and_planned_once_per_request(ctx, counts):
    """More repetitions: the controller normalises (and plans nothing); resolve, the job,
    finish, the watchdog and every view's render each normalise once and plan once."""
    first = controller_outputs(ctx, None, ids.URL, {"search": "?ws=demo-x3"})["state"]
    _computed(ctx, first)
    out, seen = _request(counts, lambda: controller_outputs(ctx, first, ids.REPEATS_MORE, {}))
    assert seen == {"normalize": 1, "plan": 0, "plan_state": 0}
    state = out["state"]
    assert state["repeats"] == 20
    resolved, seen = _request(counts, lambda: compute_callbacks.resolve_state(ctx, state, None))
    assert seen == ONCE
    request = resolved.request
    assert isinstance(request, dict)
    todo = {t["kind"] for t in planning.missing(ctx.store, views.resolve(ctx, state).tasks)}
    assert "pfi" in todo and "profiles" not in todo  # the permutations again, not the curves
    done, seen = _request(counts, lambda: compute_callbacks.run_request(ctx, request))
    assert done.get("ok") and seen == ONCE
    finished, seen = _request(counts, lambda: compute_callbacks.finish_job(ctx, state, done, request))
    assert seen == ONCE and "sigs" in finished["results"]
    _, seen = _request(counts, lambda: compute_callbacks.watch_job(ctx, False, state, done))
    assert seen == ONCE
    for view in views.REGISTRY:
        _, seen = _request(counts, lambda view=view: views.render(ctx, view, finished["results"]))
        assert seen == ONCE, view.name


def test_a_feature_switch_is_normalised_and_planned_once_per_request(ctx, counts):
    first = controller_outputs(ctx, None, ids.URL, {"search": "?ws=demo-x3"})["state"]
    _computed(ctx, first)
    out, seen = _request(counts, lambda: controller_outputs(ctx, first, ids.FEATURE_SELECT, {"feature": "X2"}))
    assert seen == {"normalize": 1, "plan": 0, "plan_state": 0}
    resolved, seen = _request(counts, lambda: compute_callbacks.resolve_state(ctx, out["state"], None))
    assert seen == ONCE and not isinstance(resolved.request, dict)  # all cached: no job
    for view in views.REGISTRY:
        _, seen = _request(counts, lambda view=view: views.render(ctx, view, resolved.results))
        assert seen == ONCE, view.name


def test_a_first_visit_job_plans_again_only_for_the_default_observation(ctx, counts, tmp_path):
    """The job that computes the curves learns the default observation from them: it plans
    once more (its what-if and contributions), still normalising once."""
    fresh = create_app(Config(cache_dir=str(tmp_path), max_curves=100))._wip_context
    state = controller_outputs(fresh, None, ids.URL, {"search": "?ws=demo-x3&feature=X2"})["state"]
    request = compute_callbacks.resolve_state(fresh, state, None).request
    assert isinstance(request, dict)
    done, seen = _request(counts, lambda: compute_callbacks.run_request(fresh, request))
    assert done.get("ok")
    assert seen == {"normalize": 1, "plan": 2, "plan_state": 2}
    assert compute_callbacks.resolve_state(fresh, state, None).request is no_update  # nothing left


def test_requests_of_one_state_share_its_resolution(ctx, counts):
    """Within a process, a state resolved once is not normalised or planned again by the next
    request (the views, finish, the watchdog) while its plan is final."""
    state = controller_outputs(ctx, None, ids.URL, {"search": "?ws=demo-x3&feature=X3"})["state"]
    _computed(ctx, state)
    counts.clear()
    for _ in range(3):
        compute_callbacks.resolve_state(ctx, state, None)
    assert counts["normalize"] <= 1 and counts["plan"] <= 1


def test_a_changed_record_is_resolved_again_once_then_shared(ctx, counts):
    """A workspace record that changed under a memoised resolution (a data set's record
    written again, here with another title) is resolved again, and that resolution is
    shared in turn: not planned anew on every request. The memo holds no data frame (the
    store's own cache bounds those)."""
    state = controller_outputs(ctx, None, ids.URL, {"search": "?ws=demo-x3&feature=X2"})["state"]
    _computed(ctx, state)
    first = views.resolve(ctx, state)
    assert "data" not in {f.name for f in dataclasses.fields(first)}
    ws = ctx.store.workspace(state["ws"])
    ctx.store.save_workspace(dataclasses.replace(ws, title=ws.title + " (again)"))
    try:
        counts.clear()
        again = [views.resolve(ctx, state) for _ in range(3)]
        assert again[0].ws.title.endswith("(again)") and all(r is again[0] for r in again)
        assert counts["normalize"] == 1 and counts["plan"] == 1
    finally:
        ctx.store.save_workspace(ws)


@pytest.mark.parametrize(
    "changes",
    [{}, {"obs": "5"}, {"subgroup": "X3 == 0"}, {"subgroup": "X3 == 1", "exclude": ["3"]}, {"feature": "X2"}],
)
def test_one_pass_plans_what_two_passes_planned(ctx, changes):
    """``plan_state`` plans in one pass (the default observation found as soon as the curves'
    key is planned): the same keys, tasks and shown state as planning the state, then planning
    it again with the default observation the first plan's keys name."""
    state = controller_outputs(ctx, None, ids.URL, {"search": "?ws=demo-x3"})["state"]
    _computed(ctx, state)
    state = {**state, **changes}
    r = views.resolve(ctx, state)
    _computed(ctx, r.state)
    one = views.plan_state(ctx, r.ws, r.state)
    data = ctx.store.data(r.ws)
    settings = {"max_curves": ctx.config.max_curves, "grid_budget": ctx.config.grid_budget}
    specs = views.needed_specs()
    first = planning.plan(planning.PlanInput(r.ws, r.state, len(data), data=data, **settings), specs)
    shown = planning.with_default_observation(ctx.store, r.state, first["keys"], data)
    two = planning.plan(planning.PlanInput(r.ws, shown, len(data), data=data, **settings), specs)
    assert shown.get("obs") is not None
    assert (one["keys"], one["tasks"], one["state"]) == (two["keys"], two["tasks"], shown)
