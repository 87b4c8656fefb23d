"""Issue 27's views: importance once the other features are known beside the bars, and which
features act together (H² bars, the pair matrix, a pair's 2-D partial dependence, the pair
chosen by a click)."""

from __future__ import annotations

import json
import re

import numpy as np
import plotly.io as pio
import pytest
from helpers.components import figure_title, report_figures
from helpers.components import texts as _texts

import compute
from dashboard import jobs, planning, views
from dashboard.callbacks.drilldown import search_from_state, update_state
from dashboard.config import Config
from dashboard.html_report import report_html
from dashboard.loading import load_model
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import interactions, load_inputs, plan_state


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("dependence-cache")), max_curves=300))._wip_context


def _results(ctx, ws_id: str, **changes) -> dict:
    state = normalize(ctx, {**default_state(), "ws": ws_id, **changes})[0]
    ws = ctx.store.workspace(ws_id)
    planned = plan_state(ctx, ws, state)
    jobs.run(ctx.store, ws, planning.missing(ctx.store, planned["tasks"]), policy=ctx.policy)
    return {"state": state, "keys": planned["keys"]}


def test_x3_demo_interactions_show_x3_with_each_other_feature_strongest(ctx):
    results = _results(ctx, "demo-x3", feature="X1")
    out = views.render(ctx, "interactions", results)
    inp = load_inputs(ctx, results)
    found = inp.results(interactions.KIND)[inp.state["model"]]
    strongest = {frozenset(p) for p in found.pairs[["feature_1", "feature_2"]].to_numpy()[:2]}
    assert strongest == {frozenset({"X1", "X3"}), frozenset({"X2", "X3"})}
    # the same numbers as the library on the same rows, model and seed
    entry = inp.ws.model(inp.state["model"])
    model = load_model(ctx.store.path(entry.path), name=entry.name)
    own = compute.interaction_strength(
        model,
        inp.data[list(entry.features)],
        n_obs=interactions.N_OBS,
        grid_size=interactions.GRID,
        top=interactions.TOP,
        random_state=planning.SEED,
    )
    assert np.allclose(own.pairs["h2"], found.pairs["h2"], rtol=1e-12)
    matrix = out["matrix"]
    assert matrix.layout.xaxis.title.text == "feature" and matrix.layout.yaxis.title.text == "feature"
    first = found.pairs.iloc[0]
    assert out["pd2"].layout.xaxis.title.text == str(first["feature_2"])
    assert out["pd2"].layout.yaxis.title.text == str(first["feature_1"])
    assert "act together most" in out["info"]
    assert "a seeded sample of 200 of all 500 rows" in matrix.layout.title.subtitle.text  # the budget is stated
    assert [o["value"] for o in out["options"]][0] == json.dumps([first["feature_1"], first["feature_2"]])
    assert out["bars"].layout.xaxis.title.text.startswith("H²")


def test_a_click_on_a_cell_selects_the_pair_and_a_forged_one_draws_the_strongest(ctx):
    state = normalize(ctx, {**default_state(), "ws": "demo-x3", "feature": "X1"})[0]
    click = {"points": [{"customdata": json.dumps(["X1", "X2"])}]}
    new, error = update_state(ctx, state, interactions.MATRIX, {"click_pair_interactions_matrix": click})
    assert error is None and json.loads(new["pair"]) == ["X1", "X2"]
    assert "pair=" in search_from_state(new)
    results = _results(ctx, "demo-x3", feature="X1", pair=new["pair"])
    out = views.render(ctx, "interactions", results)
    assert out["pd2"].layout.yaxis.title.text == "X1" and out["pd2"].layout.xaxis.title.text == "X2"
    # a pair outside the result (or not a pair at all) draws the strongest one
    found = load_inputs(ctx, results).results(interactions.KIND)["random forest"]
    strongest = tuple(found.pairs.iloc[0][["feature_1", "feature_2"]])
    for forged in (json.dumps(["X1", "nope"]), "<script>", json.dumps(["X1", "X1"]), json.dumps(list("abc"))):
        bad = normalize(ctx, {**default_state(), "ws": "demo-x3", "pair": forged})[0]
        results = {"state": bad, "keys": plan_state(ctx, ctx.store.workspace("demo-x3"), bad)["keys"]}
        drawn = views.render(ctx, "interactions", results)["pd2"]
        assert (drawn.layout.yaxis.title.text, drawn.layout.xaxis.title.text) == strongest


