"""Scale-out path: background callbacks on Celery workers through Redis instead of diskcache.

``WIP_CELERY_BROKER=redis://...`` makes the web workers enqueue background callbacks to the
broker; ``celery -A app:celery_app worker`` runs them (on this machine here, on other
machines in production). As deployed across machines, the web server and the worker share
only the broker: each has a cache folder of its own (``web-cache`` and ``worker-cache``),
and results, uploads, data and model files and job records travel through Redis
(:mod:`dashboard.broker`). The test starts Debian's ``redis-server`` on a free loopback
port, one Celery worker, ``gunicorn app:server -w 2``, and drives the demo and an upload in
headless Chromium: the views must render from jobs that ran on the Celery worker, and the
web workers must not have created the diskcache job store (``<cache>/jobs``) that local
forked jobs would use.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.ports import free_port

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path(os.environ.get("WIP_TEST_OUTPUT", ROOT / "test-output")) / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FIRST_VISIT_MS = 120_000  # trains the demo (web worker) and runs its ICE/ICI passes (Celery worker)
STEP_MS = 60_000  # a subgroup: one permutation-PFI job on the Celery worker
REQUEUE_S = 8  # a job whose worker vanished goes to another after this long
START_S = 60  # each process up (imports of dash, sklearn, celery on a loaded machine)


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return f"({path} unreadable)"


def _stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """Terminate a process we started, by its PID, then kill it and whatever of its
    descendants (prefork children, gunicorn workers) outlived it."""
    import psutil

    if proc.poll() is not None:
        return
    try:
        descendants = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    _, alive = psutil.wait_procs(descendants, timeout=5)
    for child in alive:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


def _start(cmd, *, env, log_path: Path, request) -> subprocess.Popen:
    with open(log_path, "w") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    request.addfinalizer(lambda: _stop(proc))
    return proc


@pytest.fixture(scope="module")
def wip_cluster_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("wip-celery")


@pytest.fixture(scope="module")
def wip_redis(wip_cluster_dir, request):
    """Debian's redis-server on a free loopback port, no persistence; its broker URL."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server is missing: run the suite with `python tests/run.py`, which installs it.")
    import redis

    port = free_port()
    log_path = wip_cluster_dir / "redis.log"
    proc = _start(
        [
            exe,
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--bind",
            "127.0.0.1",
            "--dir",
            str(wip_cluster_dir),
        ],
        env=dict(os.environ),
        log_path=log_path,
        request=request,
    )
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1, socket_timeout=2)
    deadline = time.time() + 20
    while True:
        try:
            if client.ping():
                break
        except redis.RedisError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            pytest.fail("redis-server did not answer PING:\n" + _tail(log_path))
        time.sleep(0.2)
    client.close()
    return f"redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="module")
def wip_env(wip_redis, wip_cluster_dir):
    """The web and the compute processes' configurations: the same broker and secret, a cache
    folder each (``env``/``cache``: the web server's; ``worker_env``/``worker_cache``)."""
    cache, worker_cache = wip_cluster_dir / "web-cache", wip_cluster_dir / "worker-cache"
    cache.mkdir()
    worker_cache.mkdir()
    env = {
        **os.environ,
        "WIP_CELERY_BROKER": wip_redis,
        "WIP_CACHE_DIR": str(cache),
        "WIP_SECRET_KEY": "celery-test",
        "WIP_REQUEUE_AFTER": str(REQUEUE_S),
        "PYTHONUNBUFFERED": "1",
    }
    worker_env = {**env, "WIP_CACHE_DIR": str(worker_cache)}
    return {"env": env, "cache": cache, "worker_env": worker_env, "worker_cache": worker_cache}


class _Worker:
    def __init__(self, proc: subprocess.Popen, log: Path):
        self.proc, self.log = proc, log

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_ready(self, timeout: float = START_S) -> None:
        deadline = time.time() + timeout
        while not re.search(r"celery@\S+ ready", self.text()):
            if self.proc.poll() is not None or time.time() > deadline:
                pytest.fail("the Celery worker did not become ready:\n" + _tail(self.log))
            time.sleep(0.3)


