"""Issue 43, item 1 (the notebook part): ``dashboard.show()`` in a kernel of a Jupyter server
with ``jupyter-server-proxy`` (or under JupyterHub) serves the page through that server's own
proxy, under ``<base_url>proxy/<port>/``, and embeds it by that path on the notebook's own
address: the person's browser may not reach the kernel machine's 127.0.0.1.

The unit tests choose the prefix from the environment (JupyterHub's
``JUPYTERHUB_SERVICE_PREFIX``, the kernel's ``JPY_PARENT_PID`` among the running servers,
``proxy=True/False``). The browser test runs a real ``jupyter server`` (jupyter-server-proxy
enabled, as pip installs it), starts a kernel through its REST API, runs ``show()`` there, then
Chromium opens the cell's HTML output in a page on that Jupyter server's origin (a static page
served through the same proxy: the server's ``/files/`` pages are sandboxed, an origin of their
own) and the proxied address itself, with every request to the dashboard's own port refused
(the person's browser cannot reach it): the page draws inside the inline frame."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.ports import free_port

from dashboard import api
from dashboard.serve import LOCAL_NOTEBOOKS, UnderProxy

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path(os.environ.get("WIP_TEST_OUTPUT", ROOT / "test-output")) / "screenshots"
TOKEN = "wip-test-token"
TIMEOUT = 180_000  # ms


# --- which address: unit tests ------------------------------------------------------------------


def test_no_jupyter_server_keeps_the_direct_address(monkeypatch):
    assert api.jupyter_base("auto", {}) is None  # a script, nbclient, VS Code: 127.0.0.1
    assert api.jupyter_base("auto", {"JPY_PARENT_PID": "1"}) is None  # a parent that is no Jupyter server
    assert api.jupyter_base(False, {"JUPYTERHUB_SERVICE_PREFIX": "/user/ann/"}) is None  # forced off
    assert api.jupyter_base(True, {}) == "/"  # forced on, no server found: a server at the root


def test_jupyterhub_serves_under_the_users_prefix():
    env = {"JUPYTERHUB_SERVICE_PREFIX": "/user/ann/"}
    assert api.jupyter_base("auto", env) == "/user/ann/"
    assert api.jupyter_base("auto", {"JUPYTERHUB_SERVICE_PREFIX": "user/ann"}) == "/user/ann/"
    assert api.proxied_prefix("/user/ann/", 8123) == "/user/ann/proxy/8123/"
    assert api.proxied_prefix("/", 8123) == "/proxy/8123/"


def test_the_kernels_own_server_is_found_by_its_pid(tmp_path, monkeypatch):
    """A Jupyter server's info file (``jpserver-<pid>.json`` in the runtime folder, as
    jupyter_server writes it) whose pid is the kernel's ``JPY_PARENT_PID``: its base URL."""
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    info = {"pid": os.getpid(), "base_url": "/lab/base/", "port": 8888, "url": "http://localhost:8888/lab/base/"}
    (tmp_path / f"jpserver-{os.getpid()}.json").write_text(json.dumps(info))
    env = {"JPY_PARENT_PID": str(os.getpid())}
    assert api.kernel_server(env)["base_url"] == "/lab/base/"
    assert api.jupyter_base("auto", env) == "/lab/base/"  # jupyter_server_proxy is importable here
    assert api.jupyter_base(False, env) is None
    assert api.kernel_server({"JPY_PARENT_PID": str(os.getpid() + 100_000)}) is None


def test_the_inline_view_under_the_proxy_is_a_path_on_the_notebooks_address():
    class Server:
        port, prefix, base = 8123, "/user/ann/proxy/8123/", "/user/ann/"

    shown = api.Shown(Server(), "/user/ann/proxy/8123/?ws=abc", "abc", [], local_url="http://127.0.0.1:8123/x")
    html = shown._repr_html_()
    assert '<iframe src="/user/ann/proxy/8123/?ws=abc"' in html and "127.0.0.1" not in html
    with pytest.raises(api.ShowError, match="proxy must be True, False or 'auto'"):
        api.show({}, None, "y", proxy="yes")
    hub = {"JUPYTERHUB_SERVICE_PREFIX": "/user/ann@example.org/"}  # JupyterHub keeps '@' in user URLs
    with pytest.MonkeyPatch.context() as patch:
        for name, value in hub.items():
            patch.setenv(name, value)
        with pytest.raises(api.ShowError, match=r"'/user/ann@example\.org/' has characters .* proxy=False"):
            api.show({}, None, "y")


def _call(path: str) -> tuple[str, dict]:
    seen: dict = {}

    def start(status, headers, exc_info=None):
        seen.update(status=status, headers=dict(headers))

    def inner(environ, start_response):
        start_response("200 OK", [("X-Frame-Options", "DENY"), ("Content-Security-Policy", "frame-ancestors 'none'")])
        return [environ["PATH_INFO"].encode()]

    body = b"".join(UnderProxy(inner, "/proxy/8123/", "'self'")({"PATH_INFO": path}, start))
    return body.decode(), seen["headers"]


