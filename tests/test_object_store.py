"""Large values in an S3-compatible object store (``--object-store``, issue 44), as deployed:
a real ``moto_server`` (S3 over HTTP on a free loopback port) and a real ``redis-server``.

Two cache folders share them: what one machine writes (results, data and model files,
uploads, workspace records) the other fetches once from the object store and keeps; an
object altered, truncated or copied under another name is refused; Redis keeps only locks
and job records (nothing large); a store that cannot be reached fails a write with its name
within seconds and a read finds nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request

import numpy as np
import pandas as pd
import pytest
from helpers.ports import free_port
from test_broker import SECRET, _machine, redis_url  # noqa: F401 - redis_url: a fixture

from dashboard import jobs
from dashboard.broker import SIGNED, Broker, BrokerError
from dashboard.config import Config
from dashboard.object_store import ObjectStore, parse_url
from dashboard.state import make_context

BUCKET = "wip-test"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's S3 server (``moto[server]``, the test extra) on a free port, with a bucket;
    the URL the deployment is given."""
    exe = shutil.which("moto_server")
    if exe is None:
        pytest.fail("moto_server is missing: pip install '.[test]' (moto[server])")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail("moto_server did not answer")
            time.sleep(0.1)
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
    from pyarrow import fs as pafs

    pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{port}", scheme="http", allow_bucket_creation=True).create_dir(
        BUCKET
    )
    yield f"s3://{BUCKET}/deploy?endpoint=http://127.0.0.1:{port}"
    for key, value in saved.items():
        os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    proc.terminate()
    proc.wait(timeout=10)


def _machine_s3(root, redis: str, store: str):
    """One machine: its own cache folder, the shared broker and object store."""
    config = Config(cache_dir=str(root), celery_broker=redis, object_store=store, secret_key=SECRET, warm=False)
    return make_context(config)


def _raw(url: str):
    """The object store's own client, beside the app's (to alter objects as an attacker would)."""
    bucket_prefix, options = parse_url(url)
    from pyarrow import fs as pafs

    return pafs.S3FileSystem(**options), bucket_prefix


def test_the_url_form():
    assert parse_url("s3://b/p/q?endpoint=http://h:9000") == (
        "b/p/q",
        {"scheme": "http", "endpoint_override": "h:9000"},
    )
    assert parse_url("s3://b?region=eu-west-1") == ("b", {"region": "eu-west-1"})
    for bad in ("http://b/p", "s3://key:secret@b/p", "s3://b/p?endpoint=h:9000", "s3://b/p?acl=public"):
        with pytest.raises(ValueError):
            parse_url(bad)
    with pytest.raises(ValueError, match="needs --celery-broker"):
        Config(object_store="s3://b/p", secret_key="k")


def test_values_cross_two_cache_folders_through_the_object_store(tmp_path, redis_url, s3):  # noqa: F811
    a, b = _machine_s3(tmp_path / "a", redis_url, s3), _machine_s3(tmp_path / "b", redis_url, s3)
    redis = a.store.remote.client
    redis.flushdb()
    before = redis.info("memory")["used_memory_dataset"]
    big = np.random.default_rng(0).normal(size=300_000)  # 2.4 MB: more than a Redis chunk would hold small
    a.store.put("k-big", {"x": big})
    np.testing.assert_array_equal(b.store.get("k-big")["x"], big)
    assert b.store.intact("k-big") and b.store.has("k-big")
    # data and model files, the workspace record naming them, an upload
    frame = pd.DataFrame({"x": np.arange(50_000.0), "y": np.arange(50_000) % 2})
    data_rel, _ = a.store.keep_data(frame)
    model_file = tmp_path / "m.skops"
    model_file.write_bytes(os.urandom(1_000_000))
    model_rel, _ = a.store.keep_model(model_file, ".skops")
    assert b.store.path(model_rel).read_bytes() == model_file.read_bytes()
    pd.testing.assert_frame_equal(pd.read_parquet(b.store.path(data_rel)), frame)
    token, path = a.store.new_upload("churn.csv")
    path.write_bytes(b"x,y\n" + b"1,0\n" * 200_000)
    a.store.publish_upload(token)
    got = b.store.upload_path(token)
    assert got is not None and got.read_bytes() == path.read_bytes()
    # fetched once: kept in b's folder, read there even when the store has lost it
    fs, root = _raw(s3)
    fs.delete_dir_contents(root)
    assert b.store.path(model_rel).read_bytes() == model_file.read_bytes()
    assert b.store.get("k-big") is not None
    # Redis held locks and records only: no value went there
    with jobs.job_alive(a.store, "t-1"):
        keys = redis.keys("*")
    assert not [k for k in keys if k.startswith((b"wip:v:", b"wip:c:"))], keys
    held = sum(redis.memory_usage(k) or 0 for k in redis.keys("*"))
    assert held < 20_000, held  # ~7 MB went to the object store
    assert redis.info("memory")["used_memory_dataset"] - before < 1_000_000


