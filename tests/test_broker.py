"""Machines that share only the broker (issue 44): two cache folders, one real redis-server.

Each "machine" here is a :class:`~dashboard.store.Store` on a folder of its own with the
same :class:`~dashboard.broker.Broker`: what one writes (results, data and model files,
uploads, workspace records, job records and locks) the other finds, checked against its
signature; what was altered in Redis is refused, never unpickled or shown.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import time

import numpy as np
import pandas as pd
import pytest
from helpers.ports import free_port
from helpers.tamper import tamper

import compute
from dashboard import broker as broker_mod
from dashboard import jobs, planning, views
from dashboard.broker import Broker, BrokerError
from dashboard.config import Config
from dashboard.state import default_state, make_context, normalize

SECRET = "test-broker-key"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """Debian's redis-server on a free loopback port, no persistence."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server is missing: run the suite with `python tests/run.py`, which installs it.")
    import redis

    folder = tmp_path_factory.mktemp("redis")
    port = free_port()
    args = [exe, "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"]
    proc = subprocess.Popen([*args, "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    deadline = time.time() + 20
    while True:
        try:
            if client.ping():
                break
        except redis.RedisError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail("redis-server did not answer PING")
        time.sleep(0.1)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def broker(redis_url):
    b = Broker(redis_url, SECRET)
    b.client.flushdb()
    return b


def _machine(root, url: str):
    """One machine's context: its own cache folder, the shared broker."""
    return make_context(Config(cache_dir=str(root), celery_broker=url, secret_key=SECRET, warm=False))


def test_values_travel_in_signed_chunks_and_altered_ones_are_refused(broker, monkeypatch):
    monkeypatch.setattr(broker_mod, "CHUNK", 1000)
    data = np.random.default_rng(0).bytes(4500)  # 5 chunks
    broker.put("r:one", data)
    assert broker.get("r:one") == data
    assert len(broker.client.keys(f"{broker_mod.PREFIX}c:r:one:*")) == 5

    tamper(broker, "r:one")
    assert broker.get("r:one") is None  # one flipped bit

    broker.put("r:two", data)
    broker.client.delete(broker.client.keys(f"{broker_mod.PREFIX}c:r:two:*")[0])
    assert broker.get("r:two") is None  # a chunk gone

    broker.put("r:three", b"the value of three")  # moved under another name: the name is signed
    broker.client.set(f"{broker_mod.PREFIX}v:r:four", broker.client.get(f"{broker_mod.PREFIX}v:r:three"))
    assert broker.get("r:four") is None

    # several at once (two round trips): each value checked against its own signature
    broker.put("r:five", data)
    found = broker.get_many(["r:five", "r:one", "r:two", "r:four", "r:none", "r:three", "r:five"])
    assert found == [data, None, None, None, None, b"the value of three", data]
    assert broker.get_many([]) == []

    other = Broker(broker.url, "another deployment's key")  # a key not this deployment's
    assert other.get("r:three") is None
    assert broker.get("r:three") == b"the value of three"

    small = Broker(broker.url, SECRET, max_bytes=100)
    with pytest.raises(BrokerError, match="over the broker's limit"):
        small.put("r:big", bytes(101))
    assert secret_absent(broker)


def secret_absent(broker: Broker) -> bool:
    """The key is never written to Redis, in any form we derive from it."""
    everything = b"".join(broker.client.get(k) or b"" for k in broker.client.keys("*"))
    return SECRET.encode() not in everything and broker._key not in everything


def test_an_unreachable_broker_fails_with_a_message(tmp_path):
    dead = Broker(f"redis://127.0.0.1:{free_port()}/0", SECRET)
    with pytest.raises(BrokerError, match="could not be reached to store a value"):
        dead.put("r:x", b"1")
    ctx = _machine(tmp_path, dead.url)
    with pytest.raises(BrokerError, match="could not be reached"):
        ctx.store.put("some-key", {"a": 1})  # a job's write: its part fails with this message
    assert ctx.store.get("other-key") is None  # a read: absent (computed again), never a hang


def _hold(url: str, name: str, started) -> None:
    b = Broker(url, SECRET)
    with b.lock(name):
        started.set()
        time.sleep(600)


def test_a_lock_is_exclusive_renewed_and_freed_when_its_holder_is_killed(broker):
    with broker.lock("task:k") as held:
        assert held
        with broker.lock("task:k", wait=False) as again:
            assert not again
        time.sleep(broker_mod.LOCK_TTL_S + 1)  # renewed past its time to live
        assert broker.held("task:k")
    assert not broker.held("task:k")

    ctx = mp.get_context("spawn")
    started = ctx.Event()
    proc = ctx.Process(target=_hold, args=(broker.url, "job:t", started))
    proc.start()
    assert started.wait(60)
    assert broker.held("job:t")
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    killed = time.monotonic()
    assert broker.wait_free("job:t", broker_mod.LOCK_TTL_S + 2)
    assert time.monotonic() - killed <= broker_mod.LOCK_TTL_S + 2


def test_two_machines_share_results_files_and_workspaces(tmp_path, redis_url, broker):
    a, b = _machine(tmp_path / "a", redis_url), _machine(tmp_path / "b", redis_url)
    # results: written on one, read on the other; an altered one refused
    a.store.put("k1", {"x": np.arange(5.0)})
    np.testing.assert_array_equal(b.store.get("k1")["x"], np.arange(5.0))
    assert b.store.intact("k1") and b.store.has("k1")
    a.store.put("k2", [1, 2, 3])
    tamper(broker, "r:k2")
    assert b.store.get("k2") is None and not b.store.intact("k2")
    # data and model files, and the workspace record that names them
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [0, 1, 0]})
    data_rel, _ = a.store.keep_data(frame)
    model_file = tmp_path / "m.skops"
    model_file.write_bytes(b"model bytes")
    model_rel, _ = a.store.keep_model(model_file, ".skops")
    assert not (b.store.root / data_rel).exists()
    assert b.store.path(model_rel).read_bytes() == b"model bytes"
    pd.testing.assert_frame_equal(pd.read_parquet(b.store.path(data_rel)), frame)
    # an upload received by the web machine is read by the machine whose job loads it
    token, path = a.store.new_upload("churn.csv")
    path.write_text("x,y\n1,0\n")
    a.store.publish_upload(token)
    got = b.store.upload_path(token)
    assert got is not None and got.name == "churn.csv" and got.read_text() == "x,y\n1,0\n"
    b.store.discard_upload(token, "churn.csv: column 'x' is empty")  # refused where it was checked
    c = _machine(a.store.root.parent / "c", broker.url)  # a machine that asks next: why, not "expired"
    assert c.store.upload_path(token) is None
    assert "column 'x' is empty" in c.store.upload_gone(token, "churn.csv")


