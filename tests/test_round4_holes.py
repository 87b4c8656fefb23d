"""Three holes of the outside audit's round 4 (issue 40, item 5), closed:

1. a non-finite number (or text nested too deeply to parse) for a state field, from the URL,
   the state store or a control, is refused like NaN: never an exception the controller does
   not handle (an infinite ``ale_k`` from the number box was an HTTP 500);
2. row labels the data set does not hold are dropped from ``exclude`` by ``normalize``, so a
   made-up label is the same state, and plans the same cache entries, as none;
3. the DNS-rebinding guard decides on the raw ``Host`` header: a loopback request naming a
   host Werkzeug's own check refuses (``a_b.evil.example``: ``request.host`` is then empty) is
   refused, not served."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from werkzeug.test import EnvironBuilder, run_wsgi_app

from dashboard import ids, views
from dashboard.callbacks.drilldown import field_input, update_state
from dashboard.config import Config
from dashboard.http_guard import rebound_host
from dashboard.server import create_app
from dashboard.state import (
    clean_state,
    normalize,
    search_from_state,
    state_from_search,
    view_fields,
)

assert views.REGISTRY  # the views' fields are registered

FORGED_NUMBERS = [float("inf"), float("-inf"), float("nan"), "Infinity", "-Infinity", "NaN", 1e308, "1e999"]
DEEP = "[" * 5000  # JSON nested past the parser's recursion limit


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("round4-cache")), max_curves=40))


def _numeric_fields() -> list[tuple[str, int | float]]:
    """(name, default) of every numeric field of the state: the page's own and the views'."""
    return [  # PFI's repetitions among them (a field of views/pfi.py)
        (f.name, f.default)
        for f in view_fields()
        if isinstance(f.default, (int, float)) and not isinstance(f.default, bool)
    ]


def _whole(default) -> bool:
    """A whole-number field (a yes/no one's default is a bool, which Python counts as an int)."""
    return isinstance(default, int) and not isinstance(default, bool)


def _url_texts(value) -> list[str]:
    """How a number may be spelt in a URL: as given, Python's text and JSON's."""
    if isinstance(value, str):
        return [value]
    return [str(value), json.dumps(value)]


# --- 1. non-finite numbers ---------------------------------------------------------------------
def test_every_numeric_field_cleans_forged_numbers_to_its_default(app):
    """The state store, a job request and the URL: each forged number gives the default."""
    ctx = app._wip_context
    fields = _numeric_fields()
    assert {"repeats", "ale_k"} <= {name for name, _ in fields}
    for name, default in fields:
        for value in FORGED_NUMBERS:
            raw = {"ws": "demo-x3", name: value}
            assert clean_state(raw)[name] == default, (name, value)
            assert normalize(ctx, raw)[0][name] == default, (name, value)
            for text in _url_texts(value):
                search = f"?ws=demo-x3&{name}={quote(text)}"
                assert state_from_search(search)[name] == default, (name, text)
                assert normalize(ctx, state_from_search(search))[0][name] == default, (name, text)


def test_a_forged_number_from_a_fields_control_is_refused(app):
    """A control's value is read by ``Field.read``, which may raise only what the controller
    ignores (ValueError, TypeError): a non-finite number leaves the state as it was (an
    infinite one raised OverflowError, an HTTP 500); a finite one out of range is clamped
    like any number typed in the box."""
    ctx = app._wip_context
    controlled = [f for f in view_fields() if f.control and _whole(f.default)]
    assert controlled
    for field in controlled:
        before = {**normalize(ctx, {"ws": "demo-x3"})[0], field.name: 5}
        for value in FORGED_NUMBERS:
            try:
                read = field.read(value)
            except (ValueError, TypeError):
                read = None
            else:
                assert value == 1e308, (field.name, value, read)  # only a finite number is read
            state, _ = update_state(ctx, before, field.control[0], {field_input(field): value})
            expected = 5 if read is None else field.clean(read)
            assert state[field.name] == expected, (field.name, value, state[field.name])


def test_text_nested_too_deeply_is_refused_by_every_field():
    """JSON nested past the parser's limit (a ``pair`` or ``edit`` in a URL or a click) is
    refused like any unreadable value, not a RecursionError."""
    for field in view_fields():
        assert field.clean(DEEP) == field.default, field.name
        with pytest.raises((ValueError, TypeError)):
            field.read(DEEP)
        assert clean_state({"ws": "demo-x3", field.name: DEEP})[field.name] == field.default
    for name in [f.name for f in view_fields()] + ["edit"]:
        state = state_from_search(f"?ws=demo-x3&obs=3&{name}={quote(DEEP)}")
        assert state == state_from_search("?ws=demo-x3&obs=3"), name


def _prop(spec: str) -> dict:
    spec = spec.split("@", 1)[0]
    cid, prop = spec.rsplit(".", 1)
    return {"id": json.loads(cid) if cid.startswith("{") else cid, "property": prop}


def _controller_request(app, component: str, prop: str, value, state: dict) -> dict:
    """A well-formed request for the controller, as the page sends it when ``component``'s
    ``prop`` changes to ``value`` (every other input empty)."""
    deps = app.server.test_client().get("/_dash-dependencies").get_json()
    dep = next(d for d in deps if any(i["id"] == component and i["property"] == prop for i in d["inputs"]))

    def item(spec: dict) -> dict:
        if spec["id"] == component and spec["property"] == prop:
            return {**spec, "value": value}
        return {**spec, "value": state if spec["id"] == ids.STATE else None}

    return {
        "output": dep["output"],
        "outputs": [_prop(s) for s in dep["output"].strip(".").split("...")],
        "inputs": [item(i) for i in dep["inputs"]],
        "state": [item(s) for s in dep["state"]],
        "changedPropIds": [f"{component}.{prop}"],
    }


def test_forged_numbers_through_the_callback_route_are_not_server_errors(app):
    """The controller through /_dash-update-component (JSON's Infinity and NaN, as Python's
    parser reads them), from each field's control and from the URL: never a 5xx, and the
    answered state refuses the number (the control's) or holds the default (the URL's)."""
    client = app.server.test_client()
    controlled = [f for f in view_fields() if f.control and _whole(f.default)]
    state = {"ws": "demo-x3", **{f.name: 5 for f in controlled}}  # a refused number leaves each at 5
    sent = []
    for field in view_fields():
        if field.control and _whole(field.default):
            for value in FORGED_NUMBERS:
                expected = field.clean(int(value)) if value == 1e308 else 5  # 1e308: clamped, as typed
                sent.append((field.name, *field.control, value, expected))
    for name, default in _numeric_fields():
        for value in FORGED_NUMBERS:
            for text in _url_texts(value):
                sent.append((name, ids.URL, "search", f"?ws=demo-x3&{name}={quote(text)}", default))
    for name, component, prop, value, expected in sent:
        body = _controller_request(app, component, prop, value, state)
        response = client.post("/_dash-update-component", data=json.dumps(body), content_type="application/json")
        assert response.status_code == 200, (name, value, response.status_code)
        answered = response.get_json()["response"][ids.STATE]["data"]
        assert answered[name] == expected, (name, value, answered[name])
    assert client.get("/").status_code == 200


# --- 2. made-up row labels in exclude ------------------------------------------------------------
def _keys(ctx, state: dict) -> dict:
    return views.plan_state(ctx, ctx.store.workspace(state["ws"]), state)["keys"]


def test_a_made_up_excluded_row_is_the_same_state_and_plan_as_none(app):
    """``?exclude=zz1`` (or a forged state) named rows the data set lacks and each made a new
    state, caching results identical to the all-rows ones: now the same state, URL and keys."""
    ctx = app._wip_context
    base, _ = normalize(ctx, state_from_search("?ws=demo-x3"))
    rows = ctx.store.data(ctx.store.workspace("demo-x3")).index
    assert len(rows) > 3 and 99_999 not in rows
    forged = [
        state_from_search("?ws=demo-x3&exclude=zz1"),
        state_from_search("?ws=demo-x3&exclude=zz1,-1,99999,3.0,1e3,x" + "9" * 150),
        {"ws": "demo-x3", "exclude": ["zz1", 99_999, 10**30, "", " "]},
    ]
    for raw in forged:
        state, error = normalize(ctx, raw)
        assert error is None
        assert state == base and state["exclude"] == [], state["exclude"]
        assert search_from_state(state) == search_from_state(base)
        assert _keys(ctx, state) == _keys(ctx, base)


def test_a_real_excluded_row_is_kept_in_the_datas_own_spelling(app):
    """A label the data set holds is kept (and changes the plan); one spelt another way for
    the same row (``03`` for row 3) is kept as the row's own label, one state and one key."""
    ctx = app._wip_context
    base, _ = normalize(ctx, state_from_search("?ws=demo-x3"))
    kept, _ = normalize(ctx, state_from_search("?ws=demo-x3&exclude=3,zz1"))
    assert kept["exclude"] == ["3"]
    assert _keys(ctx, kept) != _keys(ctx, base)
    for spelt, rows in [("03", ["3"]), ("3,%2B3,03,%203", ["3"]), ("03,3_0", ["3", "30"])]:
        other, _ = normalize(ctx, state_from_search(f"?ws=demo-x3&exclude={spelt}"))
        assert other["exclude"] == rows, (spelt, other["exclude"])
    assert normalize(ctx, {"ws": "demo-x3", "exclude": [3, "3", "03"]})[0] == kept


def test_excluded_rows_are_checked_against_text_row_labels(app, monkeypatch):
    """Row labels may be text (a Parquet file's index): kept only as the data spells them."""
    ctx = app._wip_context
    data = ctx.store.data(ctx.store.workspace("demo-x3"))
    labelled = data.set_axis([f"r{i}" for i in range(len(data))])
    monkeypatch.setattr(ctx.store, "data", lambda ws: labelled)
    state, _ = normalize(ctx, {"ws": "demo-x3", "exclude": ["r3", "3", "R3", "zz1", 3], "obs": "r5"})
    assert state["exclude"] == ["r3"] and state["obs"] == "r5"


# --- 3. the rebinding guard reads the raw Host -------------------------------------------------
REFUSED_HOSTS = [
    "a_b.evil.example",
    "evil~.example",
    "x!y.example",
    "*.example",
    "a_b.evil.example:8050",
    "",
    "localhost:80x",
    "127.0.0.1:99999",
    "[::1",
    "[evil.example]:8050",
    "a_b.localhost:8050",
]
SERVED_HOSTS = ["127.0.0.1:8050", "localhost:8050", "localhost", "[::1]:8050", "app.localhost"]


def _raw_request(app, method: str, path: str, host: str, remote: str) -> tuple[int, bytes]:
    """One request with this raw ``Host``, as gunicorn hands it to the application. Werkzeug's
    test client cannot send every such Host: some versions (3.1.8) parse the request's URL for
    its cookies and raise on ``127.0.0.1:99999`` before the application is called."""
    environ = EnvironBuilder(path=path, method=method, environ_base={"REMOTE_ADDR": remote}).get_environ()
    environ["HTTP_HOST"] = host
    chunks, status, _ = run_wsgi_app(app.server.wsgi_app, environ, buffered=True)
    return int(status.split()[0]), b"".join(chunks)


@pytest.mark.parametrize("host", REFUSED_HOSTS)
def test_a_loopback_request_naming_an_unparseable_host_is_refused(app, host):
    """Werkzeug reports such a Host as empty, which the guard took for "not rebound": a page
    re-pointed at 127.0.0.1 under ``a_b.evil.example`` was served. The refusal is the
    rebinding one (403) and does not repeat the Host; a visitor on another machine is not
    concerned."""
    for method, path in [("GET", "/"), ("GET", "/_dash-layout"), ("POST", "/upload")]:
        status, body = _raw_request(app, method, path, host, "127.0.0.1")
        assert status == 403, (method, path, status)
        assert not host or host.encode() not in body
    assert _raw_request(app, "GET", "/", host, "198.51.100.7")[0] == 200
    assert rebound_host("127.0.0.1", host) and rebound_host("::1", host) and rebound_host("::ffff:127.0.0.1", host)


@pytest.mark.parametrize("host", SERVED_HOSTS)
def test_a_loopback_request_naming_localhost_or_an_address_is_served(app, host):
    client = app.server.test_client()
    assert client.get("/", headers={"Host": host}).status_code == 200
    assert client.post("/upload", headers={"Host": host}).status_code != 403
    assert not rebound_host("127.0.0.1", host)


def test_a_request_without_a_host_header_is_not_a_browsers():
    """No browser leaves Host out (HTTP/1.1 requires it), so a request without one cannot be
    a rebinding page's; Werkzeug then names the server's own address."""
    assert not rebound_host("127.0.0.1", None)
    assert rebound_host("127.0.0.1", "evil.example")
