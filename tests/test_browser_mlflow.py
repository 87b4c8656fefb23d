"""Issue 43, item 4 in the browser: an MLflow model folder's zip (written by mlflow-skinny here,
an XGBoost model trained on an array, so only the folder's signature names its columns) and
its CSV go through the page's upload form of ``gunicorn app:server -w 2`` in headless
Chromium; the form names the zip, Load opens the data set and the Overview and Feature
sections draw, the PFI bars naming the signature's columns. A CSV whose column contradicts
the signature's type is refused on the page naming the column and both types."""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from helpers.gunicorn_server import gunicorn_server

pytestmark = pytest.mark.browser

if importlib.util.find_spec("mlflow") is None or importlib.util.find_spec("xgboost") is None:
    pytest.skip("not installed: mlflow-skinny or xgboost", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path(os.environ.get("WIP_TEST_OUTPUT", ROOT / "test-output")) / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT = 180_000  # ms
DRAWN_JS = """(least) => {
    const graphs = Array.from(document.querySelectorAll('.js-plotly-plot'));
    return graphs.length >= least && !document.querySelector('._dash-loading-callback') && graphs.every(gd => {
        const notes = (gd.layout && gd.layout.annotations) || [];
        return !notes.some(a => /Drawing|Waiting|Computing/.test(a.text || ''));
    });
}"""

WRITE = textwrap.dedent(
    """
    import warnings
    warnings.simplefilter("ignore")
    import numpy as np, pandas as pd, mlflow.xgboost, xgboost
    from mlflow.models import infer_signature

    rng = np.random.default_rng(4)
    X = pd.DataFrame(rng.normal(size=(160, 3)).round(3), columns=["income", "age", "tenure"])
    y = 2 * X.income - X.age * (X.tenure > 0) + rng.normal(0, 0.1, 160).round(3)
    X.assign(churn=y).to_csv("rows.csv", index=False)
    X.assign(income=[f"band {i % 4}" for i in range(160)], churn=y).to_csv("text.csv", index=False)
    model = xgboost.XGBRegressor(n_estimators=15, max_depth=3).fit(X.to_numpy(), y)  # an array: no names
    mlflow.xgboost.save_model(model, "booster", signature=infer_signature(X, y.to_numpy()), pip_requirements=[])
    """
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlflow-browser")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": f"file:{folder / 'runs'}"}
    done = subprocess.run([sys.executable, "-c", WRITE], cwd=folder, env=env, timeout=300, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    buffer = io.BytesIO()  # as `zip -r booster.zip booster` writes it: the folder under its own name
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((folder / "booster").rglob("*")):
            if path.is_file():
                archive.write(path, "booster/" + path.relative_to(folder / "booster").as_posix())
    (folder / "booster.zip").write_bytes(buffer.getvalue())
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """gunicorn with two workers on a free loopback port, its own cache folder."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: run the suite with `python tests/run.py` (installs it).")
    with gunicorn_server(tmp_path_factory.mktemp("wip-mlflow-cache"), {"OMP_NUM_THREADS": "1"}) as running:
        yield running


@pytest.fixture
def tab(chrome, server, request):
    context = chrome.new_context(viewport={"width": 1400, "height": 1800})
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield pg
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(OUTPUT / f"FAILED-mlflow-{request.node.name}.png"), full_page=True)
        print((server["cache"] / "gunicorn.log").read_text()[-3000:])
    context.close()
    assert errors == [], f"browser errors: {errors}"


def _open(tab, key: str) -> None:
    tab.click(f"#section-tab-{key}")
    tab.wait_for_selector(f"#section-tab-{key}.selected")


def _upload(tab, server, model: Path, data: Path, rows: int) -> None:
    tab.goto(server["url"] + "/")
    _open(tab, "overview")
    tab.wait_for_function(DRAWN_JS, arg=1)  # the page is ready (the demo drawn) before the form is used
    tab.click("summary:has-text('Load your own')")
    for button, path in (("#model-upload", model), ("#data-upload", data)):
        with tab.expect_file_chooser() as chooser:
            tab.click(button)
        chooser.value.set_files([str(path)])
    tab.wait_for_selector(f"#model-files-info:has-text('{model.name}')")
    tab.wait_for_selector(f"#data-file-info:has-text('{rows} rows')")
    tab.check("#data-role input[value='held-out']")
    tab.click("#load-button")


def test_an_mlflow_zip_and_its_csv_upload_load_and_draw(server, files, tab):
    _upload(tab, server, files / "booster.zip", files / "rows.csv", 160)
    tab.wait_for_function("() => !location.search.includes('demo-x3') && location.search.includes('ws=')")
    _open(tab, "overview")
    tab.wait_for_function(DRAWN_JS, arg=1)
    tab.wait_for_selector("#pfi-graph .main-svg")
    names = tab.evaluate(
        "() => { const g = document.querySelector('#pfi-graph .js-plotly-plot');"
        " return g._fullData.flatMap(t => Array.from(t.y || [])).map(String); }"
    )
    assert {"income", "age", "tenure"} <= set(names), names  # the signature's names (the booster has none)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(OUTPUT / "mlflow-upload-overview.png"), full_page=True)
    _open(tab, "feature")
    tab.wait_for_function(DRAWN_JS, arg=1)
    tab.wait_for_function(
        "() => { const g = document.querySelector('#ici-graph .js-plotly-plot');"
        " return g && g._fullData && g._fullData.length > 0; }"
    )
    tab.screenshot(path=str(OUTPUT / "mlflow-upload-feature.png"), full_page=True)


def test_a_csv_contradicting_the_signatures_types_is_refused_on_the_page(server, files, tab):
    _upload(tab, server, files / "booster.zip", files / "text.csv", 160)
    message = tab.locator("text=/column 'income' holds text/").first
    message.wait_for(state="visible")
    said = message.inner_text()
    assert "type double" in said and "booster.zip" in said, said
    search = tab.evaluate("location.search")
    assert "ws=" not in search or "demo-x3" in search, search  # nothing was opened
