"""Issue 43, item 1: ``--url-prefix`` (``WIP_URL_PREFIX``). The prefix is normalised to what
Dash wants and refused, naming the option, when it is not a plain path; every route of the app
(the page, its layout, callbacks, assets, the upload) answers under it and nowhere else. The
page behind a real reverse proxy is ``tests/test_browser_prefix.py``."""

from __future__ import annotations

import pytest

from dashboard.config import Config, from_env, parse_args, url_prefix
from dashboard.server import create_app


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/", "/"),
        ("", "/"),
        ("tools/why", "/tools/why/"),
        ("/tools/why/", "/tools/why/"),
        ("//x//", "/x/"),
        (" /a-b_c.d~/ ", "/a-b_c.d~/"),
    ],
)
def test_a_prefix_is_normalised(raw, expected):
    assert url_prefix(raw) == expected


@pytest.mark.parametrize("raw", ["/a b/", "/../x/", "/x/./", "/<script>/", "/a//b/", "/x?y/", "/é/"])
def test_a_prefix_that_is_not_a_plain_path_is_refused_naming_the_option(raw):
    with pytest.raises(ValueError, match=r"--url-prefix, WIP_URL_PREFIX"):
        url_prefix(raw)
    with pytest.raises(SystemExit, match="must be a path such as /tools/why/"):
        parse_args(["--url-prefix", raw], environ={})
    with pytest.raises(SystemExit, match="must be a path such as /tools/why/"):
        from_env({"WIP_URL_PREFIX": raw}, with_secret=False)


def test_every_route_answers_under_the_prefix_and_nowhere_else(tmp_path):
    app = create_app(Config(cache_dir=str(tmp_path), warm=False, secret_key="k", url_prefix="tools/why"))
    client = app.server.test_client()
    page = client.get("/tools/why/")
    assert page.status_code == 200
    assert '"requests_pathname_prefix":"\\u002ftools\\u002fwhy\\u002f"' in page.get_data(as_text=True)
    assert client.get("/tools/why/_dash-layout").status_code == 200
    assert client.get("/tools/why/_dash-dependencies").status_code == 200
    assert client.get("/tools/why/assets/upload.js").status_code == 200
    for outside in ("/", "/_dash-layout", "/_dash-dependencies", "/assets/upload.js"):
        assert client.get(outside).status_code == 404, outside
    # the upload route: under the prefix, POST only; a form without a file is a 400 naming it
    assert client.get("/tools/why/upload").status_code == 405
    refused = client.post("/tools/why/upload", data={"kind": "model"})
    assert refused.status_code == 400
    assert client.post("/upload", data={"kind": "model"}).status_code == 404