def test_an_altered_truncated_or_moved_object_is_refused(tmp_path, redis_url, s3):  # noqa: F811
    a, b = _machine_s3(tmp_path / "a", redis_url, s3), _machine_s3(tmp_path / "b", redis_url, s3)
    fs, root = _raw(s3)
    broker = a.store.remote
    assert isinstance(broker, Broker)
    a.store.put("k-one", [1, 2, 3])
    path = f"{root}/r%3Ak-one"
    with fs.open_input_stream(path) as src:
        blob = src.read()
    assert blob.startswith(SIGNED) and SECRET.encode() not in blob and broker._key not in blob
    altered = bytearray(blob)
    altered[-3] ^= 0x01
    for bad in (bytes(altered), blob[:-1], blob[: len(SIGNED) + 10]):
        with fs.open_output_stream(path) as out:
            out.write(bad)
        assert broker.get("r:k-one") is None
        assert b.store.get("k-one") is None and not b.store.intact("k-one")  # refused: computed again
    a.store.put("k-two", "two")  # moved: the name is signed
    with fs.open_input_stream(f"{root}/r%3Ak-two") as src, fs.open_output_stream(f"{root}/r%3Ak-three") as out:
        out.write(src.read())
    assert broker.get("r:k-three") is None and broker.get("r:k-two") is not None


def test_an_unreachable_object_store_fails_writes_with_its_name_and_reads_find_nothing(tmp_path, redis_url):  # noqa: F811
    dead = f"s3://{BUCKET}/p?endpoint=http://127.0.0.1:{free_port()}"
    ctx = _machine_s3(tmp_path, redis_url, dead)
    started = time.monotonic()
    with pytest.raises(BrokerError, match=r"the object store \(s3://wip-test/p\) could not be reached to store"):
        ctx.store.put("some-key", {"a": 1})
    assert ctx.store.get("other-key") is None
    assert not ctx.store.has("other-key")
    assert time.monotonic() - started < 30
    with pytest.raises(BrokerError, match="object store"):
        ctx.store.remote.ping()
    store = ObjectStore(dead, connect_timeout=1)
    with pytest.raises(Exception, match="could not be reached to read"):
        store.read("x")


def _in_child(store, out) -> None:
    """In a forked child (a Dash job process, a Celery prefork child): the parent's store."""
    try:
        value = store.get("k-parent")
        store.put("k-child", {"seen": value})
        out.put("ok")
    except Exception as exc:  # reported to the parent, which fails the test
        out.put(repr(exc))


def test_a_forked_child_reads_and_writes_through_its_parents_store(tmp_path, redis_url, s3):  # noqa: F811
    """The web worker and the Celery worker fork their job processes after using the store:
    the child makes its own client (one per process) and neither hangs nor fails."""
    import multiprocessing as mp

    parent = _machine_s3(tmp_path / "p", redis_url, s3)
    parent.store.put("k-parent", [1.5, 2.5])
    other = _machine_s3(tmp_path / "o", redis_url, s3)
    fork = mp.get_context("fork")
    out = fork.Queue()
    child = fork.Process(target=_in_child, args=(other.store, out))
    child.start()
    assert out.get(timeout=60) == "ok"
    child.join(60)
    assert child.exitcode == 0
    assert parent.store.get("k-child") == {"seen": [1.5, 2.5]}


def test_a_demo_trained_on_one_machine_is_computed_on_another_through_the_object_store(tmp_path, redis_url, s3):  # noqa: F811
    """The web machine trains the demo and plans; a compute machine that has seen nothing runs
    the job from Redis (locks) and the object store (files, records) alone; the web machine
    then finds every result."""
    from dashboard import planning, views
    from dashboard.state import default_state, normalize

    web, worker = _machine_s3(tmp_path / "web", redis_url, s3), _machine_s3(tmp_path / "worker", redis_url, s3)
    ws = web.store.workspace("demo-x3")
    state = normalize(web, {**default_state(), "ws": ws.id})[0]
    todo = planning.missing(web.store, views.plan_state(web, ws, state)["tasks"])
    ws_b = worker.store.workspace(ws.id)
    assert ws_b == ws and not (worker.store.root / "demos" / "demo-x3.lock").exists()  # fetched, not trained
    jobs.run(worker.store, ws_b, todo, policy=worker.policy)
    assert planning.missing(web.store, todo, verify=True) == []
    redis = web.store.remote.client
    assert not [k for k in redis.keys("*") if k.startswith((b"wip:v:r:", b"wip:v:f:", b"wip:v:w:", b"wip:c:"))]
