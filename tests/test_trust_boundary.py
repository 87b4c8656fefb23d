"""The server decides what is computed, and every model or file job has limits.

Issue "Trust nothing a visitor sends", items 2, 3, 4, 8 and 9: forged job requests store
nothing another state reads; loads and jobs stop at their wall-clock and memory limits;
processes forked from threaded workers can use the caches; forged callback values never
reach an exception.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.hostile import endless_onnx

import compute
from compute.datasets import x3_interaction
from dashboard import ids, views
from dashboard.callbacks.compute import resolve_state, run_request
from dashboard.callbacks.drilldown import update_state
from dashboard.callbacks.load import describe_data, describe_models, load_workspace
from dashboard.callbacks.views import hover_text
from dashboard.config import Config
from dashboard.isolation import Limits, isolated
from dashboard.server import create_app
from dashboard.state import clean_state, default_state, normalize
from dashboard.views import plan_state
from dashboard.views.pfi import MAX_REPEATS

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    cache = tmp_path_factory.mktemp("trust-cache")
    return create_app(Config(cache_dir=str(cache), max_curves=80, load_timeout=4.0, job_memory_mb=3072))


@pytest.fixture(scope="module")
def ctx(app):
    return app._wip_context


def _state(ctx, **changes):
    state, error = normalize(ctx, {**default_state(), **changes})
    assert error is None, error
    return state


def _keys(ctx) -> set[str]:
    return set(ctx.store.results.iterkeys())


def _planned(ctx, state) -> set[str]:
    keys = plan_state(ctx, ctx.store.workspace(state["ws"]), state)["keys"]
    found: set[str] = set()
    for value in keys.values():  # the built-in kinds and every view-declared one
        found.update(value.values() if isinstance(value, dict) else [value])
    return found


def _upload(ctx, name: str, content: bytes) -> dict:
    token, path = ctx.store.new_upload(name)
    path.write_bytes(content)
    return {"id": token, "name": name, "size": len(content)}


# --- item 2: the server plans every task ----------------------------------------------------
def test_forged_job_request_cannot_store_another_states_results(ctx):
    """A request carrying its own tasks (a subgroup's PFI under the all-rows key, a PFI
    table under a profile key, 100,000 repeats) stores only what its state plans."""
    state = _state(ctx)
    all_rows = plan_state(ctx, ctx.store.workspace(state["ws"]), state)["keys"]
    pfi_all = next(iter(all_rows["pfi"].values()))
    profile_x1 = all_rows["profiles"]["X1"]
    model = ctx.store.workspace(state["ws"]).models[0].name
    forged = {
        "state": {**state, "repeats": 100_000},
        "request": "whatever",
        "ws": state["ws"],
        "tasks": [
            {
                "kind": "pfi",
                "key": pfi_all,
                "model": model,
                "also": [],
                "params": {"condition": "X3 == 0", "excluded": [], "n_repeats": 3},
            },
            {
                "kind": "pfi",
                "key": profile_x1,
                "model": model,
                "also": [],
                "params": {"condition": "", "excluded": [], "n_repeats": 2},
            },
            {
                "kind": "pfi",
                "key": "pfi:attacker-chosen",
                "model": model,
                "also": [],
                "params": {"condition": "", "excluded": [], "n_repeats": 100_000},
            },
        ],
    }
    before = _keys(ctx)
    done = run_request(ctx, forged)
    assert done.get("ok"), done
    written = _keys(ctx) - before
    clamped = _state(ctx, repeats=MAX_REPEATS)
    assert written <= _planned(ctx, clamped), "a task wrote a key its state does not plan"
    assert "pfi:attacker-chosen" not in _keys(ctx)
    assert not isinstance(ctx.store.get(profile_x1), pd.DataFrame), "a PFI table sits under a profile key"
    # the all-rows PFI (if computed by then) is of all rows, as its key says
    run_request(ctx, {"state": state})
    pfi = ctx.store.get(pfi_all)
    assert pfi.n_rows == len(ctx.store.data(ctx.store.workspace(state["ws"])))
    # and 100,000 repeats were clamped to the UI's maximum
    big = ctx.store.get(next(iter(plan_state(ctx, ctx.store.workspace(state["ws"]), clamped)["keys"]["pfi"].values())))
    assert big.n_repeats == MAX_REPEATS


def test_job_request_is_only_a_state(ctx):
    """What resolve sends the browser: the state, its id and a nonce. No keys, no tasks."""
    state = _state(ctx, subgroup="X1 > 0.3")
    request = resolve_state(ctx, state, None).request
    assert set(request) == {"state", "request", "nonce"}
    assert request["state"] == state


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "x",
        [],
        {"ws": 5},
        {"ws": "demo-x3", "repeats": "abc"},
        {"ws": "demo-x3", "repeats": 10**12},
        {"ws": "demo-x3", "subgroup": ["X1 > 0"]},
        {"ws": "demo-x3", "exclude": "1,2"},
        {"ws": "demo-x3", "exclude": [{"a": 1}, None, 3, "4"]},
        {"ws": "demo-x3", "feature": {"x": 1}},
        {"ws": "demo-x3", "obs": [1]},
        {"ws": "demo-x3", "model": 3.5, "centered": "yes", "sfimp": 1},
        {"ws": "../../etc/passwd"},
        {"ws": "demo-x3", "subgroup": "(" * 5000},
    ],
)
def test_forged_state_values_never_raise(ctx, raw):
    """Every place that takes a state from the browser copes with any JSON value."""
    cleaned = clean_state(raw)
    assert set(cleaned) == set(default_state())
    assert isinstance(cleaned["repeats"], int) and 2 <= cleaned["repeats"] <= MAX_REPEATS
    assert all(isinstance(e, str) for e in cleaned["exclude"])
    resolve_state(ctx, raw, None)
    results = {"state": raw, "keys": {}}
    for view in views.REGISTRY:
        out = views.render(ctx, view, results)
        assert set(out) == set(view.outputs)
    hover_text(ctx, {"row": [1, 2]}, raw)
    new, _ = update_state(ctx, raw, ids.REPEATS_MORE, {"search": "?ws=demo-x3"})
    assert new == clean_state(new)


@pytest.mark.parametrize(
    "trigger, inputs",
    [
        (ids.CLICKED_ROW, {"clicked": "not a dict"}),
        ("ici-table", {"select_ici_table": [1, 2]}),
        (ids.CENTERED, {"field_centered": 5}),
        (ids.EXCLUDE_NEGATIVE, {"negative": 7}),
        ("pfi-graph", {"select_pfi_graph": {"points": "x"}}),
        (ids.COND_ADD, {"cond_column": ["X1"], "cond_op": {}, "cond_value": 3}),
        (ids.SUBGROUP_APPLY, {"subgroup_text": {"a": 1}}),
        (ids.WS_SELECT, {"ws": ["demo-x3"]}),
        (ids.LOADED_WS, {"loaded": {"ws": 1}}),
    ],
)
def test_forged_input_values_are_ignored_not_raised(ctx, trigger, inputs):
    state = _state(ctx)
    new, _ = update_state(ctx, state, trigger, {"previous_subgroup": "", **inputs})
    assert new["ws"] and new == clean_state(new)


def test_damaged_pfi_entry_is_recomputed_without_a_reload(ctx):
    """Every entry the views read is checked when resolving, the PFI tables included."""
    state = _state(ctx, subgroup="X2 > 0.2")
    run_request(ctx, {"state": state})
    resolved = resolve_state(ctx, state, None)
    results, request = resolved.results, resolved.request
    assert "keys" in results
    pfi_key = next(iter(results["keys"]["pfi"].values()))
    ctx.store.results.set(pfi_key, b"WIP1" + b"\0" * 40)  # damaged in place
    request = resolve_state(ctx, state, None).request
    assert isinstance(request, dict), "a damaged PFI entry must trigger a job at once"
    assert run_request(ctx, request).get("ok")
    assert ctx.store.get(pfi_key) is not None


def test_a_forged_record_before_the_results_exist_does_not_blank_later_visitors(ctx):
    """Issue 29: a visitor posts a views' input record without 'pending' for a state whose
    results do not exist yet. The next visitor of that state, once the job has stored its
    results, must see them: nothing memoised from the forged record decides what they see."""
    from dashboard.views import load_inputs

    state = _state(ctx, subgroup="X1 > 0.31", repeats=7)
    forged = {"state": state, "keys": {}}  # no "pending": claims the results are ready
    early = load_inputs(ctx, forged)
    assert early is not None and early.pfi == {}  # this subgroup's PFI: no job has run for it
    assert run_request(ctx, {"state": state}).get("ok")
    later = load_inputs(ctx, forged)
    assert later is not None and later.pfi and later.profile is not None and later.summary is not None
    assert set(later.pfi) == {m.name for m in ctx.store.workspace(state["ws"]).models}
    # and the honest record of the same state (pending while the job ran) reads the same
    assert load_inputs(ctx, {"state": state, "keys": {}, "pending": True}).pfi.keys() == later.pfi.keys()


def test_polling_a_job_that_ends_between_dashs_checks_is_not_an_error(app, monkeypatch):
    """Issue 29: Dash checks that the job's pid exists, then opens the process; a job that
    ended in between raised psutil.NoSuchProcess out of the poll (HTTP 500). Replayed here by
    a pid that 'exists' at the check and is gone when opened."""
    import psutil

    manager = app._background_manager  # the app's own (JobManager)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    monkeypatch.setattr(psutil, "pid_exists", lambda pid: True)
    assert manager.job_running(ended.pid) is False
    manager.terminate_job(ended.pid)  # nothing to kill, nothing raised
    key = "test-poll-race"
    manager.handle.set(key, {"done": 1})
    assert manager.get_result(key, ended.pid) == {"done": 1}


def test_a_refused_upload_keeps_its_reason_for_the_load(ctx):
    """Issue 29: the model and data feedback delete a file they refuse at once; a Load of the
    same upload then said "the upload expired". It now says why the file was refused."""
    pickled = _upload(ctx, "model.pkl", b"\x80\x04K\x01.")
    _, errors, _, _ = describe_models(ctx, [pickled])
    assert "Pickle and joblib files run code" in str(errors)
    assert ctx.store.upload_path(pickled["id"]) is None  # the file itself is gone at once
    garbled = _upload(ctx, "model.skops", b"PK\x03\x04 not a zip archive")
    _, skops_errors, _, _ = describe_models(ctx, [garbled])
    assert skops_errors and "model.skops" in str(skops_errors)
    data = _upload(ctx, "data.csv", b"a,b\n1,2\n3,4\n")
    for upload, reason in ((pickled, "Pickle and joblib files run code"), (garbled, "model.skops")):
        result = load_workspace(ctx, [upload], data, "b", None, None, [], False, None, "training", False, None)
        message = result["errors"]["model"]
        assert reason in message and "refused" in message and "expired" not in message, message
    broken = _upload(ctx, "broken.parquet", b"PAR1 this is not parquet PAR1")
    _, data_error, _, _, _ = describe_data(ctx, broken)
    assert data_error and ctx.store.upload_path(broken["id"]) is None
    model_ok = _upload(ctx, "model.pkl", b"x")  # never read: the data fails first
    result = load_workspace(ctx, [model_ok], broken, "b", None, None, [], False, None, "training", False, None)
    assert "broken.parquet" in result["errors"]["data"] and "expired" not in result["errors"]["data"]
    unknown = {"id": "B" * 22, "name": "gone.csv", "size": 3}
    result = load_workspace(ctx, [model_ok], unknown, "b", None, None, [], False, None, "training", False, None)
    assert "the upload expired" in result["errors"]["data"]


def test_a_damaged_workspace_record_is_a_message_and_a_rebuild_not_an_error(ctx, tmp_path):
    """Issue 29: a truncated workspace record (a full disk, a crash while writing) gave HTTP
    500 on the controller. A demo's record is set aside and the demo built again; an
    uploaded data set's page says its record is damaged and shows a demo."""
    import skops.io as sio
    from sklearn.linear_model import LinearRegression

    record = ctx.store.root / "workspaces" / "demo-x3.json"
    assert ctx.store.workspace("demo-x3") is not None
    good = record.read_text()
    record.write_text(good[: len(good) // 2])  # truncated
    rebuilt = ctx.store.workspace("demo-x3")
    assert rebuilt is not None and rebuilt.id == "demo-x3" and rebuilt.models
    assert (record.parent / "demo-x3.json.damaged").exists() and record.exists()
    state, error = normalize(ctx, {**default_state(), "ws": "demo-x3"})
    assert error is None and state["ws"] == "demo-x3"

    frame = pd.DataFrame({"a": np.arange(20.0), "b": np.arange(20.0) % 3, "y": np.arange(20.0) * 2})
    model = LinearRegression().fit(frame[["a", "b"]], frame.y)
    sio.dump(model, tmp_path / "m.skops")
    result = load_workspace(
        ctx,
        [_upload(ctx, "m.skops", (tmp_path / "m.skops").read_bytes())],
        _upload(ctx, "d.csv", frame.to_csv(index=False).encode()),
        "y",
        None,
        None,
        [],
        False,
        None,
        "training",
        False,
        None,
    )
    ws_id = result["ws"]
    # issue 40: a damaged record is restored from its copy; only with both damaged is it lost
    (ctx.store.root / "workspaces" / f"{ws_id}.json").write_text('{"id": "' + ws_id + '", "tit')
    state, error = normalize(ctx, {**default_state(), "ws": ws_id})
    assert error is None and state["ws"] == ws_id
    for record in (
        ctx.store.root / "workspaces" / f"{ws_id}.json",
        ctx.store.root / "workspaces" / "copies" / f"{ws_id}.json",
    ):
        record.write_text('{"id": "' + ws_id + '", "tit')
    state, error = normalize(ctx, {**default_state(), "ws": ws_id})
    assert state["ws"] == "demo-x3" and error is not None and "damaged" in error and "load its files again" in error
    new, message = update_state(ctx, {**default_state(), "ws": ws_id}, None, {})
    assert new["ws"] == "demo-x3"
    resolved = resolve_state(ctx, {**default_state(), "ws": ws_id}, None)
    assert resolved is not None


def test_every_response_carries_the_security_headers(app):
    """Issue 29: a Content-Security-Policy whose scripts are the app's own files and its inline
    scripts by hash (no 'unsafe-inline', no 'unsafe-eval'), no framing by other sites, and
    nosniff on every response (the page, an asset, a refused upload, a 404). The browser
    tests run the whole page under this policy and fail on any console error, a blocked
    script included."""
    client = app.server.test_client()
    page = client.get("/")
    policy = page.headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    scripts = directives["script-src"].split()
    assert scripts[0] == "'self'" and all(s.startswith("'sha256-") for s in scripts[1:]) and len(scripts) > 1
    assert "unsafe" not in directives["script-src"] and directives["frame-ancestors"] == "'none'"
    assert directives["object-src"] == "'none'" and directives["base-uri"] == "'self'"
    for response in (
        page,
        client.get("/assets/upload.js"),
        client.post("/upload", data=b"x" * 10),
        client.get("/no-such-page/../../etc/passwd"),
    ):
        assert response.headers["X-Content-Type-Options"] == "nosniff", response.status_code
        assert response.headers["X-Frame-Options"] == "DENY"
        assert "Content-Security-Policy" in response.headers


# --- item 3: limits ----------------------------------------------------------------------------
def _sleep_forever():
    while True:
        time.sleep(1)


def _allocate(n_bytes):
    return int(np.ones(n_bytes // 8).sum())


def test_isolated_stops_at_its_wall_clock_limit():
    start = time.monotonic()
    with pytest.raises(compute.ModelError, match=r"took longer than 1 s.*--job-timeout"):
        isolated(_sleep_forever, what="The job", limits=Limits(1.0, None, option="--job-timeout"))
    assert time.monotonic() - start < 5


def test_isolated_stops_at_its_memory_limit():
    with pytest.raises(compute.ModelError, match=r"needed more memory.*1,536 MiB"):
        isolated(_allocate, 8 * 2**30, what="The job", limits=Limits(30.0, 1536 * 2**20))
    assert isolated(_allocate, 8 * 2**20, limits=Limits(30.0, 1536 * 2**20)) == 2**20


def test_endless_onnx_model_is_stopped_at_the_load_limit(ctx):
    """The audit's ONNX Loop of 2^62 iterations: the load stops at --load-timeout (4 s here)
    with a message next to the model; before, it kept a core busy forever."""
    data = x3_interaction(30, random_state=0)[0].assign(Y=1.0)
    model = _upload(ctx, "endless.onnx", endless_onnx())
    csv = _upload(ctx, "data.csv", data.to_csv(index=False).encode())
    start = time.monotonic()
    # it takes one unnamed tensor: the user confirms the column order, then the model runs
    result = load_workspace(ctx, [model], csv, "Y", None, None, [], False, None, order_confirmed=True)
    assert time.monotonic() - start < 20
    message = result["errors"]["model"]
    assert "endless.onnx" in message and "longer than 4 s" in message and "--load-timeout" in message


def _parquet_bomb(path: Path, rows: int, columns: int) -> None:
    """Little on disk, ``rows`` x ``columns`` x 8 bytes in memory (within the row and
    column limits, which alone allow a 16 GB frame)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    column = pa.array(np.zeros(rows, dtype=np.float64))
    table = pa.table({f"c{j}": column for j in range(columns)})
    pq.write_table(table, path, compression="zstd", use_dictionary=True)


def test_data_files_are_parsed_outside_the_web_worker_under_the_memory_limit(tmp_path):
    """A small Parquet file that expands to gigabytes: the feedback says it needs more
    memory than allowed, and the process serving the page does not grow."""
    # an upload limit large enough for the metadata check to let it through: the memory
    # limit of the isolated process is what stops it here
    app = create_app(Config(cache_dir=str(tmp_path / "cache"), job_memory_mb=1024, upload_limit_mb=1000))
    ctx = app._wip_context
    bomb = tmp_path / "bomb.parquet"
    _parquet_bomb(bomb, 1_000_000, 300)  # 2.4 GB of float64 in memory
    assert bomb.stat().st_size < 2 * 2**20  # a ratio over 1,000
    upload = _upload(ctx, "bomb.parquet", bomb.read_bytes())
    rss_before = _rss()
    info, error, columns, target, classes = describe_data(ctx, upload)
    assert "bomb.parquet" in error and "memory" in error and not columns
    assert _rss() - rss_before < 200 * 2**20


def test_parquet_expansion_is_refused_from_its_metadata(tmp_path):
    """The same kind of file, refused before reading: its metadata says it would take more
    than 4 x the upload limit once decompressed (1 MiB limit here)."""
    app = create_app(Config(cache_dir=str(tmp_path / "cache"), upload_limit_mb=1))
    ctx = app._wip_context
    bomb = tmp_path / "bomb.parquet"
    _parquet_bomb(bomb, 200_000, 10)  # 16 MB in memory, a few KiB on disk
    upload = _upload(ctx, "bomb.parquet", bomb.read_bytes())
    _, error, columns, _, _ = describe_data(ctx, upload)
    assert "bomb.parquet would take about 15 MiB once decompressed" in error and "4 MiB" in error
    small = tmp_path / "small.parquet"
    _parquet_bomb(small, 10_000, 10)
    _, error, columns, _, _ = describe_data(ctx, _upload(ctx, "small.parquet", small.read_bytes()))
    assert error is None and len(columns) == 10


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize(
    "files",
    [
        "junk",
        [1, 2],
        [{"id": 5, "name": ["x"]}],
        [{"id": "A" * 22, "name": "m.skops", "size": "big"}],
    ],
)
def test_forged_upload_records_get_messages_not_errors(ctx, files):
    describe_models(ctx, files)
    describe_data(ctx, files[0] if isinstance(files, list) else files)
    result = load_workspace(ctx, files, files, ["Y"], {"loss": 1}, [2], "types", False, "state")
    assert result.get("errors")


# --- item 8: fork from threaded workers -----------------------------------------------------
def test_processes_forked_while_threads_use_the_cache_can_write_to_it(ctx):
    """The diskcache Timeout under concurrent Loads: a child forked while another thread is
    inside an SQLite transaction inherited its lock records and waited on a lock nobody
    held (measured with plain diskcache: 7 of 30 children timed out, 3 hung)."""
    script = HERE / "helpers" / "fork_stress.py"
    out = subprocess.run(
        [sys.executable, str(script), "ForkSafeCache", "40"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=HERE.parent,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},  # this checkout, whatever is installed
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("{0: 40}"), out.stdout


def test_concurrent_loads_do_not_hang(ctx):
    """Three sessions loading at once, 20 rounds: every load finishes with a workspace."""
    data = x3_interaction(40, random_state=1)[0].assign(Y=1.0)
    import skops.io as sio
    from sklearn.linear_model import LinearRegression

    model = LinearRegression().fit(data[["X1", "X2", "X3"]], data["Y"])
    blob = sio.dumps(model)
    results: list = []

    def one_session(k):
        for _r in range(20):
            m = _upload(ctx, f"m{k}.skops", blob)
            d = _upload(ctx, f"d{k}.csv", data.to_csv(index=False).encode())
            results.append(load_workspace(ctx, [m], d, "Y", None, None, [], False, None))

    threads = [threading.Thread(target=one_session, args=(k,)) for k in range(3)]
    stop = threading.Event()

    def reader():  # the web threads keep using the result cache meanwhile
        while not stop.is_set():
            ctx.store.put("stress", np.arange(100))
            ctx.store.get("stress")

    noise = threading.Thread(target=reader)
    noise.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    stop.set()
    noise.join()
    assert len(results) == 60 and all("ws" in r for r in results), [r for r in results if "ws" not in r][:2]
    gc.collect()


def test_watchdog_reports_a_job_that_ended_without_results(ctx):
    """When the job stops running and the state's results are still missing (its process
    was killed), the page gets a message and a Retry button instead of "Computing…" forever;
    Retry resolves the state again into a new job request (a new nonce, a new result slot)."""
    from dashboard.callbacks.compute import HIDDEN, SHOWN, STOPPED, UNCHANGED, finish_job, watch_job

    pending = _state(ctx, subgroup="X1 < -0.77")
    stopped = watch_job(ctx, False, pending, None)
    assert stopped["status"] == STOPPED and stopped["results"]["error"] == STOPPED and stopped["retry"] == SHOWN
    assert watch_job(ctx, True, pending, None) == UNCHANGED  # still running
    first, second = resolve_state(ctx, pending, None).request, resolve_state(ctx, pending, None).request
    assert first["request"] == second["request"] and first["nonce"] != second["nonce"]
    run_request(ctx, second)
    assert watch_job(ctx, False, pending, None) == UNCHANGED  # finished normally
    finished = finish_job(ctx, pending, {"request": second["request"], "ok": True})
    done, status, retry = finished["results"], finished["status"], finished["retry"]
    assert "sigs" in done and status is None and retry == HIDDEN


def test_callback_route_limits_body_size_and_nesting(app):
    """The audit's 100 MiB body to /_dash-update-component, and JSON nested 100,000 deep."""
    client = app.server.test_client()
    big = client.post("/_dash-update-component", data=b"{" + b" " * (3 * 2**20) + b"}", content_type="application/json")
    assert big.status_code == 413
    deep = client.post("/_dash-update-component", data=b"[" * 100_000 + b"]" * 100_000, content_type="application/json")
    assert deep.status_code == 400
    assert client.get("/").status_code == 200


def test_a_job_forked_after_a_demo_was_built_does_not_hang():
    """The cancer demo's gradient boosting trained in the web worker started scikit-learn's
    OpenMP pool there; every isolated job forked from that worker then hung in libgomp at
    its first prediction (the page stayed on "ICE/ICI pass" for ever). Demos now train in
    a child process; the helper builds one, then predicts in an isolated child."""
    script = HERE / "helpers" / "demo_then_fork.py"
    out = subprocess.run(
        [sys.executable, str(script), "60"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=HERE.parent,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "(171, 2)"


def test_a_demo_built_by_a_process_that_ran_a_model_does_not_hang():
    """The other direction: a process whose OpenMP pool runs (it trained or predicted with
    gradient boosting: this test process, or any job) forked a child to train the demo,
    and the child hung. Demos train in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, str(HERE / "helpers" / "fork_then_demo.py")],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=HERE.parent,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "demo-cancer 2"