@pytest.fixture(scope="module")
def wip_worker(wip_env, wip_cluster_dir, request):
    """One Celery worker (two prefork children: a job and its parts share them) importing the
    app from the repository root.
    Started here, awaited by ``wip_web`` once gunicorn is up (both import in parallel)."""
    log_path = wip_cluster_dir / "celery.log"
    proc = _start(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "app:celery_app",
            "worker",
            "--concurrency",
            "2",
            "--pool",
            "prefork",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        env=wip_env["worker_env"],
        log_path=log_path,
        request=request,
    )
    return _Worker(proc, log_path)


@pytest.fixture(scope="module")
def wip_web(wip_env, wip_worker, wip_cluster_dir, request):
    """gunicorn -w 2 with the Celery configuration, on a free loopback port."""
    import requests

    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: run the suite with `python tests/run.py` (installs it).")
    port = free_port()
    log_path = wip_cluster_dir / "gunicorn.log"
    proc = _start(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            str(ROOT / "gunicorn.conf.py"),
            "app:server",
            "-w",
            "2",
            "-b",
            f"127.0.0.1:{port}",
            "--no-control-socket",
        ],
        env=wip_env["env"],
        log_path=log_path,
        request=request,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + START_S
    while True:
        try:
            if requests.get(url + "/", timeout=3).status_code == 200:
                break
        except requests.RequestException:
            pass
        if proc.poll() is not None or time.time() > deadline:
            pytest.fail("gunicorn did not start:\n" + _tail(log_path))
        time.sleep(0.3)
    wip_worker.wait_ready()
    return {"url": url, "log": log_path}


@pytest.fixture(scope="module")
def wip_chromium(chrome):
    """The session's one Chromium (conftest): Playwright's sync API allows one driver at a time."""
    return chrome


def _shot(tab, name: str) -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(OUTPUT / f"{name}.png"), full_page=True)
    webgl_missing = tab.evaluate("() => document.body.innerText.includes('WebGL is not supported')")
    assert not webgl_missing, f"{name}: a chart needs WebGL, which this browser lacks"


@pytest.fixture
def wip_tab(wip_chromium, wip_web, wip_worker, request):
    context = wip_chromium.new_context(viewport={"width": 1400, "height": 1800})
    tab = context.new_page()
    tab.set_default_timeout(STEP_MS)
    errors = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.errors = errors
    yield tab
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        try:
            _shot(tab, f"FAILED-{request.node.name}")
        except Exception as exc:  # noqa: BLE001 - evidence only
            print(f"no screenshot: {exc}")
        print("--- gunicorn log ---\n" + _tail(wip_web["log"]))
        print("--- celery log ---\n" + _tail(wip_worker.log))
    context.close()


def _wait_ici(tab, timeout: int) -> None:
    """Open the Feature section; until the ICI view shows curves (its legend names the
    largest integral)."""
    tab.click("#section-tab-feature")
    tab.wait_for_selector("#ici-graph .main-svg", timeout=timeout)
    tab.wait_for_function(
        "() => { const g = document.querySelector('#ici-graph .js-plotly-plot');"
        " return g && g._fullData && g._fullData.some(t => (t.name || '').startsWith('largest integral')); }",
        timeout=timeout,
    )


