"""Warm model processes (issue 28, what-if at the speed of thought): a what-if is computed
by the request that needs it, in a process of its own that keeps the model loaded, within
the trust boundary (the model runs only there; too slow, crashed or out of memory: stopped,
and the background job takes the task)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from dashboard import jobs, planning, warm
from dashboard.callbacks.compute import resolve_state, run_request
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import plan_state, whatif


@pytest.fixture()
def ctx(tmp_path, monkeypatch):
    # what these tests check is which process answers, not how fast: a machine busy with other
    # work (a browser test, a second suite) must not turn a slow first answer into a job. The
    # test of the time limits sets its own.
    monkeypatch.setattr(warm, "QUICK_SECONDS", 60.0)
    monkeypatch.setattr(warm, "SLOW_SECONDS", 60.0)
    warm.stop_all()  # none left by other tests (their pages' requests start warm processes too)
    app_ctx = create_app(Config(cache_dir=str(tmp_path / "cache"), max_curves=200))._wip_context
    yield app_ctx
    warm.stop_all()


def _edited(ctx, value: float) -> dict:
    return normalize(ctx, {**default_state(), "ws": "demo-x3", "obs": "5", "edit": {"X2": value}})[0]


def _whatif_task(ctx, state) -> dict:
    planned = plan_state(ctx, ctx.store.workspace("demo-x3"), state)
    return next(t for t in planned["tasks"] if t["kind"] == whatif.KIND)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_page_gets_its_what_if_without_a_job(ctx):
    base = normalize(ctx, {**default_state(), "ws": "demo-x3", "obs": "5"})[0]
    assert run_request(ctx, resolve_state(ctx, base, None).request).get("ok")  # the first visit's job
    state = _edited(ctx, 1.2345)
    task = _whatif_task(ctx, state)
    without = resolve_state(ctx, state, None)  # no client: no quick path (the job's own resolve)
    assert isinstance(without.request, dict) and not ctx.store.has(task["key"])
    resolved = resolve_state(ctx, state, None, client="203.0.113.9")
    assert ctx.store.has(task["key"])  # computed by the request itself
    # only the contributions of the edited row are left for the job
    left = planning.missing(ctx.store, plan_state(ctx, ctx.store.workspace("demo-x3"), state)["tasks"])
    assert [t["kind"] for t in left] == ["contributions"]
    assert resolved.results.get("pending") and isinstance(resolved.request, dict)
    result = ctx.store.get(task["key"])
    assert result.edits == {"X2": 1.2345}
    # the same numbers a job computes
    again = _edited(ctx, 1.2345)
    key = _whatif_task(ctx, again)["key"]
    assert key == task["key"]
    # the warm process is a child of this process, still running, and answers the next edit
    (process,) = warm._POOL.values()
    assert _alive(process.pid) and process.pid != os.getpid()
    with open(f"/proc/{process.pid}/comm") as comm:  # as ps (and the churn test) tell it apart
        assert comm.read().strip() == warm.PROCESS_NAME
    other = _edited(ctx, -0.5)
    spent = ctx.slots.spent("203.0.113.9")
    resolve_state(ctx, other, None, client="203.0.113.9")
    assert ctx.store.has(_whatif_task(ctx, other)["key"])
    assert list(warm._POOL.values()) == [process]
    assert ctx.slots.spent("203.0.113.9") > spent  # the bytes it stored, charged to the client


def test_the_model_loads_once_per_warm_process(ctx, tmp_path, monkeypatch):
    loads = tmp_path / "loads"
    real = jobs.load_model

    def counted(*args, **kwargs):
        with open(loads, "a") as out:
            out.write("load\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(jobs, "load_model", counted)  # the fork inherits it
    ws = ctx.store.workspace("demo-x3")
    for value in (0.25, 0.5, 0.75):
        left, _ = warm.run_quick(ctx, ws, [_whatif_task(ctx, _edited(ctx, value))])
        assert left == []
    assert loads.read_text().count("load") == 1


@pytest.mark.parametrize("failure", ["slow", "crash", "memory"])
def test_a_failing_warm_process_is_stopped_and_the_job_takes_over(ctx, monkeypatch, failure):
    def bad(*args, **kwargs):
        if failure == "slow":
            time.sleep(60)
        if failure == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        raise MemoryError

    monkeypatch.setattr(warm, "QUICK_SECONDS", 1.0)
    monkeypatch.setattr(warm, "SLOW_SECONDS", 0.5)
    monkeypatch.setattr(jobs, "run", bad)  # in the warm process (forked after this)
    ws = ctx.store.workspace("demo-x3")
    task = _whatif_task(ctx, _edited(ctx, 0.125))
    start = time.monotonic()
    left, written = warm.run_quick(ctx, ws, [task])
    assert left == [task] and written == 0  # the job computes it
    assert time.monotonic() - start < 5
    (process,) = warm._POOL.values()
    assert process.failed and not process.alive and process.pid == -1  # reaped, never signalled again
    # cold for a while: the next edit goes to the job at once, no new process
    left, _ = warm.run_quick(ctx, ws, [_whatif_task(ctx, _edited(ctx, 0.25))])
    assert len(left) == 1 and list(warm._POOL.values()) == [process]
    monkeypatch.undo()
    state = _edited(ctx, 0.125)  # the job computes what the warm process could not
    assert run_request(ctx, {"state": state}).get("ok") and ctx.store.has(task["key"])


def test_a_task_error_leaves_the_process_warm(ctx, monkeypatch):
    """A task the warm process fails on (a bad row, say) goes to the job, which reports the
    error as usual; the process itself is fine and stays."""
    real = jobs.run

    def flaky(*args, **kwargs):
        if kwargs.get("models") is not None and not kwargs["models"]:
            raise ValueError("row 5 has no value for X2")
        return real(*args, **kwargs)

    monkeypatch.setattr(jobs, "run", flaky)
    ws = ctx.store.workspace("demo-x3")
    task = _whatif_task(ctx, _edited(ctx, 0.375))
    left, _ = warm.run_quick(ctx, ws, [task])
    assert left == [task]
    (process,) = warm._POOL.values()
    assert process.alive and not process.failed and _alive(process.pid)


def test_a_worker_keeps_few_warm_processes(ctx, monkeypatch):
    monkeypatch.setattr(warm, "MAX_WARM", 1)
    ws = ctx.store.workspace("demo-diabetes")
    pids = []
    assert len(ws.models) >= 2
    for model in [m.name for m in ws.models][:2]:
        state = normalize(ctx, {**default_state(), "ws": ws.id, "model": model, "obs": "7", "edit": {"bmi": 0.05}})[0]
        task = _whatif_task_of(ctx, ws, state)
        assert warm.run_quick(ctx, ws, [task])[0] == []
        pids.append(warm._POOL[next(reversed(warm._POOL))].pid)
    assert len(warm._POOL) == 1 and not _alive(pids[0]) and _alive(pids[-1])


def _whatif_task_of(ctx, ws, state) -> dict:
    return next(t for t in plan_state(ctx, ws, state)["tasks"] if t["kind"] == whatif.KIND)


def test_stopping_twice_closes_nothing_of_anyone_else(ctx):
    """A stopped process's descriptors and pid are given up once: a second stop (the pool
    evicting it, stop_all) must not close descriptor numbers reused since by others."""
    ws = ctx.store.workspace("demo-x3")
    assert warm.run_quick(ctx, ws, [_whatif_task(ctx, _edited(ctx, 0.625))])[0] == []
    (process,) = warm._POOL.values()
    numbers = (process.requests, process.replies)
    assert process.stop()
    reused = [os.open(os.devnull, os.O_RDONLY) for _ in range(4)]  # the lowest free numbers: theirs
    try:
        assert set(numbers) <= set(reused)
        assert process.stop() and process.stop(wait=False)
        for fd in reused:
            os.fstat(fd)  # still open: not closed a second time
    finally:
        for fd in reused:
            os.close(fd)


def test_a_busy_process_is_not_waited_for_and_a_client_asks_once_at_a_time(ctx):
    ws = ctx.store.workspace("demo-x3")
    task = _whatif_task(ctx, _edited(ctx, 0.875))
    assert warm.run_quick(ctx, ws, [task])[0] == []
    (process,) = warm._POOL.values()
    other = _whatif_task(ctx, _edited(ctx, 0.9))
    with process.lock:  # another request is using it
        start = time.monotonic()
        assert process.ask([other], 5.0) is None
        assert time.monotonic() - start < 0.5  # no wait: the job takes the task
    warm._ASKING["198.51.100.7"] = 1  # that client has a quick request running in this worker
    try:
        assert warm.run_quick(ctx, ws, [other], "198.51.100.7") == ([other], 0)
    finally:
        del warm._ASKING["198.51.100.7"]
    assert warm.run_quick(ctx, ws, [other], "198.51.100.7")[0] == []
    assert warm._ASKING == {}


def test_the_warm_process_holds_no_socket_and_outlives_the_thread_that_asked(ctx, tmp_path):
    """It closes the server's sockets it inherits (the listening port and the clients'
    connections accepted on it are not its to keep open or read) and is a child of the
    worker's forking thread, so a request thread that ends (the development server's) does
    not take it along (PR_SET_PDEATHSIG). Its parent's other sockets (a Redis connection
    the test process may hold) are not the server's and may stay."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    server_sockets = {os.readlink(f"/proc/self/fd/{sock.fileno()}") for sock in (listener, accepted)}
    ws = ctx.store.workspace("demo-x3")
    result = {}

    def ask():
        result["left"] = warm.run_quick(ctx, ws, [_whatif_task(ctx, _edited(ctx, 1.125))])[0]

    thread = threading.Thread(target=ask)
    thread.start()
    thread.join()
    assert result["left"] == []
    (process,) = warm._POOL.values()
    time.sleep(0.3)  # the asking thread is gone: its child would be killed by now
    assert _alive(process.pid)
    links = [os.readlink(f"/proc/{process.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{process.pid}/fd")]
    assert all(link.startswith("socket:") for link in server_sockets)
    assert not server_sockets & set(links), links
    assert warm.run_quick(ctx, ws, [_whatif_task(ctx, _edited(ctx, 1.25))])[0] == []
    for sock in (client, accepted, listener):
        sock.close()