def test_importance_once_the_others_are_known_sits_beside_the_bars_and_reads_the_largest_drop(ctx):
    results = _results(ctx, "demo-diabetes", feature="bmi")
    out = views.render(ctx, "pfi_caveats", results)
    inp = load_inputs(ctx, results)
    pfi = inp.pfi[inp.state["model"]]
    fig = out["cs_figure"]
    names = [t.name for t in fig.data]
    assert names == [
        "shuffled among all rows (the bars above)",
        "shuffled within similar rows (once the others are known)",
    ]
    marginal = dict(zip(fig.data[0].y, fig.data[0].x, strict=True))
    assert marginal["bmi"] == pytest.approx(pfi.importance["bmi"], rel=1e-12)
    cs = inp.results("cs_pfi")[inp.state["model"]]
    conditional = dict(zip(fig.data[1].y, fig.data[1].x, strict=True))
    assert conditional["s1"] == pytest.approx(cs.importance["s1"], rel=1e-12)
    # s1 and s2 are 0.9 correlated in the diabetes data: shuffled within similar rows, one loses most
    drop = {f: marginal[f] - conditional[f] for f in ("s1", "s2")}
    assert max(drop.values()) > 0
    assert "once" in out["cs_info"] and "was shuffled within" in out["cs_info"]
    assert fig.layout.xaxis.title.text.startswith("increase in")


def test_the_report_carries_both_views(ctx):
    results = _results(ctx, "demo-x3", feature="X1")
    html = report_html(ctx, results)
    titles = [figure_title(layout) for _, layout in report_figures(html)]
    assert "Which features act together?" in html and "Which pairs act together (Friedman's H²)" in titles
    assert "Importance once the other features are known" in html
    assert "act together most" in html  # the reading, as a note


def test_the_report_writes_figure_text_the_same_whichever_encoder_plotly_has(ctx, monkeypatch):
    """Issue 38: plotly's JSON encoder is orjson when installed (non-ASCII written as itself)
    and the json module otherwise (escaped): the report's figures are written as themselves
    either way, and a figure's text cannot close its script element."""
    results = _results(ctx, "demo-x3", feature="X1")
    pages = []
    for engine in ("json", "auto"):
        monkeypatch.setattr(pio.json.config, "default_engine", engine)
        pages.append(report_html(ctx, results))
    figures = [report_figures(page) for page in pages]
    assert figures[0] == figures[1] and len(figures[0]) >= 5
    assert "Which pairs act together (Friedman's H²)" in pages[0]  # as itself, not \\u00b2
    scripts = re.findall(r"<script>Plotly\.newPlot\((.*?)</script>", pages[0], flags=re.S)
    assert len(scripts) == len(figures[0]) and not any("</" in s or "<!--" in s for s in scripts)


def test_the_x3_demo_findings_name_the_features_and_the_x3_split(ctx):
    results = _results(ctx, "demo-x3", feature="X1")
    out = views.render(ctx, "findings", results)
    sentences = [t for t in _texts(out["list"]) if not t.startswith("see ")]
    text = " ".join(sentences)
    assert "relies most on X2" in text and "X1" in text
    # the top feature's importance comes from one side of the X3 split (X1: X3 == 0, X2: X3 == 1)
    split = r"(X1's importance comes from rows where X3 == 0|X2's importance comes from rows where X3 == 1)"
    assert re.search(split + r": read from its ICI curves .*, it is [\d,]+ there", text), text
    assert "X1 and X3 act together" in text
    assert 3 <= len([s for s in sentences if s.strip()]) <= 7
    links = [c.id for c in out["list"][0].children for c in c.children if getattr(c, "id", None)]
    assert {link["view"] for link in links} >= {"pfi", "subgroup_finder", "interactions"}
    html = report_html(ctx, results)
    assert "<h3>What we found</h3>" in html and "act together" in html.split("<h3>What we found</h3>")[1][:3000]
