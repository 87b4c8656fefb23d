"""A web machine that cannot reach its broker (issue 44): every path ends in a message on
the page next to what the visitor did, the server keeps serving, nothing hangs.

The server here is the real app with ``--celery-broker`` on a closed port. The callbacks are
driven through ``/_dash-update-component`` as the page sends them (the resolve that builds
the demo, the background job and the load, whose queueing needs the broker), and the upload
through its route.
"""

from __future__ import annotations

import json
import time

import pytest
from helpers.ports import free_port

from dashboard import ids
from dashboard.config import Config
from dashboard.server import create_app

SECRET = "test-broker-key"


@pytest.fixture(scope="module")
def dead(tmp_path_factory):
    """The app, its broker a closed port."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    config = Config(cache_dir=str(tmp_path_factory.mktemp("dead-broker")), celery_broker=url, secret_key=SECRET)
    return create_app(config), url


def _prop(spec: str) -> dict:
    cid, prop = spec.split("@", 1)[0].rsplit(".", 1)
    return {"id": cid, "property": prop}


def _dependency(app, output_id: str) -> dict:
    deps = app.server.test_client().get("/_dash-dependencies").get_json()
    for dep in deps:
        if not dep.get("clientside_function") and any(o["id"] == output_id for o in _outputs(dep["output"])):
            if output_id != ids.STATUS or dep["inputs"][0]["id"] == ids.STATE:  # the resolve callback
                return dep
    raise AssertionError(f"no callback writes {output_id}")


def _outputs(output: str) -> list[dict]:
    return [_prop(s) for s in output.strip(".").split("...")] if output.startswith("..") else [_prop(output)]


def _call(app, dep: dict, values: dict) -> dict:
    """Post the callback as the page does, every input and state given its value (None
    unless ``values`` names it); the answer's JSON, checked to be no server error."""
    body = {
        "output": dep["output"],
        "outputs": _outputs(dep["output"]) if dep["output"].startswith("..") else _outputs(dep["output"])[0],
        "inputs": [{**i, "value": values.get(i["id"])} for i in dep["inputs"]],
        "state": [{**s, "value": values.get(s["id"])} for s in dep["state"]],
        "changedPropIds": [f"{dep['inputs'][0]['id']}.{dep['inputs'][0]['property']}"],
    }
    started = time.monotonic()
    response = app.server.test_client().post(
        "/_dash-update-component", data=json.dumps(body), content_type="application/json"
    )
    assert time.monotonic() - started < 30, "a callback waited for the broker"
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    return response.get_json()


def _said(answer: dict, component: str) -> str:
    """What the answer writes into a component's children (as an output or a side update)."""
    found = [v.get("children") for k, v in answer.get("response", {}).items() if k == component]
    found += [v.get("children") for k, v in answer.get("sideUpdate", {}).items() if k == component]
    return " ".join(str(f) for f in found if f)


def test_the_demo_page_says_the_broker_cannot_be_reached(dead):
    app, url = dead
    answer = _call(app, _dependency(app, ids.STATUS), {ids.STATE: {"ws": "demo-x3"}})
    said = _said(answer, ids.STATUS)
    assert "could not be reached" in said and url in said, answer
    assert not (app._wip_context.store.root / "workspaces" / "demo-x3.json").exists()  # nothing trained for nothing
    assert app.server.test_client().get("/").status_code == 200  # still serving


def test_a_job_that_cannot_be_queued_ends_with_the_brokers_name(dead):
    app, _ = dead
    request = {"state": {"ws": "demo-x3"}, "request": "r1", "nonce": "0123456789abcdef"}
    answer = _call(app, _dependency(app, ids.JOB_DONE), {ids.JOB_REQUEST: request})
    done = answer["response"][ids.JOB_DONE]["data"]
    assert done["request"] == "r1" and done["nonce"] == "0123456789abcdef"
    assert "broker" in done["error"] and "could not be reached" in done["error"]


def test_a_load_that_cannot_be_queued_says_why_next_to_load(dead):
    app, _ = dead
    answer = _call(app, _dependency(app, ids.LOAD_STATUS), {ids.LOAD_BUTTON: 1})
    assert "could not be reached" in _said(answer, ids.LOAD_STATUS), answer


def test_an_upload_the_broker_cannot_keep_is_refused_with_the_reason(dead):
    app, url = dead
    client = app.server.test_client()
    started = time.monotonic()
    response = client.post(
        "/upload",
        data={"kind": "data", "file": (__import__("io").BytesIO(b"x,y\n1,0\n"), "churn.csv")},
        content_type="multipart/form-data",
    )
    assert time.monotonic() - started < 30
    assert response.status_code == 503, response.get_data(as_text=True)
    error = response.get_json()["error"]
    assert error.startswith("churn.csv") and url in error
    assert not any((app._wip_context.store.root / "uploads").iterdir())  # no half-kept upload


def test_the_jobs_watchdog_ends_the_wait_when_the_broker_goes(dead):
    """A job running while the broker goes away: the watchdog, which reads the job's record
    there, ends the page's wait with the broker's name (Retry then computes again)."""
    app, _ = dead
    request = {"state": {"ws": "demo-x3"}, "request": "r2", "nonce": "fedcba9876543210"}
    dep = next(
        d
        for d in app.server.test_client().get("/_dash-dependencies").get_json()
        if d["inputs"] and d["inputs"][0]["id"] == ids.JOB_WATCH
    )
    answer = _call(app, dep, {ids.JOB_WATCH: 3, ids.JOB_REQUEST: request})
    done = answer["response"][ids.JOB_DONE]["data"]
    assert done["request"] == "r2" and "could not be reached" in done["error"]
    assert answer["response"][ids.JOB_WATCH]["disabled"] is True


def test_only_errors_of_reach_are_turned_into_messages():
    """Redis's, Celery's and ours (and what they caused) become the page's message; any
    other error is raised as before (a bug stays a bug)."""
    import redis
    from kombu.exceptions import OperationalError

    from dashboard.broker import BrokerError, unreachable

    assert unreachable(BrokerError("the object store (s3://b/p) could not be reached")) == (
        "the object store (s3://b/p) could not be reached"
    )
    assert "ConnectionError" in (unreachable(redis.ConnectionError("refused")) or "")
    assert "OperationalError" in (unreachable(OperationalError("no route")) or "")
    try:
        try:
            raise redis.TimeoutError("timed out")
        except redis.RedisError:
            raise RuntimeError("Retry limit exceeded while trying to reconnect to the Celery result store")  # noqa: B904 - as Celery raises it (its context: the Redis error)
    except RuntimeError as caused:
        assert "TimeoutError" in (unreachable(caused) or "")
    assert unreachable(ValueError("a bug")) is None
    assert unreachable(KeyError("state")) is None
