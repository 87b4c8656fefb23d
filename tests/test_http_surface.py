"""The rest of the HTTP surface (issue 29): a visitor's browser is hostile.

Host header, X-Forwarded-For without a trusted proxy, path traversal (assets, Dash's
component suites, upload file names), methods, malformed callback envelopes, chunked and
slow request bodies, cross-site requests. Flask's test client where it shows; a real
``gunicorn -c gunicorn.conf.py -w 2`` on a loopback port, spoken to with raw sockets, for
what only a real server shows (the path as sent, chunked and slow bodies, Host).
"""

from __future__ import annotations

import http.client
import io
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.ports import free_port

from dashboard import ids
from dashboard.config import Config
from dashboard.http_guard import BODY_GRACE, CALLBACK_BODY_LIMIT
from dashboard.server import create_app

ROOT = Path(__file__).resolve().parent.parent
EVIL = "evil.example"
REMOTE = "198.51.100.7"  # a visitor on another machine (the DNS-rebinding rule is for loopback only)


def _app(tmp_path, **options):
    return create_app(Config(cache_dir=str(tmp_path / "cache"), **options))


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return _app(tmp_path_factory.mktemp("http-surface"), upload_per_minute=10_000, upload_mb_per_hour=100_000)


def _envelope(value=None, **changes) -> dict:
    """A well-formed request for the ``subgroup-size`` callback (one input, no state)."""
    body = {
        "output": f"{ids.SUBGROUP_SIZE}.children",
        "outputs": {"id": ids.SUBGROUP_SIZE, "property": "children"},
        "inputs": [{"id": ids.RESULTS, "property": "data", "value": value}],
        "changedPropIds": [f"{ids.RESULTS}.data"],
    }
    return {**body, **changes}


def _csv_upload(client, name="d.csv", **kwargs):
    return client.post(
        "/upload",
        data={"kind": "data", "file": (io.BytesIO(b"a,b\n1,2\n"), name)},
        content_type="multipart/form-data",
        **kwargs,
    )


# --- 1. Host header ------------------------------------------------------------------------------
def test_an_attackers_host_is_never_reflected(app):
    """No link, redirect or Location is built from Host (or X-Forwarded-Host): every page,
    resource, refusal and error answered to a visitor naming evil.example says nothing of it."""
    client = app.server.test_client()
    headers = {"Host": f"{EVIL}:8050", "X-Forwarded-Host": EVIL, "X-Forwarded-Proto": "https"}
    env = {"REMOTE_ADDR": REMOTE}
    answers = [
        client.open(path, method=method, headers=headers, environ_base=env)
        for method, path in [
            ("GET", "/"),
            ("GET", "/?ws=demo-x3"),
            ("GET", "/_dash-layout"),
            ("GET", "/_dash-dependencies"),
            ("GET", "/assets/upload.js"),
            ("GET", "/no/such/page/"),
            ("GET", "/_dash-component-suites/dash/../../x.js"),
            ("GET", "/upload"),
            ("POST", "/upload"),
            ("POST", "/_dash-update-component"),
        ]
    ]
    answers.append(
        client.post("/_dash-update-component", json=_envelope(), headers=headers, environ_base=env),
    )
    for response in answers:
        assert response.status_code < 500 and not 300 <= response.status_code < 400, response.status_code
        assert "Location" not in response.headers
        assert EVIL not in str(response.headers) and EVIL.encode() not in response.data


