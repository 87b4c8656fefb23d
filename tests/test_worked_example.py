"""README's worked example (issue 25): a clickable bar chart with a control kept in the URL is
one module, ``tests/helpers/example_view.py``, and nothing else. The app is built in a fresh
interpreter with the module named in ``WIP_EXTRA_VIEWS`` (the registry is built at import):
its panel is on the page, a click on a bar selects the feature, the control sets a state
field that the URL keeps, and the bars are the library's PD importance, unrounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, sys
import numpy as np
import compute
from dashboard import jobs, views
from dashboard.callbacks import drilldown
from dashboard.callbacks.compute import resolve_state
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state, normalize, search_from_state, state_from_search
from tests.helpers import example_view as ex

app = create_app(Config(cache_dir=sys.argv[1], max_curves=60))
ctx = app._wip_context
out = {"registered": "firm" in views.BY_NAME, "section": views.BY_NAME["firm"].section}
out["on_page"] = [app.layout[ex.GRAPH].id, app.layout[ex.TOP].id]
out["inputs"] = sorted(k for k in drilldown.CONTROLLER_INPUTS if "firm" in k)
state, _ = normalize(ctx, {**default_state(), "ws": "demo-x3"})
out["default_top"] = state["firm_top"]
click = {"select_firm_graph": {"points": [{"customdata": "X2"}]}, "previous_subgroup": ""}
out["clicked"] = drilldown.update_state(ctx, state, ex.GRAPH, click)[0]["feature"]
top, _ = drilldown.update_state(ctx, state, ex.TOP, {"field_firm_top": 2, "previous_subgroup": ""})
out["top"], out["search"] = top["firm_top"], search_from_state(top)
out["round_trip"] = state_from_search(out["search"])["firm_top"]
out["clamped"] = drilldown.update_state(ctx, state, ex.TOP, {"field_firm_top": 999})[0]["firm_top"]
out["shown"] = drilldown.controller_outputs(ctx, None, "url", {"search": "?ws=demo-x3&firm_top=3"})["field_firm_top"]
ws = ctx.store.workspace("demo-x3")
planned = views.plan_state(ctx, ws, top)
jobs.run(ctx.store, ws, [t for t in planned["tasks"] if t["kind"] == "profiles"], policy=ctx.policy)
figure = views.render(ctx, "firm", resolve_state(ctx, top, None).results)["figure"]
bars = figure.data[0]
out["bars"] = dict(zip(bars.y, [float(v) for v in bars.x]))
out["customdata"] = list(bars.customdata)
summary = ctx.store.get(planned["keys"]["summary"])
profiles = {f: ctx.store.get(planned["keys"]["profiles"][f]) for f in summary.features}
out["library"] = {f: float(compute.pd_importance(prof)) for f, prof in profiles.items()}
out["title"] = figure.layout.title.text
print(json.dumps(out))
"""


def test_a_clickable_bar_chart_with_a_url_field_is_one_module(tmp_path):
    env = {**os.environ, "WIP_EXTRA_VIEWS": "tests.helpers.example_view", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "cache")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["registered"] and out["section"] == "overview"
    assert out["on_page"] == ["firm-graph", "firm-top"]
    assert out["inputs"] == ["field_firm_top", "select_firm_graph"]
    assert out["default_top"] == 10
    assert out["clicked"] == "X2"
    assert out["top"] == 2 and "firm_top=2" in out["search"] and out["round_trip"] == 2
    assert out["clamped"] == 50 and out["shown"] == 3
    # the two largest PD importances, unrounded, as compute.pd_importance gives them
    largest = sorted(out["library"].items(), key=lambda kv: -kv[1])[:2]
    assert out["bars"] == dict(largest) and out["customdata"] == [f for f, _ in largest]
    assert "top 2" in out["title"]


def test_nothing_outside_the_module_names_it():
    """The dashboard's code knows the example only through the registry: no file of it names
    the module, its ids or its field."""
    named = []
    for path in (ROOT / "dashboard").rglob("*.py"):
        text = path.read_text()
        named += [
            f"{path.relative_to(ROOT)}: {word}" for word in ("example_view", "firm-graph", "firm_top") if word in text
        ]
    assert named == []


def test_an_extra_views_module_without_a_view_is_refused(tmp_path):
    env = {**os.environ, "WIP_EXTRA_VIEWS": "tests.helpers.hostile", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", "import dashboard.views"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "names 'tests.helpers.hostile', which defines no VIEW" in done.stderr
