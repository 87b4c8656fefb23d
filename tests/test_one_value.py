"""Issue 39, item 2: one value per quantity. A feature's PFI for a model, rows and
repetitions is one number everywhere: the Subgroups table's all-rows column is the Overview
bars' result, digit for digit, on the X3 demo and on the wine demo (where the ICI curves'
estimate put flavanoids above color_intensity for XGBoost and the bars the other way round);
the columns estimated otherwise say so. And two methods get two names: "PFI within the
subgroup" (the table) and "importance once the other features are known" (cs-PFI); the old
"conditional PFI", which named both, is on neither panel.

The jobs run in a fresh interpreter on the same cache: this process never loads the boosters
(``tests/test_boosters.py`` checks that it never imported them), and a child forked from it
would hang in a booster's OpenMP once another test has started an OpenMP pool here.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from dashboard import ids, views
from dashboard.config import Config
from dashboard.html_report import report_html
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import caveats, conditional_pfi, load_inputs, plan_state

ROOT = Path(__file__).resolve().parent.parent
BOOSTERS = all(importlib.util.find_spec(name) is not None for name in ("xgboost", "lightgbm", "catboost"))
needs_boosters = pytest.mark.skipif(not BOOSTERS, reason="the boosters extra is not installed")
CASES = [
    ("demo-x3", "random forest"),
    pytest.param("demo-wine", "XGBoost", marks=needs_boosters),
    pytest.param("demo-wine", "LightGBM", marks=needs_boosters),
    pytest.param("demo-wine", "CatBoost", marks=needs_boosters),
]
OLD_NAME = re.compile(r"conditional PFI|conditional importance|\(conditional\)", re.IGNORECASE)


def _context(path) -> object:
    return create_app(Config(cache_dir=str(path), max_curves=300))._wip_context


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return _context(tmp_path_factory.mktemp("one-value-cache"))


#: computes a state's missing results into a cache, in a fresh interpreter
JOB = """
import json, sys
from dashboard import jobs, planning
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.views import plan_state
ctx = create_app(Config(cache_dir=sys.argv[1], max_curves=300))._wip_context
state = json.loads(sys.argv[2])
ws = ctx.store.workspace(state["ws"])
jobs.run(ctx.store, ws, planning.missing(ctx.store, plan_state(ctx, ws, state)["tasks"]), policy=ctx.policy)
"""


def _results(ctx, ws_id: str, **changes) -> dict:
    """The state's results, its missing tasks run as a background job runs them."""
    state = normalize(ctx, {**default_state(), "ws": ws_id, **changes})[0]
    ws = ctx.store.workspace(ws_id)
    done = subprocess.run(
        [sys.executable, "-c", JOB, str(ctx.config.cache_path), json.dumps(state)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    planned = plan_state(ctx, ws, state)
    return {"state": state, "keys": planned["keys"]}


def _column(out: dict, prefix: str) -> pd.Series:
    """A table column by the start of its header, by feature."""
    (column,) = [c for c in out["columns"] if c["name"].startswith(prefix)]
    return pd.Series({r["feature"]: r[column["id"]] for r in out["data"]}, dtype=float)


def _bars(figure, model: str) -> tuple[pd.Series, pd.Series, list[str]]:
    """One model's PFI bars as drawn: the values, the whiskers and the hover texts."""
    (bar,) = [t for t in figure.data if t.type == "bar" and t.name == model]
    return (
        pd.Series(bar.x, index=list(bar.y), dtype=float),
        pd.Series(bar.error_x.array, index=list(bar.y), dtype=float),
        list(bar.hovertext),
    )


@pytest.mark.parametrize(("ws_id", "model"), CASES)
def test_the_all_rows_column_is_the_overview_bars(ctx, ws_id, model):
    """The table's all-rows PFI and its ± are the bars' (``inp.pfi[model]``) at 1e-12, in the
    bars' order and to the digits the bars' hover writes them with; before, they were the mean
    ICI integral (wine, XGBoost: flavanoids 0.4217 and color_intensity 0.4221 against the bars'
    0.376 and 0.449, the order flipped)."""
    results = _results(ctx, ws_id, model=model)
    inp = load_inputs(ctx, results)
    bars = inp.pfi[model]
    table = views.render(ctx, "conditional_pfi", results)
    shown = _column(table, "all (n=")
    assert sorted(shown.index) == sorted(bars.features)
    assert_allclose(shown, bars.importance[shown.index], rtol=1e-12, atol=0)
    error = _column(table, "all: ± standard error")
    assert_allclose(error, bars.uncertainty[error.index], rtol=1e-12, atol=0)
    assert list(shown.index) == list(bars.importance.sort_values(ascending=False, kind="stable").index)
    # the same numbers as the Overview draws them, written to the same digits
    drawn, whiskers, hover = _bars(views.render(ctx, "pfi", results)["figure"], model)
    assert_allclose(shown, drawn[shown.index], rtol=1e-12, atol=0)
    assert_allclose(error, whiskers[error.index], rtol=1e-12, atol=0)
    formats = {c["name"]: c.get("format", {}).get("specifier") for c in table["columns"]}
    assert formats[next(n for n in formats if n.startswith("all (n="))] == ",.4~r"  # 4 significant, as .4g
    assert formats["all: ± standard error"] == ",.3~r"  # 3 significant, as the hover's ± .3g
    for feature in shown.index:
        assert any(f"{feature}: {shown[feature]:.4g} ± {error[feature]:.3g}" in text for text in hover), feature
    # the heading says what it is, with the bars' rows
    (name,) = [c["name"] for c in table["columns"] if c["name"].startswith("all (n=")]
    assert name == f"all (n={bars.n_rows}): PFI as the Overview bars on all rows"


def test_on_a_subgroup_the_all_rows_column_stays_the_all_rows_bars(tmp_path):
    """Opened on a subgroup first (a shared link: nothing cached), the table plans the bars'
    all-rows PFI and shows it, not the subgroup's bars, nor the curves' estimate; the
    subgroup, complement and kept-rows columns are the ICI curves' (Eq. 9), headed so, and
    a sentence says why they can differ from the bars."""
    ctx = _context(tmp_path / "cache")
    sub = _results(ctx, "demo-x3", subgroup="X3 == 0", exclude=["4"])
    kinds = [t["kind"] for t in plan_state(ctx, ctx.store.workspace("demo-x3"), sub["state"])["tasks"]]
    assert kinds.count("pfi") == 2 and conditional_pfi.KIND in kinds  # the subgroup's bars and all rows'
    table = views.render(ctx, "conditional_pfi", sub)
    whole = load_inputs(ctx, _results(ctx, "demo-x3")).pfi["random forest"]
    shown = _column(table, "all (n=")
    assert_allclose(shown, whole.importance[shown.index], rtol=1e-12, atol=0)
    own = load_inputs(ctx, sub).pfi["random forest"]  # the Overview on the subgroup: other rows
    assert not np.allclose(own.importance[shown.index], shown)
    inp = load_inputs(ctx, sub)
    curves = inp.summary.conditional_pfi(inp.mask, ["4"])
    counts = curves.attrs["counts"]
    for group, within in (("subgroup", "PFI within"), ("complement", "PFI within"), ("without excluded", "PFI")):
        header = f"{group} (n={counts[group]}): {within}, from the ICI curves"
        assert_allclose(_column(table, header), curves[group][shown.index], rtol=1e-12, atol=0)
    assert [c["name"] for c in table["columns"]][1:3] == [
        f"all (n={whole.n_rows}): PFI as the Overview bars on all rows",
        "all: ± standard error",
    ]
    sentence = table["info"].split(". ")[0]
    assert "the Overview bars' PFI on all rows" in sentence and "come from the ICI curves" in sentence
    assert "can differ from the bars" in sentence


def _panel_text(ctx, results, name: str) -> str:
    """Everything a panel says: title, question, method, rendered outputs, export headers."""
    view = views.BY_NAME[name]
    out = views.render(ctx, name, results)
    parts = [view.title, view.question, view.method]
    for value in out.values():
        if hasattr(value, "to_plotly_json"):
            parts.append(json.dumps(value.to_plotly_json(), default=str))
        else:
            parts.append(json.dumps(value, default=str, ensure_ascii=False))
    for button in view.exports:
        download = views.export(ctx, button, results)
        if download:
            parts.append(download["content"].splitlines()[0])
    return "\n".join(parts)


def test_two_methods_two_names(ctx):
    """The Subgroups table is "PFI within the subgroup"; the caveats' cs-PFI is "importance
    once the other features are known"; "conditional PFI" (which named both) is on neither
    panel, nor in their report sections, nor in the README."""
    results = _results(ctx, "demo-x3", subgroup="X3 == 0")
    assert load_inputs(ctx, results).results(caveats.CS_KIND)  # the cs-PFI figure is drawn
    table = _panel_text(ctx, results, "conditional_pfi")
    cs = _panel_text(ctx, results, "pfi_caveats")
    assert views.BY_NAME["conditional_pfi"].title.startswith("PFI within the subgroup")
    assert "PFI within, from the ICI curves" in table and "PFI within the subgroup" in table
    assert "Importance once the other features are known" in cs and "(once the others are known)" in cs
    assert views.BY_NAME["pfi_caveats"].method.count("Importance once the other features are known:") == 1
    assert OLD_NAME.search(table) is None, OLD_NAME.search(table)
    assert OLD_NAME.search(cs) is None, OLD_NAME.search(cs)
    bars = views.render(ctx, "pfi", results)["info"]  # the bars point to the table by its name
    assert "PFI within the subgroup (Subgroups" in bars and OLD_NAME.search(bars) is None
    html = report_html(ctx, results)
    for view in ("conditional_pfi", "pfi_caveats"):
        title = views.BY_NAME[view].title
        section = html[html.index(f"<h3>{title}</h3>") :].split("</section>")[0]
        assert OLD_NAME.search(section) is None, (view, OLD_NAME.search(section))
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "**PFI within the subgroup**" in readme and "**importance once the other features are known**" in readme
    assert OLD_NAME.search(readme) is None, OLD_NAME.search(readme)


def test_the_export_names_each_column_as_the_page_does(ctx):
    """The CSV carries the table's headers (what each number is and its rows) and each
    model's bars on the selected rows, named as the bars."""
    results = _results(ctx, "demo-x3", subgroup="X3 == 0")
    out = views.export(ctx, ids.EXPORT_PFI, results)
    frame = pd.read_csv(io.StringIO(out["content"]), index_col=0)
    shown = [c["name"] for c in views.render(ctx, "conditional_pfi", results)["columns"]]
    assert frame.index.name == shown[0] == "feature"
    rows = load_inputs(ctx, results).selection
    assert list(frame.columns) == [
        *shown[1:],
        f"random forest: PFI as the Overview bars on {rows}",
        f"random forest: ± standard error on {rows}",
    ]
