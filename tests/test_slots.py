"""One client's share of the server's processes (issue 29, exhaustion by legitimate-looking
requests): at most ``--jobs-per-client`` computations or loads of one client run or wait at
once, at most ``--max-jobs`` run in all, and a killed process frees its slot."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time

import pytest

import compute
from dashboard.callbacks.compute import resolve_state, run_request
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.slots import JobSlots
from dashboard.state import default_state, normalize


@pytest.fixture
def sleepers():
    """Live processes standing in for job processes (a slot belongs to a pid and its start)."""
    procs: list[subprocess.Popen] = []

    def make() -> int:
        procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
        return procs[-1].pid

    yield make, procs
    for p in procs:
        p.kill()
        p.wait()


def test_a_client_gets_its_share_and_the_server_its_total(tmp_path, sleepers):
    make, procs = sleepers
    slots = JobSlots(tmp_path, per_client=2, total=3)
    waited: list[int] = []
    with contextlib.ExitStack() as held:
        held.enter_context(slots.hold("1.2.3.4", timeout=1, pid=make()))
        held.enter_context(slots.hold("1.2.3.4", timeout=1, pid=make()))
        assert slots.running("1.2.3.4") == 2
        with pytest.raises(compute.InputError, match="2 computations of yours.*--jobs-per-client"):
            held.enter_context(slots.hold("1.2.3.4", timeout=1, pid=make()))
        held.enter_context(slots.hold("5.6.7.8", timeout=1, pid=make()))
        assert slots.running() == 3
        # the total is taken: another client waits its turn, saying so, then gets a message
        start = time.monotonic()
        with pytest.raises(compute.InputError, match="busy: 3 computations.*--max-jobs"):
            held.enter_context(slots.hold("9.9.9.9", timeout=0.6, waiting=waited.append, pid=make()))
        assert time.monotonic() - start >= 0.6 and waited and set(waited) == {3}
        # a job process killed (the out-of-memory killer, Cancel) frees its slot at once
        procs[0].kill()
        procs[0].wait()
        assert slots.running("1.2.3.4") == 1
        held.enter_context(slots.hold("9.9.9.9", timeout=0.1, pid=make()))
        assert slots.running() == 3
    assert slots.running() == 0  # every slot given back on leaving


def test_waiting_jobs_count_towards_the_clients_share_and_go_first_come_first_served(tmp_path, sleepers):
    """A client cannot park unbounded waiting processes either; the one that waited longest
    runs first."""
    make, procs = sleepers
    slots = JobSlots(tmp_path, per_client=2, total=1)
    first, second, third = make(), make(), make()
    with slots.hold("a", timeout=1, pid=first):
        assert slots._take(f"h:{second}:{_start(second)}", "b", second, _start(second)) == 1  # waits
        assert slots._take(f"h:{third}:{_start(third)}", "b", third, _start(third)) == 1  # waits too
        with pytest.raises(compute.InputError, match="2 computations of yours"):
            slots._take("x", "b", make(), _start(procs[-1].pid))
    assert slots._take(f"h:{third}:{_start(third)}", "b", third, _start(third)) == 0  # not its turn yet
    assert slots._take(f"h:{second}:{_start(second)}", "b", second, _start(second)) is None  # the first waiter


def test_a_slot_of_another_machine_is_trusted_for_its_lease(tmp_path, sleepers):
    """Celery workers on other machines share the cache folder: their slots cannot be looked
    up here, so they count until the lease (the job time limit) runs out."""
    make, _ = sleepers
    slots = JobSlots(tmp_path, per_client=1, total=4, lease=0.5)
    with slots.hold("a", timeout=1, pid=make()):
        with slots.cache.transact():
            held = slots.cache.get("slots")
            for entry in held.values():
                entry[5] = "another-machine"  # as if another host had registered it
            slots.cache.set("slots", held)
        assert slots.running("a") == 1  # its pid is not looked up here
        time.sleep(0.6)
        assert slots.running("a") == 0  # the lease ran out


def _start(pid: int) -> float:
    import psutil

    return psutil.Process(pid).create_time()


def test_a_job_beyond_the_clients_share_gets_a_message_not_a_process(tmp_path, sleepers):
    """Through the job body: a client holding its share gets the share's message as the job's
    error (the page shows it with Retry); another client computes."""
    make, _ = sleepers
    ctx = create_app(Config(cache_dir=str(tmp_path / "cache"), max_curves=40, jobs_per_client=1))._wip_context
    state, error = normalize(ctx, {**default_state(), "subgroup": "X1 > 0.1"})
    assert error is None
    request = resolve_state(ctx, state, None).request
    assert isinstance(request, dict)
    with ctx.slots.hold("1.2.3.4", timeout=1, pid=make()):
        refused = run_request(ctx, request, client="1.2.3.4")
        assert "1 computations of yours are already running" in refused["error"], refused
        assert isinstance(resolve_state(ctx, state, None).request, dict)  # nothing was computed
        done = run_request(ctx, request, client="5.6.7.8")
        assert done.get("ok"), done
    assert ctx.slots.running() == 0
    assert not isinstance(resolve_state(ctx, state, None).request, dict)  # computed once


def test_a_clients_new_results_are_bounded_per_hour(tmp_path):
    """Each client's share of the result cache: a job charges the bytes it stored to its
    client; past --results-mb-per-hour in the last hour, the client's next new computation
    gets a message (with when it can compute again) while other clients and cached results
    are unaffected; an hour later the share is free again."""
    ctx = create_app(Config(cache_dir=str(tmp_path / "cache"), max_curves=40, results_mb_per_hour=1))._wip_context
    assert ctx.config.client_results_bytes == 2**20

    def request_for(subgroup: str) -> dict:
        state, error = normalize(ctx, {**default_state(), "subgroup": subgroup})
        assert error is None
        request = resolve_state(ctx, state, None).request
        assert isinstance(request, dict)
        return request

    assert run_request(ctx, request_for("X1 > 0.1"), client="1.2.3.4").get("ok")
    spent = ctx.slots.spent("1.2.3.4")
    written = sum(len(b) for b in (ctx.store.results.get(k) for k in ctx.store.results.iterkeys()) if b)
    assert 0 < spent <= written  # what the job stored, counted once
    ctx.slots.charge("1.2.3.4", 2**20)  # as if it had filled its share
    second = request_for("X1 > 0.2")
    refused = run_request(ctx, second, client="1.2.3.4")
    assert "MiB of new results in the last hour" in refused["error"] and "--results-mb-per-hour" in refused["error"]
    assert "about 60 minutes" in refused["error"]
    assert run_request(ctx, second, client="5.6.7.8").get("ok")  # another visitor computes
    assert run_request(ctx, second, client="1.2.3.4").get("ok")  # now cached: nothing new to store
    later = time.time() + 3601
    ctx.slots.check_budget("1.2.3.4", ctx.config.client_results_bytes, now=later)  # the window has passed
    assert ctx.slots.spent("1.2.3.4", now=later) == 0


def test_reports_are_limited_per_client_and_link_only_to_http_pages(tmp_path):
    """A report renders every view and carries plotly.js: a client gets 6 a minute (the 7th
    answers with a message in the status line, not a file); the link back to the page is
    built only from an http(s) address (a forged ``javascript:`` href never becomes a link)."""
    import json

    from dashboard import ids
    from dashboard.callbacks.export import REPORTS_PER_MINUTE, report_base

    app = create_app(Config(cache_dir=str(tmp_path / "cache"), max_curves=40))
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

    def ask(href: str, address: str = "10.0.0.1") -> dict:
        inputs = [{**i, "value": 1 if i["id"] == ids.EXPORT_REPORT else None} for i in dep["inputs"]]
        states = [{**s, "value": results if s["id"] == ids.RESULTS else href} for s in dep["state"]]
        body = {
            "output": dep["output"],
            "outputs": outputs,
            "inputs": inputs,
            "state": states,
            "changedPropIds": [f"{ids.EXPORT_REPORT}.n_clicks"],
        }
        answer = client.post(
            "/_dash-update-component",
            data=json.dumps(body),
            content_type="application/json",
            environ_base={"REMOTE_ADDR": address},
        )
        assert answer.status_code == 200, answer.status_code
        return answer.get_json()["response"]

    first = ask("javascript:alert(1)//http://x/?ws=demo-x3")["download"]["data"]
    assert 'href="javascript:' not in first["content"] and "alert(1)" not in first["content"]
    # a forged address gives no link back at all (issue 39: the report never holds a dead link)
    assert 'href="?ws=' not in first["content"] and "Made with the dashboard" not in first["content"]
    assert first["filename"].endswith(".html")
    for _ in range(REPORTS_PER_MINUTE - 1):
        assert "data" in ask("http://127.0.0.1:8050/?ws=demo-x3")["download"]
    refused = ask("http://127.0.0.1:8050/?ws=demo-x3")
    assert "download" not in refused and "At most 6 reports a minute" in refused["status"]["children"]
    assert "data" in ask("http://127.0.0.1:8050/", address="10.0.0.2")["download"]  # another visitor
    assert report_base("https://user:pw@host/x?y") == "" and report_base("data:text/html,x") == ""
    assert report_base("https://example.org/app/?ws=1#top") == "https://example.org/app/"
