"""Issue 41 in the browser: a constant and an empty column leave every other panel and the
report intact.

A HistGradientBoosting model (a .skops file; it reads missing values) and a CSV where ``region``
holds one value (2) and ``f0`` none (all missing) are uploaded through the page's load form to
``gunicorn app:server -w 2`` and read in headless Debian Chromium (the server, tab and screenshot
fixtures are ``test_browser_story.py``'s, copied: a server of this module's own with its own
cache). Every section (Overview, Feature, Observation, Subgroups) draws its panels with numbers,
the interactions and the what-if included; the panels that need f0's or region's own curve say
in words why there is none; the downloaded report holds the other features' sections; no text
shows NumPy's repr (np.float64(...)) or a "nan" where a number goes. Screenshots go to
``test-output/screenshots/columns-*.png`` (override the folder with WIP_TEST_OUTPUT).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.gunicorn_server import gunicorn_server

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path(os.environ.get("WIP_TEST_OUTPUT", ROOT / "test-output")) / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT = 180_000  # ms
NO_WEBGL_JS = "() => document.body.innerText.includes('WebGL is not supported')"
FEATURES = ["income_k", "age", "tenure", "region", "f0"]
OTHERS = ["income_k", "age", "tenure"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """gunicorn with two workers on a free loopback port, its own cache folder."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: run the suite with `python tests/run.py` (installs it).")
    with gunicorn_server(tmp_path_factory.mktemp("wip-columns-cache"), {"WIP_UPLOAD_LIMIT_MB": "5"}) as running:
        yield running


