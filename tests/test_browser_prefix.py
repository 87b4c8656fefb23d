"""Issue 43, item 1: the page behind a reverse proxy at a path. gunicorn serves the app with
``WIP_URL_PREFIX=/tools/why/``; a real nginx (Debian's ``nginx-light``, installed by
``tests/run.py``) forwards only that location, unchanged, and answers 404 everywhere else, so
any route, asset, callback, upload or download the page asks for outside the prefix fails.
Chromium opens the page through nginx: every section draws, a model and its data upload and
load, and the HTML report downloads with a link back to the prefixed address."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path(os.environ.get("WIP_TEST_OUTPUT", ROOT / "test-output")) / "screenshots"
PREFIX = "/tools/why/"
TIMEOUT = 180_000  # ms; the first visit of a demo trains it and runs its passes
DRAWN_JS = """(least) => {
    const graphs = Array.from(document.querySelectorAll('.js-plotly-plot'));
    return graphs.length >= least && !document.querySelector('._dash-loading-callback') && graphs.every(gd => {
        const notes = (gd.layout && gd.layout.annotations) || [];
        return !notes.some(a => /Drawing|Waiting|Computing/.test(a.text || ''));
    });
}"""

NGINX_CONF = """
{user}
worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log {folder}/access.log;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    client_max_body_size 20m;
    server {{
        listen 127.0.0.1:{port};
        location {prefix} {{
            proxy_pass http://127.0.0.1:{app};
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_http_version 1.1;
            proxy_read_timeout 300s;
        }}
        location / {{ return 404; }}
    }}
}}
"""


def _wait(url: str, proc, log: Path) -> None:
    import requests

    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    proc.terminate()
    pytest.fail(f"{url} did not answer:\n" + log.read_text()[-3000:])


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """gunicorn (two workers) serving under PREFIX, behind nginx forwarding only PREFIX."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.fail("Debian's nginx is missing: run the suite with `python tests/run.py` (installs nginx-light).")
    cache = tmp_path_factory.mktemp("wip-prefix-cache")
    folder = tmp_path_factory.mktemp("nginx")
    app_port, port = free_port(), free_port()
    env = {
        **os.environ,
        "WIP_CACHE_DIR": str(cache),
        "WIP_SECRET_KEY": "test-secret",
        "WIP_URL_PREFIX": PREFIX,
        "WIP_TRUSTED_PROXIES": "1",
    }
    log = open(cache / "gunicorn.log", "w")
    app = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"), "app:server", "-w", "2"]
        + ["-b", f"127.0.0.1:{app_port}", "--no-control-socket"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    _wait(f"http://127.0.0.1:{app_port}{PREFIX}", app, cache / "gunicorn.log")
    user = "user root;" if os.geteuid() == 0 else ""  # its workers write request bodies to this folder
    conf = folder / "nginx.conf"
    conf.write_text(NGINX_CONF.format(user=user, folder=folder, port=port, prefix=PREFIX, app=app_port))
    proxy = subprocess.Popen([nginx, "-c", str(conf), "-p", str(folder)], stderr=subprocess.STDOUT)
    _wait(f"http://127.0.0.1:{port}{PREFIX}", proxy, folder / "error.log")
    yield {"url": f"http://127.0.0.1:{port}", "app": app, "cache": cache, "folder": folder}
    for proc in (proxy, app):
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    log.close()


@pytest.fixture
def tab(chrome, proxied, request):
    context = chrome.new_context(viewport={"width": 1400, "height": 1800}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT)
    errors: list[str] = []
    outside: list[str] = []  # every request the page made that is not under the prefix
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("request", lambda r: None if r.url.startswith(proxied["url"] + PREFIX) else outside.append(r.url))
    yield pg
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    if failed:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(OUTPUT / f"FAILED-prefix-{request.node.name}.png"), full_page=True)
        print((proxied["cache"] / "gunicorn.log").read_text()[-3000:])
        print((proxied["folder"] / "access.log").read_text()[-3000:])
    context.close()
    assert errors == [], f"browser errors: {errors}"
    assert [u for u in outside if not u.startswith(("data:", "blob:"))] == [], outside


def _open(tab, key: str) -> None:
    tab.click(f"#section-tab-{key}")
    tab.wait_for_selector(f"#section-tab-{key}.selected")


def test_every_section_draws_behind_the_prefix_and_the_report_links_back(proxied, tab):
    import requests

    tab.goto(proxied["url"] + PREFIX + "?ws=demo-x3")
    for key, least in (("feature", 1), ("overview", 1), ("observation", 1), ("subgroups", 0)):
        _open(tab, key)
        tab.wait_for_function(DRAWN_JS, arg=least)
    _open(tab, "feature")
    tab.wait_for_function(
        "() => { const g = document.querySelector('#ici-graph .js-plotly-plot');"
        " return g && g._fullData && g._fullData.length > 0; }"
    )
    OUTPUT.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(OUTPUT / "prefix-feature.png"), full_page=True)
    with tab.expect_download() as download:
        tab.click("#export-report")
    report = download.value.path().read_text()
    assert f'href="{proxied["url"]}{PREFIX}?' in report, report[:500]
    # nothing of the app answers outside the prefix (nginx would 404 it; the app does too)
    assert requests.get(proxied["url"] + "/_dash-layout", timeout=10).status_code == 404
    assert requests.get(proxied["url"] + PREFIX + "_dash-layout", timeout=10).status_code == 200


def test_an_upload_and_load_work_through_the_prefix(proxied, tab, tmp_path):
    import skops.io as sio
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(3)
    data = pd.DataFrame(rng.normal(size=(120, 3)).round(3), columns=["a", "b", "c"])
    data["y"] = data.a * 2 - data.b + rng.normal(0, 0.1, 120).round(3)
    model = RandomForestRegressor(n_estimators=10, random_state=0).fit(data[["a", "b", "c"]], data.y)
    sio.dump(model, tmp_path / "forest.skops")
    data.to_csv(tmp_path / "rows.csv", index=False)
    tab.goto(proxied["url"] + PREFIX)
    _open(tab, "overview")
    tab.wait_for_function(DRAWN_JS, arg=1)  # the page is ready (the demo drawn) before the form is used
    tab.click("summary:has-text('Load your own')")
    for button, path in (("#model-upload", tmp_path / "forest.skops"), ("#data-upload", tmp_path / "rows.csv")):
        with tab.expect_file_chooser() as chooser:
            tab.click(button)
        chooser.value.set_files([str(path)])
    tab.wait_for_selector("#model-files-info:has-text('forest.skops')")
    tab.wait_for_selector("#data-file-info:has-text('120 rows')")
    tab.check("#data-role input[value='held-out']")
    tab.click("#load-button")
    tab.wait_for_function("() => !location.search.includes('demo-x3') && location.search.includes('ws=')")
    assert tab.evaluate("location.pathname") == PREFIX
    _open(tab, "overview")
    tab.wait_for_function(DRAWN_JS, arg=1)
    tab.wait_for_selector("#pfi-graph .main-svg")
    tab.screenshot(path=str(OUTPUT / "prefix-upload.png"), full_page=True)
    access = (proxied["folder"] / "access.log").read_text()
    assert f"POST {PREFIX}upload HTTP" in access and f"POST {PREFIX}_dash-update-component?" in access