def test_paths_the_proxy_strips_are_served_under_the_prefix_and_the_notebook_may_frame_it():
    """jupyter-server-proxy's ``proxy/<port>/`` forwards ``/_dash-layout``; ``proxy/absolute/``
    and a direct request keep the prefix: all reach the same route."""
    for path in ("/_dash-layout", "/proxy/8123/_dash-layout"):
        body, headers = _call(path)
        assert body == "/proxy/8123/_dash-layout"
        assert "X-Frame-Options" not in headers
        assert headers["Content-Security-Policy"] == "frame-ancestors 'self'"
    assert _call("/")[0] == "/proxy/8123/"
    assert "http://localhost:*" in LOCAL_NOTEBOOKS and "'none'" not in LOCAL_NOTEBOOKS


# --- a real Jupyter server, its kernel and its proxy, in Chromium ------------------------------


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory):
    pytest.importorskip("jupyter_server")
    pytest.importorskip("jupyter_server_proxy")
    import requests

    folder = tmp_path_factory.mktemp("jupyter")
    runtime, notebooks = folder / "runtime", folder / "notebooks"
    notebooks.mkdir()
    port = free_port()
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_CONFIG_DIR": str(folder / "config"),
        "JUPYTER_DATA_DIR": str(folder / "data"),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("JUPYTERHUB_SERVICE_PREFIX", None)
    # the proxy extension enabled here, not only by the file its package installs in its prefix's
    # etc/jupyter (which a virtual environment over the system's packages does not read)
    (folder / "config").mkdir()
    extensions = {"ServerApp": {"jpserver_extensions": {"jupyter_server_proxy": True}}}
    (folder / "config" / "jupyter_server_config.json").write_text(json.dumps(extensions))
    log = open(folder / "jupyter.log", "w")
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}", "--ip=127.0.0.1"]
    command += [f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={notebooks}"]
    command += ["--allow-root"] if os.geteuid() == 0 else []
    server = subprocess.Popen(command, cwd=notebooks, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"token {TOKEN}"}
    deadline = time.time() + 90
    while True:
        try:
            if requests.get(f"{base}/api/status", headers=headers, timeout=2).status_code == 200:
                break
        except requests.RequestException:
            pass
        if server.poll() is not None or time.time() > deadline:
            server.kill()
            pytest.fail("the Jupyter server did not start:\n" + (folder / "jupyter.log").read_text()[-3000:])
        time.sleep(0.3)
    yield {"url": base, "headers": headers, "runtime": runtime, "notebooks": notebooks, "log": folder / "jupyter.log"}
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


CELL = """
import numpy as np, pandas as pd
from sklearn.ensemble import RandomForestRegressor
import dashboard
rng = np.random.default_rng(2)
df = pd.DataFrame(rng.normal(size=(150, 3)).round(3), columns=["a", "b", "c"])
df["y"] = 2 * df.a - df.b * (df.c > 0) + rng.normal(0, 0.1, 150)
model = RandomForestRegressor(n_estimators=10, random_state=0).fit(df[["a", "b", "c"]], df.y)
shown = dashboard.show({"forest": model}, df, "y", cache_dir=CACHE)
print("LOCAL", shown.local_url, flush=True)
display(shown)
"""


@pytest.fixture(scope="module")
def shown_in_kernel(jupyter, tmp_path_factory):
    """A kernel the Jupyter server starts (its REST API) runs show(); the cell's HTML output."""
    import requests
    from jupyter_client import BlockingKernelClient

    answer = requests.post(f"{jupyter['url']}/api/kernels", json={"name": "python3"}, headers=jupyter["headers"])
    assert answer.status_code == 201, answer.text
    kernel = answer.json()["id"]
    client = BlockingKernelClient(connection_file=str(jupyter["runtime"] / f"kernel-{kernel}.json"))
    client.load_connection_file()
    client.start_channels()
    client.wait_for_ready(timeout=120)
    outputs: list[dict] = []
    cache = tmp_path_factory.mktemp("wip-jupyter-cache")
    reply = client.execute_interactive(
        f"CACHE = {str(cache)!r}\n" + CELL, timeout=600, output_hook=lambda m: outputs.append(m)
    )
    texts = "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
    errors = [m["content"] for m in outputs if m["msg_type"] == "error"]
    assert reply["content"]["status"] == "ok", (errors, texts)
    html = next(m["content"]["data"]["text/html"] for m in outputs if m["msg_type"] == "display_data")
    local = re.search(r"LOCAL (\S+)", texts).group(1)
    yield {"html": html, "local": local, "client": client}
    client.execute_interactive("shown.stop()", timeout=60)
    client.stop_channels()
    requests.delete(f"{jupyter['url']}/api/kernels/{kernel}", headers=jupyter["headers"], timeout=30)


@pytest.fixture
def cell_page(tmp_path):
    """A static page server on this machine (reached through the Jupyter server's proxy)."""
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield {"folder": tmp_path, "port": httpd.server_address[1]}
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def tab(chrome, request):
    context = chrome.new_context(viewport={"width": 1400, "height": 1400})
    blocked: list[str] = []
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg, context, blocked
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(OUTPUT / f"FAILED-jupyter-{request.node.name}.png"), full_page=True)
        if "jupyter" in request.fixturenames:
            print(request.getfixturevalue("jupyter")["log"].read_text()[-3000:])
    context.close()
    assert errors == [], errors


