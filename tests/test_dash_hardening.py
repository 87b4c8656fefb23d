"""Hardening: crashing models, damaged cache entries, killed jobs, forged client input,
random upload bytes. The test process plays the server worker: it must survive all of it."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.hostile import SuicidalRegressor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compute.datasets import x3_interaction
from dashboard import views
from dashboard.callbacks.compute import resolve_state, run_request
from dashboard.callbacks.drilldown import update_state
from dashboard.callbacks.load import describe_data, load_workspace
from dashboard.config import Config
from dashboard.loading import LoadError, Policy, read_data
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.store import ModelEntry, Workspace, new_workspace_id
from dashboard.views import plan_state


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    cache = tmp_path_factory.mktemp("hardening-cache")
    # the fuzzing tests upload hundreds of files from one address: quotas are tested elsewhere
    return create_app(
        Config(
            cache_dir=str(cache),
            max_curves=120,
            allow_pickle=True,
            upload_limit_mb=1,
            upload_per_minute=100_000,
            upload_mb_per_hour=100_000,
        )
    )


@pytest.fixture(scope="module")
def ctx(app):
    return app._wip_context


def _demo_state(ctx, **changes):
    state, _ = normalize(ctx, {**default_state(), **changes})
    return state


def _upload(ctx, name: str, content: bytes) -> dict:
    token, path = ctx.store.new_upload(name)
    path.write_bytes(content)
    return {"id": token, "name": name, "size": len(content)}


def test_model_killing_its_process_fails_the_load_not_the_server(ctx):
    """A pickled model whose predict kills its process: the load reports it, we live on."""
    data = x3_interaction(50, random_state=0)[0].assign(Y=1.0)
    model = _upload(ctx, "killer.pkl", pickle.dumps(SuicidalRegressor()))
    csv = _upload(ctx, "data.csv", data.to_csv(index=False).encode())
    result = load_workspace(ctx, [model], csv, "Y", None, None, [], False, None)
    message = result["errors"]["model"]
    assert "killer.pkl" in message and "signal 9" in message


def test_model_killing_its_process_fails_the_job_with_a_message(ctx):
    """A workspace whose model dies in predict: the background job returns an error."""
    demo = ctx.store.workspace("demo-x3")
    path = Path(ctx.store.root / "killer.pkl")
    path.write_bytes(pickle.dumps(SuicidalRegressor()))
    rel, sha = ctx.store.keep_model(path, ".pkl")
    ws = Workspace(
        id=new_workspace_id(),
        title="killer",
        data_path=demo.data_path,
        data_sha=demo.data_sha,
        target=demo.target,
        task="regression",
        loss="squared_error",
        models=(ModelEntry(name="killer", path=rel, sha=sha, features=demo.features),),
        features=demo.features,
    )
    ctx.store.save_workspace(ws)
    state = _demo_state(ctx, ws=ws.id)
    request = resolve_state(ctx, state, None).request
    done = run_request(ctx, request)
    assert "killed by signal 9" in done["error"]
    resolved = resolve_state(ctx, state, done)
    results, status = resolved.results, resolved.status
    assert "killed" in results["error"] and "killed" in status


def _compute(ctx, state):
    request = resolve_state(ctx, state, None).request
    if isinstance(request, dict):
        assert run_request(ctx, request).get("ok"), "job failed"
    resolved = resolve_state(ctx, state, None)
    results, request = resolved.results, resolved.request
    assert "keys" in results
    return results


def test_corrupt_cache_entry_is_recomputed_not_served(ctx):
    """Truncated result files are detected by their checksum, dropped and recomputed."""
    state = _demo_state(ctx)
    results = _compute(ctx, state)
    key = results["keys"]["profiles"]["X1"]
    before = ctx.store.get(key).local_importance.copy()
    for file in (ctx.store.root / "results").rglob("*.val"):  # as if writes had been cut short
        file.write_bytes(file.read_bytes()[: file.stat().st_size // 3])
    request = resolve_state(ctx, state, None).request
    assert isinstance(request, dict), "resolve must notice the damaged entry and ask for a job"
    results = _compute(ctx, state)
    np.testing.assert_allclose(ctx.store.get(results["keys"]["profiles"]["X1"]).local_importance, before)


def _run_and_die(cache_dir, request):
    app = create_app(Config(cache_dir=cache_dir, max_curves=500))
    run_request(app._wip_context, request)


def test_worker_killed_mid_computation_then_next_request_recomputes(tmp_path):
    """Kill the process computing a job half way: nothing half-written is served and the
    next request computes the same answer as an undisturbed run."""
    app = create_app(Config(cache_dir=str(tmp_path / "killed"), max_curves=500))
    ctx = app._wip_context
    state = _demo_state(ctx, subgroup="X1 > 0")
    request = resolve_state(ctx, state, None).request
    assert isinstance(request, dict)
    proc = multiprocessing.get_context("fork").Process(target=_run_and_die, args=(str(ctx.store.root), request))
    proc.start()
    deadline = time.time() + 30  # until the first feature's pass is cached, then kill
    key = plan_state(ctx, ctx.store.workspace(state["ws"]), state)["keys"]["profiles"]["X1"]
    while not ctx.store.has(key) and time.time() < deadline:
        time.sleep(0.02)
    proc.kill()
    proc.join()
    assert proc.exitcode == -9
    summary_key = plan_state(ctx, ctx.store.workspace(state["ws"]), state)["keys"]["summary"]
    assert not ctx.store.has(summary_key), "the job was killed before it finished"
    results = _compute(ctx, state)
    fresh_app = create_app(Config(cache_dir=str(tmp_path / "fresh"), max_curves=500))
    fresh = _compute(fresh_app._wip_context, state)
    for kind in ("summary",):
        got, want = ctx.store.get(results["keys"][kind]), fresh_app._wip_context.store.get(fresh["keys"][kind])
        pd.testing.assert_frame_equal(got.local, want.local)
    for name, key in fresh["keys"]["pfi"].items():
        pd.testing.assert_frame_equal(
            ctx.store.get(results["keys"]["pfi"][name]).to_frame(), fresh_app._wip_context.store.get(key).to_frame()
        )


def test_views_ignore_cache_keys_sent_by_the_browser(ctx):
    """Forged results keys cannot read another entry: views plan keys from the state."""
    state = _demo_state(ctx)
    honest = _compute(ctx, state)
    diabetes = _compute(ctx, _demo_state(ctx, ws="demo-diabetes"))
    forged = {"state": honest["state"], "keys": diabetes["keys"]}
    table = views.render(ctx, "conditional_pfi", forged)["data"]
    assert {row["feature"] for row in table} == {"X1", "X2", "X3"}


def test_unknown_or_malformed_workspace_ids_reveal_nothing(ctx):
    """A guessed or path-like workspace id falls back to the demo with a message."""
    for forged in ("A" * 22, "../../etc/passwd", "demo-nothere", "", None):
        state, error = update_state(ctx, None, "url", {"search": f"?ws={forged}"})
        assert state["ws"] == "demo-x3"
        if forged:
            assert error and "not available" in error
    assert ctx.store.upload_path("../" + "a" * 20) is None


def test_two_sessions_only_reach_each_others_uploads_by_their_random_ids(app):
    """Session B gets nothing from guessing: upload ids are random 128-bit tokens, the
    callback endpoint answers an unknown id with a message and no data."""
    a, b = app.server.test_client(), app.server.test_client()
    csv = b"x,y\n1,2\n3,4\n"
    first = a.post("/upload", data={"kind": "data", "file": (__import__("io").BytesIO(csv), "secret.csv")}).get_json()
    second = a.post("/upload", data={"kind": "data", "file": (__import__("io").BytesIO(csv), "secret.csv")}).get_json()
    assert first["id"] != second["id"] and len(first["id"]) >= 22
    guessed = {"id": first["id"][:-1] + ("A" if first["id"][-1] != "A" else "B"), "name": "secret.csv"}
    payload = {
        "output": "..data-file-info.children...data-error.children...target-select.options..."
        "target-select.value...data-columns.data..",
        "outputs": [
            {"id": i, "property": p}
            for i, p in (
                ("data-file-info", "children"),
                ("data-error", "children"),
                ("target-select", "options"),
                ("target-select", "value"),
                ("data-columns", "data"),
            )
        ],
        "inputs": [{"id": "data-file", "property": "data", "value": guessed}],
        "changedPropIds": ["data-file.data"],
        "state": [],
    }
    answer = b.post("/_dash-update-component", json=payload)
    assert answer.status_code == 200
    body = answer.get_json()["response"]
    assert "expired" in body["data-error"]["children"]
    assert "x" not in str(body.get("target-select", {}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.binary(max_size=3000),
    suffix=st.sampled_from([".csv", ".parquet", ".skops", ".onnx", ".pkl", ".txt", ""]),
)
def test_random_bytes_at_the_upload_route_never_break_the_server(app, content, suffix):
    """Random bytes under any name: the route and the data check answer with an id or a message."""
    client = app.server.test_client()
    kind = "model" if suffix in (".skops", ".onnx", ".pkl") else "data"
    answer = client.post("/upload", data={"kind": kind, "file": (__import__("io").BytesIO(content), f"f{suffix}")})
    assert answer.status_code in (200, 400, 413)
    body = answer.get_json()
    assert ("id" in body) != ("error" in body)
    if kind == "data" and "id" in body:
        info, error, columns, target, _ = describe_data(app._wip_context, {**body, "name": f"f{suffix}"})
        assert (error is None) == bool(columns)
        assert error is None or len(error) < 600


cell = st.one_of(
    st.none(), st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6), st.booleans()
)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.lists(cell, min_size=1, max_size=4), min_size=0, max_size=6),
    names=st.lists(st.text(max_size=5), min_size=1, max_size=4),
)
def test_random_small_tables_load_or_get_a_message(tmp_path_factory, rows, names):
    """Random small tables written as CSV: read_data returns a frame or raises LoadError."""
    folder = tmp_path_factory.mktemp("tables")
    width = len(names)
    lines = [",".join(f'"{n}"' for n in names)] + [
        ",".join("" if v is None else str(v) for v in r[:width]) for r in rows
    ]
    path = folder / "t.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        frame = read_data(path, name="t.csv", policy=Policy())
    except LoadError as exc:
        assert exc.field == "data" and "t.csv" in str(exc)
    else:
        assert isinstance(frame, pd.DataFrame) and len(frame) >= 1


def test_expired_uploads_workspaces_and_their_files_are_deleted(tmp_path):
    """Past the lifetime: upload folders, upload workspaces and their unused files go; demos stay."""
    app = create_app(Config(cache_dir=str(tmp_path / "ttl"), upload_ttl_hours=1))
    store = app._wip_context.store
    demo = store.workspace("demo-x3")
    token, path = store.new_upload("old.csv")
    path.write_text("a,b\n1,2\n")
    rel, sha = store.keep_data(pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}))
    ws = Workspace(
        id=new_workspace_id(),
        title="old",
        data_path=rel,
        data_sha=sha,
        target="b",
        task="regression",
        loss="squared_error",
        models=demo.models,
        features=("a",),
    )
    store.save_workspace(ws)
    old = time.time() - 2 * 3600
    for file in (path.parent, store.root / "workspaces" / f"{ws.id}.json", store.path(rel)):
        os.utime(file, (old, old))
    for file in store.path("models").iterdir():  # the demo's models are old too, but in use
        os.utime(file, (old, old))
    assert store.purge_uploads(1) == 2
    assert store.upload_path(token) is None and store.workspace(ws.id) is None
    assert not store.path(rel).exists()
    assert store.workspace("demo-x3") is not None and all(store.path(m.path).exists() for m in demo.models)
