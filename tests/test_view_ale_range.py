"""The ALE-range view (issue 45's worked example of README's recipe): one module,
``dashboard/views/ale_range.py``, and this test. Its bars are each numeric feature's ALE
max - min at the ALE view's K, equal to brute force (``compute.ale_curve`` on the model, at
the same K, on the profile's rows); a click on a bar selects the feature; "top N" is a state
field kept in the URL; changing the ALE view's K changes the bars."""

from __future__ import annotations

import numpy as np
import pytest

import compute
from dashboard import jobs, views
from dashboard.callbacks import drilldown
from dashboard.callbacks.compute import resolve_state
from dashboard.config import Config
from dashboard.loading.models import load_model
from dashboard.server import create_app
from dashboard.state import default_state, normalize, search_from_state, state_from_search
from dashboard.views import ale_range


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("ale-range")), max_curves=200))._wip_context


def _bars(ctx, changes: dict):
    state, error = normalize(ctx, {**default_state(), "ws": "demo-diabetes", **changes})
    assert error is None
    ws = ctx.store.workspace(state["ws"])
    planned = views.plan_state(ctx, ws, state)
    jobs.run(ctx.store, ws, [t for t in planned["tasks"] if t["kind"] == "profiles"], policy=ctx.policy)
    figure = views.render(ctx, "ale_range", resolve_state(ctx, state, None).results)["figure"]
    bars = figure.data[0]
    return state, planned, figure, dict(zip(bars.customdata, [float(v) for v in bars.x]))


def _brute_force(ctx, state, planned) -> dict:
    """ALE max - min of each feature from the model itself (``compute.ale_curve``, a type-1
    quantile ALE with its own predictions) on the rows the profiles explain."""
    ws = ctx.store.workspace(state["ws"])
    entry = next(m for m in ws.models if m.name == state["model"])
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    X = ctx.store.data(ws).drop(columns=ws.target)
    out = {}
    for feature, key in planned["keys"]["profiles"].items():
        rows = ctx.store.get(key).rows
        ale = compute.ale_curve(model, X.loc[rows], feature, n_intervals=state["ale_k"], output=ws.output)
        out[feature] = float(ale["ale"].max() - ale["ale"].min())
    return out


@pytest.mark.parametrize("k", [20, 6])
def test_the_bars_are_the_ale_ranges_of_the_model_at_the_ale_views_k(ctx, k):
    state, planned, figure, bars = _bars(ctx, {"ale_k": k, "ale_top": 4})
    expected = _brute_force(ctx, state, planned)
    largest = sorted(expected, key=lambda f: -expected[f])[:4]
    assert list(bars) == largest  # the top 4, largest first (the figure draws the first on top)
    for feature in largest:
        assert np.isclose(bars[feature], expected[feature], rtol=1e-9, atol=1e-9), feature
    assert "top 4" in figure.layout.title.text and f"{k} intervals" in figure.layout.title.subtitle.text


def test_k_changes_the_bars(ctx):
    assert _bars(ctx, {"ale_k": 20})[3] != _bars(ctx, {"ale_k": 3})[3]


def test_a_click_selects_the_feature_and_top_n_is_kept_in_the_url(ctx):
    state, _ = normalize(ctx, {**default_state(), "ws": "demo-diabetes"})
    assert state["ale_top"] == 10
    inputs = sorted(k for k in drilldown.CONTROLLER_INPUTS if "ale_range" in k or "ale_top" in k)
    assert inputs == ["field_ale_top", "select_ale_range_graph"]
    click = {"select_ale_range_graph": {"points": [{"customdata": "s5"}]}, "previous_subgroup": ""}
    assert drilldown.update_state(ctx, state, ale_range.GRAPH, click)[0]["feature"] == "s5"
    top = drilldown.update_state(ctx, state, ale_range.TOP, {"field_ale_top": 3, "previous_subgroup": ""})[0]
    assert top["ale_top"] == 3 and "ale_top=3" in search_from_state(top)
    assert state_from_search(search_from_state(top))["ale_top"] == 3
    assert drilldown.update_state(ctx, state, ale_range.TOP, {"field_ale_top": 999})[0]["ale_top"] == 50


def test_the_selected_feature_is_outlined(ctx):
    _, _, figure, bars = _bars(ctx, {"feature": "s5"})
    ticks = list(figure.layout.yaxis.ticktext or figure.layout.yaxis.categoryarray or [])
    assert any("<b>" in str(t) and "s5" in str(t) for t in ticks), ticks
    assert "s5" in bars