def test_the_reports_link_is_the_pages_address_not_the_host(tmp_path):
    """The report's link back comes from the browser's own address (``location.href``), not
    from the Host header the request carried."""
    from dashboard.callbacks.compute import resolve_state, run_request
    from dashboard.state import default_state, normalize

    app = _app(tmp_path, max_curves=40)
    ctx = app._wip_context
    state, _ = normalize(ctx, default_state())
    assert run_request(ctx, resolve_state(ctx, state, None).request).get("ok")
    results = resolve_state(ctx, state, None).results
    client = app.server.test_client()
    dep = next(d for d in client.get("/_dash-dependencies").get_json() if "download.data" in d["output"])
    outputs = [
        {"id": s.split("@")[0].rsplit(".", 1)[0], "property": s.split("@")[0].rsplit(".", 1)[1]}
        for s in dep["output"].strip(".").split("...")
    ]
    href = "http://127.0.0.1:8050/?ws=demo-x3"
    body = {
        "output": dep["output"],
        "outputs": outputs,
        "inputs": [{**i, "value": 1 if i["id"] == ids.EXPORT_REPORT else None} for i in dep["inputs"]],
        "state": [{**s, "value": results if s["id"] == ids.RESULTS else href} for s in dep["state"]],
        "changedPropIds": [f"{ids.EXPORT_REPORT}.n_clicks"],
    }
    answer = client.post(
        "/_dash-update-component",
        json=body,
        headers={"Host": EVIL, "X-Forwarded-Host": EVIL},
        environ_base={"REMOTE_ADDR": REMOTE},
    )
    assert answer.status_code == 200, answer.status_code
    report = answer.get_json()["response"]["download"]["data"]["content"]
    assert 'href="http://127.0.0.1:8050/?ws=demo-x3' in report and EVIL not in report


@pytest.mark.parametrize(
    "host, refused",
    [
        (f"{EVIL}:8050", True),
        (EVIL, True),
        ("127.0.0.1.nip.io:8050", True),  # a name that resolves to loopback: DNS rebinding
        ("LOCALHOST.:8050", False),
        ("localhost", False),
        ("app.localhost:8050", False),
        ("127.0.0.1:8050", False),
        ("[::1]:8050", False),
        ("10.1.2.3", False),
    ],
)
def test_a_loopback_connection_must_name_localhost_or_an_address(app, host, refused):
    """DNS rebinding: a site whose name is re-pointed at 127.0.0.1 reaches a dashboard on the
    visitor's own machine as "its" origin (the cross-site checks cannot see it). On a loopback
    connection only localhost or an IP address is answered; the refusal does not repeat the
    Host. A visitor on another machine (or a proxy, below) is not concerned."""
    client = app.server.test_client()
    for method, path in [("GET", "/"), ("GET", "/_dash-layout"), ("POST", "/upload")]:
        response = client.open(path, method=method, headers={"Host": host})
        assert (response.status_code == 403) is refused, (method, path, response.status_code)
        assert host.encode() not in response.data
    assert client.get("/", headers={"Host": host}, environ_base={"REMOTE_ADDR": REMOTE}).status_code == 200


def test_behind_a_trusted_proxy_the_proxy_chooses_the_host(tmp_path):
    app = _app(tmp_path, trusted_proxies=1)
    client = app.server.test_client()
    page = client.get("/", headers={"Host": "dashboard.example.org", "X-Forwarded-For": REMOTE})
    assert page.status_code == 200 and b"dashboard.example.org" not in page.data


# --- 2. X-Forwarded-For --------------------------------------------------------------------------
def test_forwarded_headers_do_not_make_a_new_client_without_a_trusted_proxy(tmp_path):
    """With no --trusted-proxies, the quota counts the peer address whatever X-Forwarded-For,
    X-Real-IP or Forwarded say: a different forged address per request gets 429 all the same."""
    app = _app(tmp_path, upload_per_minute=2)
    client = app.server.test_client()
    statuses = []
    for k in range(4):
        forged = f"203.0.113.{k}"
        headers = {"X-Forwarded-For": forged, "X-Real-IP": forged, "Forwarded": f"for={forged}"}
        statuses.append(_csv_upload(client, headers=headers, environ_base={"REMOTE_ADDR": "10.0.0.1"}).status_code)
    assert statuses == [200, 200, 429, 429]
    assert _csv_upload(client, environ_base={"REMOTE_ADDR": "10.0.0.2"}).status_code == 200


