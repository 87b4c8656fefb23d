"""The scale-out as deployed with ``--object-store`` (issue 44): ``gunicorn -w 2`` with one cache
folder, a Celery worker with another (and, when it is killed, a second with a third), a real
``redis-server`` and a real S3-compatible server (``moto_server``), the page in Chromium.

The tests of ``tests/test_celery.py`` run here again with ``WIP_OBJECT_STORE`` set: the demo
and an uploaded skops model with its CSV are computed on the worker and drawn, and a job whose
worker is killed is taken up by another, their results, files and workspace records going
through the object store. Afterwards Redis holds the job queue, locks and job records only:
no value of ours, nothing large.
"""

from __future__ import annotations

import os

import pytest
import test_celery
from test_celery import (  # noqa: F401 - the fixtures, by name
    wip_chromium,
    wip_cluster_dir,
    wip_redis,
    wip_tab,
    wip_web,
    wip_worker,
)
from test_object_store import _raw, s3  # noqa: F401 - s3: a fixture (moto_server, a bucket, AWS_* set)

pytestmark = pytest.mark.browser

# test_celery.py's, in its order (the killed worker last: it ends the first worker)
test_the_demo_computes_on_the_worker = test_celery.test_background_callbacks_run_on_celery
test_an_upload_loads_and_draws = test_celery.test_an_upload_loads_and_draws_through_the_broker_alone
test_a_killed_workers_job_is_taken_up = test_celery.test_a_job_whose_worker_is_killed_is_taken_up_by_another


@pytest.fixture(scope="module")
def wip_env(wip_redis, wip_cluster_dir, s3):  # noqa: F811 - test_celery's, with the object store
    cache, worker_cache = wip_cluster_dir / "web-cache", wip_cluster_dir / "worker-cache"
    cache.mkdir()
    worker_cache.mkdir()
    env = {
        **os.environ,  # the AWS_* credentials the s3 fixture set
        "WIP_CELERY_BROKER": wip_redis,
        "WIP_OBJECT_STORE": s3,
        "WIP_CACHE_DIR": str(cache),
        "WIP_SECRET_KEY": "celery-test",
        "WIP_REQUEUE_AFTER": str(test_celery.REQUEUE_S),
        "PYTHONUNBUFFERED": "1",
    }
    worker_env = {**env, "WIP_CACHE_DIR": str(worker_cache)}
    return {"env": env, "cache": cache, "worker_env": worker_env, "worker_cache": worker_cache}


def test_redis_held_no_value_the_object_store_all_of_them(wip_redis, s3):  # noqa: F811 - runs after the others
    import redis
    from pyarrow import fs as pafs

    client = redis.Redis.from_url(wip_redis)
    ours = client.keys("wip:*")
    kinds = {key.split(b":")[2] for key in ours if key.startswith((b"wip:v:", b"wip:c:"))}
    assert not kinds & {b"r", b"f", b"u", b"w", b"ur"}, kinds  # job records (rec, seen, cancelled) only
    held = sum(client.memory_usage(key) or 0 for key in ours)
    fs, root = _raw(s3)
    objects = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    kept = sum(info.size or 0 for info in objects)
    assert {info.base_name.split("%3A")[0] for info in objects} >= {"r", "f", "u", "w"}
    assert kept > 5_000_000 and held < 200_000, (kept, held)