def test_background_callbacks_run_on_celery(wip_web, wip_worker, wip_env, wip_tab):
    tab = wip_tab
    t0 = time.time()
    tab.goto(wip_web["url"] + "/?ws=demo-x3")
    _wait_ici(tab, FIRST_VISIT_MS)
    print(f"ICI view after {time.time() - t0:.1f} s")  # shown when the test fails
    tab.fill("#subgroup-text", "X3 == 0")
    tab.click("#subgroup-apply")
    tab.wait_for_function("() => location.search.includes('subgroup=')")
    tab.click("#section-tab-subgroups")
    tab.wait_for_selector("#pfi-table th:has-text('subgroup')", timeout=STEP_MS)
    assert "subgroup (n=" in tab.inner_text("#pfi-table")
    tab.click("#section-tab-overview")
    tab.wait_for_function(  # the permutation PFI of the subgroup: a job on the worker too
        "() => { const g = document.querySelector('#pfi-graph .js-plotly-plot');"
        " return g && ((g.layout.title.subtitle || {}).text || '').includes('subgroup'); }",
        timeout=STEP_MS,
    )
    tab.wait_for_function("() => !document.querySelector('._dash-loading-callback')")
    print(f"subgroup views after {time.time() - t0:.1f} s")
    _shot(tab, "celery-demo")

    # The jobs ran on the Celery worker (the first visit's ICE/ICI passes, then the
    # subgroup's permutation PFI) ...
    log = wip_worker.text()
    received = re.findall(r"Task background_callback_\w+\[([^\]]+)\] received", log)
    succeeded = re.findall(r"Task background_callback_\w+\[([^\]]+)\] succeeded", log)
    assert len(received) >= 2, "the Celery worker did not receive both jobs:\n" + log[-4000:]
    assert succeeded and set(succeeded) <= set(received), "no job succeeded on the Celery worker:\n" + log[-4000:]
    assert " raised unexpected" not in log and "background job failed" not in log, log[-4000:]
    # each job was split into parts (ICE/ICI pass per feature, PFI per feature block) queued
    # for any worker; the job worked through them too, so a part may find itself done
    parts = re.findall(r"Task wip\.compute_part\[([^\]]+)\] received", log)
    done = re.findall(r"Task wip\.compute_part\[([^\]]+)\] succeeded", log)
    assert len(parts) >= 5 and set(done) <= set(parts) and done, "no job parts on the workers:\n" + log[-4000:]
    # ... and not in forked children of the web workers: DiskcacheManager's job store,
    # <cache>/jobs, was never created (CeleryManager keeps its handles in Redis).
    jobs = wip_env["cache"] / "jobs"
    assert not jobs.exists() or not any(jobs.iterdir()), (
        f"web workers used a diskcache job store: {list(jobs.iterdir())}"
    )
    assert "Traceback" not in wip_web["log"].read_text(errors="replace"), _tail(wip_web["log"])
    assert tab.errors == [], f"browser errors: {tab.errors}"
    # the worker, which shares no folder with the web server, fetched the demo from the
    # broker (it never trained it) and computed there; the page read the results from Redis
    worker_cache = wip_env["worker_cache"]
    assert (worker_cache / "workspaces" / "demo-x3.json").exists()
    assert not (worker_cache / "demos" / "demo-x3.lock").exists(), "the worker trained the demo itself"
    assert any((worker_cache / "models").iterdir()) and any((worker_cache / "data").iterdir())