def test_a_demo_trained_on_the_web_machine_is_computed_on_another_and_drawn_from_the_first(tmp_path, redis_url, broker):
    """The whole path: the web machine (A) trains the demo and plans; a compute machine (B),
    which has seen nothing, runs the job from the broker alone; A then finds every result,
    equal to B's; a result altered in Redis is computed again, not shown."""
    web, worker = _machine(tmp_path / "web", redis_url), _machine(tmp_path / "worker", redis_url)
    ws = web.store.workspace("demo-x3")
    state = normalize(web, {**default_state(), "ws": ws.id})[0]
    todo = planning.missing(web.store, views.plan_state(web, ws, state)["tasks"])
    assert todo
    ws_b = worker.store.workspace(ws.id)  # fetched from the broker, never trained here
    assert ws_b == ws and not (worker.store.root / "demos").joinpath("demo-x3.lock").exists()
    jobs.run(worker.store, ws_b, todo, policy=worker.policy)
    assert planning.missing(web.store, todo, verify=True) == []
    keys = sorted({k for t in todo for k in (t["key"], *t.get("also", ()))})
    for key in keys:
        assert web.store.intact(key)
    # altered in Redis and gone from A's folder: refused, so planned again
    key = keys[0]
    tamper(broker, f"r:{key}")
    web.store._drop(key)
    assert web.store.get(key) is None
    assert planning.missing(web.store, todo, verify=True) != []


def _job(url: str, root: str, token: str, outcome: bool, ready) -> None:
    ctx = _machine(root, url)
    with jobs.job_record(ctx.store, token) as finish:
        ready.set()
        time.sleep(1.0)
        if outcome:
            finish({"ok": True})
            return
        time.sleep(600)