def test_behind_one_trusted_proxy_only_its_hop_names_the_client(tmp_path):
    """--trusted-proxies 1: the client is the address the proxy appended (the last one); what
    the client itself put before it in X-Forwarded-For is ignored."""
    app = _app(tmp_path, upload_per_minute=2, trusted_proxies=1)
    client = app.server.test_client()

    def post(forwarded):
        return _csv_upload(
            client, headers={"X-Forwarded-For": forwarded}, environ_base={"REMOTE_ADDR": "10.0.0.99"}
        ).status_code

    assert [post(f"198.18.0.{k}, 203.0.113.5") for k in range(3)] == [200, 200, 429]
    assert post("203.0.113.6") == 200  # another client behind the same proxy


# --- 3. Path traversal ---------------------------------------------------------------------------
TRAVERSALS = [
    "/assets/../dashboard/server.py",
    "/assets/%2e%2e/dashboard/server.py",
    "/assets/%2e%2e%2fdashboard%2fserver.py",
    "/assets/..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/assets/..%5cdashboard%5cserver.py",
    "/assets/%2e%2e%5c%2e%2e%5cetc%5cpasswd",
    "/assets//etc/passwd",
    "/assets/upload.js%00.py",
    "/assets/%c0%ae%c0%ae/dashboard/server.py",
    "/_dash-component-suites/dash/../dash.py",
    "/_dash-component-suites/dash/..%2f__init__.py",
    "/_dash-component-suites/dash/%2e%2e%2f__init__.py",
    "/_dash-component-suites/dash/deps/..%2f..%2f__init__.py",
    "/_dash-component-suites/dash/dash_table/..%2f..%2f..%2fdashboard%2fserver.py",
    "/_dash-component-suites/os/..%2f..%2fetc%2fpasswd",
    "/_dash-component-suites/dashboard/server.py",
    "/_dash-component-suites/plotly/package_data/..%2f__init__.py",
]


def _leaks(data: bytes) -> list[str]:
    secrets = {
        "/etc/passwd": b"root:x:0:0",
        "server.py": b"def add_upload_route",
        "dash/__init__.py": b"from .dash import Dash",
        "dash/dash.py": b"class Dash(",
    }
    return [name for name, marker in secrets.items() if marker in data]


def test_asset_and_component_paths_stay_in_their_folders(app):
    """Nothing outside the assets folder and Dash's registered files is served; a path that is
    not a resource is a 404 (Dash's refusal was an HTTP 500)."""
    client = app.server.test_client()
    for path in TRAVERSALS:
        response = client.get(path)
        assert response.status_code < 500, (path, response.status_code)
        assert not _leaks(response.data), path
    assert client.get("/assets/upload.js").status_code == 200


def _multipart(disposition: bytes) -> tuple[bytes, str]:
    boundary = "wip-boundary-7"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="kind"\r\n\r\ndata\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
    ).encode()
    body += disposition + b"\r\nContent-Type: text/csv\r\n\r\na,b\n1,2\n\r\n" + f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


UPLOAD_NAMES = [
    b"filename*=UTF-8''..%2F..%2F..%2Fevil.csv",
    b"filename*=UTF-8''..%2F..%2Fetc%2Fpasswd",
    b"filename*=UTF-8''%2e%2e%2f.csv",
    b"filename*=UTF-8''%00evil.csv",
    b"filename=\"x.csv\"; filename*=UTF-8''..%2F..%2Fy.csv",
    b'filename="../../../evil.csv"',
    b'filename="a/../../b.csv"',
    b'filename="/etc/cron.d/evil.csv"',
    b'filename="..\\\\..\\\\evil.csv"',
    b'filename="C:\\\\Windows\\\\system32\\\\evil.csv"',
    b'filename="\\\\\\\\server\\\\share\\\\evil.csv"',
    b'filename="evil.exe\x00.csv"',
    b'filename="evil.csv\x00.exe"',
    b'filename="' + b"A" * 5000 + b'.csv"',
    b'filename=".csv"',
    b'filename="...."',
    b'filename="\xe2\x80\xaevsc.exe.csv"',
    b'filename="line\r\nbreak.csv"',
]