def test_an_upload_loads_and_draws_through_the_broker_alone(wip_web, wip_env, wip_tab, tmp_path):
    """A skops model and its CSV uploaded to the web server are loaded and computed by the
    worker, which reads them from the broker (it has no folder in common with the web server)."""
    import numpy as np
    import pandas as pd
    import skops.io as sio
    from sklearn.ensemble import RandomForestRegressor

    tab = wip_tab
    rng = np.random.default_rng(3)
    data = pd.DataFrame(rng.normal(size=(120, 3)).round(3), columns=["a", "b", "c"])
    data["y"] = data.a * 2 - data.b + rng.normal(0, 0.1, 120).round(3)
    model = RandomForestRegressor(n_estimators=10, random_state=0).fit(data[["a", "b", "c"]], data.y)
    sio.dump(model, tmp_path / "forest.skops")
    data.to_csv(tmp_path / "rows.csv", index=False)
    tab.goto(wip_web["url"] + "/?ws=demo-x3")
    tab.wait_for_selector("#pfi-graph .main-svg", timeout=FIRST_VISIT_MS)
    tab.click("summary:has-text('Load your own')")
    for button, path in (("#model-upload", tmp_path / "forest.skops"), ("#data-upload", tmp_path / "rows.csv")):
        with tab.expect_file_chooser() as chooser:
            tab.click(button)
        chooser.value.set_files([str(path)])
    tab.wait_for_selector("#model-files-info:has-text('forest.skops')", timeout=STEP_MS)
    tab.wait_for_selector("#data-file-info:has-text('120 rows')", timeout=STEP_MS)
    tab.check("#data-role input[value='held-out']")
    tab.click("#load-button")
    tab.wait_for_function(
        "() => !location.search.includes('demo-x3') && location.search.includes('ws=')", timeout=STEP_MS
    )
    tab.click("#section-tab-overview")
    tab.wait_for_function(
        "() => { const g = document.querySelector('#pfi-graph .js-plotly-plot');"
        " return g && g._fullData && g._fullData.some(t => t.type === 'bar' && Array.from(t.y || []).includes('a')); }",
        timeout=FIRST_VISIT_MS,
    )
    bars = tab.evaluate(
        "() => { const t = document.querySelector('#pfi-graph .js-plotly-plot')._fullData.find(t => t.type === 'bar');"
        " const y = Array.from(t.y), x = Array.from(t.x); return Object.fromEntries(y.map((f, i) => [f, x[i]])); }"
    )
    assert set(bars) == {"a", "b", "c"} and bars["a"] > bars["b"] > bars["c"], bars  # y = 2a - b + noise
    _shot(tab, "celery-upload")
    ws_id = tab.evaluate("new URLSearchParams(location.search).get('ws')")
    worker_cache = wip_env["worker_cache"]
    assert (worker_cache / "workspaces" / f"{ws_id}.json").exists(), "the upload's workspace was not made on the worker"
    assert list((worker_cache / "uploads").iterdir()), "the worker never fetched the upload from the broker"
    assert tab.errors == [], f"browser errors: {tab.errors}"


def _wait_states(ids, ready, timeout: float = 60.0) -> dict:
    from celery.result import AsyncResult

    from app import celery_app

    deadline = time.time() + timeout
    while True:
        states = {i: AsyncResult(i, app=celery_app).state for i in ids}
        if all(ready(s) for s in states.values()) or time.time() > deadline:
            return states
        time.sleep(0.3)