@pytest.mark.parametrize(
    "reply",
    [{"busy": "all"}, {"busy": [], "bytes": -5}, {"busy": ["not-a-task"], "bytes": 1}, {"busy": [], "bytes": True}],
)
def test_a_reply_out_of_shape_is_refused_and_bytes_are_never_negative(reply):
    task = {"key": "whatif:abc", "model": "m"}
    answer = warm._answer(reply, [task])
    if reply.get("bytes") == -5:
        assert answer is not None and answer.written == 0 and answer.undone == []
    else:
        assert answer is None
    assert warm._answer({"busy": ["whatif:abc"], "bytes": 10**30}, [task]).written == warm.MAX_BYTES


def test_a_job_error_after_the_curves_is_shown_not_taken_for_a_stopped_job(ctx, monkeypatch):
    """The job's id is planned again at its end, as the page plans it then (the default
    observation's tasks join the plan once the curves exist): an error of the job's second
    round (the default row's contributions) reaches the page instead of "ended without its
    results"."""
    import compute
    from dashboard.callbacks.compute import STOPPED, finish_job

    def failing(*args, **kwargs):
        raise compute.ModelError("the contributions ran out of time")

    monkeypatch.setattr(compute, "shapley_contributions", failing)  # the job's fork inherits it
    state = normalize(ctx, {**default_state(), "ws": "demo-x3"})[0]
    first = resolve_state(ctx, state, None)
    done = run_request(ctx, first.request)
    assert "ran out of time" in done["error"]
    shown = finish_job(ctx, state, done)
    assert "ran out of time" in str(shown["status"]) and STOPPED not in str(shown["status"]), shown