def _refuse_direct(context, port: int, blocked: list[str]) -> None:
    """The person's browser cannot reach the kernel machine's dashboard port."""

    def refuse(route):
        blocked.append(route.request.url)
        route.abort()

    context.route(re.compile(rf"^https?://(127\.0\.0\.1|localhost):{port}/"), refuse)


GRAPH_DRAWN = (
    "() => Array.from(document.querySelectorAll('.js-plotly-plot')).some("
    "g => g._fullData && g._fullData.length > 0 && g.querySelector('.main-svg'))"
)


@pytest.mark.browser
def test_show_in_a_kernel_of_a_jupyter_server_draws_through_its_proxy(jupyter, shown_in_kernel, cell_page, tab):
    pg, context, blocked = tab
    html, local = shown_in_kernel["html"], shown_in_kernel["local"]
    port = int(re.match(r"http://127\.0\.0\.1:(\d+)/proxy/(\d+)/\?ws=", local).group(1))
    src = re.search(r'<iframe src="([^"]+)"', html).group(1)
    # the inline frame and the link: the proxy's path on the notebook's address, never 127.0.0.1
    assert re.fullmatch(rf"/proxy/{port}/\?ws=[\w-]+", src), html
    assert "127.0.0.1" not in html and "localhost" not in html
    _refuse_direct(context, port, blocked)

    # the cell's output as the notebook shows it: a page on the Jupyter server's origin holding that HTML
    (cell_page["folder"] / "cell.html").write_text(f"<!doctype html><html><body>{html}</body></html>")
    pg.goto(f"{jupyter['url']}/proxy/{cell_page['port']}/cell.html?token={TOKEN}")
    frame = pg.frame_locator("iframe")
    frame.locator(".js-plotly-plot .main-svg").first.wait_for(state="visible")
    inner = next(f for f in pg.frames if f is not pg.main_frame)
    assert inner.url.startswith(f"{jupyter['url']}/proxy/{port}/?ws="), inner.url
    inner.wait_for_function(GRAPH_DRAWN)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(OUTPUT / "jupyter-proxy-inline.png"), full_page=True)

    # the link for a full tab: the proxied address itself (jupyter-server-proxy's proxy/<port>/)
    pg.goto(f"{jupyter['url']}{src}&token={TOKEN}")
    pg.wait_for_function(GRAPH_DRAWN)
    assert blocked == [], blocked  # nothing the page asked for went to the dashboard's own port


@pytest.mark.browser
def test_without_a_proxy_a_local_notebook_frames_the_direct_address(cell_page, tab, tmp_path):
    """``proxy=False`` (a notebook on the person's own machine): the inline frame is
    ``http://127.0.0.1:<port>/`` and the page lets a notebook page on localhost frame it (the
    dashboard's pages refuse every framing site otherwise)."""
    import numpy as np
    import pandas as pd
    from sklearn.linear_model import Ridge

    pg, _, _ = tab
    rng = np.random.default_rng(5)
    df = pd.DataFrame(rng.normal(size=(120, 2)).round(3), columns=["a", "b"])
    df["y"] = df.a - 2 * df.b + rng.normal(0, 0.1, 120)
    shown = api.show(Ridge().fit(df[["a", "b"]], df.y), df, "y", cache_dir=tmp_path / "cache", proxy=False)
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?ws=[\w-]+", shown.url) and shown.url == shown.local_url
        html = shown._repr_html_()
        (cell_page["folder"] / "cell.html").write_text(f"<!doctype html><html><body>{html}</body></html>")
        pg.goto(f"http://localhost:{cell_page['port']}/cell.html")  # another origin than the dashboard's
        pg.frame_locator("iframe").locator(".js-plotly-plot .main-svg").first.wait_for(state="visible")
        inner = next(f for f in pg.frames if f is not pg.main_frame)
        assert inner.url == shown.url
        inner.wait_for_function(GRAPH_DRAWN)
    finally:
        shown.stop()