def test_a_job_record_answers_on_another_machine_however_the_job_ends(tmp_path, redis_url, broker):
    page = _machine(tmp_path / "web", redis_url)
    spawn = mp.get_context("spawn")
    assert jobs.job_status(page.store, "t-none") == ("unknown", {})
    ready = spawn.Event()
    proc = spawn.Process(target=_job, args=(redis_url, str(tmp_path / "w1"), "t-done", True, ready))
    proc.start()
    assert ready.wait(60)
    assert jobs.job_status(page.store, "t-done")[0] == "running"
    proc.join(60)
    state, record = jobs.job_status(page.store, "t-done")
    assert state == "done" and record["outcome"] == {"ok": True}

    ready = spawn.Event()
    proc = spawn.Process(target=_job, args=(redis_url, str(tmp_path / "w2"), "t-killed", False, ready))
    proc.start()
    assert ready.wait(60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    deadline = time.monotonic() + broker_mod.LOCK_TTL_S + 3
    while jobs.job_status(page.store, "t-killed")[0] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert jobs.job_status(page.store, "t-killed")[0] == "died"

    jobs.job_cancelled(page.store, "t-cancel")
    assert jobs.job_status(page.store, "t-cancel") == ("cancelled", {})
    first = jobs.first_look(page.store, "t-seen", 100.0)
    assert first == 100.0 and jobs.first_look(_machine(tmp_path / "x", redis_url).store, "t-seen", 200.0) == 100.0
    with jobs.job_alive(page.store, "split"):
        assert not jobs.job_ended(_machine(tmp_path / "y", redis_url).store, "split")
    assert jobs.job_ended(page.store, "split")


def test_a_broker_without_the_deployments_key_is_refused_at_start(tmp_path, monkeypatch):
    from dashboard import config as config_mod

    env = {"WIP_CELERY_BROKER": "redis://127.0.0.1:1/0", "WIP_CACHE_DIR": str(tmp_path)}
    with pytest.raises(SystemExit, match="needs --secret-key"):
        config_mod.from_env(env)
    assert config_mod.from_env({**env, "WIP_SECRET_KEY": "k"}).secret_key == "k"


def test_a_worker_reads_only_the_row_groups_of_its_part_from_the_broker(tmp_path, redis_url, broker, monkeypatch):
    """The all-rows prediction pass split by rows: a compute machine that has seen nothing
    fetches only the chunks of its model's columns in the row groups of the parts it runs
    (never the whole data set, nor the target's chunks), the web machine joins them to the
    numbers of one pass, and an altered chunk is refused."""
    from dashboard import row_groups

    monkeypatch.setattr(row_groups, "ROW_GROUP_ROWS", 50)
    web, worker = _machine(tmp_path / "web", redis_url), _machine(tmp_path / "worker", redis_url)
    ws = web.store.workspace("demo-x3")  # 500 rows, trained in a fresh interpreter: kept again in groups of 50
    frame = web.store.data(ws)
    (web.store.root / ws.data_path).unlink()
    broker.delete(row_groups.manifest_name(ws.data_path))  # so it is published again, in groups of 50
    assert web.store.keep_data(frame) == (ws.data_path, ws.data_sha)
    assert row_groups.sizes(web.store.root / ws.data_path) == [50] * 10
    state = normalize(web, {**default_state(), "ws": ws.id})[0]
    todo = [t for t in views.plan_state(web, ws, state)["tasks"] if t["kind"] == "predictions"]
    parts, joins = jobs.split(ws, planning.missing(web.store, todo))
    assert len(parts) == 10
    ws_b = worker.store.workspace(ws.id)
    for part in parts[3:5]:
        jobs.run(worker.store, ws_b, [part], policy=worker.policy)
    names = row_groups.read_manifest(broker.get(row_groups.manifest_name(ws.data_path)))[1]
    features = [names.index(f) for f in ws.model(todo[0]["model"]).features]
    assert len(features) < len(names)  # the target (and any index) are columns too: never fetched
    data_dir = worker.store.root / "data"
    want = {f"g{g}.a{k}" for g in (3, 4) for k in features}
    assert sorted(p.name.split(".", 2)[2] for p in data_dir.iterdir()) == sorted(want)  # no whole file
    tamper(broker, row_groups.chunk_name(ws.data_path, 6, features[0]))
    with pytest.raises(LookupError, match=rf"Row group 6 \(column '{names[features[0]]}'\)"):
        jobs.run(worker.store, ws_b, [parts[6]], policy=worker.policy)
    for part in parts[:3] + parts[5:6] + parts[7:]:  # the rest on the web machine, which has the file
        jobs.run(web.store, ws, [part], policy=web.policy)
    jobs.run(web.store, ws, [parts[6]], policy=web.policy)
    jobs.run(web.store, ws, joins, policy=web.policy)
    joined = web.store.get(todo[0]["key"])
    model = jobs.load(web.store, ws, todo[0]["model"], {}, web.policy)
    reference = compute.predict_rows(model, web.store.data(ws)[list(ws.features)])  # one pass
    assert float(np.max(np.abs(joined.raw - reference.raw))) <= 1e-9 * max(1.0, float(np.ptp(reference.raw)))
    assert joined.rows.equals(reference.rows)


def _gets(store, monkeypatch, trips: list | None = None) -> list[str]:
    """The names a machine asks its broker for, from now on; ``trips``: the calls, each the
    names it asked for at once."""
    asked: list[str] = []
    trips = [] if trips is None else trips
    original, many = store.remote.get, store.remote.get_many
    monkeypatch.setattr(store.remote, "get", lambda name: asked.append(name) or trips.append([name]) or original(name))
    monkeypatch.setattr(
        store.remote, "get_many", lambda names: asked.extend(names) or trips.append(list(names)) or many(names)
    )
    return asked


def test_one_column_over_every_row_fetches_that_columns_chunks_alone_and_the_whole_set_assembles_exactly(
    tmp_path, redis_url, broker, monkeypatch
):
    """A machine without the file reads one column over all rows: it asks the broker for the
    manifest, the schema and that column's chunk of each row group, nothing else (not whole
    groups), and gets that column exactly. Another assembles the whole file from every
    chunk: pandas reads it as it reads the original (index, dtypes, values, column and row
    order), in row groups as the original, and no chunk file is left beside it."""
    from dashboard import row_groups

    monkeypatch.setattr(row_groups, "ROW_GROUP_ROWS", 7)
    rng = np.random.default_rng(3)
    n = 40
    frame = pd.DataFrame(
        {
            "kind": pd.Categorical(rng.choice(["b", "a", "c"], n), categories=["c", "b", "a"], ordered=True),
            "name": pd.array(rng.choice(["p", "q", None], n), dtype="string"),
            "count": rng.integers(-5, 1_000, n),
            "x1": np.where(rng.random(n) < 0.3, np.nan, rng.normal(size=n)),
            "x2": rng.normal(size=n).astype("float32"),
        },
        index=pd.Index(rng.permutation(n) * 3 + 7, name="id"),  # not in row order: groups out of order show
    )
    a, b, c = (_machine(tmp_path / name, redis_url) for name in "abc")
    rel, _ = a.store.keep_data(frame)
    original = pd.read_parquet(a.store.root / rel)
    groups = len(row_groups.sizes(a.store.root / rel))
    assert groups == 6
    names = row_groups.read_manifest(broker.get(row_groups.manifest_name(rel)))[1]
    assert names == [*frame.columns, "id"]  # the index travels as a column of its own
    assert row_groups.read_manifest(b"[7, 7, 7, 7, 7, 5]") is None  # a manifest of whole groups is no manifest

    trips: list = []
    asked = _gets(b.store, monkeypatch, trips)
    got = row_groups.read_rows(b.store, rel, (0, n), ["x1"])
    k = names.index("x1")
    chunks = [row_groups.chunk_name(rel, g, k) for g in range(groups)]
    assert asked == [row_groups.manifest_name(rel), row_groups.schema_name(rel), *chunks]
    assert trips[2:] == [chunks]  # the six chunks in one call: two round trips to Redis
    pd.testing.assert_frame_equal(got, original[["x1"]].reset_index(drop=True), check_exact=True)
    np.testing.assert_array_equal(got["x1"].to_numpy(), frame["x1"].to_numpy())
    assert sorted(p.name for p in (b.store.root / "data").iterdir()) == sorted(
        f"{rel[5:]}.g{g}.a{k}" for g in range(groups)
    )
    part = row_groups.read_rows(b.store, rel, (9, 23), ["kind", "name", "count"])
    pd.testing.assert_frame_equal(
        part, original.iloc[9:23][["kind", "name", "count"]].reset_index(drop=True), check_exact=True
    )

    asked = _gets(c.store, monkeypatch)
    whole = c.store.path(rel)  # assembled from every chunk
    assert len(asked) == 2 + groups * len(names) and len(set(asked)) == len(asked)
    assembled = pd.read_parquet(whole)
    pd.testing.assert_frame_equal(assembled, original, check_exact=True)
    pd.testing.assert_frame_equal(assembled, frame, check_exact=True)
    assert list(assembled.dtypes) == list(frame.dtypes) and assembled.index.equals(frame.index)
    assert row_groups.sizes(whole) == row_groups.sizes(a.store.root / rel)
    assert [p.name for p in (c.store.root / "data").iterdir()] == [whole.name]  # the chunks it used are gone
    assert b.store.path(rel).exists() and [p.name for p in (b.store.root / "data").iterdir()] == [whole.name]