def test_cancel_revokes_a_split_jobs_parts_on_the_workers(wip_env, wip_worker):
    """Parts queued by a split job on a real worker: Cancel revokes them (the two running are
    terminated, the two queued dropped), so almost none is computed; parts of a job that has
    already ended are skipped by the worker without a model load."""
    from compute.trees import walk
    from dashboard import jobs, planning
    from dashboard.callbacks.compute import cancel_parts, job_token, send_parts, sent_key
    from dashboard.config import Config
    from dashboard.server import create_app
    from dashboard.state import default_state, normalize

    # The walk compiled into numba's disk cache first (a fresh clone has none): a part that
    # compiles its kernels when Cancel comes is a test of numba's compile time, not of Cancel.
    assert walk.warm() is None
    wip_worker.wait_ready()
    config = Config(
        cache_dir=str(wip_env["cache"]),
        celery_broker=wip_env["env"]["WIP_CELERY_BROKER"],
        secret_key="celery-test",
        warm=False,
    )
    ctx = create_app(config)._wip_context
    ws = ctx.store.workspace("demo-cancer")

    def pfi_parts(subgroup):
        state = normalize(ctx, {**default_state(), "ws": ws.id, "subgroup": subgroup})[0]
        from dashboard.views import plan_state

        todo = [t for t in plan_state(ctx, ws, state)["tasks"] if t["kind"] == "pfi"]
        return jobs.split(ws, planning.missing(ctx.store, todo))[0]

    # 1. A job that ended before its parts reached a worker: every message returns 0 at once.
    parts = pfi_parts("`mean radius` > 12.5")
    ids = send_parts(ctx, ws, parts, "no-such-job")
    from celery.result import AsyncResult

    from app import celery_app

    assert [AsyncResult(i, app=celery_app).get(timeout=60) for i in ids] == [0] * len(ids)
    assert planning.missing(ctx.store, parts) == parts

    # 2. Cancel while the worker's two processes compute the first two messages and the other
    # two wait in the queue. Slow parts (PFI of one feature with 30,000 permutations, about 1.5 s
    # each with the exact tree walk, four per message) keep a message running long after it is
    # received (4,000 were a second each before the walk's PFI got faster, then too quick).
    from dashboard.store import result_key

    entry = ws.models[0]
    features = list(entry.features)[:16]
    parts = [
        planning.Task(
            "pfi_part",
            result_key("pfi_part", ws, entry, of="cancel-test", block=k),
            entry.name,
            {"condition": "", "excluded": [], "n_repeats": 30000, "n_obs": None, "features": [f], "streams": [k]},
        ).to_dict()
        for k, f in enumerate(features)
    ]
    request = {"state": {}, "request": "r", "nonce": "c0ffee0123456789"}
    token = job_token(request)
    with jobs.job_alive(ctx.store, token):
        ids = send_parts(ctx, ws, parts, token)
        ctx.store.put(sent_key(token), ids)
        assert len(ids) == 4
        deadline = time.time() + 60
        while sum(f"compute_part[{i}] received" in wip_worker.text() for i in ids) < 2 and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        assert cancel_parts(ctx, request) == ids
        states = _wait_states(ids, lambda s: s == "REVOKED", timeout=60)
    assert set(states.values()) == {"REVOKED"}, (states, _tail(wip_worker.log))
    time.sleep(1.0)
    done = [p for p in parts if p not in planning.missing(ctx.store, parts)]
    # at most the part each running message had finished before it was stopped
    assert len(done) <= 2, f"{len(done)} of the revoked parts were computed"
    log = wip_worker.text()
    terminated = [i for i in ids if f"Terminating {i}" in log]
    dropped = [i for i in ids if f"Discarding revoked task: wip.compute_part[{i}]" in log]
    assert len(terminated) == 2 and sorted(terminated + dropped) == sorted(ids), log[-3000:]


def test_a_result_altered_in_redis_is_refused_not_shown(wip_env, wip_worker):
    """As deployed: the Celery worker (cache folder B) computes a split job's parts and keeps
    them in Redis; one of them altered there (one bit of its bytes flipped) is refused by the
    web machine (cache folder A), which never computed them: read as absent and so planned
    again (computed anew, never shown), while the parts left alone read as the worker wrote
    them (its own folder's copies, compared value by value)."""
    import pickle

    from celery.result import AsyncResult
    from helpers.tamper import tamper

    from app import celery_app
    from dashboard import jobs, planning
    from dashboard.callbacks.compute import job_token, send_parts
    from dashboard.config import Config
    from dashboard.server import create_app
    from dashboard.state import default_state, normalize
    from dashboard.store import Store
    from dashboard.views import plan_state

    wip_worker.wait_ready()
    url = wip_env["env"]["WIP_CELERY_BROKER"]
    config = Config(cache_dir=str(wip_env["cache"]), celery_broker=url, secret_key="celery-test", warm=False)
    web = create_app(config)._wip_context
    ws = web.store.workspace("demo-cancer")
    state = normalize(web, {**default_state(), "ws": ws.id, "subgroup": "`mean radius` > 13.5"})[0]
    todo = [t for t in plan_state(web, ws, state)["tasks"] if t["kind"] == "pfi"]
    parts = [p for p in jobs.split(ws, planning.missing(web.store, todo))[0] if p["kind"] == "pfi_part"]
    assert len(parts) >= 4
    token = job_token({"nonce": "feedface01234567"})
    with jobs.job_alive(web.store, token):
        ids = send_parts(web, ws, parts, token)
        computed = sum(AsyncResult(i, app=celery_app).get(timeout=120) for i in ids)
    assert computed == len(parts), _tail(wip_worker.log)

    tamper(web.store.remote, "r:" + parts[0]["key"])  # one bit flipped in Redis

    assert web.store.get(parts[0]["key"]) is None  # refused: never unpickled, never shown
    assert planning.missing(web.store, parts, verify=True) == [parts[0]]  # so computed again
    worker_store = Store(wip_env["worker_cache"])  # B's own copies, read in place (no broker)
    for part in parts[1:]:
        got, kept = web.store.get(part["key"]), worker_store.get(part["key"])
        assert got is not None and pickle.dumps(got) == pickle.dumps(kept)