@pytest.fixture
def tab(chrome, server, request):
    """A fresh browser context per test (its own session); fails on page errors."""
    context = chrome.new_context(viewport={"width": 1400, "height": 1800}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield pg
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    if failed:
        shot(pg, f"FAILED-columns-{request.node.name}")
        print((server["cache"] / "gunicorn.log").read_text()[-4000:])
    context.close()
    assert errors == [], f"browser errors: {errors}"


def shot(tab, name: str, selector: str | None = None) -> Path:
    """A screenshot (of the element ``selector`` when given, else the full page), and no chart
    replaced by Plotly's "WebGL is not supported"."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / f"{name}.png"
    if selector is None:
        tab.screenshot(path=str(path), full_page=True)
    else:
        tab.locator(selector).first.screenshot(path=str(path))
    assert not tab.evaluate(NO_WEBGL_JS), f"{name}: a chart needs WebGL, which this browser lacks"
    return path


def open_section(tab, key: str) -> None:
    tab.click(f"#section-tab-{key}")
    tab.wait_for_selector(f"#section-tab-{key}.selected")


# every graph of the open section (the visible ones) drawn: none still blank ("Drawing this view…", "Waiting…")
DRAWN_JS = """(least) => {
    const graphs = Array.from(document.querySelectorAll('.js-plotly-plot')).filter(gd => gd.offsetParent !== null);
    return graphs.length >= least && !document.querySelector('._dash-loading-callback') && graphs.every(gd => {
        const notes = (gd.layout && gd.layout.annotations) || [];
        return !notes.some(a => /Drawing|Waiting|Computing|Measuring/.test(a.text || ''));
    });
}"""

#: each drawn graph of the open section: its panel, its message (annotations) and how many
#: finite numbers its traces draw
GRAPHS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .filter(gd => gd.offsetParent !== null)
    .map(gd => {
        const panel = gd.closest('[id^="view-"]');
        const notes = ((gd.layout && gd.layout.annotations) || []).map(a => a.text || '').join(' ');
        let numbers = 0;
        for (const t of (gd._fullData || [])) {
            for (const key of ['x', 'y', 'z']) {
                const row = v => (v && v.length !== undefined && typeof v !== 'string') ? Array.from(v) : [v];
                const flat = t[key] ? Array.from(t[key]).flatMap(row) : [];
                numbers += flat.filter(v => typeof v === 'number' && isFinite(v)).length;
            }
        }
        return {panel: panel ? panel.id : gd.parentElement.id, graph: gd.parentElement.id, notes, numbers};
    })"""

#: every text a visitor reads in the open section: the page's words and the charts' own texts
#: (ticks, legends, titles, hovers, cell labels)
TEXTS_JS = """() => {
    const words = [document.body.innerText];
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
        words.push(Array.from(gd.querySelectorAll('text')).map(t => t.textContent).join(' | '));
        for (const t of (gd._fullData || [])) {
            for (const key of ['text', 'hovertext', 'name']) {
                if (t[key]) words.push([].concat(t[key]).flat(2).join(' | '));
            }
        }
    }
    return words.join('\\n');
}"""

#: NumPy's repr, "nan" standing where a number goes (not inside a word), or rounding noise
#: written out as a number (a standard error of 1e-17 for a feature whose shuffles change nothing)
BAD_TEXT = re.compile(r"np\.\w+\(|\bnan\b|0\.0{9,}\d", re.IGNORECASE)


def bad_words(text: str) -> list[str]:
    return sorted({text[max(0, m.start() - 60) : m.end() + 40] for m in BAD_TEXT.finditer(text)})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A HistGradientBoosting regressor trained with f0 (partly missing) and region varying,
    written with skops in a fresh interpreter (no OpenMP pool in this process); the rows
    given, where region holds one value and f0 none."""
    folder = tmp_path_factory.mktemp("columns-files")
    rng = np.random.default_rng(0)
    n = 300
    train = pd.DataFrame(
        {
            "income_k": rng.normal(50, 10, n).round(2),
            "age": rng.integers(18, 80, n).astype(float),
            "tenure": rng.integers(0, 10, n).astype(float),
            "region": rng.integers(0, 3, n).astype(float),
            "f0": rng.normal(size=n).round(3),
        }
    )
    train.loc[train.index % 5 == 0, "f0"] = np.nan
    train["spend"] = (
        0.1 * train.income_k + 0.03 * train.age * (train.tenure > 4) + train.f0.fillna(0) + rng.normal(0, 0.3, n)
    ).round(3)
    train.to_csv(folder / "train.csv", index=False)
    script = (
        "import pandas as pd, skops.io as sio\n"
        "from sklearn.ensemble import HistGradientBoostingRegressor\n"
        f"t = pd.read_csv({str(folder / 'train.csv')!r})\n"
        f"m = HistGradientBoostingRegressor(max_iter=60, random_state=0).fit(t[{FEATURES!r}], t['spend'])\n"
        f"sio.dump(m, {str(folder / 'spend.skops')!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    given = train.assign(region=2.0, f0=np.nan)
    given.to_csv(folder / "spend.csv", index=False)
    assert b",," in (folder / "spend.csv").read_bytes() or given.f0.isna().all()
    return folder


def _choose_files(tab, button: str, paths):
    with tab.expect_file_chooser() as chooser:
        tab.click(button)
    chooser.value.set_files([str(p) for p in paths])


def _load(tab, server, files) -> str:
    """The model and the data through the page's load form; the page's address after loading."""
    tab.goto(server["url"] + "/")
    open_section(tab, "overview")
    tab.wait_for_selector("#pfi-graph .main-svg")  # the page is up: its callbacks will not fold the form again
    tab.wait_for_function(DRAWN_JS, arg=4)
    tab.click("summary:has-text('Load your own')")
    tab.wait_for_function("() => document.getElementById('load-panel').open")
    _choose_files(tab, "#model-upload", [files / "spend.skops"])
    tab.wait_for_selector("#model-files-info:has-text('spend.skops')")
    _choose_files(tab, "#data-upload", [files / "spend.csv"])
    tab.wait_for_selector("#data-file-info:has-text('300 rows')")
    tab.check("#data-role input[value='training']")
    tab.click("#load-button")
    tab.wait_for_function("() => !location.search.includes('demo-') && location.search.includes('ws=')")
    return tab.url


def _section(tab, key: str, least: int) -> tuple[list[dict], str]:
    open_section(tab, key)
    tab.wait_for_function(DRAWN_JS, arg=least)
    time.sleep(0.5)
    tab.wait_for_function(DRAWN_JS, arg=least)
    return tab.evaluate(GRAPHS_JS), tab.evaluate(TEXTS_JS)


def _pfi_bars(tab) -> dict:
    return tab.evaluate(
        "() => { const t = document.querySelector('#pfi-graph .js-plotly-plot')._fullData"
        ".find(t => t.type === 'bar'); return Object.fromEntries(Array.from(t.y).map((f, i) => [f, t.x[i]])); }"
    )


def test_a_constant_and_an_empty_column_leave_every_panel_and_the_report(server, tab, files):
    url = _load(tab, server, files)
    ws = re.search(r"ws=([\w-]+)", url)[1]
    base = f"{server['url']}/?ws={ws}"
    tab.wait_for_function("() => document.body.textContent.includes('Notes from loading')")
    notes = tab.evaluate("() => document.body.textContent")  # the notes' fold may be closed
    assert "f0" in notes and "no values (all missing)" in notes, notes[-3000:]

    # --- a feature with values chosen: every section draws its panels with numbers
    tab.goto(f"{base}&feature=income_k")
    texts = []
    least = {"overview": 4, "feature": 4, "observation": 3, "subgroups": 0}  # Subgroups: tables until one is chosen
    for key, n in least.items():
        graphs, words = _section(tab, key, n)
        texts.append(words)
        failed = [g for g in graphs if "could not" in g["notes"] or "no values" in g["notes"]]
        assert not failed, (key, failed)
        blank = [g for g in graphs if g["numbers"] == 0 and not g["notes"]]
        assert not blank, (key, blank)  # every drawn chart holds numbers, or says why in words
        shot(tab, f"columns-{key}")
        if key == "overview":
            bars = _pfi_bars(tab)
            assert set(bars) == set(FEATURES) and bars["f0"] == 0 and bars["region"] == 0, bars
            assert all(bars[f] > 0 for f in ("income_k", "age")), bars
            info = tab.inner_text("#pfi-info")
            assert "f0 holds no values (all missing)" in info and "region holds one value (2)" in info, info
            strength = tab.evaluate(
                "() => { const t = document.querySelector('#interactions-graph .js-plotly-plot')._fullData"
                ".find(t => t.type === 'bar'); return Object.fromEntries(Array.from(t.y).map((f, i) => [f, t.x[i]])); }"
            )
            assert set(strength) == set(FEATURES) and strength["f0"] == 0 and strength["region"] == 0, strength
            assert all(np.isfinite(v) for v in strength.values()) and strength["age"] > 0, strength
            shot(tab, "columns-interactions", "#view-interactions")
        if key == "observation":
            tab.wait_for_selector("#whatif-info:has-text('Predicted spend')")
            shot(tab, "columns-whatif", "#view-whatif")
            hints = tab.inner_text("#view-whatif")
            assert "no values in these rows" in hints and "(missing) to (missing)" not in hints, hints

    # --- the empty and the constant feature chosen: their curve panels say why in words
    for feature, said in (
        ("f0", "f0 holds no values in these rows (all missing)"),
        ("region", "single distinct value (2.0) in these rows"),
    ):
        tab.goto(f"{base}&feature={feature}")
        graphs, words = _section(tab, "feature", 4)
        texts.append(words)
        told = {g["panel"] for g in graphs if said in g["notes"].replace("<br>", " ")}
        assert {"view-ice", "view-ici"} <= told, (feature, graphs)
        tab.wait_for_selector(f"#view-influential:has-text('{said}')")  # the table's panel says it too
        assert all(g["numbers"] > 0 or g["notes"] for g in graphs), graphs  # numbers, or words saying why
        shot(tab, f"columns-feature-{feature}")
        graphs, words = _section(tab, "observation", 3)
        texts.append(words)
        if feature == "f0":
            whatif = next(g for g in graphs if g["graph"] == "whatif-graph")
            assert "f0 holds no values in these rows" in whatif["notes"].replace("<br>", " "), whatif
            ciu = next(g for g in graphs if g["graph"] == "whatif-ciu-graph")
            assert ciu["numbers"] > 0 and not ciu["notes"], ciu
            shot(tab, "columns-observation-f0")

    bad = [w for words in texts for w in bad_words(words)]
    assert not bad, bad

    # --- the report: the other features' sections, numbers and no repr
    tab.goto(f"{base}&feature=income_k")
    _section(tab, "overview", 4)
    with tab.expect_download() as download:
        tab.click("#export-report")
    path = OUTPUT.parent / "columns-report.html"
    OUTPUT.mkdir(parents=True, exist_ok=True)
    download.value.save_as(path)
    html = path.read_text()
    for title in (
        "Permutation feature importance",
        "Which features act together?",
        "What if this observation were different?",
    ):
        assert f"<h3>{title}</h3>" in html or title in html, title
    report = tab.context.new_page()
    report.goto(path.as_uri())
    report.wait_for_selector(".js-plotly-plot .main-svg")
    words = report.evaluate(TEXTS_JS)
    report.screenshot(path=str(OUTPUT / "columns-report.png"), full_page=False)
    report.close()
    assert "income_k" in words and "f0 holds no values (all missing)" in words
    assert "could not be computed" not in words  # (plotly.js, embedded in the file, has the phrase)
    assert not bad_words(words), bad_words(words)
