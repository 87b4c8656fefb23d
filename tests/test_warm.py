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
def ctx(tmp_path):
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
    resolve_state(ctx, other, None, client="203.0.113.9")
    assert ctx.store.has(_whatif_task(ctx, other)["key"])
    assert list(warm._POOL.values()) == [process] and process.written > 0


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
    monkeypatch.setattr(jobs, "run", bad)  # in the warm process (forked after this)
    ws = ctx.store.workspace("demo-x3")
    task = _whatif_task(ctx, _edited(ctx, 0.125))
    start = time.monotonic()
    left, written = warm.run_quick(ctx, ws, [task])
    assert left == [task] and written == 0  # the job computes it
    assert time.monotonic() - start < 5
    (process,) = warm._POOL.values()
    assert process.failed and not process.alive and not _alive(process.pid)
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