def test_upload_file_names_are_sanitised(tmp_path):
    """A name with a path (Unix, Windows, ``../``, RFC 5987 ``filename*``), NUL bytes, bidi
    overrides or 5,000 characters: the file is stored in its own upload folder and nowhere
    else, and the name the page gets back is a plain file name (no folder, no control
    character, at most 200 characters); the suffix check sees that name (``x.csv\\0.exe``
    is refused)."""
    app = _app(tmp_path, upload_per_minute=10_000)
    client = app.server.test_client()
    store = app._wip_context.store
    before = {p for p in tmp_path.rglob("*")}
    for disposition in UPLOAD_NAMES:
        body, content_type = _multipart(disposition)
        response = client.post("/upload", data=body, content_type=content_type)
        assert response.status_code in (200, 400), (disposition, response.status_code)
        answer = response.get_json()
        shown = answer.get("name") or answer["error"]
        assert not set(shown) & set("/\\\0\r\n\u202e") and ".." not in shown.split(":")[0], (disposition, shown)
        if response.status_code == 200:
            assert len(answer["name"]) <= 200 and answer["name"].endswith(".csv"), answer["name"]
            path = store.upload_path(answer["id"])
            assert path is not None and path.parent.parent == store.root / "uploads", path
            assert path.name.endswith(".csv") and path.read_bytes() == b"a,b\n1,2\n"
    refused = client.post("/upload", data=_multipart(b'filename="x.csv\x00.exe"')[0], content_type=content_type)
    assert refused.status_code == 400 and "got .exe" in refused.get_json()["error"]
    new = {p for p in tmp_path.rglob("*")} - before
    outside = [p for p in new if (store.root / "uploads") not in p.parents and p.parent != store.root / "quota"]
    assert not outside, outside
    assert all(len(p.relative_to(store.root / "uploads").parts) <= 2 for p in new if p not in outside)


