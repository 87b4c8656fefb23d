"""Issue 39, defect 3: every local explanation names what it compares against, and when the
contributions and the contextual influence point different ways for a feature, the panel
says why in one sentence."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from dashboard import jobs, planning, views
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import influence, plan_state


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("baselines")), max_curves=300))._wip_context


def _results(ctx, ws_id: str, **changes) -> dict:
    state = normalize(ctx, {**default_state(), "ws": ws_id, **changes})[0]
    ws = ctx.store.workspace(ws_id)
    for _ in range(2):  # the curves name the default observation, whose contributions follow
        planned = plan_state(ctx, ws, state)
        jobs.run(ctx.store, ws, planning.missing(ctx.store, planned["tasks"]), policy=ctx.policy)
    return {"state": state, "keys": plan_state(ctx, ws, state)["keys"]}


def test_both_local_explanations_name_their_baseline(ctx):
    results = _results(ctx, "demo-diabetes")
    said = views.render(ctx, "influence", results)["info"]
    assert "middle of the range it can take as that feature alone varies" in said
    assert "the mean prediction over the rows" in said
    contributions = views.render(ctx, "contributions", results)["info"]
    assert "Each contribution compares with that mean prediction over the rows" in contributions


def _inp(values: dict, output=None):
    found = SimpleNamespace(values=pd.Series(values), output=output)
    return SimpleNamespace(
        state={"model": "m", "obs": "7", "edit": {}},
        data=pd.DataFrame(index=pd.RangeIndex(10)),
        results=lambda kind: {"m": found},
    )


def test_the_panel_says_why_when_the_two_point_different_ways():
    influence_values = pd.Series({"income_k": 0.14, "age": -0.2, "tenure": 0.001})
    inp = _inp({"income_k": -0.062, "age": -0.03, "tenure": 0.01}, output="churned")
    text = influence.disagreement(inp, 7, influence_values)
    assert text.startswith("For income_k they point different ways (contribution -6.2 pp, influence +0.14)")
    assert "lowers this prediction against the average row's" in text and "upper half" in text
    agree = _inp({"income_k": 0.062, "age": -0.03, "tenure": 0.01}, output="churned")
    assert influence.disagreement(agree, 7, influence_values) == ""  # tenure's influence is too small to count
    assert influence.disagreement(inp, 8, influence_values) == ""  # another row than the contributions'