def _worker_cmd() -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "app:celery_app", "worker", "--concurrency", "2"] + [
        "--pool",
        "prefork",
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]


def test_a_job_whose_worker_is_killed_is_taken_up_by_another(wip_web, wip_worker, wip_env, wip_tab, wip_cluster_dir):
    """Two workers, each with its own cache folder; the one running the page's job is killed
    with SIGKILL (its pool and job processes with it) mid-job. Another worker takes the job up
    (after REQUEUE_S), the page draws the views and never says the job died. Runs last: it may
    kill the module's worker."""
    import psutil

    folder = wip_cluster_dir / "worker2-cache"
    folder.mkdir()
    log2 = wip_cluster_dir / "celery2.log"
    env2 = {**wip_env["worker_env"], "WIP_CACHE_DIR": str(folder)}
    with open(log2, "w") as out:
        proc2 = subprocess.Popen(_worker_cmd(), cwd=ROOT, env=env2, stdout=out, stderr=subprocess.STDOUT)
    second = _Worker(proc2, log2)
    try:
        second.wait_ready()
        workers = [wip_worker, second]
        seen = {id(w): set(re.findall(r"Task background_callback_\w+\[([^\]]+)\] received", w.text())) for w in workers}
        tab = wip_tab
        tab.goto(wip_web["url"] + "/?ws=demo-cancer")
        deadline = time.time() + FIRST_VISIT_MS / 1000
        victim, task = None, None
        while victim is None and time.time() < deadline:
            for w in workers:
                new = set(re.findall(r"Task background_callback_\w+\[([^\]]+)\] received", w.text())) - seen[id(w)]
                if new:
                    victim, task = w, sorted(new)[0]
            time.sleep(0.1)
        assert victim is not None, "no worker received the page's job"
        time.sleep(1.0)  # mid-job: the job's process holds its record's lock
        assert f"[{task}] succeeded" not in victim.text(), "the job ended before it could be killed"
        tree = [victim.proc.pid] + [p.pid for p in psutil.Process(victim.proc.pid).children(recursive=True)]
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        victim.proc.wait(timeout=10)
        killed = time.time()
        survivor = second if victim is wip_worker else wip_worker
        tab.click("#section-tab-overview")
        tab.wait_for_function(
            "() => { const g = document.querySelector('#pfi-graph .js-plotly-plot');"
            " return g && g._fullData && g._fullData.some(t => t.type === 'bar'); }",
            timeout=FIRST_VISIT_MS,
        )
        tab.wait_for_function("() => !document.querySelector('._dash-loading-callback')")
        print(f"views drawn {time.time() - killed:.1f} s after the kill")
        _shot(tab, "celery-worker-killed")
        assert f"[{task}] received" in survivor.text(), "the other worker never took the job up:\n" + _tail(
            survivor.log
        )
        assert "ended without its results" not in tab.inner_text("body")
    finally:
        _stop(proc2)