# --- 4. Methods ----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/_dash-update-component", "/upload"])
def test_state_changing_routes_answer_only_post(app, path):
    """GET, PUT, DELETE, OPTIONS, TRACE, PATCH and HEAD on the callback and upload routes get
    405 with ``Allow: POST`` (GET and HEAD were answered the page by the catch-all route,
    OPTIONS 200), not a 500; the page itself still answers GET and HEAD."""
    client = app.server.test_client()
    for method in ("GET", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH", "HEAD"):
        response = client.open(path, method=method, data=b"{}" if method in ("PUT", "PATCH") else None)
        assert response.status_code == 405, (method, response.status_code)
        assert response.headers["Allow"] == "POST"
    assert client.get("/").status_code == 200 and client.head("/").status_code == 200


# --- 5. Malformed callback envelopes ---------------------------------------------------------------
MALFORMED = [
    b"not json",
    b"",
    b"[]",
    b"[1, 2]",
    b"42",
    b'"output"',
    b"null",
    b"true",
    b"NaN",
    b"-Infinity",
    b"1e999999",
    b"1" * 5000,
    b"{}",
    b'{"inputs": [], "state": []}',
    json.dumps({"output": f"{ids.SUBGROUP_SIZE}.children"}).encode(),
    json.dumps(_envelope(output="nope.children")).encode(),
    json.dumps(_envelope(output="..a.b...c.d..")).encode(),
    json.dumps(_envelope(output=5, outputs=5, inputs=5, state=5, changedPropIds=5)).encode(),
    json.dumps(_envelope(output=[], outputs=[])).encode(),
    b'{"output": NaN, "outputs": NaN, "inputs": NaN}',
    json.dumps(_envelope(inputs="abc")).encode(),
    json.dumps(_envelope(inputs=[])).encode(),
    json.dumps(_envelope(inputs=[{"x": 1}], state=[None], changedPropIds=[None])).encode(),
    json.dumps(_envelope(inputs=[[[]]], outputs=[{}])).encode(),
    json.dumps(_envelope(inputs=[1, 2, 3])).encode(),
    json.dumps(_envelope(outputs="x", state={"a": 1})).encode(),
    json.dumps(_envelope(outputs=[{"id": 1, "property": None}] * 3)).encode(),
    json.dumps(_envelope(changedPropIds="results.data")).encode(),
    json.dumps({k: v for k, v in _envelope().items() if k != "inputs"}).encode(),
    json.dumps({k: v for k, v in _envelope().items() if k != "outputs"}).encode(),
    b'{"output": "subgroup-size.children", "outputs": {"id": 1e999, "property": -1e999}, "inputs": '
    b'[{"id": 1e309, "property": NaN, "value": ' + b"9" * 4000 + b'}], "changedPropIds": [1e999]}',
    b'{"output": "subgroup-size.children", "inputs": [{"id": "results", "property": "data", "value": NaN}]}',
    b"[" * 50_000 + b"]" * 50_000,
]


def test_malformed_callback_envelopes_get_4xx_and_the_server_keeps_serving(app):
    """Non-JSON, JSON that is not an object, missing or unknown outputs, inputs of the wrong
    types or number, huge numbers and NaN: each a 4xx (Dash's own handling of most was an HTTP
    500), and the page and a well-formed callback still answer."""
    client = app.server.test_client()
    statuses = {}
    for body in MALFORMED:
        for content_type in ("application/json", "text/plain"):
            response = client.post("/_dash-update-component", data=body, content_type=content_type)
            statuses[body[:60], content_type] = response.status_code
    assert all(400 <= s < 500 for s in statuses.values()), {k: s for k, s in statuses.items() if not 400 <= s < 500}
    assert client.get("/").status_code == 200
    good = client.post("/_dash-update-component", json=_envelope())
    assert good.status_code == 200 and good.get_json()["response"][ids.SUBGROUP_SIZE]["children"] == ""


def test_a_bug_in_a_callback_is_still_an_error(app, monkeypatch):
    """Only what Dash fails on before or after a callback runs is the request's fault: an
    exception raised inside this project's callbacks stays an HTTP 500 (logged), so forged-state
    tests keep finding real bugs."""
    from dashboard import views

    def broken(ctx, results):
        raise RuntimeError("a bug")

    monkeypatch.setattr(views, "load_inputs", broken)
    response = app.server.test_client().post("/_dash-update-component", json=_envelope({"x": 1}))
    assert response.status_code == 500


# --- 7. CORS and cross-site requests ---------------------------------------------------------------
def test_no_cors_headers_for_foreign_origins(app):
    client = app.server.test_client()
    origin = {"Origin": f"https://{EVIL}"}
    preflight = {**origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    answers = [
        client.get("/", headers=origin),
        client.get("/_dash-layout", headers=origin),
        client.options("/", headers=preflight),
        client.options("/_dash-update-component", headers=preflight),
        client.options("/upload", headers=preflight),
        client.post("/_dash-update-component", json=_envelope(), headers=origin),
    ]
    for response in answers:
        assert not [h for h in response.headers.keys() if h.lower().startswith("access-control-")], response.headers
    assert answers[3].status_code == 405 and answers[4].status_code == 405


@pytest.mark.parametrize(
    "headers, refused",
    [
        ({"Sec-Fetch-Site": "cross-site", "Origin": f"https://{EVIL}"}, True),
        ({"Sec-Fetch-Site": "same-site", "Origin": "https://other.localhost"}, True),
        ({"Origin": f"https://{EVIL}"}, True),  # a browser without Fetch metadata
        ({"Origin": "null"}, True),  # a sandboxed frame or a file:// page
        ({"Origin": "http://localhost:9999"}, True),
        ({"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost"}, False),
        ({"Sec-Fetch-Site": "none"}, False),  # typed or bookmarked by the user
        ({"Origin": "http://localhost"}, False),
        ({}, False),  # not a browser (a script): no CSRF to fear
    ],
)
def test_cross_site_posts_are_refused(tmp_path, headers, refused):
    """A form or script on another site must not make a visitor's browser upload files (which
    writes to disk and spends the visitor's quota) or run callbacks: a POST whose
    Sec-Fetch-Site is not same-origin, or (without it) whose Origin is not this host, gets 403
    and writes nothing. Same-origin requests, and requests from non-browsers, go through."""
    app = _app(tmp_path)
    client = app.server.test_client()
    upload = _csv_upload(client, headers=headers)
    callback = client.post("/_dash-update-component", json=_envelope(), headers=headers)
    uploads = list((app._wip_context.store.root / "uploads").iterdir())
    if refused:
        assert upload.status_code == 403 and callback.status_code == 403 and uploads == []
        assert "other sites" in upload.get_json()["error"]
    else:
        assert upload.status_code == 200 and callback.status_code == 200 and len(uploads) == 1


# --- real server: the path as sent, Host, chunked and slow bodies ----------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """gunicorn -c gunicorn.conf.py with two workers (four threads each) on a loopback port."""
    cache = tmp_path_factory.mktemp("http-surface-gunicorn")
    port = free_port()
    env = {
        **os.environ,
        "WIP_CACHE_DIR": str(cache),
        "WIP_SECRET_KEY": "test-secret",
        "WIP_UPLOAD_PER_MINUTE": "10000",
        "WIP_THREADS": "4",
    }
    log = open(cache / "gunicorn.log", "w")
    command = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"), "app:server"]
    command += ["-w", "2", "-b", f"127.0.0.1:{port}", "--no-control-socket"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if _raw(port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")[0] == 200:
                break
        except OSError:
            time.sleep(0.3)
    else:
        proc.terminate()
        pytest.fail("gunicorn did not start:\n" + (cache / "gunicorn.log").read_text()[-3000:])
    yield {"port": port, "cache": cache}
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _raw(port: int, request: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
    """Send bytes as they are; the status and the whole answer (the server closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        out = b""
        while True:
            data = s.recv(65536)
            if not data:
                break
            out += data
    return int(out.split(b" ", 2)[1]), out


def _get(port: int, target: bytes, host: bytes = b"127.0.0.1", method: bytes = b"GET") -> tuple[int, bytes]:
    return _raw(port, method + b" " + target + b" HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")


def test_real_server_paths_hosts_and_methods(server):
    """What gunicorn passes on as sent: traversal paths (no client normalises them here),
    ``//evil.example/`` and absolute-form targets, a rebinding Host, TRACE: no file outside
    the served folders, no 5xx, no redirect, no Location, evil.example in no answer."""
    port = server["port"]
    for path in TRAVERSALS + ["/assets/../../../../etc/passwd", "/_dash-component-suites/dash/../../../etc/passwd"]:
        status, out = _get(port, path.encode())
        assert status < 500 and not _leaks(out), (path, status)
    for target in [b"//evil.example/", b"//evil.example", b"///evil.example/x", b"/\\evil.example/", b"//upload"]:
        status, out = _get(port, target)
        assert status in (200, 405) and b"\r\nLocation:" not in out, target  # the page, or /upload
        assert b"evil" not in out.split(b"\r\n\r\n")[0], target
    status, out = _get(port, b"http://evil.example/_dash-layout")
    assert status in (200, 400, 403) and b"Location:" not in out and EVIL.encode() not in out
    status, out = _get(port, b"/", host=b"evil.example:8050")
    assert status == 403 and EVIL.encode() not in out
    for method in (b"TRACE", b"DELETE", b"OPTIONS", b"GET"):
        assert _get(port, b"/upload", method=method)[0] == 405, method
    assert _get(port, b"/")[0] == 200


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def test_chunked_callback_bodies_over_the_limit_get_413_before_they_end(server):
    """A chunked body (no Content-Length) to the callback route: under the limit it is read
    whole and answered; over it, 413 once the limit is passed, while the client is still
    sending (not after 64 MiB). Werkzeug's own limit cut the stream quietly at 2 MiB: a
    forged body's first 2 MiB then went to Dash as the whole request."""
    port = server["port"]
    head = b"POST /_dash-update-component HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    small = json.dumps(_envelope()).encode() + b" " * (CALLBACK_BODY_LIMIT // 2)
    pieces = [small[i : i + 50_000] for i in range(0, len(small), 50_000)]
    status, out = _raw(
        port,
        head
        + b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        + b"".join(map(_chunk, pieces))
        + b"0\r\n\r\n",
    )
    assert status == 200 and b'"subgroup-size"' in out

    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n" + _chunk(json.dumps(_envelope()).encode()))
        block, sent, answer = _chunk(b" " * 65536), 0, b""
        s.settimeout(0.5)  # a send blocked for that long: the server has stopped reading
        try:
            while sent < 64 * 2**20 and not answer:
                s.sendall(block)
                sent += 65536
                if select.select([s], [], [], 0)[0]:
                    answer = s.recv(65536)
        except OSError:  # the server closed the connection while we sent
            pass
        s.settimeout(5)
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
                answer += data
        except OSError:
            pass
    assert answer.startswith(b"HTTP/1.1 413"), answer[:80]
    assert sent < 32 * 2**20, f"{sent / 2**20:.0f} MiB sent before the answer"
    assert _get(port, b"/")[0] == 200


def _slow_clients(port: int, kinds: list[str], results: list, stop: threading.Event) -> None:
    """Hostile clients, one socket each, driven from one thread (a thread per client would
    leave a malloc arena per thread mapped in this test process, whose address space the
    isolated model processes of later tests inherit): their headers, then their bodies at
    one byte a second (or nothing after the first). Each result is (kind, seconds, answer)."""
    start = time.monotonic()
    heads = {
        "upload": b"POST /upload HTTP/1.1\r\nContent-Type: multipart/form-data; boundary=zz\r\n",
        "callback": b"POST /_dash-update-component HTTP/1.1\r\nContent-Type: application/json\r\n",
    }
    open_: dict[socket.socket, str] = {}
    for kind in kinds:
        head, first = (heads["upload"], b"--zz\r\n") if kind == "upload" else (heads["callback"], b"{")
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(head + b"Host: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n" + first)
            open_[s] = kind
        except OSError as exc:
            results.append((kind, time.monotonic() - start, repr(exc).encode()))
    next_byte = time.monotonic() + 1.0
    try:
        while open_ and not stop.is_set():
            ready = select.select(list(open_), [], [], max(0.0, next_byte - time.monotonic()))[0]
            for s in ready:
                kind = open_.pop(s)
                try:
                    answer = s.recv(64)[:12]
                except OSError as exc:
                    answer = repr(exc).encode()
                results.append((kind, time.monotonic() - start, answer))
                s.close()
            if time.monotonic() >= next_byte:
                next_byte += 1.0
                for s, kind in list(open_.items()):
                    if kind == "stalled":
                        continue
                    try:
                        s.sendall(b" ")
                    except OSError as exc:
                        results.append((kind, time.monotonic() - start, repr(exc).encode()))
                        open_.pop(s).close()
    finally:
        for s in open_:
            s.close()


def test_slow_bodies_are_cut_and_the_page_keeps_answering(server):
    """20 clients trickling their bodies at a byte a second (callbacks and uploads) or sending
    nothing after their headers, against 2 workers of 4 threads: each gets 408 and its
    connection closed within BODY_GRACE seconds (plus the watchdog's tick), and a visitor's
    page meanwhile answers within a few seconds. Before, every slow client held a worker
    thread for as long as it liked and the page request timed out (30 s)."""
    port = server["port"]
    results: list = []
    stop = threading.Event()
    kinds = ["callback", "upload", "stalled", "callback"] * 5
    clients = threading.Thread(target=_slow_clients, args=(port, kinds, results, stop), daemon=True)
    clients.start()
    time.sleep(2.0)
    waits = []
    for _ in range(2):
        start = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        connection.request("GET", "/")
        response = connection.getresponse()
        response.read()
        connection.close()
        waits.append(time.monotonic() - start)
        assert response.status == 200
        time.sleep(1.0)
    clients.join(timeout=BODY_GRACE + 8)
    stop.set()
    assert max(waits) < 4.0, waits
    assert len(results) == len(kinds), results
    assert all(answer.startswith(b"HTTP/1.1 408") for _, _, answer in results), results
    assert max(t for _, t, _ in results) < BODY_GRACE + 3, sorted(round(t, 1) for _, t, _ in results)
